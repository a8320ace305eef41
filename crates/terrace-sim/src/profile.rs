//! Machine profiles: the numbers of one simulated machine, each citing its row of
//! shared/reference/hardware.md. Built-in profiles live in the workspace's profiles/ folder and
//! are embedded at build time; `--profile FILE.toml` loads another.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use terrace_model::TierKind;

/// One tier of a simulated machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierProfile {
    pub name: String,
    pub kind: TierKind,
    /// Idle read latency of a dependent random read, ns.
    pub read_latency_random_ns: f64,
    /// Idle read latency of a sequential read, ns.
    pub read_latency_sequential_ns: f64,
    /// Loaded-latency curve: latency at light load and at maximum load, with the bandwidth of each.
    pub loaded_light_ns: f64,
    pub loaded_light_gb_s: f64,
    pub loaded_max_ns: f64,
    pub loaded_max_gb_s: f64,
    /// Read bandwidth (GB/s) against thread count, as (threads, GB/s) points; linear between them,
    /// flat outside them.
    pub read_bandwidth_gb_s: Vec<(f64, f64)>,
    /// Write bandwidth (GB/s) against thread count, as above.
    pub write_bandwidth_gb_s: Vec<(f64, f64)>,
    /// Smallest unit the media reads or writes, bytes (256 for Optane's XPLine, 64 for DRAM).
    pub media_granularity_bytes: u32,
    /// Dynamic energy per 64-byte read and write, in the calibration source's unit (J per M accesses).
    pub read_energy_j_per_m: f64,
    pub write_energy_j_per_m: f64,
    /// Where each number comes from: field name -> hardware.md row.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// Costs of Linux page migration (move_pages) and its mechanisms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationProfile {
    /// Fixed cost of one move_pages call, µs.
    pub call_us: f64,
    /// Fixed cost per migrated page (allocation, unmap, remap, one TLB shootdown), µs.
    pub page_us: f64,
    /// Single-thread copy bandwidth of the kernel's page copy, GB/s.
    pub copy_gb_s: f64,
    /// Copy speed-up of a huge page with `huge_copy_threads_at_best` copy threads (Nimble §4.2.2).
    pub huge_copy_speedup: f64,
    pub huge_copy_threads_at_best: f64,
    /// Gain of concurrent batches over parallel copy alone, for huge pages (Nimble §4.2.3).
    pub huge_concurrency_gain: f64,
    /// Gain of exchange over two one-way migrations, for huge pages (Nimble §4.2.4).
    pub huge_exchange_gain: f64,
    /// One TLB shootdown: every program thread stalls this long, µs.
    pub tlb_shootdown_us: f64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// Costs of the trackers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackingProfile {
    /// Reading and clearing one page's referenced/dirty bits, ns.
    pub page_scan_ns: f64,
    /// Handling one access sample, ns.
    pub sample_ns: f64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// A whole simulated machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub summary: String,
    /// Core clock, GHz; compute time is instructions / clock (IPC 1).
    pub cpu_ghz: f64,
    /// Static power of the memory system, W, in the calibration source's units.
    pub static_power_w: f64,
    /// Slow-tier capacity as a multiple of the fast tier's when the user gives none.
    pub slow_to_fast_capacity: f64,
    /// Fastest first; exactly two tiers for now.
    pub tiers: Vec<TierProfile>,
    pub migration: MigrationProfile,
    pub tracking: TrackingProfile,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// Why a profile cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("unknown profile '{0}'; known: {known} (see `terrace list profiles`), or give a path to a .toml profile", known = BUILT_IN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "))]
    Unknown(String),
    #[error("cannot read profile {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("profile {name} is malformed: {message}")]
    Malformed { name: String, message: String },
}

/// The profiles shipped with Terrace: (name, TOML text).
pub const BUILT_IN: &[(&str, &str)] = &[
    ("optane-2019", include_str!("../../../profiles/optane-2019.toml")),
    ("cxl", include_str!("../../../profiles/cxl.toml")),
    ("remote-socket", include_str!("../../../profiles/remote-socket.toml")),
];

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "optane-2019";

impl Profile {
    /// A built-in profile by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some((name, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::parse(name, text);
        }
        if name_or_path.ends_with(".toml") || name_or_path.contains('/') {
            let text = std::fs::read_to_string(name_or_path)
                .map_err(|source| ProfileError::Io { path: name_or_path.to_string(), source })?;
            return Profile::parse(name_or_path, &text);
        }
        Err(ProfileError::Unknown(name_or_path.to_string()))
    }

    /// Parses and validates a profile.
    pub fn parse(name: &str, text: &str) -> Result<Profile, ProfileError> {
        let malformed = |message: String| ProfileError::Malformed { name: name.to_string(), message };
        let p: Profile = toml::from_str(text).map_err(|e| malformed(e.message().to_string()))?;
        p.validate().map_err(malformed)?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), String> {
        if self.tiers.len() != 2 {
            return Err(format!("it has {} tiers; the simulator models exactly 2", self.tiers.len()));
        }
        let positive = |what: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{what} must be a positive number, not {v}"))
            }
        };
        positive("cpu_ghz", self.cpu_ghz)?;
        positive("slow_to_fast_capacity", self.slow_to_fast_capacity)?;
        if self.static_power_w.is_nan() || self.static_power_w < 0.0 {
            return Err("static_power_w must be zero or positive".into());
        }
        for t in &self.tiers {
            for (what, v) in [
                ("read_latency_random_ns", t.read_latency_random_ns),
                ("read_latency_sequential_ns", t.read_latency_sequential_ns),
                ("loaded_light_ns", t.loaded_light_ns),
                ("loaded_light_gb_s", t.loaded_light_gb_s),
                ("loaded_max_ns", t.loaded_max_ns),
                ("loaded_max_gb_s", t.loaded_max_gb_s),
                ("read_energy_j_per_m", t.read_energy_j_per_m),
                ("write_energy_j_per_m", t.write_energy_j_per_m),
            ] {
                positive(&format!("tier {}: {what}", t.name), v)?;
            }
            if t.loaded_max_gb_s <= t.loaded_light_gb_s || t.loaded_max_ns < t.loaded_light_ns {
                return Err(format!(
                    "tier {}: the max-load point must lie beyond the light-load point",
                    t.name
                ));
            }
            for (what, curve) in [
                ("read_bandwidth_gb_s", &t.read_bandwidth_gb_s),
                ("write_bandwidth_gb_s", &t.write_bandwidth_gb_s),
            ] {
                if curve.is_empty() {
                    return Err(format!("tier {}: {what} needs at least one (threads, GB/s) point", t.name));
                }
                if curve.windows(2).any(|w| w[1].0 <= w[0].0) {
                    return Err(format!("tier {}: {what} points must have increasing thread counts", t.name));
                }
                for &(n, g) in curve {
                    positive(&format!("tier {}: {what} threads", t.name), n)?;
                    positive(&format!("tier {}: {what} GB/s", t.name), g)?;
                }
            }
            if !t.media_granularity_bytes.is_power_of_two() || t.media_granularity_bytes < 64 {
                return Err(format!("tier {}: media_granularity_bytes must be a power of two >= 64", t.name));
            }
        }
        let m = &self.migration;
        for (what, v) in [
            ("migration.call_us", m.call_us),
            ("migration.page_us", m.page_us),
            ("migration.copy_gb_s", m.copy_gb_s),
            ("migration.huge_copy_speedup", m.huge_copy_speedup),
            ("migration.huge_copy_threads_at_best", m.huge_copy_threads_at_best),
            ("migration.huge_concurrency_gain", m.huge_concurrency_gain),
            ("migration.huge_exchange_gain", m.huge_exchange_gain),
            ("migration.tlb_shootdown_us", m.tlb_shootdown_us),
            ("tracking.page_scan_ns", self.tracking.page_scan_ns),
            ("tracking.sample_ns", self.tracking.sample_ns),
        ] {
            positive(what, v)?;
        }
        if m.tlb_shootdown_us > m.page_us {
            return Err(
                "migration.tlb_shootdown_us cannot exceed migration.page_us, which includes one shootdown"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Piecewise-linear interpolation over (x, y) points, flat outside them.
pub fn interpolate(points: &[(f64, f64)], x: f64) -> f64 {
    let (first, last) = (points[0], points[points.len() - 1]);
    if x <= first.0 {
        return first.1;
    }
    if x >= last.0 {
        return last.1;
    }
    let i = points.partition_point(|p| p.0 <= x);
    let (a, b) = (points[i - 1], points[i]);
    a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_profiles_parse_and_cite_their_numbers() {
        for (name, _) in BUILT_IN {
            let p = Profile::load(name).unwrap();
            assert_eq!(&p.name, name);
            for t in &p.tiers {
                for field in [
                    "read_latency_random_ns",
                    "loaded_max_ns",
                    "read_bandwidth_gb_s",
                    "write_bandwidth_gb_s",
                    "read_energy_j_per_m",
                ] {
                    assert!(t.sources.contains_key(field), "{name}/{}: no source for {field}", t.name);
                }
            }
            for field in ["call_us", "page_us", "copy_gb_s", "tlb_shootdown_us"] {
                assert!(p.migration.sources.contains_key(field), "{name}: no source for migration.{field}");
            }
        }
    }

    #[test]
    fn unknown_profile_names_the_known_ones() {
        let e = Profile::load("nope").unwrap_err().to_string();
        assert!(e.contains("optane-2019") && e.contains("terrace list profiles"), "{e}");
    }

    #[test]
    fn malformed_profile_is_an_error_not_a_panic() {
        let text = BUILT_IN[0].1.replace("media_granularity_bytes = 256", "media_granularity_bytes = 100");
        let e = Profile::parse("x", &text).unwrap_err().to_string();
        assert!(e.contains("power of two"), "{e}");
        assert!(Profile::parse("x", "not toml [").is_err());
    }

    #[test]
    fn interpolation_is_linear_between_points_and_flat_outside() {
        let pts = [(1.0, 2.0), (3.0, 6.0), (5.0, 2.0)];
        assert_eq!(interpolate(&pts, 0.5), 2.0);
        assert_eq!(interpolate(&pts, 2.0), 4.0);
        assert_eq!(interpolate(&pts, 4.0), 4.0);
        assert_eq!(interpolate(&pts, 9.0), 2.0);
    }
}
