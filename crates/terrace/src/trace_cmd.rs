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
        /// Workload name (`terrace list workloads`; the NPB kernels and BFS take `:iterations=N`).
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
    /// Turn a damo recording (its JSON record form: `damo record --output_type json`) into an
    /// aggregated trace: snapshots become epochs, regions' accesses per-page counts.
    ImportDamo {
        /// damo's JSON record file.
        report: PathBuf,
        /// Output trace.
        #[arg(long, short)]
        output: PathBuf,
        /// Which of the file's records (one per monitored target) to import.
        #[arg(long, default_value_t = 0)]
        record: usize,
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
    // The stream's object events and its error are the inner stream's: a wrapper that kept
    // them back would write a trace without its allocations.
    fn take_object_events(&mut self, out: &mut Vec<terrace_workloads::ObjectEventAt>) {
        self.inner.take_object_events(out);
    }
    fn take_error(&mut self) -> Option<trace::TraceError> {
        self.inner.take_error()
    }
    fn programs(&self) -> &[terrace_model::ProgramInfo] {
        self.inner.programs()
    }
}

pub fn run(cmd: TraceCommand) -> Result<()> {
    match cmd {
        TraceCommand::Generate { workload, output, seed, size_scale, aggregate_epoch } => {
            let source = terrace_workloads::build(&workload, seed, size_scale)?;
            if !source.programs().is_empty() {
                return Err(trace::TraceError::SeveralPrograms.into());
            }
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
        TraceCommand::ImportDamo { report, output, record } => import_damo(&report, &output, record),
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
            if let Some(r) = &s.info.recording {
                println!(
                    "recorded        with {}, one observation every {} ms, resolution: {}",
                    r.tracker,
                    r.interval_us as f64 / 1000.0,
                    r.resolution
                );
                println!("estimated       {}", r.estimate);
                // How the replay keeps the recording's time (docs/formats.md, "Recorded traces").
                match (r.interval_accesses.len(), r.instructions_per_access) {
                    (0, 0) => println!("time            accesses only (no recorded time)"),
                    (0, i) => println!(
                        "time            {i} instructions before every access (the mean interval's time)"
                    ),
                    (n, _) => println!(
                        "time            each of {n} intervals in its own wall time at {:.2} GHz",
                        r.clock_ghz
                    ),
                }
            }
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

/// `terrace trace import-damo`: damo's JSON records as an aggregated trace, written whole to a
/// temporary name beside the output and renamed, so a failure leaves no partial trace.
fn import_damo(report: &std::path::Path, output: &std::path::Path, record: usize) -> Result<()> {
    use std::io::Read;
    use terrace_workloads::trace::{damo, recorded};
    let (mut file, _) = terrace_input::open_regular("damo record", report)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).with_context(|| format!("cannot read {}", report.display()))?;
    let Ok(text) = String::from_utf8(bytes) else {
        anyhow::bail!(
            "{} is not text: damo's json_compressed output is zlib-compressed; record with `damo record \
             --output_type json`, or decompress it first",
            report.display()
        );
    };
    let r = damo::parse(&text, record)
        .with_context(|| format!("{} is not a damo JSON record", report.display()))?;
    if r.records > 1 {
        tracing::info!(
            "{} holds {} records (targets); imported record {record} (--record N)",
            report.display(),
            r.records
        );
    }
    let per = r.samples_per_aggregation.map_or("its".to_string(), |n| n.to_string());
    let info = terrace_workloads::RecordingInfo {
        tracker: "damon (damo)".into(),
        interval_us: r.aggregation_us.unwrap_or(0),
        resolution: "DAMON region (adaptive), as damo recorded them: address ranges made dense, 4 KiB pages"
            .into(),
        estimate: format!(
            "a region seen accessed in n of {per} samples per aggregation: {} n reads of each of its pages \
             (one per 64 B line per sample); DAMON does not tell writes from reads",
            recorded::ACCESSES_PER_TOUCH
        ),
        command: None,
        addresses: Vec::new(),
        clock_ghz: recorded::host_clock_ghz(),
        instructions_per_access: 0,
        interval_accesses: Vec::new(),
    };
    let name = report.file_stem().map_or("damo".into(), |s| s.to_string_lossy().into_owned());
    let name: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    let description = format!("imported from damo's record {record} of {}", report.display());
    let description: String = description.chars().filter(|c| !c.is_control()).take(1000).collect();
    let mut bytes = Vec::new();
    let (_, shape) = recorded::write_recorded(&r.intervals, &name, &description, info, &mut bytes)
        .with_context(|| format!("cannot import {}", report.display()))?;
    let temp = output.with_file_name(format!(
        ".{}.terrace-import-{}",
        output.file_name().map_or("trace".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    std::fs::write(&temp, &bytes)
        .and_then(|()| std::fs::rename(&temp, output))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
        .with_context(|| format!("cannot write {}", output.display()))?;
    println!(
        "imported {} snapshots of {} ({} pages, {} estimated accesses, epochs of {}) to {}",
        r.intervals.len(),
        report.display(),
        shape.pages,
        shape.accesses,
        shape.epoch_accesses,
        output.display()
    );
    Ok(())
}
