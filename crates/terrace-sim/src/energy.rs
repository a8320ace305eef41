//! Energy: dynamic per access by tier and kind, plus static power over the run
//! (docs/model.md §7; calibrated on the Ambix thesis' tables, docs/hardware.md §14 (Energy)).

use crate::profile::Profile;
use crate::report::TierTotals;

/// Energy of a run, in joules.
pub fn run_energy_j(profile: &Profile, tiers: &[TierTotals], runtime_ns: f64) -> f64 {
    let mut j = profile.static_power_w * runtime_ns * 1e-9;
    for (t, p) in tiers.iter().zip(&profile.tiers) {
        // Per-access figures are per 64-byte access; copies are counted in lines.
        let copy_reads = t.copy_read_bytes / 64;
        let copy_writes = t.copy_write_bytes / 64;
        j += (t.reads + copy_reads) as f64 * p.read_energy_nj * 1e-9;
        j += (t.writes + copy_writes) as f64 * p.write_energy_nj * 1e-9;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::BUILT_IN;

    /// The thesis' figures, read as mJ per M accesses: 1 M accesses at its throughput cost its
    /// printed number in millijoules.
    #[test]
    fn energy_reproduces_the_calibration_points() {
        // Ambix ch. 3, RO all-DRAM at 32 threads: 14.47 mJ per M accesses at 217.64 M accesses/s.
        let p = Profile::load("optane-2019").unwrap();
        let reads = 1_000_000u64;
        let runtime_ns = reads as f64 / 217.64e6 * 1e9;
        let tiers = [TierTotals { reads, ..Default::default() }, TierTotals::default()];
        let mj = run_energy_j(&p, &tiers, runtime_ns) * 1e3;
        assert!((mj - 14.47).abs() / 14.47 < 0.03, "{mj}");
        // RO all-DCPMM at 32 threads: 50.94 at 55.11 M/s.
        let runtime_ns = reads as f64 / 55.11e6 * 1e9;
        let tiers = [TierTotals::default(), TierTotals { reads, ..Default::default() }];
        let mj = run_energy_j(&p, &tiers, runtime_ns) * 1e3;
        assert!((mj - 50.94).abs() / 50.94 < 0.03, "{mj}");
    }

    fn peak(points: &[(f64, f64)]) -> f64 {
        points.iter().map(|&(_, gb_s)| gb_s).fold(0.0, f64::max)
    }

    /// Physical plausibility of every built-in profile's energy figures (docs/model.md §7).
    ///
    /// - Per 64 B access, between 0.1 and 100 nJ: a DDR4 access costs a few nJ (tens of pJ per
    ///   bit moved); a figure outside this band is a unit error, as the thesis' printed "J per M
    ///   accesses" (µJ per access) was.
    /// - Each tier's dynamic power at its peak read or write bandwidth, the machine's static power,
    ///   and their sum, between 0.1 W and 100 W. The calibration socket drew 2.5-3.2 W (RAPL) in
    ///   every run the Ambix thesis measured, with four DIMMs in use (docs/hardware.md §14 (Energy)); a
    ///   full socket of 12 DIMMs would draw about three times that. 100 W leaves a factor of ten
    ///   for harder-working or hungrier modules and still catches the unit error (2.6 kW) 26 times
    ///   over.
    #[test]
    fn every_tier_draws_a_plausible_power() {
        for (name, _) in BUILT_IN {
            let p = Profile::load(name).unwrap();
            assert!((0.1..=100.0).contains(&p.static_power_w), "{name}: static power {} W", p.static_power_w);
            let mut total = p.static_power_w;
            for t in &p.tiers {
                for (what, nj) in [("read", t.read_energy_nj), ("write", t.write_energy_nj)] {
                    assert!((0.1..=100.0).contains(&nj), "{name}/{}: {what} {nj} nJ per access", t.name);
                }
                // Accesses per second at peak bandwidth times energy per access.
                let read_w = peak(&t.read_bandwidth_gb_s) * 1e9 / 64.0 * t.read_energy_nj * 1e-9;
                let write_w = peak(&t.write_bandwidth_gb_s) * 1e9 / 64.0 * t.write_energy_nj * 1e-9;
                let w = read_w.max(write_w);
                assert!((0.1..=100.0).contains(&w), "{name}/{}: {w} W at peak bandwidth", t.name);
                total += w;
            }
            assert!(total <= 100.0, "{name}: {total} W with every tier at its peak");
        }
    }
}
