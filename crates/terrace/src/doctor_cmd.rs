//! `terrace doctor`: what this host offers for tiering and what to fix, from terrace-linux.
// Without the live machine the arguments are parsed (the CLI is the same) but not used.
#![cfg_attr(not(all(feature = "live", target_os = "linux")), allow(dead_code))]

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Read a different sysfs root (for testing).
    #[arg(long, default_value = "/sys", hide = true)]
    pub sys: PathBuf,
    /// Read a different procfs root (for testing).
    #[arg(long, default_value = "/proc", hide = true)]
    pub proc_root: PathBuf,
}

/// Exit status when the report has an error finding: the host cannot run live placement as it is
/// (one NUMA node, a config naming nodes that do not exist). Warnings and information exit 0;
/// doctor failing to read the host at all exits 2, as every failed command does.
pub const EXIT_CANNOT_TIER: u8 = 1;

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn run(_: DoctorArgs) -> Result<ExitCode> {
    Err(crate::needs_live("doctor"))
}

/// Prints the report, and says through the exit status whether live placement can run here.
#[cfg(all(feature = "live", target_os = "linux"))]
pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    use anyhow::Context;
    use std::path::Path;
    use terrace_linux::doctor;
    let mut report = doctor::examine(&args.sys, &args.proc_root)
        .with_context(|| format!("cannot read the NUMA topology under {}", args.sys.display()))?;
    // Live probes make system calls on this kernel, so they mean nothing for another root.
    if args.sys == Path::new("/sys") && args.proc_root == Path::new("/proc") {
        report.trackers.extend(doctor::probe_live());
        doctor::refine_damon_live(&mut report.trackers);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    let cannot_tier = report.findings.iter().any(|f| f.severity == doctor::Severity::Error);
    Ok(if cannot_tier { ExitCode::from(EXIT_CANNOT_TIER) } else { ExitCode::SUCCESS })
}
