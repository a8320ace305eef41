//! The fault sampler on a real child: Terrace starts it stopped at exec, has it create a
//! userfaultfd, lets it run, and the live machine's observations report the pages it writes as
//! write samples, and no page it leaves alone; the child checks its own data at the end. It needs
//! userfaultfd write-protect and ptrace, so it is ignored by default and the guest (tests/vm) runs
//! it with `--include-ignored`, where it must pass; so may any host that allows both. Placement
//! across two real nodes is tested in the guest's cases too.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use terrace_linux::machine::{LiveMachine, Target};
use terrace_linux::remote_syscall::spawn_stopped;
use terrace_linux::topology::LiveTier;
use terrace_linux::userfaultfd::{probe_write_protect, Userfaultfd};
use terrace_model::{AccessKind, Machine, Requirements, Tier, TierId, TierKind, TrackerRequest};

const CHILD: &str = "TERRACE_FAULT_SAMPLER_CHILD";
const PAGES: usize = 64;
const HOT: usize = 8;

/// The child: touches 64 pages, prints their address, writes the first 8 for two seconds, then
/// checks every page holds what it wrote last and exits 0 (3 if not).
#[test]
#[ignore = "a child process that the test in this file starts (with --ignored); not a test of its own"]
fn child_writer() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let mut buf = vec![0u64; PAGES * 512 + 512];
    let base = (buf.as_ptr() as usize + 4095) & !4095;
    let off = (base - buf.as_ptr() as usize) / 8;
    for p in 0..PAGES {
        buf[off + p * 512] = p as u64;
    }
    println!("{base:#x}");
    let end = Instant::now() + Duration::from_secs(2);
    let mut n = 1u64;
    while Instant::now() < end {
        for p in 0..HOT {
            buf[off + p * 512 + 1] = n + p as u64;
        }
        n += HOT as u64;
        std::hint::black_box(&mut buf);
    }
    let n = n - HOT as u64;
    let ok = (0..PAGES).all(|p| buf[off + p * 512] == p as u64)
        && (0..HOT).all(|p| buf[off + p * 512 + 1] == n + p as u64)
        && (HOT..PAGES).all(|p| buf[off + p * 512 + 1] == 0);
    std::process::exit(if ok { 0 } else { 3 });
}

fn tier(id: u8, kind: TierKind) -> Tier {
    Tier {
        id: TierId(id),
        name: format!("tier{id}"),
        kind,
        capacity_pages: None,
        read_latency_ns: None,
        read_bandwidth_gb_s: None,
        write_bandwidth_gb_s: None,
    }
}

#[test]
#[ignore = "needs userfaultfd write-protect and ptrace: runs in the guest (tests/vm)"]
fn written_pages_come_back_as_write_samples_and_idle_ones_do_not() {
    if let Err(u) = probe_write_protect() {
        panic!("no userfaultfd write-protect here ({}); this test runs in the guest (tests/vm)", u.detail);
    }
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "child_writer", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped());
    let (mut child, stopped) = spawn_stopped(&mut cmd).unwrap_or_else(|e| {
        panic!("cannot trace a child here ({e}); this test runs in the guest (tests/vm)")
    });
    let uffd = stopped.create_userfaultfd().expect("a userfaultfd inside the child");
    stopped.release().expect("the child runs on");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let tiers = vec![
        LiveTier { tier: tier(0, TierKind::Dram), nodes: vec![0] },
        LiveTier { tier: tier(1, TierKind::Cxl), nodes: vec![1] },
    ];
    let mut m = LiveMachine::attach(Target::Child(child), tiers, true).unwrap();
    m.set_fault_source(Userfaultfd::from_fd(uffd), 1 << 20);
    let req = Requirements { trackers: vec![TrackerRequest::sampling(1)], ..Requirements::default() };
    m.prepare(&req).expect("sampling starts");
    // The test harness prints its own words first, on the same line.
    let mut line = String::new();
    while !line.contains("0x") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended before printing its address");
    }
    let hex = line.split("0x").nth(1).unwrap().trim();
    let base = u64::from_str_radix(hex, 16).expect("the child's address");

    let mut per_page = vec![0u32; PAGES];
    let (mut observe_time, mut observations) = (Duration::ZERO, 0u32);
    let end = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
        let t0 = Instant::now();
        let obs = m.observe();
        observe_time += t0.elapsed();
        observations += 1;
        let writes: Vec<u32> =
            obs.samples.iter().filter(|s| s.kind == AccessKind::Write).map(|s| s.page).collect();
        for page in writes {
            if let Some(addr) = m.page_address(page) {
                if addr >= base && addr < base + (PAGES as u64) * 4096 {
                    per_page[((addr - base) / 4096) as usize] += 1;
                }
            }
        }
    }
    let status = loop {
        if let terrace_model::Progress::Finished { .. } = m.advance(u64::MAX) {
            break m.exit_status();
        }
    };
    eprintln!("write samples per page of the child's buffer: {per_page:?}");
    eprintln!("{observations} observations, {:?} each", observe_time / observations.max(1));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "the child's data check failed");
    assert!(per_page[..HOT].iter().all(|&n| n >= 5), "hot pages sampled too rarely: {per_page:?}");
    assert!(per_page[HOT..].iter().all(|&n| n == 0), "idle pages reported written: {per_page:?}");
}
