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
    Applied, FreeRoom, MachineInfo, Move, MoveOptions, Mover, Observations, PageCounts, PageIdx, Plan,
    Policy, Requirements, TierId, TrackerRequest,
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
    /// Every placed page's gain, kept between ticks for its allocation.
    ranked: Vec<Ranked>,
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

/// A page and its gain, ordered by falling gain and, on a tie, by rising page number: a strict
/// order, so that every way of choosing below picks the same pages.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ranked(f64, PageIdx);

impl Eq for Ranked {}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Oracle {
    /// The target set is the `capacity` placed pages of most gain. Returns its pages outside the
    /// fast tier with a gain, best first (the promotions), and the fast pages outside it, least
    /// gain first (the victims), at most `limit` of each.
    fn candidates(
        &mut self,
        placement: &[TierId],
        future: &[PageCounts],
        capacity: usize,
        limit: usize,
    ) -> (Vec<Ranked>, Vec<Ranked>) {
        let (mut placed, mut fast) = (0, 0);
        for &t in placement {
            placed += t.is_placed() as usize;
            fast += (t == TierId::FAST) as usize;
        }
        let target = capacity.min(placed);
        match target.checked_sub(fast) {
            // On most ticks the fast tier is full and the mover takes a few pages: then only the
            // few best slow pages and the few worst fast ones matter, and keeping just those
            // is several times cheaper than ordering the split of every page.
            Some(free) if (limit + free) * 8 <= placed - fast => {
                self.by_bounded_selection(placement, future, limit, free)
            }
            _ => self.by_partition(placement, future, target, limit),
        }
    }

    /// [`Self::candidates`] by splitting all placed pages at the target.
    fn by_partition(
        &mut self,
        placement: &[TierId],
        future: &[PageCounts],
        target: usize,
        limit: usize,
    ) -> (Vec<Ranked>, Vec<Ranked>) {
        let mut ranked = std::mem::take(&mut self.ranked);
        ranked.clear();
        ranked.extend(
            future
                .iter()
                .zip(placement)
                .enumerate()
                .filter(|(_, (_, t))| t.is_placed())
                .map(|(i, (c, &t))| Ranked(self.page_gain(t, c.reads, c.writes), i as PageIdx)),
        );
        if target < ranked.len() {
            ranked.select_nth_unstable(target);
        }
        let (inside, outside) = ranked.split_at(target);
        let mut promote: Vec<Ranked> =
            inside.iter().filter(|r| r.0 > 0.0 && placement[r.1 as usize] != TierId::FAST).copied().collect();
        first_n_in_order(&mut promote, limit, Ranked::cmp);
        let mut victims: Vec<Ranked> =
            outside.iter().filter(|r| placement[r.1 as usize] == TierId::FAST).copied().collect();
        first_n_in_order(&mut victims, limit, |a, b| b.cmp(a));
        self.ranked = ranked;
        (promote, victims)
    }

    /// [`Self::candidates`] from the `limit + free` best slow pages and the `limit` worst fast
    /// ones, `free` being the room the target set has beyond the fast pages. The target set
    /// takes a best-first prefix of each kind: the j-th best slow page is in it if j <= free,
    /// or else if it beats the (j - free)-th worst fast page (the fast page it would displace
    /// from the set's `target` places). The same pages as [`Self::by_partition`].
    fn by_bounded_selection(
        &self,
        placement: &[TierId],
        future: &[PageCounts],
        limit: usize,
        free: usize,
    ) -> (Vec<Ranked>, Vec<Ranked>) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let keep = limit + free;
        if limit == 0 {
            return (Vec::new(), Vec::new());
        }
        // The heaps' tops are the kept page an entrant would replace: the worst slow page kept,
        // the best fast page kept.
        let mut best_slow: BinaryHeap<Ranked> = BinaryHeap::with_capacity(keep + 1);
        let mut worst_fast: BinaryHeap<Reverse<Ranked>> = BinaryHeap::with_capacity(limit + 1);
        for (i, (c, &t)) in future.iter().zip(placement).enumerate() {
            if !t.is_placed() {
                continue;
            }
            let r = Ranked(self.page_gain(t, c.reads, c.writes), i as PageIdx);
            if t == TierId::FAST {
                if worst_fast.len() < limit {
                    worst_fast.push(Reverse(r));
                } else if let Some(mut top) = worst_fast.peek_mut().filter(|top| r > top.0) {
                    *top = Reverse(r);
                }
            } else if best_slow.len() < keep {
                best_slow.push(r);
            } else if let Some(mut top) = best_slow.peek_mut().filter(|top| r < **top) {
                *top = r;
            }
        }
        let slow = best_slow.into_sorted_vec();
        let victims: Vec<Ranked> = worst_fast.into_sorted_vec().into_iter().map(|r| r.0).collect();
        let in_target = slow
            .iter()
            .enumerate()
            .take_while(|&(j, s)| j < free || victims.get(j - free).is_some_and(|f| s < f))
            .count();
        let promote = slow[..in_target.min(limit)].iter().take_while(|r| r.0 > 0.0).copied().collect();
        let victims = victims[..in_target.saturating_sub(free).min(limit)].to_vec();
        (promote, victims)
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
        let (promote, victims) = self.candidates(obs.placement, future, capacity as usize, limit);
        let mut victims = victims.into_iter();
        let mut room = FreeRoom::new(obs.tiers);
        let mut free = room.free(TierId::FAST);
        let mut plan =
            Plan { options: MoveOptions::default(), reason: "future accesses".into(), ..Plan::none() };
        let mut demotions = Vec::new();
        for &Ranked(gain, page) in promote.iter().take(limit) {
            if free > 0 {
                if gain <= cost {
                    break;
                }
                free -= 1;
            } else {
                let Some(Ranked(victim_gain, victim)) = victims.next() else {
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
fn first_n_in_order<F>(list: &mut Vec<Ranked>, n: usize, order: F)
where
    F: Fn(&Ranked, &Ranked) -> std::cmp::Ordering,
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
    use proptest::prelude::*;
    use terrace_model::{Tier, TierKind, TierStatus};

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

    /// A machine of `tiers` tiers (two or three) whose fast tier holds `fast_pages`.
    fn tiered(tiers: usize, fast_pages: u64, pages: u64) -> MachineInfo {
        let mut m = machine(fast_pages);
        if tiers == 3 {
            let mut middle = m.tiers[1].clone();
            middle.read_latency_ns = Some(180.0);
            middle.write_bandwidth_gb_s = Some(5.0);
            m.tiers.insert(1, middle);
            for (i, t) in m.tiers.iter_mut().enumerate() {
                t.id = TierId(i as u8);
            }
        }
        m.pages = pages;
        m
    }

    proptest! {
        /// Keeping the few best slow pages and worst fast ones picks exactly what splitting
        /// every page at the target does, ties, unplaced pages and a middle tier included.
        #[test]
        fn the_bounded_selection_picks_what_the_partition_picks(
            tiers in 2usize..=3,
            pages in prop::collection::vec((0u8..4, 0u32..6, 0u32..3), 1..300),
            capacity in 0usize..320,
            limit in 0usize..40,
        ) {
            let tier = |t: u8| match t {
                0 => TierId::UNPLACED,
                t => TierId((t - 1).min(tiers as u8 - 1)),
            };
            let mut placement: Vec<TierId> = pages.iter().map(|&(t, _, _)| tier(t)).collect();
            // The fast tier holds no more than its capacity.
            let mut fast = 0;
            for t in placement.iter_mut().filter(|t| **t == TierId::FAST) {
                fast += 1;
                if fast > capacity {
                    *t = TierId::SLOW;
                }
            }
            let future: Vec<PageCounts> =
                pages.iter().map(|&(_, reads, writes)| PageCounts { reads, writes }).collect();
            let mut o = Oracle::default();
            o.start(&tiered(tiers, capacity as u64, pages.len() as u64));
            let placed = placement.iter().filter(|t| t.is_placed()).count();
            let fast = placement.iter().filter(|t| **t == TierId::FAST).count();
            let target = capacity.min(placed);
            let expected = o.by_partition(&placement, &future, target, limit);
            prop_assert_eq!(&o.by_bounded_selection(&placement, &future, limit, target - fast), &expected);
            prop_assert_eq!(&o.candidates(&placement, &future, capacity, limit), &expected);
        }
    }
}
