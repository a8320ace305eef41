//! The rules every machine shares for carrying a plan out ([`Plan::check`]), the rate budget
//! ([`RateBudget`]) and the failure accounting ([`Applied`]): what is Invalid, NotPresent,
//! RateLimited or nothing to do, how an exchange is oriented, and how failures are counted.

use terrace_model::{
    Applied, CheckedExchange, CheckedPlan, Exchange, Move, MoveFailure, MoveOptions, Plan, RateBudget, TierId,
};

const PAGE: u64 = 4096;
const FAST: TierId = TierId::FAST;
const SLOW: TierId = TierId::SLOW;
const NONE: TierId = TierId::UNPLACED;

fn plan(moves: Vec<Move>, exchanges: Vec<Exchange>) -> Plan {
    Plan { moves, exchanges, options: MoveOptions::default(), reason: "test".into(), ..Plan::none() }
}

/// A budget of `bytes` bytes: a rate of `bytes` B/s over one second.
fn budget(bytes: f64) -> RateBudget {
    let options = MoveOptions { rate_limit_mb_s: Some(bytes / 1e6), ..MoveOptions::default() };
    RateBudget::new(&options, 1e9)
}

fn unlimited() -> RateBudget {
    RateBudget::new(&MoveOptions::default(), 1e9)
}

/// Checks `plan` on two tiers with `placement`, without a rate limit.
fn check(plan: &Plan, placement: &[TierId]) -> (CheckedPlan, Applied) {
    let mut applied = Applied::default();
    let out = plan.check(placement, 2, &mut unlimited(), PAGE, &mut applied);
    (out, applied)
}

#[test]
fn a_valid_move_is_kept_and_nothing_fails() {
    let (out, applied) = check(&plan(vec![Move { page: 1, to: FAST }], vec![]), &[FAST, SLOW]);
    assert_eq!(out.moves, vec![Move { page: 1, to: FAST }]);
    assert!(out.exchanges.is_empty());
    assert_eq!(applied, Applied::default());
}

#[test]
fn a_move_to_the_tier_a_page_is_in_is_nothing_to_do() {
    let (out, applied) =
        check(&plan(vec![Move { page: 0, to: FAST }, Move { page: 1, to: SLOW }], vec![]), &[FAST, SLOW]);
    assert_eq!(out, CheckedPlan::default());
    assert_eq!(applied.failed_total(), 0, "{applied:?}");
}

#[test]
fn a_move_to_a_tier_or_page_that_does_not_exist_is_invalid() {
    // Two tiers: TierId(2) is the first that does not exist.
    let (out, applied) = check(
        &plan(vec![Move { page: 1, to: TierId(2) }, Move { page: 2, to: FAST }], vec![]),
        &[FAST, SLOW],
    );
    assert_eq!(out, CheckedPlan::default());
    assert_eq!(applied.failed, vec![(MoveFailure::Invalid, 2)]);
    assert_eq!(applied.failed_total(), 2);
}

#[test]
fn a_move_of_a_page_never_touched_is_not_present() {
    let (out, applied) = check(&plan(vec![Move { page: 1, to: FAST }], vec![]), &[FAST, NONE]);
    assert_eq!(out, CheckedPlan::default());
    assert_eq!(applied.failed, vec![(MoveFailure::NotPresent, 1)]);
}

#[test]
fn pages_moved_earlier_in_the_plan_are_seen_where_the_plan_put_them() {
    // Page 1 goes up, then is asked up again (nothing to do), then exchanged with page 0, which
    // is now in the same tier: Invalid.
    let (out, applied) = check(
        &plan(vec![Move { page: 1, to: FAST }, Move { page: 1, to: FAST }], vec![Exchange { a: 0, b: 1 }]),
        &[FAST, SLOW],
    );
    assert_eq!(out.moves, vec![Move { page: 1, to: FAST }]);
    assert!(out.exchanges.is_empty());
    assert_eq!(applied.failed, vec![(MoveFailure::Invalid, 1)]);
}

#[test]
fn an_exchange_is_oriented_demotion_first_whichever_page_is_named_first() {
    let placement = [FAST, SLOW, SLOW, FAST];
    let (out, applied) =
        check(&plan(vec![], vec![Exchange { a: 0, b: 1 }, Exchange { a: 2, b: 3 }]), &placement);
    assert_eq!(
        out.exchanges,
        vec![
            CheckedExchange { down: Move { page: 0, to: SLOW }, up: Move { page: 1, to: FAST } },
            CheckedExchange { down: Move { page: 3, to: SLOW }, up: Move { page: 2, to: FAST } },
        ]
    );
    assert!(out.moves.is_empty());
    assert_eq!(applied.failed_total(), 0);
}

#[test]
fn an_exchange_within_one_tier_or_with_a_missing_page_is_invalid() {
    let (out, applied) = check(
        &plan(vec![], vec![Exchange { a: 0, b: 1 }, Exchange { a: 2, b: 9 }, Exchange { a: 9, b: 2 }]),
        &[SLOW, SLOW, FAST],
    );
    assert_eq!(out, CheckedPlan::default());
    assert_eq!(applied.failed, vec![(MoveFailure::Invalid, 3)]);
}

#[test]
fn an_exchange_with_a_page_never_touched_is_not_present() {
    for exchange in [Exchange { a: 0, b: 1 }, Exchange { a: 1, b: 0 }] {
        let (out, applied) = check(&plan(vec![], vec![exchange]), &[FAST, NONE]);
        assert_eq!(out, CheckedPlan::default());
        assert_eq!(applied.failed, vec![(MoveFailure::NotPresent, 1)], "{exchange:?}");
    }
}

#[test]
fn the_rate_limit_drops_what_exceeds_it_in_plan_order() {
    // 6000 bytes: the first page fits, the second does not; an exchange (two pages) does not.
    let mut b = budget(6000.0);
    let mut applied = Applied::default();
    let out =
        plan(vec![Move { page: 2, to: FAST }, Move { page: 3, to: FAST }], vec![Exchange { a: 0, b: 1 }])
            .check(&[FAST, SLOW, SLOW, SLOW], 2, &mut b, PAGE, &mut applied);
    assert_eq!(out.moves, vec![Move { page: 2, to: FAST }]);
    assert!(out.exchanges.is_empty());
    assert_eq!(applied.failed, vec![(MoveFailure::RateLimited, 2)]);
}

#[test]
fn an_exchange_takes_two_pages_of_budget() {
    // 6000 bytes hold one page (4096) but not a pair (8192).
    let mut applied = Applied::default();
    let out = plan(vec![], vec![Exchange { a: 0, b: 1 }]).check(
        &[FAST, SLOW],
        2,
        &mut budget(6000.0),
        PAGE,
        &mut applied,
    );
    assert!(out.exchanges.is_empty());
    assert_eq!(applied.failed, vec![(MoveFailure::RateLimited, 1)]);
    // 9000 bytes hold the pair.
    let mut applied = Applied::default();
    let out = plan(vec![], vec![Exchange { a: 0, b: 1 }]).check(
        &[FAST, SLOW],
        2,
        &mut budget(9000.0),
        PAGE,
        &mut applied,
    );
    assert_eq!(out.exchanges.len(), 1);
    assert_eq!(applied.failed_total(), 0);
}

#[test]
fn a_rate_budget_is_spent_and_refuses_what_no_longer_fits() {
    let mut b = budget(10_000.0);
    assert!(b.take(4096));
    assert!(b.take(4096));
    // 1808 bytes are left.
    assert!(!b.take(4096), "more than is left");
    assert!(b.take(1800), "a refusal takes nothing");
    assert!(!b.take(9));
    // Without a limit everything fits.
    let mut b = unlimited();
    assert!((0..100).all(|_| b.take(u64::MAX)));
    // A budget over no time holds nothing.
    let limited = MoveOptions { rate_limit_mb_s: Some(1000.0), ..MoveOptions::default() };
    assert!(!RateBudget::new(&limited, 0.0).take(1));
}

#[test]
fn failures_are_counted_per_reason_in_first_seen_order() {
    let mut a = Applied::default();
    assert_eq!(a.failed_total(), 0);
    a.fail(MoveFailure::NoSpace);
    a.fail(MoveFailure::Busy);
    a.fail(MoveFailure::NoSpace);
    a.fail(MoveFailure::NoSpace);
    assert_eq!(a.failed, vec![(MoveFailure::NoSpace, 3), (MoveFailure::Busy, 1)]);
    assert_eq!(a.failed_total(), 4);
}

#[test]
fn the_empty_plan_is_empty_and_one_with_work_is_not() {
    assert!(Plan::none().is_empty());
    assert!(Plan::default().is_empty());
    assert!(!plan(vec![Move { page: 0, to: FAST }], vec![]).is_empty());
    assert!(!plan(vec![], vec![Exchange { a: 0, b: 1 }]).is_empty());
}

/// An object move is the moves of every page its range overlaps, after the plan's own moves and
/// under their rules (object tiering §3.4.4 moves objects whole).
#[test]
fn an_object_move_moves_every_page_its_range_overlaps() {
    use terrace_model::ObjectMove;
    // Bytes 4196..12388: the last 3,996 bytes of page 1, all of page 2, the first 100 of page 3.
    let object = ObjectMove { addr: PAGE + 100, bytes: 2 * PAGE, to: FAST };
    let p = Plan { objects: vec![object], ..plan(vec![Move { page: 0, to: FAST }], vec![]) };
    let (out, applied) = check(&p, &[SLOW, SLOW, SLOW, SLOW, SLOW]);
    let to_fast = |pages: &[u32]| pages.iter().map(|&page| Move { page, to: FAST }).collect::<Vec<_>>();
    assert_eq!(out.moves, to_fast(&[0, 1, 2, 3]));
    assert_eq!(applied, Applied::default());
    // A page already in the tier is nothing to do, one never touched is NotPresent, and an
    // object reaching past the address space fails Invalid once for what lies beyond.
    let objects = vec![
        ObjectMove { addr: 0, bytes: 2 * PAGE, to: FAST },
        ObjectMove { addr: 2 * PAGE, bytes: 10 * PAGE, to: FAST },
        ObjectMove { addr: 0, bytes: 0, to: SLOW },
    ];
    let p = Plan { objects, ..plan(vec![], vec![]) };
    let (out, applied) = check(&p, &[FAST, SLOW, NONE, SLOW]);
    assert_eq!(out.moves, to_fast(&[1, 3]));
    assert_eq!(applied.failed, vec![(MoveFailure::Invalid, 1), (MoveFailure::NotPresent, 1)]);
    // A rate limit counts an object's pages one by one.
    let p = Plan { objects: vec![ObjectMove { addr: 0, bytes: 3 * PAGE, to: FAST }], ..plan(vec![], vec![]) };
    let mut applied = Applied::default();
    let out = p.check(&[SLOW, SLOW, SLOW], 2, &mut budget(2.0 * PAGE as f64), PAGE, &mut applied);
    assert_eq!(out.moves, to_fast(&[0, 1]));
    assert_eq!(applied.failed, vec![(MoveFailure::RateLimited, 1)]);
}

#[test]
fn a_plan_with_only_site_advice_is_not_empty_and_asks_for_the_mechanism() {
    use terrace_model::{Mechanism, Mechanisms, SiteAdvice};
    let p = Plan { site_advice: vec![SiteAdvice { site: 3, tier: Some(SLOW) }], ..Plan::none() };
    assert!(!p.is_empty(), "drive applies it");
    assert!(Mechanisms::asked_by(&p).contains(&Mechanism::SiteAdvice));
    let without = Mechanisms::default().lacking(Mechanism::SiteAdvice, "no runtime");
    assert_eq!(without.honour(&p).1, vec![Mechanism::SiteAdvice]);
    assert!(Mechanisms::all().honour(&p).1.is_empty());
}
