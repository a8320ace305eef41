//! Time of a slice of accesses: the tier model of docs/model.md §Timing.
//!
//! For each tier, reads stall their thread for the (loaded) latency, overlapped up to the
//! thread's memory-level parallelism; every byte needs bandwidth. A slice takes the larger of the
//! latency path (all tiers' stalls plus compute, which one thread does in sequence) and the
//! bandwidth path of the busiest tier (tiers transfer in parallel). Loaded latency rises with the
//! tier's bandwidth use, so slice time is the fixed point of `T = f(T)`; `f` falls as `T` grows,
//! so bisection finds it.

use crate::profile::{interpolate, Profile, TierProfile};

/// A 64-byte cache line: the unit of a memory access below the media granularity.
pub const LINE_BYTES: u64 = 64;

/// Per-tier constants for one thread count, derived from a profile once per run.
#[derive(Clone, Debug)]
pub struct TierTiming {
    pub latency_random_ns: f64,
    pub latency_sequential_ns: f64,
    /// Extra latency per GB/s of use above the light-load point (docs/hardware.md §6, loaded latency).
    pub loaded_slope_ns_per_gb_s: f64,
    pub loaded_light_gb_s: f64,
    pub loaded_span_gb_s: f64,
    /// Bandwidth at the program's thread count, bytes per ns (= GB/s).
    pub read_bytes_per_ns: f64,
    pub write_bytes_per_ns: f64,
    /// Reads one thread keeps in flight: its one-thread bandwidth times idle latency, in lines.
    pub mlp_per_thread: f64,
    pub granularity_shift: u32,
}

impl TierTiming {
    pub fn new(t: &TierProfile, threads: u32) -> Self {
        let n = threads.max(1) as f64;
        let one_thread_read = interpolate(&t.read_bandwidth_gb_s, 1.0);
        TierTiming {
            latency_random_ns: t.read_latency_random_ns,
            latency_sequential_ns: t.read_latency_sequential_ns,
            loaded_slope_ns_per_gb_s: (t.loaded_max_ns - t.loaded_light_ns)
                / (t.loaded_max_gb_s - t.loaded_light_gb_s),
            loaded_light_gb_s: t.loaded_light_gb_s,
            loaded_span_gb_s: t.loaded_max_gb_s - t.loaded_light_gb_s,
            read_bytes_per_ns: interpolate(&t.read_bandwidth_gb_s, n),
            write_bytes_per_ns: interpolate(&t.write_bandwidth_gb_s, n),
            mlp_per_thread: (one_thread_read * t.read_latency_random_ns / LINE_BYTES as f64).max(1.0),
            granularity_shift: t.media_granularity_bytes.trailing_zeros(),
        }
    }

    /// Latency added by load: zero at light load, rising linearly to the max-load point, flat beyond.
    pub fn loaded_extra_ns(&self, gb_s: f64) -> f64 {
        self.loaded_slope_ns_per_gb_s * (gb_s - self.loaded_light_gb_s).clamp(0.0, self.loaded_span_gb_s)
    }
}

/// The machine's timing constants.
#[derive(Clone, Debug)]
pub struct Timing {
    pub tiers: Vec<TierTiming>,
    pub threads: f64,
    pub ns_per_instruction: f64,
}

impl Timing {
    pub fn new(profile: &Profile, threads: u32) -> Self {
        Timing {
            tiers: profile.tiers.iter().map(|t| TierTiming::new(t, threads)).collect(),
            threads: threads.max(1) as f64,
            ns_per_instruction: 1.0 / profile.cpu_ghz,
        }
    }
}

/// What one slice asked of one tier.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TierLoad {
    pub random_reads: u64,
    pub sequential_reads: u64,
    pub writes: u64,
    /// Bytes the media transferred (after granularity rounding).
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Background copy traffic (page migration) running during the slice, bytes per ns.
    pub copy_read_bytes_per_ns: f64,
    pub copy_write_bytes_per_ns: f64,
}

impl TierLoad {
    fn bandwidth_ns(&self, t: &TierTiming) -> f64 {
        // Copy traffic takes its share of the tier's bandwidth first (capped: the program always progresses).
        let taken = (self.copy_read_bytes_per_ns / t.read_bytes_per_ns
            + self.copy_write_bytes_per_ns / t.write_bytes_per_ns)
            .min(0.9);
        (self.read_bytes as f64 / t.read_bytes_per_ns + self.write_bytes as f64 / t.write_bytes_per_ns)
            / (1.0 - taken)
    }
    fn stall_ns(&self, t: &TierTiming, slice_ns: f64) -> f64 {
        let gb_s = (self.read_bytes + self.write_bytes) as f64 / slice_ns
            + self.copy_read_bytes_per_ns
            + self.copy_write_bytes_per_ns;
        let extra = t.loaded_extra_ns(gb_s);
        self.random_reads as f64 * (t.latency_random_ns + extra)
            + self.sequential_reads as f64 * (t.latency_sequential_ns + extra)
    }
}

/// Time of one slice, ns: the fixed point of `T = max(latency path(T) + compute, bandwidth path)`.
pub fn slice_ns(timing: &Timing, loads: &[TierLoad], instructions: u64) -> f64 {
    let compute = instructions as f64 * timing.ns_per_instruction / timing.threads;
    let bandwidth = loads.iter().zip(&timing.tiers).map(|(l, t)| l.bandwidth_ns(t)).fold(0.0, f64::max);
    let f = |slice: f64| {
        let latency: f64 = loads
            .iter()
            .zip(&timing.tiers)
            .map(|(l, t)| l.stall_ns(t, slice) / (timing.threads * t.mlp_per_thread))
            .sum();
        (latency + compute).max(bandwidth)
    };
    // f falls as T grows; its fixed point lies in [f(inf), f(f(inf))].
    let lo0 = f(f64::INFINITY);
    if lo0 <= 0.0 {
        return 0.0;
    }
    let hi0 = f(lo0);
    let (mut lo, mut hi) = (lo0, hi0);
    if hi - lo <= lo * 1e-4 {
        return hi;
    }
    for _ in 0..24 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > mid {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= lo * 1e-4 {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn optane(threads: u32) -> Timing {
        Timing::new(&Profile::load("optane-2019").unwrap(), threads)
    }

    #[test]
    fn one_thread_dependent_reads_cost_idle_latency_over_mlp() {
        // 1000 random reads of DRAM by one thread at light load: 1000 x 101.5 ns / MLP.
        let t = optane(1);
        let load = TierLoad { random_reads: 1000, read_bytes: 64, ..Default::default() };
        let got = slice_ns(&t, &[load, TierLoad::default()], 0);
        let mlp = 7.38 * 101.5 / 64.0;
        let want = 1000.0 * 101.5 / mlp;
        assert!((got - want).abs() / want < 1e-3, "got {got} want {want}");
    }

    #[test]
    fn slow_tier_reads_cost_its_own_latency() {
        let t = optane(1);
        let load = TierLoad { random_reads: 1000, read_bytes: 256, ..Default::default() };
        let fast = slice_ns(&t, &[load, TierLoad::default()], 0);
        let slow = slice_ns(&t, &[TierLoad::default(), load], 0);
        let want_ratio = (305.0 / (2.88 * 305.0 / 64.0)) / (101.5 / (7.38 * 101.5 / 64.0));
        assert!(((slow / fast) - want_ratio).abs() < 1e-3, "ratio {} want {want_ratio}", slow / fast);
    }

    #[test]
    fn write_stream_runs_at_write_bandwidth() {
        // 1 GB written to Optane by 24 threads: 1e9 B / 7.50 GB/s = 133.3 ms.
        let t = optane(24);
        let load = TierLoad { writes: 1 << 24, write_bytes: 1_000_000_000, ..Default::default() };
        let got = slice_ns(&t, &[TierLoad::default(), load], 0);
        assert!((got - 1e9 / 7.5).abs() / got < 1e-6, "got {got}");
    }

    #[test]
    fn optane_write_bandwidth_falls_past_saturation() {
        let bw = |n| optane(n).tiers[1].write_bytes_per_ns;
        assert!(bw(4) > bw(16) && bw(16) > bw(24));
    }

    #[test]
    fn loaded_latency_rises_with_bandwidth_use_and_flattens() {
        let t = &optane(1).tiers[0];
        assert_eq!(t.loaded_extra_ns(0.5), 0.0);
        assert!((t.loaded_extra_ns(52.3) - (121.4 - 87.9)).abs() < 1e-9);
        assert_eq!(t.loaded_extra_ns(80.0), t.loaded_extra_ns(52.3));
        assert!(t.loaded_extra_ns(20.0) > t.loaded_extra_ns(10.0));
    }

    #[test]
    fn slice_time_is_a_fixed_point() {
        let t = optane(16);
        let loads = [
            TierLoad {
                random_reads: 50_000,
                writes: 50_000,
                read_bytes: 3_200_000,
                write_bytes: 3_200_000,
                ..Default::default()
            },
            TierLoad {
                random_reads: 5_000,
                writes: 5_000,
                read_bytes: 1_280_000,
                write_bytes: 1_280_000,
                ..Default::default()
            },
        ];
        let s = slice_ns(&t, &loads, 100_000);
        let latency: f64 = loads
            .iter()
            .zip(&t.tiers)
            .map(|(l, tt)| l.stall_ns(tt, s) / (t.threads * tt.mlp_per_thread))
            .sum();
        let compute = 100_000.0 / 2.3 / 16.0;
        let bw = loads.iter().zip(&t.tiers).map(|(l, tt)| l.bandwidth_ns(tt)).fold(0.0, f64::max);
        let f = (latency + compute).max(bw);
        assert!((f - s).abs() / s < 1e-3, "T={s} f(T)={f}");
    }

    #[test]
    fn copy_traffic_slows_bandwidth_bound_slices() {
        let t = optane(8);
        let quiet = TierLoad { writes: 1000, write_bytes: 1 << 20, ..Default::default() };
        let busy = TierLoad { copy_write_bytes_per_ns: 2.0, ..quiet };
        assert!(
            slice_ns(&t, &[TierLoad::default(), busy], 0) > slice_ns(&t, &[TierLoad::default(), quiet], 0)
        );
    }
}
