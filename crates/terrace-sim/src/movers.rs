//! The movers of docs/model.md §4 ("Movers"): each page a plan moves is a copy that takes
//! machine time, and the page changes tier when its copy completes.
//!
//! A mover is a first-in, first-out queue of copies, done one page (or exchanged pair) after
//! another, each taking its share of the plan's mover time ([`crate::migration::cost`]). The
//! faulting program threads are one such queue too: their 4 KiB copies share the source tier,
//! and concurrent 4 KiB migrations pay off only at large page counts (Nimble §4.2.2-4.2.3), so
//! they land one after another at one copier's pace, while each faulting thread's wait is
//! charged to the program (docs/model.md §4, "Movers"). The destination's room is held from the moment the
//! mover takes a page on; a page queued behind a page leaving the same tier in the same queue
//! may take that page's room instead (it is copied after the other has left), which is how a
//! plan that demotes and then promotes fills a full tier. The faulting threads never do that:
//! each copies its own page and makes no room for another's.

use crate::migration::PerPage;
use crate::placement::Placement;
use crate::profile::MAX_TIERS;
use std::collections::VecDeque;
use terrace_model::{Move, MoveFailure, Mover, PageIdx, TierId, BASE_PAGES_PER_HUGE};

/// How a page moves ([`crate::migration::MoveWork`]'s kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// Kernel migration: the old frame is freed when the copy lands.
    Migrate,
    /// A promotion that keeps the old frame as the page's shadow (mtier §3.1).
    KeepShadow,
    /// A demotion back to the page's shadow: a mapping switch, nothing copied.
    Switch,
}

impl CopyKind {
    /// Whether the page's translation is flushed: a kernel migration unmaps it, a switch reuses
    /// the fast frame; a shadowed promotion needs no flush, since a stale translation still
    /// reaches the shadow, whose contents are the same (mtier §3.1). The pages that
    /// [`crate::migration::cost`] counts as flushed.
    pub fn flushes(self) -> bool {
        self != CopyKind::KeepShadow
    }
}

/// What a write to a page during its copy does (docs/model.md §4, "Movers").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteGuard {
    /// Nothing holds the write back: it races the copy, which the mover does again, once; writes
    /// during the second copy wait for it.
    Unprotected,
    /// The page is write-protected while it is copied: a write waits for the copy (HeMem's and
    /// HPWP's migrator, HPWP thesis §5.3).
    WriteProtected,
    /// A huge page split into its base pages as it moves, each unmapped only while it is copied
    /// (Nimble §4.3): a write races only the piece under way, which the mover copies again, once,
    /// and no writer waits longer than one piece.
    SplitPieces,
}

/// One copy: a page on its way to another tier, or the two pages of an exchange.
#[derive(Clone, Debug)]
pub struct Copy {
    /// (page, from, to) of each page: the first only for a move, both for an exchange.
    pages: [(PageIdx, TierId, TierId); 2],
    len: u8,
    /// When the copy starts and completes, machine time, ns.
    pub start_ns: f64,
    pub done_ns: f64,
    /// How long one copy of these pages takes, ns.
    pub dur_ns: f64,
    /// What a write to the pages during the copy does.
    pub guard: WriteGuard,
    /// The copy was done again after a write raced it; writes now wait for it.
    pub redone: bool,
    /// The destination's room is promised by a page leaving it earlier in the same queue, and
    /// not yet held in the placement.
    backed: bool,
    /// Program threads already waiting for this copy (a thread waits once per copy).
    waiting: [u64; 4],
    pub kind: CopyKind,
    /// TLB shootdowns the copy's unmapping takes: its share of its plan's, paid as it starts.
    pub shootdowns: u64,
}

impl Copy {
    /// (page, from, to) of each page of the copy.
    pub fn pages(&self) -> &[(PageIdx, TierId, TierId)] {
        &self.pages[..self.len as usize]
    }

    /// Marks `thread` as waiting; false if it already was.
    pub fn wait(&mut self, thread: u8) -> bool {
        let (word, bit) = (thread as usize / 64, 1u64 << (thread % 64));
        let new = self.waiting[word] & bit == 0;
        self.waiting[word] |= bit;
        new
    }
}

/// A mover's queue: what it has taken on and not yet landed.
#[derive(Clone, Debug)]
pub struct MoverQueue {
    pub kind: Mover,
    pub items: VecDeque<Copy>,
    /// Pages queued or being copied.
    pub queued_pages: u64,
    /// Per tier: pages queued to leave it whose room is not promised to a later page of this queue.
    leaving: [u64; MAX_TIERS],
    /// Per tier: pages queued to arrive on room that a page leaving it earlier in this queue frees.
    promised: [u64; MAX_TIERS],
    /// Thread time of the copies completed, ns.
    busy_ns: f64,
    /// Items taken on by the plan being applied, not yet given their times.
    unscheduled: usize,
    /// Items at the front whose start has been charged to the program ([`Self::start_due`]).
    started: usize,
}

impl MoverQueue {
    pub fn new(kind: Mover) -> Self {
        MoverQueue {
            kind,
            items: VecDeque::new(),
            queued_pages: 0,
            leaving: [0; MAX_TIERS],
            promised: [0; MAX_TIERS],
            busy_ns: 0.0,
            unscheduled: 0,
            started: 0,
        }
    }

    /// A page may take the room a page leaving its tier ahead of it in this queue frees: not in
    /// the faulting threads, each of which copies its own page.
    fn hands_room_on(&self) -> bool {
        self.kind != Mover::FaultingThread
    }

    fn refuse_for_queue(&self, pages: u64) -> bool {
        self.kind.queue_pages().is_some_and(|q| self.queued_pages + pages > q)
    }

    fn push(
        &mut self,
        pages: [(PageIdx, TierId, TierId); 2],
        len: u8,
        guard: WriteGuard,
        backed: bool,
        kind: CopyKind,
    ) {
        self.items.push_back(Copy {
            kind,
            pages,
            len,
            start_ns: f64::INFINITY,
            done_ns: f64::INFINITY,
            dur_ns: 0.0,
            guard,
            redone: false,
            backed,
            waiting: [0; 4],
            shootdowns: 0,
        });
        self.queued_pages += len as u64;
    }

    /// Takes on moving `page` from `from` to `to`, holding room for it there: refused when the
    /// queue is full, or when `to` has no room and no page leaving it is queued ahead here. A
    /// switch back to a shadow needs no room: the shadow's frame is the page's.
    pub fn take_move(
        &mut self,
        placement: &mut Placement,
        page: PageIdx,
        (from, to): (TierId, TierId),
        guard: WriteGuard,
        kind: CopyKind,
    ) -> Result<(), MoveFailure> {
        if self.refuse_for_queue(1) {
            return Err(MoveFailure::QueueFull);
        }
        let (f, t) = (from.index(), to.index());
        let backed = if kind == CopyKind::Switch {
            false
        } else if placement.has_room(t) {
            placement.reserve(t);
            false
        } else if self.hands_room_on() && self.leaving[t] > 0 {
            self.leaving[t] -= 1;
            self.promised[t] += 1;
            true
        } else {
            return Err(MoveFailure::NoSpace);
        };
        if self.hands_room_on() {
            self.leaving[f] += 1;
        }
        self.push([(page, from, to), (page, from, to)], 1, guard, backed, kind);
        Ok(())
    }

    /// Takes on swapping two pages of different tiers: no room needed (Nimble §3.1.4).
    pub fn take_exchange(&mut self, down: Move, up: Move, guard: WriteGuard) -> Result<(), MoveFailure> {
        if self.refuse_for_queue(2) {
            return Err(MoveFailure::QueueFull);
        }
        self.push(
            [(down.page, up.to, down.to), (up.page, down.to, up.to)],
            2,
            guard,
            false,
            CopyKind::Migrate,
        );
        Ok(())
    }

    /// Gives the copies taken on since the last call their times: `per_page_ns` of copying per
    /// page of their kind, one after another from `now` or from the end of the copies ahead.
    /// The work's `shootdowns` are spread over its flushed copies (kernel migrations and
    /// switches; a shadowed promotion needs none) in proportion to their pages, each flush going
    /// to the first copy of its share: each is paid when its copy starts ([`Self::start_due`]).
    pub fn schedule(&mut self, now: f64, per_page_ns: PerPage, shootdowns: u64) {
        let new = self.unscheduled..self.items.len();
        let flushed = |c: &Copy| if c.kind.flushes() { c.len as u64 } else { 0 };
        let flushed_pages: u64 = self.items.range(new.clone()).map(flushed).sum();
        debug_assert!(flushed_pages > 0 || shootdowns == 0, "shootdowns without a flushed copy");
        let share =
            |pages: u64| (pages as u128 * shootdowns as u128).div_ceil(flushed_pages.max(1) as u128) as u64;
        let mut pages_before = 0;
        for i in new {
            let per = match self.items[i].kind {
                CopyKind::Migrate => per_page_ns.kernel,
                CopyKind::KeepShadow => per_page_ns.shadow_copy,
                CopyKind::Switch => per_page_ns.switch,
            };
            let dur = per * self.items[i].len as f64;
            let start = if i > 0 { self.items[i - 1].done_ns.max(now) } else { now };
            let pages_after = pages_before + flushed(&self.items[i]);
            let c = &mut self.items[i];
            c.dur_ns = dur;
            c.start_ns = start;
            c.done_ns = start + dur;
            c.shootdowns = share(pages_after) - share(pages_before);
            pages_before = pages_after;
        }
        self.unscheduled = self.items.len();
    }

    /// Hands `charge` each copy that has started by `now` and was not handed over before: what
    /// starting it costs the program (its unmapping's shootdowns; in the faulting threads, the
    /// copy itself) is paid then, so a copy the run ends before is never paid for.
    pub fn start_due(&mut self, now: f64, mut charge: impl FnMut(&Copy)) {
        while let Some(c) = self.items.get(self.started).filter(|c| c.start_ns <= now) {
            charge(c);
            self.started += 1;
        }
    }

    /// Lands every copy completed by `now`: each page goes to its new tier (`land` is told of
    /// it, with its bytes' tiers, whether bytes were copied, and whether the huge page was split
    /// to move, [`WriteGuard::SplitPieces`]), and the room a page leaves
    /// passes to a page promised it. A shadowed promotion keeps its old frame as the page's
    /// shadow when no page is promised that room and the tier can spare it
    /// ([`Placement::may_keep_shadow`]); a switch takes the page back to its shadow.
    pub fn complete(
        &mut self,
        now: f64,
        placement: &mut Placement,
        mut land: impl FnMut(PageIdx, TierId, TierId, bool, bool),
    ) {
        while self.items.front().is_some_and(|c| c.done_ns <= now) {
            let Some(c) = self.items.pop_front() else { break };
            self.unscheduled = self.unscheduled.saturating_sub(1);
            self.started = self.started.saturating_sub(1);
            self.busy_ns += c.done_ns - c.start_ns;
            self.queued_pages -= c.len as u64;
            let split = c.guard == WriteGuard::SplitPieces;
            if c.len == 2 {
                let ((a, _, to_a), (b, _, to_b)) = (c.pages[0], c.pages[1]);
                placement.swap(a, b);
                land(a, to_b, to_a, true, split);
                land(b, to_a, to_b, true, split);
                continue;
            }
            let (page, from, to) = c.pages[0];
            if c.backed {
                // The page leaving `to` ahead of it has always landed first (first in, first
                // out), handing its room over; kept safe should that ever not hold.
                debug_assert!(false, "a promised page landed before the room it was promised");
                placement.reserve(to.index());
            }
            let f = from.index();
            if c.kind == CopyKind::Switch {
                placement.switch_to_shadow(page, to);
            } else {
                placement.land(page, to);
            }
            if c.kind == CopyKind::KeepShadow && self.promised[f] == 0 && placement.may_keep_shadow(f) {
                // The old frame stays, as the shadow: it frees no room.
                placement.keep_shadow(page, from);
                if self.hands_room_on() {
                    self.leaving[f] -= 1;
                }
                land(page, from, to, true, split);
                continue;
            }
            if self.hands_room_on() {
                if self.promised[f] > 0 {
                    // The room this page leaves goes to the first page queued to arrive on it.
                    self.promised[f] -= 1;
                    placement.reserve(f);
                    if let Some(next) = self.items.iter_mut().find(|x| x.backed && x.pages[0].2 == from) {
                        next.backed = false;
                    }
                } else {
                    self.leaving[f] -= 1;
                }
            }
            land(page, from, to, c.kind != CopyKind::Switch, split);
        }
    }

    /// A write dropped the shadow of `page`, which this queue was to switch back to it: the
    /// switch becomes a copy (the dropped shadow's frame is its room), `extra_ns` longer, and
    /// every copy behind it later by as much. False if no switch of `page` is queued here.
    pub fn unswitch(&mut self, page: PageIdx, extra_ns: f64, placement: &mut Placement) -> bool {
        let Some(i) = self.items.iter().position(|c| c.kind == CopyKind::Switch && c.pages[0].0 == page)
        else {
            return false;
        };
        let to = self.items[i].pages[0].2;
        placement.reserve(to.index());
        let c = &mut self.items[i];
        c.kind = CopyKind::Migrate;
        if c.start_ns.is_finite() {
            c.dur_ns += extra_ns;
            c.done_ns += extra_ns;
            for later in self.items.iter_mut().skip(i + 1) {
                later.start_ns += extra_ns;
                later.done_ns += extra_ns;
            }
        }
        true
    }

    /// The copy under way at `now`, if any: the head of the queue once it has started.
    pub fn running(&self, now: f64) -> Option<usize> {
        self.items.front().filter(|c| c.start_ns <= now && now < c.done_ns).map(|_| 0)
    }

    /// The copy `i` is done again after a write raced it: it completes one copy's time later
    /// (one base page's, for a huge page split to move: only the piece under way was raced), and
    /// so does every copy queued behind it. Returns the time added.
    pub fn redo(&mut self, i: usize) -> f64 {
        let d = match self.items[i].guard {
            WriteGuard::SplitPieces => self.items[i].dur_ns / BASE_PAGES_PER_HUGE as f64,
            _ => self.items[i].dur_ns,
        };
        self.items[i].redone = true;
        self.items[i].done_ns += d;
        for later in self.items.iter_mut().skip(i + 1) {
            later.start_ns += d;
            later.done_ns += d;
        }
        d
    }

    /// When the last copy taken on completes (`now` when idle).
    pub fn done_ns(&self, now: f64) -> f64 {
        self.items.back().map_or(now, |c| c.done_ns.max(now))
    }

    /// Time spent copying up to `now`: the copies completed, and the part of the one under way
    /// (a copy a write raced counts both its copies). Never more than the time since the start.
    pub fn time_copying(&self, now: f64) -> f64 {
        self.busy_ns + self.items.front().map_or(0.0, |c| (now.min(c.done_ns) - c.start_ns).max(0.0))
    }

    /// The pages taken on and not landed, each with its destination.
    pub fn in_flight(&self, out: &mut Vec<Move>) {
        for c in &self.items {
            out.extend(c.pages().iter().map(|&(page, _, to)| Move { page, to }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::InitialPlacement;

    /// Every kind of page at the same cost.
    fn per(ns: f64) -> PerPage {
        PerPage { kernel: ns, shadow_copy: ns, switch: ns }
    }

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;

    /// A full fast tier of `fast` pages (0..fast) and slow pages after them.
    fn full(fast: u64, slow: u64) -> Placement {
        let mut p = Placement::new(fast + slow, vec![Some(fast), None], InitialPlacement::FirstTouch);
        for page in 0..(fast + slow) as u32 {
            p.first_touch(page);
        }
        p
    }

    #[test]
    fn a_promotion_queued_behind_a_demotion_takes_its_room_when_it_has_left() {
        let mut p = full(2, 2);
        let mut q = MoverQueue::new(Mover::CopyEngine { queue_pages: 8 });
        // Full: a promotion alone finds no room.
        assert_eq!(
            q.take_move(&mut p, 2, (S, F), WriteGuard::Unprotected, CopyKind::Migrate),
            Err(MoveFailure::NoSpace)
        );
        q.take_move(&mut p, 0, (F, S), WriteGuard::Unprotected, CopyKind::Migrate).unwrap();
        q.take_move(&mut p, 2, (S, F), WriteGuard::Unprotected, CopyKind::Migrate).unwrap();
        assert_eq!(p.occupied(0), 2, "the promotion holds no room of its own yet");
        q.schedule(0.0, per(10.0), 0);
        let mut landed = Vec::new();
        q.complete(10.0, &mut p, |page, _, to, _, _| landed.push((page, to)));
        assert_eq!(landed, [(0, S)]);
        assert_eq!((p.used[0], p.reserved[0]), (1, 1), "the demotion's room passed to the promotion");
        q.complete(20.0, &mut p, |page, _, to, _, _| landed.push((page, to)));
        assert_eq!(landed, [(0, S), (2, F)]);
        assert_eq!((p.used[0], p.reserved[0], p.reserved[1]), (2, 0, 0));
        assert!(p.is_consistent() && p.peak[0] <= 2);
    }

    #[test]
    fn an_asynchronous_queue_refuses_past_its_bound() {
        let mut p = full(4, 4);
        let mut engine = MoverQueue::new(Mover::KernelThread { queue_pages: 2 });
        assert!(engine.take_move(&mut p, 0, (F, S), WriteGuard::Unprotected, CopyKind::Migrate).is_ok());
        assert!(engine.take_move(&mut p, 1, (F, S), WriteGuard::Unprotected, CopyKind::Migrate).is_ok());
        assert_eq!(
            engine.take_move(&mut p, 2, (F, S), WriteGuard::Unprotected, CopyKind::Migrate),
            Err(MoveFailure::QueueFull)
        );
        let ex = |page, to| Move { page, to };
        assert_eq!(
            engine.take_exchange(ex(3, S), ex(4, F), WriteGuard::Unprotected),
            Err(MoveFailure::QueueFull)
        );
    }

    #[test]
    fn copies_run_one_after_another_and_the_faulting_threads_make_no_room() {
        let mut p = full(2, 4);
        let mut faulting = MoverQueue::new(Mover::FaultingThread);
        faulting.take_move(&mut p, 0, (F, S), WriteGuard::Unprotected, CopyKind::Migrate).unwrap();
        faulting.take_move(&mut p, 1, (F, S), WriteGuard::Unprotected, CopyKind::Migrate).unwrap();
        assert_eq!(
            faulting.take_move(&mut p, 2, (S, F), WriteGuard::Unprotected, CopyKind::Migrate),
            Err(MoveFailure::NoSpace)
        );
        faulting.schedule(100.0, per(10.0), 0);
        let times: Vec<(f64, f64)> = faulting.items.iter().map(|c| (c.start_ns, c.done_ns)).collect();
        assert_eq!(times, [(100.0, 110.0), (110.0, 120.0)]);
        assert_eq!(faulting.running(105.0), Some(0));
        assert_eq!(faulting.done_ns(0.0), 120.0);
        assert_eq!(faulting.redo(0), 10.0);
        let times: Vec<(f64, f64)> = faulting.items.iter().map(|c| (c.start_ns, c.done_ns)).collect();
        assert_eq!(times, [(100.0, 120.0), (120.0, 130.0)], "a redone copy delays those behind it");
        let mut landed = 0;
        faulting.complete(125.0, &mut p, |_, _, _, _, _| landed += 1);
        assert_eq!(landed, 1);
        assert_eq!(faulting.time_copying(125.0), 25.0, "both copies of the first page, half the second");
    }

    /// A plan's shootdowns go to its flushed copies by pages, the first copy of each share
    /// taking the flush, and each is handed over once, when its copy has started.
    #[test]
    fn shootdowns_are_spread_over_the_copies_and_paid_as_each_starts() {
        let mut p = full(12, 4);
        let mut q = MoverQueue::new(Mover::PolicyThread);
        for page in 0..10 {
            let kind = if page == 2 { CopyKind::KeepShadow } else { CopyKind::Migrate };
            q.take_move(&mut p, page, (F, S), WriteGuard::Unprotected, kind).unwrap();
        }
        q.schedule(0.0, per(10.0), 3);
        let shares: Vec<u64> = q.items.iter().map(|c| c.shootdowns).collect();
        assert_eq!(shares.iter().sum::<u64>(), 3);
        assert_eq!(shares[2], 0, "a shadowed promotion flushes nothing");
        assert_eq!(shares[0], 1, "the first copy of a share takes its flush");
        let mut paid = Vec::new();
        q.start_due(25.0, |c| paid.push(c.pages()[0].0));
        assert_eq!(paid, [0, 1, 2], "the copies started by 25 ns, each once");
        q.start_due(25.0, |c| paid.push(c.pages()[0].0));
        assert_eq!(paid.len(), 3);
        q.complete(25.0, &mut p, |_, _, _, _, _| {});
        q.start_due(35.0, |c| paid.push(c.pages()[0].0));
        assert_eq!(paid, [0, 1, 2, 3], "landing copies does not hand any over twice");
    }

    /// A huge page split to move is unmapped one base page at a time: a write races only the
    /// piece under way, so the copy is redone by one of its 512 pieces.
    #[test]
    fn a_raced_split_copy_redoes_one_base_page() {
        let mut p = full(2, 4);
        let mut q = MoverQueue::new(Mover::PolicyThread);
        q.take_move(&mut p, 0, (F, S), WriteGuard::SplitPieces, CopyKind::Migrate).unwrap();
        q.take_move(&mut p, 1, (F, S), WriteGuard::Unprotected, CopyKind::Migrate).unwrap();
        q.schedule(0.0, per(1024.0), 0);
        assert_eq!(q.redo(0), 2.0);
        let times: Vec<(f64, f64)> = q.items.iter().map(|c| (c.start_ns, c.done_ns)).collect();
        assert_eq!(times, [(0.0, 1026.0), (1026.0, 2050.0)]);
        assert_eq!(q.redo(1), 1024.0, "a whole page's copy is redone whole");
    }
}
