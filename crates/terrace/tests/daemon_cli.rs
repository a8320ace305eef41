//! `terrace daemon`, `bind` and `unbind` as a user meets them on a host with one memory tier:
//! the daemon starts anyway (tiers are read at each bind), answers with one-line errors, stops on
//! SIGTERM with exit code 0 and removes its socket. Managing real processes is tested in the guest
//! (tests/vm/cases/2*-daemon-*.sh). A `terrace` built without the live machine has no daemon.
#![cfg(all(feature = "live", target_os = "linux"))]

use assert_cmd::cargo::CommandCargoExt;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

fn terrace() -> Command {
    Command::cargo_bin("terrace").unwrap()
}

fn start_daemon(dir: &Path) -> (Child, std::path::PathBuf) {
    let sock = dir.join("t.sock");
    let cfg = dir.join("t.toml");
    std::fs::write(
        &cfg,
        format!("[daemon]\nsocket = \"{}\"\ndry_run = false\npolicy = \"age\"\n", sock.display()),
    )
    .unwrap();
    let child = terrace()
        .args(["daemon", "--config", cfg.to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !sock.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "the daemon made no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, sock)
}

/// Exit code 2 and one line on stderr starting with `terrace: `; returns that line.
fn one_line_error(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("terrace: ") && !err.contains("panicked"), "{err}");
    err
}

#[test]
fn bind_talks_to_the_daemon_and_says_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, sock) = start_daemon(dir.path());
    let s = sock.to_str().unwrap();

    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let err = one_line_error(&terrace().args(["bind", &pid, "--socket", s]).output().unwrap());
    assert!(err.contains("single memory tier") || err.contains("NUMA topology"), "{err}");
    let err = one_line_error(&terrace().args(["unbind", &pid, "--socket", s]).output().unwrap());
    assert!(err.contains(&format!("pid {pid} is not managed")), "{err}");
    let err = one_line_error(&terrace().args(["bind", "2147483647", "--socket", s]).output().unwrap());
    assert!(err.contains("no process 2147483647"), "{err}");

    // The hidden raw mode: the reply as it is, exit 2 for an error reply.
    let out = terrace().args(["bind", "--socket", s, "--raw", "garbage"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let reply = String::from_utf8(out.stdout).unwrap();
    assert!(reply.starts_with("{\"ok\":false,\"error\":\"not JSON"), "{reply}");
    let out = terrace().args(["bind", "--socket", s, "--raw", "{\"op\":\"list\"}"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout).unwrap().contains("\"processes\":[]"));

    // A cgroup instead of a pid: the same one-line errors. The path goes absolute.
    let cg = dir.path().join("batch");
    std::fs::create_dir(&cg).unwrap();
    std::fs::write(cg.join("cgroup.procs"), "").unwrap();
    let out = terrace()
        .current_dir(dir.path())
        .args(["bind", "--cgroup", "batch", "--socket", s])
        .output()
        .unwrap();
    let err = one_line_error(&out);
    assert!(err.contains("single memory tier") || err.contains("NUMA topology"), "{err}");
    let out =
        terrace().current_dir(dir.path()).args(["bind", "--cgroup", ".", "--socket", s]).output().unwrap();
    assert!(one_line_error(&out).contains("has no cgroup.procs, so it is not a cgroup v2 directory"));
    let out = terrace()
        .current_dir(dir.path())
        .args(["unbind", "--cgroup", "batch", "--socket", s])
        .output()
        .unwrap();
    let real = std::fs::canonicalize(&cg).unwrap();
    assert!(one_line_error(&out).contains(&format!("cgroup {} is not managed", real.display())));
    // Exactly one of a pid and --cgroup.
    let out = terrace().args(["bind", &pid, "--cgroup", "/sys/fs/cgroup", "--socket", s]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"), "{out:?}");
    let out = terrace().args(["bind", "--socket", s]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("required"), "{out:?}");

    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // SAFETY: a plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) }, 0);
    let status = daemon.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
    assert!(!sock.exists(), "the daemon removes its socket");
}

#[test]
fn without_a_daemon_bind_says_how_to_start_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("none.sock");
    let err =
        one_line_error(&terrace().args(["bind", "1", "--socket", s.to_str().unwrap()]).output().unwrap());
    assert!(
        err.contains("no Terrace daemon is listening") && err.contains("terrace daemon --config"),
        "{err}"
    );
    let err = one_line_error(&terrace().args(["unbind", "1", "--policy", "age"]).output().unwrap());
    assert!(err.contains("no --policy"), "{err}");
    let err =
        one_line_error(&terrace().args(["unbind", "--cgroup", "/x", "--policy", "age"]).output().unwrap());
    assert!(err.contains("no --policy"), "{err}");
}
