//! Allocation-site ids: a hash of the first [`DEPTH`] return addresses outside the runtime,
//! taken with libgcc's `_Unwind_Backtrace`.
//!
//! Why this unwinder: it follows the DWARF call-frame information (`.eh_frame`) that x86-64
//! and aarch64 code carries by default, so it is right for programs built without frame
//! pointers, where walking `rbp` would read garbage; it only reads the stack the CFI describes.
//! libgcc_s is already loaded (Rust's std links it). For the usual dynamically linked program
//! it finds the CFI through `dl_iterate_phdr` and the binary-search table of
//! `PT_GNU_EH_FRAME`, which allocates nothing; it calls `malloc` only for frames registered with
//! `__register_frame_info` (a JIT, some static binaries), and such a nested call sees the
//! runtime's reentrancy guard and goes straight to the system allocator. glibc's `backtrace(3)`
//! (the seed's choice, object tiering §3.5) is this same unwinder behind a `dlopen` of
//! libgcc_s on first use, which allocates, so the runtime calls the unwinder itself.
//!
//! The ids are per process image: they hash absolute addresses, so with ASLR they differ from
//! run to run (and are the same in a forked child). Four frames tell apart call sites that go
//! through a wrapper or two (`operator new`, `strdup`, a program's own `xmalloc`) at a fraction
//! of the seed's 16 frames' unwinding cost.
//!
//! The unwinder still costs about half a microsecond per allocation (its CFI lookup and
//! interpretation, frame by frame), which an allocation-heavy program notices: sqlite3 makes
//! some 60,000 objects of a page or more a second. So each walk is remembered ([`Memo`]), by the
//! caller's return address and where on the stack it sits (the hook's canonical frame address,
//! which the x86-64 entry points pass down: `hooks`), with where the walk found the deeper return
//! addresses. An allocation from the same place at the same depth reuses the id once those stack
//! slots still hold the same return addresses: on x86-64 a return address sits just below its
//! frame's CFA, so equal addresses at equal slots are the same call chain, frame by frame (a
//! wrapper called from two places differs at its caller's slot). The slots are read from the
//! nearest out, each only after the one below it matched: a matching return address means the
//! same function at the same call site, whose frame has the size the walk saw, so the next slot
//! lies in a frame the program is running now. One case can mislead it: a frame of varying size
//! (`alloca`) whose old slot still holds a return address of an earlier call; its object then
//! gets the earlier chain's id, a site-id collision of the kind the seed accepts (object tiering
//! §3.5: a 64-bit hash).

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Return addresses hashed into a site id.
pub const DEPTH: u32 = 4;

const URC_NO_REASON: c_int = 0;
const URC_NORMAL_STOP: c_int = 4;
const URC_END_OF_STACK: c_int = 5;

type TraceFn = extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> c_int;

extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
    fn _Unwind_GetCFA(ctx: *mut c_void) -> usize;
}

/// The runtime's own text: frames inside it are skipped.
static SELF_LO: AtomicUsize = AtomicUsize::new(0);
static SELF_HI: AtomicUsize = AtomicUsize::new(0);

struct Walk {
    lo: usize,
    hi: usize,
    outside: bool,
    n: u32,
    hash: u64,
    /// The return addresses hashed, and for each the CFA of the frame that returns to it (the
    /// address is the word below).
    ips: [usize; DEPTH as usize],
    cfas: [usize; DEPTH as usize],
}

extern "C" fn step(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    // SAFETY: arg is the &mut Walk passed to _Unwind_Backtrace by `id`, alive for the walk.
    let w = unsafe { &mut *arg.cast::<Walk>() };
    // SAFETY: ctx is the unwinder's context for this frame.
    let ip = unsafe { _Unwind_GetIP(ctx) };
    if ip == 0 {
        return URC_END_OF_STACK;
    }
    if !w.outside && ip >= w.lo && ip < w.hi {
        return URC_NO_REASON;
    }
    w.outside = true;
    // FNV-1a over the address's bytes, a word at a time.
    w.hash = (w.hash ^ ip as u64).wrapping_mul(0x0000_0100_0000_01B3);
    w.ips[w.n as usize] = ip;
    // SAFETY: as above.
    w.cfas[w.n as usize] = unsafe { _Unwind_GetCFA(ctx) };
    w.n += 1;
    if w.n >= DEPTH {
        URC_NORMAL_STOP
    } else {
        URC_NO_REASON
    }
}

/// The site id of the current call (never 0). `entry_cfa` is the canonical frame address of
/// the exported entry point the program called (its stack pointer before the call, plus the
/// return address), or 0 where the entry point cannot tell it (then every call walks the
/// stack). Call only inside the reentrancy guard.
#[inline(always)]
pub fn id(entry_cfa: usize) -> u64 {
    if entry_cfa != 0 {
        if let Some(id) = MEMO.find(entry_cfa) {
            return id;
        }
    }
    let mut w = Walk {
        lo: SELF_LO.load(Ordering::Relaxed),
        hi: SELF_HI.load(Ordering::Relaxed),
        outside: false,
        n: 0,
        hash: 0xcbf2_9ce4_8422_2325,
        ips: [0; DEPTH as usize],
        cfas: [0; DEPTH as usize],
    };
    // SAFETY: `step` only reads the frame's IP and CFA and updates `w`, which outlives the call.
    unsafe { _Unwind_Backtrace(step, (&raw mut w).cast()) };
    // A final mix so that sites differing in one low bit spread over the advice table.
    let mut h = w.hash;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    let id = if h == 0 { 1 } else { h };
    if entry_cfa != 0 {
        MEMO.remember(entry_cfa, &w, id);
    }
    id
}

/// Remembered walks ([`Memo::SLOTS`] of them, a direct-mapped table shared by all threads).
/// Each slot is a sequence lock: a writer makes its count odd, writes, and makes it even again;
/// a reader takes a slot only if the count was even and unchanged around its reads. Nothing is
/// ever allocated; a writer that finds a slot being written leaves it.
struct Memo {
    slots: [MemoSlot; Memo::SLOTS],
}

struct MemoSlot {
    seq: AtomicUsize,
    /// The key: the first return address, and the entry point's CFA.
    ra0: AtomicUsize,
    cfa: AtomicUsize,
    /// Return addresses recorded (1 to DEPTH; fewer where the stack ended).
    n: AtomicUsize,
    /// Where each deeper return address sat (the CFA of the frame below it, less a word), and
    /// what it was.
    at: [AtomicUsize; DEPTH as usize - 1],
    ra: [AtomicUsize; DEPTH as usize - 1],
    id: AtomicU64,
}

static MEMO: Memo = Memo { slots: [const { MemoSlot::new() }; Memo::SLOTS] };

impl MemoSlot {
    const fn new() -> Self {
        MemoSlot {
            seq: AtomicUsize::new(0),
            ra0: AtomicUsize::new(0),
            cfa: AtomicUsize::new(0),
            n: AtomicUsize::new(0),
            at: [const { AtomicUsize::new(0) }; DEPTH as usize - 1],
            ra: [const { AtomicUsize::new(0) }; DEPTH as usize - 1],
            id: AtomicU64::new(0),
        }
    }
}

/// How far above the entry point a remembered return address may sit: a walk whose slots lie
/// further (a frame of megabytes) is not remembered.
const MAX_REACH: usize = 1 << 20;

impl Memo {
    /// 4,096 slots of 88 bytes: 352 KiB of the library's bss, touched only where used.
    const SLOTS: usize = 4096;

    fn slot(&self, ra0: usize, cfa: usize) -> &MemoSlot {
        let h = (ra0 ^ cfa.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &self.slots[(h >> 52) % Self::SLOTS]
    }

    /// The remembered id of a call whose entry point's CFA is `cfa`, if the chain is unchanged.
    #[inline(always)]
    fn find(&self, cfa: usize) -> Option<u64> {
        // SAFETY: the word below an entry point's CFA is the return address the call pushed.
        let ra0 = unsafe { core::ptr::read((cfa - 8) as *const usize) };
        let s = self.slot(ra0, cfa);
        let seq = s.seq.load(Ordering::Acquire);
        if seq & 1 != 0 || s.ra0.load(Ordering::Relaxed) != ra0 || s.cfa.load(Ordering::Relaxed) != cfa {
            return None;
        }
        let n = s.n.load(Ordering::Relaxed).min(DEPTH as usize);
        let mut at = [0usize; DEPTH as usize - 1];
        let mut ra = [0usize; DEPTH as usize - 1];
        for j in 0..n.saturating_sub(1) {
            at[j] = s.at[j].load(Ordering::Relaxed);
            ra[j] = s.ra[j].load(Ordering::Relaxed);
        }
        let id = s.id.load(Ordering::Relaxed);
        core::sync::atomic::fence(Ordering::Acquire);
        if s.seq.load(Ordering::Relaxed) != seq || n == 0 {
            return None;
        }
        // From the nearest out, each only after the one below matched (module doc).
        for j in 0..n - 1 {
            if at[j] <= cfa || at[j] >= cfa + MAX_REACH {
                return None;
            }
            // SAFETY: the same call site at the same stack address as the walk that found this
            // slot (the key, and the slots below it, matched), so the slot lies in a frame of
            // the running chain.
            if unsafe { core::ptr::read_volatile(at[j] as *const usize) } != ra[j] {
                return None;
            }
        }
        Some(id)
    }

    /// Remembers the walk `w` of a call whose entry point's CFA is `cfa`, if it is the plain
    /// x86-64 chain `find` can check: the walk's first return address is the one the call
    /// pushed, and each deeper one sits in the word below the CFA of the frame that returns to
    /// it, within reach.
    fn remember(&self, cfa: usize, w: &Walk, id: u64) {
        let n = w.n as usize;
        // SAFETY: as in `find`.
        let ra0 = unsafe { core::ptr::read((cfa - 8) as *const usize) };
        // The unwinder gives each return address with the CFA of the frame it returns from,
        // whose word below is where the call put it: the first must be the entry point's.
        if n == 0 || w.ips[0] != ra0 || w.cfas[0] != cfa {
            return;
        }
        let mut at = [0usize; DEPTH as usize - 1];
        for j in 1..n {
            let slot = w.cfas[j].wrapping_sub(8);
            if slot <= cfa || slot >= cfa + MAX_REACH {
                return;
            }
            // SAFETY: stack memory of the running chain, a word below a CFA the unwinder just
            // computed, within reach above the entry point.
            if unsafe { core::ptr::read_volatile(slot as *const usize) } != w.ips[j] {
                return;
            }
            at[j - 1] = slot;
        }
        let s = self.slot(ra0, cfa);
        let seq = s.seq.load(Ordering::Relaxed);
        if seq & 1 != 0 || s.seq.compare_exchange(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            return;
        }
        core::sync::atomic::fence(Ordering::Release);
        s.ra0.store(ra0, Ordering::Relaxed);
        s.cfa.store(cfa, Ordering::Relaxed);
        s.n.store(n, Ordering::Relaxed);
        for (j, &slot) in at.iter().enumerate().take(n - 1) {
            s.at[j].store(slot, Ordering::Relaxed);
            s.ra[j].store(w.ips[j + 1], Ordering::Relaxed);
        }
        s.id.store(id, Ordering::Relaxed);
        s.seq.store(seq + 2, Ordering::Release);
    }
}

struct Find {
    addr: usize,
    lo: usize,
    hi: usize,
}

unsafe extern "C" fn each_object(info: *mut libc::dl_phdr_info, _size: usize, arg: *mut c_void) -> c_int {
    // SAFETY: the loader passes a valid dl_phdr_info; arg is the &mut Find given by `init`.
    let (info, f) = unsafe { (&*info, &mut *arg.cast::<Find>()) };
    let (mut lo, mut hi, mut contains) = (usize::MAX, 0usize, false);
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != libc::PT_LOAD {
            continue;
        }
        let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
        let end = start.wrapping_add(ph.p_memsz as usize);
        lo = lo.min(start);
        hi = hi.max(end);
        contains |= f.addr >= start && f.addr < end;
    }
    if contains {
        f.lo = lo;
        f.hi = hi;
        return 1;
    }
    0
}

/// Finds the runtime's own address range (no allocation: dl_iterate_phdr walks the loader's
/// list under its recursive lock).
pub fn init() {
    let mut f = Find { addr: step as *const () as usize, lo: 0, hi: 0 };
    // SAFETY: the callback only reads the headers and writes `f`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each_object), (&raw mut f).cast()) };
    SELF_LO.store(f.lo, Ordering::Relaxed);
    SELF_HI.store(f.hi, Ordering::Relaxed);
}
