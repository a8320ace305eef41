//! `terrace doctor`: what this host offers for tiering and what is misconfigured, with fixes.
//!
//! [`examine`] only reads files, so fixture trees test it; [`probe_live`] makes the system calls
//! that only mean something on the real kernel.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::topology::{format_list, Classification, ClassifiedBy, TierOverride, Topology, TopologyError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrackerKind {
    IdlePage,
    SoftDirty,
    DamonVaddr,
    PerfSampling,
    UffdWp,
    NumaBalancingTiering,
    Demotion,
}

impl TrackerKind {
    pub fn label(self) -> &'static str {
        match self {
            TrackerKind::IdlePage => "idle-page bitmap",
            TrackerKind::SoftDirty => "soft-dirty bits",
            TrackerKind::DamonVaddr => "DAMON (vaddr)",
            TrackerKind::PerfSampling => "perf load/store sampling",
            TrackerKind::UffdWp => "userfaultfd write-protect",
            TrackerKind::NumaBalancingTiering => "NUMA balancing tiering mode",
            TrackerKind::Demotion => "kernel demotion",
        }
    }
}

/// Whether one access-tracking or kernel-tiering interface works here, and what to do if not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TrackerCheck {
    pub kind: TrackerKind,
    pub available: bool,
    /// What was checked and what it showed.
    pub detail: String,
    /// How to turn it on, when it is off and can be.
    pub enable: Option<String>,
}

/// Whether the live migrator offers one of the mechanisms plans can ask for (Nimble's, mtier's,
/// HPWP's), and how it does it or why not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MechanismCheck {
    pub mechanism: String,
    pub available: bool,
    /// How the live machine does it, or why this kernel cannot.
    pub detail: String,
}

/// The migration mechanisms of the kernel under `sys` and `proc_`, for a program `terrace run`
/// starts (which gives write-protected copies their userfaultfd, shadow copies the socket of the
/// agent that keeps them, and, with `--objects`, allocation-site placement the object runtime).
pub fn migration_checks(sys: &Path, proc_: &Path) -> Vec<MechanismCheck> {
    let m = crate::migrate::kernel_mechanisms(sys, proc_, true, true, true);
    terrace_model::Mechanism::ALL
        .iter()
        .map(|&k| MechanismCheck {
            mechanism: k.name().to_string(),
            available: m.offers(k),
            detail: if m.offers(k) { crate::migrate::how(k) } else { m.why_not(k) },
        })
        .collect()
}

/// What the running user may do; decides which processes Terrace can manage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Permissions {
    pub euid: u32,
    pub root: bool,
    /// CapEff from /proc/self/status; `None` where it could not be read.
    pub cap_eff: Option<u64>,
    /// move_pages(2) on another user's process.
    pub cap_sys_nice: Option<bool>,
    /// DAMON sysfs, the idle-page bitmap and physical frame numbers in pagemap.
    pub cap_sys_admin: Option<bool>,
    /// Reading another user's /proc/PID/pagemap and process_madvise(2).
    pub cap_sys_ptrace: Option<bool>,
}

const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_NICE: u32 = 23;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One piece of advice: what is wrong and the one thing to do about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// Stable identifier for scripts and tests.
    pub code: &'static str,
    pub message: String,
    pub fix: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub topology: Topology,
    pub classification: Classification,
    pub trackers: Vec<TrackerCheck>,
    pub migration: Vec<MechanismCheck>,
    pub permissions: Permissions,
    pub findings: Vec<Finding>,
}

/// Reads everything doctor can learn from files under the two roots, with no tier override.
pub fn examine(sys: &Path, proc_: &Path) -> Result<Report, TopologyError> {
    examine_with(sys, proc_, &TierOverride::default())
}

/// [`examine`] with the fast/slow nodes from Terrace's config, so the report shows the classification in use.
pub fn examine_with(sys: &Path, proc_: &Path, overrides: &TierOverride) -> Result<Report, TopologyError> {
    let topology = Topology::read(sys, proc_)?;
    let classification = topology.classify(overrides);
    let trackers = file_trackers(sys, &topology);
    let migration = migration_checks(sys, proc_);
    let permissions = read_permissions(proc_);
    let mut findings = findings(&topology, &classification);
    let unknown: Vec<u32> = overrides.unknown_nodes(&topology).into_iter().flat_map(|(_, n)| n).collect();
    if !unknown.is_empty() {
        findings.push(Finding {
            severity: Severity::Error,
            code: "override-unknown-node",
            message: format!("the config names node {} which this host does not have", format_list(&unknown)),
            fix: format!(
                "set fast_nodes/slow_nodes to nodes that exist here: {}",
                format_list(&topology.nodes.iter().map(|n| n.id).collect::<Vec<_>>())
            ),
        });
    }
    Ok(Report { topology, classification, trackers, migration, permissions, findings })
}

fn file_trackers(sys: &Path, topo: &Topology) -> Vec<TrackerCheck> {
    let mut out = Vec::new();
    let idle = sys.join("kernel/mm/page_idle/bitmap");
    out.push(if idle.exists() {
        TrackerCheck {
            kind: TrackerKind::IdlePage,
            available: true,
            detail: format!("{} exists (reading it needs root)", idle.display()),
            enable: None,
        }
    } else {
        TrackerCheck {
            kind: TrackerKind::IdlePage,
            available: false,
            detail: "kernel built without CONFIG_IDLE_PAGE_TRACKING".into(),
            enable: Some("use a kernel built with CONFIG_IDLE_PAGE_TRACKING=y".into()),
        }
    });

    let damon = sys.join("kernel/mm/damon/admin");
    out.push(if damon.is_dir() {
        TrackerCheck {
            kind: TrackerKind::DamonVaddr,
            available: true,
            detail: format!(
                "{} exists (DAMON sysfs; writing it needs root); {}",
                damon.display(),
                damon_regions_source(sys)
            ),
            enable: None,
        }
    } else {
        TrackerCheck {
            kind: TrackerKind::DamonVaddr,
            available: false,
            detail: "no DAMON sysfs interface (kernel without CONFIG_DAMON_SYSFS, or older than 5.18)".into(),
            enable: Some(
                "use a kernel with CONFIG_DAMON=y, CONFIG_DAMON_VADDR=y and CONFIG_DAMON_SYSFS=y".into(),
            ),
        }
    });

    let settings = crate::kernel_tiering::settings_available(sys.parent().unwrap_or(Path::new("/")));
    out.push(match topo.numa_balancing {
        None => TrackerCheck {
            kind: TrackerKind::NumaBalancingTiering,
            available: false,
            detail: "no /proc/sys/kernel/numa_balancing (kernel without CONFIG_NUMA_BALANCING)".into(),
            enable: Some("use a kernel with CONFIG_NUMA_BALANCING=y (tiering mode needs 5.18+)".into()),
        },
        Some(v) if v & 2 != 0 => TrackerCheck {
            kind: TrackerKind::NumaBalancingTiering,
            available: true,
            detail: format!("numa_balancing = {v}: the kernel promotes hot slow-tier pages itself; {settings}"),
            enable: None,
        },
        Some(v) => TrackerCheck {
            kind: TrackerKind::NumaBalancingTiering,
            available: false,
            detail: format!(
                "numa_balancing = {v}: memory-tiering mode (2) is off (kernel-tiering switches it on for its runs); \
                 {settings}"
            ),
            enable: Some("echo 2 > /proc/sys/kernel/numa_balancing".into()),
        },
    });

    out.push(match topo.demotion_enabled {
        None => TrackerCheck {
            kind: TrackerKind::Demotion,
            available: false,
            detail:
                "no /sys/kernel/mm/numa/demotion_enabled (kernel older than 5.15 or without CONFIG_MIGRATION)"
                    .into(),
            enable: Some("use a 5.15+ kernel with CONFIG_NUMA and CONFIG_MIGRATION".into()),
        },
        Some(true) => TrackerCheck {
            kind: TrackerKind::Demotion,
            available: true,
            detail: "demotion_enabled = true: reclaim demotes to the next lower tier instead of swapping"
                .into(),
            enable: None,
        },
        Some(false) => TrackerCheck {
            kind: TrackerKind::Demotion,
            available: false,
            detail: "demotion_enabled = false: reclaim swaps or drops pages instead of demoting them".into(),
            enable: Some("echo 1 > /sys/kernel/mm/numa/demotion_enabled".into()),
        },
    });
    out
}

fn read_permissions(proc_: &Path) -> Permissions {
    let status = fs::read_to_string(proc_.join("self/status")).ok();
    let field = |name: &str| {
        status.as_deref()?.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned())
    };
    // Uid: real effective saved fs
    let euid = field("Uid:")
        .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or_else(|| nix::unistd::geteuid().as_raw());
    let cap_eff = field("CapEff:").and_then(|v| u64::from_str_radix(&v, 16).ok());
    let has = |bit: u32| cap_eff.map(|c| c & (1u64 << bit) != 0);
    Permissions {
        euid,
        root: euid == 0,
        cap_eff,
        cap_sys_nice: has(CAP_SYS_NICE),
        cap_sys_admin: has(CAP_SYS_ADMIN),
        cap_sys_ptrace: has(CAP_SYS_PTRACE),
    }
}

const SLOW_NODES_FIX: &str =
    "give the firmware HMAT attributes (with QEMU: -machine hmat=on and hmat-lb latency \
     and bandwidth for every node), or tell Terrace which nodes are slow with slow_nodes in its config";

fn findings(topo: &Topology, class: &Classification) -> Vec<Finding> {
    let mut out = Vec::new();
    if topo.nodes.len() == 1 {
        out.push(Finding {
            severity: Severity::Error,
            code: "single-node",
            message: "this host has a single NUMA node: there is nothing to tier".into(),
            fix: "run the simulator (`terrace sim`, `terrace compare`), or a guest with two NUMA nodes as in docs".into(),
        });
    }

    for tier in &topo.tiers {
        let nodes: Vec<_> = tier.nodes.iter().filter_map(|&id| topo.node(id)).collect();
        let cpuless: Vec<u32> =
            nodes.iter().filter(|n| n.cpus.is_empty() && n.mem_total_bytes > 0).map(|n| n.id).collect();
        let dram: Vec<u32> = nodes.iter().filter(|n| !n.cpus.is_empty()).map(|n| n.id).collect();
        if !cpuless.is_empty() && !dram.is_empty() {
            out.push(Finding {
                severity: Severity::Warning,
                code: "cpuless-same-tier",
                message: format!(
                    "CPU-less node {} is in memory_tier{} with CPU node {}, so the kernel never demotes or \
                     promotes between them",
                    format_list(&cpuless),
                    tier.id,
                    format_list(&dram)
                ),
                fix: SLOW_NODES_FIX.into(),
            });
        }
    }

    let populated = topo.tiers.iter().filter(|t| !t.nodes.is_empty()).count();
    if populated > 1 && topo.demotion_enabled == Some(false) {
        out.push(Finding {
            severity: Severity::Warning,
            code: "demotion-disabled",
            message: format!(
                "kernel demotion is off while the kernel has {populated} memory tiers: under memory pressure \
                 pages are swapped instead of moved to the slow tier"
            ),
            fix: "echo 1 > /sys/kernel/mm/numa/demotion_enabled (or leave it off if Terrace alone places pages)"
                .into(),
        });
    }

    if topo.nodes.len() > 1 && class.by == ClassifiedBy::CpulessAndDistance {
        out.push(Finding {
            severity: Severity::Info,
            code: "no-hmat",
            message:
                "no HMAT attributes and one memory tier: fast and slow were guessed from CPUs and distance"
                    .into(),
            fix: "check the class column; if it is wrong, set fast_nodes/slow_nodes in Terrace's config \
                  (firmware HMAT, with QEMU -machine hmat=on, makes it exact)"
                .into(),
        });
    }
    out
}

/// Checks that need the real kernel: only meaningful on the host itself, never on fixture trees.
pub fn probe_live() -> Vec<TrackerCheck> {
    vec![live::soft_dirty(), live::perf_sampling(), live::uffd_wp()]
}

/// Where Terrace will read DAMON's regions (`trackers::damon::DamonReader`): its trace event,
/// through perf, where tracefs describes it (a tracefs that is not mounted yet may), sysfs where
/// the kernel has no such event or `TERRACE_DAMON_REGIONS=sysfs` asks for it.
fn damon_regions_source(sys: &Path) -> &'static str {
    let tracing = sys.join("kernel/tracing");
    if tracing.join("events/damon/damon_aggregated").is_dir() {
        "regions read from its damon_aggregated trace event through perf (TERRACE_DAMON_REGIONS=sysfs \
         reads sysfs tried_regions instead)"
    } else if tracing.join("events").is_dir() {
        "regions read from sysfs (tried_regions); this kernel has no damon_aggregated trace event"
    } else {
        "regions read from its damon_aggregated trace event through perf, mounting tracefs at \
         /sys/kernel/tracing to find it (from sysfs tried_regions if that fails)"
    }
}

/// On the host itself: DAMON's sysfs can be there without its vaddr operations (a kernel built
/// with CONFIG_DAMON_PADDR alone), which only an attempt or the kernel's config shows; doctor
/// reads the config (/proc/config.gz or /boot/config-*), when the kernel exposes it.
pub fn refine_damon_live(checks: &mut [TrackerCheck]) {
    if let Some(n) = crate::trackers::damon::held() {
        for c in checks.iter_mut().filter(|c| c.kind == TrackerKind::DamonVaddr && c.available) {
            c.available = false;
            c.detail = format!(
                "DAMON's sysfs is there, but another kdamond runs ({n} exist: the host's own reclaim or \
                 monitor), and DAMON cannot add one while it runs; trackers fall back to the next"
            );
            c.enable = Some("stop the other DAMON user, if it is yours to stop".into());
        }
    }
    let Ok(config) = procfs::kernel_config() else { return };
    for c in checks.iter_mut().filter(|c| c.kind == TrackerKind::DamonVaddr && c.available) {
        if !matches!(config.get("CONFIG_DAMON_VADDR"), Some(procfs::ConfigSetting::Yes)) {
            let paddr = matches!(config.get("CONFIG_DAMON_PADDR"), Some(procfs::ConfigSetting::Yes));
            c.available = false;
            c.detail = format!(
                "DAMON's sysfs is there, but the kernel's config has no CONFIG_DAMON_VADDR{}",
                if paddr { " (only paddr: `terrace record` monitors physical memory instead)" } else { "" }
            );
            c.enable = Some("use a kernel built with CONFIG_DAMON_VADDR=y".into());
        }
    }
}

mod live {
    use std::fs::{self, File, OpenOptions};
    use std::io::{self, Write};
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::fs::FileExt;
    use std::path::Path;

    use super::{TrackerCheck, TrackerKind};

    fn errno_text(e: &io::Error) -> String {
        match e.raw_os_error() {
            Some(n) => {
                let errno = nix::errno::Errno::from_raw(n);
                format!("{errno:?} ({})", errno.desc())
            }
            None => e.to_string(),
        }
    }

    /// Clears our own soft-dirty bits, writes a page of our own and looks for bit 55 in pagemap.
    pub(super) fn soft_dirty() -> TrackerCheck {
        let check = |available: bool, detail: String, enable: Option<&str>| TrackerCheck {
            kind: TrackerKind::SoftDirty,
            available,
            detail,
            enable: enable.map(str::to_owned),
        };
        match probe_soft_dirty() {
            Ok((false, true)) => {
                check(true, "bit 55 of /proc/self/pagemap cleared and set as expected".into(), None)
            }
            Ok((before, after)) => check(
                false,
                format!(
                    "after clear_refs 4 bit 55 was {before}, after a write {after}: kernel built without \
                     CONFIG_MEM_SOFT_DIRTY"
                ),
                Some("use a kernel built with CONFIG_MEM_SOFT_DIRTY=y"),
            ),
            Err(e) => check(false, format!("probe failed: {}", errno_text(&e)), None),
        }
    }

    /// Returns (soft-dirty right after clearing, soft-dirty after a write).
    fn probe_soft_dirty() -> io::Result<(bool, bool)> {
        let page = page_size();
        // A page-aligned buffer of our own; a Vec keeps the probe free of unsafe mmap.
        let mut buf = vec![0u8; page * 2];
        let off = buf.as_ptr().align_offset(page);
        let cell = &mut buf[off..off + page];
        let addr = cell.as_ptr() as usize;
        std::hint::black_box(&mut *cell)[0] = 1;
        let pagemap = File::open("/proc/self/pagemap")?;
        let bit = |pm: &File| -> io::Result<bool> {
            let mut entry = [0u8; 8];
            pm.read_exact_at(&mut entry, (addr / page * 8) as u64)?;
            Ok(u64::from_ne_bytes(entry) & (1 << 55) != 0)
        };
        OpenOptions::new().write(true).open("/proc/self/clear_refs")?.write_all(b"4")?;
        let before = bit(&pagemap)?;
        std::hint::black_box(&mut *cell)[0] = 2;
        let after = bit(&pagemap)?;
        Ok((before, after))
    }

    fn page_size() -> usize {
        // SAFETY: sysconf has no memory effects.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if n > 0 {
            n as usize
        } else {
            4096
        }
    }

    /// perf_event_attr up to PERF_ATTR_SIZE_VER0 (64 bytes); the kernel accepts that size.
    #[repr(C)]
    #[derive(Default)]
    struct PerfEventAttr {
        type_: u32,
        size: u32,
        config: u64,
        sample_period: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        wakeup_events: u32,
        bp_type: u32,
        config1: u64,
    }
    const PERF_TYPE_HARDWARE: u32 = 0;
    const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
    const PERF_SAMPLE_IP: u64 = 1;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    const FLAG_DISABLED: u64 = 1 << 0;
    const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
    const FLAG_EXCLUDE_HV: u64 = 1 << 6;

    /// Opens (and closes) a sampling cycles event on ourselves, then looks for a PMU that
    /// samples data addresses (Intel mem-loads, AMD IBS, Arm SPE).
    pub(super) fn perf_sampling() -> TrackerCheck {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_HARDWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_HW_CPU_CYCLES,
            sample_period: 100_000,
            sample_type: PERF_SAMPLE_IP,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            ..Default::default()
        };
        // SAFETY: attr is a valid, initialised perf_event_attr of the size it declares.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        let paranoid = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "?".into());
        if fd < 0 {
            let e = io::Error::last_os_error();
            let enable = match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    "run as root or with CAP_PERFMON, or echo 1 > /proc/sys/kernel/perf_event_paranoid"
                }
                _ => "run on hardware (or a VM) that exposes a PMU; use another tracker meanwhile",
            };
            return TrackerCheck {
                kind: TrackerKind::PerfSampling,
                available: false,
                detail: format!(
                    "not supported: perf_event_open(cycles, sample_period) failed with {} \
                     (perf_event_paranoid = {paranoid})",
                    errno_text(&e)
                ),
                enable: Some(enable.into()),
            };
        }
        // SAFETY: fd is a fresh descriptor we own; OwnedFd closes it.
        drop(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        let pmus = Path::new("/sys/bus/event_source/devices");
        let mem = ["cpu/events/mem-loads", "cpu_core/events/mem-loads", "ibs_op", "arm_spe_0"]
            .into_iter()
            .find(|p| pmus.join(p).exists());
        match mem {
            Some(p) => TrackerCheck {
                kind: TrackerKind::PerfSampling,
                available: true,
                detail: format!("cycles sampling works; address sampling via {}", pmus.join(p).display()),
                enable: None,
            },
            None => TrackerCheck {
                kind: TrackerKind::PerfSampling,
                available: false,
                detail: "cycles sampling works, but the PMU offers no load/store address sampling \
                         (no mem-loads event, AMD IBS or Arm SPE)"
                    .into(),
                enable: Some("run on a CPU with PEBS, IBS or SPE exposed to this kernel".into()),
            },
        }
    }

    /// Opens a userfaultfd as the fault sampler does (kernel-mode faults included) and asks for
    /// write-protect faults.
    pub(super) fn uffd_wp() -> TrackerCheck {
        match crate::userfaultfd::probe_write_protect() {
            Ok(()) => TrackerCheck {
                kind: TrackerKind::UffdWp,
                available: true,
                detail: format!(
                    "userfaultfd opened and UFFDIO_API granted UFFD_FEATURE_PAGEFAULT_FLAG_WP; `terrace run` \
                     creates the program's descriptor at its first exec, and a new one inside what a \
                     wrapper execs (env, numactl, sh -c 'exec ...'), stopping it with ptrace for a few \
                     system calls (refused if a debugger traces it or it has a seccomp filter of its own: \
                     sampling stops); {}",
                    match crate::userfaultfd::probe_kernel_resolved() {
                        Ok(()) => "the kernel resolves sampled writes itself (UFFD_FEATURE_WP_ASYNC, read back \
                                   with PAGEMAP_SCAN), so where no copy is write-protected a sampled write \
                                   never waits for Terrace"
                            .to_string(),
                        Err(e) => format!(
                            "sampled writes wait for Terrace's handler thread: the kernel cannot resolve \
                             them itself ({e})"
                        ),
                    }
                ),
                enable: None,
            },
            Err(u) => TrackerCheck {
                kind: TrackerKind::UffdWp,
                available: false,
                detail: u.detail,
                enable: Some(u.enable.into()),
            },
        }
    }
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

impl Report {
    /// Human-readable text for the terminal.
    pub fn render(&self) -> String {
        let t = &self.topology;
        let mut s = String::new();
        let _ = writeln!(s, "Nodes");
        let rows: Vec<[String; 8]> = t
            .nodes
            .iter()
            .map(|n| {
                let hmat = match n.hmat {
                    Some(h) => {
                        let v = |x: Option<u64>, unit: &str| x.map_or("?".into(), |x| format!("{x} {unit}"));
                        format!("read {} / {}", v(h.read_latency_ns, "ns"), v(h.read_bandwidth_mb_s, "MB/s"))
                    }
                    None => "-".into(),
                };
                [
                    format!("node{}", n.id),
                    if n.cpus.is_empty() { "-".into() } else { format_list(&n.cpus) },
                    human_bytes(n.mem_total_bytes),
                    human_bytes(n.mem_free_bytes),
                    n.distances.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
                    t.memory_tier_of(n.id).map_or("-".into(), |id| format!("memory_tier{id}")),
                    hmat,
                    self.classification.class_of(n.id).map_or("-".into(), |c| c.to_string()),
                ]
            })
            .collect();
        let header =
            ["node", "cpus", "total", "free", "distances", "kernel tier", "HMAT", "class"].map(String::from);
        let mut widths = header.clone().map(|h| h.len());
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.len());
            }
        }
        for r in std::iter::once(&header).chain(&rows) {
            let line: Vec<String> = r.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
            let _ = writeln!(s, "  {}", line.join("  ").trim_end());
        }
        let _ = writeln!(s, "  fast/slow decided by {}", self.classification.by);
        let balancing = t.numa_balancing.map_or("absent".into(), |v| v.to_string());
        let demotion = t.demotion_enabled.map_or("absent", |d| if d { "true" } else { "false" });
        let _ = writeln!(s, "  numa_balancing = {balancing}, demotion_enabled = {demotion}");

        let _ = writeln!(s, "\nTrackers");
        let label_w = self.trackers.iter().map(|c| c.kind.label().len()).max().unwrap_or(0);
        for c in &self.trackers {
            let mark = if c.available { "yes" } else { "no " };
            let _ = writeln!(s, "  [{mark}] {:<label_w$}  {}", c.kind.label(), c.detail);
            if let Some(e) = &c.enable {
                let _ = writeln!(s, "        {:<label_w$}  enable: {e}", "");
            }
        }

        let _ = writeln!(s, "\nMigration (what plans can ask of the live migrator)");
        let label_w = self.migration.iter().map(|c| c.mechanism.len()).max().unwrap_or(0);
        for c in &self.migration {
            let mark = if c.available { "yes" } else { "no " };
            let _ = writeln!(s, "  [{mark}] {:<label_w$}  {}", c.mechanism, c.detail);
        }

        let p = &self.permissions;
        let _ = writeln!(s, "\nPermissions");
        let _ = writeln!(s, "  effective uid {}{}", p.euid, if p.root { " (root)" } else { "" });
        let _ = writeln!(
            s,
            "  CAP_SYS_NICE   {:<7}  move_pages on another user's process",
            yes_no(p.cap_sys_nice)
        );
        let _ = writeln!(
            s,
            "  CAP_SYS_ADMIN  {:<7}  DAMON, idle-page bitmap, frame numbers",
            yes_no(p.cap_sys_admin)
        );
        let _ = writeln!(s, "  CAP_SYS_PTRACE {:<7}  another user's pagemap", yes_no(p.cap_sys_ptrace));

        let _ = writeln!(s, "\nFindings");
        if self.findings.is_empty() {
            let _ = writeln!(s, "  none: the tier setup looks right");
        }
        for f in &self.findings {
            let sev = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "info",
            };
            let _ = writeln!(s, "  {sev}: {}", f.message);
            let _ = writeln!(s, "    fix: {}", f.fix);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
        assert_eq!(human_bytes(5597400 * 1024), "5.3 GiB");
    }

    /// Doctor says where DAMON's regions are read from: its trace event where tracefs has it or
    /// may once mounted, sysfs where the kernel has no such event.
    #[test]
    fn damons_region_source_follows_tracefs_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        let sys = root.path();
        assert!(damon_regions_source(sys).contains("mounting tracefs at /sys/kernel/tracing"));
        fs::create_dir_all(sys.join("kernel/tracing/events/sched")).unwrap();
        assert!(damon_regions_source(sys).ends_with("this kernel has no damon_aggregated trace event"));
        fs::create_dir_all(sys.join("kernel/tracing/events/damon/damon_aggregated")).unwrap();
        assert!(damon_regions_source(sys)
            .starts_with("regions read from its damon_aggregated trace event through perf"));
    }

    /// The migration section follows the kernel under the roots: its release decides the TLB
    /// flush and whether huge pages split to move, its THP directory huge-page moves;
    /// multi-threaded copy is never offered.
    #[test]
    fn migration_checks_follow_the_kernel_under_the_roots() {
        let root = tempfile::tempdir().unwrap();
        let (sys, proc_) = (root.path().join("sys"), root.path().join("proc"));
        fs::create_dir_all(proc_.join("sys/kernel")).unwrap();
        fs::create_dir_all(&sys).unwrap();
        fs::write(proc_.join("sys/kernel/osrelease"), "6.1.0-18-amd64\n").unwrap();
        let offered = |checks: &[MechanismCheck], name: &str| {
            checks.iter().find(|c| c.mechanism == name).map(|c| (c.available, c.detail.clone())).unwrap()
        };
        let without_thp = migration_checks(&sys, &proc_);
        assert_eq!(without_thp.len(), terrace_model::Mechanism::ALL.len());
        let (huge, why) = offered(&without_thp, "huge-page moves");
        assert!(!huge && why.contains("transparent huge pages"), "{why}");
        assert!(offered(&without_thp, "a TLB flush per page").0);
        assert!(!offered(&without_thp, "a TLB flush per batch").0);
        assert!(!offered(&without_thp, "multi-threaded copy").0);
        fs::create_dir_all(sys.join("kernel/mm/transparent_hugepage")).unwrap();
        let with_thp = migration_checks(&sys, &proc_);
        assert!(offered(&with_thp, "huge-page moves").0);
        let (split, why) = offered(&with_thp, "huge pages split to move");
        assert!(!split && why.contains("since Linux 4.14"), "{why}");
        fs::write(proc_.join("sys/kernel/osrelease"), "4.9.0-8-amd64\n").unwrap();
        let old = migration_checks(&sys, &proc_);
        assert!(offered(&old, "huge pages split to move").0 && !offered(&old, "huge-page moves").0);
    }
}
