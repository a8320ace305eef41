//! `hpwp`: High Probability Write Patterns (JungBeen Kim, UNIST M.S. thesis 2022; docs/seeds.md): HeMem
//! ([`crate::hemem`]) with a write-likely class that gets priority for DRAM, because Optane
//! writes cost three times what reads do (Abstract, §I, §IV).
//!
//! Rules (docs/policies.md, "hpwp"):
//! 1. Sample loads and stores as HeMem does (§4.2, §5.2) and count each page's sampled reads and
//!    writes, cooled by HeMem's global clock (§5.2; [`crate::sampled_heat`]).
//! 2. Hot: 3 or more sampled accesses in total, reads and writes alike (§5.2, §6.2 Fig 4-5).
//! 3. High probability write (HPW): 4 or more recent sampled writes (§4.2; §6.2 Fig 6-7 leaves the
//!    value unstated), decided at each sample of the page (Fig 3, orange) and kept until the next.
//! 4. Five FIFO lists per tier (§4.3): HPW-HOT, HOT, HPW-COLD, COLD, and FREE (the machine's
//!    free pages). When the clock has moved, the hot lists are walked; a page that cooled below 3
//!    joins HPW-COLD or COLD by its HPW bit (Fig 3, blue).
//! 5. Every 10 ms (§5.3) promote from the slow tier, oldest first in each list (§4.3, Fig 3 green):
//!    HPW-HOT pages first, making room from FREE, else by demoting DRAM COLD, then HPW-COLD, then
//!    HOT; then HOT pages, from FREE, COLD, then HPW-COLD; then HPW-COLD pages, from FREE or DRAM
//!    COLD only. DRAM HPW-HOT is never demoted; slow COLD is never promoted. A promoted page
//!    joins the DRAM list of its class, a demoted one the slow list of its class.
//! 6. HeMem's promotion cap per pass, 2 MiB pages, HeMem's mover.
//!
//! Writes during a copy (ch. IV "Page Migrator", §5.3: the page is write-protected with userfaultfd
//! while it is copied, so no write is lost) wait for the copy: the live machine's mover
//! write-protects each batch, and the simulator stalls a writer until the copy completes
//! (docs/model.md §4, "Movers"). The mover is HeMem's copy engine ([`hemem::Base::mover`]).

use crate::hemem::{self, PAGE_SIZE};
use crate::params::{Kind, Param, Params};
use crate::sampled_heat::{Heat, HeatCounters, Promoter, Side, TierLists};
use terrace_model::{MachineInfo, Observations, PageIdx, Plan, Policy, Requirements};

pub const NAME: &str = "hpwp";
pub const SUMMARY: &str =
    "HPWP: HeMem plus a write-likely class; write-likely hot pages first to DRAM, write-likely cold ones too";

/// The parameters (docs/policies.md, "hpwp"): its two thresholds, then what it shares with hemem.
pub const PARAMS: &[Param] = &[
    Param {
        name: "hot_threshold",
        default: "3",
        kind: Kind::Count { min: 1, max: 1000, unit: "samples" },
        meaning: "sampled accesses, reads and writes together, that make a page hot (at most twice \
                  cooling_threshold)",
        source: "HPWP thesis §6.2: \"we set the hot threshold to 3\"",
    },
    Param {
        name: "hpw_writes",
        default: "4",
        kind: Kind::Count { min: 1, max: 1000, unit: "samples" },
        meaning: "recent sampled writes that make a page write-likely (HPW; at most cooling_threshold)",
        source: "unstated (§6.2: 2-3 overestimate, more than 4 underestimate, \"set by balancing\"): 4, \
                 where the sweep's wording points, and HeMem's own write-hot threshold",
    },
    hemem::P_SAMPLE_PERIOD,
    hemem::P_COOLING_THRESHOLD,
    hemem::P_INTERVAL,
    hemem::P_PROMOTE_PER_PASS,
    hemem::P_COPY_THREADS,
];

/// Refuses thresholds no count can reach (a count is halved once it reaches the cooling
/// threshold, so reads and writes together stay under twice it).
pub fn check(p: &Params) -> Result<(), String> {
    let ct = p.count("cooling_threshold");
    hemem::check_reachable(p, "hot_threshold", 2 * ct)?;
    hemem::check_reachable(p, "hpw_writes", ct)
}

const HPW_HOT: usize = 0;
const HOT: usize = 1;
const HPW_COLD: usize = 2;
const COLD: usize = 3;

/// The promotion order (§4.3): each slow class that is promoted, with the DRAM classes it may
/// demote to make room once FREE is empty, in the order it tries them.
const PROMOTIONS: [(usize, &[usize]); 3] =
    [(HPW_HOT, &[COLD, HPW_COLD, HOT]), (HOT, &[COLD, HPW_COLD]), (HPW_COLD, &[COLD])];

fn class(hot: bool, hpw: bool) -> usize {
    match (hot, hpw) {
        (true, true) => HPW_HOT,
        (true, false) => HOT,
        (false, true) => HPW_COLD,
        (false, false) => COLD,
    }
}

pub struct Hpwp {
    name: String,
    base: hemem::Base,
    hot_accesses: u32,
    hpw_writes: u32,
    heat: HeatCounters,
    lists: TierLists,
    /// Each page's HPW bit, as decided at its last sample.
    hpw: Vec<bool>,
    /// The clock value at the last walk of the hot lists.
    walked_at: u64,
    budget: usize,
}

impl Default for Hpwp {
    fn default() -> Self {
        Hpwp::new(&crate::registry::defaults_of(NAME))
    }
}

impl Hpwp {
    pub fn new(p: &Params) -> Self {
        let base = hemem::Base::new(p);
        Hpwp {
            name: p.name().to_string(),
            hot_accesses: p.count("hot_threshold") as u32,
            hpw_writes: p.count("hpw_writes") as u32,
            heat: HeatCounters::new(base.cooling_threshold),
            lists: TierLists::new(4),
            hpw: Vec::new(),
            walked_at: 0,
            budget: base.promotions_per_pass(1.0, PAGE_SIZE),
            base,
        }
    }

    fn is_hot(&self, h: Heat) -> bool {
        h.total() >= self.hot_accesses
    }
}

impl Policy for Hpwp {
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
        if pages > self.hpw.len() {
            self.hpw.resize(pages, false);
        }
        self.lists.sync(&placement, COLD);
        for s in obs.samples.iter().filter(|s| (s.page as usize) < pages) {
            let h = self.heat.record(s.page, s.kind);
            let hpw = h.writes >= self.hpw_writes;
            self.hpw[s.page as usize] = hpw;
            let hot = self.is_hot(h);
            self.lists.set_class(s.page, class(hot, hpw));
        }
        if self.heat.clock() != self.walked_at {
            self.walked_at = self.heat.clock();
            for side in [Side::Fast, Side::Slow] {
                let hot: Vec<PageIdx> =
                    [HPW_HOT, HOT].iter().flat_map(|&c| self.lists.pages(side, c)).collect();
                for page in hot {
                    let h = self.heat.cool(page);
                    let hot = self.is_hot(h);
                    self.lists.set_class(page, class(hot, self.hpw[page as usize]));
                }
            }
        }
        // Candidates as the pass starts: a page demoted during the pass waits for the next one.
        let candidates: Vec<(Vec<PageIdx>, &[usize])> =
            PROMOTIONS.iter().map(|&(c, victims)| (self.lists.pages(Side::Slow, c), victims)).collect();
        let mut pass = Promoter::new(obs.tiers, self.budget, obs.in_flight);
        // The victims priority 1 may take (§4.3): never DRAM HPW-HOT.
        pass.demote_excess(&mut self.lists, &[COLD, HPW_COLD, HOT]);
        for (pages, victims) in candidates {
            for page in pages {
                if !pass.promote(&mut self.lists, page, victims) {
                    break;
                }
            }
        }
        Plan {
            moves: pass.into_moves(),
            options: self.base.move_options(),
            reason: "hpwp: write-likely hot, then hot, then write-likely cold pages up".into(),
            ..Plan::none()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hemem::tests::{machine, samples, tick, F, S};
    use terrace_model::{AccessKind, Move, Sample};

    const R: AccessKind = AccessKind::Read;
    const W: AccessKind = AccessKind::Write;

    fn up(page: PageIdx) -> Move {
        Move { page, to: F }
    }
    fn down(page: PageIdx) -> Move {
        Move { page, to: S }
    }

    /// Samples that leave `write_cold` write-likely but cold: four writes, then `clock_page`
    /// reaches the cooling threshold, so the walk halves them to two (total below 3).
    fn write_likely_then_cooled(write_cold: &[PageIdx], clock_page: PageIdx) -> Vec<Sample> {
        let mut s: Vec<Sample> = write_cold.iter().flat_map(|&p| samples(p, W, 4)).collect();
        s.extend(samples(clock_page, R, 10));
        s
    }

    /// As hemem: a fast tier over its capacity is brought back within it before any promotion,
    /// the oldest cold page first.
    #[test]
    fn a_fast_tier_over_its_capacity_is_brought_back_within_it() {
        let mut p = Hpwp::default();
        let plan = tick(&mut p, &[F, F, F, S], 2, &[]);
        assert_eq!(plan.moves, [Move { page: 0, to: S }]);
    }

    #[test]
    fn promotes_write_likely_hot_before_hot_before_write_likely_cold() {
        // Page 0 (fast) ticks the clock; page 1 becomes HPW-COLD, page 2 HOT, page 3 HPW-HOT.
        let mut s = write_likely_then_cooled(&[1], 0);
        s.extend(samples(2, R, 3));
        s.extend(samples(3, W, 4));
        let placement = [F, S, S, S];
        let mut p = Hpwp::default();
        assert_eq!(tick(&mut p, &placement, 4, &s).moves, [up(3), up(2), up(1)]);
        // With a budget of two promotions, the write-likely cold page waits.
        let mut p = Hpwp::default();
        p.start(&machine(4096.0));
        assert_eq!(tick(&mut p, &placement, 4, &s).moves, [up(3), up(2)]);
    }

    #[test]
    fn hot_is_three_sampled_accesses_of_either_kind() {
        let mut s = samples(0, R, 2);
        s.extend(samples(0, W, 1));
        s.extend(samples(1, R, 1));
        s.extend(samples(1, W, 1));
        assert_eq!(tick(&mut Hpwp::default(), &[S, S], 2, &s).moves, [up(0)]);
    }

    #[test]
    fn dram_hpw_hot_is_never_demoted() {
        // Fast pages 0 and 1 are HPW-HOT; slow page 2 is HPW-HOT, slow page 3 HOT.
        let s: Vec<Sample> =
            [0, 1, 2].iter().flat_map(|&p| samples(p, W, 4)).chain(samples(3, R, 3)).collect();
        assert!(tick(&mut Hpwp::default(), &[F, F, S, S], 2, &s).is_empty());
        // A DRAM HOT page is the last resort for an HPW-HOT one; the HPW-HOT page stays.
        let s: Vec<Sample> =
            samples(0, W, 4).into_iter().chain(samples(1, R, 3)).chain(samples(2, W, 4)).collect();
        assert_eq!(tick(&mut Hpwp::default(), &[F, F, S], 2, &s).moves, [down(1), up(2)]);
    }

    #[test]
    fn plain_cold_is_never_promoted_even_into_free_room() {
        // Page 1 was never hot; page 2 was hot on reads and cooled to COLD when page 0 ticked
        // the clock.
        let mut s = vec![Sample { page: 1, kind: R }, Sample { page: 1, kind: W }];
        s.extend(samples(2, R, 3));
        s.extend(samples(0, R, 10));
        assert!(tick(&mut Hpwp::default(), &[F, S, S], 10, &s).is_empty());
    }

    #[test]
    fn hpw_cold_is_promoted_only_into_free_room_or_by_demoting_dram_cold() {
        // Fast: page 0 HOT, page 1 HPW-COLD; slow: page 2 HPW-COLD. Full: nothing to demote.
        let s = write_likely_then_cooled(&[1, 2], 0);
        assert!(tick(&mut Hpwp::default(), &[F, F, S], 2, &s).is_empty());
        // One free page: it goes there.
        assert_eq!(tick(&mut Hpwp::default(), &[F, F, S], 3, &s).moves, [up(2)]);
        // Full, with a COLD fast page (3, never sampled): that one makes room.
        assert_eq!(tick(&mut Hpwp::default(), &[F, F, S, F], 3, &s).moves, [down(3), up(2)]);
    }

    #[test]
    fn a_hot_promotion_demotes_dram_hpw_cold_but_never_dram_hot() {
        // Fast: page 0 HOT, page 1 HPW-COLD; slow: pages 2 and 3 HOT.
        let mut s = write_likely_then_cooled(&[1], 0);
        s.extend(samples(2, R, 3));
        s.extend(samples(3, R, 3));
        assert_eq!(tick(&mut Hpwp::default(), &[F, F, S, S], 2, &s).moves, [down(1), up(2)]);
    }

    #[test]
    fn the_thresholds_are_parameters() {
        // Three sampled reads are not hot at a threshold of 4, four are.
        let p = |spec: &str| Hpwp::new(&crate::registry::params_of(spec));
        assert!(tick(&mut p("hpwp:hot_threshold=4"), &[S, S], 2, &samples(0, R, 3)).is_empty());
        assert_eq!(tick(&mut p("hpwp:hot_threshold=4"), &[S, S], 2, &samples(0, R, 4)).moves, [up(0)]);
        // Two writes make a page write-likely at hpw_writes=2: it goes before a hot page.
        let mut s = samples(0, R, 3);
        s.extend(samples(1, W, 3));
        assert_eq!(tick(&mut p("hpwp:hpw_writes=2"), &[S, S], 1, &s).moves, [up(1)]);
        assert_eq!(tick(&mut p("hpwp"), &[S, S], 1, &s).moves, [up(0)]);
    }

    /// HPWP changes HeMem's classes, not its machinery (HPWP thesis §5.2-5.3): PEBS sampling of
    /// one access in 19,997, 2 MiB pages, a pass every 10 ms, pages write-protected while they
    /// are copied by a copy engine beside the program, DRAM and NVM as its two tiers. Stated here from the seeds, not read back from
    /// hemem's code.
    #[test]
    fn asks_for_what_hemem_asks_for() {
        let m = machine(1.0);
        let expected = Requirements {
            trackers: vec![terrace_model::TrackerRequest::sampling(19_997)],
            page_size: terrace_model::PageSize::Huge2M,
            tick_ns: Some(10_000_000),
            mechanisms: vec![terrace_model::Mechanism::WriteProtectedCopies],
            max_tiers: Some(2),
            // A copy engine beside the program (§5.3) holding one pass: 10 GiB / 2 MiB = 5120
            // promotions at seed scale, each with the demotion that may make its room.
            mover: terrace_model::Mover::CopyEngine { queue_pages: 2 * 5120 },
            ..Requirements::default()
        };
        assert_eq!(Hpwp::default().requirements(&m), expected);
        assert_eq!(hemem::Hemem::default().requirements(&m), expected);
    }
}
