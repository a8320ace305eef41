//! DAMON (the kernel's data access monitor) over a process's virtual address space, through its
//! sysfs interface (Documentation/admin-guide/mm/damon/usage.rst). DAMON samples accesses in
//! adaptive regions and reports, per region, in how many of the last samples it was accessed.
//!
//! This is the live machine's *referenced* bit where the idle-page bitmap is missing: a page is
//! referenced if its region was accessed in the last aggregation interval. It sees reads and
//! writes alike (soft-dirty still supplies the dirty bit). Where the fault sampler stands in for
//! PEBS/IBS, it is also the source of read samples: each region's access count, scaled to the
//! policy's ticks, as reads of every page in it. One kdamond serves both ([`Damon`]). Its regions
//! are read from DAMON's `damon_aggregated` trace event through perf ([`crate::tracepoint`],
//! [`DamonReader`]), or, where that cannot be had, from sysfs's `tried_regions`, which a `stat`
//! scheme matching every region fills.

use super::damon_ranges;
use super::{LiveTracker, ScanView};
use crate::process::ProcessError;
use crate::tracefs::{EventFormat, Field};
use crate::tracepoint::{Record, TracepointEvents};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use terrace_model::{AccessKind, Sample, PAGE_REFERENCED};

const ADMIN: &str = "/sys/kernel/mm/damon/admin/kdamonds";
/// Where Terrace records the kdamond it runs: "TERRACE_PID TARGET_PID". A kdamond keeps running
/// after the Terrace that started it is killed (SIGKILL runs no destructor) until its target
/// exits; the record tells such a leftover from another user's monitor, so the next Terrace can
/// stop it ([`stop_leftover`]).
const OWNER: &str = "/run/terrace/damon-owner";

/// One monitored region: `[start, end)` was seen accessed in `nr_accesses` samples of the last
/// aggregation interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub nr_accesses: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum DamonError {
    #[error("DAMON's sysfs interface is missing (kernel without CONFIG_DAMON_SYSFS or CONFIG_DAMON_VADDR)")]
    Missing,
    #[error("this kernel's DAMON has no {ops} operations (it offers: {avail})")]
    NoOperations { ops: &'static str, avail: String },
    #[error("DAMON is already in use here ({0} kdamonds exist); Terrace needs it to itself")]
    Busy(u32),
    #[error("DAMON: cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

fn write(path: &Path, value: &str) -> Result<(), DamonError> {
    fs::write(path, value).map_err(|source| DamonError::Io {
        what: "write",
        path: path.display().to_string(),
        source,
    })
}

fn read(path: &Path) -> Result<String, DamonError> {
    fs::read_to_string(path).map(|s| s.trim().to_string()).map_err(|source| DamonError::Io {
        what: "read",
        path: path.display().to_string(),
        source,
    })
}

fn read_u64(path: &Path) -> Result<u64, DamonError> {
    let s = read(path)?;
    s.parse().map_err(|_| DamonError::Io {
        what: "parse",
        path: path.display().to_string(),
        source: io::Error::new(io::ErrorKind::InvalidData, format!("'{s}' is not a number")),
    })
}

/// Stops a kdamond a Terrace that is gone left running, if the record says there is one and the
/// kdamond still watches the process it names; returns what it stopped, for the log. Another
/// user's monitors (no record, or a record whose Terrace still runs) are left alone.
pub fn stop_leftover() -> Result<Option<String>, DamonError> {
    stop_leftover_in(Path::new(ADMIN), Path::new(OWNER), &|pid| {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
            || nix::errno::Errno::last() == nix::errno::Errno::EPERM
    })
}

fn stop_leftover_in(
    admin: &Path,
    owner: &Path,
    alive: &dyn Fn(i32) -> bool,
) -> Result<Option<String>, DamonError> {
    let Ok(record) = fs::read_to_string(owner) else { return Ok(None) };
    let mut fields = record.split_whitespace().map(|f| f.parse::<i32>());
    let (Some(Ok(terrace)), Some(Ok(target))) = (fields.next(), fields.next()) else {
        let _ = fs::remove_file(owner);
        return Ok(None);
    };
    if terrace == std::process::id() as i32 || alive(terrace) {
        return Ok(None);
    }
    let kd = admin.join("0");
    let on = read(&kd.join("state")).is_ok_and(|s| s == "on");
    let watches = read(&kd.join("contexts/0/targets/0/pid_target")).is_ok_and(|p| p == target.to_string());
    let _ = fs::remove_file(owner);
    if !(on && watches) {
        return Ok(None);
    }
    write(&kd.join("state"), "off")?;
    write(&admin.join("nr_kdamonds"), "0")?;
    Ok(Some(format!("stopped the kdamond that Terrace pid {terrace} (gone) left running on pid {target}")))
}

/// Records that this Terrace runs the kdamond, watching `target` (best effort: without the
/// record a leftover is only found once its target has exited).
fn record_owner(owner: &Path, target: i32) {
    let done = owner
        .parent()
        .map_or(Ok(()), fs::create_dir_all)
        .and_then(|()| fs::write(owner, format!("{} {target}\n", std::process::id())));
    if let Err(e) = done {
        tracing::debug!("DAMON: cannot record the kdamond's owner in {}: {e}", owner.display());
    }
}

/// The span of the system's RAM, [lowest start, highest end) of /proc/iomem's "System RAM"
/// ranges (root sees the addresses; others read zeros).
fn system_ram() -> Result<(u64, u64), DamonError> {
    let iomem = read(Path::new("/proc/iomem"))?;
    let ranges: Vec<(u64, u64)> = iomem
        .lines()
        .filter(|l| l.ends_with(": System RAM") && !l.starts_with(' '))
        .filter_map(|l| {
            let (a, b) = l.split(" : ").next()?.trim().split_once('-')?;
            Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()? + 1))
        })
        .collect();
    match (ranges.iter().map(|r| r.0).min(), ranges.iter().map(|r| r.1).max()) {
        (Some(start), Some(end)) if end > start + 1 => Ok((start, end)),
        _ => Err(DamonError::Io {
            what: "find System RAM in",
            path: "/proc/iomem".into(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                "no System RAM ranges (reading it needs root)",
            ),
        }),
    }
}

/// Whether this kernel offers DAMON over virtual address spaces.
pub fn available() -> bool {
    Path::new(ADMIN).is_dir()
}

/// How many kdamonds DAMON has, and whether any of them runs.
fn kdamonds(admin: &Path) -> Result<(u32, bool), DamonError> {
    let n = read_u64(&admin.join("nr_kdamonds"))? as u32;
    let running = (0..n).any(|i| {
        fs::read_to_string(admin.join(i.to_string()).join("state")).map_or(true, |s| s.trim() != "off")
    });
    Ok((n, running))
}

/// `Some(n)` when DAMON is there but someone else's kdamond runs (the host's proactive reclaim,
/// damon_stat, another monitor; `n` kdamonds in all): DAMON's sysfs cannot add a kdamond while
/// one runs, so Terrace cannot start its own. A leftover of a Terrace that was killed is
/// stopped at the next start and does not count.
pub fn in_use() -> Option<u32> {
    if available() {
        let _ = stop_leftover();
    }
    held()
}

/// [`in_use`] without stopping a dead Terrace's leftover first: it only reads (for `doctor`).
pub fn held() -> Option<u32> {
    if !available() {
        return None;
    }
    kdamonds(Path::new(ADMIN)).ok().filter(|&(_, running)| running).map(|(n, _)| n)
}

/// A running kdamond watching one process. Stopped (and its kdamond removed) when dropped.
pub struct DamonTracker {
    kdamond: PathBuf,
    /// Samples per aggregation interval: the most `nr_accesses` can be.
    samples_per_aggregation: u32,
    /// The process watched (vaddr or fvaddr); none on physical memory.
    pid: Option<i32>,
    /// The ranges named for it (fvaddr: [`damon_ranges`]), or none where DAMON's vaddr picks them.
    named: Option<Vec<(u64, u64)>>,
}

impl DamonTracker {
    /// Starts monitoring `pid`: one sample every `sample_us`, regions aggregated every `aggr_us`.
    pub fn start(pid: i32, sample_us: u64, aggr_us: u64) -> Result<Self, DamonError> {
        Self::start_on(Some(pid), sample_us, aggr_us)
    }

    /// Starts monitoring physical memory (DAMON's `paddr` operations: all of the system's RAM),
    /// for a kernel without `vaddr`; `terrace record` maps a process's pages onto it by frame.
    pub fn start_physical(sample_us: u64, aggr_us: u64) -> Result<Self, DamonError> {
        Self::start_on(None, sample_us, aggr_us)
    }

    /// `fvaddr` on `pid`'s mappings where the kernel takes them again at a commit, else `vaddr`
    /// on `pid`; `paddr` without one.
    fn start_on(pid: Option<i32>, sample_us: u64, aggr_us: u64) -> Result<Self, DamonError> {
        let admin = Path::new(ADMIN);
        if !admin.is_dir() {
            return Err(DamonError::Missing);
        }
        if let Some(what) = stop_leftover()? {
            tracing::warn!("DAMON: {what}");
        }
        let (n, running) = kdamonds(admin)?;
        if n != 0 {
            // kdamonds that are all off serve no one: a Terrace killed with SIGKILL leaves its own
            // behind (it stops when its process exits). Anything running is someone's: keep off.
            if running {
                return Err(DamonError::Busy(n));
            }
            tracing::info!(
                "DAMON: reusing {n} kdamond(s) left off (a Terrace that was killed leaves its own)"
            );
            write(&admin.join("nr_kdamonds"), "0")?;
        }
        write(&admin.join("nr_kdamonds"), "1")?;
        let kd = admin.join("0");
        // Made first, so that a failure below turns the kdamond off again (Drop).
        let mut tracker = DamonTracker {
            kdamond: kd.clone(),
            samples_per_aggregation: (aggr_us / sample_us.max(1)) as u32,
            pid,
            named: None,
        };
        let ctx = kd.join("contexts/0");
        write(&kd.join("contexts/nr_contexts"), "1")?;
        // A process's mappings are named where the kernel can take them again as they change
        // (fvaddr, committed online): vaddr's own ranges take in the gaps between a PIE's binary
        // and its heap, which coarsen its regions (docs/live.md, "DAMON on a dynamically linked
        // program").
        let avail = fs::read_to_string(ctx.join("avail_operations")).ok();
        let offers = |ops: &str| avail.as_deref().is_none_or(|a| a.split_whitespace().any(|o| o == ops));
        let vaddr_asked = std::env::var_os(OPS_ENV).is_some_and(|v| v == "vaddr");
        let named = pid.filter(|_| {
            let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            !vaddr_asked && avail.is_some() && offers("fvaddr") && damon_ranges::commits_regions(&release)
        });
        let named = named.and_then(damon_ranges::ranges_of);
        let ops = match (pid, &named) {
            (None, _) => "paddr",
            (Some(_), Some(_)) => "fvaddr",
            (Some(_), None) => "vaddr",
        };
        // A kernel may have DAMON without vaddr (CONFIG_DAMON_VADDR off): say so, not EINVAL at "on".
        if let Some(avail) = avail.as_deref().filter(|_| !offers(ops)) {
            return Err(DamonError::NoOperations {
                ops,
                avail: avail.split_whitespace().collect::<Vec<_>>().join(", "),
            });
        }
        write(&ctx.join("operations"), ops)?;
        let attrs = ctx.join("monitoring_attrs");
        write(&attrs.join("intervals/sample_us"), &sample_us.to_string())?;
        write(&attrs.join("intervals/aggr_us"), &aggr_us.to_string())?;
        // The address space's layout is read again every aggregation, not every 10 (DAMON's
        // default, 1 s; under fvaddr Terrace names the mappings again as often, `Targets`):
        // a mapping made since is monitored only from then, and in the guest a
        // program's 72 MiB made at its start went unmonitored for 10 aggregations, its first fill
        // unseen (docs/live.md, "Recording a program"). Reading it costs a walk of the VMAs.
        write(&attrs.join("intervals/update_us"), &aggr_us.to_string())?;
        // Enough regions to tell a hot buffer from a cold one at page-set granularity.
        // On physical memory (all of RAM, shared by every process) 10 regions would give a
        // process's pages a handful of counts: start from 100.
        write(&attrs.join("nr_regions/min"), if pid.is_some() { "10" } else { "100" })?;
        write(&attrs.join("nr_regions/max"), "1000")?;
        write(&ctx.join("targets/nr_targets"), "1")?;
        match pid {
            Some(pid) => {
                write(&ctx.join("targets/0/pid_target"), &pid.to_string())?;
                if let Some(ranges) = &named {
                    damon_ranges::write_regions(&ctx.join("targets/0"), ranges).map_err(|source| {
                        DamonError::Io {
                            what: "write the regions of",
                            path: ctx.join("targets/0").display().to_string(),
                            source,
                        }
                    })?;
                }
            }
            // paddr needs its region named: all of the system's RAM, from its lowest to its
            // highest "System RAM" range (holes are never accessed, and DAMON merges them away).
            None => {
                let (start, end) = system_ram()?;
                let regions = ctx.join("targets/0/regions");
                write(&regions.join("nr_regions"), "1")?;
                write(&regions.join("0/start"), &start.to_string())?;
                write(&regions.join("0/end"), &end.to_string())?;
            }
        }
        // A `stat` scheme matching every region (the maxima default to 0, which matches nothing).
        write(&ctx.join("schemes/nr_schemes"), "1")?;
        let scheme = ctx.join("schemes/0");
        write(&scheme.join("action"), "stat")?;
        for (what, max) in [("sz", 1u64 << 60), ("nr_accesses", u32::MAX as u64), ("age", u32::MAX as u64)] {
            write(&scheme.join(format!("access_pattern/{what}/min")), "0")?;
            write(&scheme.join(format!("access_pattern/{what}/max")), &max.to_string())?;
        }
        tracker.named = named;
        write(&kd.join("state"), "on")?;
        tracing::info!(
            "DAMON: {ops} operations{}",
            match &tracker.named {
                Some(r) =>
                    format!(" on the program's mappings ({} ranges, committed again as they change)", r.len()),
                None if ops == "vaddr" && vaddr_asked =>
                    format!(" (its own three ranges, as {OPS_ENV}=vaddr asks)"),
                None if ops == "vaddr" =>
                    " (its own three ranges: this kernel cannot take named ones again as they change)"
                        .to_string(),
                None => String::new(),
            }
        );
        // A paddr kdamond's target reads pid 0, which the record then names.
        record_owner(Path::new(OWNER), pid.unwrap_or(0));
        Ok(tracker)
    }

    /// The regions as DAMON last aggregated them.
    pub fn regions(&self) -> Result<Vec<Region>, DamonError> {
        write(&self.kdamond.join("state"), "update_schemes_tried_regions")?;
        let dir = self.kdamond.join("contexts/0/schemes/0/tried_regions");
        let mut out = Vec::new();
        let entries = fs::read_dir(&dir).map_err(|source| DamonError::Io {
            what: "list",
            path: dir.display().to_string(),
            source,
        })?;
        // Three files a region, read every interval: the directory entry's type (no stat) and
        // no `age`, which nothing here uses.
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let p = e.path();
            out.push(Region {
                start: read_u64(&p.join("start"))?,
                end: read_u64(&p.join("end"))?,
                nr_accesses: read_u64(&p.join("nr_accesses"))? as u32,
            });
        }
        out.sort_by_key(|r| r.start);
        Ok(out)
    }

    pub fn samples_per_aggregation(&self) -> u32 {
        self.samples_per_aggregation
    }

    /// The kdamond's kernel thread's pid, which the `damon_aggregated` events it emits carry.
    fn thread_pid(&self) -> Result<u32, DamonError> {
        read_u64(&self.kdamond.join("pid")).map(|p| p as u32)
    }
}

impl Drop for DamonTracker {
    fn drop(&mut self) {
        let _ = fs::write(self.kdamond.join("state"), "off");
        if let Some(admin) = self.kdamond.parent() {
            let _ = fs::write(admin.join("nr_kdamonds"), "0");
        }
        let _ = fs::remove_file(OWNER);
    }
}

/// The latest regions a [`DamonReader`] has read, numbered: each target's, in the kdamond's
/// order.
#[derive(Default)]
struct Latest {
    seq: u64,
    targets: Vec<Vec<Region>>,
    error: Option<String>,
}

impl Latest {
    /// One more aggregation read: it replaces the last, and any error.
    fn publish(&mut self, targets: Vec<Vec<Region>>) {
        self.seq += 1;
        self.targets = targets;
        self.error = None;
    }
}

/// The kdamond's targets: each one's process and, under `fvaddr`, the ranges named for it
/// ([`damon_ranges`]), named again as the processes map memory: every aggregation interval the
/// reading thread reads each target's /proc/PID/maps and, if any target's ranges changed, writes
/// them and commits them to the running kdamond, as DAMON's vaddr re-reads the layout.
/// [`DamonReader::follow`] adds targets under the same lock.
struct Targets {
    /// The kdamond's `contexts/0/targets` directory.
    dir: PathBuf,
    /// The kdamond's `state` file.
    state: PathBuf,
    /// Each target's process, in the kdamond's order (empty on physical memory).
    pids: Vec<i32>,
    /// Under fvaddr, each target's ranges; none under vaddr or paddr.
    ranges: Option<Vec<Vec<(u64, u64)>>>,
    /// Whether a failed commit was logged (once).
    warned: bool,
    /// Under vaddr, the refreshes so far, and whether the gaps vaddr monitors in the program
    /// were said (once; [`damon_ranges::vaddr_coarseness`]).
    vaddr_refreshes: u64,
    vaddr_said: bool,
}

impl Targets {
    fn write_regions(&self) -> Result<(), DamonError> {
        for (i, r) in self.ranges.iter().flatten().enumerate() {
            let t = self.dir.join(i.to_string());
            damon_ranges::write_regions(&t, r).map_err(|source| DamonError::Io {
                what: "write the regions of",
                path: t.display().to_string(),
                source,
            })?;
        }
        Ok(())
    }

    /// Reads each target's mappings again; writes and commits them if any target's changed. A
    /// target whose process is gone keeps its last ranges. Under vaddr, reads the program's
    /// mappings at the 1st, 2nd, 4th, 8th, ... refresh instead (a program maps most of its
    /// memory early), until the gaps vaddr monitors are worth a warning.
    fn refresh(&mut self) {
        let Some(ranges) = self.ranges.as_mut() else {
            self.vaddr_refreshes += 1;
            if self.vaddr_said || !self.vaddr_refreshes.is_power_of_two() {
                return;
            }
            let Some(&pid) = self.pids.first() else { return };
            if let Some(said) = damon_ranges::coarseness_of(pid) {
                tracing::warn!("{said}");
                self.vaddr_said = true;
            }
            return;
        };
        let mut changed = false;
        for (&pid, old) in self.pids.iter().zip(ranges.iter_mut()) {
            if let Some(r) = damon_ranges::ranges_of(pid).filter(|r| r != old) {
                *old = r;
                changed = true;
            }
        }
        if !changed {
            return;
        }
        if let Err(e) = self.write_regions().and_then(|()| write(&self.state, "commit")) {
            if !std::mem::replace(&mut self.warned, true) {
                tracing::warn!(
                    "DAMON: cannot name the program's new mappings to it ({e}); they may go unmonitored"
                );
            }
        }
    }
}

/// DAMON's regions, read in a background thread: from DAMON's `damon_aggregated` trace event
/// (one event per region at every aggregation, as damo records them), read through perf's
/// per-CPU tracepoint events ([`crate::tracepoint`]); or, where the kernel has no such event or
/// perf refuses it, or where asked for ([`REGIONS_ENV`]), from sysfs's `tried_regions`, whose
/// update blocks until the kdamond's next aggregation (up to 100 ms) and which costs a path
/// lookup and read of three files per region, every interval. Either way the reading must not
/// stall a policy's tick (hemem's is 10 ms).
///
/// The trace event was read through a tracefs instance at first, and was not the default then:
/// enabling an event there patches the scheduler's code (ftrace's command-name recording hooks
/// `sched_switch`), and the emulated guest of the tests panicked in `__schedule` three times in
/// about ten boots. perf's per-CPU events patch only the tracepoint's own call site; the guest
/// took 317 enables and disables of them without a fault (docs/live.md, "Recording a program").
pub struct DamonReader {
    latest: Arc<Mutex<Latest>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    samples_per_aggregation: u32,
    /// The kdamond's targets, where [`Self::follow`] adds one; shared with the reading thread
    /// under fvaddr.
    monitored: Arc<Mutex<Targets>>,
    /// How many targets an aggregation has, for the reading thread.
    targets: Arc<AtomicUsize>,
    /// Why targets cannot be added here, once found.
    no_follow: Option<String>,
}

/// The environment variable that, set to `sysfs`, makes a [`DamonReader`] read DAMON's regions
/// from sysfs rather than from its trace event.
pub const REGIONS_ENV: &str = "TERRACE_DAMON_REGIONS";

/// The environment variable that, set to `vaddr`, leaves a process's ranges to DAMON's own
/// `vaddr` where the kernel could take named ones (`fvaddr`): what a kernel before 6.7 runs, to
/// compare with or to fall back to.
pub const OPS_ENV: &str = "TERRACE_DAMON_OPS";

/// The most processes one kdamond watches for a recording of a process tree ([`DamonReader::follow`]):
/// each target costs the kdamond its own sampling, and a target whose process has exited
/// keeps its place.
pub const MAX_TARGETS: usize = 32;

impl DamonReader {
    /// Starts DAMON on `pid` ([`DamonTracker::start`]) and a thread that reads every aggregation.
    pub fn start(pid: i32, sample_us: u64, aggr_us: u64) -> Result<Self, DamonError> {
        Self::reading(DamonTracker::start(pid, sample_us, aggr_us)?, aggr_us)
    }

    /// [`DamonTracker::start_physical`], read in a background thread.
    pub fn start_physical(sample_us: u64, aggr_us: u64) -> Result<Self, DamonError> {
        Self::reading(DamonTracker::start_physical(sample_us, aggr_us)?, aggr_us)
    }

    fn reading(tracker: DamonTracker, aggr_us: u64) -> Result<Self, DamonError> {
        let samples_per_aggregation = tracker.samples_per_aggregation();
        let kdamond = tracker.kdamond.clone();
        let monitored = Arc::new(Mutex::new(Targets {
            dir: kdamond.join("contexts/0/targets"),
            state: kdamond.join("state"),
            pids: tracker.pid.into_iter().collect(),
            ranges: tracker.named.clone().map(|r| vec![r]),
            warned: false,
            vaddr_refreshes: 0,
            vaddr_said: false,
        }));
        let latest = Arc::new(Mutex::new(Latest::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let targets = Arc::new(AtomicUsize::new(1));
        let (l, s, t) = (Arc::clone(&latest), Arc::clone(&stop), Arc::clone(&targets));
        let sysfs_asked = std::env::var_os(REGIONS_ENV).is_some_and(|v| v == "sysfs");
        let events = match (!sysfs_asked).then(|| trace_events(&tracker)) {
            Some(Ok(events)) => Some(events),
            Some(Err(e)) => {
                tracing::info!("DAMON: reading regions from sysfs, not from its trace event: {e}");
                None
            }
            None => None,
        };
        let source =
            if events.is_some() { "the damon_aggregated trace event" } else { "sysfs tried_regions" };
        tracing::info!("DAMON: regions read from {source}");
        let no_follow = match (&events, tracker.pid) {
            (_, None) => {
                Some("DAMON watches physical memory here, which has no processes to add".to_string())
            }
            (None, _) => Some(
                "DAMON's regions are read from sysfs here, whose tried_regions do not say which process \
                 each is of"
                    .to_string(),
            ),
            (Some((_, fields)), _) if fields.target_id.is_none() => {
                Some("this kernel's damon_aggregated event does not name its target".to_string())
            }
            _ => None,
        };
        // Under fvaddr to name the mappings again, under vaddr to say what its gaps cost.
        let n = tracker.pid.is_some().then(|| Arc::clone(&monitored));
        let thread = std::thread::Builder::new()
            .name("terrace-damon".into())
            .spawn(move || {
                // The tracker lives (and its kdamond runs) as long as this thread.
                match events {
                    Some((events, fields)) => read_events(&l, &s, &t, n.as_deref(), events, fields, aggr_us),
                    None => read_sysfs(&tracker, &l, &s, n.as_deref(), aggr_us),
                }
                drop(tracker);
            })
            .map_err(|source| DamonError::Io { what: "start a thread for", path: ADMIN.into(), source })?;
        Ok(DamonReader {
            latest,
            stop,
            thread: Some(thread),
            samples_per_aggregation,
            monitored,
            targets,
            no_follow,
        })
    }

    /// The latest aggregation read, numbered from 1 (0 with no regions: none read yet), or the
    /// last read's error: the first target's regions (the program's).
    pub fn latest(&self) -> Result<(u64, Vec<Region>), String> {
        self.latest_of_each().map(|(seq, mut targets)| {
            (seq, if targets.is_empty() { Vec::new() } else { targets.swap_remove(0) })
        })
    }

    /// [`Self::latest`] for every target, in the order they were added ([`Self::follow`]).
    pub fn latest_of_each(&self) -> Result<(u64, Vec<Vec<Region>>), String> {
        let l = self.latest.lock().expect("damon lock");
        match &l.error {
            Some(e) => Err(e.clone()),
            None => Ok((l.seq, l.targets.clone())),
        }
    }

    /// Adds process `pid` to the monitored processes, as the next target of the running kdamond
    /// (sysfs `nr_targets`, each `pid_target`, then `commit`, which Linux 5.19 and later apply
    /// without stopping it); its regions are [`Self::latest_of_each`]'s at the returned index
    /// from the aggregation after next. A target whose process has exited is given the first
    /// process's pid again, since DAMON refuses a pid that is gone and the targets keep their
    /// places. Refused, with the reason: on physical memory, where the regions are read from
    /// sysfs (whose regions do not say which target they are of), past [`MAX_TARGETS`], or
    /// where the kernel cannot commit.
    pub fn follow(&mut self, pid: i32) -> Result<usize, String> {
        if let Some(why) = &self.no_follow {
            return Err(why.clone());
        }
        let mut m = self.monitored.lock().expect("damon targets lock");
        if m.pids.len() >= MAX_TARGETS {
            return Err(format!("DAMON follows at most {MAX_TARGETS} processes at once here"));
        }
        let first = m.pids[0];
        // Under fvaddr each target's ranges go with it (writing nr_targets makes the targets'
        // directories anew), the new process's read from its maps.
        if let Some(r) = m.ranges.as_mut() {
            r.push(damon_ranges::ranges_of(pid).ok_or_else(|| format!("pid {pid} exited"))?);
        }
        m.pids.push(pid);
        let written = write(&m.dir.join("nr_targets"), &m.pids.len().to_string()).and_then(|()| {
            for (i, &p) in m.pids.iter().enumerate() {
                let p = if i > 0 && !crate::process::running(p) { first } else { p };
                write(&m.dir.join(format!("{i}/pid_target")), &p.to_string())?;
            }
            m.write_regions()?;
            write(&m.state, "commit")
        });
        if written.is_err() {
            m.pids.pop();
            if let Some(r) = m.ranges.as_mut() {
                r.pop();
            }
        }
        let n = m.pids.len();
        drop(m);
        match written {
            Ok(()) => {
                self.targets.store(n, Ordering::Relaxed);
                Ok(n - 1)
            }
            // The process exited meanwhile: DAMON refused its pid. The targets in sysfs are
            // written again at the next follow.
            Err(_) if !crate::process::running(pid) => Err(format!("pid {pid} exited")),
            Err(e) => {
                let why = format!("DAMON cannot add a process to its running monitor here ({e})");
                self.no_follow = Some(why.clone());
                Err(why)
            }
        }
    }

    pub fn samples_per_aggregation(&self) -> u32 {
        self.samples_per_aggregation
    }
}

/// `damon:damon_aggregated` enabled for `tracker`'s kdamond alone (the host's own DAMON users,
/// DAMON_RECLAIM and the like, emit the same event), and where its fields lie.
fn trace_events(tracker: &DamonTracker) -> Result<(TracepointEvents, AggregatedFields), String> {
    let kdamond = tracker.thread_pid().map_err(|e| e.to_string())?;
    let events = TracepointEvents::open("damon", "damon_aggregated", &format!("common_pid == {kdamond}"))
        .map_err(|e| e.to_string())?;
    let fields = AggregatedFields::of(&events.format)
        .ok_or("this kernel's damon_aggregated lacks nr_regions, start, end or nr_accesses")?;
    Ok((events, fields))
}

/// Reads `damon_aggregated` events until `stop`, publishing each whole aggregation in `latest`.
/// On a process, refreshes its targets once an aggregation interval ([`Targets::refresh`]).
fn read_events(
    latest: &Mutex<Latest>,
    stop: &AtomicBool,
    targets: &AtomicUsize,
    named: Option<&Mutex<Targets>>,
    mut events: TracepointEvents,
    fields: AggregatedFields,
    aggr_us: u64,
) {
    let mut aggregation = Aggregation::default();
    let wait = std::time::Duration::from_micros(aggr_us.clamp(1_000, 200_000));
    let mut renamed = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if let Some(n) = named.filter(|_| renamed.elapsed() >= wait) {
            n.lock().expect("damon targets lock").refresh();
            renamed = std::time::Instant::now();
        }
        // A read with losses is dropped whole, with the aggregation under way: which records
        // were lost is unknown, and the rest could join two aggregations into one of the right
        // length.
        let mut lost = false;
        let read = events.read(wait, |record| match record {
            Record::Lost(_) => lost = true,
            Record::Event(raw) if !lost => {
                let expected = targets.load(Ordering::Relaxed);
                if let Some(whole) =
                    fields.parse(raw).and_then(|(t, n, r)| aggregation.push(t, n, r, expected))
                {
                    latest.lock().expect("damon lock").publish(whole);
                }
            }
            Record::Event(_) => {}
        });
        if lost {
            aggregation.clear();
        }
        if let Err(e) = read {
            latest.lock().expect("damon lock").error =
                Some(format!("DAMON: cannot read its trace events: {e}"));
            std::thread::sleep(wait);
        }
    }
}

/// Asks sysfs for the regions until `stop`, each request waiting for the next aggregation; on a
/// process, refreshes its targets before each ([`Targets::refresh`]).
fn read_sysfs(
    tracker: &DamonTracker,
    latest: &Mutex<Latest>,
    stop: &AtomicBool,
    named: Option<&Mutex<Targets>>,
    aggr_us: u64,
) {
    while !stop.load(Ordering::Relaxed) {
        if let Some(n) = named {
            n.lock().expect("damon targets lock").refresh();
        }
        match tracker.regions() {
            Ok(regions) => latest.lock().expect("damon lock").publish(vec![regions]),
            Err(e) => {
                latest.lock().expect("damon lock").error = Some(e.to_string());
                std::thread::sleep(std::time::Duration::from_micros(aggr_us));
            }
        }
    }
}

/// Where a `damon_aggregated` record's fields lie (its tracefs `format` file; mm/damon/core.c,
/// `kdamond_reset_aggregated`, emits it).
struct AggregatedFields {
    /// Which target the region is of: its index in the kdamond's targets (since the kernels
    /// that have DAMON's sysfs interface, 5.18, which Terrace uses; before, an id of the
    /// target's own, which [`Aggregation::push`] takes as one target).
    target_id: Option<Field>,
    nr_regions: Field,
    start: Field,
    end: Field,
    nr_accesses: Field,
}

impl AggregatedFields {
    fn of(format: &EventFormat) -> Option<Self> {
        Some(AggregatedFields {
            target_id: format.field("target_id"),
            nr_regions: format.field("nr_regions")?,
            start: format.field("start")?,
            end: format.field("end")?,
            nr_accesses: format.field("nr_accesses")?,
        })
    }

    /// One record: its target's id (0 where the event has none), the target's region count at
    /// this aggregation, and the region.
    fn parse(&self, raw: &[u8]) -> Option<(u64, u32, Region)> {
        let region = Region {
            start: self.start.read(raw)?,
            end: self.end.read(raw)?,
            nr_accesses: self.nr_accesses.read(raw)? as u32,
        };
        let target = match &self.target_id {
            Some(f) => f.read(raw)?,
            None => 0,
        };
        Some((target, self.nr_regions.read(raw)? as u32, region))
    }
}

/// The events of one aggregation, gathered: DAMON emits one per region of each target, target
/// after target, each target's in address order, each carrying its target's index and region
/// count (mm/damon/core.c, `kdamond_reset_aggregated`). An aggregation is whole when each of
/// its targets has had that many in order; one begun before the reading started, or with
/// events lost, is dropped. A target with no regions (one just added, before DAMON has laid
/// its regions out) emits nothing, and counts as none.
#[derive(Default)]
struct Aggregation {
    /// By target index: its region count and the regions so far.
    targets: Vec<Option<(u32, Vec<Region>)>>,
    /// The target of the last event.
    last: Option<usize>,
}

impl Aggregation {
    fn clear(&mut self) {
        self.targets.clear();
        self.last = None;
    }

    /// Every target's regions, if the first target's and every other's that came are all there.
    fn take_whole(&mut self) -> Option<Vec<Vec<Region>>> {
        let whole_target = |t: &(u32, Vec<Region>)| t.1.len() == t.0 as usize;
        let whole = self.targets.first().is_some_and(|t| t.as_ref().is_some_and(whole_target))
            && self.targets.iter().flatten().all(whole_target);
        let out = whole.then(|| self.targets.drain(..).map(|t| t.map(|t| t.1).unwrap_or_default()).collect());
        self.clear();
        out
    }

    /// Takes one event of target `target`; returns the aggregation it completes: at once when
    /// the last of `expected` targets is whole, or when the next aggregation begins (a target
    /// added that the kdamond has not yet taken up makes one aggregation shorter).
    fn push(
        &mut self,
        target: u64,
        nr_regions: u32,
        region: Region,
        expected: usize,
    ) -> Option<Vec<Vec<Region>>> {
        // An index out of any range DAMON's sysfs gives: a kernel whose event names the target
        // otherwise, which watches one target here.
        let target = if target < 4 * MAX_TARGETS as u64 { target as usize } else { 0 };
        let begins_another = self.last.is_some_and(|last| {
            target < last
                || (target == last
                    && self.targets[last].as_ref().is_some_and(|(n, regions)| {
                        regions.len() >= *n as usize || regions.last().is_some_and(|l| region.start < l.end)
                    }))
        });
        let done = if begins_another { self.take_whole() } else { None };
        if self.targets.len() <= target {
            self.targets.resize_with(target + 1, || None);
        }
        let (n, regions) = self.targets[target].get_or_insert_with(|| (nr_regions, Vec::new()));
        *n = nr_regions;
        regions.push(region);
        self.last = Some(target);
        if regions.len() >= nr_regions as usize && target + 1 >= expected.max(1) {
            return self.take_whole().or(done);
        }
        done
    }
}

impl Drop for DamonReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Calls `f(index, nr_accesses)` for every indexed page of an accessed region. `runs` are the page
/// index's runs: (first index, first virtual page number, pages).
pub fn for_each_accessed(
    regions: &[Region],
    runs: impl Iterator<Item = (u32, u64, u64)>,
    mut f: impl FnMut(u32, u32),
) {
    let hot: Vec<&Region> = regions.iter().filter(|r| r.nr_accesses > 0).collect();
    for (first, vpn, pages) in runs {
        let (lo, hi) = (vpn << 12, (vpn + pages) << 12);
        for r in &hot {
            let (a, b) = (r.start.max(lo), r.end.min(hi));
            if a >= b {
                continue;
            }
            let from = first as u64 + ((a >> 12) - vpn);
            let to = first as u64 + (((b + 4095) >> 12) - vpn);
            for i in from..to {
                f(i as u32, r.nr_accesses);
            }
        }
    }
}

/// Marks, in `bits`, every indexed page of an accessed region with `flag`.
pub fn mark_accessed(
    regions: &[Region],
    runs: impl Iterator<Item = (u32, u64, u64)>,
    bits: &mut [u8],
    flag: u8,
) {
    for_each_accessed(regions, runs, |i, _| {
        if let Some(b) = bits.get_mut(i as usize) {
            *b |= flag;
        }
    });
}

/// DAMON's aggregation interval as the live machine sets it (DAMON's default): 100 ms.
pub const AGGREGATION_US: u64 = 100_000;
/// DAMON's sampling interval as the live machine sets it (DAMON's default): 5 ms.
pub const SAMPLE_US: u64 = 5_000;

/// Periods of `tick_ns` (the policy's tick, or the fault sampler's epoch where that is longer) in
/// one DAMON aggregation, for scaling its counts to read samples (1 to 1000).
pub fn ticks_per_aggregation(tick_ns: Option<u64>) -> u32 {
    tick_ns.map_or(1, |t| (AGGREGATION_US * 1000 / t.max(1)).clamp(1, 1000) as u32)
}

/// Where the DAMON tracker gets its regions: a [`DamonReader`] on the live machine, anything
/// else in tests.
pub trait Regions: Send {
    /// The latest aggregation, numbered (0: none read yet), or why it could not be read.
    fn latest(&self) -> Result<(u64, Vec<Region>), String>;
    /// The most accesses a region can show in one aggregation.
    fn samples_per_aggregation(&self) -> u32;
}

impl Regions for DamonReader {
    fn latest(&self) -> Result<(u64, Vec<Region>), String> {
        DamonReader::latest(self)
    }
    fn samples_per_aggregation(&self) -> u32 {
        DamonReader::samples_per_aggregation(self)
    }
}

/// The DAMON tracker: one kdamond on the program, for the referenced bit, for read samples, or
/// for both.
pub struct Damon {
    regions: Box<dyn Regions>,
    referenced: bool,
    /// Policy ticks per aggregation, when it supplies read samples.
    reads: Option<u32>,
    /// The aggregation last turned into read samples.
    reads_seq: u64,
}

impl Damon {
    /// Starts DAMON on `pid` with its default intervals: a sample every 5 ms, aggregated every
    /// 100 ms; its regions are read in a background thread.
    pub fn start(pid: i32) -> Result<DamonReader, DamonError> {
        DamonReader::start(pid, SAMPLE_US, AGGREGATION_US)
    }

    /// The tracker over `regions`: marking referenced pages if `referenced`, and turning each
    /// aggregation into read samples if `reads` gives the policy's ticks per aggregation.
    pub fn new(regions: Box<dyn Regions>, referenced: bool, reads: Option<u32>) -> Self {
        Damon { regions, referenced, reads, reads_seq: 0 }
    }
}

impl LiveTracker for Damon {
    fn name(&self) -> &'static str {
        match (self.referenced, self.reads.is_some()) {
            (true, true) => "DAMON (referenced, reads)",
            (true, false) => "DAMON (referenced)",
            (false, _) => "DAMON (reads)",
        }
    }

    /// Referenced: the page's region was accessed in the last aggregation.
    fn observe_bits(&mut self, scan: &ScanView<'_>, bits: &mut [u8]) -> Result<(), ProcessError> {
        if self.referenced {
            match self.regions.latest() {
                Ok((_, regions)) => mark_accessed(&regions, scan.index().runs(), bits, PAGE_REFERENCED),
                Err(e) => tracing::warn!("DAMON regions of pid {}: {e}", scan.pid),
            }
        }
        Ok(())
    }

    /// Once per aggregation, each region's access count as reads of every page in it.
    fn observe_samples(&mut self, scan: &ScanView<'_>, samples: &mut Vec<Sample>) {
        let Some(ticks) = self.reads else { return };
        let regions = match self.regions.latest() {
            Ok((seq, r)) if seq != self.reads_seq => {
                self.reads_seq = seq;
                r
            }
            Ok(_) => return, // no new aggregation since the last tick
            Err(e) => {
                tracing::warn!("DAMON regions of pid {}: {e}", scan.pid);
                return;
            }
        };
        let mut reads = vec![0u32; scan.policy_pages()];
        for_each_accessed(&regions, scan.index().runs(), |i, n| {
            if let Some(r) = scan.policy_page_of(i).and_then(|p| reads.get_mut(p as usize)) {
                *r = (*r).max(n);
            }
        });
        let per_aggregation = self.regions.samples_per_aggregation().max(1);
        for (page, &n) in reads.iter().enumerate() {
            let s = Sample { page: page as u32, kind: AccessKind::Read };
            samples.extend(std::iter::repeat_n(s, read_samples(n, per_aggregation, ticks) as usize));
        }
    }

    /// DAMON names its target by pid and looks the pid's address space up at every sample, so it
    /// follows an exec by itself; its regions adapt to the new layout at its next update (one
    /// aggregation, 100 ms).
    fn address_space_replaced(&mut self, _pid: i32) -> Result<(), String> {
        Ok(())
    }
}

/// Read samples for a page whose DAMON region saw an access in `accessed` of `per_aggregation`
/// samples: put on the fault sampler's scale, which catches at most one write per page per epoch
/// (and per tick), so a page read all the time earns as many read samples as one written all the
/// time earns write samples (`ticks`: the sampler's epochs per aggregation), and a page touched
/// once in the aggregation (a single pass) earns at most one.
fn read_samples(accessed: u32, per_aggregation: u32, ticks: u32) -> u32 {
    let scaled = (accessed as u64 * ticks as u64 + per_aggregation as u64 / 2) / per_aggregation as u64;
    (scaled as u32).clamp(u32::from(accessed > 0), ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> AggregatedFields {
        AggregatedFields::of(&EventFormat::parse(crate::tracefs::tests::DAMON_AGGREGATED).unwrap()).unwrap()
    }

    /// A `damon_aggregated` record as Linux 6.18 writes it, by kdamond pid 77.
    fn record(nr_regions: u32, start: u64, end: u64, nr_accesses: u32) -> Vec<u8> {
        record_of(0, nr_regions, start, end, nr_accesses)
    }

    /// The same, of target `target`.
    fn record_of(target: u64, nr_regions: u32, start: u64, end: u64, nr_accesses: u32) -> Vec<u8> {
        let mut raw = vec![0u8; 48];
        raw[4..8].copy_from_slice(&77i32.to_ne_bytes());
        raw[8..16].copy_from_slice(&target.to_ne_bytes());
        raw[16..20].copy_from_slice(&nr_regions.to_ne_bytes());
        raw[24..32].copy_from_slice(&start.to_ne_bytes());
        raw[32..40].copy_from_slice(&end.to_ne_bytes());
        raw[40..44].copy_from_slice(&nr_accesses.to_ne_bytes());
        raw[44..48].copy_from_slice(&4u32.to_ne_bytes());
        raw
    }

    #[test]
    fn an_aggregated_record_is_read_where_the_format_puts_its_fields() {
        let r = |start, end, nr_accesses| Region { start, end, nr_accesses };
        assert_eq!(fields().parse(&record_of(2, 3, 4096, 81920, 7)), Some((2, 3, r(4096, 81920, 7))));
        assert_eq!(fields().parse(&record(3, 4096, 81920, 7)[..40]), None, "cut short");
        // Before Linux 6.3 the event had no age, and a kernel may lay the fields out otherwise.
        let old = "ID: 5\n\tfield:unsigned int nr_regions;\toffset:8;\tsize:4;\tsigned:0;\n\
                   \tfield:unsigned int nr_accesses;\toffset:12;\tsize:4;\tsigned:0;\n\
                   \tfield:unsigned long start;\toffset:16;\tsize:8;\tsigned:0;\n\
                   \tfield:unsigned long end;\toffset:24;\tsize:8;\tsigned:0;\n";
        let mut raw = vec![0u8; 32];
        raw[8..12].copy_from_slice(&10u32.to_ne_bytes());
        raw[12..16].copy_from_slice(&20u32.to_ne_bytes());
        raw[24..32].copy_from_slice(&4096u64.to_ne_bytes());
        let old = AggregatedFields::of(&EventFormat::parse(old).unwrap()).unwrap();
        assert_eq!(old.parse(&raw), Some((0, 10, r(0, 4096, 20))), "no target_id: one target");
        let no_regions = "ID: 5\n\tfield:unsigned long start;\toffset:16;\tsize:8;\tsigned:0;\n";
        assert!(AggregatedFields::of(&EventFormat::parse(no_regions).unwrap()).is_none());
    }

    #[test]
    fn only_whole_aggregations_in_address_order_are_taken() {
        let f = fields();
        let mut a = Aggregation::default();
        let mut push = |raw: Vec<u8>| {
            let (t, n, r) = f.parse(&raw).unwrap();
            a.push(t, n, r, 1).map(|mut whole| whole.swap_remove(0))
        };
        // The reading began in the middle of an aggregation of three regions: its tail is dropped
        // when the next one starts over at a lower address.
        assert_eq!(push(record(3, 8192, 12288, 1)), None);
        assert_eq!(push(record(3, 0, 4096, 2)), None);
        assert_eq!(push(record(3, 4096, 8192, 0)), None);
        let whole = push(record(3, 8192, 12288, 5)).expect("three regions in order are whole");
        assert_eq!(
            whole.iter().map(|r| (r.start, r.nr_accesses)).collect::<Vec<_>>(),
            [(0, 2), (4096, 0), (8192, 5)]
        );
        // A region missing (its record lost): the rest is dropped when the next one starts over.
        assert_eq!(push(record(3, 0, 4096, 1)), None);
        assert_eq!(push(record(3, 8192, 12288, 1)), None);
        assert_eq!(push(record(3, 0, 4096, 3)), None);
        assert_eq!(push(record(3, 4096, 8192, 3)), None);
        assert_eq!(push(record(3, 8192, 12288, 9)).map(|r| r.len()), Some(3));
        // One region: every event is an aggregation.
        assert_eq!(push(record(1, 0, 1 << 30, 4)).map(|r| r[0].nr_accesses), Some(4));
        assert_eq!(push(record(1, 0, 1 << 30, 6)).map(|r| r[0].nr_accesses), Some(6));
    }

    /// Several targets (a process tree): an aggregation is every target's regions, whole, in
    /// the order the targets were added; a target added late makes one aggregation short.
    #[test]
    fn an_aggregation_of_several_targets_is_whole_when_each_target_is() {
        let f = fields();
        let mut a = Aggregation::default();
        let mut push = |raw: Vec<u8>, expected| {
            let (t, n, r) = f.parse(&raw).unwrap();
            a.push(t, n, r, expected)
        };
        let starts = |w: &Vec<Vec<Region>>| -> Vec<Vec<u64>> {
            w.iter().map(|t| t.iter().map(|r| r.start).collect()).collect()
        };
        // The reading began within target 0: that aggregation is dropped.
        assert_eq!(push(record_of(0, 2, 4096, 8192, 1), 2), None);
        assert_eq!(push(record_of(1, 1, 0, 4096, 1), 2), None);
        assert_eq!(push(record_of(0, 2, 0, 4096, 3), 2), None);
        assert_eq!(push(record_of(0, 2, 4096, 8192, 3), 2), None, "target 1 still to come");
        let whole = push(record_of(1, 1, 0, 4096, 5), 2).expect("both targets whole");
        assert_eq!(starts(&whole), [vec![0, 4096], vec![0]]);
        assert_eq!(whole[1][0].nr_accesses, 5);
        // Three targets expected, but the kdamond still has two: the aggregation is taken when
        // the next one begins.
        assert_eq!(push(record_of(0, 1, 0, 4096, 1), 3), None);
        assert_eq!(push(record_of(1, 1, 0, 4096, 2), 3), None);
        let short = push(record_of(0, 1, 0, 4096, 7), 3).expect("taken as the next begins");
        assert_eq!(short.len(), 2);
        assert_eq!(push(record_of(1, 1, 0, 4096, 8), 3), None);
        let three = push(record_of(2, 2, 0, 8192, 9), 3);
        assert_eq!(three, None, "target 2 has one of its two regions");
        let three = push(record_of(2, 2, 8192, 12288, 9), 3).expect("three targets whole");
        assert_eq!(starts(&three), [vec![0], vec![0], vec![0, 8192]]);
        assert_eq!(three[0][0].nr_accesses, 7);
        // Target 1 has no regions yet (just added): it emits nothing and has none.
        assert_eq!(push(record_of(0, 1, 0, 4096, 1), 3), None);
        let gap = push(record_of(2, 1, 0, 4096, 4), 3).expect("targets 0 and 2 whole");
        assert_eq!(starts(&gap), [vec![0], vec![], vec![0]]);
        assert_eq!(gap[2][0].nr_accesses, 4);
    }

    /// Regions handed out as DAMON's aggregation number `seq`.
    struct Fixed(u64, Vec<Region>);
    impl Regions for Fixed {
        fn latest(&self) -> Result<(u64, Vec<Region>), String> {
            Ok((self.0, self.1.clone()))
        }
        fn samples_per_aggregation(&self) -> u32 {
            20
        }
    }

    #[test]
    fn one_kdamond_marks_referenced_pages_and_gives_reads_once_per_aggregation() {
        // A buffer of this process, seen as the live machine's scan sees it.
        let buf = vec![1u8; 16 << 12];
        let page = (buf.as_ptr() as u64 + 4095) & !4095;
        let memory = crate::process::ProcessMemory::attach(std::process::id() as i32).unwrap();
        let mut entries = Vec::new();
        memory.read_pagemap(&mut entries).unwrap();
        let scan =
            ScanView { pid: memory.pid(), memory: &memory, entries: &entries, present: &[], huge: None };
        let index = scan.policy_page(page).expect("the buffer is managed memory");
        // Its first two pages were accessed in every sample of the aggregation.
        let hot = Region { start: page, end: page + 2 * 4096, nr_accesses: 20 };
        let mut damon = Damon::new(Box::new(Fixed(1, vec![hot])), true, Some(10));
        assert_eq!(damon.name(), "DAMON (referenced, reads)");
        let mut bits = vec![0u8; entries.len()];
        damon.observe_bits(&scan, &mut bits).unwrap();
        let marked: Vec<u32> = (0..bits.len() as u32).filter(|&i| bits[i as usize] != 0).collect();
        assert_eq!(marked, vec![index, scan.policy_page(page + 4096).unwrap()]);
        assert_eq!(bits[index as usize], PAGE_REFERENCED);
        // Always accessed, 10 ticks per aggregation: ten reads each, and none until the next one.
        let mut samples = Vec::new();
        damon.observe_samples(&scan, &mut samples);
        assert_eq!(samples.len(), 20);
        assert_eq!(samples.iter().filter(|s| s.page == index && s.kind == AccessKind::Read).count(), 10);
        samples.clear();
        damon.observe_samples(&scan, &mut samples);
        assert!(samples.is_empty(), "the same aggregation gave reads twice");
        // Referenced only: no reads.
        let mut referenced = Damon::new(Box::new(Fixed(2, vec![hot])), true, None);
        referenced.observe_samples(&scan, &mut samples);
        assert!(samples.is_empty());
        std::hint::black_box(&buf);
    }

    #[test]
    fn damon_counts_become_reads_on_the_write_samplers_scale() {
        // 20 DAMON samples per aggregation, 10 policy ticks in it (hemem's 10 ms).
        assert_eq!(read_samples(0, 20, 10), 0);
        assert_eq!(read_samples(1, 20, 10), 1, "an access seen at all is at least one read");
        assert_eq!(read_samples(10, 20, 10), 5);
        assert_eq!(read_samples(20, 20, 10), 10, "always accessed: one read per tick");
        // One tick per aggregation (a 1 s policy): at most one read.
        assert_eq!(read_samples(20, 20, 1), 1);
        assert_eq!(ticks_per_aggregation(Some(10_000_000)), 10);
        assert_eq!(ticks_per_aggregation(Some(1_000_000_000)), 1);
        assert_eq!(ticks_per_aggregation(None), 1);
        assert_eq!(ticks_per_aggregation(Some(1)), 1000);
    }

    #[test]
    fn accessed_regions_mark_exactly_their_indexed_pages() {
        // Two runs: pages 100..110 as indexes 0..10, pages 200..205 as 10..15.
        let runs = [(0u32, 100u64, 10u64), (10, 200, 5)];
        let regions = [
            Region { start: 102 << 12, end: 104 << 12, nr_accesses: 3 },
            Region { start: 104 << 12, end: 203 << 12, nr_accesses: 0 },
            Region { start: 203 << 12, end: 300 << 12, nr_accesses: 1 },
        ];
        let mut bits = vec![0u8; 15];
        mark_accessed(&regions, runs.into_iter(), &mut bits, 1);
        let marked: Vec<usize> = (0..15).filter(|&i| bits[i] == 1).collect();
        assert_eq!(marked, vec![2, 3, 13, 14]);
        let mut counts = Vec::new();
        for_each_accessed(&regions, runs.into_iter(), |i, n| counts.push((i, n)));
        assert_eq!(counts, vec![(2, 3), (3, 3), (13, 1), (14, 1)]);
    }

    /// A fake DAMON sysfs with one kdamond in `state`, watching `target`.
    fn fake_admin(state: &str, target: i32) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let kd = dir.path().join("0");
        fs::create_dir_all(kd.join("contexts/0/targets/0")).unwrap();
        fs::write(kd.join("state"), format!("{state}\n")).unwrap();
        fs::write(kd.join("contexts/0/targets/0/pid_target"), format!("{target}\n")).unwrap();
        fs::write(dir.path().join("nr_kdamonds"), "1\n").unwrap();
        dir
    }

    #[test]
    fn a_kdamond_left_by_a_terrace_that_is_gone_is_stopped_and_no_other() {
        let owner_dir = tempfile::tempdir().unwrap();
        let owner = owner_dir.path().join("damon-owner");
        let dead = |_: i32| false;
        // Terrace 4242 is gone and its kdamond still watches 77: stopped.
        let admin = fake_admin("on", 77);
        fs::write(&owner, "4242 77\n").unwrap();
        let what = stop_leftover_in(admin.path(), &owner, &dead).unwrap().unwrap();
        assert!(what.contains("4242") && what.contains("77"), "{what}");
        assert_eq!(fs::read_to_string(admin.path().join("0/state")).unwrap(), "off");
        assert_eq!(fs::read_to_string(admin.path().join("nr_kdamonds")).unwrap(), "0");
        assert!(!owner.exists(), "the record goes with the kdamond");
        // The recording Terrace still runs: its kdamond is left alone.
        let admin = fake_admin("on", 77);
        fs::write(&owner, "4242 77\n").unwrap();
        assert_eq!(stop_leftover_in(admin.path(), &owner, &|_| true).unwrap(), None);
        assert_eq!(fs::read_to_string(admin.path().join("0/state")).unwrap(), "on\n");
        // A kdamond watching another process is someone else's: left alone.
        let admin = fake_admin("on", 78);
        fs::write(&owner, "4242 77\n").unwrap();
        assert_eq!(stop_leftover_in(admin.path(), &owner, &dead).unwrap(), None);
        assert_eq!(fs::read_to_string(admin.path().join("0/state")).unwrap(), "on\n");
        // No record: nothing is known to be Terrace's.
        let admin = fake_admin("on", 77);
        assert_eq!(stop_leftover_in(admin.path(), &owner_dir.path().join("none"), &dead).unwrap(), None);
        assert_eq!(fs::read_to_string(admin.path().join("0/state")).unwrap(), "on\n");
    }
}
