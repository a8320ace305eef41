//! The family's members for a run of several programs (docs/model.md §12, §13). When one program
//! starts or ends, which pages are worth the fast tier changes at once (the new program's pages
//! are hot and the others' lose their share; an ended program's room is free), and within a
//! program's run its hot set moves as its objects come and go. No single split of the whole run
//! follows that, nor an oracle whose look-ahead window averages a page over the phases it spans.
//! These members know in advance each phase's accesses (a
//! phase: the time between one program's start or end and the next) or each program's accesses
//! per window of its own allocations, follow the starts, ends and allocations the machine
//! reports, and move every page to the current split, with the same moves and costs as any
//! policy.

use crate::{by_gain, future_split, split_in_order, walk, walk_ahead, Step, TraceCounts};
use terrace_model::{
    FreeRoom, InitialPlacement, MachineInfo, Move, MoveOptions, Mover, ObjectEvent, ObjectEventKind,
    Observations, PageIdx, Plan, Policy, Requirements, TierId, TrackerRequest,
};
use terrace_sim::timing::Timing;
use terrace_workloads::AccessSource;

/// How often a member checks that every page is where its phase puts it (real time, divided by
/// the run's scale as every policy's period is): a tenth of the oracle's interval, so that a
/// phase's change is followed within a small share of the phase.
pub const TICK_NS: u64 = 10_000_000;

/// Reads and writes of each 4 KiB page in each phase, and the phase of each page's first access.
#[derive(Clone, Debug, Default)]
pub struct PhaseCounts {
    /// One per phase: phase `k` is the stretch of the stream after `k` starts and ends of
    /// programs (a start at the stream's first access opens phase 1; phase 0 is then empty).
    pub phases: Vec<TraceCounts>,
    /// The phase of each page's first access (`u32::MAX`: never accessed).
    pub first_phase: Vec<u32>,
    /// Accesses of each program of the stream (one entry for a stream of one program).
    pub program_accesses: Vec<u64>,
}

/// Whether an event opens a new phase.
fn is_phase_change(e: &ObjectEvent) -> bool {
    matches!(e.kind, ObjectEventKind::ProgramStart { .. } | ObjectEventKind::ProgramEnd)
}

/// Where a phase or a program's window closes, one event at a time: the counting pass and the
/// member that follows the run each keep one, so both cut the stream at the same events.
#[derive(Clone, Copy, Debug)]
struct Cut {
    /// Close at every program's start and end (phases; a program's windows ignore them).
    at_programs: bool,
    /// Close also once this many other object events have passed since the last close.
    every: Option<u64>,
    seen: u64,
}

impl Cut {
    fn phases(every: Option<u64>) -> Self {
        Cut { at_programs: true, every, seen: 0 }
    }
    fn windows(every: u64) -> Self {
        Cut { at_programs: false, every: Some(every.max(1)), seen: 0 }
    }
    /// Whether `e` closes the stretch being counted.
    fn closes(&mut self, e: &ObjectEvent) -> bool {
        if is_phase_change(e) {
            if self.at_programs {
                self.seen = 0;
            }
            return self.at_programs;
        }
        self.seen += 1;
        let closes = self.every.is_some_and(|w| self.seen >= w);
        if closes {
            self.seen = 0;
        }
        closes
    }
}

impl PhaseCounts {
    /// One pass over `source`, its accesses counted in the phase its object events put them in:
    /// a program's start or end opens a new phase, and so, with `events_per_window`, does every
    /// that many allocations and frees since the phase opened (the hot set of a program that
    /// allocates moves between its objects as they come and go).
    ///
    /// Where several programs share the stream, which of their accesses fall in which phase
    /// depends on how fast each runs: the stream hands the next turn to the program whose clock
    /// is least (docs/model.md §13). Without `pace` no clock moves, and the programs take turns
    /// access for access; with it (ns per access of each program, from a run), each program's
    /// clock advances by its pace per access, so the phases fall where they fell in that run.
    pub fn of(source: Box<dyn AccessSource>, events_per_window: Option<u64>, pace: Option<&[f64]>) -> Self {
        let pages = source.info().footprint_bytes.div_ceil(4096) as usize;
        let programs: Vec<std::ops::Range<u64>> = source.programs().iter().map(|p| p.range()).collect();
        let n = programs.len().max(1);
        let empty = || TraceCounts { reads: vec![0; pages], writes: vec![0; pages], ..Default::default() };
        let mut c = PhaseCounts {
            phases: vec![empty()],
            first_phase: vec![u32::MAX; pages],
            program_accesses: vec![0; n],
        };
        let (mut clocks, mut running) = (vec![0.0f64; n], vec![false; n]);
        let mut cut = Cut::phases(events_per_window);
        walk(source, |step| match step {
            Step::Fill(source) => {
                if pace.is_some() {
                    source.set_program_clocks(&clocks, &c.program_accesses);
                }
            }
            Step::Event(e) => {
                let p = (e.program as usize).min(n - 1);
                match e.kind {
                    ObjectEventKind::ProgramStart { .. } => {
                        // It starts at the machine's time: the least clock of those running.
                        let now =
                            (0..n).filter(|&j| running[j] && j != p).map(|j| clocks[j]).reduce(f64::min);
                        clocks[p] = now.unwrap_or(clocks[p]);
                        running[p] = true;
                    }
                    ObjectEventKind::ProgramEnd => running[p] = false,
                    _ => {}
                }
                if cut.closes(e) {
                    c.phases.push(empty());
                }
            }
            Step::Access(a) => {
                let program = programs.iter().position(|r| r.contains(&a.addr)).unwrap_or(0);
                c.program_accesses[program] += 1;
                if let Some(pace) = pace {
                    clocks[program] += pace.get(program).copied().unwrap_or(1.0);
                }
                let phase = c.phases.len() - 1;
                c.phases[phase].count(a);
                if let Some(first) = c.first_phase.get_mut((a.addr >> 12) as usize) {
                    *first = (*first).min(phase as u32);
                }
            }
        });
        c
    }

    /// Accesses in all phases.
    pub fn accesses(&self) -> u64 {
        self.phases.iter().map(|p| p.accesses).sum()
    }
}

/// How a phase's pages are ordered for the fast tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseOrder {
    /// By what the fast tier saves them in the phase, whichever program they are of.
    Gain,
    /// The pages of the running programs of highest priority first, each program's by gain: what
    /// object tiering's priorities do (§5.5), but with each phase's accesses known.
    Priority,
}

/// Each phase's split of the pages among the tiers, and the tier each page is first placed in
/// (its split in the phase of its first access).
pub fn phase_splits(
    info: &MachineInfo,
    timing: &Timing,
    counts: &PhaseCounts,
    order: PhaseOrder,
) -> (Vec<Vec<TierId>>, Vec<TierId>) {
    let priority_of =
        |page: usize| info.program_at(page as u64 * 4096).map_or(i32::MIN, |p| info.programs[p].priority);
    let priorities: Vec<i32> = (0..counts.first_phase.len()).map(priority_of).collect();
    let splits: Vec<Vec<TierId>> = counts
        .phases
        .iter()
        .map(|phase| {
            let mut pages = by_gain(timing, phase);
            if order == PhaseOrder::Priority {
                // Stable: each priority's pages stay in order of gain.
                pages.sort_by_key(|&p| std::cmp::Reverse(priorities[p]));
            }
            split_in_order(info, phase, pages)
        })
        .collect();
    let last = TierId((info.tiers.len() - 1) as u8);
    let initial = counts
        .first_phase
        .iter()
        .enumerate()
        .map(|(page, &k)| splits.get(k as usize).map_or(last, |s| s[page]))
        .collect();
    (splits, initial)
}

/// A member of the family: each phase's split, followed from the machine's own reports of
/// programs starting and ending.
pub struct PhaseSplit {
    name: String,
    splits: Vec<Vec<TierId>>,
    initial: Vec<TierId>,
    /// Cut as [`PhaseCounts::of`] cut the stream.
    cut: Cut,
    /// Phases the machine's reported events have opened so far: the phase it is in.
    phase: usize,
}

impl PhaseSplit {
    pub fn new(
        name: &str,
        splits: Vec<Vec<TierId>>,
        initial: Vec<TierId>,
        events_per_window: Option<u64>,
    ) -> Self {
        PhaseSplit { name: name.to_string(), splits, initial, cut: Cut::phases(events_per_window), phase: 0 }
    }
}

impl Policy for PhaseSplit {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, _: &MachineInfo) -> Requirements {
        follower(InitialPlacement::Pages { tiers: self.initial.clone() })
    }

    fn object_event(&mut self, e: &ObjectEvent) {
        if self.cut.closes(e) {
            self.phase += 1;
        }
    }

    /// Every placed page to where the phase's split puts it (`moves_toward`).
    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let Some(split) = self.splits.get(self.phase.min(self.splits.len().saturating_sub(1))) else {
            return Plan::none();
        };
        moves_toward(obs, split, "the phase's split")
    }
}

/// Reads and writes of each page in each window of its own program: a program's window closes
/// every so many of its own allocations and frees. Unlike a phase, which all programs share, a
/// program's windows do not depend on how its turns and the others' interleave: the same
/// accesses fall in the same window whatever the programs' speeds.
#[derive(Clone, Debug, Default)]
pub struct ProgramWindows {
    pub events_per_window: u64,
    /// Per program: its pages (the first and how many) and, per window, each page's reads and
    /// writes.
    pub programs: Vec<WindowCounts>,
}

#[derive(Clone, Debug, Default)]
pub struct WindowCounts {
    pub first_page: usize,
    pub pages: usize,
    pub windows: Vec<Vec<(u32, u32)>>,
}

impl ProgramWindows {
    /// One pass over `source`, each program's windows closed every `events_per_window` of its
    /// own object events (starts and ends excepted).
    pub fn of(source: Box<dyn AccessSource>, events_per_window: u64) -> Self {
        let footprint = source.info().footprint_bytes;
        let ranges: Vec<std::ops::Range<u64>> = match source.programs() {
            [] => std::iter::once(0..footprint).collect(),
            programs => programs.iter().map(|p| p.range()).collect(),
        };
        let mut c = ProgramWindows {
            events_per_window: events_per_window.max(1),
            programs: ranges
                .iter()
                .map(|r| {
                    let first_page = (r.start >> 12) as usize;
                    let pages = (r.end.div_ceil(4096) as usize).saturating_sub(first_page);
                    WindowCounts { first_page, pages, windows: vec![vec![(0, 0); pages]] }
                })
                .collect(),
        };
        let mut cuts = vec![Cut::windows(c.events_per_window); c.programs.len()];
        walk_ahead(source, None, |step| match step {
            Step::Fill(_) => {}
            Step::Event(e) => {
                let p = e.program as usize;
                if let (Some(w), Some(cut)) = (c.programs.get_mut(p), cuts.get_mut(p)) {
                    if cut.closes(e) {
                        w.windows.push(vec![(0, 0); w.pages]);
                    }
                }
            }
            Step::Access(a) => {
                let page = (a.addr >> 12) as usize;
                if let Some(w) =
                    c.programs.iter_mut().find(|w| page >= w.first_page && page < w.first_page + w.pages)
                {
                    let slot = &mut w.windows.last_mut().expect("a window")[page - w.first_page];
                    if a.kind.is_write() {
                        slot.1 = slot.1.saturating_add(1);
                    } else {
                        slot.0 = slot.0.saturating_add(1);
                    }
                }
            }
        });
        c
    }
}

/// A member of the family for several programs: at each moment, the split by gain of the
/// running programs' pages over each one's current window, followed from the machine's reports
/// of starts, ends, allocations and frees. A page is first placed as first touch places it.
pub struct WindowSplit {
    name: String,
    counts: ProgramWindows,
    info: MachineInfo,
    timing: Timing,
    /// Per program: its current window, where it closes (as the counting pass cut it), whether
    /// it runs.
    window: Vec<usize>,
    cuts: Vec<Cut>,
    running: Vec<bool>,
    target: Vec<TierId>,
    stale: bool,
}

impl WindowSplit {
    pub fn new(name: &str, counts: ProgramWindows, info: &MachineInfo, timing: &Timing) -> Self {
        let n = counts.programs.len();
        let cuts = vec![Cut::windows(counts.events_per_window); n];
        WindowSplit {
            name: name.to_string(),
            counts,
            info: info.clone(),
            timing: timing.clone(),
            window: vec![0; n],
            cuts,
            // A stream of one program says nothing of its start.
            running: vec![n == 1; n],
            target: Vec::new(),
            stale: true,
        }
    }

    fn retarget(&mut self) {
        let pages = self.counts.programs.iter().map(|w| w.first_page + w.pages).max().unwrap_or(0);
        let mut now = TraceCounts { reads: vec![0; pages], writes: vec![0; pages], ..Default::default() };
        for (p, w) in self.counts.programs.iter().enumerate().filter(|(p, _)| self.running[*p]) {
            let counts = &w.windows[self.window[p].min(w.windows.len() - 1)];
            for (i, &(r, wr)) in counts.iter().enumerate() {
                now.reads[w.first_page + i] = u64::from(r);
                now.writes[w.first_page + i] = u64::from(wr);
            }
        }
        self.target = future_split(&self.info, &self.timing, &now);
        self.stale = false;
    }
}

impl Policy for WindowSplit {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, _: &MachineInfo) -> Requirements {
        follower(InitialPlacement::FirstTouch)
    }

    fn object_event(&mut self, e: &ObjectEvent) {
        let p = e.program as usize;
        if p >= self.window.len() {
            return;
        }
        match e.kind {
            ObjectEventKind::ProgramStart { .. } => self.running[p] = true,
            ObjectEventKind::ProgramEnd => self.running[p] = false,
            _ if self.cuts[p].closes(e) => self.window[p] += 1,
            _ => return,
        }
        self.stale = true;
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        if self.stale {
            self.retarget();
        }
        moves_toward(obs, &self.target, "each program's window's split")
    }
}

/// What a member that follows the machine's object events asks for: those events, a tick every
/// [`TICK_NS`], and stock move_pages from its own thread, which waits for it (the oracle's mover).
fn follower(initial: InitialPlacement) -> Requirements {
    Requirements {
        trackers: vec![TrackerRequest::object_events()],
        tick_ns: Some(TICK_NS),
        initial,
        mover: Mover::PolicyThread,
        ..Requirements::default()
    }
}

/// Every placed page not where `target` puts it moved there, those going to a slower tier first so
/// that the faster tiers have room for the rest; a move the tier has no room for waits for the
/// next tick, and a page already on its way is left to arrive.
fn moves_toward(obs: &Observations<'_>, target: &[TierId], reason: &str) -> Plan {
    let in_flight: std::collections::HashSet<PageIdx> = obs.in_flight.iter().map(|m| m.page).collect();
    let mut down = Vec::new();
    let mut up = Vec::new();
    for (page, (&now, &want)) in obs.placement.iter().zip(target).enumerate() {
        if now.is_placed() && want.is_placed() && now != want && !in_flight.contains(&(page as PageIdx)) {
            let m = Move { page: page as PageIdx, to: want };
            if want.index() > now.index() {
                down.push((now, m));
            } else {
                up.push((now, m));
            }
        }
    }
    let mut room = FreeRoom::new(obs.tiers);
    let mut moves = Vec::with_capacity(down.len() + up.len());
    for (from, m) in down.into_iter().chain(up) {
        if room.take(m.to) {
            room.give(from);
            moves.push(m);
        }
    }
    Plan { moves, options: MoveOptions::default(), reason: reason.into(), ..Plan::none() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::{Access, ProgramInfo, TierStatus};
    use terrace_sim::Profile;
    use terrace_workloads::{MemorySource, ObjectEventAt, WorkloadInfo};

    const P: u64 = 4096;

    fn info(name: &str, footprint_bytes: u64, accesses: u64) -> WorkloadInfo {
        WorkloadInfo {
            name: name.into(),
            description: String::new(),
            footprint_bytes,
            threads: 1,
            scale: 1.0,
            suggested_fast_bytes: P,
            accesses,
            recording: None,
        }
    }

    /// Two programs of two pages each: the first (priority 0) at pages 0-1, the second
    /// (priority 5) at pages 2-3, started after two accesses and ended after six.
    fn pair() -> MemorySource {
        let info = info("pair", 4 * P, 9);
        let accesses = vec![
            Access::read(0, 64, 0, 0),
            Access::read(0, 64, 0, 0),
            Access::write(2 * P, 64, 0, 0),
            Access::read(3 * P, 64, 0, 0),
            Access::read(0, 64, 0, 0),
            Access::read(0, 64, 0, 0),
            Access::read(P, 64, 0, 0),
            Access::read(P, 64, 0, 0),
            Access::read(P, 64, 0, 0),
        ];
        let events = vec![
            ObjectEventAt { at: 0, event: ObjectEvent::program_start(0, 0, 0, 2 * P) },
            ObjectEventAt { at: 2, event: ObjectEvent::program_start(1, 5, 2 * P, 2 * P) },
            ObjectEventAt { at: 6, event: ObjectEvent::program_end(1, 2 * P, 2 * P) },
        ];
        MemorySource::with_events(info, accesses, events)
    }

    fn machine(fast_pages: u64) -> MachineInfo {
        let mut m = MachineInfo::placeholder(2);
        m.tiers[0].capacity_pages = Some(fast_pages);
        m.tiers[1].capacity_pages = Some(100);
        m.programs = [(0, 0), (2, 5)]
            .iter()
            .map(|&(first, priority)| ProgramInfo {
                name: format!("p{first}"),
                priority,
                first_byte: first * P,
                bytes: 2 * P,
                threads: 1,
            })
            .collect();
        m
    }

    #[test]
    fn each_access_counts_in_the_phase_the_starts_and_ends_before_it_open() {
        let c = PhaseCounts::of(Box::new(pair()), None, None);
        // Phase 0 is empty (the first program starts at the first access); then the first
        // program alone, both, and the first alone again.
        assert_eq!(c.phases.len(), 4);
        assert_eq!(c.phases[0].accesses, 0);
        assert_eq!(c.phases[1].reads, [2, 0, 0, 0]);
        assert_eq!(
            (c.phases[2].reads.clone(), c.phases[2].writes.clone()),
            (vec![2, 0, 0, 1], vec![0, 0, 1, 0])
        );
        assert_eq!(c.phases[3].reads, [0, 3, 0, 0]);
        assert_eq!(c.first_phase, [1, 3, 2, 2]);
        assert_eq!(c.accesses(), 9);
    }

    #[test]
    fn by_priority_the_high_programs_pages_come_first_and_by_gain_the_most_accessed() {
        let timing = Timing::new(&Profile::load("optane-2019").unwrap(), 1);
        let c = PhaseCounts::of(Box::new(pair()), None, None);
        let (f, s) = (TierId::FAST, TierId::SLOW);
        // Room for one page: in the phase both run, a page of the second program by priority
        // (its read page, which gains more than its written one), though the first program's
        // page 0 has more accesses.
        let (by_priority, initial) = phase_splits(&machine(1), &timing, &c, PhaseOrder::Priority);
        assert_eq!(by_priority[2], [s, s, s, f]);
        assert_eq!(by_priority[3], [s, f, s, s], "after the end, the first program's hot page");
        // Each page first placed where the phase of its first access puts it.
        assert_eq!(initial, [f, f, s, f]);
        let (by_gain, _) = phase_splits(&machine(1), &timing, &c, PhaseOrder::Gain);
        assert_eq!(by_gain[2], [f, s, s, s]);
    }

    #[test]
    fn a_window_cuts_a_phase_every_so_many_allocations_and_frees_alike_in_count_and_run() {
        let info = WorkloadInfo { accesses: 5, ..pair().info().clone() };
        let accesses: Vec<Access> = (0..5).map(|i| Access::read(i * P % (4 * P), 64, 0, 0)).collect();
        let events: Vec<ObjectEventAt> =
            (1..5).map(|at| ObjectEventAt { at, event: ObjectEvent::alloc(0, P, 7) }).collect();
        let c = PhaseCounts::of(Box::new(MemorySource::with_events(info, accesses, events)), Some(2), None);
        let per_phase: Vec<u64> = c.phases.iter().map(|p| p.accesses).collect();
        assert_eq!(per_phase, [2, 2, 1]);
        // The policy counts the machine's events the same way.
        let mut p = PhaseSplit::new("w", vec![Vec::new(); 3], Vec::new(), Some(2));
        let seen: Vec<usize> = (0..4)
            .map(|_| {
                p.object_event(&ObjectEvent::alloc(0, P, 7));
                p.phase
            })
            .collect();
        assert_eq!(seen, [0, 1, 1, 2]);
    }

    fn observe<'a>(placement: &'a [TierId], tiers: &'a [TierStatus]) -> Observations<'a> {
        Observations {
            now_ns: 1,
            previous_ns: 0,
            placement,
            tiers,
            page_bits: None,
            samples: &[],
            future: None,
            hint_faults: &[],
            in_flight: &[],
        }
    }

    #[test]
    fn at_a_phase_change_pages_go_to_the_new_split_demotions_first_as_room_allows() {
        let (f, s) = (TierId::FAST, TierId::SLOW);
        let splits = vec![vec![f, f, s, s], vec![s, s, f, f]];
        let mut p = PhaseSplit::new("phase-split", splits, vec![f, f, s, s], None);
        let placement = [f, f, s, s];
        let full = [
            TierStatus { used_pages: 2, capacity_pages: Some(2), ..TierStatus::default() },
            TierStatus { used_pages: 2, capacity_pages: Some(10), ..TierStatus::default() },
        ];
        assert!(p.tick(&observe(&placement, &full)).moves.is_empty(), "in place: nothing to do");
        p.object_event(&ObjectEvent::program_start(1, 0, 0, P));
        p.object_event(&ObjectEvent::alloc(0, P, 7));
        let plan = p.tick(&observe(&placement, &full));
        let moves: Vec<(PageIdx, TierId)> = plan.moves.iter().map(|m| (m.page, m.to)).collect();
        assert_eq!(moves, [(0, s), (1, s), (2, f), (3, f)]);
        // With the slow tier full, nothing can leave the fast one, so nothing enters it.
        let slow_full = [full[0], TierStatus { used_pages: 10, ..full[1] }];
        assert!(p.tick(&observe(&placement, &slow_full)).moves.is_empty());
    }

    /// Two programs of 16 turns of reads each, the second from the first's second turn (a
    /// co-run stream, docs/model.md §13).
    fn co_run() -> Box<dyn AccessSource> {
        use terrace_workloads::corun::{CoRun, Member, TURN_ACCESSES};
        let n = 16 * TURN_ACCESSES as u64;
        let program = |name: &str| -> Box<dyn AccessSource> {
            let info = info(name, 64 * P, n);
            let accesses: Vec<Access> = (0..n).map(|i| Access::read((i * 64) % (64 * P), 64, 0, 1)).collect();
            Box::new(MemorySource::new(info, accesses))
        };
        let members = vec![
            Member { source: program("a"), priority: 0, start_after: None },
            Member { source: program("b"), priority: 1, start_after: Some((0, TURN_ACCESSES as u64)) },
        ];
        Box::new(CoRun::new(info("pair", 0, 0), members).unwrap())
    }

    #[test]
    fn with_a_pace_the_phases_fall_where_each_programs_speed_puts_them() {
        let turn = terrace_workloads::corun::TURN_ACCESSES as u64;
        let alone_at_the_end = |pace: Option<&[f64]>| {
            let c = PhaseCounts::of(co_run(), None, pace);
            assert_eq!(c.program_accesses, [16 * turn, 16 * turn]);
            c.phases.iter().rev().find(|p| p.accesses > 0).unwrap().accesses
        };
        // Without a pace the two take turns: when the first ends, the second has one turn left.
        assert_eq!(alone_at_the_end(None), turn);
        // The second three times slower per access: it makes a turn to the first's three, so it
        // has 16 - 5 = 11 turns left when the first ends.
        assert_eq!(alone_at_the_end(Some(&[1.0, 3.0])), 11 * turn);
    }

    /// Two programs of 16 turns, each allocating at the start of every turn of its own.
    fn allocating_co_run() -> Box<dyn AccessSource> {
        use terrace_workloads::corun::{CoRun, Member, TURN_ACCESSES};
        let turn = TURN_ACCESSES as u64;
        let program = |name: &str| -> Box<dyn AccessSource> {
            let n = 16 * turn;
            let accesses: Vec<Access> = (0..n).map(|i| Access::read((i * 64) % (64 * P), 64, 0, 1)).collect();
            let events =
                (0..16).map(|t| ObjectEventAt { at: t * turn, event: ObjectEvent::alloc(0, P, 7) }).collect();
            Box::new(MemorySource::with_events(info(name, 64 * P, n), accesses, events))
        };
        let members = vec![
            Member { source: program("a"), priority: 0, start_after: None },
            Member { source: program("b"), priority: 1, start_after: Some((0, 3 * turn)) },
        ];
        Box::new(CoRun::new(info("pair", 0, 0), members).unwrap())
    }

    #[test]
    fn each_programs_windows_hold_its_own_turns_whatever_the_interleaving() {
        let turn = terrace_workloads::corun::TURN_ACCESSES as u64;
        let w = ProgramWindows::of(allocating_co_run(), 4);
        assert_eq!(w.programs.len(), 2);
        for p in &w.programs {
            // 16 allocations, one before each turn: the 4th (before turn 3) closes the first
            // window, then every 4th; the same for both, though their turns interleave.
            let per_window: Vec<u64> =
                p.windows.iter().map(|c| c.iter().map(|&(r, w)| u64::from(r + w)).sum()).collect();
            assert_eq!(per_window, [3 * turn, 4 * turn, 4 * turn, 4 * turn, turn]);
        }
        assert_eq!(w.programs[1].first_page, (2 << 20) / 4096, "the second program's range is 2 MiB-aligned");
    }

    #[test]
    fn the_window_split_targets_the_running_programs_pages_only() {
        let timing = Timing::new(&Profile::load("optane-2019").unwrap(), 1);
        let mut m = machine(2);
        m.programs[1].first_byte = 2 * P;
        // Program 0 reads its pages 0 and 1 in its one window, program 1 its pages 2 and 3, more.
        let counts = ProgramWindows {
            events_per_window: 10,
            programs: vec![
                WindowCounts { first_page: 0, pages: 2, windows: vec![vec![(5, 0), (4, 0)]] },
                WindowCounts { first_page: 2, pages: 2, windows: vec![vec![(9, 0), (8, 0)]] },
            ],
        };
        let mut p = WindowSplit::new("window-split", counts, &m, &timing);
        let (f, s) = (TierId::FAST, TierId::SLOW);
        p.object_event(&ObjectEvent::program_start(0, 0, 0, 2 * P));
        p.retarget();
        assert_eq!(p.target, [f, f, s, s]);
        p.object_event(&ObjectEvent::program_start(1, 5, 2 * P, 2 * P));
        p.retarget();
        assert_eq!(p.target, [s, s, f, f], "the second program's pages gain more");
        p.object_event(&ObjectEvent::program_end(1, 2 * P, 2 * P));
        p.retarget();
        assert_eq!(p.target, [f, f, s, s], "its room is the first's again");
    }
}
