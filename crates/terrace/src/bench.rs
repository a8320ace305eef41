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

/// A stream already in memory: what the simulator costs with no generator or decoder behind it.
struct MemorySource {
    info: terrace_workloads::WorkloadInfo,
    accesses: std::sync::Arc<Vec<Access>>,
    pos: usize,
}

impl AccessSource for MemorySource {
    fn info(&self) -> &terrace_workloads::WorkloadInfo {
        &self.info
    }
    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = max.min(self.accesses.len() - self.pos);
        buf.extend_from_slice(&self.accesses[self.pos..self.pos + n]);
        self.pos += n;
        n
    }
}

/// Best of `runs` timings of `f`, in seconds, with its last result.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = f()?;
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    Ok((best, out.expect("at least one run")))
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
    let BenchCommand::Sim { workload, size_scale } = cmd;
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE)?;
    let build = || terrace_workloads::build(&workload, 1, size_scale);
    println!("one core; workload {workload} at size scale {size_scale}");

    let (generate, n) = best_of(2, || Ok(drain(build()?.as_mut())))?;
    println!("generate only                 {}", rate(n, generate));

    let bytes: std::sync::Arc<[u8]> = trace::record(build()?.as_mut(), Vec::new())?.into();
    let (decode, decoded) =
        best_of(2, || Ok(drain(&mut TraceReader::from_reader(std::io::Cursor::new(&bytes))?)))?;
    println!(
        "decode trace only             {}   ({:.2} bytes per access)",
        rate(decoded, decode),
        bytes.len() as f64 / n as f64
    );

    let info = build()?.info().clone();
    let mut all = Vec::with_capacity(n as usize);
    build()?.fill(&mut all, n as usize);
    let all = std::sync::Arc::new(all);
    let in_memory = || MemorySource { info: info.clone(), accesses: all.clone(), pos: 0 };
    let mut sim_rates = Vec::new();
    for label in ["first-touch", "sampling tracker"] {
        let (secs, r) = best_of(2, || {
            let mut p: Box<dyn Policy> = if label == "first-touch" {
                terrace_policy::build("first-touch")?
            } else {
                Box::new(SamplingProbe)
            };
            Ok(terrace_sim::simulate(Box::new(in_memory()), p.as_mut(), &profile, &SimOptions::default())?)
        })?;
        println!("simulate, {label:<19} {}   (stream already in memory)", rate(r.accesses, secs));
        sim_rates.push((label, r.accesses as f64 / secs));
    }
    let (replay, r) = best_of(2, || {
        let mut ft = terrace_policy::build("first-touch")?;
        let reader = TraceReader::from_reader(std::io::Cursor::new(bytes.clone()))?;
        Ok(terrace_sim::simulate(Box::new(reader), ft.as_mut(), &profile, &SimOptions::default())?)
    })?;
    println!("replay trace, first-touch     {}   (decode included)", rate(r.accesses, replay));
    let decode_rate = decoded as f64 / decode;
    let replay_rate = r.accesses as f64 / replay;
    println!("ratio decode / trace replay   {:>8.2}x  (goal: at most 3x)", decode_rate / replay_rate);
    for (label, s) in sim_rates {
        println!("ratio decode / sim {label:<11}{:>8.2}x", decode_rate / s);
    }
    Ok(())
}
