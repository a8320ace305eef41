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
#![forbid(unsafe_code)]

mod bfs;
pub mod corun;
mod gups;
mod kvstore;
mod npb;
mod objects;
mod phases;
mod pmbench;
mod registry;
mod rng;
mod stream;
pub mod trace;
mod turns;

pub use registry::{
    build, list, ObjectsApp, WorkloadSpec, DEFAULT_SUITE, OBJECTS_PAIR_TABLE3_PROGRAMS,
    OBJECTS_TABLE3_SMALL_PROGRAMS,
};
pub use terrace_model::{Access, AccessKind, ObjectEvent, ObjectEventKind};

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
    /// How a recorded trace's counts were measured (`terrace record`, `trace import-damo`);
    /// `None` for a generated workload. Optional so traces written before it read unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordingInfo>,
}

/// Where a recorded trace's counts come from: the tracker, how often it looked, at what
/// resolution, and the rule that turned what it saw into access counts (docs/formats.md,
/// "Recorded traces"). The counts are estimates; this says how good.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordingInfo {
    /// The tracker, e.g. "damon".
    pub tracker: String,
    /// Its interval: one observation per this many microseconds.
    pub interval_us: u64,
    /// What one observation covers, e.g. "DAMON region (adaptive, 10 to 1000 regions)".
    pub resolution: String,
    /// How an observation became read and write counts.
    pub estimate: String,
    /// The command recorded, as `terrace advise` repeats it in the line that runs the advice;
    /// `None` for a process recorded by PID, or an import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Where the trace's pages were in the program: runs of (first virtual address, pages), in
    /// the order of the trace's dense pages (page i of the trace is the i-th page of the runs).
    /// Empty when not kept (a trace written before they were, or more runs than
    /// [`Self::MAX_ADDRESS_RUNS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<(u64, u64)>,
    /// The clock, GHz, at which the recorded time is counted in instructions (the recording
    /// host's, from /proc/cpuinfo); 0 when not known.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub clock_ghz: f64,
    /// Instructions between two replayed accesses: an epoch's accesses span one interval of the
    /// recording's wall time at `clock_ghz` (docs/formats.md, "Recorded traces": what the
    /// program did besides the memory accesses a tracker sees, so that the replay lasts as long
    /// as the recording and policies tick as often). 0: none.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub instructions_per_access: u32,
    /// The estimated accesses of each interval that saw any, in order (they sum to the trace's
    /// accesses). With them the replay gives each interval its own wall time, spread over its
    /// own accesses, rather than `instructions_per_access` to every access: an interval whose
    /// estimate is many times the mean (a program's initialisation, a DAMON region seen touched
    /// as a whole) would otherwise last that many intervals and shift every later one in time.
    /// Empty when not kept (a trace written before they were, an import, or more intervals than
    /// [`Self::MAX_INTERVALS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interval_accesses: Vec<u64>,
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_u32(x: &u32) -> bool {
    *x == 0
}

impl RecordingInfo {
    /// At most this many address runs go in the header (about 40 bytes of JSON each, well within
    /// the header's 1 MiB); a program mapped in more pieces is recorded without them.
    pub const MAX_ADDRESS_RUNS: usize = 16_384;
    /// At most this many intervals' counts go in the header (at most 12 bytes of JSON each,
    /// which with the address runs stays within the header's 1 MiB): 27 minutes at the default
    /// 100 ms interval. A longer recording keeps `instructions_per_access` alone.
    pub const MAX_INTERVALS: usize = 16_384;

    /// Text fields are printed by `terrace trace info`: the same limits as a description.
    fn validate(&self, footprint_pages: u64, accesses: u64) -> Result<(), String> {
        text_field("recording.tracker", &self.tracker, WorkloadInfo::MAX_NAME_BYTES)?;
        text_field("recording.resolution", &self.resolution, WorkloadInfo::MAX_DESCRIPTION_BYTES)?;
        text_field("recording.estimate", &self.estimate, WorkloadInfo::MAX_DESCRIPTION_BYTES)?;
        if let Some(c) = &self.command {
            text_field("recording.command", c, WorkloadInfo::MAX_DESCRIPTION_BYTES)?;
        }
        if !(self.clock_ghz == 0.0 || (0.1..=10.0).contains(&self.clock_ghz)) {
            return Err(format!("recording.clock_ghz is {}; give 0 (unknown) or 0.1 to 10", self.clock_ghz));
        }
        if self.addresses.len() > Self::MAX_ADDRESS_RUNS {
            return Err(format!(
                "recording.addresses holds {} runs; at most {} are kept",
                self.addresses.len(),
                Self::MAX_ADDRESS_RUNS
            ));
        }
        if self.interval_accesses.len() > Self::MAX_INTERVALS {
            return Err(format!(
                "recording.interval_accesses holds {} intervals; at most {} are kept",
                self.interval_accesses.len(),
                Self::MAX_INTERVALS
            ));
        }
        if !self.interval_accesses.is_empty() {
            let sum =
                self.interval_accesses.iter().try_fold(0u64, |s, &a| (a > 0).then(|| s.checked_add(a))?);
            if sum != Some(accesses) {
                return Err(format!(
                    "recording.interval_accesses must be counts above 0 that add up to the trace's {accesses} \
                     accesses; they do not"
                ));
            }
        }
        let pages = self.addresses.iter().try_fold(0u64, |sum, &(first, pages)| {
            (first % 4096 == 0 && pages > 0).then_some(())?;
            first.checked_add(pages.checked_mul(4096)?)?;
            sum.checked_add(pages)
        });
        match pages {
            None => {
                Err("recording.addresses holds a run that is empty, unaligned or past the end of memory"
                    .into())
            }
            Some(p) if !self.addresses.is_empty() && p != footprint_pages => Err(format!(
                "recording.addresses holds {p} pages, the footprint {footprint_pages}; they must be equal"
            )),
            Some(_) => Ok(()),
        }
    }

    /// Instructions between two accesses of each interval in `interval_accesses`: its wall time
    /// at `clock_ghz` over its accesses (rounded; at most `u32::MAX`).
    pub fn interval_instructions(&self) -> Vec<u32> {
        let interval = self.interval_us as f64 * 1e3 * self.clock_ghz;
        self.interval_accesses
            .iter()
            .map(|&a| (interval / a as f64).round().clamp(0.0, f64::from(u32::MAX)) as u32)
            .collect()
    }

    /// The program's address of the trace's 4 KiB page `page`, when the addresses were kept.
    pub fn address_of(&self, page: u64) -> Option<u64> {
        let mut rest = page;
        for &(first, pages) in &self.addresses {
            if rest < pages {
                return Some(first + rest * 4096);
            }
            rest -= pages;
        }
        None
    }
}

impl WorkloadInfo {
    /// The largest footprint (and suggested fast tier) a workload may declare: 16 Mi pages of
    /// 4 KiB. The simulated machine keeps about 20 bytes per page (tier, tracker bits, counts,
    /// the policy's heat) and Memory Mode 8 bytes per 64 B line of the fast tier, so the worst
    /// case is under 9 GiB, which a 24 GiB machine holds; 1 TiB would need 128 GiB
    /// (docs/formats.md).
    pub const MAX_FOOTPRINT_BYTES: u64 = 64 << 30;
    /// Threads are named by one byte in every access (`Access::thread`).
    pub const MAX_THREADS: u32 = 256;
    /// `scale` 1 is the seed experiment's own size (the largest `build` makes); 2^24 is above
    /// the smallest size any built-in workload builds (about 6.5 million, kvstore at one page
    /// per thread), and there even a 10 ms policy period scales below the simulator's 1 ns tick.
    pub const MIN_SCALE: f64 = 1.0;
    pub const MAX_SCALE: f64 = (1u64 << 24) as f64;
    /// Names and descriptions are printed on one line of a terminal.
    pub const MAX_NAME_BYTES: usize = 64;
    pub const MAX_DESCRIPTION_BYTES: usize = 1024;

    /// Checks every field against sense, so that a trace header (or a generator) cannot make the
    /// simulator allocate without bound, divide by zero or write escape sequences to a
    /// terminal. The message names the field and says what it must be.
    pub fn validate(&self) -> Result<(), String> {
        text_field("name", &self.name, Self::MAX_NAME_BYTES)?;
        if self.name.is_empty() {
            return Err("name is empty; a workload needs a name".to_string());
        }
        text_field("description", &self.description, Self::MAX_DESCRIPTION_BYTES)?;
        if self.footprint_bytes == 0 {
            return Err("footprint_bytes is 0; a workload touches at least one byte".to_string());
        }
        if self.footprint_bytes > Self::MAX_FOOTPRINT_BYTES {
            return Err(format!(
                "footprint_bytes {} is above the limit of {} (64 GiB), the most a simulated machine \
                 keeps state for",
                self.footprint_bytes,
                Self::MAX_FOOTPRINT_BYTES
            ));
        }
        if !(1..=Self::MAX_THREADS).contains(&self.threads) {
            return Err(format!(
                "threads {} is not between 1 and {} (accesses name their thread in one byte)",
                self.threads,
                Self::MAX_THREADS
            ));
        }
        if !(Self::MIN_SCALE..=Self::MAX_SCALE).contains(&self.scale) {
            return Err(format!(
                "scale {:?} is not a number between 1 (the seed experiment's size) and 2^24",
                self.scale
            ));
        }
        // Not bounded by the footprint: a seed's DRAM may hold all of a small workload (1.5x
        // the footprint for npb-cg-small). Memory Mode keeps 8 bytes per 64 B line of it.
        if self.suggested_fast_bytes > Self::MAX_FOOTPRINT_BYTES {
            return Err(format!(
                "suggested_fast_bytes {} is above the limit of {} (64 GiB), the most a simulated \
                 machine keeps state for",
                self.suggested_fast_bytes,
                Self::MAX_FOOTPRINT_BYTES
            ));
        }
        if let Some(r) = &self.recording {
            r.validate(self.footprint_bytes.div_ceil(4096), self.accesses)?;
        }
        Ok(())
    }
}

/// A name or description: at most `max` bytes, no control characters (escape sequences,
/// newlines), so that printing it cannot take over or garble a terminal.
fn text_field(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!("{field} is {} bytes long, more than the {max} allowed", text.len()));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(format!("{field} contains the control character {:?}", c));
    }
    Ok(())
}

/// An object event and its place in an access stream: it comes after the stream's first `at`
/// accesses and before the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectEventAt {
    pub at: u64,
    pub event: ObjectEvent,
}

/// A deterministic stream of accesses, with the allocations and frees of the program's objects
/// between them (object tiering §3.2) when it has any.
///
/// Batched so that the per-access cost is a loop iteration, not a virtual call. Object events,
/// rare next to accesses, travel beside the batches ([`Self::take_object_events`]) instead of
/// in them, so that [`Access`] stays 16 bytes and streams without objects cost nothing more.
pub trait AccessSource: Send {
    fn info(&self) -> &WorkloadInfo;
    /// Appends up to `max` accesses to `buf` (which the caller cleared); returns how many were
    /// appended; 0 = the stream has ended.
    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize;
    /// Appends the object events not yet taken, in stream order, each once. Once `fill` has
    /// handed out `n` accesses in all, every event with `at < n` is available (those at `n` may
    /// come with a later call); once `fill` has returned 0, every event is.
    fn take_object_events(&mut self, _out: &mut Vec<ObjectEventAt>) {}
    /// Why the stream ended early, if it did (a corrupt or truncated trace): `fill` cannot
    /// return an error, so a consumer asks here once the stream has ended.
    fn take_error(&mut self) -> Option<trace::TraceError> {
        None
    }
    /// The programs sharing the machine, when the stream is several ([`corun::CoRun`]); empty
    /// for one program.
    fn programs(&self) -> &[terrace_model::ProgramInfo] {
        &[]
    }
    /// Each program's clock, ns, as the machine has run it so far, and how many of its accesses
    /// that is: a stream of several programs hands its next turn to the one furthest behind.
    /// Called before each `fill`.
    fn set_program_clocks(&mut self, _clocks_ns: &[f64], _consumed: &[u64]) {}
    /// Reads ahead of what `fill` has handed out without fixing the order it will hand it out in
    /// (several programs: each one's accesses queued apart, its turns still given by the clocks
    /// the machine reports when it asks for them): makes sure at least `n` accesses lie ahead,
    /// and appends to `out` each access the first time it lies ahead, whether read ahead here or
    /// made by `fill` on the spot, so that a count of `out` less what `fill` has handed out is
    /// what lies ahead. Returns false if the source cannot (then the machine reads ahead with
    /// `fill`, in the order `fill` gives).
    fn read_ahead(&mut self, _n: usize, _out: &mut Vec<Access>) -> bool {
        false
    }
}

/// A stream already in memory: hand-made streams in tests, and the simulator's benchmark with no
/// generator or decoder behind it. Clones share the accesses.
#[derive(Clone)]
pub struct MemorySource {
    info: WorkloadInfo,
    accesses: std::sync::Arc<Vec<Access>>,
    pos: usize,
    /// Object events by position (sorted), and how many were taken.
    events: std::sync::Arc<Vec<ObjectEventAt>>,
    taken: usize,
}

impl MemorySource {
    pub fn new(info: WorkloadInfo, accesses: impl Into<std::sync::Arc<Vec<Access>>>) -> Self {
        Self::with_events(info, accesses, Vec::new())
    }

    /// A stream with object events between its accesses (sorted here by position, stably).
    pub fn with_events(
        info: WorkloadInfo,
        accesses: impl Into<std::sync::Arc<Vec<Access>>>,
        mut events: Vec<ObjectEventAt>,
    ) -> Self {
        events.sort_by_key(|e| e.at);
        MemorySource { info, accesses: accesses.into(), pos: 0, events: events.into(), taken: 0 }
    }
}

impl AccessSource for MemorySource {
    fn info(&self) -> &WorkloadInfo {
        &self.info
    }
    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = max.min(self.accesses.len() - self.pos);
        buf.extend_from_slice(&self.accesses[self.pos..self.pos + n]);
        self.pos += n;
        n
    }
    fn take_object_events(&mut self, out: &mut Vec<ObjectEventAt>) {
        let end = if self.pos == self.accesses.len() {
            self.events.len()
        } else {
            self.taken + self.events[self.taken..].partition_point(|e| e.at <= self.pos as u64)
        };
        out.extend_from_slice(&self.events[self.taken..end]);
        self.taken = end;
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
    #[error(
        "size scale {size_scale} makes workload '{name}' {footprint_gib:.0} GiB, more than the 64 GiB \
         a simulated machine keeps state for; use a size scale of at most {max_size_scale:.1}"
    )]
    FootprintTooLarge { name: String, size_scale: f64, footprint_gib: f64, max_size_scale: f64 },
    #[error("workload '{name}': {reason}")]
    BadParameter { name: String, reason: String },
}
