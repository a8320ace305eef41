//! The daemon: manages several running processes, each handed over with a `bind` request on its
//! Unix socket ([`crate::control`]), each driven by its own policy in its own thread, and reports
//! on them at a Prometheus endpoint ([`crate::metrics`]).
//!
//! It never takes down the programs it manages: it only ever moves their pages (move_pages moves
//! each page whole or not at all), nothing in them depends on it, and a program that exits at any
//! moment, even in the middle of a scan, just ends its thread. Unbinding stops the thread within
//! [`STOP_STEP`] and leaves every page where it is. A malformed request gets an error reply and
//! the connection is closed; the daemon itself answers on.
//!
//! The daemon knows policies only by name: whoever starts it passes a [`PolicyBuilder`] (the
//! `terrace` command passes the policy registry), so the live machine stays free of policies.

use crate::config::{Config, TrackerConfig};
use crate::control::{self, LineRead, ProcessEntry, Reply, Request};
use crate::machine::{live_requirements, Attach, LiveMachine, LiveStats, Target};
use crate::metrics::{self, ProcessMetrics};
use crate::topology::{ClassifiedBy, LiveTier, Topology, TopologyError};
use std::collections::HashMap;
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
    /// The process exited.
    Exited,
    /// It never got going (the bind was refused).
    Refused,
}

/// One managed process, as the daemon keeps it.
struct Managed {
    id: u64,
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
    managed: Mutex<HashMap<i32, Managed>>,
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
                .spawn(move || metrics::serve(m, &|| metrics::render(&shared.snapshot()), &stop))
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
        let pids: Vec<i32> = lock(&shared.managed).keys().copied().collect();
        tracing::info!(
            "stopping: releasing {} managed process{} (their pages stay where they are)",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" }
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
            Request::Bind { pid, policy } => self.bind(pid, policy, caller),
            Request::Unbind { pid } => self.unbind(pid, caller),
            Request::List => {
                let processes = self.list();
                let message = format!(
                    "managing {} process{}",
                    processes.len(),
                    if processes.len() == 1 { "" } else { "es" }
                );
                Ok(Reply { processes: Some(processes), ..Reply::ok(message) })
            }
        };
        result.unwrap_or_else(Reply::error)
    }

    fn list(&self) -> Vec<ProcessEntry> {
        let managed = lock(&self.managed);
        let mut out: Vec<ProcessEntry> = managed
            .iter()
            .map(|(&pid, m)| {
                let s = lock(&m.stats);
                ProcessEntry {
                    pid,
                    uid: m.uid,
                    policy: m.policy.clone(),
                    seconds: m.since.elapsed().as_secs_f64(),
                    pages_per_tier: s.pages_per_tier.clone(),
                    pages_moved: s.pages_moved,
                    moves_failed: s.moves_failed,
                    dry_run: m.dry_run,
                }
            })
            .collect();
        out.sort_by_key(|p| p.pid);
        out
    }

    fn snapshot(&self) -> Vec<ProcessMetrics> {
        let managed = lock(&self.managed);
        let mut out: Vec<ProcessMetrics> = managed
            .iter()
            .map(|(&pid, m)| ProcessMetrics { pid, policy: m.policy.clone(), stats: lock(&m.stats).clone() })
            .collect();
        out.sort_by_key(|p| p.pid);
        out
    }

    fn bind(self: &Arc<Self>, pid: i32, policy: Option<String>, caller: u32) -> Result<Reply, String> {
        let owner = control::owner_uid(&self.proc_root, pid)?;
        control::authorize(caller, pid, owner)?;
        if pid == self.own_pid {
            return Err(format!("pid {pid} is the Terrace daemon itself"));
        }
        let spec = policy.unwrap_or_else(|| self.config.daemon.policy.clone());
        let mut policy = (self.build)(&spec)?;
        // From here on the policy goes by its own name, which shows its parameters where they
        // differ from its defaults (`hpwp:hot_threshold=8`, from the spec or the config).
        let name = policy.name().to_string();
        let tiers = live_tiers(&self.config).map_err(|e| error_chain(&e))?;
        live_requirements(policy.as_ref(), &tiers, Attach::Running, self.config.trackers.sampling)
            .map_err(|e| format!("policy {name} cannot run here: {e}"))?;
        let identity = identity(&self.proc_root, pid).ok_or_else(|| format!("no process {pid}"))?;

        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(LiveStats::default()));
        let dry_run = self.config.daemon.dry_run;
        let trackers = self.config.trackers.clone();
        {
            let mut managed = lock(&self.managed);
            if let Some(m) = managed.get(&pid) {
                return Err(format!("pid {pid} is already managed (policy {}); unbind it first", m.policy));
            }
            managed.insert(
                pid,
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
        let spawned = std::thread::Builder::new().name(format!("terrace-pid-{pid}")).spawn(move || {
            let ending =
                manage(pid, identity, tiers, dry_run, trackers, policy.as_mut(), stop, stats, ready_tx);
            me.finished(pid, id, &thread_name, ending);
        });
        let thread = match spawned {
            Ok(t) => t,
            Err(e) => {
                self.forget(pid, id);
                return Err(format!("cannot start a thread for pid {pid}: {e}"));
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
                self.forget(pid, id);
                return Err(format!(
                    "pid {pid}: the first scan did not finish within {} s; not managing it",
                    PREPARE_TIMEOUT.as_secs()
                ));
            }
        }
        if let Some(m) = lock(&self.managed).get_mut(&pid).filter(|m| m.id == id) {
            m.thread = Some(thread);
        }
        let what = if dry_run { "watching (dry run)" } else { "managing" };
        tracing::info!("{what} pid {pid} (uid {owner}) with policy {name}, bound by uid {caller}");
        Ok(Reply {
            pid: Some(pid),
            policy: Some(name.clone()),
            ..Reply::ok(format!("{what} pid {pid} with policy {name}"))
        })
    }

    fn unbind(&self, pid: i32, caller: u32) -> Result<Reply, String> {
        let m = {
            let mut managed = lock(&self.managed);
            let Some(m) = managed.get(&pid) else {
                return Err(format!("pid {pid} is not managed by this daemon"));
            };
            control::authorize(caller, pid, m.uid)?;
            if m.thread.is_none() {
                return Err(format!("pid {pid} is still being bound; retry"));
            }
            managed.remove(&pid).expect("present")
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
        tracing::info!(
            "unbound pid {pid} at the request of uid {caller}: {} pages moved, {} not moved; its pages stay where \
             they are",
            s.pages_moved,
            s.moves_failed
        );
        Ok(Reply {
            pid: Some(pid),
            policy: Some(m.policy),
            ..Reply::ok(format!(
                "stopped managing pid {pid} ({} pages moved); its pages stay where they are",
                s.pages_moved
            ))
        })
    }

    /// Removes `pid`'s entry if it is still the one with `id`.
    fn forget(&self, pid: i32, id: u64) -> Option<Managed> {
        let mut managed = lock(&self.managed);
        if managed.get(&pid).is_some_and(|m| m.id == id) {
            managed.remove(&pid)
        } else {
            None
        }
    }

    /// Called by a managing thread as it ends.
    fn finished(&self, pid: i32, id: u64, policy: &str, ending: Result<Ending, String>) {
        let entry = self.forget(pid, id);
        let stats = entry.map(|m| lock(&m.stats).clone()).unwrap_or_default();
        match ending {
            Ok(Ending::Exited) => tracing::info!(
                "pid {pid} exited; stopped managing it ({} pages moved, {} not moved, tracking {:.2} s, \
                 migration {:.2} s)",
                stats.pages_moved,
                stats.moves_failed,
                stats.tracking_seconds,
                stats.migration_seconds
            ),
            Ok(Ending::Stopped) | Ok(Ending::Refused) => {}
            Err(panic) => tracing::error!(
                "policy {policy} failed while managing pid {pid} ({panic}); stopped managing it, the program \
                 runs on"
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

/// Runs `policy` on process `pid` until it exits or `stop` is set. Sends the outcome of the
/// setup (attach and the first scan) on `ready` before the first tick.
#[allow(clippy::too_many_arguments)]
fn manage(
    pid: i32,
    identity: u64,
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
        let mut inner = match LiveMachine::attach(Target::Pid(pid), tiers, dry_run) {
            Ok(m) => m,
            Err(e) => {
                let _ = ready.send(Err(format!("cannot manage pid {pid}: {}", error_chain(&e))));
                return Ending::Refused;
            }
        };
        inner.set_referenced_source(trackers.referenced);
        inner.set_sampling_source(trackers.sampling);
        let mut m = Watched {
            inner,
            pid,
            identity,
            proc_root: PathBuf::from("/proc"),
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

/// The live machine as the daemon drives it: it ends when told to stop or when the process is
/// gone (exited, a zombie, or its pid reused), and publishes its stats for `list` and metrics.
struct Watched {
    inner: LiveMachine,
    pid: i32,
    identity: u64,
    proc_root: PathBuf,
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
        identity(&self.proc_root, self.pid) == Some(self.identity)
    }
}

impl Machine for Watched {
    fn info(&self) -> &MachineInfo {
        self.inner.info()
    }

    fn prepare(&mut self, req: &Requirements) -> Result<(), MachineError> {
        let r = self.inner.prepare(req);
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(r.as_ref().map(|_| ()).map_err(|e| match e {
                MachineError::Other(text) => format!("cannot manage pid {}: {text}", self.pid),
                e => format!("policy {} cannot run here: {e}", self.policy),
            }));
        }
        self.publish();
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

    /// A policy that asks for nothing.
    struct Idle;
    impl Policy for Idle {
        fn name(&self) -> &str {
            "idle"
        }
        fn requirements(&self, _: &MachineInfo) -> Requirements {
            Requirements::default()
        }
        fn tick(&mut self, _: &Observations<'_>) -> Plan {
            Plan::none()
        }
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
