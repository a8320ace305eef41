//! The machine contract (`terrace_model::contract`) on the live machine: the same plans the
//! simulated machine's tests send, to a real child with pages on both nodes, with the same
//! expected accounting, placement afterwards and refusals. Needs two NUMA nodes, so on a
//! one-node host it is ignored, and the guest runs it (tests/vm, the kernel-tests case).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use terrace_linux::config::Config;
use terrace_linux::machine::{LiveMachine, Target};
use terrace_model::{Machine, Requirements};

const CHILD: &str = "TERRACE_CONTRACT_CHILD";
const PAGES: usize = 16;

/// The child: 16 pages, the first half moved to the fast node and the second to the slow one,
/// then it waits (until killed, or a minute if its parent died first) and never touches them again.
#[test]
#[ignore = "a child process that the test in this file starts (with --ignored); not a test of its own"]
fn child_contract() {
    let Some(nodes) = std::env::var_os(CHILD) else { return };
    let nodes: Vec<i32> = nodes.to_str().unwrap().split(',').map(|n| n.parse().unwrap()).collect();
    let buf = vec![7u8; (PAGES + 1) * 4096];
    let base = (buf.as_ptr() as u64 + 4095) & !4095;
    let addrs: Vec<u64> = (0..PAGES as u64).map(|p| base + p * 4096).collect();
    let targets: Vec<i32> = (0..PAGES).map(|p| nodes[usize::from(p >= PAGES / 2)]).collect();
    let mut status = vec![0i32; PAGES];
    terrace_linux::numa_sys::move_pages(0, &addrs, &targets, &mut status, 0).unwrap();
    assert!(status.iter().zip(&targets).all(|(s, t)| s == t), "placed {status:?}, asked {targets:?}");
    println!("ready");
    std::thread::sleep(std::time::Duration::from_secs(60));
    std::hint::black_box(&buf);
}

#[test]
#[ignore = "needs two NUMA nodes: runs in the guest (tests/vm)"]
fn the_live_machine_keeps_the_machine_contract() {
    let tiers = terrace_linux::daemon::live_tiers(&Config::default()).expect("a host with two memory tiers");
    let nodes = format!("{},{}", tiers[0].nodes[0], tiers[1].nodes[0]);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_contract", "--nocapture", "--test-threads", "1"])
        .env(CHILD, nodes)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // libtest prints "test child_contract ... " before the test runs, so "ready" ends that line.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.trim_end().ends_with("ready"))),
        "the child did not place its pages"
    );
    let pid = child.id() as i32;
    let mut m = LiveMachine::attach(Target::Pid(pid), tiers, false).unwrap();
    m.prepare(&Requirements::default()).unwrap();
    let failures = terrace_model::contract::check(&mut m);
    let _ = child.kill();
    let _ = child.wait();
    assert!(failures.is_empty(), "{failures:#?}");
}
