//! A program of objects, with the characters the object-tiering seed reports for its HPC and ML
//! applications (docs/workloads.md, "Objects"): allocations and frees with their sites between
//! the accesses to the objects.
//!
//! - A few large, long-lived objects hold most of the memory: 12 objects from 3 sites, 75% of the
//!   footprint, allocated at the start and never freed (object tiering Table 4: records live tens
//!   to hundreds of seconds; §3.2.2: large objects dominate capacity).
//! - Many short-lived small objects: below 4 KiB, packed into a small-object arena (§3.2: bkmalloc
//!   slot-allocates objects under 4 KB into page-aligned blocks), allocated and freed within a
//!   round (the ephemeral objects of §3.2.1); and medium 16 KiB buffers (at least 4 KiB, so
//!   page-aligned regions of their own, §3.2) that live 64 rounds. Together they allocate 0.55%
//!   of the bytes the program moves, the buffers 0.39%, the median of the seed's applications
//!   (Table 4 over Table 3), which sets how often the allocation trigger fires.
//! - Sites share a usage pattern: every object of a site has the same size, lifetime and access
//!   pattern (§3.5, the premise of allocation-site placement).
//! - A phase change moves the hot set between sites: half-way through, the large objects of site 2
//!   take over from those of site 1 (§5.3.2: the allocation trigger catches phases in SNAP and
//!   QMCPACK).
//!
//! `objects-sites` is the same program with its buffers from thousands of sites instead of one
//! (the seed's QMCPACK and IdenProf have 2-4 thousand, where proactive placement gained most,
//! §5.4.1): 2,048 sites at full size, each allocating a 4 KiB buffer in turn (one every 128
//! rounds), an eighth of them hot (their buffers live 16 rounds and are read in full every round
//! they live), the rest cold (their buffers live 160 rounds, written once when allocated and never
//! read), so that a cold site has one or two buffers alive when it allocates again. A site's
//! buffers share its temperature and lifetime, as §3.5 assumes.
//!
//! `NAME:instructions=N` sets the compute each access carries (how fast the program makes memory
//! traffic), `NAME:run=N` the lines each thread accesses in a row (how its accesses use a
//! device's media access): `objects-pair-table3` paces its programs with them (registry.rs).
//!
//! Sized as the seed's small inputs divided by 1024 (GB -> MB): a 64 MiB footprint (LULESH, AMG,
//! WarpX and IdenProf peak at 23-50 GB, Table 3) with a fast tier of 25% of it (§5.3.1 tunes at a
//! DRAM cap of 25% of peak RSS). 16 threads, as the seed's shared inputs (Table 3).

use crate::registry::{scaled_bytes, scaled_count, seed_info};
use crate::rng::Rng;
use crate::{AccessSource, ObjectEventAt, WorkloadError, WorkloadInfo};
use terrace_model::{Access, ObjectEvent};

const PAGE: u64 = 4096;
const LINE: u64 = 64;
/// Table 3, shared inputs: 16 threads.
const THREADS: u32 = 16;
/// Choice: a 64 GB peak RSS (Table 3's small inputs reach 23-50 GB), scaled GB -> MB.
const FOOTPRINT: u64 = 64 << 20;
/// §5.3.1: a fast tier of 25% of peak RSS.
const FAST_BYTES: u64 = FOOTPRINT / 4;
/// Large objects: 3 sites of 4 objects, each 1/16 of the footprint (75% in all).
const LARGE_SITES: [u64; 3] = [1, 2, 3];
const LARGE_PER_SITE: u64 = 4;
/// Site 1 is hot in the first half of the rounds, site 2 in the second; site 3 stays cold.
const COLD_SITE: u64 = 3;
/// Choice: 90% of the rounds' large-object accesses go to the hot site (as GUPS's hot set,
/// HPWP §6.2), 5% to each other site.
const HOT_SHARE: f64 = 0.9;
/// Choice: 70% of large-object accesses are reads.
const READ_SHARE: f64 = 0.7;
/// Medium buffers: site 4, 16 KiB each, 4 allocated a round at full size, each living 64 rounds
/// (4 MiB alive at once). Their size does not scale (a buffer stays a tracked object of its own,
/// at least 4 KiB); their rate does, and may be a fraction of one a round. Choice of count and
/// life: the buffers allocate 0.39% of the bytes the program moves, about the median of the seed's
/// applications (Table 4's record MB/s over Table 3's bandwidth, small inputs: Graph500 0.11% to
/// IdenProf 4.1%, QMCPACK the median), which sets how often the allocation trigger fires.
const MEDIUM_SITE: u64 = 4;
const MEDIUM_BYTES: u64 = 16 << 10;
const MEDIUM_PER_ROUND: f64 = 4.0;
const MEDIUM_LIFE: u64 = 64;
/// `objects-sites`: its buffers' sites, at full size (their number scales with the buffers', so a
/// site allocates every 128 rounds at any size), numbered from here, and one site in this many
/// hot. Choices: §5.4.1 gives 2-4 thousand sites, not their shares.
const MANY_SITES: f64 = 2048.0;
const MANY_FIRST_SITE: u64 = 1000;
const HOT_SITE_EVERY: u64 = 8;
/// `objects-sites`: its buffers are a page (the least object with a site, §3.5), 16 allocated a
/// round at full size (0.39% of the bytes moved, as `objects`' buffers); hot ones live 16 rounds
/// (an eighth of a site's period), cold ones 160 (1.25 periods, so a cold site has one or two
/// alive when it allocates again). Choices.
const MANY_BYTES: u64 = 4096;
const MANY_PER_ROUND: f64 = 16.0;
const MANY_HOT_LIFE: u64 = 16;
const MANY_COLD_LIFE: u64 = 160;
/// Small objects: 8 sites (16-23), each of one size class, 32 a round at full size, freed in the
/// round. Sizes do not scale; their rate does. Choice of count: they add 0.16% of the bytes
/// moved to what the allocation trigger counts (Table 4 counts records, not ephemeral objects).
const SMALL_FIRST_SITE: u64 = 16;
const SMALL_SITES: u64 = 8;
const SMALL_CLASSES: [u64; 4] = [64, 256, 1024, 2048];
const SMALL_PER_ROUND: f64 = 32.0;
/// 2,048 rounds, each 256 Ki large-object accesses at full size: with the buffers and small
/// objects a round is about 0.25 passes over the footprint, so a run makes about 520, as the seed's
/// applications do: its small inputs make 170 (WarpX) to 1,255 (Graph500) passes over their peak
/// RSS in a run, AMG the median at 543 (Table 3: run time x bandwidth / peak RSS). How many
/// accesses each page gets between the policy's decisions is what a move's cost is weighed
/// against, and what its samples see: 32 rounds (about 9 passes) made every migration 60 times
/// dearer than the seed's.
const ROUNDS: u64 = 2048;
const LARGE_ACCESSES_PER_ROUND: f64 = 262_144.0;
/// Choice: compute between misses (`instructions` sets another count).
const INSTRUCTIONS: u32 = 20;
/// The most `instructions` a workload name may give: 1/2.3 GHz x 10,000 = 4.3 us an access.
pub(crate) const MAX_INSTRUCTIONS: u32 = 10_000;
/// The most lines a thread may access in a row (`run`): a 4 KiB page.
pub(crate) const MAX_RUN: u32 = 64;

/// The layout: large objects from 0, the medium ring after them (3/16 of the footprint), the
/// small-object arena last (1/16).
struct Layout {
    large_bytes: u64,
    medium_start: u64,
    medium_len: u64,
    medium_bytes: u64,
    /// Buffers and small objects allocated a round: a rate, since at a small size it is below one.
    medium_rate: f64,
    small_start: u64,
    small_len: u64,
    small_rate: f64,
    large_per_round: u64,
    /// The buffers' sites: 1 (`objects`), or thousands (`objects-sites`).
    medium_sites: u64,
}

/// How many of a `rate`-a-round allocation fall in round `r` (from 1): those numbered from
/// `floor((r - 1) rate)` up to `floor(r rate)`, so that any run of rounds holds its share.
fn due(rate: f64, r: u64) -> std::ops::Range<u64> {
    ((r - 1) as f64 * rate).floor() as u64..(r as f64 * rate).floor() as u64
}

impl Layout {
    fn new(name: &str, size_scale: f64, many_sites: bool) -> Result<Self, WorkloadError> {
        let footprint = scaled_bytes(name, FOOTPRINT, size_scale, THREADS)?;
        let sixteenth = footprint / 16 / PAGE * PAGE;
        let (medium_bytes, medium_rate, longest_life) = if many_sites {
            (MANY_BYTES, MANY_PER_ROUND * size_scale, MANY_COLD_LIFE)
        } else {
            (MEDIUM_BYTES, MEDIUM_PER_ROUND * size_scale, MEDIUM_LIFE)
        };
        let small_rate = SMALL_PER_ROUND * size_scale;
        let medium_len = 3 * sixteenth;
        let small_len = footprint - 15 * sixteenth;
        // The ring holds the buffers alive at once, a round's new ones, and the gap it may leave
        // at its end; the arena holds a round's small objects (at most 2 KiB each); a run has at
        // least one of each.
        let per_round = |rate: f64| rate.ceil() as u64;
        let too_small = || WorkloadError::TooSmall { name: name.to_string(), size_scale };
        if medium_rate * (ROUNDS as f64) < 1.0
            || small_rate * (ROUNDS as f64) < 1.0
            || medium_len
                < ((longest_life as f64 * medium_rate).ceil() as u64 + 2 * per_round(medium_rate))
                    * medium_bytes
            || per_round(small_rate) * SMALL_CLASSES[SMALL_CLASSES.len() - 1] > small_len
        {
            return Err(too_small());
        }
        Ok(Layout {
            large_bytes: sixteenth,
            medium_start: 12 * sixteenth,
            medium_len,
            medium_bytes,
            medium_rate,
            small_start: 15 * sixteenth,
            small_len,
            small_rate,
            large_per_round: scaled_count(LARGE_ACCESSES_PER_ROUND, size_scale).max(1),
            medium_sites: if many_sites {
                scaled_count(MANY_SITES, size_scale).max(HOT_SITE_EVERY)
            } else {
                1
            },
        })
    }

    fn footprint(&self) -> u64 {
        self.small_start + self.small_len
    }

    /// The run's accesses, counted as `Objects::make_round` makes them.
    fn accesses(&self) -> u64 {
        let init = 12 * self.large_bytes / LINE;
        let lines = self.medium_bytes / LINE;
        let mut total = init;
        // With many sites, hot buffers alive, by the round they die in: each is read in every
        // round it is alive in (the last rounds' buffers are alive until the end).
        let mut hot_live: std::collections::VecDeque<u64> = Default::default();
        for r in 1..=ROUNDS {
            let fresh = due(self.medium_rate, r);
            let small: u64 = due(self.small_rate, r).map(|n| 2 * small_size(n).div_ceil(LINE)).sum();
            let mut read = fresh.end - fresh.start;
            if self.medium_sites > 1 {
                for n in fresh.clone() {
                    let site = self.medium_site(n);
                    if self.site_is_hot(site) {
                        hot_live.push_back(r + self.life(site));
                    }
                }
                read = hot_live.len() as u64;
                while hot_live.front().is_some_and(|&death| death <= r) {
                    hot_live.pop_front();
                }
            }
            total += (fresh.end - fresh.start + read) * lines + small + self.large_per_round;
        }
        total
    }
}

impl Layout {
    /// The site of the `n`th buffer of the run: the one site, or the many in turn.
    fn medium_site(&self, n: u64) -> u64 {
        if self.medium_sites > 1 {
            MANY_FIRST_SITE + n % self.medium_sites
        } else {
            MEDIUM_SITE
        }
    }

    fn site_is_hot(&self, site: u64) -> bool {
        (site - MANY_FIRST_SITE).is_multiple_of(HOT_SITE_EVERY)
    }

    /// Rounds a buffer of `site` lives.
    fn life(&self, site: u64) -> u64 {
        if self.medium_sites == 1 {
            MEDIUM_LIFE
        } else if self.site_is_hot(site) {
            MANY_HOT_LIFE
        } else {
            MANY_COLD_LIFE
        }
    }
}

/// Site of the `j`th small object of the run, and its size (its site's class).
fn small_site(j: u64) -> u64 {
    SMALL_FIRST_SITE + j % SMALL_SITES
}
fn small_size(j: u64) -> u64 {
    SMALL_CLASSES[(j % SMALL_SITES) as usize % SMALL_CLASSES.len()]
}

/// The generator: one round at a time into a buffer of accesses and one of events.
pub(crate) struct Objects {
    info: WorkloadInfo,
    layout: Layout,
    rng: Rng,
    /// The next round to make (0 = the initialisation).
    round: u64,
    buf: Vec<Access>,
    pos: usize,
    /// Accesses made (in earlier rounds and `buf`), and handed out.
    made: u64,
    handed: u64,
    events: std::collections::VecDeque<ObjectEventAt>,
    /// Medium buffers alive: (address, round it dies in, site), oldest first; the ring's next
    /// address; with many sites, the ring's free slots (the lowest address last).
    medium_live: std::collections::VecDeque<(u64, u64, u64)>,
    medium_next: u64,
    medium_free: Vec<u64>,
    thread: u8,
    /// The compute each access carries ([`INSTRUCTIONS`] unless the name sets it).
    instructions: u32,
    /// Lines a thread accesses in a row before the next thread's turn (1: each access is the
    /// next thread's), and how many of the current thread's it has made. A random access of
    /// the large objects is then a run of this many lines from a run-aligned line.
    run: u64,
    in_run: u64,
}

pub(crate) fn summary() -> String {
    "objects (object tiering §3.2, §3.5, Table 4): 16 threads, 64 MiB; 12 long-lived large objects of 3 \
     sites hold 75%, short-lived small objects and 16 KiB buffers come and go, the hot site changes \
     half-way"
        .to_string()
}

pub(crate) fn summary_many_sites() -> String {
    "objects-sites (object tiering §5.4.1): objects with its buffers a page each, from 2,048 sites, an eighth \
     hot (read every round), the rest written once"
        .to_string()
}

/// `objects`, or with `many_sites` `objects-sites`.
pub(crate) fn build(
    name: &str,
    seed: u64,
    size_scale: f64,
    many_sites: bool,
    instructions: Option<u32>,
    run: Option<u32>,
) -> Result<Objects, WorkloadError> {
    let layout = Layout::new(name, size_scale, many_sites)?;
    let mut text = if many_sites { summary_many_sites() } else { summary() };
    if let Some(n) = instructions {
        text += &format!("; {n} instructions an access");
    }
    if let Some(n) = run {
        text += &format!("; {n} lines in a row per thread");
    }
    let mut info = seed_info(name, text, layout.footprint(), THREADS, FAST_BYTES, size_scale);
    info.accesses = layout.accesses();
    let medium_free = if layout.medium_sites > 1 {
        let slots = layout.medium_len / layout.medium_bytes;
        (0..slots).rev().map(|k| layout.medium_start + k * layout.medium_bytes).collect()
    } else {
        Vec::new()
    };
    Ok(Objects {
        info,
        layout,
        rng: Rng::new(seed),
        round: 0,
        buf: Vec::new(),
        pos: 0,
        made: 0,
        handed: 0,
        events: Default::default(),
        medium_live: Default::default(),
        medium_next: 0,
        medium_free,
        thread: 0,
        instructions: instructions.unwrap_or(INSTRUCTIONS),
        run: u64::from(run.unwrap_or(1)),
        in_run: 0,
    })
}

impl Objects {
    /// The next thread's turn, its run just begun.
    fn next_thread(&mut self) {
        self.thread = ((u32::from(self.thread) + 1) % THREADS) as u8;
        self.in_run = 0;
    }

    fn event(&mut self, event: ObjectEvent) {
        self.events.push_back(ObjectEventAt { at: self.made + self.buf.len() as u64, event });
    }

    fn access(&mut self, addr: u64, write: bool) {
        let t = self.thread;
        self.in_run += 1;
        if self.in_run == self.run {
            self.next_thread();
        }
        let a = if write {
            Access::write(addr, LINE as u16, t, self.instructions)
        } else {
            Access::read(addr, LINE as u16, t, self.instructions)
        };
        self.buf.push(a);
    }

    fn large_addr(&self, site: u64, k: u64) -> u64 {
        let i = (site - 1) + 3 * k;
        i * self.layout.large_bytes
    }

    /// Makes the next round into `buf` (emptied first); false when every round is made.
    fn make_round(&mut self) -> bool {
        self.made += self.buf.len() as u64;
        self.buf.clear();
        self.pos = 0;
        let l = &self.layout;
        let (large, mbytes) = (l.large_bytes, l.medium_bytes);
        if self.round == 0 {
            // The large objects, sites in turn, then their first-touch initialisation.
            for k in 0..LARGE_PER_SITE {
                for site in LARGE_SITES {
                    let addr = self.large_addr(site, k);
                    self.event(ObjectEvent::alloc(addr, large, site));
                }
            }
            for line in 0..12 * large / LINE {
                self.access(line * LINE, true);
            }
        } else if self.round <= ROUNDS {
            let r = self.round;
            let hot = if r <= ROUNDS / 2 { 1 } else { 2 };
            // New medium buffers, written then read once (a producer-consumer pass).
            // Numbered across the run as `Layout::accesses` numbers them.
            let fresh_numbers = due(self.layout.medium_rate, r);
            let fresh_count = fresh_numbers.clone().count();
            for n in fresh_numbers {
                let site = self.layout.medium_site(n);
                let addr = if self.layout.medium_sites > 1 {
                    // Layout::new checked the ring holds every buffer alive at once.
                    self.medium_free.pop().expect("a free slot")
                } else {
                    if self.medium_next + mbytes > self.layout.medium_len {
                        self.medium_next = 0;
                    }
                    let addr = self.layout.medium_start + self.medium_next;
                    self.medium_next += mbytes;
                    addr
                };
                self.medium_live.push_back((addr, r + self.layout.life(site), site));
                self.event(ObjectEvent::alloc(addr, mbytes, site));
            }
            // Small objects, packed into the arena.
            let mut small = Vec::new();
            let mut at = self.layout.small_start;
            for j in due(self.layout.small_rate, r) {
                let size = small_size(j);
                small.push((at, size, small_site(j)));
                self.event(ObjectEvent::alloc(at, size, small_site(j)));
                at += size;
            }
            for &(addr, size, _) in &small {
                for line in 0..size.div_ceil(LINE) {
                    self.access(addr + line * LINE, true);
                }
                for line in 0..size.div_ceil(LINE) {
                    self.access(addr + line * LINE, false);
                }
            }
            let fresh: Vec<u64> = self.medium_live.iter().rev().take(fresh_count).map(|b| b.0).collect();
            for &addr in &fresh {
                for line in 0..mbytes / LINE {
                    self.access(addr + line * LINE, true);
                }
            }
            // Read: each new buffer once (one site), or every live buffer of a hot site (many).
            let read: Vec<u64> = if self.layout.medium_sites > 1 {
                self.medium_live.iter().filter(|b| self.layout.site_is_hot(b.2)).map(|b| b.0).collect()
            } else {
                fresh
            };
            for &addr in &read {
                for line in 0..mbytes / LINE {
                    self.access(addr + line * LINE, false);
                }
            }
            // The large objects: mostly the hot site's, in runs of `run` lines, each a thread's.
            if self.in_run > 0 {
                self.next_thread();
            }
            let mut left = self.layout.large_per_round;
            while left > 0 {
                let u = self.rng.unit_f64();
                let site = if u < HOT_SHARE {
                    hot
                } else if u < (1.0 + HOT_SHARE) / 2.0 {
                    3 - hot
                } else {
                    COLD_SITE
                };
                let k = self.rng.below(LARGE_PER_SITE);
                let runs = (large / LINE / self.run).max(1);
                let line = self.rng.below(runs) * self.run;
                let write = self.rng.unit_f64() >= READ_SHARE;
                let addr = self.large_addr(site, k) + line * LINE;
                let n = self.run.min(left);
                for j in 0..n {
                    self.access(addr + j * LINE, write);
                }
                left -= n;
            }
            for (addr, size, site) in small {
                self.event(ObjectEvent::free(addr, size, site));
            }
            // The buffers whose life ends this round (all of them in the last), oldest first.
            let mut k = 0;
            while k < self.medium_live.len() {
                let (addr, death, site) = self.medium_live[k];
                if death > r && r < ROUNDS {
                    k += 1;
                    continue;
                }
                self.medium_live.remove(k);
                if self.layout.medium_sites > 1 {
                    self.medium_free.push(addr);
                }
                self.event(ObjectEvent::free(addr, mbytes, site));
            }
        } else {
            return false;
        }
        self.round += 1;
        true
    }
}

impl AccessSource for Objects {
    fn info(&self) -> &WorkloadInfo {
        &self.info
    }

    fn fill(&mut self, out: &mut Vec<Access>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            if self.pos == self.buf.len() && !self.make_round() {
                break;
            }
            let k = (max - n).min(self.buf.len() - self.pos);
            out.extend_from_slice(&self.buf[self.pos..self.pos + k]);
            self.pos += k;
            n += k;
        }
        self.handed += n as u64;
        n
    }

    fn take_object_events(&mut self, out: &mut Vec<ObjectEventAt>) {
        let done = self.round > ROUNDS && self.pos == self.buf.len();
        while let Some(e) = self.events.front() {
            if e.at > self.handed && !done {
                break;
            }
            out.push(*e);
            self.events.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use terrace_model::ObjectEventKind;

    fn run(size_scale: f64) -> (WorkloadInfo, Vec<Access>, Vec<ObjectEventAt>) {
        run_of(size_scale, false)
    }

    fn run_of(size_scale: f64, many_sites: bool) -> (WorkloadInfo, Vec<Access>, Vec<ObjectEventAt>) {
        let name = if many_sites { "objects-sites" } else { "objects" };
        let mut g = build(name, 7, size_scale, many_sites, None, None).unwrap();
        let (mut accesses, mut events) = (Vec::new(), Vec::new());
        while g.fill(&mut accesses, 10_000) > 0 {
            g.take_object_events(&mut events);
            // Every event handed out is due: at or before the accesses handed out.
            assert!(events.last().is_none_or(|e| e.at <= accesses.len() as u64));
        }
        g.take_object_events(&mut events);
        (g.info().clone(), accesses, events)
    }

    #[test]
    fn the_count_is_exact_and_every_access_is_to_a_live_object() {
        for many_sites in [false, true] {
            live_objects_only(many_sites);
        }
    }

    fn live_objects_only(many_sites: bool) {
        let (info, accesses, events) = run_of(1.0 / 64.0, many_sites);
        info.validate().unwrap();
        assert_eq!(accesses.len() as u64, info.accesses);
        assert!(events.windows(2).all(|w| w[0].at <= w[1].at), "events in stream order");
        // Replay: every access falls in a live object; every free matches a live allocation.
        let mut live: HashMap<u64, ObjectEvent> = HashMap::new();
        let mut next = 0;
        for (i, a) in accesses.iter().enumerate() {
            while next < events.len() && events[next].at <= i as u64 {
                let e = events[next].event;
                match e.kind {
                    ObjectEventKind::Alloc => {
                        assert!(live.insert(e.addr, e).is_none(), "{e:?} reuses a live address")
                    }
                    ObjectEventKind::Free => {
                        assert_eq!(live.remove(&e.addr), Some(ObjectEvent::alloc(e.addr, e.bytes, e.site)))
                    }
                    other => panic!("a program's own stream has no {other:?}"),
                }
                next += 1;
            }
            assert!(a.addr < info.footprint_bytes);
            assert!(
                live.values().any(|o| (o.addr..o.addr + o.bytes).contains(&a.addr)),
                "access {i} at {:#x} is to no live object",
                a.addr
            );
        }
        // Only the 12 large objects outlive the program.
        for e in &events[next..] {
            assert_eq!(e.event.kind, ObjectEventKind::Free);
            live.remove(&e.event.addr);
        }
        assert_eq!(live.len(), 12);
        assert!(live.values().all(|o| LARGE_SITES.contains(&o.site)));
    }

    #[test]
    fn large_objects_hold_most_memory_and_the_hot_site_changes_half_way() {
        let (info, accesses, events) = run(1.0 / 64.0);
        let allocs: Vec<ObjectEvent> =
            events.iter().map(|e| e.event).filter(|e| e.kind == ObjectEventKind::Alloc).collect();
        let large: u64 = allocs.iter().filter(|e| LARGE_SITES.contains(&e.site)).map(|e| e.bytes).sum();
        assert_eq!(large * 4, info.footprint_bytes * 3, "75% of the footprint");
        let small = allocs.iter().filter(|e| e.bytes < PAGE).count();
        assert!(small > 20 * allocs.iter().filter(|e| LARGE_SITES.contains(&e.site)).count());
        assert_eq!(info.suggested_fast_bytes * 4, info.footprint_bytes);
        // Share of the large-object accesses of each half that go to sites 1 and 2.
        let large_bytes = info.footprint_bytes / 16;
        let site = |addr: u64| (addr / large_bytes) % 3 + 1;
        let init = (12 * large_bytes / LINE) as usize;
        let rounds = &accesses[init..];
        let half = rounds.len() / 2;
        for (part, hot) in [(&rounds[..half], 1), (&rounds[half..], 2)] {
            let large: Vec<u64> =
                part.iter().filter(|a| a.addr < 12 * large_bytes).map(|a| site(a.addr)).collect();
            let share = large.iter().filter(|&&s| s == hot).count() as f64 / large.len() as f64;
            assert!((share - HOT_SHARE).abs() < 0.02, "site {hot}: {share}");
        }
    }

    /// The buffers, the objects Table 4 counts as records, allocate 0.38% of the bytes the
    /// program moves, the median of the seed's applications, and the small objects' sites all
    /// take their turn even at a size where fewer than one a round is allocated.
    #[test]
    fn buffers_allocate_the_median_applications_share_of_the_traffic() {
        for many_sites in [false, true] {
            let (info, accesses, events) = run_of(1.0 / 64.0, many_sites);
            let allocs = events.iter().map(|e| e.event).filter(|e| e.kind == ObjectEventKind::Alloc);
            let buffers: u64 = allocs
                .clone()
                .filter(|e| !LARGE_SITES.contains(&e.site) && e.bytes >= PAGE)
                .map(|e| e.bytes)
                .sum();
            let moved = accesses.len() as u64 * LINE;
            let share = buffers as f64 / moved as f64;
            assert!(
                (0.0033..0.0043).contains(&share),
                "{}: buffers allocate {share:.5} of the bytes moved",
                info.name
            );
            let small_sites: std::collections::HashSet<u64> =
                allocs.filter(|e| e.bytes < PAGE).map(|e| e.site).collect();
            assert_eq!(small_sites.len() as u64, SMALL_SITES, "{}", info.name);
        }
    }

    /// `objects-sites`: the buffers come from many sites, each allocating in turn; an eighth of
    /// the sites are hot, and only their buffers are read after they are written.
    #[test]
    fn many_sites_share_the_buffers_and_only_hot_sites_are_read() {
        let (_, accesses, events) = run_of(1.0 / 64.0, true);
        let buffers: Vec<ObjectEvent> = events
            .iter()
            .map(|e| e.event)
            .filter(|e| e.kind == ObjectEventKind::Alloc && e.site >= MANY_FIRST_SITE)
            .collect();
        let sites: std::collections::HashSet<u64> = buffers.iter().map(|e| e.site).collect();
        assert_eq!(sites.len(), 32, "2048 sites at full size, a sixty-fourth here");
        // Each read of a buffer, by whether the site of the buffer live at its address is hot.
        let (mut hot_reads, mut cold_reads) = (0u64, 0u64);
        let mut live: HashMap<u64, ObjectEvent> = HashMap::new();
        let mut next = 0;
        for (i, a) in accesses.iter().enumerate() {
            while next < events.len() && events[next].at <= i as u64 {
                let e = events[next].event;
                if e.site >= MANY_FIRST_SITE {
                    match e.kind {
                        ObjectEventKind::Alloc => live.insert(e.addr, e),
                        ObjectEventKind::Free => live.remove(&e.addr),
                        other => panic!("a program's own stream has no {other:?}"),
                    };
                }
                next += 1;
            }
            if a.kind != terrace_model::AccessKind::Read {
                continue;
            }
            if let Some(b) = live.values().find(|b| (b.addr..b.addr + b.bytes).contains(&a.addr)) {
                match (b.site - MANY_FIRST_SITE).is_multiple_of(HOT_SITE_EVERY) {
                    true => hot_reads += 1,
                    false => cold_reads += 1,
                }
            }
        }
        assert!(hot_reads > 0 && cold_reads == 0, "hot {hot_reads}, cold {cold_reads}");
    }
}
