//! Ambix (M. S. Marques, MSc thesis, IST Lisbon, 2021; docs/seeds.md): write-aware
//! placement on page-table referenced (R) and dirty (D) bits, for DRAM plus Optane in App Direct
//! mode.
//!
//! Rules, with their sections:
//! - Classification (§4.3.2, SelMo's DCPMM_CLEAR and delay): on the slow tier, bits are cleared
//!   (DCPMM_CLEAR), then read after a 50 ms delay, so R means read-hot and D write-hot over that
//!   window. On DRAM the window is the time between two DEMOTE walks' visits to the page: a
//!   DEMOTE walk clears the bits of every page it inspects and does not take ("if the page is not
//!   accessed until the next page table iteration, then it is suitable for demotion", §4.3.2), and
//!   nothing else clears them, so a DRAM page's bits hold every access since the walk last passed
//!   it (a CLOCK hand), or since the page arrived (a migrated page's PTE starts old and clean).
//! - PageFind modes (Table 4.1): DEMOTE takes DRAM pages with R=0 first, R=1&D=0 as backup, never
//!   R=D=1 (§5.5.3); PROMOTE_INT takes slow pages with R=1&D=1 first, R=1 as backup; SWITCH pairs
//!   PROMOTE_INT with DEMOTE for the same count, a backup page only with a priority page of the
//!   other tier, so two equally hot pages are never swapped.
//! - Resume cursor (§4.2): each tier's walk starts where the previous one stopped and wraps, so
//!   pages left uninspected longest come first.
//! - Control loop (§4.3.3, §5.2.3): every 2 s, Switch (if on and the slow tier's write bandwidth
//!   exceeds 50 MB/s): PROMOTE_INT up to 95% DRAM use, or SWITCH when DRAM is at 95%; then
//!   Threshold: DEMOTE the excess over 95% (or, with Switch off, PROMOTE while DRAM is under its
//!   minimum); at most 2 GB worth of pages per request (§4.4); moves batched per process.
//! - Mover (§4.3.3, §4.4): Control calls move_pages once per process and waits for it, so the
//!   copies run beside the program in Control's own thread and the next period starts only when
//!   they are done ([`Mover::PolicyThread`]).
//!
//! Values the thesis leaves open are recorded in docs/policies.md ("ambix"); each is a parameter
//! ([`PARAMS`]).

use crate::params::{Kind, Param, Params};
use terrace_model::{
    Exchange, MachineInfo, Move, MoveOptions, Mover, Observations, PageIdx, Plan, Policy, Requirements,
    TierId, TrackerRequest, PAGE_DIRTY, PAGE_REFERENCED,
};

pub const NAME: &str = "ambix";
pub const SUMMARY: &str =
    "Ambix: write-aware promotion and swapping on referenced/dirty bits (Ambix thesis §4)";
pub const NOSWITCH_NAME: &str = "ambix-noswitch";
pub const NOSWITCH_SUMMARY: &str =
    "Ambix with its Switch component off (Threshold only; the BFS setting of §5.5.2)";

/// The parameters (docs/policies.md, "ambix"). Switch off is the `ambix-noswitch` preset.
pub const PARAMS: &[Param] = &[
    Param {
        name: "switch",
        default: "true",
        kind: Kind::Flag,
        meaning: "run the Switch component (PROMOTE_INT and SWITCH on slow-tier writes); off: Threshold only",
        source: "Ambix thesis §4.3.3 (on in its runs); off is the BFS setting of §5.5.2, the ambix-noswitch preset",
    },
    Param {
        name: "period",
        default: "2s",
        kind: Kind::Duration { min_ns: 1_000_000, max_ns: 3_600_000_000_000 },
        meaning: "the control period (real time)",
        source: "Ambix thesis §5.2.3: 2 s",
    },
    Param {
        name: "delay",
        default: "50ms",
        kind: Kind::Duration { min_ns: 1_000, max_ns: 3_600_000_000_000 },
        meaning: "the window between clearing the bits (DCPMM_CLEAR) and reading them; shorter than the period",
        source: "Ambix thesis §4.3.2 (SelMo's delay), §5.2.3: 50 ms",
    },
    Param {
        name: "dram_max",
        default: "95%",
        kind: Kind::Percent { min: 1.0, max: 100.0 },
        meaning: "DRAM use above which Threshold demotes, and up to which PROMOTE_INT fills",
        source: "Ambix thesis §5.2.3: 95%",
    },
    Param {
        name: "dram_min",
        default: "90%",
        kind: Kind::Percent { min: 0.0, max: 100.0 },
        meaning: "with Switch off, DRAM use under which Threshold promotes; at most dram_max",
        source: "unstated (Switch is on in all the thesis' runs): chosen five points under dram_max, so \
                 PROMOTE and DEMOTE cannot alternate",
    },
    Param {
        name: "switch_bandwidth",
        default: "50",
        kind: Kind::Number { min: 0.0, max: 1e6, unit: "MB/s" },
        meaning: "slow-tier write bandwidth above which Switch runs (where the machine measures it)",
        source: "Ambix thesis §4.3.3, §5.2.3: 50 MB/s",
    },
    Param {
        name: "request_cap",
        default: "2GiB",
        kind: Kind::Bytes { min: 4096, max: 1 << 40 },
        meaning: "the most one request moves, at seed scale (divided by the run's scale, in pages)",
        source: "Ambix thesis §4.4: 2 GB per request (the netlink limit)",
    },
];

/// Refuses a delay as long as the period and a minimum above the maximum.
pub fn check(p: &Params) -> Result<(), String> {
    let (period, delay) = (p.get("period"), p.get("delay"));
    if p.duration_ns("delay") >= p.duration_ns("period") {
        return Err(format!("delay={delay} must be shorter than period={period}"));
    }
    if p.fraction("dram_min") > p.fraction("dram_max") {
        return Err(format!(
            "dram_min={} is above dram_max={}; give a minimum at or under the maximum",
            p.get("dram_min"),
            p.get("dram_max")
        ));
    }
    Ok(())
}

/// Where the control loop is between two periods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The next tick clears the bits (DCPMM_CLEAR) and starts the 50 ms window.
    Clear,
    /// The next tick reads the bits and decides.
    Act,
}

pub struct Ambix {
    name: String,
    switch_on: bool,
    period_ns: u64,
    delay_ns: u64,
    dram_max_use: f64,
    dram_min_use: f64,
    /// dram_max and dram_min as written ("95%"), for the plans' reasons.
    dram_limits: (String, String),
    switch_write_mb_s: f64,
    request_cap_bytes: f64,
    phase: Phase,
    /// DRAM pages' R/D bits as their PTEs hold them: every look's bits ORed in since the last
    /// DEMOTE walk inspected the page or since it arrived in DRAM; 0 for slow-tier pages.
    dram_bits: Vec<u8>,
    /// Slow-tier bytes written over the period, for the Switch trigger.
    /// Bytes written to the slow tier this period; `None` on a machine without the counters.
    slow_written: Option<u64>,
    period_start_ns: u64,
    /// Resume cursors, per tier (§4.2).
    cursor: [usize; 2],
    request_cap_pages: usize,
    page_bytes: u64,
    /// The spans (start, pages inspected) of this decision's DEMOTE walks, whose pages' bits are
    /// cleared once the decision is made.
    demote_walks: Vec<(usize, usize)>,
}

impl Ambix {
    /// Ambix at the thesis' values, with Switch on or off (`ambix`, `ambix-noswitch`).
    pub fn new(switch_on: bool) -> Self {
        Ambix::with(&crate::registry::defaults_of(if switch_on { NAME } else { NOSWITCH_NAME }))
    }

    pub fn with(p: &Params) -> Self {
        Ambix {
            name: p.name().to_string(),
            switch_on: p.flag("switch"),
            period_ns: p.duration_ns("period"),
            delay_ns: p.duration_ns("delay"),
            dram_max_use: p.fraction("dram_max"),
            dram_min_use: p.fraction("dram_min"),
            dram_limits: (p.get("dram_max").to_string(), p.get("dram_min").to_string()),
            switch_write_mb_s: p.number("switch_bandwidth"),
            request_cap_bytes: p.bytes("request_cap") as f64,
            phase: Phase::Clear,
            dram_bits: Vec::new(),
            slow_written: None,
            period_start_ns: 0,
            cursor: [0; 2],
            request_cap_pages: usize::MAX,
            page_bytes: 4096,
            demote_walks: Vec::new(),
        }
    }

    /// PageFind over one tier from its resume cursor: up to `n` pages for which `class` says
    /// `Some(true)` (priority), topped up with `Some(false)` ones (backup). Returns (page,
    /// is_priority) in walk order and moves the cursor past the last page the walk inspected. A
    /// walk over DRAM (a DEMOTE) records its span in `demote_walks`.
    fn page_find(
        &mut self,
        tier: TierId,
        placement: &[TierId],
        n: usize,
        class: impl Fn(PageIdx) -> Option<bool>,
    ) -> Vec<(PageIdx, bool)> {
        let len = placement.len();
        if n == 0 || len == 0 {
            return Vec::new();
        }
        let start = self.cursor[tier.index()] % len;
        let (mut priority, mut backup) = (Vec::new(), Vec::new());
        let mut inspected = 0;
        for k in 0..len {
            let p = (start + k) % len;
            inspected = k + 1;
            if placement[p] != tier {
                continue;
            }
            match class(p as PageIdx) {
                Some(true) => priority.push(p as PageIdx),
                Some(false) if backup.len() < n => backup.push(p as PageIdx),
                _ => {}
            }
            // Stop rule: priority reached n.
            if priority.len() == n {
                break;
            }
        }
        self.cursor[tier.index()] = (start + inspected) % len;
        if tier == TierId::FAST {
            self.demote_walks.push((start, inspected));
        }
        let fill = n - priority.len();
        priority
            .into_iter()
            .map(|p| (p, true))
            .chain(backup.into_iter().take(fill).map(|p| (p, false)))
            .collect()
    }

    /// ORs one look's bits into the DRAM pages' (the tracker clears at each look; SelMo's PTE
    /// bits stay set until a DEMOTE walk clears them). A slow-tier page holds none, so a page
    /// that arrives in DRAM starts from the bits seen after it, as a migrated page's PTE starts
    /// old and clean.
    fn keep_dram_bits(&mut self, bits: &[u8], placement: &[TierId]) {
        self.dram_bits.resize(bits.len(), 0);
        for (acc, (&b, &t)) in self.dram_bits.iter_mut().zip(bits.iter().zip(placement)) {
            *acc = if t == TierId::FAST { *acc | b } else { 0 };
        }
    }

    fn decide(&mut self, obs: &Observations<'_>, slow_bits: &[u8]) -> Plan {
        let placement = obs.placement;
        let dram = obs.tiers[0];
        let Some(dram_cap) = dram.capacity_pages else { return Plan::none() };
        let slow_free = obs.tiers.get(1).map_or(0, |t| t.free_pages());
        let max_pages = (dram_cap as f64 * self.dram_max_use) as u64;
        let period_s = (obs.now_ns.saturating_sub(self.period_start_ns)).max(1) as f64 * 1e-9;
        // The Switch trigger (§4.3.3): the slow tier's write bandwidth above 50 MB/s, "i.e.
        // write-hot pages are in DCPMM". From the machine's counters where it has them (PCM in
        // the thesis); a machine without them (the live one today) triggers on any dirty
        // slow-tier page, which is what the bandwidth threshold stands for.
        let slow_write_mb_s = self.slow_written.map(|bytes| bytes as f64 / period_s / 1e6);
        let triggered = match slow_write_mb_s {
            Some(mb_s) => mb_s > self.switch_write_mb_s,
            None => slow_bits.iter().zip(placement).any(|(b, t)| *t == TierId::SLOW && *b & PAGE_DIRTY != 0),
        };
        let slow_writes = slow_write_mb_s.map_or("unmeasured".to_string(), |mb_s| format!("{mb_s:.0} MB/s"));
        let dram_bits = std::mem::take(&mut self.dram_bits);
        let rd = |bits: &[u8], p: PageIdx| {
            let b = bits.get(p as usize).copied().unwrap_or(0);
            (b & PAGE_REFERENCED != 0, b & PAGE_DIRTY != 0)
        };
        // DEMOTE: R=0 priority, R=1&D=0 backup, R=D=1 never.
        let demote_class = |p: PageIdx| match rd(&dram_bits, p) {
            (false, _) => Some(true),
            (true, false) => Some(false),
            (true, true) => None,
        };
        // PROMOTE_INT: R=1&D=1 priority, R=1 backup.
        let promote_int_class = |p: PageIdx| match rd(slow_bits, p) {
            (true, true) => Some(true),
            (true, false) => Some(false),
            _ => None,
        };
        let mut plan = Plan { options: MoveOptions::default(), ..Plan::none() };
        let mut used = dram.used_pages;
        let cap = self.request_cap_pages;
        let mut reasons = Vec::new();
        if self.switch_on && triggered {
            if used < max_pages {
                let n = ((max_pages - used) as usize).min(cap);
                let found = self.page_find(TierId::SLOW, placement, n, promote_int_class);
                used += found.len() as u64;
                plan.moves.extend(found.iter().map(|&(page, _)| Move { page, to: TierId::FAST }));
                reasons.push(format!("PROMOTE_INT {} (slow tier writes {slow_writes})", found.len()));
            } else {
                let up = self.page_find(TierId::SLOW, placement, cap, promote_int_class);
                let down = self.page_find(TierId::FAST, placement, up.len(), demote_class);
                let pairs = pair_for_switch(&up, &down);
                reasons.push(format!("SWITCH {} pairs (slow tier writes {slow_writes})", pairs.len()));
                plan.exchanges.extend(pairs.into_iter().map(|(a, b)| Exchange { a, b }));
            }
        }
        if used > max_pages && slow_free > 0 {
            let n = ((used - max_pages).min(slow_free) as usize).min(cap);
            // SWITCH's demotions are on their way down when the thesis's Threshold walks DRAM
            // (Control migrates each request before the next, §4.4): this walk, made before any
            // move, passes over them, or a wrapped walk would demote them twice.
            let mut switched: Vec<PageIdx> = plan.exchanges.iter().map(|e| e.b).collect();
            switched.sort_unstable();
            let found = self.page_find(TierId::FAST, placement, n, |p| {
                if switched.binary_search(&p).is_ok() {
                    None
                } else {
                    demote_class(p)
                }
            });
            plan.moves.extend(found.iter().map(|&(page, _)| Move { page, to: TierId::SLOW }));
            reasons.push(format!("DEMOTE {} (DRAM above {})", found.len(), self.dram_limits.0));
        } else if !self.switch_on && (used as f64) < dram_cap as f64 * self.dram_min_use {
            // PROMOTE: dirty pages first, then any other slow page.
            let n = (((dram_cap as f64 * self.dram_min_use) as u64 - used) as usize).min(cap);
            let found = self.page_find(TierId::SLOW, placement, n, |p| Some(rd(slow_bits, p).1));
            plan.moves.extend(found.iter().map(|&(page, _)| Move { page, to: TierId::FAST }));
            reasons.push(format!("PROMOTE {} (DRAM under {})", found.len(), self.dram_limits.1));
        }
        plan.reason = format!("ambix: {}", reasons.join(", "));
        // The DEMOTE walks clear the bits of the DRAM pages they inspected (§4.3.2), after both
        // of this decision's walks, which the thesis runs with the first one's moves between them.
        self.dram_bits = dram_bits;
        for (start, inspected) in std::mem::take(&mut self.demote_walks) {
            for k in 0..inspected {
                if let Some(b) = self.dram_bits.get_mut((start + k) % placement.len()) {
                    *b = 0;
                }
            }
        }
        plan
    }
}

/// SWITCH's pairing (Table 4.1): equal numbers each way, and a backup page only with a priority
/// page of the other tier, so two equally hot pages are never exchanged. Inputs are in walk
/// order, priority pages first.
fn pair_for_switch(up: &[(PageIdx, bool)], down: &[(PageIdx, bool)]) -> Vec<(PageIdx, PageIdx)> {
    let mut down_left: Vec<(PageIdx, bool)> = down.to_vec();
    let mut pairs = Vec::new();
    for &(u, u_priority) in up {
        // A priority promotion takes any demotion candidate; a backup one only a priority one.
        let pick = down_left.iter().position(|&(_, d_priority)| u_priority || d_priority);
        if let Some(i) = pick {
            let (d, _) = down_left.remove(i);
            pairs.push((u, d));
        }
    }
    pairs
}

impl Policy for Ambix {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::page_bits()],
            tick_ns: Some(self.period_ns),
            // Ambix pairs DRAM with DCPMM (thesis §4.1): a fast and a slow tier.
            max_tiers: Some(2),
            // Control's placement thread calls move_pages once per process and waits (§4.4).
            mover: Mover::PolicyThread,
            ..Requirements::default()
        }
    }

    fn start(&mut self, machine: &MachineInfo) {
        self.page_bytes = machine.page_size.bytes();
        self.request_cap_pages =
            ((self.request_cap_bytes / machine.scale.max(1.0)) as u64 / self.page_bytes).max(1) as usize;
    }

    /// Ticks alternate: 1950 ms to the clear, then the 50 ms delay to the walk.
    fn next_tick_ns(&self) -> Option<u64> {
        Some(match self.phase {
            Phase::Clear => self.period_ns - self.delay_ns,
            Phase::Act => self.delay_ns,
        })
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let Some(bits) = obs.page_bits else { return Plan::none() };
        let slow_written = obs.tiers.get(1).and_then(|t| t.write_bytes);
        match self.phase {
            Phase::Clear => {
                // DCPMM_CLEAR: this observation cleared every page's bits; DRAM's are kept.
                self.keep_dram_bits(bits, obs.placement);
                self.slow_written = slow_written;
                self.phase = Phase::Act;
                Plan::none()
            }
            Phase::Act => {
                self.keep_dram_bits(bits, obs.placement);
                self.slow_written = self.slow_written.zip(slow_written).map(|(a, b)| a + b);
                let plan = self.decide(obs, bits);
                self.period_start_ns = obs.now_ns;
                self.slow_written = None;
                self.phase = Phase::Clear;
                plan
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::{PageSize, TierStatus};

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;
    const RD: u8 = PAGE_REFERENCED | PAGE_DIRTY;
    const R: u8 = PAGE_REFERENCED;
    /// The default period and delay (§5.2.3).
    const PERIOD_NS: u64 = 2_000_000_000;
    const DELAY_NS: u64 = 50_000_000;

    fn started(switch_on: bool) -> Ambix {
        let mut a = Ambix::new(switch_on);
        // Two unbounded tiers, as hemem's tests use, with Ambix's 4 KiB pages.
        let machine = MachineInfo { page_size: PageSize::Base4K, ..crate::hemem::tests::machine(1.0) };
        a.start(&machine);
        a
    }

    /// One control period: a clear tick with `dram_bits` (and nothing for the slow tier), then
    /// the act tick 50 ms later with `bits`, the slow tier having taken `slow_write_bytes`.
    fn period(
        a: &mut Ambix,
        placement: &[TierId],
        bits: &[u8],
        dram_cap: u64,
        slow_write_bytes: Option<u64>,
    ) -> Plan {
        let used = placement.iter().filter(|t| **t == F).count() as u64;
        let tiers = |w| {
            [
                TierStatus { used_pages: used, capacity_pages: Some(dram_cap), ..Default::default() },
                TierStatus {
                    used_pages: 0,
                    capacity_pages: Some(1000),
                    write_bytes: w,
                    ..Default::default()
                },
            ]
        };
        let clear_tiers = tiers(slow_write_bytes.map(|_| 0));
        let clear_bits: Vec<u8> =
            bits.iter().zip(placement).map(|(&b, &t)| if t == F { b } else { 0 }).collect();
        let obs = |now, tiers, bits| Observations {
            now_ns: now,
            previous_ns: 0,
            placement,
            tiers,
            page_bits: Some(bits),
            samples: &[],
            future: None,
            hint_faults: &[],
            in_flight: &[],
        };
        assert!(a.tick(&obs(PERIOD_NS - DELAY_NS, &clear_tiers, &clear_bits)).is_empty());
        let act_tiers = tiers(slow_write_bytes);
        a.tick(&obs(PERIOD_NS, &act_tiers, bits))
    }

    /// 1 GB written to the slow tier over a 2 s period: far above the 50 MB/s trigger.
    const HEAVY: u64 = 1 << 30;

    #[test]
    fn ambix_never_demotes_a_page_whose_referenced_and_dirty_bits_are_both_set() {
        let mut a = started(true);
        // DRAM over 95% of 10 pages, every DRAM page write-hot: nothing may be demoted.
        let placement = [F; 10];
        let plan = period(&mut a, &placement, &[RD; 10], 10, Some(0));
        assert!(plan.moves.iter().all(|m| m.to != S), "{:?}", plan.moves);
        // One cold page among them: it (and only it) goes.
        let mut bits = [RD; 10];
        bits[3] = 0;
        let plan = period(&mut a, &placement, &bits, 10, Some(0));
        assert_eq!(plan.moves, vec![Move { page: 3, to: S }]);
    }

    /// SelMo's DEMOTE walk clears the bits of the pages it inspects, and nothing else clears a
    /// DRAM page's (§4.3.2): a page the walk has not passed since it was written stays write-hot,
    /// however long ago that was, and the walk takes the page it cleared once that stays
    /// untouched.
    #[test]
    fn dram_bits_hold_until_a_demote_walk_passes_the_page() {
        let mut a = started(true);
        // Ten DRAM pages of ten: DEMOTE takes one a period (DRAM over 95%).
        let placement = [F; 10];
        let mut bits = [RD; 10];
        bits[0] = 0;
        // The walk finds page 0 cold at once and stops: pages 1-9 are not inspected.
        let plan = period(&mut a, &placement, &bits, 10, Some(0));
        assert_eq!(plan.moves, vec![Move { page: 0, to: S }]);
        // Nothing touched this period. Pages 1-9 still hold the writes the walk never cleared, so
        // the walk goes round to page 0 again, where a 2 s window would have found page 1 cold.
        let plan = period(&mut a, &placement, &[0; 10], 10, Some(0));
        assert_eq!(plan.moves, vec![Move { page: 0, to: S }]);
        // That walk inspected every page, clearing them: untouched since, page 1 is taken next.
        let plan = period(&mut a, &placement, &[0; 10], 10, Some(0));
        assert_eq!(plan.moves, vec![Move { page: 1, to: S }]);
    }

    /// A page migrated into DRAM starts with the bits of the look that found it there (its new
    /// PTE is old and clean), not with whatever an earlier stay in DRAM left.
    #[test]
    fn a_page_arriving_in_dram_starts_with_fresh_bits() {
        let mut a = started(true);
        // Page 0 written while in DRAM, then demoted before any walk cleared it.
        let mut placement = [F; 10];
        period(&mut a, &placement, &[RD; 10], 20, Some(0));
        placement[0] = S;
        period(&mut a, &placement, &[0; 10], 20, Some(0));
        // Back in DRAM and untouched, over 95% again: it is the cold page the walk takes first.
        placement[0] = F;
        let mut bits = [RD; 10];
        bits[0] = 0;
        let plan = period(&mut a, &placement, &bits, 10, Some(0));
        assert_eq!(plan.moves, vec![Move { page: 0, to: S }]);
    }

    /// Threshold's DEMOTE walk, made in the same round as SWITCH's, never takes a page SWITCH is
    /// already demoting: its walk wraps round to the pages SWITCH's walk took.
    #[test]
    fn threshold_does_not_demote_a_page_switch_is_demoting() {
        let mut a = started(true);
        // DRAM at 20 of 20 (over 95%: Threshold demotes one): page 0 cold, 1-19 write-hot. Slow
        // page 20 write-hot, so SWITCH pairs it with page 0; Threshold finds nothing else.
        let mut placement = vec![F; 20];
        placement.push(S);
        let mut bits = vec![0];
        bits.extend([RD; 19]);
        bits.push(RD);
        let plan = period(&mut a, &placement, &bits, 20, Some(HEAVY));
        assert_eq!(plan.exchanges, vec![Exchange { a: 20, b: 0 }]);
        assert!(plan.moves.is_empty(), "page 0 demoted twice: {:?}", plan.moves);
    }

    #[test]
    fn switch_moves_equal_numbers_each_way_and_never_pairs_two_equally_hot_pages() {
        let mut a = started(true);
        // DRAM at exactly 95% (19 of 20): page 0 cold, page 1 read-hot, 2-18 write-hot. Slow pages
        // 19-22: 19-20 write-hot, 21-22 read-hot.
        let mut placement = vec![F; 19];
        placement.extend([S; 4]);
        let mut bits = vec![0, R];
        bits.extend([RD; 17]);
        bits.extend([RD, RD, R, R]);
        let plan = period(&mut a, &placement, &bits, 20, Some(HEAVY));
        assert!(plan.moves.is_empty(), "{:?}", plan.moves);
        for e in &plan.exchanges {
            let (up, down) = (e.a, e.b);
            assert_eq!(placement[up as usize], S);
            assert_eq!(placement[down as usize], F);
            assert_ne!(bits[down as usize], RD, "a write-hot DRAM page was demoted");
            let up_priority = bits[up as usize] == RD;
            let down_priority = bits[down as usize] & PAGE_REFERENCED == 0;
            assert!(up_priority || down_priority, "two equally hot pages swapped: {e:?}");
        }
        // Two demotable DRAM pages (cold, read-hot) for two write-hot slow pages: two pairs.
        assert_eq!(plan.exchanges, vec![Exchange { a: 19, b: 0 }, Exchange { a: 20, b: 1 }]);
    }

    #[test]
    fn switch_waits_for_the_write_bandwidth_trigger() {
        let mut a = started(true);
        let mut placement = vec![F; 19];
        placement.extend([S; 2]);
        let mut bits = vec![0; 19];
        bits.extend([RD, RD]);
        let plan = period(&mut a, &placement, &bits, 20, Some(1_000));
        assert!(plan.is_empty(), "1 kB in 2 s is below 50 MB/s: {plan:?}");
        let plan = period(&mut a, &placement, &bits, 20, Some(HEAVY));
        assert_eq!(plan.exchanges.len(), 2);
    }

    #[test]
    fn without_bandwidth_counters_a_dirty_slow_page_triggers_switch() {
        let mut a = started(true);
        let mut placement = vec![F; 10];
        placement.extend([S; 2]);
        let mut bits = vec![0; 10];
        bits.extend([0, RD]);
        let plan = period(&mut a, &placement, &bits, 20, None);
        assert_eq!(plan.moves, vec![Move { page: 11, to: F }]);
        bits[11] = R;
        assert!(period(&mut a, &placement, &bits, 20, None).is_empty(), "read-hot alone does not trigger");
        // A machine that measures the slow tier's writes and saw none: no trigger, dirty bits or
        // not (zero measured is not "unknown"; the bits stand in only where nothing is measured).
        bits[11] = RD;
        assert!(period(&mut a, &placement, &bits, 20, Some(0)).is_empty());
    }

    #[test]
    fn promote_int_fills_dram_to_95_percent_write_hot_first() {
        let mut a = started(true);
        // 20 DRAM pages, 10 used: room for 9 more under 95% (19 pages).
        let mut placement = vec![F; 10];
        placement.extend([S; 12]);
        let mut bits = vec![R; 10];
        bits.extend([R, R, R, RD, RD, RD, RD, RD, RD, RD, RD, RD]);
        let plan = period(&mut a, &placement, &bits, 20, Some(HEAVY));
        let up: Vec<u32> = plan.moves.iter().filter(|m| m.to == F).map(|m| m.page).collect();
        assert_eq!(up.len(), 9);
        assert!(up.iter().all(|&p| bits[p as usize] == RD), "write-hot pages first: {up:?}");
    }

    #[test]
    fn the_resume_cursor_visits_pages_not_inspected_for_longest_first() {
        let mut a = started(true);
        let placement = [F; 8];
        let cold = |_: PageIdx| Some(true);
        let first: Vec<u32> = a.page_find(F, &placement, 3, cold).iter().map(|p| p.0).collect();
        let second: Vec<u32> = a.page_find(F, &placement, 3, cold).iter().map(|p| p.0).collect();
        let third: Vec<u32> = a.page_find(F, &placement, 3, cold).iter().map(|p| p.0).collect();
        assert_eq!(first, [0, 1, 2]);
        assert_eq!(second, [3, 4, 5]);
        assert_eq!(third, [6, 7, 0], "the walk wraps around to the pages seen longest ago");
    }

    #[test]
    fn ticks_alternate_between_the_period_and_the_50_ms_delay() {
        let mut a = started(true);
        assert_eq!(a.next_tick_ns(), Some(PERIOD_NS - DELAY_NS));
        let placement = [F];
        period(&mut a, &placement, &[0], 10, Some(0));
        assert_eq!(a.next_tick_ns(), Some(PERIOD_NS - DELAY_NS));
        a.phase = Phase::Act;
        assert_eq!(a.next_tick_ns(), Some(DELAY_NS));
    }

    #[test]
    fn the_period_and_delay_are_parameters() {
        let a = Ambix::with(&crate::registry::params_of("ambix:period=4s,delay=100ms"));
        assert_eq!(a.name(), "ambix:period=4s,delay=100ms");
        assert_eq!(a.next_tick_ns(), Some(3_900_000_000));
        assert_eq!(a.requirements(&crate::hemem::tests::machine(1.0)).tick_ns, Some(4_000_000_000));
    }

    #[test]
    fn with_switch_off_dram_is_filled_dirty_pages_first() {
        let mut a = started(false);
        let placement = [F, S, S, S];
        let plan = period(&mut a, &placement, &[0, 0, RD, 0], 4, Some(HEAVY));
        let up: Vec<u32> = plan.moves.iter().filter(|m| m.to == F).map(|m| m.page).collect();
        assert_eq!(up.first(), Some(&2));
        assert!(plan.exchanges.is_empty());
    }

    /// SWITCH's pairing rule itself (Table 4.1): a backup page (a read-hot slow page to promote,
    /// a read-hot DRAM page to demote) is paired only with a priority page of the other tier.
    #[test]
    fn switch_pairs_a_backup_page_only_with_a_priority_page_of_the_other_tier() {
        // Up: slow page 10 write-hot (priority), 11 and 12 read-hot (backup). Down: DRAM page 20
        // cold (priority), 21 read-hot (backup). Both lists in walk order, priority first.
        let (up, down) = ([(10, true), (11, false)], [(20, true), (21, false)]);
        // 10 takes the first candidate; 11 and 21 are equally hot, so neither moves.
        assert_eq!(pair_for_switch(&up, &down), vec![(10, 20)]);
        // Two backup promotions: the first takes the priority demotion, the second nothing.
        assert_eq!(pair_for_switch(&[(11, false), (12, false)], &down), vec![(11, 20)]);
        // Backups on both sides: no pair at all.
        assert_eq!(pair_for_switch(&[(11, false), (12, false)], &[(21, false)]), vec![]);
        // A priority promotion takes a backup demotion.
        assert_eq!(pair_for_switch(&[(10, true)], &[(21, false)]), vec![(10, 21)]);
    }

    #[test]
    fn switch_never_swaps_a_read_hot_slow_page_for_a_read_hot_dram_page() {
        let mut a = started(true);
        // DRAM at 95% (19 of 20): pages 0-1 read-hot, 2-18 write-hot. Slow pages 19-20 read-hot.
        // Switch is triggered, but every candidate is a backup: nothing is worth swapping.
        let mut placement = vec![F; 19];
        placement.extend([S; 2]);
        let mut bits = vec![R, R];
        bits.extend([RD; 17]);
        bits.extend([R, R]);
        let plan = period(&mut a, &placement, &bits, 20, Some(HEAVY));
        assert!(plan.exchanges.is_empty(), "two equally hot pages swapped: {:?}", plan.exchanges);
        assert!(plan.moves.is_empty(), "{:?}", plan.moves);
        // One of the slow pages write-hot: it (and only it) is swapped, for a read-hot DRAM page.
        bits[20] = RD;
        let plan = period(&mut a, &placement, &bits, 20, Some(HEAVY));
        assert_eq!(plan.exchanges.len(), 1, "{:?}", plan.exchanges);
        assert_eq!(plan.exchanges[0].a, 20);
        assert!(plan.exchanges[0].b < 2, "{:?}", plan.exchanges);
        // Both slow pages read-hot again, DRAM page 0 cold: one read-hot page is swapped for it.
        bits[20] = R;
        bits[0] = 0;
        let plan = period(&mut a, &placement, &bits, 20, Some(HEAVY));
        assert_eq!(plan.exchanges, vec![Exchange { a: 19, b: 0 }]);
    }
}
