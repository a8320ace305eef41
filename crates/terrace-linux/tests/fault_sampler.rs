//! The fault sampler on a real child: Terrace starts it stopped at exec, has it create a
//! userfaultfd, lets it run, and the live machine's observations report the pages it writes as
//! write samples, and no page it leaves alone; the child checks its own data at the end. It needs
//! userfaultfd write-protect and ptrace, so it is ignored by default and the guest (tests/vm) runs
//! it with `--include-ignored`, where it must pass; so may any host that allows both. Placement
//! across two real nodes is tested in the guest's cases too. The same goes for the program a
//! wrapper execs (the sampler follows it with a descriptor made inside the running program), and
//! for making one inside a running program with several threads.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use terrace_linux::machine::{LiveMachine, Target};
use terrace_linux::remote_syscall::{create_userfaultfd_in_running, spawn_stopped};
use terrace_linux::topology::LiveTier;
use terrace_linux::userfaultfd::{probe_write_protect, Userfaultfd};
use terrace_model::{AccessKind, Machine, Requirements, Tier, TierId, TierKind, TrackerRequest};

const CHILD: &str = "TERRACE_FAULT_SAMPLER_CHILD";
const THREADS_CHILD: &str = "TERRACE_INJECTION_THREADS_CHILD";
const PAGES: usize = 64;
const HOT: usize = 8;

/// The child: touches 64 pages, prints their address, writes the first 8 for 3.5 seconds, then
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
    let end = Instant::now() + Duration::from_millis(3500);
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

/// What the machine saw of `child_writer`: write samples per page of its buffer, and its stats.
struct Seen {
    per_page: Vec<u32>,
    execs_followed: u64,
    trackers_lost: u64,
}

/// Runs `child_writer` under the live machine with the fault sampler, through `wrapper` (a
/// command that execs the rest of its arguments) if given; asserts that it checked its data.
fn run_writer(wrapper: &[&str]) -> Seen {
    if let Err(u) = probe_write_protect() {
        panic!("no userfaultfd write-protect here ({}); this test runs in the guest (tests/vm)", u.detail);
    }
    let exe = std::env::current_exe().unwrap();
    let mut cmd = match wrapper.split_first() {
        None => Command::new(&exe),
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(&exe);
            c
        }
    };
    cmd.args(["--ignored", "--exact", "child_writer", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped());
    let (mut child, stopped) = spawn_stopped(&mut cmd).unwrap_or_else(|e| {
        panic!("cannot trace a child here ({e}); this test runs in the guest (tests/vm)")
    });
    let uffd = stopped.create_userfaultfd().expect("a userfaultfd inside the child");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let tiers = vec![
        LiveTier { tier: tier(0, TierKind::Dram), nodes: vec![0] },
        LiveTier { tier: tier(1, TierKind::Cxl), nodes: vec![1] },
    ];
    // Attached while the child is stopped, as `terrace run` does, so that a wrapper's exec,
    // however soon, is seen.
    let mut m = LiveMachine::attach(Target::Child(child), tiers, true).unwrap();
    stopped.release().expect("the child runs on");
    m.set_fault_source(Userfaultfd::from_fd(uffd), 1 << 20, std::time::Duration::from_millis(1));
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
    // Long enough for the first full scan to find the buffer and the sampler to re-arm many
    // times, even when an emulated, loaded guest makes Terrace space its scans (at most 1 s).
    let end = Instant::now() + Duration::from_millis(3000);
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
    Seen { per_page, execs_followed: m.stats().execs_followed, trackers_lost: m.stats().trackers_lost }
}

#[test]
#[ignore = "needs userfaultfd write-protect and ptrace: runs in the guest (tests/vm)"]
fn written_pages_come_back_as_write_samples_and_idle_ones_do_not() {
    let per_page = run_writer(&[]).per_page;
    assert!(per_page[..HOT].iter().all(|&n| n >= 5), "hot pages sampled too rarely: {per_page:?}");
    assert!(per_page[HOT..].iter().all(|&n| n == 0), "idle pages reported written: {per_page:?}");
}

/// Started through a wrapper that execs it, the program gets a userfaultfd of its own address
/// space made inside it while it runs: its writes are sampled as a direct start's are.
#[test]
#[ignore = "needs userfaultfd write-protect and ptrace: runs in the guest (tests/vm)"]
fn the_sampler_follows_the_program_a_wrapper_execs() {
    let seen = run_writer(&["/bin/sh", "-c", "exec \"$0\" \"$@\""]);
    let per_page = &seen.per_page;
    assert_eq!((seen.execs_followed, seen.trackers_lost), (1, 0), "the exec was not followed");
    assert!(per_page[..HOT].iter().all(|&n| n >= 5), "hot pages sampled too rarely: {per_page:?}");
    assert!(per_page[HOT..].iter().all(|&n| n == 0), "idle pages reported written: {per_page:?}");
}

/// A child with several threads, all computing over their own data for two seconds (the test
/// harness's main thread waits for them, blocked in a futex). Exit 0 if every result is right.
#[test]
#[ignore = "a child process that the test in this file starts (with --ignored); not a test of its own"]
fn child_threads() {
    if std::env::var_os(THREADS_CHILD).is_none() {
        return;
    }
    fn work(seed: u64, until: Instant) -> bool {
        let mut data: Vec<u64> = (0..100_000).map(|i| i ^ seed).collect();
        let mut rounds = 0u64;
        while Instant::now() < until || rounds == 0 {
            for x in data.iter_mut() {
                *x = x.wrapping_add(1);
            }
            rounds += 1;
            std::hint::black_box(&mut data);
        }
        data.iter().enumerate().all(|(i, &x)| x == (i as u64 ^ seed).wrapping_add(rounds))
    }
    let until = Instant::now() + Duration::from_secs(2);
    let workers: Vec<_> = (0..3u64).map(|s| std::thread::spawn(move || work(s, until))).collect();
    println!("ready");
    let mine = work(9, until);
    let theirs = workers.into_iter().all(|w| w.join().unwrap());
    std::process::exit(if mine && theirs { 0 } else { 3 });
}

/// Userfaultfds are made inside a running child with several threads whose main thread is
/// (mostly) blocked in a system call (libtest's, waiting for the test thread): the others compute
/// on undisturbed, every result is right, the child keeps no descriptor and is left untraced.
#[test]
#[ignore = "needs ptrace of a child: runs in the guest (tests/vm)"]
fn a_userfaultfd_is_made_inside_a_running_program_with_threads() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_threads", "--nocapture", "--test-threads", "1"])
        .env(THREADS_CHILD, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended before it was ready");
    }
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count();
    assert!(threads >= 5, "the child has {threads} threads");
    let mut fds = Vec::new();
    for _ in 0..5 {
        // Mostly the main thread is blocked in a futex; under load it may be running.
        let end = Instant::now() + Duration::from_millis(200);
        while Instant::now() < end {
            let now = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            if now.starts_with(&format!("{} ", libc::SYS_futex)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        fds.push(create_userfaultfd_in_running(pid as i32).unwrap_or_else(|e| {
            panic!("cannot make a userfaultfd inside pid {pid} ({e}); this test needs ptrace: runs in the guest (tests/vm)")
        }));
        std::thread::sleep(Duration::from_millis(100));
    }
    for fd in fds {
        // A working userfaultfd (of the child's address space).
        assert!(Userfaultfd::from_fd(fd).handshake(0).is_ok());
    }
    let kept = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|l| l.to_string_lossy().contains("userfaultfd"))
        .count();
    assert_eq!(kept, 0, "the child kept a userfaultfd of its own");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "the child is left traced");
    assert_eq!(child.wait().unwrap().code(), Some(0), "a thread's computation went wrong");
}
