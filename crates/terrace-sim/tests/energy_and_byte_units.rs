//! Two conversions reports rely on: a run's energy counts migration copies in 64-byte lines at
//! each tier's read and write price, and byte counts print in binary units up to PiB.

use terrace_sim::energy::run_energy_j;
use terrace_sim::{human_bytes, Profile, TierTotals};

#[test]
fn energy_charges_each_access_and_each_copied_line_at_its_tier_s_price() {
    let p = Profile::load("optane-2019").unwrap();
    let (f, s) = (&p.tiers[0], &p.tiers[1]);
    let fast = TierTotals { reads: 1000, writes: 300, copy_read_bytes: 64 * 50, ..TierTotals::default() };
    let slow = TierTotals { writes: 200, copy_write_bytes: 64 * 50, ..TierTotals::default() };
    // No run time: no static energy.
    let j = run_energy_j(&p, &[fast, slow], 0.0);
    let expected =
        ((1000.0 + 50.0) * f.read_energy_nj + 300.0 * f.write_energy_nj + (200.0 + 50.0) * s.write_energy_nj)
            * 1e-9;
    assert!((j - expected).abs() < 1e-9 * expected, "{j} J vs {expected} J");
    // A partial line is not a line.
    let part = TierTotals { copy_read_bytes: 63, ..TierTotals::default() };
    assert_eq!(run_energy_j(&p, &[part, TierTotals::default()], 0.0), 0.0);
    // Static power over the run time.
    let idle = run_energy_j(&p, &[TierTotals::default(), TierTotals::default()], 2e9);
    assert!((idle - 2.0 * p.static_power_w).abs() < 1e-12);
}

#[test]
fn bytes_print_in_binary_units_up_to_pib() {
    assert_eq!(human_bytes(0), "0 B");
    assert_eq!(human_bytes(1023), "1023 B");
    assert_eq!(human_bytes(1536), "1.5 KiB");
    assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    assert_eq!(human_bytes(1 << 50), "1.0 PiB");
    // Past PiB the number grows instead of running out of units.
    assert_eq!(human_bytes(u64::MAX), "16384.0 PiB");
}
