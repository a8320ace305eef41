//! `terrace`: the command line. It parses arguments and wires the library crates together;
//! everything it runs lives in terrace-sim, terrace-policy and terrace-workloads.

mod advise_cmd;
mod bench;
mod bench_tracking;
mod ceiling_cmd;
mod compare;
mod daemon_cmd;
mod doctor_cmd;
mod grid;
mod headlines;
mod plots;
mod process_cpu;
mod profile_cmd;
mod record_cmd;
mod reproduce;
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
    after_help = "Start with `terrace compare` (the built-in suite of workloads under the default comparison's \
                  policies, on the default simulated machine), then `terrace list policies` and \
                  `terrace sim --workload gups --policy oracle`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one workload under one policy and print what it cost.
    Sim(run_spec::SimArgs),
    /// Simulate every workload under every policy (in parallel) and print one row per pair; or a
    /// grid of profiles, fast-tier sizes and seeds, whole or one shard of it (`compare merge`
    /// joins the shards).
    #[command(args_conflicts_with_subcommands = true, disable_help_subcommand = true)]
    Compare(Box<compare::CompareArgs>),
    /// Which policy to run for a recorded program on a machine, and what it would gain: replays the
    /// recording under every policy and the offline ceiling and reads the table for you.
    Advise(advise_cmd::AdviseArgs),
    /// Run every reproduction of docs/policies.md and print its tables (--check FILE, --write FILE).
    Reproduce(reproduce::ReproduceArgs),
    /// List the built-in workloads, the default suite, the policies or the machine profiles.
    List {
        #[arg(value_enum)]
        what: ListWhat,
        /// With `policies`: every policy's parameters, each with its default, range, meaning and
        /// source.
        #[arg(long)]
        params: bool,
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
    /// Record a program's page heat over time as a trace that `sim` and `compare` replay (live
    /// trackers; any Linux host with DAMON, one NUMA node is enough).
    Record(record_cmd::RecordArgs),
    /// Manage several processes, handed over with `terrace bind`, until stopped.
    Daemon(daemon_cmd::DaemonArgs),
    /// Ask the daemon to manage a running process, or every process of a cgroup (--cgroup).
    Bind(daemon_cmd::BindArgs),
    /// Ask the daemon to stop managing a process or a cgroup (the pages stay where they are).
    Unbind(daemon_cmd::BindArgs),
    /// Machine profiles: `profile measure` measures this host's tiers into one.
    #[command(subcommand)]
    Profile(profile_cmd::ProfileCommand),
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ListWhat {
    Workloads,
    /// The workloads `terrace compare` runs when none are named, one per line.
    Suite,
    Policies,
    Profiles,
}

fn list(what: ListWhat, params: bool) -> Result<()> {
    if params && !matches!(what, ListWhat::Policies) {
        anyhow::bail!("--params goes with `terrace list policies`");
    }
    match what {
        ListWhat::Workloads => {
            let workloads = terrace_workloads::list();
            let width = workloads.iter().map(|w| w.name.len()).max().unwrap_or(0);
            for w in workloads {
                println!("{:<width$} {}", w.name, w.summary);
            }
            println!("\nA path to a trace file (see `terrace trace generate`) works wherever a workload name does.");
        }
        ListWhat::Suite => {
            for w in terrace_workloads::DEFAULT_SUITE {
                println!("{w}");
            }
        }
        ListWhat::Policies if params => list_params(),
        ListWhat::Policies => {
            for p in terrace_policy::list() {
                // The seeds' policies are written for a fast and a slow tier; the rest manage any number.
                let tiers = match terrace_policy::registry::max_tiers(p.name) {
                    Ok(Some(n)) => format!(" [{n} tiers]"),
                    _ => String::new(),
                };
                println!("{:<20} {}{tiers}", p.name, p.summary);
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
    Ok(())
}

/// `terrace list policies --params`: each policy, then its parameters (or the preset it is).
fn list_params() {
    for p in terrace_policy::list() {
        println!("{:<20} {}", p.name, p.summary);
        if let Some(preset) = p.preset {
            let values: Vec<String> = preset.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("    preset: {}:{}; takes {}'s parameters", preset.of, values.join(","), preset.of);
        } else if p.params.is_empty() {
            println!("    no parameters");
        }
        for param in p.params.iter().filter(|_| p.preset.is_none()) {
            println!("    {} = {}  ({})", param.name, param.default, param.kind.range());
            println!("        {}", param.meaning);
            println!("        source: {}", param.source);
        }
    }
    println!(
        "\nSet parameters with --policy NAME:key=value,key=value (e.g. hpwp:hot_threshold=8), or with a \
         [policy.NAME] table in the live machine's config (docs/live.md)."
    );
}

/// Runs a command; only doctor and reproduce have an exit status of their own (doctor's report
/// says whether live placement can run here, reproduce --check whether a table differs), every
/// other command succeeds or fails.
fn run(cli: Cli) -> Result<ExitCode> {
    let done = match cli.command {
        Command::Doctor(args) => return doctor_cmd::run(args),
        Command::Reproduce(args) => return reproduce::reproduce(args),
        Command::Sim(args) => run_spec::sim(args),
        Command::Compare(args) => compare::compare(*args),
        Command::Advise(args) => advise_cmd::advise(args),
        Command::List { what, params } => list(what, params),
        Command::Trace(cmd) => trace_cmd::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Run(args) => run_cmd::run(args),
        Command::Record(args) => record_cmd::record(args),
        Command::Daemon(args) => daemon_cmd::daemon(args),
        Command::Bind(args) => daemon_cmd::bind(args),
        Command::Unbind(args) => daemon_cmd::unbind(args),
        Command::Profile(cmd) => profile_cmd::run(cmd),
    };
    done.map(|()| ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    // Die quietly when the reader of our output goes away (`terrace doctor | head`), as CLI tools do.
    // SAFETY: signal(2) with a valid signal number and SIG_DFL, not a handler: restoring the default
    // disposition of SIGPIPE, before any thread starts, touches no Rust state.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL)
    };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            // --help, --version, and `terrace` alone (the help, exit 2): as clap prints them.
            e.exit();
        }
        Err(e) => {
            // A usage error: one line, like every other refusal (clap's own is three, with a tip):
            // its first paragraph, which for a missing argument names it on the next line.
            let text = e.to_string();
            let first: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            let first = first.join(" ");
            let first = first.trim_start_matches("error: ");
            let first = if first.is_empty() { "bad arguments" } else { first };
            eprintln!("terrace: {first} (see `terrace help`)");
            return ExitCode::from(2);
        }
    };
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
        Ok(code) => code,
        Err(e) => {
            // One line: what went wrong and, from the error itself, what to do.
            eprintln!("terrace: {}", error_line(&e));
            ExitCode::from(2)
        }
    }
}

/// An error and its causes on one line, each fact once: many error types already write their
/// cause into their own message ("cannot read x: No such file"), and printing the chain after it
/// would repeat the OS error.
pub(crate) fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    // One line, whatever the causes contain (a TOML error's snippet, an OS message with a newline).
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The error of a live-machine command in a `terrace` built without the live machine: one line
/// that says what to do instead.
#[cfg(not(all(feature = "live", target_os = "linux")))]
pub(crate) fn needs_live(command: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "`terrace {command}` needs the live machine: this terrace was built without it \
         (cargo feature `live`, Linux only); rebuild with default features on Linux"
    )
}

/// Where to write a machine-readable copy of the results.
pub(crate) fn write_json<T: serde::Serialize>(path: &PathBuf, value: &T) -> Result<()> {
    use anyhow::Context;
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
