//! Energy: dynamic per access by tier and kind, plus static power over the run
//! (docs/model.md §Energy; calibrated on the Ambix thesis' tables, hardware.md Energy).

use crate::profile::Profile;
use crate::report::TierTotals;

/// Energy of a run, in joules of the calibration source's units.
pub fn run_energy_j(profile: &Profile, tiers: &[TierTotals; 2], runtime_ns: f64) -> f64 {
    let mut j = profile.static_power_w * runtime_ns * 1e-9;
    for (t, p) in tiers.iter().zip(&profile.tiers) {
        // Per-access figures are per 64-byte access; copies are counted in lines.
        let copy_reads = t.copy_read_bytes / 64;
        let copy_writes = t.copy_write_bytes / 64;
        j += (t.reads + copy_reads) as f64 * p.read_energy_j_per_m * 1e-6;
        j += (t.writes + copy_writes) as f64 * p.write_energy_j_per_m * 1e-6;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_reproduces_the_calibration_points() {
        // Ambix ch. 3, RO all-DRAM at 32 threads: 14.47 J per M accesses at 217.64 M accesses/s.
        let p = Profile::load("optane-2019").unwrap();
        let reads = 1_000_000u64;
        let runtime_ns = reads as f64 / 217.64e6 * 1e9;
        let tiers = [TierTotals { reads, ..Default::default() }, TierTotals::default()];
        let j = run_energy_j(&p, &tiers, runtime_ns);
        assert!((j - 14.47).abs() / 14.47 < 0.03, "{j}");
        // RO all-DCPMM at 32 threads: 50.94 at 55.11 M/s.
        let runtime_ns = reads as f64 / 55.11e6 * 1e9;
        let tiers = [TierTotals::default(), TierTotals { reads, ..Default::default() }];
        let j = run_energy_j(&p, &tiers, runtime_ns);
        assert!((j - 50.94).abs() / 50.94 < 0.03, "{j}");
    }
}
