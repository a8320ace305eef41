//! A bounded cache of freed mappings, reused for new objects of the same number of pages.
//!
//! Why: a fresh anonymous mapping costs a page fault (and the kernel's zeroing) per page on first
//! touch, plus mmap and munmap; on an allocation-heavy program that made the runtime several
//! times slower than the system allocator, which reuses warm memory (docs/objects-runtime.md,
//! "Overhead"). A freed object of up to [`MAX_PAGES`] pages whose mapping has no memory policy of
//! its own is kept, up to a total set by `TERRACE_OBJECTS_CACHE_MB` (default [`DEFAULT_MB`] MiB,
//! 0 = off), and handed to the next unadvised request of the same page count. Its pages stay
//! resident and where they are: the new object starts on the old one's nodes, which Terrace sees
//! as an alloc event at a known address like any other. Advised requests always take a fresh
//! mapping, and bound mappings are never cached, so advice keeps meaning "first touch on the
//! advised node".
//!
//! One lock-free stack per page count; the link to the next cached mapping is stored in the
//! first word of the mapping itself (the runtime owns it while it is cached). The head packs the
//! page number of the top mapping (35 bits) with a 29-bit counter bumped by every push and pop,
//! so a pop that raced with a pop-pop-push of the same mapping fails its compare-and-swap (ABA).
//! Across fork the stacks are copied with the rest of private memory; a mapping a vanished thread
//! was popping is merely leaked in the child.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::PAGE;

/// Largest object, in pages, that is cached (1 MiB).
pub const MAX_PAGES: usize = 256;
/// Default cap on the bytes held in the cache.
pub const DEFAULT_MB: usize = 32;

static HEADS: [AtomicU64; MAX_PAGES + 1] = [const { AtomicU64::new(0) }; MAX_PAGES + 1];
static HELD: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_MB << 20);

const PAGE_BITS: u32 = 35;
const PAGE_MASK: u64 = (1 << PAGE_BITS) - 1;

fn pack(addr: usize, tag: u64) -> u64 {
    ((addr as u64 >> 12) & PAGE_MASK) | (tag << PAGE_BITS)
}

fn addr_of(head: u64) -> usize {
    ((head & PAGE_MASK) << 12) as usize
}

fn tag_of(head: u64) -> u64 {
    head >> PAGE_BITS
}

/// The bytes to map for an object of `len` bytes (a page multiple) so that its mapping can be
/// cached and reused: up to 8 pages exactly, then four classes per doubling (9-10, 11-12, 13-14,
/// 15-16, 17-20 pages, ...), at most a quarter more than asked; beyond [`MAX_PAGES`], `len`.
pub fn class_len(len: usize) -> usize {
    let pages = len / PAGE;
    if pages <= 8 || pages > MAX_PAGES {
        return len;
    }
    let step = 1usize << (usize::BITS - 1 - pages.leading_zeros() - 2);
    pages.next_multiple_of(step) * PAGE
}

/// Reads `TERRACE_OBJECTS_CACHE_MB` (a decimal number of MiB) without allocating.
pub fn init() {
    // SAFETY: getenv with a NUL-terminated name; the value is a NUL-terminated string we only read.
    let v = unsafe { libc::getenv(c"TERRACE_OBJECTS_CACHE_MB".as_ptr()) };
    if v.is_null() {
        return;
    }
    let mut mb: usize = 0;
    let mut p = v.cast::<u8>();
    // SAFETY: walking the NUL-terminated value.
    unsafe {
        while (*p).is_ascii_digit() {
            mb = mb.saturating_mul(10).saturating_add(usize::from(*p - b'0'));
            p = p.add(1);
        }
    }
    LIMIT.store(mb.saturating_mul(1 << 20), Ordering::Relaxed);
}

/// Offers a freed mapping of `len` bytes (page multiple) to the cache; false if it was not
/// taken (too big, not of a class size, or the cache is full), and the caller unmaps it.
pub fn put(addr: usize, len: usize) -> bool {
    let pages = len / PAGE;
    if pages == 0 || pages > MAX_PAGES || class_len(len) != len || addr >> (12 + PAGE_BITS) != 0 {
        return false;
    }
    let held = HELD.fetch_add(len, Ordering::Relaxed);
    if held + len > LIMIT.load(Ordering::Relaxed) {
        HELD.fetch_sub(len, Ordering::Relaxed);
        return false;
    }
    let head = &HEADS[pages];
    let mut cur = head.load(Ordering::Relaxed);
    loop {
        // SAFETY: the mapping is the runtime's and unused; its first word holds the link.
        unsafe { (addr as *mut u64).write(cur) };
        let new = pack(addr, tag_of(cur).wrapping_add(1));
        match head.compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
}

/// A cached mapping of exactly `len` bytes (a class size), if there is one. Its contents are stale.
pub fn take(len: usize) -> Option<usize> {
    let pages = len / PAGE;
    if pages == 0 || pages > MAX_PAGES {
        return None;
    }
    let head = &HEADS[pages];
    let mut cur = head.load(Ordering::Acquire);
    loop {
        let addr = addr_of(cur);
        if addr == 0 {
            return None;
        }
        // SAFETY: a mapping on the stack stays mapped (cached mappings are never unmapped), so the
        // link is readable even if another thread pops it meanwhile; the tag then fails our CAS.
        let next = unsafe { (addr as *const u64).read_volatile() };
        let new = (next & PAGE_MASK) | (tag_of(cur).wrapping_add(1) << PAGE_BITS);
        match head.compare_exchange_weak(cur, new, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                HELD.fetch_sub(len, Ordering::Relaxed);
                return Some(addr);
            }
            Err(now) => cur = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_waste_at_most_a_quarter_and_are_fixed_points() {
        for pages in 1..=MAX_PAGES + 4 {
            let len = pages * PAGE;
            let c = class_len(len);
            assert!(c >= len && c.is_multiple_of(PAGE));
            assert!(c * 4 <= len * 5, "{pages} pages -> {} pages", c / PAGE);
            assert_eq!(class_len(c), c, "a class size is its own class");
            if pages > 8 && pages <= MAX_PAGES {
                assert!(c / PAGE <= MAX_PAGES);
            }
        }
        assert_eq!(class_len(9 * PAGE), 10 * PAGE);
        assert_eq!(class_len(17 * PAGE), 20 * PAGE);
        assert_eq!(class_len(129 * PAGE), 160 * PAGE);
    }

    #[test]
    fn cached_mappings_come_back_by_class_and_respect_the_cap() {
        let len = 10 * PAGE;
        let a = map_for_test(len);
        let b = map_for_test(len);
        assert!(put(a, len));
        assert!(put(b, len));
        assert!(!put(a + PAGE, 9 * PAGE), "not a class size");
        assert_eq!(take(len), Some(b));
        assert_eq!(take(len), Some(a));
        assert_eq!(take(len), None);
        assert_eq!(take(12 * PAGE), None);
        LIMIT.store(len, Ordering::Relaxed);
        assert!(put(a, len));
        assert!(!put(b, len), "over the cap");
        assert_eq!(take(len), Some(a));
        LIMIT.store(DEFAULT_MB << 20, Ordering::Relaxed);
    }

    fn map_for_test(len: usize) -> usize {
        let p = crate::runtime::map(len);
        assert!(!p.is_null());
        p as usize
    }
}
