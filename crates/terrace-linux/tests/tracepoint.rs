//! A trace event read through perf's per-CPU tracepoint events, on this host: it records only
//! what its filter lets through, every record, in order. (DAMON's own event is read the same way
//! in the guest, tests/vm case 40: this host's DAMON is held by its proactive reclaim.)

use std::time::{Duration, Instant};
use terrace_linux::tracepoint::{Record, TracepointEvents};

/// Whether this host can trace (root); in CI it must.
fn can_trace() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "tracing needs root: the CI host must give it");
    eprintln!("skipped: tracing needs root");
    false
}

#[test]
fn the_filtered_events_of_one_thread_come_whole_and_in_order() {
    if !can_trace() {
        return;
    }
    let me = nix::unistd::gettid().as_raw();
    // Forks by this thread only: the test harness's other threads fork too.
    let mut events = TracepointEvents::open("sched", "sched_process_fork", &format!("parent_pid == {me}"))
        .expect("the tracepoint opens");
    let child_pid = events.format.field("child_pid").expect("sched_process_fork has child_pid");
    let parent_pid = events.format.field("parent_pid").expect("and parent_pid");
    // Another thread's forks, which the filter must keep out (its own creation is a fork of
    // this thread's).
    let thread = std::thread::spawn(|| {
        for _ in 0..2 {
            std::process::Command::new("true").status().expect("true runs");
        }
        nix::unistd::gettid().as_raw() as u64
    })
    .join()
    .unwrap();
    let mut children = vec![thread];
    for _ in 0..3 {
        let mut c = std::process::Command::new("true").spawn().expect("true runs");
        children.push(c.id() as u64);
        c.wait().unwrap();
    }
    let (mut got, mut lost) = (Vec::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < children.len() && Instant::now() < deadline {
        events
            .read(Duration::from_millis(200), |r| match r {
                Record::Event(raw) => got.push((parent_pid.read(raw), child_pid.read(raw))),
                Record::Lost(n) => lost += n,
            })
            .expect("the rings read");
    }
    assert_eq!(lost, 0);
    let want: Vec<_> = children.iter().map(|&c| (Some(me as u64), Some(c))).collect();
    assert_eq!(got, want, "one record per fork of this thread, in order, and no other");
}

#[test]
fn an_event_the_kernel_lacks_is_refused_by_name() {
    if !can_trace() {
        return;
    }
    let e = TracepointEvents::open("sched", "no_such_event", "common_pid == 1").err().expect("refused");
    assert_eq!(e.to_string(), "this kernel has no sched:no_such_event trace event");
}

#[test]
fn a_filter_the_kernel_cannot_parse_is_refused() {
    if !can_trace() {
        return;
    }
    let e =
        TracepointEvents::open("sched", "sched_process_fork", "no_such_field == 1").err().expect("refused");
    assert!(
        e.to_string().starts_with("perf refused the filter 'no_such_field == 1' of sched:sched_process_fork"),
        "{e}"
    );
}
