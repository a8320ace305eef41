//! Sampled-heat counters start empty and grow with the address space, never shrinking.

use terrace_policy::sampled_heat::HeatCounters;

#[test]
fn counters_start_empty_and_grow_but_never_shrink() {
    let mut h = HeatCounters::new(8);
    assert!(h.is_empty());
    assert_eq!(h.len(), 0);
    h.grow(3);
    assert!(!h.is_empty());
    assert_eq!(h.len(), 3);
    h.grow(1);
    assert_eq!(h.len(), 3);
}
