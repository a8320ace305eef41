//! The trackers' own bookkeeping and prices: page-table bits set by accesses, the cost of a
//! page-table scan, an armed page's hint fault left to be charged, and the documented price of
//! one hint fault.

use terrace_model::{TierId, PAGE_DIRTY, PAGE_REFERENCED};
use terrace_sim::machine::hint_fault_ns;
use terrace_sim::trackers::{hint_faults::HintFaults, page_bits::PageBits};
use terrace_sim::Profile;

#[test]
fn an_access_sets_the_referenced_bit_and_a_write_the_dirty_bit_too() {
    let mut b = PageBits::new(4);
    b.touch(1, false);
    b.touch(2, true);
    b.touch(3, true);
    b.touch(3, false);
    assert_eq!(b.bits, vec![0, PAGE_REFERENCED, PAGE_REFERENCED | PAGE_DIRTY, PAGE_REFERENCED | PAGE_DIRTY]);
    b.clear();
    assert_eq!(b.bits, vec![0; 4]);
}

#[test]
fn a_scan_costs_its_per_page_price_for_every_mapped_page() {
    assert_eq!(PageBits::scan_ns(1000, 2.5), 2500.0);
    assert_eq!(PageBits::scan_ns(0, 2.5), 0.0);
}

#[test]
fn each_armed_page_faults_once_and_the_fault_waits_to_be_charged() {
    let mut h = HintFaults::new(4, 4096, 0, 1.0);
    let armed = h.scan(0, &[TierId::FAST; 4]);
    assert_eq!(armed, 4);
    h.touch(0, false);
    h.touch(0, false);
    h.touch(2, true);
    assert_eq!(h.faults.len(), 2);
    assert_eq!(h.unpaid_faults, 2);
    assert_eq!(h.taken, 2);
}

#[test]
fn a_hint_fault_costs_a_trap_and_a_four_level_walk() {
    // docs/model.md §6: 1 us trap + 4 x 101.5 ns DRAM reads = 1.41 us on optane-2019.
    let ns = hint_fault_ns(&Profile::load("optane-2019").unwrap());
    assert!((ns - 1406.0).abs() < 1e-9, "{ns}");
}
