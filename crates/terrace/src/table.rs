//! How results look to a person: human units, one row per run, and progress bars.

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use terrace_sim::{human_bytes, RunReport};

pub fn human_time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Joules with a prefix that keeps three significant figures in view.
pub fn human_energy(j: f64) -> String {
    if j >= 1.0 {
        format!("{j:.2} J")
    } else if j >= 1e-3 {
        format!("{:.2} mJ", j * 1e3)
    } else {
        format!("{:.1} µJ", j * 1e6)
    }
}

/// The fast tier's size and its share of the footprint ("12.0 MiB 25%").
pub fn fast_tier(r: &RunReport) -> String {
    format!("{} {:.0}%", human_bytes(r.fast_capacity_bytes), 100.0 * r.fast_share_of_footprint())
}

pub fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

pub fn print_report(r: &RunReport) {
    println!("workload            {}", r.workload);
    println!("policy              {}", r.policy);
    println!("profile             {}", r.profile);
    println!("footprint           {}", human_bytes(r.footprint_bytes));
    println!("fast tier           {} of the footprint", fast_tier(r));
    println!("accesses            {}", r.accesses);
    println!("run time            {}", human_time(r.runtime_ns));
    // Several programs shared the machine: each one's own run.
    for p in &r.programs {
        println!(
            "  program {:<12} priority {}, {} (from {} to {})",
            p.name,
            p.priority,
            human_time(p.runtime_ns()),
            human_time(p.start_ns),
            human_time(p.end_ns)
        );
        println!(
            "    fast-tier hits reads {}  writes {}; stalled {}; slowed {} by copies, {} by the others; its pages promoted {}, demoted {}",
            percent(p.fast_read_hit_rate()),
            percent(p.fast_write_hit_rate()),
            human_time(p.stall_ns),
            human_time(p.copy_load_ns),
            human_time(p.others_load_ns),
            p.pages_promoted,
            p.pages_demoted
        );
    }
    println!(
        "fast-tier hits      reads {}  writes {}",
        percent(r.fast_read_hit_rate()),
        percent(r.fast_write_hit_rate())
    );
    println!("slow-tier written   {}", human_bytes(r.slow_bytes_written()));
    if r.tiers.len() > 2 {
        // Beyond two tiers, where the accesses went and how full each tier got.
        let all: u64 = r.tiers.iter().map(|t| t.reads + t.writes).sum::<u64>().max(1);
        for (i, t) in r.tiers.iter().enumerate() {
            let capacity =
                t.capacity_pages.map_or("unbounded".to_string(), |c| human_bytes(c * r.page_bytes));
            println!(
                "tier {i}              {} of the accesses, peak {} of {capacity}",
                percent((t.reads + t.writes) as f64 / all as f64),
                human_bytes(t.peak_pages * r.page_bytes),
            );
        }
    }
    println!(
        "migrated            {} ({} pages of {}, {} failed, {} not done when the program ended)",
        human_bytes(r.bytes_migrated),
        r.pages_migrated,
        human_bytes(r.page_bytes),
        r.failed_moves,
        r.pages_not_done
    );
    if r.split_page_accesses > 0 {
        println!(
            "split huge pages    {} accesses ({:.1}%) to huge pages split to move, whose TLB misses the model \
             does not charge",
            r.split_page_accesses,
            100.0 * r.split_page_accesses as f64 / r.accesses.max(1) as f64
        );
    }
    if r.pages_switched > 0 || r.shadow_peak_bytes > 0 {
        println!(
            "shadows             {} of those switched back to their shadows (no copy); at most {} held as \
             shadows; {} dropped by writes",
            r.pages_switched,
            human_bytes(r.shadow_peak_bytes),
            r.shadows_dropped
        );
    }
    let each: Vec<String> = r.mover_ns.iter().map(|&ns| human_time(ns)).collect();
    println!("time copying        {} (its movers: {})", human_time(r.migration_ns), each.join(" + "));
    println!(
        "program waited      {} for moves (shootdowns, copies in its threads, writes)",
        human_time(r.move_wait_ns)
    );
    println!("time in tracking    {}", human_time(r.tracking_ns));
    println!("program stalls      {} ({} TLB shootdowns)", human_time(r.stall_ns), r.tlb_shootdowns);
    if r.objects.allocated + r.objects.freed > 0 {
        // Only for a workload with object events, so other reports read as before.
        println!(
            "objects             {} allocated, {} freed, {} placed by site advice",
            r.objects.allocated,
            r.objects.freed,
            human_bytes(r.objects.bytes_placed_by_advice)
        );
    }
    println!("energy              {}", human_energy(r.energy_j));
}

/// Columns of the comparison table.
pub const COLUMNS: usize = 15;

/// The comparison table's columns ([`LEGEND`] says what the less obvious ones mean).
pub const HEADER: [&str; COLUMNS] = [
    "workload",
    "fast tier",
    "policy",
    "run time",
    "vs first-touch",
    "to ceiling",
    "fast hit R",
    "fast hit W",
    "slow written",
    "migrated",
    "not done",
    "t migrate",
    "t wait",
    "t track",
    "energy",
];

/// What the migration columns mean, printed under the table (docs/model.md §4, "Movers").
pub const LEGEND: &str = "\
migrated: bytes whose copies completed; not done: pages still being copied when the program ended
  (not counted as migrated)
t migrate: time movers spent copying (the policy's thread, a kernel thread or copy engine, or the
  faulting program threads, summed)
t wait: program time lost to moves (TLB shootdowns, copies in its faulting threads, writes waiting
  for protected copies), part of the run time; t track: tracker CPU time
to ceiling: how much longer the run took than `optimal`'s, the offline ceiling (docs/model.md §12):
  what the policy leaves on the table";

pub fn row(r: &RunReport, speedup: Option<f64>, headroom: Option<f64>) -> [String; COLUMNS] {
    [
        r.workload.clone(),
        fast_tier(r),
        r.policy.clone(),
        human_time(r.runtime_ns),
        speedup.map_or("-".into(), |s| format!("{s:.2}x")),
        headroom.map_or("-".into(), |h| format!("{:+.0}%", 100.0 * h)),
        percent(r.fast_read_hit_rate()),
        percent(r.fast_write_hit_rate()),
        human_bytes(r.slow_bytes_written()),
        human_bytes(r.bytes_migrated),
        r.pages_not_done.to_string(),
        human_time(r.migration_ns),
        human_time(r.move_wait_ns),
        human_time(r.tracking_ns),
        human_energy(r.energy_j),
    ]
}

/// Prints the header and rows with columns padded to their widest cell (a grid prints several
/// such tables, and one [`LEGEND`] under them).
pub fn rows_text(rows: &[[String; COLUMNS]]) -> String {
    let mut width = HEADER.map(str::len);
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&width)
            .enumerate()
            .map(|(i, (c, w))| if i == 0 || i == 2 { format!("{c:<w$}") } else { format!("{c:>w$}") })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut text = line(HEADER.to_vec());
    for r in rows {
        text += &line(r.iter().map(String::as_str).collect());
    }
    text
}

/// Runs `work` with a progress bar over `total` accesses, shown only on a terminal.
pub fn with_progress<T>(total: u64, work: impl FnOnce(Arc<AtomicU64>) -> T) -> T {
    let counter = Arc::new(AtomicU64::new(0));
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {percent}% of {human_len} accesses, eta {eta}",
        )
        .expect("static template"),
    );
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (bar, counter, done) = (bar.clone(), counter.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                bar.set_position(counter.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let out = work(counter);
    done.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    bar.finish_and_clear();
    out
}
