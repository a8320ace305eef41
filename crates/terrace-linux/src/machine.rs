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
use crate::warn_limit::WarnLimit;
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
    /// Execs of the program followed (a wrapper that execs it counts one).
    pub execs_followed: u64,
    /// Trackers that could not follow the program into an exec (the fault sampler).
    pub trackers_lost: u64,
    /// Times the program had no present page in its managed memory for
    /// [`NOTHING_PRESENT_OBSERVATIONS`] observations and [`NOTHING_PRESENT_FOR`] (each such
    /// stretch counts once).
    pub nothing_present: u64,
    /// Ranges a tracker could not register (the fault sampler's userfaultfd refused them).
    pub ranges_not_registered: u64,
    /// Move batches where more than half the pages did not move.
    pub batches_mostly_failed: u64,
}

/// A warning says the program has no present page after this many observations in a row...
pub const NOTHING_PRESENT_OBSERVATIONS: u32 = 10;
/// ...spanning at least this long. Both, so neither hemem's 10 ms tick (10 observations are
/// 100 ms, less than most programs take to start and touch their memory) nor age's 1 s tick
/// (10 s) warns about a program that is only starting, and a program that never touches
/// anonymous memory is reported within seconds either way.
pub const NOTHING_PRESENT_FOR: Duration = Duration::from_secs(5);

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
    /// Observations in a row without a present page, since when, and whether that was said.
    nothing_present: (u32, Option<Instant>, bool),
    nothing_present_warning: WarnLimit,
    failed_batch_warning: WarnLimit,
}

impl LiveMachine {
    /// Attaches to `target` with the host's tiers (fastest first).
    pub fn attach(target: Target, tiers: Vec<LiveTier>, dry_run: bool) -> Result<Self, ProcessError> {
        Self::attach_or_return(target, tiers, dry_run).map_err(|(e, _)| e)
    }

    /// As [`LiveMachine::attach`], but a target it cannot attach to comes back with the error: a
    /// program Terrace started may have exited already (or run on unmanaged), and its exit status
    /// is still to be waited for and passed on.
    pub fn attach_or_return(
        target: Target,
        tiers: Vec<LiveTier>,
        dry_run: bool,
    ) -> Result<Self, (ProcessError, Target)> {
        let pid = match &target {
            Target::Child(c) => c.id() as i32,
            Target::Pid(p) => *p,
        };
        let mem = match ProcessMemory::attach(pid) {
            Ok(m) => m,
            Err(e) => return Err((e, target)),
        };
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
            nothing_present: (0, None, false),
            nothing_present_warning: WarnLimit::default(),
            failed_batch_warning: WarnLimit::default(),
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

    /// A full scan: where every page is, then each tracker's bits. Follows an exec first.
    fn scan(&mut self) -> Result<(), ProcessError> {
        if let Some(exe) = self.memory.follow_exec()? {
            self.exec_followed(&exe);
        }
        self.memory.read_placement()?;
        let (view, bits) = self.memory.view_and_bits();
        self.trackers.observe_bits(&view, bits)?;
        self.memory.finish();
        self.stats.pages_per_tier = self.memory.pages_per_tier();
        Ok(())
    }

    /// The program exec'd `exe` (same pid, new address space; pagemap is reopened already): the
    /// page index keeps growing (pages of the old mappings read as absent, so the policy's
    /// indexes stay valid), every tracker is told, and what cannot follow is counted.
    fn exec_followed(&mut self, exe: &str) {
        let pid = self.program.pid;
        tracing::info!("the program (pid {pid}) exec'd {exe}: following it");
        self.stats.execs_followed += 1;
        self.stats.trackers_lost += self.trackers.address_space_replaced(pid);
        if self.trackers.copy_guard().is_none()
            && self.info.mechanisms.offers(terrace_model::Mechanism::WriteProtectedCopies)
        {
            // The guard's descriptor belonged to the old address space: copies go unprotected.
            self.info.mechanisms = migrate::host_mechanisms(false);
        }
    }

    /// Counts observations without a present page; warns (and counts) once the program has had
    /// none for [`NOTHING_PRESENT_OBSERVATIONS`] observations and [`NOTHING_PRESENT_FOR`].
    fn check_nothing_present(&mut self) {
        if self.memory.present_pages() > 0 || self.program.gone {
            self.nothing_present = (0, None, false);
            return;
        }
        let (count, since, said) = &mut self.nothing_present;
        *count += 1;
        let since = *since.get_or_insert_with(Instant::now);
        if *said || *count < NOTHING_PRESENT_OBSERVATIONS || since.elapsed() < NOTHING_PRESENT_FOR {
            return;
        }
        *said = true;
        self.stats.nothing_present += 1;
        let (pid, n, secs) = (self.program.pid, *count, since.elapsed().as_secs_f64());
        self.nothing_present_warning.warn(|| {
            format!(
                "pid {pid} has had no present page in the memory Terrace manages (its heap and private \
                 anonymous mappings) for {n} observations ({secs:.1} s), so the policy has nothing to place: \
                 the program has not touched such memory yet, or keeps its data in files or shared memory \
                 (not managed), or runs another process (a wrapper that forks instead of exec'ing: run the \
                 program itself under Terrace); see /proc/{pid}/maps"
            )
        });
    }

    /// Warns (rate-limited) about move batches where more than half the pages did not move.
    fn check_batches(&mut self, out: &migrate::MoveOutcome) {
        let Some(worst) = out.bad_batches.iter().max_by_key(|b| b.failed) else { return };
        self.stats.batches_mostly_failed += out.bad_batches.len() as u64;
        let (pid, bad, all, worst) = (self.program.pid, out.bad_batches.len(), out.batches, *worst);
        let (why, n) = worst.dominant;
        self.failed_batch_warning.warn(|| {
            format!(
                "pid {pid}: {bad} of {all} move batches failed for more than half their pages (worst: {}/{} \
                 not moved, {n} of them {why:?}): {}",
                worst.failed,
                worst.pages,
                migrate::meaning(why)
            )
        });
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
            log_dry_run(self.memory.tiers(), wanted, &asked, reason);
            return done;
        }
        let guard = self.trackers.copy_guard().filter(|_| options.protected_copies);
        let out = migrate::execute_guarded(self.program.pid, &moves, options, reason, guard);
        self.check_batches(&out);
        let failed = failed_pages(&moves, &out.failed, self.memory.huge());
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

/// Per policy page, why it did not move. A 4 KiB policy page fails with its move. A 2 MiB
/// policy page is its present 4 KiB pages ([`PlacementScan::page_moves`] sends only those): it
/// moved if some of them moved and none failed for a reason other than `NotPresent` (a page the
/// program freed since the scan is not a failure of the range), and fails `NotPresent` only if
/// none of them was there any more.
fn failed_pages(
    moves: &[migrate::PageMove],
    failed: &[(u32, MoveFailure)],
    huge: bool,
) -> HashMap<u32, MoveFailure> {
    let mut by_page = HashMap::new();
    if !huge {
        for &(tag, why) in failed {
            by_page.entry(tag).or_insert(why);
        }
        return by_page;
    }
    let mut attempted: HashMap<u32, usize> = HashMap::new();
    for m in moves {
        *attempted.entry(m.tag).or_default() += 1;
    }
    let mut absent: HashMap<u32, usize> = HashMap::new();
    for &(tag, why) in failed {
        if why == MoveFailure::NotPresent {
            *absent.entry(tag).or_default() += 1;
        } else {
            by_page.insert(tag, why);
        }
    }
    for (tag, n) in absent {
        if !by_page.contains_key(&tag) && attempted.get(&tag).is_none_or(|&a| n >= a) {
            by_page.insert(tag, MoveFailure::NotPresent);
        }
    }
    by_page
}

/// What a dry run would have moved, per tier.
fn log_dry_run(tiers: usize, wanted: &[(u32, TierId)], asked: &[(u32, i32)], reason: &str) {
    // By the tier asked for, not the node it maps to: a single-node dry run's two tiers share one.
    let asked: HashSet<u32> = asked.iter().map(|&(page, _)| page).collect();
    let mut by_tier = vec![0u64; tiers];
    for &(_, to) in wanted.iter().filter(|(page, _)| asked.contains(page)) {
        if let Some(n) = by_tier.get_mut(to.index()) {
            *n += 1;
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
        self.check_nothing_present();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrate::PageMove;

    fn moves(tag: u32, n: usize) -> Vec<PageMove> {
        (0..n).map(|i| PageMove { addr: (tag as u64) << 21 | (i as u64) << 12, node: 0, tag }).collect()
    }

    #[test]
    fn a_partly_present_2m_page_that_moved_what_it_held_counts_as_moved() {
        let mut all = moves(0, 44);
        all.extend(moves(1, 3));
        all.extend(moves(2, 5));
        // Range 0: 40 moved, 4 freed since the scan; range 1: every page gone; range 2: one
        // page could not be placed for want of room.
        let mut failed: Vec<(u32, MoveFailure)> = (0..4).map(|_| (0, MoveFailure::NotPresent)).collect();
        failed.extend((0..3).map(|_| (1, MoveFailure::NotPresent)));
        failed.push((2, MoveFailure::NotPresent));
        failed.push((2, MoveFailure::NoSpace));
        let by_page = failed_pages(&all, &failed, true);
        assert_eq!(by_page.get(&0), None, "moved what was present");
        assert_eq!(by_page.get(&1), Some(&MoveFailure::NotPresent), "nothing of it was there");
        assert_eq!(by_page.get(&2), Some(&MoveFailure::NoSpace), "a real failure counts");
        // 4 KiB pages fail with their one move.
        let by_page = failed_pages(&moves(7, 1), &[(7, MoveFailure::NotPresent)], false);
        assert_eq!(by_page.get(&7), Some(&MoveFailure::NotPresent));
    }
}
