//! Driving the kernel's own memory tiering for a run: NUMA balancing in tiering mode
//! (`kernel.numa_balancing = 2`: promotion of slow-tier pages on hint faults) and demotion on
//! reclaim (`/sys/kernel/mm/numa/demotion_enabled`), with their counters from /proc/vmstat.
//!
//! These are system-wide settings: they are switched on when a run starts and put back as they
//! were when it ends (if Terrace is killed, they stay on; `terrace doctor` shows them).

use std::fs;

const BALANCING: &str = "/proc/sys/kernel/numa_balancing";
const DEMOTION: &str = "/sys/kernel/mm/numa/demotion_enabled";

/// The /proc/vmstat counters of kernel tiering that Terrace reports.
pub const COUNTERS: &[&str] =
    &["pgpromote_success", "pgdemote_kswapd", "pgdemote_direct", "numa_hint_faults", "numa_pages_migrated"];

/// The kernel's tiering, switched on; restores the previous settings when dropped.
pub struct KernelTiering {
    previous: Vec<(&'static str, String)>,
}

impl KernelTiering {
    /// Switches tiering mode and demotion on, remembering what was set before.
    pub fn enable() -> Result<Self, String> {
        let mut previous = Vec::new();
        for (path, value) in [(BALANCING, "2"), (DEMOTION, "1")] {
            let before = fs::read_to_string(path).map_err(|e| {
                format!("cannot read {path}: {e} (a kernel without NUMA balancing or demotion)")
            })?;
            fs::write(path, value)
                .map_err(|e| format!("cannot write {value} to {path}: {e} (needs root)"))?;
            previous.push((path, before.trim().to_string()));
        }
        Ok(KernelTiering { previous })
    }
}

impl Drop for KernelTiering {
    fn drop(&mut self) {
        for (path, value) in &self.previous {
            let _ = fs::write(path, value);
        }
    }
}

/// The tiering counters now, in `COUNTERS` order (0 for one the kernel does not have).
pub fn counters() -> Vec<u64> {
    let text = fs::read_to_string("/proc/vmstat").unwrap_or_default();
    COUNTERS
        .iter()
        .map(|name| {
            text.lines()
                .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
                .unwrap_or(0)
        })
        .collect()
}

/// A run carried out by the kernel's tiering: switched on for the run, with its counters at the
/// last look.
pub struct TieringRun {
    _on: KernelTiering,
    last: Vec<u64>,
}

impl TieringRun {
    /// Switches the kernel's tiering on for the run and says so.
    pub fn start() -> Result<Self, String> {
        let on = KernelTiering::enable()?;
        tracing::info!(
            "the kernel's own tiering carries this policy out: numa_balancing = 2 and demotion on for \
             the run (restored afterwards); its /proc/vmstat counters follow"
        );
        Ok(TieringRun { _on: on, last: counters() })
    }

    /// Logs the counters that changed since the last look.
    pub fn report(&mut self) {
        let now = counters();
        if now != self.last {
            let delta: Vec<String> = COUNTERS
                .iter()
                .zip(now.iter().zip(self.last.iter()))
                .filter(|(_, (n, l))| n != l)
                .map(|(name, (n, l))| format!("{name} +{}", n.saturating_sub(*l)))
                .collect();
            tracing::info!(target: "terrace::kernel", "kernel tiering: {}", delta.join(", "));
            self.last = now;
        }
    }
}
