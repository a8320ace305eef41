//! What the simulated machine accounts for, checked through its public interface: the accesses
//! replayed, failed moves, hit rates and slow-tier writes, what an observation reports per tier,
//! the stalls and tracker time that tracking and migration cost the program, compute time, and
//! a page size at which the footprint does not fit; and the placement record of `sim --plot`.

use terrace_model::{
    Access, Machine, Move, MoveOptions, Observations, PageSize, Plan, Policy, Requirements, TierId,
    TrackerKind, TrackerRequest, PAGE_DIRTY, PAGE_REFERENCED,
};
use terrace_model::{MachineInfo, MemoryMode};
use terrace_sim::{simulate, Capacity, Profile, SimMachine, SimOptions};
use terrace_workloads::{MemorySource, WorkloadInfo};

const PAGE: u64 = 4096;

/// A stream held in memory.
fn source(footprint_bytes: u64, threads: u32, accesses: Vec<Access>) -> Box<MemorySource> {
    let info = WorkloadInfo {
        name: "test".into(),
        description: String::new(),
        footprint_bytes,
        threads,
        scale: 1.0,
        suggested_fast_bytes: footprint_bytes,
        accesses: accesses.len() as u64,
        recording: None,
    };
    Box::new(MemorySource::new(info, accesses))
}

/// Never moves anything.
struct Idle;
impl Policy for Idle {
    fn name(&self) -> &str {
        "idle"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements::default()
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

fn profile() -> Profile {
    Profile::load("optane-2019").unwrap()
}

/// `n` reads cycling over `pages` pages, one thread, no compute.
fn cycling_reads(n: u64, pages: u64) -> Vec<Access> {
    (0..n).map(|i| Access::read((i % pages) * PAGE, 64, 0, 0)).collect()
}

/// A prepared machine over `accesses` with `fast` and `slow` pages of room.
fn machine(accesses: Vec<Access>, pages: u64, fast: u64, slow: u64, req: &Requirements) -> SimMachine {
    let mut m = SimMachine::new(profile(), source(pages * PAGE, 1, accesses), fast * PAGE, Some(slow * PAGE))
        .unwrap();
    m.prepare(req).unwrap();
    m
}

#[test]
fn the_report_counts_every_access_replayed() {
    // Several slices and more than one fetch from the source.
    for n in [1u64, 1000, 1024, 5000, 70_000] {
        let r = simulate(
            source(16 * PAGE, 1, cycling_reads(n, 16)),
            &mut Idle,
            &profile(),
            &SimOptions { fast_capacity: Capacity::Bytes(16 * PAGE), ..Default::default() },
        )
        .unwrap();
        assert_eq!(r.accesses, n);
    }
}

#[test]
fn moves_that_fail_are_counted_in_the_report() {
    let mut m = machine(cycling_reads(100, 4), 4, 4, 4, &Requirements::default());
    m.advance(u64::MAX);
    let plan = Plan {
        moves: vec![Move { page: 0, to: TierId(9) }, Move { page: 99, to: TierId::SLOW }],
        ..Plan::none()
    };
    assert_eq!(m.apply(&plan).failed_total(), 2);
    assert_eq!(m.report().failed_moves, 2);
}

#[test]
fn hit_rates_are_the_fast_tier_s_share_and_slow_writes_are_counted() {
    // Four pages, two fit in the fast tier: pages 0-1 fast, 2-3 slow (first touch). Page 0 is
    // read 3 times per round, page 2 once; page 1 is written twice, page 3 once; first touch
    // is in that order (0, 1, 2, 3).
    let mut a = Vec::new();
    for _ in 0..200 {
        a.extend([
            Access::read(0, 64, 0, 0),
            Access::read(0, 64, 0, 0),
            Access::read(0, 64, 0, 0),
            Access::write(PAGE, 64, 0, 0),
            Access::write(PAGE, 64, 0, 0),
            Access::read(2 * PAGE, 64, 0, 0),
            Access::write(3 * PAGE, 64, 0, 0),
        ]);
    }
    let mut m = machine(a, 4, 2, 4, &Requirements::default());
    m.advance(u64::MAX);
    let r = m.report();
    let (f, s) = (&r.tiers[0], &r.tiers[1]);
    assert!(f.reads > 0 && s.reads > 0 && f.writes > 0 && s.writes > 0, "{:?}", r.tiers);
    let read_rate = f.reads as f64 / (f.reads + s.reads) as f64;
    let write_rate = f.writes as f64 / (f.writes + s.writes) as f64;
    assert!((r.fast_read_hit_rate() - read_rate).abs() < 1e-12, "{}", r.fast_read_hit_rate());
    assert!((r.fast_write_hit_rate() - write_rate).abs() < 1e-12, "{}", r.fast_write_hit_rate());
    assert!((r.fast_read_hit_rate() - 0.75).abs() < 0.01);
    assert!((r.fast_write_hit_rate() - 2.0 / 3.0).abs() < 0.01);
    assert!(s.write_bytes > 0);
    assert_eq!(r.slow_bytes_written(), s.write_bytes + s.copy_write_bytes);
}

#[test]
fn a_run_without_accesses_has_every_access_hit_the_fast_tier() {
    let r = simulate(
        source(4 * PAGE, 1, vec![]),
        &mut Idle,
        &profile(),
        &SimOptions { fast_capacity: Capacity::Bytes(4 * PAGE), ..Default::default() },
    )
    .unwrap();
    assert_eq!(r.fast_read_hit_rate(), 1.0);
    assert_eq!(r.fast_write_hit_rate(), 1.0);
}

#[test]
fn an_observation_reports_each_tier_s_use_capacity_and_traffic() {
    // Six pages touched, four fit in the fast tier.
    let mut m = machine(cycling_reads(6000, 6), 6, 4, 16, &Requirements::default());
    m.advance(u64::MAX);
    let obs = m.observe();
    let t = obs.tiers;
    assert_eq!((t[0].used_pages, t[0].capacity_pages), (4, Some(4)));
    assert_eq!((t[1].used_pages, t[1].capacity_pages), (2, Some(16)));
    assert!(t[0].read_bytes.unwrap() > 0 && t[1].read_bytes.unwrap() > 0, "{t:?}");
    assert_eq!(t[0].write_bytes, Some(0));
}

#[test]
fn a_footprint_that_does_not_fit_at_the_policy_s_page_size_is_refused_unless_fast_is_unbounded() {
    // 3 MiB fits in 1 MiB + 2 MiB of 4 KiB pages, but needs two 2 MiB pages and the tiers hold
    // none and one.
    let new = || {
        SimMachine::new(profile(), source(3 << 20, 1, cycling_reads(10, 4)), 1 << 20, Some(2 << 20)).unwrap()
    };
    let huge = Requirements { page_size: PageSize::Huge2M, ..Requirements::default() };
    assert!(new().prepare(&huge).is_err());
    assert!(new().prepare(&Requirements::default()).is_ok());
    let unbounded = Requirements { memory_mode: MemoryMode::UnboundedFast, ..huge };
    assert!(new().prepare(&unbounded).is_ok());
}

/// A default slow tier holds the footprint whatever the mode: as a cache the fast tier holds no
/// page, so the slow one must hold every page, the last one partial (a footprint of 40.5 pages,
/// more than the profile's slow:fast ratio times one page, needs 41 pages of the slow tier).
#[test]
fn a_default_slow_tier_holds_every_page_when_the_fast_tier_is_a_cache() {
    let footprint = 81 * PAGE / 2;
    assert!(profile().slow_to_fast_capacity * (PAGE as f64) < footprint as f64);
    let cache = Requirements { memory_mode: MemoryMode::FastTierAsCache, ..Requirements::default() };
    for fast in [PAGE, 2 * PAGE, footprint] {
        let mut m =
            SimMachine::new(profile(), source(footprint, 1, cycling_reads(10, 2)), fast, None).unwrap();
        assert!(m.prepare(&cache).is_ok(), "fast tier of {fast} B");
        let info = m.info();
        assert_eq!(info.tiers[0].capacity_pages, Some(0));
        assert!(info.tiers[1].capacity_pages.unwrap() >= 41, "{:?}", info.tiers[1]);
    }
    // A slow tier the user sized stays as given, and one too small is refused.
    let mut m = SimMachine::new(profile(), source(footprint, 1, cycling_reads(10, 2)), PAGE, Some(40 * PAGE))
        .unwrap();
    assert!(m.prepare(&cache).is_err());
}

/// A default slow tier holds every page at the policy's page size, so a copy in flight never
/// leaves a first touch without room: hpwp (2 MiB pages) on a key-value store of 15.7 2 MiB
/// pages with a fast tier of one ran out of room when the tiers held 16 pages in all.
#[test]
fn a_default_slow_tier_leaves_room_for_copies_in_flight() {
    let profile = Profile::load("cxl").unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(10.0), ..Default::default() };
    let source = terrace_workloads::build("kvstore-set50", 1, 0.125).unwrap();
    let footprint = source.info().footprint_bytes;
    assert!(!footprint.is_multiple_of(2 << 20) && footprint / 10 < 2 * (2 << 20), "{footprint}");
    let mut hpwp = terrace_policy::build("hpwp").unwrap();
    let r = simulate(source, hpwp.as_mut(), &profile, &opts).unwrap();
    assert!(r.pages_migrated > 0, "{r:?}");
}

#[test]
fn sampling_costs_tracker_time_and_stalls_the_program_by_its_share() {
    let p = profile();
    let req = Requirements { trackers: vec![TrackerRequest::sampling(10)], ..Requirements::default() };
    let mut m = machine(cycling_reads(20_000, 8), 8, 8, 8, &req);
    m.advance(1);
    let samples = m.observe().samples.len();
    assert!(samples > 0);
    m.advance(u64::MAX);
    let r = m.report();
    let expected = samples as f64 * p.tracking.sample_ns;
    assert!((r.tracking_ns - expected).abs() < 1e-6, "{} vs {expected}", r.tracking_ns);
    // One program thread pays it all, in the slices after the observation.
    assert!((r.stall_ns - expected).abs() < 1e-6, "{} vs {expected}", r.stall_ns);
}

#[test]
fn a_page_bits_scan_costs_a_page_scan_per_mapped_page_and_flushes_the_tlb() {
    let p = profile();
    let req = Requirements { trackers: vec![TrackerRequest::page_bits()], ..Requirements::default() };
    // Eight pages, all touched in the first slice; odd pages are written.
    let a: Vec<Access> = (0..20_000u64)
        .map(|i| {
            let page = i % 8;
            if page % 2 == 1 {
                Access::write(page * PAGE, 64, 0, 0)
            } else {
                Access::read(page * PAGE, 64, 0, 0)
            }
        })
        .collect();
    let mut m = machine(a, 8, 8, 8, &req);
    m.advance(1);
    let bits = m.observe().page_bits.expect("page bits were asked for").to_vec();
    for (page, b) in bits.iter().enumerate() {
        let dirty = if page % 2 == 1 { PAGE_DIRTY } else { 0 };
        assert_eq!(*b, PAGE_REFERENCED | dirty, "page {page}: {bits:?}");
    }
    m.advance(u64::MAX);
    let r = m.report();
    let scan = 8.0 * p.tracking.page_scan_ns;
    assert!((r.tracking_ns - scan).abs() < 1e-6, "{} vs {scan}", r.tracking_ns);
    assert_eq!(r.tlb_shootdowns, 1);
    let stall = scan + p.migration.tlb_shootdown_us * 1e3;
    assert!((r.stall_ns - stall).abs() < 1e-6, "{} vs {stall}", r.stall_ns);
}

#[test]
fn no_hint_fault_scan_comes_before_the_scan_delay() {
    let req = Requirements {
        trackers: vec![TrackerRequest { kind: TrackerKind::HintFaults, period: 1 }],
        ..Requirements::default()
    };
    // A run of about a millisecond: Linux's first scan comes a second after the start.
    let mut m = machine(cycling_reads(20_000, 8), 8, 8, 8, &req);
    m.advance(u64::MAX);
    assert!(m.report().runtime_ns < 1e8);
    assert!(m.observe().hint_faults.is_empty());
    let r = m.report();
    assert_eq!((r.tracking_ns, r.tlb_shootdowns), (0.0, 0));
}

#[test]
fn hint_faults_are_taken_and_charged_as_tracker_time() {
    let req = Requirements {
        trackers: vec![TrackerRequest { kind: TrackerKind::HintFaults, period: 1 }],
        ..Requirements::default()
    };
    // A long run: the first scan comes a (scaled) second after the start.
    let a: Vec<Access> = (0..200_000u64).map(|i| Access::read((i % 8) * PAGE, 64, 0, 20_000)).collect();
    let mut m = machine(a, 8, 8, 8, &req);
    m.advance(u64::MAX);
    let faults = m.observe().hint_faults.len();
    assert!(faults > 0, "scans came due and armed pages faulted");
    let r = m.report();
    let per_fault = terrace_sim::machine::hint_fault_ns(&profile());
    assert!(r.tracking_ns >= faults as f64 * per_fault, "{} for {faults} faults", r.tracking_ns);
    assert!(r.stall_ns >= r.tracking_ns, "one thread pays the tracker time: {r:?}");
}

#[test]
fn a_page_move_stalls_the_program_for_its_shootdowns() {
    let p = profile();
    let mut m = machine(cycling_reads(100, 4), 4, 4, 4, &Requirements::default());
    m.advance(u64::MAX);
    let plan = Plan {
        moves: (0..3).map(|page| Move { page, to: TierId::SLOW }).collect(),
        options: MoveOptions::default(),
        ..Plan::none()
    };
    let a = m.apply(&plan);
    assert_eq!((a.pages_moved, a.tlb_shootdowns), (3, 3));
    assert_eq!(a.program_stall_ns, (3.0 * p.migration.tlb_shootdown_us * 1e3) as u64);
}

/// Compute time is instructions over the clock, spread over the threads, in every mode.
#[test]
fn compute_time_is_instructions_over_the_clock() {
    let p = profile();
    let (n, instructions) = (4096u64, 1_000_000u32);
    let compute_ns = n as f64 * instructions as f64 / p.cpu_ghz;
    for mode in [MemoryMode::Flat, MemoryMode::FastTierAsCache] {
        let a: Vec<Access> = (0..n).map(|i| Access::read((i % 4) * PAGE, 64, 0, instructions)).collect();
        let req = Requirements { memory_mode: mode, ..Requirements::default() };
        let mut m = machine(a, 4, 4, 4, &req);
        m.advance(u64::MAX);
        let r = m.report();
        assert!(
            r.runtime_ns >= compute_ns && r.runtime_ns < 1.01 * compute_ns,
            "{mode:?}: {} ns for {compute_ns} ns of compute",
            r.runtime_ns
        );
    }
}

/// A small GUPS under `policy`, run plainly and recording placement over time.
fn run_with_timeline(
    policy: &str,
) -> (terrace_sim::RunReport, terrace_sim::RunReport, terrace_sim::Timeline) {
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE).unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(25.0), ..Default::default() };
    let source = || terrace_workloads::build("gups", 1, 0.03125).unwrap();
    let plain = simulate(source(), terrace_policy::build(policy).unwrap().as_mut(), &profile, &opts).unwrap();
    let (recorded, timeline) = terrace_sim::simulate_with_timeline(
        source(),
        terrace_policy::build(policy).unwrap().as_mut(),
        &profile,
        &opts,
    )
    .unwrap();
    (plain, recorded, timeline)
}

/// The placement record `terrace sim --plot` draws adds up to the run's report, stays within its
/// bounds, and recording it changes nothing the run reports.
#[test]
fn the_timeline_adds_up_to_the_report_and_recording_changes_nothing() {
    let (plain, report, t) = run_with_timeline("oracle");
    assert_eq!(plain, report, "recording the timeline changed the run");
    assert!(report.bytes_migrated > 0, "the test needs a policy that migrates");
    assert!(
        t.epochs.len() >= 16 && t.epochs.len() <= terrace_sim::timeline::MAX_EPOCHS,
        "{} epochs",
        t.epochs.len()
    );
    assert!(
        t.ranges() as u64 <= terrace_sim::timeline::MAX_RANGES && t.ranges() > 1,
        "{} ranges",
        t.ranges()
    );
    assert_eq!(t.pages * t.page_bytes, report.footprint_bytes.next_multiple_of(t.page_bytes));
    let sum = |f: fn(&terrace_sim::timeline::Epoch) -> u64| t.epochs.iter().map(f).sum::<u64>();
    assert_eq!(sum(|e| e.accesses), report.accesses);
    assert_eq!(sum(|e| e.range_accesses.iter().sum()), report.accesses);
    assert_eq!(sum(|e| e.fast_accesses), report.tiers[0].reads + report.tiers[0].writes);
    assert_eq!(sum(|e| e.bytes_migrated), report.bytes_migrated);
    assert!(t.epochs.windows(2).all(|w| w[0].end_ns <= w[1].end_ns));
    assert_eq!(t.epochs.last().unwrap().end_ns, report.runtime_ns);
    let last = t.epochs.last().unwrap();
    assert!(last.tier.iter().all(|x| x.is_some()), "gups touches every page");
    // A quarter of the footprint is fast: some ranges end there, most do not.
    let fast = last.tier.iter().filter(|x| **x == Some(0)).count();
    assert!(fast > 0 && fast < t.ranges() / 2, "{fast} of {} ranges fast", t.ranges());
}
