//! Short probes of this host's memory tiers, for `terrace profile measure`: idle and loaded
//! latency by pointer chase ([`latency`]), streaming bandwidth from one and from all cores
//! ([`bandwidth`]), and the cost of move_pages(2) between two nodes ([`migration`]).
//!
//! Every probe binds its memory to one node with mbind(2) before touching it and pins its threads
//! to the CPUs of that node's socket (node 0's for a memory-only node), so the figures are those of
//! the node's memory seen from its nearest cores. No PMU is used: times are wall-clock.

pub mod bandwidth;
pub mod latency;
pub mod migration;

use crate::aligned_mapping::AlignedMapping;
use crate::numa_sys;
use std::io;
use std::time::Duration;

/// Why a probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{what} failed: {source}")]
    Io { what: String, source: io::Error },
    /// A figure outside what memory can do: the probe went wrong, and the profile is not written.
    #[error("implausible measurement: {0}; the profile was not written (run again on an idle host)")]
    Implausible(String),
}

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ProbeError {
    let what = what.into();
    move |source| ProbeError::Io { what, source }
}

const HUGE: usize = 2 << 20;

/// An anonymous mapping bound to one node, 2 MiB-aligned, every page touched there.
pub struct NodeBuffer {
    mapping: AlignedMapping,
}

impl NodeBuffer {
    /// Maps `len` bytes (rounded up to 2 MiB), asks for transparent huge pages when `huge` (so a
    /// random chase measures memory, not page walks, where THP is available), binds the range to
    /// `node` and writes every byte there.
    pub fn new(len: usize, node: u32, huge: bool) -> Result<NodeBuffer, ProbeError> {
        let len = len.div_ceil(HUGE).max(1) * HUGE;
        // A refused advice (THP compiled out) only costs page walks: no error.
        let mapping =
            AlignedMapping::new(len, huge, false).map_err(io_err(format!("mmap of {} MiB", len >> 20)))?;
        numa_sys::mbind(mapping.addr(), len, numa_sys::MPOL_BIND, Some(node), 0)
            .map_err(io_err(format!("mbind to node {node}")))?;
        let mut buffer = NodeBuffer { mapping };
        buffer.words_mut().fill(1);
        Ok(buffer)
    }

    pub fn len(&self) -> usize {
        self.mapping.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mapping.is_empty()
    }

    pub fn addr(&self) -> usize {
        self.mapping.addr()
    }

    /// Bytes of the buffer in transparent huge pages ([`AlignedMapping::huge_bytes`]).
    pub fn huge_bytes(&self) -> std::io::Result<u64> {
        self.mapping.huge_bytes()
    }

    /// The buffer as 64-bit words.
    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is 2 MiB-aligned (so 8-byte aligned) and a whole number of pages.
        let (head, words, tail) = unsafe { self.mapping.bytes_mut().align_to_mut::<u64>() };
        debug_assert!(head.is_empty() && tail.is_empty());
        words
    }

    /// The buffer as 64-bit words, read-only (shared by a chase and its streamers).
    pub fn words(&self) -> &[u64] {
        // SAFETY: as words_mut.
        let (head, words, tail) = unsafe { self.mapping.bytes().align_to::<u64>() };
        debug_assert!(head.is_empty() && tail.is_empty());
        words
    }
}

/// CPU time the calling thread has run. Probes time themselves with it rather than the wall
/// clock, so time the thread spent descheduled (other programs on a busy host, a VM's vCPU
/// stolen) does not count as memory latency.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: u32) -> Result<(), ProbeError> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t; the index is checked against its size by the macro.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: `set` is a valid, initialised cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(io_err(format!("pinning a probe thread to CPU {cpu}"))(io::Error::last_os_error()));
    }
    Ok(())
}

/// The calling thread's CPU affinity, to restore after a probe pinned it.
pub fn current_affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` has the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    (r == 0).then_some(set)
}

/// Those of `cpus` this process may run on (a cpuset or `taskset` may allow fewer).
pub fn allowed_cpus(cpus: &[u32]) -> Vec<u32> {
    let Some(set) = current_affinity() else { return cpus.to_vec() };
    let allowed = |c: u32| {
        // SAFETY: CPU_ISSET reads one bit of a valid cpu_set_t; the index is below its size.
        (c as usize) < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(c as usize, &set) }
    };
    cpus.iter().copied().filter(|&c| allowed(c)).collect()
}

/// Restores an affinity from [`current_affinity`].
pub fn restore_affinity(set: &libc::cpu_set_t) {
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
}

/// A small, fast generator for the chase's permutation (splitmix64): statistical quality is all
/// a shuffle needs, and it keeps the probe free of any seeding API.
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by the multiply-shift method.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// The last-level cache's size from sysfs (the largest `size` under cpu0's cache), if readable.
pub fn last_level_cache_bytes() -> Option<u64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| parse_cache_size(s.trim()))
        .max()
}

/// "2048K", "32M", "512" -> bytes.
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let scale = match unit {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        _ => return None,
    };
    Some(n * scale)
}

/// MemAvailable from /proc/meminfo, bytes.
pub fn mem_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// How long and how large the probes of one node are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// The node's buffer: the chase's footprint, shared by the streaming threads.
    pub buffer_bytes: usize,
    /// Timed part of each probe.
    pub probe_time: Duration,
}

/// What the probes found on one node, seen from `cpus`.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFigures {
    pub node: u32,
    /// The CPUs the probes ran on (the first runs the chase and the one-thread streams).
    pub cpus: Vec<u32>,
    pub buffer_bytes: usize,
    /// Whether the kernel backed the buffer with transparent huge pages (else the random chase
    /// pays page walks too).
    pub huge_pages: bool,
    pub random_ns: f64,
    pub sequential_ns: f64,
    /// The chase's latency while the other CPUs read, and the bandwidth reached meanwhile;
    /// `None` with one CPU.
    pub loaded: Option<(f64, f64)>,
    pub read_one_gb_s: f64,
    pub read_all_gb_s: f64,
    pub write_one_gb_s: f64,
    pub write_all_gb_s: f64,
}

/// Runs every probe of `node` from `cpus` (at least one), telling `step` what runs next.
pub fn measure_node(
    node: u32,
    cpus: &[u32],
    settings: &Settings,
    step: &mut dyn FnMut(&str),
) -> Result<NodeFigures, ProbeError> {
    let restore = current_affinity();
    let result = measure_pinned(node, cpus, settings, step);
    if let Some(set) = restore {
        restore_affinity(&set);
    }
    result
}

fn measure_pinned(
    node: u32,
    cpus: &[u32],
    settings: &Settings,
    step: &mut dyn FnMut(&str),
) -> Result<NodeFigures, ProbeError> {
    let time = settings.probe_time;
    pin_to_cpu(cpus[0])?;
    step(&format!("node {node}: {} MiB buffer", settings.buffer_bytes >> 20));
    let mut buffer = NodeBuffer::new(settings.buffer_bytes, node, true)?;
    let huge_pages = buffer.huge_bytes().is_ok_and(|huge| huge * 2 >= buffer.len() as u64);
    step(&format!("node {node}: random pointer chase"));
    let start = latency::link_random(buffer.words_mut(), 0x7e77ace ^ u64::from(node));
    let lines = (buffer.len() / 64) as u64;
    let random_ns = latency::chase(buffer.words(), start, lines.min(1 << 20), time);
    let loaded = if cpus.len() > 1 {
        step(&format!("node {node}: chase while {} other CPU(s) stream", cpus.len() - 1));
        Some(latency::loaded(&buffer, start, cpus[0], &cpus[1..], time)?)
    } else {
        None
    };
    pin_to_cpu(cpus[0])?;
    step(&format!("node {node}: sequential chase"));
    let start = latency::link_sequential(buffer.words_mut());
    let sequential_ns = latency::chase(buffer.words(), start, lines.min(1 << 20), time);
    use bandwidth::Direction::{Read, Write};
    step(&format!("node {node}: read bandwidth"));
    let read_one_gb_s = bandwidth::stream(buffer.words_mut(), &cpus[..1], Read, time)?;
    let read_all_gb_s =
        if cpus.len() > 1 { bandwidth::stream(buffer.words_mut(), cpus, Read, time)? } else { read_one_gb_s };
    step(&format!("node {node}: write bandwidth"));
    let write_one_gb_s = bandwidth::stream(buffer.words_mut(), &cpus[..1], Write, time)?;
    let write_all_gb_s = if cpus.len() > 1 {
        bandwidth::stream(buffer.words_mut(), cpus, Write, time)?
    } else {
        write_one_gb_s
    };
    Ok(NodeFigures {
        node,
        cpus: cpus.to_vec(),
        buffer_bytes: buffer.len(),
        huge_pages,
        random_ns,
        sequential_ns,
        loaded,
        read_one_gb_s,
        read_all_gb_s,
        write_one_gb_s,
        write_all_gb_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_with_their_units() {
        assert_eq!(parse_cache_size("48K"), Some(48 << 10));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("x"), None);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix(7);
        assert!((0..1000).all(|_| r.below(3) < 3));
    }
}
