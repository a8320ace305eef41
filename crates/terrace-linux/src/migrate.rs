//! The migrator: carries a plan out on a real process with move_pages(2), in batches, several
//! batches at once, under a rate limit, and checks afterwards where every page really landed.
//!
//! Never fatal to the managed program: move_pages moves each page atomically or not at all, so
//! stopping between (or during) batches leaves every page intact on one node or the other.

use crate::numa_sys;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use terrace_model::{MoveFailure, MoveOptions};

/// One page to move: its address in the target process and the node it should go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageMove {
    pub addr: u64,
    pub node: i32,
    /// Caller's tag for the page (Terrace's page index), returned with failures.
    pub tag: u32,
}

/// What happened to a batch of moves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MoveOutcome {
    /// Pages found on their target node afterwards.
    pub moved: u64,
    /// Pages that did not move, with the reason.
    pub failed: Vec<(u32, MoveFailure)>,
    pub batches: u64,
    pub elapsed: Duration,
}

/// Maps a per-page move_pages status (negative errno) to why the page did not move.
pub fn failure_of(status: i32) -> MoveFailure {
    match -status {
        libc::EBUSY | libc::EAGAIN => MoveFailure::Busy,
        libc::ENOMEM | libc::ENOSPC => MoveFailure::NoSpace,
        libc::ENOENT | libc::EFAULT => MoveFailure::NotPresent,
        libc::EACCES | libc::EPERM => MoveFailure::Permission,
        _ => MoveFailure::Invalid,
    }
}

/// Paces batches to a byte rate.
struct RateLimit {
    bytes_per_sec: Option<f64>,
    start: Instant,
    sent: Mutex<f64>,
}

impl RateLimit {
    fn wait_for(&self, bytes: f64) {
        let Some(rate) = self.bytes_per_sec else { return };
        let due = {
            let mut sent = self.sent.lock().expect("rate lock");
            *sent += bytes;
            Duration::from_secs_f64(*sent / rate)
        };
        let elapsed = self.start.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}

/// Something that must hold while a batch is copied: hpwp's write protection
/// ([`crate::trackers::write_faults::WriteFaultSampler`]).
pub trait CopyGuard: Sync {
    /// Called before the batch's move_pages; returns what `end` needs to undo it.
    fn begin(&self, batch: &[PageMove]) -> Vec<u64>;
    /// Called after the batch's check, whatever happened.
    fn end(&self, token: &[u64]);
}

impl CopyGuard for crate::trackers::write_faults::WriteFaultSampler {
    fn begin(&self, batch: &[PageMove]) -> Vec<u64> {
        self.begin_copy(batch.iter().map(|m| m.addr))
    }
    fn end(&self, token: &[u64]) {
        self.end_copy(token)
    }
}

/// Moves `moves` of process `pid` in order: batches of `opts.batch_pages`, up to
/// `opts.concurrent_batches` at once, paced to `opts.rate_limit_mb_s`. After each batch it asks
/// the kernel where the pages are and counts any page not on its target as failed.
///
/// Logs one line per batch: how many pages went to which nodes, what failed, and `reason`, the
/// policy's word for why.
pub fn execute(
    pid: i32,
    moves: &[PageMove],
    opts: &MoveOptions,
    page_bytes: u64,
    reason: &str,
) -> MoveOutcome {
    execute_guarded(pid, moves, opts, page_bytes, reason, None)
}

/// [`execute`], with `guard` held around each batch's copy.
pub fn execute_guarded(
    pid: i32,
    moves: &[PageMove],
    opts: &MoveOptions,
    page_bytes: u64,
    reason: &str,
    guard: Option<&dyn CopyGuard>,
) -> MoveOutcome {
    let start = Instant::now();
    let batch = opts.batch_pages.max(1) as usize;
    let batches: Vec<&[PageMove]> = moves.chunks(batch).collect();
    let next = AtomicUsize::new(0);
    let rate =
        RateLimit { bytes_per_sec: opts.rate_limit_mb_s.map(|mb| mb * 1e6), start, sent: Mutex::new(0.0) };
    let results = Mutex::new(MoveOutcome::default());
    let workers = (opts.concurrent_batches.max(1) as usize).min(batches.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chunk) = batches.get(i) else { break };
                rate.wait_for((chunk.len() as u64 * page_bytes) as f64);
                let token = guard.map(|g| g.begin(chunk));
                let part = move_batch(pid, chunk);
                if let (Some(g), Some(t)) = (guard, &token) {
                    g.end(t);
                }
                log_batch(pid, chunk, &part, reason);
                let mut r = results.lock().expect("results lock");
                r.moved += part.moved;
                r.failed.extend(part.failed);
                r.batches += 1;
            });
        }
    });
    let mut out = results.into_inner().expect("results");
    out.elapsed = start.elapsed();
    out
}

fn log_batch(pid: i32, chunk: &[PageMove], out: &MoveOutcome, reason: &str) {
    let mut nodes: Vec<i32> = chunk.iter().map(|m| m.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let mut why: Vec<(MoveFailure, usize)> = Vec::new();
    for (_, f) in &out.failed {
        match why.iter_mut().find(|(w, _)| w == f) {
            Some((_, n)) => *n += 1,
            None => why.push((*f, 1)),
        }
    }
    tracing::info!(
        target: "terrace::batch",
        "pid {pid}: moved {}/{} pages to node {:?} ({reason}){}",
        out.moved,
        chunk.len(),
        nodes,
        if why.is_empty() { String::new() } else { format!("; not moved: {why:?}") }
    );
}

/// One move_pages call and its check.
fn move_batch(pid: i32, chunk: &[PageMove]) -> MoveOutcome {
    let addrs: Vec<u64> = chunk.iter().map(|m| m.addr).collect();
    let nodes: Vec<i32> = chunk.iter().map(|m| m.node).collect();
    let mut status = vec![0i32; chunk.len()];
    let mut out = MoveOutcome::default();
    if let Err(e) = numa_sys::move_pages(pid, &addrs, &nodes, &mut status, 0) {
        // The whole call failed (the process went away, no permission): nothing moved.
        let why = failure_of(-e.raw_os_error().unwrap_or(libc::EINVAL));
        out.failed.extend(chunk.iter().map(|m| (m.tag, why)));
        return out;
    }
    // Do not trust the status alone: ask where the pages are now.
    let mut landed = vec![0i32; chunk.len()];
    let checked = numa_sys::query_nodes(pid, &addrs, &mut landed).is_ok();
    for (i, m) in chunk.iter().enumerate() {
        if status[i] < 0 {
            out.failed.push((m.tag, failure_of(status[i])));
        } else if checked && landed[i] != m.node {
            out.failed
                .push((m.tag, if landed[i] < 0 { failure_of(landed[i]) } else { MoveFailure::Misplaced }));
        } else {
            out.moved += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_maps_to_a_reason() {
        assert_eq!(failure_of(-libc::EBUSY), MoveFailure::Busy);
        assert_eq!(failure_of(-libc::ENOMEM), MoveFailure::NoSpace);
        assert_eq!(failure_of(-libc::EFAULT), MoveFailure::NotPresent);
        assert_eq!(failure_of(-libc::ENOENT), MoveFailure::NotPresent);
        assert_eq!(failure_of(-libc::EACCES), MoveFailure::Permission);
    }

    #[test]
    fn moving_own_pages_to_their_own_node_succeeds_and_counts_batches() {
        let v = vec![3u8; 64 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let addrs: Vec<u64> = (0..32).map(|i| base + i * 4096).collect();
        let mut here = vec![0i32; addrs.len()];
        numa_sys::query_nodes(0, &addrs, &mut here).unwrap();
        let moves: Vec<PageMove> = addrs
            .iter()
            .zip(&here)
            .enumerate()
            .map(|(i, (&a, &n))| PageMove { addr: a, node: n, tag: i as u32 })
            .collect();
        let opts = MoveOptions { batch_pages: 8, concurrent_batches: 2, ..Default::default() };
        let out = execute(0, &moves, &opts, 4096, "test");
        assert_eq!(out.moved, 32, "{:?}", out.failed);
        assert_eq!(out.batches, 4);
        assert!(v.iter().all(|&b| b == 3));
    }

    #[test]
    fn a_node_that_does_not_exist_fails_every_page_without_harm() {
        let v = vec![5u8; 8 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let moves: Vec<PageMove> =
            (0..4).map(|i| PageMove { addr: base + i * 4096, node: 63, tag: i as u32 }).collect();
        let out = execute(0, &moves, &MoveOptions::default(), 4096, "test");
        assert_eq!(out.moved, 0);
        assert_eq!(out.failed.len(), 4);
        assert!(v.iter().all(|&b| b == 5));
    }

    #[test]
    fn a_guard_is_held_around_every_batch() {
        struct Count(Mutex<Vec<String>>);
        impl CopyGuard for Count {
            fn begin(&self, batch: &[PageMove]) -> Vec<u64> {
                self.0.lock().unwrap().push(format!("begin {}", batch.len()));
                vec![batch.len() as u64]
            }
            fn end(&self, token: &[u64]) {
                self.0.lock().unwrap().push(format!("end {}", token[0]));
            }
        }
        let v = vec![2u8; 16 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let moves: Vec<PageMove> =
            (0..10).map(|i| PageMove { addr: base + i * 4096, node: 63, tag: i as u32 }).collect();
        let guard = Count(Mutex::new(Vec::new()));
        let opts = MoveOptions { batch_pages: 4, ..Default::default() };
        execute_guarded(0, &moves, &opts, 4096, "test", Some(&guard));
        assert_eq!(
            guard.0.into_inner().unwrap(),
            ["begin 4", "end 4", "begin 4", "end 4", "begin 2", "end 2"]
        );
    }

    #[test]
    fn the_rate_limit_paces_batches() {
        let v = vec![1u8; 64 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let addrs: Vec<u64> = (0..40).map(|i| base + i * 4096).collect();
        let mut here = vec![0i32; addrs.len()];
        numa_sys::query_nodes(0, &addrs, &mut here).unwrap();
        let moves: Vec<PageMove> =
            addrs.iter().zip(&here).map(|(&a, &n)| PageMove { addr: a, node: n, tag: 0 }).collect();
        // 40 pages of 4 KiB at 1 MB/s: the last batch may start only after ~0.12 s.
        let opts = MoveOptions { batch_pages: 10, rate_limit_mb_s: Some(1.0), ..Default::default() };
        let out = execute(0, &moves, &opts, 4096, "test");
        assert!(out.elapsed >= Duration::from_millis(120), "{:?}", out.elapsed);
    }
}
