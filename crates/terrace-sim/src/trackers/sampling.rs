//! Access sampling: one access in every `period` is reported with its page and kind, as PEBS
//! does for loads and stores (HeMem; HPWP thesis ch. IV "Event Manager", §5.2).

use terrace_model::{AccessKind, PageIdx, Sample};

#[derive(Clone, Debug)]
pub struct Sampler {
    pub period: u32,
    countdown: u32,
    pub samples: Vec<Sample>,
    /// Samples taken since the start, for cost accounting.
    pub taken: u64,
}

impl Sampler {
    pub fn new(period: u32) -> Self {
        let period = period.max(1);
        Sampler { period, countdown: period, samples: Vec::new(), taken: 0 }
    }

    /// Counts one access; records it if it is the period-th.
    #[inline(always)]
    pub fn count(&mut self, page: usize, write: bool) {
        self.countdown -= 1;
        if self.countdown == 0 {
            self.countdown = self.period;
            self.take(page as PageIdx, write);
        }
    }

    #[inline(never)]
    fn take(&mut self, page: PageIdx, write: bool) {
        self.taken += 1;
        self.samples.push(Sample { page, kind: if write { AccessKind::Write } else { AccessKind::Read } });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_exactly_one_sample_per_period() {
        let mut s = Sampler::new(7);
        for i in 0..70 {
            s.count(i, i % 2 == 0);
        }
        assert_eq!(s.samples.len(), 10);
        assert_eq!(s.samples[0].page, 6);
        assert_eq!(s.samples[1].page, 13);
    }
}
