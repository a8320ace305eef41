//! `optimal` is a ceiling (issue 16): on a workload of each kind the registry builds, on every
//! built-in profile and at fast tiers of 5% to 100% of the footprint, its run is no slower than
//! any static placement the project can express and than any policy in the registry (the check
//! enumerates the registry, so a policy added later is covered without editing it), and its
//! run time does not rise as the fast tier grows.
//!
//! The grid: workloads at 1/64 of their size, fast tiers of 5%, 10%, 20%, 40%, 60%, 80%, 100%.
//! Every built-in workload at 5% steps is `terrace bench ceiling --exhaustive`.
//!
//! Runtime: about 90 CPU-seconds in the release profile (36 workload-profile cells, each a sweep
//! of `optimal` and about 35 runs per size), in parallel on all cores.

use rayon::prelude::*;
use terrace_ceiling::Static;
use terrace_model::InitialPlacement;
use terrace_sim::{Capacity, Profile, SimOptions};

const SCALE: f64 = 1.0 / 64.0;
const PERCENTS: [f64; 7] = [5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0];

/// One workload of each generator and shape but NPB and the object workload: the default suite,
/// a hot set larger than the seed's fast tier, BFS, a key-value store and mtier's STREAM. NPB's
/// kernels replay 5 to 30 times as many accesses at this scale, and the object workload (a
/// seed-long run, about 590 passes over memory) some 60 times, which would take the test past its
/// time; `terrace bench ceiling --exhaustive` runs them.
const WORKLOADS: &[&str] = &[
    "gups",
    "gups-hot64",
    "pmbench-s12-r50",
    "pmbench-s25-r20",
    "stream-triad",
    "stream-ro",
    "bfs-small",
    "kvstore-set50",
    "mtier-stream-t4",
];

#[test]
fn optimal_is_no_slower_than_any_static_placement_or_registry_policy_and_never_rises() {
    let started = std::time::Instant::now();
    let profiles: Vec<Profile> =
        terrace_sim::profile::BUILT_IN.iter().map(|(name, _)| Profile::load(name).unwrap()).collect();
    let cells: Vec<(&str, &Profile)> =
        WORKLOADS.iter().flat_map(|w| profiles.iter().map(move |p| (*w, p))).collect();
    let failures: Vec<String> = cells
        .par_iter()
        .with_max_len(1)
        .flat_map_iter(|&(workload, profile)| {
            terrace_ceiling::check::failures(workload, SCALE, profile, &PERCENTS)
        })
        .collect();
    eprintln!("{} cells x {} sizes in {:.1} s", cells.len(), PERCENTS.len(), started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// What the sweep's construction rests on: a static placement's run takes the same time on a
/// machine with a larger fast tier that leaves the extra room unused.
#[test]
fn a_static_placement_runs_as_fast_with_more_fast_memory_unused() {
    for profile in ["optane-2019", "three-tier"] {
        let profile = Profile::load(profile).unwrap();
        let source = || terrace_workloads::build("pmbench-s12-r50", 1, SCALE).unwrap();
        let at =
            |percent: f64| SimOptions { fast_capacity: Capacity::Percent(percent), ..SimOptions::default() };
        let small = terrace_ceiling::optimal(&source, &profile, &at(20.0)).unwrap();
        // The split by future accesses at 20%, as the family computes it.
        let tiers = {
            let counts = terrace_ceiling::TraceCounts::of(source());
            let m = terrace_sim::SimMachine::new(
                profile.clone(),
                source(),
                small.report.fast_capacity_bytes,
                None,
            )
            .unwrap();
            let info = terrace_model::Machine::info(&m).clone();
            let timing = terrace_sim::timing::Timing::new(&profile, info.threads);
            terrace_ceiling::future_split(&info, &timing, &counts)
        };
        let run = |percent: f64| {
            let mut p = Static::new("split at 20%", InitialPlacement::Pages { tiers: tiers.clone() });
            terrace_sim::simulate(source(), &mut p, &profile, &at(percent)).unwrap()
        };
        let (at20, at60) = (run(20.0), run(60.0));
        let family = small.candidates.iter().find(|c| c.name == "future-split").unwrap();
        assert_eq!(
            Some(at20.runtime_ns),
            family.runtime_ns,
            "the family's first candidate is this placement"
        );
        assert_eq!(at20.runtime_ns, at60.runtime_ns, "{}: unused room changed the run time", profile.name);
        assert_eq!(at20.tiers[0].peak_pages, at60.tiers[0].peak_pages, "the same pages are fast");
        assert!(at20.tiers[0].peak_pages > 0);
    }
}

/// The object workload, left out of the grid above for its time, frees and reuses its buffers'
/// pages and moves its hot set half-way: the exhaustive sweep found registry policies beating a
/// family whose only dynamic member, the oracle, stopped moving pages once a scaled-down tick
/// was shorter than two moves (docs/model.md §12). Two sizes of one of its cells.
#[test]
fn optimal_is_a_ceiling_on_the_object_workload() {
    let profile = Profile::load("optane-2019").unwrap();
    let failures = terrace_ceiling::check::failures("objects", SCALE, &profile, &[20.0, 25.0]);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Several programs (`objects-pair`): where the object policies beat the reference before it
/// had a member that follows the programs' starts and ends (optane-2019 at 20-30%, docs/model.md
/// §12), it is now no slower than any registry policy or static placement. The whole workload's
/// sweep is `terrace bench ceiling --exhaustive --workloads objects-pair`.
#[test]
fn with_several_programs_optimal_follows_their_starts_and_ends() {
    let profile = Profile::load("optane-2019").unwrap();
    let failures = terrace_ceiling::check::failures("objects-pair", SCALE, &profile, &[20.0, 30.0]);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// A recording (per-page counts per epoch, what `terrace record` writes and what damo's records
/// import as, replayed as random 64 B accesses spread over each epoch; trace/expand.rs) is a
/// workload like any other: `optimal` is a ceiling on two built-in workloads recorded so, on a
/// profile with Optane and one with CXL memory. A check of 160 cells (five aggregated workloads
/// and three imported damo records, every profile, 10-80%) is in docs/model.md §12.
#[test]
fn optimal_is_a_ceiling_on_recordings() {
    use std::io::Cursor;
    use terrace_workloads::trace::{aggregate, ExpandedTrace, TraceReader};
    use terrace_workloads::AccessSource;
    let mut failures = Vec::new();
    for workload in ["gups", "pmbench-s25-r20"] {
        let mut generated = terrace_workloads::build(workload, 1, SCALE).unwrap();
        let bytes = aggregate(generated.as_mut(), 20_000, Vec::new()).unwrap();
        let source = || -> Box<dyn AccessSource> {
            let reader = TraceReader::from_reader(Cursor::new(bytes.clone())).unwrap();
            Box::new(ExpandedTrace::new(reader))
        };
        // The replay is of the recording, not of the workload it was made from.
        assert_eq!(source().info().accesses, generated.info().accesses);
        for profile in ["optane-2019", "cxl"] {
            let profile = Profile::load(profile).unwrap();
            let name = format!("{workload} (recorded)");
            failures.extend(terrace_ceiling::check::failures_of(
                &name,
                &source,
                &profile,
                &[10.0, 40.0, 80.0],
            ));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Two cells a sweep at full size and other seeds found, where a registry policy that never
/// moved a page beat the family before it had `bandwidth-split` and `first-touch-2m`
/// (docs/model.md §12): STREAM triad on CXL at a 10% fast tier, where nimble's
/// first touch by 2 MiB pages put the written array in the fast tier (the slow tier's writes
/// are what the bandwidth path waits for), and BFS at full size on Optane at 60%, where hemem's
/// and nimble's first touch by 2 MiB pages beat first touch by 4 KiB pages by 7% with the same
/// hit rates (the slow tier's pages in whole 2 MiB runs, its streams unbroken).
#[test]
fn optimal_is_a_ceiling_where_the_bandwidth_path_or_huge_pages_decide() {
    let profile = Profile::load("cxl").unwrap();
    let failures = terrace_ceiling::check::failures("stream-triad", 0.25, &profile, &[10.0]);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));

    let failures =
        beaten_at_one_size("bfs-large", 1.0, "optane-2019", 60.0, &["first-touch", "hemem", "nimble"]);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Two cells a sweep at a quarter and a sixteenth of the size found on 2026-12-01
/// (docs/model.md §12, "Fills" and the window splits): NPB CG at medium on Optane at 60%, where
/// hemem's 2 MiB pages left 7.5% of its reads in the slow tier and ran 1% faster than every
/// split that filled the fast tier, whose bandwidth binds there; and the object workload on CXL
/// at 20%, where ambix and the object policy followed its hot set as its objects came and went
/// and beat every member that did not (by 12%, ambix). `optimal` at one size, as `compare` runs
/// it, is no slower than those policies in either.
#[test]
fn optimal_is_a_ceiling_where_the_fast_tiers_bandwidth_binds_or_the_hot_set_moves_with_objects() {
    let mut failures = beaten_at_one_size("npb-cg-medium", 0.25, "optane-2019", 60.0, &["hemem", "hpwp"]);
    failures.extend(beaten_at_one_size(
        "objects",
        0.0625,
        "cxl",
        20.0,
        &["ambix", "objects", "objects-reactive"],
    ));
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Each of `policies` that runs `workload` (generator seed 1, at `scale`) faster than `optimal`
/// at the one fast-tier size `percent`, as `terrace compare` runs it (no sweep of sizes).
fn beaten_at_one_size(
    workload: &str,
    scale: f64,
    profile: &str,
    percent: f64,
    policies: &[&str],
) -> Vec<String> {
    let profile = Profile::load(profile).unwrap();
    let source = || terrace_workloads::build(workload, 1, scale).unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(percent), ..SimOptions::default() };
    let ceiling = terrace_ceiling::optimal(&source, &profile, &opts).unwrap();
    policies
        .par_iter()
        .filter_map(|spec| {
            let mut p = terrace_policy::build(spec).unwrap();
            let ns = terrace_sim::simulate(source(), p.as_mut(), &profile, &opts).unwrap().runtime_ns;
            (ns < ceiling.report.runtime_ns).then(|| {
                format!(
                    "{workload} on {} at {percent}%: {spec} takes {:.4} ms, optimal ({}) {:.4} ms",
                    profile.name,
                    ns / 1e6,
                    ceiling.chosen,
                    ceiling.report.runtime_ns / 1e6
                )
            })
        })
        .collect()
}
