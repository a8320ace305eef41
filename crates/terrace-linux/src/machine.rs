//! The live machine: `terrace_model::Machine` over a real process on a real NUMA host.
//!
//! It is a composition: the program it manages ([`Target`]), the placement scan of the program's
//! memory ([`PlacementScan`]: mappings, pagemap and nodes, with the 2 MiB view of
//! [`crate::huge_view`] for a policy on 2 MiB pages), the trackers the policy asked for (a
//! [`TrackerSet`] behind [`crate::trackers::LiveTracker`], chosen by
//! [`crate::trackers::select`]) and the migrator ([`migrate`]). Observing scans the program and
//! lets each tracker add its bits and samples; applying moves pages with the migrator and records
//! where they really landed. Time is wall-clock time since the machine was attached. The managed
//! program never depends on Terrace: if Terrace stops, the program runs on where its pages are.

use crate::config::{ReferencedSource, SamplingSource};
use crate::huge_view::{self, SUBPAGES};
use crate::kernel_tiering::TieringRun;
use crate::migrate;
use crate::placement_scan::PlacementScan;
use crate::process::{ProcessError, ProcessMemory};
use crate::topology::LiveTier;
use crate::trackers::select::{self, Choice, HostKernel};
use crate::trackers::TrackerSet;
use crate::userfaultfd::Userfaultfd;
use std::collections::{HashMap, HashSet};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};
use terrace_model::{
    Applied, CheckedPlan, Machine, MachineError, MachineInfo, MemoryMode, MoveFailure, MoveOptions,
    Observations, PageSize, Plan, Progress, RateBudget, Requirements, TierId,
};

/// Running totals, for logs and the metrics endpoint.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LiveStats {
    pub pages_per_tier: Vec<u64>,
    pub pages_moved: u64,
    pub moves_failed: u64,
    pub plans: u64,
    pub tracking_seconds: f64,
    /// The policy's own time: from the end of each observation to its plan's application (or
    /// the next wait, when it planned nothing).
    pub decision_seconds: f64,
    pub migration_seconds: f64,
    pub observations: u64,
    /// Writes the fault sampler caught, and writes that waited for a protected copy.
    pub write_faults: u64,
    pub writes_held_for_copy: u64,
}

/// The process the machine manages: one it started (and can wait for) or one it was given.
pub enum Target {
    Child(Child),
    Pid(i32),
}

/// The managed program, and whether it is still there.
struct Managed {
    target: Target,
    pid: i32,
    exit: Option<ExitStatus>,
    gone: bool,
}

impl Managed {
    /// Whether the program is still there; records its exit status if Terrace started it.
    fn alive(&mut self) -> bool {
        if self.gone {
            return false;
        }
        let alive = match &mut self.target {
            Target::Child(c) => match c.try_wait() {
                Ok(Some(status)) => {
                    self.exit = Some(status);
                    false
                }
                Ok(None) => true,
                Err(_) => false,
            },
            // Signal 0 checks existence; EPERM still means it exists.
            Target::Pid(p) => {
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), None).is_ok()
                    || nix::errno::Errno::last() == nix::errno::Errno::EPERM
            }
        };
        self.gone = !alive;
        alive
    }
}

pub struct LiveMachine {
    info: MachineInfo,
    program: Managed,
    memory: PlacementScan,
    trackers: TrackerSet,
    /// The config's tracker choices, and the program's userfaultfd until `prepare` hands it to
    /// the fault sampler.
    choice: Choice,
    fault_fd: Option<Userfaultfd>,
    dry_run: bool,
    /// The kernel's tiering, switched on for a kernel-tiering run.
    kernel_tiering: Option<TieringRun>,
    start: Instant,
    last_observe: Duration,
    /// When the last plan was applied (since `start`): a rate limit's budget is the time since.
    last_apply: Duration,
    /// When the last full scan (mappings, pagemap, nodes) ran.
    scanned_at: Option<Instant>,
    /// When the last observation ended, until the policy's decision is timed.
    deciding_since: Option<Instant>,
    stats: LiveStats,
}

impl LiveMachine {
    /// Attaches to `target` with the host's tiers (fastest first).
    pub fn attach(target: Target, tiers: Vec<LiveTier>, dry_run: bool) -> Result<Self, ProcessError> {
        let pid = match &target {
            Target::Child(c) => c.id() as i32,
            Target::Pid(p) => *p,
        };
        let mem = ProcessMemory::attach(pid)?;
        let threads = procfs::process::Process::new(pid)
            .and_then(|p| p.stat())
            .map(|s| s.num_threads.max(1) as u32)
            .unwrap_or(1);
        let info = MachineInfo {
            name: format!("live pid {pid}"),
            tiers: tiers.iter().map(|t| t.tier.clone()).collect(),
            page_size: PageSize::Base4K,
            pages: mem.pages() as u64,
            threads,
            scale: 1.0,
            // Write-protected copies come with the program's userfaultfd (set_fault_source).
            mechanisms: migrate::host_mechanisms(false),
        };
        let n = tiers.len();
        Ok(LiveMachine {
            info,
            program: Managed { target, pid, exit: None, gone: false },
            memory: PlacementScan::new(mem, tiers),
            trackers: TrackerSet::default(),
            choice: Choice::default(),
            fault_fd: None,
            dry_run,
            kernel_tiering: None,
            start: Instant::now(),
            last_observe: Duration::ZERO,
            last_apply: Duration::ZERO,
            scanned_at: None,
            deciding_since: None,
            stats: LiveStats { pages_per_tier: vec![0; n], ..Default::default() },
        })
    }

    /// Where the referenced bit comes from (config `[trackers] referenced`); set before driving.
    pub fn set_referenced_source(&mut self, source: ReferencedSource) {
        self.choice.referenced = source;
    }

    /// Which sampler serves access sampling (config `[trackers] sampling`); set before driving.
    pub fn set_sampling_source(&mut self, source: SamplingSource) {
        self.choice.sampling = source;
    }

    /// Gives the machine a userfaultfd of the program (created inside it at its start, see
    /// [`crate::remote_syscall`]), for the fault sampler; set before driving.
    pub fn set_fault_source(&mut self, uffd: Userfaultfd, sample_per_epoch: usize) {
        self.fault_fd = Some(uffd);
        self.choice.fault_sample = sample_per_epoch.max(1);
        self.info.mechanisms = migrate::host_mechanisms(true);
    }

    pub fn pid(&self) -> i32 {
        self.program.pid
    }
    /// The first address of the policy's page `page` (a 4 KiB page, or a 2 MiB range).
    pub fn page_address(&self, page: u32) -> Option<u64> {
        self.memory.page_address(page)
    }
    pub fn stats(&self) -> &LiveStats {
        &self.stats
    }
    /// The program's exit status, once it has exited (only for a program Terrace started).
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.program.exit
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// A full scan: where every page is, then each tracker's bits.
    fn scan(&mut self) -> Result<(), ProcessError> {
        self.memory.read_placement()?;
        let (view, bits) = self.memory.view_and_bits();
        self.trackers.observe_bits(&view, bits)?;
        self.memory.finish();
        self.stats.pages_per_tier = self.memory.pages_per_tier();
        Ok(())
    }

    /// Adds the policy's time since the last observation to its decision time.
    fn end_decision(&mut self) {
        if let Some(t) = self.deciding_since.take() {
            self.stats.decision_seconds += t.elapsed().as_secs_f64();
        }
    }

    /// The options this machine honours of `plan` (what it leaves out is in `applied`), and what
    /// is left of the plan after the rules both machines apply ([`Plan::check`]) with a rate
    /// limit's budget for the time since the last plan.
    fn check_plan(
        &mut self,
        plan: &Plan,
        now: Duration,
        applied: &mut Applied,
    ) -> (MoveOptions, CheckedPlan) {
        let (mut options, not_honoured) = self.info.mechanisms.honour(plan);
        if !not_honoured.is_empty() {
            let names: Vec<&str> = not_honoured.iter().map(|m| m.name()).collect();
            tracing::debug!(target: "terrace::plan", "carried out without {} (not offered here)", names.join(", "));
        }
        applied.not_honoured = not_honoured;
        let mut budget = RateBudget::new(&options, now.saturating_sub(self.last_apply).as_nanos() as f64);
        self.last_apply = now;
        let page_bytes = self.info.page_size.bytes();
        let view = self.memory.policy_view().0;
        let checked = plan.check(view, self.memory.tiers(), &mut budget, page_bytes, applied);
        // A batch counts policy pages: a 2 MiB page is 512 addresses in one call.
        if self.memory.huge() {
            options.batch_pages = options.batch_pages.saturating_mul(SUBPAGES as u32);
        }
        (options, checked)
    }

    /// Moves policy pages to tiers (each a 4 KiB page, or 512 of them for a 2 MiB page) in one
    /// migrator run; records failures in `applied`, updates the placement and the tiers'
    /// occupancy, and returns the policy pages that moved. In a dry run it only logs.
    fn move_policy_pages(
        &mut self,
        wanted: &[(u32, TierId)],
        options: &MoveOptions,
        reason: &str,
        applied: &mut Applied,
    ) -> HashSet<u32> {
        let mut done = HashSet::new();
        if wanted.is_empty() {
            return done;
        }
        let (asked, moves) = self.memory.page_moves(wanted, applied);
        if self.dry_run {
            log_dry_run(&self.memory, &asked, reason);
            return done;
        }
        let guard = self.trackers.copy_guard().filter(|_| options.protected_copies);
        let out = migrate::execute_guarded(self.program.pid, &moves, options, reason, guard);
        let failed = failed_pages(&out.failed, self.memory.huge());
        for why in failed.values() {
            applied.fail(*why);
        }
        for &(page, node) in asked.iter().filter(|(page, _)| !failed.contains_key(page)) {
            done.insert(page);
            self.memory.record_move(page, self.memory.tier_of_node(node));
        }
        let landed: Vec<u64> =
            moves.iter().filter(|m| !failed.contains_key(&m.tag)).map(|m| m.addr).collect();
        self.trackers.after_moves(&self.memory.view(), &landed, self.memory.bits(), &mut self.stats);
        self.stats.pages_moved += out.moved;
        self.stats.moves_failed += failed.len() as u64;
        done
    }
}

/// Per policy page, why it did not move: a policy page moved if none of its present 4 KiB pages
/// failed (a 2 MiB range's absent pages do not count).
fn failed_pages(failed: &[(u32, MoveFailure)], huge: bool) -> HashMap<u32, MoveFailure> {
    let mut by_page = HashMap::new();
    for &(tag, why) in failed {
        if why != MoveFailure::NotPresent || !huge {
            by_page.entry(tag).or_insert(why);
        }
    }
    by_page
}

/// What a dry run would have moved, per tier.
fn log_dry_run(memory: &PlacementScan, asked: &[(u32, i32)], reason: &str) {
    let mut by_tier = vec![0u64; memory.tiers()];
    for &(_, node) in asked {
        let t = memory.tier_of_node(node);
        if t.is_placed() {
            by_tier[t.index()] += 1;
        }
    }
    let what: Vec<String> = by_tier.iter().enumerate().map(|(t, n)| format!("{n} to tier{t}")).collect();
    tracing::info!(target: "terrace::plan", "dry run: would move {} ({reason})", what.join(", "));
}

/// An exchange's two moves: the page going down and its tier, the page going up and its tier.
type Pair = (u32, TierId, u32, TierId);

/// A checked plan in two phases: the moves and every exchange's demotion first, then the
/// promotions whose demotion happened, so the fast tier never holds more than it did, however
/// many batches are in flight (an exchange is a demotion batch and its promotion batch:
/// move_pages has no swap). Returns the first phase and the exchanges.
fn phases(checked: &CheckedPlan) -> (Vec<(u32, TierId)>, Vec<Pair>) {
    let mut first: Vec<(u32, TierId)> = checked.moves.iter().map(|m| (m.page, m.to)).collect();
    let pairs: Vec<Pair> =
        checked.exchanges.iter().map(|e| (e.down.page, e.down.to, e.up.page, e.up.to)).collect();
    first.extend(pairs.iter().map(|&(down, to, _, _)| (down, to)));
    (first, pairs)
}

/// The second phase: the promotions whose demotion happened (in `moved_first`). Promoting the
/// others would overfill the fast tier: they fail `NoSpace`.
fn promotions(pairs: &[Pair], moved_first: &HashSet<u32>, applied: &mut Applied) -> Vec<(u32, TierId)> {
    let mut second = Vec::new();
    for &(down, _, up, to) in pairs {
        if moved_first.contains(&down) {
            second.push((up, to));
        } else {
            applied.fail(MoveFailure::NoSpace);
        }
    }
    second
}

impl Machine for LiveMachine {
    fn info(&self) -> &MachineInfo {
        &self.info
    }

    fn prepare(&mut self, req: &Requirements) -> Result<(), MachineError> {
        check_requirements(req, Attach::Start, self.choice.sampling)?;
        if req.memory_mode == MemoryMode::KernelTiering {
            self.kernel_tiering = Some(TieringRun::start().map_err(MachineError::Other)?);
        }
        if req.page_size == PageSize::Huge2M {
            self.memory.use_huge_pages();
            self.info.page_size = PageSize::Huge2M;
            for t in &mut self.info.tiers {
                t.capacity_pages = huge_view::capacity(t.capacity_pages);
            }
        }
        let program = select::Program {
            memory: self.memory.memory(),
            fault_fd: self.fault_fd.take(),
            huge: self.memory.huge(),
        };
        self.trackers = select::build(&HostKernel, req, &self.choice, program)?;
        self.scan().map_err(|e| MachineError::Other(e.to_string()))?;
        self.info.pages = self.memory.policy_pages() as u64;
        Ok(())
    }

    fn advance(&mut self, mut until_ns: u64) -> Progress {
        self.end_decision();
        if self.kernel_tiering.is_some() {
            // The kernel does the work; Terrace only reports its counters, once a second at most,
            // instead of scanning the program at the policy's 10 ms tick.
            until_ns = until_ns.max(self.last_observe.as_nanos() as u64 + 1_000_000_000);
        }
        loop {
            if !self.program.alive() {
                return Progress::Finished { now_ns: self.now_ns() };
            }
            let now = self.now_ns();
            if now >= until_ns {
                return Progress::Running { now_ns: now };
            }
            std::thread::sleep(Duration::from_nanos((until_ns - now).min(20_000_000)));
        }
    }

    fn observe(&mut self) -> Observations<'_> {
        let t0 = Instant::now();
        // Page-table bits are per tick, so a policy on them gets a scan at every tick. Otherwise
        // placement changes only by Terrace's own moves (recorded as they land) and new memory, so
        // a fast-ticking policy (hemem's 10 ms) gets a full scan every 100 ms, not every tick.
        let due = self.trackers.page_bits() || self.scanned_at.is_none_or(|t| t.elapsed() >= FULL_SCAN_EVERY);
        if due {
            self.scanned_at = Some(Instant::now());
            match self.scan() {
                Ok(()) => {}
                Err(ProcessError::Gone(_)) => self.program.gone = true,
                Err(e) => tracing::warn!("scan of process {} failed: {e}", self.program.pid),
            }
        }
        self.info.pages = self.memory.policy_pages() as u64;
        if let Some(k) = self.kernel_tiering.as_mut() {
            k.report();
        }
        self.trackers.observe_samples(&self.memory.view(), &mut self.stats);
        self.stats.tracking_seconds += t0.elapsed().as_secs_f64();
        self.deciding_since = Some(Instant::now());
        self.stats.observations += 1;
        let previous = self.last_observe.as_nanos() as u64;
        self.last_observe = self.start.elapsed();
        let (placement, tiers, bits) = self.memory.policy_view();
        Observations {
            now_ns: self.last_observe.as_nanos() as u64,
            previous_ns: previous,
            placement,
            tiers,
            page_bits: self.trackers.page_bits().then_some(bits),
            samples: self.trackers.samples(),
            future: None,
            hint_faults: &[],
        }
    }

    fn apply(&mut self, plan: &Plan) -> Applied {
        self.end_decision();
        if self.kernel_tiering.is_some() {
            // The kernel's own tiering carries the policy out; its modelled plans are not applied.
            return Applied::default();
        }
        let mut applied = Applied::default();
        let now = self.start.elapsed();
        let (options, checked) = self.check_plan(plan, now, &mut applied);
        let (mut first, pairs) = phases(&checked);
        if self.dry_run {
            first.extend(pairs.iter().map(|&(_, _, up, to)| (up, to)));
            self.move_policy_pages(&first, &options, &plan.reason, &mut applied);
            return applied;
        }
        let moved_first = self.move_policy_pages(&first, &options, &plan.reason, &mut applied);
        let second = promotions(&pairs, &moved_first, &mut applied);
        let moved_second = self.move_policy_pages(&second, &options, &plan.reason, &mut applied);
        applied.pages_moved = (moved_first.len() + moved_second.len()) as u64;
        // An exchange counts when both halves happened.
        applied.pairs_exchanged = pairs
            .iter()
            .filter(|&&(down, _, up, _)| moved_first.contains(&down) && moved_second.contains(&up))
            .count() as u64;
        applied.bytes_copied = applied.pages_moved * self.info.page_size.bytes();
        applied.time_ns = (self.start.elapsed() - now).as_nanos() as u64;
        self.stats.plans += 1;
        self.stats.migration_seconds += applied.time_ns as f64 * 1e-9;
        applied
    }
}

/// The longest a policy that ticks faster waits for a full scan of the program's memory.
const FULL_SCAN_EVERY: Duration = Duration::from_millis(100);

/// Whether a policy needs a userfaultfd of its program: to write-protect its copies, or to sample
/// accesses with the fault sampler (where the CPU has no perf sampler, or `sampling` chooses it).
pub fn needs_userfaultfd(req: &Requirements, sampling: SamplingSource) -> bool {
    select::needs_userfaultfd(&HostKernel, req, sampling)
}

/// How the machine gets hold of the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    /// Terrace starts it (`terrace run`) and can prepare it before its first instruction.
    Start,
    /// It runs already (`terrace bind`).
    Running,
}

/// What `policy` asks of this host's live machine, asked before a program is attached (its size is
/// not known yet), once the host is known to be able to give it, with the config's `sampling`.
pub fn live_requirements(
    policy: &dyn terrace_model::Policy,
    tiers: &[LiveTier],
    attach: Attach,
    sampling: SamplingSource,
) -> Result<Requirements, MachineError> {
    let provisional = MachineInfo {
        name: "live".into(),
        tiers: tiers.iter().map(|t| t.tier.clone()).collect(),
        page_size: PageSize::Base4K,
        pages: 0,
        threads: 1,
        scale: 1.0,
        mechanisms: migrate::host_mechanisms(attach == Attach::Start),
    };
    let req = policy.requirements(&provisional);
    // As `drive` does, but before the program starts: a two-tier policy on a host of more tiers.
    if let Some(max) = req.max_tiers.filter(|&m| tiers.len() > m) {
        let names = tiers.iter().map(|t| t.tier.name.as_str()).collect::<Vec<_>>().join(", ");
        return Err(MachineError::TooManyTiers { max, tiers: tiers.len(), names });
    }
    check_requirements(&req, attach, sampling)?;
    Ok(req)
}

/// Whether this host can give a policy what it asks for, with the config's `sampling`; says what
/// is missing and how to get it. `terrace run` and the daemon ask before they start or bind the
/// program.
pub fn check_requirements(
    req: &Requirements,
    attach: Attach,
    sampling: SamplingSource,
) -> Result<(), MachineError> {
    match req.memory_mode {
        MemoryMode::Flat | MemoryMode::KernelTiering => {}
        MemoryMode::FastTierAsCache => {
            return Err(MachineError::UnsupportedMode {
                mode: "memory-mode".into(),
                hint: "Optane Memory Mode is a firmware (BIOS) setting, not something software can switch; \
                       simulate it with `terrace sim`"
                    .into(),
            })
        }
        MemoryMode::UnboundedFast => {
            return Err(MachineError::UnsupportedMode {
                mode: "unbounded fast tier".into(),
                hint: "no real machine has unbounded DRAM; all-fast is a simulator bound".into(),
            })
        }
    }
    select::check(&HostKernel, req, attach, sampling)?;
    // What the policy cannot work without, of what this kernel's mover can do (write-protected
    // copies were checked above, with the reason that fits).
    let mechanisms = migrate::host_mechanisms(attach == Attach::Start);
    if let Some(mechanism) = mechanisms.first_missing(&req.required_mechanisms()) {
        return Err(MachineError::MissingMechanism { mechanism, hint: mechanisms.why_not(mechanism) });
    }
    Ok(())
}
