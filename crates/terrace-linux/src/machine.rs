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
use crate::huge_view;
use crate::kernel_tiering::TieringRun;
use crate::migrate;
use crate::migrate::PageMove;
use crate::object_runtime::{object_ranges, ObjectRuntime};
use crate::page_space::{MemberId, PageSpace};
use crate::placement_scan::PlacementScan;
use crate::process::{ProcessError, ProcessMemory};
use crate::process_group::Selection;
use crate::shadow_link::{MoveRequest, PageResult, ShadowLink, ShadowListener};
use crate::topology::LiveTier;
use crate::trackers::select::{self, Choice, HostKernel};
use crate::trackers::TrackerSet;
use crate::userfaultfd::Userfaultfd;
use crate::warn_limit::WarnLimit;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};
use terrace_model::{
    Applied, CheckedPlan, Machine, MachineError, MachineInfo, MemoryMode, MoveFailure, MoveOptions,
    Observations, PageSize, Plan, Progress, RateBudget, Requirements, Sample, TierId, TierStatus,
    TrackerKind, BASE_PAGES_PER_HUGE,
};

/// Running totals, for logs and the metrics endpoint.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LiveStats {
    pub pages_per_tier: Vec<u64>,
    pub pages_moved: u64,
    /// Exchanges whose both halves happened.
    pub pairs_exchanged: u64,
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
    /// Processes managed at the last scan (the program and its descendants, or a cgroup's).
    pub processes: u64,
    /// Processes that joined after the first (children the program started, a cgroup's
    /// newcomers).
    pub processes_joined: u64,
    /// Pages moved by switching back to their shadow (no copy), and shadows the program's
    /// writes dropped, in the shadow region Terrace's agent maps ([`crate::shadow_region`]).
    pub pages_switched: u64,
    pub shadows_dropped: u64,
    /// The object runtime's events (`terrace run --objects`, [`crate::object_runtime`]): objects
    /// handed to the policy and their frees, allocations whose pages no scan found, events the
    /// runtime dropped for a full ring, and sites advised.
    pub objects_seen: u64,
    pub objects_freed: u64,
    pub objects_unseen: u64,
    pub object_events_dropped: u64,
    pub sites_advised: u64,
    /// Events the runtime put in the ring (every one, whether the policy saw it or not).
    pub object_events_reported: u64,
}

/// A warning says the program has no present page after this many observations in a row...
pub const NOTHING_PRESENT_OBSERVATIONS: u32 = 10;
/// ...spanning at least this long. Both, so neither hemem's 10 ms tick (10 observations are
/// 100 ms, less than most programs take to start and touch their memory) nor age's 1 s tick
/// (10 s) warns about a program that is only starting, and a program that never touches
/// anonymous memory is reported within seconds either way.
pub const NOTHING_PRESENT_FOR: Duration = Duration::from_secs(5);

/// What the machine manages: a program it started (and can wait for), a process it was given,
/// or a cgroup's processes.
pub enum Target {
    Child(Child),
    Pid(i32),
    Cgroup(PathBuf),
}

/// The managed program (the first process of the group, or its cgroup), and whether it is still
/// there: the run ends when it is gone.
struct Managed {
    target: Target,
    /// The program's pid; 0 for a cgroup, which has no first process.
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
            // A cgroup lives while its directory does, empty or not (workers come and go).
            Target::Cgroup(dir) => dir.join("cgroup.procs").exists(),
        };
        self.gone = !alive;
        alive
    }

    /// The program in log lines.
    fn who(&self) -> String {
        match &self.target {
            Target::Cgroup(dir) => format!("cgroup {}", dir.display()),
            _ => format!("pid {}", self.pid),
        }
    }
}

/// One process of the group: its memory's placement scan and its own trackers (each kernel
/// interface is per process: pagemap, clear_refs, perf events, a userfaultfd).
struct Member {
    id: MemberId,
    pid: i32,
    scan: PlacementScan,
    trackers: TrackerSet,
    /// Its trackers' own counters (the machine's totals add every member's).
    counters: LiveStats,
}

impl Member {
    /// A full scan of this process: follows an exec first (returning the program it runs now),
    /// then where every page is, then each tracker's bits.
    fn scan(&mut self) -> Result<Option<String>, ProcessError> {
        let exec = self.scan.follow_exec()?;
        self.scan.read_placement()?;
        let (view, bits) = self.scan.view_and_bits();
        self.trackers.observe_bits(&view, bits)?;
        self.scan.finish();
        Ok(exec)
    }
}

pub struct LiveMachine {
    info: MachineInfo,
    program: Managed,
    /// Which processes are managed together, found anew at every full scan.
    selection: Selection,
    proc_root: PathBuf,
    /// The processes managed now, the program first (when it is one of them).
    members: Vec<Member>,
    next_member: MemberId,
    /// The policy's page numbers across the members.
    space: PageSpace,
    /// Processes of the selection whose trackers could not start: not managed, not retried.
    refused: HashSet<i32>,
    /// The host's tiers, fastest first, for each member's scan.
    tiers: Vec<LiveTier>,
    /// What the policy asked for (set by `prepare`), to start a new member's trackers.
    req: Option<Requirements>,
    huge: bool,
    page_bits: bool,
    /// What the policy sees, assembled from the members at each observation.
    placement: Vec<TierId>,
    tier_status: Vec<TierStatus>,
    bits: Vec<u8>,
    samples: Vec<Sample>,
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
    /// Mechanisms plans asked for that this kernel lacks, each warned about once.
    warned_lacking: Vec<terrace_model::Mechanism>,
    /// When the last full scan (mappings, pagemap, nodes) ran, and how long it took.
    scanned_at: Option<Instant>,
    scan_took: Duration,
    /// When the last observation ended, until the policy's decision is timed.
    deciding_since: Option<Instant>,
    stats: LiveStats,
    /// Tracker counters of members that left, kept in the totals.
    departed: LiveStats,
    /// Observations in a row without a present page, since when, and whether that was said.
    nothing_present: (u32, Option<Instant>, bool),
    nothing_present_warning: WarnLimit,
    failed_batch_warning: WarnLimit,
    /// The socket the program's shadow agent connects to, the agents that did, and whether
    /// shadows asked for memory outside their regions were said to be copies.
    shadow: Option<ShadowListener>,
    shadow_links: Vec<ShadowLink>,
    warned_unshadowed: bool,
    /// The object runtime's ring, for a program started with `terrace run --objects`.
    objects: Option<ObjectRuntime>,
    /// Full scans completed: an object event waits for the next one to index its pages.
    full_scans: u64,
}

impl LiveMachine {
    /// Attaches to `target` with the host's tiers (fastest first).
    pub fn attach(target: Target, tiers: Vec<LiveTier>, dry_run: bool) -> Result<Self, ProcessError> {
        Self::attach_or_return(target, tiers, dry_run).map_err(|(e, _)| e)
    }

    /// As [`LiveMachine::attach`], but a target it cannot attach to comes back with the error: a
    /// program Terrace started may have exited already (or run on unmanaged), and its exit status
    /// is still to be waited for and passed on. A process is managed alone (its children too
    /// after [`LiveMachine::manage_tree`]); a cgroup's processes are found at the first scan.
    pub fn attach_or_return(
        target: Target,
        tiers: Vec<LiveTier>,
        dry_run: bool,
    ) -> Result<Self, (ProcessError, Target)> {
        let (pid, selection) = match &target {
            Target::Child(c) => (c.id() as i32, Selection::Process),
            Target::Pid(p) => (*p, Selection::Process),
            Target::Cgroup(dir) => (0, Selection::Cgroup { dir: dir.clone(), owner: None }),
        };
        let first = match selection {
            Selection::Cgroup { .. } => None,
            _ => match ProcessMemory::attach(pid) {
                Ok(m) => Some(m),
                Err(e) => return Err((e, target)),
            },
        };
        let threads = procfs::process::Process::new(pid)
            .and_then(|p| p.stat())
            .map(|s| s.num_threads.max(1) as u32)
            .unwrap_or(1);
        let name = match &target {
            Target::Cgroup(dir) => format!("live cgroup {}", dir.display()),
            _ => format!("live pid {pid}"),
        };
        let info = MachineInfo {
            name,
            tiers: tiers.iter().map(|t| t.tier.clone()).collect(),
            page_size: PageSize::Base4K,
            pages: first.as_ref().map_or(0, |m| m.pages() as u64),
            threads,
            scale: 1.0,
            // Write-protected copies come with the program's userfaultfd (set_fault_source).
            mechanisms: migrate::host_mechanisms(false, false, false),
            // The live machine manages one program (its process tree).
            programs: Vec::new(),
            move_unit_bytes: migrate::move_unit_bytes(Path::new("/sys")),
        };
        let n = tiers.len();
        let mut machine = LiveMachine {
            info,
            program: Managed { target, pid, exit: None, gone: false },
            selection,
            proc_root: PathBuf::from("/proc"),
            members: Vec::new(),
            next_member: 0,
            space: PageSpace::default(),
            refused: HashSet::new(),
            tiers,
            req: None,
            huge: false,
            page_bits: false,
            placement: Vec::new(),
            tier_status: vec![TierStatus::default(); n],
            bits: Vec::new(),
            samples: Vec::new(),
            choice: Choice::default(),
            fault_fd: None,
            dry_run,
            kernel_tiering: None,
            start: Instant::now(),
            last_observe: Duration::ZERO,
            last_apply: Duration::ZERO,
            warned_lacking: Vec::new(),
            scanned_at: None,
            scan_took: Duration::ZERO,
            deciding_since: None,
            stats: LiveStats { pages_per_tier: vec![0; n], ..Default::default() },
            departed: LiveStats::default(),
            nothing_present: (0, None, false),
            nothing_present_warning: WarnLimit::default(),
            failed_batch_warning: WarnLimit::default(),
            shadow: None,
            shadow_links: Vec::new(),
            warned_unshadowed: false,
            objects: None,
            full_scans: 0,
        };
        if let Some(mem) = first {
            machine.add_member(pid, mem, TrackerSet::default());
        }
        Ok(machine)
    }

    /// Manages every process the program starts too (and theirs), as they come and go: `terrace
    /// run`'s whole process tree. Set before driving.
    pub fn manage_tree(&mut self) {
        if self.selection == Selection::Process {
            self.selection = Selection::Tree;
        }
    }

    /// Of a cgroup, manages only the processes whose real uid is `uid` (a cgroup its user bound:
    /// another user's processes in it are not theirs to manage); the others are not selected.
    /// Set before driving.
    pub fn only_owner(&mut self, uid: u32) {
        if let Selection::Cgroup { owner, .. } = &mut self.selection {
            *owner = Some(uid);
        }
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
    /// [`crate::remote_syscall`]), for the fault sampler, which protects `sample_per_epoch`
    /// units every `epoch`; set before driving.
    pub fn set_fault_source(&mut self, uffd: Userfaultfd, sample_per_epoch: usize, epoch: Duration) {
        self.fault_fd = Some(uffd);
        self.choice.fault_sample = sample_per_epoch.max(1);
        self.choice.fault_epoch = epoch;
        self.refresh_mechanisms(true);
    }

    /// Gives the machine the kernel's tiering, switched on before the program started (so that it
    /// ran under the policy's settings from the start); the machine keeps it on for the run and
    /// puts it back as it ends, as it does for the tiering it switches on itself. Set before
    /// driving.
    pub fn set_kernel_tiering(&mut self, run: TieringRun) {
        self.kernel_tiering = Some(run);
    }

    /// Gives the machine the socket whose path the program was started with
    /// ([`crate::shadow_link::ENV`]): shadow copies are then offered, for the memory the
    /// program's agent maps ([`crate::shadow_region`]). Set before driving.
    pub fn set_shadow_listener(&mut self, listener: ShadowListener) {
        self.shadow = Some(listener);
        self.refresh_mechanisms(self.info.mechanisms.offers(terrace_model::Mechanism::WriteProtectedCopies));
    }

    /// Gives the machine the object runtime's ring the program was started with
    /// ([`ObjectRuntime::environment`]): its allocation events reach the policy and allocation-site
    /// placement is offered. Set before driving.
    pub fn set_object_runtime(&mut self, runtime: ObjectRuntime) {
        self.objects = Some(runtime);
        self.refresh_mechanisms(self.info.mechanisms.offers(terrace_model::Mechanism::WriteProtectedCopies));
    }

    /// What this kernel's mover offers with what the program was given: a userfaultfd (write-
    /// protected copies), a shadow agent's socket, the object runtime.
    fn refresh_mechanisms(&mut self, userfaultfd: bool) {
        self.info.mechanisms =
            migrate::host_mechanisms(userfaultfd, self.shadow.is_some(), self.objects.is_some());
    }

    /// The object runtime's counters, when the program runs under it.
    pub fn object_counters(&self) -> Option<crate::object_runtime::ObjectCounters> {
        self.objects.as_ref().map(|o| o.counters())
    }

    /// The program's pid (0 for a cgroup).
    pub fn pid(&self) -> i32 {
        self.program.pid
    }
    /// The processes managed now, the program first.
    pub fn pids(&self) -> Vec<i32> {
        self.members.iter().map(|m| m.pid).collect()
    }
    /// The process holding the policy's page `page` and its first address (of a 4 KiB page, or
    /// a 2 MiB range).
    pub fn page_location(&self, page: u32) -> Option<(i32, u64)> {
        let (id, local) = self.space.local(page)?;
        let m = self.members.iter().find(|m| m.id == id)?;
        Some((m.pid, m.scan.page_address(local)?))
    }
    /// The first address of the policy's page `page` (a 4 KiB page, or a 2 MiB range).
    pub fn page_address(&self, page: u32) -> Option<u64> {
        self.page_location(page).map(|(_, addr)| addr)
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

    fn add_member(&mut self, pid: i32, mem: ProcessMemory, trackers: TrackerSet) -> usize {
        let mut scan = PlacementScan::new(mem, self.tiers.clone());
        if self.huge {
            scan.use_huge_pages();
        }
        self.next_member += 1;
        self.members.push(Member {
            id: self.next_member,
            pid,
            scan,
            trackers,
            counters: LiveStats::default(),
        });
        self.members.len() - 1
    }

    /// Finds the selection's processes now: starts managing the new ones (their own scan and
    /// trackers), and lets go of those that left (their page numbers go to the next newcomer).
    fn refresh_members(&mut self) {
        let found = self.selection.find(&self.proc_root, self.program.pid);
        let known: HashSet<i32> = self.members.iter().map(|m| m.pid).collect();
        self.refused.retain(|p| found.contains(p));
        let Some(req) = self.req.clone() else { return };
        for pid in found {
            if known.contains(&pid) || self.refused.contains(&pid) || pid == std::process::id() as i32 {
                continue;
            }
            let mem = match ProcessMemory::attach(pid) {
                Ok(m) => m,
                // Gone already, or a zombie: nothing to manage.
                Err(ProcessError::Gone(_)) => continue,
                Err(e) => {
                    tracing::warn!("{}: cannot manage pid {pid}: {e}", self.program.who());
                    self.refused.insert(pid);
                    continue;
                }
            };
            let fault_fd = self.joining_userfaultfd(pid, &req);
            // Exited as it joined (a shell's short command): nothing to manage, nothing to say.
            if !crate::process::running(pid) {
                continue;
            }
            let program = select::Program { memory: &mem, fault_fd, huge: self.huge, descendant: true };
            match select::build(&HostKernel, &req, &self.choice, program) {
                Ok(trackers) => {
                    let exe = std::fs::read_link(self.proc_root.join(pid.to_string()).join("exe"))
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|_| "?".into());
                    tracing::info!(
                        "{}: managing pid {pid} ({exe}) too, with {}",
                        self.program.who(),
                        trackers.names().join(", ")
                    );
                    let i = self.add_member(pid, mem, trackers);
                    // A first scan that only sets its trackers going, as `prepare` does for the
                    // program: a newcomer's page-table bits tell what it wrote since it started
                    // (soft-dirty: every page it ever wrote), which is no interval of the policy's;
                    // shown as this tick's, every page would look hot. Its own next scan, moments
                    // later in this one, reads the bits since. A failure recurs there.
                    if let Ok(Some(exe)) = self.members[i].scan() {
                        self.exec_followed(i, &exe);
                    }
                    self.stats.processes_joined += 1;
                }
                Err(e) => {
                    tracing::warn!(
                        "{}: not managing pid {pid}: its trackers cannot start: {e}",
                        self.program.who()
                    );
                    self.refused.insert(pid);
                }
            }
        }
    }

    /// A userfaultfd for process `pid` that joins a `terrace run` tree, if the policy's fault
    /// sampler needs one: created inside it as the fault sampler does after an exec
    /// ([`crate::remote_syscall::create_userfaultfd_in_running`]; a process Terrace started, or
    /// one of its descendants, may be traced by it). A cgroup's processes get none (a policy that
    /// needs one is refused for them), and one that cannot be made leaves the process's writes
    /// unsampled, which is logged.
    fn joining_userfaultfd(&self, pid: i32, req: &Requirements) -> Option<Userfaultfd> {
        if self.selection != Selection::Tree || !needs_userfaultfd(req, self.choice.sampling) {
            return None;
        }
        match crate::remote_syscall::create_userfaultfd_in_running(pid) {
            Ok(fd) => Some(Userfaultfd::from_fd(fd)),
            // Exiting: ptrace refuses it (EPERM, ESRCH), which is no refusal of Terrace's rights.
            Err(e) if !crate::process::running(pid) => {
                tracing::debug!("{}: pid {pid} exited as it joined ({e})", self.program.who());
                None
            }
            Err(e) => {
                tracing::warn!(
                    "{}: pid {pid} joins without a userfaultfd ({e}), so its writes are not sampled and its \
                     copies not write-protected",
                    self.program.who()
                );
                None
            }
        }
    }

    /// Lets go of member `i`: its page numbers read as unplaced and go to the next newcomer.
    fn remove_member(&mut self, i: usize) {
        let m = self.members.remove(i);
        if let Some(o) = self.objects.as_mut() {
            o.process_left(m.pid as u32, None, self.full_scans);
        }
        self.space.release(m.id);
        self.departed.write_faults += m.counters.write_faults;
        self.departed.writes_held_for_copy += m.counters.writes_held_for_copy;
        self.departed.ranges_not_registered += m.counters.ranges_not_registered;
        tracing::debug!("{}: pid {} left", self.program.who(), m.pid);
    }

    /// A full scan of every member, after finding the selection's processes. An error of the
    /// program itself fails the scan (a program that is gone ends the run); any other member
    /// that fails is let go.
    fn scan(&mut self) -> Result<(), ProcessError> {
        if self.selection != Selection::Process {
            self.refresh_members();
        }
        if let Some(listener) = &self.shadow {
            for link in listener.accept_ready() {
                tracing::info!(
                    target: "terrace::plan",
                    "pid {}'s shadow agent connected: its shadow region's pages get shadow copies",
                    link.pid()
                );
                self.shadow_links.push(link);
            }
        }
        let mut i = 0;
        while i < self.members.len() {
            let is_program = self.members[i].pid == self.program.pid;
            match self.members[i].scan() {
                Ok(exec) => {
                    if let Some(exe) = exec {
                        self.exec_followed(i, &exe);
                    }
                    i += 1;
                }
                Err(e) if is_program => return Err(e),
                Err(e) => {
                    if !matches!(e, ProcessError::Gone(_)) {
                        tracing::warn!(
                            "{}: scan of pid {} failed: {e}",
                            self.program.who(),
                            self.members[i].pid
                        );
                    }
                    self.remove_member(i);
                }
            }
        }
        for m in &self.members {
            self.space.grow(m.id, m.scan.policy_pages() as u32);
        }
        self.stats.processes = self.members.len() as u64;
        self.full_scans += 1;
        Ok(())
    }

    /// Member `i` exec'd `exe` (same pid, new address space; pagemap is reopened already): the
    /// page index keeps growing (pages of the old mappings read as absent, so the policy's
    /// indexes stay valid), every tracker is told, and what cannot follow is counted.
    fn exec_followed(&mut self, i: usize, exe: &str) {
        let m = &mut self.members[i];
        let pid = m.pid;
        tracing::info!("pid {pid} exec'd {exe}: following it");
        self.stats.execs_followed += 1;
        self.stats.trackers_lost += m.trackers.address_space_replaced(pid);
        if pid == self.program.pid
            && m.trackers.copy_guard().is_none()
            && self.info.mechanisms.offers(terrace_model::Mechanism::WriteProtectedCopies)
        {
            // The guard's descriptor belonged to the old address space: copies go unprotected.
            self.refresh_mechanisms(false);
        }
        // Its objects went with its old address space, and the old image with its program.
        if let Some(o) = self.objects.as_mut() {
            let image = crate::object_runtime::image_id(pid as u32);
            o.process_left(pid as u32, image, self.full_scans);
        }
    }

    /// What the policy sees, from every member: placement and bits by policy page (pages of no
    /// member are unplaced), each tier's pages summed over the members.
    fn assemble(&mut self) {
        let n = self.space.len();
        self.placement.clear();
        self.placement.resize(n, TierId::UNPLACED);
        self.bits.clear();
        if self.page_bits {
            self.bits.resize(n, 0);
        }
        for (t, st) in self.tier_status.iter_mut().enumerate() {
            *st = TierStatus { capacity_pages: self.info.tiers[t].capacity_pages, ..TierStatus::default() };
        }
        let by_id: HashMap<MemberId, &Member> = self.members.iter().map(|m| (m.id, m)).collect();
        for run in self.space.runs() {
            let Some(m) = by_id.get(&run.member) else { continue };
            let (placement, _, bits) = m.scan.policy_view();
            let (from, to) = (run.local as usize, ((run.local + run.len) as usize).min(placement.len()));
            if from >= to {
                continue;
            }
            let at = run.global as usize;
            self.placement[at..at + to - from].copy_from_slice(&placement[from..to]);
            if self.page_bits && bits.len() >= to {
                self.bits[at..at + to - from].copy_from_slice(&bits[from..to]);
            }
        }
        for m in &self.members {
            for (st, own) in self.tier_status.iter_mut().zip(m.scan.policy_view().1) {
                st.used_pages += own.used_pages;
            }
        }
    }

    /// Present 4 KiB pages of every member at the last scan.
    fn present_pages(&self) -> usize {
        self.members.iter().map(|m| m.scan.present_pages()).sum()
    }

    /// Counts observations without a present page; warns (and counts) once the program has had
    /// none for [`NOTHING_PRESENT_OBSERVATIONS`] observations and [`NOTHING_PRESENT_FOR`].
    fn check_nothing_present(&mut self) {
        if self.present_pages() > 0 || self.program.gone {
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
        let (who, n, secs) = (self.program.who(), *count, since.elapsed().as_secs_f64());
        // What the last scan found mapped, so that a warning about a program whose memory is
        // there tells a mapping Terrace does not manage from pages it cannot read.
        let (mappings, mapped) = self.members.iter().fold((0, 0), |(n, pages), m| {
            m.scan.memory().mapped_ranges().fold((n, pages), |(n, pages), (start, end)| {
                (n + 1, pages + (end - start) / crate::process::PAGE_BYTES)
            })
        });
        let maps = match self.program.pid {
            0 => "/proc/PID/maps of its processes".to_string(),
            pid => format!("/proc/{pid}/maps"),
        };
        self.nothing_present_warning.warn(|| {
            format!(
                "{who} has had no present page in the memory Terrace manages (its heap and private \
                 anonymous mappings: {mappings} mapped, {mapped} pages) for {n} observations ({secs:.1} s), so \
                 the policy has nothing to place: \
                 the program has not touched such memory yet, or keeps its data in files or shared memory \
                 (not managed), or its processes are not there (a daemonizing program leaves the tree \
                 terrace run manages: bind it with the daemon's --cgroup); see {maps}"
            )
        });
    }

    /// Warns (rate-limited) about move batches of `pid` where more than half the pages did not
    /// move.
    fn check_batches(&mut self, pid: i32, out: &migrate::MoveOutcome) {
        let Some(worst) = out.bad_batches.iter().max_by_key(|b| b.failed) else { return };
        self.stats.batches_mostly_failed += out.bad_batches.len() as u64;
        let (bad, all, worst) = (out.bad_batches.len(), out.batches, *worst);
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

    /// The machine's totals of every member's tracker counters, those that left included.
    fn sum_counters(&mut self) {
        let d = &self.departed;
        let (mut faults, mut held, mut refused) =
            (d.write_faults, d.writes_held_for_copy, d.ranges_not_registered);
        for m in &self.members {
            faults += m.counters.write_faults;
            held += m.counters.writes_held_for_copy;
            refused += m.counters.ranges_not_registered;
        }
        self.stats.write_faults = faults;
        self.stats.writes_held_for_copy = held;
        self.stats.ranges_not_registered = refused;
    }

    /// Writes the plan's site advice into the object runtime's ring, each tier as its first node
    /// (a dry run only logs it): the program's next objects of each site are placed there.
    fn advise_sites(&mut self, plan: &Plan, applied: &mut Applied) {
        let Some(objects) = self.objects.as_mut() else { return };
        let mut advised = 0;
        for a in &plan.site_advice {
            let node = match a.tier {
                None => None,
                Some(t) => match self.tiers.get(t.index()).and_then(|t| t.nodes.first()) {
                    Some(&n) => Some(n),
                    None => {
                        applied.fail(MoveFailure::Invalid);
                        continue;
                    }
                },
            };
            if self.dry_run || objects.advise(a.site, node) {
                advised += 1;
            }
        }
        if advised > 0 {
            self.stats.sites_advised += advised;
            tracing::info!(
                target: "terrace::plan",
                "{}advised a node for {advised} allocation site(s) ({})",
                if self.dry_run { "dry run: would have " } else { "" },
                plan.reason
            );
        }
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
        // What the kernel cannot do is said once, with why, in the policy's log; the plan is
        // carried out without it (issue 13: never pretend a mechanism).
        for &m in &not_honoured {
            if !self.warned_lacking.contains(&m) {
                self.warned_lacking.push(m);
                tracing::warn!(
                    target: "terrace::plan",
                    "{}: {} is not available here, so plans are carried out without it: {}",
                    plan.reason,
                    m.name(),
                    self.info.mechanisms.why_not(m)
                );
            }
        }
        applied.not_honoured = not_honoured;
        let mut budget = RateBudget::new(&options, now.saturating_sub(self.last_apply).as_nanos() as f64);
        self.last_apply = now;
        let page_bytes = self.info.page_size.bytes();
        let checked = plan.check(&self.placement, self.tiers.len(), &mut budget, page_bytes, applied);
        // A batch counts policy pages: a 2 MiB page is 512 addresses in one call.
        if self.huge {
            options.batch_pages = options.batch_pages.saturating_mul(BASE_PAGES_PER_HUGE as u32);
        }
        (options, checked)
    }

    /// Moves policy pages to tiers (each a 4 KiB page, or 512 of them for a 2 MiB page), one
    /// migrator run per process; records failures in `applied`, updates the placement and the
    /// tiers' occupancy, and returns the policy pages that moved. In a dry run it only logs.
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
        // By member: its own pages and tiers, and the policy page of each of its pages.
        let mut by_member: Vec<MemberMoves> = self.members.iter().map(|_| Default::default()).collect();
        let position: HashMap<MemberId, usize> =
            self.members.iter().enumerate().map(|(i, m)| (m.id, i)).collect();
        for &(page, to) in wanted {
            match self.space.local(page).and_then(|(id, local)| Some((*position.get(&id)?, local))) {
                Some((i, local)) => {
                    by_member[i].0.push((local, to));
                    by_member[i].1.insert(local, page);
                }
                // No process holds it any more: there is nothing to move.
                None if (page as usize) < self.space.len() => applied.fail(MoveFailure::NotPresent),
                None => applied.fail(MoveFailure::Invalid),
            }
        }
        let mut dry_asked = Vec::new();
        for (i, (local_wanted, global_of)) in by_member.into_iter().enumerate() {
            if local_wanted.is_empty() {
                continue;
            }
            let m = &mut self.members[i];
            let (asked, moves) = m.scan.page_moves(&local_wanted, applied);
            if self.dry_run {
                dry_asked.extend(asked.iter().map(|&(local, node)| (global_of[&local], node)));
                continue;
            }
            let guard = m.trackers.copy_guard().filter(|_| options.protected_copies);
            // Pages of the program's shadow region go to its agent when the plan asks for
            // shadows; the rest (and all of them when the agent is gone) to move_pages.
            let shadowed = match self.shadow_links.iter().position(|l| l.pid() == m.pid) {
                Some(l) if options.shadow && !self.huge => {
                    let to: HashMap<u32, TierId> = local_wanted.iter().copied().collect();
                    let now = m.scan.policy_view().0;
                    // A promotion keeps the old copy as the page's shadow (mtier §3.1).
                    let keep = |tag: u32| {
                        let from = now.get(tag as usize).copied().unwrap_or(TierId::UNPLACED);
                        from.is_placed() && to.get(&tag).is_some_and(|t| t.index() < from.index())
                    };
                    let (out, rest) = shadow_moves(&mut self.shadow_links[l], &moves, keep, reason);
                    if out.is_none() {
                        self.shadow_links.remove(l);
                    }
                    Some((out.unwrap_or_default(), rest))
                }
                _ => None,
            };
            if options.shadow && !self.warned_unshadowed {
                let outside = shadowed.as_ref().map_or(moves.len(), |(_, rest)| rest.len());
                if outside > 0 {
                    self.warned_unshadowed = true;
                    tracing::warn!(
                        target: "terrace::plan",
                        "{reason}: shadow copies were asked for {outside} pages outside a shadow region Terrace's \
                         agent maps; they are copied with move_pages (user space cannot keep a shadow of a \
                         program's own memory: docs/live.md, \"Shadow copies\")"
                    );
                }
            }
            let out = match shadowed {
                Some((agent, rest)) => {
                    let mut out = migrate::execute_guarded(m.pid, &rest, options, reason, guard);
                    out.moved += agent.moved;
                    out.failed.extend(agent.out.failed);
                    self.stats.pages_switched += agent.switched;
                    out
                }
                None => migrate::execute_guarded(m.pid, &moves, options, reason, guard),
            };
            let failed = migrate::failed_pages(&moves, &out.failed);
            for why in failed.values() {
                applied.fail(*why);
            }
            for &(local, node) in asked.iter().filter(|(local, _)| !failed.contains_key(local)) {
                done.insert(global_of[&local]);
                let tier = m.scan.tier_of_node(node);
                m.scan.record_move(local, tier);
            }
            let landed: Vec<u64> =
                moves.iter().filter(|m| !failed.contains_key(&m.tag)).map(|m| m.addr).collect();
            m.trackers.after_moves(&m.scan.view(), &landed, m.scan.bits(), &mut m.counters);
            self.stats.pages_moved += out.moved;
            self.stats.moves_failed += failed.len() as u64;
            let pid = m.pid;
            self.check_batches(pid, &out);
        }
        if self.dry_run {
            log_dry_run(self.tiers.len(), wanted, &dry_asked, reason);
        }
        self.sum_counters();
        self.stats.shadows_dropped =
            self.shadow_links.iter().map(|l| l.dropped).sum::<u64>().max(self.stats.shadows_dropped);
        done
    }

    /// Carries exchanges out as pairs of batches (never in a dry run): each member's own pairs
    /// through its mover ([`migrate::execute_exchange`]: up to `options.concurrent_batches`
    /// callers, each working through whole pairs of batches), the pairs whose pages belong to two
    /// processes one pair of batches at a time. Records failures in `applied` (a promotion whose
    /// partner did not go down fails `NoSpace`) and updates the placement; returns the policy
    /// pages moved and the pairs whose both halves happened.
    fn exchange_policy_pages(
        &mut self,
        pairs: &[Pair],
        options: &MoveOptions,
        reason: &str,
        applied: &mut Applied,
    ) -> (u64, u64) {
        if pairs.is_empty() {
            return (0, 0);
        }
        let position: HashMap<MemberId, usize> =
            self.members.iter().enumerate().map(|(i, m)| (m.id, i)).collect();
        let member_of = |page: u32| self.space.local(page).and_then(|(id, _)| position.get(&id).copied());
        let owner: Vec<_> = pairs.iter().map(|&(down, _, up, _)| (member_of(down), member_of(up))).collect();
        let (own, across) = split_by_member(pairs, &owner);
        let (mut moved, mut exchanged) = (0u64, 0u64);
        let mut members: Vec<_> = own.into_iter().collect();
        members.sort_unstable_by_key(|(i, _)| *i);
        for (i, pairs) in members {
            let (m, e) = self.exchange_member_pages(i, &pairs, options, reason, applied);
            moved += m;
            exchanged += e;
        }
        // Across processes: a pair of batches at a time, through the one-way mover.
        let per_batch =
            (options.batch_pages as usize / if self.huge { BASE_PAGES_PER_HUGE as usize } else { 1 }).max(1);
        for round in across.chunks(per_batch) {
            let downs: Vec<(u32, TierId)> = round.iter().map(|&(down, to, _, _)| (down, to)).collect();
            let went_down = self.move_policy_pages(&downs, options, reason, applied);
            let ups = promotions(round, &went_down, applied);
            let went_up = self.move_policy_pages(&ups, options, reason, applied);
            moved += (went_down.len() + went_up.len()) as u64;
            exchanged += round
                .iter()
                .filter(|&&(down, _, up, _)| went_down.contains(&down) && went_up.contains(&up))
                .count() as u64;
        }
        self.sum_counters();
        (moved, exchanged)
    }

    /// Member `i`'s own exchanges, through its mover as pairs of batches.
    fn exchange_member_pages(
        &mut self,
        i: usize,
        pairs: &[Pair],
        options: &MoveOptions,
        reason: &str,
        applied: &mut Applied,
    ) -> (u64, u64) {
        let local = |page: u32| self.space.local(page).map(|(_, local)| local);
        let locals: Vec<(u32, TierId, u32, TierId)> = pairs
            .iter()
            .filter_map(|&(down, to_down, up, to_up)| Some((local(down)?, to_down, local(up)?, to_up)))
            .collect();
        let m = &mut self.members[i];
        // Each side's addresses (one for a 4 KiB page, a 2 MiB page's present 4 KiB pages) and
        // node; a page the scan cannot send fails `Invalid` there.
        let side = |m: &Member, page: u32, to: TierId, applied: &mut Applied| {
            let (asked, moves) = m.scan.page_moves(&[(page, to)], applied);
            asked.first().map(|&(_, node)| (node, moves))
        };
        let mut sent = Vec::new();
        let mut nodes = Vec::new();
        for &(down, to_down, up, to_up) in &locals {
            let Some((down_node, down_moves)) = side(m, down, to_down, applied) else {
                // Its partner cannot go up without it.
                applied.fail(MoveFailure::NoSpace);
                continue;
            };
            let (up_node, up_moves, up_ok) = match side(m, up, to_up, applied) {
                Some((node, moves)) => (node, moves, true),
                None => (-1, Vec::new(), false),
            };
            sent.push(migrate::PairMoves { down_tag: down, down: down_moves, up_tag: up, up: up_moves });
            nodes.push((down_node, up_node, up_ok));
        }
        let guard = m.trackers.copy_guard().filter(|_| options.protected_copies);
        let out = migrate::execute_exchange(m.pid, &sent, options, reason, guard);
        let (mut moved, mut exchanged, mut failed) = (0u64, 0u64, 0u64);
        let mut landed = Vec::new();
        for ((p, r), &(down_node, up_node, up_ok)) in sent.iter().zip(&out.pairs).zip(&nodes) {
            match r.down {
                Ok(()) => {
                    moved += 1;
                    m.scan.record_move(p.down_tag, m.scan.tier_of_node(down_node));
                    landed.extend(p.down.iter().map(|x| x.addr));
                }
                Err(why) => {
                    applied.fail(why);
                    failed += 1;
                }
            }
            match r.up {
                // Its partner did not go down: moving it would overfill the tier.
                None => applied.fail(MoveFailure::NoSpace),
                Some(Ok(())) if up_ok => {
                    moved += 1;
                    m.scan.record_move(p.up_tag, m.scan.tier_of_node(up_node));
                    landed.extend(p.up.iter().map(|x| x.addr));
                    exchanged += u64::from(r.down.is_ok());
                }
                // The scan could not send it (failed `Invalid` above).
                Some(Ok(())) => {}
                Some(Err(why)) => {
                    applied.fail(why);
                    failed += 1;
                }
            }
        }
        m.trackers.after_moves(&m.scan.view(), &landed, m.scan.bits(), &mut m.counters);
        self.stats.pages_moved += out.moves.moved;
        self.stats.moves_failed += failed;
        let pid = m.pid;
        self.check_batches(pid, &out.moves);
        (moved, exchanged)
    }
}

/// One member's part of a move: its own pages and their tiers, and the policy page of each.
type MemberMoves = (Vec<(u32, TierId)>, HashMap<u32, u32>);

/// What a dry run would have moved, per tier.
/// A shadow agent's request: the target node, and whether old copies are kept.
type ShadowGroup = (i32, bool);

/// What a shadow agent did with its share of a batch.
#[derive(Default)]
struct ShadowOutcome {
    out: migrate::MoveOutcome,
    moved: u64,
    switched: u64,
}

/// Sends the moves of `moves` that fall in `link`'s region to its agent, by target node and by
/// whether the old copy is kept (`keep` of a page's tag); returns what the agent did and the
/// moves left for move_pages. If the agent cannot be asked (it is gone, or answered nonsense),
/// the outcome is `None`, said in the log, and every move is left for move_pages.
fn shadow_moves(
    link: &mut ShadowLink,
    moves: &[PageMove],
    keep: impl Fn(u32) -> bool,
    reason: &str,
) -> (Option<ShadowOutcome>, Vec<PageMove>) {
    let mut rest = Vec::new();
    // In the plan's order of first appearance: a policy that evicts before it promotes (mtier)
    // must not have its promotions go first and overfill the fast tier.
    let mut groups: Vec<(ShadowGroup, Vec<(u32, u32)>)> = Vec::new();
    for m in moves {
        match link.index_of(m.addr) {
            Some(i) => {
                let key = (m.node, keep(m.tag));
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, pages)) => pages.push((i, m.tag)),
                    None => groups.push((key, vec![(i, m.tag)])),
                }
            }
            None => rest.push(*m),
        }
    }
    let mut outcome = ShadowOutcome::default();
    for ((node, keep_shadow), pages) in groups {
        let req =
            MoveRequest { node: node as u32, keep_shadow, pages: pages.iter().map(|&(i, _)| i).collect() };
        match link.request(&req) {
            Ok(reply) => {
                for (&(_, tag), r) in pages.iter().zip(&reply.results) {
                    match r {
                        PageResult::Switched => {
                            outcome.moved += 1;
                            outcome.switched += 1;
                        }
                        PageResult::Copied | PageResult::Stayed => outcome.moved += 1,
                        PageResult::Failed(e) => outcome.out.failed.push((tag, migrate::failure_of(-e))),
                    }
                }
            }
            Err(e) => {
                tracing::warn!(
                    target: "terrace::plan",
                    "{reason}: pid {}'s shadow agent did not answer ({e}); its region's pages are moved with \
                     move_pages from now on",
                    link.pid()
                );
                return (None, moves.to_vec());
            }
        }
    }
    (Some(outcome), rest)
}

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

/// A checked plan's one-way moves, carried out first, and its exchanges, carried out after them
/// as pairs of batches ([`migrate::execute_exchange`]).
fn phases(checked: &CheckedPlan) -> (Vec<(u32, TierId)>, Vec<Pair>) {
    let first: Vec<(u32, TierId)> = checked.moves.iter().map(|m| (m.page, m.to)).collect();
    let pairs: Vec<Pair> =
        checked.exchanges.iter().map(|e| (e.down.page, e.down.to, e.up.page, e.up.to)).collect();
    (first, pairs)
}

/// Of `pairs`, the promotions whose demotion happened (in `moved_down`). Promoting the others
/// would overfill the tier they go to: they fail `NoSpace`.
fn promotions(pairs: &[Pair], moved_down: &HashSet<u32>, applied: &mut Applied) -> Vec<(u32, TierId)> {
    let mut second = Vec::new();
    for &(down, _, up, to) in pairs {
        if moved_down.contains(&down) {
            second.push((up, to));
        } else {
            applied.fail(MoveFailure::NoSpace);
        }
    }
    second
}

/// Which exchanges one member's mover can carry out as pairs of batches: those whose two pages
/// are both that member's (by index into `owner`, each pair's two members); the rest (pages of
/// two processes of a tree or cgroup, or of none) are carried out pair batch by pair batch by the
/// machine.
fn split_by_member(
    pairs: &[Pair],
    owner: &[(Option<usize>, Option<usize>)],
) -> (HashMap<usize, Vec<Pair>>, Vec<Pair>) {
    let mut own: HashMap<usize, Vec<Pair>> = HashMap::new();
    let mut across = Vec::new();
    for (&pair, &(down, up)) in pairs.iter().zip(owner) {
        match (down, up) {
            (Some(a), Some(b)) if a == b => own.entry(a).or_default().push(pair),
            _ => across.push(pair),
        }
    }
    (own, across)
}

impl Machine for LiveMachine {
    fn info(&self) -> &MachineInfo {
        &self.info
    }

    fn prepare(&mut self, req: &Requirements) -> Result<(), MachineError> {
        check_requirements(req, Attach::Start, self.choice.sampling)?;
        if self.objects.is_none() && req.trackers.iter().any(|t| t.kind == TrackerKind::ObjectEvents) {
            return Err(MachineError::MissingTracker {
                tracker: "object events",
                hint: "allocation and free events come from the object runtime, which this program was not started \
                       with: start it with `terrace run --objects --policy P -- PROGRAM`"
                    .into(),
            });
        }
        if req.memory_mode == MemoryMode::KernelTiering {
            if self.dry_run {
                // A dry run changes nothing on the host: the kernel's setting is left as it is,
                // and the policy's modelled plans are logged as any dry run's are.
                tracing::info!(
                    "dry run: NUMA balancing's tiering mode is not switched on (kernel.numa_balancing stays as \
                     it is); kernel-tiering's modelled plans are logged instead"
                );
            } else {
                let mut run = match self.kernel_tiering.take() {
                    // Switched on before the program started (`terrace run`).
                    Some(run) => run,
                    None => TieringRun::start(&req.kernel_tiering).map_err(MachineError::Other)?,
                };
                // Now, not at the first look a second later: a short program is gone by then.
                for m in &self.members {
                    run.check_policy(m.pid);
                }
                self.kernel_tiering = Some(run);
            }
        }
        if req.page_size == PageSize::Huge2M {
            self.huge = true;
            for m in &mut self.members {
                m.scan.use_huge_pages();
            }
            self.info.page_size = PageSize::Huge2M;
            for t in &mut self.info.tiers {
                t.capacity_pages = huge_view::capacity(t.capacity_pages);
            }
        }
        self.page_bits = req.trackers.iter().any(|t| t.kind == TrackerKind::PageBits);
        // The program's own trackers: a failure refuses the policy, as for a single process. Its
        // descendants (or a cgroup's processes) get theirs as they are found.
        if let Some(m) = self.members.first_mut() {
            let program = select::Program {
                memory: m.scan.memory(),
                fault_fd: self.fault_fd.take(),
                huge: self.huge,
                descendant: false,
            };
            m.trackers = select::build(&HostKernel, req, &self.choice, program)?;
        }
        self.req = Some(req.clone());
        self.scan().map_err(|e| MachineError::Other(e.to_string()))?;
        self.assemble();
        self.info.pages = self.space.len() as u64;
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
            if let Some(objects) = self.objects.as_mut() {
                // Every 20 ms at most, so the ring never fills between two ticks.
                objects.pump(self.full_scans);
            }
            std::thread::sleep(Duration::from_nanos((until_ns - now).min(20_000_000)));
        }
    }

    fn observe(&mut self) -> Observations<'_> {
        let t0 = Instant::now();
        // Page-table bits are per tick, so a policy on them gets a scan at every tick. Otherwise
        // placement changes only by Terrace's own moves (recorded as they land) and new memory, so
        // a fast-ticking policy (hemem's 10 ms) gets a full scan every 100 ms, not every tick, or
        // less often for a program so large that its scan would take more than its budget.
        let due =
            self.page_bits || self.scanned_at.is_none_or(|t| t.elapsed() >= scan_interval(self.scan_took));
        if due {
            self.scanned_at = Some(Instant::now());
            let result = self.scan();
            self.scan_took = self.scanned_at.map_or(Duration::ZERO, |t| t.elapsed());
            match result {
                Ok(()) => {}
                Err(ProcessError::Gone(_)) => self.program.gone = true,
                Err(e) => tracing::warn!("scan of {} failed: {e}", self.program.who()),
            }
        }
        self.check_nothing_present();
        if let Some(k) = self.kernel_tiering.as_mut() {
            k.report();
            for m in &self.members {
                k.check_policy(m.pid);
            }
        }
        // Each member's samples, renamed from its pages to the policy's.
        self.samples.clear();
        for m in &mut self.members {
            m.trackers.observe_samples(&m.scan.view(), &mut m.counters);
            if m.trackers.samples().is_empty() {
                continue;
            }
            let runs = self.space.of_member(m.id);
            self.samples.extend(
                m.trackers.samples().iter().filter_map(|s| Some(Sample { page: runs.global(s.page)?, ..*s })),
            );
        }
        self.sum_counters();
        self.assemble();
        self.info.pages = self.space.len() as u64;
        self.stats.pages_per_tier = self.tier_status.iter().map(|s| s.used_pages).collect();
        self.stats.tracking_seconds += t0.elapsed().as_secs_f64();
        self.deciding_since = Some(Instant::now());
        self.stats.observations += 1;
        let previous = self.last_observe.as_nanos() as u64;
        self.last_observe = self.start.elapsed();
        Observations {
            now_ns: self.last_observe.as_nanos() as u64,
            previous_ns: previous,
            placement: &self.placement,
            tiers: &self.tier_status,
            page_bits: self.page_bits.then_some(&self.bits[..]),
            samples: &self.samples,
            future: None,
            hint_faults: &[],
            in_flight: &[],
        }
    }

    fn take_object_events(&mut self, out: &mut Vec<terrace_model::ObjectEvent>) {
        let Some(mut objects) = self.objects.take() else { return };
        // Each member's page numbers, looked up once for all its events, and only at a tick
        // that has events.
        let mut runs: Option<HashMap<u32, (usize, crate::page_space::MemberRuns)>> = None;
        let unit = self.info.page_size.bytes();
        let (members, space) = (&self.members, &self.space);
        let mut pieces = |pid: u32, addr: u64, bytes: u64| {
            let runs = runs.get_or_insert_with(|| {
                members.iter().enumerate().map(|(i, m)| (m.pid as u32, (i, space.of_member(m.id)))).collect()
            });
            let (i, runs) = runs.get(&pid)?;
            let scan = &members[*i].scan;
            object_ranges(addr, bytes, unit, |a| runs.global(scan.policy_page_of(a)?))
        };
        objects.take(self.full_scans, &mut pieces, out);
        let c = objects.counters();
        self.stats.objects_seen = c.allocs;
        self.stats.objects_freed = c.frees + c.freed_with_process;
        self.stats.objects_unseen = c.unseen + c.overflowed;
        self.stats.object_events_dropped = objects.ring_dropped();
        self.stats.object_events_reported = objects.reported();
        self.objects = Some(objects);
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
        if !applied.not_honoured.contains(&terrace_model::Mechanism::SiteAdvice) {
            self.advise_sites(plan, &mut applied);
        }
        let (mut first, pairs) = phases(&checked);
        if self.dry_run {
            first.extend(pairs.iter().flat_map(|&(down, to_down, up, to_up)| [(down, to_down), (up, to_up)]));
            self.move_policy_pages(&first, &options, &plan.reason, &mut applied);
            return applied;
        }
        // One-way moves first, then the exchanges as pairs of batches: a demotion batch, then
        // the promotions of the partners that went down, then the next pair (issue 13), so the
        // fast tier never holds more than it did and the slow tier at most a batch per caller more.
        let moved_first = self.move_policy_pages(&first, &options, &plan.reason, &mut applied);
        let (moved_pairs, exchanged) =
            self.exchange_policy_pages(&pairs, &options, &plan.reason, &mut applied);
        applied.pages_moved = moved_first.len() as u64 + moved_pairs;
        // An exchange counts when both halves happened.
        applied.pairs_exchanged = exchanged;
        if !pairs.is_empty() {
            self.stats.pairs_exchanged += exchanged;
            tracing::info!(
                target: "terrace::plan",
                "exchanged {exchanged} of {} pairs as paired batches ({})",
                pairs.len(),
                plan.reason
            );
        }
        applied.bytes_copied = applied.pages_moved * self.info.page_size.bytes();
        applied.time_ns = (self.start.elapsed() - now).as_nanos() as u64;
        // What the policy (and the next plan's check, should it come before an observation) sees
        // is where the pages are now.
        if applied.pages_moved > 0 {
            self.assemble();
        }
        self.stats.plans += 1;
        self.stats.migration_seconds += applied.time_ns as f64 * 1e-9;
        applied
    }
}

/// The longest a policy that ticks faster waits for a full scan of the program's memory, unless
/// the scan is too costly for that ([`scan_interval`]).
const FULL_SCAN_EVERY: Duration = Duration::from_millis(100);

/// The longest the CPU budget may space full scans: new memory is seen within a second.
const FULL_SCAN_AT_LEAST: Duration = Duration::from_secs(1);

/// How long after a full scan that took `took` the next one is due: [`FULL_SCAN_EVERY`], or
/// longer, so scans take at most [`crate::cpu_budget::SHARE`] of a CPU, but never longer than
/// [`FULL_SCAN_AT_LEAST`].
fn scan_interval(took: Duration) -> Duration {
    crate::cpu_budget::spaced(FULL_SCAN_EVERY, took, FULL_SCAN_AT_LEAST)
}

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
        mechanisms: migrate::host_mechanisms(
            attach == Attach::Start,
            attach == Attach::Start,
            attach == Attach::Start,
        ),
        programs: Vec::new(),
        move_unit_bytes: migrate::move_unit_bytes(Path::new("/sys")),
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
        MemoryMode::Flat => {}
        MemoryMode::KernelTiering => {
            crate::kernel_tiering::check_settings(&req.kernel_tiering, Path::new("/"))
                .map_err(MachineError::Other)?
        }
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
    let started = attach == Attach::Start;
    let mechanisms = migrate::host_mechanisms(started, started, started);
    if let Some(mechanism) = mechanisms.first_missing(&req.required_mechanisms()) {
        return Err(MachineError::MissingMechanism { mechanism, hint: mechanisms.why_not(mechanism) });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_scans_take_at_most_their_budget_of_a_cpu() {
        assert_eq!(scan_interval(Duration::ZERO), FULL_SCAN_EVERY);
        assert_eq!(scan_interval(Duration::from_millis(1)), FULL_SCAN_EVERY);
        // A 10 ms scan at a 2% budget: one every 500 ms; a 100 ms one still once a second.
        assert_eq!(scan_interval(Duration::from_millis(10)), Duration::from_millis(500));
        assert_eq!(scan_interval(Duration::from_millis(100)), FULL_SCAN_AT_LEAST);
    }
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
        let by_page = migrate::failed_pages(&all, &failed);
        assert_eq!(by_page.get(&0), None, "moved what was present");
        assert_eq!(by_page.get(&1), Some(&MoveFailure::NotPresent), "nothing of it was there");
        assert_eq!(by_page.get(&2), Some(&MoveFailure::NoSpace), "a real failure counts");
        // 4 KiB pages fail with their one move.
        let by_page = migrate::failed_pages(&moves(7, 1), &[(7, MoveFailure::NotPresent)]);
        assert_eq!(by_page.get(&7), Some(&MoveFailure::NotPresent));
    }

    #[test]
    fn exchanges_after_the_one_way_moves_and_held_promotions_fail_no_space() {
        let plan = CheckedPlan {
            moves: vec![terrace_model::Move { page: 9, to: TierId(0) }],
            exchanges: vec![terrace_model::CheckedExchange {
                down: terrace_model::Move { page: 1, to: TierId(1) },
                up: terrace_model::Move { page: 5, to: TierId(0) },
            }],
        };
        // Only the one-way move goes first: the exchange's demotion is no longer in it.
        let (first, pairs) = phases(&plan);
        assert_eq!(first, [(9, TierId(0))]);
        assert_eq!(pairs, [(1, TierId(1), 5, TierId(0))]);
        let pairs = [(1, TierId(1), 5, TierId(0)), (2, TierId(1), 6, TierId(0))];
        let mut applied = Applied::default();
        let ups = promotions(&pairs, &HashSet::from([2]), &mut applied);
        assert_eq!(ups, [(6, TierId(0))]);
        assert_eq!(applied.failed.iter().map(|f| f.1).sum::<u64>(), 1);
    }

    #[test]
    fn pairs_within_one_process_go_to_its_mover_the_rest_to_the_machine() {
        let pairs =
            [(1, TierId(1), 5, TierId(0)), (2, TierId(1), 6, TierId(0)), (3, TierId(1), 7, TierId(0))];
        let owner = [(Some(0), Some(0)), (Some(0), Some(1)), (Some(1), Some(1))];
        let (own, across) = split_by_member(&pairs, &owner);
        assert_eq!(own[&0], [pairs[0]]);
        assert_eq!(own[&1], [pairs[2]]);
        assert_eq!(across, [pairs[1]]);
        let (own, across) = split_by_member(&pairs[..1], &[(None, Some(0))]);
        assert!(own.is_empty() && across.len() == 1);
    }
}
