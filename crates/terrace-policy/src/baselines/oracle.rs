//! A clairvoyant placement: at every tick it is told each page's accesses over a coming horizon
//! (the `future` tracker, which only a simulator has) and puts the pages that gain most from the
//! fast tier there, when the gain exceeds what moving costs the program.
//!
//! Algorithm (docs/policies.md, "oracle"): each page's gain from the fast tier over the horizon
//! (100 ticks of 100 ms) is `reads x (slow read latency - fast read latency) / threads + writes x
//! 64 B x (1/slow write bandwidth - 1/fast write bandwidth)`, from the tiers' firmware
//! attributes, where "slow" is the tier the page is in (for a fast page, the nearest tier below,
//! where a demotion sends it: on two tiers, the slow tier). The target fast set is the
//! top-capacity pages by gain. Slow pages of the target
//! set are promoted in falling gain order, each against the fast page of least gain outside the
//! set (or into free room), while the gain difference exceeds what the moves cost the program
//! (the stall the machine reports per page moved, plus the bandwidth the copy takes) and while the mover can finish them within
//! half an interval (its reported time per page). Both costs are learned from a first probe of
//! 64 promotions. It is greedy, with a fixed horizon and a gain estimate that ignores bandwidth
//! saturation and media granularity: it is neither optimal nor a bound, only a strong,
//! explainable reference.

use crate::params::{Kind, Param, Params};
use terrace_model::{
    Applied, FreeRoom, MachineInfo, Move, MoveOptions, Mover, Observations, PageIdx, Plan, Policy,
    Requirements, TierId, TrackerRequest,
};

pub const NAME: &str = "oracle";
pub const SUMMARY: &str =
    "reference: knows each interval's future accesses, places the pages that gain most (simulator only)";

/// The parameters (docs/policies.md, "The oracle"): all Terrace's own choices.
pub const PARAMS: &[Param] = &[
    Param {
        name: "interval",
        default: "100ms",
        kind: Kind::Duration { min_ns: 1_000, max_ns: 3_600_000_000_000 },
        meaning: "the tick period (real time)",
        source: "Terrace's choice: a tenth of the seeds' 1-2 s periods, so it reacts faster than any of them",
    },
    Param {
        name: "horizon",
        default: "100",
        kind: Kind::Count { min: 1, max: 100_000, unit: "ticks" },
        meaning: "how far ahead it sees each page's accesses",
        source: "Terrace's choice: 10 s at the default interval, long enough that a steadily hot GUPS page \
                 (about 190 updates in 10 s) repays a move, short enough to follow phases",
    },
    Param {
        name: "probe",
        default: "64",
        kind: Kind::Count { min: 1, max: 1 << 20, unit: "promotions" },
        meaning: "promotions on a tick before the machine has said what a move costs",
        source: "Terrace's choice: small enough that a wrong guess of the cost moves little",
    },
];

pub struct Oracle {
    name: String,
    tick_ns: u64,
    horizon_ticks: u32,
    probe_moves: usize,
    /// Per tier: what one read and one write of a page there costs more than in the fast tier
    /// (0 for the fast tier itself).
    read_gain_ns: Vec<f64>,
    write_gain_ns: Vec<f64>,
    /// Learned per page moved: (program stall, mover time), ns; `None` until the machine has
    /// reported a move.
    move_cost_ns: Option<(f64, f64)>,
    fast_capacity: Option<u64>,
    /// Bandwidth a page's copy takes from the program, ns: read from one tier, written to the
    /// other, at the tiers' firmware bandwidths (a bandwidth-bound program loses that time).
    copy_ns: f64,
    /// Promotions the mover can still take on, carried from tick to tick (fractions included).
    allowance: f64,
    ranked: Vec<(f64, PageIdx)>,
}

impl Default for Oracle {
    fn default() -> Self {
        Oracle::new(&crate::registry::defaults_of(NAME))
    }
}

impl Oracle {
    pub fn new(p: &Params) -> Self {
        Oracle {
            name: p.name().to_string(),
            tick_ns: p.duration_ns("interval"),
            horizon_ticks: p.count("horizon") as u32,
            probe_moves: p.count("probe") as usize,
            read_gain_ns: Vec::new(),
            write_gain_ns: Vec::new(),
            move_cost_ns: None,
            fast_capacity: None,
            copy_ns: 0.0,
            allowance: 0.0,
            ranked: Vec::new(),
        }
    }

    /// A page's gain from the fast tier: against the tier it is in, or, for a fast page, the
    /// tier below, where a demotion would send it (the nearest one: on two tiers, the slow tier).
    fn page_gain(&self, tier: TierId, reads: u32, writes: u32) -> f64 {
        let t = tier.index().max(1).min(self.read_gain_ns.len().saturating_sub(1));
        let (r, w) = (self.read_gain_ns.get(t), self.write_gain_ns.get(t));
        reads as f64 * r.copied().unwrap_or(0.0) + writes as f64 * w.copied().unwrap_or(0.0)
    }
}

impl Policy for Oracle {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::future(self.horizon_ticks)],
            tick_ns: Some(self.tick_ns),
            // Stock move_pages from its own thread, which waits for it (docs/policies.md, "The
            // oracle"): what it learns per page moved is then what its next tick waits.
            mover: Mover::PolicyThread,
            ..Requirements::default()
        }
    }

    fn start(&mut self, m: &MachineInfo) {
        let (fast, slow) = (&m.tiers[0], &m.tiers[m.tiers.len() - 1]);
        let threads = m.threads.max(1) as f64;
        let per_write = |bw: Option<f64>| bw.map_or(0.0, |b| 64.0 / b);
        self.read_gain_ns = m
            .tiers
            .iter()
            .map(|t| {
                (t.read_latency_ns.unwrap_or(1.0) - fast.read_latency_ns.unwrap_or(1.0)).max(0.0) / threads
            })
            .collect();
        self.write_gain_ns = m
            .tiers
            .iter()
            .map(|t| (per_write(t.write_bandwidth_gb_s) - per_write(fast.write_bandwidth_gb_s)).max(0.0))
            .collect();
        self.fast_capacity = fast.capacity_pages;
        let page = m.page_size.bytes() as f64;
        let per_byte = |bw: Option<f64>| bw.map_or(0.0, |b| 1.0 / b);
        self.copy_ns = page
            * (per_byte(slow.read_bandwidth_gb_s).max(per_byte(fast.read_bandwidth_gb_s))
                + per_byte(slow.write_bandwidth_gb_s).max(per_byte(fast.write_bandwidth_gb_s)));
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let Some(future) = obs.future else {
            return Plan::none();
        };
        let Some(capacity) = self.fast_capacity else {
            return Plan::none();
        };
        let mut ranked = std::mem::take(&mut self.ranked);
        ranked.clear();
        ranked.extend(
            future
                .iter()
                .enumerate()
                .filter(|(i, _)| obs.placement[*i].is_placed())
                .map(|(i, c)| (self.page_gain(obs.placement[i], c.reads, c.writes), i as PageIdx)),
        );
        self.ranked = ranked;
        // The pages by falling gain, the lower page first on a tie: a strict order, so the
        // target set and both lists below are the same as in a full sort of `ranked`. Only the
        // split at the target and the two short lists are ordered (a full sort of every page
        // on every tick was most of a run's time).
        let order = |a: &(f64, PageIdx), b: &(f64, PageIdx)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let target = (capacity as usize).min(self.ranked.len());
        if target < self.ranked.len() {
            self.ranked.select_nth_unstable_by(target, order);
        }
        let (inside, outside) = self.ranked.split_at(target);
        let (cost, limit) = match self.move_cost_ns {
            // The mover runs beside the program: what it can finish in half an interval bounds a plan
            // (a plan counts a promotion and its demotion). An interval shorter than two moves
            // (a scaled-down run ticks proportionally faster) carries its fraction of a move to
            // the next tick, so the rate is the same at every scale; what a tick leaves unused
            // is kept up to one tick's worth (or one move), so quiet ticks do not save up a burst.
            Some((stall, mover)) => {
                let per_tick = obs.interval_ns() as f64 / mover.max(1.0) / 2.0;
                self.allowance = (self.allowance + per_tick).min(per_tick.max(1.0));
                (stall + self.copy_ns, self.allowance as usize)
            }
            None => (0.0, self.probe_moves),
        };
        // Promote in falling gain; demote the least-gain fast pages outside the target set.
        let mut promote: Vec<(f64, PageIdx)> = inside
            .iter()
            .filter(|(g, p)| *g > 0.0 && obs.placement[*p as usize] != TierId::FAST)
            .copied()
            .collect();
        first_n_in_order(&mut promote, limit, order);
        let mut victims: Vec<(f64, PageIdx)> =
            outside.iter().filter(|(_, p)| obs.placement[*p as usize] == TierId::FAST).copied().collect();
        first_n_in_order(&mut victims, limit, |a, b| order(b, a));
        let mut victims = victims.into_iter();
        let mut room = FreeRoom::new(obs.tiers);
        let mut free = room.free(TierId::FAST);
        let mut plan =
            Plan { options: MoveOptions::default(), reason: "future accesses".into(), ..Plan::none() };
        let mut demotions = Vec::new();
        for &(gain, page) in promote.iter().take(limit) {
            if free > 0 {
                if gain <= cost {
                    break;
                }
                free -= 1;
            } else {
                let Some((victim_gain, victim)) = victims.next() else {
                    break;
                };
                if gain - victim_gain <= 2.0 * cost {
                    break;
                }
                let Some(to) = room.take_below(TierId::FAST) else { break };
                demotions.push(Move { page: victim, to });
            }
            plan.moves.push(Move { page, to: TierId::FAST });
        }
        if self.move_cost_ns.is_some() {
            self.allowance -= plan.moves.len() as f64;
        }
        // Demotions first, so that the fast tier has room for the promotions.
        demotions.append(&mut plan.moves);
        plan.moves = demotions;
        plan
    }

    fn applied(&mut self, a: &Applied) {
        if a.pages_moved > 0 {
            let pages = a.pages_moved as f64;
            self.move_cost_ns = Some((a.program_stall_ns as f64 / pages, a.time_ns as f64 / pages));
        }
    }
}

/// The first `n` of `list` in `order`, sorted, and the rest dropped.
fn first_n_in_order<F>(list: &mut Vec<(f64, PageIdx)>, n: usize, order: F)
where
    F: Fn(&(f64, PageIdx), &(f64, PageIdx)) -> std::cmp::Ordering,
{
    if n < list.len() {
        list.select_nth_unstable_by(n, &order);
        list.truncate(n);
    }
    list.sort_unstable_by(order);
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::{PageCounts, Tier, TierKind, TierStatus};

    fn machine(fast_pages: u64) -> MachineInfo {
        let tier = |id, lat, wbw, cap| Tier {
            id: TierId(id),
            name: String::new(),
            kind: TierKind::Dram,
            capacity_pages: cap,
            read_latency_ns: Some(lat),
            read_bandwidth_gb_s: Some(10.0),
            write_bandwidth_gb_s: Some(wbw),
        };
        MachineInfo {
            name: String::new(),
            tiers: vec![tier(0, 100.0, 10.0, Some(fast_pages)), tier(1, 300.0, 2.0, Some(100))],
            page_size: Default::default(),
            pages: 4,
            threads: 1,
            scale: 1.0,
            mechanisms: Default::default(),
            programs: Vec::new(),
            move_unit_bytes: 0,
        }
    }

    /// One tick with the fast tier full and the given future reads per page.
    fn tick(o: &mut Oracle, placement: &[TierId], future_reads: &[u32]) -> Plan {
        let fast = placement.iter().filter(|t| **t == TierId::FAST).count() as u64;
        let future: Vec<PageCounts> =
            future_reads.iter().map(|&reads| PageCounts { reads, writes: 0 }).collect();
        let tiers = [
            TierStatus { used_pages: fast, capacity_pages: Some(fast), ..Default::default() },
            TierStatus::default(),
        ];
        // A 10 ms interval.
        let obs = Observations {
            now_ns: 10_000_000,
            previous_ns: 0,
            placement,
            tiers: &tiers,
            page_bits: None,
            samples: &[],
            future: Some(&future),
            hint_faults: &[],
            in_flight: &[],
        };
        o.tick(&obs)
    }

    #[test]
    fn swaps_a_cold_fast_page_for_a_hot_slow_one_and_demotes_first() {
        let mut o = Oracle::default();
        o.start(&machine(2));
        let plan = tick(&mut o, &[TierId::FAST, TierId::FAST, TierId::SLOW, TierId::SLOW], &[0, 50, 100, 1]);
        assert_eq!(plan.moves, vec![Move { page: 0, to: TierId::SLOW }, Move { page: 2, to: TierId::FAST }]);
    }

    #[test]
    fn does_not_move_when_the_gain_is_below_the_learned_cost() {
        let mut o = Oracle::default();
        o.start(&machine(1));
        o.applied(&Applied {
            pages_moved: 1,
            time_ns: 1_000_000,
            program_stall_ns: 1_000,
            ..Default::default()
        });
        // Cost per page: 1 us of stall plus 4096 B x (1/10 + 1/2) ns of copy = 3.46 us; a read
        // gains 200 ns, and a swap must repay two moves: 10 reads do not, 1000 do.
        assert!(tick(&mut o, &[TierId::FAST, TierId::SLOW], &[0, 10]).is_empty());
        assert_eq!(tick(&mut o, &[TierId::FAST, TierId::SLOW], &[0, 1000]).moves.len(), 2);
    }

    /// The order a full sort of every page gives, ties included: promotions by falling gain,
    /// the lower page first; victims by rising gain, the higher page first.
    #[test]
    fn promotes_and_demotes_in_the_full_ranking_order_ties_included() {
        let mut o = Oracle::default();
        let mut m = machine(3);
        m.pages = 8;
        o.start(&m);
        let (f, s) = (TierId::FAST, TierId::SLOW);
        let placement = [f, f, f, s, s, s, s, s];
        let plan = tick(&mut o, &placement, &[0, 0, 7, 9, 9, 1, 9, 0]);
        let pages: Vec<(PageIdx, TierId)> = plan.moves.iter().map(|m| (m.page, m.to)).collect();
        assert_eq!(pages, vec![(1, s), (0, s), (2, s), (3, f), (4, f), (6, f)]);
    }

    /// A scaled-down run ticks faster than the mover moves a page: the fraction a tick allows is
    /// carried over, so a move goes every few ticks instead of never (it never moved again once
    /// it learned the cost, and lost to ambix on `objects` at 1/64 size).
    #[test]
    fn an_interval_shorter_than_a_move_moves_every_few_ticks() {
        let mut o = Oracle::default();
        o.start(&machine(1));
        // 20 ms of mover time a page in a 10 ms interval: a quarter of a move a tick.
        o.applied(&Applied {
            pages_moved: 1,
            time_ns: 20_000_000,
            program_stall_ns: 1_000,
            ..Default::default()
        });
        let moves: Vec<usize> = (0..8)
            .map(|_| tick(&mut o, &[TierId::FAST, TierId::SLOW], &[0, 1_000_000]).moves.len())
            .collect();
        // Each move is a swap (a demotion and a promotion), on the fourth and eighth ticks.
        assert_eq!(moves, vec![0, 0, 0, 2, 0, 0, 0, 2]);
    }

    #[test]
    fn probes_with_a_few_pages_before_it_knows_the_cost() {
        let mut o = Oracle::default();
        o.start(&machine(100));
        let mut placement = vec![TierId::FAST; 100];
        placement.extend([TierId::SLOW; 100]);
        let mut reads = vec![0; 100];
        reads.extend([1000; 100]);
        let plan = tick(&mut o, &placement, &reads);
        assert_eq!(plan.moves.iter().filter(|m| m.to == TierId::FAST).count(), 64);
    }
}
