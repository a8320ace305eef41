//! Where every page is, with capacity enforced, and the first-touch rules that place new pages.

use terrace_model::{InitialPlacement, PageIdx, TierId};

/// Page-to-tier map of the simulated machine.
///
/// A page in flight (docs/model.md §4, "Movers") stays in `tiers` and `used` at its old tier
/// until its copy completes, and holds a page of room at its destination meanwhile
/// (`reserved`), as the kernel holds both the old and the new page during a copy. A promoted
/// page whose old frame is kept as its shadow (mtier §3.1, docs/model.md §4, "Shadow copies")
/// holds that frame in its old tier (`shadows`) until the page goes back to it or a write drops
/// it. A tier's occupancy is `used + reserved + shadows`, never above its capacity.
#[derive(Clone, Debug)]
pub struct Placement {
    pub tiers: Vec<TierId>,
    pub used: Vec<u64>,
    /// Pages of room held, per tier, for pages on their way there.
    pub reserved: Vec<u64>,
    /// Per page: the tier holding its shadow, or [`TierId::UNPLACED`] when it has none.
    pub shadow_of: Vec<TierId>,
    /// Shadow frames held, per tier.
    pub shadows: Vec<u64>,
    /// Most shadow frames held at once, all tiers together.
    pub shadow_peak: u64,
    /// Highest occupancy (`used + reserved`) ever seen, per tier (checked against capacity by tests).
    pub peak: Vec<u64>,
    pub capacity: Vec<Option<u64>>,
    rule: InitialPlacement,
    /// Position in the interleave cycle.
    interleave_turn: u64,
    /// Per page, the tier its allocation site was advised to (object tiering §3.5), or
    /// [`TierId::UNPLACED`]; empty until the first advised allocation.
    preferred: Vec<TierId>,
    /// Pages first touched in the tier their site was advised to.
    pub advised_pages: u64,
}

impl Placement {
    /// `capacity` has one entry per tier, fastest first (`None`: unbounded).
    pub fn new(pages: u64, capacity: Vec<Option<u64>>, rule: InitialPlacement) -> Self {
        let n = capacity.len();
        Placement {
            tiers: vec![TierId::UNPLACED; pages as usize],
            used: vec![0; n],
            reserved: vec![0; n],
            shadow_of: vec![TierId::UNPLACED; pages as usize],
            shadows: vec![0; n],
            shadow_peak: 0,
            peak: vec![0; n],
            capacity,
            rule,
            interleave_turn: 0,
            preferred: Vec::new(),
            advised_pages: 0,
        }
    }

    /// Places `page`, when it is first touched, in tier `t` if `t` then has room (site advice,
    /// docs/model.md §5); `TierId::UNPLACED` withdraws that.
    pub fn prefer(&mut self, page: PageIdx, t: TierId) {
        if self.preferred.is_empty() {
            if !t.is_placed() {
                return;
            }
            self.preferred = vec![TierId::UNPLACED; self.tiers.len()];
        }
        if let Some(p) = self.preferred.get_mut(page as usize) {
            *p = t;
        }
    }

    /// Frees `page` (its object was freed, docs/model.md §5): it occupies no tier any more, its
    /// shadow frame is freed too, and its next touch places it afresh. Returns the tier it left.
    pub fn release(&mut self, page: PageIdx) -> Option<TierId> {
        self.drop_shadow(page);
        if let Some(p) = self.preferred.get_mut(page as usize) {
            *p = TierId::UNPLACED;
        }
        let slot = self.tiers.get_mut(page as usize)?;
        let t = std::mem::replace(slot, TierId::UNPLACED);
        if !t.is_placed() {
            return None;
        }
        self.used[t.index()] -= 1;
        Some(t)
    }

    pub fn has_room(&self, t: usize) -> bool {
        self.capacity[t].is_none_or(|c| self.occupied(t) < c)
    }

    /// Pages placed in tier `t` plus the room held there for pages on their way and the shadows
    /// kept there.
    pub fn occupied(&self, t: usize) -> u64 {
        self.used[t] + self.reserved[t] + self.shadows[t]
    }

    /// Whether any page has a shadow (the replay's write check is skipped when none has).
    pub fn has_shadows(&self) -> bool {
        self.shadows.iter().any(|&n| n > 0)
    }

    /// Whether a page leaving tier `t` may keep its frame there as a shadow: only while the room
    /// left in `t` still holds every page never touched yet, so that a shadow never takes the
    /// room a first touch needs (nothing reclaims shadows for room; docs/model.md §4).
    pub fn may_keep_shadow(&self, t: usize) -> bool {
        let Some(c) = self.capacity[t] else { return true };
        let untouched = self.tiers.len() as u64 - self.used.iter().sum::<u64>();
        c.saturating_sub(self.occupied(t)) >= untouched
    }

    /// `page` has just left tier `t`, which keeps its old frame as the page's shadow.
    pub fn keep_shadow(&mut self, page: PageIdx, t: TierId) {
        self.shadow_of[page as usize] = t;
        self.shadows[t.index()] += 1;
        self.note_peak(t.index());
        self.shadow_peak = self.shadow_peak.max(self.shadows.iter().sum());
    }

    /// Drops `page`'s shadow, if it has one (a write made it stale): its frame is free again.
    /// Returns the tier it was in.
    pub fn drop_shadow(&mut self, page: PageIdx) -> Option<TierId> {
        let t = std::mem::replace(self.shadow_of.get_mut(page as usize)?, TierId::UNPLACED);
        if !t.is_placed() {
            return None;
        }
        self.shadows[t.index()] -= 1;
        Some(t)
    }

    /// `page` goes back to its shadow in tier `to`: a mapping switch, no room needed there.
    pub fn switch_to_shadow(&mut self, page: PageIdx, to: TierId) {
        debug_assert_eq!(self.shadow_of[page as usize], to, "a switch needs the page's shadow");
        self.shadow_of[page as usize] = TierId::UNPLACED;
        self.shadows[to.index()] -= 1;
        self.set(page, to);
    }

    fn note_peak(&mut self, t: usize) {
        self.peak[t] = self.peak[t].max(self.occupied(t));
    }

    fn first_with_room_from(&self, t: usize) -> Option<usize> {
        let n = self.capacity.len();
        (t..n).chain(0..t).find(|&i| self.has_room(i))
    }

    /// Places a page on first touch by the rule. `None` when every tier is full (the machine
    /// checks at start that the footprint fits, so copies in flight and shadows hold the room).
    #[inline(never)]
    pub fn first_touch(&mut self, page: PageIdx) -> Option<TierId> {
        // Site advice first, while the advised tier has room; then the rule.
        if let Some(&t) = self.preferred.get(page as usize) {
            if t.is_placed() && t.index() < self.capacity.len() && self.has_room(t.index()) {
                self.preferred[page as usize] = TierId::UNPLACED;
                self.advised_pages += 1;
                self.set(page, t);
                return Some(t);
            }
        }
        let wanted = match &self.rule {
            // Linux node-local allocation: the local (fast) node while it has room, then the next.
            InitialPlacement::FirstTouch => 0,
            InitialPlacement::Tier(t) => t.index().min(self.capacity.len() - 1),
            InitialPlacement::Pages { tiers } => tiers
                .get(page as usize)
                .filter(|t| t.is_placed())
                .map_or(0, |t| t.index())
                .min(self.capacity.len() - 1),
            InitialPlacement::Interleave { weights } => {
                let n = self.capacity.len();
                let total: u64 = weights.iter().take(n).map(|&w| w as u64).sum::<u64>().max(1);
                let mut turn = self.interleave_turn % total;
                self.interleave_turn += 1;
                let mut pick = 0;
                for (i, &w) in weights.iter().take(n).enumerate() {
                    if turn < w as u64 {
                        pick = i;
                        break;
                    }
                    turn -= w as u64;
                }
                pick
            }
        };
        let t = self.first_with_room_from(wanted)?;
        self.set(page, TierId(t as u8));
        Some(TierId(t as u8))
    }

    fn set(&mut self, page: PageIdx, to: TierId) {
        let slot = &mut self.tiers[page as usize];
        if slot.is_placed() {
            self.used[slot.index()] -= 1;
        }
        *slot = to;
        self.used[to.index()] += 1;
        self.note_peak(to.index());
    }

    /// Holds a page of room in tier `t` for a page on its way there (room checked by the caller).
    pub fn reserve(&mut self, t: usize) {
        self.reserved[t] += 1;
        self.note_peak(t);
    }

    /// A page arrives in tier `to`, on the room held for it there.
    pub fn land(&mut self, page: PageIdx, to: TierId) {
        self.reserved[to.index()] -= 1;
        self.set(page, to);
    }

    /// Swaps two pages' tiers; occupancy does not change. (A shadowed page is never exchanged:
    /// the machine drops its shadow first.)
    pub fn swap(&mut self, a: PageIdx, b: PageIdx) {
        self.tiers.swap(a as usize, b as usize);
    }

    /// Every placed page counted once, and occupancy within capacity.
    pub fn is_consistent(&self) -> bool {
        let n = self.capacity.len();
        let mut count = vec![0u64; n];
        for t in &self.tiers {
            if t.is_placed() {
                if t.index() >= n {
                    return false;
                }
                count[t.index()] += 1;
            }
        }
        let mut shadows = vec![0u64; n];
        for (page, s) in self.shadow_of.iter().enumerate() {
            if s.is_placed() {
                // A shadow is in another tier than its page.
                if s.index() >= n || self.tiers[page] == *s {
                    return false;
                }
                shadows[s.index()] += 1;
            }
        }
        count == self.used
            && shadows == self.shadows
            && (0..n).all(|t| self.capacity[t].is_none_or(|c| self.occupied(t) <= c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_touch_fills_the_fast_tier_then_spills() {
        let mut p = Placement::new(10, vec![Some(3), None], InitialPlacement::FirstTouch);
        let got: Vec<_> = (0..5).map(|i| p.first_touch(i).unwrap().0).collect();
        assert_eq!(got, [0, 0, 0, 1, 1]);
        assert!(p.is_consistent());
    }

    #[test]
    fn weighted_interleave_follows_its_weights() {
        let mut p =
            Placement::new(12, vec![None, None], InitialPlacement::Interleave { weights: vec![2, 1] });
        let got: Vec<_> = (0..6).map(|i| p.first_touch(i).unwrap().0).collect();
        assert_eq!(got, [0, 0, 1, 0, 0, 1]);
    }

    #[test]
    fn a_full_machine_places_nothing() {
        let mut p = Placement::new(4, vec![Some(1), Some(1)], InitialPlacement::Tier(TierId::SLOW));
        assert_eq!(p.first_touch(0), Some(TierId::SLOW));
        assert_eq!(p.first_touch(1), Some(TierId::FAST));
        assert_eq!(p.first_touch(2), None);
    }

    #[test]
    fn three_tiers_fill_in_order_and_interleave_over_all_of_them() {
        let mut p = Placement::new(10, vec![Some(2), Some(3), None], InitialPlacement::FirstTouch);
        let got: Vec<_> = (0..7).map(|i| p.first_touch(i).unwrap().0).collect();
        assert_eq!(got, [0, 0, 1, 1, 1, 2, 2]);
        assert!(p.is_consistent());
        let mut p = Placement::new(
            8,
            vec![None, None, None],
            InitialPlacement::Interleave { weights: vec![1, 2, 1] },
        );
        let got: Vec<_> = (0..8).map(|i| p.first_touch(i).unwrap().0).collect();
        assert_eq!(got, [0, 1, 1, 2, 0, 1, 1, 2]);
        // Everything in the last tier: `Tier` names it.
        let mut p = Placement::new(2, vec![None, None, Some(1)], InitialPlacement::Tier(TierId(2)));
        assert_eq!(p.first_touch(0), Some(TierId(2)));
        assert_eq!(p.first_touch(1), Some(TierId(0)), "a full tier passes the page on, wrapping");
    }
}
