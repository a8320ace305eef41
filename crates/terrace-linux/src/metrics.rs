//! The daemon's Prometheus endpoint: `GET /metrics` on a loopback address answers with the text
//! exposition format (version 0.0.4), one thread, no web framework.
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

use crate::machine::LiveStats;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
    /// The labels naming the binding: `pid="N"`, and `,cgroup="DIR"` for a cgroup.
    fn labels(&self) -> String {
        match &self.cgroup {
            Some(dir) => format!("pid=\"{}\",cgroup=\"{}\"", self.pid, escape(dir)),
            None => format!("pid=\"{}\"", self.pid),
        }
    }
}

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the metrics of every binding (in the order given).
pub fn render(processes: &[ProcessMetrics]) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &mut dyn Iterator<Item = String>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for s in samples {
            let _ = writeln!(out, "{name}{s}");
        }
    };
    family(
        "terrace_managed_processes",
        "gauge",
        "Bindings the daemon manages: processes and cgroups (a cgroup counts once).",
        &mut std::iter::once(format!(" {}", processes.len())),
    );
    family(
        "terrace_process_info",
        "gauge",
        "A binding (a process, or a cgroup) and its policy (always 1).",
        &mut processes.iter().map(|p| format!("{{{},policy=\"{}\"}} 1", p.labels(), escape(&p.policy))),
    );
    let per_pid = |f: fn(&LiveStats) -> String| {
        processes.iter().map(move |p| format!("{{{}}} {}", p.labels(), f(&p.stats))).collect::<Vec<_>>()
    };
    family(
        "terrace_processes",
        "gauge",
        "Processes managed under a binding at the last scan (a cgroup's; 1 for a process).",
        &mut per_pid(|s| s.processes.to_string()).into_iter(),
    );
    family(
        "terrace_pages",
        "gauge",
        "Present pages of a binding per tier (0 is the fastest), at the last scan.",
        &mut processes.iter().flat_map(|p| {
            let labels = p.labels();
            p.stats
                .pages_per_tier
                .iter()
                .enumerate()
                .map(move |(t, n)| format!("{{{labels},tier=\"{t}\"}} {n}"))
        }),
    );
    family(
        "terrace_pages_moved_total",
        "counter",
        "Pages moved between tiers and found on their target afterwards.",
        &mut per_pid(|s| s.pages_moved.to_string()).into_iter(),
    );
    family(
        "terrace_moves_failed_total",
        "counter",
        "Pages a plan asked to move that did not move.",
        &mut per_pid(|s| s.moves_failed.to_string()).into_iter(),
    );
    family(
        "terrace_tracking_seconds_total",
        "counter",
        "Seconds spent observing the binding's processes (page-table scans).",
        &mut per_pid(|s| float(s.tracking_seconds)).into_iter(),
    );
    family(
        "terrace_migration_seconds_total",
        "counter",
        "Seconds spent moving the binding's pages.",
        &mut per_pid(|s| float(s.migration_seconds)).into_iter(),
    );
    family(
        "terrace_execs_followed_total",
        "counter",
        "Times a process replaced its program (exec) and Terrace followed it.",
        &mut per_pid(|s| s.execs_followed.to_string()).into_iter(),
    );
    family(
        "terrace_trackers_lost_total",
        "counter",
        "Trackers that could not follow a process into an exec and stopped (the fault sampler).",
        &mut per_pid(|s| s.trackers_lost.to_string()).into_iter(),
    );
    family(
        "terrace_nothing_present_total",
        "counter",
        "Times the binding had no present page in its managed memory for 10 observations and 5 s.",
        &mut per_pid(|s| s.nothing_present.to_string()).into_iter(),
    );
    family(
        "terrace_ranges_not_registered_total",
        "counter",
        "Memory ranges a tracker could not register (the fault sampler's userfaultfd refused them).",
        &mut per_pid(|s| s.ranges_not_registered.to_string()).into_iter(),
    );
    family(
        "terrace_batches_mostly_failed_total",
        "counter",
        "Move batches in which more than half the pages did not move.",
        &mut per_pid(|s| s.batches_mostly_failed.to_string()).into_iter(),
    );
    out
}

/// A float as Prometheus reads it.
fn float(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Serves `GET /metrics` on `listener` with the text `body()` gives, one connection at a time,
/// until `stop` is set (checked at least every 200 ms).
pub fn serve(listener: TcpListener, body: &dyn Fn() -> String, stop: &AtomicBool) {
    use nix::poll::{poll, PollFd, PollFlags};
    while !stop.load(Ordering::Relaxed) {
        let ready = {
            let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, 200u16).unwrap_or(0) > 0
        };
        if !ready {
            continue;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = answer(stream, body) {
                    tracing::debug!("metrics request failed: {e}");
                }
            }
            Err(e) => tracing::debug!("metrics accept failed: {e}"),
        }
    }
}

/// Answers one HTTP/1.x request on `stream` and closes it.
fn answer(mut stream: TcpStream, body: &dyn Fn() -> String) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    // The request head: up to the blank line, at most 8 KiB (the body of a GET is ignored).
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
        if head.len() > 8192 {
            break;
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, text) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", CONTENT_TYPE, body()),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain; charset=utf-8", "try /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET /metrics\n".to_string()),
    };
    let mut reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    if method != "HEAD" {
        reply.push_str(&text);
    }
    stream.write_all(reply.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn renders_the_text_format_with_help_and_type() {
        let text = render(&sample());
        for line in [
            "# HELP terrace_managed_processes Bindings the daemon manages: processes and cgroups (a cgroup counts once).",
            "# TYPE terrace_managed_processes gauge",
            "terrace_managed_processes 1",
            "terrace_process_info{pid=\"42\",policy=\"age\"} 1",
            "# TYPE terrace_pages gauge",
            "terrace_pages{pid=\"42\",tier=\"0\"} 1024",
            "terrace_pages{pid=\"42\",tier=\"1\"} 4096",
            "# TYPE terrace_pages_moved_total counter",
            "terrace_pages_moved_total{pid=\"42\"} 1100",
            "terrace_moves_failed_total{pid=\"42\"} 3",
            "terrace_tracking_seconds_total{pid=\"42\"} 0.25",
            "terrace_migration_seconds_total{pid=\"42\"} 1.5",
            "# TYPE terrace_execs_followed_total counter",
            "terrace_execs_followed_total{pid=\"42\"} 1",
            "terrace_trackers_lost_total{pid=\"42\"} 0",
            "terrace_nothing_present_total{pid=\"42\"} 0",
            "terrace_ranges_not_registered_total{pid=\"42\"} 0",
            "terrace_batches_mostly_failed_total{pid=\"42\"} 2",
            "# TYPE terrace_processes gauge",
            "terrace_processes{pid=\"42\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // Every sample line is `name{labels} value` or `name value`, and each family is
        // introduced by its HELP and TYPE before its samples.
        let mut typed = std::collections::HashSet::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_string());
                continue;
            }
            if l.starts_with("# HELP ") {
                continue;
            }
            let name = l.split(['{', ' ']).next().unwrap();
            assert!(typed.contains(name), "{name} before its TYPE");
            let value = l.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{l}");
        }
        assert!(text.ends_with('\n'));
    }

    /// A cgroup binding's series carry `pid="0"` and its `cgroup`, escaped; its process count
    /// is in `terrace_processes`.
    #[test]
    fn a_cgroup_binding_is_labelled_by_its_cgroup() {
        let mut all = sample();
        let mut cg = all[0].clone();
        cg.pid = 0;
        cg.cgroup = Some("/sys/fs/cgroup/a\"b".into());
        cg.stats.processes = 3;
        all.push(cg);
        let text = render(&all);
        for line in [
            "terrace_managed_processes 2",
            "terrace_process_info{pid=\"0\",cgroup=\"/sys/fs/cgroup/a\\\"b\",policy=\"age\"} 1",
            "terrace_processes{pid=\"0\",cgroup=\"/sys/fs/cgroup/a\\\"b\"} 3",
            "terrace_processes{pid=\"42\"} 1",
            "terrace_pages{pid=\"0\",cgroup=\"/sys/fs/cgroup/a\\\"b\",tier=\"1\"} 4096",
            "terrace_pages_moved_total{pid=\"0\",cgroup=\"/sys/fs/cgroup/a\\\"b\"} 1100",
            "terrace_pages_moved_total{pid=\"42\"} 1100",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn no_processes_still_renders_every_family() {
        let text = render(&[]);
        assert!(text.contains("terrace_managed_processes 0\n"));
        assert!(text.contains("# TYPE terrace_pages gauge\n"));
        assert!(!text.contains("pid="));
    }

    #[test]
    fn serves_get_metrics_only() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| serve(listener, &|| render(&sample()), &stop));
            let get = |req: &str| {
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(req.as_bytes()).unwrap();
                let mut out = String::new();
                c.read_to_string(&mut out).unwrap();
                out
            };
            let ok = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
            assert!(ok.contains("Content-Type: text/plain; version=0.0.4"), "{ok}");
            assert!(ok.contains("terrace_pages{pid=\"42\",tier=\"0\"} 1024"), "{ok}");
            assert!(get("GET /other HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404"));
            assert!(get("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
            assert!(get("garbage\n\n").starts_with("HTTP/1.1 405"));
            stop.store(true, Ordering::Relaxed);
        });
    }
}
