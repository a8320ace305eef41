//! Several programs on one simulated machine (docs/model.md §13; object tiering §5.5): each runs
//! at its own speed on its own clock, a program that ends gives its memory back, the policy sees
//! each program's start (with its priority) and end, and a look-ahead counts what lies ahead
//! without changing the order the programs run in.

use terrace_model::{
    drive, Access, MachineInfo, ObjectEvent, ObjectEventKind, Observations, Plan, Policy, Requirements,
    TierId, TrackerRequest,
};
use terrace_sim::{Capacity, Profile, SimMachine, SimOptions};
use terrace_workloads::corun::{CoRun, Member, TURN_ACCESSES};
use terrace_workloads::{AccessSource, MemorySource, WorkloadInfo};

const PAGE: u64 = 4096;

fn info(name: &str, pages: u64, threads: u32, accesses: u64) -> WorkloadInfo {
    WorkloadInfo {
        name: name.into(),
        description: String::new(),
        footprint_bytes: pages * PAGE,
        threads,
        scale: 1.0,
        suggested_fast_bytes: pages * PAGE,
        accesses,
        recording: None,
    }
}

/// `n` reads and writes by `threads` threads over `pages` pages, a line at a time.
fn program(name: &str, pages: u64, threads: u32, n: u64) -> MemorySource {
    let accesses: Vec<Access> = (0..n)
        .map(|i| {
            let (addr, t) = ((i * 4160) % (pages * PAGE), (i % u64::from(threads)) as u8);
            if i % 3 == 0 {
                Access::write(addr, 64, t, 5)
            } else {
                Access::read(addr, 64, t, 5)
            }
        })
        .collect();
    MemorySource::new(info(name, pages, threads, n), accesses)
}

fn pair(start_after: u64) -> CoRun {
    let members = vec![
        Member {
            source: Box::new(program("low", 64, 4, 40 * TURN_ACCESSES as u64)),
            priority: 0,
            start_after: None,
        },
        Member {
            source: Box::new(program("high", 32, 2, 10 * TURN_ACCESSES as u64)),
            priority: 1,
            start_after: Some((0, start_after)),
        },
    ];
    CoRun::new(info("pair", 0, 0, 0), members).unwrap()
}

fn profile() -> Profile {
    Profile::load("optane-2019").unwrap()
}

fn alone(source: MemorySource, policy: &str) -> f64 {
    let mut p = terrace_policy::build(policy).unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Bytes(64 * PAGE), ..SimOptions::default() };
    terrace_sim::simulate(Box::new(source), p.as_mut(), &profile(), &opts).unwrap().runtime_ns
}

/// Bound apart, the high-priority program in the fast tier and the other in the slow one, each
/// touches one tier only, so the other's traffic (which loads only the other tier) cannot change
/// its time: each runs as long as it does alone (to a part in 10^5: its slices end where its
/// turns do, not where they would alone, and a slice's loaded latency depends on its length),
/// from its own start, and the run lasts until the later end.
#[test]
fn programs_bound_apart_run_as_long_as_alone() {
    let start = 8 * TURN_ACCESSES as u64;
    let mut bind = terrace_policy::build("bind-priority").unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Bytes(64 * PAGE), ..SimOptions::default() };
    let r = terrace_sim::simulate(Box::new(pair(start)), bind.as_mut(), &profile(), &opts).unwrap();
    let (low, high) = (&r.programs[0], &r.programs[1]);
    assert_eq!((low.name.as_str(), high.name.as_str(), high.priority), ("low", "high", 1));
    let low_alone = alone(program("low", 64, 4, 40 * TURN_ACCESSES as u64), "all-slow");
    let high_alone = alone(program("high", 32, 2, 10 * TURN_ACCESSES as u64), "all-fast");
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b;
    assert!(close(low.runtime_ns(), low_alone), "{} against {low_alone}", low.runtime_ns());
    assert!(close(high.runtime_ns(), high_alone), "{} against {high_alone}", high.runtime_ns());
    assert_eq!(low.start_ns, 0.0);
    // It started once the low program had made `start` accesses: at the time they took.
    let low_per_turn = low_alone / 40.0;
    assert!(close(high.start_ns, 8.0 * low_per_turn), "{} against {}", high.start_ns, 8.0 * low_per_turn);
    assert!(close(r.runtime_ns, low.end_ns.max(high.end_ns)));
    assert_eq!(r.tiers[0].reads + r.tiers[1].reads + r.tiers[0].writes + r.tiers[1].writes, r.accesses);
    // The high program's accesses all hit the fast tier, the low one's none.
    assert_eq!(r.tiers[0].reads + r.tiers[0].writes, 10 * TURN_ACCESSES as u64);
    // Each program's own part of the report says so: all of its accesses, where they went, and
    // that the other's traffic (on the other tier) cost it nothing; nothing moved or stalled.
    let turns = TURN_ACCESSES as u64;
    assert_eq!((high.reads + high.writes, low.reads + low.writes), (10 * turns, 40 * turns));
    assert_eq!((high.fast_reads, high.fast_writes), (high.reads, high.writes));
    assert_eq!((low.fast_reads, low.fast_writes), (0, 0));
    assert_eq!((high.fast_read_hit_rate(), low.fast_write_hit_rate()), (1.0, 0.0));
    for p in [low, high] {
        assert_eq!((p.others_load_ns, p.copy_load_ns, p.stall_ns), (0.0, 0.0, 0.0), "{}", p.name);
        assert_eq!((p.pages_promoted, p.pages_demoted), (0, 0));
    }
}

/// Sharing a tier, a program's traffic loads the other's: under first touch both programs'
/// pages share the fast tier's bandwidth and loaded latency, and neither runs faster than alone.
#[test]
fn programs_sharing_a_tier_slow_each_other() {
    let mut ft = terrace_policy::build("all-fast").unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Bytes(PAGE), ..SimOptions::default() };
    let r = terrace_sim::simulate(Box::new(pair(0)), ft.as_mut(), &profile(), &opts).unwrap();
    let low_alone = alone(program("low", 64, 4, 40 * TURN_ACCESSES as u64), "all-fast");
    let high_alone = alone(program("high", 32, 2, 10 * TURN_ACCESSES as u64), "all-fast");
    assert!(r.programs[0].runtime_ns() >= low_alone && r.programs[1].runtime_ns() >= high_alone);
    assert!(r.programs[0].runtime_ns() + r.programs[1].runtime_ns() > low_alone + high_alone);
    // The report puts the loss where it is: the other's traffic on the shared tier, no more than
    // the program's whole time beyond its run alone, and most of it.
    for (p, alone) in r.programs.iter().zip([low_alone, high_alone]) {
        let lost = p.runtime_ns() - alone;
        assert!(
            p.others_load_ns > 0.5 * lost && p.others_load_ns <= lost * 1.001,
            "{}: {} of {lost}",
            p.name,
            p.others_load_ns
        );
        assert_eq!((p.copy_load_ns, p.stall_ns), (0.0, 0.0));
    }
}

/// Moves the high-priority program's pages to the fast tier and the other's to the slow tier
/// once both run, a few pages a tick.
struct Sorter {
    programs: Vec<terrace_model::ProgramInfo>,
}

impl Policy for Sorter {
    fn name(&self) -> &str {
        "sorter"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements { tick_ns: Some(2000), ..Requirements::default() }
    }
    fn start(&mut self, m: &MachineInfo) {
        self.programs = m.programs.clone();
    }
    fn tick(&mut self, o: &Observations<'_>) -> Plan {
        let mut plan = Plan::none();
        for (page, &tier) in o.placement.iter().enumerate() {
            let addr = page as u64 * PAGE;
            let Some(p) = self.programs.iter().find(|p| p.range().contains(&addr)) else { continue };
            let to = TierId(u8::from(p.priority == 0));
            if tier.is_placed() && tier != to && plan.moves.len() < 8 {
                plan.moves.push(terrace_model::Move { page: page as u32, to });
            }
        }
        plan
    }
}

/// A program's pages that a policy moves are counted as its own, promotions and demotions apart,
/// and the moves' stalls show in its part of the report.
#[test]
fn each_program_s_moves_and_stalls_are_its_own() {
    let mut sorter = Sorter { programs: Vec::new() };
    let opts = SimOptions { fast_capacity: Capacity::Bytes(48 * PAGE), ..SimOptions::default() };
    let r = terrace_sim::simulate(Box::new(pair(4 * TURN_ACCESSES as u64)), &mut sorter, &profile(), &opts)
        .unwrap();
    let (low, high) = (&r.programs[0], &r.programs[1]);
    // First touch put the low program's pages in the fast tier, and some of the high one's
    // beyond it: the first are demoted, the second promoted, and nothing else moves.
    assert!(low.pages_demoted > 0 && high.pages_promoted > 0, "{low:?} {high:?}");
    assert_eq!((low.pages_promoted, high.pages_demoted), (0, 0));
    let moved: u64 = r.programs.iter().map(|p| p.pages_promoted + p.pages_demoted).sum();
    assert!(r.pages_migrated > 0);
    // Every page of the run belongs to one program, and moves only between the two tiers.
    assert_eq!(moved, r.pages_migrated);
    let accesses: u64 = r.programs.iter().map(|p| p.reads + p.writes).sum();
    assert_eq!(accesses, r.accesses);
    let fast: u64 = r.programs.iter().map(|p| p.fast_reads + p.fast_writes).sum();
    assert_eq!(fast, r.tiers[0].reads + r.tiers[0].writes);
    // A shootdown halts every program running, so each one's stalls are at most the run's.
    for p in &r.programs {
        assert!(
            p.stall_ns > 0.0 && p.stall_ns <= r.stall_ns * 1.000_001,
            "{}: {} of {}",
            p.name,
            p.stall_ns,
            r.stall_ns
        );
        assert!(p.stall_ns + p.copy_load_ns + p.others_load_ns < p.runtime_ns(), "{}", p.name);
    }
    // The copies load the tiers the programs use.
    assert!(r.programs.iter().any(|p| p.copy_load_ns > 0.0));
}

/// Hands every event it is given to a list; moves nothing.
struct Listener {
    seen: Vec<ObjectEvent>,
    info: Option<MachineInfo>,
}

impl Policy for Listener {
    fn name(&self) -> &str {
        "listener"
    }
    fn requirements(&self, m: &MachineInfo) -> Requirements {
        assert!(!m.programs.is_empty(), "the programs are known before the run starts");
        Requirements {
            trackers: vec![TrackerRequest::object_events()],
            tick_ns: Some(1000),
            ..Requirements::default()
        }
    }
    fn start(&mut self, m: &MachineInfo) {
        self.info = Some(m.clone());
    }
    fn object_event(&mut self, e: &ObjectEvent) {
        self.seen.push(*e);
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

/// The policy learns the programs before they start (their ranges and priorities) and sees each
/// one's start, with its priority, and end; a program that has ended holds no page any more.
#[test]
fn the_policy_sees_each_program_start_and_end_and_an_ended_program_holds_no_memory() {
    let mut machine =
        SimMachine::new(profile(), Box::new(pair(4 * TURN_ACCESSES as u64)), 64 * PAGE, None).unwrap();
    let mut policy = Listener { seen: Vec::new(), info: None };
    drive(&mut machine, &mut policy).unwrap();
    let programs = &policy.info.as_ref().unwrap().programs;
    assert_eq!(programs.len(), 2);
    assert_eq!((programs[1].first_byte, programs[1].bytes, programs[1].priority), (2 << 20, 32 * PAGE, 1));
    let kinds: Vec<(u32, ObjectEventKind)> = policy.seen.iter().map(|e| (e.program, e.kind)).collect();
    assert_eq!(
        kinds[..2],
        [
            (0, ObjectEventKind::ProgramStart { priority: 0 }),
            (1, ObjectEventKind::ProgramStart { priority: 1 })
        ]
    );
    // The ends come in the order the programs' clocks reach them.
    let runs = machine.report().programs;
    let first = u32::from(runs[1].end_ns < runs[0].end_ns);
    assert_eq!(kinds[2..], [(first, ObjectEventKind::ProgramEnd), (1 - first, ObjectEventKind::ProgramEnd)]);
    assert!(machine.placement().tiers.iter().all(|&t| t == TierId::UNPLACED));
}

/// Moves nothing, ticks every 2 µs, and looks `horizon` ticks ahead (none: no look-ahead);
/// checks at each tick that what the window counts is no more than the run's accesses (a count
/// taken out of the window that was never put in would wrap round).
struct Peeker {
    horizon: Option<u32>,
    accesses: u64,
    ticks_seen_ahead: u64,
}

impl Policy for Peeker {
    fn name(&self) -> &str {
        "peeker"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        let trackers = self.horizon.map(TrackerRequest::future).into_iter().collect();
        Requirements { tick_ns: Some(2000), trackers, ..Requirements::default() }
    }
    fn tick(&mut self, o: &Observations<'_>) -> Plan {
        if let Some(f) = o.future {
            let ahead: u64 = f.iter().map(|c| u64::from(c.reads) + u64::from(c.writes)).sum();
            assert!(ahead <= self.accesses, "{ahead} accesses ahead of a run of {}", self.accesses);
            self.ticks_seen_ahead += u64::from(ahead > 0);
        }
        Plan::none()
    }
}

/// A look-ahead counts what lies ahead without fixing the order the programs run in: a policy
/// that looks 100 ticks ahead and moves nothing runs the pair exactly as one that does not look
/// ahead (each program's start and end to the nanosecond). Until the look-ahead read each
/// program's accesses apart, it read the pair's turns in an order fixed by estimated clocks,
/// and then ran them in that order.
#[test]
fn a_look_ahead_over_several_programs_leaves_the_order_they_run_in() {
    let opts = SimOptions { fast_capacity: Capacity::Bytes(16 * PAGE), ..SimOptions::default() };
    let accesses = 50 * TURN_ACCESSES as u64;
    let run = |horizon| {
        let mut p = Peeker { horizon, accesses, ticks_seen_ahead: 0 };
        let r = terrace_sim::simulate(Box::new(pair(4 * TURN_ACCESSES as u64)), &mut p, &profile(), &opts)
            .unwrap();
        (r, p.ticks_seen_ahead)
    };
    let (blind, _) = run(None);
    let (ahead, ticks_ahead) = run(Some(100));
    assert!(ticks_ahead > 10, "the window saw accesses ahead at {ticks_ahead} ticks");
    assert_eq!(ahead.accesses, accesses);
    let spans =
        |r: &terrace_sim::RunReport| r.programs.iter().map(|p| (p.start_ns, p.end_ns)).collect::<Vec<_>>();
    assert_eq!(spans(&ahead), spans(&blind));
    assert_eq!(ahead.runtime_ns, blind.runtime_ns);
}

/// A look-ahead (the oracle's) over several programs: the run replays every turn, each program
/// to its end.
#[test]
fn a_look_ahead_over_several_programs_reads_ahead_by_estimated_clocks() {
    let mut oracle = terrace_policy::build("oracle").unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Bytes(16 * PAGE), ..SimOptions::default() };
    let r =
        terrace_sim::simulate(Box::new(pair(4 * TURN_ACCESSES as u64)), oracle.as_mut(), &profile(), &opts)
            .unwrap();
    assert_eq!(r.accesses, 50 * TURN_ACCESSES as u64);
    assert_eq!(r.programs.len(), 2);
    assert!(r.programs.iter().all(|p| p.end_ns > p.start_ns && p.end_ns <= r.runtime_ns));
    assert_eq!(r.runtime_ns, r.programs[0].end_ns.max(r.programs[1].end_ns));
}

/// The one program of an ordinary run is no co-run: its report names no programs.
#[test]
fn one_program_reports_no_programs() {
    let src: Box<dyn AccessSource> = Box::new(program("one", 8, 1, 1000));
    let mut ft = terrace_policy::build("first-touch").unwrap();
    let r = terrace_sim::simulate(src, ft.as_mut(), &profile(), &SimOptions::default()).unwrap();
    assert!(r.programs.is_empty());
}
