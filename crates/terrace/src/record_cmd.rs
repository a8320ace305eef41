//! `terrace record`: a program's page heat over time, from the live trackers, written as an
//! aggregated trace that `terrace sim` and `terrace compare` replay (docs/live.md, "Recording a
//! program"; the conversion in terrace_workloads::trace::recorded, docs/formats.md).
//!
//! Recording reads DAMON's regions, or scans the page table's bits (the idle-page bitmap,
//! soft-dirty) where the kernel has no DAMON, directly rather than through the live machine's
//! policy loop: the loop hands a policy per-page referenced bits or read samples scaled to its
//! ticks, which flatten DAMON's per-region access counts, the one thing a recording wants to
//! keep; and recording places nothing, so it needs no tiers, no policy and no program-start dance
//! (no userfaultfd: the program is started as any child is).
// Without the live machine the arguments are parsed (the CLI is the same) but not used.
#![cfg_attr(not(all(feature = "live", target_os = "linux")), allow(dead_code))]

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// The default interval: DAMON's own default aggregation interval (100 ms, 20 samples of 5 ms),
/// the cost its authors chose for always-on monitoring; an epoch of the trace is about one.
pub const DEFAULT_INTERVAL_MS: u64 = 100;

/// The default budget of `uffd-wp`'s write-protect faults a second, a TLB flush counted as
/// [`terrace_linux::trackers::written_bits::FLUSH_IN_FAULTS`] faults: about 1% of one core at the about 1 us a fault
/// measured on the development host (docs/live.md, "Overhead"), leaving the rest of the 3% goal
/// to the recording's floor (about 2% there at a budget of 1). At 20,000, the default before
/// 2026-11-30, python3 ran 3.2% longer recorded (median of 15 rounds).
pub const DEFAULT_FAULT_BUDGET: u64 = 10_000;

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The trace to write (aggregated form; written under a temporary name and renamed at the end).
    #[arg(long, short)]
    pub output: PathBuf,
    /// The tracker: `auto` picks the first the host offers, in the order damon, sampler (the
    /// CPU's load and store sampling), idle-page, soft-dirty, uffd-wp (userfaultfd's
    /// asynchronous write-protection, Linux 6.7: writes only, as soft-dirty), passing over DAMON
    /// while another kdamond runs (docs/live.md, "Recording a program").
    #[arg(long, value_enum, default_value_t = TrackerName::Auto)]
    pub tracker: TrackerName,
    /// Milliseconds between observations (DAMON's aggregation interval).
    #[arg(long, default_value_t = DEFAULT_INTERVAL_MS, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub interval: u64,
    /// Record a running process instead of starting a program.
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<i32>,
    /// Stop recording after this many seconds (the program runs on).
    #[arg(long)]
    pub duration: Option<f64>,
    /// With DAMON, which does not tell writes from reads, also read the pages' soft-dirty bits
    /// each interval, so that written pages count writes: a write-protect fault on the first
    /// write to each page each interval. A scan with the idle-page bitmap does so whenever the
    /// kernel has soft-dirty; needs soft-dirty (CONFIG_MEM_SOFT_DIRTY). Where `auto` chooses
    /// another tracker than DAMON, which tells writes itself, it changes nothing.
    #[arg(long)]
    pub writes: bool,
    /// With uffd-wp: the write-protect faults a second the recording may cost the program (each
    /// about a microsecond), a TLB flush of its cores counted as ten. Where the program writes
    /// more pages than that, an interval watches a sample of its 2 MiB chunks, in turn, and a page
    /// seen written there counts for the chunks not watched. 0: every page, every interval,
    /// whatever it costs.
    #[arg(long, default_value_t = DEFAULT_FAULT_BUDGET, value_name = "FAULTS")]
    pub fault_budget: u64,
    /// The sampler's events: `memory`, the CPU's load and store sampling (PEBS or IBS), or
    /// `page-faults`, the software page-fault event, every fault, which every kernel has: it
    /// sees first touches only, and is there to test the recording on hosts without a PMU.
    #[arg(long, value_enum, default_value_t = SamplerEvents::Memory, hide = true)]
    pub sampler_events: SamplerEvents,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SamplerEvents {
    Memory,
    PageFaults,
}

/// One sample in this many loads or stores: HeMem's PEBS `SAMPLE_PERIOD` (src/pebs.h), which
/// hemem and hpwp sample with on the live machine too.
pub const SAMPLE_PERIOD: u64 = 19_997;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TrackerName {
    Auto,
    Damon,
    IdlePage,
    SoftDirty,
    Sampler,
    UffdWp,
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn record(_: RecordArgs) -> anyhow::Result<()> {
    Err(crate::needs_live("record"))
}

#[cfg(all(feature = "live", target_os = "linux"))]
pub use live::record;

#[cfg(all(feature = "live", target_os = "linux"))]
mod live {
    use super::{RecordArgs, SamplerEvents, TrackerName, SAMPLE_PERIOD};
    use anyhow::{bail, Context, Result};
    use clap::ValueEnum;
    use std::fs::{File, OpenOptions};
    use std::io::BufWriter;
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::time::{Duration, Instant};
    use terrace_linux::process::{Life, ProcessMemory};
    use terrace_linux::trackers::damon::{self, DamonReader};
    use terrace_linux::trackers::perf_sampler::{self, PerfSampler, SampledEvent};
    use terrace_linux::trackers::written_bits::{self, WrittenBits};
    use terrace_linux::trackers::{idle_page, soft_dirty};
    use terrace_linux::userfaultfd::Userfaultfd;
    use terrace_model::AccessKind;
    use terrace_workloads::trace::recorded::{
        self, Interval, RecordError, ACCESSES_PER_TOUCH, SEEN_ACCESSED, SEEN_SAMPLED, SEEN_WRITTEN,
    };
    use terrace_workloads::RecordingInfo;

    /// The signal that asked Terrace to stop (SIGINT, SIGTERM), 0 if none.
    static STOP: AtomicI32 = AtomicI32::new(0);

    extern "C" fn on_stop(signal: libc::c_int) {
        STOP.store(signal, Ordering::Relaxed);
    }

    /// The output file, written under a temporary name beside it so that the output name never
    /// holds a half-written trace; removed unless [`Output::persist`] renames it.
    struct Output {
        temp: PathBuf,
        path: PathBuf,
        file: Option<File>,
    }

    impl Output {
        /// Checks the output can be written, before anything starts.
        fn create(path: &Path) -> Result<Self> {
            if path.is_dir() {
                bail!("the output {} is a directory; name a file for the trace", path.display());
            }
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let name =
                path.file_name().with_context(|| format!("output {} names no file", path.display()))?;
            let temp = dir.join(format!(".{}.terrace-record-{}", name.to_string_lossy(), std::process::id()));
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .with_context(|| format!("cannot write the output {}", path.display()))?;
            Ok(Output { temp, path: path.to_path_buf(), file: Some(file) })
        }

        fn persist(mut self) -> Result<()> {
            drop(self.file.take());
            std::fs::rename(&self.temp, &self.path)
                .with_context(|| format!("cannot write the output {}", self.path.display()))
        }
    }

    impl Drop for Output {
        fn drop(&mut self) {
            if self.file.is_some() {
                let _ = std::fs::remove_file(&self.temp);
            }
        }
    }

    /// The sampler's events here, or why there are none.
    fn sampler_events(which: SamplerEvents) -> Result<Vec<SampledEvent>, String> {
        match which {
            SamplerEvents::Memory => perf_sampler::memory_events(),
            SamplerEvents::PageFaults => Ok(vec![SampledEvent::page_faults(AccessKind::Write)]),
        }
    }

    /// The tracker to record with: the one named, or the first the host offers.
    fn choose(name: TrackerName, events: SamplerEvents) -> Result<TrackerName> {
        let has = |t: TrackerName| match t {
            TrackerName::Damon => damon::available(),
            TrackerName::IdlePage => idle_page::available(),
            TrackerName::SoftDirty => soft_dirty::works_here(),
            TrackerName::Sampler => sampler_events(events).is_ok(),
            TrackerName::UffdWp => written_bits::works_here().is_ok(),
            TrackerName::Auto => false,
        };
        let lacks = |t: TrackerName| match t {
            TrackerName::Damon => {
                "this kernel lacks DAMON's sysfs interface (CONFIG_DAMON_VADDR, CONFIG_DAMON_SYSFS)".into()
            }
            TrackerName::IdlePage => {
                "this kernel lacks the idle-page bitmap (CONFIG_IDLE_PAGE_TRACKING)".into()
            }
            TrackerName::SoftDirty => "this kernel lacks soft-dirty tracking (CONFIG_MEM_SOFT_DIRTY)".into(),
            TrackerName::Sampler => sampler_events(events).err().unwrap_or_default(),
            TrackerName::UffdWp => written_bits::works_here().err().unwrap_or_default(),
            TrackerName::Auto => String::new(),
        };
        match name {
            TrackerName::Auto => {
                // DAMON that another kdamond holds cannot be had: say so once and take the next.
                let busy = damon::in_use();
                let order = [
                    TrackerName::Damon,
                    TrackerName::Sampler,
                    TrackerName::IdlePage,
                    TrackerName::SoftDirty,
                    TrackerName::UffdWp,
                ];
                let usable = |t: TrackerName| has(t) && !(t == TrackerName::Damon && busy.is_some());
                let Some(t) = order.into_iter().find(|&t| usable(t)) else {
                    if let Some(n) = busy {
                        bail!(
                            "no tracker terrace record can use here: DAMON is in use here by another kdamond \
                             ({n} exist, one running), and this host has none of load/store sampling, the \
                             idle-page bitmap, soft-dirty or userfaultfd's asynchronous write-protection; \
                             `terrace doctor` lists what it has"
                        )
                    }
                    bail!(
                        "no tracker terrace record can use here: this host has none of DAMON, load/store \
                         sampling, the idle-page bitmap, soft-dirty or userfaultfd's asynchronous \
                         write-protection; `terrace doctor` lists what it has"
                    )
                };
                let name = t.to_possible_value().expect("named").get_name().to_string();
                // What `auto` took in DAMON's place is said; so is a tracker blind to reads, since
                // the replay then misses what placing read pages gains (`terrace advise` notes it).
                let blind = if matches!(t, TrackerName::SoftDirty | TrackerName::UffdWp) {
                    ", which sees writes only: a page only read is not recorded"
                } else {
                    ""
                };
                if let Some(n) = busy {
                    eprintln!(
                        "terrace record: DAMON is in use here by another kdamond ({n} exist, one running), so \
                         recording with {name}{blind}"
                    );
                } else if !blind.is_empty() {
                    eprintln!(
                        "terrace record: recording with {name} (this host has no DAMON, load/store sampling \
                         or idle-page bitmap){blind}"
                    );
                }
                needs_root(t)
            }
            t if !has(t) => bail!(
                "--tracker {}: {}; `terrace doctor` lists the trackers this host has",
                t.to_possible_value().expect("named").get_name(),
                lacks(t)
            ),
            t => needs_root(t),
        }
    }

    /// `chosen`, if Terrace runs with what it needs.
    fn needs_root(chosen: TrackerName) -> Result<TrackerName> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        match chosen {
            TrackerName::Damon if !root => {
                bail!("recording with DAMON needs root (it writes /sys/kernel/mm/damon): run terrace record as root")
            }
            TrackerName::IdlePage if !root => bail!(
                "recording with the idle-page bitmap needs root (it reads page frames): run terrace record as \
                 root, or record with --tracker soft-dirty"
            ),
            _ => {}
        }
        Ok(chosen)
    }

    /// Whether `pid` exists; the error says it is gone or not ours.
    fn check_pid(pid: i32) -> Result<()> {
        if pid <= 0 {
            bail!("--pid {pid} is not a process id");
        }
        // SAFETY: kill with signal 0 sends nothing; it only checks the process exists.
        if unsafe { libc::kill(pid, 0) } == 0 {
            return Ok(());
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) => bail!("pid {pid} is gone (no such process): nothing to record"),
            Some(libc::EPERM) => bail!("no permission to watch pid {pid}: run as root or as its owner"),
            _ => bail!("cannot look at pid {pid}: {}", std::io::Error::last_os_error()),
        }
    }

    /// A workload name from the program: its file name, printable, at most 64 bytes.
    fn name_of(program: &str) -> String {
        let base =
            Path::new(program).file_name().map_or(program.into(), |n| n.to_string_lossy().into_owned());
        let mut name: String = base.chars().filter(|c| !c.is_control()).collect();
        while name.len() > terrace_workloads::WorkloadInfo::MAX_NAME_BYTES {
            name.pop();
        }
        if name.is_empty() {
            "recorded".into()
        } else {
            name
        }
    }

    fn printable(text: &str, max: usize) -> String {
        let mut out: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        while out.len() > max {
            out.pop();
        }
        out
    }

    pub fn record(args: RecordArgs) -> Result<()> {
        if args.pid.is_none() && args.command.is_empty() {
            bail!(
                "name a program to record (terrace record -o F -- PROGRAM ARGS) or a running one (--pid PID)"
            );
        }
        if let Some(d) = args.duration {
            if !(d.is_finite() && d > 0.0) {
                bail!("--duration {d} is not a positive number of seconds");
            }
        }
        let tracker = choose(args.tracker, args.sampler_events)?;
        // Every tracker but DAMON tells writes itself: `--writes` asks nothing more of the one
        // `auto` chose, and is refused beside one named.
        if args.writes && tracker != TrackerName::Damon && args.tracker != TrackerName::Auto {
            bail!(
                "--writes adds soft-dirty beside DAMON, which cannot tell writes; --tracker {} tells them \
                 itself: record without --writes",
                tracker.to_possible_value().expect("named").get_name()
            );
        }
        let writes = args.writes && tracker == TrackerName::Damon;
        if writes && !soft_dirty::works_here() {
            bail!(
                "--writes reads soft-dirty bits, which this kernel lacks (CONFIG_MEM_SOFT_DIRTY); record without it"
            );
        }
        if let Some(pid) = args.pid {
            check_pid(pid)?;
        }
        let output = Output::create(&args.output)?;

        // Stop on Ctrl-C (the program, in the same foreground group, gets it too) or SIGTERM.
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
            unsafe { libc::signal(signal, on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t) };
        }

        // userfaultfd's write-protection needs a descriptor made inside the program: before its
        // first instruction for one started here, as `terrace run` makes it.
        let mut uffd = None;
        // The sampler's events are inherited by the processes the program starts only if they are
        // open before it starts them: on a program started here, before its first instruction.
        let mut sampler = None;
        let (pid, mut child, what) = match args.pid {
            Some(pid) => {
                let comm = terrace_linux::process::name(pid);
                if tracker == TrackerName::UffdWp {
                    let fd = terrace_linux::remote_syscall::create_userfaultfd_in_running(pid).with_context(
                        || format!("cannot make a userfaultfd inside pid {pid} to record it"),
                    )?;
                    uffd = Some(Userfaultfd::from_fd(fd));
                }
                (pid, None, format!("pid {pid} ({comm})"))
            }
            None => {
                let mut cmd = std::process::Command::new(&args.command[0]);
                cmd.args(&args.command[1..]);
                let child = if tracker == TrackerName::UffdWp {
                    let (mut child, stopped) = terrace_linux::remote_syscall::spawn_stopped(&mut cmd)
                        .with_context(|| format!("cannot start {}", args.command[0]))?;
                    let made = stopped.create_userfaultfd();
                    let released = stopped.release();
                    match (made, released) {
                        (Ok(fd), Ok(())) => uffd = Some(Userfaultfd::from_fd(fd)),
                        (made, released) => {
                            // A program that cannot be recorded is not left running (or
                            // stopped): it is killed as soon as it is let go.
                            let _ = child.kill();
                            let _ = child.wait();
                            made.context("cannot make a userfaultfd inside the program to record it")?;
                            released.context("cannot let the program run after making its userfaultfd")?;
                        }
                    }
                    child
                } else if tracker == TrackerName::Sampler {
                    let events = sampler_events(args.sampler_events).map_err(anyhow::Error::msg)?;
                    let (mut child, stopped) = terrace_linux::remote_syscall::spawn_stopped(&mut cmd)
                        .with_context(|| format!("cannot start {}", args.command[0]))?;
                    let opened =
                        open_sampler(child.id() as i32, &events, sampler_period(args.sampler_events));
                    let released = stopped.release();
                    match (opened, released) {
                        (Ok(s), Ok(())) => sampler = Some(s),
                        (opened, released) => {
                            let _ = child.kill();
                            let _ = child.wait();
                            opened?;
                            released.context("cannot let the program run after opening the sampler")?;
                        }
                    }
                    child
                } else {
                    cmd.spawn().with_context(|| format!("cannot start {}", args.command[0]))?
                };
                (child.id() as i32, Some(child), printable(&args.command.join(" "), 200))
            }
        };
        let name = match args.pid {
            Some(_) => name_of(what.split('(').nth(1).unwrap_or("recorded").trim_end_matches(')')),
            None => name_of(&args.command[0]),
        };

        let interval_us = args.interval * 1000;
        let period = sampler_period(args.sampler_events);
        // DAMON's default 5 ms sample, or 20 samples per interval when the interval is shorter.
        let sample_us = (interval_us / 20).clamp(250, damon::SAMPLE_US);
        // The idle-page bitmap tells accesses, soft-dirty writes: a scan takes both where it can.
        let scan = Scan {
            idle_page: tracker == TrackerName::IdlePage,
            soft_dirty: tracker == TrackerName::SoftDirty
                || (tracker == TrackerName::IdlePage && soft_dirty::works_here()),
            uffd_wp: tracker == TrackerName::UffdWp,
        };
        let started = Instant::now();
        let mut sampling = Sampling::default();
        let mut slots = ProcessSlots::new(pid);
        // The processes the program started that DAMON could not follow.
        let mut not_followed = NotFollowed::default();
        let recorded = match tracker {
            TrackerName::Damon => watch(
                pid,
                child.as_mut(),
                sample_us,
                interval_us,
                args.duration,
                writes,
                &mut slots,
                &mut not_followed,
            ),
            TrackerName::Sampler => {
                let opened = match sampler.take() {
                    Some(s) => Ok(s),
                    None => {
                        let events = sampler_events(args.sampler_events).map_err(anyhow::Error::msg)?;
                        open_sampler(pid, &events, period)
                    }
                };
                match opened {
                    Ok(s) => {
                        watch_samples(s, pid, child.as_mut(), period, interval_us, args.duration, &mut slots)
                            .map(|i| (i, false))
                    }
                    // A program that has exited already recorded nothing, which the caller says.
                    Err(e) if child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_some()) => {
                        tracing::debug!("sampler on pid {pid}: {e:#}");
                        Ok((Vec::new(), false))
                    }
                    Err(e) => Err(e),
                }
            }
            _ => {
                // The budget of one interval, at least one fault.
                let budget = (args.fault_budget > 0)
                    .then(|| (args.fault_budget * interval_us).div_ceil(1_000_000).max(1));
                watch_scan(
                    pid,
                    child.as_mut(),
                    scan,
                    uffd,
                    budget,
                    interval_us,
                    args.duration,
                    &mut sampling,
                    &mut slots,
                )
                .map(|i| (i, false))
            }
        };
        // DAMON's, said once the trace is written, or in the refusal when there is none.
        let not_followed = not_followed.line();
        let (intervals, physical) = match recorded {
            Ok(i) => i,
            Err(e) => {
                if let Some(mut c) = child {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        // Terrace's share of the recording's cost (DAMON's kdamond, a kernel thread, is not counted).
        let own_cpu = crate::process_cpu::own_cpu_seconds().unwrap_or(f64::NAN);

        let samples = interval_us / sample_us;
        let (label, resolution, estimate) = match tracker {
            TrackerName::Damon => (
                "DAMON",
                if physical {
                    "DAMON paddr region (adaptive: 100 to 1000 regions over all physical memory, shared with \
                     other processes), each 4 KiB page by its frame"
                        .to_string()
                } else {
                    "DAMON region of the process's address space (adaptive: 10 to 1000 regions over its mappings, \
                     fvaddr; vaddr's three ranges on a kernel before 6.7), clipped to mapped 4 KiB pages"
                        .to_string()
                },
                format!(
                    "a region seen accessed in n of an interval's {samples} samples ({sample_us} us apart): \
                     {ACCESSES_PER_TOUCH} n reads of each of its pages (one per 64 B line per sample); {}",
                    if writes {
                        format!(
                            "a page soft-dirty saw written: {ACCESSES_PER_TOUCH} of them writes, the rest reads (one \
                             touch: the bit says written, not how often), and one touch of writes if DAMON saw none"
                        )
                    } else {
                        "DAMON does not tell writes from reads, so there are no writes (record with --writes \
                         where the kernel has soft-dirty)"
                            .to_string()
                    }
                ),
            ),
            TrackerName::Sampler => match args.sampler_events {
                SamplerEvents::Memory => (
                    "the perf sampler",
                    "4 KiB page of each sampled load's or store's data address (PEBS or IBS)".to_string(),
                    format!(
                        "each sample counts {period} accesses of its kind (one load or store in {period} is \
                         sampled, HeMem's period): loads and stores retired, cache hits included, so a program \
                         whose accesses mostly hit its caches is recorded as more memory-bound than it is"
                    ),
                ),
                SamplerEvents::PageFaults => (
                    "the perf sampler on page faults",
                    "4 KiB page of each page fault's address (the software event)".to_string(),
                    "each page fault counts one write: first touches only, a test of the recording, not a \
                     measure of heat"
                        .to_string(),
                ),
            },
            _ => (
                scan.label(),
                format!("4 KiB page ({}), scanned every interval", scan.label()),
                format!("{}{}", scan.estimate(), sampling.estimate(args.fault_budget)),
            ),
        };
        // Several processes: where each one's pages are in the trace.
        let resolution = if slots.recorded > 1 {
            format!(
                "{resolution}; {} processes, the program and those it started: the program's pages at their \
                 addresses, the k-th process it started at its addresses plus k x 2^48 bytes",
                slots.recorded
            )
        } else {
            resolution
        };
        let info = RecordingInfo {
            tracker: tracker.to_possible_value().expect("named").get_name().to_string(),
            interval_us,
            resolution,
            estimate,
            // Quoted as a shell would need it only for the simple cases: the line is advice to
            // read, not a script.
            command: (!args.command.is_empty()).then(|| printable(&args.command.join(" "), 1000)),
            addresses: Vec::new(),
            clock_ghz: terrace_workloads::trace::recorded::host_clock_ghz(),
            instructions_per_access: 0,
            interval_accesses: Vec::new(),
        };
        let description = printable(&format!("recorded by terrace record from {what}"), 1000);
        let written = {
            let mut out = output.file.as_ref().expect("open until persisted");
            recorded::write_recorded(&intervals, &name, &description, info, BufWriter::new(&mut out))
                .map(|(_, shape)| shape)
        };
        // The program's exit status, passed through.
        let status = match child.as_mut() {
            Some(c) => {
                // Ctrl-C reached the program too (one foreground group); a signal sent to Terrace
                // alone is passed on, so that the program does not outlive its recording.
                let stop = STOP.load(Ordering::Relaxed);
                if stop != 0 && c.try_wait().ok().flatten().is_none() {
                    // SAFETY: kill of our own child's pid with the signal Terrace received.
                    unsafe { libc::kill(c.id() as i32, stop) };
                }
                c.wait().ok()
            }
            None => None,
        };
        let code = status.map_or(0, |st| st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0)));
        let shape = match written {
            Ok(shape) => shape,
            Err(RecordError::Empty) => {
                drop(output);
                if let Some(why) = not_followed {
                    bail!("nothing recorded: {why}");
                }
                if args.pid.is_some() || seconds * 1000.0 > args.interval as f64 {
                    bail!("{what} accessed no memory {label} saw in {seconds:.1} s: nothing recorded");
                }
                bail!(
                    "{} exited (status {code}) before the first {} ms interval ended: nothing recorded; lower \
                     --interval (at least 10)",
                    args.command[0],
                    args.interval
                );
            }
            Err(e) => return Err(e).context("cannot write the recording"),
        };
        output.persist()?;
        if let Some(why) = not_followed {
            eprintln!("terrace record: {why}");
        }
        tracing::debug!(recorded_s = seconds, total_s = started.elapsed().as_secs_f64(), "recording written");
        let processes = match slots.recorded {
            1 => String::new(),
            2 => " and the process it started".to_string(),
            n => format!(" and the {} processes it started", n - 1),
        };
        eprintln!(
            "terrace: recorded {what}{processes} with {label} for {seconds:.1} s ({own_cpu:.2} s of Terrace's CPU): {} \
             interval{} with accesses, {} pages ({} MiB), {} estimated accesses in epochs of {}; wrote {}",
            shape.active_intervals,
            if shape.active_intervals == 1 { "" } else { "s" },
            shape.pages,
            shape.pages >> 8,
            shape.accesses,
            shape.epoch_accesses,
            args.output.display()
        );
        if child.is_some() {
            std::process::exit(code);
        }
        Ok(())
    }

    /// Records `pid` and the processes it starts with DAMON until it exits, a stop signal comes,
    /// or `duration` passes: each aggregation's regions, clipped to each process's mappings, as
    /// one interval. On virtual memory each process the program starts becomes one more target
    /// of the kdamond ([`DamonReader::follow`]); on physical memory, which holds every process's
    /// pages, each one's pages take their frames' counts. A process DAMON cannot follow is put in
    /// `not_followed` (pid, name) with the reason, which the caller reports.
    #[allow(clippy::too_many_arguments)]
    fn watch(
        pid: i32,
        mut child: Option<&mut std::process::Child>,
        sample_us: u64,
        interval_us: u64,
        duration: Option<f64>,
        writes: bool,
        slots: &mut ProcessSlots,
        not_followed: &mut NotFollowed,
    ) -> Result<(Vec<Interval>, bool)> {
        let memory = match ProcessMemory::attach(pid) {
            Ok(m) => m,
            // A program that has exited already recorded nothing, which the caller says.
            Err(terrace_linux::process::ProcessError::Gone(_)) if child.is_some() => {
                return Ok((Vec::new(), false))
            }
            Err(e) => return Err(e).with_context(|| format!("cannot record pid {pid}")),
        };
        // DAMON on the process's virtual memory where the kernel has it, else on physical memory
        // with the process's pages found by frame (pagemap).
        let (mut reader, physical) = match DamonReader::start(pid, sample_us, interval_us) {
            Ok(r) => (r, false),
            Err(damon::DamonError::NoOperations { .. }) => {
                tracing::info!(
                    "this kernel's DAMON has no vaddr operations: recording with paddr (all of physical \
                     memory), each page of pid {pid} taking its frame's region's counts"
                );
                (DamonReader::start_physical(sample_us, interval_us).context("cannot start DAMON")?, true)
            }
            Err(e) => return Err(e).context("cannot start DAMON"),
        };
        if writes {
            // What the program wrote before the recording began is not counted.
            soft_dirty::clear(pid)
                .with_context(|| format!("cannot clear the soft-dirty bits of pid {pid}"))?;
        }
        let mut tree = vec![DamonWatched::new(memory, 0, slots.vpn_base(pid))];
        let frames_every = (1_000_000 / interval_us).max(1) as usize;
        let bar = spinner();
        let started = Instant::now();
        let poll = Duration::from_micros((interval_us / 10).max(1000));
        let mut intervals: Vec<Interval> = Vec::new();
        let mut seen = 0u64;
        let mut counted: Vec<Vec<(u64, u64, u64, u64)>> = Vec::new();
        let mut part = Interval::new();
        loop {
            if STOP.load(Ordering::Relaxed) != 0 {
                break;
            }
            if duration.is_some_and(|d| started.elapsed().as_secs_f64() >= d) {
                break;
            }
            match reader.latest_of_each() {
                Ok((seq, targets)) if seq > seen => {
                    seen = seq;
                    let frames_due = intervals.len().is_multiple_of(frames_every);
                    let mut interval = Interval::new();
                    // Each target's regions as (start, end, reads, writes) per page, once.
                    counted.resize_with(targets.len(), Vec::new);
                    for (c, regions) in counted.iter_mut().zip(&targets) {
                        c.clear();
                        c.extend(
                            regions
                                .iter()
                                .map(|r| (r.start, r.end, u64::from(r.nr_accesses) * ACCESSES_PER_TOUCH, 0)),
                        );
                    }
                    let mut k = 0;
                    while k < tree.len() {
                        let w = &mut tree[k];
                        // On physical memory every process's pages lie in the one target's regions.
                        let target = if physical { 0 } else { w.target };
                        let regions = counted.get(target).map_or(&[][..], |c| &c[..]);
                        part.clear();
                        if w.read(regions, physical, frames_due, writes, &mut part) || k == 0 {
                            let base = w.vpn_base;
                            interval.extend(part.drain(..).map(|mut s| {
                                s.first_page += base;
                                s
                            }));
                            k += 1;
                        } else {
                            // Gone: what it had recorded stays.
                            slots.leave(tree.remove(k).pid);
                        }
                    }
                    tracing::debug!(
                        "aggregation {seq}: {} targets, {} regions ({} accessed), {} processes, {} spans",
                        targets.len(),
                        targets.iter().map(Vec::len).sum::<usize>(),
                        targets.iter().flatten().filter(|r| r.nr_accesses > 0).count(),
                        tree.len(),
                        interval.len()
                    );
                    intervals.push(interval);
                    bar.set_message(format!("{pid}: {} intervals", intervals.len()));
                    // Processes started since join now: from the aggregation after next on
                    // virtual memory (DAMON lays a new target's regions out at its next update),
                    // at once on physical memory.
                    for p in slots.new_processes(pid, tree.iter().map(|w| w.pid)) {
                        let memory = match attach_started(p) {
                            Ok(Some(m)) => m,
                            Ok(None) => continue, // tried again at the next aggregation
                            Err(e) => {
                                slots.refuse(p, &e);
                                continue;
                            }
                        };
                        let target = if physical {
                            0
                        } else {
                            match reader.follow(p) {
                                Ok(t) => t,
                                Err(why) => {
                                    if terrace_linux::process::running(p) {
                                        slots.leave_out(p);
                                        not_followed.add(p, why);
                                    }
                                    continue;
                                }
                            }
                        };
                        if writes && soft_dirty::clear(p).is_err() {
                            continue;
                        }
                        slots.joined();
                        tree.push(DamonWatched::new(memory, target, slots.vpn_base(p)));
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!("DAMON regions of pid {pid}: {e}"),
            }
            // After reading: the aggregation that ended as the program did is kept.
            let gone = match child.as_deref_mut() {
                Some(c) => c.try_wait().ok().flatten().is_some(),
                // SAFETY: signal 0 only checks the process exists.
                None => (unsafe { libc::kill(pid, 0) }) != 0,
            };
            if gone {
                break;
            }
            bar.tick();
            std::thread::sleep(poll);
        }
        bar.finish_and_clear();
        drop(reader);
        Ok((intervals, physical))
    }

    /// The processes DAMON could not follow, and why (the first reason given).
    #[derive(Default)]
    struct NotFollowed {
        processes: std::collections::BTreeMap<i32, String>,
        why: Option<String>,
    }

    impl NotFollowed {
        fn add(&mut self, pid: i32, why: String) {
            self.processes.entry(pid).or_insert_with(|| terrace_linux::process::name(pid));
            self.why.get_or_insert(why);
        }

        /// One line naming them, or none.
        fn line(&self) -> Option<String> {
            let why = self.why.as_ref()?;
            let n = self.processes.len();
            let names: Vec<String> = self.processes.iter().take(3).map(|(p, c)| format!("{p} {c}")).collect();
            Some(format!(
                "DAMON did not follow {n} process{} the program started ({}{}): {why}; the trace leaves {} out. \
                 Record with --tracker idle-page, soft-dirty or uffd-wp, which follow every process, or start \
                 the one you mean without its wrapper",
                if n == 1 { "" } else { "es" },
                names.join(", "),
                if n > 3 { ", ..." } else { "" },
                if n == 1 { "it" } else { "them" }
            ))
        }
    }

    /// One process of a tree DAMON records: its memory, its target, and where its pages go.
    struct DamonWatched {
        pid: i32,
        memory: ProcessMemory,
        /// Its target in the kdamond's order (virtual memory).
        target: usize,
        /// Added to its virtual page numbers in the trace ([`ProcessSlots`]).
        vpn_base: u64,
        mapped: Vec<(u64, u64)>,
        /// (frame, virtual page) of its present pages, sorted by frame (physical memory).
        frames: Vec<(u64, u64)>,
        entries: Vec<u64>,
        written: Vec<u64>,
    }

    impl DamonWatched {
        fn new(memory: ProcessMemory, target: usize, vpn_base: u64) -> Self {
            DamonWatched {
                pid: memory.pid(),
                memory,
                target,
                vpn_base,
                mapped: Vec::new(),
                frames: Vec::new(),
                entries: Vec::new(),
                written: Vec::new(),
            }
        }

        /// Its pages' counts in this aggregation into `out` (at its own page numbers), from
        /// `counted` ([start, end) addresses, reads and writes per page): its target's regions,
        /// or on physical memory, the regions of every frame. `false` if it is gone.
        fn read(
            &mut self,
            counted: &[(u64, u64, u64, u64)],
            physical: bool,
            frames_due: bool,
            writes: bool,
            out: &mut Interval,
        ) -> bool {
            // Mappings now, for this aggregation's regions; a process exiting has none. A
            // program started by Terrace was attached before its exec: follow it. On physical
            // memory the mappings matter only when frames are read again.
            let _ = self.memory.follow_exec();
            if !physical || frames_due {
                match self.memory.refresh() {
                    Ok(()) => {
                        self.mapped.clear();
                        self.mapped.extend(self.memory.mapped_ranges());
                    }
                    Err(terrace_linux::process::ProcessError::Gone(_)) => return false,
                    Err(_) => {}
                }
            }
            // Whether `entries` holds this interval's pagemap already.
            let mut read = false;
            if physical {
                // Frames change seldom (a page faulted in, migrated, reclaimed): read pagemap
                // about once a second, not every interval.
                if frames_due {
                    self.frames.clear();
                    read = self.memory.read_pagemap(&mut self.entries).is_ok();
                    if read {
                        let frames = &mut self.frames;
                        for_each_page(&self.memory, &self.entries, |vpn, e| {
                            // Bit 63: present; bits 0-54: the frame (zero without CAP_SYS_ADMIN).
                            let pfn = e & ((1 << 55) - 1);
                            if e >> 63 == 1 && pfn != 0 {
                                frames.push((pfn, vpn));
                            }
                        });
                    }
                    self.frames.sort_unstable();
                }
                recorded::by_frame(&self.frames, counted, out);
            } else {
                recorded::clip_to_mapped(counted.iter().copied(), &self.mapped, out);
            }
            if writes {
                self.written.clear();
                if read || self.memory.read_pagemap(&mut self.entries).is_ok() {
                    let written = &mut self.written;
                    for_each_page(&self.memory, &self.entries, |vpn, e| {
                        if e & terrace_linux::process::PM_PRESENT != 0 && soft_dirty::is_dirty(e) {
                            written.push(vpn);
                        }
                    });
                    let _ = soft_dirty::clear(self.pid);
                }
                self.written.sort_unstable();
                recorded::mark_written(out, &self.written);
            }
            true
        }
    }

    /// Calls `each` with every page of `memory`'s index and its pagemap entry from `entries`
    /// (read by [`ProcessMemory::read_pagemap`]; 0 past its end).
    fn for_each_page(memory: &ProcessMemory, entries: &[u64], mut each: impl FnMut(u64, u64)) {
        for (first, vpn, pages) in memory.index().runs() {
            for k in 0..pages {
                each(vpn + k, entries.get((first as u64 + k) as usize).copied().unwrap_or(0));
            }
        }
    }

    /// What a page-table scan reads each interval.
    #[derive(Clone, Copy, Debug)]
    struct Scan {
        /// The idle-page bitmap: whether each page's frame was accessed.
        idle_page: bool,
        /// Soft-dirty: whether each page was written (and so accessed).
        soft_dirty: bool,
        /// userfaultfd's asynchronous write-protection: the same, where soft-dirty is missing.
        uffd_wp: bool,
    }

    impl Scan {
        fn label(&self) -> &'static str {
            match (self.idle_page, self.soft_dirty) {
                (true, true) => "the idle-page bitmap and soft-dirty",
                (true, false) => "the idle-page bitmap",
                _ if self.uffd_wp => "userfaultfd write-protection",
                _ => "soft-dirty",
            }
        }

        /// How the trace's counts come from the bits (the header's `estimate`).
        fn estimate(&self) -> String {
            let touch = format!(
                "one bit per page per interval: a page seen touched counts {ACCESSES_PER_TOUCH} accesses (one per \
                 64 B line), touched once or a million times alike"
            );
            match (self.idle_page, self.soft_dirty) {
                (true, true) => format!("{touch}; writes if soft-dirty saw it written, else reads"),
                (true, false) => format!("{touch}; all reads (without soft-dirty no write is told apart)"),
                _ => format!(
                    "{touch}; writes only: {} sees writes, so a page only read in an interval is not seen at \
                     all",
                    self.label()
                ),
            }
        }
    }

    /// How much of a recording's intervals watched a sample of the address space (uffd-wp over
    /// its fault budget).
    #[derive(Clone, Copy, Debug, Default)]
    struct Sampling {
        intervals: u64,
        sampled: u64,
        sparsest: u64,
    }

    impl Sampling {
        fn count(&mut self, every: u64) {
            self.intervals += 1;
            if every > 1 {
                self.sampled += 1;
                self.sparsest = self.sparsest.max(every);
            }
        }

        /// What the header's `estimate` adds: nothing where every interval watched every page.
        fn estimate(&self, budget: u64) -> String {
            if self.sampled == 0 {
                return String::new();
            }
            format!(
                "; in a sample: within a budget of {budget} write-protect faults a second, where the program \
                 wrote more pages (seen at the scan before, or in a burst within the interval) an interval \
                 watched one 2 MiB chunk in k (a power of two, at most {}, and at least {} chunks), each in \
                 turn, and a page seen written there counts k touches, standing for the chunks not watched \
                 ({} of {} intervals, one chunk in at most {})",
                written_bits::MAX_EVERY,
                written_bits::MIN_CHUNKS_WATCHED,
                self.sampled,
                self.intervals,
                self.sparsest
            )
        }
    }

    /// Where the k-th process of a recorded tree puts its pages in the trace: at its own virtual
    /// page numbers plus `k << SLOT_SHIFT`, its addresses plus k × 2^48 bytes, above every
    /// address a 4-level page table gives a process (2^47), so that no two processes' pages
    /// meet. The program is process 0, at its own addresses.
    const SLOT_SHIFT: u32 = 36;
    const _: () = assert!(1u64 << SLOT_SHIFT > (1u64 << 47) / 4096);

    /// At most this many processes are recorded at once; those beyond are left out, said once.
    const MAX_PROCESSES: usize = 256;

    /// How many scans try to join a process that was not there when asked (see
    /// [`ProcessSlots::refuse`]).
    const JOIN_TRIES: u32 = 3;

    /// The processes of a recorded tree, the program and every process it starts, and where
    /// each one's pages go in the trace ([`SLOT_SHIFT`]). A trace is one address space: the
    /// simulated machine replays the tree's pages as one program's, as a tiering policy on the
    /// live machine manages the tree as one group (`terrace run`; docs/live.md, "Process trees").
    struct ProcessSlots {
        /// Each process recorded now and its slot; a process gone leaves, and its slot is not
        /// given again.
        slots: std::collections::HashMap<i32, u64>,
        next: u64,
        /// Processes that could not be recorded (said once each) or were over the cap.
        left_out: std::collections::BTreeSet<i32>,
        /// How many times each process's join has failed.
        tries: std::collections::HashMap<i32, u32>,
        over_cap_said: bool,
        /// How many processes were recorded in all, the program included.
        recorded: u64,
    }

    impl ProcessSlots {
        fn new(root: i32) -> Self {
            ProcessSlots {
                slots: [(root, 0)].into(),
                next: 1,
                left_out: Default::default(),
                tries: Default::default(),
                over_cap_said: false,
                recorded: 1,
            }
        }

        /// The offset of `pid`'s virtual page numbers in the trace, giving it the next slot if it
        /// has none.
        fn vpn_base(&mut self, pid: i32) -> u64 {
            let next = &mut self.next;
            let slot = *self.slots.entry(pid).or_insert_with(|| {
                *next += 1;
                *next - 1
            });
            slot << SLOT_SHIFT
        }

        /// One more process (given its slot by [`Self::vpn_base`]) is recorded from now on.
        fn joined(&mut self) {
            self.recorded += 1;
        }

        /// `pid` is gone (or not ready to join): a process that comes with its number later is
        /// another one.
        fn leave(&mut self, pid: i32) {
            self.slots.remove(&pid);
        }

        /// `pid` is not recorded, and not tried again; the caller says why.
        fn leave_out(&mut self, pid: i32) {
            self.slots.remove(&pid);
            self.left_out.insert(pid);
        }

        /// `pid` cannot be recorded: said once, in one line, unless it is gone meanwhile (a
        /// short-lived process is no failure); the recording goes on without it. A join that
        /// found the process not there (ESRCH: it was exiting, or its exec replaced the stopped
        /// thread) is tried again at the next scans, up to [`JOIN_TRIES`] times in all: a
        /// wrapper's child caught between its fork and its exec is the program's real work.
        fn refuse(&mut self, pid: i32, why: &anyhow::Error) {
            self.slots.remove(&pid);
            let not_there = why.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error) == Some(libc::ESRCH)
            });
            let tries = self.tries.entry(pid).or_insert(0);
            *tries += 1;
            if not_there && *tries < JOIN_TRIES {
                return;
            }
            let why = format!("{why:#}");
            if self.left_out.insert(pid) && terrace_linux::process::running(pid) {
                eprintln!(
                    "terrace record: cannot record pid {pid} ({}), which the program started: {why}; the \
                     recording goes on without it",
                    terrace_linux::process::name(pid)
                );
            }
        }

        /// The processes below `root` now that are neither `watched` nor left out, in the order
        /// the tree lists them.
        fn new_processes(&mut self, root: i32, watched: impl Iterator<Item = i32>) -> Vec<i32> {
            let watched: std::collections::BTreeSet<i32> = watched.collect();
            let mut out = Vec::new();
            for p in terrace_linux::process_group::descendants(Path::new("/proc"), root).into_iter().skip(1) {
                if watched.contains(&p) || self.left_out.contains(&p) {
                    continue;
                }
                if watched.len() + out.len() >= MAX_PROCESSES {
                    self.left_out.insert(p);
                    if !self.over_cap_said {
                        self.over_cap_said = true;
                        eprintln!(
                            "terrace record: the program runs more than {MAX_PROCESSES} processes at once; pid {p} \
                             and those that come while it does are not recorded"
                        );
                    }
                    continue;
                }
                out.push(p);
            }
            out
        }

        /// Whether `pid` is alive with an address space of its own: not a zombie, and not a
        /// child of vfork (or posix_spawn) still in its parent's memory before its exec
        /// (kcmp(2); where the kernel lacks it, taken as its own).
        fn has_own_memory(pid: i32) -> bool {
            let Some(life) = Life::of(pid).filter(|life| !life.exiting()) else { return false };
            let ppid = life.ppid;
            const KCMP_VM: libc::c_int = 1;
            // SAFETY: kcmp reads nothing from our memory; 0 means the two share one mm.
            let same = unsafe { libc::syscall(libc::SYS_kcmp, pid, ppid, KCMP_VM, 0, 0) };
            same != 0
        }
    }

    /// One process of a recorded tree: the program, or a process it started.
    struct Watched {
        pid: i32,
        memory: ProcessMemory,
        /// Its userfaultfd write-protection (uffd-wp), on a descriptor made inside it.
        written: Option<WrittenBits>,
        /// The interval's bits of each of its pages.
        bits: Vec<u8>,
        /// Added to its virtual page numbers in the trace ([`ProcessSlots`]).
        vpn_base: u64,
    }

    /// What every process's scan reuses.
    struct Scratch {
        bitmap: Option<idle_page::IdleBitmap>,
        regions: Vec<(u64, u64)>,
        entries: Vec<u64>,
        frames: Vec<u64>,
    }

    /// One scan of `w` (the program where its `vpn_base` is 0): the bits since the last, which it resets, and the weight of the pages it
    /// saw in a sample (one part in that many of its address space was watched). `Ok(None)`:
    /// the process is gone, or exec'd where no userfaultfd could follow it.
    fn read_bits(scan: Scan, w: &mut Watched, s: &mut Scratch) -> Result<Option<u64>> {
        let pid = w.pid;
        let exec = w.memory.follow_exec();
        if let (Ok(Some(exe)), Some(written)) = (&exec, w.written.as_mut()) {
            // Its userfaultfd acted on the address space it left: make one in the new one.
            let followed = terrace_linux::remote_syscall::create_userfaultfd_in_running(pid)
                .and_then(|fd| written.follow(Userfaultfd::from_fd(fd)));
            if let Err(e) = followed {
                // Nothing more can be seen of it: the recording keeps what it has, and the
                // process runs on. The program's recording ends; another process's is left out.
                let ends = if w.vpn_base == 0 {
                    "the recording ends here, and the program runs on"
                } else {
                    "its recording ends here, and it runs on"
                };
                eprintln!(
                    "terrace record: pid {pid} executed {exe}, and no userfaultfd could be made in it ({e}): {ends}"
                );
                return Ok(None);
            }
        }
        let pagemap = scan.idle_page || scan.soft_dirty;
        if w.memory.refresh().is_err() || (pagemap && w.memory.read_pagemap(&mut s.entries).is_err()) {
            return Ok(None);
        }
        let bits = &mut w.bits;
        bits.clear();
        bits.resize(w.memory.pages(), 0);
        let mut weight = 1;
        if let Some(bitmap) = s.bitmap.as_mut() {
            s.frames.clear();
            s.frames.extend(s.entries.iter().map(|&e| {
                if e & terrace_linux::process::PM_PRESENT != 0 {
                    e & idle_page::PFN_MASK
                } else {
                    0
                }
            }));
            let accessed = bitmap.accessed(&s.frames).context("cannot read the idle-page bitmap")?;
            for (b, a) in bits.iter_mut().zip(accessed) {
                if a {
                    *b |= SEEN_ACCESSED;
                }
            }
            bitmap.mark_idle(&s.frames).context("cannot mark pages idle")?;
        }
        if scan.soft_dirty {
            for (b, &e) in bits.iter_mut().zip(&s.entries) {
                if e & terrace_linux::process::PM_PRESENT != 0 && soft_dirty::is_dirty(e) {
                    *b |= SEEN_ACCESSED | SEEN_WRITTEN;
                }
            }
            match soft_dirty::clear(pid) {
                Ok(()) => {}
                Err(terrace_linux::process::ProcessError::Gone(_)) => return Ok(None),
                Err(e) => return Err(e).context("cannot clear the soft-dirty bits"),
            }
        }
        if let Some(written) = w.written.as_mut() {
            let regions = &mut s.regions;
            regions.clear();
            // Pages written in ranges new since the last scan (or since an exec) count as
            // soft-dirty counts them; those of the first scan are dropped with its bits.
            written.register(w.memory.mapped_ranges(), regions);
            let whole = regions.len();
            weight = match written.take(regions) {
                Ok(every) => every,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
                Err(e) => return Err(e).context("cannot read the pages written (PAGEMAP_SCAN)"),
            };
            // New ranges' pages were seen whole; the interval's, in a sample when weight > 1.
            for (k, &(start, end)) in regions.iter().enumerate() {
                let seen = if k >= whole && weight > 1 { SEEN_SAMPLED } else { 0 };
                for addr in (start..end).step_by(4096) {
                    if let Some(i) = w.memory.index().index_of(addr) {
                        bits[i as usize] |= SEEN_ACCESSED | SEEN_WRITTEN | seen;
                    }
                }
            }
        }
        Ok(Some(weight))
    }

    /// The memory of `pid`, a process the program started. `Ok(None)`: it is gone, a zombie, or
    /// still shares its parent's memory (vfork, before its exec): it is tried again later.
    fn attach_started(pid: i32) -> Result<Option<ProcessMemory>> {
        if !ProcessSlots::has_own_memory(pid) {
            return Ok(None);
        }
        match ProcessMemory::attach(pid) {
            Ok(m) => Ok(Some(m)),
            Err(terrace_linux::process::ProcessError::Gone(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Starts watching `pid`, a process the program started: its memory, and for uffd-wp a
    /// userfaultfd made inside it. `Ok(None)`: it is gone, a zombie, or still shares its
    /// parent's memory (vfork, before its exec): it is tried again at the next scan.
    fn join(pid: i32, scan: Scan, budget: Option<u64>) -> Result<Option<Watched>> {
        let Some(memory) = attach_started(pid)? else { return Ok(None) };
        let written = if scan.uffd_wp {
            let fd = terrace_linux::remote_syscall::create_userfaultfd_in_running(pid)?;
            Some(WrittenBits::start(Userfaultfd::from_fd(fd), pid, budget)?)
        } else {
            None
        };
        Ok(Some(Watched { pid, memory, written, bits: Vec::new(), vpn_base: 0 }))
    }

    /// Records `pid` and every process it starts (as `terrace run` manages a program: shells,
    /// make, `time`, python's multiprocessing) by scanning their page tables once an interval:
    /// the idle-page bitmap's accessed bits (marked idle again after each read) and
    /// soft-dirty's written bits (cleared after each read), or the pages userfaultfd's
    /// write-protection saw written (protected again after each read, through a descriptor made
    /// inside each process), until the program exits, a stop signal comes, or `duration`
    /// passes. What a process touched before its first scan is not counted (for a process the
    /// program started, up to an interval after it appeared); what it touched in the interval
    /// it exited in is lost with its page table. `fault_budget` (uffd-wp: the write-protect
    /// faults of an interval) is shared evenly among the processes recorded at each scan.
    #[allow(clippy::too_many_arguments)]
    fn watch_scan(
        pid: i32,
        mut child: Option<&mut std::process::Child>,
        scan: Scan,
        uffd: Option<Userfaultfd>,
        fault_budget: Option<u64>,
        interval_us: u64,
        duration: Option<f64>,
        sampling: &mut Sampling,
        slots: &mut ProcessSlots,
    ) -> Result<Vec<Interval>> {
        let memory = match ProcessMemory::attach(pid) {
            Ok(m) => m,
            Err(terrace_linux::process::ProcessError::Gone(_)) if child.is_some() => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot record pid {pid}")),
        };
        let bitmap = if scan.idle_page {
            Some(
                idle_page::IdleBitmap::open()
                    .with_context(|| format!("cannot open {}", idle_page::BITMAP))?,
            )
        } else {
            None
        };
        let written = match uffd {
            Some(fd) => Some(
                WrittenBits::start(fd, pid, fault_budget)
                    .context("cannot record with userfaultfd write-protection")?,
            ),
            None => None,
        };
        let mut scratch = Scratch { bitmap, regions: Vec::new(), entries: Vec::new(), frames: Vec::new() };
        // The program first, then the processes it started in the order they joined: their
        // slots, and so their pages in the trace, rise in that order. Shared by the scans and
        // the polls between them, which watch for a burst of writes.
        let tree = std::cell::RefCell::new(vec![Watched {
            pid,
            memory,
            written,
            bits: Vec::new(),
            vpn_base: slots.vpn_base(pid),
        }]);
        let last_scan = std::cell::Cell::new(Instant::now());
        // The first scan only resets the bits: the recording starts now.
        if read_bits(scan, &mut tree.borrow_mut()[0], &mut scratch)?.is_none() {
            return Ok(Vec::new());
        }
        let bar = spinner();
        let started = Instant::now();
        let interval = Duration::from_micros(interval_us);
        let mut next = started + interval;
        let mut intervals: Vec<Interval> = Vec::new();
        let mut watch_burst = || {
            let elapsed = last_scan.get().elapsed().as_secs_f64() / interval.as_secs_f64();
            for w in tree.borrow_mut().iter_mut() {
                if let Some(written) = w.written.as_mut() {
                    // A failure here (the process gone, a mapping changed) shows at the scan.
                    let _ = written.check_burst(elapsed);
                }
            }
        };
        loop {
            if !wait_until(next, started, pid, child.as_deref_mut(), duration, &bar, &mut watch_burst) {
                break;
            }
            let mut tree = tree.borrow_mut();
            let mut spans = Interval::new();
            let mut heaviest = 1;
            // The program first: when it is gone, the recording ends.
            let mut k = 0;
            while k < tree.len() {
                let w = &mut tree[k];
                let read = read_bits(scan, w, &mut scratch);
                match read {
                    Ok(Some(weight)) => {
                        heaviest = heaviest.max(weight);
                        let base = w.vpn_base;
                        let runs =
                            w.memory.index().runs().map(|(first, vpn, pages)| (first, vpn + base, pages));
                        recorded::by_page_bits(runs, &w.bits, weight, &mut spans);
                        k += 1;
                    }
                    Ok(None) if k == 0 => break,
                    Err(e) if k == 0 => return Err(e),
                    Ok(None) => {
                        slots.leave(tree.remove(k).pid);
                    }
                    Err(e) => {
                        let gone = tree.remove(k);
                        slots.refuse(gone.pid, &e);
                    }
                }
            }
            if k == 0 {
                break;
            }
            last_scan.set(Instant::now());
            sampling.count(heaviest);
            intervals.push(spans);
            // Processes started since the last scan join now; their first scan only resets
            // their bits, as the program's did.
            for p in slots.new_processes(pid, tree.iter().map(|w| w.pid)) {
                let joined = join(p, scan, fault_budget).and_then(|w| match w {
                    Some(mut w) => {
                        w.vpn_base = slots.vpn_base(p);
                        Ok(read_bits(scan, &mut w, &mut scratch)?.map(|_| w))
                    }
                    None => Ok(None),
                });
                match joined {
                    Ok(Some(w)) => {
                        slots.joined();
                        tree.push(w);
                    }
                    Ok(None) => slots.leave(p),
                    Err(e) => slots.refuse(p, &e),
                }
            }
            // The budget is the recording's: each process has its share.
            let share = fault_budget.map(|b| (b / tree.len() as u64).max(1));
            for w in tree.iter_mut() {
                if let Some(written) = w.written.as_mut() {
                    written.set_budget(share);
                }
            }
            bar.set_message(format!("{pid}: {} intervals", intervals.len()));
            next += interval;
        }
        bar.finish_and_clear();
        Ok(intervals)
    }

    /// A spinner for a recording, on stderr where it is a terminal.
    fn spinner() -> indicatif::ProgressBar {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} recording pid {msg} [{elapsed_precise}]")
                .expect("static template"),
        );
        bar
    }

    /// Waits until `next`, watching for a stop signal, the recording's duration and the
    /// program's exit, and calling `each_poll` every 10 ms; false if the recording is to end now.
    fn wait_until(
        next: Instant,
        started: Instant,
        pid: i32,
        mut child: Option<&mut std::process::Child>,
        duration: Option<f64>,
        bar: &indicatif::ProgressBar,
        each_poll: &mut dyn FnMut(),
    ) -> bool {
        let poll = Duration::from_millis(10);
        // Its exit wakes the wait at once (where a descriptor can be had, else the next poll).
        let exit = terrace_linux::pidfd::Pidfd::open(pid).ok();
        while Instant::now() < next {
            each_poll();
            let gone = match child.as_deref_mut() {
                Some(c) => c.try_wait().ok().flatten().is_some(),
                // SAFETY: signal 0 only checks the process exists.
                None => (unsafe { libc::kill(pid, 0) }) != 0,
            };
            if gone
                || STOP.load(Ordering::Relaxed) != 0
                || duration.is_some_and(|d| started.elapsed().as_secs_f64() >= d)
            {
                return false;
            }
            bar.tick();
            let wait = poll.min(next.saturating_duration_since(Instant::now()));
            match exit.as_ref().map(|e| e.wait_exit(wait)) {
                // Exited (a zombie its parent has not waited for yet included).
                Some(Ok(true)) => return false,
                Some(Ok(false)) => {}
                None | Some(Err(_)) => std::thread::sleep(wait),
            }
        }
        true
    }

    /// Every page fault is one sample; a load or store one in HeMem's period.
    fn sampler_period(events: SamplerEvents) -> u64 {
        match events {
            SamplerEvents::Memory => SAMPLE_PERIOD,
            SamplerEvents::PageFaults => 1,
        }
    }

    /// The sampler on every thread of `pid`, inherited by the threads and processes it starts.
    fn open_sampler(pid: i32, events: &[SampledEvent], period: u64) -> Result<PerfSampler> {
        PerfSampler::open(pid, events, period).with_context(|| {
            format!("cannot open the sampler on pid {pid} (perf_event_open; see /proc/sys/kernel/perf_event_paranoid)")
        })
    }

    /// Records `pid` with the perf sampler until it exits, a stop signal comes, or `duration`
    /// passes: each interval's samples, by page and kind, as one interval (each counts `period`
    /// accesses). The events belong to the program's threads (inherited by the threads and
    /// processes it creates once they are open, kept across exec; each process's samples go to
    /// its slot, [`ProcessSlots`]), and their rings keep what was sampled before the program
    /// exited, which the last interval gets.
    fn watch_samples(
        mut sampler: PerfSampler,
        pid: i32,
        mut child: Option<&mut std::process::Child>,
        period: u64,
        interval_us: u64,
        duration: Option<f64>,
        slots: &mut ProcessSlots,
    ) -> Result<Vec<Interval>> {
        let bar = spinner();
        let started = Instant::now();
        let interval = Duration::from_micros(interval_us);
        let mut next = started + interval;
        let mut intervals: Vec<Interval> = Vec::new();
        let mut samples: Vec<(u64, bool)> = Vec::new();
        // The rings are drained every poll, not once an interval, so that a burst of samples
        // does not overflow them (256 KiB each).
        // The events are inherited by the processes the program starts too, whose samples carry
        // their own pid: each process's pages go to its own slot ([`SLOT_SHIFT`]).
        let mut last = (pid, 0);
        let mut drain = |samples: &mut Vec<(u64, bool)>| {
            sampler.drain(|from, addr, kind| {
                let from = from.map_or(pid, |p| p as i32);
                if from != last.0 {
                    if !slots.slots.contains_key(&from) {
                        slots.joined();
                    }
                    last = (from, slots.vpn_base(from));
                }
                samples.push(((addr >> 12) + last.1, kind == AccessKind::Write))
            })
        };
        loop {
            let more = wait_until(next, started, pid, child.as_deref_mut(), duration, &bar, &mut || {
                drain(&mut samples)
            });
            drain(&mut samples);
            let mut spans = Interval::new();
            recorded::by_samples(&mut samples, period, &mut spans);
            // The last, partial interval only if it saw something.
            if more || !spans.is_empty() {
                intervals.push(spans);
            }
            samples.clear();
            if !more {
                break;
            }
            bar.set_message(format!("{pid}: {} intervals", intervals.len()));
            next += interval;
        }
        bar.finish_and_clear();
        if sampler.unusable > 0 {
            tracing::info!("{} samples without a data address or lost to full rings", sampler.unusable);
        }
        Ok(intervals)
    }

    #[cfg(test)]
    mod tests {
        use super::{ProcessSlots, JOIN_TRIES, SLOT_SHIFT};

        /// The program keeps its addresses; each process that joins takes the next slot, and a
        /// process that left and comes again (or a new one with its number) takes a new one.
        #[test]
        fn each_process_takes_the_next_slot_and_a_slot_is_never_given_twice() {
            let mut slots = ProcessSlots::new(100);
            assert_eq!(slots.vpn_base(100), 0);
            assert_eq!(slots.vpn_base(205), 1 << SLOT_SHIFT);
            assert_eq!(slots.vpn_base(207), 2 << SLOT_SHIFT);
            assert_eq!(slots.vpn_base(205), 1 << SLOT_SHIFT);
            slots.leave(205);
            assert_eq!(slots.vpn_base(205), 3 << SLOT_SHIFT);
        }

        /// A join that found the process not there is tried at the next scans, JOIN_TRIES in
        /// all; any other refusal leaves the process out at once. (The pids are far above any
        /// this host gives, so the refusal's line, said only for a running process, is not.)
        #[test]
        fn a_process_not_there_is_tried_again_and_another_refusal_is_final() {
            let mut slots = ProcessSlots::new(100);
            let gone =
                || anyhow::Error::from(std::io::Error::from_raw_os_error(libc::ESRCH)).context("cannot join");
            let pid = i32::MAX - 1;
            for _ in 1..JOIN_TRIES {
                slots.refuse(pid, &gone());
                assert!(!slots.left_out.contains(&pid));
            }
            slots.refuse(pid, &gone());
            assert!(slots.left_out.contains(&pid));
            let denied = anyhow::Error::from(std::io::Error::from_raw_os_error(libc::EPERM));
            slots.refuse(pid - 1, &denied);
            assert!(slots.left_out.contains(&(pid - 1)));
        }
    }
}
