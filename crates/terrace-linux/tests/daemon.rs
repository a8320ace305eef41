//! The daemon core on a temporary socket, in this process: malformed requests get an error reply
//! and a closed connection while the daemon answers on; binding a process or a cgroup fails with a
//! clear error on a host with one memory tier (the development machines) and succeeds on two (the
//! guest, which runs these tests too); stale sockets are replaced, live ones are not; shutdown removes the
//! socket. Managing a real process on two tiers is tested in the guest's cases (tests/vm).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use terrace_linux::config::Config;
use terrace_linux::control::{self, Reply, Request};
use terrace_linux::daemon::{Daemon, DaemonError, PolicyBuilder};
use terrace_model::{MachineInfo, Observations, Plan, Policy, Requirements};

/// A policy that asks for nothing and moves nothing.
struct Still;
impl Policy for Still {
    fn name(&self) -> &str {
        "still"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements { tick_ns: Some(100_000_000), ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

fn builder() -> PolicyBuilder {
    Box::new(|name: &str| match name {
        "still" => Ok(Box::new(Still) as Box<dyn Policy>),
        other => Err(format!("unknown policy '{other}'; known: still")),
    })
}

fn config(socket: &Path, metrics: bool) -> Config {
    let mut c = Config::default();
    c.daemon.socket = socket.to_path_buf();
    c.daemon.policy = "still".into();
    c.daemon.metrics = metrics.then(|| "127.0.0.1:0".to_string());
    c
}

/// A daemon serving in a thread until dropped.
struct Running {
    socket: PathBuf,
    metrics: Option<std::net::SocketAddr>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(socket: &Path) -> Running {
        let d = Daemon::start(config(socket, true), builder()).expect("daemon starts");
        let metrics = d.metrics_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || d.serve(&s));
        Running { socket: socket.to_path_buf(), metrics, stop, thread: Some(thread) }
    }
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
    /// Sends raw bytes; returns the reply and whether the daemon then closed the connection.
    fn raw(&self, bytes: &[u8]) -> (Reply, bool) {
        let s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = (&s).write_all(bytes); // the daemon may hang up before reading everything
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut r = BufReader::new(&s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let reply: Reply = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let mut rest = Vec::new();
        let closed = matches!(r.read_to_end(&mut rest), Ok(0));
        (reply, closed)
    }
    fn ask(&self, req: &Request) -> Reply {
        let line =
            control::call(&self.socket, format!("{}\n", req.to_line()).as_bytes(), Duration::from_secs(30))
                .unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn assert_error(reply: &Reply, want: &str) {
    assert!(!reply.ok, "expected an error about {want}: {reply:?}");
    let e = reply.error.as_deref().unwrap_or("");
    assert!(e.contains(want), "{e:?} does not mention {want:?}");
    assert!(!e.contains('\n'));
}

#[test]
fn malformed_requests_get_an_error_and_the_daemon_answers_on() {
    let dir = tempfile::tempdir().unwrap();
    let d = Running::start(&dir.path().join("t.sock"));
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666, "anyone may connect; peer credentials decide");

    let long = vec![b'x'; control::MAX_LINE + 100];
    let cases: Vec<(&[u8], &str)> = vec![
        (b"garbage\n", "not JSON"),
        (b"{\"op\":\"frob\"}\n", "frob"),
        (b"{\"op\":\"bind\"}\n", "pid"),
        (b"{\"op\":\"bind\",\"pid\":\"me\"}\n", "bad request"),
        (b"{\"op\":\"bind-cgroup\"}\n", "cgroup"),
        (b"{\"op\":\"unbind-cgroup\",\"pid\":3}\n", "pid"),
        (b"\xff\xfe\x00\n", "not JSON"),
        (b"{\"op\":\"list\"", "not JSON"), // no newline, then EOF
        (&long, "longer than"),
    ];
    for (bytes, want) in cases {
        let (reply, closed) = d.raw(bytes);
        assert_error(&reply, want);
        assert!(closed, "the daemon hangs up after a malformed request");
        let list = d.ask(&Request::List);
        assert!(list.ok, "{list:?}");
        assert_eq!(list.processes, Some(vec![]));
    }

    // Good requests share a connection; blank lines are skipped.
    let s = UnixStream::connect(&d.socket).unwrap();
    (&s).write_all(b"{\"op\":\"list\"}\n\n{\"op\":\"unbind\",\"pid\":1}\n").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let lines: Vec<String> = BufReader::new(&s).lines().map(Result::unwrap).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("{\"ok\":true"), "{}", lines[0]);
    assert_error(&serde_json::from_str(&lines[1]).unwrap(), "pid 1 is not managed");

    // A client that connects and hangs up at once costs nothing.
    drop(UnixStream::connect(&d.socket).unwrap());
    assert!(d.ask(&Request::List).ok);
}

#[test]
fn binding_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let d = Running::start(&dir.path().join("t.sock"));
    assert_error(&d.ask(&Request::Bind { pid: i32::MAX, policy: None }), &format!("no process {}", i32::MAX));
    assert_error(&d.ask(&Request::Bind { pid: -5, policy: None }), "no process -5");
    let me = std::process::id() as i32;
    assert_error(&d.ask(&Request::Bind { pid: me, policy: None }), "the Terrace daemon itself");
    // A process of our own (so allowed whoever we are).
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id() as i32;
    assert_error(&d.ask(&Request::Bind { pid, policy: Some("nope".into()) }), "unknown policy 'nope'");
    let r = d.ask(&Request::Bind { pid, policy: None });
    if terrace_linux::daemon::live_tiers(&Config::default()).is_err() {
        // One memory tier (the development machines): refused, saying why.
        assert!(!r.ok, "{r:?}");
        let e = r.error.unwrap();
        assert!(e.contains("single memory tier") || e.contains("NUMA topology"), "{e}");
    } else {
        // Two (the guest): managed until unbound.
        assert!(r.ok, "{r:?}");
        assert!(d.ask(&Request::Unbind { pid }).ok);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    if !nix::unistd::getuid().is_root() {
        // pid 1 belongs to root.
        assert_error(&d.ask(&Request::Bind { pid: 1, policy: None }), "permission denied: uid");
    }
    assert_error(&d.ask(&Request::Unbind { pid: me }), "not managed");
    let list = d.ask(&Request::List);
    assert_eq!(list.processes, Some(vec![]), "a refused bind leaves nothing behind");
}

/// A cgroup is refused in one line when it is not a cgroup v2 directory, not absolute, not the
/// caller's, or (on one tier) not placeable; on two tiers (the guest) a directory laid out like
/// cgroupfs is bound and unbound. Managing a cgroup's processes is tested in the unit tests
/// (daemon.rs) and in the guest (tests/vm/cases/32-daemon-binds-a-cgroup.sh).
#[test]
fn binding_a_cgroup_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let d = Running::start(&dir.path().join("t.sock"));
    let bind = |cgroup: &Path| Request::BindCgroup { cgroup: cgroup.to_path_buf(), policy: None };
    assert_error(&d.ask(&bind(&dir.path().join("missing"))), "is not a directory");
    assert_error(&d.ask(&bind(dir.path())), "has no cgroup.procs, so it is not a cgroup v2 directory");
    assert_error(&d.ask(&bind(Path::new("batch"))), "give the cgroup's absolute path");
    let cg = dir.path().join("batch");
    std::fs::create_dir(&cg).unwrap();
    std::fs::write(cg.join("cgroup.procs"), "").unwrap();
    assert_error(
        &d.ask(&Request::BindCgroup { cgroup: cg.clone(), policy: Some("nope".into()) }),
        "unknown policy 'nope'",
    );
    let r = d.ask(&bind(&cg));
    if terrace_linux::daemon::live_tiers(&Config::default()).is_err() {
        assert!(!r.ok, "{r:?}");
        let e = r.error.unwrap();
        assert!(e.contains("single memory tier") || e.contains("NUMA topology"), "{e}");
    } else {
        assert!(r.ok, "{r:?}");
        let listed = d.ask(&Request::List).processes.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!((listed[0].pid, listed[0].processes), (0, 0));
        assert!(d.ask(&Request::UnbindCgroup { cgroup: cg.clone() }).ok);
    }
    assert_error(&d.ask(&Request::UnbindCgroup { cgroup: cg.clone() }), "is not managed by this daemon");
    let root_cgroup = Path::new("/sys/fs/cgroup");
    if !nix::unistd::getuid().is_root() && root_cgroup.join("cgroup.procs").is_file() {
        assert_error(&d.ask(&bind(root_cgroup)), "permission denied: uid");
    }
    assert_eq!(d.ask(&Request::List).processes, Some(vec![]), "a refused bind leaves nothing behind");
}

#[test]
fn metrics_answer_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let d = Running::start(&dir.path().join("t.sock"));
    let addr = d.metrics.expect("metrics configured");
    assert!(addr.ip().is_loopback());
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("text/plain; version=0.0.4"), "{text}");
    assert!(text.contains("\nterrace_managed_processes 0\n"), "{text}");
}

#[test]
fn stale_sockets_are_replaced_live_ones_are_not_and_shutdown_removes_ours() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sock");
    // A socket file nobody listens on any more (a daemon that was killed).
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let mut d = Running::start(&path);
    assert!(d.ask(&Request::List).ok);
    // A second daemon on the same socket refuses and leaves the first alone.
    match Daemon::start(config(&path, false), builder()) {
        Err(e @ DaemonError::AlreadyRunning(_)) => assert!(e.to_string().contains("already answers")),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("two daemons on one socket"),
    }
    assert!(d.ask(&Request::List).ok);
    d.stop();
    assert!(!path.exists(), "shutdown removes the socket");

    // Not a socket: refuse to delete someone's file.
    std::fs::write(&path, "precious").unwrap();
    assert!(matches!(Daemon::start(config(&path, false), builder()), Err(DaemonError::NotASocket(_))));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");

    // An unknown default policy is refused at start.
    let mut c = config(&dir.path().join("u.sock"), false);
    c.daemon.policy = "nope".into();
    assert!(matches!(Daemon::start(c, builder()), Err(DaemonError::Policy(_))));
}

#[test]
fn clients_without_a_daemon_are_told_how_to_start_one() {
    let dir = tempfile::tempdir().unwrap();
    let e = control::call(&dir.path().join("none.sock"), b"{\"op\":\"list\"}\n", Duration::from_secs(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no Terrace daemon is listening") && e.contains("terrace daemon"), "{e}");
}
