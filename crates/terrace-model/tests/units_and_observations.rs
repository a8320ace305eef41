//! The small facts of the vocabulary other crates compute with: page sizes and page counts,
//! tier indices and the unplaced marker, access kinds, the page-table bits, a tier's free
//! pages and a tick's interval.

use terrace_model::{AccessKind, Observations, PageSize, TierId, TierStatus, PAGE_DIRTY, PAGE_REFERENCED};

#[test]
fn page_sizes_have_the_x86_64_shifts_and_bytes() {
    assert_eq!(PageSize::Base4K.shift(), 12);
    assert_eq!(PageSize::Huge2M.shift(), 21);
    assert_eq!(PageSize::Base4K.bytes(), 4096);
    assert_eq!(PageSize::Huge2M.bytes(), 2 << 20);
}

#[test]
fn pages_for_rounds_up_to_whole_pages() {
    let p = PageSize::Base4K;
    assert_eq!(p.pages_for(0), 0);
    assert_eq!(p.pages_for(1), 1);
    assert_eq!(p.pages_for(4096), 1);
    assert_eq!(p.pages_for(4097), 2);
    assert_eq!(p.pages_for(10 * 4096), 10);
    assert_eq!(PageSize::Huge2M.pages_for(5 << 20), 3);
}

#[test]
fn a_tier_id_indexes_its_tier_and_only_unplaced_is_not_placed() {
    assert_eq!(TierId::FAST.index(), 0);
    assert_eq!(TierId::SLOW.index(), 1);
    assert_eq!(TierId(5).index(), 5);
    assert!(TierId::FAST.is_placed());
    assert!(TierId::SLOW.is_placed());
    assert!(TierId(7).is_placed());
    assert!(!TierId::UNPLACED.is_placed());
}

#[test]
fn only_a_write_is_a_write() {
    assert!(AccessKind::Write.is_write());
    assert!(!AccessKind::Read.is_write());
}

#[test]
fn the_page_table_bits_are_distinct_single_bits() {
    assert_eq!(PAGE_REFERENCED, 1);
    assert_eq!(PAGE_DIRTY, 2);
    assert_eq!(PAGE_REFERENCED & PAGE_DIRTY, 0);
}

#[test]
fn a_tier_has_its_capacity_less_what_is_used_free_and_unbounded_is_never_full() {
    let status =
        |used_pages, capacity_pages| TierStatus { used_pages, capacity_pages, ..TierStatus::default() };
    assert_eq!(status(3, Some(10)).free_pages(), 7);
    assert_eq!(status(10, Some(10)).free_pages(), 0);
    assert_eq!(status(12, Some(10)).free_pages(), 0, "over-full is not negative");
    assert_eq!(status(3, None).free_pages(), u64::MAX);
}

#[test]
fn the_interval_is_the_time_since_the_previous_tick() {
    let placement = [TierId::FAST];
    let tiers = [TierStatus::default()];
    let obs = Observations {
        now_ns: 5_000,
        previous_ns: 2_000,
        placement: &placement,
        tiers: &tiers,
        page_bits: None,
        samples: &[],
        future: None,
        hint_faults: &[],
        in_flight: &[],
    };
    assert_eq!(obs.interval_ns(), 3_000);
}
