//! The daemon's Prometheus endpoint: `GET /metrics` on a loopback address answers with the text
//! exposition format (version 0.0.4).
//!
//! ```text
//! # HELP terrace_managed_processes Bindings the daemon manages: processes and cgroups (a cgroup counts once).
//! # TYPE terrace_managed_processes gauge
//! terrace_managed_processes 2
//! ...
//! # HELP terrace_pages Present pages of a binding per tier (0 is the fastest), at the last scan.
//! # TYPE terrace_pages gauge
//! terrace_pages{pid="4242",tier="0"} 1024
//! terrace_pages{pid="0",cgroup="/sys/fs/cgroup/batch",tier="0"} 3072
//! ...
//! ```
//!
//! Each binding's series are labelled by what was bound: `pid="N"` for a process, `pid="0"` and
//! `cgroup="DIR"` for a cgroup (as `list` reports it: pid 0 and the cgroup).
//!
//! The text is written by the `prometheus` crate's encoder and requests are parsed by `httparse`;
//! this module says which families there are, and holds the limits that keep a client from
//! holding the endpoint ([`Limits`]: bytes of request head, one deadline per connection, how many
//! connections are served at once).

use crate::machine::LiveStats;
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder as _, TextEncoder};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What the endpoint reports of one binding, a process or a cgroup.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessMetrics {
    /// The process bound; 0 for a cgroup.
    pub pid: i32,
    /// The cgroup bound, if a cgroup was.
    pub cgroup: Option<String>,
    pub policy: String,
    pub stats: LiveStats,
}

impl ProcessMetrics {
    /// The labels naming the binding, `pid` and (for a cgroup) `cgroup`, then `extra`.
    fn labels(&self, extra: &[(&str, &str)]) -> Vec<LabelPair> {
        let pid = self.pid.to_string();
        let mut pairs = vec![("pid", pid.as_str())];
        if let Some(dir) = &self.cgroup {
            pairs.push(("cgroup", dir));
        }
        pairs.extend_from_slice(extra);
        pairs.into_iter().map(|(name, value)| label(name, value)).collect()
    }
}

fn label(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_string());
    pair.set_value(value.to_string());
    pair
}

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The families with one sample per binding, labelled by the binding alone: name, type, help, and
/// the value taken from the binding's stats.
type PerBinding = (&'static str, MetricType, &'static str, fn(&LiveStats) -> f64);
const PER_BINDING: [PerBinding; 9] = [
    (
        "terrace_pages_moved_total",
        MetricType::COUNTER,
        "Pages moved between tiers and found on their target afterwards.",
        |s| s.pages_moved as f64,
    ),
    (
        "terrace_moves_failed_total",
        MetricType::COUNTER,
        "Pages a plan asked to move that did not move.",
        |s| s.moves_failed as f64,
    ),
    (
        "terrace_tracking_seconds_total",
        MetricType::COUNTER,
        "Seconds spent observing the binding's processes (page-table scans).",
        |s| s.tracking_seconds,
    ),
    (
        "terrace_migration_seconds_total",
        MetricType::COUNTER,
        "Seconds spent moving the binding's pages.",
        |s| s.migration_seconds,
    ),
    (
        "terrace_execs_followed_total",
        MetricType::COUNTER,
        "Times a process replaced its program (exec) and Terrace followed it.",
        |s| s.execs_followed as f64,
    ),
    (
        "terrace_trackers_lost_total",
        MetricType::COUNTER,
        "Trackers that could not follow a process into an exec and stopped (the fault sampler).",
        |s| s.trackers_lost as f64,
    ),
    (
        "terrace_nothing_present_total",
        MetricType::COUNTER,
        "Times the binding had no present page in its managed memory for 10 observations and 5 s.",
        |s| s.nothing_present as f64,
    ),
    (
        "terrace_ranges_not_registered_total",
        MetricType::COUNTER,
        "Memory ranges a tracker could not register (the fault sampler's userfaultfd refused them).",
        |s| s.ranges_not_registered as f64,
    ),
    (
        "terrace_batches_mostly_failed_total",
        MetricType::COUNTER,
        "Move batches in which more than half the pages did not move.",
        |s| s.batches_mostly_failed as f64,
    ),
];

/// One sample: its labels and value, of a family of type `kind`.
fn sample(kind: MetricType, labels: Vec<LabelPair>, value: f64) -> Metric {
    let mut metric = Metric::default();
    metric.set_label(labels);
    if kind == MetricType::COUNTER {
        let mut counter = Counter::default();
        counter.set_value(value);
        metric.set_counter(counter);
    } else {
        let mut gauge = Gauge::default();
        gauge.set_value(value);
        metric.set_gauge(gauge);
    }
    metric
}

fn family(name: &str, kind: MetricType, help: &str, samples: Vec<Metric>) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(kind);
    family.set_metric(samples);
    family
}

/// The metric families of every binding (in the order given), each family's samples in that order.
pub fn families(processes: &[ProcessMetrics]) -> Vec<MetricFamily> {
    use MetricType::GAUGE;
    let per_binding = |kind: MetricType, value: &dyn Fn(&ProcessMetrics) -> f64| -> Vec<Metric> {
        processes.iter().map(|p| sample(kind, p.labels(&[]), value(p))).collect()
    };
    let mut all = vec![
        family(
            "terrace_managed_processes",
            GAUGE,
            "Bindings the daemon manages: processes and cgroups (a cgroup counts once).",
            vec![sample(GAUGE, Vec::new(), processes.len() as f64)],
        ),
        family(
            "terrace_process_info",
            GAUGE,
            "A binding (a process, or a cgroup) and its policy (always 1).",
            processes.iter().map(|p| sample(GAUGE, p.labels(&[("policy", &p.policy)]), 1.0)).collect(),
        ),
        family(
            "terrace_processes",
            GAUGE,
            "Processes managed under a binding at the last scan (a cgroup's; 1 for a process).",
            per_binding(GAUGE, &|p| p.stats.processes as f64),
        ),
        family(
            "terrace_pages",
            GAUGE,
            "Present pages of a binding per tier (0 is the fastest), at the last scan.",
            processes
                .iter()
                .flat_map(|p| {
                    p.stats.pages_per_tier.iter().enumerate().map(move |(tier, &pages)| {
                        sample(GAUGE, p.labels(&[("tier", &tier.to_string())]), pages as f64)
                    })
                })
                .collect(),
        ),
    ];
    for (name, kind, help, value) in PER_BINDING {
        all.push(family(name, kind, help, per_binding(kind, &|p| value(&p.stats))));
    }
    all
}

/// Renders the metrics of every binding (in the order given) in the text format. A family with no
/// sample (no binding yet) is left out: the encoder refuses empty families, and a scraper sees no
/// series either way.
pub fn render(processes: &[ProcessMetrics]) -> prometheus::Result<String> {
    let families: Vec<MetricFamily> =
        families(processes).into_iter().filter(|f| !f.get_metric().is_empty()).collect();
    let mut out = Vec::new();
    TextEncoder::new().encode(&families, &mut out)?;
    String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

/// What one client may take of the endpoint. A request that needs more is answered with an error
/// status, or its connection is closed, and the endpoint serves the others meanwhile.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes of request head (request line and headers) read; a longer head gets 431.
    pub max_head_bytes: usize,
    /// How long one connection may take from accept to the end of the reply, however slowly its
    /// client sends (a client sending a byte a second gets 408 when it runs out).
    pub connection_deadline: Duration,
    /// Connections served at once; one more is answered 503 at once and closed.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_head_bytes: 8192, connection_deadline: Duration::from_secs(5), max_connections: 8 }
    }
}

/// How often a thread waiting on a client looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);
/// Most headers a request may have (each one a slot `httparse` fills); more gets 431.
const MAX_HEADERS: usize = 32;
/// What is read and dropped after the reply so that closing does not reset the connection before
/// the client has read the reply (a reset discards what the client has not read yet).
const LINGER_BYTES: usize = 64 * 1024;
const LINGER_FOR: Duration = Duration::from_secs(1);

/// The text of a scrape, or why it could not be made.
pub type Body<'a> = &'a (dyn Fn() -> prometheus::Result<String> + Sync);

/// Serves `GET /metrics` on `listener` with the text `body()` gives until `stop` is set (looked
/// at every 200 ms), each connection on its own thread within `limits`. Returns once every
/// connection is closed.
pub fn serve(listener: TcpListener, body: Body<'_>, stop: &AtomicBool, limits: &Limits) {
    use nix::poll::{poll, PollFd, PollFlags};
    // Non-blocking, so that a connection reset between poll and accept cannot block the loop.
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::warn!("metrics endpoint: cannot make its socket non-blocking: {e}");
    }
    let active = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        while !stop.load(Ordering::Relaxed) {
            let ready = {
                let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                poll(&mut fds, 200u16).unwrap_or(0) > 0
            };
            if !ready {
                continue;
            }
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    tracing::debug!("metrics accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if active.load(Ordering::SeqCst) >= limits.max_connections {
                let _ = refuse(stream, &Reply::error(503, "Service Unavailable", "too many connections\n"));
                continue;
            }
            let slot = Slot::take(&active);
            let spawned = std::thread::Builder::new().name("terrace-metrics-conn".into()).spawn_scoped(
                scope,
                move || {
                    let _slot = slot;
                    if let Err(e) = answer(stream, body, stop, limits) {
                        tracing::debug!("metrics request failed: {e}");
                    }
                },
            );
            if let Err(e) = spawned {
                // The closure, and with it the connection and its slot, is dropped: closed.
                tracing::debug!("metrics endpoint: cannot start a thread for a connection: {e}");
            }
        }
    });
}

/// One connection counted in `active` until dropped (a thread that ends early frees it too).
struct Slot<'a>(&'a AtomicUsize);

impl<'a> Slot<'a> {
    fn take(active: &'a AtomicUsize) -> Slot<'a> {
        active.fetch_add(1, Ordering::SeqCst);
        Slot(active)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A reply: status line, content type, text, and whether the text is left out (HEAD).
struct Reply {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    text: String,
    head_only: bool,
    allow: bool,
}

impl Reply {
    fn error(status: u16, reason: &'static str, text: &str) -> Reply {
        Reply {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            text: text.to_string(),
            head_only: false,
            allow: false,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
            self.status,
            self.reason,
            self.content_type,
            self.text.len(),
            if self.allow { "Allow: GET, HEAD\r\n" } else { "" },
        )
        .into_bytes();
        if !self.head_only {
            out.extend_from_slice(self.text.as_bytes());
        }
        out
    }
}

/// The reply to a complete request head.
fn route(method: &str, target: &str, body: Body<'_>) -> Reply {
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => match body() {
            Ok(text) => {
                Reply { status: 200, reason: "OK", content_type: CONTENT_TYPE, text, head_only, allow: false }
            }
            Err(e) => {
                tracing::warn!("metrics: cannot encode the metrics: {e}");
                Reply {
                    head_only,
                    ..Reply::error(500, "Internal Server Error", "cannot encode the metrics\n")
                }
            }
        },
        ("GET" | "HEAD", _) => Reply { head_only, ..Reply::error(404, "Not Found", "try /metrics\n") },
        _ => Reply { allow: true, ..Reply::error(405, "Method Not Allowed", "only GET /metrics\n") },
    }
}

/// Reads one request head from `stream` (within the limits), answers it and closes the
/// connection. A client that closes before its head is complete gets nothing.
fn answer(stream: TcpStream, body: Body<'_>, stop: &AtomicBool, limits: &Limits) -> io::Result<()> {
    let deadline = Instant::now() + limits.connection_deadline;
    // Accepted sockets do not inherit the listener's non-blocking mode, but say so.
    stream.set_nonblocking(false)?;
    let mut head: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let reply = loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {
                break route(request.method.unwrap_or(""), request.path.unwrap_or(""), body);
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                break Reply::error(431, "Request Header Fields Too Large", "too many headers\n");
            }
            Err(e) => break Reply::error(400, "Bad Request", &format!("{e}\n")),
        }
        if head.len() >= limits.max_head_bytes {
            let text = format!("request head over {} bytes\n", limits.max_head_bytes);
            break Reply::error(431, "Request Header Fields Too Large", &text);
        }
        let room = (limits.max_head_bytes - head.len()).min(chunk.len());
        match read_before(&stream, &mut chunk[..room], deadline, stop) {
            Ok(0) => return Ok(()),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                break Reply::error(408, "Request Timeout", "request not complete in time\n");
            }
            Err(e) => return Err(e),
        }
    };
    // An error reply gets a moment even when the deadline has passed (it is small).
    let write_for = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(200));
    stream.set_write_timeout(Some(write_for))?;
    (&stream).write_all(&reply.bytes())?;
    linger(&stream, deadline.min(Instant::now() + LINGER_FOR), stop);
    Ok(())
}

/// Reads into `buf` what the client sends before `deadline` (TimedOut after it, Interrupted once
/// `stop` is set).
fn read_before(
    mut stream: &TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<usize> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "the endpoint is stopping"));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left.min(STOP_CHECK)))?;
        match stream.read(buf) {
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            done => return done,
        }
    }
}

/// Ends the connection gently: no more writes, then reads and drops what the client still sends
/// (a pipelined request, a request body), at most [`LINGER_BYTES`] until `until`, so that the
/// close is not a reset that could discard the reply before the client reads it.
fn linger(stream: &TcpStream, until: Instant, stop: &AtomicBool) {
    let _ = stream.shutdown(Shutdown::Write);
    let mut dropped = 0;
    let mut buf = [0u8; 4096];
    while dropped < LINGER_BYTES {
        match read_before(stream, &mut buf, until, stop) {
            Ok(0) | Err(_) => return,
            Ok(n) => dropped += n,
        }
    }
}

/// Answers a connection the endpoint has no room for, without waiting on its client.
fn refuse(stream: TcpStream, reply: &Reply) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(Duration::from_millis(200)))?;
    (&stream).write_all(&reply.bytes())?;
    stream.shutdown(Shutdown::Write)
}

/// A client for the endpoint's tests (here and in the daemon's).
#[cfg(test)]
pub(crate) mod test_client {
    use std::io::{Read, Write};
    use std::net::{Shutdown, SocketAddr, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// Sends `request` on a new connection, then reads until the server closes (or 10 s pass):
    /// the reply's bytes, which may be none, or the error the read ended with (a reset).
    pub fn exchange(addr: SocketAddr, request: &[u8]) -> Result<Vec<u8>, std::io::Error> {
        let mut c = TcpStream::connect(addr)?;
        c.set_read_timeout(Some(Duration::from_secs(10)))?;
        let _ = c.write_all(request); // the server may close before reading everything
        let _ = c.shutdown(Shutdown::Write);
        let mut out = Vec::new();
        c.read_to_end(&mut out).map(|_| out)
    }

    /// Sets its flag when dropped: a test whose assertion fails stops the endpoint it started,
    /// rather than waiting in its thread scope for an endpoint that serves on.
    pub struct StopOnDrop<'a>(pub &'a AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// The status code of a reply, if it starts with an HTTP/1.1 status line.
    pub fn status(reply: &[u8]) -> Option<u16> {
        let rest = reply.strip_prefix(b"HTTP/1.1 ")?;
        std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()
    }

    /// `GET /metrics`: the reply, which must be a 200 carrying exposition text.
    pub fn scrape(addr: SocketAddr) -> String {
        let reply = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        let text = String::from_utf8(reply).unwrap();
        assert_eq!(status(text.as_bytes()), Some(200), "{text}");
        assert!(text.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{text}");
        assert!(text.contains("\nterrace_managed_processes "), "{text}");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::test_client::{exchange, scrape, status, StopOnDrop};
    use super::*;
    use std::collections::BTreeSet;

    fn sample() -> Vec<ProcessMetrics> {
        vec![ProcessMetrics {
            pid: 42,
            cgroup: None,
            policy: "age".into(),
            stats: LiveStats {
                pages_per_tier: vec![1024, 4096],
                pages_moved: 1100,
                moves_failed: 3,
                plans: 7,
                tracking_seconds: 0.25,
                migration_seconds: 1.5,
                observations: 9,
                execs_followed: 1,
                batches_mostly_failed: 2,
                processes: 1,
                ..LiveStats::default()
            },
        }]
    }

    /// `sample()` and a cgroup binding whose directory needs escaping.
    fn with_a_cgroup() -> Vec<ProcessMetrics> {
        let mut all = sample();
        let mut cg = all[0].clone();
        cg.pid = 0;
        cg.cgroup = Some("/sys/fs/cgroup/a\"b\\c".into());
        cg.stats.processes = 3;
        all.push(cg);
        all
    }

    /// The text the hand-written renderer made (before the `prometheus` crate's encoder) of
    /// `with_a_cgroup()`: every HELP, TYPE and sample line is the same, in the same order.
    #[test]
    fn renders_what_the_hand_written_renderer_did() {
        let before = include_str!("../tests/fixtures/metrics_exposition.txt");
        let now = render(&with_a_cgroup()).unwrap();
        let (before_lines, now_lines): (Vec<&str>, Vec<&str>) =
            (before.lines().collect(), now.lines().collect());
        assert_eq!(now_lines, before_lines, "\n{now}");
        assert!(now.ends_with('\n'));
    }

    /// The series names and label names a scraper sees, per family: those of docs/live.md's
    /// table (plus `cgroup` on a cgroup binding's series), with the documented type.
    #[test]
    fn every_documented_metric_is_served_with_its_type_and_labels() {
        let doc = include_str!("../../../docs/live.md");
        let table = doc.split("**Metrics.**").nth(1).expect("docs/live.md has its metrics part");
        let mut documented = BTreeSet::new();
        for row in table.lines().skip_while(|l| !l.starts_with("| metric")).skip(2) {
            let Some(cells) = row.strip_prefix('|') else { break };
            let cells: Vec<&str> = cells.split('|').map(str::trim).collect();
            let name = cells[0].split('`').nth(1).unwrap().to_string();
            let mut labels: BTreeSet<String> =
                cells[2].split(',').filter_map(|l| l.split('`').nth(1)).map(String::from).collect();
            documented.insert((name.clone(), cells[1].to_string(), labels.clone()));
            if labels.contains("pid") {
                labels.insert("cgroup".into());
                documented.insert((name, cells[1].to_string(), labels));
            }
        }
        assert_eq!(documented.len(), 25, "{documented:?}");

        let text = render(&with_a_cgroup()).unwrap();
        let mut types = std::collections::HashMap::new();
        let mut served = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                types.insert(name.to_string(), kind.to_string());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let name = line.split(['{', ' ']).next().unwrap().to_string();
            let labels: BTreeSet<String> = match line.split_once('{') {
                Some((_, rest)) => {
                    rest.split("\",").map(|pair| pair.split('=').next().unwrap().to_string()).collect()
                }
                None => BTreeSet::new(),
            };
            let kind = types.get(&name).unwrap_or_else(|| panic!("{name} before its TYPE")).clone();
            served.insert((name, kind, labels));
        }
        assert_eq!(served, documented);
    }

    #[test]
    fn no_binding_renders_the_count_alone() {
        let text = render(&[]).unwrap();
        assert!(
            text.contains("# TYPE terrace_managed_processes gauge\nterrace_managed_processes 0\n"),
            "{text}"
        );
        assert!(!text.contains("terrace_pages"), "families with no sample are left out:\n{text}");
    }

    /// An endpoint on a loopback port, serving `sample()` with `limits` until the scope ends.
    fn with_endpoint(limits: Limits, test: impl FnOnce(std::net::SocketAddr)) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| serve(listener, &|| render(&sample()), &stop, &limits));
            let _stop = StopOnDrop(&stop);
            test(addr);
        });
    }

    #[test]
    fn serves_get_and_head_of_metrics_only() {
        with_endpoint(Limits::default(), |addr| {
            let ok = scrape(addr);
            assert!(ok.contains("\r\nConnection: close\r\n"), "{ok}");
            assert!(ok.ends_with(&render(&sample()).unwrap()), "{ok}");
            let text = |req: &str| String::from_utf8(exchange(addr, req.as_bytes()).unwrap()).unwrap();
            let head = text("HEAD /metrics HTTP/1.1\r\n\r\n");
            assert_eq!(status(head.as_bytes()), Some(200), "{head}");
            let length = format!("Content-Length: {}\r\n", render(&sample()).unwrap().len());
            assert!(head.contains(&length) && head.ends_with("\r\n\r\n"), "no body:\n{head}");
            assert!(text("GET /metrics?x=1 HTTP/1.0\r\n\r\n")
                .contains("\nterrace_pages{pid=\"42\",tier=\"0\"} 1024\n"));
            assert_eq!(status(text("GET /other HTTP/1.0\r\n\r\n").as_bytes()), Some(404));
            let post = text("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
            assert_eq!(status(post.as_bytes()), Some(405), "{post}");
            assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");
            assert_eq!(status(text("garbage\n\n").as_bytes()), Some(400));
            assert_eq!(status(text("GET /metrics HTTP/2.0\r\n\r\n").as_bytes()), Some(400));
            let many_headers: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{i}: y\r\n")).collect();
            let reply = text(&format!("GET /metrics HTTP/1.1\r\n{many_headers}\r\n"));
            assert_eq!(status(reply.as_bytes()), Some(431), "{reply}");
        });
    }

    /// With room for one connection, a second one is answered 503 at once while the first waits;
    /// once the first has had its deadline (408), the endpoint answers again.
    #[test]
    fn a_connection_over_the_limit_gets_503_and_a_slow_one_gets_408() {
        let limits = Limits {
            max_connections: 1,
            connection_deadline: Duration::from_millis(500),
            ..Limits::default()
        };
        with_endpoint(limits, |addr| {
            let mut slow = TcpStream::connect(addr).unwrap();
            slow.write_all(b"GET /metr").unwrap();
            std::thread::sleep(Duration::from_millis(100)); // accepted and counted
            let started = Instant::now();
            let refused = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
            assert_eq!(status(&refused), Some(503), "{}", String::from_utf8_lossy(&refused));
            assert!(started.elapsed() < Duration::from_millis(400), "refused at once");
            slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut reply = Vec::new();
            slow.read_to_end(&mut reply).unwrap();
            assert_eq!(status(&reply), Some(408), "{}", String::from_utf8_lossy(&reply));
            assert!(started.elapsed() < Duration::from_secs(2));
            std::thread::sleep(Duration::from_millis(50)); // its thread lets go of its slot
            scrape(addr);
        });
    }
}
