//! `terrace`: the command line. It parses arguments and wires the library crates together;
//! everything it runs lives in terrace-sim, terrace-policy and terrace-workloads.

mod bench;
mod compare;
mod daemon_cmd;
mod doctor_cmd;
mod run_cmd;
mod run_spec;
mod table;
mod trace_cmd;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Terrace places a program's memory pages across fast and slow memory tiers (DRAM, Optane, CXL,
/// a remote socket). Policies run on a calibrated simulated machine that needs no special
/// hardware; the same policies will drive a live Linux machine.
#[derive(Parser)]
#[command(
    name = "terrace",
    version,
    propagate_version = true,
    after_help = "Start with `terrace compare` (every built-in workload under every baseline on the default \
                  simulated machine), then `terrace list policies` and `terrace sim --workload gups --policy oracle`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one workload under one policy and print what it cost.
    Sim(run_spec::SimArgs),
    /// Simulate every workload under every policy (in parallel) and print one row per pair.
    Compare(compare::CompareArgs),
    /// List the built-in workloads, policies or machine profiles.
    List {
        #[arg(value_enum)]
        what: ListWhat,
    },
    /// Make and inspect access traces.
    #[command(subcommand)]
    Trace(trace_cmd::TraceCommand),
    /// Measure the simulator's own speed.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Show this host's memory tiers, what Terrace can track here, and what is misconfigured.
    Doctor(doctor_cmd::DoctorArgs),
    /// Start a program and manage where its pages live (live machine).
    Run(run_cmd::RunArgs),
    /// Manage several processes, handed over with `terrace bind`, until stopped.
    Daemon(daemon_cmd::DaemonArgs),
    /// Ask the daemon to manage a running process.
    Bind(daemon_cmd::BindArgs),
    /// Ask the daemon to stop managing a process (its pages stay where they are).
    Unbind(daemon_cmd::BindArgs),
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ListWhat {
    Workloads,
    Policies,
    Profiles,
}

fn list(what: ListWhat) {
    match what {
        ListWhat::Workloads => {
            for w in terrace_workloads::list() {
                println!("{:<18} {}", w.name, w.summary);
            }
            println!("\nA path to a trace file (see `terrace trace generate`) works wherever a workload name does.");
        }
        ListWhat::Policies => {
            for p in terrace_policy::list() {
                println!("{:<20} {}", p.name, p.summary);
            }
        }
        ListWhat::Profiles => {
            for (name, _) in terrace_sim::profile::BUILT_IN {
                match terrace_sim::Profile::load(name) {
                    Ok(p) => println!("{:<14} {}", name, p.summary),
                    Err(e) => println!("{name:<14} (broken: {e})"),
                }
            }
            println!("\nA path to a .toml profile works too; profiles/ in the source tree shows the format.");
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Sim(args) => run_spec::sim(args),
        Command::Compare(args) => compare::compare(args),
        Command::List { what } => {
            list(what);
            Ok(())
        }
        Command::Trace(cmd) => trace_cmd::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Doctor(args) => doctor_cmd::run(args),
        Command::Run(args) => run_cmd::run(args),
        Command::Daemon(args) => daemon_cmd::daemon(args),
        Command::Bind(args) => daemon_cmd::bind(args),
        Command::Unbind(args) => daemon_cmd::unbind(args),
    }
}

fn main() -> ExitCode {
    // Die quietly when the reader of our output goes away (`terrace doctor | head`), as CLI tools do.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    // Logs (one line per migration batch on the live machine) go to stderr; RUST_LOG overrides.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: what went wrong and, from the error itself, what to do.
            eprintln!("terrace: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Where to write a machine-readable copy of the results.
pub(crate) fn write_json<T: serde::Serialize>(path: &PathBuf, value: &T) -> Result<()> {
    use anyhow::Context;
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
