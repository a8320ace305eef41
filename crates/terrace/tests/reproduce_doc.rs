//! docs/policies.md's reproduction tables are what `terrace reproduce` prints today (issue 12).
//!
//! Runtime: `every_table_of_docs_policies_md_is_what_terrace_reproduce_prints` runs the 668
//! distinct simulations of `terrace reproduce --check docs/policies.md` (the count it prints), in
//! parallel on all cores: about 17 CPU-minutes in the release profile, two thirds of it the NPB
//! tables (at NPB's iteration counts) and Nimble's (16.5 CPU-minutes and 501 s alone on the
//! 2-core development machine on 2026-12-02; 560 runs, 9.7 CPU-minutes and 294 s on
//! 2026-11-30). In a clean-clone CI run it shares the machine with the tests and the guest,
//! niced, and ends about a minute after the guest (from 304 s to 1,709 s of a run on
//! 2026-12-02). In a debug build the simulations take about 7 times as long. It is ignored in a
//! plain `cargo test` either way: scripts/test runs it by itself, niced, from the end of the
//! tests' build to the end of the guest tests (see the test). The other tests here take well
//! under a second: they fail before any run.
//!
//! When the long test fails, its message names each table that differs, with a short diff. That
//! is expected after a change to the simulator's model or to a policy: rerun
//! `cargo run --release -- reproduce --write docs/policies.md`, then re-read the prose beside
//! each rewritten table against it (docs/policies.md, "Reproducing the seeds' comparisons").

use assert_cmd::Command;
use std::path::PathBuf;

fn terrace() -> Command {
    Command::cargo_bin("terrace").unwrap()
}

fn doc() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/policies.md")
}

/// Ignored in a plain `cargo test`: scripts/test runs it on its own (`-- --ignored`), at the
/// lowest priority, as soon as the tests are built: beside the other tests, whose longest ones
/// leave a core idle, and the guest tests, whose emulator leaves part of the two cores idle.
#[test]
#[ignore = "17 CPU-minutes (about 7 times that unoptimised): scripts/test runs it beside the other tests; by hand, \
            cargo test --release -p terrace --test reproduce_doc -- --ignored"]
fn every_table_of_docs_policies_md_is_what_terrace_reproduce_prints() {
    let out = terrace().arg("reproduce").arg("--check").arg(doc()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "docs/policies.md is not what `terrace reproduce` prints now (exit {:?}); \
         `cargo run --release -- reproduce --write docs/policies.md` rewrites the tables, then \
         re-read the prose beside each:\n{err}",
        out.status.code()
    );
    assert!(err.contains("27 tables checked, each what the runs give now"), "{err}");
}

/// Every table the command knows has its block in the doc, and the doc has no block the command
/// does not know: `--check` refuses either before it runs anything, so `--list` is compared here.
#[test]
fn the_doc_marks_every_table_once() {
    let doc = std::fs::read_to_string(doc()).unwrap();
    let list = terrace().args(["reproduce", "--list"]).output().unwrap();
    assert!(list.status.success());
    let names: Vec<String> = String::from_utf8(list.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 27, "{names:?}");
    for name in &names {
        assert_eq!(doc.matches(&format!("<!-- reproduce: {name} -->\n")).count(), 1, "{name}");
    }
    assert_eq!(doc.matches("<!-- reproduce: ").count(), names.len());
    assert_eq!(doc.matches("<!-- /reproduce -->").count(), names.len());
}

/// The headline table has no runs of its own: it is what the doc's other tables give, checked
/// in a plain `cargo test` (the long test checks those tables against their runs).
#[test]
fn the_headline_table_is_what_the_docs_other_tables_give() {
    let out = terrace().args(["reproduce", "--only", "headlines", "--check"]).arg(doc()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("1 table checked, each what the runs give now"), "{err}");
    // A cell it is made from, changed in a copy of the doc, shows in the check.
    let text = std::fs::read_to_string(doc()).unwrap();
    // The mean row of Fig. 13 on the seed's machine, whatever it says today.
    let table = text.find("<!-- reproduce: nimble-fig13-xeon -->").expect("the Fig. 13 table (nimble-xeon)");
    let row = table + text[table..].find("| mean over the sweep |").expect("its mean row");
    let row_end = row + text[row..].find('\n').unwrap();
    let changed = format!("{}| mean over the sweep |  |  | +45% |{}", &text[..row], &text[row_end..]);
    assert_ne!(changed, text, "the Fig. 13 row (on the seed's machine) the test changes");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("policies.md");
    std::fs::write(&copy, changed).unwrap();
    let out = terrace().args(["reproduce", "--only", "headlines", "--check"]).arg(&copy).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("| +40% on average | +45% | 1.04 | yes |"), "{err}");
}

/// Bad requests are refused in one line, before anything runs.
#[test]
fn bad_requests_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.md");
    std::fs::write(&empty, "# nothing marked\n").unwrap();
    let unknown = dir.path().join("unknown.md");
    std::fs::write(&unknown, "<!-- reproduce: nope -->\n<!-- /reproduce -->\n").unwrap();
    let e = empty.to_str().unwrap();
    let u = unknown.to_str().unwrap();
    for (args, says) in [
        (vec!["reproduce", "--only", "nope"], "terrace: no table 'nope'; the tables are builtin, "),
        (vec!["reproduce", "--only", "bfs", "--check", e], "has no block for bfs (mark where each goes"),
        (vec!["reproduce", "--write", u], "unknown.md:1: no table 'nope'"),
        (vec!["reproduce", "--check", "/nonexistent/doc.md"], "cannot read /nonexistent/doc.md"),
    ] {
        let out = terrace().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&unknown).unwrap(), "<!-- reproduce: nope -->\n<!-- /reproduce -->\n");
}
