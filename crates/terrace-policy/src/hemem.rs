//! `hemem`: HeMem's sampling policy, the base HPWP builds on (the HPWP thesis' §3.5 and
//! ch. IV-V describe it as "the basis of the current study"; the constants are those of the public
//! HeMem code, github.com/cuhk-mass/hemem `src/pebs.h`; docs/seeds.md).
//!
//! Rules (docs/policies.md, "hemem"):
//! 1. Sample one access in 19,997 (PEBS loads and stores) and count each page's sampled reads and
//!    writes.
//! 2. A page is hot when it has 4 or more sampled reads, or 4 or more sampled writes; else cold.
//! 3. Cooling by a global clock: when a count reaches 10 the clock advances; each page's counts
//!    are halved once per tick, lazily ([`crate::sampled_heat`]). When the clock has moved, the
//!    hot lists are walked and pages that cooled below the threshold join the cold lists.
//! 4. Hot and cold FIFO lists per tier; a page joins the tail of a list when its class changes.
//! 5. Every 10 ms, promote slow-tier hot pages, oldest first, into free fast room, else against
//!    the oldest page of the fast tier's cold list; never against a hot fast page. At most 10 GiB
//!    per pass at seed scale (divided by the run's scale), 2 MiB pages.

use crate::sampled_heat::{Heat, HeatCounters, Promoter, Side, TierLists};
use terrace_model::{
    MachineInfo, MoveOptions, Observations, PageSize, Plan, Policy, Requirements, TlbFlush, TrackerRequest,
};

pub const NAME: &str = "hemem";
pub const SUMMARY: &str =
    "HeMem: sampled reads/writes per 2 MiB page, hot at 4, clock cooling, hot/cold FIFOs, 10 ms passes";

/// PEBS sample period (HeMem `SAMPLE_PERIOD`): one access in 19,997 is reported.
pub const SAMPLE_PERIOD: u32 = 19_997;
/// Sampled reads that make a page hot (HeMem `HOT_READ_THRESHOLD`).
pub const HOT_READS: u32 = 4;
/// Sampled writes that make a page hot (HeMem `HOT_WRITE_THRESHOLD`).
pub const HOT_WRITES: u32 = 4;
/// A count that reaches this advances the cooling clock (HeMem `PEBS_COOLING_THRESHOLD`).
pub const COOLING_THRESHOLD: u32 = 10;
/// Policy pass period, real time (HeMem `PEBS_KSWAPD_INTERVAL`; HPWP §5.3 "every 10ms").
pub const TICK_NS: u64 = 10_000_000;
/// Bytes promoted per pass at seed scale (HeMem `PEBS_KSWAPD_MIGRATE_RATE`, 10 GiB).
pub const PROMOTE_BYTES_PER_PASS: u64 = 10 << 30;
/// HeMem's page size: 2 MiB huge pages from a DAX file.
pub const PAGE_SIZE: PageSize = PageSize::Huge2M;
/// HeMem copies a page with 4 threads when it has no DMA engine (`MAX_COPY_THREADS`).
pub const COPY_THREADS: u32 = 4;

const HOT: usize = 0;
const COLD: usize = 1;

/// Promotions per pass: the seed's byte cap divided by the run's scale, in pages, rounded up
/// (HeMem's loop promotes while fewer than the cap's bytes have moved, so a partial page still
/// goes), and at least one.
pub fn promotions_per_pass(scale: f64, page: PageSize) -> usize {
    let bytes = PROMOTE_BYTES_PER_PASS as f64 / scale.max(f64::MIN_POSITIVE);
    ((bytes / page.bytes() as f64).ceil() as usize).max(1)
}

/// How HeMem moves pages: one page at a time, copied by its copy threads, each remap its own
/// shootdown, the page write-protected during its copy (HPWP thesis ch. IV "Page Migrator" and §5.3).
pub fn move_options() -> MoveOptions {
    MoveOptions {
        batch_pages: 1,
        copy_threads: COPY_THREADS,
        concurrent_batches: 1,
        rate_limit_mb_s: None,
        tlb_flush: TlbFlush::PerPage,
        write_protect_copies: true,
    }
}

fn class(h: Heat) -> usize {
    if h.reads >= HOT_READS || h.writes >= HOT_WRITES {
        HOT
    } else {
        COLD
    }
}

pub struct Hemem {
    heat: HeatCounters,
    lists: TierLists,
    /// The clock value at the last walk of the hot lists.
    walked_at: u64,
    budget: usize,
}

impl Default for Hemem {
    fn default() -> Self {
        Hemem {
            heat: HeatCounters::new(COOLING_THRESHOLD),
            lists: TierLists::new(2),
            walked_at: 0,
            budget: promotions_per_pass(1.0, PAGE_SIZE),
        }
    }
}

/// What HeMem asks of a machine, and HPWP after it: samples every `SAMPLE_PERIOD` accesses,
/// 2 MiB pages, a pass every 10 ms.
pub(crate) fn requirements() -> Requirements {
    Requirements {
        trackers: vec![TrackerRequest::sampling(SAMPLE_PERIOD)],
        page_size: PAGE_SIZE,
        tick_ns: Some(TICK_NS),
        protected_copies: move_options().write_protect_copies,
        ..Requirements::default()
    }
}

impl Policy for Hemem {
    fn name(&self) -> &str {
        NAME
    }

    fn requirements(&self, _: &MachineInfo) -> Requirements {
        requirements()
    }

    fn start(&mut self, machine: &MachineInfo) {
        self.budget = promotions_per_pass(machine.scale, PAGE_SIZE);
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        if obs.tiers.len() < 2 {
            return Plan::none();
        }
        // The live machine's page count grows as the program maps memory.
        let pages = obs.placement.len();
        self.heat.grow(pages);
        self.lists.sync(obs.placement, COLD);
        for s in obs.samples.iter().filter(|s| (s.page as usize) < pages) {
            let h = self.heat.record(s.page, s.kind);
            self.lists.set_class(s.page, class(h));
        }
        if self.heat.clock() != self.walked_at {
            self.walked_at = self.heat.clock();
            for side in [Side::Fast, Side::Slow] {
                for page in self.lists.pages(side, HOT) {
                    let h = self.heat.cool(page);
                    self.lists.set_class(page, class(h));
                }
            }
        }
        let mut pass = Promoter::new(obs.tiers, self.budget);
        for page in self.lists.pages(Side::Slow, HOT) {
            if !pass.promote(&mut self.lists, page, &[COLD]) {
                break;
            }
        }
        Plan {
            moves: pass.into_moves(),
            options: move_options(),
            reason: "hemem: hot slow pages up, against the oldest cold fast pages".into(),
            ..Plan::none()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use terrace_model::{AccessKind, Move, PageIdx, Sample, Tier, TierId, TierKind, TierStatus};

    pub(crate) const F: TierId = TierId::FAST;
    pub(crate) const S: TierId = TierId::SLOW;

    pub(crate) fn machine(scale: f64) -> MachineInfo {
        let tier = |id| Tier {
            id: TierId(id),
            name: String::new(),
            kind: TierKind::Dram,
            capacity_pages: None,
            read_latency_ns: None,
            read_bandwidth_gb_s: None,
            write_bandwidth_gb_s: None,
        };
        MachineInfo {
            name: String::new(),
            tiers: vec![tier(0), tier(1)],
            page_size: PAGE_SIZE,
            pages: 0,
            threads: 1,
            scale,
        }
    }

    /// `n` samples of `page`.
    pub(crate) fn samples(page: PageIdx, kind: AccessKind, n: usize) -> Vec<Sample> {
        vec![Sample { page, kind }; n]
    }

    /// One tick with a fast tier of `fast_capacity` pages (the slow tier has room).
    pub(crate) fn tick(
        p: &mut dyn Policy,
        placement: &[TierId],
        fast_capacity: u64,
        samples: &[Sample],
    ) -> Plan {
        let used = placement.iter().filter(|t| **t == F).count() as u64;
        let tiers = [
            TierStatus { used_pages: used, capacity_pages: Some(fast_capacity), ..Default::default() },
            TierStatus { used_pages: 0, capacity_pages: Some(1000), ..Default::default() },
        ];
        let obs = Observations {
            now_ns: 0,
            previous_ns: 0,
            placement,
            tiers: &tiers,
            page_bits: None,
            samples,
            future: None,
            hint_faults: &[],
        };
        p.tick(&obs)
    }

    fn up(page: PageIdx) -> Move {
        Move { page, to: F }
    }
    fn down(page: PageIdx) -> Move {
        Move { page, to: S }
    }

    const R: AccessKind = AccessKind::Read;
    const W: AccessKind = AccessKind::Write;

    #[test]
    fn a_page_is_hot_at_four_sampled_reads_or_four_sampled_writes_not_at_three_of_each() {
        let mut p = Hemem::default();
        let placement = [S, S, S];
        let mut s = samples(0, R, 3);
        s.extend(samples(0, W, 3));
        s.extend(samples(1, R, 4));
        s.extend(samples(2, W, 4));
        assert_eq!(tick(&mut p, &placement, 10, &s).moves, [up(1), up(2)]);
    }

    #[test]
    fn victims_are_the_oldest_cold_fast_pages_and_never_hot_ones() {
        let mut p = Hemem::default();
        let placement = [F, F, F, S, S, S];
        // Page 1 is hot for a while, so it rejoins the cold list behind page 2.
        assert!(tick(&mut p, &placement, 3, &samples(1, R, 4)).is_empty());
        // Page 0 reaches the cooling threshold: the clock ticks, page 1 cools to 2 reads, and
        // page 0 (5 reads after cooling) stays hot. Then slow pages 3, 4, 5 turn hot.
        let mut s = samples(0, R, 10);
        for page in [3, 4, 5] {
            s.extend(samples(page, W, 4));
        }
        let plan = tick(&mut p, &placement, 3, &s);
        assert_eq!(plan.moves, [down(2), up(3), down(1), up(4)], "page 0 is hot: no room for page 5");
    }

    #[test]
    fn promotions_per_pass_never_exceed_the_scaled_budget() {
        assert_eq!(promotions_per_pass(1024.0, PAGE_SIZE), 5, "10 GiB / 1024 = 10 MiB = 5 huge pages");
        assert_eq!(promotions_per_pass(1.0, PAGE_SIZE), 5120);
        assert_eq!(promotions_per_pass(3000.0, PAGE_SIZE), 2, "3.4 MiB: the partial page still goes");
        assert_eq!(promotions_per_pass(1e9, PAGE_SIZE), 1);
        let mut p = Hemem::default();
        p.start(&machine(4096.0));
        let mut placement = vec![S; 5];
        let s: Vec<Sample> = (0..5).flat_map(|page| samples(page, W, 4)).collect();
        let plan = tick(&mut p, &placement, 10, &s);
        assert_eq!(plan.moves, [up(0), up(1)], "10 GiB / 4096 = 2.5 MiB = 1.25 pages, rounded up to 2");
        for m in &plan.moves {
            placement[m.page as usize] = F;
        }
        assert_eq!(tick(&mut p, &placement, 10, &[]).moves, [up(2), up(3)], "the rest next pass, in order");
    }

    #[test]
    fn a_failed_promotion_is_retried_from_the_slow_hot_list() {
        let mut p = Hemem::default();
        let placement = [S];
        assert_eq!(tick(&mut p, &placement, 1, &samples(0, R, 4)).moves, [up(0)]);
        // The machine did not move it: it is still a slow hot page.
        assert_eq!(tick(&mut p, &placement, 1, &[]).moves, [up(0)]);
    }

    #[test]
    fn asks_for_sampling_huge_pages_and_a_10_ms_pass() {
        let r = Hemem::default().requirements(&machine(1.0));
        assert_eq!(r.trackers, [TrackerRequest::sampling(19_997)]);
        assert_eq!((r.page_size, r.tick_ns), (PageSize::Huge2M, Some(10_000_000)));
    }
}
