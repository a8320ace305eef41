//! The `age` policy's 2 MiB preset works on huge pages, and every plan of `age` carries its mover
//! rate limit (memtierd's 100 MB/s by default, or the `rate_limit` parameter).

use terrace_model::{MachineInfo, Observations, PageSize, Policy, TierId, TierStatus, PAGE_REFERENCED};
use terrace_policy::age::Age;

fn machine() -> MachineInfo {
    MachineInfo::placeholder(2)
}

#[test]
fn the_2m_preset_asks_for_huge_pages() {
    let p = Age::huge();
    assert_eq!(p.name(), "age-2m");
    assert_eq!(p.requirements(&machine()).page_size, PageSize::Huge2M);
    assert_eq!(Age::default().requirements(&machine()).page_size, PageSize::Base4K);
}

/// The plan for one referenced slow page with room in the fast tier.
fn promote_one(p: &mut dyn Policy) -> terrace_model::Plan {
    let placement = [TierId::FAST, TierId::SLOW];
    let tiers = [
        TierStatus { used_pages: 1, capacity_pages: Some(10), ..Default::default() },
        TierStatus { used_pages: 1, capacity_pages: Some(10), ..Default::default() },
    ];
    let bits = [0, PAGE_REFERENCED];
    p.start(&machine());
    p.tick(&Observations {
        now_ns: 1_000_000_000,
        previous_ns: 0,
        placement: &placement,
        tiers: &tiers,
        page_bits: Some(&bits),
        samples: &[],
        future: None,
        hint_faults: &[],
        in_flight: &[],
    })
}

#[test]
fn every_plan_carries_the_mover_rate_limit() {
    let plan = promote_one(&mut Age::default());
    assert_eq!(plan.moves.len(), 1);
    assert_eq!(plan.options.rate_limit_mb_s, Some(100.0));
    let mut slow = terrace_policy::build("age:rate_limit=5").unwrap();
    let plan = promote_one(slow.as_mut());
    assert_eq!(plan.moves.len(), 1);
    assert_eq!(plan.options.rate_limit_mb_s, Some(5.0));
}
