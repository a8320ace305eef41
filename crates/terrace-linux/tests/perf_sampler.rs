//! The perf sampler's machinery (events per thread and CPU, inherited by later threads, ring
//! buffers, record parsing, data addresses) on a real child, with the software page-fault event:
//! no machine here has a PMU with PEBS or IBS, so the load/store events themselves cannot run.
//! perf_event_open may be refused (perf_event_paranoid, a container's seccomp filter), so the test
//! is ignored by default and the guest (tests/vm) runs it with `--include-ignored`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use terrace_linux::trackers::perf_sampler::{PerfSampler, SampledEvent};
use terrace_model::AccessKind;

const CHILD: &str = "TERRACE_PERF_SAMPLER_CHILD";
const PAGES: usize = 48;

/// The child: maps 48 untouched pages (no huge pages), prints their address, waits for a line on
/// stdin, then first-touches them, half from a second thread, and exits.
#[test]
#[ignore = "a child process that the test in this file starts (with --ignored); not a test of its own"]
fn child_toucher() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    use nix::sys::mman::{madvise, mmap_anonymous, MapFlags, MmapAdvise, ProtFlags};
    let len = PAGES * 4096;
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
    assert!(child.wait().unwrap().success());
    let mut per_page = vec![0u32; PAGES];
    let mut kinds = Vec::new();
    sampler.drain(|_, addr, kind| {
        if addr >= base && addr < base + (PAGES as u64) * 4096 {
            per_page[((addr - base) / 4096) as usize] += 1;
            kinds.push(kind);
        }
    });
    eprintln!("samples per page: {per_page:?}");
    assert!(per_page.iter().all(|&n| n == 1), "each first touch once: {per_page:?}");
    assert!(kinds.iter().all(|&k| k == AccessKind::Write));
}
