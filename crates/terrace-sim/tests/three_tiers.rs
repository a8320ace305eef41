//! The simulated machine beyond two tiers (issue 10 §2): the three-tier profile (local DRAM, the
//! remote socket's DRAM, a CXL expander) runs every policy that manages any number of tiers, with
//! every tier's capacity kept and pages in every tier, and refuses each two-tier policy with its
//! one line.

use terrace_model::Access;
use terrace_sim::{simulate, Capacity, Profile, RunReport, SimOptions};
use terrace_workloads::AccessSource;

const SMALL: f64 = 1.0 / 32.0;

fn three() -> Profile {
    Profile::load("three-tier").unwrap()
}

fn build(name: &str) -> Box<dyn AccessSource> {
    terrace_workloads::build(name, 7, SMALL).unwrap()
}

fn run(workload: &str, policy: &str, fast: Capacity) -> Result<RunReport, String> {
    let mut p = terrace_policy::build(policy).unwrap();
    let opts = SimOptions { fast_capacity: fast, ..Default::default() };
    simulate(build(workload), p.as_mut(), &three(), &opts).map_err(|e| {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    })
}

#[test]
fn the_three_tier_profile_is_fastest_first_with_a_middle_tier_sized_from_the_fast_one() {
    let p = three();
    let names: Vec<&str> = p.tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["DRAM", "remote DRAM", "CXL"]);
    assert!(p.tiers.windows(2).all(|w| w[0].read_latency_random_ns < w[1].read_latency_random_ns));
    assert_eq!(p.tiers[1].capacity_to_fast, Some(1.0));
}

#[test]
fn every_policy_for_any_number_of_tiers_runs_and_every_two_tier_policy_is_refused() {
    for w in terrace_workloads::DEFAULT_SUITE {
        for spec in terrace_policy::list() {
            let max = terrace_policy::registry::max_tiers(spec.name).unwrap();
            let r = run(w, spec.name, Capacity::Percent(30.0));
            if max.is_some_and(|m| m < 3) {
                let e = r.expect_err(spec.name);
                assert!(
                    e.contains("manages at most 2 tiers") && e.contains("DRAM, remote DRAM, CXL"),
                    "{w}/{}: {e}",
                    spec.name
                );
                continue;
            }
            let r = r.unwrap_or_else(|e| panic!("{w}/{}: {e}", spec.name));
            assert_eq!(r.tiers.len(), 3, "{w}/{}", spec.name);
            for (i, t) in r.tiers.iter().enumerate() {
                if let Some(c) = t.capacity_pages {
                    assert!(t.peak_pages <= c, "{w}/{} tier {i}: {} pages of {c}", spec.name, t.peak_pages);
                }
            }
            assert_eq!(r.bytes_migrated, r.pages_migrated * r.page_bytes, "{w}/{}", spec.name);
        }
    }
}

/// First touch fills DRAM, then the remote socket, then CXL; all-slow puts everything in CXL; the
/// placements that never migrate are no slower than all-slow, and first touch no faster than
/// all-fast. (Interleave may beat all-fast on a bandwidth-bound stream: three tiers' bandwidth
/// add up, which is what weighted interleave is for; remote-socket shows it on two tiers.)
#[test]
fn pages_fill_the_tiers_in_order_and_static_placements_lie_between_the_bounds() {
    for w in terrace_workloads::DEFAULT_SUITE {
        // 30% fast, 30% remote (the same size): the last 40% of first touches go to CXL.
        let ft = run(w, "first-touch", Capacity::Percent(30.0)).unwrap();
        let (fast, middle) = (ft.tiers[0].capacity_pages.unwrap(), ft.tiers[1].capacity_pages.unwrap());
        assert_eq!(fast, middle, "{w}: the middle tier is capacity_to_fast = 1 times the fast one");
        assert_eq!(ft.tiers[0].peak_pages, fast, "{w}");
        assert_eq!(ft.tiers[1].peak_pages, middle, "{w}");
        assert!(ft.tiers[2].peak_pages > 0 && ft.tiers[2].reads + ft.tiers[2].writes > 0, "{w}");
        let slow = run(w, "all-slow", Capacity::Percent(30.0)).unwrap();
        assert!(
            slow.tiers[2].peak_pages > 0 && slow.tiers[0].peak_pages + slow.tiers[1].peak_pages == 0,
            "{w}"
        );
        let all_fast = run(w, "all-fast", Capacity::Percent(30.0)).unwrap();
        assert!(all_fast.runtime_ns <= ft.runtime_ns * 1.0001, "{w}");
        for p in ["first-touch", "interleave", "weighted-interleave"] {
            let r = run(w, p, Capacity::Percent(30.0)).unwrap();
            assert!(
                r.runtime_ns <= slow.runtime_ns * 1.0001,
                "{w}/{p}: {} vs all-slow {}",
                r.runtime_ns,
                slow.runtime_ns
            );
        }
        // Interleave spreads pages over all three tiers.
        let il = run(w, "interleave", Capacity::Percent(50.0)).unwrap();
        assert!(il.tiers.iter().all(|t| t.peak_pages > 0), "{w}: {:?}", il.tiers);
    }
}

/// A policy that demotes sends pages to the nearest lower tier with room: its moves reach the
/// tiers below DRAM, and no tier overflows (the fallback order itself: `FreeRoom`'s unit tests).
#[test]
fn demotions_fall_back_to_the_next_lower_tier_with_room() {
    for p in ["kernel-tiering", "age", "oracle"] {
        let r = run("pmbench-s25-r20", p, Capacity::Percent(30.0)).unwrap();
        assert!(r.pages_migrated > 0, "{p} moved nothing");
        let middle = r.tiers[1].capacity_pages.unwrap();
        assert!(r.tiers[1].peak_pages <= middle, "{p}");
        assert!(r.tiers[1].copy_write_bytes + r.tiers[2].copy_write_bytes > 0, "{p}: {:?}", r.tiers);
    }
}

/// Memory Mode on three tiers: DRAM caches both slower tiers, each page living in one of them.
#[test]
fn memory_mode_caches_every_slower_tier() {
    let r = run("gups", "memory-mode", Capacity::Percent(30.0)).unwrap();
    assert_eq!(r.tiers[0].peak_pages, 0, "DRAM holds lines, not pages");
    assert!(r.tiers[1].peak_pages > 0 && r.tiers[2].peak_pages > 0, "{:?}", r.tiers);
    assert!(r.tiers[1].reads > 0 && r.tiers[2].reads > 0, "misses come from both homes");
    assert!(r.fast_read_hit_rate() > 0.0);
}

/// Each access is charged to its page's own tier: the same reads cost more the lower their
/// page lies (DRAM, then the remote socket, then CXL).
#[test]
fn a_page_in_the_middle_tier_reads_at_the_middle_tiers_latency() {
    // 3 pages; fast and middle tiers of one page each: page 0 in DRAM, 1 remote, 2 CXL. Each
    // page is then read many times at random lines, one thread.
    let time_of = |page: u64| {
        let mut accesses = Vec::new();
        for p in 0..3u64 {
            accesses.push(Access::read(p * 4096, 8, 0, 1));
        }
        for i in 0..20_000u64 {
            accesses.push(Access::read(page * 4096 + (i * 7 % 64) * 64, 8, 0, 1));
        }
        let info = terrace_workloads::WorkloadInfo {
            name: "reads".into(),
            description: String::new(),
            footprint_bytes: 3 * 4096,
            threads: 1,
            scale: 1.0,
            suggested_fast_bytes: 4096,
            accesses: accesses.len() as u64,
            recording: None,
        };
        let mut p = terrace_policy::build("first-touch").unwrap();
        let src = Box::new(terrace_workloads::MemorySource::new(info, accesses));
        let opts = SimOptions { fast_capacity: Capacity::Bytes(4096), ..Default::default() };
        simulate(src, p.as_mut(), &three(), &opts).unwrap()
    };
    let (dram, remote, cxl) = (time_of(0), time_of(1), time_of(2));
    assert_eq!(remote.tiers[1].reads, 20_001);
    assert!(dram.runtime_ns < remote.runtime_ns && remote.runtime_ns < cxl.runtime_ns);
}
