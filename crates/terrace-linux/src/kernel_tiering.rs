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
/// last look, and the processes whose memory policies were looked at.
pub struct TieringRun {
    _on: KernelTiering,
    last: Vec<u64>,
    checked: std::collections::HashSet<i32>,
}

/// Of a process's `/proc/PID/numa_maps`, the first memory policy of a mapping that NUMA
/// balancing leaves alone: the kernel scans and migrates only memory whose policy has MPOL_F_MOF
/// (the default policy, or a bind with MPOL_F_NUMA_BALANCING, shown as `balancing`), so
/// `numactl --preferred=1` or `--membind=1` alone turns kernel tiering off for the program. (A
/// task's policy shows on every mapping without one of its own, so a program just started, with
/// hardly any memory yet, shows it too.)
pub fn blocking_policy(numa_maps: &str) -> Option<&str> {
    numa_maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .find(|policy| !policy.starts_with("default") && !policy.contains("balancing"))
}

impl TieringRun {
    /// Switches the kernel's tiering on for the run and says so.
    pub fn start() -> Result<Self, String> {
        let on = KernelTiering::enable()?;
        tracing::info!(
            "the kernel's own tiering carries this policy out: numa_balancing = 2 and demotion on for \
             the run (restored afterwards); its /proc/vmstat counters follow"
        );
        Ok(TieringRun { _on: on, last: counters(), checked: Default::default() })
    }

    /// Warns, once per process, when `pid`'s memory policy keeps NUMA balancing away from its
    /// memory ([`blocking_policy`]): the run would otherwise end with nothing moved and no word
    /// why.
    pub fn check_policy(&mut self, pid: i32) {
        if !self.checked.insert(pid) {
            return;
        }
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/numa_maps")) else { return };
        if let Some(policy) = blocking_policy(&maps) {
            tracing::warn!(
                "kernel-tiering: pid {pid} runs under the memory policy `{policy}` (numactl or set_mempolicy), \
                 and the kernel's NUMA balancing neither scans nor migrates memory under such a policy, so none \
                 of it will move: start the program without a memory policy, add `--balancing` to numactl's \
                 `--membind`, or use a policy that moves pages itself (hemem, ambix, age)"
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_policies_without_migrate_on_fault_are_found() {
        let maps = "7f00 default file=/usr/lib/libc.so.6 mapped=40 N0=40\n\
                    55aa00000000 prefer:1 heap anon=12 dirty=12 N1=12\n\
                    7f10 default anon=3 dirty=3 N0=3\n";
        assert_eq!(blocking_policy(maps), Some("prefer:1"));
        assert_eq!(blocking_policy("7f10 bind:1=static|balancing anon=3 N1=3\n"), None);
        assert_eq!(blocking_policy("7f10 bind:1 anon=3 N1=3\n"), Some("bind:1"));
        assert_eq!(blocking_policy("7f10 default anon=3 N0=3\n7ff0 default stack anon=1\n"), None);
    }
}
