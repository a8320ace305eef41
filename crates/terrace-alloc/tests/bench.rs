//! The runtime's overhead, and the memory per object record. Ignored by default (it takes a
//! few minutes and wants a quiet machine):
//!
//! ```text
//! cargo test --release -p terrace-alloc --test bench -- --ignored --nocapture
//! ```
//!
//! Three configurations, run in turn so that drift hits them alike: the system allocator alone;
//! the runtime without Terrace (no ring: own mappings, no events); the runtime with Terrace
//! attached (a ring that a reader thread here drains every millisecond, as `terrace run
//! --objects` does). Workloads: tests/c/bench.c's churn (allocation-heavy: 2M replacements in a
//! 4096-block working set, 10% of them objects of 4 KiB to 512 KiB; its own loop time), and two
//! unmodified programs timed whole: the python3 script of tests/preload.rs and `sort` of 20 MB.
//! The figure comparable to the seed's 2.8% (object tiering §5.1: profiling on, against the
//! allocator alone) is "attached against no ring"; "attached against the system allocator" is
//! the whole cost of running under Terrace's runtime.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use terrace_alloc_ring::{Ring, RING_ENV};

fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join("libterrace_alloc.so")
}

/// The "seconds" figure a program printed, else None.
fn printed_seconds(out: &[u8]) -> Option<f64> {
    let s = String::from_utf8_lossy(out);
    let w: Vec<&str> = s.split_whitespace().collect();
    let i = w.iter().position(|x| *x == "seconds")?;
    w[i + 1].parse().ok()
}

/// Runs `make()` `runs` times in each configuration; returns mean seconds per configuration and
/// the events drained per attached run.
fn measure(name: &str, ring_path: &Path, runs: usize, make: &dyn Fn() -> Command) -> ([f64; 3], f64) {
    let mut times = [vec![], vec![], vec![]];
    let mut events = 0u64;
    let mut dropped = 0u64;
    for _ in 0..runs {
        for (cfg, t) in times.iter_mut().enumerate() {
            let mut cmd = make();
            cmd.env_remove("LD_PRELOAD").env_remove(RING_ENV).env("LC_ALL", "C");
            if cfg >= 1 {
                cmd.env("LD_PRELOAD", library());
            }
            let reader = (cfg == 2).then(|| {
                let ring = Ring::create(ring_path, 1 << 16, 4096).unwrap();
                cmd.env(RING_ENV, ring_path);
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
            let start = Instant::now();
            let out = cmd.output().unwrap();
            let wall = start.elapsed().as_secs_f64();
            assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            t.push(printed_seconds(&out.stdout).unwrap_or(wall));
            if let Some((stop, h)) = reader {
                stop.store(true, Ordering::Release);
                let (n, d) = h.join().unwrap();
                events += n;
                dropped += d;
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let m = [mean(&times[0]), mean(&times[1]), mean(&times[2])];
    let per_run = events as f64 / runs as f64;
    println!("{name}: {runs} runs each, mean seconds");
    println!("  system allocator        {:.4}  {:.4?}", m[0], times[0]);
    println!("  runtime, no ring        {:.4}  {:.4?}", m[1], times[1]);
    println!("  runtime, attached       {:.4}  {:.4?}", m[2], times[2]);
    println!("  attached against the system allocator: {:+.1}%", (m[2] / m[0] - 1.0) * 100.0);
    println!("  no ring against the system allocator:  {:+.1}%", (m[1] / m[0] - 1.0) * 100.0);
    println!("  attached against no ring:              {:+.1}%", (m[2] / m[1] - 1.0) * 100.0);
    print!("  events per run {per_run:.0}, dropped {dropped}");
    if per_run > 0.0 {
        print!(", cost per event {:.0} ns", (m[2] - m[1]) / per_run * 1e9);
    }
    println!();
    (m, per_run)
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

    measure(&format!("churn {ops} ops"), &ring_path, runs, &|| {
        let mut c = Command::new(&exe);
        c.args(["churn", &ops]);
        c
    });
    let script = "
import json
words = ['w%07d-%s' % ((i * 7919) % 200003, 'x' * (i % 13)) for i in range(200000)]
words.sort()
d = {}
for i, w in enumerate(words):
    d[w[:6]] = d.get(w[:6], 0) + i
blob = json.dumps({'words': words[::7], 'd': d}, sort_keys=True)
big = [bytearray(i * 100) for i in range(1, 300)]
print(len(blob))
";
    measure("python3 script", &ring_path, runs, &|| {
        let mut c = Command::new("python3");
        c.args(["-c", script]);
        c
    });
    let input = dir.join("input.txt");
    let mut text = String::with_capacity(21 << 20);
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    while text.len() < 20 << 20 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        text.push_str(&format!("{:016x} {}\n", s, s % 1000));
    }
    std::fs::write(&input, &text).unwrap();
    measure("sort 20 MB", &ring_path, runs, &|| {
        let mut c = Command::new("sort");
        c.arg(&input).arg("-o").arg(dir.join("sorted.txt"));
        c
    });

    for n in ["1000", "100000"] {
        let out = Command::new(&exe).args(["records", n]).env("LD_PRELOAD", library()).output().unwrap();
        let s = String::from_utf8_lossy(&out.stdout);
        let kb: f64 = s.split_whitespace().last().unwrap().parse().unwrap();
        let per = kb * 1024.0 / n.parse::<f64>().unwrap();
        println!("side table resident with {n} live objects of 4-16 KiB: {kb} KiB, {per:.0} B per object");
    }
    println!(
        "record sizes: side-table entry 32 B per live object; ring event 64 B per alloc or free (transient)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
