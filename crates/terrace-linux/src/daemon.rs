//! The daemon: manages several running processes, each handed over with a `bind` request on its
//! Unix socket ([`crate::control`]), or every process of a cgroup as they come and go (a
//! `bind-cgroup` request: one group, one policy, one fast-tier share), each binding driven by its
//! own policy in its own thread, and reports on them at a Prometheus endpoint
//! ([`crate::metrics`]).
//!
//! It never takes down the programs it manages: it only ever moves their pages (move_pages moves
//! each page whole or not at all), nothing in them depends on it, and a program that exits at any
//! moment, even in the middle of a scan, just ends its thread (or leaves its cgroup's group; a
//! cgroup that is removed ends its thread). Unbinding stops the thread within
//! [`STOP_STEP`] and leaves every page where it is. A malformed request gets an error reply and
//! the connection is closed; the daemon itself answers on.
//!
//! The daemon knows policies only by name: whoever starts it passes a [`PolicyBuilder`] (the
//! `terrace` command passes the policy registry), so the live machine stays free of policies.

use crate::config::{Config, TrackerConfig};
use crate::control::{self, LineRead, ProcessEntry, Reply, Request};
use crate::machine::{live_requirements, Attach, LiveMachine, LiveStats, Target};
use crate::metrics::{self, ProcessMetrics};
use crate::process_group;
use crate::topology::{ClassifiedBy, LiveTier, Topology, TopologyError};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufReader, Write};
use std::net::TcpListener;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use terrace_model::{
    Applied, Machine, MachineError, MachineInfo, Observations, Plan, Policy, Progress, Requirements,
};

/// Builds a policy by name; the error is one line (e.g. the known names).
pub type PolicyBuilder = Box<dyn Fn(&str) -> Result<Box<dyn Policy>, String> + Send + Sync>;

/// Longest a managed thread goes without checking whether it should stop.
pub const STOP_STEP: Duration = Duration::from_millis(50);
/// Longest `bind` waits for the process's first scan before answering.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest `unbind` and shutdown wait for managing threads to finish.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection that says nothing for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once; more are turned away with an error reply.
const MAX_CONNECTIONS: usize = 64;

/// Why the host's tiers cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TiersError {
    #[error("cannot read this host's NUMA topology")]
    Topology(#[source] TopologyError),
    #[error(
        "this host has a single memory tier, so there is nothing to place; `terrace doctor` explains, \
         and `terrace sim` runs any policy on a simulated machine"
    )]
    SingleTier,
    /// The config's `[tiers]` names nodes the host lacks; the message lists the ones it has.
    #[error("{0}")]
    UnknownNodes(String),
}

/// The host's tiers, fastest first, as the config and the topology say.
pub fn live_tiers(config: &Config) -> Result<Vec<LiveTier>, TiersError> {
    let topo = Topology::read(Path::new("/sys"), Path::new("/proc")).map_err(TiersError::Topology)?;
    tiers_of(&topo, config)
}

/// [`live_tiers`] on a topology already read.
pub fn tiers_of(topo: &Topology, config: &Config) -> Result<Vec<LiveTier>, TiersError> {
    // Before classifying: a node the host lacks would otherwise just be left out.
    config.check_nodes(topo).map_err(TiersError::UnknownNodes)?;
    let class = topo.classify(&config.tiers);
    let mut tiers = topo.model_tiers(&class);
    if class.by == ClassifiedBy::SingleNode || tiers.len() < 2 {
        return Err(TiersError::SingleTier);
    }
    if let Some(mib) = config.tiers.fast_limit_mib {
        let pages = mib << (20 - 12);
        let cap = &mut tiers[0].tier.capacity_pages;
        *cap = Some(cap.map_or(pages, |c| c.min(pages)));
    }
    Ok(tiers)
}

/// The tiers of a dry run: the host's own, or, on a host with a single memory node, that node as
/// the fast tier and a stand-in slow tier on the same node, so that every policy tracks and
/// decides as it would on two tiers (its plans are logged; a dry run never moves anything). The
/// flag says the stand-in was made. Never used for a run that moves pages: on one node that
/// keeps its refusal ([`TiersError::SingleTier`]).
pub fn dry_run_tiers(config: &Config) -> Result<(Vec<LiveTier>, bool), TiersError> {
    let topo = Topology::read(Path::new("/sys"), Path::new("/proc")).map_err(TiersError::Topology)?;
    dry_run_tiers_of(&topo, config)
}

/// [`dry_run_tiers`] on a topology already read.
pub fn dry_run_tiers_of(topo: &Topology, config: &Config) -> Result<(Vec<LiveTier>, bool), TiersError> {
    match tiers_of(topo, config) {
        Err(TiersError::SingleTier) => {}
        other => return other.map(|t| (t, false)),
    }
    let class = topo.classify(&config.tiers);
    let mut tiers = topo.model_tiers(&class);
    tiers.truncate(1);
    let Some(fast) = tiers.first().cloned() else {
        return Err(TiersError::SingleTier);
    };
    if let Some(mib) = config.tiers.fast_limit_mib {
        let pages = mib << (20 - 12);
        let cap = &mut tiers[0].tier.capacity_pages;
        *cap = Some(cap.map_or(pages, |c| c.min(pages)));
    }
    let mut slow = fast;
    slow.tier.id = terrace_model::TierId(1);
    slow.tier.name =
        format!("slow (stand-in on node {}: single-node dry run)", crate::topology::format_list(&slow.nodes));
    slow.tier.kind = terrace_model::TierKind::RemoteDram;
    tiers.push(slow);
    Ok((tiers, true))
}

/// Why the daemon could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("the default policy in the config is unusable: {0}")]
    Policy(String),
    /// The config names nodes this host does not have ([`TiersError::UnknownNodes`]; the other
    /// tier errors only warn at start, as tiers are read again at every bind).
    #[error(transparent)]
    Tiers(TiersError),
    #[error("a Terrace daemon already answers on {}; stop it first, or set another [daemon] socket in the config", .0.display())]
    AlreadyRunning(PathBuf),
    #[error("{} exists and is not a socket; remove it or set another [daemon] socket in the config", .0.display())]
    NotASocket(PathBuf),
    #[error("cannot listen on {}", .path.display())]
    Socket {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot serve metrics on {addr}")]
    Metrics {
        addr: String,
        #[source]
        source: io::Error,
    },
}

/// An error and its sources in one line, `a: b: c`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    control::one_line(&text)
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// Makes SIGTERM and SIGINT set the returned flag (for [`Daemon::serve`]) and ignores SIGPIPE, so
/// a client that hangs up mid-reply costs an error, not the daemon.
pub fn install_signal_handlers() -> Result<&'static AtomicBool, nix::Error> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let stop = SigAction::new(SigHandler::Handler(on_signal), SaFlags::empty(), SigSet::empty());
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        sigaction(Signal::SIGTERM, &stop)?;
        sigaction(Signal::SIGINT, &stop)?;
        sigaction(Signal::SIGPIPE, &ignore)?;
    }
    Ok(&SIGNALLED)
}

/// How a managing thread ended.
enum Ending {
    /// Unbound, or the daemon is stopping.
    Stopped,
    /// The process exited (or the cgroup was removed).
    Exited,
    /// It never got going (the bind was refused).
    Refused,
}

/// What was bound, the key of a binding: a process, or a cgroup (its directory, canonical).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Bound {
    Pid(i32),
    Cgroup(PathBuf),
}

impl Bound {
    /// The process bound; 0 for a cgroup (as `list` and the metrics report it).
    fn pid(&self) -> i32 {
        match self {
            Bound::Pid(p) => *p,
            Bound::Cgroup(_) => 0,
        }
    }
    fn cgroup(&self) -> Option<&Path> {
        match self {
            Bound::Pid(_) => None,
            Bound::Cgroup(dir) => Some(dir),
        }
    }
}

/// `pid N` or `cgroup DIR`, for log lines and replies.
impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Pid(p) => write!(f, "pid {p}"),
            Bound::Cgroup(dir) => write!(f, "cgroup {}", dir.display()),
        }
    }
}

/// One binding, a process or a cgroup, as the daemon keeps it.
struct Managed {
    id: u64,
    /// The process's real uid when it was bound; of a cgroup, its directory's owner.
    uid: u32,
    policy: String,
    dry_run: bool,
    since: Instant,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<LiveStats>>,
    thread: Option<JoinHandle<()>>,
}

/// What every thread of the daemon shares.
struct Shared {
    config: Config,
    build: PolicyBuilder,
    proc_root: PathBuf,
    /// The host's tiers as a bind reads them ([`live_tiers`]).
    tiers: fn(&Config) -> Result<Vec<LiveTier>, TiersError>,
    managed: Mutex<HashMap<Bound, Managed>>,
    next_id: AtomicU64,
    connections: AtomicUsize,
    own_pid: i32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A bound daemon: its socket and metrics endpoint are open; [`Daemon::serve`] answers on them.
pub struct Daemon {
    shared: Arc<Shared>,
    listener: UnixListener,
    socket: PathBuf,
    socket_ino: u64,
    metrics: Option<TcpListener>,
}

impl Daemon {
    /// Opens the control socket (mode 0666: who may do what is decided by peer credentials) and
    /// the metrics endpoint of `config`. A socket file left by a daemon that is gone is replaced;
    /// one that a daemon still answers on is not.
    pub fn start(config: Config, build: PolicyBuilder) -> Result<Daemon, DaemonError> {
        build(&config.daemon.policy).map_err(DaemonError::Policy)?;
        // Read before anything is opened: a config naming nodes the host lacks is refused at
        // once; a host with one tier, or none readable, only warns (tiers are read again at
        // every bind, and memory can come online later).
        let tiers = live_tiers(&config);
        if let Err(e @ TiersError::UnknownNodes(_)) = tiers {
            return Err(DaemonError::Tiers(e));
        }
        let socket = config.daemon.socket.clone();
        let listener = listen(&socket)?;
        // A daemon killed with SIGKILL leaves its kdamond watching its last program until that
        // program exits: stop it now, before anything is bound.
        match crate::trackers::damon::stop_leftover() {
            Ok(Some(what)) => tracing::warn!("DAMON: {what}"),
            Ok(None) => {}
            Err(e) => tracing::warn!("DAMON: cannot stop a kdamond left behind: {e}"),
        }
        let socket_ino = std::fs::metadata(&socket).map(|m| m.ino()).unwrap_or(0);
        let metrics = match &config.daemon.metrics {
            Some(addr) => match TcpListener::bind(addr.as_str()) {
                Ok(m) => Some(m),
                Err(source) => {
                    let _ = std::fs::remove_file(&socket);
                    return Err(DaemonError::Metrics { addr: addr.clone(), source });
                }
            },
            None => None,
        };
        match tiers {
            Ok(tiers) => {
                let t: Vec<String> = tiers
                    .iter()
                    .enumerate()
                    .map(|(i, t)| format!("tier {i} = nodes {}", crate::topology::format_list(&t.nodes)))
                    .collect();
                tracing::info!("tiers: {}", t.join(", "));
            }
            Err(e) => tracing::warn!("{}; every bind will fail until that changes", error_chain(&e)),
        }
        let default_socket =
            if socket == Path::new(crate::config::DEFAULT_SOCKET) { " (the default socket)" } else { "" };
        tracing::info!(
            "listening on {}{default_socket}{}; default policy {}{}",
            socket.display(),
            metrics
                .as_ref()
                .and_then(|m| m.local_addr().ok())
                .map_or(String::new(), |a| format!(", metrics at http://{a}/metrics")),
            config.daemon.policy,
            if config.daemon.dry_run { " (dry run: nothing moves)" } else { "" }
        );
        let shared = Arc::new(Shared {
            config,
            build,
            proc_root: PathBuf::from("/proc"),
            tiers: live_tiers,
            managed: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            connections: AtomicUsize::new(0),
            own_pid: std::process::id() as i32,
        });
        Ok(Daemon { shared, listener, socket, socket_ino, metrics })
    }

    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Where the metrics endpoint listens (the real port when the config said port 0).
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.local_addr().ok())
    }

    /// Answers requests until `shutdown` is set (checked at least every 200 ms); then stops
    /// managing every process (their pages stay where they are) and removes the socket.
    pub fn serve(self, shutdown: &AtomicBool) {
        use nix::poll::{poll, PollFd, PollFlags};
        let Daemon { shared, listener, socket, socket_ino, metrics } = self;
        let metrics_stop = Arc::new(AtomicBool::new(false));
        let metrics_thread = metrics.map(|m| {
            let (shared, stop) = (Arc::clone(&shared), Arc::clone(&metrics_stop));
            std::thread::Builder::new()
                .name("terrace-metrics".into())
                .spawn(move || {
                    let body = || metrics::render(&shared.snapshot());
                    metrics::serve(m, &body, &stop, &metrics::Limits::default())
                })
                .expect("spawn the metrics thread")
        });
        while !shutdown.load(Ordering::SeqCst) {
            let ready = {
                let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                poll(&mut fds, 200u16).unwrap_or(0) > 0
            };
            if !ready {
                continue;
            }
            match listener.accept() {
                Ok((stream, _)) => Shared::connection(&shared, stream),
                Err(e) => {
                    tracing::warn!("accept on {} failed: {e}", socket.display());
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        let bound = lock(&shared.managed).len();
        tracing::info!(
            "stopping: releasing {bound} binding{} (the pages stay where they are)",
            if bound == 1 { "" } else { "s" }
        );
        let threads: Vec<JoinHandle<()>> = {
            let mut managed = lock(&shared.managed);
            managed
                .drain()
                .filter_map(|(_, mut m)| {
                    m.stop.store(true, Ordering::SeqCst);
                    m.thread.take()
                })
                .collect()
        };
        wait_for(threads, STOP_TIMEOUT);
        metrics_stop.store(true, Ordering::SeqCst);
        if let Some(t) = metrics_thread {
            let _ = t.join();
        }
        // Remove the socket only if it is still ours (not replaced by another daemon).
        if std::fs::metadata(&socket).map(|m| m.ino()).ok() == Some(socket_ino) {
            let _ = std::fs::remove_file(&socket);
        }
        tracing::info!("stopped");
    }
}

/// Binds the control socket at `path`, replacing a stale one.
fn listen(path: &Path) -> Result<UnixListener, DaemonError> {
    let sock_err = |source| DaemonError::Socket { path: path.to_path_buf(), source };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(DaemonError::NotASocket(path.to_path_buf()));
        }
        match UnixStream::connect(path) {
            Ok(_) => return Err(DaemonError::AlreadyRunning(path.to_path_buf())),
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                tracing::info!("removing the stale socket {} (no daemon answers on it)", path.display());
                std::fs::remove_file(path).map_err(sock_err)?;
            }
            Err(e) => return Err(sock_err(e)),
        }
    }
    let listener = UnixListener::bind(path).map_err(sock_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(sock_err)?;
    Ok(listener)
}

/// Joins `threads`, giving up on those still running after `limit`.
fn wait_for(threads: Vec<JoinHandle<()>>, limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut pending = threads;
    while !pending.is_empty() && Instant::now() < deadline {
        let (done, rest): (Vec<_>, Vec<_>) = pending.into_iter().partition(|t| t.is_finished());
        for t in done {
            let _ = t.join();
        }
        pending = rest;
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if !pending.is_empty() {
        tracing::warn!("{} managing thread(s) did not stop within {limit:?}", pending.len());
    }
}

impl Shared {
    /// Serves one connection in its own thread.
    fn connection(shared: &Arc<Shared>, stream: UnixStream) {
        if shared.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.connections.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = writeln!(
                &stream,
                "{}",
                Reply::error("the daemon is busy (too many connections); retry").to_line()
            );
            return;
        }
        let shared2 = Arc::clone(shared);
        let spawned = std::thread::Builder::new().name("terrace-conn".into()).spawn(move || {
            shared2.converse(stream);
            shared2.connections.fetch_sub(1, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            shared.connections.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("cannot start a connection thread: {e}");
        }
    }

    /// Reads requests line by line and answers each; a malformed one ends the conversation.
    fn converse(self: &Arc<Self>, stream: UnixStream) {
        let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
        let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
        let send = |r: &Reply| writeln!(&stream, "{}", r.to_line()).and_then(|_| (&stream).flush());
        let caller = match control::peer_uid(&stream) {
            Ok(uid) => uid,
            Err(e) => {
                let _ = send(&Reply::error(format!("cannot read the caller's credentials: {e}")));
                return;
            }
        };
        let mut reader = BufReader::new(&stream);
        let mut line = Vec::new();
        loop {
            match control::read_line(&mut reader, &mut line) {
                Ok(LineRead::Line) if line.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(LineRead::Line) => match Request::parse(&line) {
                    Ok(req) => {
                        if send(&self.handle(req, caller)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::warn!("malformed request from uid {caller}: {e}");
                        let _ = send(&Reply::error(e));
                        return;
                    }
                },
                Ok(LineRead::TooLong) => {
                    tracing::warn!("request longer than {} bytes from uid {caller}", control::MAX_LINE);
                    let _ = send(&Reply::error(format!(
                        "request longer than {} bytes; one JSON object per line",
                        control::MAX_LINE
                    )));
                    return;
                }
                Ok(LineRead::Eof) => return,
                Err(e) => {
                    if e.kind() == io::ErrorKind::InvalidData {
                        let _ = send(&Reply::error(format!("unreadable request: {e}")));
                    }
                    return;
                }
            }
        }
    }

    /// Answers one well-formed request from `caller` (a uid).
    fn handle(self: &Arc<Self>, req: Request, caller: u32) -> Reply {
        let result = match req {
            Request::Bind { pid, policy } => self.bind_pid(pid, policy, caller),
            Request::Unbind { pid } => self.unbind(Bound::Pid(pid), caller),
            Request::BindCgroup { cgroup, policy } => self.bind_cgroup(cgroup, policy, caller),
            // As it was bound: canonical (a cgroup removed since is not found, and ends by itself).
            Request::UnbindCgroup { cgroup } => {
                self.unbind(Bound::Cgroup(std::fs::canonicalize(&cgroup).unwrap_or(cgroup)), caller)
            }
            Request::List => {
                let processes = self.list();
                let cgroups = processes.iter().filter(|p| p.cgroup.is_some()).count();
                let pids = processes.len() - cgroups;
                let mut message = format!("managing {pids} process{}", if pids == 1 { "" } else { "es" });
                if cgroups > 0 {
                    message
                        .push_str(&format!(" and {cgroups} cgroup{}", if cgroups == 1 { "" } else { "s" }));
                }
                Ok(Reply { processes: Some(processes), ..Reply::ok(message) })
            }
        };
        result.unwrap_or_else(Reply::error)
    }

    /// The bindings in order: processes by pid, then cgroups by path.
    fn bindings(&self) -> Vec<(Bound, ProcessEntry, ProcessMetrics)> {
        let managed = lock(&self.managed);
        let mut out: Vec<(Bound, ProcessEntry, ProcessMetrics)> = managed
            .iter()
            .map(|(key, m)| {
                let s = lock(&m.stats);
                let entry = ProcessEntry {
                    pid: key.pid(),
                    cgroup: key.cgroup().map(Path::to_path_buf),
                    processes: s.processes,
                    uid: m.uid,
                    policy: m.policy.clone(),
                    seconds: m.since.elapsed().as_secs_f64(),
                    pages_per_tier: s.pages_per_tier.clone(),
                    pages_moved: s.pages_moved,
                    moves_failed: s.moves_failed,
                    dry_run: m.dry_run,
                };
                let metrics = ProcessMetrics {
                    pid: key.pid(),
                    cgroup: key.cgroup().map(|d| d.display().to_string()),
                    policy: m.policy.clone(),
                    stats: s.clone(),
                };
                (key.clone(), entry, metrics)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn list(&self) -> Vec<ProcessEntry> {
        self.bindings().into_iter().map(|(_, entry, _)| entry).collect()
    }

    fn snapshot(&self) -> Vec<ProcessMetrics> {
        self.bindings().into_iter().map(|(_, _, metrics)| metrics).collect()
    }

    fn bind_pid(self: &Arc<Self>, pid: i32, policy: Option<String>, caller: u32) -> Result<Reply, String> {
        let owner = control::owner_uid(&self.proc_root, pid)?;
        control::authorize(caller, pid, owner)?;
        if pid == self.own_pid {
            return Err(format!("pid {pid} is the Terrace daemon itself"));
        }
        self.bind(Bound::Pid(pid), owner, None, policy, caller)
    }

    /// Binds the cgroup `dir`: root may bind any, anyone else only one whose directory they own
    /// (a delegated cgroup), and then only their own processes in it are managed.
    fn bind_cgroup(
        self: &Arc<Self>,
        dir: PathBuf,
        policy: Option<String>,
        caller: u32,
    ) -> Result<Reply, String> {
        if !dir.is_absolute() {
            return Err(format!(
                "cgroup {}: give the cgroup's absolute path, such as /sys/fs/cgroup/NAME",
                dir.display()
            ));
        }
        process_group::check_cgroup(&dir)?;
        let dir =
            std::fs::canonicalize(&dir).map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
        let owner = std::fs::metadata(&dir)
            .map_err(|e| format!("cannot read the owner of {}: {e}", dir.display()))?
            .uid();
        control::authorize_cgroup(caller, &dir, owner)?;
        let only = (caller != 0).then_some(caller);
        self.bind(Bound::Cgroup(dir), owner, only, policy, caller)
    }

    /// Starts managing `key` (owned by `owner`; of a cgroup, only the processes of uid `only` if
    /// given) with `policy` for `caller`, and answers after the first scan.
    fn bind(
        self: &Arc<Self>,
        key: Bound,
        owner: u32,
        only: Option<u32>,
        policy: Option<String>,
        caller: u32,
    ) -> Result<Reply, String> {
        let spec = policy.unwrap_or_else(|| self.config.daemon.policy.clone());
        let mut policy = (self.build)(&spec)?;
        // From here on the policy goes by its own name, which shows its parameters where they
        // differ from its defaults (`hpwp:hot_threshold=8`, from the spec or the config).
        let name = policy.name().to_string();
        let tiers = (self.tiers)(&self.config).map_err(|e| error_chain(&e))?;
        // A cgroup's processes run already, as a bound process does: nothing can be prepared
        // inside them before they start (a userfaultfd), so the same policies are refused.
        let req = live_requirements(policy.as_ref(), &tiers, Attach::Running, self.config.trackers.sampling)
            .map_err(|e| format!("policy {name} cannot run here: {e}"))?;
        if let Some(note) =
            crate::kernel_tiering::fast_limit_note(req.memory_mode, self.config.tiers.fast_limit_mib)
        {
            if !self.config.daemon.dry_run {
                tracing::warn!("{key}: {note}");
            }
        }
        let watch = match &key {
            Bound::Pid(pid) => Watch::Process {
                pid: *pid,
                identity: identity(&self.proc_root, *pid).ok_or_else(|| format!("no process {pid}"))?,
                proc_root: self.proc_root.clone(),
            },
            Bound::Cgroup(dir) => Watch::Cgroup { dir: dir.clone(), owner: only },
        };

        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(LiveStats::default()));
        let dry_run = self.config.daemon.dry_run;
        let trackers = self.config.trackers.clone();
        {
            let mut managed = lock(&self.managed);
            if let Some(m) = managed.get(&key) {
                return Err(format!("{key} is already managed (policy {}); unbind it first", m.policy));
            }
            // A process is managed once: two policies would both move its pages.
            match &key {
                Bound::Pid(pid) => {
                    let holder = managed.iter().find_map(|(k, m)| {
                        k.cgroup().filter(|d| process_group::cgroup_holds(d, *pid)).map(|d| (d, m))
                    });
                    if let Some((dir, m)) = holder {
                        return Err(format!(
                            "pid {pid} is in cgroup {}, which is managed already (policy {}); a process is managed \
                             once: unbind that cgroup first, or move the process out of it",
                            dir.display(),
                            m.policy
                        ));
                    }
                }
                Bound::Cgroup(dir) => {
                    let alone = managed.iter().find_map(|(k, m)| match k {
                        Bound::Pid(p) if process_group::cgroup_holds(dir, *p) => Some((*p, m)),
                        _ => None,
                    });
                    if let Some((pid, m)) = alone {
                        return Err(format!(
                            "{key} holds pid {pid}, which is managed already on its own (policy {}); a process is \
                             managed once: unbind it first (`terrace unbind {pid}`)",
                            m.policy
                        ));
                    }
                }
            }
            // Nested cgroups share processes, which two policies would then both move.
            if let Bound::Cgroup(dir) = &key {
                let overlap = managed
                    .keys()
                    .filter_map(Bound::cgroup)
                    .find(|d| d.starts_with(dir) || dir.starts_with(d));
                if let Some(other) = overlap {
                    return Err(format!(
                        "{key} overlaps cgroup {}, which is managed already (one is inside the other); unbind \
                         that first",
                        other.display()
                    ));
                }
            }
            managed.insert(
                key.clone(),
                Managed {
                    id,
                    uid: owner,
                    policy: name.clone(),
                    dry_run,
                    since: Instant::now(),
                    stop: Arc::clone(&stop),
                    stats: Arc::clone(&stats),
                    thread: None,
                },
            );
        }
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let me = Arc::clone(self);
        let thread_name = name.clone();
        let stop_on_timeout = Arc::clone(&stop);
        let thread_key = key.clone();
        let thread_stats = Arc::clone(&stats);
        let label = match &key {
            Bound::Pid(pid) => format!("terrace-pid-{pid}"),
            Bound::Cgroup(_) => "terrace-cgroup".to_string(),
        };
        let spawned = std::thread::Builder::new().name(label).spawn(move || {
            let ending =
                manage(watch, tiers, dry_run, trackers, policy.as_mut(), stop, thread_stats, ready_tx);
            me.finished(&thread_key, id, &thread_name, ending);
        });
        let thread = match spawned {
            Ok(t) => t,
            Err(e) => {
                self.forget(&key, id);
                return Err(format!("cannot start a thread for {key}: {e}"));
            }
        };
        match ready_rx.recv_timeout(PREPARE_TIMEOUT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                // Whenever the thread gets going, it stops at once.
                stop_on_timeout.store(true, Ordering::SeqCst);
                self.forget(&key, id);
                return Err(format!(
                    "{key}: the first scan did not finish within {} s; not managing it",
                    PREPARE_TIMEOUT.as_secs()
                ));
            }
        }
        if let Some(m) = lock(&self.managed).get_mut(&key).filter(|m| m.id == id) {
            m.thread = Some(thread);
        }
        let what = if dry_run { "watching (dry run)" } else { "managing" };
        let (mut told, mut logged) = (String::new(), String::new());
        if let Bound::Cgroup(_) = &key {
            let n = lock(&stats).processes;
            let whose = only.map_or(String::new(), |uid| format!(" of uid {uid}"));
            told = format!(
                " ({n} process{}{whose} now; newcomers join at each scan)",
                if n == 1 { "" } else { "es" }
            );
            logged = format!(", {n} process{}{whose}", if n == 1 { "" } else { "es" });
        }
        tracing::info!("{what} {key} (uid {owner}) with policy {name}, bound by uid {caller}{logged}");
        Ok(Reply {
            pid: matches!(key, Bound::Pid(_)).then(|| key.pid()),
            cgroup: key.cgroup().map(Path::to_path_buf),
            policy: Some(name.clone()),
            ..Reply::ok(format!("{what} {key} with policy {name}{told}"))
        })
    }

    fn unbind(&self, key: Bound, caller: u32) -> Result<Reply, String> {
        let m = {
            let mut managed = lock(&self.managed);
            let Some(m) = managed.get(&key) else {
                return Err(format!("{key} is not managed by this daemon"));
            };
            match &key {
                Bound::Pid(pid) => control::authorize(caller, *pid, m.uid)?,
                Bound::Cgroup(dir) => control::authorize_cgroup(caller, dir, m.uid)?,
            }
            if m.thread.is_none() {
                return Err(format!("{key} is still being bound; retry"));
            }
            managed.remove(&key).expect("present")
        };
        m.stop.store(true, Ordering::SeqCst);
        let mut thread = m.thread;
        let deadline = Instant::now() + STOP_TIMEOUT;
        while thread.as_ref().is_some_and(|t| !t.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if thread.as_ref().is_some_and(|t| t.is_finished()) {
            let _ = thread.take().map(|t| t.join());
        }
        let s = lock(&m.stats).clone();
        let whose = match &key {
            Bound::Pid(_) => "its pages stay",
            Bound::Cgroup(_) => "its processes' pages stay",
        };
        tracing::info!(
            "unbound {key} at the request of uid {caller}: {} pages moved, {} not moved; {whose} where they are",
            s.pages_moved,
            s.moves_failed
        );
        Ok(Reply {
            pid: matches!(key, Bound::Pid(_)).then(|| key.pid()),
            cgroup: key.cgroup().map(Path::to_path_buf),
            policy: Some(m.policy),
            ..Reply::ok(format!(
                "stopped managing {key} ({} pages moved); {whose} where they are",
                s.pages_moved
            ))
        })
    }

    /// Removes `key`'s entry if it is still the one with `id`.
    fn forget(&self, key: &Bound, id: u64) -> Option<Managed> {
        let mut managed = lock(&self.managed);
        if managed.get(key).is_some_and(|m| m.id == id) {
            managed.remove(key)
        } else {
            None
        }
    }

    /// Called by a managing thread as it ends.
    fn finished(&self, key: &Bound, id: u64, policy: &str, ending: Result<Ending, String>) {
        let entry = self.forget(key, id);
        let stats = entry.map(|m| lock(&m.stats).clone()).unwrap_or_default();
        let gone = match key {
            Bound::Pid(_) => "exited",
            Bound::Cgroup(_) => "was removed",
        };
        match ending {
            Ok(Ending::Exited) => tracing::info!(
                "{key} {gone}; stopped managing it ({} pages moved, {} not moved, tracking {:.2} s, \
                 migration {:.2} s)",
                stats.pages_moved,
                stats.moves_failed,
                stats.tracking_seconds,
                stats.migration_seconds
            ),
            Ok(Ending::Stopped) | Ok(Ending::Refused) => {}
            Err(panic) => tracing::error!(
                "policy {policy} failed while managing {key} ({panic}); stopped managing it, {} on",
                if matches!(key, Bound::Pid(_)) { "the program runs" } else { "its processes run" }
            ),
        }
    }
}

/// What identifies a process beyond its pid: its start time (field 22 of /proc/PID/stat), so a
/// reused pid is not mistaken for the process that was bound.
fn identity(proc_root: &Path, pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    let (state, start) = parse_stat(&stat)?;
    (!matches!(state, 'Z' | 'X')).then_some(start)
}

/// State and start time from the text of /proc/PID/stat (the command name may hold spaces and
/// parentheses, so fields are counted after the last ')').
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Fields after the state are 4.. of proc(5); starttime is 22, the 19th after the state.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// What a managing thread watches to know that its binding is still there.
enum Watch {
    /// The process bound, while it is the one that was (its start time is unchanged: a reused
    /// pid is another process) and not a zombie.
    Process { pid: i32, identity: u64, proc_root: PathBuf },
    /// The cgroup bound, while its directory is there; with `owner`, only that uid's processes
    /// in it are managed.
    Cgroup { dir: PathBuf, owner: Option<u32> },
}

impl Watch {
    fn still_there(&self) -> bool {
        match self {
            Watch::Process { pid, identity: id, proc_root } => identity(proc_root, *pid) == Some(*id),
            Watch::Cgroup { dir, .. } => dir.join("cgroup.procs").exists(),
        }
    }
    fn target(&self) -> Target {
        match self {
            Watch::Process { pid, .. } => Target::Pid(*pid),
            Watch::Cgroup { dir, .. } => Target::Cgroup(dir.clone()),
        }
    }
}

/// `pid N` or `cgroup DIR`, as [`Bound`] says it.
impl fmt::Display for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Watch::Process { pid, .. } => write!(f, "pid {pid}"),
            Watch::Cgroup { dir, .. } => write!(f, "cgroup {}", dir.display()),
        }
    }
}

/// Runs `policy` on what `watch` names until it is gone or `stop` is set. Sends the outcome of
/// the setup (attach and the first scan) on `ready` before the first tick.
#[allow(clippy::too_many_arguments)]
fn manage(
    watch: Watch,
    tiers: Vec<LiveTier>,
    dry_run: bool,
    trackers: TrackerConfig,
    policy: &mut dyn Policy,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<LiveStats>>,
    ready: mpsc::Sender<Result<(), String>>,
) -> Result<Ending, String> {
    let name = policy.name().to_string();
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut inner = match LiveMachine::attach(watch.target(), tiers, dry_run) {
            Ok(m) => m,
            Err(e) => {
                let _ = ready.send(Err(format!("cannot manage {watch}: {}", error_chain(&e))));
                return Ending::Refused;
            }
        };
        if let Watch::Cgroup { owner: Some(uid), .. } = &watch {
            inner.only_owner(*uid);
        }
        inner.set_referenced_source(trackers.referenced);
        inner.set_sampling_source(trackers.sampling);
        let mut m = Watched {
            inner,
            watch,
            stop,
            stats,
            ready: Some(ready),
            policy: name.clone(),
            now_ns: 0,
            exited: false,
        };
        let result = terrace_model::drive(&mut m, policy);
        m.publish();
        match result {
            Err(_) => Ending::Refused,
            Ok(()) if m.exited => Ending::Exited,
            Ok(()) => Ending::Stopped,
        }
    }));
    run.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into())
    })
}

/// The live machine as the daemon drives it: it ends when told to stop or when what was bound is
/// gone (the process exited, is a zombie or its pid was reused; the cgroup was removed), and
/// publishes its stats for `list` and metrics.
struct Watched {
    inner: LiveMachine,
    watch: Watch,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<LiveStats>>,
    ready: Option<mpsc::Sender<Result<(), String>>>,
    policy: String,
    now_ns: u64,
    exited: bool,
}

impl Watched {
    fn publish(&self) {
        *lock(&self.stats) = self.inner.stats().clone();
    }
    fn still_there(&self) -> bool {
        self.watch.still_there()
    }
}

impl Machine for Watched {
    fn info(&self) -> &MachineInfo {
        self.inner.info()
    }

    fn prepare(&mut self, req: &Requirements) -> Result<(), MachineError> {
        let r = self.inner.prepare(req);
        // Published first: the bind's reply tells what the first scan found.
        self.publish();
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(r.as_ref().map(|_| ()).map_err(|e| match e {
                MachineError::Other(text) => format!("cannot manage {}: {text}", self.watch),
                e => format!("policy {} cannot run here: {e}", self.policy),
            }));
        }
        r
    }

    fn advance(&mut self, until_ns: u64) -> Progress {
        self.publish();
        let step = STOP_STEP.as_nanos() as u64;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Progress::Finished { now_ns: self.now_ns };
            }
            if !self.still_there() {
                self.exited = true;
                return Progress::Finished { now_ns: self.now_ns };
            }
            match self.inner.advance(self.now_ns.saturating_add(step).min(until_ns)) {
                Progress::Finished { now_ns } => {
                    self.exited = true;
                    return Progress::Finished { now_ns };
                }
                Progress::Running { now_ns } => {
                    self.now_ns = now_ns;
                    if now_ns >= until_ns {
                        return Progress::Running { now_ns };
                    }
                }
            }
        }
    }

    fn observe(&mut self) -> Observations<'_> {
        self.inner.observe()
    }

    fn apply(&mut self, plan: &Plan) -> Applied {
        let applied = self.inner.apply(plan);
        self.publish();
        applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 \
                    1234 56 18446744073709551615";
        assert_eq!(parse_stat(stat), Some(('S', 987654)));
        assert_eq!(parse_stat("garbage"), None);
        let me = std::process::id() as i32;
        assert!(identity(Path::new("/proc"), me).is_some());
        assert_eq!(identity(Path::new("/proc"), i32::MAX), None);
    }

    #[test]
    fn nodes_the_host_lacks_are_refused_before_classifying() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/single-node");
        let topo = Topology::read(&root.join("sys"), &root.join("proc")).unwrap();
        let config = Config::parse("t", "[tiers]\nfast_nodes = [0]\nslow_nodes = [1]\n").unwrap();
        // Without the check this host's one node would be all there is: "a single memory tier".
        let e = tiers_of(&topo, &config).unwrap_err();
        assert!(matches!(e, TiersError::UnknownNodes(_)), "{e}");
        assert!(error_chain(&e).contains("slow_nodes names node 1, which this host does not have"), "{e}");
        assert!(matches!(tiers_of(&topo, &Config::default()), Err(TiersError::SingleTier)));
    }

    /// A dry run on one node gets the node as its fast tier and a stand-in slow tier on the same
    /// node; a host of two tiers gets its own.
    #[test]
    fn a_dry_run_on_one_node_gets_a_stand_in_slow_tier() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/single-node");
        let topo = Topology::read(&root.join("sys"), &root.join("proc")).unwrap();
        let (tiers, stand_in) = dry_run_tiers_of(&topo, &Config::default()).unwrap();
        assert!(stand_in);
        assert_eq!(tiers.len(), 2);
        assert_eq!(tiers[0].nodes, tiers[1].nodes);
        assert_eq!(tiers[1].tier.id, terrace_model::TierId(1));
        assert!(tiers[1].tier.name.contains("single-node dry run"), "{}", tiers[1].tier.name);
        let config = Config::parse("t", "[tiers]\nfast_limit_mib = 64\n").unwrap();
        let (tiers, _) = dry_run_tiers_of(&topo, &config).unwrap();
        assert_eq!(tiers[0].tier.capacity_pages, Some(64 << 8));
        // Nodes the host lacks are still refused.
        let config = Config::parse("t", "[tiers]\nfast_nodes = [0]\nslow_nodes = [1]\n").unwrap();
        assert!(matches!(dry_run_tiers_of(&topo, &config), Err(TiersError::UnknownNodes(_))));
    }

    /// The daemon refuses to start on such a config, on this host's own topology.
    #[test]
    fn the_daemon_refuses_nodes_the_host_lacks_at_start() {
        let topo = Topology::read(Path::new("/sys"), Path::new("/proc")).expect("this host's NUMA topology");
        let absent = topo.nodes.iter().map(|n| n.id).max().unwrap_or(0) + 1;
        let mut config = Config::default();
        config.tiers.slow_nodes = Some(vec![absent]);
        let dir = std::env::temp_dir().join(format!("terrace-daemon-nodes-{}", std::process::id()));
        config.daemon.socket = dir.join("t.sock");
        let build: PolicyBuilder = Box::new(|_: &str| Ok(Box::new(Idle) as Box<dyn Policy>));
        match Daemon::start(config, build) {
            Err(e @ DaemonError::Tiers(_)) => {
                let text = error_chain(&e);
                assert!(
                    text.contains(&format!("names node {absent}, which this host does not have")),
                    "{text}"
                );
            }
            Err(e) => panic!("refused for another reason: {}", error_chain(&e)),
            Ok(_) => panic!("started on a config naming node {absent}"),
        }
        assert!(!dir.join("t.sock").exists(), "refused before opening its socket");
    }

    /// A policy that asks for nothing and moves nothing (it ticks, so a cgroup is scanned).
    struct Idle;
    impl Policy for Idle {
        fn name(&self) -> &str {
            "idle"
        }
        fn requirements(&self, _: &MachineInfo) -> Requirements {
            Requirements { tick_ns: Some(50_000_000), ..Requirements::default() }
        }
        fn tick(&mut self, _: &Observations<'_>) -> Plan {
            Plan::none()
        }
    }

    /// A daemon core as `Daemon::start` makes it, without a socket, on two tiers both on node 0
    /// (this host may have one node: moves would go where the pages are), with policy `idle`.
    fn core() -> Arc<Shared> {
        let mut config = Config::default();
        config.daemon.policy = "idle".into();
        Arc::new(Shared {
            config,
            build: Box::new(|name: &str| match name {
                "idle" => Ok(Box::new(Idle) as Box<dyn Policy>),
                other => Err(format!("unknown policy '{other}'")),
            }),
            proc_root: PathBuf::from("/proc"),
            tiers: |_| {
                let info = MachineInfo::placeholder(2);
                Ok(info.tiers.into_iter().map(|tier| LiveTier { tier, nodes: vec![0] }).collect())
            },
            managed: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            connections: AtomicUsize::new(0),
            own_pid: std::process::id() as i32,
        })
    }

    /// Waits up to 20 s for `list` to satisfy `ok`; returns the last list.
    fn list_until(d: &Arc<Shared>, ok: impl Fn(&[ProcessEntry]) -> bool) -> Vec<ProcessEntry> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let list = d.handle(Request::List, 0).processes.unwrap();
            if ok(&list) || Instant::now() > deadline {
                return list;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn error_of(reply: Reply) -> String {
        assert!(!reply.ok, "{reply:?}");
        reply.error.unwrap()
    }

    /// The metrics endpoint of a daemon managing a process, sent what a broken or hostile client
    /// sends: a slow client (one byte every 100 ms, all along), a 1 MiB request line and a 1 MiB
    /// header, a request cut short, 200 random byte strings (fixed seed), a pipelined pair, HEAD
    /// and POST. Each bad request gets a 4xx or a closed connection, promptly; after each one a
    /// scrape answers at once with the managed process; the slow client gets 408 at its deadline
    /// while the others are served; the daemon observes its process all along and the process
    /// lives on.
    #[test]
    fn the_metrics_endpoint_turns_bad_requests_away_while_the_daemon_manages_on() {
        use crate::metrics::test_client::{exchange, scrape, status, StopOnDrop};
        use rand_core::{Rng as _, SeedableRng as _};
        use std::io::Read as _;
        use std::net::TcpStream;

        let mut kid = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let pid = kid.id() as i32;
        let d = core();
        let r = d.handle(Request::Bind { pid, policy: None }, nix::unistd::getuid().as_raw());
        assert!(r.ok, "{r:?}");
        let observations = || d.snapshot().first().map_or(0, |m| m.stats.observations);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let deadline = Duration::from_millis(1500);
        let limits = metrics::Limits { connection_deadline: deadline, ..metrics::Limits::default() };
        let stop = AtomicBool::new(false);
        let info = format!("terrace_process_info{{pid=\"{pid}\",policy=\"idle\"}} 1\n");
        let scrapes_promptly = |after: &str| {
            let started = Instant::now();
            let text = scrape(addr);
            assert!(text.contains(&info), "after {after}: {text}");
            assert!(started.elapsed() < Duration::from_secs(1), "after {after}: {:?}", started.elapsed());
        };
        // A reply to a bad request: an error status, or nothing (closed, or reset).
        let turned_away = |what: &str, request: &[u8]| {
            let started = Instant::now();
            match exchange(addr, request) {
                Ok(reply) => {
                    let code = status(&reply);
                    assert!(
                        reply.is_empty() || code.is_some_and(|c| (400..500).contains(&c)),
                        "{what}: {}",
                        String::from_utf8_lossy(&reply)
                    );
                }
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{what}: {e}"),
            }
            assert!(started.elapsed() < Duration::from_secs(1), "{what}: {:?}", started.elapsed());
            scrapes_promptly(what);
        };

        let body = || metrics::render(&d.snapshot());
        std::thread::scope(|s| {
            s.spawn(|| metrics::serve(listener, &body, &stop, &limits));
            let _stop = StopOnDrop(&stop);
            let before = observations();
            scrapes_promptly("nothing");

            let slow = s.spawn(|| {
                let started = Instant::now();
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
                c.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
                let mut reply = Vec::new();
                let mut buf = [0u8; 512];
                while started.elapsed() < deadline * 3 {
                    if c.write_all(b"a").is_err() {
                        break;
                    }
                    match c.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => reply.extend_from_slice(&buf[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(_) => break,
                    }
                }
                (reply, started.elapsed())
            });
            let others_started = Instant::now();
            // When the first other client was served: while the slow one still waited, however
            // slowly this machine serves the 200 that follow (an emulated guest is slow).
            let mut first_served: Option<Duration> = None;

            // 1 MiB and the connection left open: refused (431, or reset as the server stops
            // reading) without waiting for more.
            for (what, start) in
                [("request line", &b"GET /"[..]), ("header", b"GET /metrics HTTP/1.1\r\nX-Big: ")]
            {
                let started = Instant::now();
                let mut oversized = start.to_vec();
                oversized.resize(1 << 20, b'a');
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let _ = c.write_all(&oversized);
                let mut reply = Vec::new();
                match c.read_to_end(&mut reply) {
                    Ok(_) => assert_eq!(status(&reply), Some(431), "{}", String::from_utf8_lossy(&reply)),
                    Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
                }
                assert!(
                    started.elapsed() < Duration::from_secs(1),
                    "a 1 MiB {what}: {:?}",
                    started.elapsed()
                );
                scrapes_promptly(&format!("a 1 MiB {what}"));
                first_served.get_or_insert(others_started.elapsed());
            }
            assert_eq!(
                exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: loc").unwrap(),
                b"",
                "a request cut short is closed unanswered"
            );
            scrapes_promptly("a request cut short");
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x6e7d90);
            for case in 0..200 {
                let mut bytes =
                    if case % 3 == 0 { b"GET /metrics HTTP/1.1\r\n".to_vec() } else { Vec::new() };
                let len = (rng.next_u64() % 2048) as usize;
                bytes.extend((0..len).map(|_| rng.next_u64() as u8));
                turned_away(&format!("random bytes, case {case}: {bytes:?}"), &bytes);
            }
            let others_done = others_started.elapsed();

            let pair = exchange(
                addr,
                b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nGET /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
            );
            let pair = String::from_utf8(pair.unwrap()).unwrap();
            assert_eq!(pair.matches("HTTP/1.1 ").count(), 1, "the first is answered, then closed:\n{pair}");
            let (head, text) = pair.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", text.len())), "{pair}");
            assert!(text.contains(&info), "{pair}");
            let head_only = exchange(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n").unwrap();
            assert_eq!(status(&head_only), Some(200));
            assert!(head_only.ends_with(b"\r\n\r\n"), "no body: {}", String::from_utf8_lossy(&head_only));
            turned_away("POST", b"POST /metrics HTTP/1.1\r\nContent-Length: 4\r\n\r\nstop");

            let (reply, held) = slow.join().unwrap();
            assert_eq!(status(&reply), Some(408), "{}", String::from_utf8_lossy(&reply));
            assert!(held >= deadline && held < deadline + Duration::from_secs(1), "held {held:?}");
            let first_served = first_served.expect("the oversized requests were sent");
            assert!(
                first_served < held,
                "another client ({first_served:?}) was served while the slow one waited ({held:?}); all \
                 the others took {others_done:?}"
            );

            let after = observations();
            assert!(after > before + 5, "the daemon observed its process {before} then {after} times");
        });
        assert!(d.handle(Request::Unbind { pid }, 0).ok);
        assert!(kid.try_wait().unwrap().is_none(), "the managed process lives on");
        let _ = kid.kill();
        let _ = kid.wait();
    }

    /// A cgroup (a directory laid out like cgroupfs: the machine reads its cgroup.procs files)
    /// bound to the daemon: its processes are managed as one binding, a newcomer joins, the
    /// binding shows in `list` and the metrics with its process count; binding it again, or a
    /// cgroup inside it, is refused; unbind ends it; a cgroup that is removed ends its binding;
    /// a caller that does not own it is refused; bound by its owner (not root), only the owner's
    /// processes in it are managed.
    #[test]
    fn a_cgroup_is_managed_as_its_processes_come_and_go() {
        let tmp = std::env::temp_dir().join(format!("terrace-daemon-cgroup-{}", std::process::id()));
        let cg = tmp.join("batch");
        std::fs::create_dir_all(cg.join("workers")).unwrap();
        let sleeper = || std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let mut kids = [sleeper(), sleeper(), sleeper()];
        let pids: Vec<u32> = kids.iter().map(|k| k.id()).collect();
        std::fs::write(cg.join("cgroup.procs"), format!("{}\n", pids[0])).unwrap();
        std::fs::write(cg.join("workers/cgroup.procs"), format!("{}\n", pids[1])).unwrap();
        let d = core();
        let me = nix::unistd::getuid().as_raw();

        let r = d.handle(Request::BindCgroup { cgroup: cg.join("workers/.."), policy: None }, me);
        assert!(r.ok, "{r:?}");
        let dir = std::fs::canonicalize(&cg).unwrap();
        assert_eq!(r.cgroup.as_deref(), Some(dir.as_path()));
        assert_eq!(r.pid, None);
        let text = r.text();
        assert!(
            text.starts_with(&format!("managing cgroup {} with policy idle (2 processes", dir.display())),
            "{text}"
        );
        let list = d.handle(Request::List, 0);
        assert_eq!(list.message.as_deref(), Some("managing 0 processes and 1 cgroup"));
        let entry = &list.processes.unwrap()[0];
        assert_eq!((entry.pid, entry.cgroup.as_deref(), entry.processes), (0, Some(dir.as_path()), 2));

        // A newcomer joins at the next scan.
        std::fs::write(cg.join("cgroup.procs"), format!("{}\n{}\n", pids[0], pids[2])).unwrap();
        let list = list_until(&d, |l| l.first().is_some_and(|e| e.processes == 3));
        assert_eq!(list[0].processes, 3, "{list:?}");
        let metrics = metrics::render(&d.snapshot()).unwrap();
        let labels = format!("pid=\"0\",cgroup=\"{}\"", dir.display());
        assert!(metrics.contains(&format!("terrace_processes{{{labels}}} 3\n")), "{metrics}");
        assert!(
            metrics.contains(&format!("terrace_process_info{{{labels},policy=\"idle\"}} 1\n")),
            "{metrics}"
        );

        // Twice, inside, or by someone else: refused.
        let e = error_of(d.handle(Request::BindCgroup { cgroup: cg.clone(), policy: None }, me));
        assert_eq!(e, format!("cgroup {} is already managed (policy idle); unbind it first", dir.display()));
        let e = error_of(d.handle(Request::BindCgroup { cgroup: cg.join("workers"), policy: None }, me));
        assert!(e.contains(&format!("overlaps cgroup {}", dir.display())), "{e}");
        // One of its processes on its own: refused, a process is managed once.
        let e = error_of(d.handle(Request::Bind { pid: pids[1] as i32, policy: None }, me));
        assert!(
            e.starts_with(&format!(
                "pid {} is in cgroup {}, which is managed already",
                pids[1],
                dir.display()
            )),
            "{e}"
        );
        let stranger = me.wrapping_add(4242);
        let e = error_of(d.handle(Request::UnbindCgroup { cgroup: cg.clone() }, stranger));
        assert!(e.starts_with(&format!("permission denied: uid {stranger} may not manage cgroup")), "{e}");
        let e =
            error_of(d.handle(Request::BindCgroup { cgroup: cg.join("workers"), policy: None }, stranger));
        assert!(e.starts_with(&format!("permission denied: uid {stranger} may not manage cgroup")), "{e}");

        // Unbound: gone from the list.
        let r = d.handle(Request::UnbindCgroup { cgroup: cg.clone() }, me);
        assert!(r.ok, "{r:?}");
        assert!(r.text().starts_with(&format!("stopped managing cgroup {} (0 pages moved)", dir.display())));
        assert_eq!(d.handle(Request::List, 0).processes, Some(vec![]));
        let e = error_of(d.handle(Request::UnbindCgroup { cgroup: cg.clone() }, me));
        assert_eq!(e, format!("cgroup {} is not managed by this daemon", dir.display()));

        // Bound by its owner who is not root (possible to set up only as root): only the owner's
        // processes in it are managed, here none of the sleepers, which are root's.
        if me == 0 {
            let nobody = 65534;
            std::os::unix::fs::chown(&cg, Some(nobody), None).unwrap();
            let r = d.handle(Request::BindCgroup { cgroup: cg.clone(), policy: None }, nobody);
            assert!(r.ok, "{r:?}");
            assert!(r.text().contains("(0 processes of uid 65534 now"), "{}", r.text());
            std::thread::sleep(Duration::from_millis(300));
            let list = d.handle(Request::List, 0).processes.unwrap();
            assert_eq!((list[0].processes, list[0].uid), (0, nobody), "{list:?}");
            assert!(error_of(d.handle(Request::UnbindCgroup { cgroup: cg.clone() }, 1))
                .contains("permission denied"));
            assert!(d.handle(Request::UnbindCgroup { cgroup: cg.clone() }, nobody).ok);
            std::os::unix::fs::chown(&cg, Some(0), None).unwrap();
        }

        // A process bound on its own keeps a cgroup that holds it from being bound.
        assert!(d.handle(Request::Bind { pid: pids[0] as i32, policy: None }, me).ok);
        let e = error_of(d.handle(Request::BindCgroup { cgroup: cg.clone(), policy: None }, me));
        assert!(e.contains(&format!("holds pid {}, which is managed already on its own", pids[0])), "{e}");
        assert!(d.handle(Request::Unbind { pid: pids[0] as i32 }, me).ok);

        // A cgroup that is removed ends its binding.
        assert!(d.handle(Request::BindCgroup { cgroup: cg.clone(), policy: None }, me).ok);
        std::fs::remove_dir_all(&tmp).unwrap();
        let list = list_until(&d, |l| l.is_empty());
        assert_eq!(list, vec![], "the binding of a removed cgroup ends");

        for k in &mut kids {
            let _ = k.kill();
            let _ = k.wait();
        }
    }

    /// What is not a cgroup v2 directory, or not absolute, is refused in one line before
    /// anything else.
    #[test]
    fn what_is_not_a_cgroup_is_refused() {
        let d = core();
        let tmp = std::env::temp_dir().join(format!("terrace-daemon-notcg-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        for (dir, want) in [
            (tmp.join("missing"), "is not a directory"),
            (tmp.clone(), "has no cgroup.procs, so it is not a cgroup v2 directory"),
            (PathBuf::from("relative/x"), "give the cgroup's absolute path"),
        ] {
            let e = error_of(d.handle(Request::BindCgroup { cgroup: dir.clone(), policy: None }, 0));
            assert!(e.contains(want), "{}: {e}", dir.display());
        }
        std::fs::write(tmp.join("cgroup.procs"), "").unwrap();
        let e =
            error_of(d.handle(Request::BindCgroup { cgroup: tmp.clone(), policy: Some("nope".into()) }, 0));
        assert_eq!(e, "unknown policy 'nope'");
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(d.handle(Request::List, 0).processes, Some(vec![]));
    }

    #[test]
    fn error_chains_fit_one_line() {
        let e = TiersError::Topology(TopologyError::MissingNode { path: "/x".into() });
        let text = error_chain(&e);
        assert!(
            text.starts_with("cannot read this host's NUMA topology: no NUMA node directory at /x"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }
}
