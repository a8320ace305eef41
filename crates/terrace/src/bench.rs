//! `terrace bench`: the simulator's own speed, as figures (not pass/fail).

use anyhow::Result;
use clap::Subcommand;
use std::time::Instant;
use terrace_model::{MachineInfo, Observations, Plan, Policy, Requirements, TrackerRequest};
use terrace_sim::{Profile, SimOptions};
use terrace_workloads::trace::{self, TraceReader};
use terrace_workloads::{Access, AccessSource};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Simulated accesses per second per core, against the speed of generating and decoding the same stream.
    Sim {
        /// Workload to measure with.
        #[arg(long, default_value = "gups")]
        workload: String,
        #[arg(long, default_value_t = 0.25)]
        size_scale: f64,
    },
}

/// Asks for HeMem's sampling tracker (period 19,997, hardware.md Tracking costs) and never
/// moves: measures what sampling costs the simulator itself.
struct SamplingProbe;

impl Policy for SamplingProbe {
    fn name(&self) -> &str {
        "sampling-probe"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::sampling(19_997)],
            tick_ns: Some(10_000_000),
            ..Default::default()
        }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

fn rate(accesses: u64, secs: f64) -> String {
    format!("{:>8.1} M accesses/s", accesses as f64 / secs / 1e6)
}

fn drain(source: &mut dyn AccessSource) -> u64 {
    let mut buf: Vec<Access> = Vec::with_capacity(1 << 16);
    let mut n = 0u64;
    loop {
        buf.clear();
        let got = source.fill(&mut buf, 1 << 16);
        if got == 0 {
            return n;
        }
        n += got as u64;
    }
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    let BenchCommand::Sim {
        workload,
        size_scale,
    } = cmd;
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE)?;
    let build = || terrace_workloads::build(&workload, 1, size_scale);
    println!("one core; workload {workload} at size scale {size_scale}");

    let t = Instant::now();
    let n = drain(build()?.as_mut());
    let generate = t.elapsed().as_secs_f64();
    println!("generate only                 {}", rate(n, generate));

    let bytes = trace::record(build()?.as_mut(), Vec::new())?;
    let t = Instant::now();
    let decoded = drain(&mut TraceReader::from_reader(std::io::Cursor::new(&bytes))?);
    let decode = t.elapsed().as_secs_f64();
    println!(
        "decode trace only             {}   ({:.2} bytes per access)",
        rate(decoded, decode),
        bytes.len() as f64 / n as f64
    );

    let mut sims = Vec::new();
    for (label, policy) in [("first-touch", None), ("sampling tracker", Some(()))] {
        let mut p: Box<dyn Policy> = match policy {
            None => terrace_policy::build("first-touch")?,
            Some(()) => Box::new(SamplingProbe),
        };
        let t = Instant::now();
        let r = terrace_sim::simulate(build()?, p.as_mut(), &profile, &SimOptions::default())?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "simulate, {label:<19} {}   (generation included)",
            rate(r.accesses, secs)
        );
        sims.push((label, r.accesses as f64 / secs));
    }
    let mut ft = terrace_policy::build("first-touch")?;
    let t = Instant::now();
    let r = terrace_sim::simulate(
        Box::new(TraceReader::from_reader(std::io::Cursor::new(bytes))?),
        ft.as_mut(),
        &profile,
        &SimOptions::default(),
    )?;
    let replay = t.elapsed().as_secs_f64();
    let replay_rate = r.accesses as f64 / replay;
    println!(
        "replay trace, first-touch     {}   (decode included)",
        rate(r.accesses, replay)
    );
    let decode_rate = decoded as f64 / decode;
    println!(
        "ratio decode / replay         {:>8.2}x  (goal: at most 3x)",
        decode_rate / replay_rate
    );
    for (label, s) in sims {
        println!(
            "ratio generate / sim {label:<9}{:>8.2}x",
            (n as f64 / generate) / s
        );
    }
    Ok(())
}
