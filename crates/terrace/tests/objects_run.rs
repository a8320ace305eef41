//! `terrace run --objects` on this host (docs/live.md, "Objects"): the object runtime is preloaded
//! into an unmodified C program, whose allocations reach the policy and whose site advice the
//! dry run logs; a runtime that cannot be found is refused in one line before anything starts.
//! The placement itself (objects moved, new objects born on the advised node) needs two nodes and
//! is checked in the guest (tests/vm/cases/39-objects-hot-and-cold-sites.sh).
#![cfg(all(feature = "live", target_os = "linux"))]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn terrace() -> Command {
    Command::cargo_bin("terrace").unwrap()
}

/// libterrace_alloc.so as `cargo test --workspace` leaves it, in target/<profile>/deps beside the
/// test executables (the copy beside `terrace` is made by `cargo build` only).
fn runtime_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let so = exe.parent().unwrap().join("libterrace_alloc.so");
    assert!(so.exists(), "{} is missing: build it with cargo build --release -p terrace-alloc", so.display());
    so
}

fn compile_hot_cold(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vm/programs/objects-hotcold.c");
    let exe = dir.join("objects-hotcold");
    let out = std::process::Command::new("cc")
        .args(["-O2", "-fno-optimize-sibling-calls", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("cc (scripts/test installs gcc)");
    assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// Runs `terrace run ARGS -- touch MARKER` (with `env`), which must be refused: returns its
/// `terrace: ` lines, after checking the exit code (2) and that the program never ran.
fn refused_lines(env: &[(&str, &str)], args: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out =
        terrace().envs(env.iter().copied()).args(args).args(["--", "touch"]).arg(&marker).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!marker.exists(), "the program ran");
    err.lines().filter(|l| l.starts_with("terrace: ")).map(str::to_string).collect()
}

#[test]
fn a_runtime_that_is_not_there_is_refused_before_the_program_starts() {
    let lines = refused_lines(
        &[("TERRACE_ALLOC_LIB", "/nonexistent/libterrace_alloc.so")],
        &["run", "--objects", "--dry-run", "--policy", "first-touch"],
    );
    assert_eq!(
        lines,
        ["terrace: --objects: TERRACE_ALLOC_LIB=/nonexistent/libterrace_alloc.so names no file"]
    );
}

/// The objects policy (re-deciding every 500 ms) over the C program with a hot and a cold site:
/// the program's output and exit are its own, the policy saw its objects (4 cold, 4 hot, 2
/// renewed; the renewed ones' predecessors freed), and advised its two sites, which a dry run
/// logs instead of writing. The fault sampler's userfaultfd is needed for the policy's samples:
/// on a host that cannot give one, the refusal must name it.
#[test]
fn a_dry_run_under_the_runtime_hands_the_programs_objects_to_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile_hot_cold(dir.path());
    let alone = std::process::Command::new(&prog).args(["4", "4", "1", "3", "1", "2"]).output().unwrap();
    assert!(alone.status.success());
    let out = terrace()
        .env("TERRACE_ALLOC_LIB", runtime_library())
        .env("RUST_LOG", "info")
        .args(["run", "--objects", "--dry-run", "--policy", "objects:trigger=time,interval=500ms", "--"])
        .arg(&prog)
        .args(["4", "4", "1", "3", "1", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("policy objects:trigger=time,interval=500ms cannot run here") {
        assert!(err.contains("userfaultfd") || err.contains("access sampling"), "{err}");
        eprintln!("this host cannot sample accesses for the objects policy: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The same lines as alone, but for the round counts and node figures a run's timing sets.
    let shape = |s: &str| s.lines().map(|l| l.split(':').next().unwrap().to_string()).collect::<Vec<_>>();
    assert!(stdout.contains("objects-hotcold values ok"), "{stdout}");
    assert_eq!(
        shape(&stdout).iter().filter(|l| l.contains("renewed")).count(),
        shape(&String::from_utf8_lossy(&alone.stdout)).iter().filter(|l| l.contains("renewed")).count()
    );
    let figure = |after: &str| -> u64 {
        let at = err.find(after).unwrap_or_else(|| panic!("no '{after}' in: {err}")) + after.len();
        err[at..].split_whitespace().next().unwrap().parse().unwrap()
    };
    let allocated = figure("; objects: ");
    assert!(allocated >= 10, "4 cold, 4 hot and 2 renewed objects at least: {allocated}\n{err}");
    let freed = figure("allocated and ");
    assert!(freed >= 2, "the 2 renewed objects' predecessors at least: {freed}\n{err}");
    assert!(err.contains("dry run: would have advised a node for"), "{err}");
}

/// A priority is the object runtime's (object tiering §5.5: an application sets it when it
/// connects): without the runtime it is refused in one line before the program starts.
#[test]
fn a_priority_without_the_object_runtime_is_refused_before_the_program_starts() {
    let lines = refused_lines(&[], &["run", "--dry-run", "--priority", "-3", "--policy", "first-touch"]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("terrace: --priority is the object runtime's: add --objects"), "{lines:?}");
}
