//! End-to-end checks of the simulated machine: hand-computed expectations on tiny streams,
//! invariants on every built-in workload, determinism, and the plan executor's consistency.

use proptest::prelude::*;
use terrace_model::{
    Access, Exchange, Machine, Move, MoveOptions, Observations, PageSize, Plan, Policy, Requirements, TierId,
};
use terrace_sim::{simulate, Capacity, Profile, SimMachine, SimOptions};
use terrace_workloads::{AccessSource, MemorySource, WorkloadInfo};

/// A stream held in memory, of a footprint and thread count.
fn in_memory(footprint_bytes: u64, threads: u32, accesses: Vec<Access>) -> Box<MemorySource> {
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

fn profile() -> Profile {
    Profile::load("optane-2019").unwrap()
}

fn run(source: Box<dyn AccessSource>, policy: &str, fast: Capacity) -> terrace_sim::RunReport {
    let mut p = terrace_policy::build(policy).unwrap();
    // The default slow tier holds the whole footprint, so that all-slow can hold any footprint.
    simulate(source, p.as_mut(), &profile(), &SimOptions { fast_capacity: fast, ..Default::default() })
        .unwrap()
}

/// One thread reading `n` distinct pages, each once: dependent random reads.
fn random_reads(n: u64) -> Vec<Access> {
    (0..n).map(|i| Access::read(((i * 7919) % n) * 4096 * 2, 64, 0, 0)).collect()
}

#[test]
fn one_thread_random_reads_take_loaded_latency_over_mlp_in_each_tier() {
    // Hand computation (docs/model.md): the latency path T = N (L0 + s (B/T - light)) / MLP,
    // with bytes B = N x granularity, solved as a quadratic T^2 - (N/MLP)(L0 - s light) T -
    // (N/MLP) s B = 0; the bandwidth path B / (one-thread bandwidth); the run takes the larger.
    // DRAM is latency-bound (loaded latency lifts it just above its bandwidth path); Optane is
    // bandwidth-bound, because each 64 B read moves a 256 B XPLine (A, Fig. 5).
    let n = 100_000u64;
    for (policy, tier, lat, light, max_ns, max_gb, bw1, gran, latency_bound) in [
        ("all-fast", 0, 101.5, (87.9, 0.74), 121.4, 52.3, 7.38, 64.0, true),
        ("all-slow", 1, 305.0, (163.8, 0.41), 260.0, 11.5, 2.88, 256.0, false),
    ] {
        let r = run(in_memory(n * 8192, 1, random_reads(n)), policy, Capacity::Bytes(n * 8192));
        let (light_ns, light_gb) = light;
        let s = (max_ns - light_ns) / (max_gb - light_gb);
        let mlp = bw1 * lat / 64.0;
        let k = n as f64 / mlp;
        let b = k * (lat - s * light_gb);
        let c = k * s * n as f64 * gran;
        let latency_path = (b + (b * b + 4.0 * c).sqrt()) / 2.0;
        let bandwidth_path = n as f64 * gran / bw1;
        assert_eq!(latency_path > bandwidth_path, latency_bound, "tier {tier}");
        let t = latency_path.max(bandwidth_path);
        // Below the max-load point, where the loaded-latency curve is linear.
        assert!(n as f64 * gran / t < max_gb, "tier {tier}: the hand computation assumes a linear region");
        let err = (r.runtime_ns - t).abs() / t;
        assert!(err < 2e-3, "tier {tier}: simulated {} ns, hand-computed {t} ns", r.runtime_ns);
        assert_eq!(r.tiers[tier].reads, n);
    }
}

#[test]
fn a_write_only_stream_runs_at_the_slow_tiers_write_bandwidth() {
    // 24 threads each write their own 1 MiB sequentially in 64 B lines to Optane: the XPLine
    // merges four lines, so the media writes the footprint exactly once, at 7.50 GB/s (A, Fig. 4).
    let per_thread = 1u64 << 20;
    let threads = 24u32;
    let mut v = Vec::new();
    for line in 0..per_thread / 64 {
        for t in 0..threads as u64 {
            v.push(Access::write(t * per_thread + line * 64, 64, t as u8, 0));
        }
    }
    let footprint = per_thread * threads as u64;
    let r = run(in_memory(footprint, threads, v), "all-slow", Capacity::Bytes(4096));
    assert_eq!(r.tiers[1].write_bytes, footprint);
    let want = footprint as f64 / 7.50;
    assert!((r.runtime_ns - want).abs() / want < 1e-3, "{} vs {want}", r.runtime_ns);
}

#[test]
fn optane_charges_a_whole_xpline_for_a_small_random_write() {
    let n = 10_000u64;
    let v: Vec<Access> = (0..n).map(|i| Access::write(i * 4096, 8, 0, 0)).collect();
    let slow = run(in_memory(n * 4096, 1, v.clone()), "all-slow", Capacity::Bytes(4096));
    let fast = run(in_memory(n * 4096, 1, v), "all-fast", Capacity::Bytes(4096));
    assert_eq!(slow.tiers[1].write_bytes, n * 256);
    assert_eq!(fast.tiers[0].write_bytes, n * 64);
}

#[test]
fn a_media_unit_merges_only_with_its_own_tiers_units() {
    // Page 0 in DRAM, page 1 in Optane (first touch, a one-page fast tier). Address 1024 is DRAM
    // unit 1024 >> 6 = 16, address 4096 is Optane unit 4096 >> 8 = 16: the same number on two
    // devices. The Optane read must move its own 256 B XPLine, not merge with the DRAM unit.
    let v = vec![Access::read(1024, 64, 0, 0), Access::read(4096, 64, 0, 0)];
    let r = run(in_memory(8192, 1, v), "first-touch", Capacity::Bytes(4096));
    assert_eq!((r.tiers[0].reads, r.tiers[0].read_bytes), (1, 64));
    assert_eq!((r.tiers[1].reads, r.tiers[1].read_bytes), (1, 256));
    // Nor does a DRAM stream continue into Optane: DRAM units 0..=15 then Optane unit 16 would
    // be one stream to a tag-blind table, making the Optane read sequential. It must cost the
    // same as after DRAM units 32..=47, which no table could join to it.
    let after = |first_line: u64| {
        let mut v: Vec<Access> =
            (first_line..first_line + 16).map(|i| Access::read(i * 64, 64, 0, 0)).collect();
        v.push(Access::read(4096, 64, 0, 0));
        run(in_memory(8192, 1, v), "first-touch", Capacity::Bytes(4096)).runtime_ns
    };
    assert_eq!(after(0), after(32));
}

#[test]
fn memory_mode_write_backs_of_consecutive_lines_combine_in_the_xpline() {
    // One thread writes twice the cache's size sequentially: the second half evicts the first
    // half's dirty lines in order. Like the thread's own sequential writes (model.md §1), the
    // write-backs merge four 64 B lines into one 256 B XPLine: the slow tier's media writes the
    // evicted half once, not four times.
    let cache = 64u64 << 10;
    let v: Vec<Access> = (0..2 * cache / 64).map(|i| Access::write(i * 64, 64, 0, 0)).collect();
    let r = run(in_memory(2 * cache, 1, v), "memory-mode", Capacity::Bytes(cache));
    assert_eq!(r.tiers[1].write_bytes, cache);
    // Victims a page apart each cost a whole XPLine: 16 lines fill the cache, 16 more evict them.
    let v: Vec<Access> = (0..2 * cache / 4096).map(|i| Access::write(i * 4096, 64, 0, 0)).collect();
    let r = run(in_memory(2 * cache, 1, v), "memory-mode", Capacity::Bytes(cache));
    assert_eq!(r.tiers[1].write_bytes, cache / 4096 * 256);
}

const SMALL: f64 = 1.0 / 16.0;

/// One workload of every family (the default suite plus the NPB kernels, BFS and the KV store):
/// every generator's shape, without running all sixty sizes and mixes under every policy.
fn suite() -> Vec<String> {
    let mut names: Vec<String> = terrace_workloads::DEFAULT_SUITE.iter().map(|s| s.to_string()).collect();
    let families =
        ["npb-bt-small", "npb-ft-small", "npb-mg-small", "npb-cg-small", "bfs-small", "kvstore-set50"];
    for w in terrace_workloads::list() {
        if families.contains(&w.name) {
            names.push(w.name.to_string());
        }
    }
    names
}

fn build(name: &str) -> Box<dyn AccessSource> {
    terrace_workloads::build(name, 7, SMALL).unwrap()
}

#[test]
fn placements_without_migration_lie_between_all_fast_and_all_slow() {
    for w in suite() {
        let fast = run(build(&w), "all-fast", Capacity::Suggested).runtime_ns;
        let slow = run(build(&w), "all-slow", Capacity::Suggested).runtime_ns;
        for p in ["first-touch", "interleave", "weighted-interleave"] {
            let r = run(build(&w), p, Capacity::Suggested);
            assert_eq!(r.pages_migrated, 0, "{w}/{p} migrated");
            // Interleaving adds the slow tier's bandwidth to the fast tier's, so a bandwidth-bound
            // program (CG) can beat all-fast by a little; never by more than that bandwidth gives.
            let bound = if p == "first-touch" { 1.0001 } else { 1.10 };
            assert!(fast <= r.runtime_ns * bound, "{w}/{p}: {} faster than all-fast {fast}", r.runtime_ns);
            assert!(r.runtime_ns <= slow * 1.0001, "{w}/{p}: {} slower than all-slow {slow}", r.runtime_ns);
        }
    }
}

#[test]
fn no_tier_ever_exceeds_its_capacity_and_migrated_bytes_are_whole_pages() {
    for w in suite() {
        for p in terrace_policy::list() {
            let r = run(build(&w), p.name, Capacity::Percent(30.0));
            for t in &r.tiers {
                if let Some(c) = t.capacity_pages {
                    assert!(t.peak_pages <= c, "{w}/{}: {} pages in a tier of {c}", p.name, t.peak_pages);
                }
            }
            // A switch back to a shadow copies nothing (docs/model.md §4, "Shadow copies").
            assert_eq!(
                r.bytes_migrated,
                (r.pages_migrated - r.pages_switched) * r.page_bytes,
                "{w}/{}",
                p.name
            );
            // The program never waits for moves longer than it runs, and no mover copies longer
            // than the run (docs/model.md §4, "Movers").
            assert!(r.move_wait_ns <= r.stall_ns && r.stall_ns <= r.runtime_ns, "{w}/{}: {r:?}", p.name);
            for &ns in &r.mover_ns {
                assert!(ns <= r.runtime_ns, "{w}/{}: a mover copied {ns} ns in {} ns", p.name, r.runtime_ns);
            }
            if p.name == "first-touch" {
                assert_eq!(r.pages_migrated, 0);
            }
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_result_bit_for_bit() {
    for p in ["first-touch", "oracle", "memory-mode"] {
        let a = run(build("gups"), p, Capacity::Suggested);
        let b = run(build("gups"), p, Capacity::Suggested);
        assert_eq!(a, b, "{p}");
        assert_eq!(a.runtime_ns.to_bits(), b.runtime_ns.to_bits());
    }
    let other = run(terrace_workloads::build("gups", 8, SMALL).unwrap(), "first-touch", Capacity::Suggested);
    assert_ne!(run(build("gups"), "first-touch", Capacity::Suggested).runtime_ns, other.runtime_ns);
}

/// A tiny `--size-scale` shrinks the hint-fault scanner's period below the cost of the TLB flush
/// each scan makes. Scans missed while the program paid for the last one are not made up (as in
/// `task_numa_work`), so the run stays near first-touch's time instead of piling up scans: it
/// once took 71 s of machine time and 71 M shootdowns for 333 thousand accesses at 0.01, and
/// never finished at 0.001.
#[test]
fn hint_fault_scans_do_not_pile_up_at_tiny_size_scales() {
    for size_scale in [0.01, 0.001] {
        let w = |policy: &str| {
            let source = terrace_workloads::build("gups", 1, size_scale).unwrap();
            run(source, policy, Capacity::Suggested)
        };
        let (kt, ft) = (w("kernel-tiering"), w("first-touch"));
        assert!(
            kt.runtime_ns < 3.0 * ft.runtime_ns,
            "{size_scale}: {} vs {} ns",
            kt.runtime_ns,
            ft.runtime_ns
        );
        assert!(kt.tlb_shootdowns < kt.accesses / 100, "{size_scale}: {} shootdowns", kt.tlb_shootdowns);
    }
}

#[test]
fn a_footprint_that_fits_nowhere_is_refused_with_advice() {
    let mut p = terrace_policy::build("first-touch").unwrap();
    let opts =
        SimOptions { fast_capacity: Capacity::Percent(1.0), slow_capacity: Some(4096), ..Default::default() };
    let e = simulate(build("gups"), p.as_mut(), &profile(), &opts).unwrap_err().to_string();
    assert!(e.contains("does not fit") && e.contains("--fast-capacity"), "{e}");
    let opts = SimOptions { fast_capacity: Capacity::Bytes(0), ..Default::default() };
    let e = simulate(build("gups"), p.as_mut(), &profile(), &opts).unwrap_err().to_string();
    assert!(e.contains("zero"), "{e}");
}

#[test]
fn an_access_outside_the_footprint_is_an_error_not_a_panic() {
    let v = vec![Access::read(0, 64, 0, 0), Access::read(1 << 30, 64, 0, 0)];
    let mut p = terrace_policy::build("first-touch").unwrap();
    let e = simulate(in_memory(8192, 1, v), p.as_mut(), &profile(), &SimOptions::default()).unwrap_err();
    assert!(e.to_string().contains("outside the workload's footprint"), "{e}");
}

/// A policy that does nothing, to set a machine up for the executor tests.
struct Idle;
impl Policy for Idle {
    fn name(&self) -> &str {
        "idle"
    }
    fn requirements(&self, _: &terrace_model::MachineInfo) -> Requirements {
        Requirements::default()
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

const PAGES: u64 = 64;

fn touched_machine(fast_pages: u64, slow_pages: u64, touched: u64) -> SimMachine {
    let v: Vec<Access> = (0..touched).map(|p| Access::write(p * 4096, 64, 0, 0)).collect();
    let mut m =
        SimMachine::new(profile(), in_memory(PAGES * 4096, 1, v), fast_pages * 4096, Some(slow_pages * 4096))
            .unwrap();
    m.prepare(&Idle.requirements(m.info())).unwrap();
    m.advance(u64::MAX);
    m
}

/// A machine whose program has touched `touched` pages in order (first touch) and goes on
/// reading them for about a simulated second, so that moves have time to complete.
fn running_machine(fast_pages: u64, slow_pages: u64, touched: u64) -> SimMachine {
    let mut v: Vec<Access> = (0..touched).map(|p| Access::write(p * 4096, 64, 0, 0)).collect();
    v.extend((0..2_000_000u64).map(|i| Access::read((i % touched) * 4096, 64, 0, 1000)));
    let mut m =
        SimMachine::new(profile(), in_memory(PAGES * 4096, 1, v), fast_pages * 4096, Some(slow_pages * 4096))
            .unwrap();
    m.prepare(&Idle.requirements(m.info())).unwrap();
    m.advance(1);
    m
}

/// Lets the program run until every copy taken on has landed.
fn settle(m: &mut SimMachine) {
    while !m.observe().in_flight.is_empty() {
        let now = m.observe().now_ns;
        assert!(matches!(m.advance(now + 10_000), terrace_model::Progress::Running { .. }));
    }
}

/// The machine contract (terrace_model::contract), which the live machine passes in the guest.
#[test]
fn the_simulated_machine_keeps_the_machine_contract() {
    // First touch fills the 40-page fast tier, 3 pages spill; two demotions make room. The
    // program runs on while the contract waits for the copies.
    let mut m = running_machine(40, PAGES, 43);
    let down = Plan {
        moves: vec![Move { page: 0, to: TierId::SLOW }, Move { page: 1, to: TierId::SLOW }],
        ..Plan::none()
    };
    assert_eq!(m.apply(&down).pages_moved, 2);
    settle(&mut m);
    let failures = terrace_model::contract::check(&mut m);
    assert!(failures.is_empty(), "{failures:#?}");
}

fn arb_plan() -> impl Strategy<Value = Plan> {
    let mv = (0u32..PAGES as u32 + 4, 0u8..3).prop_map(|(page, to)| Move { page, to: TierId(to) });
    let ex = (0u32..PAGES as u32 + 4, 0u32..PAGES as u32 + 4).prop_map(|(a, b)| Exchange { a, b });
    (
        prop::collection::vec(mv, 0..80),
        prop::collection::vec(ex, 0..40),
        1u32..64,
        prop::option::of(1.0f64..1e4),
    )
        .prop_map(|(moves, exchanges, batch, rate)| Plan {
            moves,
            exchanges,
            options: MoveOptions { batch_pages: batch, rate_limit_mb_s: rate, ..Default::default() },
            reason: "proptest".into(),
            ..Plan::none()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn any_plan_leaves_a_consistent_placement(plans in prop::collection::vec(arb_plan(), 1..4), fast in 1u64..40, touched in 0u64..PAGES) {
        let mut m = touched_machine(fast, PAGES, touched);
        for plan in &plans {
            let before: Vec<TierId> = m.placement().tiers.clone();
            let a = m.apply(plan);
            prop_assert!(m.placement().is_consistent());
            // Never places an untouched page, and never loses a placed one.
            for (b, now) in before.iter().zip(&m.placement().tiers) {
                prop_assert_eq!(b.is_placed(), now.is_placed());
            }
            prop_assert_eq!(a.bytes_copied, a.pages_moved * PageSize::Base4K.bytes());
            let asked = (plan.moves.len() + 2 * plan.exchanges.len()) as u64;
            prop_assert!(a.pages_moved + a.failed_total() <= asked);
        }
    }
}

/// An exchange swaps the two pages' tiers, and only theirs: occupancy stays as it was, both pages
/// count as moved, and what the policy observes next is the new placement. (Ambix's SWITCH and
/// Nimble's exchange_pages rely on it; a plan executor that counted the pair without swapping it
/// would pass every consistency check.)
#[test]
fn an_exchange_swaps_the_two_pages_tiers_and_nothing_else() {
    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;
    // Pages 0-7 first touched in order with room for 4 in the fast tier: 0-3 fast, 4-7 slow.
    let mut m = running_machine(4, PAGES, 8);
    let before = m.placement().tiers.clone();
    assert_eq!(before[..8], [F, F, F, F, S, S, S, S]);
    let used = m.placement().used.clone();
    let plan = Plan { exchanges: vec![Exchange { a: 1, b: 6 }, Exchange { a: 5, b: 2 }], ..Plan::none() };
    let applied = m.apply(&plan);
    assert_eq!((applied.pairs_exchanged, applied.pages_moved, applied.failed_total()), (2, 4, 0));
    assert_eq!(applied.bytes_copied, 4 * 4096);
    assert_eq!(m.placement().tiers, before, "nothing has changed tier before its copy completes");
    settle(&mut m);
    let mut expected = before.clone();
    expected.swap(1, 6);
    expected.swap(5, 2);
    assert_eq!(expected[..8], [F, S, S, F, S, F, F, S]);
    assert_eq!(m.placement().tiers, expected);
    assert_eq!(m.placement().used, used, "an exchange changes no tier's occupancy");
    assert!(m.placement().is_consistent());
    assert_eq!(m.observe().placement, &expected[..]);
    assert_eq!(m.report().pages_migrated, 4);
    // Two pages of one tier cannot be exchanged: nothing moves, and it is counted as a failure.
    let applied = m.apply(&Plan { exchanges: vec![Exchange { a: 0, b: 3 }], ..Plan::none() });
    assert_eq!((applied.pairs_exchanged, applied.pages_moved, applied.failed_total()), (0, 0, 1));
    assert_eq!(m.placement().tiers, expected);
}

/// Nimble's configurations differ in mechanism only (docs/policies.md, "nimble"). A program
/// works on the first half of its 8 MiB, then on the second: the first half goes inactive and
/// the second active, so every configuration brings the second half up. Every one runs the
/// program on 2 MiB pages (Nimble §4.3), the base-page ones splitting each as they move it, so
/// their copies cost more mover time per byte than native THP migration; neither tier ever holds
/// more than it can; and the optimised mechanisms copy in less mover time per byte than native
/// THP migration (copy
/// threads and pages in flight, docs/model.md §4). The seed's machine: a remote socket as the
/// slow tier, local memory half the footprint (Nimble §4.3). The period is 1 ms so that the
/// short stream spans many of them.
#[test]
fn nimble_configurations_differ_in_their_mechanism_only() {
    const HALF: u64 = 4 << 20;
    let lines = HALF / 64;
    let sweep = |base: u64, n: u64| (0..n).map(move |i| Access::read(base + (i * 64 * 97) % HALF, 64, 0, 0));
    let accesses: Vec<Access> = sweep(0, 40_000).chain(sweep(HALF, 20 * lines)).collect();
    let r = |p: &str| {
        let mut policy = terrace_policy::build(&format!("{p}:period=1ms")).unwrap();
        let opts = SimOptions { fast_capacity: Capacity::Bytes(HALF), ..Default::default() };
        let w = in_memory(2 * HALF, 1, accesses.clone());
        simulate(w, policy.as_mut(), &Profile::load("remote-socket").unwrap(), &opts).unwrap()
    };
    let runs: Vec<_> = ["nimble-linux", "nimble-exchange-4k", "nimble-thp", "nimble-opt", "nimble"]
        .into_iter()
        .map(|p| (p, r(p)))
        .collect();
    for (p, run) in &runs {
        assert_eq!(run.page_bytes, 2 << 20, "{p}: the program's pages are huge");
        assert!(run.pages_migrated > 0, "{p}: the second half was never promoted: {run:?}");
        assert!(run.fast_read_hit_rate() > 0.5, "{p}: {}", run.fast_read_hit_rate());
        for t in &run.tiers {
            assert!(t.peak_pages <= t.capacity_pages.unwrap_or(u64::MAX), "{p}: {t:?}");
        }
    }
    let per_byte = |i: usize| runs[i].1.migration_ns / runs[i].1.bytes_migrated as f64;
    assert!(
        per_byte(3) < per_byte(2),
        "4 threads and 8 pages in flight copy faster per byte than one: {} vs {} ns/B",
        per_byte(3),
        per_byte(2)
    );
    assert!(
        per_byte(0) > 2.0 * per_byte(2),
        "a huge page split to move costs its 512 base pages (Nimble Fig. 2: 2.9x): {} vs {} ns/B",
        per_byte(0),
        per_byte(2)
    );
}
