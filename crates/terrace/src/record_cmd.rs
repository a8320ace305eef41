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

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The trace to write (aggregated form; written under a temporary name and renamed at the end).
    #[arg(long, short)]
    pub output: PathBuf,
    /// The tracker: `auto` picks the first the kernel offers, in the order damon, idle-page,
    /// soft-dirty, sampler (docs/live.md, "Recording a program").
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
    /// kernel has soft-dirty; needs soft-dirty (CONFIG_MEM_SOFT_DIRTY).
    #[arg(long)]
    pub writes: bool,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TrackerName {
    Auto,
    Damon,
    IdlePage,
    SoftDirty,
    Sampler,
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn record(_: RecordArgs) -> anyhow::Result<()> {
    Err(crate::needs_live("record"))
}

#[cfg(all(feature = "live", target_os = "linux"))]
pub use live::record;

#[cfg(all(feature = "live", target_os = "linux"))]
mod live {
    use super::{RecordArgs, TrackerName};
    use anyhow::{bail, Context, Result};
    use clap::ValueEnum;
    use std::fs::{File, OpenOptions};
    use std::io::BufWriter;
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::time::{Duration, Instant};
    use terrace_linux::process::ProcessMemory;
    use terrace_linux::trackers::damon::{self, DamonReader};
    use terrace_linux::trackers::{idle_page, soft_dirty};
    use terrace_workloads::trace::recorded::{
        self, Interval, RecordError, ACCESSES_PER_TOUCH, SEEN_ACCESSED, SEEN_WRITTEN,
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

    /// The tracker to record with: the one named, or the first the kernel offers.
    fn choose(name: TrackerName) -> Result<TrackerName> {
        use terrace_linux::trackers::{idle_page, soft_dirty};
        let has = |t: TrackerName| match t {
            TrackerName::Damon => damon::available(),
            TrackerName::IdlePage => idle_page::available(),
            TrackerName::SoftDirty => soft_dirty::works_here(),
            TrackerName::Sampler => terrace_linux::userfaultfd::probe_write_protect().is_ok(),
            TrackerName::Auto => false,
        };
        let lacks = |t: TrackerName| match t {
            TrackerName::Damon => "DAMON's sysfs interface (CONFIG_DAMON_VADDR, CONFIG_DAMON_SYSFS)",
            TrackerName::IdlePage => "the idle-page bitmap (CONFIG_IDLE_PAGE_TRACKING)",
            TrackerName::SoftDirty => "soft-dirty tracking (CONFIG_MEM_SOFT_DIRTY)",
            TrackerName::Sampler => "userfaultfd write-protect faults",
            TrackerName::Auto => "",
        };
        let chosen = match name {
            TrackerName::Auto => {
                let order =
                    [TrackerName::Damon, TrackerName::IdlePage, TrackerName::SoftDirty, TrackerName::Sampler];
                let Some(t) = order.into_iter().find(|&t| has(t)) else {
                    bail!(
                        "no tracker terrace record can use here: this kernel has none of DAMON, the idle-page \
                         bitmap, soft-dirty or userfaultfd write-protect; `terrace doctor` lists what it has"
                    )
                };
                t
            }
            t if !has(t) => bail!(
                "--tracker {}: this kernel lacks {}; `terrace doctor` lists the trackers it has",
                t.to_possible_value().expect("named").get_name(),
                lacks(t)
            ),
            t => t,
        };
        if chosen == TrackerName::Sampler {
            bail!(
                "--tracker sampler: this kernel has it, but terrace record does not record with the \
                 sampler yet (`terrace run` uses it); record with damon, idle-page or soft-dirty"
            );
        }
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

    /// CPU seconds (user and system) Terrace itself has used: its share of a recording's cost
    /// (DAMON's kdamond, a kernel thread, is not counted).
    fn own_cpu_seconds() -> f64 {
        // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        secs(u.ru_utime) + secs(u.ru_stime)
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
        let tracker = choose(args.tracker)?;
        if args.writes && !soft_dirty::works_here() {
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

        let (pid, mut child, what) = match args.pid {
            Some(pid) => {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                (pid, None, format!("pid {pid} ({})", comm.trim()))
            }
            None => {
                let child = std::process::Command::new(&args.command[0])
                    .args(&args.command[1..])
                    .spawn()
                    .with_context(|| format!("cannot start {}", args.command[0]))?;
                (child.id() as i32, Some(child), printable(&args.command.join(" "), 200))
            }
        };
        let name = match args.pid {
            Some(_) => name_of(what.split('(').nth(1).unwrap_or("recorded").trim_end_matches(')')),
            None => name_of(&args.command[0]),
        };

        let interval_us = args.interval * 1000;
        // DAMON's default 5 ms sample, or 20 samples per interval when the interval is shorter.
        let sample_us = (interval_us / 20).clamp(250, damon::SAMPLE_US);
        // The idle-page bitmap tells accesses, soft-dirty writes: a scan takes both where it can.
        let scan = Scan {
            idle_page: tracker == TrackerName::IdlePage,
            soft_dirty: tracker == TrackerName::SoftDirty
                || (tracker == TrackerName::IdlePage && soft_dirty::works_here()),
        };
        let started = Instant::now();
        let recorded = match tracker {
            TrackerName::Damon => {
                watch(pid, child.as_mut(), sample_us, interval_us, args.duration, args.writes)
            }
            _ => watch_scan(pid, child.as_mut(), scan, interval_us, args.duration).map(|i| (i, false)),
        };
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
        let own_cpu = own_cpu_seconds();

        let samples = interval_us / sample_us;
        let (label, resolution, estimate) = match tracker {
            TrackerName::Damon => (
                "DAMON",
                if physical {
                    "DAMON paddr region (adaptive: 100 to 1000 regions over all physical memory, shared with \
                     other processes), each 4 KiB page by its frame"
                        .to_string()
                } else {
                    "DAMON vaddr region (adaptive: 10 to 1000 regions over the address space), clipped to mapped \
                     4 KiB pages"
                        .to_string()
                },
                format!(
                    "a region seen accessed in n of an interval's {samples} samples ({sample_us} us apart): \
                     {ACCESSES_PER_TOUCH} n reads of each of its pages (one per 64 B line per sample); {}",
                    if args.writes {
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
            _ => (
                scan.label(),
                format!("4 KiB page ({}), scanned every interval", scan.label()),
                scan.estimate(),
            ),
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
                if args.pid.is_some() {
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
        eprintln!(
            "terrace: recorded {what} with {label} for {seconds:.1} s ({own_cpu:.2} s of Terrace's CPU): {} intervals \
             with accesses, {} pages ({} MiB), {} estimated accesses in epochs of {}; wrote {}",
            shape.active_intervals,
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

    /// Records `pid` with DAMON until it exits, a stop signal comes, or `duration` passes:
    /// each aggregation's regions, clipped to the process's mappings, as one interval.
    fn watch(
        pid: i32,
        mut child: Option<&mut std::process::Child>,
        sample_us: u64,
        interval_us: u64,
        duration: Option<f64>,
        writes: bool,
    ) -> Result<(Vec<Interval>, bool)> {
        let mut memory = match ProcessMemory::attach(pid) {
            Ok(m) => m,
            // A program that has exited already recorded nothing, which the caller says.
            Err(terrace_linux::process::ProcessError::Gone(_)) if child.is_some() => {
                return Ok((Vec::new(), false))
            }
            Err(e) => return Err(e).with_context(|| format!("cannot record pid {pid}")),
        };
        // DAMON on the process's virtual memory where the kernel has it, else on physical memory
        // with the process's pages found by frame (pagemap).
        let (reader, physical) = match DamonReader::start(pid, sample_us, interval_us) {
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
        let mut entries = Vec::new();
        let mut frames = Vec::new();
        let mut counted = Vec::new();
        let mut dirty_entries = Vec::new();
        let mut written: Vec<u64> = Vec::new();
        if writes {
            // What the program wrote before the recording began is not counted.
            soft_dirty::clear(pid)
                .with_context(|| format!("cannot clear the soft-dirty bits of pid {pid}"))?;
        }
        let frames_every = (1_000_000 / interval_us).max(1) as usize;
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} recording pid {msg} [{elapsed_precise}]")
                .expect("static template"),
        );
        let started = Instant::now();
        let poll = Duration::from_micros((interval_us / 10).max(1000));
        let mut intervals: Vec<Interval> = Vec::new();
        let mut seen = 0u64;
        let mut mapped = Vec::new();
        loop {
            if STOP.load(Ordering::Relaxed) != 0 {
                break;
            }
            if duration.is_some_and(|d| started.elapsed().as_secs_f64() >= d) {
                break;
            }
            match reader.latest() {
                Ok((seq, regions)) if seq > seen => {
                    seen = seq;
                    // Mappings now, for this aggregation's regions; a process exiting has none.
                    // A program started by Terrace was attached before its exec: follow it.
                    // On physical memory the mappings matter only when frames are read again.
                    let frames_due = intervals.len().is_multiple_of(frames_every);
                    let _ = memory.follow_exec();
                    if (!physical || frames_due) && memory.refresh().is_ok() {
                        mapped.clear();
                        mapped.extend(memory.mapped_ranges());
                    }
                    let mut interval = Interval::new();
                    counted.clear();
                    counted.extend(
                        regions
                            .iter()
                            .map(|r| (r.start, r.end, u64::from(r.nr_accesses) * ACCESSES_PER_TOUCH, 0)),
                    );
                    if physical {
                        // Frames change seldom (a page faulted in, migrated, reclaimed): read
                        // pagemap about once a second, not every interval.
                        if frames_due {
                            frames.clear();
                            if memory.read_pagemap(&mut entries).is_ok() {
                                for_each_page(&memory, &entries, |vpn, e| {
                                    // Bit 63: present; bits 0-54: the frame (zero without CAP_SYS_ADMIN).
                                    let pfn = e & ((1 << 55) - 1);
                                    if e >> 63 == 1 && pfn != 0 {
                                        frames.push((pfn, vpn));
                                    }
                                });
                            }
                            frames.sort_unstable();
                        }
                        recorded::by_frame(&frames, &counted, &mut interval);
                    } else {
                        recorded::clip_to_mapped(counted.iter().copied(), &mapped, &mut interval);
                    }
                    if writes {
                        written.clear();
                        if memory.read_pagemap(&mut dirty_entries).is_ok() {
                            for_each_page(&memory, &dirty_entries, |vpn, e| {
                                if e & terrace_linux::process::PM_PRESENT != 0 && soft_dirty::is_dirty(e) {
                                    written.push(vpn);
                                }
                            });
                            let _ = soft_dirty::clear(pid);
                        }
                        written.sort_unstable();
                        recorded::mark_written(&mut interval, &written);
                    }
                    tracing::debug!(
                        "aggregation {seq}: {} regions ({} accessed), {} frames, {} spans",
                        regions.len(),
                        regions.iter().filter(|r| r.nr_accesses > 0).count(),
                        frames.len(),
                        interval.len()
                    );
                    intervals.push(interval);
                    bar.set_message(format!("{pid}: {} intervals", intervals.len()));
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
    }

    impl Scan {
        fn label(&self) -> &'static str {
            match (self.idle_page, self.soft_dirty) {
                (true, true) => "the idle-page bitmap and soft-dirty",
                (true, false) => "the idle-page bitmap",
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
                    "{touch}; writes only: soft-dirty sees writes, so a page only read in an interval is not \
                     seen at all"
                ),
            }
        }
    }

    /// Records `pid` by scanning its page table once an interval: the idle-page bitmap's
    /// accessed bits (marked idle again after each read) and soft-dirty's written bits (cleared
    /// after each read), until the program exits, a stop signal comes, or `duration` passes.
    /// What the program touched before the first interval began is not counted; what it touched
    /// in the interval it exited in is lost with its page table.
    fn watch_scan(
        pid: i32,
        mut child: Option<&mut std::process::Child>,
        scan: Scan,
        interval_us: u64,
        duration: Option<f64>,
    ) -> Result<Vec<Interval>> {
        let mut memory = match ProcessMemory::attach(pid) {
            Ok(m) => m,
            Err(terrace_linux::process::ProcessError::Gone(_)) if child.is_some() => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot record pid {pid}")),
        };
        let mut bitmap = if scan.idle_page {
            Some(
                idle_page::IdleBitmap::open()
                    .with_context(|| format!("cannot open {}", idle_page::BITMAP))?,
            )
        } else {
            None
        };
        let mut entries = Vec::new();
        let mut frames: Vec<u64> = Vec::new();
        let mut bits: Vec<u8> = Vec::new();
        // One scan: the bits since the last, which it resets. `Ok(false)`: the process is gone.
        let mut read_bits = |memory: &mut ProcessMemory, bits: &mut Vec<u8>| -> Result<bool> {
            let _ = memory.follow_exec();
            if memory.refresh().is_err() || memory.read_pagemap(&mut entries).is_err() {
                return Ok(false);
            }
            bits.clear();
            bits.resize(entries.len(), 0);
            if let Some(bitmap) = bitmap.as_mut() {
                frames.clear();
                frames.extend(entries.iter().map(|&e| {
                    if e & terrace_linux::process::PM_PRESENT != 0 {
                        e & idle_page::PFN_MASK
                    } else {
                        0
                    }
                }));
                let accessed = bitmap.accessed(&frames).context("cannot read the idle-page bitmap")?;
                for (b, a) in bits.iter_mut().zip(accessed) {
                    if a {
                        *b |= SEEN_ACCESSED;
                    }
                }
                bitmap.mark_idle(&frames).context("cannot mark pages idle")?;
            }
            if scan.soft_dirty {
                for (b, &e) in bits.iter_mut().zip(&entries) {
                    if e & terrace_linux::process::PM_PRESENT != 0 && soft_dirty::is_dirty(e) {
                        *b |= SEEN_ACCESSED | SEEN_WRITTEN;
                    }
                }
                match soft_dirty::clear(pid) {
                    Ok(()) => {}
                    Err(terrace_linux::process::ProcessError::Gone(_)) => return Ok(false),
                    Err(e) => return Err(e).context("cannot clear the soft-dirty bits"),
                }
            }
            Ok(true)
        };
        // The first scan only resets the bits: the recording starts now.
        if !read_bits(&mut memory, &mut bits)? {
            return Ok(Vec::new());
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} recording pid {msg} [{elapsed_precise}]")
                .expect("static template"),
        );
        let started = Instant::now();
        let interval = Duration::from_micros(interval_us);
        let poll = Duration::from_micros((interval_us / 10).max(1000));
        let mut next = started + interval;
        let mut intervals: Vec<Interval> = Vec::new();
        'recording: loop {
            // Wait out the interval, watching for a stop, the duration and the program's exit.
            while Instant::now() < next {
                let gone = match child.as_deref_mut() {
                    Some(c) => c.try_wait().ok().flatten().is_some(),
                    // SAFETY: signal 0 only checks the process exists.
                    None => (unsafe { libc::kill(pid, 0) }) != 0,
                };
                if gone
                    || STOP.load(Ordering::Relaxed) != 0
                    || duration.is_some_and(|d| started.elapsed().as_secs_f64() >= d)
                {
                    break 'recording;
                }
                bar.tick();
                std::thread::sleep(poll.min(next.saturating_duration_since(Instant::now())));
            }
            if !read_bits(&mut memory, &mut bits)? {
                break;
            }
            let mut spans = Interval::new();
            recorded::by_page_bits(memory.index().runs(), &bits, &mut spans);
            intervals.push(spans);
            bar.set_message(format!("{pid}: {} intervals", intervals.len()));
            next += interval;
        }
        bar.finish_and_clear();
        Ok(intervals)
    }
}
