//! `optimal`, Terrace's offline reference (docs/model.md §12): the best of a family of complete
//! runs on the simulated machine, each of which sees the whole trace before the program starts.
//!
//! Every candidate is a full simulation on the same machine as the online policies, with 4 KiB
//! pages, the same placement rules and the same migration costs (no move is free), so the run
//! reported is a real schedule under the machine's cost model, not an estimate. The family:
//!
//! - the static split by total future accesses ([`future_split`]), the same split on smaller
//!   fast tiers ([`future_split_filled`] at each of [`FILLS`]: where the fast tier's bandwidth
//!   binds, filling it loads it) and its bandwidth-aware form ([`balanced_split`]: the slow
//!   tier's bandwidth adds to the fast tier's, which is why weighted interleave beats a hot/cold
//!   split on a streaming program);
//! - the other static placements the project can express: interleave at the kernel's bandwidth
//!   weights, at weights balanced for this trace's read/write mix and at each of [`RATIOS`],
//!   first-touch, all-slow;
//! - the epoch-wise placement by the next window's accesses with a cost-benefit test for each
//!   move: the registry's `oracle`, at its default horizon and at [`SHORT_HORIZON_TICKS`] (and,
//!   for several programs, at [`MID_HORIZON_TICKS`]);
//! - the fast tier as a hardware cache (`memory-mode`), which runs a few parts per million ahead
//!   of every placement on a program that fits the fast tier (docs/model.md §12).
//! - for a program with allocations and frees, splits that follow its windows of them, and for
//!   several programs sharing the machine, splits that also follow their starts and ends
//!   ([`phases`]).
//!
//! It is a ceiling over that family by construction and over the registry by test
//! (tests/ceiling_beats_every_policy.rs). It is not the true optimum with migration costs.
//!
//! A candidate that can no longer win is stopped, or not run: its clock has passed the best
//! complete run, or, for a static placement, its clock and a floor under what is left of its
//! trace have ([`static_bound`]).

pub mod check;
pub mod phases;
pub mod static_bound;

use phases::{phase_splits, PhaseCounts, PhaseOrder, PhaseSplit, ProgramWindows, WindowSplit};
use rayon::prelude::*;
use static_bound::MediaUnits;
use terrace_model::{
    Access, InitialPlacement, Machine, MachineInfo, Observations, PageSize, Plan, Policy, Requirements,
    TierId,
};
use terrace_sim::timing::{Timing, LINE_BYTES};
use terrace_sim::{Capacity, Profile, RunReport, SimError, SimMachine, SimOptions};
use terrace_workloads::{AccessSource, ObjectEventAt};

/// The name `optimal` goes by in result rows and `terrace compare --policies`.
pub const NAME: &str = "optimal";
pub const SUMMARY: &str = "offline reference: the best of a family of whole-trace placements, each a full \
                           run on the same machine (simulator only; docs/model.md §12)";

/// Makes a fresh access stream of the workload, the same each time (one per candidate run).
pub type SourceFactory<'a> = &'a (dyn Fn() -> Box<dyn AccessSource> + Sync);

/// One candidate's run.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub name: String,
    /// `None`: stopped once its clock passed the best run before it, or not run at all.
    pub runtime_ns: Option<f64>,
    /// Not run: a static placement whose lower bound ([`static_bound`]) was already past the
    /// best run before it.
    pub bounded: bool,
}

/// The reference's result.
#[derive(Clone, Debug)]
pub struct Ceiling {
    /// The best candidate's run, renamed [`NAME`].
    pub report: RunReport,
    /// Which candidate it is.
    pub chosen: String,
    /// Every candidate's run time, in the order they were tried.
    pub candidates: Vec<Candidate>,
    /// Whether the run is the one found at a smaller fast tier in a sweep ([`optimal_sweep`]):
    /// its placement fits in this one, which it leaves partly unused.
    pub from_smaller_fast_tier: bool,
    /// A lower bound on any placement's run time ([`lower_bound_ns`]): the gap between it and
    /// `report.runtime_ns` is as far as the reference can be from the optimum.
    pub lower_bound_ns: f64,
    /// Accesses of the complete runs and the counting pass together (stopped runs not counted).
    pub accesses_processed: u64,
}

/// A placement chosen before the program runs and never changed.
pub struct Static {
    pub name: String,
    pub initial: InitialPlacement,
    /// The machine's page: 2 MiB for first touch by huge pages, what a policy of 2 MiB pages
    /// starts from.
    pub page_size: PageSize,
}

impl Static {
    /// A placement of 4 KiB pages.
    pub fn new(name: impl Into<String>, initial: InitialPlacement) -> Self {
        Static { name: name.into(), initial, page_size: PageSize::Base4K }
    }
}

impl Policy for Static {
    fn name(&self) -> &str {
        &self.name
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements { initial: self.initial.clone(), page_size: self.page_size, ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

/// Reads and writes of each 4 KiB page over the whole trace, and the bytes they move.
#[derive(Clone, Debug, Default)]
pub struct TraceCounts {
    pub reads: Vec<u64>,
    pub writes: Vec<u64>,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub accesses: u64,
    pub read_accesses: u64,
    /// Instructions the threads retired between their accesses, all together.
    pub instructions: u64,
    /// Object events (allocations, frees, programs' starts and ends) between the accesses.
    pub object_events: u64,
    /// Distinct 64-byte lines the trace reads, and writes (the whole-trace pass only): each is
    /// moved at least once in its direction, whatever the placement, where a line read again
    /// can be merged with an open media unit and move nothing (§1).
    pub lines_read: u64,
    pub lines_written: u64,
}

impl TraceCounts {
    /// One pass over `source`.
    pub fn of(source: Box<dyn AccessSource>) -> Self {
        Self::of_and(source, None)
    }

    /// One pass over `source`, in which `also` sees every access too, in order, on a thread of
    /// its own (`walk_ahead`).
    pub fn of_and(source: Box<dyn AccessSource>, also: Option<SideVisitor<'_>>) -> Self {
        let pages = source.info().footprint_bytes.div_ceil(4096) as usize;
        let mut c = TraceCounts { reads: vec![0; pages], writes: vec![0; pages], ..Default::default() };
        // One bit per 64-byte line and direction.
        let words = (pages * 4096 / LINE_BYTES as usize).div_ceil(64);
        let mut seen = [vec![0u64; words], vec![0u64; words]];
        walk_ahead(source, also, |step| match step {
            Step::Access(a) => {
                c.count(a);
                let bits = &mut seen[a.kind.is_write() as usize];
                let first = a.addr / LINE_BYTES;
                let last = a.addr.saturating_add((a.size as u64).max(1) - 1) / LINE_BYTES;
                for line in first..=last {
                    if let Some(w) = bits.get_mut((line / 64) as usize) {
                        let bit = 1u64 << (line % 64);
                        if *w & bit == 0 {
                            *w |= bit;
                            *if a.kind.is_write() { &mut c.lines_written } else { &mut c.lines_read } += 1;
                        }
                    }
                }
            }
            Step::Event(_) => c.object_events += 1,
            Step::Fill(_) => {}
        });
        c
    }

    /// Counts one access.
    #[inline]
    pub fn count(&mut self, a: &terrace_model::Access) {
        let page = (a.addr >> 12) as usize;
        let bytes = (a.size as u64).max(1);
        if a.kind.is_write() {
            if let Some(w) = self.writes.get_mut(page) {
                *w += 1;
            }
            self.write_bytes += bytes;
        } else {
            if let Some(r) = self.reads.get_mut(page) {
                *r += 1;
            }
            self.read_bytes += bytes;
            self.read_accesses += 1;
        }
        self.instructions += a.instructions as u64;
        self.accesses += 1;
    }
}

/// A visitor of a pass's batches of accesses, in order, on a thread of its own (`walk_ahead`).
pub type SideVisitor<'a> = &'a mut (dyn FnMut(&[Access]) + Send);

/// What a counting pass meets, in stream order ([`walk`]).
pub(crate) enum Step<'a> {
    /// Before each fill: the stream, to be told the programs' clocks.
    Fill(&'a mut dyn AccessSource),
    Event(&'a terrace_model::ObjectEvent),
    Access(&'a terrace_model::Access),
}

/// One pass over `source`: each object event before the access at its position, those after
/// the last access at the end.
pub(crate) fn walk(mut source: Box<dyn AccessSource>, mut visit: impl FnMut(Step<'_>)) {
    let (mut buf, mut in_order) = (Vec::with_capacity(BATCH), InOrder::default());
    loop {
        visit(Step::Fill(source.as_mut()));
        buf.clear();
        let filled = source.fill(&mut buf, BATCH);
        source.take_object_events(&mut in_order.events);
        if filled == 0 {
            break;
        }
        in_order.visit(&buf, &mut visit);
    }
    in_order.finish(&mut visit);
}

/// [`walk`] for a visitor that tells the stream nothing (it meets no [`Step::Fill`]): the stream
/// is made on a thread of its own, up to eight batches ahead of the visitor, so that the pass
/// takes about the longer of making the stream and visiting it rather than the two together.
/// `optimal` runs it before any candidate, when the other cores have nothing else to do; on the
/// default suite at size scale 0.25 a generator takes 35-50% of the counting pass. `side`, if
/// any, sees each batch of accesses too, in order, on a third thread (the media units the static
/// candidates' floors need, which cost about as much as the rest of the visit on gups).
pub(crate) fn walk_ahead(
    mut source: Box<dyn AccessSource>,
    side: Option<SideVisitor<'_>>,
    mut visit: impl FnMut(Step<'_>),
) {
    type Batch = std::sync::Arc<Vec<Access>>;
    let (to_visitor, made) = std::sync::mpsc::sync_channel::<(Batch, Vec<ObjectEventAt>)>(8);
    let (to_side, for_side) = std::sync::mpsc::sync_channel::<Batch>(8);
    // Batches come back from the visitor and the side; the last to let one go frees it for reuse.
    let (to_maker, emptied) = std::sync::mpsc::channel::<Batch>();
    let has_side = side.is_some();
    std::thread::scope(|scope| {
        scope.spawn(move || loop {
            let mut buf = std::iter::from_fn(|| emptied.try_recv().ok())
                .find_map(|b| Batch::try_unwrap(b).ok())
                .unwrap_or_else(|| Vec::with_capacity(BATCH));
            buf.clear();
            let filled = source.fill(&mut buf, BATCH);
            let mut events = Vec::new();
            source.take_object_events(&mut events);
            let buf = Batch::new(buf);
            // The visitor or the side has stopped listening only if it panicked.
            let side_gone = has_side && to_side.send(buf.clone()).is_err();
            if to_visitor.send((buf, events)).is_err() || side_gone || filled == 0 {
                break;
            }
        });
        if let Some(side) = side {
            let to_maker = to_maker.clone();
            scope.spawn(move || {
                for buf in for_side.iter() {
                    if buf.is_empty() {
                        break;
                    }
                    side(&buf);
                    let _ = to_maker.send(buf);
                }
            });
        }
        let mut in_order = InOrder::default();
        for (buf, mut events) in made.iter() {
            in_order.events.append(&mut events);
            if buf.is_empty() {
                break;
            }
            in_order.visit(&buf, &mut visit);
            let _ = to_maker.send(buf);
        }
        in_order.finish(&mut visit);
    });
}

/// Accesses a pass takes from its stream at a time.
const BATCH: usize = 1 << 16;

/// A pass's object events so far, and its place in the stream: puts each event before the
/// access at its position.
#[derive(Default)]
struct InOrder {
    events: Vec<ObjectEventAt>,
    next_event: usize,
    position: u64,
}

impl InOrder {
    fn visit(&mut self, batch: &[Access], visit: &mut impl FnMut(Step<'_>)) {
        for a in batch {
            while let Some(e) = self.events.get(self.next_event).filter(|e| e.at <= self.position) {
                visit(Step::Event(&e.event));
                self.next_event += 1;
            }
            visit(Step::Access(a));
            self.position += 1;
        }
    }

    /// The events after the last access.
    fn finish(&mut self, visit: &mut impl FnMut(Step<'_>)) {
        for e in &self.events[self.next_event..] {
            visit(Step::Event(&e.event));
        }
        self.next_event = self.events.len();
    }
}

/// The machine's tiers, as a run of `source` on `profile` with `opts` would set them up.
fn machine_info(
    source: Box<dyn AccessSource>,
    profile: &Profile,
    opts: &SimOptions,
) -> Result<MachineInfo, SimError> {
    let w = source.info().clone();
    let fast = opts.fast_capacity.resolve(w.footprint_bytes, w.suggested_fast_bytes);
    let machine = SimMachine::new(profile.clone(), source, fast, opts.slow_capacity)?;
    Ok(machine.info().clone())
}

/// A lower bound on the run time of any placement of the trace on this machine, migrating or
/// not (docs/model.md §12): a run is at least the sum of its slices, and a slice (§3) at least
/// its latency path at idle latency in the tier where reads are cheapest, and at least its
/// bandwidth path with its bytes split among the tiers as well as they can be. Both are linear
/// in the slice's counts, so their sums over the whole trace bound the sum of the maxima:
/// `max(compute + reads x min over tiers of idle latency / (threads x MLP), bandwidth)`, where
/// the bandwidth term is `(read bytes + write bytes x min_t(read bw_t / write bw_t)) / sum_t read
/// bw_t` (from `T >= r_t / read bw_t + w_t / write bw_t` for each tier, times read bw_t, summed),
/// with 64 bytes of each distinct line read and written: the bytes the accesses ask for are no
/// bound, since a thread's access within a media unit it has open moves nothing (§1), but a
/// unit's first transfer moves at least 64 bytes of each line of it that is ever touched.
pub fn lower_bound_ns(timing: &Timing, counts: &TraceCounts) -> f64 {
    let compute = counts.instructions as f64 * timing.ns_per_instruction / timing.threads;
    let per_read = timing
        .tiers
        .iter()
        .map(|t| t.latency_random_ns.min(t.latency_sequential_ns) / (timing.threads * t.mlp_per_thread))
        .fold(f64::INFINITY, f64::min);
    let latency = compute + counts.read_accesses as f64 * per_read;
    let write_weight =
        timing.tiers.iter().map(|t| t.read_bytes_per_ns / t.write_bytes_per_ns).fold(f64::INFINITY, f64::min);
    let all_read_bw: f64 = timing.tiers.iter().map(|t| t.read_bytes_per_ns).sum();
    let line = LINE_BYTES as f64;
    let (read_bytes, write_bytes) = (counts.lines_read as f64 * line, counts.lines_written as f64 * line);
    let bandwidth = (read_bytes + write_bytes * write_weight) / all_read_bw;
    latency.max(bandwidth)
}

/// Interleave weights, fastest tier first, that share a trace's traffic among the tiers in
/// proportion to the bandwidth each gives that read/write mix, so that all finish their share at
/// once: tier t moves the whole trace in `read_bytes / read_bw + write_bytes / write_bw`, and
/// its weight is the inverse of that relative to the slowest tier's, rounded (the kernel's rule
/// for MPOL_WEIGHTED_INTERLEAVE's default weights, which use read bandwidth alone). Small
/// weights keep the turns short: 12:4 and 3:1 give the same shares, but 12:4 sends runs of four
/// neighbouring pages to the slow tier.
pub fn balanced_weights(timing: &Timing, counts: &TraceCounts) -> Vec<u32> {
    let rate: Vec<f64> = timing
        .tiers
        .iter()
        .map(|t| {
            1.0 / (counts.read_bytes as f64 / t.read_bytes_per_ns
                + counts.write_bytes as f64 / t.write_bytes_per_ns)
        })
        .collect();
    let slowest = rate[rate.len() - 1];
    rate.iter().map(|r| (r / slowest).round().clamp(1.0, 255.0) as u32).collect()
}

/// Pages in falling order of what the fast tier saves them over the whole trace against the
/// slowest tier (reads: the latency difference shared by the threads plus the bandwidth
/// difference; writes: the bandwidth difference; per 64 B line, from the machine's own timing
/// constants), the lower page first on a tie.
pub(crate) fn by_gain(timing: &Timing, counts: &TraceCounts) -> Vec<usize> {
    pages_by_gain(timing, counts, Path::Latency).into_iter().map(|(p, _)| p).collect()
}

/// Which of the slice time's two paths (docs/model.md §3) a page's gain counts: the latency
/// path's stalls and bandwidth together ([`by_gain`]), or the bandwidth path's bytes alone.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Latency,
    Bandwidth,
}

/// Pages in falling order of their gain on `path` over the whole trace, the lower page first on
/// a tie, each with its gain.
fn pages_by_gain(timing: &Timing, counts: &TraceCounts, path: Path) -> Vec<(usize, f64)> {
    let (fast, slow) = (&timing.tiers[0], &timing.tiers[timing.tiers.len() - 1]);
    let line = LINE_BYTES as f64;
    let stall = match path {
        Path::Latency => (slow.latency_random_ns - fast.latency_random_ns).max(0.0) / timing.threads,
        Path::Bandwidth => 0.0,
    };
    let read_gain = stall + line / slow.read_bytes_per_ns - line / fast.read_bytes_per_ns;
    let write_gain = line / slow.write_bytes_per_ns - line / fast.write_bytes_per_ns;
    let mut pages: Vec<(usize, f64)> = (0..counts.reads.len())
        .map(|p| (p, counts.reads[p] as f64 * read_gain + counts.writes[p] as f64 * write_gain))
        .collect();
    pages.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    pages
}

/// Each page's tier in the static split by total future accesses: pages in falling order of
/// their gain (`by_gain`), each tier filled to its capacity in that order, fastest first. Pages
/// never touched go to the slowest tier.
pub fn future_split(info: &MachineInfo, timing: &Timing, counts: &TraceCounts) -> Vec<TierId> {
    future_split_filled(info, timing, counts, 1.0)
}

/// [`future_split`] with the fast tier filled to `fill` of its capacity (0 to 1), the pages
/// beyond that going on to the next tiers: a smaller machine's split, which runs on this one
/// unchanged. Where the fast tier's bandwidth binds, its loaded latency rises with the traffic
/// sent to it, and a split that leaves part of its room empty sends part of that traffic to the
/// slow tier (docs/model.md §12, "Fills").
pub fn future_split_filled(
    info: &MachineInfo,
    timing: &Timing,
    counts: &TraceCounts,
    fill: f64,
) -> Vec<TierId> {
    // In falling gain, the untouched pages (gain 0) stand between those the fast tier helps and
    // any it would slow: only those before them are placed.
    let mut order = by_gain(timing, counts);
    let touched = order.iter().position(|&p| counts.reads[p] + counts.writes[p] == 0);
    order.truncate(touched.unwrap_or(order.len()));
    let mut smaller = info.clone();
    if let Some(c) = smaller.tiers[0].capacity_pages.as_mut() {
        *c = (*c as f64 * fill.clamp(0.0, 1.0)).floor() as u64;
    }
    split_in_order(&smaller, counts, order)
}

/// Each page's tier in the static split by the bandwidth each page's future accesses take:
/// pages in falling order of the bytes' time the fast tier saves them over the slowest (reads
/// over read bandwidth, writes over write bandwidth; no latency), each tier filled to capacity
/// in that order, the pages the fast tier does not help (gain 0 or less) left in the slowest.
/// Where the run is bound by its bandwidth path (§3: the slice's time is the busiest tier's
/// transfers) this is the split that path wants; on a slow tier whose writes are far slower
/// than its reads (CXL, Optane) it puts the written pages first, where [`future_split`]'s read
/// stalls put the read ones.
pub fn bandwidth_split(info: &MachineInfo, timing: &Timing, counts: &TraceCounts) -> Vec<TierId> {
    let order = pages_by_gain(timing, counts, Path::Bandwidth)
        .into_iter()
        .take_while(|&(_, gain)| gain > 0.0)
        .map(|(p, _)| p)
        .collect();
    split_in_order(info, counts, order)
}

/// Each page's tier when the tiers are filled to capacity with the pages in `order`, fastest
/// first, leaving out the pages `counts` has no access of; those and the pages not in `order` go
/// to the slowest tier.
pub(crate) fn split_in_order(info: &MachineInfo, counts: &TraceCounts, order: Vec<usize>) -> Vec<TierId> {
    let last = TierId((info.tiers.len() - 1) as u8);
    let mut tiers = vec![last; counts.reads.len()];
    let mut tier = 0;
    let mut left = info.tiers[0].capacity_pages.unwrap_or(u64::MAX);
    for p in order {
        if counts.reads[p] + counts.writes[p] == 0 {
            continue;
        }
        while left == 0 && tier + 1 < info.tiers.len() {
            tier += 1;
            left = info.tiers[tier].capacity_pages.unwrap_or(u64::MAX);
        }
        tiers[p] = TierId(tier as u8);
        left = left.saturating_sub(1);
    }
    tiers
}

/// Each page's tier in the bandwidth-balanced split by total future accesses: pages in falling
/// order of their gain (as [`future_split`]), each to the tier, among those with room, whose
/// bandwidth time (bytes over the tier's bandwidth, reads and writes) would then be least, the
/// faster on a tie. Where the slow tier's bandwidth is worth having (a streaming program, a hot
/// set hammered by many threads) this spreads the hot pages' traffic over the tiers as weighted
/// interleave does, but keeps the cold pages out of the fast tier.
pub fn balanced_split(info: &MachineInfo, timing: &Timing, counts: &TraceCounts) -> Vec<TierId> {
    let order = by_gain(timing, counts);
    let line = LINE_BYTES as f64;
    let n = info.tiers.len();
    let mut room: Vec<u64> = info.tiers.iter().map(|t| t.capacity_pages.unwrap_or(u64::MAX)).collect();
    let mut load = vec![0.0f64; n];
    let mut tiers = vec![TierId((n - 1) as u8); order.len()];
    for p in order {
        let (r, w) = (counts.reads[p] as f64, counts.writes[p] as f64);
        if r + w == 0.0 {
            break;
        }
        let cost = |t: usize| {
            r * line / timing.tiers[t].read_bytes_per_ns + w * line / timing.tiers[t].write_bytes_per_ns
        };
        let Some(t) = (0..n)
            .filter(|&t| room[t] > 0)
            .min_by(|&a, &b| (load[a] + cost(a)).total_cmp(&(load[b] + cost(b))))
        else {
            break;
        };
        load[t] += cost(t);
        room[t] -= 1;
        tiers[p] = TierId(t as u8);
    }
    tiers
}

/// The interleave ratios, fast:slow (each slower tier 1), the family tries besides the
/// kernel's bandwidth weights and the balanced ones: weighted interleave at its best ratio.
pub const RATIOS: [u32; 6] = [1, 2, 3, 4, 6, 8];

/// The fills of the fast tier the family's smaller `future-split` members take
/// ([`future_split_filled`]): halvings, and the midpoint of the upper half.
pub const FILLS: [(&str, f64); 3] = [("3/4", 0.75), ("1/2", 0.5), ("1/4", 0.25)];

/// How many windows of its object events each program's run is cut into by the family's
/// `window-split` members (docs/model.md §12): a geometric series, four times as many each.
pub const WINDOWS_PER_RUN: [u64; 3] = [32, 128, 512];

/// The short horizon of the family's second oracle, ticks (its default is 100).
pub const SHORT_HORIZON_TICKS: u32 = 10;

/// The horizon of the family's third oracle, run for several programs only: between the other
/// two, a geometric series 10, 30, 100 (docs/model.md §12: on `objects-pair` at 15% on
/// optane-2019 it runs in 29.4 ms where the two others take 130 ms and more, and ambix beat the
/// rest of the family).
pub const MID_HORIZON_TICKS: u32 = 30;

/// The candidates, each a policy to run on a fresh machine, those likeliest to win first (a
/// good run found early stops the rest sooner): the static splits by future accesses, the
/// interleaves (each set of weights once), first-touch, the oracle at two horizons, Memory Mode,
/// all-slow.
/// The phase members (docs/model.md §12): each phase's split, by priority (what wins where a
/// high-priority program holds the others back) and by gain, for each way of cutting phases in
/// `phases`; their names start with `prefix`.
fn phase_members(
    info: &MachineInfo,
    timing: &Timing,
    phases: &[(Option<u64>, PhaseCounts)],
    prefix: &str,
) -> Vec<Box<dyn Policy>> {
    let mut v: Vec<Box<dyn Policy>> = Vec::new();
    for (window, phases) in phases {
        for (name, order) in
            [("priority-phase-split", PhaseOrder::Priority), ("phase-split", PhaseOrder::Gain)]
        {
            let (splits, initial) = phase_splits(info, timing, phases, order);
            let name = match window {
                None => format!("{prefix}{name}"),
                Some(w) => format!("{prefix}{name}:{w}"),
            };
            v.push(Box::new(PhaseSplit::new(&name, splits, initial, *window)));
        }
    }
    v
}

/// Accesses each phase member's phases are cut at: the programs' starts and ends alone, and also
/// every 1/32 and 1/128 of the run's object events (`PhaseCounts::of`); each counted with
/// `pace` (`PhaseCounts::of`).
fn phase_counts(
    source: SourceFactory<'_>,
    counts: &TraceCounts,
    pace: Option<&[f64]>,
) -> Vec<(Option<u64>, PhaseCounts)> {
    let windows = [None, Some(counts.object_events / 32), Some(counts.object_events / 128)];
    windows
        .iter()
        .filter(|w| w.is_none_or(|w| w > 0))
        .map(|&w| (w, PhaseCounts::of(source(), w, pace)))
        .collect()
}

/// Each program's time per access in `run`, ns (its run time over its accesses, as the phases'
/// counting pass found them); `None` if the run is not of several programs.
fn pace_of(run: &RunReport, phases: &[(Option<u64>, PhaseCounts)]) -> Option<Vec<f64>> {
    let accesses = &phases.first()?.1.program_accesses;
    (run.programs.len() > 1 && run.programs.len() == accesses.len())
        .then(|| run.programs.iter().zip(accesses).map(|(p, &n)| p.runtime_ns() / n.max(1) as f64).collect())
}

fn family(
    info: &MachineInfo,
    timing: &Timing,
    counts: &TraceCounts,
    phases: &[(Option<u64>, PhaseCounts)],
) -> Vec<Box<dyn Policy>> {
    let registered = |spec: &str| terrace_policy::build(spec).expect("the family's registry policies build");
    // Several programs: each phase's split first.
    let mut v = phase_members(info, timing, phases, "");
    // The static splits, each placement once: on a trace without writes the bandwidth path's
    // order is the latency path's, and a repeat would run the same run again.
    let splits = [
        ("future-split", future_split(info, timing, counts)),
        ("bandwidth-split", bandwidth_split(info, timing, counts)),
        ("balanced-split", balanced_split(info, timing, counts)),
    ];
    let fills = FILLS.iter().map(|&(name, fill)| {
        (format!("future-split:fill={name}"), future_split_filled(info, timing, counts, fill))
    });
    let splits: Vec<(String, Vec<TierId>)> =
        splits.into_iter().map(|(name, tiers)| (name.to_string(), tiers)).chain(fills).collect();
    for (i, (name, tiers)) in splits.iter().enumerate() {
        if !splits[..i].iter().any(|(_, earlier)| earlier == tiers) {
            v.push(Box::new(Static::new(name, InitialPlacement::Pages { tiers: tiers.clone() })));
        }
    }
    v.push(Box::new(Static {
        name: "first-touch-2m".into(),
        initial: InitialPlacement::FirstTouch,
        page_size: PageSize::Huge2M,
    }));
    let spec = |w: &[u32]| {
        let w: Vec<String> = w.iter().map(|w| w.to_string()).collect();
        format!("interleave:weights={}", w.join(":"))
    };
    let mut tried: Vec<Vec<u32>> = Vec::new();
    let mut interleaves =
        vec![registered("weighted-interleave"), registered(&spec(&balanced_weights(timing, counts)))];
    interleaves.extend(RATIOS.iter().map(|&k| registered(&format!("interleave:weights={k}:1"))));
    for p in interleaves {
        if let InitialPlacement::Interleave { weights } = p.requirements(info).initial {
            if !tried.contains(&weights) {
                tried.push(weights);
                v.push(p);
            }
        }
    }
    // Memory Mode: on a program that fits the fast tier its cache fills put a little traffic on
    // the slow tier, which lowers the fast tier's loaded latency (§3) enough to beat every
    // placement by a few parts per million (mtier-stream-t1 at 100%); it is in the family so
    // that the reference is no slower than the registry's hardware cache either.
    v.push(registered("first-touch"));
    v.extend(oracles());
    // Several programs: each program's hot set moves as its objects come and go, and a program's
    // start or end changes every page's worth at once, so which horizon follows that best
    // varies more than for one (docs/model.md §12).
    if !phases.is_empty() {
        v.push(registered(&format!("oracle:horizon={MID_HORIZON_TICKS}")));
    }
    v.extend([registered("memory-mode"), registered("all-slow")]);
    v
}

/// What the counting pass found that bounds a static candidate's run ([`static_bound`]).
struct StaticBounds<'a> {
    timing: &'a Timing,
    counts: &'a TraceCounts,
    units: MediaUnits,
}

/// How one candidate's run ended.
enum Outcome {
    Ran(Box<RunReport>),
    /// Its clock reached the limit, or its clock and what is left of its trace did.
    Stopped,
    /// Not run: a static placement whose lower bound was at or past the limit.
    Bounded,
}

/// How many times a candidate's clock is checked against the limit over the run's length: a
/// candidate that cannot win stops at most a 64th of that length late, and a check costs a
/// stretch's end and a floor's few sums.
const CHECKS_PER_RUN: f64 = 64.0;

/// The time a candidate must beat, ns: the best complete run before it in the family's order,
/// or the caller's limit; infinite while there is neither. A candidate started before the run
/// that sets it has ended reads it as it goes.
struct Limit {
    /// The time's bits: a non-negative `f64`'s order is its bits' order, so the least of two
    /// times is the least of their bits.
    ns: std::sync::atomic::AtomicU64,
    /// How often, in the machine's clock, a candidate without ticks reads it: a 64th of a lower
    /// bound on any run, once the counting pass has given one.
    every_ns: std::sync::atomic::AtomicU64,
}

impl Limit {
    fn new(ns: Option<f64>) -> Self {
        Limit {
            ns: std::sync::atomic::AtomicU64::new(ns.unwrap_or(f64::INFINITY).to_bits()),
            every_ns: std::sync::atomic::AtomicU64::new(u64::MAX),
        }
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.ns.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn lower_to(&self, ns: f64) {
        self.ns.fetch_min(ns.max(0.0).to_bits(), std::sync::atomic::Ordering::Relaxed);
    }

    fn every_ns(&self) -> u64 {
        self.every_ns.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn check_every_64th_of(&self, lower_bound_ns: f64) {
        let every = ((lower_bound_ns / CHECKS_PER_RUN) as u64).max(1);
        self.every_ns.store(every, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One candidate's run on a fresh machine, stopped once its clock reaches `limit`. A static
/// placement ([`MediaUnits::static_floor`]) is not run if `bounds` show that it cannot end before
/// then, and stopped once its clock and the floor of what is left of its trace show it.
fn run_within(
    source: Box<dyn AccessSource>,
    policy: &mut dyn Policy,
    profile: &Profile,
    opts: &SimOptions,
    limit: &Limit,
    bounds: Option<&StaticBounds<'_>>,
) -> Result<Outcome, SimError> {
    let w = source.info().clone();
    let fast = opts.fast_capacity.resolve(w.footprint_bytes, w.suggested_fast_bytes);
    let mut machine = SimMachine::new(profile.clone(), source, fast, opts.slow_capacity)?;
    machine.set_policy_name(policy.name());
    let at_start = limit.get();
    // The machine's clock is reported in whole nanoseconds, rounded down: a clock at or past the
    // limit rounded up is past the limit.
    let clock_limit = if at_start.is_finite() { at_start.ceil() as u64 } else { u64::MAX };
    let floor = bounds.filter(|_| at_start.is_finite()).and_then(|b| {
        let floor = b.units.static_floor(&mut machine, policy, b.timing, b.counts)?;
        Some((b.timing, floor, b.counts.instructions))
    });
    let finished = match floor {
        Some((timing, floor, instructions)) => {
            if floor.run_ns(timing, instructions) >= at_start {
                return Ok(Outcome::Bounded);
            }
            let every = ((at_start / CHECKS_PER_RUN) as u64).max(1);
            terrace_model::drive_checked(&mut machine, policy, clock_limit, every, |m: &SimMachine, now| {
                now as f64 + floor.left_ns(timing, m.tier_totals(), 0.0) >= limit.get()
            })?
        }
        None => {
            terrace_model::drive_checked(&mut machine, policy, clock_limit, limit.every_ns(), |_, now| {
                now as f64 >= limit.get()
            })?
        }
    };
    if let Some(e) = machine.take_error() {
        return Err(e);
    }
    // A run can end a little past the clock it was driven to (its last slice, its movers'
    // drain): one that ends at or past the limit is as good as stopped.
    Ok(match finished.then(|| machine.report()).filter(|r| r.runtime_ns < limit.get()) {
        Some(report) => Outcome::Ran(Box::new(report)),
        None => Outcome::Stopped,
    })
}

/// `optimal` on the workload `source` makes, on `profile` with `opts`: every candidate of the
/// family run on its own machine, the first alone and the rest in parallel (`Search::try_all`),
/// each stopped as soon as its clock passes the best run before it (it can no longer win; the
/// clock only advances), and the fastest complete run returned.
pub fn optimal(source: SourceFactory<'_>, profile: &Profile, opts: &SimOptions) -> Result<Ceiling, SimError> {
    optimal_below(source, profile, opts, None).map(|c| c.expect("no limit: a candidate completes"))
}

/// [`optimal`], or `None` if no candidate beats `limit_ns`.
fn optimal_below(
    source: SourceFactory<'_>,
    profile: &Profile,
    opts: &SimOptions,
    limit_ns: Option<f64>,
) -> Result<Option<Ceiling>, SimError> {
    let info = machine_info(source(), profile, opts)?;
    // Phases exist only where programs start and end during the run.
    let several = info.programs.len() > 1;
    let quiet = SimOptions { progress: None, ..opts.clone() };
    let limit = Limit::new(limit_ns);
    // One program: the oracles need no counting pass and read the limit at each tick, so they
    // start at once, beside it (the one at the default horizon is the family's longest run, and
    // would otherwise hold the end up). Several programs: the paced phases need every first
    // outcome before they start, so everything waits for the pass.
    let early: Vec<Box<dyn Policy>> = if several { Vec::new() } else { oracles() };
    let early_names: Vec<String> = early.iter().map(|p| p.name().to_string()).collect();
    let (to_search, early_outcomes) = std::sync::mpsc::channel();
    // Read by this call alone, but the scope's body may run on another thread of the pool.
    let early_outcomes = std::sync::Mutex::new(early_outcomes);
    let mut to_search = Some(to_search);
    rayon::scope(|scope| {
        let sender = to_search.take().expect("the scope's body runs once");
        for mut p in early {
            let (to_search, limit, quiet) = (sender.clone(), &limit, &quiet);
            scope.spawn(move |_| {
                // Not the family's first.
                let run = run_candidate(source, p.as_mut(), false, profile, quiet, limit, None);
                let _ = to_search.send((p.name().to_string(), run));
            });
        }
        // Once every early run has sent its outcome (or panicked), the channel is closed.
        drop(sender);
        // The static candidates' bounds are for one program whose pages, once placed, stay placed.
        let mut units = if several {
            None
        } else {
            let footprint = source().info().footprint_bytes;
            MediaUnits::new(footprint, profile.tiers.iter().map(|t| t.media_granularity_bytes as u64))
        };
        let started = std::time::Instant::now();
        let mut count_units =
            units.as_mut().map(|u| move |batch: &[Access]| batch.iter().for_each(|a| u.count(a)));
        let counts = TraceCounts::of_and(source(), count_units.as_mut().map(|f| f as SideVisitor<'_>));
        tracing::debug!("optimal: counting pass in {:.3} s", started.elapsed().as_secs_f64());
        let timing = Timing::new(profile, info.threads);
        let lower_bound_ns = lower_bound_ns(&timing, &counts);
        limit.check_every_64th_of(lower_bound_ns);
        let bound = units.map(|units| StaticBounds { timing: &timing, counts: &counts, units });
        let phases = if several { phase_counts(source, &counts, None) } else { Vec::new() };
        let mut search = Search {
            candidates: Vec::new(),
            best: None,
            accesses_processed: counts.accesses + phases.iter().map(|(_, p)| p.accesses()).sum::<u64>(),
            bound,
            info: &info,
            limit: &limit,
        };
        // A program that allocates and frees (one or several): first the splits per window of
        // each program's own allocations. Its hot set moves as its objects come and go, which
        // one split of the whole run cannot follow, and the oracles' windows of ticks average a
        // page over lives it does not share (docs/model.md §12).
        let mut first: Vec<Box<dyn Policy>> = Vec::new();
        if counts.object_events > 0 {
            for k in WINDOWS_PER_RUN {
                let windows = ProgramWindows::of(source(), (counts.object_events / k).max(1));
                first.push(Box::new(WindowSplit::new(&format!("window-split:{k}"), windows, &info, &timing)));
                search.accesses_processed += counts.accesses;
            }
        }
        first.extend(family(&info, &timing, &counts, &phases));
        // Each candidate at its place in the family, those started early by name.
        let names: Vec<String> = first.iter().map(|p| p.name().to_string()).collect();
        let place =
            |name: &str| names.iter().position(|n| n == name).expect("the early ones are of the family");
        let rest: Vec<(usize, Box<dyn Policy>)> = first
            .into_iter()
            .enumerate()
            .filter(|(_, p)| !early_names.iter().any(|n| n == p.name()))
            .collect();
        let mut outcomes = search.try_all(source, rest, profile, &quiet);
        // The early runs: this thread runs what its queue holds while it waits, since on one core
        // they may be there still.
        let mut early_done = 0;
        while early_done < early_names.len() {
            match early_outcomes.lock().expect("no run panics").try_recv() {
                Ok((name, outcome)) => {
                    outcomes.push((place(&name), outcome));
                    early_done += 1;
                }
                // A run panicked: the scope passes the panic on when it ends.
                Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    if !matches!(rayon::yield_now(), Some(rayon::Yield::Executed)) {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                    }
                }
            }
        }
        search.take_all(outcomes)?;
        // Several programs: the phases again, counted with each program's pace in the best run so
        // far, so that where each program is at each start and end is as in that run.
        if let Some(pace) = search.best.as_ref().and_then(|(_, b)| pace_of(b, &phases)) {
            let paced = phase_counts(source, &counts, Some(&pace));
            search.accesses_processed += paced.iter().map(|(_, p)| p.accesses()).sum::<u64>();
            let paced: Vec<_> =
                phase_members(&info, &timing, &paced, "paced-").into_iter().enumerate().collect();
            let outcomes = search.try_all(source, paced, profile, &quiet);
            search.take_all(outcomes)?;
        }
        let Search { candidates, best, accesses_processed, .. } = search;
        let Some((chosen, mut report)) = best else { return Ok(None) };
        if let Some(p) = &opts.progress {
            p.fetch_add(report.accesses, std::sync::atomic::Ordering::Relaxed);
        }
        report.policy = NAME.to_string();
        Ok(Some(Ceiling {
            report,
            chosen,
            candidates,
            from_smaller_fast_tier: false,
            lower_bound_ns,
            accesses_processed,
        }))
    })
}

/// The family's oracles at the default and the short horizon, in its order.
fn oracles() -> Vec<Box<dyn Policy>> {
    let registered = |spec: &str| terrace_policy::build(spec).expect("the family's registry policies build");
    vec![
        registered("oracle"),
        // The oracle again with a tenth of its default horizon: where objects are freed and
        // their pages reused, or the hot set moves within the default horizon, 100 ticks'
        // counts average a page over lives and phases it does not share (docs/model.md §12:
        // at 1/64 size it runs `objects-sites` at a 25% fast tier in 21.7 ms, the default in 33.5).
        registered(&format!("oracle:horizon={SHORT_HORIZON_TICKS}")),
    ]
}

/// How a candidate's run ended, with its name and how long it took.
type Run = (String, Result<Outcome, SimError>, std::time::Duration);

/// [`run_within`] for the candidate `policy`, timed; a complete run lowers the limit for every
/// run still going. Every other candidate is after the family's `first`, so the first's time
/// stops them at it; a later one's stops a run only once past it by a nanosecond, so that a run
/// before it in the family that ties it still completes and wins the tie.
fn run_candidate(
    source: SourceFactory<'_>,
    policy: &mut dyn Policy,
    first: bool,
    profile: &Profile,
    opts: &SimOptions,
    limit: &Limit,
    bounds: Option<&StaticBounds<'_>>,
) -> Run {
    let started = std::time::Instant::now();
    let run = run_within(source(), policy, profile, opts, limit, bounds);
    if let Ok(Outcome::Ran(r)) = &run {
        limit.lower_to(if first { r.runtime_ns } else { r.runtime_ns + 1.0 });
    }
    (policy.name().to_string(), run, started.elapsed())
}

/// The candidates run so far and the best complete run among them.
struct Search<'a> {
    candidates: Vec<Candidate>,
    best: Option<(String, RunReport)>,
    accesses_processed: u64,
    /// What bounds a static candidate's run, for a trace it holds for.
    bound: Option<StaticBounds<'a>>,
    /// The machine, as the candidates see it before their runs.
    info: &'a MachineInfo,
    /// The time to beat, shared by every run.
    limit: &'a Limit,
}

impl Search<'_> {
    /// Runs `policies`, each at its place in the family and on a fresh machine, stopped once its
    /// clock passes the best complete run so far (or the caller's limit): the first alone (until
    /// a limit is known), then the static rest in parallel, each run's completion lowering the
    /// limit for those still going. The candidates no floor bounds (those that move pages or
    /// cache them) start at once, beside the first, and read the limit as it comes, so that no
    /// core waits for the first run. [`Self::take_all`] takes the outcomes in the family's
    /// order, so the run chosen is the one the family would give run one after another (the
    /// fastest, the earlier on a tie): a candidate is stopped only once it cannot beat a complete
    /// run, or tie one after it in the family (whose time stops it only a nanosecond past). Only
    /// the work differs, and which losing candidates are reported complete rather than stopped.
    fn try_all(
        &self,
        source: SourceFactory<'_>,
        policies: Vec<(usize, Box<dyn Policy>)>,
        profile: &Profile,
        opts: &SimOptions,
    ) -> Vec<(usize, Run)> {
        let (limit, bound) = (self.limit, self.bound.as_ref());
        let run = |i: usize, p: &mut Box<dyn Policy>| {
            run_candidate(source, p.as_mut(), i == 0, profile, opts, limit, bound)
        };
        let tiers = self.info.tiers.len();
        let mut policies = policies.into_iter();
        let first = policies.next();
        let (early, statics): (Vec<_>, Vec<_>) =
            policies.partition(|(_, p)| !static_bound::is_static(&p.requirements(self.info), tiers));
        let outcomes = std::sync::Mutex::new(Vec::new());
        rayon::scope(|scope| {
            for (i, mut p) in early {
                let (outcomes, run) = (&outcomes, &run);
                scope.spawn(move |_| {
                    let outcome = run(i, &mut p);
                    outcomes.lock().expect("no run panics").push((i, outcome));
                });
            }
            let mut firsts = first.into_iter().chain(statics);
            // One at a time until there is a limit ...
            let mut done = Vec::new();
            for (i, mut p) in firsts.by_ref() {
                done.push((i, run(i, &mut p)));
                if limit.get().is_finite() {
                    break;
                }
            }
            // ... then the rest in parallel below it.
            let rest: Vec<_> = firsts.collect();
            done.extend(rest.into_par_iter().map(|(i, mut p)| (i, run(i, &mut p))).collect::<Vec<_>>());
            outcomes.lock().expect("no run panics").extend(done);
        });
        outcomes.into_inner().expect("no run panics")
    }

    /// Records the outcomes in the family's order: each complete run becomes the best if it is
    /// faster than the best so far.
    fn take_all(&mut self, mut outcomes: Vec<(usize, Run)>) -> Result<(), SimError> {
        outcomes.sort_by_key(|(i, _)| *i);
        for (_, (name, run, took)) in outcomes {
            self.take(&name, run, took)?;
        }
        Ok(())
    }

    /// Records one candidate's outcome; it becomes the best if it completed faster than the best
    /// so far.
    fn take(
        &mut self,
        name: &str,
        run: Result<Outcome, SimError>,
        took: std::time::Duration,
    ) -> Result<(), SimError> {
        let run = match run {
            Ok(run) => run,
            // A candidate the machine refuses (a two-tier policy on three tiers) is no candidate.
            Err(SimError::Unsupported(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let how = match &run {
            Outcome::Ran(r) => format!("ran {:.3} ms", r.runtime_ns / 1e6),
            Outcome::Stopped => "stopped".to_string(),
            Outcome::Bounded => "bounded".to_string(),
        };
        tracing::debug!("optimal: candidate {name} {how} in {:.3} s", took.as_secs_f64());
        let runtime_ns = match &run {
            Outcome::Ran(r) => Some(r.runtime_ns),
            _ => None,
        };
        let bounded = matches!(run, Outcome::Bounded);
        self.candidates.push(Candidate { name: name.to_string(), runtime_ns, bounded });
        if let Outcome::Ran(report) = run {
            self.accesses_processed += report.accesses;
            if self.best.as_ref().is_none_or(|(_, b)| report.runtime_ns < b.runtime_ns) {
                self.best = Some((name.to_string(), *report));
            }
        }
        Ok(())
    }
}

/// `optimal` at each of `capacities`, in increasing order of fast-tier bytes, made
/// non-increasing in run time by construction: at each size it is the better of the family's
/// best at that size and the sweep's result at the size before. The latter is a schedule on a
/// machine whose every tier is no larger (the middle and slow tiers grow with the fast one, or
/// are fixed), so it can run unchanged on this one, leaving the extra room unused; in the model a
/// run's time does not depend on a tier's unused room (docs/model.md §12, which the test checks
/// for static placements).
pub fn optimal_sweep(
    source: SourceFactory<'_>,
    profile: &Profile,
    capacities: &[Capacity],
    opts: &SimOptions,
) -> Result<Vec<Ceiling>, SimError> {
    let mut out: Vec<Ceiling> = Vec::with_capacity(capacities.len());
    for &fast_capacity in capacities {
        let opts = SimOptions { fast_capacity, ..opts.clone() };
        let limit = out.last().map(|c| c.report.runtime_ns);
        let c = match optimal_below(source, profile, &opts, limit)? {
            Some(c) => c,
            None => {
                Ceiling { from_smaller_fast_tier: true, ..out.last().expect("a limit came from it").clone() }
            }
        };
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(reads: &[u64], writes: &[u64]) -> TraceCounts {
        TraceCounts {
            reads: reads.to_vec(),
            writes: writes.to_vec(),
            read_bytes: reads.iter().sum::<u64>() * LINE_BYTES,
            write_bytes: writes.iter().sum::<u64>() * LINE_BYTES,
            accesses: reads.iter().chain(writes).sum(),
            read_accesses: reads.iter().sum(),
            instructions: 0,
            object_events: 0,
            lines_read: reads.iter().sum(),
            lines_written: writes.iter().sum(),
        }
    }

    /// The bound's bytes are each line's once per direction: a line read again by a thread that
    /// has it open moves nothing (an access of 128 bytes covers two lines).
    #[test]
    fn the_whole_trace_pass_counts_each_line_once_per_direction() {
        let info = terrace_workloads::WorkloadInfo {
            name: "lines".into(),
            description: String::new(),
            footprint_bytes: 8192,
            threads: 1,
            scale: 1.0,
            suggested_fast_bytes: 8192,
            accesses: 13,
            recording: None,
        };
        let mut v = vec![terrace_model::Access::read(0, 64, 0, 0); 10];
        v.push(terrace_model::Access::write(0, 64, 0, 0));
        v.push(terrace_model::Access::read(4096, 128, 0, 0));
        v.push(terrace_model::Access::read(4100, 8, 0, 0));
        let c = TraceCounts::of(Box::new(terrace_workloads::MemorySource::new(info, v)));
        assert_eq!((c.read_accesses, c.lines_read, c.lines_written), (12, 3, 1));
        assert_eq!(c.read_bytes, 10 * 64 + 128 + 8);
    }

    /// The shared limit keeps the least time any run gave it, whatever the order (a time's bits
    /// order as the time does), and starts at the caller's or at none.
    #[test]
    fn the_limit_keeps_the_least_time() {
        let limit = Limit::new(None);
        assert_eq!(limit.get(), f64::INFINITY);
        for ns in [7.5e6, 1e-300, 3.0e9, 0.25, f64::INFINITY] {
            limit.lower_to(ns);
        }
        assert_eq!(limit.get(), 1e-300);
        let limit = Limit::new(Some(2.0e6));
        limit.lower_to(2.5e6);
        assert_eq!(limit.get(), 2.0e6);
        limit.lower_to(1.5e6 + 1.0);
        assert_eq!(limit.get(), 1.5e6 + 1.0);
    }

    /// A stream whose object events all come only once it has ended (which the trait allows for
    /// events at its end): a pass must still visit them, after the last access.
    struct EventsAtTheEnd(terrace_workloads::MemorySource, bool);

    impl AccessSource for EventsAtTheEnd {
        fn info(&self) -> &terrace_workloads::WorkloadInfo {
            self.0.info()
        }
        fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
            let n = self.0.fill(buf, max);
            self.1 = n == 0;
            n
        }
        fn take_object_events(&mut self, out: &mut Vec<ObjectEventAt>) {
            if self.1 {
                self.0.take_object_events(out);
            }
        }
    }

    /// The stream made on a thread of its own is visited as the one made in line: the same
    /// accesses, each object event at the same place among them (a workload with thousands of
    /// events over many batches), and events that come only after the last access; and a side
    /// visitor sees every access, in order.
    #[test]
    fn a_pass_with_the_stream_made_ahead_visits_what_a_pass_in_line_does() {
        fn log(
            source: Box<dyn AccessSource>,
            pass: impl FnOnce(Box<dyn AccessSource>, &mut dyn FnMut(Step<'_>)),
        ) -> Vec<(bool, u64)> {
            let mut log: Vec<(bool, u64)> = Vec::new();
            pass(source, &mut |step| match step {
                Step::Fill(_) => {}
                Step::Event(e) => log.push((true, e.addr)),
                Step::Access(a) => log.push((false, a.addr)),
            });
            log
        }
        let objects = || terrace_workloads::build("objects-sites", 1, 1.0 / 64.0).unwrap();
        let in_line = log(objects(), |s, v| walk(s, v));
        assert!(in_line.iter().filter(|(event, _)| *event).count() > 1000);
        assert!(in_line.len() > 4 * BATCH);
        assert_eq!(log(objects(), |s, v| walk_ahead(s, None, v)), in_line);
        let mut side: Vec<u64> = Vec::new();
        let mut record = |batch: &[Access]| side.extend(batch.iter().map(|a| a.addr));
        assert_eq!(log(objects(), |s, v| walk_ahead(s, Some(&mut record), v)), in_line);
        let accesses: Vec<u64> = in_line.iter().filter(|(event, _)| !event).map(|(_, addr)| *addr).collect();
        assert_eq!(side, accesses);

        let late = || -> Box<dyn AccessSource> {
            let mut source = objects();
            let (mut accesses, mut events) = (Vec::new(), Vec::new());
            while source.fill(&mut accesses, BATCH) > 0 {}
            source.take_object_events(&mut events);
            let info = source.info().clone();
            Box::new(EventsAtTheEnd(
                terrace_workloads::MemorySource::with_events(info, accesses, events),
                false,
            ))
        };
        let in_line = log(late(), |s, v| walk(s, v));
        assert!(in_line.iter().filter(|(event, _)| *event).count() > 1000);
        assert_eq!(log(late(), |s, v| walk_ahead(s, None, v)), in_line);
    }

    /// What `Search::try_all`'s order and bounds must not change: the run chosen is the one that
    /// running every candidate of the family to its end, one after another, gives (the fastest,
    /// the earlier on a tie), and every candidate that completed under a bound took the time it
    /// takes unbounded. stream-ro's winner is not the family's first candidate.
    #[test]
    fn optimal_chooses_what_every_candidate_run_to_its_end_would() {
        for (workload, profile, percent) in [
            ("stream-ro", "optane-2019", None),
            ("gups", "cxl", Some(20.0)),
            ("pmbench-s25-r20", "three-tier", None),
        ] {
            let source = || terrace_workloads::build(workload, 1, 1.0 / 64.0).unwrap();
            let profile = Profile::load(profile).unwrap();
            let opts = SimOptions {
                fast_capacity: percent.map_or(Capacity::Suggested, Capacity::Percent),
                ..SimOptions::default()
            };
            let ceiling = optimal(&source, &profile, &opts).unwrap();
            let info = machine_info(source(), &profile, &opts).unwrap();
            let counts = TraceCounts::of(source());
            let timing = Timing::new(&profile, info.threads);
            let mut ends: Vec<(String, f64)> = Vec::new();
            for mut p in family(&info, &timing, &counts, &[]) {
                match run_within(source(), p.as_mut(), &profile, &opts, &Limit::new(None), None) {
                    Ok(Outcome::Ran(run)) => ends.push((p.name().to_string(), run.runtime_ns)),
                    Ok(_) => panic!("{} did not run to its end without a limit", p.name()),
                    Err(SimError::Unsupported(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            let fastest = ends.iter().fold(&ends[0], |best, e| if e.1 < best.1 { e } else { best });
            assert_eq!((ceiling.chosen.as_str(), ceiling.report.runtime_ns), (fastest.0.as_str(), fastest.1));
            for c in &ceiling.candidates {
                let end = ends.iter().find(|e| e.0 == c.name).unwrap().1;
                assert!(
                    c.runtime_ns.is_none_or(|t| t == end),
                    "{workload}: {} took {t:?}, {end} alone",
                    c.name,
                    t = c.runtime_ns
                );
                assert!(
                    c.runtime_ns.is_some() || end >= ceiling.report.runtime_ns,
                    "{workload}: {} was stopped",
                    c.name
                );
            }
            assert_eq!(ceiling.candidates.len(), ends.len());
        }
    }

    fn two_tiers(fast_pages: u64) -> MachineInfo {
        let mut info = MachineInfo::placeholder(2);
        info.tiers[0].capacity_pages = Some(fast_pages);
        info.tiers[1].capacity_pages = Some(100);
        info
    }

    #[test]
    fn the_future_split_gives_the_fast_tier_the_most_read_pages_and_untouched_pages_the_slow_one() {
        let timing = Timing::new(&Profile::load("optane-2019").unwrap(), 4);
        let (f, s) = (TierId::FAST, TierId::SLOW);
        let tiers = future_split(&two_tiers(2), &timing, &counts(&[5, 0, 50, 7, 0], &[0; 5]));
        assert_eq!(tiers, [s, s, f, f, s]);
        // Room for more than the touched pages: the untouched ones still stay slow.
        let tiers = future_split(&two_tiers(5), &timing, &counts(&[5, 0, 50, 7, 0], &[0; 5]));
        assert_eq!(tiers, [f, s, f, f, s]);
    }

    #[test]
    fn a_filled_split_is_the_smaller_fast_tiers_split_and_fills_the_next_tier_on() {
        let timing = Timing::new(&Profile::load("optane-2019").unwrap(), 4);
        let (f, s) = (TierId::FAST, TierId::SLOW);
        let c = counts(&[5, 0, 50, 7, 9, 1], &[0; 6]);
        // Half of 4 pages: the two of most gain; the rest of the touched pages go on, slow.
        assert_eq!(future_split_filled(&two_tiers(4), &timing, &c, 0.5), [s, s, f, s, f, s]);
        assert_eq!(
            future_split_filled(&two_tiers(4), &timing, &c, 0.5),
            future_split(&two_tiers(2), &timing, &c)
        );
        assert_eq!(
            future_split_filled(&two_tiers(4), &timing, &c, 1.0),
            future_split(&two_tiers(4), &timing, &c)
        );
        // Three tiers: the pages the smaller fast tier leaves fill the middle one first.
        let mut three = MachineInfo::placeholder(3);
        three.tiers[0].capacity_pages = Some(4);
        three.tiers[1].capacity_pages = Some(2);
        three.tiers[2].capacity_pages = Some(100);
        let timing = Timing::new(&Profile::load("three-tier").unwrap(), 4);
        let tiers = future_split_filled(&three, &timing, &c, 0.25);
        assert_eq!(tiers.iter().filter(|t| **t == TierId(0)).count(), 1);
        assert_eq!(tiers.iter().filter(|t| **t == TierId(1)).count(), 2);
        assert_eq!(tiers[2], TierId(0), "the page of most gain stays fast");
    }

    #[test]
    fn the_balanced_split_sends_part_of_an_even_stream_to_the_slow_tier() {
        let timing = Timing::new(&Profile::load("optane-2019").unwrap(), 6);
        let tiers = balanced_split(&two_tiers(100), &timing, &counts(&[10; 40], &[0; 40]));
        let slow = tiers.iter().filter(|t| **t == TierId::SLOW).count();
        // Each tier's share of the pages is its share of the read bandwidth, to a page.
        let (f, s) = (timing.tiers[0].read_bytes_per_ns, timing.tiers[1].read_bytes_per_ns);
        let expected = 40.0 * s / (f + s);
        assert!((slow as f64 - expected).abs() <= 1.0, "{slow} slow pages, expected {expected:.1}");
        assert!(slow > 0 && slow < 40);
    }

    #[test]
    fn for_reads_alone_the_balanced_weights_are_the_kernels() {
        for profile in ["optane-2019", "cxl", "three-tier"] {
            let profile = Profile::load(profile).unwrap();
            let source = || terrace_workloads::build("stream-ro", 1, 1.0 / 64.0).unwrap();
            let info = machine_info(source(), &profile, &SimOptions::default()).unwrap();
            let timing = Timing::new(&profile, info.threads);
            assert_eq!(
                balanced_weights(&timing, &counts(&[10; 4], &[0; 4])),
                terrace_policy::baselines::interleave::Interleave::weights(&info),
                "{}",
                profile.name
            );
        }
    }
}
