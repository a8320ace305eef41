//! The side table: which page-aligned pointers are the runtime's objects, and their sizes and
//! sites. A fixed open-addressing hash table of [`SLOTS`] entries of 32 bytes in one anonymous
//! mapping made at initialisation (`MAP_NORESERVE`: only the pages holding used entries become
//! resident), lock-free through atomics.
//!
//! An entry's key is the object's start address; 0 is an empty slot and 1 a tombstone (a freed
//! entry; probes pass over it and inserts reuse it). The home slot is the address's page number
//! modulo [`SLOTS`]: the kernel hands out neighbouring addresses for consecutive mappings, so
//! live entries cluster and a table of few objects touches few pages; two keys collide only if
//! they are a multiple of 4 GiB apart. Probes stop at an empty slot or after [`MAX_PROBE`]
//! slots; an insert that finds no room fails and the object goes to the system allocator.
//!
//! Why it is safe without a lock: a key is unique among live entries, because a free removes the
//! entry (tombstone) before it unmaps the object, so the kernel cannot hand the address out
//! again while it is still in the table. Slots never return to empty, so a probe chain is never
//! cut. A lookup of a key races only with operations on other keys (a concurrent free of the
//! same pointer is a double free in the program). Across `fork` the table is private anonymous
//! memory, copied as it is: an entry being inserted or removed by a thread that does not exist in
//! the child describes an object the child never sees returned, or one it leaks, never a wrong
//! object.

use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Entries in the table (32 MiB of address space, resident only where used).
pub const SLOTS: usize = 1 << 20;
/// Longest probe before an insert gives up or a lookup misses.
pub const MAX_PROBE: usize = 1024;
const EMPTY: usize = 0;
const TOMB: usize = 1;

/// One object's record: 32 bytes.
#[repr(C)]
pub struct Entry {
    key: AtomicUsize,
    /// Bytes mapped (the size rounded up to pages), with [`BOUND`] set if the mapping has a
    /// memory policy of its own (read it through [`Entry::len`] and [`Entry::bound`]).
    pub map_len: AtomicUsize,
    /// Bytes the program asked for.
    pub size: AtomicUsize,
    /// The allocation site (0 when no ring is attached: nobody reads it).
    pub site: AtomicU64,
}

const _: () = assert!(core::mem::size_of::<Entry>() == 32);

/// The flag in `map_len`'s low bits (a page multiple) that marks a mapping bound by advice.
pub const BOUND: usize = 1;

impl Entry {
    /// Bytes mapped.
    #[inline]
    pub fn len(&self) -> usize {
        self.map_len.load(Ordering::Acquire) & !(crate::PAGE - 1)
    }

    /// Whether the mapping has a memory policy of its own.
    #[inline]
    pub fn bound(&self) -> bool {
        self.map_len.load(Ordering::Acquire) & BOUND != 0
    }
}

static TABLE: AtomicPtr<Entry> = AtomicPtr::new(core::ptr::null_mut());

/// Maps the table; false if the mapping failed (then every object goes to the system allocator).
pub fn init() -> bool {
    // SAFETY: a fresh anonymous private mapping; arguments checked by the kernel.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            SLOTS * core::mem::size_of::<Entry>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    TABLE.store(p.cast(), Ordering::Release);
    true
}

#[inline]
fn slot(i: usize) -> Option<&'static Entry> {
    let t = TABLE.load(Ordering::Acquire);
    if t.is_null() {
        return None;
    }
    // SAFETY: the table maps SLOTS zero-initialised entries, never unmapped; i is masked.
    Some(unsafe { &*t.add(i & (SLOTS - 1)) })
}

#[inline]
fn home(key: usize) -> usize {
    (key >> 12) & (SLOTS - 1)
}

/// Records an object at `key` (page-aligned, not 0). False if the table is full along its probe.
pub fn insert(key: usize, map_len: usize, size: usize, site: u64, max_probe: usize) -> bool {
    let h = home(key);
    for i in 0..max_probe.min(SLOTS) {
        let Some(e) = slot(h + i) else { return false };
        let k = e.key.load(Ordering::Acquire);
        if (k == EMPTY || k == TOMB)
            && e.key.compare_exchange(k, key, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            // The pointer is returned to the program only after these stores; any thread that
            // frees it got it through the program's own synchronisation, which orders them.
            e.map_len.store(map_len, Ordering::Release);
            e.size.store(size, Ordering::Release);
            e.site.store(site, Ordering::Release);
            return true;
        }
    }
    false
}

/// The entry of the object starting at `key`, if the runtime owns it.
#[inline]
pub fn lookup(key: usize) -> Option<&'static Entry> {
    if key < 4096 {
        return None;
    }
    let h = home(key);
    for i in 0..MAX_PROBE {
        let e = slot(h + i)?;
        match e.key.load(Ordering::Acquire) {
            EMPTY => return None,
            k if k == key => return Some(e),
            _ => {}
        }
    }
    None
}

/// Forgets an entry (before its mapping is unmapped).
#[inline]
pub fn remove(e: &Entry) {
    e.key.store(TOMB, Ordering::Release);
}
