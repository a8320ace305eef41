//! `terrace doctor`: what this host offers for tiering and what to fix, from terrace-linux.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use terrace_linux::doctor;

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

/// Prints the report; findings are advice, so only an unreadable topology is an error.
pub fn run(args: DoctorArgs) -> Result<()> {
    let mut report = doctor::examine(&args.sys, &args.proc_root)
        .with_context(|| format!("cannot read the NUMA topology under {}", args.sys.display()))?;
    // Live probes make system calls on this kernel, so they mean nothing for another root.
    if args.sys == Path::new("/sys") && args.proc_root == Path::new("/proc") {
        report.trackers.extend(doctor::probe_live());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}
