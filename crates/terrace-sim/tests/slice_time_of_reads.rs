//! A slice's latency path (docs/model.md §2): each read waits its tier's latency for its
//! locality (random or sequential), divided by the reads the threads keep in flight; random and
//! sequential reads add up; traffic, the mover's copies included, makes each wait longer.

use terrace_sim::timing::{slice_ns, TierLoad, Timing};
use terrace_sim::Profile;

#[test]
fn random_and_sequential_reads_each_cost_their_own_latency_over_the_reads_in_flight() {
    let p = Profile::load("optane-2019").unwrap();
    let timing = Timing::new(&p, 1);
    let t = &timing.tiers[0];
    let in_flight = timing.threads * t.mlp_per_thread;
    // No bytes: no bandwidth path and no loaded latency, only the latency path.
    let slice = |random_reads, sequential_reads| {
        let load = TierLoad { random_reads, sequential_reads, ..TierLoad::default() };
        slice_ns(&timing, &[load, TierLoad::default()], 0)
    };
    let random = 1000.0 * t.latency_random_ns / in_flight;
    let sequential = 1000.0 * t.latency_sequential_ns / in_flight;
    assert!(sequential > 0.0);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
    assert!(close(slice(1000, 0), random), "{} vs {random}", slice(1000, 0));
    assert!(close(slice(0, 1000), sequential), "{} vs {sequential}", slice(0, 1000));
    assert!(close(slice(1000, 1000), random + sequential), "{}", slice(1000, 1000));
}

/// Loaded latency (docs/hardware.md §6): traffic above the light-load point makes every read,
/// random or sequential, wait longer, and the mover's copy traffic counts as traffic.
#[test]
fn traffic_and_copy_traffic_make_reads_of_either_kind_wait_longer() {
    let p = Profile::load("optane-2019").unwrap();
    let timing = Timing::new(&p, 1);
    let slice = |load: TierLoad| slice_ns(&timing, &[load, TierLoad::default()], 0);
    for (random_reads, sequential_reads) in [(1000, 0), (0, 1000)] {
        let idle = slice(TierLoad { random_reads, sequential_reads, ..TierLoad::default() });
        // Two bytes per ns of reads (above DRAM's light load, below its one-thread bandwidth).
        let read_bytes = (2.0 * idle) as u64;
        let loaded = slice(TierLoad { random_reads, sequential_reads, read_bytes, ..TierLoad::default() });
        assert!(loaded > idle, "{random_reads} random, {sequential_reads} sequential: {loaded} vs {idle}");
        let copying = slice(TierLoad {
            random_reads,
            sequential_reads,
            copy_read_bytes_per_ns: 2.0,
            ..TierLoad::default()
        });
        assert!(copying > idle, "{random_reads} random, {sequential_reads} sequential: {copying} vs {idle}");
    }
}
