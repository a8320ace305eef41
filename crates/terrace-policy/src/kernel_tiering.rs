//! `kernel-tiering`: the Linux kernel's own memory tiering, the baseline "autonuma" of Ambix
//! (Ambix thesis §5.3.1: Huang Ying's tiering-0.4 patch on v5.5) and the mechanism TPP builds on
//! (TPP, ASPLOS '23; docs/seeds.md). docs/policies.md, "kernel-tiering", maps every rule to its source.
//!
//! - **Promotion** (NUMA balancing in memory-tiering mode, `numa_balancing = 2`): periodic scans
//!   make pages fault on their next access (the `HintFaults` tracker, at the kernel's minimum
//!   scan period). A slow-tier page whose hint fault comes less than the hot threshold after the
//!   scan is promoted (`numa_hint_fault_latency` < `numa_balancing_hot_threshold_ms`); the
//!   threshold is doubled for write faults, as in the tiering-0.4 patch Ambix compares with.
//! - **Rate limit**: at most `numa_balancing_promote_rate_limit_MBps` of promotions per second
//!   (`numa_promotion_rate_limit`: once a one-second window has seen that many, promotion stops
//!   until the next window).
//! - **Threshold adjustment** (`numa_promotion_adjust_threshold`, Linux 6.1: "memory tiering:
//!   adjust hot threshold automatically"): once per `numa_balancing_scan_period_max_ms` the pages
//!   that passed the threshold are compared with the rate limit's worth over that period; more
//!   than 110% of it lowers the threshold by an eighth of its default, less than 90% raises it,
//!   within one step and twice the default. So under a rate limit the kernel promotes the pages
//!   faulting soonest after their scan, the hottest, rather than whichever fault first.
//! - **Demotion** (kswapd reclaim with `demotion_enabled`): when the fast tier's free pages fall
//!   below its low watermark, or a promotion finds no room above the high watermark, kswapd
//!   demotes the least recently used fast pages until the free pages reach the high watermark
//!   plus TPP's demotion headroom. kswapd is one thread: while its last batch is still being
//!   moved it starts no other, and promotions that find no room fail (the page stays slow until
//!   a later scan's fault).
//! - **Movers**: the program thread that took the hint fault promotes the page and waits for the
//!   copy ([`Mover::FaultingThread`]; `migrate_misplaced_folio` in the fault path); kswapd demotes
//!   in a kernel thread of its own, beside the program ([`Mover::KernelThread`]), whose queue
//!   holds one wake's batch. A page is in its new tier only once its copy completes, so the room
//!   kswapd makes is there for the promotions of later ticks, not of the tick that woke it.
//!   Recency is "least recently faulted": the time of a page's last hint fault, or of its arrival
//!   in the fast tier (first touch or promotion) if it has not faulted since (the kernel ages its
//!   LRU lists with page-table accessed bits; hint faults carry the same information at scan
//!   granularity).
//!
//! On the live machine this policy should drive the kernel's own mechanism (numa_balancing = 2,
//! demotion_enabled, memory.reclaim) and report /proc/vmstat; that is still to come, and the live
//! machine refuses it, naming the missing hint-fault tracker.
//!
//! The kernel's tunables (and the model's own choices) are parameters ([`PARAMS`]), the kernel's
//! defaults theirs.

use crate::params::{Kind, Param, Params};
use terrace_model::{
    AccessKind, FreeRoom, KernelTieringSettings, MachineInfo, MemoryMode, Move, MoveOptions, Mover,
    Observations, PageIdx, PageSize, Plan, Policy, Requirements, TierId, TrackerKind, TrackerRequest,
};

pub const NAME: &str = "kernel-tiering";
pub const SUMMARY: &str = "Linux's own tiering (numa_balancing=2): promote on hint faults soon after the \
                           scan, rate-limited; demote least recently used pages below the watermark";

/// The kernel's rate-limit window: one second of real time.
pub const RATE_WINDOW_NS: u64 = 1_000_000_000;

/// The parameters (docs/policies.md, "kernel-tiering").
pub const PARAMS: &[Param] = &[
    Param {
        name: "scan_period",
        default: "1s",
        kind: Kind::Duration { min_ns: 1_000_000, max_ns: 3_600_000_000_000 },
        meaning: "numa_balancing_scan_period_min_ms: the address space is scanned at most once per this \
                  (whole milliseconds)",
        source: "Linux's default, 1000 ms",
    },
    Param {
        name: "hot_threshold",
        default: "1s",
        kind: Kind::Duration { min_ns: 1_000, max_ns: 3_600_000_000_000 },
        meaning:
            "numa_balancing_hot_threshold_ms: a read fault this soon after the scan marks a slow page hot",
        source: "Linux's default, 1000 ms (divided by the run's scale)",
    },
    Param {
        name: "write_factor",
        default: "2",
        kind: Kind::Count { min: 1, max: 100, unit: "times" },
        meaning: "the hot threshold is multiplied by this for write faults",
        source: "the tiering-0.4 patch (Ambix thesis §2.3.4: \"multiplied by a set number (defaults to 2)\")",
    },
    Param {
        name: "rate_limit",
        default: "65536",
        kind: Kind::Number { min: 0.0, max: 1e9, unit: "MiB/s" },
        meaning: "numa_balancing_promote_rate_limit_MBps: promotions per one-second window (the kernel's MB \
                  are MiB)",
        source: "Linux's default, 65536: it limits nothing in practice, as the kernel intends",
    },
    Param {
        name: "adjust_threshold",
        default: "true",
        kind: Kind::Flag,
        meaning: "adjust the hot threshold so that about the rate limit's worth of pages pass it",
        source: "Linux's numa_promotion_adjust_threshold (since 6.1, always on in tiering mode); the \
                 tiering branches had it before [inference: tiering-0.8's notes change how fast it rises]",
    },
    Param {
        name: "adjust_period",
        default: "60s",
        kind: Kind::Duration { min_ns: 1_000_000, max_ns: 3_600_000_000_000 },
        meaning: "numa_balancing_scan_period_max_ms: how often the threshold is adjusted (real time)",
        source: "Linux's default, 60000 ms (divided by the run's scale)",
    },
    Param {
        name: "interval",
        default: "10ms",
        kind: Kind::Duration { min_ns: 1_000, max_ns: 3_600_000_000_000 },
        meaning: "how often the model decides for the faults since the last decision (real time)",
        source: "unstated (the kernel decides at each fault): 10 ms, short against the 1000 ms threshold \
                 (memtierd's mover interval, HeMem's pass)",
    },
    Param {
        name: "watermark_scale_factor",
        default: "10",
        kind: Kind::Count { min: 1, max: 3000, unit: "/10000 of the fast tier" },
        meaning: "kswapd's watermark step: low watermark one step of free pages, high two",
        source: "Linux's vm.watermark_scale_factor default, 10 (min, the node's share of min_free_kbytes, \
                 taken as 0)",
    },
    Param {
        name: "demote_headroom",
        default: "2%",
        kind: Kind::Percent { min: 0.0, max: 50.0 },
        meaning: "free room kswapd demotes to beyond the high watermark, as a share of the fast tier",
        source:
            "TPP (ASPLOS '23) demote_scale_factor default, 2%; upstream Linux keeps less, which at a scaled \
                 run's sizes makes kswapd's batches a handful of pages",
    },
];

/// The kernel settings `p` asks for away from its defaults (Linux's own): those a kernel carries,
/// and the rest named as the model's only. On a live machine the kernel tiers, so a parameter
/// must be a kernel setting to mean anything there.
pub fn kernel_settings(p: &Params) -> KernelTieringSettings {
    let defaults = crate::registry::defaults_of(NAME);
    let set = |name: &str| p.get(name) != defaults.get(name);
    let mut s = KernelTieringSettings::default();
    let whole_ms =
        |name: &str| p.duration_ns(name).is_multiple_of(1_000_000).then(|| p.duration_ns(name) / 1_000_000);
    let mut model_only = |name: &str, why: &str| s.model_only.push(format!("{name}={} ({why})", p.get(name)));
    if set("rate_limit") {
        let mib_s = p.number("rate_limit");
        if mib_s.fract() == 0.0 {
            s.promote_rate_limit_mib_s = Some(mib_s as u64);
        } else {
            model_only("rate_limit", "the kernel takes whole MiB/s");
        }
    }
    if set("hot_threshold") {
        match whole_ms("hot_threshold") {
            Some(ms) => s.hot_threshold_ms = Some(ms),
            None => model_only("hot_threshold", "the kernel takes whole milliseconds"),
        }
    }
    if set("adjust_period") {
        match whole_ms("adjust_period") {
            Some(ms) => s.scan_period_max_ms = Some(ms),
            None => model_only("adjust_period", "the kernel takes whole milliseconds"),
        }
    }
    if set("scan_period") {
        // `check` has refused a period of part milliseconds.
        s.scan_period_min_ms = whole_ms("scan_period");
    }
    if set("watermark_scale_factor") {
        s.watermark_scale_factor = Some(p.count("watermark_scale_factor"));
    }
    for (name, why) in [
        ("write_factor", "the tiering-0.4 patch's; upstream Linux treats write faults as reads"),
        ("adjust_threshold", "Linux always adjusts the threshold in tiering mode"),
        ("interval", "how often the model decides; the kernel decides at each fault"),
        ("demote_headroom", "TPP's; upstream Linux has no such setting"),
    ] {
        if set(name) {
            model_only(name, why);
        }
    }
    s
}

/// Refuses a scan period the kernel's millisecond setting cannot hold.
pub fn check(p: &Params) -> Result<(), String> {
    if !p.duration_ns("scan_period").is_multiple_of(1_000_000) {
        return Err(format!(
            "scan_period={} is not whole milliseconds, as the kernel takes it",
            p.get("scan_period")
        ));
    }
    Ok(())
}

pub struct KernelTiering {
    name: String,
    scan_period_ms: u32,
    tick_ns: u64,
    write_factor: u64,
    /// The watermark step and demotion headroom, as shares of the fast tier.
    watermark_step: f64,
    demote_headroom: f64,
    /// Promotion rate limit, MiB/s.
    rate_limit_mb_s: f64,
    /// The default hot threshold in real time, scaled to the run (`start`), and the threshold in
    /// force (the default, or where the adjustment has taken it).
    real_hot_threshold_ns: u64,
    default_threshold_ns: u64,
    hot_threshold_ns: u64,
    /// The threshold adjustment: on or off, its period in real time and scaled, the start of the
    /// current period (`None` before the first tick), and the candidates counted in it.
    adjust_threshold: bool,
    real_adjust_period_ns: u64,
    adjust_period_ns: u64,
    adjust_start_ns: Option<u64>,
    candidates_in_period: u64,
    window_ns: u64,
    /// Pages the rate limit allows per window, and per second of the run's time.
    window_budget: u64,
    rate_pages_per_s: f64,
    /// Start of the current rate-limit window; `None` before the first tick.
    window_start_ns: Option<u64>,
    promoted_in_window: u64,
    /// Machine time each page was last known to be used, ns (0: not seen yet).
    last_use: Vec<u64>,
    /// Placed pages already given a `last_use`.
    seen_placed: u64,
    candidates: Vec<PageIdx>,
    lru: Vec<(u64, PageIdx)>,
    /// Per page: a mover has it in flight (neither a candidate nor a victim until it lands).
    moving: Vec<bool>,
    /// The kernel settings the parameters stand for, for a live machine.
    kernel_settings: KernelTieringSettings,
}

impl Default for KernelTiering {
    fn default() -> Self {
        KernelTiering::new(&crate::registry::defaults_of(NAME))
    }
}

impl KernelTiering {
    pub fn new(p: &Params) -> Self {
        KernelTiering {
            name: p.name().to_string(),
            scan_period_ms: (p.duration_ns("scan_period") / 1_000_000) as u32,
            tick_ns: p.duration_ns("interval"),
            write_factor: p.count("write_factor"),
            watermark_step: p.count("watermark_scale_factor") as f64 / 10_000.0,
            demote_headroom: p.fraction("demote_headroom"),
            rate_limit_mb_s: p.number("rate_limit"),
            real_hot_threshold_ns: p.duration_ns("hot_threshold"),
            default_threshold_ns: p.duration_ns("hot_threshold"),
            hot_threshold_ns: p.duration_ns("hot_threshold"),
            adjust_threshold: p.flag("adjust_threshold"),
            real_adjust_period_ns: p.duration_ns("adjust_period"),
            adjust_period_ns: p.duration_ns("adjust_period"),
            adjust_start_ns: None,
            candidates_in_period: 0,
            window_ns: RATE_WINDOW_NS,
            window_budget: u64::MAX,
            rate_pages_per_s: f64::INFINITY,
            window_start_ns: None,
            promoted_in_window: 0,
            last_use: Vec::new(),
            seen_placed: 0,
            candidates: Vec::new(),
            lru: Vec::new(),
            moving: Vec::new(),
            kernel_settings: kernel_settings(p),
        }
    }

    /// The fast tier's watermarks in free pages, for a tier of `capacity` pages: low (kswapd
    /// wakes below it), high (promotions need room above it) and the demotion target (kswapd
    /// stops there).
    pub fn watermarks(&self, capacity: u64) -> (u64, u64, u64) {
        let step = (capacity as f64 * self.watermark_step).ceil() as u64;
        let headroom = (capacity as f64 * self.demote_headroom).ceil() as u64;
        (step, 2 * step, 2 * step + headroom)
    }

    fn threshold_ns(&self, kind: AccessKind) -> u64 {
        match kind {
            AccessKind::Read => self.hot_threshold_ns,
            AccessKind::Write => self.hot_threshold_ns * self.write_factor,
        }
    }

    /// The hot threshold in force (without the write factor).
    pub fn hot_threshold_ns(&self) -> u64 {
        self.hot_threshold_ns
    }

    /// Linux's `numa_promotion_adjust_threshold`: at the end of each adjustment period, the
    /// candidates of the period against the rate limit's worth of pages over it: above 110% the
    /// threshold falls by a step (an eighth of the default, `ref_th * 2 /
    /// NUMA_MIGRATION_ADJUST_STEPS` with 16 steps), not below one step; below 90% it rises by
    /// one, not above twice the default.
    fn adjust_threshold(&mut self, now: u64) {
        if !self.adjust_threshold {
            return;
        }
        let start = *self.adjust_start_ns.get_or_insert(now);
        if now.saturating_sub(start) <= self.adjust_period_ns {
            return;
        }
        // The limit's pages over the period (pages per second of the run's time are the same at
        // every scale), unrounded: at a small scale a window's budget rounds to few pages.
        let reference = self.rate_pages_per_s * self.adjust_period_ns as f64 * 1e-9;
        let step = (self.default_threshold_ns * 2 / 16).max(1);
        let candidates = self.candidates_in_period as f64;
        if candidates > reference * 1.1 {
            self.hot_threshold_ns = self.hot_threshold_ns.saturating_sub(step).max(step);
        } else if candidates < reference * 0.9 {
            self.hot_threshold_ns = (self.hot_threshold_ns + step).min(2 * self.default_threshold_ns);
        }
        self.adjust_start_ns = Some(now);
        self.candidates_in_period = 0;
    }

    /// Promotions the rate limit still allows at `now`.
    fn rate_budget(&mut self, now: u64) -> u64 {
        match self.window_start_ns {
            Some(start) if now.saturating_sub(start) < self.window_ns => {}
            _ => {
                self.window_start_ns = Some(now);
                self.promoted_in_window = 0;
            }
        }
        self.window_budget.saturating_sub(self.promoted_in_window)
    }
}

/// The rate limit's window and its page budget in a run scaled down by `scale`: the kernel's one
/// second divided by the scale, its budget rounded to whole pages (at least one) and the window
/// then sized so that budget / window is the limit itself. Truncating instead would lose up to a
/// page per window, a share that grows with the scale (7 of 7.5 pages at 30 MiB/s and scale
/// 1024; none of 0.94 at 8192).
fn rate_window(pages_per_s: f64, scale: f64) -> (u64, u64) {
    let window_ns = RATE_WINDOW_NS as f64 / scale;
    let exact = pages_per_s * window_ns * 1e-9;
    if !(exact.is_finite() && pages_per_s > 0.0) {
        return ((window_ns.round() as u64).max(1), if pages_per_s > 0.0 { u64::MAX } else { 0 });
    }
    let budget = exact.round().max(1.0);
    (((budget / pages_per_s * 1e9).round() as u64).max(1), budget as u64)
}

impl Policy for KernelTiering {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, machine: &MachineInfo) -> Requirements {
        // kswapd's queue: one wake's batch, at most the demotion target's pages.
        let kswapd_batch = machine
            .tiers
            .first()
            .and_then(|t| t.capacity_pages)
            .map_or(1, |capacity| self.watermarks(capacity).2.max(1));
        Requirements {
            trackers: vec![TrackerRequest { kind: TrackerKind::HintFaults, period: self.scan_period_ms }],
            tick_ns: Some(self.tick_ns),
            page_size: PageSize::Base4K,
            // On a live machine the kernel's own mechanism is this policy; on the simulated
            // one, this file models it.
            memory_mode: MemoryMode::KernelTiering,
            // Promotion in the faulting thread, demotion in kswapd.
            mover: Mover::FaultingThread,
            demotion_mover: Some(Mover::KernelThread { queue_pages: kswapd_batch }),
            kernel_tiering: self.kernel_settings.clone(),
            ..Requirements::default()
        }
    }

    fn start(&mut self, m: &MachineInfo) {
        let scale = if m.scale > 0.0 { m.scale } else { 1.0 };
        self.default_threshold_ns = ((self.real_hot_threshold_ns as f64 / scale).round() as u64).max(1);
        self.hot_threshold_ns = self.default_threshold_ns;
        self.adjust_period_ns = ((self.real_adjust_period_ns as f64 / scale).round() as u64).max(1);
        self.adjust_start_ns = None;
        self.candidates_in_period = 0;
        // Bytes per second are the same at every scale (footprint and time shrink together), so
        // a window 1/scale as long holds 1/scale of the pages.
        self.rate_pages_per_s = self.rate_limit_mb_s * (1u64 << 20) as f64 / m.page_size.bytes() as f64;
        (self.window_ns, self.window_budget) = rate_window(self.rate_pages_per_s, scale);
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let now = obs.now_ns.max(1);
        self.last_use.resize(obs.placement.len(), 0);
        // Flags set for this tick's pages in flight only, and cleared at its end.
        self.moving.resize(obs.placement.len(), false);
        // kswapd is busy while a demotion it was given is still in flight.
        let mut kswapd_busy = false;
        for m in obs.in_flight {
            if let Some(moving) = self.moving.get_mut(m.page as usize) {
                *moving = true;
                kswapd_busy |= m.to > obs.placement[m.page as usize];
            }
        }
        // Hint faults: every faulting page was just used; a page below the top tier faulting soon
        // enough after its scan is a promotion candidate (once, however many times it faulted):
        // the kernel promotes from any lower tier to the top one (`numa_promotion_tiered_enabled`).
        self.candidates.clear();
        for f in obs.hint_faults {
            let Some(last) = self.last_use.get_mut(f.page as usize) else { continue };
            let again = *last == now;
            *last = now;
            if !again
                && !self.moving[f.page as usize]
                && obs.placement[f.page as usize].is_placed()
                && obs.placement[f.page as usize] != TierId::FAST
                && f.latency_ns < self.threshold_ns(f.kind)
            {
                self.candidates.push(f.page);
            }
        }
        // Pages placed since the last tick arrive at the head of the LRU. A page in flight holds
        // room in both tiers (this policy never exchanges): count it once.
        let placed: u64 =
            obs.tiers.iter().map(|t| t.used_pages).sum::<u64>().saturating_sub(obs.in_flight.len() as u64);
        if placed != self.seen_placed {
            for (last, tier) in self.last_use.iter_mut().zip(obs.placement) {
                if *last == 0 && tier.is_placed() {
                    *last = now;
                }
            }
            self.seen_placed = placed;
        }
        // The candidates count towards the threshold's adjustment before the rate limit drops
        // any (the kernel's PGPROMOTE_CANDIDATE), and the threshold for the next tick is set.
        self.candidates_in_period += self.candidates.len() as u64;
        self.adjust_threshold(now);
        let budget = self.rate_budget(now);
        self.candidates.truncate(budget.min(usize::MAX as u64) as usize);

        let mut plan = Plan {
            options: MoveOptions::default(),
            reason: "kernel tiering: hint fault within the hot threshold up, least recently used down".into(),
            ..Plan::none()
        };
        let fast = obs.tiers.first().copied().unwrap_or_default();
        let mut promote = self.candidates.len() as u64;
        if let Some(capacity) = fast.capacity_pages {
            let free = fast.free_pages();
            let (low, high, target) = self.watermarks(capacity);
            // kswapd wakes below the low watermark, or when a promotion finds no room above the
            // high one, unless it is still busy with its last batch; it demotes until the free
            // pages reach its target. Its demotions free their room when their copies complete:
            // the promotions of this tick have only the room there is now.
            let wake = free < low || (promote > 0 && free < promote + high);
            let want = if wake && !kswapd_busy { target.saturating_sub(free) } else { 0 };
            if want > 0 {
                self.lru.clear();
                let moving = &self.moving;
                self.lru.extend(
                    obs.placement
                        .iter()
                        .zip(&self.last_use)
                        .enumerate()
                        .filter(|(i, (t, _))| **t == TierId::FAST && !moving[*i])
                        .map(|(i, (_, &last))| (last, i as PageIdx)),
                );
                let k = (want as usize).min(self.lru.len());
                if k < self.lru.len() {
                    self.lru.select_nth_unstable(k);
                }
                let victims = &mut self.lru[..k];
                victims.sort_unstable();
                // Each to the nearest lower tier with room: the demotion target, falling back to
                // the tiers below it (mm/migrate.c `alloc_demote_folio`, since Linux 6.1).
                let mut room = FreeRoom::new(obs.tiers);
                for &(_, page) in victims.iter() {
                    let Some(to) = room.take_below(TierId::FAST) else { break };
                    plan.moves.push(Move { page, to });
                }
            }
            // Promotions only into room above the high watermark.
            promote = promote.min(free.saturating_sub(high));
        }
        for &page in &self.candidates[..promote as usize] {
            plan.moves.push(Move { page, to: TierId::FAST });
            self.last_use[page as usize] = now;
        }
        self.promoted_in_window += promote;
        for m in obs.in_flight {
            if let Some(moving) = self.moving.get_mut(m.page as usize) {
                *moving = false;
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::{HintFault, TierStatus};

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;
    /// The kernel's defaults: the hot threshold, the promotion rate limit.
    const HOT_THRESHOLD_NS: u64 = 1_000_000_000;
    const PROMOTE_RATE_LIMIT_MB_S: f64 = 65536.0;

    fn watermarks(capacity: u64) -> (u64, u64, u64) {
        KernelTiering::default().watermarks(capacity)
    }

    fn info(scale: f64) -> MachineInfo {
        MachineInfo {
            name: "test".into(),
            tiers: vec![],
            page_size: PageSize::Base4K,
            pages: 0,
            threads: 1,
            scale,
            mechanisms: Default::default(),
            programs: Vec::new(),
            move_unit_bytes: 0,
        }
    }

    fn tick(p: &mut KernelTiering, now: u64, placement: &[TierId], faults: &[HintFault], cap: u64) -> Plan {
        tick_moving(p, now, placement, faults, cap, &[])
    }

    /// A tick with `in_flight` being moved: each holds room at both ends, as the machine counts it.
    fn tick_moving(
        p: &mut KernelTiering,
        now: u64,
        placement: &[TierId],
        faults: &[HintFault],
        cap: u64,
        in_flight: &[Move],
    ) -> Plan {
        let count = |t: TierId| {
            placement.iter().filter(|x| **x == t).count() as u64
                + in_flight.iter().filter(|m| m.to == t).count() as u64
        };
        let (used, slow) = (count(F), count(S));
        let tiers = [
            TierStatus { used_pages: used, capacity_pages: Some(cap), ..Default::default() },
            TierStatus { used_pages: slow, ..Default::default() },
        ];
        let obs = Observations {
            now_ns: now,
            previous_ns: 0,
            placement,
            tiers: &tiers,
            page_bits: None,
            samples: &[],
            future: None,
            hint_faults: faults,
            in_flight,
        };
        p.tick(&obs)
    }

    fn fault(page: PageIdx, kind: AccessKind, latency_ns: u64) -> HintFault {
        HintFault { page, kind, latency_ns }
    }

    fn started(rate: f64) -> KernelTiering {
        let mut p = KernelTiering::new(&crate::registry::params_of(&format!("{NAME}:rate_limit={rate}")));
        p.start(&info(1.0));
        p
    }

    fn promoted(plan: &Plan) -> Vec<PageIdx> {
        plan.moves.iter().filter(|m| m.to == F).map(|m| m.page).collect()
    }

    fn demoted(plan: &Plan) -> Vec<PageIdx> {
        plan.moves.iter().filter(|m| m.to == S).map(|m| m.page).collect()
    }

    #[test]
    fn write_faults_get_twice_the_threshold() {
        let mut p = started(PROMOTE_RATE_LIMIT_MB_S);
        let late = HOT_THRESHOLD_NS + 1;
        let plan = tick(
            &mut p,
            1,
            &[S, S, S],
            &[fault(0, AccessKind::Read, late), fault(1, AccessKind::Write, late)],
            100,
        );
        assert_eq!(promoted(&plan), vec![1]);
        let plan = tick(&mut p, 2, &[S, F, S], &[fault(2, AccessKind::Write, 2 * HOT_THRESHOLD_NS)], 100);
        assert!(plan.is_empty(), "a write fault at twice the threshold is not hot");
    }

    #[test]
    fn the_write_factor_and_scan_period_are_parameters() {
        let mut p = KernelTiering::new(&crate::registry::params_of(
            "kernel-tiering:write_factor=1,scan_period=500ms,interval=20ms",
        ));
        let r = p.requirements(&info(1.0));
        assert_eq!((r.trackers[0].period, r.tick_ns), (500, Some(20_000_000)));
        p.start(&info(1.0));
        let late = HOT_THRESHOLD_NS + 1;
        assert!(tick(&mut p, 1, &[S], &[fault(0, AccessKind::Write, late)], 100).is_empty());
        assert!(
            KernelTiering::new(&crate::registry::params_of("kernel-tiering:watermark_scale_factor=100"))
                .watermarks(1000)
                .0
                == 10
        );
    }

    #[test]
    fn a_fault_after_the_threshold_does_not_promote() {
        let mut p = started(PROMOTE_RATE_LIMIT_MB_S);
        let plan = tick(&mut p, 1, &[S, S], &[fault(0, AccessKind::Read, HOT_THRESHOLD_NS - 1)], 100);
        assert_eq!(promoted(&plan), vec![0]);
        let plan = tick(&mut p, 2, &[F, S], &[fault(1, AccessKind::Read, HOT_THRESHOLD_NS)], 100);
        assert!(plan.is_empty());
    }

    #[test]
    fn the_threshold_scales_with_the_run() {
        let mut p = KernelTiering::default();
        p.start(&info(1000.0));
        let t = HOT_THRESHOLD_NS / 1000;
        assert!(promoted(&tick(&mut p, 1, &[S], &[fault(0, AccessKind::Read, t - 1)], 10)) == vec![0]);
        assert!(tick(&mut p, 2, &[S, S], &[fault(1, AccessKind::Read, t)], 10).is_empty());
    }

    /// Linux's threshold adjustment, by hand: at 1 MiB/s (256 pages a second) a 60 s period's
    /// reference is 15,360 candidates; a step is 2/16 of the 1000 ms default, 125 ms.
    #[test]
    fn the_threshold_follows_the_candidates_against_the_rate_limit() {
        const SECOND: u64 = 1_000_000_000;
        let mut p = started(1.0);
        let slow = vec![S; 20_000];
        let faults = |n: usize, latency: u64| -> Vec<HintFault> {
            (0..n as PageIdx).map(|i| fault(i, AccessKind::Read, latency)).collect()
        };
        // 20,000 candidates (over 110% of 15,360): at the period's end the threshold falls a step.
        tick(&mut p, 1, &slow, &faults(20_000, 1), 100);
        assert_eq!(p.hot_threshold_ns(), HOT_THRESHOLD_NS, "not before the period ends");
        tick(&mut p, 60 * SECOND + 2, &slow, &[], 100);
        assert_eq!(p.hot_threshold_ns(), 875_000_000);
        // It is the threshold in force: 900 ms is now too late, 800 ms is not.
        let t = 60 * SECOND + 3;
        assert!(promoted(&tick(&mut p, t, &slow, &[fault(7, AccessKind::Read, 900_000_000)], 100)).is_empty());
        assert_eq!(
            promoted(&tick(&mut p, t + 1, &slow, &[fault(8, AccessKind::Read, 800_000_000)], 100)),
            vec![8]
        );
        // 15,000 candidates (between 90% and 110%) leave it; none raise it a step a period, up to
        // twice the default.
        tick(&mut p, t + 2, &slow, &faults(14_999, 1), 100);
        tick(&mut p, 121 * SECOND, &slow, &[], 100);
        assert_eq!(p.hot_threshold_ns(), 875_000_000);
        let mut now = 121 * SECOND;
        for expected in [1_000, 1_125, 1_250, 1_375, 1_500, 1_625, 1_750, 1_875, 2_000, 2_000] {
            now += 61 * SECOND;
            tick(&mut p, now, &slow, &[], 100);
            assert_eq!(p.hot_threshold_ns(), expected * 1_000_000);
        }
        // Floods lower it a step a period, to one step and no lower.
        for expected in
            [1_875, 1_750, 1_625, 1_500, 1_375, 1_250, 1_125, 1_000, 875, 750, 625, 500, 375, 250, 125, 125]
        {
            tick(&mut p, now + 1, &slow, &faults(20_000, 1), 100);
            now += 61 * SECOND;
            tick(&mut p, now, &slow, &[], 100);
            assert_eq!(p.hot_threshold_ns(), expected * 1_000_000);
        }
        // Switched off, the threshold stays at its default whatever the candidates.
        let mut off = KernelTiering::new(&crate::registry::params_of(
            "kernel-tiering:rate_limit=1,adjust_threshold=false",
        ));
        off.start(&info(1.0));
        tick(&mut off, 1, &slow, &faults(20_000, 1), 100);
        tick(&mut off, 61 * SECOND, &slow, &[], 100);
        assert_eq!(off.hot_threshold_ns(), HOT_THRESHOLD_NS);
    }

    #[test]
    fn the_adjustment_period_scales_with_the_run() {
        let mut p = KernelTiering::new(&crate::registry::params_of("kernel-tiering:rate_limit=1"));
        p.start(&info(1000.0));
        let slow = vec![S; 10];
        // 60 ms of a run at scale 1000 is the kernel's 60 s; no candidates raise the threshold.
        tick(&mut p, 1, &slow, &[], 10);
        tick(&mut p, 60_000_001, &slow, &[], 10);
        assert_eq!(p.hot_threshold_ns(), HOT_THRESHOLD_NS / 1000);
        tick(&mut p, 60_000_002, &slow, &[], 10);
        assert_eq!(p.hot_threshold_ns(), HOT_THRESHOLD_NS / 1000 * 9 / 8);
    }

    #[test]
    fn kernel_tiering_never_promotes_faster_than_its_rate_limit() {
        // 1 MiB/s of 4 KiB pages: 256 pages per one-second window.
        let mut p = started(1.0);
        let pages = 5000usize;
        let mut placement = vec![S; pages];
        let mut promoted_at: Vec<u64> = Vec::new();
        let tick_ns = 50_000_000;
        let mut next = 0;
        for t in 1..=80u64 {
            let now = t * tick_ns;
            // 100 hot faults every tick: 2000 a second, far above the limit.
            let faults: Vec<HintFault> =
                (0..100).map(|i| fault(((next + i) % pages) as PageIdx, AccessKind::Read, 1)).collect();
            next += 100;
            let plan = tick(&mut p, now, &placement, &faults, pages as u64);
            for m in &plan.moves {
                placement[m.page as usize] = m.to;
                if m.to == F {
                    promoted_at.push(now);
                }
            }
        }
        let per_window = 256;
        // Within any second, never more than the limit's pages (the kernel's windows restart at
        // the first candidate after a second has passed, so any span of one second meets at most
        // two windows, and each window at most its budget).
        for (i, &t) in promoted_at.iter().enumerate() {
            let in_window = promoted_at[i..].iter().take_while(|&&u| u < t + RATE_WINDOW_NS).count();
            assert!(in_window <= 2 * per_window, "{in_window} promotions in one second");
        }
        // And from the first promotion to the last, no more than the windows that span allows.
        let span = promoted_at[promoted_at.len() - 1] - promoted_at[0];
        let windows = (span / RATE_WINDOW_NS + 1) as usize;
        assert!(promoted_at.len() <= windows * per_window, "{} promotions", promoted_at.len());
        assert!(promoted_at.len() >= 3 * per_window, "the limit is reached, not undershot");
        // Windows: no window of the kernel's kind holds more than its budget.
        let mut start = promoted_at[0];
        let mut n = 0;
        for &t in &promoted_at {
            if t - start >= RATE_WINDOW_NS {
                start = t;
                n = 0;
            }
            n += 1;
            assert!(n <= per_window);
        }
    }

    #[test]
    fn the_rate_limit_holds_at_every_scale() {
        // 30 MiB/s of 4 KiB pages is 7680 pages a second of the run's time at any scale.
        let pages_per_s = 30.0 * 256.0;
        for scale in [1.0, 1024.0, 8192.0, 65536.0] {
            let (window_ns, budget) = rate_window(pages_per_s, scale);
            let rate = budget as f64 / (window_ns as f64 * 1e-9);
            assert!((rate / pages_per_s - 1.0).abs() < 1e-3, "scale {scale}: {rate} pages/s");
            assert!(budget >= 1);
            let kernel_window = RATE_WINDOW_NS as f64 / scale;
            assert!(window_ns as f64 <= 2.0 * kernel_window.max(1e9 / pages_per_s), "scale {scale}");
        }
        assert_eq!(rate_window(pages_per_s, 1.0), (1_000_000_000, 7680));
        // At scale 8192 the kernel's window holds 0.94 pages: the window grows to one page's.
        assert_eq!(rate_window(pages_per_s, 8192.0), (130_208, 1));
        assert_eq!(rate_window(0.0, 1024.0).1, 0, "a limit of 0 promotes nothing");

        // End to end at scale 8192: hot faults far above the limit for 50 ms of the run's time
        // promote the limit's 384 pages, less what the kernel's restart of a window at the first
        // decision after it ends loses (a window lasts 132 µs at 2 µs decisions: 379 pages).
        let mut p = KernelTiering::new(&crate::registry::params_of(&format!("{NAME}:rate_limit=30")));
        p.start(&info(8192.0));
        let pages = 20_000usize;
        let mut placement = vec![S; pages];
        let mut promoted = 0;
        for t in 1..=25_000u64 {
            let faults: Vec<HintFault> = (0..2)
                .map(|i| fault(((t * 2 + i) as usize % pages) as PageIdx, AccessKind::Read, 1))
                .collect();
            for m in &tick(&mut p, t * 2_000, &placement, &faults, pages as u64).moves {
                if m.to == F {
                    placement[m.page as usize] = F;
                    promoted += 1;
                }
            }
        }
        assert!((377..=385).contains(&promoted), "{promoted} promotions in 50 ms");
    }

    #[test]
    fn parameters_away_from_linux_defaults_become_kernel_settings_or_are_named_model_only() {
        let settings = |spec: &str| kernel_settings(&crate::registry::params_of(spec));
        assert_eq!(settings(NAME), KernelTieringSettings::default(), "the defaults leave the kernel alone");
        let s = settings(&format!(
            "{NAME}:rate_limit=30,hot_threshold=500ms,scan_period=2s,adjust_period=30s,watermark_scale_factor=100"
        ));
        assert_eq!(
            s,
            KernelTieringSettings {
                promote_rate_limit_mib_s: Some(30),
                hot_threshold_ms: Some(500),
                scan_period_min_ms: Some(2000),
                scan_period_max_ms: Some(30_000),
                watermark_scale_factor: Some(100),
                model_only: Vec::new(),
            }
        );
        let s = settings(&format!(
            "{NAME}:rate_limit=30.5,write_factor=3,adjust_threshold=false,hot_threshold=1500us"
        ));
        assert_eq!(s.promote_rate_limit_mib_s, None);
        assert_eq!(s.hot_threshold_ms, None);
        let names: Vec<&str> = s.model_only.iter().map(|m| m.split('=').next().unwrap()).collect();
        assert_eq!(
            names,
            ["rate_limit", "hot_threshold", "write_factor", "adjust_threshold"],
            "{:?}",
            s.model_only
        );
        assert!(
            s.model_only[0].starts_with("rate_limit=30.5 (the kernel takes whole MiB/s)"),
            "{:?}",
            s.model_only
        );
        // A policy's requirements carry them to the machine.
        let p = KernelTiering::new(&crate::registry::params_of(&format!("{NAME}:rate_limit=30")));
        assert_eq!(p.requirements(&info(1.0)).kernel_tiering.promote_rate_limit_mib_s, Some(30));
    }

    #[test]
    fn demotion_picks_the_least_recently_used_fast_pages_only_above_the_watermark() {
        // 1000 fast pages: watermarks of 1 and 2 free pages, demotion to 22.
        assert_eq!(watermarks(1000), (1, 2, 22));
        let mut p = started(PROMOTE_RATE_LIMIT_MB_S);
        let mut placement = vec![F; 1000];
        placement.extend([S; 10]);
        placement[999] = S; // 999 fast pages: 1 free, at the low watermark.
        assert!(tick(&mut p, 10, &placement, &[], 1000).is_empty(), "no demotion at the watermark");
        // Pages 5, 3 and 7 are used later than the rest; page 999 fills the fast tier.
        let used =
            [fault(5, AccessKind::Read, 1), fault(3, AccessKind::Read, 1), fault(7, AccessKind::Write, 1)];
        assert!(tick(&mut p, 20, &placement, &used, 1000).is_empty());
        placement[999] = F;
        let plan = tick(&mut p, 30, &placement, &[], 1000);
        // Below the low watermark: demote to 22 free, least recently used first: pages 0..999
        // share a last use (ties go to the lower index), 3, 5, 7 are younger.
        let want: Vec<PageIdx> = (0..25).filter(|p| ![3, 5, 7].contains(p)).collect();
        assert_eq!(demoted(&plan), want);
        assert!(promoted(&plan).is_empty());
    }

    #[test]
    fn a_promotion_into_a_full_fast_tier_wakes_kswapd_and_waits_for_its_room() {
        let mut p = started(PROMOTE_RATE_LIMIT_MB_S);
        let mut placement = vec![F; 10];
        placement.extend([S; 2]);
        // Capacity 12: watermarks 1, 2 and 3; 2 free, no room above the high watermark.
        assert_eq!(watermarks(12), (1, 2, 3));
        tick(&mut p, 1, &placement, &[fault(4, AccessKind::Read, 1)], 12);
        let hot = [fault(11, AccessKind::Read, 1), fault(2, AccessKind::Read, 1)];
        let plan = tick(&mut p, 2, &placement, &hot, 12);
        // kswapd demotes the least recently used page to reach its target (3 free); the
        // promotion fails for want of room now: the demotion's room is there once it lands.
        assert_eq!(plan.moves, vec![Move { page: 0, to: S }]);
        // While the demotion is in flight, page 0 still holds its room: nothing more happens.
        let again = [fault(11, AccessKind::Read, 1)];
        assert!(tick_moving(&mut p, 3, &placement, &again, 12, &plan.moves).is_empty());
        // It has landed: the page that faults again goes up.
        placement[0] = S;
        let plan = tick(&mut p, 4, &placement, &[fault(11, AccessKind::Read, 1)], 12);
        assert_eq!(plan.moves, vec![Move { page: 11, to: F }]);
    }

    #[test]
    fn while_kswapd_is_busy_promotions_without_room_fail() {
        let mut p = started(PROMOTE_RATE_LIMIT_MB_S);
        let mut placement = vec![F; 1000];
        placement.extend([S; 100]);
        let hot: Vec<HintFault> = (1000..1030).map(|pg| fault(pg, AccessKind::Read, 1)).collect();
        // Full: kswapd demotes 22 pages, its target; the 30 hot pages find no room yet.
        let plan = tick(&mut p, 10, &placement, &hot[..], 1000);
        assert_eq!((demoted(&plan).len(), promoted(&plan).len()), (22, 0));
        let land = |placement: &mut Vec<TierId>, moves: &[Move]| {
            for m in moves {
                placement[m.page as usize] = m.to;
            }
        };
        land(&mut placement, &plan.moves);
        // 22 free: 20 of 30 more hot pages go up, above the high watermark; kswapd, at its
        // target, demotes nothing.
        let more: Vec<HintFault> = (1030..1060).map(|pg| fault(pg, AccessKind::Read, 1)).collect();
        let plan = tick(&mut p, 500, &placement, &more, 1000);
        assert_eq!((demoted(&plan).len(), promoted(&plan).len()), (0, 20));
        land(&mut placement, &plan.moves);
        // At the high watermark, the last 10 fault again: kswapd demotes 20, and they wait.
        let plan = tick(&mut p, 600, &placement, &more[20..], 1000);
        assert_eq!((demoted(&plan).len(), promoted(&plan).len()), (20, 0));
        // While those demotions are in flight, kswapd takes no other batch (even below its low
        // watermark), and faults that find no room fail.
        let mut full = placement.clone();
        full[1050] = F;
        full[1051] = F;
        let plan = tick_moving(&mut p, 700, &full, &more[20..], 1000, &plan.moves);
        assert!(plan.is_empty(), "{plan:?}");
        // Once nothing of its is in flight, kswapd takes a batch again (the fast tier is full
        // here, as something else filled it meanwhile).
        let plan = tick(&mut p, 2000, &full, &[], 1000);
        assert!(!demoted(&plan).is_empty());
    }

    #[test]
    fn an_unbounded_fast_tier_takes_every_hot_page() {
        let mut p = started(PROMOTE_RATE_LIMIT_MB_S);
        let tiers = [TierStatus::default(), TierStatus::default()];
        let faults = [fault(0, AccessKind::Read, 1), fault(1, AccessKind::Read, 1)];
        let obs = Observations {
            now_ns: 1,
            previous_ns: 0,
            placement: &[S, S],
            tiers: &tiers,
            page_bits: None,
            samples: &[],
            future: None,
            hint_faults: &faults,
            in_flight: &[],
        };
        assert_eq!(promoted(&p.tick(&obs)), vec![0, 1]);
    }
}
