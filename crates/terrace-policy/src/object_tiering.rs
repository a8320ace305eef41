//! Object tiering: the MAT daemon's policy engine ("Flexible and Effective Object Tiering for
//! Heterogeneous Memory Systems", Kammerdiener et al., 2024; docs/policies.md, "objects").
//!
//! It places whole program objects, known by their allocation site, instead of pages. The
//! engine is the seed's four routines, each selectable by name (§3.4):
//! 1. Aggregate: allocations are buffered until the end of the interval and never recorded if
//!    freed within it (§3.2.1); an object over the split size becomes several records (§3.2.2);
//!    sampled accesses count for the record whose range holds their address (§3.3); each
//!    record's weighted average is τ(n+1) = α·t(n) + (1−α)·τ(n), α = 0.1 (Eq. 1).
//! 2. Prioritise: FIFO (newest first), LRU (most recently sampled first) or accesses per byte
//!    (τ / size, highest first) (§3.4.2).
//! 3. Trigger: every n intervals, on a change of misses per instruction against the mean of the
//!    last ten intervals, or after n bytes allocated since the last enforcement (§3.4.3).
//! 4. Enforce: walk the records in priority order into a fast set until the next would pass 90%
//!    of the fast tier; move the rest out, demoting before promoting (§3.4.4).
//!
//! Proactive placement (§3.5): after an enforcement, a site all (or a configured share) of whose
//! live objects sit in the slow tier has its new objects placed there at allocation; every other
//! site's go to the fast tier while it has room. Several programs by priority (§5.5): while a
//! program of higher priority runs, lower-priority programs' records all go to the slow tier and
//! only the highest priority's compete for the fast tier.

use crate::params::{Kind, Param, Params};
use std::collections::{BTreeMap, HashMap};
use terrace_model::{
    MachineInfo, ObjectEvent, ObjectEventKind, ObjectMove, Observations, PageSize, Plan, Policy,
    Requirements, SiteAdvice, TierId, TrackerRequest,
};

pub const NAME: &str = "objects";
pub const SUMMARY: &str =
    "object tiering's MAT daemon: whole objects by sampled accesses per byte, moved after 1 GiB (scaled) of \
     allocation, new objects placed by site";
pub const REACTIVE_NAME: &str = "objects-reactive";
pub const REACTIVE_SUMMARY: &str =
    "objects without proactive placement by allocation site (the seed's Fig. 7 baseline)";

/// The parameters (docs/policies.md, "objects").
pub const PARAMS: &[Param] = &[
    Param {
        name: "interval",
        default: "2s",
        kind: Kind::Duration { min_ns: 1_000_000, max_ns: 3_600_000_000_000 },
        meaning: "time between the policy engine's ticks (real time; divided by the run's scale)",
        source: "object tiering §3.4: 2 s; shorter ticks gave irregular profiles",
    },
    Param {
        name: "priority",
        default: "apb",
        kind: Kind::Choice(&["fifo", "lru", "apb"]),
        meaning: "which records fill the fast tier first: newest (fifo), most recently sampled (lru), most \
                  sampled accesses per byte (apb)",
        source: "object tiering §3.4.2; apb is avg-best's (Table 5)",
    },
    Param {
        name: "trigger",
        default: "alloc",
        kind: Kind::Choice(&["time", "mpi", "alloc"]),
        meaning:
            "when the fast set is recomputed: every `time_ticks` ticks, on a change of the miss rate, or \
                  after `alloc_share` of the footprint is allocated",
        source: "object tiering §3.4.3; the allocation trigger is avg-best's (Table 5)",
    },
    Param {
        name: "time_ticks",
        default: "1",
        kind: Kind::Count { min: 1, max: 100_000, unit: "ticks" },
        meaning: "the time trigger's period",
        source:
            "object tiering §3.4.3 tests 1, 2, 5, 10 and 100 ticks; the chosen one is not in the text we \
                 have: 1, the shortest",
    },
    Param {
        name: "mpi_threshold",
        default: "2",
        kind: Kind::Number { min: 0.01, max: 1000.0, unit: "" },
        meaning: "the miss-rate trigger fires when the rate differs from the mean of the last ten ticks by \
                  more than this many times that mean",
        source: "object tiering §3.4.3: 2",
    },
    Param {
        name: "alloc_share",
        default: "3.3%",
        kind: Kind::Percent { min: 0.01, max: 100.0 },
        meaning: "the allocation trigger fires after this share of the footprint is allocated",
        source:
            "object tiering §3.4.3: 1,024 MB, against the small inputs' mean peak RSS of 30.4 GB (Table 3)",
    },
    Param {
        name: "split_share",
        default: "0.21%",
        kind: Kind::Percent { min: 0.01, max: 100.0 },
        meaning: "records are at most this share of the footprint; a larger object is several records",
        source: "object tiering §3.2.2: 64 MB, against the small inputs' mean peak RSS of 30.4 GB (Table 3)",
    },
    Param {
        name: "alpha",
        default: "0.1",
        kind: Kind::Number { min: 0.0, max: 1.0, unit: "" },
        meaning: "weight of the last interval's samples in each record's average (Eq. 1)",
        source: "object tiering §3.4.1: 0.1 of 0.01, 0.1, 0.5, 0.9 and 1",
    },
    Param {
        name: "fill",
        default: "90%",
        kind: Kind::Percent { min: 1.0, max: 100.0 },
        meaning: "share of the fast tier the fast set may fill",
        source: "object tiering §3.4.4: 90%; 50, 80 and 100% did worse",
    },
    Param {
        name: "proactive",
        default: "true",
        kind: Kind::Flag,
        meaning:
            "place new objects of a site whose live objects all sit in the slow tier there at allocation",
        source: "object tiering §3.5 and §5.4.1, the conservative scheme",
    },
    Param {
        name: "priorities",
        default: "true",
        kind: Kind::Flag,
        meaning: "while programs of different priorities share the machine, the lower ones' objects all go \
                  to the slow tier and only the highest priority's compete for the fast tier",
        source: "object tiering §5.5 (MD Priority; false is MD Default, Fig. 8)",
    },
    Param {
        name: "sample_period",
        default: "4096",
        kind: Kind::Count { min: 1, max: u32::MAX as u64, unit: "accesses" },
        meaning: "one access in this many is sampled and counted for the record that holds it",
        source: "object tiering §3.3: period 4,096 (of loads missing the last-level cache)",
    },
];

/// The MAT daemon's policy over the one loop: object events feed the engine, sampled accesses
/// are counted for the record holding them, and each tick ends an interval.
pub struct ObjectTiering {
    name: String,
    interval_ns: u64,
    sample_period: u32,
    engine: Engine,
    /// Byte sizes as shares of the footprint, set at start and as a live program grows.
    alloc_share: f64,
    split_share: f64,
    page_bytes: u64,
    /// The machine's move unit (`MachineInfo::move_unit`): records are multiples of it.
    move_unit: u64,
    /// The footprint (pages) the sizes were set against.
    footprint_pages: u64,
    /// Advice the machine was last given, by site, so only changes are sent.
    advised: HashMap<u64, TierId>,
    now_ns: u64,
    /// Programs' priorities count (§5.5, MD Priority); without, every program's objects compete
    /// alike (MD Default).
    priorities: bool,
}

impl Default for ObjectTiering {
    fn default() -> Self {
        ObjectTiering::new(&crate::registry::defaults_of(NAME))
    }
}

impl ObjectTiering {
    pub fn new(p: &Params) -> Self {
        let priority = match p.word("priority") {
            "fifo" => Priority::Fifo,
            "lru" => Priority::Lru,
            _ => Priority::AccessesPerByte,
        };
        let trigger = match p.word("trigger") {
            "time" => Trigger::Time { intervals: p.count("time_ticks") as u32 },
            "mpi" => Trigger::MissesPerInstruction { threshold: p.number("mpi_threshold") },
            // Set against the footprint at start.
            _ => Trigger::Allocation { bytes: u64::MAX },
        };
        let settings = Settings {
            priority,
            trigger,
            alpha: p.number("alpha"),
            split_bytes: u64::MAX,
            fast_fill: p.fraction("fill"),
            site_share: p.flag("proactive").then_some(1.0),
        };
        ObjectTiering {
            name: p.name().to_string(),
            interval_ns: p.duration_ns("interval"),
            sample_period: p.count("sample_period") as u32,
            engine: Engine::new(settings),
            alloc_share: p.fraction("alloc_share"),
            split_share: p.fraction("split_share"),
            page_bytes: 4096,
            move_unit: 4096,
            footprint_pages: 0,
            advised: HashMap::new(),
            now_ns: 0,
            priorities: p.flag("priorities"),
        }
    }

    pub fn counts(&self) -> Counts {
        self.engine.counts
    }

    /// Sets the record split and the allocation trigger against a footprint of `pages` if it is
    /// larger than the one they were set against: the simulated machine's footprint is known at
    /// start, a live program's grows as it runs (at start it is the loader's few pages).
    fn footprint_grew_to(&mut self, pages: u64) {
        if pages <= self.footprint_pages {
            return;
        }
        self.footprint_pages = pages;
        let footprint = (pages * self.page_bytes) as f64;
        let share = |s: f64| ((s * footprint) as u64).max(self.page_bytes);
        // Where a move carries a whole huge page (a live host with transparent huge pages), a
        // record smaller than one, or straddling two, would move its neighbours with it: each
        // record is then a whole number of huge pages, from its object's start (the object
        // runtime starts objects of 2 MiB or more on a 2 MiB boundary, and keeps smaller ones
        // out of huge pages; docs/objects-runtime.md, "Huge pages"). The seed ran with
        // transparent huge pages off (object tiering §4.5), where this changes nothing.
        let split = share(self.split_share);
        self.engine.settings.split_bytes =
            if self.move_unit > self.page_bytes { split.next_multiple_of(self.move_unit) } else { split };
        if let Trigger::Allocation { .. } = self.engine.settings.trigger {
            self.engine.settings.trigger = Trigger::Allocation { bytes: share(self.alloc_share) };
        }
    }
}

impl Policy for ObjectTiering {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, _machine: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::object_events(), TrackerRequest::sampling(self.sample_period)],
            tick_ns: Some(self.interval_ns),
            page_size: PageSize::Base4K,
            max_tiers: Some(2),
            ..Requirements::default()
        }
    }

    fn start(&mut self, machine: &MachineInfo) {
        self.page_bytes = machine.page_size.bytes();
        self.move_unit = machine.move_unit();
        self.footprint_grew_to(machine.pages);
    }

    fn object_event(&mut self, e: &ObjectEvent) {
        match e.kind {
            // Where it lands is read from the placement when its interval ends.
            ObjectEventKind::Alloc => {
                self.engine.allocated(e.addr, e.bytes, e.site, e.program, TierId::UNPLACED, self.now_ns)
            }
            ObjectEventKind::Free => self.engine.freed(e.addr),
            // §5.5: an application sets its priority when it connects to the daemon.
            ObjectEventKind::ProgramStart { priority } if self.priorities => {
                self.engine.set_priority(e.program, priority)
            }
            ObjectEventKind::ProgramStart { .. } => {}
            ObjectEventKind::ProgramEnd => self.engine.program_ended(e.program),
        }
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        self.now_ns = obs.now_ns;
        self.footprint_grew_to(obs.placement.len() as u64);
        let page = self.page_bytes;
        for s in obs.samples {
            // A sample names its page: it counts for the record holding the page's first byte
            // (objects of a page or more start on a page of their own, §3.2).
            self.engine.sampled(u64::from(s.page) * page, 1, obs.now_ns);
        }
        self.engine.close_interval();
        // Each record is where most of its present pages are, and straddles the tiers when
        // some are in each.
        let placement = obs.placement;
        self.engine.observe_tiers(|start, bytes| {
            let (first, end) = (start / page, (start + bytes).div_ceil(page).min(placement.len() as u64));
            let fast = (first..end).filter(|&p| placement[p as usize] == TierId::FAST).count();
            let slow = (first..end).filter(|&p| placement[p as usize] == TierId::SLOW).count();
            match (fast, slow) {
                (0, 0) => None,
                (f, s) if f >= s => Some((TierId::FAST, s > 0)),
                (f, _) => Some((TierId::SLOW, f > 0)),
            }
        });
        let fast_bytes =
            obs.tiers.first().and_then(|t| t.capacity_pages).map_or(u64::MAX, |c| c.saturating_mul(page));
        // The miss rate stands in for misses per instruction: the machine reports no instruction
        // count, and at a steady instruction rate the two change alike.
        let rate = obs.samples.len() as f64 / obs.interval_ns().max(1) as f64;
        let Some(d) = self.engine.decide(fast_bytes, Some(rate)) else { return Plan::none() };
        let mut plan = Plan::none();
        plan.objects.extend(d.demote.iter().map(|&(addr, bytes)| ObjectMove {
            addr,
            bytes,
            to: TierId::SLOW,
        }));
        plan.objects.extend(d.promote.iter().map(|&(addr, bytes)| ObjectMove {
            addr,
            bytes,
            to: TierId::FAST,
        }));
        // §5.4.1: at each migration event a site whose live objects are all in the slow tier
        // sends its new objects there; every other site prefers fast memory again, a site with
        // no live record among them (its objects all freed, or ephemeral), so that advice
        // given once does not outlive what it was given for.
        if self.engine.settings.site_share.is_some() {
            let now: HashMap<u64, TierId> = d.advice.iter().copied().collect();
            let stale: Vec<u64> = self.advised.keys().filter(|s| !now.contains_key(s)).copied().collect();
            for site in stale {
                self.advised.remove(&site);
                plan.site_advice.push(SiteAdvice { site, tier: None });
            }
        }
        for (site, tier) in d.advice {
            if self.advised.insert(site, tier) != Some(tier) {
                plan.site_advice.push(SiteAdvice { site, tier: Some(tier) });
            }
        }
        plan.reason = format!(
            "objects: {} records demoted, {} promoted ({} trigger)",
            d.demote.len(),
            d.promote.len(),
            match self.engine.settings.trigger {
                Trigger::Time { .. } => "time",
                Trigger::MissesPerInstruction { .. } => "miss-rate",
                Trigger::Allocation { .. } => "allocation",
            }
        );
        plan
    }
}

/// Which records go first into the fast set (§3.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// First in, first out: the newest records first, the oldest demoted first.
    Fifo,
    /// Least recently used: the most recently sampled first (a never-sampled record counts from
    /// its creation).
    Lru,
    /// Accesses per byte: the highest weighted average per byte first.
    AccessesPerByte,
}

/// When the fast set is recomputed and enforced (§3.4.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trigger {
    /// Every `intervals` intervals.
    Time { intervals: u32 },
    /// When |MPI − mean of the last ten| / mean exceeds `threshold` (the seed's 2; it states no
    /// absolute value: a fall as well as a rise marks a new phase, so both count).
    MissesPerInstruction { threshold: f64 },
    /// When `bytes` have been allocated since the last enforcement (the seed's 1 GiB, scaled).
    Allocation { bytes: u64 },
}

/// The least allocation that has a site id (§3.5: a backtrace is taken for allocations over
/// 4 KB, the page size; the runtime's threshold for an object of its own, a page).
const SITE_MIN_BYTES: u64 = 4096;

/// Intervals of misses per instruction the MPI trigger compares against (§3.4.3: "the previous 10").
const MPI_HISTORY: usize = 10;

/// The engine's settings (the policy's parameters, docs/policies.md "objects", give the seed's).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub priority: Priority,
    pub trigger: Trigger,
    /// Eq. 1's α.
    pub alpha: f64,
    /// Records are at most this large (§3.2.2: 64 MiB, scaled).
    pub split_bytes: u64,
    /// Share of the fast tier the fast set may fill (§3.4.4: 90%).
    pub fast_fill: f64,
    /// Proactive placement: a site goes to the slow tier at allocation when at least this share
    /// of its live bytes is there (1.0: all of them, the seed's conservative scheme, §5.4.1).
    /// `None`: no proactive placement.
    pub site_share: Option<f64>,
}

/// One record: a whole object, or a part of at most `split_bytes` of one.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub start: u64,
    pub bytes: u64,
    /// The object's first byte (a split object's records share it).
    pub object: u64,
    pub site: u64,
    pub program: u32,
    pub created_ns: u64,
    /// When a sample last fell in it; its creation until one has (LRU counts a never-sampled
    /// record from its creation). Kept as a plain time, not an option, for the record's size.
    pub last_sampled_ns: u64,
    /// Eq. 1's τ.
    pub average: f64,
    /// Samples this interval (Eq. 1's t).
    hits: u32,
    /// Where most of its pages are.
    pub tier: TierId,
    /// Some of its pages are in the other tier (a first touch that found the fast tier full, or
    /// a move the machine could not finish). An enforcement that puts it in the fast set
    /// promotes what of it is slow (§3.4.4).
    pub straddles: bool,
}

/// An allocation not yet recorded: it becomes records at the end of its interval, unless freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    bytes: u64,
    site: u64,
    program: u32,
    at_ns: u64,
    tier: TierId,
}

/// What an enforcement decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Address ranges to the slow tier, then ranges to the fast tier (§3.4.4: demote first).
    pub demote: Vec<(u64, u64)>,
    pub promote: Vec<(u64, u64)>,
    /// Sites whose new objects go to a tier at allocation; a site not named has no advice.
    pub advice: Vec<(u64, TierId)>,
}

/// The engine's counts, for the run's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub allocations: u64,
    /// Freed within their interval: never recorded (§3.2.1).
    pub ephemeral: u64,
    pub records_peak: u64,
    pub samples_attributed: u64,
    pub samples_unattributed: u64,
    pub enforcements: u64,
}

/// The engine: records by start address, the interval's pending allocations, the trigger's
/// state and the programs' priorities.
#[derive(Clone, Debug)]
pub struct Engine {
    settings: Settings,
    records: BTreeMap<u64, Record>,
    pending: HashMap<u64, Pending>,
    since_enforce: u32,
    allocated_since: u64,
    mpi_history: Vec<f64>,
    priorities: HashMap<u32, i32>,
    /// The programs' priorities changed since the last enforcement: the next interval enforces
    /// whatever the trigger says (§5.5: the daemon "will begin migrating" the lower priority's
    /// data when a priority difference appears, and it returns when the difference goes).
    priorities_changed: bool,
    pub counts: Counts,
}

impl Engine {
    pub fn new(settings: Settings) -> Engine {
        Engine {
            settings,
            records: BTreeMap::new(),
            pending: HashMap::new(),
            since_enforce: 0,
            allocated_since: 0,
            mpi_history: Vec::new(),
            priorities: HashMap::new(),
            priorities_changed: false,
            counts: Counts::default(),
        }
    }

    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.records.values()
    }

    /// Sets a program's priority (higher runs first); a program never set has priority 0.
    pub fn set_priority(&mut self, program: u32, priority: i32) {
        self.priorities_changed |= self.priorities.insert(program, priority).unwrap_or(0) != priority;
    }

    /// A program has ended: its priority no longer holds the others back.
    pub fn program_ended(&mut self, program: u32) {
        self.priorities_changed |= self.priorities.remove(&program).is_some_and(|p| p != 0);
        self.records.retain(|_, r| r.program != program);
        self.pending.retain(|_, p| p.program != program);
    }

    /// An object of `bytes` at `addr`, from `site`, placed in `tier` at allocation.
    pub fn allocated(&mut self, addr: u64, bytes: u64, site: u64, program: u32, tier: TierId, now_ns: u64) {
        self.counts.allocations += 1;
        self.allocated_since += bytes;
        self.pending.insert(addr, Pending { bytes, site, program, at_ns: now_ns, tier });
    }

    /// The object at `addr` is freed: dropped from the buffer if it is still there (ephemeral),
    /// else its records.
    pub fn freed(&mut self, addr: u64) {
        if self.pending.remove(&addr).is_some() {
            self.counts.ephemeral += 1;
            return;
        }
        let Some(first) = self.records.get(&addr) else { return };
        let object = first.object;
        let keys: Vec<u64> =
            self.records.range(addr..).take_while(|(_, r)| r.object == object).map(|(&k, _)| k).collect();
        for k in keys {
            self.records.remove(&k);
        }
    }

    /// `n` sampled accesses at `addr` at time `now_ns`: counted for the record holding it.
    pub fn sampled(&mut self, addr: u64, n: u64, now_ns: u64) {
        match self.records.range_mut(..=addr).next_back() {
            Some((_, r)) if addr < r.start + r.bytes => {
                r.hits = r.hits.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
                r.last_sampled_ns = now_ns;
                self.counts.samples_attributed += n;
            }
            _ => self.counts.samples_unattributed += n,
        }
    }

    /// The end of an interval: [`Self::close_interval`], then [`Self::decide`].
    pub fn end_interval(&mut self, fast_bytes: u64, mpi: Option<f64>) -> Option<Decision> {
        self.close_interval();
        self.decide(fast_bytes, mpi)
    }

    /// Pending allocations become records (split), and each record's average takes its
    /// interval's samples (Eq. 1).
    pub fn close_interval(&mut self) {
        self.since_enforce += 1;
        self.record_pending();
        let alpha = self.settings.alpha;
        for r in self.records.values_mut() {
            r.average = alpha * r.hits as f64 + (1.0 - alpha) * r.average;
            r.hits = 0;
        }
        self.counts.records_peak = self.counts.records_peak.max(self.records.len() as u64);
    }

    /// Where each record is, as the machine says: `tier_of(start, bytes)` gives the tier of most
    /// of its pages and whether some are in the other, `None` to keep what the engine believes.
    pub fn observe_tiers(&mut self, tier_of: impl Fn(u64, u64) -> Option<(TierId, bool)>) {
        for r in self.records.values_mut() {
            if let Some((t, straddles)) = tier_of(r.start, r.bytes) {
                r.tier = t;
                r.straddles = straddles;
            }
        }
    }

    /// If the trigger fires, the fast set for a fast tier of `fast_bytes` and the moves and
    /// advice that make it so; `mpi` is the interval's misses per instruction, where known.
    pub fn decide(&mut self, fast_bytes: u64, mpi: Option<f64>) -> Option<Decision> {
        if !self.triggered(mpi) {
            return None;
        }
        self.since_enforce = 0;
        self.allocated_since = 0;
        self.counts.enforcements += 1;
        Some(self.enforce(fast_bytes))
    }

    /// The interval's allocations become records, added to the tree in one merge: a tree built
    /// from sorted records has full nodes, where inserting them one by one in address order
    /// leaves every node about half full (tests/object_record_memory.rs measures what a record
    /// takes).
    fn record_pending(&mut self) {
        let split = self.settings.split_bytes.max(4096);
        // Taken, not drained: the buffer holds one interval's allocations and need not keep the
        // largest interval's room for the rest of the run.
        let mut pending: Vec<(u64, Pending)> = std::mem::take(&mut self.pending).into_iter().collect();
        pending.sort_unstable_by_key(|(a, _)| *a);
        let mut new = Vec::with_capacity(pending.len());
        for (addr, p) in pending {
            let mut offset = 0;
            while offset < p.bytes {
                let bytes = split.min(p.bytes - offset);
                let start = addr + offset;
                new.push((
                    start,
                    Record {
                        start,
                        bytes,
                        object: addr,
                        site: p.site,
                        program: p.program,
                        created_ns: p.at_ns,
                        last_sampled_ns: p.at_ns,
                        average: 0.0,
                        hits: 0,
                        tier: p.tier,
                        straddles: false,
                    },
                ));
                offset += bytes;
            }
        }
        // Built from sorted pairs (a new key replaces an old one, as an insert would).
        let mut new: BTreeMap<u64, Record> = new.into_iter().collect();
        self.records.append(&mut new);
    }

    fn triggered(&mut self, mpi: Option<f64>) -> bool {
        if std::mem::take(&mut self.priorities_changed) {
            return true;
        }
        match self.settings.trigger {
            Trigger::Time { intervals } => self.since_enforce >= intervals.max(1),
            Trigger::Allocation { bytes } => self.allocated_since >= bytes,
            Trigger::MissesPerInstruction { threshold } => {
                let Some(now) = mpi else { return false };
                let fired = self.mpi_history.len() == MPI_HISTORY && {
                    let mean = self.mpi_history.iter().sum::<f64>() / MPI_HISTORY as f64;
                    mean > 0.0 && ((now - mean) / mean).abs() > threshold
                };
                if self.mpi_history.len() == MPI_HISTORY {
                    self.mpi_history.remove(0);
                }
                self.mpi_history.push(now);
                fired
            }
        }
    }

    /// The records in priority order, highest first (ties by address, so runs repeat).
    fn in_priority_order(&self) -> Vec<&Record> {
        let mut order: Vec<&Record> = self.records.values().collect();
        match self.settings.priority {
            Priority::Fifo => {
                order.sort_by(|a, b| b.created_ns.cmp(&a.created_ns).then(a.start.cmp(&b.start)))
            }
            Priority::Lru => order.sort_by(|a, b| {
                let last = |r: &Record| r.last_sampled_ns;
                last(b).cmp(&last(a)).then(a.start.cmp(&b.start))
            }),
            Priority::AccessesPerByte => order.sort_by(|a, b| {
                let apb = |r: &Record| r.average / r.bytes.max(1) as f64;
                apb(b).total_cmp(&apb(a)).then(a.start.cmp(&b.start))
            }),
        }
        order
    }

    /// §3.4.4 and §5.5: the fast set in priority order up to the fill limit, among the records
    /// of the highest-priority programs only; moves for records not where the set puts them;
    /// then §3.5's advice.
    fn enforce(&mut self, fast_bytes: u64) -> Decision {
        let limit = (self.settings.fast_fill * fast_bytes as f64) as u64;
        let top = self.records.values().map(|r| self.priority_of(r.program)).max().unwrap_or(0);
        let mut fast = std::collections::HashSet::new();
        let mut used = 0u64;
        for r in self.in_priority_order() {
            if self.priority_of(r.program) < top {
                continue;
            }
            if used + r.bytes > limit {
                // The seed walks until the total would pass the limit, and stops.
                break;
            }
            used += r.bytes;
            fast.insert(r.start);
        }
        let mut d = Decision::default();
        for r in self.records.values_mut() {
            let want = if fast.contains(&r.start) { TierId::FAST } else { TierId::SLOW };
            // §3.4.4: the daemon "invokes the move_pages system call to (1) demote objects that
            // are currently in the fast tier but belong in the slow memory set and then (2)
            // promote objects that are currently in the fast memory set". A demotion is of a
            // record taken to be fast; a promotion is of every record of the fast set, and
            // move_pages moves what of it is not there yet, so one with slow pages moves again.
            if want == r.tier && !(want == TierId::FAST && r.straddles) {
                continue;
            }
            match want {
                TierId::FAST => d.promote.push((r.start, r.bytes)),
                _ => d.demote.push((r.start, r.bytes)),
            }
            // Where the engine believes it is until the machine says otherwise
            // (`observe_tiers`, at the next tick: a move that did not happen is not pretended).
            r.tier = want;
            r.straddles = false;
        }
        d.advice = self.advice(top);
        d
    }

    fn priority_of(&self, program: u32) -> i32 {
        self.priorities.get(&program).copied().unwrap_or(0)
    }

    /// §3.5's conservative scheme: a site with at least `site_share` of its live bytes in the
    /// slow tier places its new objects there; every other site in the fast tier. A lower
    /// priority program's sites go to the slow tier while a higher one runs (§5.5).
    fn advice(&self, top: i32) -> Vec<(u64, TierId)> {
        let Some(share) = self.settings.site_share else { return Vec::new() };
        let mut by_site: BTreeMap<u64, (u64, u64, bool)> = BTreeMap::new();
        // §3.5: only an allocation of more than a page has a site (its backtrace is taken);
        // smaller ones are slot-allocated into shared blocks and placed with them.
        for r in self.records.values().filter(|r| r.object != r.start || r.bytes >= SITE_MIN_BYTES) {
            let e = by_site.entry(r.site).or_default();
            e.0 += r.bytes;
            if r.tier == TierId::SLOW {
                e.1 += r.bytes;
            }
            e.2 |= self.priority_of(r.program) < top;
        }
        by_site
            .into_iter()
            .map(|(site, (total, slow, low))| {
                let tier =
                    if low || slow as f64 >= share * total as f64 { TierId::SLOW } else { TierId::FAST };
                (site, tier)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;
    const MIB: u64 = 1 << 20;

    fn settings(priority: Priority, trigger: Trigger) -> Settings {
        Settings {
            priority,
            trigger,
            alpha: 0.1,
            split_bytes: 64 * MIB,
            fast_fill: 0.9,
            site_share: Some(1.0),
        }
    }

    fn every_interval(priority: Priority) -> Engine {
        Engine::new(settings(priority, Trigger::Time { intervals: 1 }))
    }

    /// An engine that records in the first interval and enforces at the end of the second.
    fn second_interval(priority: Priority) -> Engine {
        Engine::new(settings(priority, Trigger::Time { intervals: 2 }))
    }

    #[test]
    fn the_weighted_average_follows_equation_1() {
        let mut e = every_interval(Priority::AccessesPerByte);
        e.allocated(0x1000_0000, MIB, 1, 0, S, 0);
        e.end_interval(0, None);
        e.sampled(0x1000_0000 + 5, 10, 1);
        e.end_interval(0, None);
        let r = e.records().next().unwrap();
        // τ1 = 0.1 × 10 + 0.9 × 0 = 1.
        assert!((r.average - 1.0).abs() < 1e-12);
        e.sampled(0x1000_0000, 20, 2);
        e.end_interval(0, None);
        // τ2 = 0.1 × 20 + 0.9 × 1 = 2.9.
        assert!((e.records().next().unwrap().average - 2.9).abs() < 1e-12);
        e.end_interval(0, None);
        assert!((e.records().next().unwrap().average - 2.61).abs() < 1e-12);
    }

    #[test]
    fn an_object_freed_within_its_interval_is_never_recorded() {
        let mut e = every_interval(Priority::Fifo);
        e.allocated(0x1000, 8192, 1, 0, F, 0);
        e.allocated(0x9000, 8192, 1, 0, F, 0);
        e.freed(0x1000);
        e.end_interval(MIB, None);
        assert_eq!(e.records().map(|r| r.start).collect::<Vec<_>>(), vec![0x9000]);
        assert_eq!(e.counts.ephemeral, 1);
        // Freed after its interval: its records go.
        e.freed(0x9000);
        assert_eq!(e.records().count(), 0);
        assert_eq!(e.counts.ephemeral, 1);
    }

    #[test]
    fn a_large_object_is_split_and_freed_whole() {
        let mut e = every_interval(Priority::Fifo);
        e.allocated(0x4000_0000, 150 * MIB, 7, 0, S, 0);
        e.allocated(0x4000_0000 + 150 * MIB, 4096, 8, 0, S, 0);
        e.end_interval(0, None);
        let sizes: Vec<u64> = e.records().map(|r| r.bytes).collect();
        assert_eq!(sizes, vec![64 * MIB, 64 * MIB, 22 * MIB, 4096]);
        // A sample counts for the part that holds it.
        e.sampled(0x4000_0000 + 100 * MIB, 3, 1);
        e.end_interval(0, None);
        let avg: Vec<f64> = e.records().map(|r| r.average).collect();
        assert!(avg[0] == 0.0 && avg[1] > 0.0 && avg[2] == 0.0);
        e.freed(0x4000_0000);
        assert_eq!(e.records().map(|r| r.site).collect::<Vec<_>>(), vec![8]);
    }

    /// Where a move carries a whole huge page, records are whole huge pages from their object's
    /// start; where pages move alone, the split is the footprint's share, as the seed's.
    #[test]
    fn records_are_whole_move_units_where_a_move_carries_a_huge_page() {
        let split_of = |move_unit_bytes: u64| {
            let mut p = ObjectTiering::default();
            // 1 GiB of footprint: the default 0.21% is 2,254,857 bytes.
            let m = MachineInfo { pages: (1 << 30) / 4096, move_unit_bytes, ..MachineInfo::placeholder(2) };
            p.start(&m);
            p.engine.settings.split_bytes
        };
        assert_eq!(split_of(0), 2_254_857);
        assert_eq!(split_of(4096), 2_254_857, "a move unit of a page changes nothing");
        assert_eq!(split_of(2 * MIB), 4 * MIB);
        let mut p = ObjectTiering::default();
        p.start(&MachineInfo { pages: 10_000, move_unit_bytes: 2 * MIB, ..MachineInfo::placeholder(2) });
        assert_eq!(p.engine.settings.split_bytes, 2 * MIB, "a small footprint's records are one huge page");
        p.engine.allocated(0x4000_0000, 5 * MIB, 1, 0, S, 0);
        p.engine.close_interval();
        let records: Vec<(u64, u64)> = p.engine.records().map(|r| (r.start, r.bytes)).collect();
        assert_eq!(records, [(0x4000_0000, 2 * MIB), (0x4020_0000, 2 * MIB), (0x4040_0000, MIB)]);
    }

    #[test]
    fn samples_outside_every_record_are_counted_apart() {
        let mut e = every_interval(Priority::Fifo);
        e.allocated(0x10000, 4096, 1, 0, S, 0);
        e.end_interval(0, None);
        e.sampled(0x10000 + 4096, 1, 0);
        e.sampled(0x0fff, 1, 0);
        e.sampled(0x10fff, 1, 0);
        assert_eq!((e.counts.samples_attributed, e.counts.samples_unattributed), (1, 2));
    }

    /// Three 1 MiB objects, a fast tier that holds two at 90%: which two, by each priority.
    fn fast_set(priority: Priority) -> Vec<u64> {
        let mut e = every_interval(priority);
        // a: oldest, hottest; b: warm, sampled before a; c: newest, barely sampled, sampled last.
        e.allocated(0xa00000, MIB, 1, 0, S, 0);
        e.allocated(0xb00000, MIB, 2, 0, S, 10);
        e.allocated(0xc00000, MIB, 3, 0, S, 20);
        e.end_interval(0, None);
        e.sampled(0xb00000, 5, 25);
        e.sampled(0xa00000, 50, 30);
        e.sampled(0xc00000, 1, 40);
        let d = e.end_interval(3 * MIB * 10 / 12, None).expect("the time trigger fires every interval");
        let mut fast: Vec<u64> = d.promote.iter().map(|&(s, _)| s).collect();
        fast.sort();
        fast
    }

    #[test]
    fn each_priority_order_picks_its_own_fast_set() {
        // 2.5 MiB x 0.9 = 2.25 MiB: two objects fit. FIFO keeps the newest two, LRU the two
        // sampled last, accesses per byte the two hottest.
        assert_eq!(fast_set(Priority::Fifo), vec![0xb00000, 0xc00000]);
        assert_eq!(fast_set(Priority::Lru), vec![0xa00000, 0xc00000]);
        assert_eq!(fast_set(Priority::AccessesPerByte), vec![0xa00000, 0xb00000]);
    }

    #[test]
    fn enforcement_demotes_before_it_promotes_and_never_passes_the_fill() {
        let mut e = second_interval(Priority::AccessesPerByte);
        for i in 0..10u64 {
            e.allocated(i * MIB, MIB, i, 0, if i < 4 { F } else { S }, 0);
        }
        e.end_interval(0, None);
        for i in 6..10u64 {
            e.sampled(i * MIB, 100, 1);
        }
        // A fast tier of 5 MiB: 4.5 MiB at 90%, so four objects.
        let d = e.end_interval(5 * MIB, None).unwrap();
        let starts = |v: &[(u64, u64)]| v.iter().map(|&(s, _)| s / MIB).collect::<Vec<_>>();
        assert_eq!(starts(&d.demote), vec![0, 1, 2, 3]);
        assert_eq!(starts(&d.promote), vec![6, 7, 8, 9]);
        let fast: u64 = e.records().filter(|r| r.tier == F).map(|r| r.bytes).sum();
        assert!(fast <= 5 * MIB * 9 / 10);
    }

    #[test]
    fn a_fast_set_record_with_slow_pages_is_promoted_again_and_a_slow_one_is_not_demoted() {
        // Two hot records taken to be fast, two cold ones taken to be slow; one of each has pages
        // in the other tier. A fast tier of 2.5 MiB: 2.25 MiB at 90%, the two hot records.
        let mut e = second_interval(Priority::AccessesPerByte);
        for i in 0..4u64 {
            e.allocated(i * MIB, MIB, i, 0, if i < 2 { F } else { S }, 0);
        }
        e.end_interval(0, None);
        e.sampled(0, 100, 1);
        e.sampled(MIB, 100, 1);
        e.close_interval();
        e.observe_tiers(|start, _| {
            Some(if start < 2 * MIB { (F, start == MIB) } else { (S, start == 3 * MIB) })
        });
        let d = e.decide(5 * MIB / 2, None).expect("the time trigger fires at the second interval");
        // §3.4.4 promotes every record of the fast set: the one with slow pages moves again.
        assert_eq!(d.promote, vec![(MIB, MIB)]);
        // It demotes the records taken to be fast: a slow record's stray fast pages stay.
        assert!(d.demote.is_empty(), "{:?}", d.demote);
        assert!(e.records().filter(|r| r.start == MIB).all(|r| r.tier == F && !r.straddles));
    }

    #[test]
    fn each_trigger_fires_when_its_rule_says() {
        let mut time = Engine::new(settings(Priority::Fifo, Trigger::Time { intervals: 3 }));
        let fired: Vec<bool> = (0..6).map(|_| time.end_interval(MIB, None).is_some()).collect();
        assert_eq!(fired, vec![false, false, true, false, false, true]);

        let mut alloc = Engine::new(settings(Priority::Fifo, Trigger::Allocation { bytes: 3 * MIB }));
        alloc.allocated(0, 2 * MIB, 1, 0, S, 0);
        assert!(alloc.end_interval(MIB, None).is_none());
        alloc.allocated(4 * MIB, MIB, 1, 0, S, 0);
        assert!(alloc.end_interval(MIB, None).is_some());
        // Counting starts again after an enforcement.
        alloc.allocated(8 * MIB, 2 * MIB, 1, 0, S, 0);
        assert!(alloc.end_interval(MIB, None).is_none());

        let mut mpi = Engine::new(settings(Priority::Fifo, Trigger::MissesPerInstruction { threshold: 2.0 }));
        // Ten intervals at 0.01 fill the history; 0.025 is +150% (no); the mean is then 0.0115,
        // and 0.045 is +291% (yes).
        for _ in 0..10 {
            assert!(mpi.end_interval(MIB, Some(0.01)).is_none());
        }
        assert!(mpi.end_interval(MIB, Some(0.025)).is_none());
        let mut mpi2 = mpi.clone();
        assert!(mpi.end_interval(MIB, Some(0.045)).is_some());
        // Without a measure of MPI it never fires.
        assert!(mpi2.end_interval(MIB, None).is_none());
    }

    #[test]
    fn a_site_whose_objects_all_sit_slow_is_advised_slow() {
        let mut e = every_interval(Priority::AccessesPerByte);
        // Site 1: hot objects; site 2: cold ones; site 3: one hot, one cold.
        e.allocated(0, MIB, 1, 0, S, 0);
        e.allocated(MIB, MIB, 2, 0, S, 0);
        e.allocated(2 * MIB, MIB, 2, 0, S, 0);
        e.allocated(3 * MIB, MIB, 3, 0, S, 0);
        e.allocated(4 * MIB, MIB, 3, 0, S, 0);
        e.end_interval(0, None);
        e.sampled(0, 100, 1);
        e.sampled(3 * MIB, 50, 1);
        let d = e.end_interval(3 * MIB, None).unwrap();
        assert_eq!(d.advice, vec![(1, F), (2, S), (3, F)]);
        // A share of one half: site 3 (half its bytes slow) goes slow too.
        let mut half = e.clone();
        half.settings.site_share = Some(0.5);
        half.sampled(0, 100, 2);
        half.sampled(3 * MIB, 50, 2);
        assert_eq!(half.end_interval(3 * MIB, None).unwrap().advice, vec![(1, F), (2, S), (3, S)]);
    }

    /// §3.5: an allocation of less than a page has no site id (no backtrace is taken), so its
    /// records say nothing of its site; a split object's smaller last part still belongs to a
    /// site.
    #[test]
    fn objects_smaller_than_a_page_carry_no_site_advice() {
        let mut e = every_interval(Priority::AccessesPerByte);
        e.settings.split_bytes = 8192;
        e.allocated(0, 64, 7, 0, S, 0);
        e.allocated(4096, 4096, 8, 0, S, 0);
        // 8 KiB and 100 B.
        e.allocated(16384, 8292, 9, 0, S, 0);
        e.end_interval(0, None);
        let d = e.end_interval(0, None).unwrap();
        assert_eq!(d.advice, vec![(8, S), (9, S)]);
    }

    /// §5.5: the daemon starts moving the lower priority's data as soon as a priority
    /// difference appears, and gives it the fast tier back when the difference goes, whatever
    /// its trigger says.
    #[test]
    fn a_change_of_priorities_enforces_at_the_next_interval() {
        let mut e = Engine::new(settings(Priority::AccessesPerByte, Trigger::Allocation { bytes: u64::MAX }));
        e.allocated(0, MIB, 100, 0, F, 0);
        assert!(e.end_interval(10 * MIB, None).is_none());
        e.set_priority(1, 10);
        assert!(e.end_interval(10 * MIB, None).is_some());
        assert!(e.end_interval(10 * MIB, None).is_none());
        // The same priority again changes nothing; a program of priority 0 ending neither.
        e.set_priority(1, 10);
        e.program_ended(7);
        assert!(e.end_interval(10 * MIB, None).is_none());
        e.program_ended(1);
        assert!(e.end_interval(10 * MIB, None).is_some());
    }

    #[test]
    fn a_higher_priority_program_holds_the_fast_tier_until_it_ends() {
        let mut e = second_interval(Priority::AccessesPerByte);
        e.allocated(0, MIB, 100, 0, F, 0);
        e.allocated(MIB, MIB, 200, 1, S, 0);
        assert!(e.end_interval(0, None).is_none());
        e.set_priority(1, 10);
        // The low-priority object is the hotter one, and still goes slow.
        e.sampled(0, 1000, 1);
        e.sampled(MIB, 1, 1);
        let d = e.end_interval(10 * MIB, None).unwrap();
        assert_eq!((d.demote, d.promote), (vec![(0, MIB)], vec![(MIB, MIB)]));
        assert_eq!(d.advice, vec![(100, S), (200, F)]);
        // The high-priority program ends: the other competes again, at the next interval.
        e.program_ended(1);
        let d = e.end_interval(10 * MIB, None).unwrap();
        assert_eq!(d.promote, vec![(0, MIB)]);
        assert_eq!(d.advice, vec![(100, F)]);
    }
}
