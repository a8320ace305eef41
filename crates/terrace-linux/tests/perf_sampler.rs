//! The perf sampler's machinery (events per thread and CPU, inherited by later threads, ring
//! buffers, record parsing, data addresses) on a real child, with the software page-fault event:
//! no machine here has a PMU with PEBS or IBS, so the load/store events themselves cannot run.
//! perf_event_open may be refused (perf_event_paranoid, a container's seccomp filter), so the test
//! is ignored by default and the guest (tests/vm) runs it with `--include-ignored`.
//!
//! The live tracker keeps a sample only if it is the program's own (`observe_samples`: the events
//! are inherited by the processes the program starts, whose addresses are another address
//! space's), so each sample must carry its process, not its thread: the child's second thread's
//! samples must say the child, and a process it forks must say itself.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use terrace_linux::trackers::perf_sampler::{PerfSampler, SampledEvent};
use terrace_model::AccessKind;

const CHILD: &str = "TERRACE_PERF_SAMPLER_CHILD";
const PAGES: usize = 48;
/// Pages after the child's that only a process it forks touches.
const FORKED_PAGES: usize = 16;

/// The child: maps 48 + 16 untouched pages (no huge pages), prints their address, waits for a
/// line on stdin, then first-touches the 48, half from a second thread; then forks a process that
/// first-touches the other 16 in its own copy of the mapping, waits for it and exits.
#[test]
#[ignore = "a child process that the test in this file starts (with --ignored); not a test of its own"]
fn child_toucher() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    use nix::sys::mman::{madvise, mmap_anonymous, MapFlags, MmapAdvise, ProtFlags};
    let len = (PAGES + FORKED_PAGES) * 4096;
    let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
    // SAFETY: a fresh private anonymous mapping, used only below.
    let p = unsafe { mmap_anonymous(None, len.try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }.unwrap();
    // SAFETY: advice on the mapping above.
    unsafe { madvise(p, len, MmapAdvise::MADV_NOHUGEPAGE) }.unwrap();
    let base = p.as_ptr() as usize;
    println!("{base:#x}");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let touch = move |from: usize, to: usize| {
        for i in from..to {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile((base + i * 4096) as *mut u8, 1) };
        }
    };
    std::thread::spawn(move || touch(PAGES / 2, PAGES)).join().unwrap();
    touch(0, PAGES / 2);
    // SAFETY: the forked process only stores to its copy of the mapping and leaves with _exit,
    // calling nothing that another thread of this process could have held a lock in.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            touch(PAGES, PAGES + FORKED_PAGES);
            // SAFETY: ends the forked process at once, as a child of fork must.
            unsafe { libc::_exit(0) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
            println!("forked {child}");
        }
    }
    std::process::exit(0);
}

#[test]
#[ignore = "needs perf_event_open (software events): runs in the guest (tests/vm)"]
fn every_first_touch_is_sampled_with_its_address_from_every_thread() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_toucher", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("0x") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended before printing its address");
    }
    let base = u64::from_str_radix(line.split("0x").nth(1).unwrap().trim(), 16).unwrap();
    let events = [SampledEvent::page_faults(AccessKind::Write)];
    let mut sampler = match PerfSampler::open(child.id() as i32, &events, 1) {
        Ok(s) => s,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("perf_event_open refused software sampling here ({e}); the guest (tests/vm) runs this");
        }
    };
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut forked = None;
    line.clear();
    while out.read_line(&mut line).unwrap() > 0 {
        if let Some(pid) = line.trim().strip_prefix("forked ") {
            forked = pid.parse::<u32>().ok();
        }
        line.clear();
    }
    assert!(child.wait().unwrap().success());
    let forked = forked.expect("the child printed the pid it forked");
    let mut per_page = vec![0u32; PAGES + FORKED_PAGES];
    let (mut kinds, mut whose) = (Vec::new(), Vec::new());
    sampler.drain(|from, addr, kind| {
        if addr >= base && addr < base + ((PAGES + FORKED_PAGES) as u64) * 4096 {
            let page = ((addr - base) / 4096) as usize;
            per_page[page] += 1;
            kinds.push(kind);
            whose.push((page, from));
        }
    });
    eprintln!("samples per page: {per_page:?}");
    assert!(
        per_page.iter().all(|&n| n == 1),
        "each first touch once, the forked process's too: {per_page:?}"
    );
    assert!(kinds.iter().all(|&k| k == AccessKind::Write));
    for (page, from) in whose {
        let want = if page < PAGES { child.id() } else { forked };
        assert_eq!(from, Some(want), "page {page}'s sample names its process (the child is {})", child.id());
    }
}
