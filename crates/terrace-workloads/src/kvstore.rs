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
//! whole 4 KiB item (the value is sent, so every line is read). The store is log-structured, as
//! FlexKVS's item allocator is (`ialloc.c`): a SET appends the new item at the head of its thread's
//! log, in the thread's current 2 MiB segment, and writes the key's hash-table entry in place; the
//! old version's slot is freed. A full segment is left behind and the thread takes a free one; a
//! cleaner keeps free segments in stock by re-appending the live items of the segment with the
//! most freed slots (FlexKVS cleans segments at least 80% freed, most freed first).

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

/// FlexKVS's log segment (`settings.segsize`, 2 MiB): a SET appends its item to its thread's
/// current segment; a full segment is left behind and the thread takes a free one.
const SEGMENT: u64 = 2 << 20;
/// The log's room beyond the items: a quarter more slots than the working set fills, so the log
/// runs at 80% utilisation. A log-structured store needs free space to append while its cleaner
/// frees segments; HPWP gives the working set (200 GB) but not FlexKVS's memory setting, so this
/// is our choice: log-structured memory is run at 80-90% utilisation (RAMCloud, Rumble et al.,
/// FAST 2014), and we take the roomier end (docs/workloads.md). The footprint is the log and the
/// hash table.
const SLACK_DEN: u64 = 4;
/// Free segments below which a thread cleans one segment after its request.
const LOW_WATER: usize = THREADS as usize + 1;
/// Segments kept out of the keys' reach at load: every thread's first segment and the low water.
const RESERVE: u64 = 2 * THREADS as u64 + 1;
/// FlexKVS's cleaner takes a segment once at least 80% of it is freed (`ialloc_maintenance`),
/// the most freed first.
const CLEAN_FREED: f64 = 0.8;

/// Where things are: the log's segments from 0, then the hash table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    /// Keys in the store.
    pub(crate) items: u64,
    pub(crate) hot_items: u64,
    /// Item slots per segment, and segments.
    pub(crate) per_segment: u64,
    pub(crate) segments: u64,
    pub(crate) table: u64,
    pub(crate) buckets: u64,
}

impl Layout {
    /// The store of a `working_set` of items (keys x 4 KiB).
    fn new(working_set: u64) -> Self {
        let keys = (working_set / ITEM).max(1);
        let slots = keys + keys / SLACK_DEN;
        // FlexKVS's 2 MiB segments; a smaller store gets smaller ones, so that its room holds
        // the reserve, of a size that divides the log, so the footprint scales with the size.
        let most = (SEGMENT / ITEM).min(keys / SLACK_DEN / RESERVE).max(1);
        let per_segment = (1..=most).rev().find(|&d| slots.is_multiple_of(d)).unwrap_or(1);
        // A store too small even for that gets the reserve beyond its keys anyway.
        let segments = (slots / per_segment).max(keys.div_ceil(per_segment) + RESERVE);
        let table = segments * per_segment * ITEM;
        let buckets = (keys * ENTRY).div_ceil(LINE);
        Layout {
            items: keys,
            hot_items: (keys * HOT_NUM / HOT_DEN).max(1),
            per_segment,
            segments,
            table,
            buckets,
        }
    }

    /// Bytes of the log and the hash table.
    fn footprint(&self) -> u64 {
        self.table + self.buckets * LINE
    }
}

pub(crate) fn build(
    name: &str,
    set_percent: u32,
    seed: u64,
    size_scale: f64,
) -> Result<Generator, WorkloadError> {
    let layout = Layout::new(scaled_bytes(name, WORKING_SET, size_scale, THREADS)?);
    let footprint = layout.footprint();
    // Loading the store appends the items in order, from the log's start, and fills the table;
    // the log's free segments are first touched when a thread appends to them (FlexKVS maps a
    // segment when it first allocates it).
    let load = Sweep::new(layout.items * ITEM / LINE, THREADS, vec![Step::write(0, INSTRUCTIONS)], 1, false);
    let table = Sweep::new(layout.buckets, THREADS, vec![Step::write(layout.table, INSTRUCTIONS)], 1, false);
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
    Ok(Generator::new(info, vec![Phase::Sweep(load), Phase::Sweep(table), Phase::Custom(Box::new(requests))]))
}

/// Zipf(s) weights of ranks 1..=n.
fn zipf_weights(n: u64, s: f64) -> Vec<f64> {
    (1..=n).map(|r| (r as f64).powf(-s)).collect()
}

/// A free item slot.
const FREE: u32 = u32::MAX;

/// The log's state: which key each slot holds, where each key's item is, and the segments'.
struct Log {
    per_segment: u32,
    /// Slot -> key, or FREE.
    key_at: Vec<u32>,
    /// Key -> slot of its item.
    slot_of: Vec<u32>,
    /// Live items per segment.
    live: Vec<u32>,
    /// Whether a segment is a thread's current one (appended to, never cleaned).
    current: Vec<bool>,
    /// Segments with every slot free; the last freed is taken first, as FlexKVS's free list.
    free: Vec<u32>,
}

impl Log {
    /// The store after its load: key `k` at slot `load[k]`, the slots from the keys' count on free.
    fn new(layout: &Layout, load: &[u32]) -> Self {
        let per_segment = layout.per_segment as u32;
        let (slots, segments) = ((layout.segments * layout.per_segment) as usize, layout.segments as usize);
        let mut key_at = vec![FREE; slots];
        let mut live = vec![0u32; segments];
        for (k, &s) in load.iter().enumerate() {
            key_at[s as usize] = k as u32;
            live[(s / per_segment) as usize] += 1;
        }
        let free = (0..segments as u32).rev().filter(|&g| live[g as usize] == 0).collect();
        Log { per_segment, key_at, slot_of: load.to_vec(), live, current: vec![false; segments], free }
    }

    fn segment(&self, slot: u32) -> usize {
        (slot / self.per_segment) as usize
    }

    /// Frees `slot` (its key has a newer version, or moved); a segment left with no live item
    /// and not a thread's current one is free again.
    fn kill(&mut self, slot: u32) {
        let g = self.segment(slot);
        self.key_at[slot as usize] = FREE;
        self.live[g] -= 1;
        if self.live[g] == 0 && !self.current[g] {
            self.free.push(g as u32);
        }
    }

    fn place(&mut self, key: u32, slot: u32) {
        self.key_at[slot as usize] = key;
        self.slot_of[key as usize] = slot;
        let g = self.segment(slot);
        self.live[g] += 1;
    }

    /// The next slot at the head of a thread's log (`head`: its current segment and the slots
    /// used in it), taking a free segment when the current one is full.
    fn append(&mut self, head: &mut (u32, u32)) -> u32 {
        if head.1 == self.per_segment {
            let old = head.0 as usize;
            self.current[old] = false;
            if self.live[old] == 0 {
                self.free.push(old as u32);
            }
            *head = (self.take_free(), 0);
        }
        head.1 += 1;
        head.0 * self.per_segment + head.1 - 1
    }

    fn take_free(&mut self) -> u32 {
        // The cleaner keeps LOW_WATER segments free and each clean frees more than it uses, so
        // the list never runs dry (tested at every SET share).
        let g = self.free.pop().expect("the cleaner keeps free segments in stock");
        self.current[g as usize] = true;
        g
    }

    /// The segment to clean: not current, not free, the most slots freed.
    fn victim(&self) -> Option<usize> {
        (0..self.live.len())
            .filter(|&g| !self.current[g] && self.live[g] > 0 && self.live[g] < self.per_segment)
            .min_by_key(|&g| self.live[g])
    }
}

/// One server thread: its share of accesses still to make, the accesses of its current request
/// (and any cleaning after it) not yet made, and its log head.
struct Server {
    left: u64,
    pending: Vec<Access>,
    next: usize,
    head: (u32, u32),
}

/// What the stream did, for tests and docs/workloads.md.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KvCounts {
    pub(crate) requests: u64,
    pub(crate) hot: u64,
    pub(crate) sets: u64,
    /// Segments cleaned, items the cleaner moved, and cleans of a segment less than 80% freed
    /// (FlexKVS would wait for one; here the cleaner takes the most freed it has).
    pub(crate) cleaned: u64,
    pub(crate) moved: u64,
    pub(crate) below_threshold: u64,
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
    hot_threshold: u64,
    set_threshold: u64,
    log: Log,
    servers: Vec<Server>,
    next_thread: usize,
    remaining: u64,
    pub(crate) counts: KvCounts,
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
        // The load appends the keys in a seeded random order (hashing scatters them): key k (its
        // rank, hot ranks first) at slot load[k].
        let mut load: Vec<u32> = (0..layout.items as u32).collect();
        for i in (1..load.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            load.swap(i, j);
        }
        let mut log = Log::new(&layout, &load);
        let t = u64::from(THREADS);
        let servers = (0..t)
            .map(|i| Server {
                left: total / t + u64::from(i < total % t),
                pending: Vec::new(),
                next: 0,
                head: (log.take_free(), 0),
            })
            .collect();
        Requests {
            layout,
            rng,
            hot,
            cold,
            hot_threshold: (HOT_SHARE * 4_294_967_296.0) as u64,
            set_threshold: (set_share * 4_294_967_296.0) as u64,
            log,
            servers,
            next_thread: 0,
            remaining: total,
            counts: KvCounts::default(),
        }
    }

    /// A request's key (its rank: hot ranks first), whether it is hot, and whether it is a SET.
    #[inline(always)]
    fn pick(&mut self) -> (u32, bool, bool) {
        let x = self.rng.next_u64();
        let y = self.rng.next_u64();
        let hot = (y & 0xffff_ffff) < self.hot_threshold || self.layout.items == self.layout.hot_items;
        let (table, offset) = if hot { (&self.hot, 0) } else { (&self.cold, self.layout.hot_items) };
        let s = (((x >> 32) * table.len() as u64) >> 32) as usize;
        let (accept, alias) = table[s];
        let rank = if (x as u32) < accept { s as u64 } else { u64::from(alias) };
        ((offset + rank) as u32, hot, (y >> 32) < self.set_threshold)
    }

    /// The bucket line holding a key's entry: a hash of the key.
    #[inline(always)]
    fn bucket(&self, key: u32) -> u64 {
        let h = u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.layout.table + (((u128::from(h) * u128::from(self.layout.buckets)) >> 64) as u64) * LINE
    }

    /// The item's 64 lines at `slot`, read or written by thread `th`.
    fn item(out: &mut Vec<Access>, slot: u32, write: bool, th: u8) {
        for l in 0..ITEM / LINE {
            let addr = u64::from(slot) * ITEM + l * LINE;
            out.push(if write {
                Access::write(addr, LINE as u16, th, INSTRUCTIONS)
            } else {
                Access::read(addr, LINE as u16, th, INSTRUCTIONS)
            });
        }
    }

    /// Thread `t`'s next request, then, if free segments are short, one segment cleaned: the
    /// accesses go to its pending list and the log changes at once.
    fn serve(&mut self, t: usize) {
        let th = t as u8;
        let mut out = std::mem::take(&mut self.servers[t].pending);
        out.clear();
        let (key, hot, set) = self.pick();
        self.counts.requests += 1;
        self.counts.hot += u64::from(hot);
        self.counts.sets += u64::from(set);
        let bucket = self.bucket(key);
        out.push(Access::read(bucket, LINE as u16, th, INSTRUCTIONS));
        if set {
            // Append the new version, point the entry at it, free the old one.
            let old = self.log.slot_of[key as usize];
            let new = self.log.append(&mut self.servers[t].head);
            Self::item(&mut out, new, true, th);
            out.push(Access::write(bucket, LINE as u16, th, INSTRUCTIONS));
            self.log.kill(old);
            self.log.place(key, new);
        } else {
            Self::item(&mut out, self.log.slot_of[key as usize], false, th);
        }
        if self.log.free.len() < LOW_WATER {
            self.clean(t, &mut out);
        }
        self.servers[t].pending = out;
        self.servers[t].next = 0;
    }

    /// Cleans the segment with the most freed slots: each live item is read and re-appended at
    /// thread `t`'s log head, and its entry updated, until the segment is free.
    fn clean(&mut self, t: usize, out: &mut Vec<Access>) {
        let Some(g) = self.log.victim() else { return };
        let th = t as u8;
        let per = self.log.per_segment;
        self.counts.cleaned += 1;
        let freed = 1.0 - f64::from(self.log.live[g]) / f64::from(per);
        self.counts.below_threshold += u64::from(freed < CLEAN_FREED);
        for slot in g as u32 * per..(g as u32 + 1) * per {
            let key = self.log.key_at[slot as usize];
            if key == FREE {
                continue;
            }
            self.counts.moved += 1;
            Self::item(out, slot, false, th);
            let new = self.log.append(&mut self.servers[t].head);
            Self::item(out, new, true, th);
            out.push(Access::write(self.bucket(key), LINE as u16, th, INSTRUCTIONS));
            self.log.kill(slot);
            self.log.place(key, new);
        }
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
        let threads = self.servers.len();
        for out in &mut buf[start..] {
            while self.servers[self.next_thread].left == 0 {
                crate::turns::pass(&mut self.next_thread, threads);
            }
            let t = self.next_thread;
            if self.servers[t].next == self.servers[t].pending.len() {
                self.serve(t);
            }
            let s = &mut self.servers[t];
            *out = s.pending[s.next];
            s.next += 1;
            s.left -= 1;
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
    fn layout_fits_and_follows_flexkvs() {
        let l = Layout::new(WORKING_SET);
        assert_eq!(l.items * ITEM, WORKING_SET, "the working set is the items");
        assert_eq!(l.per_segment * ITEM, SEGMENT, "FlexKVS's 2 MiB segments");
        let slots = l.segments * l.per_segment;
        assert!(slots >= l.items + l.items / SLACK_DEN && l.items + RESERVE * l.per_segment <= slots);
        assert_eq!(l.footprint(), slots * ITEM + l.buckets * LINE);
        assert_eq!(l.hot_items, l.items / 5);
        // A store too small for 2 MiB segments gets smaller ones, still its reserve, and a
        // footprint in proportion to its working set.
        let small = Layout::new(WORKING_SET / 64);
        assert!(small.per_segment < 512);
        assert!(small.items + RESERVE * small.per_segment <= small.segments * small.per_segment);
        assert_eq!(l.footprint(), 64 * small.footprint());
        // The smallest store (one key a thread) still has its reserve.
        let tiny = Layout::new(8 * ITEM);
        assert_eq!((tiny.per_segment, tiny.segments), (1, 8 + RESERVE));
    }

    /// Runs the requests of a store of `footprint` bytes for `total` accesses.
    fn run(footprint: u64, set_percent: u32, total: u64) -> (Requests, Vec<Access>) {
        let l = Layout::new(footprint);
        let mut r = Requests::new(l, f64::from(set_percent) / 100.0, total, 7);
        let mut all = Vec::new();
        let mut buf = Vec::new();
        while {
            buf.clear();
            r.fill(&mut buf, 1 << 16) > 0
        } {
            all.extend_from_slice(&buf);
        }
        (r, all)
    }

    #[test]
    fn hot_set_share_set_share_and_zipf_match() {
        for p in SET_PERCENTS {
            let (r, all) = run(WORKING_SET / 4, p, 4_000_000);
            let c = r.counts;
            let hot_share = c.hot as f64 / c.requests as f64;
            let set_share = c.sets as f64 / c.requests as f64;
            assert!((hot_share - 0.9).abs() < 0.01, "hot share {hot_share}");
            assert!((set_share - f64::from(p) / 100.0).abs() < 0.01, "set share {set_share} for {p}");
            assert!(all.iter().all(|a| a.addr < r.layout.footprint()));
        }
        // Zipf within the hot set: the top key gets far more than the hot set's uniform share.
        let mut r = Requests::new(Layout::new(WORKING_SET / 4), 0.5, 1, 3);
        let n = 400_000;
        let top = (0..n).filter(|_| r.pick().0 == 0).count();
        assert!(top as f64 > 20.0 * 0.9 * n as f64 / r.layout.hot_items as f64, "{top}");
    }

    #[test]
    fn a_set_appends_at_its_threads_log_head_and_updates_the_entry_in_place() {
        let (_, all) = run(WORKING_SET / 16, 100, 20_000);
        let t0: Vec<&Access> = all.iter().filter(|a| a.thread == 0).collect();
        let l = Layout::new(WORKING_SET / 16);
        // Bucket read, 64 item writes in order at the head, the bucket written; then the next
        // request's item at the next slot.
        assert!(t0[0].kind == AccessKind::Read && t0[0].addr >= l.table);
        let slot = t0[1].addr / ITEM;
        for (i, a) in t0[1..65].iter().enumerate() {
            assert_eq!((a.kind, a.addr), (AccessKind::Write, slot * ITEM + i as u64 * LINE));
        }
        assert_eq!((t0[65].kind, t0[65].addr), (AccessKind::Write, t0[0].addr));
        assert_eq!(t0[67].addr, (slot + 1) * ITEM);
    }

    /// Over a whole run at every SET share: each key's entry points at the slot holding it, the
    /// segments' counts add up, the cleaner ran where SETs filled the log and kept free segments,
    /// and a GET reads its key's newest version.
    #[test]
    fn the_log_stays_consistent_and_the_cleaner_keeps_up() {
        for p in SET_PERCENTS {
            let total = ACCESSES_PER_PAGE * (Layout::new(WORKING_SET).footprint() / 4096);
            let (r, _) = run(WORKING_SET, p, total);
            let log = &r.log;
            for (k, &s) in log.slot_of.iter().enumerate() {
                assert_eq!(log.key_at[s as usize], k as u32, "key {k} at {p}% SETs");
            }
            assert_eq!(log.live.iter().map(|&n| u64::from(n)).sum::<u64>(), r.layout.items);
            assert!(!log.free.is_empty());
            let c = r.counts;
            if p >= 50 {
                assert!(c.cleaned > 0, "{p}% SETs: the log never needed cleaning: {c:?}");
            }
            eprintln!("{p}% SETs: {c:?}");
        }
    }
}
