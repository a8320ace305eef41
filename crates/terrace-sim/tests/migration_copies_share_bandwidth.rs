//! While the mover copies pages, its copy traffic shares the tiers with the program
//! (docs/model.md §4): a program reading the tier the copies read from runs slower while they
//! run, by more than the shootdown stalls, and once the copy is over it runs as before.

use terrace_model::{Access, InitialPlacement, Machine, Move, Plan, Requirements, TierId};
use terrace_sim::{Profile, SimMachine};
use terrace_workloads::{MemorySource, WorkloadInfo};

const PAGE: u64 = 4096;
const PAGES: u64 = 64;

/// Every page starts in the slow tier; after touching all of them once the program reads
/// random lines of pages 60-63 for `hot` accesses. At the first tick, `promote` pages (0, 1,
/// ...) are moved up, which the program never reads again.
fn run(promote: u32, hot: u64) -> (terrace_sim::RunReport, u64) {
    let mut a: Vec<Access> = (0..PAGES).map(|p| Access::read(p * PAGE, 64, 0, 0)).collect();
    let mut x = 12345u64;
    for _ in 0..hot {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let line = (x >> 33) % (4 * PAGE / 64);
        a.push(Access::read(60 * PAGE + line * 64, 64, 0, 0));
    }
    let info = WorkloadInfo {
        name: "copy-share".into(),
        description: String::new(),
        footprint_bytes: PAGES * PAGE,
        threads: 1,
        scale: 1.0,
        suggested_fast_bytes: PAGES * PAGE,
        accesses: a.len() as u64,
        recording: None,
    };
    let source = Box::new(MemorySource::new(info, a));
    let profile = Profile::load("optane-2019").unwrap();
    let mut m = SimMachine::new(profile, source, PAGES * PAGE, Some(PAGES * PAGE)).unwrap();
    let req = Requirements { initial: InitialPlacement::Tier(TierId::SLOW), ..Requirements::default() };
    m.prepare(&req).unwrap();
    m.advance(1);
    let plan =
        Plan { moves: (0..promote).map(|page| Move { page, to: TierId::FAST }).collect(), ..Plan::none() };
    let applied = m.apply(&plan);
    assert_eq!(applied.pages_moved, promote as u64);
    m.advance(u64::MAX);
    (m.report(), applied.time_ns)
}

/// Program time lost to the copies: the run's extra time beyond the shootdown stalls.
fn copy_slowdown(promote: u32, hot: u64) -> (f64, f64) {
    let (quiet, _) = run(0, hot);
    let (busy, mover_ns) = run(promote, hot);
    let extra = (busy.runtime_ns - quiet.runtime_ns) - (busy.stall_ns - quiet.stall_ns);
    (extra, mover_ns as f64)
}

#[test]
fn copies_slow_a_program_reading_the_tier_they_read_from() {
    let (extra, mover_ns) = copy_slowdown(60, 200_000);
    eprintln!("extra {extra} ns, mover {mover_ns} ns");
    assert!(extra > 0.01 * mover_ns, "the copies cost the program {extra} ns over {mover_ns} ns of moving");
    // The copy lasts the mover's time; it cannot cost the program more than that.
    assert!(extra < mover_ns, "the copies cost the program {extra} ns over {mover_ns} ns of moving");
}
