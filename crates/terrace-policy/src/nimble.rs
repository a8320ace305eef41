//! `nimble`: Nimble's tiering policy (Yan et al., ASPLOS'19, §3.2 and Fig. 7) with its migration
//! mechanisms (§3.1) chosen by the `mechanism` parameter, one preset per configuration of the
//! seed's end-to-end figure (Fig. 12).
//!
//! The policy, Linux's active and inactive page lists per node reused as hot and cold (§3.2):
//! - Lists (Fig. 7b, the intra-node edges; the text leaves the rules to the figure, and these are
//!   Linux's `vmscan` rules at one reference): a page referenced (accessed or dirtied) in the last
//!   period is active; an active page not referenced for a period becomes inactive; an inactive
//!   page referenced again becomes active. A page is first listed active when first seen
//!   referenced, as Linux puts a new anonymous page on the active list.
//! - Moves (Fig. 7a, the inter-node edges), every period (5 s, §3.2): the slow tier's active
//!   pages are promoted while the fast tier has room, and the fast tier's inactive pages are
//!   demoted to make room for the rest, oldest inactive first. **When the fast tier is full and
//!   has no inactive page, nothing moves** (§3.2). Pages Linux would reclaim stay inactive as
//!   demotion candidates; nothing is swapped.
//! - Allocation: first touch into the fast tier while it has room, else the slow tier; never an
//!   eviction on allocation (§3.2).
//! - Mechanisms (§3.1, §4.3's Fig. 12 configurations): `linux` splits huge pages and moves base
//!   pages with one thread, one page at a time (stock move_pages); `thp` moves 2 MiB pages whole
//!   (§3.1.1); `opt` adds 4 copy threads (§3.1.2) and 8 huge pages in flight (§3.1.3, §4.5.2);
//!   `exchange` pairs each promotion beyond free room with a demotion through exchange
//!   (§3.1.4); `exchange-4k` is the last on base pages, 512 in flight.
//! - Mover: Nimble's tiering runs in the kernel and calls its migration routines synchronously
//!   from the thread that runs the policy ([`Mover::PolicyThread`]; the seed does not say which
//!   thread that is: docs/policies.md, "nimble").

use crate::params::{Kind, Param, Params};
use terrace_model::{
    Exchange, MachineInfo, Move, MoveOptions, Mover, Observations, PageIdx, PageSize, Plan, Policy,
    Requirements, TierId, TlbFlush, TrackerRequest, PAGE_DIRTY, PAGE_REFERENCED,
};

pub const NAME: &str = "nimble";
pub const SUMMARY: &str = "Nimble: active/inactive lists on referenced bits, 5 s passes, huge pages moved \
                           by 4 threads, 8 in flight, promotions paired with demotions by exchange";
pub const LINUX_NAME: &str = "nimble-linux";
pub const LINUX_SUMMARY: &str =
    "Nimble's policy with stock Linux migration: huge pages split, base pages one at a time (Fig. 12's baseline)";
pub const EXCHANGE_4K_NAME: &str = "nimble-exchange-4k";
pub const EXCHANGE_4K_SUMMARY: &str =
    "Nimble's policy on base pages: 4 copy threads, 512 pages in flight, exchange (Fig. 12)";
pub const THP_NAME: &str = "nimble-thp";
pub const THP_SUMMARY: &str = "Nimble's policy with native huge-page migration only (Fig. 12)";
pub const OPT_NAME: &str = "nimble-opt";
pub const OPT_SUMMARY: &str =
    "Nimble's policy with huge pages, 4 copy threads and 8 pages in flight, no exchange (§4.2.5)";

/// The mechanisms, in the order of the seed's Fig. 12 (and Table 2's columns).
pub const MECHANISMS: &[&str] = &["linux", "exchange-4k", "thp", "opt", "exchange"];

/// The parameters (docs/policies.md, "nimble").
pub const PARAMS: &[Param] = &[
    Param {
        name: "period",
        default: "5s",
        kind: Kind::Duration { min_ns: 1_000_000, max_ns: 3_600_000_000_000 },
        meaning: "how often the lists are updated and pages moved (real time; divided by the run's scale)",
        source: "Nimble §3.2: page locations are optimised every 5 seconds",
    },
    Param {
        name: "mechanism",
        default: "exchange",
        kind: Kind::Choice(MECHANISMS),
        meaning:
            "how pages move: linux (split, base pages, one thread), exchange-4k (base pages, 4 threads, \
                  512 in flight, exchange), thp (2 MiB pages whole), opt (2 MiB, 4 threads, 8 in flight), \
                  exchange (opt plus exchange)",
        source:
            "Nimble §4.3, Fig. 12's configurations; 4 threads and 8 huge or 512 base pages in flight are \
                 §4.3's settings (§4.5: best at 4 threads and 8 pages)",
    },
];

/// Copy threads of the optimised configurations (Nimble §4.3, §4.5.1).
const COPY_THREADS: u32 = 4;
/// move_pages callers at once in the optimised configurations: each takes `in_flight /
/// CALLERS` pages per call, so that `in_flight` pages are copied at once (Nimble §3.1.3).
const CALLERS: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mechanism {
    Linux,
    Exchange4k,
    Thp,
    Opt,
    Exchange,
}

impl Mechanism {
    fn from_word(w: &str) -> Self {
        match w {
            "linux" => Mechanism::Linux,
            "exchange-4k" => Mechanism::Exchange4k,
            "thp" => Mechanism::Thp,
            "opt" => Mechanism::Opt,
            _ => Mechanism::Exchange,
        }
    }

    fn page_size(self) -> PageSize {
        match self {
            Mechanism::Linux | Mechanism::Exchange4k => PageSize::Base4K,
            _ => PageSize::Huge2M,
        }
    }

    fn exchanges(self) -> bool {
        matches!(self, Mechanism::Exchange4k | Mechanism::Exchange)
    }

    /// How its plans are carried out: stock move_pages, or Nimble's optimised migration with
    /// 8 huge or 512 base pages in flight over [`CALLERS`] callers (§4.3).
    fn options(self) -> MoveOptions {
        let optimised = |in_flight: u32| MoveOptions {
            batch_pages: in_flight / CALLERS,
            copy_threads: COPY_THREADS,
            concurrent_batches: CALLERS,
            tlb_flush: TlbFlush::PerPage,
            ..MoveOptions::default()
        };
        match self {
            Mechanism::Linux | Mechanism::Thp => MoveOptions::default(),
            Mechanism::Exchange4k => optimised(512),
            Mechanism::Opt | Mechanism::Exchange => optimised(8),
        }
    }
}

/// Where a page stands on its node's lists (Fig. 7b).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum List {
    /// Not seen referenced yet.
    #[default]
    Unlisted,
    Active,
    /// Inactive since the period given (for oldest-first demotion).
    Inactive(u32),
}

pub struct Nimble {
    name: String,
    period_ns: u64,
    mechanism: Mechanism,
    lists: Vec<List>,
    /// Periods seen, the clock of `List::Inactive`.
    periods: u32,
}

impl Default for Nimble {
    fn default() -> Self {
        Nimble::new(&crate::registry::defaults_of(NAME))
    }
}

impl Nimble {
    pub fn new(p: &Params) -> Self {
        Nimble {
            name: p.name().to_string(),
            period_ns: p.duration_ns("period"),
            mechanism: Mechanism::from_word(p.word("mechanism")),
            lists: Vec::new(),
            periods: 0,
        }
    }

    /// Fig. 7b: moves each page between its lists by whether it was referenced this period.
    fn update_lists(&mut self, bits: &[u8]) {
        self.periods += 1;
        if self.lists.len() < bits.len() {
            self.lists.resize(bits.len(), List::Unlisted);
        }
        for (list, &b) in self.lists.iter_mut().zip(bits) {
            let referenced = b & (PAGE_REFERENCED | PAGE_DIRTY) != 0;
            *list = match (*list, referenced) {
                (_, true) => List::Active,
                (List::Active, false) => List::Inactive(self.periods),
                (other, false) => other,
            };
        }
    }
}

impl Policy for Nimble {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, _machine: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::page_bits()],
            tick_ns: Some(self.period_ns),
            page_size: self.mechanism.page_size(),
            mover: Mover::PolicyThread,
            max_tiers: Some(2),
            ..Requirements::default()
        }
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let Some(bits) = obs.page_bits else { return Plan::none() };
        self.update_lists(bits);
        let mut active_slow = Vec::new();
        let mut inactive_fast: Vec<(u32, PageIdx)> = Vec::new();
        for (i, &tier) in obs.placement.iter().enumerate() {
            match (self.lists.get(i), tier) {
                (Some(List::Active), t) if t.is_placed() && t != TierId::FAST => {
                    active_slow.push(i as PageIdx)
                }
                (Some(&List::Inactive(since)), TierId::FAST) => inactive_fast.push((since, i as PageIdx)),
                (Some(List::Unlisted), TierId::FAST) => inactive_fast.push((0, i as PageIdx)),
                _ => {}
            }
        }
        // Oldest inactive first, as the inactive list's tail is (never-referenced pages first).
        inactive_fast.sort_unstable();
        let free = obs.tiers.first().map_or(0, |t| t.free_pages());
        let into_room = active_slow.len().min(free as usize);
        let paired = (active_slow.len() - into_room).min(inactive_fast.len());
        let mut plan = Plan {
            options: self.mechanism.options(),
            reason: "nimble: slow active pages up, fast inactive pages down to make room".into(),
            ..Plan::none()
        };
        let (room, rest) = active_slow.split_at(into_room);
        let victims = inactive_fast.iter().map(|&(_, p)| p).take(paired);
        if self.mechanism.exchanges() {
            plan.exchanges = rest.iter().zip(victims).map(|(&a, b)| Exchange { a, b }).collect();
        } else {
            // Demotions first, so the promotions that follow find their room (§3.2).
            plan.moves.extend(victims.map(|page| Move { page, to: TierId::SLOW }));
            plan.moves.extend(rest[..paired].iter().map(|&page| Move { page, to: TierId::FAST }));
        }
        plan.moves.extend(room.iter().map(|&page| Move { page, to: TierId::FAST }));
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::age::tests::tick;

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;
    const R: u8 = PAGE_REFERENCED;

    fn with(mechanism: &str) -> Nimble {
        Nimble::new(&crate::registry::params_of(&format!("nimble:mechanism={mechanism}")))
    }

    #[test]
    fn the_lists_follow_the_referenced_bits() {
        let mut p = Nimble::default();
        p.update_lists(&[R, 0, PAGE_DIRTY]);
        assert_eq!(p.lists, [List::Active, List::Unlisted, List::Active]);
        p.update_lists(&[0, R, R]);
        assert_eq!(p.lists, [List::Inactive(2), List::Active, List::Active]);
        p.update_lists(&[0, 0, R]);
        assert_eq!(p.lists, [List::Inactive(2), List::Inactive(3), List::Active], "inactive stays inactive");
        p.update_lists(&[R, 0, 0]);
        assert_eq!(p.lists[0], List::Active, "an inactive page referenced again is active");
    }

    #[test]
    fn active_slow_pages_are_promoted_into_free_room() {
        let mut p = with("thp");
        let plan = tick(&mut p, &[F, S, S], &[R, R, 0], 3);
        assert_eq!(plan.moves, [Move { page: 1, to: F }]);
        assert!(plan.exchanges.is_empty());
    }

    #[test]
    fn a_full_fast_tier_without_inactive_pages_moves_nothing() {
        for m in MECHANISMS {
            let mut p = with(m);
            let plan = tick(&mut p, &[F, F, S], &[R, R, R], 2);
            assert!(plan.is_empty(), "{m}: {plan:?}");
        }
    }

    #[test]
    fn inactive_fast_pages_make_room_oldest_first() {
        let mut p = with("opt");
        tick(&mut p, &[F, F, F, S, S], &[R, R, R, R, R], 3);
        tick(&mut p, &[F, F, F, S, S], &[R, 0, R, R, R], 3);
        // Page 1 has been inactive since period 2, page 0 since period 3.
        let plan = tick(&mut p, &[F, F, F, S, S], &[0, 0, R, R, R], 3);
        assert_eq!(
            plan.moves,
            [
                Move { page: 1, to: S },
                Move { page: 0, to: S },
                Move { page: 3, to: F },
                Move { page: 4, to: F }
            ]
        );
    }

    #[test]
    fn exchange_pairs_promotions_beyond_the_room_with_demotions() {
        let mut p = with("exchange");
        tick(&mut p, &[F, F, S, S, S], &[R, R, 0, 0, 0], 3);
        // One free page: page 2 goes into it; page 3 is exchanged with inactive page 0; page 4
        // waits, since no other fast page is inactive.
        let plan = tick(&mut p, &[F, F, S, S, S], &[0, R, R, R, R], 3);
        assert_eq!(plan.moves, [Move { page: 2, to: F }]);
        assert_eq!(plan.exchanges, [Exchange { a: 3, b: 0 }]);
    }

    #[test]
    fn each_mechanism_has_its_page_size_and_options() {
        let m = crate::hemem::tests::machine(1.0);
        let req = |w: &str| with(w).requirements(&m);
        assert_eq!(req("linux").page_size, PageSize::Base4K);
        assert_eq!(req("exchange-4k").page_size, PageSize::Base4K);
        for w in ["thp", "opt", "exchange"] {
            assert_eq!(req(w).page_size, PageSize::Huge2M, "{w} never splits huge pages");
        }
        assert_eq!(Mechanism::Linux.options(), MoveOptions::default());
        let opt = Mechanism::Opt.options();
        assert_eq!((opt.copy_threads, opt.batch_pages * opt.concurrent_batches), (4, 8));
        let base = Mechanism::Exchange4k.options();
        assert_eq!(base.batch_pages * base.concurrent_batches, 512);
        assert_eq!(req("exchange").tick_ns, Some(5_000_000_000));
    }
}
