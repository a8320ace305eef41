//! The oracle promotes the slow pages of its target set (the fast tier's capacity in pages of
//! most gain), never a page already fast or one with nothing to gain, into free room first and
//! then each against a demotion of the fast page of least gain outside the set. A read gains the
//! difference of the tiers' read latencies, a write the difference of their times to write 64 B.

use terrace_model::{
    MachineInfo, Move, Observations, PageCounts, PageSize, Plan, Tier, TierId, TierKind, TierStatus,
};

const F: TierId = TierId::FAST;
const S: TierId = TierId::SLOW;

/// Two tiers with their firmware figures; the fast one holds `capacity` pages.
fn machine(capacity: u64) -> MachineInfo {
    let tier = |id, kind, capacity_pages, latency, bandwidth| Tier {
        id: TierId(id),
        name: String::new(),
        kind,
        capacity_pages,
        read_latency_ns: Some(latency),
        read_bandwidth_gb_s: Some(bandwidth),
        write_bandwidth_gb_s: Some(bandwidth),
    };
    MachineInfo {
        name: String::new(),
        tiers: vec![
            tier(0, TierKind::Dram, Some(capacity), 100.0, 20.0),
            tier(1, TierKind::Optane, None, 300.0, 2.0),
        ],
        page_size: PageSize::Base4K,
        pages: 0,
        threads: 1,
        scale: 1.0,
        mechanisms: Default::default(),
        programs: Vec::new(),
        move_unit_bytes: 0,
    }
}

/// The oracle's first plan for pages in `placement` that will be read `reads` times.
fn first_plan(capacity: u64, placement: &[TierId], reads: &[u32]) -> Plan {
    let counts: Vec<PageCounts> = reads.iter().map(|&r| PageCounts { reads: r, writes: 0 }).collect();
    plan_for(capacity, placement, &counts)
}

/// The oracle's first plan for pages in `placement` with the coming `counts`.
fn plan_for(capacity: u64, placement: &[TierId], counts: &[PageCounts]) -> Plan {
    let mut p = terrace_policy::build("oracle").unwrap();
    p.start(&machine(capacity));
    let used = placement.iter().filter(|&&t| t == F).count() as u64;
    let tiers = [
        TierStatus { used_pages: used, capacity_pages: Some(capacity), ..Default::default() },
        TierStatus { used_pages: placement.len() as u64 - used, ..Default::default() },
    ];
    p.tick(&Observations {
        now_ns: 100_000_000,
        previous_ns: 0,
        placement,
        tiers: &tiers,
        page_bits: None,
        samples: &[],
        future: Some(counts),
        hint_faults: &[],
        in_flight: &[],
    })
}

#[test]
fn a_page_already_fast_or_with_nothing_to_gain_is_not_promoted() {
    // Target set: pages 0 (fast already) and 1. Page 2 gains nothing; one page of room.
    let plan = first_plan(2, &[F, S, S], &[2000, 1000, 0]);
    assert_eq!(plan.moves, vec![Move { page: 1, to: F }]);
    // Room for all three: page 2 still gains nothing.
    let plan = first_plan(3, &[F, S, S], &[2000, 1000, 0]);
    assert_eq!(plan.moves, vec![Move { page: 1, to: F }]);
}

#[test]
fn promotions_use_the_free_room_then_each_demotes_the_least_gain_fast_page() {
    // One page of room: page 1 takes it, page 2 goes up against page 0, which goes down first.
    let plan = first_plan(2, &[F, S, S], &[0, 1000, 500]);
    assert_eq!(plan.moves, vec![Move { page: 0, to: S }, Move { page: 1, to: F }, Move { page: 2, to: F }]);
}

#[test]
fn a_write_gains_the_difference_of_the_tiers_write_times() {
    // A write gains 64 B / 2 GB/s - 64 B / 20 GB/s = 28.8 ns, a read 300 - 100 = 200 ns: 100
    // writes (2880 ns) gain less than 16 reads (3200 ns), so the fast tier's one page goes to
    // the reads.
    let counts = [PageCounts { reads: 0, writes: 100 }, PageCounts { reads: 16, writes: 0 }];
    assert_eq!(plan_for(1, &[S, S], &counts).moves, vec![Move { page: 1, to: F }]);
    // 112 writes (3225.6 ns) gain more.
    let counts = [PageCounts { reads: 0, writes: 112 }, PageCounts { reads: 16, writes: 0 }];
    assert_eq!(plan_for(1, &[S, S], &counts).moves, vec![Move { page: 0, to: F }]);
}

#[test]
fn a_plan_that_moved_nothing_teaches_the_oracle_no_cost() {
    let mut p = terrace_policy::build("oracle").unwrap();
    p.start(&machine(2));
    let placement = [S, S];
    let tiers = [
        TierStatus { used_pages: 0, capacity_pages: Some(2), ..Default::default() },
        TierStatus { used_pages: 2, ..Default::default() },
    ];
    let counts = [PageCounts { reads: 1000, writes: 0 }, PageCounts { reads: 500, writes: 0 }];
    let obs = |now| Observations {
        now_ns: now,
        previous_ns: now - 100_000_000,
        placement: &placement,
        tiers: &tiers,
        page_bits: None,
        samples: &[],
        future: Some(&counts),
        hint_faults: &[],
        in_flight: &[],
    };
    assert_eq!(p.tick(&obs(100_000_000)).moves.len(), 2);
    // Every move failed (say the tier was full after all): nothing was learned.
    p.applied(&terrace_model::Applied { time_ns: 5_000, ..Default::default() });
    assert_eq!(p.tick(&obs(200_000_000)).moves.len(), 2);
}
