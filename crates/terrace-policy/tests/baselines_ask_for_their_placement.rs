//! The baselines that never move a page say where pages go through their requirements alone:
//! `all-slow` binds everything to the slow tier, `memory-mode` runs the fast tier as a hardware
//! cache of the slow one.

use terrace_model::{InitialPlacement, MachineInfo, MemoryMode, PageSize, Requirements, TierId};

fn requirements(spec: &str) -> Requirements {
    let m = MachineInfo {
        name: String::new(),
        tiers: vec![],
        page_size: PageSize::Base4K,
        pages: 0,
        threads: 1,
        scale: 1.0,
        mechanisms: Default::default(),
        programs: Vec::new(),
        move_unit_bytes: 0,
    };
    terrace_policy::build(spec).unwrap().requirements(&m)
}

#[test]
fn all_slow_places_every_page_in_the_slow_tier_and_never_ticks() {
    let r = requirements("all-slow");
    assert_eq!(r.initial, InitialPlacement::Tier(TierId::SLOW));
    assert_eq!(r.memory_mode, MemoryMode::Flat);
    assert_eq!(r.tick_ns, None);
}

#[test]
fn memory_mode_asks_for_the_fast_tier_as_a_cache_and_never_ticks() {
    let r = requirements("memory-mode");
    assert_eq!(r.memory_mode, MemoryMode::FastTierAsCache);
    assert_eq!(r.tick_ns, None);
    assert!(r.trackers.is_empty());
}
