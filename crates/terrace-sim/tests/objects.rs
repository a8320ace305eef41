//! Object events on the simulated machine (docs/model.md §5, "Objects"; object tiering §3.2,
//! §3.4.4, §3.5): a free releases the pages no live object overlaps any more, an allocation of
//! an advised site is first touched in the advised tier and spills by the initial-placement rule
//! when it is full, an object move moves every page of the range, and a policy that asks for
//! object events sees each event of the stream once, in order. Every expected placement below is
//! worked out by hand from the capacities.

use terrace_model::{
    drive, Access, InitialPlacement, MachineInfo, ObjectEvent, ObjectMove, Observations, Plan, Policy,
    Requirements, SiteAdvice, TierId, TrackerRequest,
};
use terrace_sim::{Profile, SimMachine};
use terrace_workloads::{MemorySource, ObjectEventAt, WorkloadInfo};

const PAGE: u64 = 4096;
const PAGES: u64 = 16;
const F: TierId = TierId::FAST;
const S: TierId = TierId::SLOW;
const U: TierId = TierId::UNPLACED;

/// A program as steps: object events, and writes of one line of each page listed.
enum Step {
    Event(ObjectEvent),
    Touch(Vec<u64>),
    /// `n` reads of page 15, which no object holds: time passing.
    Wait(u64),
}

fn source(steps: &[Step]) -> Box<MemorySource> {
    let mut accesses = Vec::new();
    let mut events = Vec::new();
    for s in steps {
        match s {
            Step::Event(e) => events.push(ObjectEventAt { at: accesses.len() as u64, event: *e }),
            Step::Touch(pages) => accesses.extend(pages.iter().map(|p| Access::write(p * PAGE, 64, 0, 10))),
            Step::Wait(n) => {
                accesses.extend((0..*n).map(|i| Access::read(15 * PAGE + (i % 64) * 64, 64, 0, 10)))
            }
        }
    }
    let info = WorkloadInfo {
        name: "objects-by-hand".into(),
        description: String::new(),
        footprint_bytes: PAGES * PAGE,
        threads: 1,
        scale: 1.0,
        suggested_fast_bytes: 4 * PAGE,
        accesses: accesses.len() as u64,
        recording: None,
    };
    Box::new(MemorySource::with_events(info, accesses, events))
}

/// At its first tick returns `first`; records the events it is handed.
struct Scripted {
    initial: InitialPlacement,
    events: bool,
    first: Option<Plan>,
    ticks: u32,
    seen: Vec<ObjectEvent>,
}

impl Scripted {
    fn new(initial: InitialPlacement, first: Plan) -> Self {
        Scripted { initial, events: false, first: Some(first), ticks: 0, seen: vec![] }
    }
}

impl Policy for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            tick_ns: Some(1_000),
            initial: self.initial.clone(),
            trackers: if self.events { vec![TrackerRequest::object_events()] } else { vec![] },
            ..Requirements::default()
        }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        self.ticks += 1;
        self.first.take().unwrap_or_else(Plan::none)
    }
    fn object_event(&mut self, e: &ObjectEvent) {
        self.seen.push(*e);
    }
}

/// Runs `policy` over `steps` with a fast tier of 4 pages.
fn run(steps: &[Step], policy: &mut Scripted) -> SimMachine {
    let profile = Profile::load("optane-2019").unwrap();
    let mut m = SimMachine::new(profile, source(steps), 4 * PAGE, None).unwrap();
    drive(&mut m, policy).unwrap();
    assert!(m.take_error().is_none());
    assert!(m.placement().is_consistent());
    m
}

fn tiers(m: &SimMachine, pages: std::ops::Range<usize>) -> Vec<TierId> {
    m.placement().tiers[pages].to_vec()
}

use Step::{Event, Touch, Wait};

#[test]
fn a_freed_object_no_longer_occupies_its_tier_and_its_address_is_reused() {
    let a = ObjectEvent::alloc(0, 3 * PAGE, 1);
    let b = ObjectEvent::alloc(3 * PAGE, 2 * PAGE, 2);
    let c = ObjectEvent::alloc(0, 2 * PAGE, 3);
    let steps = [
        Event(a),
        Touch(vec![0, 1, 2]), // fast: 0 1 2
        Event(b),
        Touch(vec![3, 4]), // fast: 0 1 2 3 (full), slow: 4
        Event(ObjectEvent::free(0, 3 * PAGE, 1)),
        // Pages 0-2 released: fast holds only 3.
        Event(c),
        Touch(vec![0, 1, 5, 6]), // fast: 3 0 1 5 (full), slow: 4 6
    ];
    let mut p = Scripted::new(InitialPlacement::FirstTouch, Plan::none());
    let m = run(&steps, &mut p);
    assert_eq!(tiers(&m, 0..7), [F, F, U, F, S, F, S]);
    assert_eq!((m.placement().used[0], m.placement().used[1]), (4, 2));
    let r = m.report();
    assert_eq!((r.objects.allocated, r.objects.freed, r.objects.bytes_placed_by_advice), (3, 1, 0));
    // Without the free, pages 0-2 would keep the fast tier full and 5 would be slow.
    let kept: Vec<Step> = steps
        .into_iter()
        .filter(|s| !matches!(s, Event(e) if e.kind == terrace_model::ObjectEventKind::Free))
        .collect();
    let m = run(&kept, &mut Scripted::new(InitialPlacement::FirstTouch, Plan::none()));
    assert_eq!(tiers(&m, 0..7), [F, F, F, F, S, S, S]);
}

#[test]
fn a_page_shared_by_small_objects_is_released_with_the_last_of_them() {
    let x = ObjectEvent::alloc(0, 100, 1);
    let y = ObjectEvent::alloc(200, 1000, 1);
    let steps = [Event(x), Event(y), Touch(vec![0]), Event(ObjectEvent::free(0, 100, 1)), Touch(vec![1])];
    let m = run(&steps, &mut Scripted::new(InitialPlacement::FirstTouch, Plan::none()));
    assert_eq!(tiers(&m, 0..2), [F, F], "y still lives on page 0");
    let mut steps = steps;
    steps[4] = Event(ObjectEvent::free(200, 1000, 1));
    let m = run(&steps, &mut Scripted::new(InitialPlacement::FirstTouch, Plan::none()));
    assert_eq!(tiers(&m, 0..2), [U, U], "the last object on page 0 is gone");
    assert_eq!(m.placement().used[0], 0);
}

#[test]
fn an_advised_site_is_placed_in_its_tier_at_allocation_and_spills_when_it_is_full() {
    // Under first touch, site 5 is advised to the slow tier: its object lands there though the
    // fast tier has room. Site 7 has no advice and follows the rule.
    let advice =
        |site, tier| Plan { site_advice: vec![SiteAdvice { site, tier: Some(tier) }], ..Plan::none() };
    let steps = [
        Event(ObjectEvent::alloc(0, PAGE, 5)),
        Touch(vec![0]), // before the advice: fast
        Wait(5_000),    // page 15: fast; the first tick (advice) comes in here
        Event(ObjectEvent::alloc(PAGE, 3 * PAGE, 5)),
        Event(ObjectEvent::alloc(4 * PAGE, PAGE, 7)),
        Touch(vec![1, 2, 3, 4]),
    ];
    let mut p = Scripted::new(InitialPlacement::FirstTouch, advice(5, S));
    let m = run(&steps, &mut p);
    assert!(p.ticks > 1);
    assert_eq!(tiers(&m, 0..5), [F, S, S, S, F]);
    assert_eq!(m.report().objects.bytes_placed_by_advice, 3 * PAGE);

    // Under "everything slow", site 6 is advised to the fast tier (4 pages): 4 of its 5 pages
    // fit there, the fifth spills by the rule, to the slow tier.
    let steps = [
        Wait(5_000),
        Event(ObjectEvent::alloc(0, 5 * PAGE, 6)),
        Touch(vec![0, 1, 2, 3, 4]),
        Event(ObjectEvent::alloc(5 * PAGE, PAGE, 7)),
        Touch(vec![5]),
    ];
    let mut p = Scripted::new(InitialPlacement::Tier(S), advice(6, F));
    let m = run(&steps, &mut p);
    assert_eq!(tiers(&m, 0..6), [F, F, F, F, S, S]);
    assert_eq!(m.placement().tiers[15], S);
    assert_eq!(m.report().objects.bytes_placed_by_advice, 4 * PAGE);
    // Withdrawn advice: the rule again.
    let mut plan = advice(6, F);
    plan.site_advice.push(SiteAdvice { site: 6, tier: None });
    let m = run(&steps, &mut Scripted::new(InitialPlacement::Tier(S), plan));
    assert_eq!(tiers(&m, 0..6), [S; 6]);
}

#[test]
fn an_object_move_moves_every_page_of_the_range_and_no_other() {
    // Bytes PAGE+10 .. 4*PAGE+10: pages 1 to 4.
    let object = ObjectEvent::alloc(PAGE + 10, 3 * PAGE, 9);
    let steps = [Event(object), Touch((0..7).collect()), Wait(200_000)];
    let plan =
        Plan { objects: vec![ObjectMove { addr: object.addr, bytes: object.bytes, to: F }], ..Plan::none() };
    let mut p = Scripted::new(InitialPlacement::Tier(S), plan);
    let m = run(&steps, &mut p);
    assert_eq!(tiers(&m, 0..7), [S, F, F, F, F, S, S]);
    let r = m.report();
    assert_eq!((r.pages_migrated, r.bytes_migrated, r.failed_moves), (4, 4 * PAGE, 0));
}

#[test]
fn a_policy_that_asks_sees_every_event_once_in_order_and_one_that_does_not_sees_none() {
    let events: Vec<ObjectEvent> = (0..40u64)
        .flat_map(|i| {
            [ObjectEvent::alloc(i % 8 * PAGE, PAGE, i % 3), ObjectEvent::free(i % 8 * PAGE, PAGE, i % 3)]
        })
        .collect();
    let mut steps = Vec::new();
    for pair in events.chunks(2) {
        steps.push(Event(pair[0]));
        steps.push(Touch(vec![pair[0].addr / PAGE]));
        steps.push(Wait(300));
        steps.push(Event(pair[1]));
    }
    let mut p = Scripted::new(InitialPlacement::FirstTouch, Plan::none());
    p.events = true;
    let m = run(&steps, &mut p);
    assert!(p.ticks > 5, "events arrive across many ticks");
    assert_eq!(p.seen, events);
    assert_eq!(m.placement().used.iter().sum::<u64>(), 1, "only page 15 is still held");
    let mut p = Scripted::new(InitialPlacement::FirstTouch, Plan::none());
    run(&steps, &mut p);
    assert!(p.seen.is_empty());
}

#[test]
fn an_object_outside_the_footprint_is_an_error() {
    let steps = [Event(ObjectEvent::alloc(15 * PAGE, 2 * PAGE, 1)), Touch(vec![0])];
    let profile = Profile::load("optane-2019").unwrap();
    let mut m = SimMachine::new(profile, source(&steps), 4 * PAGE, None).unwrap();
    drive(&mut m, &mut Scripted::new(InitialPlacement::FirstTouch, Plan::none())).unwrap();
    let e = m.take_error().expect("refused").to_string();
    assert!(e.contains("outside the workload's footprint"), "{e}");
}

/// The built-in `objects` workload through the machine: the policy is handed exactly the events
/// the generator made, in order, and every object freed gives its pages back (only the 12
/// long-lived large objects, 75% of the footprint, are held at the end).
#[test]
fn the_objects_workload_reaches_the_policy_event_for_event() {
    let scale = 1.0 / 64.0;
    let mut g = terrace_workloads::build("objects", 3, scale).unwrap();
    let (mut buf, mut made) = (Vec::new(), Vec::new());
    while {
        buf.clear();
        g.fill(&mut buf, 1 << 16) > 0
    } {}
    g.take_object_events(&mut made);
    let made: Vec<ObjectEvent> = made.into_iter().map(|e| e.event).collect();
    assert!(made.len() > 500, "{} events", made.len());

    let w = terrace_workloads::build("objects", 3, scale).unwrap();
    let footprint = w.info().footprint_bytes;
    let profile = Profile::load("optane-2019").unwrap();
    let mut m = SimMachine::new(profile, w, footprint / 4, None).unwrap();
    let mut p = Scripted::new(InitialPlacement::FirstTouch, Plan::none());
    p.events = true;
    drive(&mut m, &mut p).unwrap();
    assert!(m.take_error().is_none());
    assert!(p.ticks > 10);
    assert_eq!(p.seen, made);
    let r = m.report();
    let frees = made.iter().filter(|e| e.kind == terrace_model::ObjectEventKind::Free).count() as u64;
    assert_eq!((r.objects.allocated + r.objects.freed, r.objects.freed), (made.len() as u64, frees));
    assert!(m.placement().is_consistent());
    assert_eq!(m.placement().used.iter().sum::<u64>() * PAGE, footprint / 4 * 3);
}

/// A recorded trace of the `objects` workload (format version 3) replays on the machine exactly
/// as the generator runs: the same report, frees and object counts included, under a policy that
/// moves pages.
#[test]
fn a_recorded_objects_trace_replays_as_the_generator_runs() {
    use terrace_sim::{simulate, Capacity, SimOptions};
    let scale = 1.0 / 64.0;
    let mut g = terrace_workloads::build("objects", 5, scale).unwrap();
    let bytes = terrace_workloads::trace::record(g.as_mut(), Vec::new()).unwrap();
    let profile = Profile::load("optane-2019").unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(25.0), ..Default::default() };
    let run = |source: Box<dyn terrace_workloads::AccessSource>| {
        let mut p = terrace_policy::build("ambix").unwrap();
        simulate(source, p.as_mut(), &profile, &opts).unwrap()
    };
    let generated = run(terrace_workloads::build("objects", 5, scale).unwrap());
    let reader = terrace_workloads::trace::TraceReader::from_reader(std::io::Cursor::new(bytes)).unwrap();
    let replayed = run(Box::new(reader));
    assert!(generated.objects.freed > 0 && generated.pages_migrated > 0);
    assert_eq!(replayed, generated);
}

/// Memory Mode on a workload that frees objects: a freed page's dirty line, evicted later, goes
/// back to the slow tier (it used to index the tiers with the freed page's missing tier).
#[test]
fn memory_mode_writes_back_a_freed_pages_dirty_line_to_the_slow_tier() {
    let profile = terrace_sim::Profile::load("optane-2019").unwrap();
    for percent in [10.0, 25.0, 50.0, 75.0] {
        let source = terrace_workloads::build("objects", 1, 1.0 / 64.0).unwrap();
        let mut policy = terrace_policy::build("memory-mode").unwrap();
        let opts = terrace_sim::SimOptions {
            fast_capacity: terrace_sim::Capacity::Percent(percent),
            ..Default::default()
        };
        let r = terrace_sim::simulate(source, policy.as_mut(), &profile, &opts).unwrap();
        assert!(r.objects.freed > 0, "the workload frees objects");
        assert!(r.tiers[1].write_bytes > 0, "dirty lines were written back");
    }
}

/// `objects-pair-table3`'s programs (docs/workloads.md) make in DRAM, on the default profile, the
/// memory traffic object tiering's Table 3 measured on 16 threads: QMCPACK's shared input's
/// 24.53 GB/s for the low-priority program, the shared inputs' mean 39.68 GB/s for the other.
/// The instruction counts that give these rates are the pair's; a change to the slice's time
/// (docs/model.md §3) or to the generators that moves a rate by more than 3% fails here.
#[test]
fn the_table3_pair_makes_table3s_memory_traffic() {
    use terrace_sim::{simulate, Capacity, SimOptions};
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE).unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(100.0), ..Default::default() };
    for (name, gb_s) in terrace_workloads::OBJECTS_PAIR_TABLE3_PROGRAMS.iter().zip([24.53, 39.68]) {
        let source = terrace_workloads::build(name, 1, 1.0 / 16.0).unwrap();
        let mut all_fast = terrace_policy::build("all-fast").unwrap();
        let r = simulate(source, all_fast.as_mut(), &profile, &opts).unwrap();
        let rate = r.accesses as f64 * 64.0 / r.runtime_ns;
        assert!((rate / gb_s - 1.0).abs() < 0.03, "{name}: {rate:.2} GB/s against Table 3's {gb_s}");
    }
}

/// Fig. 4's applications (registry.rs): each program makes its application's bandwidth in DRAM,
/// to 3%, or, where Table 3's is beyond the model's DRAM for 16 threads, runs at the least compute
/// an access can carry and still below Table 3's rate.
#[test]
fn the_fig4_programs_make_table3s_memory_traffic() {
    use terrace_sim::{simulate, Capacity, SimOptions};
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE).unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(100.0), ..Default::default() };
    for app in terrace_workloads::OBJECTS_TABLE3_SMALL_PROGRAMS {
        let source = terrace_workloads::build(app.spec, 1, 1.0 / 16.0).unwrap();
        let mut all_fast = terrace_policy::build("all-fast").unwrap();
        let r = simulate(source, all_fast.as_mut(), &profile, &opts).unwrap();
        let rate = r.accesses as f64 * 64.0 / r.runtime_ns;
        let (name, want) = (app.name, app.table3_gb_s);
        if app.spec.contains("instructions=1,") {
            assert!(rate < want, "{name}: {rate:.2} GB/s at the least compute, not below Table 3's {want}");
        } else {
            assert!((rate / want - 1.0).abs() < 0.03, "{name}: {rate:.2} GB/s against Table 3's {want}");
        }
    }
}
