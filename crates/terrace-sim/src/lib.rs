//! Terrace's simulated machine.
//!
//! It replays an access stream (a generator from `terrace-workloads` or a recorded trace)
//! against a model of two memory tiers whose every number comes from a machine profile citing
//! docs/hardware.md, and implements `terrace_model::Machine`, so every policy runs on
//! it unchanged. The modules follow the model's parts: [`profile`] (the numbers), [`timing`]
//! (latency, bandwidth and loaded latency per slice), [`migration`] (what moving pages costs),
//! [`movers`] (who copies, when each page lands, and who waits),
//! [`trackers`] (modelled page-table bits and access sampling), [`memory_mode`] (the fast tier
//! as a hardware cache), [`energy`], [`placement`] (capacity and first touch) and [`machine`]
//! (the replay loop). docs/model.md states every equation and the source of every number.
#![forbid(unsafe_code)]

mod access_buffer;
pub mod bench_grid;
pub mod corun;
pub mod energy;
pub mod machine;
pub mod memory_mode;
pub mod migration;
pub mod movers;
pub mod placement;
pub mod profile;
pub mod report;
pub mod timeline;
pub mod timing;
pub mod trackers;

pub use machine::SimMachine;
pub use profile::{Profile, ProfileError, DEFAULT_PROFILE};
pub use report::{ObjectTotals, RunReport, TierTotals};
pub use timeline::Timeline;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use terrace_model::{drive, DriveError, Policy};
use terrace_workloads::AccessSource;

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("the fast tier's capacity is zero; give --fast-capacity a positive size or percentage")]
    ZeroCapacity,
    /// The same rule the trace reader applies to a trace's header (footprint, threads, scale),
    /// so a generator asked for a size no machine can simulate is refused before it allocates.
    #[error("workload '{name}' cannot be simulated: {why}; use a smaller --size-scale")]
    InvalidWorkload { name: String, why: String },
    #[error(
        "the footprint ({}) does not fit in the fast tier ({}) plus the slower tiers ({}); raise --fast-capacity or --slow-capacity",
        human_bytes(*footprint), human_bytes(*fast), human_bytes(*slow)
    )]
    DoesNotFit { footprint: u64, fast: u64, slow: u64 },
    #[error("an access at address {addr:#x} lies outside the workload's footprint ({footprint} bytes); the trace is inconsistent with its header")]
    OutOfFootprint { addr: u64, footprint: u64 },
    #[error("an object event at address {addr:#x} of {bytes} bytes reaches outside the workload's footprint ({footprint} bytes); the trace is inconsistent with its header")]
    ObjectOutOfFootprint { addr: u64, bytes: u64, footprint: u64 },
    /// The footprint fits the tiers (checked at start), so what holds the room is pages in flight
    /// (a copy holds its old and its new frame) and shadow copies.
    #[error(
        "every tier was full at a page's first touch: copies in flight and shadow copies held the room \
         the rest of the footprint needed; give the tiers more room than the footprint (--slow-capacity)"
    )]
    MachineFull,
    #[error(transparent)]
    Unsupported(#[from] DriveError),
    #[error("the access stream broke off")]
    Trace(#[from] terrace_workloads::trace::TraceError),
}

/// Capacity of the fast tier, as the user gave it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Capacity {
    /// The workload's suggested capacity (the seed experiment's DRAM, scaled).
    Suggested,
    /// A share of the workload's footprint, in percent.
    Percent(f64),
    Bytes(u64),
}

impl Capacity {
    pub fn resolve(self, footprint: u64, suggested: u64) -> u64 {
        match self {
            Capacity::Suggested => suggested,
            Capacity::Percent(p) => (footprint as f64 * p / 100.0) as u64,
            Capacity::Bytes(b) => b,
        }
    }
}

/// How to set a simulated machine up.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub fast_capacity: Capacity,
    /// Slow-tier bytes; `None` = the profile's slow:fast ratio, at least the footprint.
    pub slow_capacity: Option<u64>,
    /// Counter the machine adds replayed accesses to, for progress bars.
    pub progress: Option<Arc<AtomicU64>>,
    /// Where pages are first touched, overriding the policy's initial placement: a program
    /// started bound to one node (`numactl --membind`/`--preferred`) places its pages there, not
    /// by the policy's rule (`terrace sim --start-tier`). Spills to the next tier with room.
    pub start_tier: Option<terrace_model::TierId>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            fast_capacity: Capacity::Suggested,
            slow_capacity: None,
            progress: None,
            start_tier: None,
        }
    }
}

/// Runs `policy` over `source` on the simulated machine described by `profile`.
pub fn simulate(
    source: Box<dyn AccessSource>,
    policy: &mut dyn Policy,
    profile: &Profile,
    opts: &SimOptions,
) -> Result<RunReport, SimError> {
    simulate_keeping(source, policy, profile, opts, Keep::default()).map(|(report, _)| report)
}

/// [`simulate`], recording placement over time too (what `terrace sim --plot` draws): the
/// record costs the run a pass over the page table per epoch ([`timeline`]).
pub fn simulate_with_timeline(
    source: Box<dyn AccessSource>,
    policy: &mut dyn Policy,
    profile: &Profile,
    opts: &SimOptions,
) -> Result<(RunReport, Timeline), SimError> {
    let keep = Keep { timeline: true, ..Keep::default() };
    let (report, kept) = simulate_keeping(source, policy, profile, opts, keep)?;
    Ok((report, kept.timeline.unwrap_or_default()))
}

/// Where every page was when the run ended: the tier of each of the policy's pages (of
/// `page_bytes` each; [`TierId::UNPLACED`] for a page never touched), in the workload's address
/// space (`terrace sim --final-placement`).
#[derive(Clone, Debug, Default)]
pub struct FinalPlacement {
    pub page_bytes: u64,
    pub tiers: Vec<terrace_model::TierId>,
}

/// What a run keeps besides its report.
#[derive(Clone, Copy, Debug, Default)]
pub struct Keep {
    /// Placement over time ([`Timeline`]).
    pub timeline: bool,
    /// Where every page was at the end ([`FinalPlacement`]).
    pub placement: bool,
}

/// What a run kept, as [`Keep`] asked.
#[derive(Debug, Default)]
pub struct Kept {
    pub timeline: Option<Timeline>,
    pub placement: Option<FinalPlacement>,
}

/// [`simulate`], keeping what `keep` asks for besides the report.
pub fn simulate_keeping(
    source: Box<dyn AccessSource>,
    policy: &mut dyn Policy,
    profile: &Profile,
    opts: &SimOptions,
    keep: Keep,
) -> Result<(RunReport, Kept), SimError> {
    let info = source.info();
    let fast = opts.fast_capacity.resolve(info.footprint_bytes, info.suggested_fast_bytes);
    let mut machine = SimMachine::new(profile.clone(), source, fast, opts.slow_capacity)?;
    machine.set_policy_name(policy.name());
    machine.set_progress(opts.progress.clone());
    machine.set_start_tier(opts.start_tier);
    if keep.timeline {
        machine.record_timeline();
    }
    drive(&mut machine, policy)?;
    if let Some(e) = machine.take_error() {
        return Err(e);
    }
    let report = machine.report();
    let placement = keep
        .placement
        .then(|| FinalPlacement { page_bytes: report.page_bytes, tiers: machine.placement().tiers.clone() });
    Ok((report, Kept { timeline: machine.take_timeline(), placement }))
}

pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
