//! The placement record `terrace sim --plot` draws: it adds up to the run's report, stays within
//! its bounds, and recording it changes nothing the run reports.

use terrace_sim::timeline::{MAX_EPOCHS, MAX_RANGES};
use terrace_sim::{simulate, simulate_with_timeline, Capacity, Profile, SimOptions};

fn run(policy: &str) -> (terrace_sim::RunReport, terrace_sim::RunReport, terrace_sim::Timeline) {
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE).unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(25.0), ..Default::default() };
    let source = || terrace_workloads::build("gups", 1, 0.03125).unwrap();
    let plain = simulate(source(), terrace_policy::build(policy).unwrap().as_mut(), &profile, &opts).unwrap();
    let (recorded, timeline) =
        simulate_with_timeline(source(), terrace_policy::build(policy).unwrap().as_mut(), &profile, &opts)
            .unwrap();
    (plain, recorded, timeline)
}

#[test]
fn the_timeline_adds_up_to_the_report_and_recording_changes_nothing() {
    let (plain, report, t) = run("oracle");
    assert_eq!(plain, report, "recording the timeline changed the run");
    assert!(report.bytes_migrated > 0, "the test needs a policy that migrates");
    assert!(t.epochs.len() >= 16 && t.epochs.len() <= MAX_EPOCHS, "{} epochs", t.epochs.len());
    assert!(t.ranges() as u64 <= MAX_RANGES && t.ranges() > 1, "{} ranges", t.ranges());
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
