//! Driving the kernel's own memory tiering for a run: NUMA balancing in tiering mode
//! (`kernel.numa_balancing = 2`: promotion of slow-tier pages on hint faults) and demotion on
//! reclaim (`/sys/kernel/mm/numa/demotion_enabled`), with their counters from /proc/vmstat.
//!
//! These are system-wide settings: they are switched on when a run starts and put back as they
//! were when it ends (if Terrace is killed, they stay on; `terrace doctor` shows them). So are
//! the settings the policy's parameters ask for away from Linux's defaults (the promotion rate
//! limit, the hot threshold, the scan periods, the watermark step): set for the run and put back,
//! or, where this kernel has no such setting, refused before the program starts.

use std::fs;
use std::path::{Path, PathBuf};
use terrace_model::KernelTieringSettings;

/// The files below, under the root (`/` on a host).
const BALANCING: &str = "proc/sys/kernel/numa_balancing";
const DEMOTION: &str = "sys/kernel/mm/numa/demotion_enabled";
/// `numa_balancing_promote_rate_limit_MBps` (Linux 6.1 and later).
const RATE_LIMIT: &str = "proc/sys/kernel/numa_balancing_promote_rate_limit_MBps";
/// NUMA balancing's debugfs directory (Linux 5.13 and later; `hot_threshold_ms` since 6.1).
const DEBUGFS: &str = "sys/kernel/debug/sched/numa_balancing";
const WATERMARK_SCALE_FACTOR: &str = "proc/sys/vm/watermark_scale_factor";

/// One kernel setting a run asks for: the parameter it comes from, the file under the root, the
/// value, and what a kernel without the file lacks.
struct Setting {
    param: String,
    file: PathBuf,
    value: u64,
    missing: &'static str,
}

/// The files `settings` writes, under `root` (`/` on a host).
fn setting_files(settings: &KernelTieringSettings, root: &Path) -> Vec<Setting> {
    let debugfs = "needs debugfs mounted (`mount -t debugfs none /sys/kernel/debug`) and Linux 6.1 or later";
    let mut out = Vec::new();
    // The parameter as written (`hot_threshold=500ms`), its file and what a kernel without it lacks.
    let mut push = |param: &str, unit: &str, value: Option<u64>, file: String, missing: &'static str| {
        if let Some(value) = value {
            let param = format!("{param}={value}{unit}");
            out.push(Setting { param, file: root.join(file), value, missing });
        }
    };
    push(
        "rate_limit",
        "",
        settings.promote_rate_limit_mib_s,
        RATE_LIMIT.into(),
        "needs Linux 6.1 or later (numa_balancing_promote_rate_limit_MBps)",
    );
    push("hot_threshold", "ms", settings.hot_threshold_ms, format!("{DEBUGFS}/hot_threshold_ms"), debugfs);
    push("scan_period", "ms", settings.scan_period_min_ms, format!("{DEBUGFS}/scan_period_min_ms"), debugfs);
    push(
        "adjust_period",
        "ms",
        settings.scan_period_max_ms,
        format!("{DEBUGFS}/scan_period_max_ms"),
        debugfs,
    );
    push(
        "watermark_scale_factor",
        "",
        settings.watermark_scale_factor,
        WATERMARK_SCALE_FACTOR.into(),
        "needs /proc/sys/vm/watermark_scale_factor (Linux 4.6 or later)",
    );
    out
}

/// What a run of the kernel's own tiering (`mode`) logs when the config limits the fast tier's share
/// (`tiers.fast_limit_mib`): the kernel promotes and demotes by its own watermarks over all of the
/// fast nodes' memory and knows nothing of a share that Terrace's own policies keep to, so a
/// limit does not bind it (a replay under kernel-tiering with that fast tier is a smaller machine
/// than the run).
pub fn fast_limit_note(mode: terrace_model::MemoryMode, limit_mib: Option<u64>) -> Option<String> {
    if mode != terrace_model::MemoryMode::KernelTiering {
        return None;
    }
    limit_mib.map(|mib| {
        format!(
            "kernel-tiering: tiers.fast_limit_mib = {mib} does not bind the kernel's own tiering, which fills \
             the fast nodes' free memory up to its watermarks; only Terrace's own policies keep to it"
        )
    })
}

/// Whether the kernel under `root` can carry out `settings`: the parameters that are the model's
/// only, or whose setting this kernel lacks, refused in one line saying what to do.
pub fn check_settings(settings: &KernelTieringSettings, root: &Path) -> Result<(), String> {
    if !settings.model_only.is_empty() {
        return Err(format!(
            "kernel-tiering: on a live machine the kernel itself tiers, and it has no setting for {}: leave \
             them at their defaults here, or run them on the simulated machine (`terrace sim`)",
            settings.model_only.join(", ")
        ));
    }
    for s in setting_files(settings, root) {
        if !s.file.exists() {
            return Err(format!(
                "kernel-tiering: {} {}, and {} does not exist on this kernel: leave the parameter at its \
                 default to run with the kernel's own setting",
                s.param,
                s.missing,
                Path::new("/").join(s.file.strip_prefix(root).unwrap_or(&s.file)).display()
            ));
        }
    }
    Ok(())
}

/// The /proc/vmstat counters of kernel tiering that Terrace reports.
pub const COUNTERS: &[&str] =
    &["pgpromote_success", "pgdemote_kswapd", "pgdemote_direct", "numa_hint_faults", "numa_pages_migrated"];

/// The kernel's tiering, switched on; restores the previous settings when dropped.
pub struct KernelTiering {
    previous: Vec<(PathBuf, String)>,
}

impl KernelTiering {
    /// Switches tiering mode and demotion on, and sets what `settings` asks for, remembering what
    /// was set before (a failure part way puts back what was already written).
    pub fn enable(settings: &KernelTieringSettings) -> Result<Self, String> {
        Self::enable_under(settings, Path::new("/"))
    }

    fn enable_under(settings: &KernelTieringSettings, root: &Path) -> Result<Self, String> {
        check_settings(settings, root)?;
        let mut on = KernelTiering { previous: Vec::new() };
        let switches = [(BALANCING, 2), (DEMOTION, 1)].map(|(path, value)| (root.join(path), value));
        let asked = setting_files(settings, root).into_iter().map(|s| (s.file, s.value));
        for (path, value) in switches.into_iter().chain(asked) {
            let shown = Path::new("/").join(path.strip_prefix(root).unwrap_or(&path));
            let before = fs::read_to_string(&path).map_err(|e| {
                format!("cannot read {}: {e} (a kernel without NUMA balancing or demotion)", shown.display())
            })?;
            fs::write(&path, value.to_string())
                .map_err(|e| format!("cannot write {value} to {}: {e} (needs root)", shown.display()))?;
            on.previous.push((path, before.trim().to_string()));
        }
        Ok(on)
    }
}

impl Drop for KernelTiering {
    fn drop(&mut self) {
        // Last written, first restored.
        for (path, value) in self.previous.iter().rev() {
            let _ = fs::write(path, value);
        }
    }
}

/// For `terrace doctor`: what kernel-tiering's parameters can be set through on the kernel under
/// `root`, with the values now, and which parameters it cannot set.
pub fn settings_available(root: &Path) -> String {
    let mut out = format!("kernel-tiering's settings here: {}", settings_in_force(root));
    if !root.join(RATE_LIMIT).exists() {
        out.push_str("; no numa_balancing_promote_rate_limit_MBps (Linux 6.1+), so rate_limit cannot be set");
    }
    if !root.join(DEBUGFS).is_dir() {
        out.push_str(
            "; no debugfs sched/numa_balancing (mount -t debugfs none /sys/kernel/debug), so hot_threshold, \
             scan_period and adjust_period cannot be set",
        );
    }
    out
}

/// What the kernel's tiering runs with, of the settings a parameter stands for, as this kernel
/// shows them (a setting it lacks or hides is left out).
fn settings_in_force(root: &Path) -> String {
    let read = |file: &str| fs::read_to_string(root.join(file)).ok().map(|v| v.trim().to_string());
    let mut shown = Vec::new();
    if let Some(v) = read(RATE_LIMIT) {
        shown.push(format!("promotion rate limit {v} MiB/s"));
    }
    if let Some(v) = read(&format!("{DEBUGFS}/hot_threshold_ms")) {
        shown.push(format!("hot threshold {v} ms"));
    }
    if let Some(v) = read(&format!("{DEBUGFS}/scan_period_min_ms")) {
        shown.push(format!("scan period from {v} ms"));
    }
    if let Some(v) = read(&format!("{DEBUGFS}/scan_period_max_ms")) {
        shown.push(format!("to {v} ms"));
    }
    if let Some(v) = read(WATERMARK_SCALE_FACTOR) {
        shown.push(format!("watermark_scale_factor {v}"));
    }
    if shown.is_empty() {
        "none of its settings readable".into()
    } else {
        shown.join(", ")
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
    /// Switches the kernel's tiering on for the run, with `settings`, and says so.
    pub fn start(settings: &KernelTieringSettings) -> Result<Self, String> {
        let on = KernelTiering::enable(settings)?;
        tracing::info!(
            "the kernel's own tiering carries this policy out: numa_balancing = 2 and demotion on for \
             the run, with {} (restored afterwards); its /proc/vmstat counters follow",
            settings_in_force(Path::new("/"))
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
    fn a_fast_limit_is_said_not_to_bind_the_kernel() {
        use terrace_model::MemoryMode;
        assert_eq!(fast_limit_note(MemoryMode::KernelTiering, None), None);
        assert_eq!(fast_limit_note(MemoryMode::Flat, Some(8)), None, "Terrace's own policies keep to it");
        let note = fast_limit_note(MemoryMode::KernelTiering, Some(8)).unwrap();
        assert!(note.starts_with("kernel-tiering: tiers.fast_limit_mib = 8 does not bind"), "{note}");
    }

    /// A fake root with the kernel's files, as a 6.1+ kernel with debugfs mounted has them.
    fn kernel_root(with_debugfs: bool) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let mut files = vec![
            (BALANCING, "0"),
            (DEMOTION, "false"),
            (RATE_LIMIT, "65536"),
            (WATERMARK_SCALE_FACTOR, "10"),
        ];
        if with_debugfs {
            files.extend([
                ("sys/kernel/debug/sched/numa_balancing/hot_threshold_ms", "1000"),
                ("sys/kernel/debug/sched/numa_balancing/scan_period_min_ms", "1000"),
                ("sys/kernel/debug/sched/numa_balancing/scan_period_max_ms", "60000"),
            ]);
        }
        for (file, value) in files {
            let path = root.path().join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, format!("{value}\n")).unwrap();
        }
        root
    }

    fn read(root: &Path, file: &str) -> String {
        fs::read_to_string(root.join(file)).unwrap().trim().to_string()
    }

    #[test]
    fn asked_settings_are_set_for_the_run_and_put_back() {
        let root = kernel_root(true);
        let asked = KernelTieringSettings {
            promote_rate_limit_mib_s: Some(30),
            hot_threshold_ms: Some(500),
            watermark_scale_factor: Some(100),
            ..KernelTieringSettings::default()
        };
        let on = KernelTiering::enable_under(&asked, root.path()).unwrap();
        assert_eq!(read(root.path(), RATE_LIMIT), "30");
        assert_eq!(read(root.path(), "sys/kernel/debug/sched/numa_balancing/hot_threshold_ms"), "500");
        assert_eq!(read(root.path(), "sys/kernel/debug/sched/numa_balancing/scan_period_min_ms"), "1000");
        assert_eq!(read(root.path(), WATERMARK_SCALE_FACTOR), "100");
        assert_eq!(read(root.path(), BALANCING), "2");
        let shown = settings_in_force(root.path());
        assert!(shown.starts_with("promotion rate limit 30 MiB/s, hot threshold 500 ms"), "{shown}");
        drop(on);
        assert_eq!(read(root.path(), RATE_LIMIT), "65536");
        assert_eq!(read(root.path(), "sys/kernel/debug/sched/numa_balancing/hot_threshold_ms"), "1000");
        assert_eq!(read(root.path(), WATERMARK_SCALE_FACTOR), "10");
        assert_eq!(read(root.path(), BALANCING), "0");
        assert_eq!(read(root.path(), DEMOTION), "false");
    }

    #[test]
    fn what_the_kernel_cannot_set_is_refused_before_anything_changes() {
        let root = kernel_root(false);
        let asked = KernelTieringSettings {
            promote_rate_limit_mib_s: Some(30),
            hot_threshold_ms: Some(500),
            ..KernelTieringSettings::default()
        };
        let err = KernelTiering::enable_under(&asked, root.path()).err().unwrap();
        assert!(err.starts_with("kernel-tiering: hot_threshold=500ms needs debugfs mounted"), "{err}");
        assert!(
            err.contains("/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms does not exist"),
            "{err}"
        );
        assert_eq!(read(root.path(), RATE_LIMIT), "65536", "nothing was written");
        assert_eq!(read(root.path(), BALANCING), "0");
        let model_only = KernelTieringSettings {
            model_only: vec!["write_factor=3 (the tiering-0.4 patch's)".into()],
            ..KernelTieringSettings::default()
        };
        let err = check_settings(&model_only, root.path()).err().unwrap();
        assert!(err.contains("has no setting for write_factor=3 (the tiering-0.4 patch's)"), "{err}");
        // The defaults ask for nothing and run anywhere tiering does.
        assert!(check_settings(&KernelTieringSettings::default(), root.path()).is_ok());
        let doctor = settings_available(root.path());
        assert!(
            doctor.starts_with("kernel-tiering's settings here: promotion rate limit 65536 MiB/s"),
            "{doctor}"
        );
        assert!(
            doctor.ends_with("so hot_threshold, scan_period and adjust_period cannot be set"),
            "{doctor}"
        );
        assert!(!settings_available(kernel_root(true).path()).contains("cannot"));
    }

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
