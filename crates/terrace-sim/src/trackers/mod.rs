//! The simulated machine's trackers: modelled twins of the live machine's (docs/live.md, "What the
//! live machine observes"; docs/model.md §6).
//!
//! The replay hands each enabled tracker the slice it just replayed, as the pages it touched in
//! order ([`Touch`]); a tracker records what its hardware or kernel twin would have seen, and the
//! machine charges its cost when it is observed. A tracker is a part: the replay has one loop, and
//! a new tracker implements [`SliceTracker`] instead of adding a replay variant.

pub mod future;
pub mod hint_faults;
pub mod page_bits;
pub mod sampling;

/// One access as a tracker sees it: the page (of the policy's page size) and whether it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    pub page: u32,
    pub write: bool,
}

/// A tracker fed with every replayed slice's accesses, in program order.
pub trait SliceTracker {
    fn slice(&mut self, touches: &[Touch]);
}

impl SliceTracker for page_bits::PageBits {
    fn slice(&mut self, touches: &[Touch]) {
        for t in touches {
            self.touch(t.page as usize, t.write);
        }
    }
}

impl SliceTracker for sampling::Sampler {
    fn slice(&mut self, touches: &[Touch]) {
        for t in touches {
            self.count(t.page as usize, t.write);
        }
    }
}

impl SliceTracker for hint_faults::HintFaults {
    fn slice(&mut self, touches: &[Touch]) {
        for t in touches {
            self.touch(t.page as usize, t.write);
        }
    }
}
