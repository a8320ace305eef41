//! The kernel-tiering model's promotion rate limit counts promotions per one-second window (a
//! promotion exactly a window after the window opened starts a new one), and pages placed since
//! the last tick join the LRU as just used, so kswapd demotes the pages placed longest ago first,
//! all of the fast tier's pages when it wants more than there are. A write fault counts as hot
//! within the hot threshold times `write_factor`.

use terrace_model::{
    AccessKind, HintFault, MachineInfo, Observations, PageIdx, Plan, Policy, TierId, TierStatus,
};

const F: TierId = TierId::FAST;
const S: TierId = TierId::SLOW;
const N: TierId = TierId::UNPLACED;
const WINDOW_NS: u64 = 1_000_000_000;

fn machine() -> MachineInfo {
    MachineInfo::placeholder(2)
}

fn started(spec: &str) -> Box<dyn Policy> {
    let mut p = terrace_policy::build(spec).unwrap();
    p.start(&machine());
    p
}

fn tick(p: &mut dyn Policy, now: u64, placement: &[TierId], faults: &[HintFault], cap: u64) -> Plan {
    let used = placement.iter().filter(|t| **t == F).count() as u64;
    let slow = placement.iter().filter(|t| **t == S).count() as u64;
    let tiers = [
        TierStatus { used_pages: used, capacity_pages: Some(cap), ..Default::default() },
        TierStatus { used_pages: slow, ..Default::default() },
    ];
    p.tick(&Observations {
        now_ns: now,
        previous_ns: 0,
        placement,
        tiers: &tiers,
        page_bits: None,
        samples: &[],
        future: None,
        hint_faults: faults,
        in_flight: &[],
    })
}

/// A read hint fault soon after the scan: hot.
fn hot(page: PageIdx) -> HintFault {
    HintFault { page, kind: AccessKind::Read, latency_ns: 1_000 }
}

fn to(plan: &Plan, tier: TierId) -> Vec<PageIdx> {
    plan.moves.iter().filter(|m| m.to == tier).map(|m| m.page).collect()
}

#[test]
fn a_window_of_the_rate_limit_ends_exactly_a_window_after_it_opened() {
    // 0.0078125 MiB/s for one second: 8 KiB, two 4 KiB pages per window.
    let mut p = started("kernel-tiering:rate_limit=0.0078125");
    let placement = [S; 6];
    let plan = tick(p.as_mut(), 1, &placement, &[hot(0), hot(1), hot(2)], 100);
    assert_eq!(to(&plan, F), vec![0, 1], "two pages per window");
    let placement = [F, F, S, S, S, S];
    let plan = tick(p.as_mut(), WINDOW_NS, &placement, &[hot(2), hot(3)], 100);
    assert!(to(&plan, F).is_empty(), "still the first window");
    let plan = tick(p.as_mut(), 1 + WINDOW_NS, &placement, &[hot(4), hot(5), hot(3)], 100);
    assert_eq!(to(&plan, F), vec![4, 5], "a new window opens a window after the first");
}

#[test]
fn kswapd_demotes_the_pages_placed_longest_ago_first() {
    // No headroom: kswapd demotes down to the high watermark (2 free pages of 3).
    let mut p = started("kernel-tiering:demote_headroom=0%");
    // Page 2 is placed first, then page 1, then page 0, which fills the fast tier.
    assert!(tick(p.as_mut(), 10, &[N, N, F], &[], 3).is_empty());
    assert!(tick(p.as_mut(), 20, &[N, F, F], &[], 3).is_empty());
    let plan = tick(p.as_mut(), 30, &[F, F, F], &[], 3);
    let mut down = to(&plan, S);
    down.sort();
    assert_eq!(down, vec![1, 2], "{plan:?}");
}

#[test]
fn kswapd_wanting_more_than_the_fast_tier_holds_demotes_all_of_it() {
    // 50% headroom of a 4-page tier: kswapd wants 2 + 2 free pages beyond the 0 it has.
    let mut p = started("kernel-tiering:demote_headroom=50%");
    let plan = tick(p.as_mut(), 10, &[F, F, F, F], &[], 4);
    let mut down = to(&plan, S);
    down.sort();
    assert_eq!(down, vec![0, 1, 2, 3], "{plan:?}");
}

#[test]
fn a_write_fault_is_hot_within_the_threshold_times_the_write_factor() {
    // The default threshold is 1 s and the write factor 2: a write 1.5 s after the scan is hot,
    // a read is not.
    let mut p = started("kernel-tiering");
    let late = HintFault { page: 0, kind: AccessKind::Write, latency_ns: 1_500_000_000 };
    assert_eq!(to(&tick(p.as_mut(), 1, &[S, S], &[late], 100), F), vec![0]);
    let read = HintFault { page: 1, kind: AccessKind::Read, latency_ns: 1_500_000_000 };
    assert!(to(&tick(p.as_mut(), 2, &[F, S], &[read], 100), F).is_empty());
}
