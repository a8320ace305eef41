//! `nimble`: Nimble's tiering policy (Yan et al., ASPLOS'19, §3.2 and Fig. 7) with its migration
//! mechanisms (§3.1) chosen by the `mechanism` parameter, one preset per configuration of the
//! seed's end-to-end figure (Fig. 12).
//!
//! The policy, Linux's active and inactive page lists per node reused as hot and cold (§3.2):
//! - Lists (Fig. 7b, the intra-node edges; the text leaves the rules to the figure): Nimble's
//!   own code ages them each period ([`Lists`]): the tail half of each node's active list is
//!   deactivated, referenced or not, and an inactive page referenced at two scans in a row is
//!   activated (Linux's `vmscan` rules, `PG_referenced` the first reference). A page placed
//!   for the first time is listed active, as Linux lists a new anonymous page.
//! - Moves (Fig. 7a, the inter-node edges), every period (5 s, §3.2): the slow tier's active
//!   pages are promoted, tail first, while the fast tier has room, and the fast tier's inactive
//!   pages, tail first, are demoted to make room for the rest. **When the fast tier is full
//!   and has no inactive page, nothing moves** (§3.2). Pages Linux would reclaim stay inactive
//!   as demotion candidates; nothing is swapped.
//! - Allocation: first touch into the fast tier while it has room, else the slow tier; never an
//!   eviction on allocation (§3.2).
//! - Pages: the program's transparent huge pages (§4.3: over 90% of each workload's pages), or
//!   base pages with `page_size=4k`.
//! - Mechanisms (§3.1, §4.3's Fig. 12 configurations): `linux` splits each huge page as it moves
//!   and moves its base pages with one thread (stock move_pages); `thp` moves 2 MiB pages whole
//!   (§3.1.1); `opt` adds 4 copy threads (§3.1.2) and 8 huge pages in flight (§3.1.3, §4.5.2);
//!   `exchange` pairs each promotion beyond free room with a demotion through exchange
//!   (§3.1.4); `exchange-4k` is the last on the base pages of split huge pages, 512 in flight.
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
    "Nimble's policy on base pages: huge pages split, 4 copy threads, 512 pages in flight, exchange (Fig. 12)";
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
    Param {
        name: "page_size",
        default: "2m",
        kind: Kind::Choice(&["4k", "2m"]),
        meaning: "the program's pages, which the lists track: 2m (transparent huge pages; linux and \
                  exchange-4k split each as it moves) or 4k (a program without huge pages; every \
                  mechanism then moves base pages)",
        source: "Nimble §4.3: over 90% of each workload's pages are THP-backed, and the base-page \
                 configurations split THPs before migration",
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

    /// Stock Linux's path and the base-page exchange split each huge page as it moves (§4.3).
    fn splits(self) -> bool {
        matches!(self, Mechanism::Linux | Mechanism::Exchange4k)
    }

    fn exchanges(self) -> bool {
        matches!(self, Mechanism::Exchange4k | Mechanism::Exchange)
    }

    /// How its plans are carried out: stock move_pages, or Nimble's optimised migration with
    /// 8 huge or 512 base pages in flight over [`CALLERS`] callers (§4.3); `batch_pages` of a
    /// mechanism that splits counts the base pages.
    fn options(self, page_size: PageSize) -> MoveOptions {
        let optimised = |in_flight: u32| MoveOptions {
            batch_pages: in_flight / CALLERS,
            copy_threads: COPY_THREADS,
            concurrent_batches: CALLERS,
            tlb_flush: TlbFlush::PerPage,
            ..MoveOptions::default()
        };
        let options = match self {
            Mechanism::Linux | Mechanism::Thp => MoveOptions::default(),
            Mechanism::Exchange4k => optimised(512),
            Mechanism::Opt | Mechanism::Exchange => optimised(8),
        };
        MoveOptions { split_huge: self.splits() && page_size == PageSize::Huge2M, ..options }
    }
}

/// A page's list on its node (Fig. 7b).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum List {
    /// Not placed (never touched, or freed).
    #[default]
    Unlisted,
    Active,
    Inactive,
}

/// One page's state in the lists: Linux's `struct page` flags and LRU position.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    list: List,
    /// On the fast node's lists (else the slow node's).
    fast: bool,
    /// Position on its list: larger is nearer the head, where Linux adds pages.
    stamp: u64,
    /// `PG_referenced`: found referenced at the inactive list's last scan of it.
    referenced: bool,
    /// The page table's accessed bit as a scan would find it: set by what the tracker saw,
    /// cleared only when a scan looks at the page (a page the scan skips keeps its bit).
    young: bool,
}

/// Linux's active and inactive lists of each node, aged as Nimble's own code ages them at
/// each period: its `mm_manage` call with `MPOL_MF_SHRINK_LISTS`, which the seed's launcher
/// sets for its end-to-end runs (`shrink_lists` in the artifact's mm/memory_manage.c;
/// docs/policies.md, "nimble", gives the sources). On each node, inactive list first:
/// - the tail half of the inactive list is scanned: a page referenced now and at its
///   previous scan (`PG_referenced`) is activated; one referenced only now is marked
///   referenced and stays; each goes back to its list's head;
/// - the tail half of the active list is deactivated whether referenced or not (Linux's
///   `shrink_active_list` keeps only referenced executable file pages active; these are
///   anonymous pages), its accessed bits cleared, onto the inactive list's head.
#[derive(Default)]
struct Lists {
    entries: Vec<Entry>,
    next_stamp: u64,
}

impl Lists {
    fn put_at_head(&mut self, page: usize) {
        self.entries[page].stamp = self.next_stamp;
        self.next_stamp += 1;
    }

    /// Takes in the period's placement and accessed bits: a page placed for the first time
    /// joins its node's active list (Linux lists a new anonymous page active), a page that
    /// changed node joins the head of its list there (migration keeps its flags), a freed
    /// page leaves the lists.
    fn observe(&mut self, placement: &[TierId], bits: &[u8]) {
        if self.entries.len() < placement.len() {
            self.entries.resize(placement.len(), Entry::default());
        }
        for (i, &tier) in placement.iter().enumerate() {
            if !tier.is_placed() {
                self.entries[i] = Entry::default();
                continue;
            }
            let fast = tier == TierId::FAST;
            let e = &mut self.entries[i];
            e.young |= bits.get(i).is_some_and(|b| b & (PAGE_REFERENCED | PAGE_DIRTY) != 0);
            if e.list == List::Unlisted {
                e.list = List::Active;
                e.fast = fast;
                self.put_at_head(i);
            } else if e.fast != fast {
                e.fast = fast;
                self.put_at_head(i);
            }
        }
    }

    /// The pages of one node's list, tail (oldest) first.
    fn tail_first(&self, fast: bool, list: List) -> Vec<PageIdx> {
        let mut pages: Vec<(u64, PageIdx)> = (self.entries.iter().enumerate())
            .filter(|(_, e)| e.list == list && e.fast == fast)
            .map(|(i, e)| (e.stamp, i as PageIdx))
            .collect();
        pages.sort_unstable();
        pages.into_iter().map(|(_, p)| p).collect()
    }

    /// One period's aging of one node's lists (the artifact's `shrink_lists_node_memcg`).
    fn age(&mut self, fast: bool) {
        let inactive = self.tail_first(fast, List::Inactive);
        for &page in &inactive[..inactive.len() / 2] {
            let e = &mut self.entries[page as usize];
            let young = std::mem::take(&mut e.young);
            let was_referenced = std::mem::replace(&mut e.referenced, young);
            if young && was_referenced {
                e.list = List::Active;
            }
            self.put_at_head(page as usize);
        }
        let active = self.tail_first(fast, List::Active);
        for &page in &active[..active.len() / 2] {
            let e = &mut self.entries[page as usize];
            e.young = false;
            e.list = List::Inactive;
            self.put_at_head(page as usize);
        }
    }
}

pub struct Nimble {
    name: String,
    period_ns: u64,
    mechanism: Mechanism,
    page_size: PageSize,
    lists: Lists,
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
            page_size: if p.word("page_size") == "4k" { PageSize::Base4K } else { PageSize::Huge2M },
            lists: Lists::default(),
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
            page_size: self.page_size,
            mover: Mover::PolicyThread,
            max_tiers: Some(2),
            ..Requirements::default()
        }
    }

    /// One period: age the lists of the slow node, then the fast one, then move (the
    /// artifact's `do_mm_manage`): up to the fast tier's size of the slow node's active pages,
    /// tail first, are taken to promote; if they outnumber the fast tier's free pages, as
    /// many of the fast node's inactive pages, tail first, are taken to demote. With exchange
    /// the first promotions are paired with the demotions; the rest go into free room, and
    /// what finds no room goes back to its list's head. **When the fast tier is full and has
    /// no inactive page, nothing moves** (§3.2).
    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let Some(bits) = obs.page_bits else { return Plan::none() };
        self.lists.observe(obs.placement, bits);
        self.lists.age(false);
        self.lists.age(true);
        let busy: std::collections::HashSet<PageIdx> = obs.in_flight.iter().map(|m| m.page).collect();
        let fast = obs.tiers.first();
        let capacity = fast.and_then(|t| t.capacity_pages).unwrap_or(u64::MAX);
        let free = fast.map_or(0, |t| t.free_pages());
        let hot: Vec<PageIdx> = (self.lists.tail_first(false, List::Active).into_iter())
            .filter(|p| !busy.contains(p))
            .take(usize::try_from(capacity).unwrap_or(usize::MAX))
            .collect();
        let wanted = (hot.len() as u64).saturating_sub(free) as usize;
        // A fast tier over its capacity (on the live machine, the program's own first touches
        // past `fast_limit_mib`, or made while a period was planned) first sends its excess down,
        // one way, from the same inactive tail, as Nimble's allocator never lets the fast node run
        // over (§3.2: the fast node only while it has free pages). As many as the slow tier has
        // room for: a machine refuses a move into a full tier.
        let slow_free = obs.tiers.get(TierId::SLOW.index()).map_or(u64::MAX, |t| t.free_pages());
        let excess = fast.map_or(0, |t| t.excess_pages()).min(slow_free) as usize;
        let mut cold: Vec<PageIdx> = (self.lists.tail_first(true, List::Inactive).into_iter())
            .filter(|p| !busy.contains(p))
            .take(excess.saturating_add(wanted))
            .collect();
        let over: Vec<PageIdx> = cold.drain(..excess.min(cold.len())).collect();
        let paired = cold.len();
        let into_room = (hot.len() - paired).min(usize::try_from(free).unwrap_or(usize::MAX));
        for &page in &hot[paired + into_room..] {
            self.lists.put_at_head(page as usize);
        }
        let mut plan = Plan {
            moves: over.iter().map(|&page| Move { page, to: TierId::SLOW }).collect(),
            options: self.mechanism.options(self.page_size),
            reason: "nimble: slow active pages up, fast inactive pages down to make room".into(),
            ..Plan::none()
        };
        if self.mechanism.exchanges() {
            plan.exchanges = hot.iter().zip(&cold).map(|(&a, &b)| Exchange { a, b }).collect();
        } else {
            // Demotions first, so the promotions that follow find their room (§3.2).
            plan.moves.extend(cold.iter().map(|&page| Move { page, to: TierId::SLOW }));
            plan.moves.extend(hot[..paired].iter().map(|&page| Move { page, to: TierId::FAST }));
        }
        plan.moves
            .extend(hot[paired..paired + into_room].iter().map(|&page| Move { page, to: TierId::FAST }));
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::age::tests::{tick, tick_on};
    use terrace_model::TierStatus;

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;
    const R: u8 = PAGE_REFERENCED;

    fn with(mechanism: &str) -> Nimble {
        Nimble::new(&crate::registry::params_of(&format!("nimble:mechanism={mechanism}")))
    }

    fn lists_of(l: &Lists) -> Vec<List> {
        l.entries.iter().map(|e| e.list).collect()
    }

    use List::{Active as A, Inactive as I};

    #[test]
    fn each_period_deactivates_the_active_lists_tail_half_and_activates_at_a_second_reference() {
        let mut l = Lists::default();
        l.observe(&[F; 4], &[0; 4]);
        assert_eq!(lists_of(&l), [A, A, A, A], "new pages are listed active");
        l.age(true);
        assert_eq!(lists_of(&l), [I, I, A, A], "the tail half goes inactive");
        // Period 2: pages 0 and 1 referenced. The inactive list's tail half is page 0: its
        // first reference marks it and it stays; page 2, referenced or not, is deactivated.
        l.observe(&[F; 4], &[R, R, R, R]);
        l.age(true);
        assert_eq!(lists_of(&l), [I, I, I, A]);
        assert!(l.entries[0].referenced && !l.entries[1].referenced);
        // Period 3: page 0 referenced again, but the scan reaches page 1 first (tail half of
        // 1, 0, 2), which kept its bit from period 2 while no scan looked at it.
        l.observe(&[F; 4], &[R, 0, 0, 0]);
        l.age(true);
        assert_eq!(lists_of(&l), [I, I, I, A]);
        assert!(l.entries[1].referenced && !l.entries[1].young);
        // Period 4: the tail half is page 0 (0, 2, 1): referenced at its previous scan and now,
        // so it is activated; then the active list's tail half (3, 0) deactivates page 3.
        l.observe(&[F; 4], &[0; 4]);
        l.age(true);
        assert_eq!(lists_of(&l), [A, I, I, I]);
        // Pages keep their lists across a move; a freed page leaves them.
        l.observe(&[S, F, TierId::UNPLACED, F], &[0; 4]);
        assert_eq!(lists_of(&l), [A, I, List::Unlisted, I]);
        assert_eq!(l.tail_first(false, A), [0]);
    }

    #[test]
    fn active_slow_pages_are_promoted_tail_first_into_free_room() {
        let mut p = with("thp");
        // Slow active 1, 2, 3, 4: the aging deactivates 1 and 2; one free page takes 3, and
        // 4 goes back to its list's head.
        let plan = tick(&mut p, &[F, S, S, S, S], &[R; 5], 2);
        assert_eq!(plan.moves, [Move { page: 3, to: F }]);
        assert!(plan.exchanges.is_empty());
        let newest = p.lists.entries.iter().map(|e| e.stamp).max();
        assert_eq!(Some(p.lists.entries[4].stamp), newest);
    }

    #[test]
    fn a_full_fast_tier_without_inactive_pages_moves_nothing() {
        for m in MECHANISMS {
            let mut p = with(m);
            // One page per list: half of it is none, so nothing is deactivated.
            let plan = tick(&mut p, &[F, S], &[R, R], 1);
            assert!(plan.is_empty(), "{m}: {plan:?}");
        }
    }

    #[test]
    fn inactive_fast_pages_make_room_tail_first() {
        let mut p = with("opt");
        // Slow 4-7 and fast 0-3 all active; aging deactivates 4, 5 and 0, 1; the slow active
        // 6, 7 need two pages of a full fast tier, which its inactive tail gives.
        let placement = [F, F, F, F, S, S, S, S];
        let plan = tick(&mut p, &placement, &[R; 8], 4);
        let to = |page, to| Move { page, to };
        assert_eq!(plan.moves, [to(0, S), to(1, S), to(6, F), to(7, F)]);
        let mut p = with("exchange");
        let plan = tick(&mut p, &placement, &[R; 8], 4);
        assert_eq!(plan.exchanges, [Exchange { a: 6, b: 0 }, Exchange { a: 7, b: 1 }]);
        assert!(plan.moves.is_empty());
    }

    /// A fast tier over its capacity sends its excess down first, from the inactive tail, then
    /// makes room as usual: fast 0-3 with room for 3, so page 0 goes down one way and page 1
    /// makes room for 6 (7 finds none).
    #[test]
    fn a_fast_tier_over_its_capacity_sends_its_excess_down_first() {
        let placement = [F, F, F, F, S, S, S, S];
        let to = |page, to| Move { page, to };
        let mut p = with("opt");
        let plan = tick(&mut p, &placement, &[R; 8], 3);
        assert_eq!(plan.moves, [to(0, S), to(1, S), to(6, F)]);
        let mut p = with("exchange");
        let plan = tick(&mut p, &placement, &[R; 8], 3);
        assert_eq!(plan.moves, [to(0, S)]);
        assert_eq!(plan.exchanges, [Exchange { a: 6, b: 1 }]);
    }

    /// The excess goes down only into the slow tier's free room: with the slow tier full, no
    /// one-way demotion is planned, and the exchange, which needs no room, still is.
    #[test]
    fn the_excess_goes_down_only_into_free_slow_room() {
        let placement = [F, F, F, F, S, S, S, S];
        let full_below = [
            TierStatus { used_pages: 4, capacity_pages: Some(3), ..Default::default() },
            TierStatus { used_pages: 4, capacity_pages: Some(4), ..Default::default() },
        ];
        let plan = tick_on(&mut with("exchange"), &placement, &[R; 8], &full_below);
        assert!(plan.moves.is_empty(), "no room below for a one-way move: {:?}", plan.moves);
        assert!(!plan.exchanges.is_empty());
        let room_for_one = [full_below[0], TierStatus { capacity_pages: Some(5), ..full_below[1] }];
        let plan = tick_on(&mut with("exchange"), &placement, &[R; 8], &room_for_one);
        assert_eq!(plan.moves, [Move { page: 0, to: S }], "one page of room: the excess page goes down");
    }

    #[test]
    fn exchange_pairs_promotions_beyond_the_room_with_demotions() {
        let mut p = with("exchange");
        // Fast 0, 1 with one page free; slow 2-5. Aging deactivates 2, 3 and 0; promotions
        // 4, 5: one needs a demotion (paired with 0), the other goes into the free page.
        let plan = tick(&mut p, &[F, F, S, S, S, S], &[R; 6], 3);
        assert_eq!(plan.exchanges, [Exchange { a: 4, b: 0 }]);
        assert_eq!(plan.moves, [Move { page: 5, to: F }]);
    }

    #[test]
    fn each_mechanism_has_its_page_size_and_options() {
        let m = crate::hemem::tests::machine(1.0);
        let req = |w: &str| with(w).requirements(&m);
        for w in MECHANISMS {
            assert_eq!(req(w).page_size, PageSize::Huge2M, "{w}: the program's pages are huge (§4.3)");
            let small =
                Nimble::new(&crate::registry::params_of(&format!("nimble:mechanism={w},page_size=4k")));
            assert_eq!(small.requirements(&m).page_size, PageSize::Base4K);
            let split = Mechanism::from_word(w).options(PageSize::Huge2M).split_huge;
            assert_eq!(
                split,
                ["linux", "exchange-4k"].contains(w),
                "{w}: only the base-page mechanisms split"
            );
            assert!(!Mechanism::from_word(w).options(PageSize::Base4K).split_huge, "{w}: nothing to split");
        }
        assert_eq!(
            Mechanism::Linux.options(PageSize::Huge2M),
            MoveOptions { split_huge: true, ..MoveOptions::default() }
        );
        let opt = Mechanism::Opt.options(PageSize::Huge2M);
        assert_eq!((opt.copy_threads, opt.batch_pages * opt.concurrent_batches), (4, 8));
        let base = Mechanism::Exchange4k.options(PageSize::Huge2M);
        assert_eq!(base.batch_pages * base.concurrent_batches, 512);
        assert_eq!(req("exchange").tick_ns, Some(5_000_000_000));
    }
}
