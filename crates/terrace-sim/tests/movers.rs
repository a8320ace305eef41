//! The movers of docs/model.md §4 ("Movers"), checked by hand: a page changes tier when its copy
//! completes, a synchronous mover holds its policy up by exactly the model's cost, an access
//! during a copy is charged to the old tier, a write during one waits or has the page copied
//! again (one base page of it, for a huge page split to move), a plan larger than an
//! asynchronous mover's queue lands over several rounds, and over
//! whole runs of random plans the program never waits longer than it runs and nothing copied
//! after the end is counted as moved.

use proptest::prelude::*;
use terrace_model::{
    drive, Access, Applied, InitialPlacement, Machine, MachineInfo, Move, MoveFailure, MoveOptions, Mover,
    Observations, PageSize, Plan, Policy, Progress, Requirements, TierId,
};
use terrace_sim::{Profile, SimMachine};
use terrace_workloads::{MemorySource, WorkloadInfo};

const PAGE: u64 = 4096;
const PAGES: u64 = 64;
const F: TierId = TierId::FAST;
const S: TierId = TierId::SLOW;

/// optane-2019's migration row (docs/model.md §4; profiles/optane-2019.toml): a move_pages call,
/// each page's fixed cost, one TLB shootdown, ns.
const CALL_NS: f64 = 58_700.0;
const PAGE_NS: f64 = 2_600.0;
const SHOOTDOWN_NS: f64 = 1_000.0;
/// A 4 KiB promotion copies at min(3.511 GB/s, Optane's one-thread read 2.88, DRAM's one-thread
/// write 4.31) = 2.88 GB/s.
const COPY_NS: f64 = 4096.0 / 2.88;

/// The model's mover time for `n` 4 KiB promotions in one move_pages call.
fn promotions_ns(n: u64) -> f64 {
    CALL_NS + n as f64 * (PAGE_NS + COPY_NS)
}

fn profile() -> Profile {
    Profile::load("optane-2019").unwrap()
}

/// A program of `threads` threads: the first touches every page, then the threads take turns
/// reading or writing page `page`'s first line, `n` times, each after 23 instructions (10 ns of
/// compute at 2.3 GHz), so that slices take time even where accesses merge.
fn program(threads: u32, page: u64, n: u64, write: bool) -> Box<MemorySource> {
    let mut a: Vec<Access> = (0..PAGES).map(|p| Access::write(p * PAGE, 64, 0, 0)).collect();
    a.extend((0..n).map(|i| {
        let t = (i % threads as u64) as u8;
        if write {
            Access::write(page * PAGE, 64, t, 23)
        } else {
            Access::read(page * PAGE, 64, t, 23)
        }
    }));
    source("movers", PAGES * PAGE, threads, a)
}

/// A program of `threads` threads making accesses `a` over `footprint` bytes.
fn source(name: &str, footprint: u64, threads: u32, a: Vec<Access>) -> Box<MemorySource> {
    let info = WorkloadInfo {
        name: name.into(),
        description: String::new(),
        footprint_bytes: footprint,
        threads,
        scale: 1.0,
        suggested_fast_bytes: footprint,
        accesses: a.len() as u64,
        recording: None,
    };
    Box::new(MemorySource::new(info, a))
}

const HUGE: u64 = 2 << 20;

/// A one-thread program on `huge` 2 MiB pages, all first touched in the slow tier, then accesses
/// `a`; its machine has room for all of them in either tier, a copy engine as its mover, and has
/// run its first slice.
fn started_huge(name: &str, huge: u64, a: impl IntoIterator<Item = Access>) -> SimMachine {
    let mut all: Vec<Access> = (0..huge * HUGE / PAGE).map(|p| Access::write(p * PAGE, 64, 0, 0)).collect();
    all.extend(a);
    let mut m = SimMachine::new(profile(), source(name, huge * HUGE, 1, all), huge * HUGE, Some(huge * HUGE))
        .unwrap();
    let req =
        Requirements { page_size: PageSize::Huge2M, ..requirements(Mover::CopyEngine { queue_pages: 8 }) };
    m.prepare(&req).unwrap();
    assert!(matches!(m.advance(1), Progress::Running { .. }));
    m
}

fn requirements(mover: Mover) -> Requirements {
    Requirements { initial: InitialPlacement::Tier(S), mover, ..Requirements::default() }
}

/// A machine with room for every page in either tier, prepared for `req`, after its first slice.
fn started(source: Box<MemorySource>, req: &Requirements) -> SimMachine {
    let mut m = SimMachine::new(profile(), source, PAGES * PAGE, Some(PAGES * PAGE)).unwrap();
    m.prepare(req).unwrap();
    assert!(matches!(m.advance(1), Progress::Running { .. }));
    m
}

fn now(m: &SimMachine) -> f64 {
    m.report().runtime_ns
}

/// Runs one more slice; returns its start and end.
fn one_slice(m: &mut SimMachine) -> (f64, f64) {
    let start = now(m);
    assert!(matches!(m.advance(start as u64 + 1), Progress::Running { .. }));
    (start, now(m))
}

fn up(pages: impl IntoIterator<Item = u32>) -> Plan {
    Plan { moves: pages.into_iter().map(|page| Move { page, to: F }).collect(), ..Plan::none() }
}

fn failed(a: &Applied, why: MoveFailure) -> u64 {
    a.failed.iter().filter(|(w, _)| *w == why).map(|(_, n)| n).sum()
}

#[test]
fn a_synchronous_move_of_n_pages_stalls_the_policy_by_exactly_the_models_cost() {
    // Ten promotions in one call: 58.70 us + 10 x (2.600 us + 4096 B / 2.88 GB/s) = 98.92 us.
    let want = promotions_ns(10);
    assert!((want - 98_922.2).abs() < 0.1, "{want}");
    let mut m = started(program(1, 63, 400_000, false), &requirements(Mover::PolicyThread));
    let t0 = now(&m);
    let a = m.apply(&up(0..10));
    assert_eq!((a.pages_moved, a.pages_in_flight), (10, 10));
    assert!((a.time_ns as f64 - want).abs() <= 1.0, "{} ns", a.time_ns);
    // The policy asks to go on a nanosecond later; its thread is copying until t0 + 98.92 us, so
    // the machine runs the program on until then, and not a slice longer.
    assert!(matches!(m.advance(t0 as u64 + 1), Progress::Running { .. }));
    let t1 = now(&m);
    let (_, t2) = one_slice(&mut m);
    let slice = t2 - t1;
    assert!(t1 >= t0 + want && t1 < t0 + want + 1.5 * slice, "resumed {} ns after the apply", t1 - t0);
    let o = m.observe();
    assert!(o.in_flight.is_empty() && o.placement[..10].iter().all(|&t| t == F));
    let r = m.report();
    assert!((r.migration_ns - want).abs() < 1e-6 * want, "the thread copied {} ns", r.migration_ns);
    assert_eq!((r.pages_migrated, r.pages_not_done), (10, 0));
    // The program lost only the ten shootdowns: the copies ran beside it.
    assert!((r.move_wait_ns - 10.0 * SHOOTDOWN_NS).abs() < 1e-6, "{}", r.move_wait_ns);
}

/// Asks for ten promotions at its first tick, then records when it is asked again.
struct Recorder {
    ticks: Vec<u64>,
}
impl Policy for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements { tick_ns: Some(20_000), ..requirements(Mover::PolicyThread) }
    }
    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        self.ticks.push(obs.now_ns);
        if self.ticks.len() == 1 {
            up(0..10)
        } else {
            Plan::none()
        }
    }
}

#[test]
fn a_policy_thread_s_next_tick_waits_for_its_copies() {
    // Ticks every 20 us; the first tick's ten promotions take 98.92 us, so the second tick comes
    // after them instead of 20 us later, and the ones after it 20 us apart again.
    let mut m =
        SimMachine::new(profile(), program(1, 63, 400_000, false), PAGES * PAGE, Some(PAGES * PAGE)).unwrap();
    let mut p = Recorder { ticks: Vec::new() };
    drive(&mut m, &mut p).unwrap();
    let t = &p.ticks;
    let gap = (t[1] - t[0]) as f64;
    assert!(gap >= promotions_ns(10) - 1.0 && gap < promotions_ns(10) + 20_000.0, "{t:?}");
    assert!(t[3] - t[2] >= 20_000 && t[3] - t[2] < 40_000, "{t:?}");
}

#[test]
fn an_access_to_a_page_being_copied_is_charged_to_its_old_tier() {
    // One promotion by a copy engine: 58.70 + 2.600 + 1.422 us = 62.72 us. The program reads the
    // page all along: every slice that starts before the copy completes reads it in the slow
    // tier, every slice after in the fast tier.
    let done_after = promotions_ns(1);
    let mut m = started(program(1, 0, 400_000, false), &requirements(Mover::CopyEngine { queue_pages: 8 }));
    let t0 = now(&m);
    assert_eq!(m.apply(&up([0])).pages_in_flight, 1);
    let (mut before, mut after) = (0, 0);
    while now(&m) < t0 + 3.0 * done_after {
        let r0 = m.report();
        let (start, _) = one_slice(&mut m);
        let r1 = m.report();
        let fast = r1.tiers[0].reads - r0.tiers[0].reads;
        let slow = r1.tiers[1].reads - r0.tiers[1].reads;
        if start < t0 + done_after {
            assert_eq!((fast, slow), (0, 1024), "a slice starting {} ns in", start - t0);
            before += 1;
        } else {
            assert_eq!((fast, slow), (1024, 0), "a slice starting {} ns in", start - t0);
            after += 1;
        }
    }
    assert!(before >= 2 && after >= 2, "{before} slices during the copy, {after} after");
    assert_eq!(m.report().pages_migrated, 1);
}

#[test]
fn a_write_to_a_write_protected_copy_waits_for_it() {
    // One thread writes the page being promoted: it waits, once, until the copy completes
    // (62.72 us after the apply), and the page has landed when it goes on.
    let copy = promotions_ns(1);
    let mut m = started(program(1, 0, 400_000, true), &requirements(Mover::CopyEngine { queue_pages: 8 }));
    let t0 = now(&m);
    let plan = Plan { options: MoveOptions { protected_copies: true, ..MoveOptions::default() }, ..up([0]) };
    m.apply(&plan);
    let (start, end) = one_slice(&mut m);
    assert_eq!(start, t0);
    assert!(end >= t0 + copy, "the writer went on before the copy completed");
    let r = m.report();
    assert!((r.move_wait_ns - (SHOOTDOWN_NS + copy)).abs() < 1e-6, "{} ns", r.move_wait_ns);
    one_slice(&mut m);
    let r = m.report();
    assert_eq!((r.pages_migrated, m.placement().tiers[0]), (1, F));
    assert!((r.move_wait_ns - (SHOOTDOWN_NS + copy)).abs() < 1e-6, "no second wait: {} ns", r.move_wait_ns);
    assert!((r.migration_ns - copy).abs() < 1e-6, "copied once: {} ns", r.migration_ns);
}

#[test]
fn a_write_racing_an_unprotected_copy_has_the_page_copied_again() {
    // The same write without protection: the mover copies the page a second time, so it lands
    // 2 x 62.72 us after the apply, the mover has spent both copies, and the writes during the
    // second copy wait for it (from the second slice's start to its end).
    let copy = promotions_ns(1);
    let mut m = started(program(1, 0, 400_000, true), &requirements(Mover::CopyEngine { queue_pages: 8 }));
    let t0 = now(&m);
    m.apply(&up([0]));
    let (first, second) = one_slice(&mut m);
    assert_eq!(first, t0);
    assert!(second < t0 + copy, "the first slice is short: {} ns", second - t0);
    assert_eq!(m.report().move_wait_ns, SHOOTDOWN_NS, "the racing write does not wait");
    let (start, _) = one_slice(&mut m);
    assert_eq!(start, second);
    let r = m.report();
    assert!((r.move_wait_ns - (SHOOTDOWN_NS + t0 + 2.0 * copy - second)).abs() < 1e-6, "{}", r.move_wait_ns);
    one_slice(&mut m);
    let r = m.report();
    assert_eq!((r.pages_migrated, m.placement().tiers[0]), (1, F));
    assert!((r.migration_ns - 2.0 * copy).abs() < 1e-6, "copied twice: {} ns", r.migration_ns);
}

#[test]
fn a_plan_larger_than_the_queue_lands_over_several_rounds() {
    // A copy engine of 4 pages and a plan of 10: 4 taken on, 6 refused as QueueFull; asked again
    // at once, the 4 in flight are Busy and the rest still do not fit. Round by round, once the
    // queue has drained, 4, then the last 2: three calls, 2 x (58.70 + 4 x 4.022) + (58.70 + 2 x
    // 4.022) us of copying.
    let mut m = started(program(1, 63, 400_000, false), &requirements(Mover::CopyEngine { queue_pages: 4 }));
    let slow_pages = |m: &mut SimMachine| -> Vec<u32> {
        let o = m.observe();
        (0..10).filter(|&p| o.placement[p as usize] == S).collect()
    };
    let settle = |m: &mut SimMachine| {
        while !m.observe().in_flight.is_empty() {
            one_slice(m);
        }
    };
    let a = m.apply(&up(0..10));
    assert_eq!((a.pages_moved, a.pages_in_flight, failed(&a, MoveFailure::QueueFull)), (4, 4, 6));
    let again = m.apply(&up(0..10));
    assert_eq!(
        (again.pages_moved, failed(&again, MoveFailure::Busy), failed(&again, MoveFailure::QueueFull)),
        (0, 4, 6)
    );
    let mut rounds = vec![a.pages_moved];
    loop {
        settle(&mut m);
        let left = slow_pages(&mut m);
        if left.is_empty() {
            break;
        }
        let a = m.apply(&up(left.iter().copied()));
        assert_eq!(a.pages_moved + failed(&a, MoveFailure::QueueFull), left.len() as u64);
        rounds.push(a.pages_moved);
    }
    assert_eq!(rounds, [4, 4, 2]);
    let r = m.report();
    assert_eq!((r.pages_migrated, r.pages_not_done, r.failed_moves), (10, 0, 6 + 10 + 2));
    let want = 2.0 * promotions_ns(4) + promotions_ns(2);
    assert!((r.migration_ns - want).abs() < 1e-6 * want, "{} ns against {want}", r.migration_ns);
}

#[test]
fn the_faulting_threads_pay_their_copies_and_kswapd_its_own() {
    // Four threads. Two promotions by the faulting threads (no move_pages call: 2 x 4.022 us,
    // which the program loses over its 4 threads) and two demotions by a kernel thread beside the
    // program (their call and copies cost the program nothing but their shootdowns).
    // Even pages start in the fast tier, odd ones in the slow tier; both tiers have room.
    let req = Requirements {
        demotion_mover: Some(Mover::KernelThread { queue_pages: 16 }),
        initial: InitialPlacement::Interleave { weights: vec![1, 1] },
        ..requirements(Mover::FaultingThread)
    };
    let mut m = started(program(4, 63, 400_000, false), &req);
    assert_eq!(m.placement().tiers[..2], [F, S]);
    let plan = Plan {
        moves: vec![
            Move { page: 0, to: S },
            Move { page: 2, to: S },
            Move { page: 1, to: F },
            Move { page: 3, to: F },
        ],
        ..Plan::none()
    };
    let a = m.apply(&plan);
    let promote = 2.0 * (PAGE_NS + COPY_NS);
    let program_wait = 4.0 * SHOOTDOWN_NS + promote / 4.0;
    assert_eq!(a.pages_moved, 4);
    assert_eq!(a.program_stall_ns, program_wait as u64);
    // Each copy is paid as it starts: after a slice, the first of the faulting threads' copies
    // and kswapd's first, not yet the copies queued behind them.
    one_slice(&mut m);
    let first = 2.0 * SHOOTDOWN_NS + (PAGE_NS + COPY_NS) / 4.0;
    assert!((m.report().move_wait_ns - first).abs() < 1e-6, "{}", m.report().move_wait_ns);
    while !m.observe().in_flight.is_empty() {
        one_slice(&mut m);
    }
    let r = m.report();
    assert_eq!(r.pages_migrated, 4);
    assert!((r.move_wait_ns - program_wait).abs() < 1e-6, "{}", r.move_wait_ns);
    assert!(r.migration_ns > promote, "kswapd's copying counts too: {}", r.migration_ns);
}

#[test]
fn copies_cut_off_by_the_program_s_end_are_not_done_and_not_moved() {
    // A long plan applied just before the end: what had not landed when the program ended is
    // reported not done, and the mover's time counts only up to the end.
    let mut m = started(program(1, 63, 3_000, false), &requirements(Mover::PolicyThread));
    let a = m.apply(&up(0..60));
    assert_eq!(a.pages_moved, 60);
    assert!(matches!(m.advance(u64::MAX), Progress::Finished { .. }));
    let r = m.report();
    assert!(r.pages_not_done > 0, "the run outlived the copies: {r:?}");
    assert_eq!(r.pages_migrated + r.pages_not_done, 60);
    assert_eq!(m.placement().tiers.iter().filter(|&&t| t == F).count() as u64, r.pages_migrated);
    assert!(r.migration_ns <= r.runtime_ns, "{} ns of copying in a {} ns run", r.migration_ns, r.runtime_ns);
    // Each page is unmapped, and its shootdown paid, as its copy starts: the pages whose copies
    // never started cost the program nothing, the one under way at the end its shootdown.
    let paid = r.tlb_shootdowns;
    assert!(paid == r.pages_migrated || paid == r.pages_migrated + 1, "{r:?}");
    assert!((r.move_wait_ns - paid as f64 * SHOOTDOWN_NS).abs() < 1e-6, "{}", r.move_wait_ns);
}

/// Applies the next of its plans at each tick, and keeps what the machine took on.
struct Scripted {
    mover: Mover,
    demotion_mover: Option<Mover>,
    plans: Vec<Plan>,
    next: usize,
    taken: u64,
}
impl Policy for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            tick_ns: Some(7_000),
            mover: self.mover,
            demotion_mover: self.demotion_mover,
            initial: InitialPlacement::FirstTouch,
            ..Requirements::default()
        }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        self.next += 1;
        self.plans.get(self.next - 1).cloned().unwrap_or_default()
    }
    fn applied(&mut self, a: &Applied) {
        self.taken += a.pages_moved;
    }
}

fn arb_mover() -> impl Strategy<Value = Mover> {
    prop_oneof![
        Just(Mover::PolicyThread),
        Just(Mover::FaultingThread),
        (1u64..20).prop_map(|queue_pages| Mover::KernelThread { queue_pages }),
        (1u64..20).prop_map(|queue_pages| Mover::CopyEngine { queue_pages }),
    ]
}

fn arb_plan() -> impl Strategy<Value = Plan> {
    let mv = (0u32..PAGES as u32, 0u8..2).prop_map(|(page, to)| Move { page, to: TierId(to) });
    let ex = (0u32..PAGES as u32, 0u32..PAGES as u32).prop_map(|(a, b)| terrace_model::Exchange { a, b });
    (
        prop::collection::vec(mv, 0..24),
        prop::collection::vec(ex, 0..4),
        1u32..64,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(moves, exchanges, batch_pages, protected_copies, shadow)| Plan {
            moves,
            exchanges,
            options: MoveOptions { batch_pages, protected_copies, shadow, ..MoveOptions::default() },
            reason: "proptest".into(),
            ..Plan::none()
        })
}

/// Random reads and writes of every page by 4 threads.
fn mixed(n: u64, seed: u64) -> Box<MemorySource> {
    let mut x = seed | 1;
    let a: Vec<Access> = (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (page, t) = (x % PAGES, (i % 4) as u8);
            if x >> 60 < 4 {
                Access::write(page * PAGE + (x >> 20) % 64 * 64, 64, t, 10)
            } else {
                Access::read(page * PAGE + (x >> 20) % 64 * 64, 64, t, 10)
            }
        })
        .collect();
    assert_eq!(a.len() as u64, n);
    source("mixed", PAGES * PAGE, 4, a)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever the plans and the movers: the program never waits longer than it runs, each
    /// mover copies no longer than the run, every page taken on either landed during the run or
    /// is reported not done, and occupancy never exceeds capacity.
    #[test]
    fn no_mover_outlives_the_run_unreported(
        plans in prop::collection::vec(arb_plan(), 1..30),
        mover in arb_mover(),
        demotion_mover in prop::option::of(arb_mover()),
        fast in 4u64..PAGES,
        accesses in 2_000u64..60_000,
        seed in any::<u64>(),
    ) {
        let mut m = SimMachine::new(profile(), mixed(accesses, seed), fast * PAGE, Some(PAGES * PAGE)).unwrap();
        let mut p = Scripted { mover, demotion_mover, plans, next: 0, taken: 0 };
        drive(&mut m, &mut p).unwrap();
        let r = m.report();
        prop_assert!(r.move_wait_ns <= r.stall_ns + 1e-6 && r.stall_ns <= r.runtime_ns, "{r:?}");
        prop_assert_eq!(r.mover_ns.len(), 1 + demotion_mover.is_some() as usize);
        prop_assert!((r.mover_ns.iter().sum::<f64>() - r.migration_ns).abs() <= 1e-6 * r.migration_ns.max(1.0));
        for &ns in &r.mover_ns {
            prop_assert!(ns <= r.runtime_ns + 1e-6, "a mover copied {} ns in a {} ns run", ns, r.runtime_ns);
        }
        prop_assert_eq!(r.pages_migrated + r.pages_not_done, p.taken);
        // A switch back to a shadow copies nothing: the bytes are those of the other pages.
        prop_assert!(r.pages_switched <= r.pages_migrated);
        prop_assert_eq!(r.bytes_migrated, (r.pages_migrated - r.pages_switched) * PAGE);
        let pl = m.placement();
        let placed: Vec<u64> = (0..2).map(|t| pl.tiers.iter().filter(|x| x.index() == t && x.is_placed()).count() as u64).collect();
        prop_assert!(pl.is_consistent(), "placed {:?} used {:?} reserved {:?} capacity {:?}", placed, pl.used, pl.reserved, pl.capacity);
        for t in &r.tiers {
            prop_assert!(t.capacity_pages.is_none_or(|c| t.peak_pages <= c), "{:?}", r.tiers);
        }
    }
}

#[test]
fn a_write_racing_a_split_huge_page_redoes_one_base_page_and_nobody_waits() {
    // A 2 MiB page promoted with `split_huge` is 512 base pages in one call: 58.70 us + 512 x
    // (2.600 us + 4096 B / 2.88 GB/s), 2.12 ms. One thread writes the page all along: the write
    // races only the base page under way, so the mover copies that one again (1/512 of the
    // whole), the page lands one base page's copy later, and the program loses only the 512
    // shootdowns, where a write racing a huge page moved whole would wait for its second copy.
    let split = promotions_ns(512);
    let mut m = started_huge("split", 2, (0..4_000_000).map(|_| Access::write(0, 64, 0, 23)));
    let t0 = now(&m);
    let plan = Plan { options: MoveOptions { split_huge: true, ..MoveOptions::default() }, ..up([0]) };
    let applied = m.apply(&plan);
    assert!((applied.time_ns as f64 - split).abs() <= 1.0, "{} ns", applied.time_ns);
    assert_eq!(applied.tlb_shootdowns, 512);
    while m.report().pages_migrated == 0 {
        one_slice(&mut m);
    }
    let landed = now(&m);
    let r = m.report();
    let once = split * (1.0 + 1.0 / 512.0);
    assert!((r.migration_ns - once).abs() < 1e-6 * once, "copied {} ns", r.migration_ns);
    assert!(landed >= t0 + once, "landed {} ns after the apply", landed - t0);
    assert!((r.move_wait_ns - 512.0 * SHOOTDOWN_NS).abs() < 1e-6, "the program waited {} ns", r.move_wait_ns);
    assert_eq!(m.placement().tiers[0], F);
}

#[test]
fn accesses_to_a_huge_page_split_to_move_are_counted_from_its_landing_on() {
    // Three 2 MiB pages in the slow tier; the program reads pages 0 and 1 in turn. Page 0 is
    // promoted split, page 1 whole: from the slice page 0 lands in, its accesses fall on 512
    // base pages (docs/model.md §10), and those are what `split_page_accesses` counts; page 1,
    // moved whole, stays a huge page.
    let reads: Vec<Access> = (0..400_000u64).map(|i| Access::read((i % 2) * HUGE, 64, 0, 23)).collect();
    // Whether each access of the run (the first touches first) is a read of page 0.
    let page0: Vec<bool> =
        (0..3 * HUGE / PAGE).map(|_| false).chain(reads.iter().map(|x| x.addr < HUGE)).collect();
    let mut m = started_huge("split-accesses", 3, reads);
    let split = Plan { options: MoveOptions { split_huge: true, ..MoveOptions::default() }, ..up([0]) };
    assert_eq!(m.apply(&split).tlb_shootdowns, 512);
    // Page 0 lands within the last stretch advanced here, between `before` and `after` accesses.
    let (mut before, mut after) = (0, m.report().accesses);
    while m.report().pages_migrated == 0 {
        assert_eq!(m.report().split_page_accesses, 0, "nothing is split before the copy lands");
        before = after;
        one_slice(&mut m);
        after = m.report().accesses;
    }
    let by_then = m.report().split_page_accesses;
    assert_eq!(m.apply(&up([1])).tlb_shootdowns, 1);
    while let Progress::Running { .. } = m.advance(now(&m) as u64 + 1) {}
    let r = m.report();
    assert_eq!(r.pages_migrated, 2);
    let reads_of_0_from = |k: u64| page0[k as usize..].iter().filter(|&&x| x).count() as u64;
    let (most, least) = (reads_of_0_from(before), reads_of_0_from(after));
    assert!(least > 100_000, "page 0 landed early: {least} of its reads after it");
    assert!(
        (least..=most).contains(&r.split_page_accesses),
        "{} split-page accesses; page 0's reads after its landing: {least} to {most}",
        r.split_page_accesses
    );
    // Every read of page 0 after the stretch it landed in counts, and none of page 1's.
    assert_eq!(r.split_page_accesses - by_then, least);
}
