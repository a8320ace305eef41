//! The fault sampler: write-protect a random sample of pages with userfaultfd, count the writes
//! that fault, re-arm each epoch. It works on any kernel with userfaultfd write-protect (5.7+ on
//! x86-64), no performance counters needed; it is the live twin of the simulator's sampling
//! tracker for writes (docs/live.md, "Access sampling").
//!
//! Who lifts a sampled page's protection when the program writes to it ([`Resolver`]):
//! - a handler thread of Terrace's, which reads every fault and lifts the protection at once,
//!   waking the writer, so a write is delayed, never lost. The same descriptor protects pages
//!   while the migrator copies them (HPWP §5.3: "write-protects the page during migration");
//!   a write to such a page waits until its copy is done. Each sampled write waits for a round
//!   trip through Terrace.
//! - where no copy needs guarding and the kernel can (Linux 6.7), the kernel itself, at the fault
//!   (`UFFD_FEATURE_WP_ASYNC`): the write goes on without waiting for Terrace, and the sampler
//!   reads which sampled units were written with PAGEMAP_SCAN ([`crate::pagemap_scan`]).
//!
//! If Terrace dies, the kernel closes the descriptor, which lifts every protection and wakes
//! every waiter.
//!
//! A userfaultfd acts on one address space: when the program execs, the tracker has a new one
//! made inside the new program ([`crate::remote_syscall::create_userfaultfd_in_running`]) and the
//! sampler moves to it ([`WriteFaultSampler::follow`]).

use super::{LiveTracker, ScanView};
use crate::machine::LiveStats;
use crate::migrate::CopyGuard;
use crate::pagemap_scan::PagemapScan;
use crate::userfaultfd::{Userfaultfd, WriteFault, UFFD_FEATURE_PAGEFAULT_FLAG_WP, UFFD_FEATURE_WP_ASYNC};
use crate::warn_limit::WarnLimit;
use rand_core::{Rng as _, SeedableRng};
use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use terrace_model::{AccessKind, Sample};

/// What the handler and the sampler share.
#[derive(Default)]
struct State {
    /// Units (by base address) protected to sample the next write.
    armed: HashSet<u64>,
    /// Units protected while the migrator copies them.
    copying: HashSet<u64>,
    /// Units written since the last `take_written`, one entry per sampled write.
    written: Vec<u64>,
    /// Writes that waited for a copy to finish.
    held: u64,
    faults: u64,
}

struct Shared {
    uffd: Userfaultfd,
    state: Mutex<State>,
    /// Registered ranges, [start, end).
    registered: Mutex<Vec<(u64, u64)>>,
    unit: u64,
    stop: AtomicBool,
    /// Whether a failed PAGEMAP_SCAN was reported (once).
    scan_failed: AtomicBool,
}

impl Shared {
    /// Protects (or releases) one unit, clipped to the registered ranges it overlaps.
    fn protect(&self, base: u64, on: bool) -> bool {
        self.protect_run(base, base + self.unit, on)
    }

    /// Protects (or releases) [start, end), clipped to the registered ranges it overlaps: one
    /// ioctl (one TLB flush) per registered range it touches, however many units it spans.
    /// Whether it overlapped one and every call succeeded: the kernel stops at a piece of
    /// memory the program re-mapped since it was registered, and a release that fails wakes no
    /// writer waiting in its range.
    fn protect_run(&self, start: u64, end: u64, on: bool) -> bool {
        let registered = self.registered.lock().expect("registered lock");
        let (mut any, mut all) = (false, true);
        for &(s, e) in registered.iter() {
            let (a, b) = (start.max(s), end.min(e));
            if a < b {
                any = true;
                all &= self.uffd.write_protect(a, b - a, on).is_ok();
            }
        }
        any && all
    }

    /// Releases the unit at `base`; where that fails, page by page, so that every page that can
    /// be released is, and every writer waiting on one is woken.
    fn release_unit(&self, base: u64) {
        if !self.protect(base, false) {
            for page in (base..base + self.unit).step_by(4096) {
                let _ = self.uffd.write_protect(page, 4096, false);
            }
        }
    }

    /// Protects (or releases) the units of `bases` (sorted, distinct), each run of adjacent
    /// units in one call: changing a page's protection costs a TLB flush on every CPU the
    /// program runs on, so a sample of neighbouring units costs one flush, not one per unit.
    fn protect_units(&self, bases: &[u64], on: bool) {
        let mut i = 0;
        while i < bases.len() {
            let mut j = i + 1;
            while j < bases.len() && bases[j] == bases[j - 1] + self.unit {
                j += 1;
            }
            // A run over a hole the program made since (an unmapped or re-mapped piece) fails:
            // then unit by unit, and a unit's release page by page, so only the hole is left out.
            if !self.protect_run(bases[i], bases[j - 1] + self.unit, on) {
                for &b in &bases[i..j] {
                    if on {
                        self.protect(b, true);
                    } else {
                        self.release_unit(b);
                    }
                }
            }
            i = j;
        }
    }

    /// Takes the armed units the program wrote since the last call, as PAGEMAP_SCAN reports
    /// them after the kernel resolved their faults: one call per run of adjacent armed units.
    /// A unit the program unmapped, mapped again (registered at the next tick) and wrote also
    /// reads as written, its new pages being unprotected (a page only read there is the zero
    /// page, and a hole is not reported); the handler, which sees no fault there, reports
    /// nothing.
    fn collect_kernel_resolved(&self, pagemap: &PagemapScan) {
        let mut st = self.state.lock().expect("sampler lock");
        let mut armed: Vec<u64> = st.armed.iter().copied().collect();
        armed.sort_unstable();
        let mut regions = Vec::new();
        let mut i = 0;
        while i < armed.len() {
            let mut j = i + 1;
            while j < armed.len() && armed[j] == armed[j - 1] + self.unit {
                j += 1;
            }
            if let Err(e) = pagemap.written(armed[i], armed[j - 1] + self.unit, &mut regions) {
                // ESRCH: the program is gone, which the machine sees by itself.
                if e.raw_os_error() != Some(libc::ESRCH) && !self.scan_failed.swap(true, Ordering::Relaxed) {
                    tracing::warn!("fault sampler: PAGEMAP_SCAN failed ({e}), so writes go unsampled");
                }
                return;
            }
            i = j;
        }
        for (start, end) in regions {
            let mut base = start & !(self.unit - 1);
            while base < end {
                if st.armed.remove(&base) {
                    st.written.push(base);
                    st.faults += 1;
                }
                base += self.unit;
            }
        }
    }

    fn handle(&self, faults: &[WriteFault]) {
        let mut st = self.state.lock().expect("sampler lock");
        for f in faults {
            let base = f.addr & !(self.unit - 1);
            st.faults += 1;
            if st.copying.contains(&base) {
                // The migrator lifts this protection when the copy is done, waking the writer.
                st.held += 1;
                continue;
            }
            if st.armed.remove(&base) {
                st.written.push(base);
            }
            // Under the lock, so a copy cannot protect this unit in between and be undone here.
            if !self.protect(base, false) {
                // The unit's release failed, or the fault is outside every range we know: the
                // program re-mapped part of the unit, or moved protected pages, since the ranges
                // were registered. A failed release wakes no one: lift the faulting page's
                // protection directly, or the writer would wait for ever.
                let page = f.addr & !4095;
                if let Err(e) = self.uffd.write_protect(page, 4096, false) {
                    tracing::warn!("fault sampler: cannot release a write at {page:#x}: {e}");
                }
            }
        }
    }
}

/// Counts of the sampler's work, for logs and the metrics endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub faults: u64,
    pub held_for_copy: u64,
}

/// Who lifts a sampled unit's protection when the program writes to it.
enum Resolver {
    /// Terrace's handler thread, reading each fault message (while running: `Some`).
    Handler(Option<JoinHandle<()>>),
    /// The kernel, at the fault; the written units are read from the pagemap of `pid`.
    Kernel { pagemap: PagemapScan, pid: i32 },
}

pub struct WriteFaultSampler {
    shared: Arc<Shared>,
    resolver: Resolver,
    rng: rand_xoshiro::Xoshiro256PlusPlus,
}

impl WriteFaultSampler {
    /// Takes a userfaultfd of the target's address space; `unit` is the sampling and protection
    /// granule in bytes (4 KiB, or 2 MiB so transparent huge pages are never split).
    ///
    /// Its handler thread resolves the faults, so it can also guard copies.
    pub fn start(uffd: Userfaultfd, unit: u64) -> io::Result<Self> {
        assert!(unit.is_power_of_two() && unit >= 4096, "unit must be a page-size power of two");
        let shared = Self::shared(uffd, unit, State::default(), UFFD_FEATURE_PAGEFAULT_FLAG_WP)?;
        let handler = Self::spawn_handler(Arc::clone(&shared))?;
        Ok(WriteFaultSampler {
            shared,
            resolver: Resolver::Handler(Some(handler)),
            rng: SeedableRng::seed_from_u64(0x7e77ace),
        })
    }

    /// [`Self::start`] with the kernel resolving the faults, for a userfaultfd of process `pid`:
    /// no write waits for Terrace, and no copy can be guarded ([`Self::begin_copy`] protects
    /// nothing). Fails if the kernel lacks `UFFD_FEATURE_WP_ASYNC` or the pagemap cannot be
    /// opened ([`crate::userfaultfd::probe_kernel_resolved`] asks first).
    pub fn start_kernel_resolved(uffd: Userfaultfd, unit: u64, pid: i32) -> io::Result<Self> {
        assert!(unit.is_power_of_two() && unit >= 4096, "unit must be a page-size power of two");
        let pagemap = PagemapScan::open(&pid.to_string())?;
        let shared = Self::shared(uffd, unit, State::default(), UFFD_FEATURE_WP_ASYNC)?;
        Ok(WriteFaultSampler {
            shared,
            resolver: Resolver::Kernel { pagemap, pid },
            rng: SeedableRng::seed_from_u64(0x7e77ace),
        })
    }

    /// Whether the kernel resolves the faults (no write waits for Terrace; copies are not
    /// guarded).
    pub fn kernel_resolved(&self) -> bool {
        matches!(self.resolver, Resolver::Kernel { .. })
    }

    /// What the handler and the sampler share, on `uffd` after its API handshake asking for
    /// `feature` (write-protect fault messages, or faults the kernel resolves).
    fn shared(uffd: Userfaultfd, unit: u64, state: State, feature: u64) -> io::Result<Arc<Shared>> {
        uffd.handshake_requiring(feature)?;
        Ok(Arc::new(Shared {
            uffd,
            state: Mutex::new(state),
            registered: Mutex::new(Vec::new()),
            unit,
            stop: AtomicBool::new(false),
            scan_failed: AtomicBool::new(false),
        }))
    }

    /// The handler thread: resolves every fault of `s`'s descriptor until told to stop or the
    /// address space is gone.
    fn spawn_handler(s: Arc<Shared>) -> io::Result<JoinHandle<()>> {
        std::thread::Builder::new().name("terrace-faults".into()).spawn(move || {
            let mut faults = Vec::new();
            while !s.stop.load(Ordering::Relaxed) {
                faults.clear();
                match s.uffd.read_faults(50, &mut faults) {
                    Ok(true) => s.handle(&faults),
                    Ok(false) => break,
                    Err(e) => {
                        tracing::warn!("fault sampler: reading faults failed: {e}");
                        break;
                    }
                }
            }
        })
    }

    /// Moves the sampler to `uffd`, a userfaultfd of the address space the program exec'd into:
    /// a new handler thread reads it and the old one stops. What belonged to the old address
    /// space is gone with it (its registered ranges, the armed sample, copies in progress, the
    /// writes not yet taken); the counts go on. Fails, leaving the sampler as it was, if the new
    /// descriptor refuses write-protect faults.
    pub fn follow(&mut self, uffd: Userfaultfd) -> io::Result<()> {
        let counts = self.counts();
        let state = State { faults: counts.faults, held: counts.held_for_copy, ..State::default() };
        let unit = self.shared.unit;
        let resolver = match &self.resolver {
            Resolver::Handler(_) => {
                let shared = Self::shared(uffd, unit, state, UFFD_FEATURE_PAGEFAULT_FLAG_WP)?;
                let handler = Self::spawn_handler(Arc::clone(&shared))?;
                let old = std::mem::replace(&mut self.shared, shared);
                old.stop.store(true, Ordering::Relaxed);
                Resolver::Handler(Some(handler))
            }
            &Resolver::Kernel { pid, .. } => {
                // The pagemap file, like the descriptor, belongs to the address space it was
                // opened in.
                let pagemap = PagemapScan::open(&pid.to_string())?;
                self.shared = Self::shared(uffd, unit, state, UFFD_FEATURE_WP_ASYNC)?;
                Resolver::Kernel { pagemap, pid }
            }
        };
        if let Resolver::Handler(Some(old_handler)) = std::mem::replace(&mut self.resolver, resolver) {
            let _ = old_handler.join();
        }
        Ok(())
    }

    /// Registers every range of `ranges` ([start, end) of anonymous private memory) not yet
    /// registered. A range the kernel refuses (another userfaultfd has it; not anonymous; the
    /// descriptor belongs to an address space the program left by exec) is skipped and never
    /// sampled; returns those, with the kernel's error, and tries them again at the next call.
    pub fn register(&self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Vec<((u64, u64), io::Error)> {
        let mut refused = Vec::new();
        for (s, e) in ranges {
            if self.shared.registered.lock().expect("registered lock").contains(&(s, e)) {
                continue;
            }
            match self.shared.uffd.register_wp(s, e - s) {
                Ok(()) => self.shared.registered.lock().expect("registered lock").push((s, e)),
                Err(err) => refused.push(((s, e), err)),
            }
        }
        refused
    }

    /// Ends the epoch: protects a new random sample of at most `sample` units from `candidates`
    /// (unit base addresses). Units still protected from the last epoch (not written) that are
    /// sampled again stay protected, and only those dropped from the sample are released: each
    /// change of protection costs a TLB flush on every CPU the program runs on.
    pub fn rearm(&mut self, candidates: &[u64], sample: usize) {
        let mut st = self.shared.state.lock().expect("sampler lock");
        let pick: Vec<u64> = if candidates.len() <= sample {
            candidates.to_vec()
        } else {
            // Partial Fisher-Yates: the first `sample` of a shuffled copy.
            let mut c = candidates.to_vec();
            for i in 0..sample {
                let j = i + (self.rng.next_u64() % (c.len() - i) as u64) as usize;
                c.swap(i, j);
            }
            c.truncate(sample);
            c
        };
        let keep: HashSet<u64> = pick.iter().copied().collect();
        let mut dropped: Vec<u64> = st.armed.iter().copied().filter(|b| !keep.contains(b)).collect();
        dropped.sort_unstable();
        for base in &dropped {
            st.armed.remove(base);
        }
        self.shared.protect_units(&dropped, false);
        let mut new: Vec<u64> =
            pick.into_iter().filter(|b| !st.copying.contains(b) && !st.armed.contains(b)).collect();
        new.sort_unstable();
        new.dedup();
        self.shared.protect_units(&new, true);
        // A unit outside every registered range stays unprotected; it is not armed.
        let registered = self.shared.registered.lock().expect("registered lock");
        let unit = self.shared.unit;
        st.armed.extend(new.into_iter().filter(|&b| registered.iter().any(|&(s, e)| b < e && b + unit > s)));
    }

    /// The units written since the last call (each sampled write once). Where the kernel
    /// resolves the faults, this reads them from the page table.
    pub fn take_written(&self) -> Vec<u64> {
        if let Resolver::Kernel { pagemap, .. } = &self.resolver {
            self.shared.collect_kernel_resolved(pagemap);
        }
        std::mem::take(&mut self.shared.state.lock().expect("sampler lock").written)
    }

    pub fn counts(&self) -> FaultCounts {
        let st = self.shared.state.lock().expect("sampler lock");
        FaultCounts { faults: st.faults, held_for_copy: st.held }
    }

    /// The protection granule, bytes.
    pub fn unit(&self) -> u64 {
        self.shared.unit
    }

    /// Write-protects the units holding `addrs` for a copy: writes to them wait until
    /// [`Self::end_copy`]. Where the kernel resolves the faults no write would wait, so nothing
    /// is protected.
    pub fn begin_copy(&self, addrs: impl IntoIterator<Item = u64>) -> Vec<u64> {
        if self.kernel_resolved() {
            return Vec::new();
        }
        let mut st = self.shared.state.lock().expect("sampler lock");
        let mut bases: Vec<u64> = addrs.into_iter().map(|a| a & !(self.shared.unit - 1)).collect();
        bases.sort_unstable();
        bases.dedup();
        bases.retain(|&b| st.copying.insert(b));
        for &b in &bases {
            st.armed.remove(&b);
            self.shared.protect(b, true);
        }
        bases
    }

    /// Lifts the copy protection of `bases` (as returned by `begin_copy`), waking any writer.
    pub fn end_copy(&self, bases: &[u64]) {
        let mut st = self.shared.state.lock().expect("sampler lock");
        for b in bases {
            st.copying.remove(b);
            // Writers wait on these pages: every one that can be released must be.
            self.shared.release_unit(*b);
        }
    }
}

impl Drop for WriteFaultSampler {
    fn drop(&mut self) {
        // Lift every protection first, then stop the handler; closing the descriptor afterwards
        // unregisters the ranges (and would wake any waiter anyway).
        {
            let mut st = self.shared.state.lock().expect("sampler lock");
            let st = &mut *st;
            for b in st.armed.drain().chain(st.copying.drain()) {
                self.shared.protect(b, false);
            }
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Resolver::Handler(handler) = &mut self.resolver {
            if let Some(h) = handler.take() {
                let _ = h.join();
            }
        }
    }
}

/// The fault sampler's default epoch. A sampled unit written in an epoch costs the program one
/// fault (a round trip through the handler thread), and re-arming rewrites the sampled units'
/// page-table entries and flushes the TLB of every CPU the program runs on. With the policy's
/// tick (hemem's 10 ms) as the epoch, real programs ran 10-25% slower (GNU sort, sqlite3,
/// python3; 63-279% before the scan was made cheaper), with 100 ms 0-11%, with 1 s within the
/// noise (docs/live.md, "Tracking cost"). 250 ms keeps the cost near the 5% goal at the price of
/// at most four sampled writes a second per unit: hemem's hot threshold of 4 writes is reached
/// after a second of steady writing, not 40 ms.
pub const DEFAULT_EPOCH: Duration = Duration::from_millis(250);

/// How long after a re-arm that took `took` the next one is due: the epoch, or longer, so
/// re-arming (write-protecting a sample of 2 MiB ranges rewrites every page-table entry in them
/// and flushes the TLB of every CPU the program runs on) takes at most
/// [`crate::cpu_budget::SHARE`] of a CPU, but at most four epochs (a slow machine still samples).
fn rearm_interval(epoch: Duration, took: Duration) -> Duration {
    crate::cpu_budget::spaced(epoch, took, 4 * epoch)
}

/// How often a kernel-resolved sampler reads the writes back, per epoch: a write is reported at
/// most a tenth of an epoch after it (the handler reports it at the next tick), for a
/// PAGEMAP_SCAN call per run of armed units each time.
const CHECKS_PER_EPOCH: u32 = 10;

/// What the fault sampler is started for ([`FaultTracker::start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultSampling {
    /// The program's pid.
    pub pid: i32,
    /// The sampling and protection granule, bytes (4 KiB, or 2 MiB for a 2 MiB policy).
    pub unit: u64,
    /// Units protected per epoch.
    pub per_epoch: usize,
    /// How long a sample stays armed.
    pub epoch: Duration,
    /// Whether it samples writes (else it only guards copies).
    pub sampling: bool,
    /// Whether the policy's copies are write-protected (HPWP §5.3): then Terrace's handler must
    /// resolve the faults, since only it can hold a write until a copy ends.
    pub guard_copies: bool,
}

/// The fault sampler as the live machine runs it: for access sampling where there is no perf
/// sampler (its writes; DAMON's regions give the reads), and to write-protect copies.
pub struct FaultTracker {
    sampler: WriteFaultSampler,
    /// Units protected per epoch.
    per_epoch: usize,
    /// How long a sample stays armed before a new one is drawn ([`DEFAULT_EPOCH`]).
    epoch: Duration,
    /// When the sample now armed was drawn, and how long drawing and protecting it took.
    armed_at: Option<Instant>,
    rearm_took: Duration,
    /// When the written units were last read back (kernel-resolved faults only).
    checked_at: Option<Instant>,
    /// Whether it samples (else it only guards copies).
    sampling: bool,
    /// Set when the program exec'd and no descriptor could be made in the new program: the one
    /// left belongs to the address space it left, so nothing is registered, sampled or guarded
    /// any more.
    lost: bool,
    /// Makes a userfaultfd inside the running program `pid`, for the address space an exec gave
    /// it ([`crate::remote_syscall::create_userfaultfd_in_running`]; tests make one of their own).
    new_descriptor: fn(i32) -> io::Result<OwnedFd>,
    /// Ranges the kernel refused to register, and the warning about them.
    refused: u64,
    refused_warning: WarnLimit,
}

impl FaultTracker {
    /// Starts the sampler on a userfaultfd of the program: protecting `per_epoch` units of
    /// `unit` bytes every `epoch` if `sampling`, else only guarding copies. The kernel resolves
    /// the faults where it can and no copy is guarded
    /// ([`WriteFaultSampler::start_kernel_resolved`]); else Terrace's handler thread does
    /// ([`WriteFaultSampler::start`]).
    pub fn start(uffd: Userfaultfd, how: FaultSampling) -> io::Result<Self> {
        let kernel = how.sampling && !how.guard_copies && crate::userfaultfd::probe_kernel_resolved().is_ok();
        let sampler = if kernel {
            WriteFaultSampler::start_kernel_resolved(uffd, how.unit, how.pid)?
        } else {
            WriteFaultSampler::start(uffd, how.unit)?
        };
        tracing::info!(
            "fault sampler: write faults resolved by {}",
            if kernel {
                "the kernel (UFFD_FEATURE_WP_ASYNC), read back with PAGEMAP_SCAN"
            } else {
                "Terrace's handler thread"
            }
        );
        Ok(FaultTracker {
            sampler,
            per_epoch: how.per_epoch.max(1),
            epoch: how.epoch,
            armed_at: None,
            rearm_took: Duration::ZERO,
            checked_at: None,
            sampling: how.sampling,
            lost: false,
            new_descriptor: crate::remote_syscall::create_userfaultfd_in_running,
            refused: 0,
            refused_warning: WarnLimit::default(),
        })
    }
}

impl LiveTracker for FaultTracker {
    fn name(&self) -> &'static str {
        if self.sampling {
            "fault sampler"
        } else {
            "fault sampler (copies only)"
        }
    }

    /// Registers new ranges; then one write per sampled unit written since the last tick, and,
    /// once an epoch, re-arms on a fresh random sample of present units.
    fn observe_samples(&mut self, scan: &ScanView<'_>, samples: &mut Vec<Sample>) {
        if self.lost {
            return;
        }
        let refused = self.sampler.register(scan.memory.mapped_ranges());
        if let Some(((s, e), err)) = refused.first() {
            self.refused += refused.len() as u64;
            let (n, pid) = (refused.len(), scan.pid);
            let what = if self.sampling {
                "writes there are not sampled"
            } else {
                "copies there are not write-protected"
            };
            let hint = match err.raw_os_error() {
                Some(libc::EBUSY) => "the program registered it with a userfaultfd of its own, which Terrace leaves alone",
                Some(libc::ENOMEM) | Some(libc::ESRCH) => {
                    "the sampler's userfaultfd no longer belongs to the program's address space (it exec'd; the \
                     sampler follows at the next full scan)"
                }
                Some(libc::EPERM) => {
                    "the kernel allows write-protect faults only to root or with vm.unprivileged_userfaultfd = 1"
                }
                _ => "the mapping changed under the sampler (it is tried again next tick); if it persists, check `terrace doctor`",
            };
            self.refused_warning.warn(|| {
                format!(
                    "fault sampler: cannot register {n} range(s) of pid {pid} ({s:#x}-{e:#x}: {err}), so {what}: {hint}"
                )
            });
        }
        if !self.sampling {
            return;
        }
        let rearm = self.armed_at.is_none_or(|t| t.elapsed() >= rearm_interval(self.epoch, self.rearm_took));
        // Writes the handler resolved are in memory already; those the kernel resolved are read
        // from the page table, which is worth a call only every tenth of an epoch, and always
        // before the sample is drawn again.
        let check = !self.sampler.kernel_resolved()
            || rearm
            || self.checked_at.is_none_or(|t| t.elapsed() >= self.epoch / CHECKS_PER_EPOCH);
        if check {
            self.checked_at = Some(Instant::now());
            for base in self.sampler.take_written() {
                if let Some(page) = scan.policy_page(base) {
                    samples.push(Sample { page, kind: AccessKind::Write });
                }
            }
        }
        if rearm {
            let now = Instant::now();
            self.armed_at = Some(now);
            self.sampler.rearm(&scan.present_units(), self.per_epoch);
            self.rearm_took = now.elapsed();
        }
    }

    /// A userfaultfd belongs to the address space it was created in: the kernel dropped every
    /// range registered with it when the program executed another. So a new descriptor is made
    /// inside the new program, which is stopped for that (a few system calls' time) and let go
    /// ([`crate::remote_syscall::create_userfaultfd_in_running`]), and the sampler moves to it;
    /// sampling and the copy guard go on. If that is refused (ptrace forbidden, a debugger
    /// attached, a seccomp filter of the program's own), the sampler stops, says why once, and
    /// the machine counts it (docs/live.md, "When the program execs").
    fn address_space_replaced(&mut self, pid: i32) -> Result<(), String> {
        if self.lost {
            return Ok(()); // said at the exec where it stopped
        }
        let before = self.sampler.counts().faults;
        let followed =
            (self.new_descriptor)(pid).and_then(|fd| self.sampler.follow(Userfaultfd::from_fd(fd)));
        let Err(e) = followed else {
            tracing::info!(
                "{}: made a new userfaultfd inside pid {pid} for the program it executed ({before} write faults \
                 sampled before)",
                self.name()
            );
            return Ok(());
        };
        self.lost = true;
        let what = if self.sampling { "sampling of writes" } else { "write-protection of copies" };
        Err(format!(
            "{what} stopped at the exec: its userfaultfd acts on the address space the program left, and a new \
             one could not be made inside the program it executed: {e}. Start the program directly \
             (`terrace run --policy P -- PROGRAM`), or put the wrapper outside Terrace \
             (`numactl --membind=1 terrace run --policy P -- PROGRAM`)"
        ))
    }

    fn copy_guard(&self) -> Option<&dyn CopyGuard> {
        (!self.lost && !self.sampler.kernel_resolved()).then_some(&self.sampler as &dyn CopyGuard)
    }

    fn report(&self, stats: &mut LiveStats) {
        stats.ranges_not_registered = self.refused;
        let counts = self.sampler.counts();
        if self.sampling {
            stats.write_faults = counts.faults;
        }
        stats.writes_held_for_copy = counts.held_for_copy;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why the tests below are ignored by default: not every kernel, container or user may have
    /// userfaultfd with write-protection (Linux 5.7+, and a seccomp filter or
    /// vm.unprivileged_userfaultfd may refuse it). The guest (tests/vm) runs them with
    /// `--include-ignored`, where they must pass; elsewhere, run them so where the kernel allows.
    const NEEDS_UFFD_WP: &str = "needs userfaultfd write-protect: runs in the guest (tests/vm)";

    /// A write-fault sampler on this test process; the test fails if the kernel refuses one.
    fn sampler() -> WriteFaultSampler {
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .unwrap_or_else(|e| panic!("no userfaultfd here ({e}); this test {NEEDS_UFFD_WP}"));
        WriteFaultSampler::start(uffd, 4096)
            .unwrap_or_else(|e| panic!("no write-protect faults here ({e}); this test {NEEDS_UFFD_WP}"))
    }

    fn anon(pages: usize) -> (*mut u8, usize) {
        use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
        let len = pages * 4096;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh private anonymous mapping, unmapped by the test.
        let p = unsafe { mmap_anonymous(None, len.try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }.unwrap();
        (p.as_ptr().cast(), len)
    }

    /// `pages` pages of a new mapping, every one touched (so present, each holding 1) and
    /// registered with `sampler`: the mapping, its length, and the pages' addresses.
    fn registered(sampler: &WriteFaultSampler, pages: usize) -> (*mut u8, usize, Vec<u64>) {
        let (p, len) = anon(pages);
        // SAFETY: p..p+len is our mapping.
        unsafe { std::slice::from_raw_parts_mut(p, len) }.fill(1);
        let base = p as u64;
        assert!(sampler.register([(base, base + len as u64)]).is_empty());
        (p, len, (0..pages as u64).map(|i| base + i * 4096).collect())
    }

    #[test]
    fn rearming_takes_at_most_its_budget_of_a_cpu() {
        let epoch = Duration::from_millis(100);
        assert_eq!(rearm_interval(epoch, Duration::ZERO), epoch);
        assert_eq!(rearm_interval(epoch, Duration::from_millis(1)), epoch);
        assert_eq!(rearm_interval(epoch, Duration::from_millis(4)), Duration::from_millis(200));
        assert_eq!(rearm_interval(epoch, Duration::from_millis(50)), 4 * epoch);
    }

    #[test]
    #[ignore = "needs userfaultfd write-protect: runs in the guest (tests/vm)"]
    fn sampled_writes_are_counted_once_and_never_lost() {
        let mut sampler = sampler();
        let (p, len, pages) = registered(&sampler, 16);
        // SAFETY: p..p+len is our mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(p, len) };
        sampler.rearm(&pages, 16);
        // Write pages 0, 3 and 5, page 3 twice: each write completes, each page is sampled once.
        for (i, v) in [(0usize, 7u8), (3, 8), (3, 9), (5, 10)] {
            mem[i * 4096 + 1] = v;
        }
        let mut written = sampler.take_written();
        written.sort_unstable();
        assert_eq!(written, vec![pages[0], pages[3], pages[5]]);
        assert_eq!((mem[1], mem[3 * 4096 + 1], mem[5 * 4096 + 1]), (7, 9, 10));
        assert_eq!(sampler.counts().faults, 3);
        // A new epoch samples again.
        sampler.rearm(&pages, 16);
        mem[3 * 4096] = 11;
        assert_eq!(sampler.take_written(), vec![pages[3]]);
        drop(sampler);
        // After the sampler is gone, writes go through untouched.
        mem[4096 * 15] = 12;
        assert_eq!(mem[4096 * 15], 12);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(p.cast(), len) };
    }

    /// A sampler of this process whose faults the kernel resolves; the test fails if the kernel
    /// cannot.
    fn kernel_resolved_sampler() -> WriteFaultSampler {
        if let Err(e) = crate::userfaultfd::probe_kernel_resolved() {
            panic!("the kernel cannot resolve write-protect faults ({e}); this test {NEEDS_KERNEL_RESOLVED}");
        }
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        WriteFaultSampler::start_kernel_resolved(uffd, 4096, std::process::id() as i32).unwrap()
    }

    const NEEDS_KERNEL_RESOLVED: &str =
        "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest";

    /// Where the kernel resolves the faults: each written sampled page is read back once, the
    /// writes land, unsampled pages are never reported, nothing is held for a copy, and a new
    /// epoch samples again; after `follow` (an exec) it goes on with the new descriptor.
    #[test]
    #[ignore = "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest"]
    fn kernel_resolved_writes_are_read_back_once_and_never_wait() {
        let mut sampler = kernel_resolved_sampler();
        assert!(sampler.kernel_resolved());
        let (p, len, pages) = registered(&sampler, 16);
        let base = p as u64;
        // SAFETY: p..p+len is our mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(p, len) };
        // Pages 0-7 sampled (runs of adjacent units), 8-15 not.
        sampler.rearm(&pages[..8], 8);
        for (i, v) in [(0usize, 7u8), (3, 8), (3, 9), (5, 10), (9, 11), (12, 12)] {
            mem[i * 4096 + 1] = v;
        }
        let mut written = sampler.take_written();
        written.sort_unstable();
        assert_eq!(written, vec![pages[0], pages[3], pages[5]]);
        assert!(sampler.take_written().is_empty(), "a write was read back twice");
        assert_eq!((mem[1], mem[3 * 4096 + 1], mem[5 * 4096 + 1], mem[9 * 4096 + 1]), (7, 9, 10, 11));
        assert_eq!(sampler.counts().faults, 3);
        assert!(sampler.begin_copy([pages[6]]).is_empty(), "a copy cannot be guarded");
        // A new epoch: still-armed pages stay armed, written ones are armed again.
        sampler.rearm(&pages[..8], 8);
        mem[3 * 4096] = 13;
        mem[6 * 4096] = 14;
        let mut written = sampler.take_written();
        written.sort_unstable();
        assert_eq!(written, vec![pages[3], pages[6]]);
        // An exec: a new descriptor, ranges registered anew, the counts go on.
        sampler.follow(Userfaultfd::from_fd(descriptor_here(0).unwrap())).unwrap();
        assert!(sampler.kernel_resolved());
        assert!(sampler.register([(base, base + len as u64)]).is_empty());
        sampler.rearm(&pages[8..], 8);
        mem[10 * 4096] = 15;
        assert_eq!(sampler.take_written(), vec![pages[10]]);
        assert_eq!(sampler.counts().faults, 6);
        drop(sampler);
        mem[4096 * 15] = 16;
        assert_eq!((mem[10 * 4096], mem[4096 * 15]), (15, 16));
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(p.cast(), len) };
    }

    /// The tracker lets the kernel resolve the faults only where no copy needs guarding.
    #[test]
    #[ignore = "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest"]
    fn the_kernel_resolves_the_faults_unless_copies_are_guarded() {
        kernel_resolved_sampler();
        let how = |guard_copies| FaultSampling {
            pid: std::process::id() as i32,
            unit: 4096,
            per_epoch: 8,
            epoch: DEFAULT_EPOCH,
            sampling: true,
            guard_copies,
        };
        let fd = || Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        let t = FaultTracker::start(fd(), how(false)).unwrap();
        assert!(t.sampler.kernel_resolved() && t.copy_guard().is_none());
        let t = FaultTracker::start(fd(), how(true)).unwrap();
        assert!(!t.sampler.kernel_resolved() && t.copy_guard().is_some());
        let t = FaultTracker::start(fd(), FaultSampling { sampling: false, ..how(true) }).unwrap();
        assert!(!t.sampler.kernel_resolved() && t.copy_guard().is_some());
    }

    /// A userfaultfd of this process, as `create_userfaultfd_in_running` makes one in the program.
    fn descriptor_here(_pid: i32) -> io::Result<OwnedFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: userfaultfd takes only flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }

    /// After `follow` (what an exec leads to) the sampler works on the new descriptor: ranges are
    /// registered anew, writes are sampled and never lost, copies are guarded, counts go on.
    #[test]
    #[ignore = "needs userfaultfd write-protect: runs in the guest (tests/vm)"]
    fn after_following_a_new_descriptor_writes_are_sampled_and_copies_guarded() {
        let mut sampler = sampler();
        let (p, len) = anon(8);
        // SAFETY: our mapping, every page touched.
        let mem = unsafe { std::slice::from_raw_parts_mut(p, len) };
        mem.fill(1);
        let base = p as u64;
        let pages: Vec<u64> = (0..8).map(|i| base + i * 4096).collect();
        assert!(sampler.register([(base, base + len as u64)]).is_empty());
        sampler.rearm(&pages, 8);
        mem[0] = 2;
        assert_eq!(sampler.take_written(), vec![pages[0]]);
        // Armed pages left protected by the old descriptor, a write not taken yet.
        mem[4096] = 3;
        sampler.follow(Userfaultfd::from_fd(descriptor_here(0).unwrap())).unwrap();
        assert!(sampler.take_written().is_empty(), "writes of the old address space were kept");
        // Nothing is registered with the new descriptor yet; writes go through unsampled.
        mem[2 * 4096] = 4;
        assert_eq!(sampler.counts().faults, 2, "the counts go on");
        assert!(sampler.register([(base, base + len as u64)]).is_empty(), "the range registers anew");
        sampler.rearm(&pages, 8);
        for i in [3usize, 5] {
            mem[i * 4096 + 7] = i as u8;
        }
        let mut written = sampler.take_written();
        written.sort_unstable();
        assert_eq!(written, vec![pages[3], pages[5]]);
        assert_eq!(sampler.counts().faults, 4);
        // The copy guard holds writes on the new descriptor.
        let bases = sampler.begin_copy([pages[6]]);
        let addr = pages[6] + 9;
        let writer = std::thread::spawn(move || {
            // SAFETY: addr lies in the test's live mapping.
            unsafe { std::ptr::write_volatile(addr as *mut u8, 42) };
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!writer.is_finished(), "the write went through during the copy");
        sampler.end_copy(&bases);
        writer.join().unwrap();
        assert_eq!((mem[4096], mem[2 * 4096], mem[3 * 4096 + 7], mem[6 * 4096 + 9]), (3, 4, 3, 42));
        assert_eq!(sampler.counts().held_for_copy, 1);
        drop(sampler);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(p.cast(), len) };
    }

    /// The tracker follows an exec with a new descriptor, keeping its copy guard; if none can be
    /// made it stops, once, with the reason, and guards nothing.
    #[test]
    #[ignore = "needs userfaultfd write-protect: runs in the guest (tests/vm)"]
    fn the_tracker_follows_an_exec_or_says_why_it_cannot() {
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        let how = FaultSampling {
            pid: std::process::id() as i32,
            unit: 4096,
            per_epoch: 8,
            epoch: DEFAULT_EPOCH,
            sampling: true,
            guard_copies: true,
        };
        let mut t = FaultTracker::start(uffd, how).unwrap();
        t.new_descriptor = descriptor_here;
        assert_eq!(t.address_space_replaced(1), Ok(()));
        assert!(t.copy_guard().is_some());
        t.new_descriptor = |_| Err(io::Error::from_raw_os_error(libc::EPERM));
        let why = t.address_space_replaced(1).unwrap_err();
        assert!(
            why.contains("sampling of writes stopped at the exec") && why.contains("not permitted"),
            "{why}"
        );
        assert!(t.copy_guard().is_none());
        assert_eq!(t.address_space_replaced(1), Ok(()), "said once");
    }

    /// The hangs python3 met (found by `terrace bench tracking`, then in guest case 29), whose
    /// allocator unmaps arenas and maps new ones in their place: a sampled or copied unit then
    /// spans memory the sampler never registered, lifting the unit's protection fails and wakes
    /// no one, and the writer must still go on, whether its fault was sampled or held for a copy.
    #[test]
    #[ignore = "needs userfaultfd write-protect: runs in the guest (tests/vm)"]
    fn a_write_goes_through_when_its_unit_spans_unregistered_memory() {
        // Sampled: the write faults to the handler, whose release of the unit fails.
        let (sampler, base, p) = unit_with_a_hole(|s, base| s.rearm(&[base], 1));
        let writer = write_after_the_hole(base);
        assert!(finishes(&writer), "a write to a protected page waited for ever");
        writer.join().unwrap();
        assert_eq!(sampler.take_written(), vec![base], "the write is still sampled");
        check_and_unmap(sampler, base, p);
        // Copied: the write waits for the copy, whose release of the unit fails.
        let (sampler, base, p) = unit_with_a_hole(|s, base| {
            s.begin_copy([base]);
        });
        let writer = write_after_the_hole(base);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!writer.is_finished(), "the write went through during the copy");
        sampler.end_copy(&[base]);
        assert!(finishes(&writer), "a write held for a copy waited for ever after it");
        writer.join().unwrap();
        check_and_unmap(sampler, base, p);
    }

    const UNIT: u64 = 16 * 4096;

    /// A sampler of 16-page units on one aligned, touched, registered unit, `protect`ed, then
    /// pages 8..12 replaced by a new mapping the sampler never registered. Returns the sampler,
    /// the unit's address, and the mapping to unmap.
    fn unit_with_a_hole(protect: impl Fn(&mut WriteFaultSampler, u64)) -> (WriteFaultSampler, u64, *mut u8) {
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .unwrap_or_else(|e| panic!("no userfaultfd here ({e}); this test {NEEDS_UFFD_WP}"));
        let mut sampler = WriteFaultSampler::start(uffd, UNIT)
            .unwrap_or_else(|e| panic!("no write-protect faults here ({e}); this test {NEEDS_UFFD_WP}"));
        let (p, _) = anon(32);
        let base = (p as u64 + UNIT - 1) & !(UNIT - 1);
        // SAFETY: base..base+UNIT lies inside our 32-page mapping.
        unsafe { std::slice::from_raw_parts_mut(base as *mut u8, UNIT as usize) }.fill(1);
        assert!(sampler.register([(base, base + UNIT)]).is_empty());
        protect(&mut sampler, base);
        use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: replaces 4 pages of our own mapping.
        unsafe {
            mmap_anonymous(
                std::ptr::NonNull::new((base + 8 * 4096) as *mut libc::c_void).map(|p| p.addr()),
                (4 * 4096usize).try_into().unwrap(),
                rw,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_FIXED,
            )
        }
        .unwrap();
        (sampler, base, p)
    }

    /// A thread writing 42 to page 14 of the unit at `base`, past the hole.
    fn write_after_the_hole(base: u64) -> std::thread::JoinHandle<()> {
        let addr = base + 14 * 4096 + 5;
        std::thread::spawn(move || {
            // SAFETY: addr lies in the test's live mapping.
            unsafe { std::ptr::write_volatile(addr as *mut u8, 42) };
        })
    }

    /// Whether `writer` finishes within five seconds.
    fn finishes(writer: &std::thread::JoinHandle<()>) -> bool {
        let t = std::time::Instant::now();
        while !writer.is_finished() && t.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        writer.is_finished()
    }

    fn check_and_unmap(sampler: WriteFaultSampler, base: u64, p: *mut u8) {
        // SAFETY: reading our mapping.
        assert_eq!(unsafe { std::ptr::read_volatile((base + 14 * 4096 + 5) as *const u8) }, 42);
        drop(sampler);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(p.cast(), 32 * 4096) };
    }

    #[test]
    #[ignore = "needs userfaultfd write-protect: runs in the guest (tests/vm)"]
    fn a_write_during_a_copy_waits_for_its_end() {
        let sampler = sampler();
        let (p, len) = anon(4);
        // SAFETY: our mapping, every page touched.
        let mem = unsafe { std::slice::from_raw_parts_mut(p, len) };
        mem.fill(0);
        let base = p as u64;
        assert!(sampler.register([(base, base + len as u64)]).is_empty());
        let bases = sampler.begin_copy([base + 4096 + 100]);
        assert_eq!(bases, vec![base + 4096]);
        let done = Arc::new(AtomicBool::new(false));
        let (d, addr) = (Arc::clone(&done), base + 4096 + 8);
        let writer = std::thread::spawn(move || {
            // SAFETY: addr lies in the test's live mapping.
            unsafe { std::ptr::write_volatile(addr as *mut u8, 42) };
            d.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!done.load(Ordering::SeqCst), "the write went through during the copy");
        sampler.end_copy(&bases);
        writer.join().unwrap();
        assert_eq!(mem[4096 + 8], 42);
        assert_eq!(sampler.counts().held_for_copy, 1);
        drop(sampler);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(p.cast(), len) };
    }
}
