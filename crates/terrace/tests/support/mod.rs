//! What the `terrace` command's tests share: running it, and the two ways a run must end.
#![allow(dead_code)] // each test binary uses its own share

use assert_cmd::Command;

pub fn terrace() -> Command {
    Command::cargo_bin("terrace").unwrap()
}

/// Runs `args`, expects failure with exit code 2, and returns stderr, which must be one line
/// from Terrace (not a panic).
pub fn fails(args: &[&str]) -> String {
    let out = terrace().args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?} should fail with 2: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(err.starts_with("terrace: "), "{err}");
    err
}

/// Runs `args`, expects success, and returns stdout.
pub fn stdout(args: &[&str]) -> String {
    let out = terrace().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
