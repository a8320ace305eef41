//! What every generator is made of: a sequence of phases, the commonest being a sequential sweep.
//!
//! A workload is a fixed list of phases (e.g. GUPS: an initialising sweep, then random updates).
//! The phase is chosen once per `fill` call, never per access, so the inner loops stay
//! monomorphic and branch-predictable. This is the generators' shared machinery and depends on
//! none of them: a phase kind of one generator lives in its module, behind [`PhaseFill`].

use crate::{AccessSource, ObjectEventAt, WorkloadInfo};
use terrace_model::{Access, AccessKind, ObjectEvent};

/// Bytes in a cache line: the unit every sweep touches.
pub(crate) const LINE: u64 = 64;
/// Bytes in a base page: the stride of a sweep that touches each page once.
pub(crate) const PAGE: u64 = 4096;

/// One access a sweep makes on every line: which array, read or write, and the compute before it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    /// Byte offset of the array the step touches.
    pub base: u64,
    pub kind: AccessKind,
    pub instructions: u32,
}

impl Step {
    pub(crate) const fn read(base: u64, instructions: u32) -> Self {
        Step { base, kind: AccessKind::Read, instructions }
    }
    pub(crate) const fn write(base: u64, instructions: u32) -> Self {
        Step { base, kind: AccessKind::Write, instructions }
    }
}

/// Where one thread is in its chunk.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    start: u64,
    end: u64,
    line: u64,
    step: usize,
    iteration: u32,
}

/// Threads sweeping contiguous chunks of `lines` cache lines, making `steps` on every line, for
/// some iterations: the shape of array initialisation and of STREAM's kernels (an OpenMP
/// `parallel for` with static scheduling).
#[derive(Clone, Debug)]
pub(crate) struct Sweep {
    steps: Vec<Step>,
    iterations: u32,
    cursors: Vec<Cursor>,
    /// Round-robin between threads (concurrent execution) or one chunk after another (address
    /// order, as a single-threaded initialisation touches memory).
    interleave: bool,
    next_thread: usize,
    remaining: u64,
    /// Bytes between the units swept: a line, or a page for a sweep that only touches pages.
    stride: u64,
}

impl Sweep {
    /// Thread `t` owns lines `[t * lines / threads, (t + 1) * lines / threads)`, so chunk lengths
    /// differ by at most one line.
    pub(crate) fn new(lines: u64, threads: u32, steps: Vec<Step>, iterations: u32, interleave: bool) -> Self {
        assert!((1..=256).contains(&threads) && !steps.is_empty());
        let t = u64::from(threads);
        let cursors = (0..t)
            .map(|i| {
                let (start, end) = (i * lines / t, (i + 1) * lines / t);
                // An empty chunk starts out finished.
                let iteration = if start == end { iterations } else { 0 };
                Cursor { start, end, line: start, step: 0, iteration }
            })
            .collect();
        let remaining = lines * steps.len() as u64 * u64::from(iterations);
        Sweep { steps, iterations, cursors, interleave, next_thread: 0, remaining, stride: LINE }
    }

    /// One access per page of `pages` pages instead of per line: a pass whose only effect the
    /// workload keeps is which pages it touches, and in what order (BFS's graph builder).
    pub(crate) fn pages(pages: u64, threads: u32, steps: Vec<Step>) -> Self {
        Sweep { stride: PAGE, ..Self::new(pages, threads, steps, 1, true) }
    }

    pub(crate) fn remaining(&self) -> u64 {
        self.remaining
    }

    pub(crate) fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.remaining) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let threads = self.cursors.len();
        for out in &mut buf[start..] {
            // Skip threads that are done; one exists that is not, since `remaining` > 0.
            while self.cursors[self.next_thread].iteration == self.iterations {
                crate::turns::pass(&mut self.next_thread, threads);
            }
            let t = self.next_thread;
            let c = &mut self.cursors[t];
            let s = self.steps[c.step];
            *out = Access {
                addr: s.base + c.line * self.stride,
                instructions: s.instructions,
                size: LINE as u16,
                thread: t as u8,
                kind: s.kind,
            };
            c.step += 1;
            if c.step == self.steps.len() {
                c.step = 0;
                c.line += 1;
                if c.line == c.end {
                    c.line = c.start;
                    c.iteration += 1;
                }
            }
            if self.interleave {
                crate::turns::pass(&mut self.next_thread, threads);
            }
        }
        self.remaining -= n as u64;
        n
    }
}

/// A phase kind that lives in its generator's own module (GUPS updates, pmbench's Gaussian
/// accesses, NPB passes, BFS, the key-value store): dispatched once per `fill` call, so its inner
/// loop stays monomorphic like the sweep's.
pub(crate) trait PhaseFill: Send {
    fn remaining(&self) -> u64;
    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize;
}

/// The kinds of phase a workload can be made of.
pub(crate) enum Phase {
    Sweep(Sweep),
    Custom(Box<dyn PhaseFill>),
    /// Allocations and frees between the accesses before and after (no accesses of its own):
    /// what lets a phased workload free memory (docs/model.md §5, "Objects").
    Events(Vec<ObjectEvent>),
}

impl Phase {
    pub(crate) fn remaining(&self) -> u64 {
        match self {
            Phase::Sweep(p) => p.remaining(),
            Phase::Custom(p) => p.remaining(),
            Phase::Events(_) => 0,
        }
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        match self {
            Phase::Sweep(p) => p.fill(buf, max),
            Phase::Custom(p) => p.fill(buf, max),
            Phase::Events(_) => 0,
        }
    }
}

/// A workload: its description and its phases, run in order.
pub(crate) struct Generator {
    info: WorkloadInfo,
    phases: Vec<Phase>,
    current: usize,
    /// Accesses handed out so far, and the object events reached and not yet taken.
    made: u64,
    events: Vec<ObjectEventAt>,
}

impl Generator {
    /// Sets `info.accesses` from the phases, so the count is exact by construction.
    pub(crate) fn new(mut info: WorkloadInfo, phases: Vec<Phase>) -> Self {
        info.accesses = phases.iter().map(Phase::remaining).sum();
        Generator { info, phases, current: 0, made: 0, events: Vec::new() }
    }
}

impl AccessSource for Generator {
    fn info(&self) -> &WorkloadInfo {
        &self.info
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(phase) = self.phases.get_mut(self.current) else {
                break;
            };
            if let Phase::Events(events) = phase {
                let at = self.made + n as u64;
                self.events.extend(events.drain(..).map(|event| ObjectEventAt { at, event }));
            }
            n += phase.fill(buf, max - n);
            if phase.remaining() == 0 {
                self.current += 1;
            }
        }
        self.made += n as u64;
        n
    }

    fn take_object_events(&mut self, out: &mut Vec<ObjectEventAt>) {
        out.append(&mut self.events);
    }
}

/// Appends `n` placeholder accesses for a generator to overwrite: writing into initialised slots
/// skips `push`'s capacity check per access.
pub(crate) fn append_slots(buf: &mut Vec<Access>, n: usize) {
    buf.resize(buf.len() + n, Access::read(0, 0, 0, 0));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(mut s: Sweep) -> Vec<Access> {
        let mut out = Vec::new();
        while s.fill(&mut out, 7) > 0 {}
        out
    }

    #[test]
    fn interleaved_sweep_alternates_threads_and_covers_every_line_once() {
        let out = collect(Sweep::new(10, 3, vec![Step::write(0, 1)], 1, true));
        assert_eq!(out.len(), 10);
        // Chunks: [0,3) [3,6) [6,10); round robin until the short chunks run out.
        let addrs: Vec<u64> = out.iter().map(|a| a.addr / LINE).collect();
        assert_eq!(addrs, [0, 3, 6, 1, 4, 7, 2, 5, 8, 9]);
        let threads: Vec<u8> = out.iter().map(|a| a.thread).collect();
        assert_eq!(threads, [0, 1, 2, 0, 1, 2, 0, 1, 2, 2]);
    }

    #[test]
    fn sequential_sweep_is_in_address_order() {
        let out = collect(Sweep::new(10, 4, vec![Step::write(0, 1)], 1, false));
        let addrs: Vec<u64> = out.iter().map(|a| a.addr / LINE).collect();
        assert_eq!(addrs, (0..10).collect::<Vec<_>>());
        assert_eq!(out[0].thread, 0);
        assert_eq!(out[9].thread, 3);
    }

    #[test]
    fn steps_and_iterations_repeat_per_line() {
        let steps = vec![Step::read(1000, 2), Step::write(5000, 3)];
        let out = collect(Sweep::new(2, 1, steps, 2, true));
        let got: Vec<(u64, AccessKind)> = out.iter().map(|a| (a.addr, a.kind)).collect();
        let (r, w) = (AccessKind::Read, AccessKind::Write);
        let line = |base, i| base + i * LINE;
        assert_eq!(
            got,
            [
                (line(1000, 0), r),
                (line(5000, 0), w),
                (line(1000, 1), r),
                (line(5000, 1), w),
                (line(1000, 0), r),
                (line(5000, 0), w),
                (line(1000, 1), r),
                (line(5000, 1), w),
            ]
        );
    }

    #[test]
    fn more_threads_than_lines_is_fine() {
        let out = collect(Sweep::new(3, 8, vec![Step::write(0, 1)], 1, true));
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn events_come_at_their_place_in_the_stream_and_page_sweeps_stride_a_page() {
        let info = crate::registry::seed_info("t", String::new(), 1 << 20, 1, 1 << 20, 1.0);
        let (alloc, free) = (ObjectEvent::alloc(0, PAGE, 1), ObjectEvent::free(0, PAGE, 1));
        let sweep = |lines| Phase::Sweep(Sweep::new(lines, 1, vec![Step::read(0, 1)], 1, true));
        let phases = vec![
            Phase::Events(vec![alloc]),
            sweep(3),
            Phase::Sweep(Sweep::pages(2, 1, vec![Step::write(0, 1)])),
            Phase::Events(vec![free]),
        ];
        let mut g = Generator::new(info, phases);
        let (mut buf, mut events) = (Vec::new(), Vec::new());
        assert_eq!(g.fill(&mut buf, 4), 4);
        g.take_object_events(&mut events);
        assert_eq!(events, [ObjectEventAt { at: 0, event: alloc }]);
        assert_eq!(g.fill(&mut buf, 4), 1);
        assert_eq!(g.fill(&mut buf, 4), 0);
        g.take_object_events(&mut events);
        assert_eq!(events[1..], [ObjectEventAt { at: 5, event: free }]);
        let addrs: Vec<u64> = buf.iter().map(|a| a.addr).collect();
        assert_eq!(addrs, [0, LINE, 2 * LINE, 0, PAGE]);
    }
}
