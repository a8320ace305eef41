//! The NPB-like, BFS, key-value and pmbench-footprint workloads, through the public API only.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Instant;
use terrace_workloads::{build, list, AccessKind, AccessSource};

const TINY: f64 = 1.0 / 64.0;

fn new_names() -> Vec<&'static str> {
    list()
        .into_iter()
        .map(|s| s.name)
        .filter(|n| {
            n.starts_with("npb-") || n.starts_with("bfs-") || n.starts_with("kvstore-") || n.contains("-x")
        })
        .collect()
}

/// Stream hash, count, and post-initialisation (reads, writes); checks bounds on the way.
fn run(w: &mut dyn AccessSource) -> (u64, u64, u64, u64) {
    let info = w.info().clone();
    let init = info.footprint_bytes / 64;
    let mut h = DefaultHasher::new();
    let (mut n, mut reads, mut writes) = (0u64, 0u64, 0u64);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let k = w.fill(&mut buf, 50_001);
        assert_eq!(k, buf.len());
        if k == 0 {
            break;
        }
        for a in &buf {
            assert!(a.addr + u64::from(a.size) <= info.footprint_bytes, "{}: {a:?}", info.name);
            assert!(u32::from(a.thread) < info.threads);
            (a.addr, a.size, a.thread, a.kind as u8, a.instructions).hash(&mut h);
            n += 1;
            if n > init {
                match a.kind {
                    AccessKind::Read => reads += 1,
                    AccessKind::Write => writes += 1,
                }
            }
        }
    }
    (h.finish(), n, reads, writes)
}

#[test]
fn the_new_names_are_all_listed() {
    let names = new_names();
    for k in ["bt", "ft", "mg", "cg"] {
        for s in ["small", "medium", "large"] {
            assert!(names.contains(&format!("npb-{k}-{s}").as_str()), "npb-{k}-{s}");
        }
    }
    for s in ["small", "medium", "large"] {
        assert!(names.contains(&format!("bfs-{s}").as_str()));
    }
    for p in [10, 30, 50, 70, 90] {
        assert!(names.contains(&format!("kvstore-set{p}").as_str()));
    }
    for s in ["s12", "s25"] {
        for r in [20, 50, 80] {
            for x in [1, 2, 4, 8] {
                assert!(names.contains(&format!("pmbench-{s}-r{r}-x{x}").as_str()));
            }
        }
    }
    assert_eq!(names.len(), 12 + 3 + 5 + 24);
    for spec in list() {
        assert!(!spec.summary.is_empty() && !spec.summary.contains('\n'), "{}", spec.name);
    }
}

#[test]
fn every_new_workload_is_exact_bounded_and_deterministic_by_seed() {
    for name in new_names() {
        let (a, n, _, _) = run(build(name, 1, TINY).unwrap().as_mut());
        assert_eq!(n, build(name, 1, TINY).unwrap().info().accesses, "{name}");
        let (b, _, _, _) = run(build(name, 1, TINY).unwrap().as_mut());
        assert_eq!(a, b, "{name} is not deterministic");
        let (c, _, _, _) = run(build(name, 2, TINY).unwrap().as_mut());
        assert_ne!(a, c, "{name} ignores its seed");
    }
}

#[test]
fn npb_mixes_are_within_one_percent_of_ambix() {
    for (k, target) in [("bt", 3.5), ("ft", 1.7), ("mg", 4.0), ("cg", 64.0)] {
        for s in ["small", "medium", "large"] {
            let name = format!("npb-{k}-{s}");
            let mut w = build(&name, 9, 1.0 / 8.0).unwrap();
            let info = w.info().clone();
            assert_eq!((info.threads, info.suggested_fast_bytes), (32, (27 << 20) / 8));
            let (_, _, r, wr) = run(w.as_mut());
            let ratio = r as f64 / wr as f64;
            assert!((ratio / target - 1.0).abs() < 0.01, "{name}: {ratio} vs {target}");
        }
    }
}

#[test]
fn npb_footprints_are_table_5_1_over_1024() {
    let mib = |name: &str| build(name, 0, 1.0).unwrap().info().footprint_bytes as f64 / f64::from(1 << 20);
    let table = [
        ("bt", [28.4, 39.1, 53.9]),
        ("ft", [20.0, 40.0, 80.0]),
        ("mg", [26.5, 74.3, 131.0]),
        ("cg", [18.0, 39.8, 150.0]),
    ];
    for (k, sizes) in table {
        for (s, gb) in ["small", "medium", "large"].into_iter().zip(sizes) {
            let got = mib(&format!("npb-{k}-{s}"));
            assert!((got - gb).abs() <= 0.125, "npb-{k}-{s}: {got} MiB vs {gb}");
        }
    }
}

#[test]
fn bfs_reads_outnumber_writes_as_a_direction_optimising_bfs_does() {
    // Not Ambix's 2:1 (docs/workloads.md): GAP's BFS writes a parent once per vertex and reads
    // the parent array, offsets and neighbour lists around it; the mix follows from that.
    for s in ["small", "medium", "large"] {
        let mut w = build(&format!("bfs-{s}"), 4, 1.0 / 16.0).unwrap();
        assert_eq!(w.info().threads, 32);
        let (_, _, r, wr) = run(w.as_mut());
        let ratio = r as f64 / wr as f64;
        assert!((3.0..8.0).contains(&ratio), "bfs-{s}: {ratio}");
    }
    // The builder's peak for 2^19 vertices: 284 bytes a vertex (docs/workloads.md).
    let big = build("bfs-large", 0, 1.0).unwrap();
    assert_eq!(big.info().footprint_bytes, 284 << 19);
}

#[test]
fn kvstore_is_a_log_of_its_working_set_and_its_mix_follows_its_set_share() {
    // The log holds the working set (50 MiB at a quarter of the size) and a quarter more, in
    // segments (with at least 17 free ones: a small store has more room), then the hash table
    // (16 B a key). A GET is 65 reads (bucket + 64 item lines); a
    // SET 1 read and 65 writes (the item appended, the bucket's entry updated), so without the
    // cleaner the write share of a SET share s is 65 s / (65 + s); each item the cleaner moves is
    // 64 reads and 65 writes, so the stream's share lies between that and 65/129.
    for p in [10u32, 30, 50, 70, 90] {
        let mut w = build(&format!("kvstore-set{p}"), 6, 1.0 / 4.0).unwrap();
        let info = w.info().clone();
        assert_eq!((info.threads, info.suggested_fast_bytes), (8, 12 << 20));
        let log = (50u64 << 20) * 5 / 4;
        let table = (50u64 << 20) / 4096 * 16;
        let most = log + table + 17 * (2 << 20);
        assert!((log + table..most).contains(&info.footprint_bytes), "{}", info.footprint_bytes);
        let (_, _, r, wr) = run(w.as_mut());
        let (ws, s) = (wr as f64 / (r + wr) as f64, f64::from(p) / 100.0);
        let (requests, cleaner) = (65.0 * s / (65.0 + s), 65.0 / 129.0);
        let (lo, hi) = (requests.min(cleaner) - 0.01, requests.max(cleaner) + 0.01);
        assert!((lo..hi).contains(&ws), "kvstore-set{p}: write share {ws}, not within {lo}..{hi}");
    }
}

#[test]
fn pmbench_multiples_are_multiples_of_the_fast_tier() {
    for scale in [1.0, 1.0 / 16.0] {
        for m in [1u64, 2, 4, 8] {
            for name in [format!("pmbench-s12-r50-x{m}"), format!("pmbench-s25-r80-x{m}")] {
                let w = build(&name, 1, scale).unwrap();
                let i = w.info();
                assert_eq!(i.footprint_bytes, m * i.suggested_fast_bytes, "{name}");
                assert_eq!(i.threads, 32);
            }
        }
        let i = build("pmbench-s25-r20-x8", 1, scale).unwrap().info().clone();
        assert_eq!(i.footprint_bytes as f64, 8.0 * 27.0 * f64::from(1 << 20) * scale);
    }
}

/// Nanoseconds this thread has run on a CPU (Linux schedstat): the machine may be shared, so
/// speeds are per CPU-second, not per wall-clock second.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Generation speed of each new generator, single core, release; run with
/// `cargo test --release -p terrace-workloads --test issue4_workloads -- --ignored --nocapture`.
#[test]
#[ignore]
fn generator_speeds() {
    let mut names: Vec<&str> = vec!["pmbench-s12-r50", "gups", "stream-triad"];
    names.extend(new_names().into_iter().filter(|n| !n.contains("-x") || *n == "pmbench-s12-r50-x8"));
    for name in names {
        let mut w = build(name, 1, 1.0).unwrap();
        let mut buf = Vec::with_capacity(1 << 16);
        let (start, cpu) = (Instant::now(), cpu_ns());
        let mut n = 0u64;
        let mut sink = 0u64;
        loop {
            buf.clear();
            let k = w.fill(&mut buf, 1 << 16);
            if k == 0 {
                break;
            }
            sink = sink.wrapping_add(buf[k - 1].addr);
            n += k as u64;
        }
        let (wall, cpu) = (start.elapsed().as_secs_f64(), (cpu_ns() - cpu) as f64 / 1e9);
        println!(
            "{name:24} {n:>11} accesses {:>7.1} M/s per CPU-second, {:>7.1} M/s wall (sink {})",
            n as f64 / cpu / 1e6,
            n as f64 / wall / 1e6,
            sink % 7
        );
    }
}
