//! `--plot FILE`: gathers what `compare`, `sim` and `bench migrate` computed into the plain data
//! terrace-plot draws (the drawing itself is there).

use anyhow::Result;
use std::path::Path;
use terrace_plot::{MigrationThroughput, PlacementEpoch, PlacementTimeline, Speedups, ThroughputSeries};
use terrace_sim::bench_grid::{GridFigure, GridOp};
use terrace_sim::{Profile, RunReport, Timeline};

/// Refuses a `--plot` file of a format it cannot write, before anything long runs.
pub fn check(path: Option<&Path>) -> Result<()> {
    if let Some(p) = path {
        terrace_plot::Format::of(p)?;
    }
    Ok(())
}

/// `terrace compare --plot`: each run's speedup over first-touch on its workload, one group of
/// bars per workload, in the order the runs came.
pub fn compare(path: &Path, machine: &str, reports: &[RunReport]) -> Result<()> {
    let mut workloads: Vec<String> = Vec::new();
    let mut policies: Vec<String> = Vec::new();
    for r in reports {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
        if !policies.contains(&r.policy) {
            policies.push(r.policy.clone());
        }
    }
    let runtime =
        |w: &str, p: &str| reports.iter().find(|r| r.workload == w && r.policy == p).map(|r| r.runtime_ns);
    let speedup = workloads
        .iter()
        .map(|w| {
            let reference = runtime(w, "first-touch");
            policies.iter().map(|p| Some(reference? / runtime(w, p)?)).collect()
        })
        .collect();
    let title = format!("Speedup over first-touch, {machine}");
    Ok(terrace_plot::speedup_bars(path, &Speedups { title, workloads, policies, speedup })?)
}

/// `terrace sim --plot`: the run's placement over time.
pub fn sim(path: &Path, profile: &Profile, report: &RunReport, timeline: &Timeline) -> Result<()> {
    let mut start_ns = 0.0;
    let epochs = timeline
        .epochs
        .iter()
        .map(|e| {
            let epoch = PlacementEpoch {
                start_ns,
                end_ns: e.end_ns,
                tier: e.tier.clone(),
                range_accesses: e.range_accesses.clone(),
                fast_hit_rate: (e.accesses > 0).then(|| e.fast_accesses as f64 / e.accesses as f64),
                bytes_migrated: e.bytes_migrated,
            };
            start_ns = e.end_ns;
            epoch
        })
        .collect();
    let data = PlacementTimeline {
        title: format!("{} under {}, profile {}", report.workload, report.policy, profile.name),
        tier_names: profile.tiers.iter().map(|t| t.name.clone()).collect(),
        footprint_bytes: report.footprint_bytes,
        range_bytes: timeline.pages_per_range * timeline.page_bytes,
        epochs,
    };
    Ok(terrace_plot::placement_over_time(path, &data)?)
}

/// `terrace bench migrate --simulated --plot`: the model's grid, with the model's copy
/// bandwidth from tier 0 to tier 1 as the memcpy line.
pub fn simulated_migration(path: &Path, profile: &Profile, figures: &[GridFigure]) -> Result<()> {
    let mut series: Vec<ThroughputSeries> = Vec::new();
    for f in figures {
        let mechanism = match f.cell.op {
            GridOp::Demote => "demote 0->1",
            GridOp::Promote => "promote 1->0",
            GridOp::Exchange => "exchange",
        };
        let page = f.cell.page_size.to_string();
        add_point(&mut series, page, f.cell.threads, mechanism, f.cell.batch_pages, f.gb_s);
    }
    let threads = distinct_threads(&series);
    let memcpy = threads
        .iter()
        .map(|&t| (t, terrace_sim::bench_grid::copy_bandwidth_gb_s(profile, 0, 1, t)))
        .collect();
    let data = MigrationThroughput {
        title: format!("Page migration, simulated (profile {}): GB/s against batch size", profile.name),
        series,
        memcpy,
        memcpy_label: "memcpy 0->1 (model)".into(),
    };
    Ok(terrace_plot::migration_throughput(path, &data)?)
}

/// `terrace bench migrate --plot`: the cells measured on this host (the failed and the ones
/// without huge pages left out), memcpy from the source node to the destination as the line.
#[cfg(all(feature = "live", target_os = "linux"))]
pub fn live_migration(path: &Path, report: &terrace_linux::bench_migrate::Report) -> Result<()> {
    use terrace_linux::bench_migrate::Op;
    let mut series: Vec<ThroughputSeries> = Vec::new();
    for c in &report.cells {
        let Some(gb_s) = c.gb_s() else { continue };
        let mechanism = match c.cell.op {
            Op::Demote => "demote",
            Op::Promote => "promote",
            Op::Exchange => "exchange (paired)",
            Op::TwoOneWay => "two one-way",
        };
        add_point(&mut series, c.cell.page.to_string(), c.cell.threads, mechanism, c.cell.batch_pages, gb_s);
    }
    let (src, dst) = (report.source_node, report.destination_node);
    let memcpy = distinct_threads(&series)
        .into_iter()
        .filter_map(|t| report.memcpy_gb_s(t, src, dst).map(|g| (t, g)))
        .collect();
    let data = MigrationThroughput {
        title: format!("Page migration, node {src} <-> node {dst} (move_pages): GB/s against batch size"),
        series,
        memcpy,
        memcpy_label: format!("memcpy {src}->{dst}"),
    };
    Ok(terrace_plot::migration_throughput(path, &data)?)
}

/// Adds one cell's figure to its series (page size, threads, mechanism), starting it if new.
fn add_point(
    series: &mut Vec<ThroughputSeries>,
    page: String,
    threads: u32,
    mechanism: &str,
    batch: u32,
    gb_s: f64,
) {
    match series.iter_mut().find(|s| s.page == page && s.threads == threads && s.mechanism == mechanism) {
        Some(s) => s.points.push((batch, gb_s)),
        None => series.push(ThroughputSeries {
            page,
            threads,
            mechanism: mechanism.to_string(),
            points: vec![(batch, gb_s)],
        }),
    }
}

fn distinct_threads(series: &[ThroughputSeries]) -> Vec<u32> {
    let mut threads: Vec<u32> = series.iter().map(|s| s.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    threads
}

#[cfg(all(test, feature = "live", target_os = "linux"))]
mod tests {
    use super::*;

    /// The live grid's picture: the measured cells only, each mechanism a line per page size
    /// and thread count, memcpy from the source node as the line (a two-node host's figures,
    /// made up: this host may have one node).
    #[test]
    fn the_live_grid_draws_its_measured_cells_and_memcpy() {
        use terrace_linux::bench_migrate::{Cell, CellResult, MemcpyFigure, Op, Outcome, Page, Report};
        let mut cells = Vec::new();
        for page in [Page::Small, Page::Huge] {
            for batch_pages in [1, 64, 512] {
                for op in Op::ALL {
                    let outcome = if page == Page::Huge && op == Op::TwoOneWay {
                        Outcome::NoThp { reason: "no THP".into() }
                    } else {
                        let gb_s = batch_pages as f64 / 100.0 + 1.0;
                        Outcome::Measured { seconds: 1.0, gb_s, ratio_to_memcpy: gb_s / 8.0 }
                    };
                    let cell = Cell { page, threads: 1, batch_pages, op };
                    cells.push(CellResult { cell, bytes: 1 << 20, outcome });
                }
            }
        }
        let report = Report {
            source_node: 0,
            destination_node: 2,
            bytes: 8 << 20,
            thp_setting: "always".into(),
            repeat: 1,
            memcpy: vec![
                MemcpyFigure { threads: 1, from: 0, to: 2, gb_s: 8.0 },
                MemcpyFigure { threads: 1, from: 2, to: 0, gb_s: 6.0 },
            ],
            cells,
            summary: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("live.svg");
        live_migration(&path, &report).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in [
            "memcpy 0-&gt;2",
            "node 0 &lt;-&gt; node 2",
            "two one-way",
            "exchange (paired)",
            "2MiB pages, 1 thread",
        ] {
            assert!(svg.contains(text), "no '{text}'");
        }
        // Demote's colour (the first): a line in each of the 2 panels and one in the legend.
        assert_eq!(svg.matches("stroke=\"#1F77B4\"").count(), 3);
        // Two one-way (the fourth): measured for 4 KiB pages only.
        assert_eq!(svg.matches("stroke=\"#D62728\"").count(), 2);
    }
}
