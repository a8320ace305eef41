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

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

/// Return addresses hashed into a site id.
pub const DEPTH: u32 = 4;

const URC_NO_REASON: c_int = 0;
const URC_NORMAL_STOP: c_int = 4;
const URC_END_OF_STACK: c_int = 5;

type TraceFn = extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> c_int;

extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
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
    w.n += 1;
    if w.n >= DEPTH {
        URC_NORMAL_STOP
    } else {
        URC_NO_REASON
    }
}

/// The site id of the current call (never 0). Call only inside the reentrancy guard.
#[inline(never)]
pub fn id() -> u64 {
    let mut w = Walk {
        lo: SELF_LO.load(Ordering::Relaxed),
        hi: SELF_HI.load(Ordering::Relaxed),
        outside: false,
        n: 0,
        hash: 0xcbf2_9ce4_8422_2325,
    };
    // SAFETY: `step` only reads the frame's IP and updates `w`, which outlives the call.
    unsafe { _Unwind_Backtrace(step, (&raw mut w).cast()) };
    // A final mix so that sites differing in one low bit spread over the advice table.
    let mut h = w.hash;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    if h == 0 {
        1
    } else {
        h
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
