//! The `Machine` trait: runs a program and carries plans out.

use crate::{Applied, Mechanism, Mechanisms, ObjectEvent, Observations, PageSize, Plan, Requirements, Tier};
use serde::{Deserialize, Serialize};

/// What a policy may know about the machine before it starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub name: String,
    /// Fastest first.
    pub tiers: Vec<Tier>,
    pub page_size: PageSize,
    /// Pages in the managed address space.
    pub pages: u64,
    /// Threads of the managed program.
    pub threads: u32,
    /// How much smaller than the real experiment this run is (1 on the live machine). Time
    /// constants and page budgets of a policy that come from a seed are divided by it.
    pub scale: f64,
    /// How this machine can carry plans out.
    pub mechanisms: Mechanisms,
    /// The programs sharing the machine when there are several (object tiering §5.5), each
    /// its range of the managed space; empty for the one program of most runs.
    #[serde(default)]
    pub programs: Vec<ProgramInfo>,
    /// The largest piece of memory a move may carry whole, whatever page the plan names: a
    /// transparent huge page on a live host whose kernel makes them (`move_pages` moves a folio
    /// whole), so a plan that moves less than one moves its neighbours too; 0 where every page
    /// moves alone (the simulated machine). Read it with [`MachineInfo::move_unit`].
    #[serde(default)]
    pub move_unit_bytes: u64,
}

/// One of several programs sharing a machine: its name, priority and memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramInfo {
    pub name: String,
    /// Higher runs first (object tiering §5.5).
    pub priority: i32,
    /// Its memory: the bytes from `first_byte` of the managed space.
    pub first_byte: u64,
    pub bytes: u64,
    pub threads: u32,
}

impl ProgramInfo {
    /// Its memory, as byte addresses of the managed space.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.first_byte..self.first_byte + self.bytes
    }
}

impl MachineInfo {
    /// The largest piece a move may carry whole: at least a page of the machine's page size.
    pub fn move_unit(&self) -> u64 {
        self.move_unit_bytes.max(self.page_size.bytes())
    }

    /// The program (its index in `programs`) whose address range holds `addr`, if any.
    pub fn program_at(&self, addr: u64) -> Option<usize> {
        self.programs.iter().position(|p| p.range().contains(&addr))
    }

    /// A machine known only by its number of tiers: unnamed DRAM tiers (`tier0`, `tier1`, ...)
    /// without capacity or firmware attributes, 4 KiB pages, one thread, scale 1, stock
    /// mechanisms. What a policy is asked about before any real machine exists (which tiers it
    /// manages, for `terrace list policies`), and the start of a test's machine.
    pub fn placeholder(tiers: usize) -> Self {
        MachineInfo {
            name: "placeholder".into(),
            tiers: (0..tiers)
                .map(|i| Tier {
                    id: crate::TierId(i as u8),
                    name: format!("tier{i}"),
                    kind: crate::TierKind::Dram,
                    capacity_pages: None,
                    read_latency_ns: None,
                    read_bandwidth_gb_s: None,
                    write_bandwidth_gb_s: None,
                })
                .collect(),
            page_size: PageSize::Base4K,
            pages: 0,
            threads: 1,
            scale: 1.0,
            mechanisms: Mechanisms::default(),
            programs: Vec::new(),
            move_unit_bytes: 0,
        }
    }
}

/// Whether the managed program is still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Running { now_ns: u64 },
    Finished { now_ns: u64 },
}

/// Why a machine cannot run a policy.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MachineError {
    #[error("this machine has no {tracker} tracker: {hint}")]
    MissingTracker { tracker: &'static str, hint: String },
    #[error("this machine cannot run in {mode} mode: {hint}")]
    UnsupportedMode { mode: String, hint: String },
    #[error("this machine cannot do {}, which the policy needs: {hint}", .mechanism.name())]
    MissingMechanism { mechanism: Mechanism, hint: String },
    #[error(
        "it manages at most {max} tiers (a fast and a slow one), and this machine has {tiers}: {names}; \
         run it on a {max}-tier profile, or use a policy for any number of tiers (`terrace list policies` marks the others)"
    )]
    TooManyTiers { max: usize, tiers: usize, names: String },
    #[error("{0}")]
    Other(String),
}

/// A machine: the simulated one or the live one.
pub trait Machine {
    fn info(&self) -> &MachineInfo;
    /// Sets the machine up for a policy: trackers, page size, mode, initial placement.
    /// Fails, saying what is missing and how to enable it, if the machine cannot provide it.
    fn prepare(&mut self, req: &Requirements) -> Result<(), MachineError>;
    /// Lets the program run until machine time `until_ns` or until it finishes. While the policy's
    /// own thread is still copying (a [`crate::Mover::PolicyThread`] plan not yet done), the
    /// program runs on past `until_ns` until it is: the policy cannot act before then. (The live
    /// machine gets this for free: its `apply` returns only when the copies are done.)
    fn advance(&mut self, until_ns: u64) -> Progress;
    /// What the trackers saw since the previous call; resets them.
    fn observe(&mut self) -> Observations<'_>;
    /// Hands a plan to the policy's movers; reports what they took on (and what is still in
    /// flight), what failed and why, and what it cost. A page changes tier when its copy completes.
    fn apply(&mut self, plan: &Plan) -> Applied;
    /// Appends the program's allocations and frees since the previous call, in program order,
    /// each once, if the policy asked for [`crate::TrackerKind::ObjectEvents`]; [`crate::drive`]
    /// hands them to [`crate::Policy::object_event`]. A machine without the tracker refuses it
    /// in `prepare` and keeps this default.
    fn take_object_events(&mut self, _out: &mut Vec<ObjectEvent>) {}
}
