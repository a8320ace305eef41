//! What the simulated machine runs: deterministic access streams shaped like the seeds'
//! workloads (GUPS with a hot set, Gaussian pmbench, STREAM, NPB-like BT/FT/MG/CG, GAP BFS, a
//! FlexKVS-like key-value store; docs/workloads.md), and a compact binary trace format
//! to store and replay such streams, exactly or as per-epoch page counts.
//!
//! Generators are sized from the seeds' experiments divided by a stated scale (GB -> MB), so a
//! policy sees the seed's ratios (hot set to fast tier, updates per page) in a run that takes
//! seconds. Every stream is a pure function of its name, seed and size scale, and both
//! generators and trace readers implement [`AccessSource`], so the simulator cannot tell them
//! apart.

mod bfs;
mod gups;
mod kvstore;
mod npb;
mod phases;
mod pmbench;
mod registry;
mod rng;
mod stream;
pub mod trace;
mod turns;

pub use registry::{build, list, WorkloadSpec, DEFAULT_SUITE};
pub use terrace_model::{Access, AccessKind};

use serde::{Deserialize, Serialize};

/// Static description of a workload run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// Registry name, e.g. "gups".
    pub name: String,
    /// One line for `terrace list workloads`.
    pub description: String,
    /// All addresses are in `[0, footprint_bytes)`.
    pub footprint_bytes: u64,
    pub threads: u32,
    /// How much smaller than the seed's experiment this run is (1024.0 = GB -> MB).
    pub scale: f64,
    /// The fast-tier capacity of the seed's experiment, scaled the same way.
    pub suggested_fast_bytes: u64,
    /// Exact number of accesses the stream emits.
    pub accesses: u64,
}

/// A deterministic stream of accesses.
///
/// Batched so that the per-access cost is a loop iteration, not a virtual call.
pub trait AccessSource: Send {
    fn info(&self) -> &WorkloadInfo;
    /// Appends up to `max` accesses to `buf` (which the caller cleared); returns how many were
    /// appended; 0 = the stream has ended.
    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize;
    /// Why the stream ended early, if it did (a corrupt or truncated trace): `fill` cannot
    /// return an error, so a consumer asks here once the stream has ended.
    fn take_error(&mut self) -> Option<trace::TraceError> {
        None
    }
}

/// Why a workload could not be built. Each message says what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("unknown workload '{name}'; known: {known} (see `terrace list workloads`)")]
    Unknown { name: String, known: String },
    #[error(
        "size scale {size_scale} is not a positive finite number; use 1.0 for the default size \
         or e.g. 0.015625 (1/64) for a tiny run"
    )]
    InvalidScale { size_scale: f64 },
    #[error(
        "size scale {size_scale} makes workload '{name}' smaller than one page per thread; use a \
         larger size scale"
    )]
    TooSmall { name: String, size_scale: f64 },
    #[error(
        "size scale {size_scale} for workload '{name}' is above the maximum of 1024 (the seeds' \
         own sizes); use a smaller size scale"
    )]
    TooLarge { name: String, size_scale: f64 },
}
