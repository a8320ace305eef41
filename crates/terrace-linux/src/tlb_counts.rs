//! The kernel's own TLB shootdown counters, read before and after a managed run so that a live
//! run's shootdowns can be set beside the simulated machine's (mtier §5.2.1: every shootdown
//! interrupts every thread of the process; docs/live.md, "TLB shootdowns").
//!
//! Two sources, both host-wide (the kernel does not count them per process):
//! - `/proc/interrupts`, line `TLB` (x86): shootdown interrupts each CPU received. One shootdown
//!   sent to n other CPUs counts n here.
//! - `/proc/vmstat`, the `nr_tlb_*` entries, where the kernel was built with
//!   `CONFIG_DEBUG_TLBFLUSH`: `nr_tlb_remote_flush` counts shootdowns sent, the measure closest
//!   to the simulated machine's count.
//!
//! Either may be missing (another architecture, a kernel without the debug counters): what is
//! missing is reported as not counted, never as zero.

use std::path::Path;

/// The counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlbCounts {
    /// Shootdown interrupts received, summed over CPUs (`None`: no `TLB` line).
    pub interrupts: Option<u64>,
    /// The `nr_tlb_*` entries of /proc/vmstat, in file order (empty: not counted).
    pub vmstat: Vec<(String, u64)>,
}

impl TlbCounts {
    /// Reads the counters of the kernel whose procfs is at `proc_`.
    pub fn read(proc_: &Path) -> Self {
        let interrupts =
            std::fs::read_to_string(proc_.join("interrupts")).ok().and_then(|t| interrupts_tlb(&t));
        let vmstat =
            std::fs::read_to_string(proc_.join("vmstat")).map(|t| vmstat_tlb(&t)).unwrap_or_default();
        TlbCounts { interrupts, vmstat }
    }

    /// The host's counters now.
    pub fn host() -> Self {
        Self::read(Path::new("/proc"))
    }

    /// What happened between `before` and `self`, as one line for the run's log.
    pub fn since(&self, before: &TlbCounts) -> String {
        let mut parts = Vec::new();
        match (before.interrupts, self.interrupts) {
            (Some(a), Some(b)) => parts.push(format!(
                "{} shootdown interrupts received (/proc/interrupts TLB)",
                b.saturating_sub(a)
            )),
            _ => parts.push("shootdown interrupts not counted here (no TLB line in /proc/interrupts)".into()),
        }
        let deltas: Vec<String> = self
            .vmstat
            .iter()
            .filter_map(|(k, b)| {
                let a = before.vmstat.iter().find(|(ka, _)| ka == k)?.1;
                Some(format!("{k} +{}", b.saturating_sub(a)))
            })
            .collect();
        if deltas.is_empty() {
            parts.push("no nr_tlb_* in /proc/vmstat (kernel without CONFIG_DEBUG_TLBFLUSH)".into());
        } else {
            parts.push(deltas.join(", "));
        }
        format!("host-wide TLB shootdowns during the run: {}", parts.join("; "))
    }
}

/// The sum of the `TLB:` line's per-CPU counts, if the file has one.
fn interrupts_tlb(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.trim_start().starts_with("TLB:"))?;
    let counts = line.trim_start().trim_start_matches("TLB:").split_whitespace();
    // The per-CPU numbers come first, then the description ("TLB shootdowns").
    Some(counts.map_while(|w| w.parse::<u64>().ok()).sum())
}

/// The `nr_tlb_*` entries of /proc/vmstat.
fn vmstat_tlb(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            k.starts_with("nr_tlb_").then(|| Some((k.to_string(), v.trim().parse().ok()?)))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str =
        "           CPU0       CPU1\n  0:         35          0   IO-APIC    2-edge      timer\n\
                              NMI:          0          0   Non-maskable interrupts\n\
                              TLB:       1200        34   TLB shootdowns\n\
                              TRM:          0          0   Thermal event interrupts\n";
    const VMSTAT: &str = "nr_free_pages 1000\nnr_tlb_remote_flush 17\nnr_tlb_remote_flush_received 40\n\
                          nr_tlb_local_flush_all 3\nnr_tlb_local_flush_one 9\npgfault 5\n";

    fn dir(interrupts: &str, vmstat: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("interrupts"), interrupts).unwrap();
        std::fs::write(d.path().join("vmstat"), vmstat).unwrap();
        d
    }

    #[test]
    fn both_counters_are_read_and_differenced() {
        let d = dir(INTERRUPTS, VMSTAT);
        let before = TlbCounts::read(d.path());
        assert_eq!(before.interrupts, Some(1234));
        assert_eq!(before.vmstat.len(), 4);
        let after = dir(
            &INTERRUPTS.replace("1200        34", "1300        40"),
            &VMSTAT.replace("nr_tlb_remote_flush 17", "nr_tlb_remote_flush 20"),
        );
        let line = TlbCounts::read(after.path()).since(&before);
        assert!(line.contains("106 shootdown interrupts received"), "{line}");
        assert!(line.contains("nr_tlb_remote_flush +3,"), "{line}");
        assert!(line.contains("nr_tlb_remote_flush_received +0"), "{line}");
    }

    #[test]
    fn a_kernel_without_the_counters_says_so_instead_of_zero() {
        let d = dir("           CPU0\n  0:   35   IO-APIC   timer\n", "nr_free_pages 1000\n");
        let c = TlbCounts::read(d.path());
        assert_eq!(c, TlbCounts { interrupts: None, vmstat: Vec::new() });
        let line = c.since(&c);
        assert!(line.contains("not counted here") && line.contains("CONFIG_DEBUG_TLBFLUSH"), "{line}");
        assert!(!line.contains(" 0 shootdown"), "{line}");
    }
}
