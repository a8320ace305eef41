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
//! 6. The mover copies beside the program, with DMA or 4 copy threads (HPWP thesis §5.3; HeMem's
//!    `MAX_COPY_THREADS`), each page write-protected while it is copied: a copy engine
//!    ([`Mover::CopyEngine`]) whose queue holds one pass's moves (the pass's promotions and the
//!    demotions that make room for them); what does not fit waits for the next pass.
//!
//! Every number above is a parameter ([`PARAMS`]), HeMem's value its default.

use crate::params::{Kind, Param, Params};
use crate::sampled_heat::{Heat, HeatCounters, Promoter, Side, TierLists};
use terrace_model::{
    MachineInfo, Mechanism, MoveOptions, Mover, Observations, PageSize, Plan, Policy, Requirements, TlbFlush,
    TrackerRequest,
};

pub const NAME: &str = "hemem";
pub const SUMMARY: &str =
    "HeMem: sampled reads/writes per 2 MiB page, hot at 4, clock cooling, hot/cold FIFOs, 10 ms passes";

/// HeMem's page size: 2 MiB huge pages from a DAX file.
pub const PAGE_SIZE: PageSize = PageSize::Huge2M;

/// The largest count a threshold may ask for: counts are halved once they reach the cooling
/// threshold, so no count exceeds it.
const MAX_SAMPLES: u64 = 1000;

/// PEBS sample period (HeMem `SAMPLE_PERIOD`), shared with hpwp.
pub(crate) const P_SAMPLE_PERIOD: Param = Param {
    name: "sample_period",
    default: "19997",
    kind: Kind::Count { min: 1, max: u32::MAX as u64, unit: "accesses" },
    meaning: "one access (load or store) in this many is sampled",
    source: "HeMem's SAMPLE_PERIOD (src/pebs.h); HPWP samples as HeMem does (§4.2)",
};
/// A count that reaches this advances the cooling clock (HeMem `PEBS_COOLING_THRESHOLD`).
pub(crate) const P_COOLING_THRESHOLD: Param = Param {
    name: "cooling_threshold",
    default: "10",
    kind: Kind::Count { min: 1, max: MAX_SAMPLES, unit: "samples" },
    meaning: "a page's read or write count reaching this advances the clock that halves every count",
    source: "HeMem's PEBS_COOLING_THRESHOLD; HPWP §5.2 keeps HeMem's clock",
};
/// Policy pass period, real time (HeMem `PEBS_KSWAPD_INTERVAL`; HPWP §5.3 "every 10ms").
pub(crate) const P_INTERVAL: Param = Param {
    name: "interval",
    default: "10ms",
    kind: Kind::Duration { min_ns: 1_000, max_ns: 3_600_000_000_000 },
    meaning: "the promotion pass period (real time)",
    source: "HeMem's PEBS_KSWAPD_INTERVAL; HPWP §5.3: every 10 ms",
};
/// Bytes promoted per pass at seed scale (HeMem `PEBS_KSWAPD_MIGRATE_RATE`).
pub(crate) const P_PROMOTE_PER_PASS: Param = Param {
    name: "promote_per_pass",
    default: "10GiB",
    kind: Kind::Bytes { min: 4096, max: 1 << 40 },
    meaning: "bytes promoted per pass at seed scale (divided by the run's scale, rounded up to pages)",
    source: "HeMem's PEBS_KSWAPD_MIGRATE_RATE, 10 GiB",
};
/// HeMem copies a page with 4 threads when it has no DMA engine (`MAX_COPY_THREADS`).
pub(crate) const P_COPY_THREADS: Param = Param {
    name: "copy_threads",
    default: "4",
    kind: Kind::Count { min: 1, max: 64, unit: "threads" },
    meaning: "threads copying each page",
    source: "HeMem's MAX_COPY_THREADS (its copy without a DMA engine); HPWP §5.3 uses I/OAT DMA where \
             present, which the simulator does not model",
};

/// The parameters (docs/policies.md, "hemem").
pub const PARAMS: &[Param] = &[
    P_SAMPLE_PERIOD,
    Param {
        name: "hot_reads",
        default: "4",
        kind: Kind::Count { min: 1, max: MAX_SAMPLES, unit: "samples" },
        meaning: "sampled reads that make a page hot (at most cooling_threshold)",
        source: "HeMem's HOT_READ_THRESHOLD",
    },
    Param {
        name: "hot_writes",
        default: "4",
        kind: Kind::Count { min: 1, max: MAX_SAMPLES, unit: "samples" },
        meaning: "sampled writes that make a page hot (at most cooling_threshold)",
        source: "HeMem's HOT_WRITE_THRESHOLD",
    },
    P_COOLING_THRESHOLD,
    P_INTERVAL,
    P_PROMOTE_PER_PASS,
    P_COPY_THREADS,
];

/// Refuses a threshold no count can reach: counts are halved once they reach the cooling
/// threshold.
pub(crate) fn check_reachable(p: &Params, key: &str, limit: u64) -> Result<(), String> {
    let n = p.count(key);
    if n > limit {
        return Err(format!(
            "{key}={n} can never be reached (a count is halved once it reaches cooling_threshold={}); give at \
             most {limit}",
            p.count("cooling_threshold")
        ));
    }
    Ok(())
}

pub fn check(p: &Params) -> Result<(), String> {
    let ct = p.count("cooling_threshold");
    check_reachable(p, "hot_reads", ct)?;
    check_reachable(p, "hot_writes", ct)
}

/// What HPWP shares with HeMem: sampling, the cooling clock, the pass, the budget and the mover.
#[derive(Clone, Debug)]
pub struct Base {
    pub sample_period: u32,
    pub cooling_threshold: u32,
    pub tick_ns: u64,
    /// Bytes promoted per pass at seed scale.
    pub promote_bytes: u64,
    pub copy_threads: u32,
}

impl Base {
    pub fn new(p: &Params) -> Self {
        Base {
            sample_period: p.count("sample_period") as u32,
            cooling_threshold: p.count("cooling_threshold") as u32,
            tick_ns: p.duration_ns("interval"),
            promote_bytes: p.bytes("promote_per_pass"),
            copy_threads: p.count("copy_threads") as u32,
        }
    }

    /// Promotions per pass: the seed's byte cap divided by the run's scale, in pages, rounded
    /// up (HeMem's loop promotes while fewer than the cap's bytes have moved, so a partial page
    /// still goes), and at least one.
    pub fn promotions_per_pass(&self, scale: f64, page: PageSize) -> usize {
        let bytes = self.promote_bytes as f64 / scale.max(f64::MIN_POSITIVE);
        ((bytes / page.bytes() as f64).ceil() as usize).max(1)
    }

    /// How HeMem moves pages: one page at a time, copied by its copy threads, each remap its own
    /// shootdown, the page write-protected during its copy (HPWP thesis ch. IV "Page Migrator"
    /// and §5.3).
    pub fn move_options(&self) -> MoveOptions {
        MoveOptions {
            batch_pages: 1,
            copy_threads: self.copy_threads,
            concurrent_batches: 1,
            rate_limit_mb_s: None,
            tlb_flush: TlbFlush::PerPage,
            protected_copies: true,
            shadow: false,
            split_huge: false,
        }
    }

    /// The mover: a copy engine beside the program (HPWP thesis §5.3: I/OAT DMA, else CPU copy
    /// threads) whose queue holds one pass's moves, each promotion with the demotion that may
    /// make room for it (HeMem's pass demotes a cold page per promotion when DRAM is full). The
    /// sources give no queue: in HeMem's code the pass itself waits for its copies, so a pass's
    /// worth in flight is what a pass can leave behind.
    pub fn mover(&self, scale: f64) -> Mover {
        Mover::CopyEngine { queue_pages: 2 * self.promotions_per_pass(scale, PAGE_SIZE) as u64 }
    }

    /// What HeMem asks of a machine, and HPWP after it: samples every `sample_period`
    /// accesses, 2 MiB pages, a pass every `interval`, its mover (for a run at `scale`).
    pub fn requirements(&self, scale: f64) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::sampling(self.sample_period)],
            page_size: PAGE_SIZE,
            tick_ns: Some(self.tick_ns),
            mechanisms: if self.move_options().protected_copies {
                vec![Mechanism::WriteProtectedCopies]
            } else {
                vec![]
            },
            // HeMem's and HPWP's hot and cold lists pair DRAM with NVM: a fast and a slow tier.
            max_tiers: Some(2),
            mover: self.mover(scale),
            ..Requirements::default()
        }
    }
}

const HOT: usize = 0;
const COLD: usize = 1;

pub struct Hemem {
    name: String,
    base: Base,
    hot_reads: u32,
    hot_writes: u32,
    heat: HeatCounters,
    lists: TierLists,
    /// The clock value at the last walk of the hot lists.
    walked_at: u64,
    budget: usize,
}

impl Default for Hemem {
    fn default() -> Self {
        Hemem::new(&crate::registry::defaults_of(NAME))
    }
}

impl Hemem {
    pub fn new(p: &Params) -> Self {
        let base = Base::new(p);
        Hemem {
            name: p.name().to_string(),
            hot_reads: p.count("hot_reads") as u32,
            hot_writes: p.count("hot_writes") as u32,
            heat: HeatCounters::new(base.cooling_threshold),
            lists: TierLists::new(2),
            walked_at: 0,
            budget: base.promotions_per_pass(1.0, PAGE_SIZE),
            base,
        }
    }

    fn class(&self, h: Heat) -> usize {
        if h.reads >= self.hot_reads || h.writes >= self.hot_writes {
            HOT
        } else {
            COLD
        }
    }
}

impl Policy for Hemem {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, machine: &MachineInfo) -> Requirements {
        self.base.requirements(machine.scale)
    }

    fn start(&mut self, machine: &MachineInfo) {
        self.budget = self.base.promotions_per_pass(machine.scale, PAGE_SIZE);
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        if obs.tiers.len() < 2 {
            return Plan::none();
        }
        // The live machine's page count grows as the program maps memory.
        let pages = obs.placement.len();
        self.heat.grow(pages);
        // A page in flight is listed where it is going.
        let placement = obs.placement_after_moves();
        self.lists.sync(&placement, COLD);
        for s in obs.samples.iter().filter(|s| (s.page as usize) < pages) {
            let h = self.heat.record(s.page, s.kind);
            let class = self.class(h);
            self.lists.set_class(s.page, class);
        }
        if self.heat.clock() != self.walked_at {
            self.walked_at = self.heat.clock();
            for side in [Side::Fast, Side::Slow] {
                for page in self.lists.pages(side, HOT) {
                    let h = self.heat.cool(page);
                    let class = self.class(h);
                    self.lists.set_class(page, class);
                }
            }
        }
        let mut pass = Promoter::new(obs.tiers, self.budget, obs.in_flight);
        pass.demote_excess(&mut self.lists, &[COLD, HOT]);
        for page in self.lists.pages(Side::Slow, HOT) {
            if !pass.promote(&mut self.lists, page, &[COLD]) {
                break;
            }
        }
        Plan {
            moves: pass.into_moves(),
            options: self.base.move_options(),
            reason: "hemem: hot slow pages up, against the oldest cold fast pages".into(),
            ..Plan::none()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use terrace_model::{AccessKind, Move, PageIdx, Sample, TierId, TierStatus};

    pub(crate) const F: TierId = TierId::FAST;
    pub(crate) const S: TierId = TierId::SLOW;

    pub(crate) fn machine(scale: f64) -> MachineInfo {
        MachineInfo { page_size: PAGE_SIZE, scale, ..MachineInfo::placeholder(2) }
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
            in_flight: &[],
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

    /// A fast tier over its capacity (a live program that first-touched past `fast_limit_mib`,
    /// or filled more while a pass was planned) is brought back within it, oldest cold page
    /// first, before anything is promoted; a promotion then still needs a victim of its own.
    #[test]
    fn a_fast_tier_over_its_capacity_is_brought_back_within_it_coldest_first() {
        let mut p = Hemem::default();
        // Three DRAM pages where two fit; page 2 is hot.
        let plan = tick(&mut p, &[F, F, F, S], 2, &samples(2, W, 4));
        assert_eq!(plan.moves, [down(0)]);
        // The same with slow page 3 hot: the excess goes, then page 3 comes up against page 1.
        let mut p = Hemem::default();
        let plan = tick(&mut p, &[F, F, F, S], 2, &samples(3, W, 4));
        assert_eq!(plan.moves, [down(0), down(1), up(3)]);
    }

    #[test]
    fn promotions_per_pass_never_exceed_the_scaled_budget() {
        let base = Base::new(&crate::registry::defaults_of(NAME));
        let promotions_per_pass = |scale, page| base.promotions_per_pass(scale, page);
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
    fn the_thresholds_sampling_and_mover_are_parameters() {
        let mut p =
            Hemem::new(&crate::registry::params_of("hemem:hot_reads=2,sample_period=100,copy_threads=8"));
        assert_eq!(tick(&mut p, &[S, S], 10, &samples(0, R, 2)).moves, [up(0)]);
        assert_eq!(p.requirements(&machine(1.0)).trackers, [TrackerRequest::sampling(100)]);
        assert_eq!(tick(&mut p, &[S, S], 10, &[]).options.copy_threads, 8);
    }

    #[test]
    fn asks_for_sampling_huge_pages_and_a_10_ms_pass() {
        let r = Hemem::default().requirements(&machine(1.0));
        assert_eq!(r.trackers, [TrackerRequest::sampling(19_997)]);
        assert_eq!((r.page_size, r.tick_ns), (PageSize::Huge2M, Some(10_000_000)));
    }
}
