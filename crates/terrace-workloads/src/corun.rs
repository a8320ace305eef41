//! Several programs sharing one machine (object tiering §5.5, Fig. 8): each member's stream in
//! its own range of the address space and its own threads, handed out in turns of
//! [`TURN_ACCESSES`], each turn to the member whose clock is least (the machine reports the
//! clocks, [`AccessSource::set_program_clocks`]), so that each program runs at its own speed.
//! A machine that reads ahead of what it has run (the oracle's look-ahead) reads each member's
//! accesses into a queue of its own ([`AccessSource::read_ahead`]), how many of each by clocks
//! estimated from each member's time per access so far, and the turns are still handed out by
//! the clocks the machine has run: an estimate that proves wrong changes what the look-ahead
//! counts, never the order the programs run in. A caller that reads ahead with `fill` instead
//! gets its turns by the estimated clocks.
//! A member starts when another has made a given number of accesses (the seed starts its
//! high-priority program once the low-priority one has initialised, §5.5), and the stream tells
//! the machine and the policy of each start, with the program's priority, and of each end, as
//! object events (`ObjectEventKind::ProgramStart`, `ProgramEnd`).

use crate::{AccessSource, ObjectEventAt, WorkloadInfo};
use std::collections::VecDeque;
use terrace_model::{Access, ObjectEvent, ProgramInfo};

/// Accesses a member makes in one turn: short against a policy's interval at every size the
/// simulator runs (a few microseconds of simulated time), long against the slice of the replay.
pub const TURN_ACCESSES: usize = 4096;

/// Members' address ranges start on 2 MiB boundaries, so that no huge page holds two programs.
const ALIGN: u64 = 2 << 20;

/// One program of a co-run.
pub struct Member {
    pub source: Box<dyn AccessSource>,
    /// Higher runs first (object tiering §5.5).
    pub priority: i32,
    /// `Some((m, n))`: it starts once member `m` has made `n` accesses (or has ended); `None`: at
    /// the start.
    pub start_after: Option<(usize, u64)>,
}

/// A member as the stream runs it; its program (name, range, threads) is `CoRun::programs[i]`.
struct State {
    source: Box<dyn AccessSource>,
    start_after: Option<(usize, u64)>,
    started: bool,
    done: bool,
    /// Accesses it has handed out.
    made: u64,
    /// Its events not yet placed in the shared stream (by its own access count).
    pending: VecDeque<ObjectEventAt>,
    /// Its accesses read ahead and not handed out yet (addresses and threads already the
    /// co-run's), and whether its source has ended.
    queue: VecDeque<Access>,
    exhausted: bool,
    /// Read ahead before it started: its estimated clock at its start.
    ahead_start: Option<f64>,
}

impl State {
    /// Accesses it has made, handed out or queued.
    fn generated(&self) -> u64 {
        self.made + self.queue.len() as u64
    }
}

/// Several programs as one stream: program `p`'s addresses are offset by its range's start, its
/// threads by the threads of the programs before it, its allocation sites by `p << 48` (sites of
/// two programs are never one).
pub struct CoRun {
    info: WorkloadInfo,
    members: Vec<State>,
    programs: Vec<ProgramInfo>,
    /// Each member's clock as the machine last reported it, at `consumed` of its accesses.
    clocks: Vec<f64>,
    consumed: Vec<u64>,
    /// Each member's clock when it started.
    started_at: Vec<f64>,
    /// Accesses handed out, all programs together.
    made: u64,
    events: VecDeque<ObjectEventAt>,
    scratch: Vec<ObjectEventAt>,
    turn: Vec<Access>,
    /// Set by the first `read_ahead`: accesses `fill` makes on the spot are then kept in
    /// `unreported` for the next `read_ahead` to report.
    reading_ahead: bool,
    unreported: Vec<Access>,
}

impl CoRun {
    /// `info` names the co-run and gives its scale and fast tier; the footprint, threads and
    /// accesses are the members'. At most 256 threads in all (a thread id is a byte).
    pub fn new(mut info: WorkloadInfo, members: Vec<Member>) -> Result<Self, String> {
        let mut first_byte = 0u64;
        let mut threads = 0u32;
        let mut accesses = 0u64;
        let mut states = Vec::with_capacity(members.len());
        let mut programs = Vec::with_capacity(members.len());
        for (i, m) in members.into_iter().enumerate() {
            let w = m.source.info();
            if let Some((other, _)) = m.start_after {
                if other >= i {
                    return Err(format!("member {i} starts after member {other}, which is not before it"));
                }
            }
            programs.push(ProgramInfo {
                name: w.name.clone(),
                priority: m.priority,
                first_byte,
                bytes: w.footprint_bytes,
                threads: w.threads,
            });
            first_byte = (first_byte + w.footprint_bytes).next_multiple_of(ALIGN);
            threads += w.threads;
            accesses += w.accesses;
            states.push(State {
                source: m.source,
                start_after: m.start_after,
                started: false,
                done: false,
                made: 0,
                pending: VecDeque::new(),
                queue: VecDeque::new(),
                exhausted: false,
                ahead_start: None,
            });
        }
        if threads > 256 {
            return Err(format!("the programs have {threads} threads in all; at most 256"));
        }
        let last = programs.last().ok_or("a co-run needs at least one program")?;
        info.footprint_bytes = last.range().end;
        info.threads = threads;
        info.accesses = accesses;
        Ok(CoRun {
            info,
            clocks: vec![0.0; states.len()],
            consumed: vec![0; states.len()],
            started_at: vec![0.0; states.len()],
            members: states,
            programs,
            made: 0,
            events: VecDeque::new(),
            scratch: Vec::new(),
            turn: Vec::with_capacity(TURN_ACCESSES),
            reading_ahead: false,
            unreported: Vec::new(),
        })
    }

    /// Makes up to a turn of member `i`'s accesses into its queue, renamed to the co-run's
    /// addresses and threads; false once its source has ended.
    fn generate_turn(&mut self, i: usize) -> bool {
        if self.members[i].exhausted {
            return false;
        }
        self.turn.clear();
        let n = self.members[i].source.fill(&mut self.turn, TURN_ACCESSES);
        if n == 0 {
            self.members[i].exhausted = true;
            return false;
        }
        let (first_byte, first_thread) =
            (self.programs[i].first_byte, self.programs[..i].iter().map(|p| p.threads).sum::<u32>() as u8);
        let m = &mut self.members[i];
        m.queue.extend(self.turn.iter().map(|a| Access {
            addr: a.addr + first_byte,
            thread: a.thread.wrapping_add(first_thread),
            ..*a
        }));
        true
    }

    /// Member `i`'s estimated clock at the end of what it has queued ahead (at its estimated
    /// start if it has not started).
    fn clock_ahead(&self, i: usize) -> f64 {
        let m = &self.members[i];
        let base = if m.started { self.estimated_clock(i) } else { m.ahead_start.unwrap_or(self.clocks[i]) };
        base + m.queue.len() as f64 * self.rate(i)
    }

    /// Whether member `i`, not started, starts within what is read ahead: the member it waits for
    /// has made (handed out or queued) the accesses it waits for.
    fn starts_ahead(&self, i: usize) -> bool {
        let m = &self.members[i];
        !m.started
            && m.start_after.is_none_or(|(other, n)| {
                let o = &self.members[other];
                (o.exhausted && o.queue.is_empty())
                    || o.done
                    || (o.started || o.ahead_start.is_some()) && o.generated() >= n
            })
    }

    /// Member `i`'s time per access so far, ns; `None` before the machine has run any of it.
    fn ns_per_access(&self, i: usize) -> Option<f64> {
        let run = self.clocks[i] - self.started_at[i];
        (self.consumed[i] > 0 && run > 0.0).then(|| run / self.consumed[i] as f64)
    }

    /// Member `i`'s clock at its accesses handed out so far: the machine's clock for those it
    /// has run, and for the rest its time per access so far (before it has run any, the other
    /// programs' mean; before any has run, the same for all).
    fn estimated_clock(&self, i: usize) -> f64 {
        let ahead = self.members[i].made.saturating_sub(self.consumed[i]);
        if ahead == 0 {
            return self.clocks[i];
        }
        self.clocks[i] + ahead as f64 * self.rate(i)
    }

    /// Member `i`'s time per access so far, or before it has run any, the other programs' mean
    /// (before any has run, 1 ns).
    fn rate(&self, i: usize) -> f64 {
        self.ns_per_access(i).unwrap_or_else(|| {
            let known: Vec<f64> = (0..self.members.len()).filter_map(|j| self.ns_per_access(j)).collect();
            if known.is_empty() {
                1.0
            } else {
                known.iter().sum::<f64>() / known.len() as f64
            }
        })
    }

    fn may_start(&self, i: usize) -> bool {
        let m = &self.members[i];
        !m.started
            && m.start_after.is_none_or(|(other, n)| {
                let o = &self.members[other];
                o.done || (o.started && o.made >= n)
            })
    }

    /// Moves member `i`'s events up to its own access `upto` (all of them with `all`) into the
    /// shared stream, at `at` plus their offset into the turn that starts at its access `from`.
    fn place_events(&mut self, i: usize, from: u64, upto: u64, at: u64, all: bool) {
        let program = i as u32;
        let first_byte = self.programs[i].first_byte;
        let m = &mut self.members[i];
        m.source.take_object_events(&mut self.scratch);
        m.pending.extend(self.scratch.drain(..));
        while let Some(e) = m.pending.front().copied() {
            if e.at >= upto && !all {
                break;
            }
            m.pending.pop_front();
            let mut ev = e.event.of_program(program);
            ev.addr += first_byte;
            ev.site = ev.site.wrapping_add(u64::from(program) << 48);
            self.events.push_back(ObjectEventAt { at: at + e.at.clamp(from, upto) - from, event: ev });
        }
    }
}

impl AccessSource for CoRun {
    fn info(&self) -> &WorkloadInfo {
        &self.info
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        loop {
            for i in 0..self.members.len() {
                if self.may_start(i) {
                    self.members[i].started = true;
                    let p = &self.programs[i];
                    let ev = ObjectEvent::program_start(i as u32, p.priority, p.first_byte, p.bytes);
                    self.events.push_back(ObjectEventAt { at: self.made, event: ev });
                    // It starts at the machine's time, the least clock of those running (the
                    // machine says so before the next turn).
                    let running = (0..self.members.len())
                        .filter(|&j| j != i && self.members[j].started && !self.members[j].done);
                    self.clocks[i] =
                        running.map(|j| self.estimated_clock(j)).reduce(f64::min).unwrap_or(self.clocks[i]);
                    self.started_at[i] = self.clocks[i];
                }
            }
            let running =
                (0..self.members.len()).filter(|&i| self.members[i].started && !self.members[i].done);
            let Some(i) =
                running.min_by(|&a, &b| self.estimated_clock(a).total_cmp(&self.estimated_clock(b)))
            else {
                // None running: the next to start, whatever it waits for, or the end.
                match (0..self.members.len()).find(|&i| !self.members[i].started) {
                    Some(i) => {
                        self.members[i].start_after = None;
                        continue;
                    }
                    None => return 0,
                }
            };
            if self.members[i].queue.is_empty() {
                let before = self.members[i].queue.len();
                self.generate_turn(i);
                if self.reading_ahead {
                    let m = &self.members[i];
                    self.unreported.extend(m.queue.range(before..).copied());
                }
            }
            let n = self.members[i].queue.len().min(max.min(TURN_ACCESSES));
            let from = self.members[i].made;
            if n == 0 {
                self.members[i].done = true;
                self.place_events(i, from, from, self.made, true);
                let p = &self.programs[i];
                let ev = ObjectEvent::program_end(i as u32, p.first_byte, p.bytes);
                self.events.push_back(ObjectEventAt { at: self.made, event: ev });
                continue;
            }
            buf.extend(self.members[i].queue.drain(..n));
            self.members[i].made += n as u64;
            let upto = self.members[i].made;
            self.place_events(i, from, upto, self.made, false);
            self.made += n as u64;
            return n;
        }
    }

    fn take_object_events(&mut self, out: &mut Vec<ObjectEventAt>) {
        out.extend(self.events.drain(..));
    }

    fn programs(&self) -> &[ProgramInfo] {
        &self.programs
    }

    fn read_ahead(&mut self, n: usize, out: &mut Vec<Access>) -> bool {
        self.reading_ahead = true;
        out.append(&mut self.unreported);
        let mut ahead: usize = self.members.iter().map(|m| m.queue.len()).sum();
        while ahead < n {
            // Members that will run within what is read ahead: the running ones, and those whose
            // start falls within it (at the least estimated clock of the others, as `fill` starts
            // them).
            for i in 0..self.members.len() {
                if self.members[i].ahead_start.is_none() && self.starts_ahead(i) {
                    let others = (0..self.members.len())
                        .filter(|&j| j != i && self.members[j].started && !self.members[j].done)
                        .map(|j| self.clock_ahead(j))
                        .reduce(f64::min);
                    self.members[i].ahead_start = Some(others.unwrap_or(self.clocks[i]));
                }
            }
            let next = (0..self.members.len())
                .filter(|&i| {
                    let m = &self.members[i];
                    !m.done && !m.exhausted && (m.started || m.ahead_start.is_some())
                })
                .min_by(|&a, &b| self.clock_ahead(a).total_cmp(&self.clock_ahead(b)));
            let Some(i) = next else { break };
            let before = self.members[i].queue.len();
            if self.generate_turn(i) {
                out.extend(self.members[i].queue.range(before..).copied());
                ahead += self.members[i].queue.len() - before;
            }
        }
        true
    }

    fn set_program_clocks(&mut self, clocks_ns: &[f64], consumed: &[u64]) {
        for (i, (&t, &n)) in clocks_ns.iter().zip(consumed).enumerate().take(self.clocks.len()) {
            self.clocks[i] = t;
            self.consumed[i] = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemorySource;
    use terrace_model::ObjectEventKind;

    fn info(name: &str, footprint: u64, threads: u32, accesses: u64) -> WorkloadInfo {
        WorkloadInfo {
            name: name.into(),
            description: String::new(),
            footprint_bytes: footprint,
            threads,
            scale: 1.0,
            suggested_fast_bytes: footprint,
            accesses,
            recording: None,
        }
    }

    /// `n` reads by thread 0 (and 1) over `footprint`, with an allocation of its first page
    /// before its first access and its free after its last.
    fn program(name: &str, footprint: u64, n: u64) -> Box<dyn AccessSource> {
        let accesses: Vec<Access> =
            (0..n).map(|i| Access::read((i * 64) % footprint, 64, (i % 2) as u8, 1)).collect();
        let events = vec![
            ObjectEventAt { at: 0, event: ObjectEvent::alloc(0, 4096, 7) },
            ObjectEventAt { at: n, event: ObjectEvent::free(0, 4096, 7) },
        ];
        Box::new(MemorySource::with_events(info(name, footprint, 2, n), accesses, events))
    }

    fn drain(c: &mut CoRun, clocks: impl Fn(u64) -> Vec<f64>) -> (Vec<Access>, Vec<ObjectEventAt>) {
        let (mut all, mut events) = (Vec::new(), Vec::new());
        loop {
            let made: Vec<u64> = c.members.iter().map(|m| m.made).collect();
            c.set_program_clocks(&clocks(all.len() as u64), &made);
            let mut buf = Vec::new();
            if c.fill(&mut buf, 1 << 20) == 0 {
                break;
            }
            all.extend(buf);
        }
        c.take_object_events(&mut events);
        (all, events)
    }

    #[test]
    fn programs_get_their_own_ranges_threads_sites_and_start_and_end_events() {
        let members = vec![
            Member { source: program("a", 8192, 3 * TURN_ACCESSES as u64), priority: 0, start_after: None },
            Member {
                source: program("b", 4096, 10),
                priority: 5,
                start_after: Some((0, TURN_ACCESSES as u64)),
            },
        ];
        let mut c = CoRun::new(info("pair", 0, 0, 0), members).unwrap();
        assert_eq!((c.info().footprint_bytes, c.info().threads), ((2 << 20) + 4096, 4));
        assert_eq!(c.programs()[1].first_byte, 2 << 20);
        // b starts at a's time after a's first turn, and a goes on first (a tie goes to the
        // first); then a's clock runs ahead, and b's turn comes.
        let (all, events) =
            drain(
                &mut c,
                |made| if made >= 2 * TURN_ACCESSES as u64 { vec![1e9, 0.0] } else { vec![0.0; 2] },
            );
        assert_eq!(all.len(), 3 * TURN_ACCESSES + 10);
        let b: Vec<&Access> = all.iter().filter(|a| a.addr >= 2 << 20).collect();
        assert_eq!(b.len(), 10);
        assert!(b.iter().all(|a| a.thread >= 2 && a.addr < (2 << 20) + 4096));
        assert!(all[2 * TURN_ACCESSES..2 * TURN_ACCESSES + 10].iter().all(|a| a.addr >= 2 << 20));
        let kinds: Vec<(u64, u32, ObjectEventKind, u64)> =
            events.iter().map(|e| (e.at, e.event.program, e.event.kind, e.event.site)).collect();
        let t = TURN_ACCESSES as u64;
        assert_eq!(
            kinds,
            [
                (0, 0, ObjectEventKind::ProgramStart { priority: 0 }, 0),
                (0, 0, ObjectEventKind::Alloc, 7),
                (t, 1, ObjectEventKind::ProgramStart { priority: 5 }, 0),
                (2 * t, 1, ObjectEventKind::Alloc, 7 + (1 << 48)),
                (2 * t + 10, 1, ObjectEventKind::Free, 7 + (1 << 48)),
                (2 * t + 10, 1, ObjectEventKind::ProgramEnd, 0),
                (3 * t + 10, 0, ObjectEventKind::Free, 7),
                (3 * t + 10, 0, ObjectEventKind::ProgramEnd, 0),
            ]
        );
        assert_eq!(events[3].event.addr, 2 << 20);
    }

    #[test]
    fn each_turn_goes_to_the_program_furthest_behind() {
        let members = vec![
            Member { source: program("a", 4096, 4 * TURN_ACCESSES as u64), priority: 0, start_after: None },
            Member { source: program("b", 4096, 4 * TURN_ACCESSES as u64), priority: 0, start_after: None },
        ];
        let mut c = CoRun::new(info("pair", 0, 0, 0), members).unwrap();
        // b is twice as fast: a's clock advances 2 per turn, b's 1.
        let mut turns = Vec::new();
        let mut clocks = [0.0f64; 2];
        loop {
            let made: Vec<u64> = c.members.iter().map(|m| m.made).collect();
            c.set_program_clocks(&clocks, &made);
            let mut buf = Vec::new();
            if c.fill(&mut buf, 1 << 20) == 0 {
                break;
            }
            let p = usize::from(buf[0].addr >= 2 << 20);
            clocks[p] += if p == 0 { 2.0 } else { 1.0 };
            turns.push(p);
        }
        assert_eq!(turns, [0, 1, 1, 0, 1, 1, 0, 0]);
    }

    /// Read ahead of the machine, turns go by clocks estimated from each program's time per
    /// access so far: of a program twice as slow as the other, one turn in three.
    #[test]
    fn turns_read_ahead_go_by_estimated_clocks() {
        let members = vec![
            Member { source: program("a", 4096, 8 * TURN_ACCESSES as u64), priority: 0, start_after: None },
            Member { source: program("b", 4096, 8 * TURN_ACCESSES as u64), priority: 0, start_after: None },
        ];
        let mut c = CoRun::new(info("pair", 0, 0, 0), members).unwrap();
        let turn = |c: &mut CoRun| {
            let mut buf = Vec::new();
            c.fill(&mut buf, 1 << 20);
            usize::from(buf[0].addr >= 2 << 20)
        };
        c.set_program_clocks(&[0.0, 0.0], &[0, 0]);
        assert_eq!((turn(&mut c), turn(&mut c)), (0, 1));
        // The machine has run one turn of each: a took 2 ns an access, b 1.
        let t = TURN_ACCESSES as f64;
        c.set_program_clocks(&[2.0 * t, t], &[TURN_ACCESSES as u64; 2]);
        // Each turn handed out adds 2t to a's estimate and t to b's (a tie goes to the first):
        // b (to 2t), a (2t, to 4t), b (to 3t), b (to 4t), a, b.
        let turns: Vec<usize> = (0..6).map(|_| turn(&mut c)).collect();
        assert_eq!(turns, [1, 0, 1, 1, 0, 1]);
    }

    /// Read ahead with `read_ahead`, what lies ahead is counted by estimated clocks, but the
    /// turns still go by the clocks the machine reports: a program the estimate took for fast
    /// does not get its queued turns before a program that is behind. Every access handed out was
    /// reported ahead exactly once, and the events stay where the program's own accesses put them.
    #[test]
    fn reading_ahead_counts_by_estimates_and_hands_out_by_clocks_run() {
        let t = TURN_ACCESSES as u64;
        let members = vec![
            Member { source: program("a", 4096, 4 * t), priority: 0, start_after: None },
            Member { source: program("b", 4096, 4 * t), priority: 1, start_after: Some((0, t)) },
        ];
        let mut c = CoRun::new(info("pair", 0, 0, 0), members).unwrap();
        let mut reported = Vec::new();
        let owner = |a: &Access| usize::from(a.addr >= 2 << 20);
        // Nothing has run: a alone until it has made a turn, then b starts, and both are read
        // ahead at the same estimated pace (1 ns an access, a tie to the first).
        c.set_program_clocks(&[0.0, 0.0], &[0, 0]);
        assert!(c.read_ahead(4 * TURN_ACCESSES, &mut reported));
        let by_member = |v: &[Access]| [0, 1].map(|p| v.iter().filter(|a| owner(a) == p).count() as u64);
        assert_eq!(by_member(&reported), [2 * t, 2 * t]);
        // The machine runs a's first turn in 1,000 ns: b starts then, at a's clock, and a's next
        // turns are due after b's as long as b's clock is least, whatever was read ahead.
        let mut handed = Vec::new();
        let turn = |c: &mut CoRun, clocks: [f64; 2], made: [u64; 2], handed: &mut Vec<Access>| {
            c.set_program_clocks(&clocks, &made);
            let mut buf = Vec::new();
            assert!(c.fill(&mut buf, 1 << 20) > 0);
            handed.extend_from_slice(&buf);
            owner(&buf[0])
        };
        assert_eq!(turn(&mut c, [0.0, 0.0], [0, 0], &mut handed), 0);
        // b starts at a's clock; a tie goes to the first.
        assert_eq!(turn(&mut c, [1000.0, 0.0], [t, 0], &mut handed), 0);
        assert_eq!(turn(&mut c, [2000.0, 1000.0], [2 * t, 0], &mut handed), 1);
        // b is slow (its turn took a millisecond), a fast: a's last two turns, made on the spot
        // (what was read ahead of a is used up), come one after the other, and then b's.
        assert_eq!(turn(&mut c, [2000.0, 1e6], [2 * t, t], &mut handed), 0);
        assert_eq!(turn(&mut c, [3000.0, 1e6], [3 * t, t], &mut handed), 0);
        c.read_ahead(0, &mut reported);
        assert_eq!(turn(&mut c, [4000.0, 1e6], [4 * t, t], &mut handed), 1);
        c.read_ahead(0, &mut reported);
        assert_eq!(by_member(&handed), [4 * t, 2 * t]);
        // Each access handed out was reported ahead once: as multisets, handed out is within
        // reported (read ahead, or made on the spot and reported at the next call).
        let mut r = reported.iter().map(|a| (a.addr, a.thread)).collect::<Vec<_>>();
        let mut h = handed.iter().map(|a| (a.addr, a.thread)).collect::<Vec<_>>();
        r.sort_unstable();
        h.sort_unstable();
        let mut rest = r.into_iter().peekable();
        for x in h {
            while rest.next_if(|y| *y < x).is_some() {}
            assert_eq!(rest.next(), Some(x), "an access handed out was never reported ahead");
        }
        // b's start and its allocation come where its first turn was handed out, after a's first.
        let mut events = Vec::new();
        c.take_object_events(&mut events);
        let b_start = events.iter().find(|e| e.event.program == 1).unwrap();
        assert_eq!(b_start.at, t);
        assert!(matches!(b_start.event.kind, ObjectEventKind::ProgramStart { priority: 1 }));
    }
}
