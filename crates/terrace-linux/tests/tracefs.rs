//! A tracefs instance of Terrace's, on this host: it records the event it enables, only as its
//! filter lets through, and is gone when dropped. (DAMON's own event is read through it in the
//! guest, tests/vm case 14: this host's DAMON is held by its proactive reclaim.)

use std::path::Path;
use std::time::{Duration, Instant};
use terrace_linux::tracefs::Instance;

/// Whether this host can trace (root); in CI it must.
fn can_trace() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "tracefs needs root: the CI host must give it");
    eprintln!("skipped: tracefs needs root");
    false
}

#[test]
fn an_instance_reads_the_filtered_event_it_enabled_and_is_removed_when_dropped() {
    if !can_trace() {
        return;
    }
    let instance = Instance::create("sched", "sched_process_fork").expect("a tracefs instance");
    let me = nix::unistd::gettid().as_raw();
    // Forks by this thread only: the test harness's other threads fork too.
    instance
        .enable("sched", "sched_process_fork", &format!("parent_pid == {me}"))
        .expect("the event enabled");
    let mut pipe = instance.pipe().expect("its trace_pipe");
    let mut children = Vec::new();
    for _ in 0..3 {
        let mut c = std::process::Command::new("true").spawn().expect("true runs");
        children.push(c.id());
        c.wait().unwrap();
    }
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while lines.len() < children.len() && Instant::now() < deadline {
        pipe.read_lines(Duration::from_millis(200), |l| lines.push(l.to_string())).expect("the pipe reads");
    }
    assert_eq!(lines.len(), children.len(), "one event per fork of this thread, and no other: {lines:?}");
    for (line, child) in lines.iter().zip(&children) {
        assert!(
            line.contains("sched_process_fork:")
                && line.split_whitespace().any(|w| w == format!("child_pid={child}")),
            "{line}"
        );
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let root =
        mounts.lines().find(|l| l.split_whitespace().nth(2) == Some("tracefs")).expect("tracefs mounted");
    let instances = Path::new(root.split_whitespace().nth(1).unwrap()).join("instances");
    let prefix = format!("terrace-{}-", std::process::id());
    let ours = || {
        std::fs::read_dir(&instances)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(&prefix))
            .count()
    };
    assert_eq!(ours(), 1, "one instance of this process's");
    drop(pipe);
    drop(instance);
    let deadline = Instant::now() + Duration::from_secs(5);
    while ours() != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ours(), 0, "the instance is removed when dropped");
}

#[test]
fn an_event_the_kernel_lacks_is_refused_by_name() {
    if !can_trace() {
        return;
    }
    let e = Instance::create("sched", "no_such_event").err().expect("refused");
    assert_eq!(e.to_string(), "this kernel has no sched:no_such_event trace event");
}
