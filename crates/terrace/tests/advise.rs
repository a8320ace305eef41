//! `terrace advise`: the advice is what the comparison it prints says, read by the rules of
//! docs/live.md ("Which policy to run"): the fastest placement a live machine can run (never a
//! reference such as all-fast or oracle, however fast), the runner-up of another policy family,
//! the headroom to the ceiling, and first-touch when nothing gains enough.

use assert_cmd::Command;
use serde_json::Value;

fn terrace() -> Command {
    Command::cargo_bin("terrace").unwrap()
}

/// Runs `advise` on `workload` recorded as an aggregated trace at an eighth of its size (per-page
/// counts per epoch, the form `terrace record` writes) with `args`, returning its stdout and its
/// JSON rows.
fn advise(workload: &str, args: &[&str]) -> (String, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("prog.trace");
    terrace()
        .args([
            "trace",
            "generate",
            "--size-scale",
            "0.125",
            "--aggregate-epoch",
            "20000",
            "-w",
            workload,
            "-o",
        ])
        .arg(&trace)
        .assert()
        .success();
    let json = dir.path().join("rows.json");
    let out = terrace().arg("advise").arg(&trace).args(args).arg("--json").arg(&json).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (String::from_utf8(out.stdout).unwrap(), rows)
}

fn runtime(rows: &[Value], policy: &str) -> f64 {
    rows.iter().find(|r| r["policy"] == policy).unwrap_or_else(|| panic!("no row of {policy}"))["runtime_ns"]
        .as_f64()
        .unwrap()
}

fn line<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no {label} line:\n{stdout}"))
}

#[test]
fn the_advice_is_the_fastest_placement_a_live_machine_can_run() {
    let (stdout, rows) = advise("pmbench-s12-r50", &["--fast-capacity", "25%"]);
    let references = ["all-fast", "oracle", "memory-mode", "optimal"];
    let placements: Vec<&Value> =
        rows.iter().filter(|r| !references.contains(&r["policy"].as_str().unwrap())).collect();
    assert!(placements.len() >= 15, "every placement of the registry replays: {}", placements.len());
    assert!(!rows.iter().any(|r| r["policy"] == "ping-pong"), "test policies are no advice");
    let best = placements
        .iter()
        .min_by(|a, b| a["runtime_ns"].as_f64().partial_cmp(&b["runtime_ns"].as_f64()).unwrap())
        .unwrap();
    let best_name = best["policy"].as_str().unwrap();
    // all-fast is faster than any placement here, and is never the advice.
    assert!(runtime(&rows, "all-fast") < best["runtime_ns"].as_f64().unwrap());
    let recommended = line(&stdout, "recommended");
    assert!(recommended.contains(&format!("{best_name}:")), "{recommended} (best {best_name})");
    let speedup = runtime(&rows, "first-touch") / best["runtime_ns"].as_f64().unwrap();
    assert!(recommended.contains(&format!("{speedup:.2}x")), "{recommended}: {speedup:.2}x");
    let headroom = best["runtime_ns"].as_f64().unwrap() / runtime(&rows, "optimal") - 1.0;
    assert!(line(&stdout, "ceiling").contains(&format!("{:+.0}%", 100.0 * headroom)), "{stdout}");
    assert!(line(&stdout, "run it").contains(&format!("terrace run --policy {best_name} --")), "{stdout}");
    let runner_up = line(&stdout, "runner-up");
    assert!(!runner_up.contains(&format!("{best_name}:")), "{runner_up}");
    // A generated trace is no recording: no note on missing writes or on the recording's compute
    // (tests/record.rs has them).
    assert!(!stdout.contains("tells no writes") && !stdout.contains("even all-fast"), "{stdout}");
}

#[test]
fn nothing_worth_moving_is_advised_as_running_the_program_as_it_is() {
    // A fast tier that holds the whole footprint: first-touch places everything there.
    let (stdout, _) = advise("stream-ro", &["--fast-capacity", "100%"]);
    assert!(stdout.contains("run it as it is (first-touch"), "{stdout}");
    assert!(!stdout.contains("terrace run --policy"), "{stdout}");
}

#[test]
fn a_trace_that_is_not_there_is_one_line() {
    let out = terrace().args(["advise", "/nonexistent/prog.trace"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/prog.trace"), "{err}");
}
