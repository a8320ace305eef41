//! A FlexKVS-like key-value store with a hot set, as HPWP evaluates it (HPWP thesis §6.3).
//!
//! Seed setup: FlexKVS (Memcache-compatible, per-core logs, block-chained hash table), 8 server
//! threads, 4 KB key-value pairs, a 200 GB working set with a 40 GB hot set carrying 90% of
//! requests, 48 GB of DRAM, throughput over several GET:SET mixes (not listed). Terrace divides
//! sizes by 1024 and sweeps SET shares of 10-90%.
//!
//! Within the hot set and within the rest, keys are Zipf-distributed with exponent 0.99 (YCSB's
//! default; HPWP gives no distribution within the sets). Keys are scattered over the item slots
//! (a seeded permutation), as hashing scatters them. A GET reads the key's bucket line and the
//! whole 4 KiB item (the value is sent, so every line is read); a SET reads the bucket, writes
//! the whole item, and appends a 64-byte record to the serving thread's log.

use crate::phases::{append_slots, Generator, Phase, PhaseFill, Step, Sweep, LINE};
use crate::pmbench::alias_table;
use crate::registry::{scaled_bytes, seed_info};
use crate::rng::Rng;
use crate::WorkloadError;
use terrace_model::Access;

/// HPWP §6.3: the FlexKVS server runs 8 threads.
const THREADS: u32 = 8;
/// HPWP §6.3: 200 GB working set, scaled GB -> MB.
const WORKING_SET: u64 = 200 << 20;
/// HPWP §6.3: 40 GB hot set (a fifth of the working set) carrying 90% of requests.
const HOT_NUM: u64 = 40;
const HOT_DEN: u64 = 200;
pub(crate) const HOT_SHARE: f64 = 0.9;
/// HPWP §6.1: 48 GB of DRAM, scaled GB -> MB.
const FAST_BYTES: u64 = 48 << 20;
/// HPWP §6.3: 4 KB items.
const ITEM: u64 = 4096;
/// A hash-table entry (key hash, item pointer): four to a 64-byte bucket line.
const ENTRY: u64 = 16;
/// Per-core logs take 1/64 of the working set (a few thousand records per thread at full size).
const LOG_SHARE: u64 = 64;
/// YCSB's Zipf constant.
pub(crate) const ZIPF_EXPONENT: f64 = 0.99;
/// As pmbench: 256 accesses per page of the footprint.
const ACCESSES_PER_PAGE: u64 = 256;
/// FlexKVS spends ~1,500 instructions a request (parsing, hashing, the network stack), spread
/// over its ~66 line accesses.
const INSTRUCTIONS: u32 = 24;

pub(crate) const SET_PERCENTS: [u32; 5] = [10, 30, 50, 70, 90];

pub(crate) fn summary(set_percent: u32) -> String {
    format!(
        "FlexKVS-like store (HPWP §6.3), 8 threads, 200 MiB of 4 KiB items, 90% of requests to a \
         40 MiB Zipf hot set, {}% GETs / {set_percent}% SETs",
        100 - set_percent
    )
}

/// Where things are: items from 0, then the hash table, then the per-thread logs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub(crate) items: u64,
    pub(crate) hot_items: u64,
    pub(crate) table: u64,
    pub(crate) buckets: u64,
    pub(crate) log: u64,
    pub(crate) log_lines: u64,
}

impl Layout {
    fn new(footprint: u64) -> Self {
        let log_bytes = footprint / LOG_SHARE / LINE * LINE;
        let items = (footprint - log_bytes - LINE) / (ITEM + ENTRY);
        let buckets = (items * ENTRY).div_ceil(LINE);
        let table = items * ITEM;
        let log = table + buckets * LINE;
        Layout {
            items,
            hot_items: (items * HOT_NUM / HOT_DEN).max(1),
            table,
            buckets,
            log,
            log_lines: (footprint - log) / LINE,
        }
    }
}

pub(crate) fn build(
    name: &str,
    set_percent: u32,
    seed: u64,
    size_scale: f64,
) -> Result<Generator, WorkloadError> {
    let footprint = scaled_bytes(name, WORKING_SET, size_scale, THREADS)?;
    let layout = Layout::new(footprint);
    // Loading the store writes it in address order (items appended as the client inserts them).
    let init = Sweep::new(footprint / LINE, THREADS, vec![Step::write(0, INSTRUCTIONS)], 1, false);
    let total = ACCESSES_PER_PAGE * (footprint / 4096);
    let requests = Requests::new(layout, f64::from(set_percent) / 100.0, total, seed);
    let info = seed_info(
        name,
        format!(
            "FlexKVS-like key-value store (HPWP §6.3): {THREADS} threads, {} items of 4 KiB, 90% of \
         requests to a Zipf({ZIPF_EXPONENT}) hot fifth, {set_percent}% SETs",
            layout.items
        ),
        footprint,
        THREADS,
        FAST_BYTES,
        size_scale,
    );
    Ok(Generator::new(info, vec![Phase::Sweep(init), Phase::Custom(Box::new(requests))]))
}

/// Zipf(s) weights of ranks 1..=n.
fn zipf_weights(n: u64, s: f64) -> Vec<f64> {
    (1..=n).map(|r| (r as f64).powf(-s)).collect()
}

#[derive(Clone, Copy, Debug)]
struct KvCursor {
    left: u64,
    /// Item lines still to access in the current request; 0 = start a new one.
    line: u64,
    item: u64,
    set: bool,
    /// The log record still to append after the item.
    log_pending: bool,
    log_next: u64,
    log_first: u64,
    log_end: u64,
}

/// The request stream: each server thread serves one request after another; threads take turns
/// one access at a time. The stream ends after exactly its share of accesses per thread (the
/// last request may be cut short).
pub(crate) struct Requests {
    layout: Layout,
    rng: Rng,
    /// Alias tables (threshold out of 2^32, alias) over the hot ranks and the cold ranks.
    hot: Vec<(u32, u32)>,
    cold: Vec<(u32, u32)>,
    /// Rank -> item slot: hot ranks first, then cold.
    slot: Vec<u32>,
    hot_threshold: u64,
    set_threshold: u64,
    cursors: Vec<KvCursor>,
    next_thread: usize,
    remaining: u64,
}

impl Requests {
    fn new(layout: Layout, set_share: f64, total: u64, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let table = |n: u64| {
            let (prob, alias) = alias_table(&zipf_weights(n, ZIPF_EXPONENT));
            prob.into_iter().zip(alias).collect::<Vec<_>>()
        };
        let hot = table(layout.hot_items);
        let cold = table((layout.items - layout.hot_items).max(1));
        // Fisher-Yates with the seeded generator.
        let mut slot: Vec<u32> = (0..layout.items as u32).collect();
        for i in (1..slot.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            slot.swap(i, j);
        }
        let t = u64::from(THREADS);
        let cursors = (0..t)
            .map(|i| {
                let (first, end) = (i * layout.log_lines / t, (i + 1) * layout.log_lines / t);
                KvCursor {
                    left: total / t + u64::from(i < total % t),
                    line: 0,
                    item: 0,
                    set: false,
                    log_pending: false,
                    log_next: first,
                    log_first: first,
                    log_end: end.max(first + 1),
                }
            })
            .collect();
        Requests {
            layout,
            rng,
            hot,
            cold,
            slot,
            hot_threshold: (HOT_SHARE * 4_294_967_296.0) as u64,
            set_threshold: (set_share * 4_294_967_296.0) as u64,
            cursors,
            next_thread: 0,
            remaining: total,
        }
    }

    /// A key's item slot.
    #[inline(always)]
    fn pick(&mut self) -> (u64, bool) {
        let x = self.rng.next_u64();
        let y = self.rng.next_u64();
        let hot = (y & 0xffff_ffff) < self.hot_threshold || self.layout.items == self.layout.hot_items;
        let (table, offset) = if hot { (&self.hot, 0) } else { (&self.cold, self.layout.hot_items) };
        let s = (((x >> 32) * table.len() as u64) >> 32) as usize;
        let (accept, alias) = table[s];
        let rank = if (x as u32) < accept { s as u64 } else { u64::from(alias) };
        (u64::from(self.slot[(offset + rank) as usize]), (y >> 32) < self.set_threshold)
    }

    /// The bucket line holding an item's entry: a hash of its slot.
    #[inline(always)]
    fn bucket(&self, item: u64) -> u64 {
        let h = item.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((u128::from(h) * u128::from(self.layout.buckets)) >> 64) as u64
    }

    #[cfg(test)]
    pub(crate) fn hot_slots(&self) -> std::collections::HashSet<u64> {
        self.slot[..self.layout.hot_items as usize].iter().map(|&s| u64::from(s)).collect()
    }
}

impl PhaseFill for Requests {
    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.remaining) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let threads = self.cursors.len();
        let l = self.layout;
        let lines_per_item = ITEM / LINE;
        for out in &mut buf[start..] {
            while self.cursors[self.next_thread].left == 0 {
                crate::turns::pass(&mut self.next_thread, threads);
            }
            let t = self.next_thread;
            let mut c = self.cursors[t];
            let th = t as u8;
            *out = if c.line > 0 {
                let addr = c.item * ITEM + (lines_per_item - c.line) * LINE;
                c.line -= 1;
                if c.set {
                    Access::write(addr, LINE as u16, th, INSTRUCTIONS)
                } else {
                    Access::read(addr, LINE as u16, th, INSTRUCTIONS)
                }
            } else if c.log_pending {
                c.log_pending = false;
                let addr = l.log + c.log_next * LINE;
                c.log_next = if c.log_next + 1 == c.log_end { c.log_first } else { c.log_next + 1 };
                Access::write(addr, LINE as u16, th, INSTRUCTIONS)
            } else {
                // A new request: look the key up.
                let (item, set) = self.pick();
                (c.item, c.set, c.line, c.log_pending) = (item, set, lines_per_item, set);
                Access::read(l.table + self.bucket(item) * LINE, LINE as u16, th, INSTRUCTIONS)
            };
            c.left -= 1;
            self.cursors[t] = c;
            crate::turns::pass(&mut self.next_thread, threads);
        }
        self.remaining -= n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::AccessKind;

    #[test]
    fn layout_fits_and_follows_hpwp() {
        let l = Layout::new(WORKING_SET);
        assert!(l.log + l.log_lines * LINE <= WORKING_SET);
        assert!(l.table >= l.items * ITEM && l.log >= l.table + l.items * ENTRY);
        assert_eq!(l.hot_items, l.items / 5);
        assert!(l.items > 50_000);
        assert!(l.log_lines >= u64::from(THREADS));
    }

    /// Requests (counted at each request's first item line), hot ones, SETs, and the
    /// most-requested slot's count.
    fn measure(set_percent: u32) -> (u64, u64, u64, u64) {
        let footprint = WORKING_SET / 4;
        let l = Layout::new(footprint);
        let mut r = Requests::new(l, f64::from(set_percent) / 100.0, 4_000_000, 7);
        let hot = r.hot_slots();
        let mut counts = vec![0u64; l.items as usize];
        let (mut requests, mut in_hot, mut sets) = (0u64, 0u64, 0u64);
        let mut buf = Vec::new();
        while {
            buf.clear();
            r.fill(&mut buf, 1 << 16) > 0
        } {
            for a in &buf {
                assert!(a.addr < footprint);
                if a.addr < l.table && a.addr % ITEM == 0 {
                    let item = a.addr / ITEM;
                    requests += 1;
                    in_hot += u64::from(hot.contains(&item));
                    sets += u64::from(a.kind == AccessKind::Write);
                    counts[item as usize] += 1;
                }
            }
        }
        (requests, in_hot, sets, *counts.iter().max().unwrap())
    }

    #[test]
    fn hot_set_share_and_set_share_match() {
        for p in SET_PERCENTS {
            let (n, hot, sets, top) = measure(p);
            let hot_share = hot as f64 / n as f64;
            let set_share = sets as f64 / n as f64;
            assert!((hot_share - 0.9).abs() < 0.01, "hot share {hot_share}");
            assert!((set_share - f64::from(p) / 100.0).abs() < 0.01, "set share {set_share} for {p}");
            // Zipf: the top key gets far more than the hot set's uniform share.
            assert!(top as f64 > 20.0 * 0.9 * n as f64 / (Layout::new(WORKING_SET / 4).hot_items as f64));
        }
    }

    #[test]
    fn a_set_writes_the_item_and_appends_to_its_threads_log() {
        let l = Layout::new(WORKING_SET / 16);
        let mut r = Requests::new(l, 1.0, 10_000, 3);
        let mut buf = Vec::new();
        r.fill(&mut buf, 10_000);
        let t0: Vec<&Access> = buf.iter().filter(|a| a.thread == 0).collect();
        // Bucket read, 64 item writes in order, one log write; then the next request.
        assert!(t0[0].kind == AccessKind::Read && t0[0].addr >= l.table && t0[0].addr < l.log);
        let item = t0[1].addr / ITEM;
        for (i, a) in t0[1..65].iter().enumerate() {
            assert_eq!((a.kind, a.addr), (AccessKind::Write, item * ITEM + i as u64 * LINE));
        }
        assert!(t0[65].kind == AccessKind::Write && t0[65].addr >= l.log);
        assert_eq!(t0[66].kind, AccessKind::Read);
        assert_eq!(t0[131].addr, t0[65].addr + LINE);
    }
}
