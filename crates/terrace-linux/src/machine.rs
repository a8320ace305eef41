//! The live machine: `terrace_model::Machine` over a real process on a real NUMA host.
//!
//! Observing reads the process's mappings, its pagemap (present and soft-dirty bits) and the node
//! of every present page; applying moves pages with the migrator and records where they really
//! landed. Time is wall-clock time since the machine was attached. The managed program never
//! depends on Terrace: if Terrace stops, the program runs on where its pages are.

use crate::config::ReferencedSource;
use crate::kernel_tiering::{self, KernelTiering};
use crate::migrate::{self, PageMove};
use crate::process::{ProcessError, ProcessMemory, PAGE_BYTES, PM_PRESENT};
use crate::topology::LiveTier;
use crate::trackers::damon::{self, DamonReader};
use crate::trackers::idle_page::{self, IdleBitmap};
use crate::trackers::perf_sampler::{self, PerfSampler};
use crate::trackers::soft_dirty;
use crate::trackers::write_faults::WriteFaultSampler;
use crate::userfaultfd::Userfaultfd;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};
use terrace_model::{
    AccessKind, Applied, Machine, MachineError, MachineInfo, Mechanism, MemoryMode, MoveFailure, MoveOptions,
    Observations, PageSize, Plan, Progress, RateBudget, Requirements, Sample, TierId, TierStatus,
    TrackerKind, PAGE_DIRTY, PAGE_REFERENCED,
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

/// The policy's view when it asks for 2 MiB pages: one entry per 2 MiB-aligned range that holds
/// managed 4 KiB pages (indexes only grow, like the base index), with the tier of its present
/// pages (the first one found decides) and the union of their bits.
#[derive(Default)]
struct HugeView {
    bases: Vec<u64>,
    index_of: std::collections::HashMap<u64, u32>,
    placement: Vec<TierId>,
    bits: Vec<u8>,
    status: Vec<TierStatus>,
}

impl HugeView {
    fn index(&mut self, addr: u64) -> u32 {
        let base = addr >> HUGE_SHIFT << HUGE_SHIFT;
        let next = self.bases.len() as u32;
        *self.index_of.entry(base).or_insert_with(|| {
            self.bases.push(base);
            next
        })
    }
}

const HUGE_SHIFT: u32 = 21;
const SUBPAGES: u64 = 1 << (HUGE_SHIFT - 12);

pub struct LiveMachine {
    info: MachineInfo,
    tiers: Vec<LiveTier>,
    target: Target,
    pid: i32,
    mem: ProcessMemory,
    start: Instant,
    last_observe: Duration,
    dry_run: bool,
    page_bits: bool,
    /// Set when the policy works on 2 MiB pages: its page index then names 2 MiB-aligned ranges.
    huge: Option<HugeView>,
    /// Pages moved since the last scan, with the bits they showed before: their soft-dirty bits
    /// are set by the move itself.
    bits_before_move: Vec<(u32, u8)>,
    /// The idle-page bitmap, for the referenced bit, where the kernel has it.
    idle: Option<IdleBitmap>,
    /// DAMON, for the referenced bit, where the kernel has it.
    damon: Option<DamonReader>,
    /// The fault sampler's userfaultfd of the program, until `prepare` starts the sampler on it.
    fault_fd: Option<Userfaultfd>,
    /// The fault sampler, when the policy asks for access sampling, and how many units it
    /// protects per epoch.
    faults: Option<WriteFaultSampler>,
    fault_sample: usize,
    /// The perf sampler (PEBS or IBS loads and stores), where the CPU has one: preferred over
    /// the fault sampler for access sampling.
    perf: Option<PerfSampler>,
    /// Whether the policy asked for access sampling (else the descriptor only guards copies).
    sampling: bool,
    samples: Vec<Sample>,
    /// When the last full scan (mappings, pagemap, nodes) ran.
    scanned_at: Option<Instant>,
    /// When the last observation ended, until the policy's decision is timed.
    deciding_since: Option<Instant>,
    /// Policy ticks in one DAMON aggregation (100 ms), for scaling its counts to read samples.
    ticks_per_aggregation: u32,
    /// The DAMON aggregation last turned into read samples.
    reads_seq: u64,
    /// The kernel's tiering, switched on for a kernel-tiering run, and its counters at the last look.
    kernel_tiering: Option<(KernelTiering, Vec<u64>)>,
    /// When the last plan was applied (since `start`): a rate limit's budget is the time since.
    last_apply: Duration,
    referenced: ReferencedSource,
    placement: Vec<TierId>,
    bits: Vec<u8>,
    entries: Vec<u64>,
    present: Vec<u32>,
    status: Vec<i32>,
    tier_status: Vec<TierStatus>,
    stats: LiveStats,
    exit: Option<ExitStatus>,
    gone: bool,
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
            tiers,
            target,
            pid,
            mem,
            start: Instant::now(),
            last_observe: Duration::ZERO,
            dry_run,
            page_bits: false,
            huge: None,
            damon: None,
            idle: None,
            bits_before_move: Vec::new(),
            fault_fd: None,
            faults: None,
            fault_sample: 256,
            perf: None,
            sampling: false,
            samples: Vec::new(),
            reads_seq: 0,
            ticks_per_aggregation: 1,
            deciding_since: None,
            scanned_at: None,
            kernel_tiering: None,
            last_apply: Duration::ZERO,
            referenced: ReferencedSource::Auto,
            placement: Vec::new(),
            bits: Vec::new(),
            entries: Vec::new(),
            present: Vec::new(),
            status: Vec::new(),
            tier_status: vec![TierStatus::default(); n],
            stats: LiveStats { pages_per_tier: vec![0; n], ..Default::default() },
            exit: None,
            gone: false,
        })
    }

    /// Where the referenced bit comes from (config `[trackers] referenced`); set before driving.
    pub fn set_referenced_source(&mut self, source: ReferencedSource) {
        self.referenced = source;
    }

    /// Gives the machine a userfaultfd of the program (created inside it at its start, see
    /// [`crate::remote_syscall`]), for the fault sampler; set before driving.
    pub fn set_fault_source(&mut self, uffd: Userfaultfd, sample_per_epoch: usize) {
        self.fault_fd = Some(uffd);
        self.fault_sample = sample_per_epoch.max(1);
        self.info.mechanisms = migrate::host_mechanisms(true);
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }
    /// The first address of the policy's page `page` (a 4 KiB page, or a 2 MiB range).
    pub fn page_address(&self, page: u32) -> Option<u64> {
        match &self.huge {
            Some(h) => h.bases.get(page as usize).copied(),
            None => ((page as usize) < self.mem.pages()).then(|| self.mem.index().addr(page)),
        }
    }
    pub fn stats(&self) -> &LiveStats {
        &self.stats
    }
    /// The program's exit status, once it has exited (only for a program Terrace started).
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit
    }

    fn tier_of_node(&self, node: i32) -> TierId {
        self.tiers
            .iter()
            .position(|t| t.nodes.contains(&(node as u32)))
            .map_or(TierId::UNPLACED, |i| TierId(i as u8))
    }

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

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Reads where every page is and which were written since the last look.
    fn scan(&mut self) -> Result<(), ProcessError> {
        self.mem.refresh()?;
        self.mem.read_pagemap(&mut self.entries)?;
        let pages = self.mem.pages();
        self.present.clear();
        self.present.extend((0..pages as u32).filter(|&i| self.entries[i as usize] & PM_PRESENT != 0));
        let mut status = std::mem::take(&mut self.status);
        self.placement.clear();
        self.placement.resize(pages, TierId::UNPLACED);
        if self.huge.is_some() {
            // A 2 MiB policy sees each range at the node of its first present page, so ask the
            // kernel about that page only: 512 times fewer lookups, the bulk of a scan's time.
            let index = self.mem.index();
            let mut firsts: Vec<u32> = Vec::new();
            let mut last_base = u64::MAX;
            for &i in &self.present {
                let base = index.addr(i) >> HUGE_SHIFT;
                if base != last_base {
                    firsts.push(i);
                    last_base = base;
                }
            }
            self.mem.nodes_of(&firsts, &mut status)?;
            let mut at = 0;
            let mut tier = TierId::UNPLACED;
            for &i in &self.present {
                if firsts.get(at) == Some(&i) {
                    tier = if status[at] >= 0 { self.tier_of_node(status[at]) } else { TierId::UNPLACED };
                    at += 1;
                }
                self.placement[i as usize] = tier;
            }
        } else {
            self.mem.nodes_of(&self.present, &mut status)?;
            for (&i, &node) in self.present.iter().zip(&status) {
                if node >= 0 {
                    self.placement[i as usize] = self.tier_of_node(node);
                }
            }
        }
        self.status = status;
        if self.page_bits {
            self.bits.clear();
            self.bits.extend(self.entries.iter().map(|&e| {
                if soft_dirty::is_dirty(e) && e & PM_PRESENT != 0 {
                    PAGE_REFERENCED | PAGE_DIRTY
                } else {
                    0
                }
            }));
            soft_dirty::clear(self.pid)?;
            for (i, before) in self.bits_before_move.drain(..) {
                if let Some(b) = self.bits.get_mut(i as usize) {
                    *b = before;
                }
            }
            if let Some(idle) = self.idle.as_mut() {
                // Referenced: accessed since the last tick marked the page's frame idle.
                let frames: Vec<u64> = self
                    .entries
                    .iter()
                    .map(|&e| if e & PM_PRESENT != 0 { e & idle_page::PFN_MASK } else { 0 })
                    .collect();
                let marked = idle.accessed(&frames).and_then(|accessed| {
                    for (b, a) in self.bits.iter_mut().zip(accessed) {
                        if a {
                            *b |= PAGE_REFERENCED;
                        }
                    }
                    idle.mark_idle(&frames)
                });
                if let Err(e) = marked {
                    tracing::warn!("idle-page bitmap for pid {}: {e}", self.pid);
                }
            } else if let Some(d) = &self.damon {
                match d.latest() {
                    Ok((_, regions)) => damon::mark_accessed(
                        &regions,
                        self.mem.index().runs(),
                        &mut self.bits,
                        PAGE_REFERENCED,
                    ),
                    Err(e) => tracing::warn!("DAMON regions of pid {}: {e}", self.pid),
                }
            }
        }
        for (t, st) in self.tier_status.iter_mut().enumerate() {
            st.used_pages = self.placement.iter().filter(|p| p.index() == t).count() as u64;
            st.capacity_pages = self.tiers[t].tier.capacity_pages;
            // No uncore counters are read: the traffic is unknown, not zero.
            st.read_bytes = None;
            st.write_bytes = None;
        }
        self.stats.pages_per_tier = self.tier_status.iter().map(|s| s.used_pages).collect();
        if let Some(h) = self.huge.as_mut() {
            h.placement.fill(TierId::UNPLACED);
            h.bits.fill(0);
            for i in 0..pages as u32 {
                let j = h.index(self.mem.index().addr(i)) as usize;
                if j >= h.placement.len() {
                    h.placement.resize(j + 1, TierId::UNPLACED);
                    h.bits.resize(j + 1, 0);
                }
                if !h.placement[j].is_placed() {
                    h.placement[j] = self.placement[i as usize];
                }
                if let Some(b) = self.bits.get(i as usize) {
                    h.bits[j] |= b;
                }
            }
            h.status = self.tier_status.clone();
            for (t, st) in h.status.iter_mut().enumerate() {
                st.used_pages = h.placement.iter().filter(|p| p.index() == t).count() as u64;
                st.capacity_pages = st.capacity_pages.map(|c| c / SUBPAGES);
            }
        }
        Ok(())
    }

    /// The idle-page bitmap, if the config allows it and the kernel has it, and frame numbers
    /// can be read (root); an error only if the config insists on it.
    fn open_idle_bitmap(&mut self) -> Result<Option<IdleBitmap>, MachineError> {
        let insist = self.referenced == ReferencedSource::IdlePage;
        if !(insist || self.referenced == ReferencedSource::Auto) {
            return Ok(None);
        }
        let missing = |hint: String| {
            if insist {
                Err(MachineError::MissingTracker { tracker: "idle-page bitmap", hint })
            } else {
                tracing::debug!("no idle-page bitmap: {hint}");
                Ok(None)
            }
        };
        if !idle_page::available() {
            return missing(format!(
                "{} is missing (kernel without CONFIG_IDLE_PAGE_TRACKING); set [trackers] referenced = \"auto\"",
                idle_page::BITMAP
            ));
        }
        let bitmap = match IdleBitmap::open() {
            Ok(b) => b,
            Err(e) => return missing(format!("cannot open {}: {e} (it needs root)", idle_page::BITMAP)),
        };
        let mut entries = Vec::new();
        if self.mem.read_pagemap(&mut entries).is_ok()
            && entries.iter().any(|&e| e & PM_PRESENT != 0)
            && entries.iter().all(|&e| e & PM_PRESENT == 0 || e & idle_page::PFN_MASK == 0)
        {
            return missing("pagemap shows no frame numbers (they need CAP_SYS_ADMIN)".into());
        }
        Ok(Some(bitmap))
    }

    /// Starts DAMON on the program (a sample every 5 ms, aggregated every 100 ms: DAMON's
    /// defaults), unless it runs already.
    fn start_damon(&mut self) -> Result<(), String> {
        if self.damon.is_none() {
            self.damon = Some(DamonReader::start(self.pid, 5_000, 100_000).map_err(|e| e.to_string())?);
        }
        Ok(())
    }

    /// Access sampling: the perf sampler where the CPU samples loads and stores, one in
    /// `period` as the policy asked; else the fault sampler (docs/live.md).
    fn start_sampling(&mut self, period: u64) -> Result<(), MachineError> {
        let perf = perf_sampler::memory_events()
            .and_then(|events| PerfSampler::open(self.pid, &events, period).map_err(|e| e.to_string()));
        match perf {
            Ok(p) => {
                tracing::info!("access sampling: perf loads and stores with data addresses, one in {period}");
                self.perf = Some(p);
                Ok(())
            }
            Err(why) => {
                tracing::info!("no perf sampling ({why}); using the fault sampler");
                self.start_fault_sampler()
            }
        }
    }

    /// Starts the fault sampler on the program's userfaultfd: for access sampling where there is
    /// no perf sampler (writes from the sampler, reads from DAMON's per-region access counts),
    /// and to write-protect copies.
    fn start_fault_sampler(&mut self) -> Result<(), MachineError> {
        let Some(fd) = self.fault_fd.take() else {
            return Err(MachineError::MissingTracker {
                tracker: if self.sampling { "access sampling" } else { "write-protected copies" },
                hint: USERFAULTFD_NEEDS_RUN.into(),
            });
        };
        let unit = if self.huge.is_some() { 1 << HUGE_SHIFT } else { PAGE_BYTES };
        let sampler = WriteFaultSampler::start(fd, unit).map_err(|e| MachineError::MissingTracker {
            tracker: "access sampling",
            hint: format!("the fault sampler could not start ({e}); `terrace doctor` checks userfaultfd"),
        })?;
        self.faults = Some(sampler);
        if !self.sampling || self.perf.is_some() {
            tracing::info!("copies are write-protected with userfaultfd: writes wait for the copy");
            return Ok(());
        }
        let reads = match damon::available().then(|| self.start_damon()) {
            Some(Ok(())) => "reads from DAMON regions' access counts".to_string(),
            Some(Err(e)) => format!("no reads ({e})"),
            None => "no reads (this kernel has no DAMON)".into(),
        };
        tracing::info!(
            "access sampling (substitute for PEBS/IBS, which this machine lacks): writes from the fault \
             sampler, {} {} write-protected per tick; {reads}",
            self.fault_sample,
            if unit == PAGE_BYTES { "pages" } else { "2 MiB ranges" },
        );
        Ok(())
    }

    /// This tick's samples: one write per sampled unit written since the last tick, and, once per
    /// DAMON aggregation, each region's access count as reads of every page in it. Then re-arms
    /// the sampler on a fresh random sample of present units.
    fn collect_samples(&mut self) {
        self.samples.clear();
        if let Some(perf) = self.perf.as_mut() {
            let (index, huge, samples) = (self.mem.index(), &self.huge, &mut self.samples);
            perf.drain(|addr, kind| {
                let page = match huge {
                    Some(h) => h.index_of.get(&(addr >> HUGE_SHIFT << HUGE_SHIFT)).copied(),
                    None => index.index_of(addr & !(PAGE_BYTES - 1)),
                };
                if let Some(page) = page {
                    samples.push(Sample { page, kind });
                }
            });
        }
        let Some(sampler) = self.faults.as_mut() else { return };
        sampler.register(self.mem.mapped_ranges());
        if !self.sampling || self.perf.is_some() {
            return;
        }
        for base in sampler.take_written() {
            let page = match self.huge.as_mut() {
                Some(h) => h.index_of.get(&base).copied(),
                None => self.mem.index().index_of(base),
            };
            if let Some(page) = page {
                self.samples.push(Sample { page, kind: AccessKind::Write });
            }
        }
        let counts = sampler.counts();
        self.stats.write_faults = counts.faults;
        self.stats.writes_held_for_copy = counts.held_for_copy;
        let candidates: Vec<u64> = match &self.huge {
            Some(h) => {
                h.bases.iter().zip(&h.placement).filter(|(_, t)| t.is_placed()).map(|(&b, _)| b).collect()
            }
            None => self.present.iter().map(|&i| self.mem.index().addr(i)).collect(),
        };
        sampler.rearm(&candidates, self.fault_sample);
        if let Some(d) = &self.damon {
            let regions = match d.latest() {
                Ok((seq, r)) if seq != self.reads_seq => {
                    self.reads_seq = seq;
                    r
                }
                Ok(_) => return, // no new aggregation since the last tick
                Err(e) => {
                    tracing::warn!("DAMON regions of pid {}: {e}", self.pid);
                    return;
                }
            };
            let mut reads = vec![0u32; self.page_count() as usize];
            damon::for_each_accessed(&regions, self.mem.index().runs(), |i, n| {
                let page = match &self.huge {
                    Some(h) => {
                        h.index_of.get(&(self.mem.index().addr(i) >> HUGE_SHIFT << HUGE_SHIFT)).copied()
                    }
                    None => Some(i),
                };
                if let Some(r) = page.and_then(|p| reads.get_mut(p as usize)) {
                    *r = (*r).max(n);
                }
            });
            let per_aggregation = d.samples_per_aggregation().max(1);
            for (page, &n) in reads.iter().enumerate() {
                let s = Sample { page: page as u32, kind: AccessKind::Read };
                let count = read_samples(n, per_aggregation, self.ticks_per_aggregation);
                self.samples.extend(std::iter::repeat_n(s, count as usize));
            }
        }
    }

    /// Adds the policy's time since the last observation to its decision time.
    fn end_decision(&mut self) {
        if let Some(t) = self.deciding_since.take() {
            self.stats.decision_seconds += t.elapsed().as_secs_f64();
        }
    }

    /// Pages in the policy's view (4 KiB pages, or 2 MiB ranges).
    fn page_count(&self) -> u64 {
        self.huge.as_ref().map_or(self.mem.pages(), |h| h.bases.len()) as u64
    }

    /// The 4 KiB addresses that make up the policy's page `page` (512 for a 2 MiB range: a
    /// transparent huge page moves whole at its first address, and the others are then already
    /// there; a range of base pages moves page by page).
    fn addresses_of(&self, page: u32) -> Vec<u64> {
        match &self.huge {
            None => vec![self.mem.index().addr(page)],
            Some(h) => (0..SUBPAGES).map(|k| h.bases[page as usize] + (k << 12)).collect(),
        }
    }
}

impl Machine for LiveMachine {
    fn info(&self) -> &MachineInfo {
        &self.info
    }

    fn prepare(&mut self, req: &Requirements) -> Result<(), MachineError> {
        check_requirements(req, Attach::Start)?;
        if req.memory_mode == MemoryMode::KernelTiering {
            let on = KernelTiering::enable().map_err(MachineError::Other)?;
            tracing::info!(
                "the kernel's own tiering carries this policy out: numa_balancing = 2 and demotion on for \
                 the run (restored afterwards); its /proc/vmstat counters follow"
            );
            self.kernel_tiering = Some((on, kernel_tiering::counters()));
        }
        if req.page_size == PageSize::Huge2M {
            self.huge = Some(HugeView::default());
            self.info.page_size = PageSize::Huge2M;
            for t in &mut self.info.tiers {
                t.capacity_pages = t.capacity_pages.map(|c| c / SUBPAGES);
            }
        }
        if req.trackers.iter().any(|t| t.kind == TrackerKind::PageBits) {
            self.page_bits = true;
            if let Some(idle) = self.open_idle_bitmap()? {
                tracing::info!(
                    "page-table bits: dirty from soft-dirty, referenced from the idle-page bitmap"
                );
                self.idle = Some(idle);
            }
            // DAMON's defaults: a sample every 5 ms, aggregated every 100 ms.
            let want = self.idle.is_none()
                && match self.referenced {
                    ReferencedSource::SoftDirty | ReferencedSource::IdlePage => false,
                    ReferencedSource::Damon => {
                        if !damon::available() {
                            return Err(MachineError::MissingTracker {
                                tracker: "DAMON regions",
                                hint: "the config asks for DAMON but this kernel has no DAMON sysfs; \
                                   set [trackers] referenced = \"auto\""
                                    .into(),
                            });
                        }
                        true
                    }
                    ReferencedSource::Auto => damon::available(),
                };
            match want.then(|| self.start_damon()) {
                Some(Ok(())) => {
                    tracing::info!("page-table bits: dirty from soft-dirty, referenced from DAMON regions");
                }
                other => {
                    let why = match other {
                        Some(Err(e)) => e,
                        _ if self.referenced == ReferencedSource::SoftDirty => "as configured".into(),
                        _ => "this kernel has no DAMON".into(),
                    };
                    tracing::info!(
                        "page-table bits: dirty from soft-dirty; referenced also from soft-dirty ({why}; no \
                         idle-page bitmap either), so read-only pages look idle"
                    );
                }
            }
        }
        self.sampling = req.trackers.iter().any(|t| t.kind == TrackerKind::Sampling);
        self.ticks_per_aggregation =
            req.tick_ns.map_or(1, |t| (DAMON_AGGREGATION_NS / t.max(1)).clamp(1, 1000) as u32);
        if let Some(t) = req.trackers.iter().find(|t| t.kind == TrackerKind::Sampling) {
            self.start_sampling(t.period as u64)?;
        }
        if req.mechanisms.contains(&Mechanism::WriteProtectedCopies) && self.faults.is_none() {
            self.start_fault_sampler()?;
        }
        self.scan().map_err(|e| MachineError::Other(e.to_string()))?;
        self.info.pages = self.page_count();
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
            if !self.alive() {
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
        let due = self.page_bits || self.scanned_at.is_none_or(|t| t.elapsed() >= FULL_SCAN_EVERY);
        if due {
            self.scanned_at = Some(Instant::now());
            match self.scan() {
                Ok(()) => {}
                Err(ProcessError::Gone(_)) => self.gone = true,
                Err(e) => tracing::warn!("scan of process {} failed: {e}", self.pid),
            }
        }
        self.info.pages = self.page_count();
        if let Some((_, last)) = self.kernel_tiering.as_mut() {
            let now = kernel_tiering::counters();
            if now != *last {
                let delta: Vec<String> = kernel_tiering::COUNTERS
                    .iter()
                    .zip(now.iter().zip(last.iter()))
                    .filter(|(_, (n, l))| n != l)
                    .map(|(name, (n, l))| format!("{name} +{}", n.saturating_sub(*l)))
                    .collect();
                tracing::info!(target: "terrace::kernel", "kernel tiering: {}", delta.join(", "));
                *last = now;
            }
        }
        self.collect_samples();
        self.stats.tracking_seconds += t0.elapsed().as_secs_f64();
        self.deciding_since = Some(Instant::now());
        self.stats.observations += 1;
        let previous = self.last_observe.as_nanos() as u64;
        self.last_observe = self.start.elapsed();
        let (placement, tiers, bits) = match &self.huge {
            Some(h) => (&h.placement, &h.status, &h.bits),
            None => (&self.placement, &self.tier_status, &self.bits),
        };
        Observations {
            now_ns: self.last_observe.as_nanos() as u64,
            previous_ns: previous,
            placement,
            tiers,
            page_bits: self.page_bits.then_some(bits.as_slice()),
            samples: &self.samples,
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
        let (mut options, not_honoured) = self.info.mechanisms.honour(plan);
        if !not_honoured.is_empty() {
            let names: Vec<&str> = not_honoured.iter().map(|m| m.name()).collect();
            tracing::debug!(target: "terrace::plan", "carried out without {} (not offered here)", names.join(", "));
        }
        applied.not_honoured = not_honoured;
        let now = self.start.elapsed();
        let mut budget = RateBudget::new(&options, now.saturating_sub(self.last_apply).as_nanos() as f64);
        self.last_apply = now;
        let view: &[TierId] = self.huge.as_ref().map_or(&self.placement, |h| &h.placement);
        let page_bytes = self.info.page_size.bytes();
        let checked = plan.check(view, self.tiers.len(), &mut budget, page_bytes, &mut applied);
        // Two phases: the moves and every exchange's demotion first, then the promotions whose
        // demotion happened, so the fast tier never holds more than it did, however many batches
        // are in flight (an exchange is a demotion batch and its promotion batch: move_pages has
        // no swap).
        let mut first: Vec<(u32, TierId)> = checked.moves.iter().map(|m| (m.page, m.to)).collect();
        let pairs: Vec<(u32, TierId, u32, TierId)> =
            checked.exchanges.iter().map(|e| (e.down.page, e.down.to, e.up.page, e.up.to)).collect();
        first.extend(pairs.iter().map(|&(down, to, _, _)| (down, to)));
        if self.dry_run {
            first.extend(pairs.iter().map(|&(_, _, up, to)| (up, to)));
            self.move_policy_pages(&first, &options, &plan.reason, &mut applied);
            return applied;
        }
        // A batch counts policy pages: a 2 MiB page is 512 addresses in one call.
        if self.huge.is_some() {
            options.batch_pages = options.batch_pages.saturating_mul(SUBPAGES as u32);
        }
        let moved_first = self.move_policy_pages(&first, &options, &plan.reason, &mut applied);
        let mut second = Vec::new();
        for &(down, _, up, to) in &pairs {
            if moved_first.contains(&down) {
                second.push((up, to));
            } else {
                // The demotion did not happen: promoting now would overfill the fast tier.
                applied.fail(MoveFailure::NoSpace);
            }
        }
        let moved_second = self.move_policy_pages(&second, &options, &plan.reason, &mut applied);
        applied.pages_moved = (moved_first.len() + moved_second.len()) as u64;
        // An exchange counts when both halves happened.
        applied.pairs_exchanged = pairs
            .iter()
            .filter(|&&(down, _, up, _)| moved_first.contains(&down) && moved_second.contains(&up))
            .count() as u64;
        applied.bytes_copied = applied.pages_moved * page_bytes;
        applied.time_ns = (self.start.elapsed() - now).as_nanos() as u64;
        self.stats.plans += 1;
        self.stats.migration_seconds += applied.time_ns as f64 * 1e-9;
        applied
    }
}

impl LiveMachine {
    /// Moves policy pages to tiers (each a 4 KiB page, or 512 of them for a 2 MiB page) in one
    /// migrator run; records failures in `applied`, updates the placement and the tiers'
    /// occupancy, and returns the policy pages that moved. In a dry run it only logs.
    fn move_policy_pages(
        &mut self,
        wanted: &[(u32, TierId)],
        options: &MoveOptions,
        reason: &str,
        applied: &mut Applied,
    ) -> std::collections::HashSet<u32> {
        let mut done = std::collections::HashSet::new();
        if wanted.is_empty() {
            return done;
        }
        let view_len = self.huge.as_ref().map_or(self.placement.len(), |h| h.placement.len());
        let target_node =
            |t: TierId| self.tiers.get(t.index()).and_then(|t| t.nodes.first()).map(|&n| n as i32);
        let mut moves = Vec::with_capacity(wanted.len());
        let mut asked = Vec::with_capacity(wanted.len());
        for &(page, to) in wanted {
            match target_node(to) {
                Some(node) if (page as usize) < view_len => {
                    asked.push((page, node));
                    moves.extend(self.addresses_of(page).into_iter().map(|addr| PageMove {
                        addr,
                        node,
                        tag: page,
                    }));
                }
                _ => applied.fail(MoveFailure::Invalid),
            }
        }
        if self.dry_run {
            let mut by_tier = vec![0u64; self.tiers.len()];
            for &(_, node) in &asked {
                let t = self.tier_of_node(node);
                if t.is_placed() {
                    by_tier[t.index()] += 1;
                }
            }
            let what: Vec<String> =
                by_tier.iter().enumerate().map(|(t, n)| format!("{n} to tier{t}")).collect();
            tracing::info!(target: "terrace::plan", "dry run: would move {} ({reason})", what.join(", "));
            return done;
        }
        let guard = match (&self.faults, options.protected_copies) {
            (Some(f), true) => Some(f as &dyn migrate::CopyGuard),
            _ => None,
        };
        let out = migrate::execute_guarded(self.pid, &moves, options, reason, guard);
        if let Some(f) = &self.faults {
            self.stats.writes_held_for_copy = f.counts().held_for_copy;
        }
        // A policy page moved if none of its present 4 KiB pages failed; absent ones do not count.
        let mut failed: std::collections::HashMap<u32, MoveFailure> = std::collections::HashMap::new();
        for &(tag, why) in &out.failed {
            if why != MoveFailure::NotPresent || self.huge.is_none() {
                failed.entry(tag).or_insert(why);
            }
        }
        for why in failed.values() {
            applied.fail(*why);
        }
        for &(page, node) in &asked {
            if failed.contains_key(&page) {
                continue;
            }
            done.insert(page);
            let tier = self.tier_of_node(node);
            // Until the next full scan, this is where the page is, and what its tiers hold.
            let (placement, status) = match self.huge.as_mut() {
                Some(h) => (&mut h.placement, &mut h.status),
                None => (&mut self.placement, &mut self.tier_status),
            };
            let old = std::mem::replace(&mut placement[page as usize], tier);
            if let Some(s) = status.get_mut(old.index()).filter(|_| old.is_placed()) {
                s.used_pages = s.used_pages.saturating_sub(1);
            }
            if let Some(s) = status.get_mut(tier.index()).filter(|_| tier.is_placed()) {
                s.used_pages += 1;
            }
        }
        if self.page_bits {
            // Moving a page the program has written sets its soft-dirty bit: the kernel re-makes
            // the mapping dirty after the copy, and on x86 making an entry dirty sets soft-dirty
            // too. So at the next scan a moved page shows what it showed before the move.
            for m in moves.iter().filter(|m| !failed.contains_key(&m.tag)) {
                if let Some(i) = self.mem.index().index_of(m.addr) {
                    if let Some(&b) = self.bits.get(i as usize) {
                        self.bits_before_move.push((i, b));
                    }
                }
            }
        }
        self.stats.pages_moved += out.moved;
        self.stats.moves_failed += failed.len() as u64;
        done
    }
}

const DAMON_AGGREGATION_NS: u64 = 100_000_000;
/// The longest a policy that ticks faster waits for a full scan of the program's memory.
const FULL_SCAN_EVERY: Duration = Duration::from_millis(100);

/// Read samples for a page whose DAMON region saw an access in `accessed` of `per_aggregation`
/// samples: put on the fault sampler's scale, which catches at most one write per page per tick,
/// so a page read all the time earns as many read samples as one written all the time earns
/// write samples (`ticks` per aggregation), and a page touched once in the aggregation (a single
/// pass) earns at most one.
fn read_samples(accessed: u32, per_aggregation: u32, ticks: u32) -> u32 {
    let scaled = (accessed as u64 * ticks as u64 + per_aggregation as u64 / 2) / per_aggregation as u64;
    (scaled as u32).clamp(u32::from(accessed > 0), ticks)
}

/// Why a policy that samples accesses or protects its copies cannot manage a process that is
/// already running.
const USERFAULTFD_NEEDS_RUN: &str = "this machine has no PMU with load/store sampling, and the fault \
    sampler (which also write-protects copies) creates its userfaultfd inside the program as it \
    starts: start the program with `terrace run --policy P -- PROGRAM` (a running process cannot \
    be given one)";

/// Whether a policy needs a userfaultfd of its program: to write-protect its copies, or to sample
/// accesses where the CPU has no perf sampler.
pub fn needs_userfaultfd(req: &Requirements) -> bool {
    let sampling = req.trackers.iter().any(|t| t.kind == TrackerKind::Sampling);
    req.mechanisms.contains(&Mechanism::WriteProtectedCopies)
        || (sampling && perf_sampler::memory_events().is_err())
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
/// not known yet), once the host is known to be able to give it.
pub fn live_requirements(
    policy: &dyn terrace_model::Policy,
    tiers: &[LiveTier],
    attach: Attach,
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
    check_requirements(&req, attach)?;
    Ok(req)
}

/// Whether this host can give a policy what it asks for; says what is missing and how to get it.
/// `terrace run` and the daemon ask before they start or bind the program.
pub fn check_requirements(req: &Requirements, attach: Attach) -> Result<(), MachineError> {
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
    for t in &req.trackers {
        match t.kind {
            TrackerKind::PageBits => {
                if !soft_dirty::works_here() {
                    return Err(MachineError::MissingTracker {
                        tracker: "page-table bits",
                        hint: "this kernel has no soft-dirty tracking (CONFIG_MEM_SOFT_DIRTY); \
                               `terrace doctor` lists what it has"
                            .into(),
                    });
                }
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
    if needs_userfaultfd(req) {
        let sampling = req.trackers.iter().any(|t| t.kind == TrackerKind::Sampling);
        let tracker = if sampling { "access sampling" } else { "write-protected copies" };
        if attach == Attach::Running {
            return Err(MachineError::MissingTracker { tracker, hint: USERFAULTFD_NEEDS_RUN.into() });
        }
        if let Err(u) = crate::userfaultfd::probe_write_protect() {
            return Err(MachineError::MissingTracker {
                tracker,
                hint: format!("{}; {}", u.detail, u.enable),
            });
        }
    }
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
    use super::read_samples;

    #[test]
    fn damon_counts_become_reads_on_the_write_samplers_scale() {
        // 20 DAMON samples per aggregation, 10 policy ticks in it (hemem's 10 ms).
        assert_eq!(read_samples(0, 20, 10), 0);
        assert_eq!(read_samples(1, 20, 10), 1, "an access seen at all is at least one read");
        assert_eq!(read_samples(10, 20, 10), 5);
        assert_eq!(read_samples(20, 20, 10), 10, "always accessed: one read per tick");
        // One tick per aggregation (a 1 s policy): at most one read.
        assert_eq!(read_samples(20, 20, 1), 1);
    }
}
