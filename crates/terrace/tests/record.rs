//! `terrace record` on this host (root, DAMON; docs/live.md, "Recording a program") and `terrace
//! trace import-damo` (anywhere). Recording needs root and DAMON: without them these tests say
//! so and pass, except in CI (`CI` set), where the host is meant to have both and they fail.
#![cfg(all(feature = "live", target_os = "linux"))]

use assert_cmd::Command;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// DAMON serves one recording at a time: the tests that record take turns.
static DAMON: Mutex<()> = Mutex::new(());

fn terrace() -> Command {
    Command::cargo_bin("terrace").unwrap()
}

/// A program that writes a 32 MiB buffer page by page for `seconds`, then exits with `code`.
fn toucher(seconds: f64, code: i32) -> Vec<String> {
    let script = format!(
        "import sys, time\nb = bytearray(32 << 20)\nt = time.time()\nwhile time.time() - t < {seconds}:\n    \
         for i in range(0, len(b), 4096):\n        b[i] = (b[i] + 1) & 255\nsys.exit({code})\n"
    );
    vec!["python3".into(), "-c".into(), script]
}

/// Whether this host can record (root and DAMON); in CI it must.
fn can_record() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let damon = Path::new("/sys/kernel/mm/damon/admin").is_dir();
    if root && damon {
        return true;
    }
    let why = format!("terrace record needs root and DAMON here (root: {root}, DAMON: {damon})");
    assert!(std::env::var_os("CI").is_none(), "{why}: the CI host must have both");
    eprintln!("skipped: {why}");
    false
}

/// Whether a kdamond runs here already: someone else's, when asked during this test's turn.
fn damon_held() -> bool {
    terrace_linux::trackers::damon::held().is_some()
}

/// This test's turn at recording, where the host can record (`can_record`, and some tracker:
/// `nothing_records_here`). The turn is taken before those checks, so that another test's own
/// kdamond is never taken for someone else's.
fn recording_turn() -> Option<MutexGuard<'static, ()>> {
    if !can_record() {
        return None;
    }
    let turn = DAMON.lock().unwrap_or_else(|e| e.into_inner());
    (!nothing_records_here()).then_some(turn)
}

/// Whether nothing can record here because another kdamond holds DAMON and the host has no
/// other tracker (a host whose own proactive reclaim runs a kdamond, on a kernel without
/// soft-dirty, the idle-page bitmap, a PMU or asynchronous userfaultfd write-protection): then
/// `record` must be refused in one line that names DAMON's other user, which this checks. Recording itself is then covered in the guest
/// (tests/vm/cases/40-advise-against-live.sh records with DAMON and with the page-table scan).
fn nothing_records_here() -> bool {
    if !damon_held() {
        return false;
    }
    let dir = tempfile::tempdir().unwrap();
    let out =
        terrace().args(["record", "-o"]).arg(dir.path().join("t.trc")).args(["--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.contains("no tracker terrace record can use here") {
        return false;
    }
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("DAMON is in use here by another kdamond"), "{err}");
    eprintln!(
        "nothing records on this host (DAMON held by another kdamond, no other tracker): checked the refusal"
    );
    true
}

/// `terrace trace info` of `trace`: its text, asserting it read.
fn info(trace: &Path) -> String {
    let out = terrace().args(["trace", "info"]).arg(trace).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "trace info: {}", String::from_utf8_lossy(&out.stderr));
    text
}

/// The pages touched, from `trace info`'s "pages touched N (...)" line.
fn pages(info: &str) -> u64 {
    let line = info.lines().find(|l| l.starts_with("pages touched")).expect("a pages line");
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn a_recorded_program_replays_and_its_exit_code_passes_through() {
    let Some(_turn) = recording_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("prog.trc");
    let out = terrace().args(["record", "-o"]).arg(&trace).arg("--").args(toucher(1.2, 3)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "the program's exit code: {err}");
    let text = info(&trace);
    assert!(text.contains("per-page counts"), "{text}");
    if damon_held() {
        // The host's own kdamond (proactive reclaim, say) keeps DAMON: auto takes the next
        // tracker and says so (DAMON recording is then covered in the guest, case 40).
        assert!(err.contains("DAMON is in use here by another kdamond"), "{err}");
        assert!(!text.contains("recorded        with damon"), "{text}");
        // A tracker blind to reads is named as such.
        let blind =
            ["soft-dirty", "uffd-wp"].iter().any(|t| text.contains(&format!("recorded        with {t}")));
        assert_eq!(err.contains("which sees writes only: a page only read is not recorded"), blind, "{err}");
    } else {
        assert!(text.contains("recorded        with damon"), "{text}");
    }
    // The 32 MiB buffer is 8192 pages; DAMON's regions see at least part of it.
    assert!(pages(&text) > 100, "{text}");
    let sim = terrace().args(["sim", "--policy", "first-touch", "--workload"]).arg(&trace).output().unwrap();
    assert!(sim.status.success(), "sim: {}", String::from_utf8_lossy(&sim.stderr));
    // No temporary file is left beside the trace.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("prog.trc")]);
}

#[test]
fn ctrl_c_stops_the_recording_with_a_valid_trace() {
    let Some(_turn) = recording_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("cut.trc");
    // Its own process group, as a shell gives a foreground job: Ctrl-C is SIGINT to the group.
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("terrace"));
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.args(["record", "-o"]).arg(&trace).arg("--").args(toucher(30.0, 0)).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: a signal to the process group just made.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let status = child.wait().unwrap();
    // Python dies of the SIGINT (KeyboardInterrupt): 130 or 1, never the 0 it would exit with.
    assert_ne!(status.code(), Some(0), "{status:?}");
    assert!(pages(&info(&trace)) > 0);
}

#[test]
fn a_running_process_is_recorded_for_a_duration() {
    let Some(_turn) = recording_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("pid.trc");
    let args = toucher(30.0, 0);
    let mut program = std::process::Command::new(&args[0]).args(&args[1..]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = terrace()
        .args(["record", "--duration", "1.2", "--pid", &program.id().to_string(), "-o"])
        .arg(&trace)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let running = program.try_wait().unwrap().is_none();
    let _ = program.kill();
    let _ = program.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(running, "recording a process for a duration leaves it running");
    assert!(pages(&info(&trace)) > 0);
}

#[test]
fn failures_are_one_line_and_leave_no_output() {
    let Some(_turn) = recording_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("x.trc");
    // A process that is gone: a child already waited for.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let marker = dir.path().join("ran");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--pid".into(), gone.id().to_string()], "is gone"),
        (vec!["--".into(), "true".into()], "before the first 100 ms interval ended"),
        (vec!["--tracker".into(), "soft-dirty".into(), "--".into(), "true".into()], "--tracker soft-dirty"),
    ];
    for (args, says) in cases {
        let out = terrace().args(["record", "-o"]).arg(&trace).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("terrace: ")).collect();
        assert!(!out.status.success(), "{args:?}: {err}");
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(says), "{args:?}: {err}");
        assert!(!trace.exists(), "{args:?} left an output");
    }
    // An output that cannot be written is refused before the program starts.
    let out = terrace()
        .args(["record", "-o", "/nonexistent/dir/x.trc", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot write the output /nonexistent/dir/x.trc"), "{err}");
    assert!(!marker.exists(), "the program ran");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// damo's JSON record form (`damo record --output_type json`; docs/formats.md): one record, two
/// snapshots 100 ms apart, numbers as strings as damo writes them.
const DAMO_RECORD: &str = r#"[{"kdamond_idx": "0", "context_idx": "0",
  "intervals": {"sample_us": "5000", "aggr_us": "100000", "ops_update_us": "1000000"},
  "scheme_idx": null, "target_id": "0", "scheme_filters": [],
  "snapshots": [
    {"start_time": "1000000000", "end_time": "1100000000", "total_bytes": "1056768",
     "regions": [
       {"start": "140000000000000", "end": "140000000040960", "nr_accesses": {"samples": "20", "percent": null},
        "age": {"usec": null, "aggr_intervals": "3"}, "sz_filter_passed": "0"},
       {"start": "140000000040960", "end": "140000001056768", "nr_accesses": {"samples": "0", "percent": null},
        "age": {"usec": null, "aggr_intervals": "7"}, "sz_filter_passed": "0"}]},
    {"start_time": "1100000000", "end_time": "1200000000", "total_bytes": "1056768",
     "regions": [
       {"start": "140000000000000", "end": "140000000020480", "nr_accesses": {"samples": "5", "percent": null},
        "age": {"usec": null, "aggr_intervals": "0"}, "sz_filter_passed": "0"},
       {"start": "140000000020480", "end": "140000001056768", "nr_accesses": {"samples": "1", "percent": null},
        "age": {"usec": null, "aggr_intervals": "0"}, "sz_filter_passed": "0"}]}
  ]}]"#;

#[test]
fn a_damo_record_imports_as_a_trace_and_a_malformed_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("damon.json");
    std::fs::write(&report, DAMO_RECORD).unwrap();
    let trace = dir.path().join("damo.trc");
    let out = terrace().args(["trace", "import-damo"]).arg(&report).arg("-o").arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = info(&trace);
    // Snapshot 1: 10 pages at 20 samples (64 x 20 reads each) = 12800. Snapshot 2: 5 pages at 5
    // (1600) and the other 253 at 1 (64 each: 16192). The address space made dense: 258 pages.
    assert!(text.contains("accesses        30592 (30592 reads, 0 writes)"), "{text}");
    assert_eq!(pages(&text), 258, "{text}");
    assert!(text.contains("recorded        with damon (damo), one observation every 100 ms"), "{text}");
    // N = 30592 / 2 snapshots: two epochs.
    assert!(text.contains("epochs of 15296 accesses (2 epochs)"), "{text}");
    // Advice on a recording without writes says what that leaves out.
    let out = terrace().arg("advise").arg(&trace).output().unwrap();
    let advice = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(advice.contains("note         the recording tells no writes"), "{advice}");
    assert!(!advice.contains("tells no reads"), "{advice}");
    // 30,592 estimated accesses in 200 ms of recording: the replay is its compute, and even
    // all-fast gains nothing, which the advice says rather than leave "run it as it is" unqualified.
    assert!(advice.contains("run it as it is"), "{advice}");
    assert!(
        advice.contains(
            "note         even all-fast is predicted only 1.00x over first-touch, whose slower tiers serve "
        ) && advice.contains("since damon (damo) counts at least one touch (64 accesses)"),
        "{advice}"
    );
    // Where the fast tier holds every page, first-touch placed everything well: no such note.
    let out = terrace().arg("advise").arg(&trace).args(["--fast-capacity", "100%"]).output().unwrap();
    let advice = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(advice.contains("run it as it is") && !advice.contains("even all-fast"), "{advice}");

    std::fs::write(&report, r#"[{"snapshots": [{"regions": [{"start": "x", "end": 1}]}]}]"#).unwrap();
    let out = terrace().args(["trace", "import-damo"]).arg(&report).arg("-o").arg(&trace).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("snapshot 0, region 0's start is \"x\", not a number"), "{err}");
}

/// The accesses line of `trace info`: (reads, writes).
fn reads_and_writes(info: &str) -> (u64, u64) {
    let line = info.lines().find(|l| l.starts_with("accesses")).expect("an accesses line");
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    (nums[1], nums[2])
}

/// `terrace record OPTIONS -o TRACE -- COMMAND`, given `seconds`: the exit code and stderr.
fn run_record(options: &[&str], trace: &Path, command: &[&str], seconds: u64) -> (Option<i32>, String) {
    let out = terrace()
        .arg("record")
        .args(options)
        .arg("-o")
        .arg(trace)
        .arg("--")
        .args(command)
        .timeout(Duration::from_secs(seconds))
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Records `command` with `tracker`, which sees writes only and which the summary line calls
/// `label`. Where `supported`, the recording succeeds with writes and no reads, advice on it says
/// that it has no reads, and this returns how many pages it touched; where not, it is refused in one `terrace: --tracker TRACKER: ` line
/// with no trace left, and this returns that line.
fn record_writes_only(tracker: &str, label: &str, supported: bool, command: &[&str]) -> Result<u64, String> {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("writes.trc");
    let (code, err) = run_record(&["--tracker", tracker], &trace, command, 30);
    if !supported {
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("terrace: --tracker {tracker}: ")), "{err}");
        assert!(!trace.exists());
        return Err(err);
    }
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("with {label} for")), "{err}");
    let text = info(&trace);
    assert!(text.contains(&format!("recorded        with {tracker}")), "{text}");
    assert!(
        text.contains("time            each of ") && text.contains(" intervals in its own wall time at "),
        "{text}"
    );
    let (reads, writes) = reads_and_writes(&text);
    assert_eq!(reads, 0, "{tracker} sees writes only: {text}");
    assert!(writes > 0, "{text}");
    // Advice on it says what a recording without reads leaves out, and no note on writes.
    let out = terrace().arg("advise").arg(&trace).output().unwrap();
    let advice = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(advice.contains("note         the recording tells no reads"), "{advice}");
    assert!(!advice.contains("tells no writes"), "{advice}");
    Ok(pages(&text))
}

/// Without DAMON, a scan of the page table records: soft-dirty sees the pages the program writes
/// (and only those: a page only read is not seen), counted as writes. Soft-dirty needs no root.
/// A kernel without soft-dirty (the development host's) refuses in one line; the guest's has it
/// and records (tests/vm/cases/40-advise-against-live.sh).
#[test]
fn soft_dirty_records_the_written_pages_as_writes() {
    // 8 MiB written page by page, 8 MiB read page by page, for 1.5 s.
    let script = "import time\nw = bytearray(8 << 20)\nr = bytes(8 << 20)\nt = time.time()\ns = 0\n\
                  while time.time() - t < 1.5:\n    for i in range(0, len(w), 4096):\n        w[i] = (w[i] + 1) & 255\n        \
                  s += r[i]\n";
    let touched = match record_writes_only(
        "soft-dirty",
        "soft-dirty",
        terrace_linux::trackers::soft_dirty::works_here(),
        &["python3", "-c", script],
    ) {
        Ok(touched) => touched,
        Err(line) => {
            assert!(
                line.starts_with("terrace: --tracker soft-dirty: this kernel lacks soft-dirty tracking"),
                "{line}"
            );
            return;
        }
    };
    // The written buffer is 2048 pages, seen in every interval; the read one shows soft-dirty only
    // in the interval it was mapped in (a new mapping reads as dirty until the next clear), and
    // python's own heap adds some.
    assert!((2048..4 * 2048).contains(&touched), "{touched} pages");
}

/// `--tracker uffd-wp`: userfaultfd's asynchronous write-protection sees the pages written each
/// interval, as soft-dirty does, where the kernel has it (Linux 6.7), through `env`, whose exec
/// the recording follows with a new descriptor; pages only read are not seen. Refused in one
/// line where the kernel or Terrace's privileges lack it.
#[test]
fn uffd_wp_records_the_written_pages_through_an_exec() {
    // 8 MiB written page by page and 64 MiB read page by page, for 1.5 s.
    let script = "import time\nw = bytearray(8 << 20)\nr = bytes(64 << 20)\nt = time.time()\ns = 0\n\
                  while time.time() - t < 1.5:\n    for i in range(0, len(w), 4096):\n        w[i] = (w[i] + 1) & 255\n    \
                  for i in range(0, len(r), 4096):\n        s += r[i]\n";
    let supported = terrace_linux::trackers::written_bits::works_here();
    let touched = match record_writes_only(
        "uffd-wp",
        "userfaultfd write-protection",
        supported.is_ok(),
        &["env", "python3", "-c", script],
    ) {
        Ok(touched) => touched,
        Err(_) => {
            eprintln!("skipped: this host has no asynchronous userfaultfd write-protection ({supported:?})");
            return;
        }
    };
    // The written buffer is 2048 pages, seen in every interval after the exec; the read one
    // (16384 pages of zeros, never written: the zero page) is not seen. Python's own writes
    // since its exec count too, as soft-dirty counts them, however early in its start the scan
    // that notices the exec comes: on the development host 3,388-3,467 pages in ten runs with
    // pyenv's 3.11.7 and 2,426 with Debian's 3.11.2 (its anonymous memory after starting is 6.7
    // and 2.7 MiB).
    assert!((2048..2048 + 4096).contains(&touched), "{touched} pages");
}

/// Over its fault budget, uffd-wp watches a sample of 2 MiB chunks in turn and counts each page
/// seen written for the chunks not watched: a program writing all of 64 MiB every interval is
/// recorded with about the writes of a recording of every page (within 25%: the buffer's edges
/// and Python's own heap fall in chunks unevenly), every page of the buffer still seen (each
/// chunk takes its turn), and the trace says it was sampled; without a budget it is not.
#[test]
fn uffd_wp_over_its_fault_budget_samples_chunks_and_keeps_the_estimate() {
    if let Err(e) = terrace_linux::trackers::written_bits::works_here() {
        eprintln!("skipped: this host has no asynchronous userfaultfd write-protection ({e})");
        return;
    }
    let script = "import time\nw = bytearray(64 << 20)\nt = time.time()\n\
                  while time.time() - t < 1.5:\n    for i in range(0, len(w), 4096):\n        w[i] = (w[i] + 1) & 255\n";
    let python = python_executable();
    let dir = tempfile::tempdir().unwrap();
    let record = |budget: &str| {
        let trace = dir.path().join(format!("b{budget}.trc"));
        let out = terrace()
            .args(["record", "--tracker", "uffd-wp", "--fault-budget", budget, "-o"])
            .arg(&trace)
            .args(["--", &python, "-c", script])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        info(&trace)
    };
    let (whole, sampled) = (record("0"), record("40000"));
    assert!(!whole.contains("in a sample"), "{whole}");
    // 4,000 faults an interval against 16,384 pages written: one chunk in 8, or in 4 where the
    // program has fewer than 64 chunks (8 chunks watched at least).
    assert!(
        sampled.contains("in a sample: within a budget of 40000 write-protect faults a second"),
        "{sampled}"
    );
    let (w, s) = (reads_and_writes(&whole).1 as f64, reads_and_writes(&sampled).1 as f64);
    assert!((s / w - 1.0).abs() < 0.25, "writes {s} sampled against {w} whole:\n{sampled}\n{whole}");
    // Every page the whole recording saw, the buffer's and Python's own (17,724 in both on the
    // development host), within 64 pages for the heap's run-to-run differences.
    assert!(pages(&sampled) >= 16384, "{sampled}");
    assert!(pages(&sampled) + 64 >= pages(&whole), "pages seen sampled against whole:\n{sampled}\n{whole}");
}

/// The Python interpreter itself rather than a wrapper that starts it: pyenv's `python3` is a
/// shell script whose helper processes a recording follows, and whether a 100 ms scan catches
/// them before they exit depends on the host's load (a clean-clone run on 2026-12-01 saw 3 of
/// them, 87 pages, in one of two recordings of the same program).
fn python_executable() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).expect("a path").trim().to_string()
}

/// A program that writes an `mib` MiB buffer page by page for `seconds` (a line for `sh -c`),
/// without address-space randomisation (`setarch -R`), so that two of them map their buffers at
/// the same addresses.
fn writer_line(mib: u32, seconds: f64) -> String {
    format!(
        "setarch -R python3 -c 'import time\nw = bytearray({mib} << 20)\nt = time.time()\nwhile time.time() - t < {seconds}:\n    \
         for i in range(0, len(w), 4096):\n        w[i] = (w[i] + 1) & 255'"
    )
}

/// Records `command` with the sampler on the page-fault event into `trace`: its exit code and
/// Terrace's stderr, or None (said) where this host refuses perf_event_open, outside CI.
fn record_page_faults(trace: &Path, command: &[&str]) -> Option<(Option<i32>, String)> {
    let (code, err) =
        run_record(&["--tracker", "sampler", "--sampler-events", "page-faults"], trace, command, 30);
    if err.contains("perf_event_open") && std::env::var_os("CI").is_none() {
        eprintln!("skipped: this host refuses perf_event_open: {err}");
        return None;
    }
    Some((code, err))
}

/// Records `sh -c LINE` with uffd-wp into `trace` (within a minute): the shell's exit code and
/// Terrace's stderr, or None (said) where the host has no asynchronous write-protection.
fn record_shell_uffd_wp(trace: &Path, line: &str) -> Option<(Option<i32>, String)> {
    if let Err(e) = terrace_linux::trackers::written_bits::works_here() {
        eprintln!("skipped: this host has no asynchronous userfaultfd write-protection ({e})");
        return None;
    }
    Some(run_record(&["--tracker", "uffd-wp"], trace, &["sh", "-c", line], 60))
}

/// A wrapper that starts the program instead of exec'ing it (`sh -c`, `time`, make) is recorded
/// with every process it starts, as `terrace run` manages them: two writers started by a shell
/// at once, one of 8 MiB and one of 16 MiB, are both in the trace, each in a range of its own
/// (at their own addresses, the same in both, they would overlap: 5,271 pages when tried), the
/// summary names them, the trace's header says where each process's pages are, and the shell's
/// exit code passes through.
#[test]
fn uffd_wp_follows_the_processes_a_wrapper_starts() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tree.trc");
    let line = format!("{} & {}; wait; exit 5", writer_line(8, 1.5), writer_line(16, 1.5));
    let Some((code, err)) = record_shell_uffd_wp(&trace, &line) else { return };
    assert_eq!(code, Some(5), "the shell's own status: {err}");
    // The two writers at least (`python3` may be a wrapper of its own, as pyenv's shims are).
    let started = err.split(" processes it started with userfaultfd").next().unwrap();
    let started: u64 = started.rsplit(' ').next().unwrap().parse().unwrap_or(0);
    assert!(started >= 2, "{err}");
    assert!(!err.contains("cannot record pid"), "{err}");
    let text = info(&trace);
    assert!(text.contains(&format!("{} processes, the program and those it started", started + 1)), "{text}");
    let touched = pages(&text);
    assert!((6144..6144 + 3 * 4096).contains(&touched), "{touched} pages:\n{text}");
}

/// A shell that runs 3,000 short commands: at each scan one of them may be joining as it exits,
/// and its exit then comes to Terrace, its tracer for those few system calls, before its parent.
/// Terrace collects it and so hands it back; before it did, the shell waited for it for ever (1
/// to 4 such exits a recording, in eight recordings; a busy machine may join none, as no command
/// is alive at any scan). The shell runs to its end.
#[test]
fn uffd_wp_hands_back_a_started_process_that_exits_as_it_joins() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("loop.trc");
    let line = "i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done; exit 9";
    let Some((code, err)) = record_shell_uffd_wp(&trace, line) else { return };
    assert_eq!(code, Some(9), "the shell did not run to its end: {err}");
}

/// The sampler's events are open before the program's first instruction, so the processes it
/// starts inherit them: a shell's child first-touching 32 MiB is recorded through it (the page
/// fault event here, as in the test above), and the shell's exit code passes through. Without
/// the events open before the shell's first instruction, its child came before them and was
/// not seen (2 pages recorded).
#[test]
fn the_sampler_follows_the_processes_a_wrapper_starts() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tree.trc");
    let line = format!("{}; exit 6", writer_line(32, 1.2));
    let Some((code, err)) = record_page_faults(&trace, &["sh", "-c", &line]) else { return };
    assert_eq!(code, Some(6), "{err}");
    assert!(err.contains(" it started with the perf sampler"), "{err}");
    let touched = pages(&info(&trace));
    assert!(touched >= 8192, "{touched} pages: {err}");
}

/// A program that execs into one Terrace must not make run a system call (here one under a
/// seccomp filter of its own, tests/vm/programs/seccomp-exec.c) ends a uffd-wp recording there:
/// one line says why, the trace keeps what was recorded before the exec, and the program runs
/// on to its own end and exit status. The new program lives 1.5 s, so that a scan (every 100 ms)
/// comes while it runs even on a loaded machine (with 0.3 s, one clean-clone run missed it).
#[test]
fn uffd_wp_ends_the_recording_at_an_exec_it_cannot_follow_and_the_program_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("seccomp-exec");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vm/programs/seccomp-exec.c");
    let cc = std::process::Command::new("cc").arg("-O2").arg("-o").arg(&exe).arg(&src).output().unwrap();
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    let (trace, marker) = (dir.path().join("cut.trc"), dir.path().join("ran"));
    let out = terrace()
        .args(["record", "--tracker", "uffd-wp", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .args(["0.6", "sh", "-c"])
        .arg(format!("sleep 1.5; touch {}; exit 4", marker.display()))
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if terrace_linux::trackers::written_bits::works_here().is_err() {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(!marker.exists());
        eprintln!("skipped: this host has no asynchronous userfaultfd write-protection");
        return;
    }
    assert_eq!(out.status.code(), Some(4), "the program's own status: {err}");
    assert!(marker.exists(), "the program did not run to its end: {err}");
    let ended =
        err.lines().filter(|l| l.contains("the recording ends here, and the program runs on")).count();
    assert_eq!(ended, 1, "{err}");
    assert!(err.contains(" executed /"), "{err}");
    assert!(err.contains("seccomp filter of its own"), "{err}");
    // The 4 MiB buffer, written for 0.6 s before the exec.
    let touched = pages(&info(&trace));
    assert!((1024..2048).contains(&touched), "{touched} pages: {err}");
}

/// The idle-page bitmap records accesses, reads and writes told apart by soft-dirty, where the
/// kernel has the bitmap; where it does not (every Debian kernel), asking for it is one line.
#[test]
fn idle_page_records_where_the_kernel_has_the_bitmap_and_is_refused_where_not() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("ip.trc");
    let out = terrace()
        .args(["record", "--tracker", "idle-page", "-o"])
        .arg(&trace)
        .arg("--")
        .args(toucher(1.2, 0))
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !Path::new("/sys/kernel/mm/page_idle/bitmap").exists() {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("--tracker idle-page: this kernel lacks the idle-page bitmap"), "{err}");
        assert!(!trace.exists());
    } else if !root {
        assert!(err.contains("needs root"), "{err}");
    } else {
        assert!(out.status.success(), "{err}");
        let text = info(&trace);
        let (reads, writes) = reads_and_writes(&text);
        assert!(reads + writes > 0 && pages(&text) > 100, "{text}");
    }
}

/// `--writes` beside DAMON: where the kernel has soft-dirty, the written buffer's pages count
/// writes; where it has not (the development host), one line before anything starts. The guest
/// records with it (tests/vm/cases/40-advise-against-live.sh).
#[test]
fn writes_beside_damon_count_the_written_pages_or_are_refused_in_one_line() {
    let Some(_turn) = recording_turn() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("w.trc");
    let out = terrace()
        .args(["record", "--writes", "-o"])
        .arg(&trace)
        .arg("--")
        .args(toucher(1.2, 0))
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("which this kernel lacks") {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("terrace: --writes reads soft-dirty bits"), "{err}");
        assert!(!trace.exists());
        return;
    }
    assert!(out.status.success(), "{err}");
    let (_, writes) = reads_and_writes(&info(&trace));
    assert!(writes > 0, "{err}");
}

/// The sampler records where the CPU samples loads and stores with their data addresses (PEBS,
/// IBS) and is refused in one line where it does not (every host here). Its recording machinery
/// (events per thread, rings drained each interval, samples counted by page and kind) is driven
/// here by the software page-fault event, which every kernel has: a program that first-touches a
/// 32 MiB buffer is recorded with a write per fault, and its exit code passes through.
#[test]
fn the_sampler_records_its_samples_by_page_or_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("s.trc");
    let out = terrace()
        .args(["record", "--tracker", "sampler", "-o"])
        .arg(&trace)
        .args(["--", "true"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // --writes is DAMON's: the sampler tells writes itself.
    let out = terrace()
        .args(["record", "--tracker", "sampler", "--sampler-events", "page-faults", "--writes", "-o"])
        .arg(&trace)
        .args(["--", "true"])
        .output()
        .unwrap();
    let writes_err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{writes_err}");
    assert_eq!(writes_err.trim_end().lines().count(), 1, "{writes_err}");
    assert!(writes_err.contains("--tracker sampler tells them itself"), "{writes_err}");
    // No PMU sampling here, or a PMU and a program that exits at once.
    assert!(err.contains("(PEBS or IBS)") || err.contains("before the first 100 ms interval"), "{err}");
    assert!(!trace.exists());

    let toucher = toucher(1.2, 3);
    let command: Vec<&str> = toucher.iter().map(String::as_str).collect();
    let Some((code, err)) = record_page_faults(&trace, &command) else { return };
    assert_eq!(code, Some(3), "the program's exit code: {err}");
    assert!(err.contains("with the perf sampler on page faults for"), "{err}");
    let text = info(&trace);
    assert!(text.contains("recorded        with sampler"), "{text}");
    let (reads, writes) = reads_and_writes(&text);
    assert_eq!(reads, 0, "a page fault counts a write: {text}");
    // Each fault is a sample: the buffer's 8192 pages at least, and python's own heap.
    assert!(writes >= 8192, "{text}");
    let touched = pages(&text);
    assert!((8192..4 * 8192).contains(&touched), "{touched} pages: {text}");
}
