//! What a simulated run reports: run time, traffic per tier, migration, tracking and energy.

use serde::{Deserialize, Serialize};

/// Traffic of one tier over a whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TierTotals {
    pub reads: u64,
    pub writes: u64,
    /// Bytes the media read and wrote for the program, after granularity rounding.
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Bytes migration copied out of and into this tier.
    pub copy_read_bytes: u64,
    pub copy_write_bytes: u64,
    /// Highest page occupancy seen, and the capacity (`None` = unbounded).
    pub peak_pages: u64,
    pub capacity_pages: Option<u64>,
}

/// What a workload's object events did (object tiering §3.2, §3.5); all 0 for a workload without
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectTotals {
    pub allocated: u64,
    pub freed: u64,
    /// Bytes of pages first touched in the tier their allocation site was advised to.
    pub bytes_placed_by_advice: u64,
}

/// The result of one simulated run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub workload: String,
    pub policy: String,
    pub profile: String,
    pub page_bytes: u64,
    /// Bytes the workload addresses.
    pub footprint_bytes: u64,
    /// The fast tier's size the run was given, bytes: what first-touch fills, what Memory Mode
    /// uses as its cache, and what all-fast ignores by definition.
    pub fast_capacity_bytes: u64,
    pub accesses: u64,
    pub runtime_ns: f64,
    /// Per tier, fastest first.
    pub tiers: Vec<TierTotals>,
    /// Pages whose copies completed during the run (each changed tier), and their bytes.
    pub pages_migrated: u64,
    pub bytes_migrated: u64,
    pub failed_moves: u64,
    /// Pages a mover took on whose copies had not completed when the program ended: not moved,
    /// and not in `pages_migrated` (docs/model.md §4, "Movers").
    #[serde(default)]
    pub pages_not_done: u64,
    /// Accesses to huge pages a move split into base pages (docs/model.md §10): their TLB
    /// misses, which the model does not charge, fall on these.
    #[serde(default)]
    pub split_page_accesses: u64,
    /// Shootdowns of the run: moves' and trackers' flushes, each of which halts every thread of
    /// the program (mtier §5.2.1).
    pub tlb_shootdowns: u64,
    /// Of `pages_migrated`, the demotions done by a switch back to the page's shadow (no copy;
    /// docs/model.md §4, "Shadow copies").
    #[serde(default)]
    pub pages_switched: u64,
    /// Shadows dropped because the program wrote the fast copy.
    #[serde(default)]
    pub shadows_dropped: u64,
    /// Most bytes the slower tiers held at once as shadows of promoted pages.
    #[serde(default)]
    pub shadow_peak_bytes: u64,
    /// Mover time, "t migrate": the time threads (or a copy engine) spent copying during the
    /// run, whoever they are: the policy's thread, a kernel thread, a copy engine, or the
    /// faulting program threads (their times summed). Copies done again after a write raced
    /// them count twice; copying after the program ended does not count.
    pub migration_ns: f64,
    /// Each mover's part of `migration_ns`: the policy's mover, then its demotion mover if it has
    /// one. None is ever more than `runtime_ns`.
    #[serde(default)]
    pub mover_ns: Vec<f64>,
    /// Program time lost to moves, "t wait": their TLB shootdowns, copies the faulting threads
    /// made, and writes waiting for write-protected copies. Part of `stall_ns`.
    #[serde(default)]
    pub move_wait_ns: f64,
    /// Tracker CPU time (scans and sample handling).
    pub tracking_ns: f64,
    /// Program time lost to shootdowns, tracking and moves (`move_wait_ns` included).
    pub stall_ns: f64,
    pub energy_j: f64,
    #[serde(default)]
    pub objects: ObjectTotals,
    /// Where several programs shared the machine, each one's start and end (docs/model.md §13);
    /// empty for one program.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<crate::corun::ProgramRun>,
}

/// The share of `all` accesses the fast tier served (1 when there were none: nothing missed it).
pub(crate) fn fast_share(fast: u64, all: u64) -> f64 {
    if all == 0 {
        1.0
    } else {
        fast as f64 / all as f64
    }
}

impl RunReport {
    /// Share of reads served by the fast tier.
    pub fn fast_read_hit_rate(&self) -> f64 {
        fast_share(self.tiers[0].reads, self.tiers.iter().map(|t| t.reads).sum())
    }
    /// Share of writes served by the fast tier.
    pub fn fast_write_hit_rate(&self) -> f64 {
        fast_share(self.tiers[0].writes, self.tiers.iter().map(|t| t.writes).sum())
    }
    /// Share of all program accesses, reads and writes together, served by the fast tier (the
    /// Ambix thesis's Table 5.2 "DRAM Hits", without its migration traffic).
    pub fn fast_hit_rate(&self) -> f64 {
        let all = |t: &TierTotals| t.reads + t.writes;
        fast_share(all(&self.tiers[0]), self.tiers.iter().map(all).sum())
    }
    /// The fast tier's share of all memory transactions and of the writes among them, counting
    /// migration's copies as a memory controller sees them, in 64 B lines (a copied 4 KiB page
    /// is 64 line reads from one tier and 64 line writes to another; the program's accesses are
    /// lines already): what the Ambix thesis's Table 5.2 reports ("DRAM Hits | DRAM Writes",
    /// measured with PCM, migration traffic included, §5.5.3).
    pub fn fast_hit_rates_with_copies(&self) -> (f64, f64) {
        const LINE_BYTES: u64 = 64;
        let all = |t: &TierTotals| t.reads + t.writes + (t.copy_read_bytes + t.copy_write_bytes) / LINE_BYTES;
        let writes = |t: &TierTotals| t.writes + t.copy_write_bytes / LINE_BYTES;
        (
            fast_share(all(&self.tiers[0]), self.tiers.iter().map(all).sum()),
            fast_share(writes(&self.tiers[0]), self.tiers.iter().map(writes).sum()),
        )
    }
    /// The fast tier's size as a share of the footprint (above 1 when every page fits).
    pub fn fast_share_of_footprint(&self) -> f64 {
        self.fast_capacity_bytes as f64 / self.footprint_bytes.max(1) as f64
    }
    /// Bytes written to the slower tiers' media (every tier but the fast one), by the program and
    /// by migration (wear).
    pub fn slow_bytes_written(&self) -> u64 {
        self.tiers[1..].iter().map(|t| t.write_bytes + t.copy_write_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's copies count as lines in the tiers they read and write: 60 program accesses in
    /// the fast tier and 40 in the slow one (10 and 30 of them writes), and 20 lines copied from
    /// the slow tier into the fast one.
    #[test]
    fn hit_rates_with_copies_count_each_copied_line_in_both_tiers() {
        let tier = |reads, writes, copy_read_bytes, copy_write_bytes| TierTotals {
            reads,
            writes,
            copy_read_bytes,
            copy_write_bytes,
            ..TierTotals::default()
        };
        let report = RunReport {
            workload: String::new(),
            policy: String::new(),
            profile: String::new(),
            page_bytes: 4096,
            footprint_bytes: 0,
            fast_capacity_bytes: 0,
            accesses: 100,
            runtime_ns: 1.0,
            tiers: vec![tier(50, 10, 0, 20 * 64), tier(10, 30, 20 * 64, 0)],
            pages_migrated: 0,
            bytes_migrated: 0,
            failed_moves: 0,
            pages_not_done: 0,
            split_page_accesses: 0,
            tlb_shootdowns: 0,
            pages_switched: 0,
            shadows_dropped: 0,
            shadow_peak_bytes: 0,
            migration_ns: 0.0,
            mover_ns: Vec::new(),
            move_wait_ns: 0.0,
            tracking_ns: 0.0,
            stall_ns: 0.0,
            energy_j: 0.0,
            objects: ObjectTotals::default(),
            programs: Vec::new(),
        };
        assert_eq!(report.fast_hit_rates_with_copies(), (80.0 / 140.0, 30.0 / 60.0));
        // Without the copies: 60 of 100 accesses, 10 of 40 writes.
        assert_eq!((report.fast_hit_rate(), report.fast_write_hit_rate()), (0.6, 0.25));
    }
}
