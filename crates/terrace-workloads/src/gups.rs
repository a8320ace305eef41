//! GUPS with a hot set, as HPWP runs it (HPWP thesis §6.2).
//!
//! Seed setup: 16 threads, 8-byte elements, a 128 GB working set with an 8 GB hot set chosen at
//! random, 90% of each thread's updates uniform over the hot set and 10% uniform over the rest,
//! 10^9 read-modify-write updates per thread, 48 GB of DRAM. Terrace divides every size by 1024
//! (GB -> MB) and keeps updates per page equal to the seed's, so a policy sees the same
//! per-page heat, in a run a simulator finishes in seconds.

use crate::phases::{append_slots, Generator, Phase, PhaseFill, Step, Sweep, LINE};
use crate::registry::{scaled_bytes, scaled_count, seed_info, SEED_SCALE};
use crate::rng::Rng;
use crate::WorkloadError;
use terrace_model::{Access, PageSize};

/// HPWP §6.2: 16 threads.
const THREADS: u32 = 16;
/// HPWP §6.2: 8-byte objects.
const ELEMENT: u64 = 8;
/// HPWP §6.2: 128 GB working set, scaled GB -> MB.
const WORKING_SET: u64 = 128 << 20;
/// HPWP §6.2 / Fig 4-5: 48 GB DRAM, scaled GB -> MB.
const FAST_BYTES: u64 = 48 << 20;
/// HPWP §6.2: 10^9 updates per thread at full size; divided by the same 1024 as the sizes.
const SEED_UPDATES_PER_THREAD: f64 = 1e9;
/// The largest page a policy moves, which the hot set starts on.
const HUGE_PAGE: u64 = PageSize::Huge2M.bytes();
/// HPWP §6.2: 90% of updates go to the hot set.
const HOT_SHARE: f64 = 0.9;
/// An update is ~8 instructions (index generation, the xor, loop control), split evenly
/// between its read and its write.
const UPDATE_INSTRUCTIONS: u32 = 4;
/// Initialisation stores 8 elements per line, about one instruction each.
const INIT_INSTRUCTIONS: u32 = 8;

/// Builds GUPS with a hot set of `hot_mib` MiB (8 in the seed's main experiments; the 16, 32 and
/// 64 MiB variants are for hot-set sweeps like the seed's Fig 8, which spans the 48 MiB fast tier).
pub(crate) fn build(
    name: &str,
    hot_mib: u64,
    seed: u64,
    size_scale: f64,
) -> Result<Generator, WorkloadError> {
    build_with_hot_set(name, hot_mib, seed, size_scale).map(|(g, _)| g)
}

/// [`build`], and where the hot set is: its byte range.
fn build_with_hot_set(
    name: &str,
    hot_mib: u64,
    seed: u64,
    size_scale: f64,
) -> Result<(Generator, std::ops::Range<u64>), WorkloadError> {
    let footprint = scaled_bytes(name, WORKING_SET, size_scale, THREADS)?;
    let elements = footprint / ELEMENT;
    let hot_elements = (scaled_count((hot_mib << 20) as f64, size_scale) / ELEMENT).clamp(1, elements);
    let mut rng = Rng::new(seed);
    // At random on a huge-page boundary: the seed's 8 GB hot set spans 4,096 huge pages, so where
    // within one it starts moves a negligible share of it; scaled to 8 MiB it spans 4, and a start
    // within one would leave up to a quarter of it on huge pages shared with cold elements, which
    // a 2 MiB policy sees as one warm page (docs/workloads.md, "Where the hot set starts").
    // A footprint with no room for two starts on boundaries keeps the element as the unit.
    let align = if elements - hot_elements >= HUGE_PAGE / ELEMENT { HUGE_PAGE / ELEMENT } else { 1 };
    let hot_start = rng.below((elements - hot_elements) / align + 1) * align;
    let updates_per_thread = scaled_count(SEED_UPDATES_PER_THREAD / SEED_SCALE, size_scale);

    let init = Sweep::new(footprint / LINE, THREADS, vec![Step::write(0, INIT_INSTRUCTIONS)], 1, true);
    let updates = GupsUpdates {
        rng,
        hot_start,
        hot_elements,
        rest_elements: elements - hot_elements,
        pending: vec![0; THREADS as usize],
        next_thread: 0,
        writing: false,
        remaining: 2 * updates_per_thread * u64::from(THREADS),
    };
    let info = seed_info(
        name,
        format!(
            "GUPS (HPWP §6.2): {THREADS} threads, 8-byte read-modify-writes, 90% to a \
         {} MiB hot set",
            hot_mib
        ),
        footprint,
        THREADS,
        FAST_BYTES,
        size_scale,
    );
    let hot = updates.hot_range_bytes();
    Ok((Generator::new(info, vec![Phase::Sweep(init), Phase::Custom(Box::new(updates))]), hot))
}

/// The update phase: each thread reads a random element, then writes it back.
///
/// Threads take turns one access at a time, so a round emits every thread's read and the next
/// round every thread's write of the same element.
struct GupsUpdates {
    rng: Rng,
    /// The hot set, in elements: `[hot_start, hot_start + hot_elements)`.
    hot_start: u64,
    hot_elements: u64,
    rest_elements: u64,
    /// Per thread, the address its pending write goes to.
    pending: Vec<u64>,
    next_thread: usize,
    /// Whether the current round is the writes' round.
    writing: bool,
    remaining: u64,
}

impl GupsUpdates {
    /// The element one update goes to.
    #[inline(always)]
    fn pick(&mut self) -> u64 {
        if self.rest_elements == 0 || self.rng.unit_f64() < HOT_SHARE {
            self.hot_start + self.rng.below(self.hot_elements)
        } else {
            // Uniform over the elements outside the hot set: skip over it.
            let e = self.rng.below(self.rest_elements);
            if e < self.hot_start {
                e
            } else {
                e + self.hot_elements
            }
        }
    }

    fn hot_range_bytes(&self) -> std::ops::Range<u64> {
        self.hot_start * ELEMENT..(self.hot_start + self.hot_elements) * ELEMENT
    }
}

impl PhaseFill for GupsUpdates {
    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.remaining) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let threads = self.pending.len();
        for out in &mut buf[start..] {
            let t = self.next_thread;
            if self.writing {
                let addr = self.pending[t];
                *out = Access::write(addr, ELEMENT as u16, t as u8, UPDATE_INSTRUCTIONS);
            } else {
                let addr = self.pick() * ELEMENT;
                self.pending[t] = addr;
                *out = Access::read(addr, ELEMENT as u16, t as u8, UPDATE_INSTRUCTIONS);
            }
            if crate::turns::pass(&mut self.next_thread, threads) {
                self.writing = !self.writing;
            }
        }
        self.remaining -= n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccessSource;
    use terrace_model::AccessKind;

    /// The generator and its hot range (read from the update phase before running).
    fn gups(hot_mib: u64, seed: u64, scale: f64) -> (Generator, std::ops::Range<u64>) {
        build_with_hot_set("gups", hot_mib, seed, scale).unwrap()
    }

    #[test]
    fn default_size_matches_the_scaled_seed() {
        let (g, hot) = gups(8, 1, 1.0);
        let info = g.info();
        assert_eq!(info.footprint_bytes, 128 << 20);
        assert_eq!(info.suggested_fast_bytes, 48 << 20);
        assert_eq!(hot.end - hot.start, 8 << 20);
        assert_eq!(hot.start % ELEMENT, 0);
        assert!(hot.end <= info.footprint_bytes);
        // 2M init lines + 16 threads x 976,563 updates x 2 accesses.
        assert_eq!(info.accesses, (128 << 20) / 64 + 16 * 976_563 * 2);
    }

    #[test]
    fn the_hot_set_starts_on_a_huge_page_at_random() {
        // Scaled to 8 MiB the hot set spans 4 huge pages: a start within one would leave part of
        // it on a huge page shared with cold elements, as the seed's 8 GB hot set never is.
        let starts: std::collections::HashSet<u64> = (1..=40)
            .map(|seed| {
                let (g, hot) = gups(8, seed, 1.0);
                assert_eq!(hot.start % HUGE_PAGE, 0, "seed {seed}: hot set at {:#x}", hot.start);
                assert!(hot.end <= g.info().footprint_bytes);
                hot.start
            })
            .collect();
        // 61 boundaries leave room for 8 MiB in 128 MiB: the seeds spread over them.
        assert!(starts.len() >= 20, "only {} starts over 40 seeds", starts.len());
        assert!(starts.iter().any(|&s| s < (16 << 20)));
        assert!(starts.iter().any(|&s| s >= (104 << 20)));
        // A footprint smaller than a huge page keeps the hot set inside it.
        let (g, hot) = gups(8, 7, 1.0 / 256.0);
        assert!(hot.start < hot.end && hot.end <= g.info().footprint_bytes);
    }

    #[test]
    fn hot_share_and_read_write_balance() {
        let (mut g, hot) = gups(8, 3, 1.0 / 16.0);
        let init = g.info().footprint_bytes / LINE;
        let mut buf = Vec::new();
        let (mut seen, mut in_hot, mut reads, mut writes) = (0u64, 0u64, 0u64, 0u64);
        loop {
            buf.clear();
            if g.fill(&mut buf, 1 << 16) == 0 {
                break;
            }
            for a in &buf {
                seen += 1;
                if seen <= init {
                    assert_eq!(a.kind, AccessKind::Write);
                    continue;
                }
                in_hot += u64::from(hot.contains(&a.addr));
                match a.kind {
                    AccessKind::Read => reads += 1,
                    AccessKind::Write => writes += 1,
                }
            }
        }
        let share = in_hot as f64 / (reads + writes) as f64;
        assert!((share - 0.9).abs() < 0.01, "hot share {share}");
        assert_eq!(reads, writes);
    }

    #[test]
    fn each_write_follows_its_threads_read_of_the_same_element() {
        let (mut g, _) = gups(8, 5, 1.0 / 64.0);
        let mut all = Vec::new();
        while g.fill(&mut all, 1000) > 0 {}
        let init = (g.info().footprint_bytes / LINE) as usize;
        let updates = &all[init..];
        for round in updates.chunks(2 * THREADS as usize) {
            let (reads, writes) = round.split_at(THREADS as usize);
            for (t, (r, w)) in reads.iter().zip(writes).enumerate() {
                assert_eq!((r.kind, w.kind), (AccessKind::Read, AccessKind::Write));
                assert_eq!((r.thread as usize, w.thread as usize), (t, t));
                assert_eq!(r.addr, w.addr);
                assert_eq!(r.size, 8);
            }
        }
    }
}
