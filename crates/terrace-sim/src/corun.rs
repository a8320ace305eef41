//! Several programs on one simulated machine (object tiering §5.5; docs/model.md §13): each
//! program has its own clock and its own threads, and the machine's time is the clock of the
//! program furthest behind, so that a policy's ticks, the movers and the copies see one time.
//!
//! A slice of accesses is one program's (its stream hands out turns of one program,
//! `terrace_workloads::corun`), and takes the time §3 gives it at that program's thread count,
//! with the other running programs' traffic at that time as background load on each tier (it
//! takes bandwidth and raises loaded latency as a copy's traffic does): the rate of the other
//! program's slice that covered the slice's start, where that program's clock has passed it, and
//! otherwise its last slice's. A move's stall (its
//! TLB shootdowns, a faulting thread's copy) is owed by the programs whose pages the plan moves,
//! in proportion to them (a shootdown interrupts the threads of the process whose mapping
//! changed); any other stall (a tracker's scan and flush, its share of a core, a write waiting
//! for a copy) by every running program. Each program pays what it owes with its next slice.

use crate::profile::{Profile, MAX_TIERS};
use crate::timing::{TierLoad, Timing};
use std::collections::VecDeque;
use terrace_model::ProgramInfo;

/// One program's traffic per tier over one of its slices: (read, write) bytes per ns.
type Rates = [(f64, f64); MAX_TIERS];

/// One program's part of a co-run, as the report gives it: when it ran, and where its time went
/// (its run time is its slices' time plus the stalls it paid, docs/model.md §13).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProgramRun {
    pub name: String,
    pub priority: i32,
    /// Machine time at its start and its end, ns.
    pub start_ns: f64,
    pub end_ns: f64,
    /// Its accesses, and how many of its reads and writes the fast tier served.
    #[serde(default)]
    pub reads: u64,
    #[serde(default)]
    pub fast_reads: u64,
    #[serde(default)]
    pub writes: u64,
    #[serde(default)]
    pub fast_writes: u64,
    /// Stalls it paid, ns: its share of the moves of its pages, and every shootdown and scan
    /// while it ran (the rest of its run time is its slices').
    #[serde(default)]
    pub stall_ns: f64,
    /// Its pages whose move to a faster, or a slower, tier completed while it ran.
    #[serde(default)]
    pub pages_promoted: u64,
    #[serde(default)]
    pub pages_demoted: u64,
    /// Time its slices lost to the tiers' load from the movers' copies, and then from the other
    /// programs' traffic, ns (each slice's time less its time without that load; part of its
    /// run time, beside the stalls).
    #[serde(default)]
    pub copy_load_ns: f64,
    #[serde(default)]
    pub others_load_ns: f64,
}

impl ProgramRun {
    /// How long it ran, ns.
    pub fn runtime_ns(&self) -> f64 {
        self.end_ns - self.start_ns
    }
    /// Share of its reads the fast tier served (1 with none).
    pub fn fast_read_hit_rate(&self) -> f64 {
        crate::report::fast_share(self.fast_reads, self.reads)
    }
    /// Share of its writes the fast tier served (1 with none).
    pub fn fast_write_hit_rate(&self) -> f64 {
        crate::report::fast_share(self.fast_writes, self.writes)
    }
}

/// The clocks and what they need; the programs themselves are the machine's
/// (`MachineInfo::programs`).
pub(crate) struct CoRun {
    timings: Vec<Timing>,
    /// Each program's clock, ns, and the accesses it has made.
    pub(crate) clocks: Vec<f64>,
    pub(crate) made: Vec<u64>,
    running: Vec<bool>,
    start_ns: Vec<Option<f64>>,
    end_ns: Vec<Option<f64>>,
    thread_program: [u8; 256],
    /// Each program's traffic in its last slice.
    rates: Vec<Rates>,
    /// Each program's slices not yet behind the machine's time: (its clock at the slice's end,
    /// its traffic over the slice), oldest first. A program whose clock runs ahead of another's
    /// (a machine that reads turns ahead hands them out by estimated clocks,
    /// `terrace_workloads::corun`) has run that time already, so the other's slices there take
    /// its traffic of that time rather than of its last slice: a burst that ends a program's
    /// run-ahead would otherwise load every slice of the other's catch-up.
    history: Vec<VecDeque<(f64, Rates)>>,
    /// Stall each program owes, ns, paid by its next slice.
    owed: Vec<f64>,
    /// What the report gives of each program beyond its start and end (`ProgramRun`).
    tallies: Vec<ProgramRun>,
}

impl CoRun {
    pub(crate) fn new(profile: &Profile, programs: &[ProgramInfo]) -> Self {
        let mut thread_program = [0u8; 256];
        let mut first = 0usize;
        for (p, prog) in programs.iter().enumerate() {
            let end = (first + prog.threads as usize).min(256);
            thread_program[first.min(256)..end].fill(p as u8);
            first += prog.threads as usize;
        }
        let n = programs.len();
        CoRun {
            timings: programs.iter().map(|p| Timing::new(profile, p.threads)).collect(),
            clocks: vec![0.0; n],
            made: vec![0; n],
            running: vec![false; n],
            start_ns: vec![None; n],
            end_ns: vec![None; n],
            thread_program,
            rates: vec![[(0.0, 0.0); MAX_TIERS]; n],
            history: vec![VecDeque::new(); n],
            owed: vec![0.0; n],
            tallies: vec![ProgramRun::default(); n],
        }
    }

    /// Every running program owes `ns` (a stall that halts them all).
    pub(crate) fn stall_running(&mut self, ns: f64) {
        for (o, _) in self.owed.iter_mut().zip(&self.running).filter(|(_, &r)| r) {
            *o += ns;
        }
    }

    /// `ns` of stall owed by the programs in proportion to `weights` (the pages of a plan each
    /// one owns); nothing if no program has weight.
    pub(crate) fn stall_shared(&mut self, ns: f64, weights: &[f64]) {
        let all: f64 = weights.iter().sum();
        if all > 0.0 {
            for (o, w) in self.owed.iter_mut().zip(weights) {
                *o += ns * w / all;
            }
        }
    }

    /// The program whose thread made an access.
    pub(crate) fn program_of(&self, thread: u8) -> usize {
        self.thread_program[thread as usize] as usize
    }

    /// Program `p` starts at machine time `now_ns`.
    pub(crate) fn start(&mut self, p: usize, now_ns: f64) {
        if let Some(slot) = self.start_ns.get_mut(p).filter(|s| s.is_none()) {
            *slot = Some(now_ns);
            self.clocks[p] = now_ns;
            self.running[p] = true;
        }
    }

    /// Program `p` has ended: what it still owes (the shootdowns of a move of its pages started
    /// in its last slice, a scan) held it up, so it ends that much later, as a single program's
    /// run does (`Machine::pay_owed_at_end`); then its clock stops, and its traffic no longer
    /// loads the others.
    pub(crate) fn end(&mut self, p: usize) {
        if self.running.get(p).copied().unwrap_or(false) {
            self.running[p] = false;
            let owed = std::mem::take(&mut self.owed[p]);
            self.tallies[p].stall_ns += owed;
            self.clocks[p] += owed;
            self.end_ns[p] = Some(self.clocks[p]);
            self.rates[p] = [(0.0, 0.0); MAX_TIERS];
            self.history[p].clear();
        }
    }

    /// The timing of program `p`'s slices (its thread count).
    pub(crate) fn timing(&self, p: usize) -> &Timing {
        &self.timings[p]
    }

    /// Adds the other running programs' traffic to the slice's load of each tier; returns whether
    /// there was any.
    pub(crate) fn add_background(&self, p: usize, loads: &mut [TierLoad]) -> bool {
        let mut any = false;
        let at = self.clocks[p];
        for (q, last) in self.rates.iter().enumerate() {
            if q == p || !self.running[q] {
                continue;
            }
            // Its slice that was under way at `at`, if its clock has passed `at`.
            let h = &self.history[q];
            let rates = h.get(h.partition_point(|&(end, _)| end <= at)).map_or(last, |(_, r)| r);
            for (l, &(r, w)) in loads.iter_mut().zip(rates) {
                l.copy_read_bytes_per_ns += r;
                l.copy_write_bytes_per_ns += w;
                any |= r + w > 0.0;
            }
        }
        any
    }

    /// Program `p`'s slice of `accesses` took `dt` ns and moved these bytes: its clock advances
    /// by that and by the stall it owes; returns the machine's time, the least clock of the
    /// programs still running (or the latest end once none runs).
    pub(crate) fn advance(&mut self, p: usize, accesses: u64, dt: f64, loads: &[TierLoad]) -> f64 {
        self.made[p] += accesses;
        let owed = std::mem::take(&mut self.owed[p]);
        let t = &mut self.tallies[p];
        t.stall_ns += owed;
        for (i, l) in loads.iter().enumerate() {
            let (reads, writes) = (l.random_reads + l.sequential_reads, l.writes);
            t.reads += reads;
            t.writes += writes;
            if i == 0 {
                t.fast_reads += reads;
                t.fast_writes += writes;
            }
        }
        let dt = dt + owed;
        self.clocks[p] += dt;
        if dt > 0.0 {
            for (r, l) in self.rates[p].iter_mut().zip(loads) {
                *r = (l.read_bytes as f64 / dt, l.write_bytes as f64 / dt);
            }
            self.history[p].push_back((self.clocks[p], self.rates[p]));
        }
        let now = self.now();
        // No slice starts before the machine's time: what ended before it is never looked up.
        for h in &mut self.history {
            while h.front().is_some_and(|&(end, _)| end <= now) {
                h.pop_front();
            }
        }
        now
    }

    /// Program `p`'s slice was slowed `copies` ns by the movers' traffic and `others` ns by the
    /// other programs'.
    pub(crate) fn slowed(&mut self, p: usize, copies: f64, others: f64) {
        self.tallies[p].copy_load_ns += copies;
        self.tallies[p].others_load_ns += others;
    }

    /// Program `p`'s page has moved from tier `from` to tier `to` (lower is faster).
    pub(crate) fn moved(&mut self, p: usize, from: usize, to: usize) {
        if let Some(t) = self.tallies.get_mut(p) {
            match to.cmp(&from) {
                std::cmp::Ordering::Less => t.pages_promoted += 1,
                std::cmp::Ordering::Greater => t.pages_demoted += 1,
                std::cmp::Ordering::Equal => {}
            }
        }
    }

    /// The least clock of the running programs; once none runs, the latest clock.
    pub(crate) fn now(&self) -> f64 {
        let running = self.clocks.iter().zip(&self.running).filter(|(_, &r)| r).map(|(&c, _)| c);
        running.reduce(f64::min).unwrap_or_else(|| self.clocks.iter().copied().fold(0.0, f64::max))
    }

    /// Each of `programs`' start and end (a program still running ends at its clock).
    pub(crate) fn runs(&self, programs: &[ProgramInfo]) -> Vec<ProgramRun> {
        programs
            .iter()
            .enumerate()
            .map(|(p, prog)| ProgramRun {
                name: prog.name.clone(),
                priority: prog.priority,
                start_ns: self.start_ns[p].unwrap_or(0.0),
                end_ns: self.end_ns[p].unwrap_or(self.clocks[p]),
                ..self.tallies[p].clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(profile: &Profile) -> CoRun {
        CoRun::new(profile, &programs())
    }

    fn programs() -> Vec<ProgramInfo> {
        let prog = |name: &str, threads| ProgramInfo {
            name: name.into(),
            priority: 0,
            first_byte: 0,
            bytes: 4096,
            threads,
        };
        vec![prog("a", 2), prog("b", 3)]
    }

    #[test]
    fn threads_map_to_their_programs_and_time_is_the_laggards_clock() {
        let profile = Profile::load("optane-2019").unwrap();
        let mut c = two(&profile);
        assert_eq!((c.program_of(0), c.program_of(1), c.program_of(2), c.program_of(4)), (0, 0, 1, 1));
        assert_eq!(c.timing(1).threads, 3.0);
        c.start(0, 0.0);
        let none = vec![TierLoad::default(); 2];
        assert_eq!(c.advance(0, 1, 100.0, &none), 100.0);
        // b starts at 100 ns; a runs on to 250, b to 130: the machine is at b's 130.
        c.start(1, 100.0);
        assert_eq!(c.advance(0, 1, 150.0, &none), 100.0);
        assert_eq!(c.advance(1, 1, 30.0, &none), 130.0);
        // a ends at 250: the machine's time is b's alone.
        c.end(0);
        assert_eq!(c.now(), 130.0);
        assert_eq!(c.advance(1, 1, 200.0, &none), 330.0);
        c.end(1);
        assert_eq!(c.now(), 330.0);
        let runs = c.runs(&programs());
        assert_eq!((runs[0].runtime_ns(), runs[1].runtime_ns()), (250.0, 230.0));
    }

    #[test]
    fn a_stall_is_paid_by_whom_it_halts_with_their_next_slice() {
        let profile = Profile::load("optane-2019").unwrap();
        let mut c = two(&profile);
        c.start(0, 0.0);
        c.start(1, 0.0);
        let none = vec![TierLoad::default(); 2];
        // A plan moving 3 pages of a's and 1 of b's stalls them 30 and 10 ns; a scan 5 each.
        c.stall_shared(40.0, &[3.0, 1.0]);
        c.stall_running(5.0);
        assert_eq!(c.advance(0, 1, 100.0, &none), 0.0);
        assert_eq!(c.clocks, [135.0, 0.0]);
        assert_eq!(c.advance(1, 1, 100.0, &none), 115.0);
        assert_eq!(c.clocks, [135.0, 115.0]);
        // Paid once.
        assert_eq!(c.advance(1, 1, 10.0, &none), 125.0);
        // An ended program owes nothing more, and a scan no longer stalls it.
        c.end(0);
        c.stall_running(7.0);
        assert_eq!(c.owed, [0.0, 7.0]);
    }

    #[test]
    fn a_stall_owed_at_a_programs_end_lengthens_its_run() {
        let profile = Profile::load("optane-2019").unwrap();
        let mut c = two(&profile);
        c.start(0, 0.0);
        c.start(1, 0.0);
        let none = vec![TierLoad::default(); 2];
        c.advance(0, 1, 100.0, &none);
        c.advance(1, 1, 100.0, &none);
        // A move of a's pages in its last slice: its shootdowns halt a before it can end.
        c.stall_shared(40.0, &[1.0, 0.0]);
        c.end(0);
        let runs = c.runs(&programs());
        assert_eq!(runs[0].runtime_ns(), 140.0);
        assert_eq!(runs[0].stall_ns, 40.0);
        assert_eq!(c.owed, [0.0, 0.0]);
        // The machine's time is b's, still running; once b ends, a's end is the latest clock.
        assert_eq!(c.now(), 100.0);
        c.end(1);
        assert_eq!(c.now(), 140.0);
    }

    #[test]
    fn a_running_programs_traffic_loads_the_others_slices() {
        let profile = Profile::load("optane-2019").unwrap();
        let mut c = two(&profile);
        c.start(0, 0.0);
        c.start(1, 0.0);
        let mut loads = vec![TierLoad::default(); 2];
        loads[1].read_bytes = 6400;
        loads[1].write_bytes = 1600;
        c.advance(0, 1, 100.0, &loads);
        let mut seen = vec![TierLoad::default(); 2];
        assert!(c.add_background(1, &mut seen));
        assert_eq!((seen[1].copy_read_bytes_per_ns, seen[1].copy_write_bytes_per_ns), (64.0, 16.0));
        // Not its own traffic, nor an ended program's.
        let mut own = vec![TierLoad::default(); 2];
        assert!(!c.add_background(0, &mut own), "b has made no traffic");
        assert_eq!(own[1].copy_read_bytes_per_ns, 0.0);
        c.end(0);
        let mut after = vec![TierLoad::default(); 2];
        assert!(!c.add_background(1, &mut after));
        assert_eq!(after[1].copy_read_bytes_per_ns, 0.0);
    }

    #[test]
    fn a_slice_takes_the_others_traffic_of_its_own_time() {
        let profile = Profile::load("optane-2019").unwrap();
        let mut c = two(&profile);
        c.start(0, 0.0);
        c.start(1, 0.0);
        let slow_reads = |bytes| {
            let mut l = vec![TierLoad::default(); 2];
            l[1].read_bytes = bytes;
            l
        };
        // a runs ahead: 64 B/ns over [0, 100), then 16 B/ns over [100, 200).
        c.advance(0, 1, 100.0, &slow_reads(6400));
        c.advance(0, 1, 100.0, &slow_reads(1600));
        let seen = |c: &CoRun| {
            let mut l = vec![TierLoad::default(); 2];
            c.add_background(1, &mut l);
            l[1].copy_read_bytes_per_ns
        };
        // b, at 0, takes a's traffic of then, not of a's last slice.
        assert_eq!(seen(&c), 64.0);
        assert_eq!(c.advance(1, 1, 150.0, &slow_reads(0)), 150.0);
        assert_eq!(seen(&c), 16.0);
        // Past a's clock, a's last slice is all there is to go by.
        c.advance(1, 1, 100.0, &slow_reads(0));
        assert_eq!(seen(&c), 16.0);
        assert!(c.history[0].is_empty(), "slices behind the machine's time are dropped");
    }
}
