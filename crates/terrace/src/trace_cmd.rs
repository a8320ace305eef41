//! `terrace trace`: record a workload as a trace file and summarise one.

use crate::table::with_progress;
use anyhow::{Context, Result};
use clap::Subcommand;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use terrace_sim::human_bytes;
use terrace_workloads::trace::{self, TraceForm};
use terrace_workloads::{Access, AccessSource, WorkloadInfo};

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Record a built-in workload as a trace file.
    Generate {
        /// Workload name (`terrace list workloads`).
        #[arg(long, short)]
        workload: String,
        /// Output file.
        #[arg(long, short)]
        output: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 1.0)]
        size_scale: f64,
        /// Store per-page read/write counts per epoch of this many accesses instead of every access.
        #[arg(long)]
        aggregate_epoch: Option<u32>,
    },
    /// Summarise a trace file (verifies every block's checksum).
    Info {
        file: PathBuf,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Counts what passes through, for the progress bar.
struct Counted<'a> {
    inner: Box<dyn AccessSource>,
    counter: &'a std::sync::atomic::AtomicU64,
}

impl AccessSource for Counted<'_> {
    fn info(&self) -> &WorkloadInfo {
        self.inner.info()
    }
    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = self.inner.fill(buf, max);
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        n
    }
}

pub fn run(cmd: TraceCommand) -> Result<()> {
    match cmd {
        TraceCommand::Generate { workload, output, seed, size_scale, aggregate_epoch } => {
            let source = terrace_workloads::build(&workload, seed, size_scale)?;
            let total = source.info().accesses;
            let file =
                File::create(&output).with_context(|| format!("cannot create {}", output.display()))?;
            let out = BufWriter::with_capacity(1 << 20, file);
            with_progress(total, |counter| -> Result<()> {
                let mut counted = Counted { inner: source, counter: &counter };
                match aggregate_epoch {
                    None => trace::record(&mut counted, out)?,
                    Some(n) => trace::aggregate(&mut counted, n, out)?,
                };
                Ok(())
            })?;
            let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
            println!(
                "wrote {} accesses of {workload} to {} ({}, {:.2} bytes per access)",
                total,
                output.display(),
                human_bytes(size),
                size as f64 / total.max(1) as f64
            );
            Ok(())
        }
        TraceCommand::Info { file, json } => {
            let s = trace::trace_info(&file)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
                return Ok(());
            }
            println!("workload        {} ({})", s.info.name, s.info.description);
            println!(
                "form            {}",
                match s.form {
                    TraceForm::Exact => "exact events".to_string(),
                    TraceForm::Aggregated { epoch_accesses } => format!(
                        "per-page counts, epochs of {epoch_accesses} accesses ({} epochs)",
                        s.epochs.unwrap_or(0)
                    ),
                }
            );
            println!("accesses        {} ({} reads, {} writes)", s.events, s.reads, s.writes);
            println!("pages touched   {} ({})", s.distinct_pages, human_bytes(s.footprint_bytes));
            if s.object_events > 0 {
                println!("object events   {}", s.object_events);
            }
            println!("footprint       {} declared", human_bytes(s.info.footprint_bytes));
            if let Some(t) = s.threads {
                println!("threads         {t}");
            }
            // WorkloadInfo::scale: how much smaller than the seed's experiment this run is.
            println!(
                "scale           1/{} of the seed experiment's size (footprint and fast tier both scaled)",
                s.info.scale
            );
            Ok(())
        }
    }
}
