//! The runtime's overhead on an allocation-heavy program (tests/c/bench.c), and the memory per
//! object record. Ignored by default (it takes about a minute and wants a quiet machine):
//!
//! ```text
//! cargo test --release -p terrace-alloc --test bench -- --ignored --nocapture
//! ```
//!
//! Three configurations, run in turn so that drift hits them alike: the system allocator alone;
//! the runtime without a ring (own mappings, no events); the runtime with a ring that a reader
//! thread here drains every millisecond (what `terrace run --objects` does). Figures: the mean
//! loop time of each, the runtime's overhead over the system allocator, and the events' own
//! overhead (ring against no ring), which is what the seed's 2.8% profiling overhead measures
//! (object tiering §5.1: MD profiling against bkmalloc alone).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use terrace_alloc_ring::{Ring, RING_ENV};

fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("libterrace_alloc.so")
}

fn seconds(out: &[u8]) -> f64 {
    let s = String::from_utf8_lossy(out);
    let w: Vec<&str> = s.split_whitespace().collect();
    let i = w.iter().position(|x| *x == "seconds").expect("bench output");
    w[i + 1].parse().unwrap()
}

#[test]
#[ignore]
fn overhead_and_record_size() {
    let dir = std::env::temp_dir().join(format!("terrace-alloc-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("bench.c");
    std::fs::write(&src, include_str!("c/bench.c")).unwrap();
    let exe = dir.join("bench");
    assert!(Command::new("cc").args(["-O2", "-o"]).arg(&exe).arg(&src).status().unwrap().success());
    let ops = std::env::var("TERRACE_BENCH_OPS").unwrap_or_else(|_| "2000000".into());
    let runs: usize = std::env::var("TERRACE_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let ring_path = dir.join("ring");
    let mut times = [vec![], vec![], vec![]];
    let mut events = 0u64;
    let mut dropped = 0u64;
    for _ in 0..runs {
        for (cfg, t) in times.iter_mut().enumerate() {
            let mut cmd = Command::new(&exe);
            cmd.args(["churn", &ops]).env_remove("LD_PRELOAD").env_remove(RING_ENV);
            if cfg >= 1 {
                cmd.env("LD_PRELOAD", library());
            }
            let reader = (cfg == 2).then(|| {
                let ring = Ring::create(&ring_path, 1 << 16, 4096).unwrap();
                cmd.env(RING_ENV, &ring_path);
                let stop = Arc::new(AtomicBool::new(false));
                let s2 = stop.clone();
                let h = std::thread::spawn(move || {
                    let mut ring = ring;
                    let mut n = 0u64;
                    let mut buf = Vec::with_capacity(1 << 16);
                    loop {
                        let last = s2.load(Ordering::Acquire);
                        buf.clear();
                        n += ring.drain(&mut buf, usize::MAX) as u64;
                        if last {
                            return (n, ring.dropped());
                        }
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                });
                (stop, h)
            });
            let out = cmd.output().unwrap();
            assert!(out.status.success());
            t.push(seconds(&out.stdout));
            if let Some((stop, h)) = reader {
                stop.store(true, Ordering::Release);
                let (n, d) = h.join().unwrap();
                events += n;
                dropped += d;
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (base, rt, ring) = (mean(&times[0]), mean(&times[1]), mean(&times[2]));
    println!("churn {ops} ops, {runs} runs each (mean seconds):");
    println!("  system allocator          {base:.4}  {:?}", times[0]);
    println!("  runtime, no ring          {rt:.4}  {:?}", times[1]);
    println!("  runtime, ring + reader    {ring:.4}  {:?}", times[2]);
    println!("  runtime overhead over the system allocator: {:+.1}%", (ring / base - 1.0) * 100.0);
    println!("  events' overhead (ring against no ring):    {:+.1}%", (ring / rt - 1.0) * 100.0);
    println!("  events drained {events}, dropped {dropped}");
    for n in ["1000", "100000"] {
        let out = Command::new(&exe).args(["records", n]).env("LD_PRELOAD", library()).output().unwrap();
        let s = String::from_utf8_lossy(&out.stdout);
        let kb: f64 = s.split_whitespace().last().unwrap().parse().unwrap();
        let per = kb * 1024.0 / n.parse::<f64>().unwrap();
        println!("  side table resident with {n} live objects of 4-16 KiB: {kb} KiB, {per:.0} B per object");
    }
    println!("  record sizes: side-table entry 32 B per live object; ring event 64 B per alloc or free (transient)");
    let _ = std::fs::remove_dir_all(&dir);
}
