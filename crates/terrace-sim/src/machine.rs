//! The simulated machine: replays an access stream against the tier model and implements
//! [`Machine`], so any policy runs on it unchanged.
//!
//! Replay works in slices of [`SLICE_ACCESSES`] accesses: each access is placed (first touch),
//! counted against its tier and seen by the enabled trackers; then the slice's time comes from
//! [`timing::slice_ns`]. Policies tick between slices. A plan's pages go to the policy's movers
//! ([`crate::movers`]) and change tier when their copies complete, which is looked at before
//! each slice.

use crate::corun::CoRun;
use crate::memory_mode::{CacheOutcome, DirectMappedCache};
use crate::migration::{self, MoveWork};
use crate::movers::{CopyKind, MoverQueue, WriteGuard};
use crate::placement::Placement;
use crate::profile::{Profile, MAX_TIERS};
use crate::report::{ObjectTotals, RunReport, TierTotals};
use crate::timeline::{Timeline, TimelineRecorder};
use crate::timing::{self, TierLoad, Timing, LINE_BYTES};
use crate::trackers::{
    future::FutureWindow, hint_faults::HintFaults, page_bits::PageBits, sampling::Sampler, SliceTracker,
    Touch,
};
use crate::{energy, SimError};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use terrace_model::{
    Access, AccessKind, Applied, InitialPlacement, Machine, MachineError, MachineInfo, Mechanism, Mechanisms,
    MemoryMode, Move, MoveFailure, MoveOptions, Mover, ObjectEvent, ObjectEventKind, Observations, PageIdx,
    PageSize, Plan, Progress, RateBudget, Requirements, Tier, TierId, TierStatus, TrackerKind,
};
use terrace_workloads::{AccessSource, ObjectEventAt};

/// Accesses per timing slice: small enough that a policy tick lands close to its period.
pub const SLICE_ACCESSES: usize = 1024;
/// Accesses fetched from the source at a time.
const BATCH_ACCESSES: usize = 1 << 16;

/// `page_state`: the page is in no mover's queue.
const IDLE: u8 = 0;
/// `page_state`: a mover has taken the page on and it has not landed (a move of it is `Busy`).
const QUEUED: u8 = 1;

pub struct SimMachine {
    info: MachineInfo,
    /// Each tier's capacity as configured, bytes, fastest first.
    capacity_bytes: Vec<u64>,
    /// The user did not size the last tier: it then holds whatever the others cannot, in
    /// pages of the policy's size (a footprint of 1.5 huge pages needs 2 somewhere).
    slow_is_default: bool,
    profile: Profile,
    timing: Timing,
    source: Box<dyn AccessSource>,
    buf: Vec<Access>,
    pos: usize,
    source_done: bool,
    page_shift: u32,
    placement: Placement,
    mode: MemoryMode,
    cache: Option<DirectMappedCache>,
    bits: Option<PageBits>,
    sampler: Option<Sampler>,
    future: Option<FutureWindow>,
    /// The source reads ahead itself ([`AccessSource::read_ahead`]: several programs, whose
    /// turns it still hands out by the clocks run): the future window then counts what it
    /// reports and loses each access as it is replayed.
    source_reads_ahead: bool,
    ahead_scratch: Vec<Access>,
    hints: Option<HintFaults>,
    /// The slice's accesses as the trackers see them, when any is enabled.
    touches: Vec<Touch>,
    /// Cost of one hint fault to the faulting thread, ns (docs/model.md §6).
    hint_fault_ns: f64,
    /// Open access streams per thread: merge accesses within one media unit, detect sequential reads.
    streams: Box<[StreamTable; 256]>,
    /// Memory Mode: the open write streams of each thread's dirty-line write-backs, so that
    /// consecutive victims combine in the slow tier's media unit as the thread's own writes do.
    writeback_streams: Box<[StreamTable; 256]>,
    now_ns: f64,
    last_observe_ns: f64,
    last_apply_ns: f64,
    accesses_since_observe: u64,
    /// The policy's movers: its mover first, then its demotion mover if it has one
    /// (docs/model.md §4, "Movers").
    movers: Vec<MoverQueue>,
    /// Per page: `IDLE` or `QUEUED`.
    page_state: Vec<u8>,
    /// The copies under way at the start of the slice being replayed: (mover, index in its queue).
    copying: Vec<(usize, usize)>,
    /// The pages of `copying` (at most two a mover): a write to one of them in the slice waits,
    /// or makes the copy redone.
    copying_pages: Vec<PageIdx>,
    /// Writes of the slice to pages being copied: (page, thread).
    write_hits: Vec<(PageIdx, u8)>,
    /// Program time owed to tracking (its CPU time and shootdowns), paid by the next slice.
    stall_owed_ns: f64,
    /// Program time owed to moves (their shootdowns, the faulting threads' copies, writes
    /// waiting for protected copies), paid by the next slice.
    move_wait_owed_ns: f64,
    since_observe: Vec<TierStatus>,
    /// What the last observation handed out: tier status, bits and samples of the interval it closed.
    observed_tiers: Vec<TierStatus>,
    observed_bits: Vec<u8>,
    observed_samples: Vec<terrace_model::Sample>,
    observed_hint_faults: Vec<terrace_model::HintFault>,
    totals: Vec<TierTotals>,
    accesses: u64,
    pages_migrated: u64,
    pages_switched: u64,
    /// Per page, whether it is a huge page split to move (docs/model.md §4, "Huge pages split to
    /// move"): empty until one is. A later move of the page whole, or its release, makes it whole
    /// again.
    split_pages: Vec<bool>,
    /// Accesses to split huge pages, whose TLB misses the model does not charge.
    split_page_accesses: u64,
    shadows_dropped: u64,
    /// Writes of the slice to pages with a shadow: each drops it.
    shadow_writes: Vec<PageIdx>,
    failed_moves: u64,
    tlb_shootdowns: u64,
    tracking_ns: f64,
    stall_ns: f64,
    /// The part of `stall_ns` the program waited for moves.
    move_wait_ns: f64,
    /// What the last observation handed out as in flight.
    observed_in_flight: Vec<Move>,
    error: Option<SimError>,
    /// The stream's object events not yet replayed, by position (docs/model.md §5, "Objects").
    stream_events: VecDeque<ObjectEventAt>,
    event_scratch: Vec<ObjectEventAt>,
    /// Per page, the live objects that overlap it; empty until the first object event.
    live_objects: Vec<u32>,
    /// Pages freed while a mover held them: released when they land.
    release_on_landing: Vec<PageIdx>,
    /// The tier each advised allocation site's new objects go to (object tiering §3.5).
    site_advice: HashMap<u64, TierId>,
    /// Events replayed and not yet taken by the policy, when it asked for them.
    policy_events: Option<Vec<ObjectEvent>>,
    objects: ObjectTotals,
    policy_name: String,
    /// [`crate::SimOptions::start_tier`].
    start_tier: Option<TierId>,
    progress: Option<Arc<AtomicU64>>,
    reported_progress: u64,
    /// Placement over time, when asked for ([`SimMachine::record_timeline`]).
    timeline: Option<TimelineRecorder>,
    /// The programs' clocks, when several share the machine (docs/model.md §13).
    corun: Option<CoRun>,
}

/// The machine's read-ahead buffer goes to the next machine of this thread (`access_buffer`).
impl Drop for SimMachine {
    fn drop(&mut self) {
        crate::access_buffer::give_back(std::mem::take(&mut self.buf));
    }
}

impl SimMachine {
    /// A machine for `source` with the fast tier's capacity and the last tier's in bytes (`None`
    /// = the profile's slow:fast ratio, and at least the footprint); a middle tier is its
    /// profile's `capacity_to_fast` times the fast tier. Fails if the footprint cannot fit.
    pub fn new(
        profile: Profile,
        source: Box<dyn AccessSource>,
        fast_bytes: u64,
        slow_bytes: Option<u64>,
    ) -> Result<Self, SimError> {
        let w = source.info().clone();
        w.validate().map_err(|why| SimError::InvalidWorkload { name: w.name.clone(), why })?;
        let programs = source.programs().to_vec();
        if fast_bytes == 0 {
            return Err(SimError::ZeroCapacity);
        }
        // Unless the user sizes the slow tier, it is the profile's multiple of the fast tier, and
        // never smaller than the footprint: a simulated run is not about running out of memory.
        let slow_is_default = slow_bytes.is_none();
        let slow_bytes = slow_bytes.unwrap_or_else(|| {
            ((fast_bytes as f64 * profile.slow_to_fast_capacity) as u64).max(w.footprint_bytes)
        });
        let n = profile.tiers.len();
        let mut capacity_bytes = vec![fast_bytes];
        capacity_bytes.extend(
            profile.tiers[1..n - 1]
                .iter()
                .map(|t| (fast_bytes as f64 * t.capacity_to_fast.unwrap_or(1.0)) as u64),
        );
        capacity_bytes.push(slow_bytes);
        let slower: u64 = capacity_bytes[1..].iter().fold(0, |a, &b| a.saturating_add(b));
        if fast_bytes.saturating_add(slower) < w.footprint_bytes {
            return Err(SimError::DoesNotFit {
                footprint: w.footprint_bytes,
                fast: fast_bytes,
                slow: slower,
            });
        }
        let timing = Timing::new(&profile, w.threads);
        let tiers = profile
            .tiers
            .iter()
            .zip(&timing.tiers)
            .enumerate()
            .map(|(i, (t, tt))| Tier {
                id: TierId(i as u8),
                name: t.name.clone(),
                kind: t.kind,
                capacity_pages: Some(capacity_bytes[i] / PageSize::Base4K.bytes()),
                // What HMAT would report to a policy on real hardware.
                read_latency_ns: Some(t.read_latency_random_ns),
                read_bandwidth_gb_s: Some(tt.read_bytes_per_ns),
                write_bandwidth_gb_s: Some(tt.write_bytes_per_ns),
            })
            .collect();
        let info = MachineInfo {
            name: format!("simulated {}", profile.name),
            tiers,
            page_size: Default::default(),
            pages: 0,
            threads: w.threads,
            scale: w.scale,
            // A model can charge for every mechanism (docs/model.md §4).
            mechanisms: Mechanisms::all(),
            programs: programs.clone(),
            move_unit_bytes: 0,
        };
        let corun = (!programs.is_empty()).then(|| CoRun::new(&profile, &programs));
        Ok(SimMachine {
            corun,
            timing,
            capacity_bytes,
            slow_is_default,
            info,
            profile,
            source,
            buf: crate::access_buffer::take(BATCH_ACCESSES),
            pos: 0,
            source_done: false,
            page_shift: 12,
            placement: Placement::new(0, vec![None; n], Default::default()),
            mode: MemoryMode::Flat,
            cache: None,
            bits: None,
            sampler: None,
            future: None,
            hints: None,
            touches: Vec::with_capacity(SLICE_ACCESSES),
            hint_fault_ns: 0.0,
            streams: Box::new([StreamTable::default(); 256]),
            writeback_streams: Box::new([StreamTable::default(); 256]),
            now_ns: 0.0,
            last_observe_ns: 0.0,
            last_apply_ns: 0.0,
            accesses_since_observe: 0,
            movers: vec![MoverQueue::new(Mover::PolicyThread)],
            page_state: Vec::new(),
            copying: Vec::new(),
            copying_pages: Vec::new(),
            write_hits: Vec::new(),
            stall_owed_ns: 0.0,
            move_wait_owed_ns: 0.0,
            since_observe: vec![TierStatus::default(); n],
            observed_tiers: vec![TierStatus::default(); n],
            observed_bits: Vec::new(),
            observed_samples: Vec::new(),
            observed_hint_faults: Vec::new(),
            totals: vec![TierTotals::default(); n],
            accesses: 0,
            pages_migrated: 0,
            pages_switched: 0,
            split_pages: Vec::new(),
            split_page_accesses: 0,
            shadows_dropped: 0,
            shadow_writes: Vec::new(),
            failed_moves: 0,
            tlb_shootdowns: 0,
            tracking_ns: 0.0,
            stall_ns: 0.0,
            move_wait_ns: 0.0,
            observed_in_flight: Vec::new(),
            error: None,
            stream_events: VecDeque::new(),
            event_scratch: Vec::new(),
            source_reads_ahead: false,
            ahead_scratch: Vec::new(),
            live_objects: Vec::new(),
            release_on_landing: Vec::new(),
            site_advice: HashMap::new(),
            policy_events: None,
            objects: ObjectTotals::default(),
            policy_name: String::new(),
            start_tier: None,
            progress: None,
            reported_progress: 0,
            timeline: None,
        })
    }

    /// The first replay error (an access outside the footprint, a broken trace), if any.
    pub fn take_error(&mut self) -> Option<SimError> {
        self.error.take().or_else(|| self.source.take_error().map(SimError::Trace))
    }

    /// Current placement (for tests and reports).
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Each tier's traffic so far, fastest first (what [`Self::report`] gives, without the rest).
    pub fn tier_totals(&self) -> &[TierTotals] {
        &self.totals
    }

    /// The run's report so far.
    pub fn report(&self) -> RunReport {
        let mut tiers = self.totals.clone();
        for (t, tot) in tiers.iter_mut().enumerate() {
            tot.peak_pages = self.placement.peak[t];
            tot.capacity_pages = self.placement.capacity[t];
        }
        let bytes_migrated = tiers.iter().map(|t| t.copy_write_bytes).sum();
        RunReport {
            workload: self.source.info().name.clone(),
            policy: self.policy_name.clone(),
            profile: self.profile.name.clone(),
            page_bytes: self.info.page_size.bytes(),
            footprint_bytes: self.source.info().footprint_bytes,
            fast_capacity_bytes: self.capacity_bytes[0],
            accesses: self.accesses,
            runtime_ns: self.now_ns,
            energy_j: energy::run_energy_j(&self.profile, &tiers, self.now_ns),
            tiers,
            pages_migrated: self.pages_migrated,
            bytes_migrated,
            failed_moves: self.failed_moves,
            pages_not_done: self.movers.iter().map(|m| m.queued_pages).sum(),
            tlb_shootdowns: self.tlb_shootdowns,
            pages_switched: self.pages_switched,
            split_page_accesses: self.split_page_accesses,
            shadows_dropped: self.shadows_dropped,
            shadow_peak_bytes: self.placement.shadow_peak * self.info.page_size.bytes(),
            migration_ns: self.movers.iter().map(|m| m.time_copying(self.now_ns)).sum(),
            mover_ns: self.movers.iter().map(|m| m.time_copying(self.now_ns)).collect(),
            move_wait_ns: self.move_wait_ns,
            tracking_ns: self.tracking_ns,
            stall_ns: self.stall_ns,
            objects: ObjectTotals {
                bytes_placed_by_advice: self.placement.advised_pages * self.info.page_size.bytes(),
                ..self.objects
            },
            programs: self.corun.as_ref().map_or_else(Vec::new, |c| c.runs(&self.info.programs)),
        }
    }

    pub fn set_progress(&mut self, progress: Option<Arc<AtomicU64>>) {
        self.progress = progress;
    }

    /// Records placement over time from the run's start on (call before it starts), for
    /// [`SimMachine::take_timeline`].
    pub fn record_timeline(&mut self) {
        self.timeline = Some(TimelineRecorder::default());
    }

    /// The placement over time recorded, the last epoch closed now; `None` unless
    /// [`SimMachine::record_timeline`] was called.
    pub fn take_timeline(&mut self) -> Option<Timeline> {
        let recorder = self.timeline.take()?;
        Some(recorder.finish(self.now_ns, self.accesses, &self.totals, &self.placement))
    }

    /// First touches go to `tier` (then the next with room) whatever the policy's initial
    /// placement says ([`crate::SimOptions::start_tier`]).
    pub fn set_start_tier(&mut self, tier: Option<TierId>) {
        self.start_tier = tier;
    }

    pub fn set_policy_name(&mut self, name: &str) {
        self.policy_name = name.to_string();
    }

    /// Makes sure `n` accesses past `pos` are buffered (fewer if the stream ends). Returns how many are.
    fn buffer_ahead(&mut self, n: usize) -> usize {
        while self.buf.len() - self.pos < n && !self.source_done {
            // Drop the replayed accesses only once they are at least as many as those still
            // ahead, so a long look-ahead (the oracle's) is not shifted down on every interval:
            // each access is moved at most about once.
            if self.pos > 0 && self.pos >= self.buf.len() - self.pos {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            let want = BATCH_ACCESSES.max(n - (self.buf.len() - self.pos));
            if let Some(c) = &self.corun {
                self.source.set_program_clocks(&c.clocks, &c.made);
            }
            if self.source.fill(&mut self.buf, want) == 0 {
                self.source_done = true;
            }
            if self.source_reads_ahead {
                // What `fill` made on the spot lies ahead until it is replayed.
                self.source.read_ahead(0, &mut self.ahead_scratch);
                if let Some(f) = self.future.as_mut() {
                    f.add(&self.ahead_scratch, self.page_shift);
                }
                self.ahead_scratch.clear();
            }
            self.source.take_object_events(&mut self.event_scratch);
            self.stream_events.extend(self.event_scratch.drain(..));
        }
        self.buf.len() - self.pos
    }

    /// Replays the object events due before the next access (all of them once the stream has
    /// ended): an allocation counts its pages' live objects and, if its site is advised, marks
    /// them for the advised tier; a free releases each page no live object overlaps any more
    /// (docs/model.md §5, "Objects").
    fn replay_due_events(&mut self) {
        let end_of_stream = self.source_done && self.buf.len() == self.pos;
        while let Some(e) = self.stream_events.front().copied() {
            if e.at > self.accesses && !end_of_stream {
                break;
            }
            self.stream_events.pop_front();
            self.object_event(e.event);
            if self.error.is_some() {
                return;
            }
        }
    }

    fn object_event(&mut self, ev: ObjectEvent) {
        let footprint = self.source.info().footprint_bytes;
        if ev.addr.checked_add(ev.bytes).is_none_or(|end| end > footprint) {
            self.error = Some(SimError::ObjectOutOfFootprint { addr: ev.addr, bytes: ev.bytes, footprint });
            return;
        }
        if self.live_objects.is_empty() {
            self.live_objects = vec![0; self.info.pages as usize];
        }
        let pages = ev.pages(self.info.page_size.bytes());
        match ev.kind {
            ObjectEventKind::ProgramStart { .. } => {
                if let Some(c) = self.corun.as_mut() {
                    c.start(ev.program as usize, self.now_ns);
                }
            }
            // A program that ends releases its memory (its pages leave their tiers), and the
            // machine's time moves on to the programs still running.
            ObjectEventKind::ProgramEnd => {
                for p in pages {
                    self.live_objects[p as usize] = 0;
                    if self.placement.tiers[p as usize].is_placed() {
                        self.release_page(p as PageIdx);
                    }
                }
                if let Some(c) = self.corun.as_mut() {
                    c.end(ev.program as usize);
                    self.now_ns = self.now_ns.max(c.now());
                }
            }
            ObjectEventKind::Alloc => {
                self.objects.allocated += 1;
                let advice = self.site_advice.get(&ev.site).copied();
                for p in pages {
                    let live = &mut self.live_objects[p as usize];
                    *live = live.saturating_add(1);
                    match advice {
                        Some(t) if !self.placement.tiers[p as usize].is_placed() => {
                            self.placement.prefer(p as PageIdx, t)
                        }
                        _ => {}
                    }
                }
            }
            ObjectEventKind::Free => {
                self.objects.freed += 1;
                for p in pages {
                    let live = &mut self.live_objects[p as usize];
                    // A page no allocation was seen for is not the free's to release.
                    if *live == 0 {
                        continue;
                    }
                    *live -= 1;
                    if *live == 0 {
                        self.release_page(p as PageIdx);
                    }
                }
            }
        }
        if let Some(v) = self.policy_events.as_mut() {
            v.push(ev);
        }
    }

    /// Frees a page: out of its tier now, or when its copy lands if a mover holds it.
    fn release_page(&mut self, page: PageIdx) {
        if self.page_state[page as usize] != IDLE {
            self.release_on_landing.push(page);
            return;
        }
        self.placement.release(page);
        if let Some(h) = self.hints.as_mut() {
            h.disarm(page as usize);
        }
        if let Some(s) = self.split_pages.get_mut(page as usize) {
            *s = false;
        }
    }

    /// Replays one slice in flat mode: places and counts each access against its tier (a page
    /// in flight is still in its old tier), and, when a tracker is enabled (`record`), lists the
    /// pages touched for the trackers.
    fn replay_flat(&mut self, end: usize, loads: &mut [TierLoad; MAX_TIERS], record: bool) -> u64 {
        let shift = self.page_shift;
        let mut gran_shift = [0u32; MAX_TIERS];
        for (g, t) in gran_shift.iter_mut().zip(&self.timing.tiers) {
            *g = t.granularity_shift;
        }
        // Borrow each field once, so the loop body touches plain references.
        let placement = &mut self.placement;
        let streams = &mut *self.streams;
        let touches = &mut self.touches;
        touches.clear();
        let shadows = placement.has_shadows();
        let shadow_writes = &mut self.shadow_writes;
        let split_pages = &self.split_pages;
        let mut split_accesses = 0u64;
        let mut instructions = 0u64;
        let mut broken = None;
        for &a in &self.buf[self.pos..end] {
            let page = (a.addr >> shift) as usize;
            let Some(&placed) = placement.tiers.get(page) else {
                broken = Some(a);
                break;
            };
            let tier = if placed.is_placed() {
                placed
            } else if let Some(t) = placement.first_touch(page as u32) {
                t
            } else {
                broken = Some(a);
                break;
            };
            let t = tier.index();
            if split_pages.get(page).copied().unwrap_or(false) {
                split_accesses += 1;
            }
            let write = a.kind == AccessKind::Write;
            if shadows && write && placement.shadow_of[page].is_placed() {
                shadow_writes.push(page as PageIdx);
            }
            instructions += a.instructions as u64;
            account_access(&mut loads[t], &mut streams[a.thread as usize], a, write, t, gran_shift[t]);
            if record {
                touches.push(Touch { page: page as u32, write });
            }
        }
        self.split_page_accesses += split_accesses;
        if let Some(a) = broken {
            self.fail_replay(a);
        }
        instructions
    }

    /// Lists the slice's writes to the pages being copied (`copying_pages`), with their threads:
    /// a pass of its own, so that the replay loop costs nothing more while no copy is under way
    /// (and little while one is).
    fn find_write_hits(&mut self, end: usize) {
        let Some(&first) = self.copying_pages.first() else { return };
        let shift = self.page_shift;
        let watched = &self.copying_pages[..];
        let hits = &mut self.write_hits;
        for a in &self.buf[self.pos..end] {
            let page = (a.addr >> shift) as PageIdx;
            // Most slices copy one page: test it first, the rest (a pair, a second mover) after.
            if a.kind == AccessKind::Write && (page == first || watched[1..].contains(&page)) {
                hits.push((page, a.thread));
            }
        }
    }

    /// Hands the slice just replayed to every enabled tracker.
    fn feed_trackers(&mut self) {
        let trackers: [Option<&mut dyn SliceTracker>; 3] = [
            self.bits.as_mut().map(|b| b as &mut dyn SliceTracker),
            self.sampler.as_mut().map(|s| s as &mut dyn SliceTracker),
            self.hints.as_mut().map(|h| h as &mut dyn SliceTracker),
        ];
        for t in trackers.into_iter().flatten() {
            t.slice(&self.touches);
        }
    }

    /// Replays one slice with the fast tier as a cache of the slow tier (Memory Mode).
    /// On more than two tiers, the cache fronts every slower tier: each page has its home in one
    /// of them (placed by first touch, nearest first), and a miss or a write-back goes there.
    fn replay_cached(&mut self, end: usize, loads: &mut [TierLoad; MAX_TIERS]) -> u64 {
        let cache = self.cache.as_mut().expect("memory mode has a cache");
        let mut instructions = 0u64;
        let footprint = self.source.info().footprint_bytes;
        let shift = self.page_shift;
        for i in self.pos..end {
            let a = self.buf[i];
            if a.addr >= footprint {
                self.error = Some(SimError::OutOfFootprint { addr: a.addr, footprint });
                return instructions;
            }
            let Some(home) = home_tier(&mut self.placement, (a.addr >> shift) as usize) else {
                self.error = Some(SimError::MachineFull);
                return instructions;
            };
            let slow = home.index();
            let slow_gran = self.timing.tiers[slow].granularity_shift;
            instructions += a.instructions as u64;
            let write = a.kind == AccessKind::Write;
            let last = &mut self.streams[a.thread as usize];
            let wb_streams = &mut self.writeback_streams[a.thread as usize];
            match cache.access(a.addr, write) {
                CacheOutcome::Hit => account_access(&mut loads[0], last, a, write, 0, 6),
                CacheOutcome::Miss { writeback } => {
                    // The line comes from the slow tier (a write miss reads it too, then writes
                    // it in DRAM) and is filled into DRAM; a dirty victim goes back to the slow
                    // tier, a write of its own line that merges into an open media unit like any
                    // write (model.md §1). Fills and write-backs cost bandwidth; the access counts
                    // as a miss.
                    if write {
                        // Read for ownership: the line's bytes, counted as a write miss.
                        let mut rfo = TierLoad::default();
                        account_access(&mut rfo, last, a, false, slow, slow_gran);
                        loads[slow].read_bytes += rfo.read_bytes;
                        loads[slow].writes += 1;
                    } else {
                        account_access(&mut loads[slow], last, a, false, slow, slow_gran);
                    }
                    loads[0].write_bytes += LINE_BYTES;
                    if let Some(victim) = writeback {
                        loads[0].read_bytes += LINE_BYTES;
                        let mut wb = TierLoad::default();
                        let line = Access { addr: victim, size: LINE_BYTES as u16, ..a };
                        // The victim's page was touched when its line came in, but its object
                        // may have been freed since (no home then): its line goes back to the
                        // slow tier, every page's home in Memory Mode.
                        let home = self.placement.tiers[(victim >> shift) as usize];
                        let to = if home.is_placed() { home.index() } else { slow };
                        account_access(
                            &mut wb,
                            wb_streams,
                            line,
                            true,
                            to,
                            self.timing.tiers[to].granularity_shift,
                        );
                        loads[to].write_bytes += wb.write_bytes;
                    }
                }
            }
        }
        instructions
    }

    #[cold]
    fn fail_replay(&mut self, a: Access) {
        let footprint = self.source.info().footprint_bytes;
        self.error = Some(if a.addr >= footprint {
            SimError::OutOfFootprint { addr: a.addr, footprint }
        } else {
            SimError::MachineFull
        });
    }

    /// Replays one slice and advances the clock by its time.
    fn step(&mut self) -> bool {
        self.land_copies();
        let buffered = self.buffer_ahead(1);
        if !self.stream_events.is_empty() {
            self.replay_due_events();
        }
        if buffered == 0 || self.error.is_some() {
            self.pay_owed_at_end();
            return false;
        }
        let mut end = (self.pos + SLICE_ACCESSES).min(self.buf.len());
        if let Some(e) = self.stream_events.front() {
            // A slice ends at the next object event, which comes between two accesses.
            end = end.min(self.pos + (e.at - self.accesses) as usize);
        }
        // Of several programs, a slice is one program's (docs/model.md §13).
        let program = self.corun.as_ref().map(|c| {
            let p = c.program_of(self.buf[self.pos].thread);
            if let Some(k) = self.buf[self.pos..end].iter().position(|a| c.program_of(a.thread) != p) {
                end = self.pos + k;
            }
            p
        });
        let mut loads = [TierLoad::default(); MAX_TIERS];
        // The copies under way load the tiers they read and write, each at its pages' bytes over
        // its duration, for the slice.
        self.mark_copying();
        let page_bytes = self.info.page_size.bytes() as f64;
        for &(q, i) in &self.copying {
            let c = &self.movers[q].items[i];
            let rate = page_bytes / c.dur_ns.max(1e-9);
            for &(_, from, to) in c.pages() {
                loads[from.index()].copy_read_bytes_per_ns += rate;
                loads[to.index()].copy_write_bytes_per_ns += rate;
            }
        }
        if let Some(h) = self.hints.as_mut() {
            h.now_ns = self.now_ns as u64;
        }
        let instructions = if self.mode == MemoryMode::FastTierAsCache {
            self.replay_cached(end, &mut loads)
        } else {
            let record = self.bits.is_some() || self.sampler.is_some() || self.hints.is_some();
            let instructions = self.replay_flat(end, &mut loads, record);
            self.drop_written_shadows();
            self.find_write_hits(end);
            if record {
                self.feed_trackers();
            }
            instructions
        };
        let tiers = self.info.tiers.len();
        let loads = &mut loads[..tiers];
        if self.hints.is_some() {
            self.charge_hint_faults();
        }
        if self.error.is_some() {
            return false;
        }
        let n = (end - self.pos) as u64;
        if let Some(f) = self.future.as_mut() {
            if self.source_reads_ahead {
                f.remove(&self.buf[self.pos..end], self.page_shift);
            } else {
                f.consume(self.accesses, &self.buf[self.pos..end], self.page_shift);
            }
        }
        if let Some(t) = self.timeline.as_mut() {
            t.count(&self.buf[self.pos..end], self.page_shift);
        }
        self.pos = end;
        self.accesses += n;
        if let Some(p) = &self.progress {
            if self.accesses - self.reported_progress >= BATCH_ACCESSES as u64 {
                p.fetch_add(self.accesses - self.reported_progress, Ordering::Relaxed);
                self.reported_progress = self.accesses;
            }
        }
        self.accesses_since_observe += n;
        let mut dt = match (program, self.corun.as_mut()) {
            (Some(p), Some(c)) => {
                // Where its time goes: the slice alone, with the movers' copies, and with the
                // other programs' traffic too (docs/model.md §13); each time is computed only
                // where that load is there.
                let copies = loads.iter().any(|l| l.copy_read_bytes_per_ns + l.copy_write_bytes_per_ns > 0.0);
                let with_copies = timing::slice_ns(c.timing(p), loads, instructions);
                let alone = if copies {
                    let mut quiet = [TierLoad::default(); MAX_TIERS];
                    for (q, l) in quiet.iter_mut().zip(loads.iter()) {
                        *q = TierLoad { copy_read_bytes_per_ns: 0.0, copy_write_bytes_per_ns: 0.0, ..*l };
                    }
                    timing::slice_ns(c.timing(p), &quiet[..loads.len()], instructions)
                } else {
                    with_copies
                };
                let dt = if c.add_background(p, loads) {
                    timing::slice_ns(c.timing(p), loads, instructions)
                } else {
                    with_copies
                };
                c.slowed(p, with_copies - alone, dt - with_copies);
                dt
            }
            _ => timing::slice_ns(&self.timing, loads, instructions),
        };
        self.charge_write_hits();
        let owed = self.stall_owed_ns + self.move_wait_owed_ns;
        self.stall_ns += owed;
        self.move_wait_ns += self.move_wait_owed_ns;
        self.stall_owed_ns = 0.0;
        self.move_wait_owed_ns = 0.0;
        match (program, self.corun.as_mut()) {
            (Some(p), Some(c)) => {
                // Of several programs, this stall halts them all; a move's is theirs (apply).
                c.stall_running(owed);
                self.now_ns = self.now_ns.max(c.advance(p, n, dt, loads));
            }
            _ => {
                dt += owed;
                self.now_ns += dt;
            }
        }
        for (t, l) in loads.iter().enumerate() {
            let tot = &mut self.totals[t];
            tot.reads += l.random_reads + l.sequential_reads;
            tot.writes += l.writes;
            tot.read_bytes += l.read_bytes;
            tot.write_bytes += l.write_bytes;
            // The simulated machine measures every tier's traffic, as uncore counters would.
            let since = &mut self.since_observe[t];
            since.read_bytes = Some(since.read_bytes.unwrap_or(0) + l.read_bytes);
            since.write_bytes = Some(since.write_bytes.unwrap_or(0) + l.write_bytes);
        }
        if let Some(t) = self.timeline.as_mut().filter(|t| t.due(self.accesses)) {
            t.close(self.now_ns, self.accesses, &self.totals, &self.placement);
        }
        true
    }

    /// The program has ended: what it owes for the last slice (shootdowns of the copies started
    /// in it, tracking) still held it up, so its run ends that much later. Of several programs,
    /// each pays on its own clock as it runs, and none is left running to pay this.
    fn pay_owed_at_end(&mut self) {
        if self.corun.is_some() {
            return;
        }
        let owed = std::mem::take(&mut self.stall_owed_ns) + self.move_wait_owed_ns;
        self.move_wait_ns += std::mem::take(&mut self.move_wait_owed_ns);
        self.stall_ns += owed;
        self.now_ns += owed;
    }

    /// Charges the hint faults of the slice just replayed (each stalls its thread), then runs
    /// the scan if one has come due (`task_numa_work`), charged like a page-bits scan: a
    /// page-table update per page armed and one TLB flush. As in the kernel, the next scan is
    /// due a period after this one ran (`numa_next_scan = now + period`), not a period after
    /// the one that was due: scans missed while the program was stalled are not made up, so a
    /// scan whose cost exceeds its period (a tiny `--size-scale` shrinks periods, not the cost
    /// of a TLB flush) slows the run instead of piling up without end.
    fn charge_hint_faults(&mut self) {
        let Some(h) = self.hints.as_mut() else { return };
        let mut tracker_ns = std::mem::take(&mut h.unpaid_faults) as f64 * self.hint_fault_ns;
        let mut flushes = 0u64;
        let mapped = self.placement.used.iter().sum();
        if h.next_scan_ns <= self.now_ns {
            let armed = h.scan(self.now_ns as u64, &self.placement.tiers);
            tracker_ns += PageBits::scan_ns(armed, self.profile.tracking.page_scan_ns);
            flushes += 1;
            h.next_scan_ns = self.now_ns + h.period_ns(mapped);
        }
        self.tracking_ns += tracker_ns;
        self.stall_owed_ns +=
            tracker_ns / self.timing.threads + flushes as f64 * self.profile.migration.tlb_shootdown_us * 1e3;
        self.tlb_shootdowns += flushes;
    }

    fn tier_status(&self) -> Vec<TierStatus> {
        let mut s = self.since_observe.clone();
        for (t, st) in s.iter_mut().enumerate() {
            st.read_bytes = st.read_bytes.or(Some(0));
            st.write_bytes = st.write_bytes.or(Some(0));
            st.used_pages = self.placement.occupied(t);
            st.capacity_pages = self.placement.capacity[t];
        }
        s
    }

    /// Charges the program for every copy started by now (docs/model.md §4, "Movers"): each
    /// shootdown of the copy's unmapping interrupts all program threads (mtier §5.2.1, Figs
    /// 5.2/5.3; Linux unmaps a page, and flushes, before it copies it), and a faulting thread's
    /// copy stalls that thread, n of them side by side. Of several programs, the stall is theirs
    /// whose pages the copy moves (docs/model.md §13). [`Self::land_copies`] runs it first, so
    /// no copy lands unpaid.
    fn charge_started_copies(&mut self) {
        let now = self.now_ns;
        let shootdown_ns = self.profile.migration.tlb_shootdown_us * 1e3;
        let threads = self.timing.threads;
        let page_bytes = self.info.page_size.bytes();
        let (info, corun) = (&self.info, &mut self.corun);
        let (mut shootdowns, mut unshared) = (0, 0.0);
        let mut shared = 0.0;
        // Allocated only when a copy of several programs' starts (this runs every slice).
        let mut weights: Vec<f64> = Vec::new();
        for m in &mut self.movers {
            let faulting = m.kind == Mover::FaultingThread;
            m.start_due(now, |c| {
                shootdowns += c.shootdowns;
                let stall =
                    c.shootdowns as f64 * shootdown_ns + if faulting { c.dur_ns / threads } else { 0.0 };
                match corun.as_mut() {
                    Some(co) => {
                        weights.clear();
                        weights.resize(info.programs.len(), 0.0);
                        for &(page, _, _) in c.pages() {
                            if let Some(p) = info.program_at(u64::from(page) * page_bytes) {
                                weights[p] += 1.0;
                            }
                        }
                        co.stall_shared(stall, &weights);
                        shared += stall;
                    }
                    None => unshared += stall,
                }
            });
        }
        self.tlb_shootdowns += shootdowns;
        self.stall_ns += shared;
        self.move_wait_ns += shared;
        self.move_wait_owed_ns += unshared;
    }

    /// Lands every copy completed by now: its pages change tier (docs/model.md §4, "Movers").
    fn land_copies(&mut self) {
        self.charge_started_copies();
        let now = self.now_ns;
        let page_bytes = self.info.page_size.bytes();
        for m in &mut self.movers {
            let split_pages = &mut self.split_pages;
            let pages = self.page_state.len();
            let (state, hints, totals, migrated, switched) = (
                &mut self.page_state,
                &mut self.hints,
                &mut self.totals,
                &mut self.pages_migrated,
                &mut self.pages_switched,
            );
            let (corun, info) = (&mut self.corun, &self.info);
            m.complete(now, &mut self.placement, |page, from, to, copied, split| {
                state[page as usize] = IDLE;
                if split && split_pages.is_empty() {
                    split_pages.resize(pages, false);
                }
                if let Some(s) = split_pages.get_mut(page as usize) {
                    *s = split;
                }
                if let Some(c) = corun.as_mut() {
                    if let Some(p) = info.program_at(u64::from(page) * page_bytes) {
                        c.moved(p, from.index(), to.index());
                    }
                }
                // Migration maps the page afresh: a hint-fault scan's arming is gone.
                if let Some(h) = hints.as_mut() {
                    h.disarm(page as usize);
                }
                if copied {
                    totals[from.index()].copy_read_bytes += page_bytes;
                    totals[to.index()].copy_write_bytes += page_bytes;
                } else {
                    *switched += 1;
                }
                *migrated += 1;
            });
        }
        if !self.release_on_landing.is_empty() {
            let pages = std::mem::take(&mut self.release_on_landing);
            for page in pages {
                // Still freed (no object allocated over it since): release it now it is IDLE.
                if self.live_objects[page as usize] == 0 {
                    self.release_page(page);
                }
            }
        }
    }

    /// Drops the shadow of every page the slice wrote (docs/model.md §4, "Shadow copies"): its
    /// slow frame is stale. A switch back to that shadow already queued becomes a copy.
    fn drop_written_shadows(&mut self) {
        if self.shadow_writes.is_empty() {
            return;
        }
        let writes = std::mem::take(&mut self.shadow_writes);
        for &page in &writes {
            let Some(shadow) = self.placement.drop_shadow(page) else { continue };
            self.shadows_dropped += 1;
            if self.page_state[page as usize] == IDLE {
                continue;
            }
            let from = self.placement.tiers[page as usize];
            let copy_ns = self.one_copy_ns(from, shadow);
            for m in &mut self.movers {
                if m.unswitch(page, copy_ns, &mut self.placement) {
                    break;
                }
            }
        }
        self.shadow_writes = writes;
        self.shadow_writes.clear();
    }

    /// What one page's kernel migration from `from` to `to` costs its mover, ns, without a call.
    fn one_copy_ns(&self, from: TierId, to: TierId) -> f64 {
        let m = migration::MigrationProfile { call_us: 0.0, ..self.profile.migration.clone() };
        let w = MoveWork::one_way(from.index(), to.index(), 1, self.info.page_size.bytes());
        migration::cost(&m, &self.profile.tiers, &MoveOptions::default(), self.info.page_size, &w).mover_ns
    }

    /// Lists the copies under way now, and their pages, for the slice about to be replayed.
    fn mark_copying(&mut self) {
        self.copying_pages.clear();
        self.copying.clear();
        let now = self.now_ns;
        for (q, m) in self.movers.iter().enumerate() {
            if let Some(i) = m.running(now) {
                self.copying.push((q, i));
                self.copying_pages.extend(m.items[i].pages().iter().map(|&(page, _, _)| page));
            }
        }
    }

    /// What the slice's writes to pages being copied cost (docs/model.md §4, "Movers"): a write
    /// to a write-protected copy waits until it completes (each thread once per copy, charged
    /// as its wait over the threads, like other per-thread stalls); a write racing an
    /// unprotected copy makes the mover copy the page again, once, after which writes wait.
    fn charge_write_hits(&mut self) {
        if self.write_hits.is_empty() {
            return;
        }
        let now = self.now_ns;
        let threads = self.timing.threads;
        let hits = std::mem::take(&mut self.write_hits);
        for &(q, i) in &self.copying {
            let mover = &mut self.movers[q];
            let mut raced = false;
            for &(page, thread) in &hits {
                if !mover.items[i].pages().iter().any(|&(p, _, _)| p == page) {
                    continue;
                }
                let c = &mover.items[i];
                if c.guard != WriteGuard::WriteProtected && !c.redone {
                    raced = true;
                    break;
                }
                if c.guard == WriteGuard::SplitPieces {
                    // Only the piece under way was unmapped, and it was copied again.
                    continue;
                }
                let wait = (c.done_ns - now).max(0.0);
                if mover.items[i].wait(thread) {
                    self.move_wait_owed_ns += wait / threads;
                }
            }
            if raced {
                let added = mover.redo(i);
                if mover.kind == Mover::FaultingThread {
                    // The faulting thread copies again, and the program waits for it.
                    self.move_wait_owed_ns += added / threads;
                }
            }
        }
        self.write_hits = hits;
        self.write_hits.clear();
    }

    /// The policy's thread is still copying (a synchronous mover of its own): it cannot be
    /// asked anything until it is done.
    fn policy_thread_busy(&self) -> bool {
        self.movers.iter().any(|m| m.kind == Mover::PolicyThread && !m.items.is_empty())
    }

    /// The mover of a move from `from` to `to`: the demotion mover for a move to a slower tier,
    /// if the policy has one, else its mover.
    fn mover_for(&self, from: TierId, to: TierId) -> usize {
        if to.index() > from.index() && self.movers.len() > 1 {
            1
        } else {
            0
        }
    }

    /// Hands what [`Plan::check`] leaves of a plan (the rules both machines share) to the
    /// movers, after refusing moves of pages already in flight (`Busy`); room in each tier is
    /// checked here as the kernel would. Returns the work each mover took on.
    fn perform(&mut self, plan: &Plan, options: &MoveOptions, applied: &mut Applied) -> Vec<MoveWork> {
        let guard = if options.protected_copies {
            WriteGuard::WriteProtected
        } else if options.splits(self.info.page_size) {
            WriteGuard::SplitPieces
        } else {
            WriteGuard::Unprotected
        };
        let page_bytes = self.info.page_size.bytes();
        let mut work = vec![MoveWork::default(); self.movers.len()];
        let busy = |p: PageIdx| self.page_state.get(p as usize).is_some_and(|&s| s != IDLE);
        let mut free = Plan { options: plan.options, ..Plan::none() };
        // An object's pages are moves like the plan's own (Plan::check's rule, taken here so
        // that its pages in flight are refused as Busy first).
        let (object_moves, beyond) = plan.object_page_moves(page_bytes, self.placement.tiers.len());
        for _ in 0..beyond {
            applied.fail(MoveFailure::Invalid);
        }
        for mv in plan.moves.iter().chain(&object_moves) {
            if busy(mv.page) {
                applied.fail(MoveFailure::Busy);
            } else {
                free.moves.push(*mv);
            }
        }
        for ex in &plan.exchanges {
            if busy(ex.a) || busy(ex.b) {
                applied.fail(MoveFailure::Busy);
            } else {
                free.exchanges.push(*ex);
            }
        }
        let mut budget = RateBudget::new(&plan.options, self.now_ns - self.last_apply_ns);
        let checked =
            free.check(&self.placement.tiers, self.info.tiers.len(), &mut budget, page_bytes, applied);
        for mv in &checked.moves {
            // A page the plan has already handed to a mover is in flight too (Plan::check lets
            // a plan move a page twice; a mover takes it once).
            if self.page_state[mv.page as usize] != IDLE {
                applied.fail(MoveFailure::Busy);
                continue;
            }
            let from = self.placement.tiers[mv.page as usize];
            let q = self.mover_for(from, mv.to);
            let shadow = self.placement.shadow_of[mv.page as usize];
            let kind = if options.shadow && shadow == mv.to {
                CopyKind::Switch
            } else if options.shadow && mv.to < from {
                CopyKind::KeepShadow
            } else {
                CopyKind::Migrate
            };
            let moves = self.movers[q].take_move(&mut self.placement, mv.page, (from, mv.to), guard, kind);
            if let Err(why) = moves {
                applied.fail(why);
                continue;
            }
            if kind != CopyKind::Switch && shadow.is_placed() {
                // Copied anew: the shadow is of no more use.
                self.placement.drop_shadow(mv.page);
            }
            self.page_state[mv.page as usize] = QUEUED;
            match kind {
                CopyKind::Migrate => {
                    work[q].pages += 1;
                    work[q].bytes[from.index()][mv.to.index()] += page_bytes;
                }
                CopyKind::KeepShadow => {
                    work[q].shadow_copies += 1;
                    work[q].shadow_bytes[from.index()][mv.to.index()] += page_bytes;
                }
                CopyKind::Switch => work[q].switched += 1,
            }
        }
        // A swap needs no free page in either tier (Nimble §3.1.4).
        for ex in &checked.exchanges {
            let (down, up) = (ex.down, ex.up);
            if self.page_state[down.page as usize] != IDLE || self.page_state[up.page as usize] != IDLE {
                applied.fail(MoveFailure::Busy);
                continue;
            }
            if let Err(why) = self.movers[0].take_exchange(down, up, guard) {
                applied.fail(why);
                continue;
            }
            // An exchange copies both pages: their shadows are of no more use.
            self.placement.drop_shadow(down.page);
            self.placement.drop_shadow(up.page);
            self.page_state[down.page as usize] = QUEUED;
            self.page_state[up.page as usize] = QUEUED;
            work[0].pairs += 1;
            work[0].bytes[up.to.index()][down.to.index()] += page_bytes;
            work[0].bytes[down.to.index()][up.to.index()] += page_bytes;
        }
        work
    }
}

/// Memory Mode: the tier a page lives in behind the cache, placed on its first touch.
#[inline(always)]
fn home_tier(placement: &mut Placement, page: usize) -> Option<TierId> {
    match placement.tiers.get(page) {
        Some(&t) if t.is_placed() => Some(t),
        Some(_) => placement.first_touch(page as u32),
        None => None,
    }
}

/// Cost of one NUMA hint fault to the faulting thread, ns (docs/model.md §6). docs/hardware.md
/// has no source for it; derived (its §17): the trap into the kernel and its handler, taken as one
/// TLB shootdown (an exception a core takes and handles, docs/hardware.md §11 "TLB shootdown",
/// 1 us), plus the handler's four-level page-table walk of DRAM random reads (docs/hardware.md
/// §2 "Idle latency", 101.5 ns each): 1.41 us on optane-2019.
pub fn hint_fault_ns(profile: &Profile) -> f64 {
    profile.migration.tlb_shootdown_us * 1e3 + 4.0 * profile.tiers[0].read_latency_random_ns
}

/// Streams one thread keeps open per direction: enough for STREAM's triad (two read streams,
/// one write stream) and a few more, like a hardware prefetcher's stream table. The most units
/// of one direction a thread can have open at any moment (`optimal`'s bound for static
/// placements counts on it).
pub const STREAMS_PER_THREAD: usize = 4;

/// An empty stream slot: far from every real unit (units are addresses over 64 or more, tagged
/// with a tier below 128).
const NO_UNIT: u64 = 1 << 63;

/// Where a media unit's tier tag starts: above every unit of an address below 2^62.
const TIER_TAG_SHIFT: u32 = 56;

/// The media units a thread touched last, per direction (reads, writes).
#[derive(Clone, Copy, Debug)]
pub struct StreamTable {
    units: [[u64; STREAMS_PER_THREAD]; 2],
    next: [usize; 2],
}

impl Default for StreamTable {
    fn default() -> Self {
        StreamTable { units: [[NO_UNIT; STREAMS_PER_THREAD]; 2], next: [0; 2] }
    }
}

impl StreamTable {
    /// Records `unit`; returns (continues an open stream, is the same unit as that stream's last).
    #[inline(always)]
    fn touch(&mut self, unit: u64, write: bool) -> (bool, bool) {
        let d = write as usize;
        let units = &mut self.units[d];
        for u in units.iter_mut() {
            // The same unit or the next one (one compare: unit - u is 0 or 1).
            if unit.wrapping_sub(*u) <= 1 {
                let same = unit == *u;
                *u = unit;
                return (true, same);
            }
        }
        units[self.next[d]] = unit;
        self.next[d] = (self.next[d] + 1) % STREAMS_PER_THREAD;
        (false, false)
    }
}

/// Counts one access against its tier: reads by locality, bytes by media granularity. Accesses
/// of one thread in one direction that stay within a media unit are merged (the unit is already
/// being transferred; a write-combining buffer does the same for writes); a read that continues
/// one of the thread's open streams is sequential.
///
/// A unit is tagged with its tier (bits 56 and up, above any address over 64), so a unit merges
/// only with the same tier's unit and a stream never runs on into a neighbouring page of another
/// tier: the tiers are different devices.
#[inline(always)]
fn account_access(
    load: &mut TierLoad,
    streams: &mut StreamTable,
    a: Access,
    write: bool,
    tier: usize,
    gran_shift: u32,
) {
    let unit = (a.addr >> gran_shift) | ((tier as u64) << TIER_TAG_SHIFT);
    let (in_stream, same_unit) = streams.touch(unit, write);
    if write {
        load.writes += 1;
    } else if in_stream {
        load.sequential_reads += 1;
    } else {
        load.random_reads += 1;
    }
    if !same_unit {
        let mask = (1u64 << gran_shift) - 1;
        let bytes = (a.size.max(1) as u64 + mask) & !mask;
        if write {
            load.write_bytes += bytes;
        } else {
            load.read_bytes += bytes;
        }
    }
}

impl Machine for SimMachine {
    fn info(&self) -> &MachineInfo {
        &self.info
    }

    fn prepare(&mut self, req: &Requirements) -> Result<(), MachineError> {
        let footprint = self.source.info().footprint_bytes;
        self.info.page_size = req.page_size;
        self.page_shift = req.page_size.shift();
        self.info.pages = req.page_size.pages_for(footprint);
        let page = req.page_size.bytes();
        let mut capacity: Vec<Option<u64>> = self.capacity_bytes.iter().map(|&b| Some(b / page)).collect();
        self.mode = req.memory_mode;
        match req.memory_mode {
            // There is no kernel here to do the tiering: the policy's model of it places pages.
            MemoryMode::Flat | MemoryMode::KernelTiering => {}
            MemoryMode::UnboundedFast => capacity[0] = None,
            // The fast tier holds cache lines, not pages: every page lives in the slow tier.
            MemoryMode::FastTierAsCache => {
                // A direct-mapped cache with a slot for every line of the footprint never
                // conflicts, so a larger one behaves the same: never allocate more than that.
                let footprint = self.source.info().footprint_bytes.next_multiple_of(64);
                self.cache = Some(DirectMappedCache::new(self.capacity_bytes[0].min(footprint)));
                capacity[0] = Some(0);
            }
        }
        // A default slow tier holds every page by itself, the last one partial, at the policy's
        // page size: never smaller than the footprint (`new`), whatever the tiers above it hold
        // (a fast tier used as a cache holds none). Every page in a tier above then has a frame
        // here for its copy on the way down, so a first touch always finds room (shadows never
        // take that room: `Placement::may_keep_shadow`). Tiers that held the footprint exactly,
        // as 2 MiB pages of a footprint that is not a whole number of them did, left a first
        // touch no room once one copy was in flight.
        if self.slow_is_default {
            let last = capacity.len() - 1;
            capacity[last] = capacity[last].map(|c| c.max(self.info.pages));
        }
        if self.mode != MemoryMode::UnboundedFast
            && capacity.iter().map(|c| c.unwrap_or(0)).sum::<u64>() < self.info.pages
        {
            return Err(MachineError::Other(format!(
                "the footprint ({} pages of {}) does not fit in the tiers at that page size; give more capacity",
                self.info.pages, req.page_size
            )));
        }
        for (t, tier) in self.info.tiers.iter_mut().enumerate() {
            tier.capacity_pages = capacity[t];
        }
        let initial = self.start_tier.map_or_else(|| req.initial.clone(), InitialPlacement::Tier);
        self.placement = Placement::new(self.info.pages, capacity, initial);
        if let Some(t) = self.timeline.as_mut() {
            let accesses = self.source.info().accesses;
            t.start(self.info.pages, page, self.info.tiers.len(), accesses);
        }
        self.page_state = vec![IDLE; self.info.pages as usize];
        self.movers = std::iter::once(req.mover).chain(req.demotion_mover).map(MoverQueue::new).collect();
        self.touches.clear();
        for tr in &req.trackers {
            match tr.kind {
                TrackerKind::PageBits => self.bits = Some(PageBits::new(self.info.pages)),
                TrackerKind::Sampling => self.sampler = Some(Sampler::new(tr.period)),
                TrackerKind::Future => self.future = Some(FutureWindow::new(self.info.pages, tr.period)),
                TrackerKind::HintFaults => {
                    self.hints = Some(HintFaults::new(self.info.pages, page, tr.period, self.info.scale));
                    self.hint_fault_ns = hint_fault_ns(&self.profile);
                }
                TrackerKind::ObjectEvents => self.policy_events = Some(Vec::new()),
            }
        }
        Ok(())
    }

    /// Runs the program to `until_ns`, and on while the policy's own thread is still copying
    /// (a [`Mover::PolicyThread`] policy is not asked again before its copies are done).
    fn advance(&mut self, until_ns: u64) -> Progress {
        loop {
            self.land_copies();
            if self.now_ns >= until_ns as f64 && !self.policy_thread_busy() {
                return Progress::Running { now_ns: self.now_ns as u64 };
            }
            if !self.step() {
                return Progress::Finished { now_ns: self.now_ns as u64 };
            }
        }
    }

    fn observe(&mut self) -> Observations<'_> {
        let tiers = self.tier_status();
        self.since_observe.fill(TierStatus::default());
        let mut tracker_ns = 0.0;
        if self.bits.is_some() {
            // A scan reads and clears every mapped page's bits, then flushes the TLB once.
            let mapped = self.placement.used.iter().sum();
            tracker_ns += PageBits::scan_ns(mapped, self.profile.tracking.page_scan_ns);
            self.stall_owed_ns += self.profile.migration.tlb_shootdown_us * 1e3;
            self.tlb_shootdowns += 1;
        }
        if let Some(s) = &self.sampler {
            tracker_ns += s.samples.len() as f64 * self.profile.tracking.sample_ns;
        }
        self.tracking_ns += tracker_ns;
        // Tracker work runs on one core, taking its share from the program's threads.
        self.stall_owed_ns += tracker_ns / self.timing.threads;
        if let Some(intervals) = self.future.as_ref().map(|f| f.intervals as u64) {
            // Look ahead as many accesses as the last interval had, times the policy's horizon.
            let ahead = (self.accesses_since_observe.max(SLICE_ACCESSES as u64) * intervals) as usize;
            if self.corun.is_some() && !self.source_done {
                if let Some(c) = &self.corun {
                    self.source.set_program_clocks(&c.clocks, &c.made);
                }
                let buffered = self.buf.len() - self.pos;
                if self.source.read_ahead(ahead.saturating_sub(buffered), &mut self.ahead_scratch) {
                    if let Some(f) = self.future.as_mut() {
                        if !self.source_reads_ahead {
                            // From here the window counts what lies ahead by what is reported: what
                            // the machine holds already is the first of it.
                            f.add(&self.buf[self.pos..], self.page_shift);
                        }
                        f.add(&self.ahead_scratch, self.page_shift);
                    }
                    self.source_reads_ahead = true;
                }
                self.ahead_scratch.clear();
            }
            if !self.source_reads_ahead {
                let n = self.buffer_ahead(ahead);
                if let Some(f) = self.future.as_mut() {
                    f.extend(self.accesses, &self.buf[self.pos..self.pos + n], self.page_shift);
                }
            }
        }
        self.accesses_since_observe = 0;
        let previous = self.last_observe_ns;
        self.last_observe_ns = self.now_ns;
        // Hand the closed interval out and start a new one: the scan clears the bits, the
        // sample buffer is drained.
        self.observed_tiers = tiers;
        if let Some(b) = self.bits.as_mut() {
            self.observed_bits.resize(b.bits.len(), 0);
            std::mem::swap(&mut self.observed_bits, &mut b.bits);
            b.clear();
        }
        if let Some(s) = self.sampler.as_mut() {
            self.observed_samples.clear();
            std::mem::swap(&mut self.observed_samples, &mut s.samples);
        }
        if let Some(h) = self.hints.as_mut() {
            self.observed_hint_faults.clear();
            std::mem::swap(&mut self.observed_hint_faults, &mut h.faults);
        }
        self.observed_in_flight.clear();
        for m in &self.movers {
            m.in_flight(&mut self.observed_in_flight);
        }
        Observations {
            now_ns: self.now_ns as u64,
            previous_ns: previous as u64,
            placement: &self.placement.tiers,
            tiers: &self.observed_tiers,
            page_bits: self.bits.as_ref().map(|_| self.observed_bits.as_slice()),
            samples: &self.observed_samples,
            future: self.future.as_ref().map(|f| f.counts.as_slice()),
            hint_faults: &self.observed_hint_faults,
            in_flight: &self.observed_in_flight,
        }
    }

    fn take_object_events(&mut self, out: &mut Vec<ObjectEvent>) {
        if let Some(v) = self.policy_events.as_mut() {
            out.append(v);
        }
    }

    fn apply(&mut self, plan: &Plan) -> Applied {
        let mut applied = Applied::default();
        let (options, not_honoured) = self.info.mechanisms.honour(plan);
        if !not_honoured.contains(&Mechanism::SiteAdvice) {
            for a in &plan.site_advice {
                match a.tier {
                    Some(t) if t.index() < self.info.tiers.len() => {
                        self.site_advice.insert(a.site, t);
                    }
                    Some(_) => applied.fail(MoveFailure::Invalid),
                    None => {
                        self.site_advice.remove(&a.site);
                    }
                }
            }
        }
        applied.not_honoured = not_honoured;
        let work = self.perform(plan, &options, &mut applied);
        self.last_apply_ns = self.now_ns;
        let threads = self.timing.threads;
        let mut move_wait = 0.0;
        for (q, w) in work.iter().enumerate() {
            let pages = w.total_pages();
            if pages == 0 {
                continue;
            }
            let c = if self.movers[q].kind == Mover::FaultingThread {
                // The fault path migrates the page it faulted on, without a move_pages call: it
                // pays each page's cost and copy, not the call's (docs/model.md §4, "Movers").
                let fault_path =
                    migration::MigrationProfile { call_us: 0.0, ..self.profile.migration.clone() };
                migration::cost(&fault_path, &self.profile.tiers, &options, self.info.page_size, w)
            } else {
                migration::cost(
                    &self.profile.migration,
                    &self.profile.tiers,
                    &options,
                    self.info.page_size,
                    w,
                )
            };
            let mover = &mut self.movers[q];
            mover.schedule(self.now_ns, c.per_page_ns, c.tlb_shootdowns);
            if mover.kind == Mover::FaultingThread {
                // Each faulting thread copies its pages before it goes on: n of them side by
                // side, so the program loses the copies' time over n.
                move_wait += c.mover_ns / threads;
            }
            applied.pages_moved += pages;
            applied.pairs_exchanged += w.pairs;
            applied.bytes_copied += w.total_bytes();
            applied.time_ns += c.mover_ns as u64;
            applied.tlb_shootdowns += c.tlb_shootdowns;
        }
        // On this machine every copy takes machine time: what the movers took on is in flight.
        applied.pages_in_flight = applied.pages_moved;
        self.failed_moves += applied.failed_total();
        // What the plan will cost the program; it is paid copy by copy as each starts
        // (`charge_started_copies`), so work the run ends before is never paid for.
        let stall = applied.tlb_shootdowns as f64 * self.profile.migration.tlb_shootdown_us * 1e3 + move_wait;
        applied.program_stall_ns = stall as u64;
        applied
    }
}
