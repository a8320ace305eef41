//! The `Policy` trait: decides placement from observations, on either machine.

use crate::{Applied, MachineInfo, ObjectEvent, Observations, PageSize, Plan, TierId, TrackerRequest};
use serde::{Deserialize, Serialize};

/// How the fast tier is used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryMode {
    /// Each tier is its own memory (Optane App Direct / a NUMA node per tier): software places pages.
    #[default]
    Flat,
    /// The fast tier is a direct-mapped hardware cache of the slow tier (Optane Memory Mode).
    FastTierAsCache,
    /// The fast tier has no capacity limit: the lower bound on run time.
    UnboundedFast,
    /// The kernel's own tiering places pages (Linux NUMA balancing in tiering mode plus demotion
    /// on reclaim). A live machine switches it on for the run and reports its counters; its
    /// plans are not applied there. The simulated machine has no kernel: there the policy's own
    /// model of it places pages, as in `Flat`.
    KernelTiering,
}

/// The kernel settings a [`MemoryMode::KernelTiering`] policy's parameters stand for, for a live
/// machine to set for the run: each `None` where the policy leaves the kernel's own value (its
/// parameter is at its default, which is Linux's). The simulated machine has no kernel and
/// ignores them: the policy's model uses its parameters directly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelTieringSettings {
    /// `kernel.numa_balancing_promote_rate_limit_MBps` (Linux 6.1 and later), MiB/s.
    pub promote_rate_limit_mib_s: Option<u64>,
    /// debugfs `sched/numa_balancing/hot_threshold_ms` (Linux 6.1 and later).
    pub hot_threshold_ms: Option<u64>,
    /// debugfs `sched/numa_balancing/scan_period_min_ms`.
    pub scan_period_min_ms: Option<u64>,
    /// debugfs `sched/numa_balancing/scan_period_max_ms`.
    pub scan_period_max_ms: Option<u64>,
    /// `vm.watermark_scale_factor`.
    pub watermark_scale_factor: Option<u64>,
    /// Parameters set away from their defaults that no kernel setting carries, each as `key=value
    /// (why)`: a live machine refuses to run them rather than pretend.
    pub model_only: Vec<String>,
}

/// Where a page goes when it is first touched.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitialPlacement {
    /// Linux node-local first touch: the fastest tier with room, then the next.
    #[default]
    FirstTouch,
    /// Round-robin over tiers by page, `weights[t]` pages to tier t in turn (MPOL_INTERLEAVE and
    /// MPOL_WEIGHTED_INTERLEAVE); a tier that is full passes its turn on.
    Interleave { weights: Vec<u32> },
    /// Everything in one tier (spilling to the next when it is full).
    Tier(TierId),
    /// Each page in the tier `tiers[page]` names (pages past the end, or whose tier is full, as
    /// first touch): a placement chosen page by page before the program runs, as an `mbind` of
    /// each page would set it. The offline reference's static placements use it
    /// (docs/model.md §5, §12); the live machine starts such a policy under first touch.
    Pages { tiers: Vec<TierId> },
}

/// What a policy needs from the machine it runs on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Requirements {
    pub trackers: Vec<TrackerRequest>,
    pub page_size: PageSize,
    pub memory_mode: MemoryMode,
    pub initial: InitialPlacement,
    /// Period between ticks, in nanoseconds of unscaled (real) time; `None` means never tick.
    pub tick_ns: Option<u64>,
    /// Mechanisms the policy cannot work without: a machine that lacks one refuses the policy
    /// at start ([`crate::drive`]). Mechanisms a plan merely asks for are optional. Huge-page
    /// moves need not be listed: a 2 MiB `page_size` requires them.
    #[serde(default)]
    pub mechanisms: Vec<crate::Mechanism>,
    /// The most tiers the policy can manage, `None` for any number. A policy written for a fast
    /// and a slow tier (every seed's machine had two) says 2, and a machine with more refuses it
    /// at start ([`crate::drive`]) instead of letting it treat the middle tiers as slow.
    #[serde(default)]
    pub max_tiers: Option<usize>,
    /// Who copies the plan's pages, and so who waits for them ([`crate::Mover`]; docs/model.md
    /// §4, "Movers"). The default is move_pages called from the policy's thread.
    #[serde(default)]
    pub mover: crate::Mover,
    /// The mover of demotions (moves to a slower tier), when another than [`Self::mover`]: the
    /// kernel promotes in the faulting thread and demotes in kswapd. `None`: `mover` does all.
    #[serde(default)]
    pub demotion_mover: Option<crate::Mover>,
    /// Under [`MemoryMode::KernelTiering`], the kernel settings the policy's parameters ask for.
    #[serde(default)]
    pub kernel_tiering: KernelTieringSettings,
}

impl Requirements {
    /// The mechanisms required, huge-page moves included when the page size asks for them.
    pub fn required_mechanisms(&self) -> Vec<crate::Mechanism> {
        let mut m = self.mechanisms.clone();
        if self.page_size == PageSize::Huge2M && !m.contains(&crate::Mechanism::HugePageMoves) {
            m.push(crate::Mechanism::HugePageMoves);
        }
        m
    }
}

impl Default for Requirements {
    fn default() -> Self {
        Requirements {
            trackers: Vec::new(),
            page_size: PageSize::Base4K,
            memory_mode: MemoryMode::Flat,
            initial: InitialPlacement::FirstTouch,
            tick_ns: None,
            mechanisms: Vec::new(),
            max_tiers: None,
            mover: crate::Mover::PolicyThread,
            demotion_mover: None,
            kernel_tiering: KernelTieringSettings::default(),
        }
    }
}

/// A placement policy. It sees only what its trackers report and answers with plans; it never
/// knows whether the machine is simulated or live.
pub trait Policy: Send {
    /// The name it is registered under (`terrace list policies`).
    fn name(&self) -> &str;
    /// What it needs: trackers, page size, memory mode, initial placement, tick period. Asked
    /// once, before the machine is set up (so `machine.pages` is not known yet).
    fn requirements(&self, machine: &MachineInfo) -> Requirements;
    /// Called once the machine is set up, before the program starts.
    fn start(&mut self, _machine: &MachineInfo) {}
    /// Called every tick with what the trackers saw since the previous tick.
    fn tick(&mut self, obs: &Observations<'_>) -> Plan;
    /// What the machine did with the last plan.
    fn applied(&mut self, _applied: &Applied) {}
    /// Real time until the next tick, when the policy's ticks are not evenly spaced (Ambix clears
    /// the bits, waits 50 ms, then reads them); `None` keeps `Requirements::tick_ns`.
    fn next_tick_ns(&self) -> Option<u64> {
        None
    }
    /// An allocation or free in the managed program (object tiering §3.2), for a policy that
    /// asked for [`crate::TrackerKind::ObjectEvents`]: every event once, in program order, those
    /// since the previous tick just before [`Self::tick`] (and those after the last tick when the
    /// program ends), so the policy's object records are current when it decides.
    fn object_event(&mut self, _event: &ObjectEvent) {}
}
