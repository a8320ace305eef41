//! One page numbering for several processes: the policy sees the pages of every process the live
//! machine manages (a program and its children, or a cgroup's processes) as one array, as it sees
//! one process's pages.
//!
//! Each process keeps its own stable index ([`crate::process::PageIndex`]); this maps the policy's
//! page numbers to (process, page of that process) in runs. A process's new pages get the next
//! free numbers, and the numbers of a process that left are handed to the next one that grows
//! (its pages read as unplaced meanwhile), so a long-lived group of short-lived processes (a
//! build, a cgroup of workers) does not grow the policy's arrays for ever. With one process the
//! mapping is the identity, so a single program is seen exactly as before.

/// A process of the group, by the number the machine gave it (pids can be reused).
pub type MemberId = u64;

/// Consecutive policy pages that are consecutive pages of one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub global: u32,
    pub member: MemberId,
    pub local: u32,
    pub len: u32,
}

#[derive(Clone, Debug, Default)]
pub struct PageSpace {
    /// Every run in use, sorted by `global`.
    runs: Vec<Run>,
    /// Numbers of members that left, (first, len), sorted by first.
    free: Vec<(u32, u32)>,
    len: u32,
}

impl PageSpace {
    /// Policy pages in all (some may belong to no member now: they read as unplaced).
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The runs in use, by policy page.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Pages of `member` that have policy page numbers.
    pub fn member_pages(&self, member: MemberId) -> u32 {
        self.runs.iter().filter(|r| r.member == member).map(|r| r.len).sum()
    }

    /// Gives `member`'s pages `[0, pages)` policy page numbers, keeping those they have: freed
    /// numbers first, then new ones at the end.
    pub fn grow(&mut self, member: MemberId, pages: u32) {
        let mut have = self.member_pages(member);
        while have < pages {
            let need = pages - have;
            let (global, len) = match self.free.first_mut() {
                Some(f) => {
                    let taken = (f.0, f.1.min(need));
                    f.0 += taken.1;
                    f.1 -= taken.1;
                    if f.1 == 0 {
                        self.free.remove(0);
                    }
                    taken
                }
                None => {
                    let first = self.len;
                    self.len += need;
                    (first, need)
                }
            };
            self.insert(Run { global, member, local: have, len });
            have += len;
        }
    }

    fn insert(&mut self, run: Run) {
        let at = self.runs.partition_point(|r| r.global < run.global);
        // Merged with the run before it when it continues it in both numberings.
        if let Some(prev) = at.checked_sub(1).map(|i| &mut self.runs[i]) {
            if prev.member == run.member
                && prev.global + prev.len == run.global
                && prev.local + prev.len == run.local
            {
                prev.len += run.len;
                return;
            }
        }
        self.runs.insert(at, run);
    }

    /// The member left: its numbers are free for the next member that grows.
    pub fn release(&mut self, member: MemberId) {
        let mut freed: Vec<(u32, u32)> = Vec::new();
        self.runs.retain(|r| {
            if r.member == member {
                freed.push((r.global, r.len));
            }
            r.member != member
        });
        self.free.extend(freed);
        self.free.sort_unstable();
        // Adjacent free ranges become one.
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(self.free.len());
        for (first, len) in self.free.drain(..) {
            match merged.last_mut() {
                Some(last) if last.0 + last.1 == first => last.1 += len,
                _ => merged.push((first, len)),
            }
        }
        self.free = merged;
    }

    /// The member and its page behind policy page `global`, if a member holds it.
    pub fn local(&self, global: u32) -> Option<(MemberId, u32)> {
        let at = self.runs.partition_point(|r| r.global + r.len <= global);
        let r = self.runs.get(at).filter(|r| r.global <= global)?;
        Some((r.member, r.local + (global - r.global)))
    }

    /// The policy page of `member`'s page `local`, if it has one.
    pub fn global(&self, member: MemberId, local: u32) -> Option<u32> {
        self.runs
            .iter()
            .find(|r| r.member == member && (r.local..r.local + r.len).contains(&local))
            .map(|r| r.global + (local - r.local))
    }

    /// A lookup of `member`'s policy pages, for translating many of its pages at once.
    pub fn of_member(&self, member: MemberId) -> MemberRuns {
        let mut runs: Vec<Run> = self.runs.iter().filter(|r| r.member == member).copied().collect();
        runs.sort_unstable_by_key(|r| r.local);
        MemberRuns { runs }
    }
}

/// One member's runs, by its own page number.
pub struct MemberRuns {
    runs: Vec<Run>,
}

impl MemberRuns {
    pub fn global(&self, local: u32) -> Option<u32> {
        let at = self.runs.partition_point(|r| r.local + r.len <= local);
        let r = self.runs.get(at).filter(|r| r.local <= local)?;
        Some(r.global + (local - r.local))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_member_is_numbered_as_it_numbers_itself() {
        let mut s = PageSpace::default();
        s.grow(1, 10);
        s.grow(1, 25);
        assert_eq!(s.len(), 25);
        assert_eq!(s.runs().len(), 1, "growth at the end continues the run");
        for p in 0..25 {
            assert_eq!(s.local(p), Some((1, p)));
            assert_eq!(s.global(1, p), Some(p));
        }
    }

    #[test]
    fn a_member_that_left_hands_its_numbers_to_the_next() {
        let mut s = PageSpace::default();
        s.grow(1, 4);
        s.grow(2, 6);
        s.grow(1, 8);
        assert_eq!(s.global(1, 5), Some(11), "member 1's growth follows member 2's pages");
        s.release(2);
        assert_eq!(s.local(5), None, "its pages read as nobody's");
        s.grow(3, 10);
        assert_eq!(s.len(), 18, "6 freed numbers reused, 4 new ones");
        assert_eq!(s.global(3, 0), Some(4));
        assert_eq!(s.global(3, 5), Some(9));
        assert_eq!(s.global(3, 6), Some(14));
        assert_eq!(s.global(3, 9), Some(17));
    }

    proptest! {
        /// Whatever members grow and leave, every policy page belongs to at most one member's
        /// page and back, every member's pages are all numbered, and no number is lost.
        #[test]
        fn numbers_are_a_bijection(ops in proptest::collection::vec((0usize..8, 0u32..200, any::<bool>()), 1..60)) {
            let mut s = PageSpace::default();
            // Member -> its pages; a member that left never comes back (its id is retired).
            let mut sizes = std::collections::BTreeMap::<u64, u32>::new();
            let mut next = 0u64;
            for (which, pages, leave) in ops {
                let existing: Vec<u64> = sizes.keys().copied().collect();
                if leave {
                    if let Some(&m) = existing.get(which % existing.len().max(1)) {
                        sizes.remove(&m);
                        s.release(m);
                    }
                    continue;
                }
                let m = match existing.get(which) {
                    Some(&m) => m,
                    None => { next += 1; next }
                };
                let size = sizes.get(&m).copied().unwrap_or(0).max(pages);
                s.grow(m, size);
                sizes.insert(m, size);
            }
            let mut seen = std::collections::HashSet::new();
            for (&m, &size) in &sizes {
                let runs = s.of_member(m);
                for local in 0..size {
                    let g = s.global(m, local).expect("numbered");
                    prop_assert_eq!(runs.global(local), Some(g));
                    prop_assert_eq!(s.local(g), Some((m, local)));
                    prop_assert!(seen.insert(g), "number {} given twice", g);
                }
            }
            let used: u32 = sizes.values().sum();
            let free: u32 = s.free.iter().map(|f| f.1).sum();
            prop_assert_eq!(used + free, s.len() as u32, "every number is used or free");
        }
    }
}
