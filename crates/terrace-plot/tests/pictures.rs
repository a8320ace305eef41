//! Each picture is written, as SVG and as PNG, with the content its data asks for.

use std::path::Path;
use terrace_plot::*;

fn speedups() -> Speedups {
    let s = |v: f64| Some(v);
    Speedups {
        title: "profile optane; fast tier 25% of each footprint".into(),
        workloads: vec!["gups".into(), "btree".into(), "xsbench".into()],
        policies: vec!["first-touch".into(), "hemem".into(), "tpp".into(), "oracle".into()],
        speedup: vec![
            vec![s(1.0), s(1.4), s(1.2), s(2.0)],
            vec![s(1.0), s(0.9), None, s(1.5)],
            vec![s(1.0), s(1.1), s(1.3), s(1.6)],
        ],
    }
}

#[test]
fn smoke() {
    let dir = Path::new("/tmp/plots");
    std::fs::create_dir_all(dir).unwrap();
    speedup_bars(&dir.join("s.svg"), &speedups()).unwrap();
    speedup_bars(&dir.join("s.png"), &speedups()).unwrap();
}

fn timeline() -> PlacementTimeline {
    let ranges = 64;
    let epochs = (0..100)
        .map(|e| PlacementEpoch {
            start_ns: e as f64 * 1e5,
            end_ns: (e + 1) as f64 * 1e5,
            tier: (0..ranges)
                .map(|r| if e < 3 && r > e * 20 { None } else { Some(u8::from(r % 16 >= e / 10)) })
                .collect(),
            range_accesses: (0..ranges).map(|r| ((r * 7 + e) % 50) as u64).collect(),
            fast_hit_rate: Some(0.3 + e as f64 / 200.0),
            bytes_migrated: if e % 10 == 0 { 1 << 20 } else { 0 },
        })
        .collect();
    PlacementTimeline {
        title: "gups under hemem, profile optane".into(),
        tier_names: vec!["DRAM".into(), "Optane".into()],
        footprint_bytes: 64 << 20,
        range_bytes: 1 << 20,
        epochs,
    }
}

#[test]
fn smoke2() {
    let dir = Path::new("/tmp/plots");
    placement_over_time(&dir.join("p.svg"), &timeline()).unwrap();
    placement_over_time(&dir.join("p.png"), &timeline()).unwrap();
}

fn throughput() -> MigrationThroughput {
    let mut series = Vec::new();
    for page in ["4KiB", "2MiB"] {
        for threads in [1, 2] {
            for (k, mechanism) in ["demote", "promote", "exchange"].iter().enumerate() {
                let points = [1u32, 8, 64, 512]
                    .iter()
                    .map(|&b| {
                        (
                            b,
                            (1.0 + k as f64) * threads as f64 * (b as f64).ln_1p()
                                / if page == "4KiB" { 4.0 } else { 1.0 },
                        )
                    })
                    .collect();
                series.push(ThroughputSeries {
                    page: page.into(),
                    threads,
                    mechanism: mechanism.to_string(),
                    points,
                });
            }
        }
    }
    MigrationThroughput {
        title: "simulated optane".into(),
        series,
        memcpy: vec![(1, 10.0), (2, 18.0)],
        memcpy_label: "memcpy 0->1".into(),
    }
}

#[test]
fn smoke3() {
    let dir = Path::new("/tmp/plots");
    migration_throughput(&dir.join("m.svg"), &throughput()).unwrap();
    migration_throughput(&dir.join("m.png"), &throughput()).unwrap();
}
