//! `terrace bench tracking`: what tracking costs real programs, measured natively. Each program
//! runs plain, then under `terrace run --dry-run --policy P` for each policy whose tracker this
//! host can give (a dry run moves nothing, so the difference is tracking and deciding), best of
//! N each, and the slowdown is the ratio of the two wall-clock times.
// Without the live machine the arguments are parsed (the CLI is the same) but not used.
#![cfg_attr(not(all(feature = "live", target_os = "linux")), allow(dead_code))]

use std::path::PathBuf;

/// The programs the benchmark knows, by the name `--programs` takes.
pub const PROGRAMS: [&str; 3] = ["sort", "sqlite3", "python3"];

#[derive(clap::Args, Debug)]
pub struct TrackingArgs {
    /// Runs of each program plain and under each policy; each figure is the best of them.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Programs to run, comma-separated: sort (GNU sort on generated lines), sqlite3 (a generated
    /// SQL script) and python3 (a small script).
    #[arg(long, value_delimiter = ',', default_value = "sort,sqlite3,python3")]
    pub programs: Vec<String>,
    /// Policies to run them under, comma-separated; each brings its default trackers (age and
    /// ambix: page-table bits; hemem and hpwp: access sampling, perf or the fault sampler).
    /// `record` runs them under `terrace record` at its default interval instead; `objects` (the
    /// object policy) with the object runtime preloaded (`terrace run --objects`), which measures
    /// the runtime's cost on allocation-heavy programs (object tiering §5.5).
    #[arg(long, value_delimiter = ',', default_value = "age,ambix,hemem,hpwp")]
    pub policies: Vec<String>,
    /// Size of the programs' inputs relative to the default (about 2 to 5 s each natively).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The live machine's config for the runs under Terrace (`terrace run --config`), for
    /// example to measure another `[trackers] fault_sample` or `fault_epoch_ms`.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// One program under one policy.
#[derive(Debug, serde::Serialize)]
pub struct Row {
    pub program: String,
    pub policy: String,
    /// The trackers the policy got here, as `terrace run` chose them.
    pub tracker: String,
    pub plain_seconds: f64,
    pub terrace_seconds: f64,
    pub slowdown: f64,
    /// CPU seconds (user and system, of every process of the run: the program, and Terrace with
    /// its threads), the least of the rounds: less disturbed than wall-clock time by other jobs
    /// on a shared machine, and it counts what tracking takes from other programs too.
    pub plain_cpu_seconds: f64,
    pub terrace_cpu_seconds: f64,
    /// What `terrace run` counted as tracking time in the best run (its `done:` line).
    pub tracking_seconds: Option<f64>,
}

/// A policy this host cannot run, and why (`terrace run`'s own refusal).
#[derive(Debug, serde::Serialize)]
pub struct Unavailable {
    pub policy: String,
    pub reason: String,
}

#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub repeat: u32,
    pub rows: Vec<Row>,
    pub unavailable: Vec<Unavailable>,
    /// Programs this host lacks.
    pub missing: Vec<String>,
}

/// The short name of the trackers `terrace run` chose, from its log.
pub fn tracker_label(log: &str) -> String {
    let mut parts = Vec::new();
    if log.contains("recording with paddr") {
        return "DAMON paddr, pages by frame (terrace record)".into();
    }
    if log.contains(" with DAMON for ") {
        return "DAMON vaddr (terrace record)".into();
    }
    // `terrace record`'s summary: "terrace: recorded WHAT with TRACKER for N s (...".
    if let Some(tracker) = log.lines().find_map(|l| {
        let rest = l.strip_prefix("terrace: recorded ")?;
        let (head, _) = rest.split_once(" s (")?;
        let (head, _) = head.rsplit_once(" for ")?;
        Some(head.rsplit_once(" with ")?.1)
    }) {
        return format!("{tracker} (terrace record)");
    }
    for line in log.lines() {
        if let Some(i) = line.find("access sampling") {
            let rest = &line[i..];
            if rest.contains("perf loads and stores") {
                parts.push("perf sampler".to_string());
            } else if rest.contains("fault sampler") {
                let n = rest
                    .split("fault sampler, ")
                    .nth(1)
                    .and_then(|r| r.split(';').next())
                    .unwrap_or("")
                    .replace(" write-protected every ", " every ");
                let reads = if rest.contains("no reads") { "" } else { " + DAMON reads" };
                parts.push(format!("fault sampler ({n}){reads}"));
            }
        } else if let Some(i) = line.find("page-table bits: ") {
            let rest = &line[i + "page-table bits: ".len()..];
            parts.push(format!("page-table bits ({})", rest.split(';').next().unwrap_or(rest).trim()));
        }
    }
    if log.contains(" events from the runtime") {
        parts.push("object runtime (LD_PRELOAD)".into());
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// The tracking seconds of `terrace run`'s `done:` line.
pub fn tracking_seconds(log: &str) -> Option<f64> {
    let line = log.lines().find(|l| l.contains(" done: "))?;
    let rest = line.split("tracking ").nth(1)?;
    rest.split(" s").next()?.trim().parse().ok()
}

/// Why `terrace run` refused: its one `terrace: ` line, without the prefix.
pub fn refusal(log: &str) -> String {
    log.lines()
        .rev()
        .find_map(|l| l.strip_prefix("terrace: "))
        .unwrap_or("terrace run failed without saying why")
        .trim_start_matches(|c: char| c != ':')
        .trim_start_matches(": ")
        .to_string()
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn run(_: &TrackingArgs) -> anyhow::Result<()> {
    Err(crate::needs_live("bench tracking"))
}

#[cfg(all(feature = "live", target_os = "linux"))]
pub use live::run;

#[cfg(all(feature = "live", target_os = "linux"))]
mod live {
    use super::*;
    use anyhow::{bail, Context, Result};
    use indicatif::{ProgressBar, ProgressStyle};
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// The `--policies` name of a run under `terrace record`.
    const RECORD: &str = "record";

    /// A program found on this host, with its arguments over the generated inputs.
    struct Program {
        name: &'static str,
        argv: Vec<String>,
    }

    /// The first executable called `name` on PATH that is not a script: a wrapper that execs the
    /// real program (a pyenv shim) would add its own start (a shell, pyenv) to every time.
    fn find(name: &str) -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
            use std::os::unix::fs::PermissionsExt;
            let Ok(meta) = std::fs::metadata(p) else { return false };
            if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                return false;
            }
            let mut head = [0u8; 2];
            let is_script = std::fs::File::open(p)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
                .is_ok_and(|()| &head == b"#!");
            !is_script
        })
    }

    /// Writes the inputs (as tests/vm/cases/27-real-programs.sh, larger) into `dir`.
    fn inputs(dir: &Path, scale: f64) -> Result<()> {
        let n = |base: f64| ((base * scale) as u64).max(1000);
        // Random lines to sort (a fixed LCG, so every run sorts the same file).
        let mut text = String::new();
        let mut x: u64 = 7;
        for i in 0..n(1_000_000.0) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            text.push_str(&format!("{:09} {i}\n", (x >> 33) % 1_000_000_000));
        }
        std::fs::write(dir.join("lines"), text)?;
        let rows = n(1_000_000.0);
        std::fs::write(
            dir.join("q.sql"),
            format!(
                "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);\n\
                 WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {rows})\n\
                 INSERT INTO t SELECT x, printf('%08x', (x * 2654435761) % 4294967296) FROM c;\n\
                 CREATE INDEX tv ON t(v);\n\
                 SELECT count(*), sum(length(v)), min(v), max(v) FROM t;\n\
                 SELECT v FROM t ORDER BY v LIMIT 3;\n"
            ),
        )?;
        let entries = n(1_500_000.0);
        std::fs::write(
            dir.join("p.py"),
            format!(
                "import hashlib\n\
                 d = {{i: str(i * 7919 % 1000003) for i in range({entries})}}\n\
                 s = sorted(d.values())\n\
                 print(len(d), hashlib.sha256(\"\".join(s).encode()).hexdigest())\n"
            ),
        )?;
        Ok(())
    }

    fn program(name: &'static str, exe: &Path, dir: &Path) -> Program {
        let exe = exe.display().to_string();
        let f = |n: &str| dir.join(n).display().to_string();
        let argv = match name {
            "sort" => vec![exe, f("lines")],
            "sqlite3" => vec![exe, ":memory:".into(), "-init".into(), f("q.sql"), ".quit".into()],
            _ => vec![exe, f("p.py")],
        };
        Program { name, argv }
    }

    /// CPU seconds (user and system) of every child process this one has waited for.
    fn children_cpu() -> f64 {
        // SAFETY: getrusage fills the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_CHILDREN is always valid.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        secs(u.ru_utime) + secs(u.ru_stime)
    }

    /// One run: wall-clock seconds, CPU seconds, the program's output, terrace's log, and
    /// success.
    fn once(
        argv: &[String],
        policy: Option<&str>,
        config: Option<&Path>,
    ) -> Result<(f64, f64, Vec<u8>, String, bool)> {
        let mut cmd = match policy {
            None => Command::new(&argv[0]),
            Some(RECORD) => {
                let mut c = Command::new(std::env::current_exe().context("cannot find this terrace")?);
                let trace =
                    std::env::temp_dir().join(format!("terrace-bench-record-{}.trc", std::process::id()));
                c.arg("record").arg("-o").arg(&trace).arg("--").arg(&argv[0]);
                c.env("RUST_LOG", "info");
                c.args(&argv[1..]).stdin(Stdio::null()).env("NO_COLOR", "1");
                let (t, cpu) = (Instant::now(), children_cpu());
                let out = c.output().context("cannot start terrace record")?;
                let (secs, cpu) = (t.elapsed().as_secs_f64(), children_cpu() - cpu);
                let _ = std::fs::remove_file(&trace);
                let log = String::from_utf8_lossy(&out.stderr).into_owned();
                return Ok((secs, cpu, out.stdout, log, out.status.success()));
            }
            Some(p) => {
                let mut c = Command::new(std::env::current_exe().context("cannot find this terrace")?);
                c.args(["run", "--dry-run", "--policy", p]);
                // The object policy sees objects through the preloaded runtime.
                if p.split(':').next() == Some("objects") {
                    c.arg("--objects");
                }
                if let Some(config) = config {
                    c.arg("--config").arg(config);
                }
                c.arg("--").arg(&argv[0]);
                c.env("RUST_LOG", "info");
                c
            }
        };
        cmd.args(&argv[1..]).stdin(Stdio::null()).env("NO_COLOR", "1");
        let (t, cpu) = (Instant::now(), children_cpu());
        let out = cmd.output().with_context(|| format!("cannot start {}", argv[0]))?;
        let (secs, cpu) = (t.elapsed().as_secs_f64(), children_cpu() - cpu);
        Ok((secs, cpu, out.stdout, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.success()))
    }

    pub fn run(args: &TrackingArgs) -> Result<()> {
        for p in &args.programs {
            if !PROGRAMS.contains(&p.as_str()) {
                bail!("unknown program {p:?} for --programs; give some of {}", PROGRAMS.join(","));
            }
        }
        if !(args.scale > 0.0 && args.scale <= 100.0) {
            bail!("--scale {} is out of range; give more than 0 and at most 100", args.scale);
        }
        let dir = std::env::temp_dir().join(format!("terrace-bench-tracking-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let result = measure(args, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        let report = result?;
        print(&report);
        if let Some(path) = &args.json {
            crate::write_json(path, &report)?;
        }
        Ok(())
    }

    fn measure(args: &TrackingArgs, dir: &Path) -> Result<Report> {
        let mut missing = Vec::new();
        let mut programs = Vec::new();
        for &name in PROGRAMS.iter().filter(|n| args.programs.iter().any(|p| p == *n)) {
            match find(name) {
                Some(exe) => programs.push(program(name, &exe, dir)),
                None => missing.push(name.to_string()),
            }
        }
        inputs(dir, args.scale).context("cannot write the programs' inputs")?;
        // Which policies run here, and with which trackers: ask `terrace run` itself.
        let mut policies = Vec::new();
        let mut unavailable = Vec::new();
        for p in &args.policies {
            // A recording needs a program that touches memory for an interval: its runs say
            // whether it works here, and its tracker comes from them.
            if p == RECORD {
                policies.push((p.clone(), String::new()));
                continue;
            }
            let (_, _, _, log, ok) = once(&["true".to_string()], Some(p), args.config.as_deref())?;
            if ok {
                policies.push((p.clone(), tracker_label(&log)));
            } else {
                unavailable.push(Unavailable { policy: p.clone(), reason: refusal(&log) });
            }
        }
        let runs = programs.len() as u64 * (1 + policies.len() as u64) * u64::from(args.repeat);
        let bar = ProgressBar::new(runs);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} runs: {msg}")
                .expect("static template"),
        );
        let mut rows = Vec::new();
        for prog in &programs {
            // Round by round, plain and under each policy in turn, so that a slow spell of a
            // shared machine hits every variant alike; each figure is the best of its rounds.
            let variants: Vec<Option<&str>> =
                std::iter::once(None).chain(policies.iter().map(|(p, _)| Some(p.as_str()))).collect();
            let mut best: Vec<Option<(f64, Vec<u8>, String)>> = vec![None; variants.len()];
            let mut least_cpu = vec![f64::INFINITY; variants.len()];
            for i in 0..args.repeat {
                for (v, policy) in variants.iter().enumerate() {
                    let what = policy.map_or("plain".to_string(), |p| format!("under {p}"));
                    bar.set_message(format!("{} {what} ({}/{})", prog.name, i + 1, args.repeat));
                    let (secs, cpu, stdout, log, ok) = once(&prog.argv, *policy, args.config.as_deref())?;
                    least_cpu[v] = least_cpu[v].min(cpu);
                    bar.inc(1);
                    if !ok {
                        bail!("{} {what} failed: {}", prog.name, log.lines().last().unwrap_or("no message"));
                    }
                    if best[v].as_ref().is_none_or(|b| secs < b.0) {
                        best[v] = Some((secs, stdout, log));
                    }
                }
            }
            let mut best = best.into_iter().map(|b| b.expect("at least one round"));
            let (plain, want, _) = best.next().expect("the plain runs");
            for (((policy, tracker), (secs, got, log)), cpu) in policies.iter().zip(best).zip(&least_cpu[1..])
            {
                if got != want {
                    bail!("{} under {policy} printed other output than without Terrace", prog.name);
                }
                rows.push(Row {
                    program: prog.name.to_string(),
                    policy: policy.clone(),
                    tracker: if policy == RECORD { tracker_label(&log) } else { tracker.clone() },
                    plain_seconds: plain,
                    terrace_seconds: secs,
                    slowdown: secs / plain,
                    plain_cpu_seconds: least_cpu[0],
                    terrace_cpu_seconds: *cpu,
                    tracking_seconds: tracking_seconds(&log),
                });
            }
        }
        bar.finish_and_clear();
        Ok(Report { repeat: args.repeat, rows, unavailable, missing })
    }

    fn print(r: &Report) {
        let table: Vec<Vec<String>> = r
            .rows
            .iter()
            .map(|row| {
                vec![
                    row.program.clone(),
                    row.policy.clone(),
                    row.tracker.clone(),
                    format!("{:.2}", row.plain_seconds),
                    format!("{:.2}", row.terrace_seconds),
                    format!("{:+.1}%", (row.slowdown - 1.0) * 100.0),
                    format!("{:.2}", row.plain_cpu_seconds),
                    format!("{:.2}", row.terrace_cpu_seconds),
                    format!("{:+.1}%", (row.terrace_cpu_seconds / row.plain_cpu_seconds - 1.0) * 100.0),
                    row.tracking_seconds.map_or("-".into(), |t| format!("{t:.2}")),
                ]
            })
            .collect();
        let header = [
            "program",
            "policy",
            "tracker",
            "plain s",
            "terrace s",
            "slowdown",
            "plain cpu s",
            "terrace cpu s",
            "cpu",
            "tracking s",
        ];
        let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
        for row in &table {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&width)
                .enumerate()
                .map(|(i, (c, w))| if i < 3 { format!("{c:<w$}") } else { format!("{c:>w$}") })
                .collect();
            println!("{}", padded.join("  ").trim_end());
        };
        println!(
            "Tracking cost: plain and under {}, rounds of each in turn, best of {}: wall-clock seconds, and CPU \
             seconds of the program and Terrace together",
            if !r.rows.is_empty() && r.rows.iter().all(|row| row.policy == "record") {
                "`terrace record`"
            } else {
                "`terrace run --dry-run` (or `terrace record`)"
            },
            r.repeat
        );
        line(header.to_vec());
        for row in &table {
            line(row.iter().map(String::as_str).collect());
        }
        for u in &r.unavailable {
            println!("{}: not measured: {}", u.policy, u.reason);
        }
        for m in &r.missing {
            println!("{m}: not on this host (or only as a script wrapper); skipped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_names_the_trackers_and_the_tracking_time() {
        let log = "2026 INFO no perf sampling (x); using the fault sampler\n\
                   2026 INFO access sampling (substitute for PEBS/IBS, which this machine lacks): writes from the \
                   fault sampler, 256 2 MiB ranges write-protected every 100 ms; no reads (DAMON is busy)\n\
                   2026 INFO pid 1 done: 0 pages moved, 0 not moved, 3 plans; tracking 0.125 s, decisions 0.000 s\n";
        assert_eq!(tracker_label(log), "fault sampler (256 2 MiB ranges every 100 ms)");
        assert_eq!(tracking_seconds(log), Some(0.125));
        let log = "INFO page-table bits: dirty from soft-dirty, referenced from DAMON regions\n";
        assert_eq!(
            tracker_label(log),
            "page-table bits (dirty from soft-dirty, referenced from DAMON regions)"
        );
        assert_eq!(tracker_label(""), "none");
        let log = "terrace: recorded sort x with userfaultfd write-protection for 1.2 s (0.02 s of Terrace's CPU): \
                   12 intervals\n";
        assert_eq!(tracker_label(log), "userfaultfd write-protection (terrace record)");
        let log = "INFO single-node dry run\nterrace: policy age cannot run here: this machine has no page-table bits tracker: no soft-dirty\n";
        assert_eq!(refusal(log), "this machine has no page-table bits tracker: no soft-dirty");
    }
}
