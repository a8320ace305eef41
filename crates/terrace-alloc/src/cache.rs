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
//! One stack per page count, each behind a try-lock: the link to the next cached mapping is
//! stored in the first word of the mapping itself (the runtime owns it while it is cached). A
//! `take` or `put` that finds its stack's lock held does not wait: it maps afresh, or unmaps,
//! as it would with the cache off. So no thread ever waits for another, a signal handler that
//! allocates inside an interrupted `take` cannot deadlock, and a fork child whose parent had a
//! lock held only finds that size's cache off.
//!
//! Why not lock-free: until 2026-11-29 each stack was a lock-free (Treiber) stack with a tagged
//! head, which guards the compare-and-swap against ABA but not the read of the top mapping's
//! link: a thread that had loaded the head could read the link after another thread had popped
//! that mapping, handed it to the program, and the program had freed it past the cache's cap
//! (unmapped) or grown it by `mremap` (moved). The read then faulted, and the program died of
//! SIGSEGV (tests/c/threads.c, about once in 2,000 runs on 2 busy cores; core dump in
//! `cache::take`). Under the lock the top mapping is the cache's, and mapped.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::PAGE;

/// Largest object, in pages, that is cached (1 MiB).
pub const MAX_PAGES: usize = 256;
/// Default cap on the bytes held in the cache.
pub const DEFAULT_MB: usize = 32;

/// Each page count's top cached mapping (0: none).
static HEADS: [AtomicUsize; MAX_PAGES + 1] = [const { AtomicUsize::new(0) }; MAX_PAGES + 1];
/// Each page count's try-lock.
static LOCKS: [AtomicBool; MAX_PAGES + 1] = [const { AtomicBool::new(false) }; MAX_PAGES + 1];
static HELD: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_MB << 20);

/// Holds a stack's lock; released when dropped.
struct Locked(&'static AtomicBool);

impl Locked {
    /// The lock of `pages`'s stack, if no one holds it.
    fn try_lock(pages: usize) -> Option<Locked> {
        let lock = &LOCKS[pages];
        lock.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).ok().map(|_| Locked(lock))
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
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
/// taken (too big, not of a class size, the cache full, or its stack busy), and the caller
/// unmaps it.
pub fn put(addr: usize, len: usize) -> bool {
    let pages = len / PAGE;
    if pages == 0 || pages > MAX_PAGES || class_len(len) != len {
        return false;
    }
    let held = HELD.fetch_add(len, Ordering::Relaxed);
    if held + len > LIMIT.load(Ordering::Relaxed) {
        HELD.fetch_sub(len, Ordering::Relaxed);
        return false;
    }
    let Some(_locked) = Locked::try_lock(pages) else {
        HELD.fetch_sub(len, Ordering::Relaxed);
        return false;
    };
    let head = &HEADS[pages];
    // SAFETY: the mapping is the runtime's and unused; its first word holds the link.
    unsafe { (addr as *mut usize).write(head.load(Ordering::Relaxed)) };
    head.store(addr, Ordering::Relaxed);
    true
}

/// A cached mapping of exactly `len` bytes (a class size), if there is one and its stack is not
/// busy. Its contents are stale.
pub fn take(len: usize) -> Option<usize> {
    let pages = len / PAGE;
    if pages == 0 || pages > MAX_PAGES {
        return None;
    }
    let _locked = Locked::try_lock(pages)?;
    let head = &HEADS[pages];
    let addr = head.load(Ordering::Relaxed);
    if addr == 0 {
        return None;
    }
    // SAFETY: under the lock the top mapping is on the stack: the runtime's, mapped, its first
    // word the link put there.
    head.store(unsafe { (addr as *const usize).read() }, Ordering::Relaxed);
    HELD.fetch_sub(len, Ordering::Relaxed);
    Some(addr)
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

    /// The cache's counters and cap are the process's: its tests take turns.
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn cached_mappings_come_back_by_class_and_respect_the_cap() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
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

    /// A mapping taken from the cache is the program's: freed past the cap (unmapped) while
    /// other threads take and put, no take may read it. The lock-free stack this replaced read
    /// the link of a mapping another thread had taken, and faulted once it was unmapped.
    #[test]
    fn a_taken_mapping_may_be_unmapped_while_others_take_and_put() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        const LEN: usize = 12 * PAGE;
        std::thread::scope(|s| {
            for t in 0..4usize {
                s.spawn(move || {
                    for i in 0..20_000usize {
                        let m = take(LEN).unwrap_or_else(|| map_for_test(LEN));
                        // SAFETY: the mapping is this thread's now, LEN bytes.
                        unsafe { (m as *mut usize).write(i) };
                        if (i + t) % 3 == 0 || !put(m, LEN) {
                            crate::runtime::unmap(m, LEN);
                        }
                    }
                });
            }
        });
        while let Some(m) = take(LEN) {
            crate::runtime::unmap(m, LEN);
        }
    }

    /// A stack whose lock is held is not waited for: take finds nothing, and put refuses (the
    /// caller unmaps), leaving the cap's count as it was. So a fork child whose parent held a
    /// lock, or a signal handler that allocates inside a take, goes on.
    #[test]
    fn a_busy_stack_is_passed_over_not_waited_for() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        const LEN: usize = 14 * PAGE;
        let a = map_for_test(LEN);
        assert!(put(a, LEN));
        let held = HELD.load(Ordering::Relaxed);
        let busy = Locked::try_lock(LEN / PAGE).expect("free");
        assert!(Locked::try_lock(LEN / PAGE).is_none(), "held");
        assert_eq!(take(LEN), None, "a held stack gives nothing");
        let b = map_for_test(LEN);
        assert!(!put(b, LEN), "a held stack takes nothing");
        assert_eq!(HELD.load(Ordering::Relaxed), held, "a refused put leaves the count");
        drop(busy);
        assert_eq!(take(LEN), Some(a));
        crate::runtime::unmap(a, LEN);
        crate::runtime::unmap(b, LEN);
    }

    fn map_for_test(len: usize) -> usize {
        let p = crate::runtime::map(len);
        assert!(!p.is_null());
        p as usize
    }
}
