//! Ambix's per-request cap (thesis §4.4: 2 GB per request) is given at seed scale: a run scaled
//! down by `scale` moves at most `request_cap / scale` bytes per request.

use terrace_model::{MachineInfo, Observations, Plan, TierId, TierStatus, PAGE_DIRTY, PAGE_REFERENCED};

fn machine(scale: f64) -> MachineInfo {
    MachineInfo { scale, ..MachineInfo::placeholder(2) }
}

/// One control period of Ambix without Switch on an empty 1000-page DRAM and 200 referenced,
/// dirty slow pages: the clear tick, then the act tick, which promotes (DRAM is under its
/// minimum use).
fn first_period(spec: &str, scale: f64) -> Plan {
    let mut p = terrace_policy::build(spec).unwrap();
    p.start(&machine(scale));
    let placement = vec![TierId::SLOW; 200];
    let tiers = [
        TierStatus { used_pages: 0, capacity_pages: Some(1000), write_bytes: Some(0), ..Default::default() },
        TierStatus {
            used_pages: 200,
            capacity_pages: Some(1000),
            write_bytes: Some(0),
            ..Default::default()
        },
    ];
    let none = vec![0u8; 200];
    let bits = vec![PAGE_REFERENCED | PAGE_DIRTY; 200];
    let obs = |now, bits| Observations {
        now_ns: now,
        previous_ns: 0,
        placement: &placement,
        tiers: &tiers,
        page_bits: Some(bits),
        samples: &[],
        future: None,
        hint_faults: &[],
        in_flight: &[],
    };
    assert!(p.tick(&obs(1_950_000_000, &none)).is_empty());
    p.tick(&obs(2_000_000_000, &bits))
}

#[test]
fn a_request_moves_at_most_the_cap_divided_by_the_scale() {
    // 64 KiB is 16 pages at seed scale, 4 at scale 4.
    let at_seed = first_period("ambix-noswitch:request_cap=64KiB", 1.0);
    assert_eq!(at_seed.moves.len(), 16, "{at_seed:?}");
    let scaled = first_period("ambix-noswitch:request_cap=64KiB", 4.0);
    assert_eq!(scaled.moves.len(), 4, "{scaled:?}");
    assert!(scaled.moves.iter().all(|m| m.to == TierId::FAST));
}
