//! A bounded, seeded mutation campaign over what users hand `terrace`: traces, machine profiles,
//! configurations and arguments (issue 9). Every case runs the real binary under a memory limit
//! and a time limit, and must end in one of two ways: success, or exit status 2 with one line on
//! stderr starting `terrace: `. A panic, a death by signal (an allocation the memory limit
//! refused aborts), a hang past the time limit, or a multi-line refusal fails the campaign, which
//! names the case and keeps its input for reproduction.
//!
//! Size: `TERRACE_CAMPAIGN_CASES` cases (default 2,400) over two threads; about a minute on the
//! 2-core development machine. The seed of case `i` is `i`, so a failure reproduces exactly.

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A case that runs longer than this hangs: the largest input here simulates in well under a second.
const TIME_LIMIT: Duration = Duration::from_secs(30);
/// Address space a case may map: the tiny runs here need tens of MiB; an input that makes Terrace
/// allocate without bound hits this and aborts, which the campaign reports.
const MEMORY_LIMIT_BYTES: u64 = 2 << 30;
/// The workloads' size scale: every trace and run here is a few thousand accesses.
const TINY: &str = "0.002";

fn terrace() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_terrace"))
}

struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
    timed_out: bool,
}

/// Runs `terrace args` under the limits, and collects stderr.
fn run(args: &[String]) -> Outcome {
    let mut cmd = Command::new(terrace());
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd.env("RUST_LOG", "error");
    // SAFETY: setrlimit is async-signal-safe and touches only the child being started.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: MEMORY_LIMIT_BYTES, rlim_max: MEMORY_LIMIT_BYTES };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("cannot start terrace");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let (status, timed_out) = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break (st, false);
        }
        if start.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            break (child.wait().unwrap(), true);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Outcome { code: status.code(), signal: status.signal(), stderr: reader.join().unwrap(), timed_out }
}

/// What is wrong with an outcome, if anything.
fn judge(o: &Outcome) -> Option<String> {
    if o.timed_out {
        return Some(format!("hung (killed after {} s)", TIME_LIMIT.as_secs()));
    }
    if let Some(sig) = o.signal {
        return Some(format!("died by signal {sig}: {}", o.stderr.trim()));
    }
    if o.stderr.contains("panicked") {
        return Some(format!("panicked: {}", o.stderr.trim()));
    }
    match o.code {
        Some(0) => None,
        Some(2) => {
            let lines: Vec<&str> = o.stderr.trim_end().lines().collect();
            if lines.len() != 1 || !lines[0].starts_with("terrace: ") {
                Some(format!("refused, but not in one `terrace: ` line: {:?}", o.stderr))
            } else {
                None
            }
        }
        other => Some(format!("exit status {other:?}: {}", o.stderr.trim())),
    }
}

/// The inputs every case mutates, made once by the binary itself.
struct Seeds {
    exact: Vec<u8>,
    aggregated: Vec<u8>,
    profiles: Vec<String>,
    config: String,
}

fn make_seeds(dir: &Path) -> Seeds {
    let gen = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        let mut args: Vec<String> = ["trace", "generate", "-w", "gups", "--size-scale", TINY, "-o"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push(path.to_str().unwrap().into());
        args.extend(extra.iter().map(|s| s.to_string()));
        let o = run(&args);
        assert_eq!(o.code, Some(0), "trace generate failed: {}", o.stderr);
        std::fs::read(&path).unwrap()
    };
    let exact = gen("seed-exact.trc", &[]);
    let aggregated = gen("seed-aggregated.trc", &["--aggregate-epoch", "2000"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles");
    let mut profiles = Vec::new();
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            profiles.push(std::fs::read_to_string(p).unwrap());
        }
    }
    profiles.sort();
    assert!(!profiles.is_empty());
    let config =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/terrace.toml"))
            .unwrap();
    Seeds { exact, aggregated, profiles, config }
}

fn pick<'a, T>(rng: &mut Xoshiro256PlusPlus, items: &'a [T]) -> &'a T {
    &items[(rng.next_u64() % items.len() as u64) as usize]
}

fn below(rng: &mut Xoshiro256PlusPlus, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// Byte-level damage to a trace: flips, truncation, and moved, swapped, repeated or reversed runs
/// of bytes (whole blocks among them, since the blocks are what a run of bytes spans).
fn mutate_bytes(rng: &mut Xoshiro256PlusPlus, mut b: Vec<u8>) -> (Vec<u8>, String) {
    let n = b.len();
    match below(rng, 6) {
        0 => {
            let k = 1 + below(rng, 4);
            for _ in 0..k {
                let i = below(rng, n);
                b[i] ^= 1 << below(rng, 8);
            }
            (b, format!("{k} bit flips"))
        }
        1 => {
            let at = below(rng, n);
            b.truncate(at);
            (b, format!("truncated at {at}"))
        }
        2 => {
            // Swap two equal runs.
            let len = 1 + below(rng, n / 3);
            let (i, j) = (below(rng, n - len), below(rng, n - len));
            let (lo, hi) = (i.min(j), i.max(j));
            if hi >= lo + len {
                let tmp = b[lo..lo + len].to_vec();
                b.copy_within(hi..hi + len, lo);
                b[hi..hi + len].copy_from_slice(&tmp);
            }
            (b, format!("swapped {len} bytes at {lo} and {hi}"))
        }
        3 => {
            // Repeat a run (a duplicated block, when the run is one).
            let len = 1 + below(rng, n / 2);
            let at = below(rng, n - len);
            let run = b[at..at + len].to_vec();
            b.splice(at..at, run);
            (b, format!("repeated {len} bytes at {at}"))
        }
        4 => {
            // Reverse the order of everything after the header-sized prefix, in chunks.
            let chunk = 64 + below(rng, n / 4);
            let head = below(rng, n.min(256));
            let tail: Vec<Vec<u8>> = b[head..].chunks(chunk).rev().map(<[u8]>::to_vec).collect();
            b.truncate(head);
            b.extend(tail.concat());
            (b, format!("reversed {chunk}-byte chunks after {head}"))
        }
        _ => {
            // Overwrite 8 bytes with an extreme little-endian value.
            let v = *pick(rng, &[0u64, 1, u32::MAX as u64, 1 << 31, 1 << 44, 1 << 63, u64::MAX]);
            let at = below(rng, n.saturating_sub(8));
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            (b, format!("wrote {v} at {at}"))
        }
    }
}

/// Extreme values a profile or configuration field might be given.
const EXTREMES: &[&str] =
    &["0", "-1", "1e-300", "1e300", "1e19", "nan", "inf", "-inf", "0.0", "4294967296", "\"x\"", "[]", "true"];

/// Text-level damage to TOML: a number replaced with an extreme, a line dropped or repeated,
/// two lines swapped, the text cut short, or a table header renamed.
fn mutate_toml(rng: &mut Xoshiro256PlusPlus, text: &str) -> (String, String) {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len();
    match below(rng, 6) {
        0 | 1 => {
            // A value: the text after the first '=' of a key line, or a number inside an array.
            let candidates: Vec<usize> = (0..n)
                .filter(|&i| lines[i].contains('=') && !lines[i].trim_start().starts_with('#'))
                .collect();
            if candidates.is_empty() {
                return (text.to_string(), "unchanged".into());
            }
            let i = *pick(rng, &candidates);
            let key = lines[i].split('=').next().unwrap().to_string();
            let v = pick(rng, EXTREMES);
            lines[i] = format!("{key}= {v}");
            (lines.join("\n"), format!("line {}: {}= {v}", i + 1, key))
        }
        2 => {
            let i = below(rng, n);
            let gone = lines.remove(i);
            (lines.join("\n"), format!("dropped line {}: {gone}", i + 1))
        }
        3 => {
            let i = below(rng, n);
            lines.insert(i, lines[i].clone());
            (lines.join("\n"), format!("repeated line {}", i + 1))
        }
        4 => {
            let (i, j) = (below(rng, n), below(rng, n));
            lines.swap(i, j);
            (lines.join("\n"), format!("swapped lines {} and {}", i + 1, j + 1))
        }
        _ => {
            let at = below(rng, text.len());
            let cut = (0..=at).rev().find(|&k| text.is_char_boundary(k)).unwrap_or(0);
            (text[..cut].to_string(), format!("cut at byte {cut}"))
        }
    }
}

const POLICIES: &[&str] =
    &["first-touch", "oracle", "ambix", "hemem", "hpwp", "kernel-tiering", "age", "memory-mode"];

/// Arguments a user might get wrong, for `sim`.
const CAPACITIES: &[&str] = &["40%", "150%", "0.0001%", "1", "4096", "1TiB", "-1", "0%", "abc", "1e3%"];
const SIZE_SCALES: &[&str] = &["0.002", "0.0005", "0.001", "0", "-1", "nan", "inf", "1e-9"];

/// One case: its description and the arguments to run.
fn make_case(i: u64, seeds: &Seeds, dir: &Path) -> (String, Vec<String>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(i);
    let mut args: Vec<String> = Vec::new();
    let what = match i % 5 {
        0 | 1 => {
            let (base, form) =
                if i % 10 < 5 { (&seeds.exact, "exact") } else { (&seeds.aggregated, "aggregated") };
            let (bytes, how) = mutate_bytes(&mut rng, base.clone());
            let path = dir.join(format!("case-{i}.trc"));
            std::fs::write(&path, bytes).unwrap();
            let p = path.to_str().unwrap().to_string();
            if rng.next_u64() % 3 == 0 {
                args.extend(["trace".into(), "info".into(), p]);
            } else {
                let policy = pick(&mut rng, POLICIES);
                args.extend(["sim".into(), "-w".into(), p, "-p".into(), policy.to_string()]);
            }
            format!("{form} trace, {how}")
        }
        2 => {
            let base = pick(&mut rng, &seeds.profiles);
            let (text, how) = mutate_toml(&mut rng, base);
            let path = dir.join(format!("case-{i}.toml"));
            std::fs::write(&path, text).unwrap();
            let policy = pick(&mut rng, POLICIES);
            args.extend(
                [
                    "sim",
                    "-w",
                    "gups",
                    "--size-scale",
                    TINY,
                    "-p",
                    policy,
                    "--profile",
                    path.to_str().unwrap(),
                ]
                .map(String::from),
            );
            format!("profile, {how}")
        }
        3 => {
            // The live machine reads its configuration before anything else: on a host that
            // cannot tier, a good one ends in that refusal, a bad one in its own.
            let (text, how) = mutate_toml(&mut rng, &seeds.config);
            let path = dir.join(format!("case-{i}.toml"));
            std::fs::write(&path, text).unwrap();
            args.extend(
                ["run", "--dry-run", "--policy", "age", "--config", path.to_str().unwrap(), "--", "true"]
                    .map(String::from),
            );
            format!("configuration, {how}")
        }
        _ => {
            let policy = pick(&mut rng, POLICIES);
            let cap = pick(&mut rng, CAPACITIES);
            let scale = pick(&mut rng, SIZE_SCALES);
            let workload = pick(&mut rng, &["gups", "pmbench-s12-r50", "stream-triad", "bfs-small", "nope"]);
            args.extend(
                ["sim", "-w", workload, "-p", policy, "--fast-capacity", cap, "--size-scale", scale]
                    .map(String::from),
            );
            "arguments".to_string()
        }
    };
    (what, args)
}

#[test]
fn bad_input_campaign_ends_every_case_in_success_or_one_clear_line() {
    let cases: u64 =
        std::env::var("TERRACE_CAMPAIGN_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(2400);
    let dir = tempfile::tempdir().unwrap();
    let seeds = make_seeds(dir.path());
    let start = Instant::now();
    let threads = 2u64;
    let refused = std::sync::atomic::AtomicU64::new(0);
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let seeds = &seeds;
                let dir = dir.path();
                let refused = &refused;
                s.spawn(move || {
                    let mut bad = Vec::new();
                    let mut i = t;
                    while i < cases {
                        let (what, args) = make_case(i, seeds, dir);
                        let outcome = run(&args);
                        if outcome.code == Some(2) {
                            refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        if let Some(why) = judge(&outcome) {
                            bad.push(format!("case {i} ({what}): terrace {}: {why}", args.join(" ")));
                        } else {
                            // Keep only what failed, for reproduction.
                            for ext in ["trc", "toml"] {
                                let _ = std::fs::remove_file(dir.join(format!("case-{i}.{ext}")));
                            }
                        }
                        i += threads;
                    }
                    bad
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    eprintln!(
        "campaign: {cases} cases in {:.1} s: {} refused in one line, {} failed",
        start.elapsed().as_secs_f64(),
        refused.into_inner(),
        failures.len()
    );
    if !failures.is_empty() {
        let kept = dir.keep();
        panic!(
            "{} of {cases} cases failed (inputs kept in {}):\n{}",
            failures.len(),
            kept.display(),
            failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}
