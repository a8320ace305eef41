//! Which trackers a policy gets on the live machine, chosen by name: from what the policy asks
//! for ([`Requirements`]), the config's `[trackers]` choices ([`Choice`]) and what the kernel
//! offers ([`Kernel`]). [`check`] refuses, before a program is started or bound, what the host
//! cannot give; [`build`] starts the trackers once the program is there.
//!
//! The kernel is a trait so that the choice is testable on a host that has none of it (the
//! development machines have no soft-dirty, no DAMON and no perf memory events): the machine
//! uses [`HostKernel`], the tests a fake.

use super::damon::{self, Damon, Regions};
use super::idle_page::IdlePage;
use super::perf_sampler::{self, PerfSampler};
use super::soft_dirty::{self, SoftDirty};
use super::write_faults::{FaultSampling, FaultTracker};
use super::{LiveTracker, TrackerSet};
use crate::config::{ReferencedSource, SamplingSource, TrackerConfig};
use crate::huge_view::HUGE_BYTES;
use crate::machine::Attach;
use crate::process::{ProcessMemory, PAGE_BYTES};
use crate::userfaultfd::{self, Unavailable, Userfaultfd};
use std::time::Duration;
use terrace_model::{MachineError, Mechanism, MemoryMode, Requirements, TrackerKind};

/// What the kernel offers the trackers, and starting each one on it.
pub trait Kernel {
    /// Whether soft-dirty tracking works (CONFIG_MEM_SOFT_DIRTY).
    fn soft_dirty(&self) -> bool;
    /// Whether DAMON's sysfs interface is there.
    fn damon(&self) -> bool;
    /// Whether the CPU samples loads and stores with data addresses, or why not.
    fn perf_events(&self) -> Result<(), String>;
    /// Whether userfaultfd write-protect faults work for Terrace, or why not.
    fn userfaultfd_write_protect(&self) -> Result<(), Unavailable>;
    /// The idle-page bitmap for the program whose memory is `memory`, or why it cannot be used.
    fn open_idle_page(&self, memory: &ProcessMemory) -> Result<Box<dyn LiveTracker>, String>;
    /// A kdamond on `pid`, and its regions.
    fn start_damon(&self, pid: i32) -> Result<Box<dyn Regions>, String>;
    /// The perf sampler on every thread of `pid`, one sample in `period`.
    fn open_perf(&self, pid: i32, period: u64) -> Result<Box<dyn LiveTracker>, String>;
    /// The fault sampler on the program's userfaultfd, as `how` says ([`FaultTracker::start`]).
    fn start_fault_sampler(
        &self,
        uffd: Userfaultfd,
        how: FaultSampling,
    ) -> Result<Box<dyn LiveTracker>, String>;
}

/// This host's kernel.
pub struct HostKernel;

impl Kernel for HostKernel {
    fn soft_dirty(&self) -> bool {
        soft_dirty::works_here()
    }
    fn damon(&self) -> bool {
        damon::available()
    }
    fn perf_events(&self) -> Result<(), String> {
        perf_sampler::memory_events().map(|_| ())
    }
    fn userfaultfd_write_protect(&self) -> Result<(), Unavailable> {
        userfaultfd::probe_write_protect()
    }
    fn open_idle_page(&self, memory: &ProcessMemory) -> Result<Box<dyn LiveTracker>, String> {
        Ok(Box::new(IdlePage::open(memory)?))
    }
    fn start_damon(&self, pid: i32) -> Result<Box<dyn Regions>, String> {
        Ok(Box::new(Damon::start(pid).map_err(|e| e.to_string())?))
    }
    fn open_perf(&self, pid: i32, period: u64) -> Result<Box<dyn LiveTracker>, String> {
        let events = perf_sampler::memory_events()?;
        Ok(Box::new(PerfSampler::open(pid, &events, period).map_err(|e| e.to_string())?))
    }
    fn start_fault_sampler(
        &self,
        uffd: Userfaultfd,
        how: FaultSampling,
    ) -> Result<Box<dyn LiveTracker>, String> {
        Ok(Box::new(FaultTracker::start(uffd, how).map_err(|e| e.to_string())?))
    }
}

/// The config's choices: `[trackers] referenced`, `sampling` and `fault_sample`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub referenced: ReferencedSource,
    pub sampling: SamplingSource,
    /// Units the fault sampler protects per epoch.
    pub fault_sample: usize,
    /// The fault sampler's epoch.
    pub fault_epoch: Duration,
}

impl Default for Choice {
    fn default() -> Self {
        Choice::from(&TrackerConfig::default())
    }
}

impl From<&TrackerConfig> for Choice {
    fn from(c: &TrackerConfig) -> Self {
        Choice {
            referenced: c.referenced,
            sampling: c.sampling,
            fault_sample: c.fault_sample,
            fault_epoch: Duration::from_millis(c.fault_epoch_ms),
        }
    }
}

/// What [`build`] starts the trackers on.
pub struct Program<'a> {
    pub memory: &'a ProcessMemory,
    /// A userfaultfd of the program, created inside it at its start, if it has one.
    pub fault_fd: Option<Userfaultfd>,
    /// Whether the policy works on 2 MiB pages (the fault sampler then protects 2 MiB ranges).
    pub huge: bool,
    /// A process that joined the group later (a child of the program, a cgroup's process): the
    /// one kdamond, which Terrace needs to itself, watches the program only, so the referenced
    /// bit falls back to the idle-page bitmap or soft-dirty and reads are not sampled; without a
    /// userfaultfd (the machine makes one inside a process joining a `terrace run` tree where
    /// the policy needs it) its writes are not sampled either. Its choices are logged at debug level
    /// (the machine says once that it joined and with which trackers).
    pub descendant: bool,
}

/// Logs a tracker choice: at info for the program, at debug for a process that joined later.
macro_rules! say {
    ($quiet:expr, $($arg:tt)*) => {
        if $quiet { tracing::debug!($($arg)*) } else { tracing::info!($($arg)*) }
    };
}

/// Why a policy that samples accesses or protects its copies cannot manage a process that is
/// already running.
const USERFAULTFD_NEEDS_RUN: &str = "this machine has no PMU with load/store sampling, and the fault \
    sampler (which also write-protects copies) creates its userfaultfd inside the program as it \
    starts: start the program with `terrace run --policy P -- PROGRAM` (a running process cannot \
    be given one)";

/// The same, when the config chose the fault sampler.
const FAULTS_NEED_RUN: &str = "the config chooses the fault sampler ([trackers] sampling = \"faults\"), \
    which creates its userfaultfd inside the program as it starts: start the program with \
    `terrace run --policy P -- PROGRAM` (a running process cannot be given one), or set [trackers] \
    sampling = \"auto\"";

fn needs_run(sampling: SamplingSource) -> String {
    match sampling {
        SamplingSource::Faults => FAULTS_NEED_RUN,
        _ => USERFAULTFD_NEEDS_RUN,
    }
    .into()
}

/// Why the config's `sampling = "perf"` cannot be had here.
fn no_perf(why: &str) -> MachineError {
    MachineError::MissingTracker {
        tracker: "access sampling",
        hint: format!(
            "the config asks for the perf sampler but {why}; set [trackers] sampling = \"auto\" to use the \
             fault sampler"
        ),
    }
}

fn asks(req: &Requirements, kind: TrackerKind) -> bool {
    req.trackers.iter().any(|t| t.kind == kind)
}

/// Whether the fault sampler samples accesses here: the config chose it, or it chose `auto` and
/// the CPU has no perf sampler.
fn faults_sample(kernel: &dyn Kernel, sampling: SamplingSource) -> bool {
    match sampling {
        SamplingSource::Auto => kernel.perf_events().is_err(),
        SamplingSource::Perf => false,
        SamplingSource::Faults => true,
    }
}

/// Whether a policy needs a userfaultfd of its program: to write-protect its copies, or to sample
/// accesses with the fault sampler.
pub fn needs_userfaultfd(kernel: &dyn Kernel, req: &Requirements, sampling: SamplingSource) -> bool {
    req.mechanisms.contains(&Mechanism::WriteProtectedCopies)
        || (asks(req, TrackerKind::Sampling) && faults_sample(kernel, sampling))
}

/// Whether this kernel can give a policy the trackers it asks for (and the userfaultfd its copies
/// need), for a program attached as `attach`; says what is missing and how to get it.
pub fn check(
    kernel: &dyn Kernel,
    req: &Requirements,
    attach: Attach,
    sampling: SamplingSource,
) -> Result<(), MachineError> {
    for t in &req.trackers {
        match t.kind {
            TrackerKind::PageBits => {
                if !kernel.soft_dirty() {
                    return Err(MachineError::MissingTracker {
                        tracker: "page-table bits",
                        hint: "this kernel has no soft-dirty tracking (CONFIG_MEM_SOFT_DIRTY); \
                               `terrace doctor` lists what it has"
                            .into(),
                    });
                }
            }
            TrackerKind::Sampling if sampling == SamplingSource::Perf => {
                kernel.perf_events().map_err(|why| no_perf(&why))?;
            }
            // Checked below, with protected copies: both need the fault sampler.
            TrackerKind::Sampling => {}
            TrackerKind::Future => {
                return Err(MachineError::MissingTracker {
                    tracker: "future accesses",
                    hint: "only the simulator knows the future; run this policy with `terrace sim`".into(),
                })
            }
            // The kernel's own tiering consumes its hint faults; nothing to observe here.
            TrackerKind::HintFaults if req.memory_mode == MemoryMode::KernelTiering => {}
            // `terrace run` preloads the object runtime into the program it starts.
            TrackerKind::ObjectEvents if attach == Attach::Start => {}
            TrackerKind::ObjectEvents => {
                return Err(MachineError::MissingTracker {
                    tracker: "object events",
                    hint: "allocation and free events come from the object runtime, which is loaded into a \
                           program as it starts (LD_PRELOAD), never into a running one: start it with \
                           `terrace run --objects --policy P -- PROGRAM`"
                        .into(),
                })
            }
            TrackerKind::HintFaults => {
                return Err(MachineError::MissingTracker {
                    tracker: "NUMA hint faults",
                    hint: "the kernel reports hint faults only as totals in /proc/vmstat; only a policy \
                           carried out by the kernel's own tiering (kernel-tiering) can use them live"
                        .into(),
                })
            }
        }
    }
    if needs_userfaultfd(kernel, req, sampling) {
        let tracker =
            if asks(req, TrackerKind::Sampling) { "access sampling" } else { "write-protected copies" };
        if attach == Attach::Running {
            return Err(MachineError::MissingTracker { tracker, hint: needs_run(sampling) });
        }
        if let Err(u) = kernel.userfaultfd_write_protect() {
            return Err(MachineError::MissingTracker {
                tracker,
                hint: format!("{}; {}", u.detail, u.enable),
            });
        }
    }
    Ok(())
}

/// Starts the trackers a policy gets: soft-dirty and a referenced-bit source for page-table bits
/// (the idle-page bitmap, else DAMON, else soft-dirty alone, as `choice.referenced` allows); for
/// access sampling the perf sampler or the fault sampler with DAMON's reads (as
/// `choice.sampling` allows); the fault sampler for write-protected copies. Each choice is
/// logged; what the config insists on and the kernel lacks is refused.
pub fn build(
    kernel: &dyn Kernel,
    req: &Requirements,
    choice: &Choice,
    program: Program<'_>,
) -> Result<TrackerSet, MachineError> {
    let pid = program.memory.pid();
    let quiet = program.descendant;
    let without_damon = WithoutDamon(kernel);
    let kernel: &dyn Kernel = if program.descendant { &without_damon } else { kernel };
    let mut set = TrackerSet::new(asks(req, TrackerKind::PageBits));
    // One kdamond serves the referenced bit and the fault sampler's reads; it comes last, after
    // the trackers whose bits (soft-dirty) and samples (the fault sampler's writes) come first.
    let mut damon: Option<Box<dyn Regions>> = None;
    let mut damon_referenced = false;
    if set.page_bits() {
        set.push(Box::new(SoftDirty::default()));
        let referenced = match choice.referenced {
            // DAMON watches the program only: a later process takes the next source.
            ReferencedSource::Damon if program.descendant => ReferencedSource::Auto,
            r => r,
        };
        damon = referenced_bit(kernel, referenced, program.memory, &mut set, quiet)?;
        damon_referenced = damon.is_some();
    }
    let sampling = req.trackers.iter().find(|t| t.kind == TrackerKind::Sampling).map(|t| t.period as u64);
    let mut faults_sample = false;
    if let Some(period) = sampling {
        faults_sample = !perf(kernel, choice.sampling, pid, period, &mut set, quiet)?;
    }
    let mut damon_reads = false;
    if faults_sample || req.mechanisms.contains(&Mechanism::WriteProtectedCopies) {
        let Some(fd) = program.fault_fd else {
            if program.descendant {
                // Its writes are not sampled and its copies not protected; no kdamond was started
                // for it, so there is nothing else to add.
                tracing::debug!("pid {pid}: no userfaultfd, so its writes are not sampled");
                return Ok(set);
            }
            let tracker = if sampling.is_some() { "access sampling" } else { "write-protected copies" };
            return Err(MachineError::MissingTracker { tracker, hint: needs_run(choice.sampling) });
        };
        let unit = if program.huge { HUGE_BYTES } else { PAGE_BYTES };
        let faults = kernel
            .start_fault_sampler(
                fd,
                FaultSampling {
                    pid,
                    unit,
                    per_epoch: choice.fault_sample,
                    epoch: choice.fault_epoch,
                    sampling: faults_sample,
                    guard_copies: req.mechanisms.contains(&Mechanism::WriteProtectedCopies),
                },
            )
            .map_err(|e| MachineError::MissingTracker {
                tracker: "access sampling",
                hint: format!("the fault sampler could not start ({e}); `terrace doctor` checks userfaultfd"),
            })?;
        set.push(faults);
        if faults_sample {
            let reads = if !kernel.damon() {
                "no reads (this kernel has no DAMON)".to_string()
            } else if damon.is_some() {
                damon_reads = true;
                "reads from DAMON regions' access counts".to_string()
            } else {
                match kernel.start_damon(pid) {
                    Ok(regions) => {
                        damon = Some(regions);
                        damon_reads = true;
                        "reads from DAMON regions' access counts".to_string()
                    }
                    Err(e) => format!("no reads ({e})"),
                }
            };
            say!(
                quiet,
                "access sampling ({}): writes from the fault sampler, {} {} write-protected every {} ms; {reads}",
                match choice.sampling {
                    SamplingSource::Faults => "the fault sampler, as [trackers] sampling = \"faults\" asks",
                    _ => "substitute for PEBS/IBS, which this machine lacks",
                },
                choice.fault_sample.max(1),
                if unit == PAGE_BYTES { "pages" } else { "2 MiB ranges" },
                choice.fault_epoch.as_millis(),
            );
        } else {
            say!(quiet, "copies are write-protected with userfaultfd: writes wait for the copy");
        }
    }
    if let Some(regions) = damon {
        // The fault sampler catches at most one write per unit per epoch (and per tick): reads
        // are put on that scale.
        let epoch_ns = choice.fault_epoch.as_nanos() as u64;
        let reads = damon_reads.then(|| damon::ticks_per_aggregation(req.tick_ns.map(|t| t.max(epoch_ns))));
        set.push(Box::new(Damon::new(regions, damon_referenced, reads)));
    }
    Ok(set)
}

/// The referenced bit's source beside soft-dirty, as `referenced` allows: adds the idle-page
/// bitmap to `set`, or returns the kdamond to add, or neither (soft-dirty alone).
fn referenced_bit(
    kernel: &dyn Kernel,
    referenced: ReferencedSource,
    memory: &ProcessMemory,
    set: &mut TrackerSet,
    quiet: bool,
) -> Result<Option<Box<dyn Regions>>, MachineError> {
    if matches!(referenced, ReferencedSource::IdlePage | ReferencedSource::Auto) {
        match kernel.open_idle_page(memory) {
            Ok(idle) => {
                say!(quiet, "page-table bits: dirty from soft-dirty, referenced from the idle-page bitmap");
                set.push(idle);
                return Ok(None);
            }
            Err(hint) if referenced == ReferencedSource::IdlePage => {
                return Err(MachineError::MissingTracker { tracker: "idle-page bitmap", hint })
            }
            Err(hint) => tracing::debug!("no idle-page bitmap: {hint}"),
        }
    }
    let want = match referenced {
        ReferencedSource::SoftDirty | ReferencedSource::IdlePage => false,
        ReferencedSource::Damon if !kernel.damon() => {
            return Err(MachineError::MissingTracker {
                tracker: "DAMON regions",
                hint: "the config asks for DAMON but this kernel has no DAMON sysfs; \
                       set [trackers] referenced = \"auto\""
                    .into(),
            })
        }
        ReferencedSource::Damon => true,
        ReferencedSource::Auto => kernel.damon(),
    };
    let why = match want.then(|| kernel.start_damon(memory.pid())) {
        Some(Ok(regions)) => {
            say!(quiet, "page-table bits: dirty from soft-dirty, referenced from DAMON regions");
            return Ok(Some(regions));
        }
        Some(Err(e)) => e,
        None if referenced == ReferencedSource::SoftDirty => "as configured".into(),
        None => "this kernel has no DAMON".into(),
    };
    say!(
        quiet,
        "page-table bits: dirty from soft-dirty; referenced also from soft-dirty ({why}; no idle-page \
         bitmap either), so read-only pages look idle"
    );
    Ok(None)
}

/// Access sampling from the perf sampler, one in `period`, where `sampling` allows it and the CPU
/// has one; returns whether it started (else the fault sampler is to sample).
fn perf(
    kernel: &dyn Kernel,
    sampling: SamplingSource,
    pid: i32,
    period: u64,
    set: &mut TrackerSet,
    quiet: bool,
) -> Result<bool, MachineError> {
    if sampling == SamplingSource::Faults {
        return Ok(false);
    }
    if let Err(why) = kernel.perf_events() {
        if sampling == SamplingSource::Perf {
            return Err(no_perf(&why));
        }
        say!(quiet, "no perf sampling ({why}); using the fault sampler");
        return Ok(false);
    }
    match kernel.open_perf(pid, period) {
        Ok(p) => {
            say!(quiet, "access sampling: perf loads and stores with data addresses, one in {period}");
            set.push(p);
            Ok(true)
        }
        Err(e) if sampling == SamplingSource::Perf => Err(MachineError::MissingTracker {
            tracker: "access sampling",
            hint: format!(
                "the perf sampler could not start ({e}); set [trackers] sampling = \"auto\" to use the fault \
                 sampler"
            ),
        }),
        Err(why) => {
            say!(quiet, "no perf sampling ({why}); using the fault sampler");
            Ok(false)
        }
    }
}

/// The kernel as a process that joined later sees it: DAMON's one kdamond watches the program.
struct WithoutDamon<'a>(&'a dyn Kernel);

impl Kernel for WithoutDamon<'_> {
    fn soft_dirty(&self) -> bool {
        self.0.soft_dirty()
    }
    fn damon(&self) -> bool {
        false
    }
    fn perf_events(&self) -> Result<(), String> {
        self.0.perf_events()
    }
    fn userfaultfd_write_protect(&self) -> Result<(), Unavailable> {
        self.0.userfaultfd_write_protect()
    }
    fn open_idle_page(&self, memory: &ProcessMemory) -> Result<Box<dyn LiveTracker>, String> {
        self.0.open_idle_page(memory)
    }
    fn start_damon(&self, _pid: i32) -> Result<Box<dyn Regions>, String> {
        Err("DAMON's kdamond watches the program only".into())
    }
    fn open_perf(&self, pid: i32, period: u64) -> Result<Box<dyn LiveTracker>, String> {
        self.0.open_perf(pid, period)
    }
    fn start_fault_sampler(
        &self,
        uffd: Userfaultfd,
        how: FaultSampling,
    ) -> Result<Box<dyn LiveTracker>, String> {
        self.0.start_fault_sampler(uffd, how)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trackers::damon::Region;
    use std::cell::Cell;
    use terrace_model::TrackerRequest;

    /// A kernel with what each test gives it; its trackers do nothing but have their names.
    struct Fake {
        soft_dirty: bool,
        idle: Result<(), &'static str>,
        damon: bool,
        damon_start: Result<(), &'static str>,
        perf: Result<(), &'static str>,
        perf_open: Result<(), &'static str>,
        uffd: bool,
        /// Kdamonds started: one must serve the referenced bit and the reads alike.
        kdamonds: Cell<u32>,
    }

    /// This development host: one node, no soft-dirty, no DAMON, no perf memory events, no
    /// idle-page bitmap; userfaultfd write-protect works.
    fn host() -> Fake {
        Fake {
            soft_dirty: false,
            idle: Err("/sys/kernel/mm/page_idle/bitmap is missing"),
            damon: false,
            damon_start: Err("DAMON's sysfs interface is missing"),
            perf: Err(
                "this CPU offers no load/store sampling with data addresses (PEBS or IBS) to this kernel",
            ),
            perf_open: Ok(()),
            uffd: true,
            kdamonds: Cell::new(0),
        }
    }

    /// The guest of tests/vm (Debian's 6.12 kernel under QEMU): soft-dirty and DAMON, no PMU.
    fn guest() -> Fake {
        Fake { soft_dirty: true, damon: true, damon_start: Ok(()), ..host() }
    }

    /// A server with PEBS, soft-dirty and DAMON.
    fn pebs() -> Fake {
        Fake { perf: Ok(()), ..guest() }
    }

    struct Named(&'static str);
    impl LiveTracker for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn address_space_replaced(&mut self, _: i32) -> Result<(), String> {
            Ok(())
        }
    }

    struct NoRegions;
    impl Regions for NoRegions {
        fn latest(&self) -> Result<(u64, Vec<Region>), String> {
            Ok((0, Vec::new()))
        }
        fn samples_per_aggregation(&self) -> u32 {
            20
        }
    }

    impl Kernel for Fake {
        fn soft_dirty(&self) -> bool {
            self.soft_dirty
        }
        fn damon(&self) -> bool {
            self.damon
        }
        fn perf_events(&self) -> Result<(), String> {
            self.perf.map_err(String::from)
        }
        fn userfaultfd_write_protect(&self) -> Result<(), Unavailable> {
            if self.uffd {
                return Ok(());
            }
            Err(Unavailable {
                detail: "userfaultfd() failed: Operation not permitted (os error 1)".into(),
                enable: "run as root (CAP_SYS_PTRACE), or sysctl vm.unprivileged_userfaultfd=1",
            })
        }
        fn open_idle_page(&self, _: &ProcessMemory) -> Result<Box<dyn LiveTracker>, String> {
            self.idle.map_err(String::from)?;
            Ok(Box::new(Named("idle-page bitmap")))
        }
        fn start_damon(&self, _: i32) -> Result<Box<dyn Regions>, String> {
            assert!(self.damon, "DAMON started on a kernel without it");
            self.damon_start.map_err(String::from)?;
            self.kdamonds.set(self.kdamonds.get() + 1);
            Ok(Box::new(NoRegions))
        }
        fn open_perf(&self, _: i32, period: u64) -> Result<Box<dyn LiveTracker>, String> {
            assert!(self.perf.is_ok(), "perf opened on a CPU without memory events");
            assert_eq!(period, 19_997);
            self.perf_open.map_err(String::from)?;
            Ok(Box::new(Named("perf sampler")))
        }
        fn start_fault_sampler(
            &self,
            _: Userfaultfd,
            how: FaultSampling,
        ) -> Result<Box<dyn LiveTracker>, String> {
            assert!(how.unit == PAGE_BYTES || how.unit == HUGE_BYTES);
            assert_eq!((how.per_epoch, how.epoch), (256, Duration::from_millis(250)));
            Ok(Box::new(Named(match (how.sampling, how.guard_copies) {
                (true, true) => "fault sampler, guarding copies",
                (true, false) => "fault sampler",
                (false, _) => "fault sampler (copies only)",
            })))
        }
    }

    /// age, ambix: page-table bits.
    fn page_bits() -> Requirements {
        Requirements { trackers: vec![TrackerRequest::page_bits()], ..Requirements::default() }
    }
    /// hemem, hpwp: access sampling at HeMem's period, copies write-protected.
    fn sampling() -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::sampling(19_997)],
            mechanisms: vec![Mechanism::WriteProtectedCopies],
            ..Requirements::default()
        }
    }
    /// ping-pong-wp: no tracker, copies write-protected.
    fn protected_copies() -> Requirements {
        Requirements { mechanisms: vec![Mechanism::WriteProtectedCopies], ..Requirements::default() }
    }

    fn choice(referenced: ReferencedSource, sampling: SamplingSource) -> Choice {
        Choice { referenced, sampling, ..Choice::default() }
    }

    /// A userfaultfd stand-in for the fake kernel, which never uses it.
    fn fd() -> Option<Userfaultfd> {
        Some(Userfaultfd::from_fd(std::fs::File::open("/dev/null").unwrap().into()))
    }

    /// The names of the trackers `build` starts on `kernel` (against this test process, which
    /// the fake kernel never touches), or its refusal in one line.
    fn built(
        kernel: &Fake,
        req: &Requirements,
        choice: Choice,
        fault_fd: Option<Userfaultfd>,
    ) -> Result<Vec<&'static str>, String> {
        built_for(kernel, req, choice, fault_fd, false)
    }

    /// As [`built`], for the program (`descendant` false) or a process that joined later.
    fn built_for(
        kernel: &Fake,
        req: &Requirements,
        choice: Choice,
        fault_fd: Option<Userfaultfd>,
        descendant: bool,
    ) -> Result<Vec<&'static str>, String> {
        let memory = ProcessMemory::attach(std::process::id() as i32).unwrap();
        let program = Program { memory: &memory, fault_fd, huge: false, descendant };
        build(kernel, req, &choice, program).map(|set| set.names()).map_err(|e| e.to_string())
    }

    /// A process that joined the program later gets no kdamond (the one there is watches the
    /// program): its referenced bit falls back to soft-dirty even where the config names DAMON,
    /// and without a userfaultfd it is managed without sampled writes rather than refused.
    #[test]
    fn a_later_process_gets_what_is_per_process_and_never_a_second_kdamond() {
        let k = guest();
        let damon = choice(ReferencedSource::Damon, SamplingSource::Auto);
        for c in [auto(), damon] {
            assert_eq!(built_for(&k, &page_bits(), c, None, true), Ok(vec!["soft-dirty"]));
        }
        assert_eq!(built_for(&k, &sampling(), auto(), None, true), Ok(vec![]));
        assert_eq!(
            built_for(&k, &sampling(), auto(), fd(), true),
            Ok(vec!["fault sampler, guarding copies"])
        );
        assert_eq!(k.kdamonds.get(), 0, "no kdamond for a later process");
    }

    fn auto() -> Choice {
        Choice::default()
    }

    #[test]
    fn this_host_refuses_page_bits_and_samples_with_the_fault_sampler() {
        let k = host();
        let e = check(&k, &page_bits(), Attach::Start, SamplingSource::Auto).unwrap_err().to_string();
        assert_eq!(
            e,
            "this machine has no page-table bits tracker: this kernel has no soft-dirty tracking \
             (CONFIG_MEM_SOFT_DIRTY); `terrace doctor` lists what it has"
        );
        // No PMU: access sampling takes the program's userfaultfd, so only a program Terrace starts.
        assert!(needs_userfaultfd(&k, &sampling(), SamplingSource::Auto));
        assert_eq!(
            check(&k, &sampling(), Attach::Start, SamplingSource::Auto).map_err(|e| e.to_string()),
            Ok(())
        );
        let e = check(&k, &sampling(), Attach::Running, SamplingSource::Auto).unwrap_err().to_string();
        assert_eq!(e, format!("this machine has no access sampling tracker: {USERFAULTFD_NEEDS_RUN}"));
        // No DAMON: writes only.
        assert_eq!(built(&k, &sampling(), auto(), fd()), Ok(vec!["fault sampler, guarding copies"]));
        // Started without a userfaultfd (it could not be created in the program).
        let e = built(&k, &sampling(), auto(), None).unwrap_err();
        assert_eq!(e, format!("this machine has no access sampling tracker: {USERFAULTFD_NEEDS_RUN}"));
        // Protected copies alone.
        assert!(needs_userfaultfd(&k, &protected_copies(), SamplingSource::Auto));
        let e =
            check(&k, &protected_copies(), Attach::Running, SamplingSource::Auto).unwrap_err().to_string();
        assert!(e.starts_with("this machine has no write-protected copies tracker: "), "{e}");
        assert_eq!(built(&k, &protected_copies(), auto(), fd()), Ok(vec!["fault sampler (copies only)"]));
        // A policy without trackers gets none, and needs no userfaultfd.
        assert!(!needs_userfaultfd(&k, &Requirements::default(), SamplingSource::Auto));
        assert_eq!(built(&k, &Requirements::default(), auto(), None), Ok(vec![]));
    }

    #[test]
    fn the_perf_sampler_is_refused_by_name_where_the_cpu_has_none() {
        let k = host();
        let perf = SamplingSource::Perf;
        assert!(!needs_userfaultfd(&k, &Requirements { mechanisms: vec![], ..sampling() }, perf));
        let want = "this machine has no access sampling tracker: the config asks for the perf sampler but \
                    this CPU offers no load/store sampling with data addresses (PEBS or IBS) to this kernel; \
                    set [trackers] sampling = \"auto\" to use the fault sampler";
        for attach in [Attach::Start, Attach::Running] {
            assert_eq!(check(&k, &sampling(), attach, perf).unwrap_err().to_string(), want);
        }
        assert_eq!(built(&k, &sampling(), choice(ReferencedSource::Auto, perf), fd()).unwrap_err(), want);
        // A policy that does not sample does not care.
        assert!(check(&k, &protected_copies(), Attach::Start, perf).is_ok());
    }

    #[test]
    fn no_userfaultfd_refuses_what_needs_the_fault_sampler() {
        let k = Fake { uffd: false, ..host() };
        let e = check(&k, &sampling(), Attach::Start, SamplingSource::Auto).unwrap_err().to_string();
        assert_eq!(
            e,
            "this machine has no access sampling tracker: userfaultfd() failed: Operation not permitted \
             (os error 1); run as root (CAP_SYS_PTRACE), or sysctl vm.unprivileged_userfaultfd=1"
        );
    }

    #[test]
    fn the_guest_gets_soft_dirty_with_damon_and_the_fault_sampler_with_damons_reads() {
        let k = guest();
        assert!(check(&k, &page_bits(), Attach::Running, SamplingSource::Auto).is_ok());
        assert_eq!(built(&k, &page_bits(), auto(), None), Ok(vec!["soft-dirty", "DAMON (referenced)"]));
        let soft = choice(ReferencedSource::SoftDirty, SamplingSource::Auto);
        assert_eq!(built(&k, &page_bits(), soft, None), Ok(vec!["soft-dirty"]));
        let damon = choice(ReferencedSource::Damon, SamplingSource::Auto);
        assert_eq!(built(&k, &page_bits(), damon, None), Ok(vec!["soft-dirty", "DAMON (referenced)"]));
        let e = built(&k, &page_bits(), choice(ReferencedSource::IdlePage, SamplingSource::Auto), None);
        assert_eq!(
            e.unwrap_err(),
            "this machine has no idle-page bitmap tracker: /sys/kernel/mm/page_idle/bitmap is missing"
        );
        // Sampling: the fault sampler's writes, then DAMON's reads.
        assert_eq!(
            built(&k, &sampling(), auto(), fd()),
            Ok(vec!["fault sampler, guarding copies", "DAMON (reads)"])
        );
        // Both at once: one kdamond for the referenced bit and the reads, after the fault sampler.
        let both = Requirements {
            trackers: vec![TrackerRequest::page_bits(), TrackerRequest::sampling(19_997)],
            ..sampling()
        };
        assert_eq!(
            built(&k, &both, auto(), fd()),
            Ok(vec!["soft-dirty", "fault sampler, guarding copies", "DAMON (referenced, reads)"])
        );
        assert_eq!(k.kdamonds.get(), 4);
        // A kdamond that will not start (another user has DAMON): soft-dirty alone, writes alone.
        let busy = Fake { damon_start: Err("DAMON is already in use here (1 kdamonds exist)"), ..guest() };
        assert_eq!(built(&busy, &page_bits(), auto(), None), Ok(vec!["soft-dirty"]));
        assert_eq!(built(&busy, &sampling(), auto(), fd()), Ok(vec!["fault sampler, guarding copies"]));
    }

    #[test]
    fn damon_and_the_idle_page_bitmap_are_refused_by_name_where_the_kernel_lacks_them() {
        let k = Fake { damon: false, ..guest() };
        let e =
            built(&k, &page_bits(), choice(ReferencedSource::Damon, SamplingSource::Auto), None).unwrap_err();
        assert_eq!(
            e,
            "this machine has no DAMON regions tracker: the config asks for DAMON but this kernel has no \
             DAMON sysfs; set [trackers] referenced = \"auto\""
        );
        assert_eq!(built(&k, &page_bits(), auto(), None), Ok(vec!["soft-dirty"]));
        // Where the bitmap is there, auto prefers it to DAMON, and idle-page insists on it.
        let idle = Fake { idle: Ok(()), ..guest() };
        assert_eq!(built(&idle, &page_bits(), auto(), None), Ok(vec!["soft-dirty", "idle-page bitmap"]));
        let insist = choice(ReferencedSource::IdlePage, SamplingSource::Auto);
        assert_eq!(built(&idle, &page_bits(), insist, None), Ok(vec!["soft-dirty", "idle-page bitmap"]));
        assert_eq!(idle.kdamonds.get(), 0);
    }

    #[test]
    fn a_pmu_gets_the_perf_sampler_unless_the_config_chooses_the_fault_sampler() {
        let k = pebs();
        let no_copies = Requirements { mechanisms: vec![], ..sampling() };
        assert!(!needs_userfaultfd(&k, &no_copies, SamplingSource::Auto));
        assert!(check(&k, &no_copies, Attach::Running, SamplingSource::Auto).is_ok());
        assert_eq!(built(&k, &no_copies, auto(), None), Ok(vec!["perf sampler"]));
        assert_eq!(
            built(&k, &no_copies, choice(ReferencedSource::Auto, SamplingSource::Perf), None),
            Ok(vec!["perf sampler"])
        );
        // Protected copies still take the fault sampler, which then only guards them.
        assert!(needs_userfaultfd(&k, &sampling(), SamplingSource::Auto));
        assert_eq!(
            built(&k, &sampling(), auto(), fd()),
            Ok(vec!["perf sampler", "fault sampler (copies only)"])
        );
        // sampling = "faults": the fault sampler and DAMON's reads, only for a program Terrace starts.
        let faults = SamplingSource::Faults;
        assert!(needs_userfaultfd(&k, &no_copies, faults));
        assert_eq!(
            built(&k, &no_copies, choice(ReferencedSource::Auto, faults), fd()),
            Ok(vec!["fault sampler", "DAMON (reads)"])
        );
        let e = check(&k, &no_copies, Attach::Running, faults).unwrap_err().to_string();
        assert_eq!(e, format!("this machine has no access sampling tracker: {FAULTS_NEED_RUN}"));
        // perf_event_open failing after all: auto falls back to the fault sampler, perf refuses.
        let broken = Fake { perf_open: Err("Permission denied (os error 13)"), ..pebs() };
        assert_eq!(
            built(&broken, &sampling(), auto(), fd()),
            Ok(vec!["fault sampler, guarding copies", "DAMON (reads)"])
        );
        let e = built(&broken, &no_copies, auto(), None).unwrap_err();
        assert_eq!(e, format!("this machine has no access sampling tracker: {USERFAULTFD_NEEDS_RUN}"));
        let e = built(&broken, &sampling(), choice(ReferencedSource::Auto, SamplingSource::Perf), fd())
            .unwrap_err();
        assert_eq!(
            e,
            "this machine has no access sampling tracker: the perf sampler could not start (Permission denied \
             (os error 13)); set [trackers] sampling = \"auto\" to use the fault sampler"
        );
    }

    #[test]
    fn the_simulators_trackers_are_refused_on_any_kernel() {
        let k = pebs();
        let future = Requirements { trackers: vec![TrackerRequest::future(4)], ..Requirements::default() };
        let e = check(&k, &future, Attach::Start, SamplingSource::Auto).unwrap_err().to_string();
        assert!(e.starts_with("this machine has no future accesses tracker: only the simulator"), "{e}");
        let hint = TrackerRequest { kind: TrackerKind::HintFaults, period: 1000 };
        let faults = Requirements { trackers: vec![hint], ..Requirements::default() };
        let e = check(&k, &faults, Attach::Start, SamplingSource::Auto).unwrap_err().to_string();
        assert!(e.starts_with("this machine has no NUMA hint faults tracker: "), "{e}");
        let tiering = Requirements { memory_mode: MemoryMode::KernelTiering, ..faults };
        assert!(check(&k, &tiering, Attach::Running, SamplingSource::Auto).is_ok());
        assert_eq!(built(&k, &tiering, auto(), None), Ok(vec![]));
        // Object events come from the runtime `terrace run` preloads; a running process has none.
        let objects =
            Requirements { trackers: vec![TrackerRequest::object_events()], ..Requirements::default() };
        assert!(check(&k, &objects, Attach::Start, SamplingSource::Auto).is_ok());
        let e = check(&k, &objects, Attach::Running, SamplingSource::Auto).unwrap_err().to_string();
        assert!(
            e.starts_with("this machine has no object events tracker: ")
                && e.contains("terrace run --objects"),
            "{e}"
        );
    }
}
