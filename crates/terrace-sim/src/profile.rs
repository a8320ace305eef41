//! Machine profiles: the numbers of one simulated machine, each citing its section of
//! docs/hardware.md. Built-in profiles live in the workspace's profiles/ folder and
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
    /// Dynamic energy per 64-byte read and write, nJ (docs/model.md §7: the Ambix thesis' "J per
    /// M accesses" read as mJ per M accesses, the only reading that gives a plausible power).
    pub read_energy_nj: f64,
    pub write_energy_nj: f64,
    /// For a tier between the first and the last: its size as a multiple of the fast tier's
    /// (the last tier's is `slow_to_fast_capacity`, and it holds at least the footprint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_to_fast: Option<f64>,
    /// Where each number comes from: field name -> its docs/hardware.md section, or the arithmetic.
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
    /// Static power of the memory system, W.
    pub static_power_w: f64,
    /// The last (slowest) tier's capacity as a multiple of the fast tier's when the user gives none.
    pub slow_to_fast_capacity: f64,
    /// Fastest first; from 2 to [`MAX_TIERS`] tiers.
    pub tiers: Vec<TierProfile>,
    pub migration: MigrationProfile,
    pub tracking: TrackingProfile,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// Where and when `terrace profile measure` wrote this profile; absent from the shipped ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredOn>,
}

/// The record a measured profile keeps of its measurement, so a reader can tell which host's
/// figures it holds and which came from another profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuredOn {
    /// The host name.
    pub host: String,
    /// The CPU model, from /proc/cpuinfo.
    pub cpu: String,
    /// The kernel release (uname -r).
    pub kernel: String,
    /// UTC date and time of the measurement, RFC 3339.
    pub date: String,
    /// The NUMA nodes measured, one per measured tier, fastest first.
    pub nodes: Vec<u32>,
    /// The profile the figures that cannot be measured here were taken from.
    pub base: String,
    /// The command's options that shaped the run (`--quick`).
    pub command: String,
}

/// Why a profile cannot be used. Each message is one line that names the profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("unknown profile '{0}'; known: {known} (see `terrace list profiles`), or give a path to a .toml profile", known = BUILT_IN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "))]
    Unknown(String),
    /// Missing, not a regular file, too large, not text: the input's own message says which and
    /// names the file (and its cause, so the cause is not a separate source to print again).
    #[error(transparent)]
    Input(#[from] terrace_input::InputError),
    /// Not TOML, or not a profile: the message has the line and column.
    #[error("profile '{name}' is malformed: {message}")]
    Malformed { name: String, message: String },
    /// Well-formed, but a number is outside its physical range or the tiers are out of order.
    #[error("profile '{name}' is invalid: {message}")]
    Invalid { name: String, message: String },
}

/// The profiles shipped with Terrace: (name, TOML text).
pub const BUILT_IN: &[(&str, &str)] = &[
    ("optane-2019", include_str!("../../../profiles/optane-2019.toml")),
    ("cxl", include_str!("../../../profiles/cxl.toml")),
    ("remote-socket", include_str!("../../../profiles/remote-socket.toml")),
    ("three-tier", include_str!("../../../profiles/three-tier.toml")),
    ("nimble-xeon", include_str!("../../../profiles/nimble-xeon.toml")),
];

/// The most tiers a profile may have: the replay keeps per-tier counters in arrays of this size.
pub const MAX_TIERS: usize = 4;

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "optane-2019";

/// The range one number of a profile must lie in, and why.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValidRange {
    /// The key as a profile spells it, with its table: `cpu_ghz`, `tiers.loaded_max_ns`.
    pub field: &'static str,
    pub min: f64,
    pub max: f64,
    pub unit: &'static str,
    pub why: &'static str,
}

const fn range(field: &'static str, min: f64, max: f64, unit: &'static str, why: &'static str) -> ValidRange {
    ValidRange { field, min, max, unit, why }
}

/// Which numbers a profile may hold: physical sense with wide margins around the cited figures.
/// A number outside its range is a typo or a unit error, and some make a run that never ends (a
/// 1e19 ns latency, a 1e-300 GHz clock). Bounds are inclusive. This is the one list of the ranges;
/// docs/model.md §8 "Valid ranges" shows it, and a test keeps the two alike.
pub const RANGES: &[ValidRange] = &[
    range("cpu_ghz", 0.1, 10.0, "GHz", "no core runs below 100 MHz or above 10 GHz; cited: 2.3 GHz"),
    range(
        "static_power_w",
        0.0,
        1000.0,
        "W",
        "0 leaves static energy out; one socket's memory draws at most about 216 W (12 DIMMs at 18 W)",
    ),
    range(
        "slow_to_fast_capacity",
        0.001,
        1000.0,
        "",
        "the slow tier's size over the fast tier's; cited machines: 1 (two sockets) to 8 (Optane)",
    ),
    range(
        "tiers.capacity_to_fast",
        0.001,
        1000.0,
        "",
        "a middle tier's size over the fast tier's, as slow_to_fast_capacity is the last tier's",
    ),
    range(
        "tiers.read_latency_random_ns",
        1.0,
        100_000.0,
        "ns",
        "no memory answers a read in under 1 ns or takes over 100 µs; cited: 101.5 to 305 ns",
    ),
    range(
        "tiers.read_latency_sequential_ns",
        1.0,
        100_000.0,
        "ns",
        "no memory answers a read in under 1 ns or takes over 100 µs; cited: 81.4 to 169.4 ns",
    ),
    range(
        "tiers.loaded_light_ns",
        1.0,
        100_000.0,
        "ns",
        "no memory answers a read in under 1 ns or takes over 100 µs; cited: 87.9 to 210 ns",
    ),
    range(
        "tiers.loaded_max_ns",
        1.0,
        100_000.0,
        "ns",
        "no memory answers a read in under 1 ns or takes over 100 µs; cited: 121.4 to 289.5 ns",
    ),
    range(
        "tiers.loaded_light_gb_s",
        0.01,
        10_000.0,
        "GB/s",
        "from a slow link (10 MB/s) to beyond the widest HBM (10 TB/s); cited: 0.41 to 0.74 GB/s",
    ),
    range(
        "tiers.loaded_max_gb_s",
        0.01,
        10_000.0,
        "GB/s",
        "from a slow link (10 MB/s) to beyond the widest HBM (10 TB/s); cited: 11.5 to 52.3 GB/s",
    ),
    range(
        "tiers.read_bandwidth_gb_s",
        0.01,
        10_000.0,
        "GB/s",
        "each point's bandwidth, from a slow link (10 MB/s) to beyond the widest HBM (10 TB/s); cited: 2.88 to 105.56 GB/s",
    ),
    range(
        "tiers.write_bandwidth_gb_s",
        0.01,
        10_000.0,
        "GB/s",
        "each point's bandwidth, from a slow link (10 MB/s) to beyond the widest HBM (10 TB/s); cited: 2.08 to 76.81 GB/s",
    ),
    range(
        "tiers.*_bandwidth_gb_s threads",
        1.0,
        65_536.0,
        "threads",
        "each point's thread count, increasing from point to point; cited: 1 to 24 threads",
    ),
    range(
        "tiers.media_granularity_bytes",
        64.0,
        4096.0,
        "bytes",
        "a power of two from a cache line to a page; cited: 64 (DRAM) and 256 (Optane)",
    ),
    range(
        "tiers.read_energy_nj",
        0.01,
        1000.0,
        "nJ",
        "per 64-byte access; a DDR4 access costs a few nJ; cited: 2.46 to 4.85 nJ",
    ),
    range(
        "tiers.write_energy_nj",
        0.01,
        1000.0,
        "nJ",
        "per 64-byte access; a DDR4 access costs a few nJ; cited: 3.36 to 13.29 nJ",
    ),
    range(
        "migration.call_us",
        0.1,
        10_000.0,
        "µs",
        "one move_pages call costs more than a bare system call and less than 10 ms; cited: 58.7 µs",
    ),
    range(
        "migration.page_us",
        0.01,
        1000.0,
        "µs",
        "remapping one page, TLB shootdown included, takes microseconds; cited: 2.6 µs",
    ),
    range(
        "migration.copy_gb_s",
        0.01,
        10_000.0,
        "GB/s",
        "the kernel's page copy, from a slow link (10 MB/s) to beyond the widest HBM; cited: 3.511 GB/s",
    ),
    range(
        "migration.huge_copy_speedup",
        1.0,
        100.0,
        "",
        "a speed-up over one copy thread (1: none); cited: 2.8 (Nimble)",
    ),
    range(
        "migration.huge_copy_threads_at_best",
        1.0,
        1024.0,
        "threads",
        "copy threads, at least one; cited: 4 (Nimble)",
    ),
    range(
        "migration.huge_concurrency_gain",
        1.0,
        10.0,
        "",
        "a gain over one batch at a time (1: none); cited: 1.10 to 1.25 (Nimble)",
    ),
    range(
        "migration.huge_exchange_gain",
        1.0,
        10.0,
        "",
        "a gain over two one-way moves (1: none); cited: 1.10 to 1.50 (Nimble)",
    ),
    range(
        "migration.tlb_shootdown_us",
        0.01,
        1000.0,
        "µs",
        "an inter-processor interrupt round trip takes microseconds; cited: 1 µs (mtier: under 1.44 µs, or 8.6 µs per core)",
    ),
    range(
        "tracking.page_scan_ns",
        0.1,
        100_000.0,
        "ns",
        "reading and clearing one page's bits costs at most one memory read; cited: 12.7 ns",
    ),
    range(
        "tracking.sample_ns",
        1.0,
        10_000_000.0,
        "ns",
        "handling one access sample takes from a nanosecond to 10 ms; cited: at most 4158 ns",
    ),
];

/// A number as messages and docs/model.md show it: plain where that is short, else 1e19, 1e-300.
pub fn show_number(v: f64) -> String {
    if v == 0.0 || (1e-4..1e9).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Checks `v` against the [`RANGES`] row of `field`; `shown` is how the message names the number
/// (`tier 0 (DRAM) loaded_max_ns`).
fn in_range(shown: &str, field: &str, v: f64) -> Result<(), String> {
    let r = RANGES.iter().find(|r| r.field == field).expect("every checked field has a row in RANGES");
    if (r.min..=r.max).contains(&v) {
        return Ok(());
    }
    let unit = if r.unit.is_empty() { String::new() } else { format!(" {}", r.unit) };
    Err(format!(
        "{shown} = {} is outside {} to {}{unit}: {}",
        show_number(v),
        show_number(r.min),
        show_number(r.max),
        r.why
    ))
}

/// A TOML error in one line (`line L, column C: message (in `the line`)`), by the one rule
/// every input file's errors follow.
fn toml_error_line(text: &str, e: &toml::de::Error) -> String {
    terrace_input::parse_error_line(text, e.message(), e.span())
}

impl Profile {
    /// A built-in profile by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some((name, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::parse(name, text);
        }
        if name_or_path.ends_with(".toml") || name_or_path.contains('/') {
            let text = terrace_input::read_text("profile", std::path::Path::new(name_or_path))?;
            return Profile::parse(name_or_path, &text);
        }
        Err(ProfileError::Unknown(name_or_path.to_string()))
    }

    /// Parses and validates a profile.
    pub fn parse(name: &str, text: &str) -> Result<Profile, ProfileError> {
        let p: Profile = toml::from_str(text).map_err(|e| ProfileError::Malformed {
            name: name.to_string(),
            message: toml_error_line(text, &e),
        })?;
        p.validate().map_err(|message| ProfileError::Invalid { name: name.to_string(), message })?;
        Ok(p)
    }

    /// Every number within its [`RANGES`] row, the curves and the loaded-latency points in order,
    /// and tier 0 the fast tier.
    fn validate(&self) -> Result<(), String> {
        if !(2..=MAX_TIERS).contains(&self.tiers.len()) {
            return Err(format!(
                "it has {} tiers; the simulator models 2 to {MAX_TIERS} (fastest first)",
                self.tiers.len()
            ));
        }
        in_range("cpu_ghz", "cpu_ghz", self.cpu_ghz)?;
        in_range("slow_to_fast_capacity", "slow_to_fast_capacity", self.slow_to_fast_capacity)?;
        for (i, t) in self.tiers.iter().enumerate() {
            let at = format!("tier {i} ({}) ", t.name.escape_debug());
            for (field, v) in [
                ("tiers.read_latency_random_ns", t.read_latency_random_ns),
                ("tiers.read_latency_sequential_ns", t.read_latency_sequential_ns),
                ("tiers.loaded_light_ns", t.loaded_light_ns),
                ("tiers.loaded_light_gb_s", t.loaded_light_gb_s),
                ("tiers.loaded_max_ns", t.loaded_max_ns),
                ("tiers.loaded_max_gb_s", t.loaded_max_gb_s),
                ("tiers.media_granularity_bytes", f64::from(t.media_granularity_bytes)),
            ] {
                in_range(&format!("{at}{}", &field["tiers.".len()..]), field, v)?;
            }
            let middle = i > 0 && i + 1 < self.tiers.len();
            match (t.capacity_to_fast, middle) {
                (Some(c), true) => in_range(&format!("{at}capacity_to_fast"), "tiers.capacity_to_fast", c)?,
                (None, true) => {
                    return Err(format!(
                        "{at}is between the fast and the last tier and needs capacity_to_fast (its size \
                         over the fast tier's, e.g. 2.0)"
                    ))
                }
                (Some(_), false) => {
                    return Err(format!(
                        "{at}has capacity_to_fast, which only a middle tier takes (the last tier's size is \
                         slow_to_fast_capacity, the fast tier's is --fast-capacity); remove it"
                    ))
                }
                (None, false) => {}
            }
            if !t.media_granularity_bytes.is_power_of_two() {
                return Err(format!(
                    "{at}media_granularity_bytes = {} is not a power of two (64, 128, 256, ...)",
                    t.media_granularity_bytes
                ));
            }
            if t.loaded_max_gb_s <= t.loaded_light_gb_s || t.loaded_max_ns < t.loaded_light_ns {
                return Err(format!(
                    "{at}the max-load point ({} ns at {} GB/s) must lie beyond the light-load point \
                     ({} ns at {} GB/s): more bandwidth, and no less latency",
                    show_number(t.loaded_max_ns),
                    show_number(t.loaded_max_gb_s),
                    show_number(t.loaded_light_ns),
                    show_number(t.loaded_light_gb_s)
                ));
            }
            for (field, curve) in [
                ("tiers.read_bandwidth_gb_s", &t.read_bandwidth_gb_s),
                ("tiers.write_bandwidth_gb_s", &t.write_bandwidth_gb_s),
            ] {
                let key = &field["tiers.".len()..];
                if curve.is_empty() {
                    return Err(format!("{at}{key} needs at least one [threads, GB/s] point"));
                }
                for (j, &(threads, gb_s)) in curve.iter().enumerate() {
                    let point = format!("{at}{key} point {}", j + 1);
                    in_range(&format!("{point} threads"), "tiers.*_bandwidth_gb_s threads", threads)?;
                    in_range(&format!("{point} bandwidth"), field, gb_s)?;
                }
                if let Some(w) = curve.windows(2).find(|w| w[1].0 <= w[0].0) {
                    return Err(format!(
                        "{at}{key} points must have increasing thread counts, but {} follows {}",
                        show_number(w[1].0),
                        show_number(w[0].0)
                    ));
                }
            }
        }
        let m = &self.migration;
        for (field, v) in [
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
            in_range(field, field, v)?;
        }
        if m.tlb_shootdown_us > m.page_us {
            return Err(format!(
                "migration.tlb_shootdown_us = {} exceeds migration.page_us = {}, which includes one shootdown",
                show_number(m.tlb_shootdown_us),
                show_number(m.page_us)
            ));
        }
        self.check_tier_order()?;
        self.check_energy()
    }

    /// Tiers are fastest first: policies promote to tier 0 and demote to the next. A profile
    /// written the other way round would run, with every policy's decisions backwards.
    fn check_tier_order(&self) -> Result<(), String> {
        let peak = |t: &TierProfile| t.read_bandwidth_gb_s.iter().map(|&(_, g)| g).fold(0.0, f64::max);
        for (i, pair) in self.tiers.windows(2).enumerate() {
            let (fast, slow) = (&pair[0], &pair[1]);
            let (fast_name, slow_name) = (fast.name.escape_debug(), slow.name.escape_debug());
            let (a, b) = (i, i + 1);
            let swap =
                format!("tiers go fastest first: swap the [[tiers]] tables of {fast_name} and {slow_name}");
            if fast.read_latency_random_ns > slow.read_latency_random_ns {
                return Err(format!(
                    "tier {a} ({fast_name}) is slower than tier {b} ({slow_name}): its random read latency is \
                     {} ns against {} ns; {swap}",
                    show_number(fast.read_latency_random_ns),
                    show_number(slow.read_latency_random_ns)
                ));
            }
            if peak(fast) < peak(slow) {
                return Err(format!(
                    "tier {a} ({fast_name}) is slower than tier {b} ({slow_name}): its peak read bandwidth is \
                     {} GB/s against {} GB/s; {swap}",
                    show_number(peak(fast)),
                    show_number(peak(slow))
                ));
            }
        }
        Ok(())
    }

    /// The energy figures (docs/model.md §7), checked last: they change only the reported
    /// energy, never how a run goes.
    fn check_energy(&self) -> Result<(), String> {
        in_range("static_power_w", "static_power_w", self.static_power_w)?;
        for (i, t) in self.tiers.iter().enumerate() {
            let at = format!("tier {i} ({})", t.name.escape_debug());
            in_range(&format!("{at} read_energy_nj"), "tiers.read_energy_nj", t.read_energy_nj)?;
            in_range(&format!("{at} write_energy_nj"), "tiers.write_energy_nj", t.write_energy_nj)?;
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
                    "read_energy_nj",
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
    fn a_measured_record_round_trips_and_shipped_profiles_have_none() {
        let mut p = Profile::load("cxl").unwrap();
        assert!(p.measured.is_none());
        p.measured = Some(MeasuredOn {
            host: "h".into(),
            cpu: "c".into(),
            kernel: "6.1".into(),
            date: "2026-01-02T03:04:05Z".into(),
            nodes: vec![0],
            base: "cxl".into(),
            command: "terrace profile measure".into(),
        });
        let text = toml::to_string(&p).unwrap();
        assert_eq!(Profile::parse("x", &text).unwrap(), p);
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
