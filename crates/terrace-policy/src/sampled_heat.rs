//! Sampled page heat: per-page read and write sample counts cooled by a global clock, and per-tier
//! FIFO lists of pages by class. The bookkeeping HeMem and HPWP share (HPWP thesis §3.5,
//! §4.3, §5.2).
//!
//! **Clock cooling** (HPWP §5.2, inherited from HeMem): when any page's count reaches the cooling
//! threshold, the global clock advances by one. A page's counts are halved once for every clock
//! tick since the page was last cooled, lazily: at its next sample, before the count increases, or
//! when a policy walks its hot lists. No list is walked when the clock advances.
//!
//! **FIFO lists**: every placed page is in exactly one list, named by its side (fast tier or
//! not) and a class the policy defines (HeMem: hot, cold; HPWP: four classes). A page joins a
//! list at its tail, so the front of each list is the page that has been in that class the
//! longest: promotions take candidates from the front, demotions take victims from the front.
//! Free room is not a list here: the machine reports each tier's free pages.

use terrace_model::{AccessKind, Move, PageIdx, TierId, TierStatus};

/// Sampled counts of one page, as last cooled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heat {
    pub reads: u32,
    pub writes: u32,
}

impl Heat {
    pub fn total(self) -> u32 {
        self.reads + self.writes
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Counted {
    heat: Heat,
    /// The clock value at which this page's counts were last halved.
    cooled_at: u64,
}

/// Per-page sample counts with global-clock cooling.
#[derive(Clone, Debug)]
pub struct HeatCounters {
    pages: Vec<Counted>,
    clock: u64,
    cooling_threshold: u32,
}

impl HeatCounters {
    /// Counters whose clock advances when a page's read or write count reaches `cooling_threshold`.
    pub fn new(cooling_threshold: u32) -> Self {
        HeatCounters { pages: Vec::new(), clock: 0, cooling_threshold: cooling_threshold.max(1) }
    }

    /// Makes room for `pages` pages (the live machine's address space grows); never shrinks.
    pub fn grow(&mut self, pages: usize) {
        if pages > self.pages.len() {
            // A new page has seen no clock tick yet.
            let fresh = Counted { heat: Heat::default(), cooled_at: self.clock };
            self.pages.resize(pages, fresh);
        }
    }

    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The global clock: how many times a page has reached the cooling threshold.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Halves the page's counts once for every clock tick since it was last cooled; returns them.
    pub fn cool(&mut self, page: PageIdx) -> Heat {
        let clock = self.clock;
        let c = &mut self.pages[page as usize];
        let ticks = clock - c.cooled_at;
        if ticks > 0 {
            let halve = |n: u32| u32::try_from(ticks).ok().and_then(|t| n.checked_shr(t)).unwrap_or(0);
            c.heat = Heat { reads: halve(c.heat.reads), writes: halve(c.heat.writes) };
            c.cooled_at = clock;
        }
        c.heat
    }

    /// Counts one sample: cools the page first, then counts the access; advances the clock if the
    /// count reaches the cooling threshold. Returns the page's counts after the sample.
    pub fn record(&mut self, page: PageIdx, kind: AccessKind) -> Heat {
        self.cool(page);
        let c = &mut self.pages[page as usize];
        let n = match kind {
            AccessKind::Read => &mut c.heat.reads,
            AccessKind::Write => &mut c.heat.writes,
        };
        *n = n.saturating_add(1);
        if *n >= self.cooling_threshold {
            self.clock += 1;
        }
        c.heat
    }
}

/// The two sides a page can be on: the fast tier, or any slower one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Fast,
    Slow,
}

impl Side {
    pub fn of(tier: TierId) -> Option<Side> {
        match tier {
            TierId::FAST => Some(Side::Fast),
            t if t.is_placed() => Some(Side::Slow),
            _ => None,
        }
    }

    /// The tier a move to this side targets.
    pub fn tier(self) -> TierId {
        match self {
            Side::Fast => TierId::FAST,
            Side::Slow => TierId::SLOW,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

const NIL: u32 = u32::MAX;
const NO_LIST: u16 = u16::MAX;

#[derive(Clone, Copy, Debug)]
struct Link {
    list: u16,
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link { list: NO_LIST, prev: NIL, next: NIL };

/// Per-side FIFO lists of pages by class: an intrusive doubly-linked list per (side, class), so a
/// page changes list in constant time.
#[derive(Clone, Debug)]
pub struct TierLists {
    classes: usize,
    head: Vec<u32>,
    tail: Vec<u32>,
    len: Vec<usize>,
    links: Vec<Link>,
}

impl TierLists {
    /// Lists for `classes` classes on each side.
    pub fn new(classes: usize) -> Self {
        let lists = 2 * classes;
        TierLists {
            classes,
            head: vec![NIL; lists],
            tail: vec![NIL; lists],
            len: vec![0; lists],
            links: Vec::new(),
        }
    }

    fn list(&self, side: Side, class: usize) -> usize {
        debug_assert!(class < self.classes);
        side.index() * self.classes + class
    }

    /// Which side and class the page is listed under; `None` for a page not listed.
    pub fn place(&self, page: PageIdx) -> Option<(Side, usize)> {
        let l = self.links.get(page as usize)?.list;
        (l != NO_LIST).then(|| {
            let l = l as usize;
            (if l < self.classes { Side::Fast } else { Side::Slow }, l % self.classes)
        })
    }

    pub fn len(&self, side: Side, class: usize) -> usize {
        self.len[self.list(side, class)]
    }

    /// The pages of one list, front (oldest) first.
    pub fn pages(&self, side: Side, class: usize) -> Vec<PageIdx> {
        let mut out = Vec::with_capacity(self.len(side, class));
        let mut p = self.head[self.list(side, class)];
        while p != NIL {
            out.push(p);
            p = self.links[p as usize].next;
        }
        out
    }

    /// The page that has been in this list the longest.
    pub fn front(&self, side: Side, class: usize) -> Option<PageIdx> {
        self.first(side, class, |_| true)
    }

    /// The page that has been in this list the longest of those `keep` accepts.
    pub fn first(&self, side: Side, class: usize, keep: impl Fn(PageIdx) -> bool) -> Option<PageIdx> {
        let mut p = self.head[self.list(side, class)];
        while p != NIL {
            if keep(p) {
                return Some(p);
            }
            p = self.links[p as usize].next;
        }
        None
    }

    fn unlink(&mut self, page: PageIdx) {
        let Link { list, prev, next } = self.links[page as usize];
        if list == NO_LIST {
            return;
        }
        let l = list as usize;
        match prev {
            NIL => self.head[l] = next,
            p => self.links[p as usize].next = next,
        }
        match next {
            NIL => self.tail[l] = prev,
            n => self.links[n as usize].prev = prev,
        }
        self.len[l] -= 1;
        self.links[page as usize] = UNLINKED;
    }

    fn push_back(&mut self, page: PageIdx, side: Side, class: usize) {
        self.unlink(page);
        let l = self.list(side, class);
        let last = self.tail[l];
        self.links[page as usize] = Link { list: l as u16, prev: last, next: NIL };
        match last {
            NIL => self.head[l] = page,
            t => self.links[t as usize].next = page,
        }
        self.tail[l] = page;
        self.len[l] += 1;
    }

    /// Puts a listed page at the tail of its side's `class` list, unless it is in that class
    /// already (a page that stays in its class keeps its place). Unlisted pages are left alone.
    pub fn set_class(&mut self, page: PageIdx, class: usize) {
        match self.place(page) {
            Some((side, c)) if c != class => self.push_back(page, side, class),
            _ => {}
        }
    }

    /// Puts a listed page at the tail of `side`'s list of its class (it was moved there).
    pub fn set_side(&mut self, page: PageIdx, side: Side) {
        match self.place(page) {
            Some((s, class)) if s != side => self.push_back(page, side, class),
            _ => {}
        }
    }

    /// Brings the lists in line with where the machine says pages are: a newly placed page joins
    /// `new_class` on its side (HeMem puts a newly allocated page in its tier's cold list); a page
    /// found on another side than listed (a planned move that failed) joins the tail of that
    /// side's list of its class; a page no longer placed leaves the lists.
    pub fn sync(&mut self, placement: &[TierId], new_class: usize) {
        if placement.len() > self.links.len() {
            self.links.resize(placement.len(), UNLINKED);
        }
        for (i, &tier) in placement.iter().enumerate() {
            let page = i as PageIdx;
            match (Side::of(tier), self.place(page)) {
                (Some(side), None) => self.push_back(page, side, new_class),
                (Some(side), Some((listed, class))) if side != listed => self.push_back(page, side, class),
                (None, Some(_)) => self.unlink(page),
                _ => {}
            }
        }
    }
}

/// One policy pass's promotions: each into free fast room if there is any, else against the
/// front page of the first non-empty fast list among the classes the policy allows as victims
/// (demoted first, so the fast tier never overflows); at most `budget` promotions per pass, as
/// HeMem caps the bytes it promotes per round. Moves update the lists as planned; the next
/// [`TierLists::sync`] corrects any that fail. Pages the machine's mover still has in flight are
/// neither promoted nor demoted (a move of one would fail `Busy`); the lists should hold them
/// where they are going ([`terrace_model::Observations::placement_after_moves`]).
pub struct Promoter {
    free_fast: u64,
    /// Pages the fast tier holds beyond its capacity.
    excess_fast: u64,
    free_slow: u64,
    left: usize,
    moves: Vec<Move>,
    in_flight: Vec<PageIdx>,
}

impl Promoter {
    /// A pass on a machine whose tiers (fastest first) are as `tiers` reports, with the pages in
    /// `in_flight` still being moved.
    pub fn new(tiers: &[TierStatus], budget: usize, in_flight: &[Move]) -> Self {
        let free = |t: usize| tiers.get(t).map_or(0, TierStatus::free_pages);
        let excess = tiers.first().map(|t| t.excess_pages());
        Promoter {
            free_fast: free(0),
            excess_fast: excess.unwrap_or(0),
            free_slow: free(1),
            left: budget,
            moves: Vec::new(),
            in_flight: in_flight.iter().map(|m| m.page).collect(),
        }
    }

    /// Promotions this pass may still make.
    pub fn left(&self) -> usize {
        self.left
    }

    /// Promotes `page`, demoting the front page of the first non-empty fast list of `victims` if
    /// the fast tier is full. Returns false, planning nothing, when the budget is spent or no room
    /// can be made; true, planning nothing, for a page in flight (the pass goes on).
    pub fn promote(&mut self, lists: &mut TierLists, page: PageIdx, victims: &[usize]) -> bool {
        if self.left == 0 {
            return false;
        }
        if self.in_flight.contains(&page) {
            return true;
        }
        if self.free_fast > 0 {
            self.free_fast -= 1;
            self.free_slow = self.free_slow.saturating_add(1);
        } else {
            // The demotion lands first, so the slow tier needs one free page for it.
            if self.free_slow == 0 {
                return false;
            }
            let moving = &self.in_flight;
            let Some(victim) =
                victims.iter().find_map(|&c| lists.first(Side::Fast, c, |p| !moving.contains(&p)))
            else {
                return false;
            };
            self.moves.push(Move { page: victim, to: Side::Slow.tier() });
            lists.set_side(victim, Side::Slow);
        }
        self.moves.push(Move { page, to: Side::Fast.tier() });
        lists.set_side(page, Side::Fast);
        self.left -= 1;
        true
    }

    /// Demotes what the fast tier holds beyond its capacity, each from the front of the first
    /// non-empty fast list of `victims` (in flight excepted), before the pass promotes anything.
    /// HeMem's allocator never lets DRAM run over: `pebs_allocate_page` takes a DRAM page only
    /// from DRAM's free list [EXT]. A live program's own first touches can run past
    /// `fast_limit_mib`, and a pass may have been planned on an occupancy the program changed
    /// while it was made (a program still filling its memory): this brings DRAM back within
    /// its capacity. The demotions need slow room; they do not use the promotion budget.
    pub fn demote_excess(&mut self, lists: &mut TierLists, victims: &[usize]) {
        while self.excess_fast > 0 && self.free_slow > 0 {
            let moving = &self.in_flight;
            let Some(victim) =
                victims.iter().find_map(|&c| lists.first(Side::Fast, c, |p| !moving.contains(&p)))
            else {
                break;
            };
            self.moves.push(Move { page: victim, to: Side::Slow.tier() });
            lists.set_side(victim, Side::Slow);
            self.excess_fast -= 1;
            self.free_slow -= 1;
        }
    }

    pub fn into_moves(self) -> Vec<Move> {
        self.moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: AccessKind = AccessKind::Read;
    const W: AccessKind = AccessKind::Write;

    #[test]
    fn cooling_halves_counts_exactly_once_per_clock_tick() {
        let mut c = HeatCounters::new(10);
        c.grow(2);
        for _ in 0..8 {
            c.record(1, W);
        }
        for _ in 0..6 {
            c.record(1, R);
        }
        assert_eq!(c.clock(), 0);
        // Page 0 reaches the threshold: one tick.
        for _ in 0..10 {
            c.record(0, R);
        }
        assert_eq!(c.clock(), 1);
        // Page 1 is halved once, before its next sample counts; the samples after that, in the
        // same clock period, are not halved again.
        assert_eq!(c.record(1, W), Heat { reads: 3, writes: 5 });
        assert_eq!(c.record(1, W), Heat { reads: 3, writes: 6 });
        assert_eq!(c.cool(1), Heat { reads: 3, writes: 6 });
        // Two more ticks (page 0 restarts from 5 and reaches 10 twice): halved twice, once each.
        for _ in 0..5 {
            c.record(0, R);
        }
        for _ in 0..5 {
            c.record(0, R);
        }
        assert_eq!(c.clock(), 3);
        assert_eq!(c.cool(1), Heat { reads: 0, writes: 1 });
        assert_eq!(c.cool(1), Heat { reads: 0, writes: 1 });
    }

    #[test]
    fn a_page_added_later_is_not_cooled_for_ticks_before_it_existed() {
        let mut c = HeatCounters::new(2);
        c.grow(1);
        c.record(0, W);
        c.record(0, W);
        assert_eq!(c.clock(), 1);
        c.grow(2);
        c.record(1, R);
        assert_eq!(c.cool(1), Heat { reads: 1, writes: 0 });
    }

    #[test]
    fn lists_are_fifo_and_a_page_keeps_its_place_while_its_class_holds() {
        let mut l = TierLists::new(2);
        let f = TierId::FAST;
        l.sync(&[f, f, f, TierId::SLOW], 1);
        assert_eq!(l.pages(Side::Fast, 1), [0, 1, 2]);
        l.set_class(0, 0);
        l.set_class(1, 1);
        l.set_class(0, 1);
        assert_eq!(l.pages(Side::Fast, 1), [1, 2, 0]);
        assert_eq!(l.front(Side::Fast, 1), Some(1));
        l.set_side(3, Side::Fast);
        assert_eq!(l.pages(Side::Fast, 1), [1, 2, 0, 3]);
        assert_eq!(l.len(Side::Slow, 1), 0);
    }

    #[test]
    fn sync_follows_the_machine_placement() {
        let mut l = TierLists::new(2);
        l.sync(&[TierId::FAST, TierId::SLOW], 1);
        l.set_class(1, 0);
        // The policy planned page 1 up, but the move failed; page 0 was unmapped; page 2 appeared.
        l.set_side(1, Side::Fast);
        l.sync(&[TierId::UNPLACED, TierId::SLOW, TierId::SLOW], 1);
        assert_eq!(l.place(0), None);
        assert_eq!(l.place(1), Some((Side::Slow, 0)));
        assert_eq!(l.place(2), Some((Side::Slow, 1)));
        assert_eq!(l.len(Side::Fast, 0) + l.len(Side::Fast, 1), 0);
    }
}
