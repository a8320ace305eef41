//! The exported allocator functions. Each one: before the system allocator is known, serve from
//! the bootstrap arena; a request below [`THRESHOLD`] (or nested inside the runtime) goes to
//! the system allocator untouched; a larger one gets its own mapping, and falls back to the
//! system allocator if that fails. Pointers are told apart without touching memory the runtime
//! does not own: bootstrap blocks by address range, the runtime's objects through the side
//! table, and only page-aligned pointers are looked up at all (the system allocator's small
//! blocks never are, so its free path costs one mask test more).
//!
//! None of them can unwind: they call nothing that panics, and a Rust `extern "C"` function
//! aborts rather than unwind into C.
//!
//! On x86-64 each entry point that can make an object is two instructions ([`entry!`]): it
//! passes its canonical frame address (the caller's stack pointer before the call) as one more
//! argument and jumps to the function that does the work, so that the site id can be found
//! from where the call came without unwinding the stack each time (`site`, "Memo").

use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

use crate::real::{boot_alloc, boot_size, is_boot, real, real_if_ready};
use crate::runtime::{alloc_large, free_large, realloc_large, set_errno, Guard};
use crate::{table, PAGE, THRESHOLD};

/// A pointer the runtime may own: page-aligned and not null.
#[inline]
fn maybe_ours(p: *mut c_void) -> Option<&'static table::Entry> {
    let a = p as usize;
    if a & (PAGE - 1) != 0 || a == 0 {
        return None;
    }
    table::lookup(a)
}

/// A large object, or null when the runtime cannot take it (the caller asks the system).
#[inline]
fn large(size: usize, align: usize, zero: bool, entry_cfa: usize) -> *mut c_void {
    match Guard::enter() {
        Some(_g) => alloc_large(size, align, zero, entry_cfa),
        None => null_mut(),
    }
}

/// An exported entry point `$name($args)` that calls `$work($args, entry_cfa)`. On x86-64 it is
/// naked: `entry_cfa` is its CFA, the stack pointer plus the return address the call pushed,
/// put in the register of the argument after the last (`$reg`), and the jump leaves no frame of
/// its own, so `$work` returns straight to the program. Elsewhere `entry_cfa` is 0 (site ids are
/// then found by a walk every time).
macro_rules! entry {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $work:ident, $reg:literal) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            core::arch::naked_asm!(concat!("lea ", $reg, ", [rsp + 8]"), "jmp {work}", work = sym $work)
        }
        $(#[$doc])*
        #[cfg(not(target_arch = "x86_64"))]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: the same contract, with no CFA to offer.
            unsafe { $work($($arg,)* 0) }
        }
    };
}

entry!(
    /// # Safety
    /// The C `malloc` contract.
    malloc(size: usize) -> *mut c_void = malloc_from, "rsi"
);
entry!(
    /// # Safety
    /// The C `calloc` contract.
    calloc(n: usize, size: usize) -> *mut c_void = calloc_from, "rdx"
);
entry!(
    /// # Safety
    /// The C `realloc` contract.
    realloc(p: *mut c_void, size: usize) -> *mut c_void = realloc_from, "rdx"
);
entry!(
    /// # Safety
    /// The C `reallocarray` contract. Hooked too, so that a runtime object passed to it is
    /// recognised whichever route the C library's own reallocarray takes to its realloc.
    reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void = reallocarray_from, "rcx"
);
entry!(
    /// # Safety
    /// The C `posix_memalign` contract.
    posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int = posix_memalign_from, "rcx"
);
entry!(
    /// # Safety
    /// The C `aligned_alloc` contract.
    aligned_alloc(align: usize, size: usize) -> *mut c_void = aligned_alloc_from, "rdx"
);
entry!(
    /// # Safety
    /// The C `memalign` contract (an alignment that is not a power of two is rounded up, as
    /// glibc does).
    memalign(align: usize, size: usize) -> *mut c_void = memalign_from, "rdx"
);
entry!(
    /// # Safety
    /// The C `valloc` contract.
    valloc(size: usize) -> *mut c_void = valloc_from, "rsi"
);
entry!(
    /// # Safety
    /// The C `pvalloc` contract (size rounded up to a page).
    pvalloc(size: usize) -> *mut c_void = pvalloc_from, "rsi"
);

/// `malloc`, called from where `entry_cfa` says.
unsafe extern "C" fn malloc_from(size: usize, entry_cfa: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, 16) };
    if size >= THRESHOLD {
        let p = large(size, PAGE, false, entry_cfa);
        if !p.is_null() {
            return p;
        }
    }
    // SAFETY: the system malloc, same contract.
    unsafe { (real.malloc)(size) }
}

/// # Safety
/// The C `free` contract.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() || is_boot(p) {
        return;
    }
    let Some(real) = real_if_ready() else {
        // Nothing but the arena has handed out memory yet: nothing to free.
        return;
    };
    if let Some(e) = maybe_ours(p) {
        free_large(p as usize, e);
        return;
    }
    // SAFETY: not ours and not the arena's, so the system allocator's.
    unsafe { (real.free)(p) }
}

/// `calloc`, called from where `entry_cfa` says.
unsafe extern "C" fn calloc_from(n: usize, size: usize, entry_cfa: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return null_mut();
    };
    let Some(real) = real() else { return boot_alloc(total, 16) };
    if total >= THRESHOLD {
        let p = large(total, PAGE, true, entry_cfa);
        if !p.is_null() {
            return p;
        }
    }
    // SAFETY: the system calloc, same contract.
    unsafe { (real.calloc)(n, size) }
}

/// `realloc`, called from where `entry_cfa` says.
unsafe extern "C" fn realloc_from(p: *mut c_void, size: usize, entry_cfa: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: realloc(NULL, n) is malloc(n).
        return unsafe { malloc_from(size, entry_cfa) };
    }
    if is_boot(p) {
        // SAFETY: p is an arena block; its size is in its header.
        let old = unsafe { boot_size(p) };
        // SAFETY: a fresh block; arena blocks are never freed.
        let q = unsafe { malloc_from(size, entry_cfa) };
        if !q.is_null() {
            // SAFETY: both blocks hold at least min(old, size) bytes and are distinct.
            unsafe { core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(size)) };
        }
        return q;
    }
    let Some(real) = real() else { return null_mut() };
    if let Some(e) = maybe_ours(p) {
        if size == 0 {
            // glibc's realloc(p, 0) frees p and returns NULL.
            free_large(p as usize, e);
            return null_mut();
        }
        if size < THRESHOLD {
            // SAFETY: the system malloc.
            let q = unsafe { (real.malloc)(size) };
            if q.is_null() {
                return q;
            }
            // SAFETY: p holds more than `size` bytes; q holds `size`; distinct blocks.
            unsafe { core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), size) };
            free_large(p as usize, e);
            return q;
        }
        return match Guard::enter() {
            Some(_g) => {
                let q = realloc_large(p as usize, e, size, entry_cfa);
                if q.is_null() {
                    set_errno(libc::ENOMEM);
                }
                q
            }
            // Nested inside the runtime (never happens for the runtime's own objects, which the
            // unwinder cannot hold): refuse rather than resize without the guard.
            None => null_mut(),
        };
    }
    if size >= THRESHOLD {
        // A system block grows into an object of its own.
        let q = large(size, PAGE, false, entry_cfa);
        if !q.is_null() {
            // SAFETY: p is a live system block of `old` usable bytes; q has `size` bytes.
            unsafe {
                let old = (real.malloc_usable_size)(p);
                core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(size));
                (real.free)(p);
            }
            return q;
        }
    }
    // SAFETY: a system block, the system realloc.
    unsafe { (real.realloc)(p, size) }
}

/// `reallocarray`, called from where `entry_cfa` says.
unsafe extern "C" fn reallocarray_from(
    p: *mut c_void,
    n: usize,
    size: usize,
    entry_cfa: usize,
) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: same contract as realloc.
        Some(total) => unsafe { realloc_from(p, total, entry_cfa) },
        None => {
            set_errno(libc::ENOMEM);
            null_mut()
        }
    }
}

/// An aligned object: own mapping when large (any power-of-two alignment; a mapping is
/// page-aligned, larger alignments are cut out of a larger mapping), else `small`.
#[inline]
fn aligned(align: usize, size: usize, entry_cfa: usize, small: impl FnOnce() -> *mut c_void) -> *mut c_void {
    if size >= THRESHOLD && align.is_power_of_two() {
        let p = large(size, align.max(PAGE), false, entry_cfa);
        if !p.is_null() {
            return p;
        }
    }
    small()
}

/// `posix_memalign`, called from where `entry_cfa` says.
unsafe extern "C" fn posix_memalign_from(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
    entry_cfa: usize,
) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(core::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let Some(real) = real() else {
        let p = boot_alloc(size, align);
        if p.is_null() {
            return libc::ENOMEM;
        }
        // SAFETY: the caller passes a writable out pointer.
        unsafe { *out = p };
        return 0;
    };
    let mut rc = 0;
    let p = aligned(align, size, entry_cfa, || {
        let mut q = null_mut();
        // SAFETY: the system posix_memalign with a valid alignment.
        rc = unsafe { (real.posix_memalign)(&mut q, align, size) };
        q
    });
    if rc == 0 {
        // SAFETY: the caller passes a writable out pointer.
        unsafe { *out = p };
    }
    rc
}

/// `aligned_alloc`, called from where `entry_cfa` says.
unsafe extern "C" fn aligned_alloc_from(align: usize, size: usize, entry_cfa: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, align) };
    // SAFETY: the system aligned_alloc decides what it accepts.
    aligned(align, size, entry_cfa, || unsafe { (real.aligned_alloc)(align, size) })
}

/// `memalign`, called from where `entry_cfa` says.
unsafe extern "C" fn memalign_from(align: usize, size: usize, entry_cfa: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, align) };
    let a = align.checked_next_power_of_two().unwrap_or(0);
    // SAFETY: the system memalign.
    aligned(a, size, entry_cfa, || unsafe { (real.memalign)(align, size) })
}

/// `valloc`, called from where `entry_cfa` says.
unsafe extern "C" fn valloc_from(size: usize, entry_cfa: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, PAGE) };
    // SAFETY: the system valloc.
    aligned(PAGE, size, entry_cfa, || unsafe { (real.valloc)(size) })
}

/// `pvalloc`, called from where `entry_cfa` says.
unsafe extern "C" fn pvalloc_from(size: usize, entry_cfa: usize) -> *mut c_void {
    let rounded = size.checked_next_multiple_of(PAGE).unwrap_or(usize::MAX);
    let Some(real) = real() else { return boot_alloc(rounded, PAGE) };
    // SAFETY: the system pvalloc.
    aligned(PAGE, rounded, entry_cfa, || unsafe { (real.pvalloc)(size) })
}

/// # Safety
/// The C `malloc_usable_size` contract.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if is_boot(p) {
        // SAFETY: an arena block.
        return unsafe { boot_size(p) };
    }
    let Some(real) = real_if_ready() else { return 0 };
    if let Some(e) = maybe_ours(p) {
        return e.len();
    }
    // SAFETY: a system block.
    unsafe { (real.malloc_usable_size)(p) }
}
