//! Optane Memory Mode: the fast tier as a direct-mapped, write-back cache of the slow tier,
//! in 64-byte lines (Ambix §3 "MemM"). Misses read the line from the slow tier and fill it into
//! the fast tier; a dirty victim is written back to the slow tier (the machine charges that write
//! like any other, so consecutive victims combine in the slow tier's media unit).

/// Tags of a direct-mapped cache; a line's slot is its line number modulo the slot count.
#[derive(Clone, Debug)]
pub struct DirectMappedCache {
    /// Line number + 1 held in each slot (0 = empty), and its dirty bit in the top bit.
    slots: Vec<u64>,
}

const DIRTY: u64 = 1 << 63;

/// What one access did to the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    Hit,
    /// Filled from the slow tier; `writeback` holds the byte address of the dirty line evicted,
    /// if one was.
    Miss {
        writeback: Option<u64>,
    },
}

impl DirectMappedCache {
    pub fn new(capacity_bytes: u64) -> Self {
        DirectMappedCache { slots: vec![0; (capacity_bytes / 64).max(1) as usize] }
    }

    #[inline(always)]
    pub fn access(&mut self, addr: u64, write: bool) -> CacheOutcome {
        let line = addr >> 6;
        let n = self.slots.len() as u64;
        let slot = &mut self.slots[(line % n) as usize];
        let tag = line + 1;
        let dirty = if write { DIRTY } else { 0 };
        if *slot & !DIRTY == tag {
            *slot |= dirty;
            CacheOutcome::Hit
        } else {
            let writeback = (*slot & DIRTY != 0).then(|| ((*slot & !DIRTY) - 1) << 6);
            *slot = tag | dirty;
            CacheOutcome::Miss { writeback }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicting_lines_evict_each_other_and_write_back_when_dirty() {
        let mut c = DirectMappedCache::new(64 * 4);
        assert_eq!(c.access(0, true), CacheOutcome::Miss { writeback: None });
        assert_eq!(c.access(8, false), CacheOutcome::Hit);
        // Line 4 maps to the same slot as line 0, which goes back to its own address.
        assert_eq!(c.access(4 * 64, false), CacheOutcome::Miss { writeback: Some(0) });
        assert_eq!(c.access(0, false), CacheOutcome::Miss { writeback: None });
        assert_eq!(c.access(64, false), CacheOutcome::Miss { writeback: None });
        assert_eq!(c.access(64, false), CacheOutcome::Hit);
    }
}
