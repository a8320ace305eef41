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
fn large(size: usize, align: usize, zero: bool) -> *mut c_void {
    match Guard::enter() {
        Some(_g) => alloc_large(size, align, zero),
        None => null_mut(),
    }
}

/// # Safety
/// The C `malloc` contract.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, 16) };
    if size >= THRESHOLD {
        let p = large(size, PAGE, false);
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

/// # Safety
/// The C `calloc` contract.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return null_mut();
    };
    let Some(real) = real() else { return boot_alloc(total, 16) };
    if total >= THRESHOLD {
        let p = large(total, PAGE, true);
        if !p.is_null() {
            return p;
        }
    }
    // SAFETY: the system calloc, same contract.
    unsafe { (real.calloc)(n, size) }
}

/// # Safety
/// The C `realloc` contract.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: realloc(NULL, n) is malloc(n).
        return unsafe { malloc(size) };
    }
    if is_boot(p) {
        // SAFETY: p is an arena block; its size is in its header.
        let old = unsafe { boot_size(p) };
        // SAFETY: a fresh block; arena blocks are never freed.
        let q = unsafe { malloc(size) };
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
                let q = realloc_large(p as usize, e, size);
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
        let q = large(size, PAGE, false);
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

/// # Safety
/// The C `reallocarray` contract. Hooked too, so that a runtime object passed to it is
/// recognised whichever route the C library's own reallocarray takes to its realloc.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: same contract as realloc.
        Some(total) => unsafe { realloc(p, total) },
        None => {
            set_errno(libc::ENOMEM);
            null_mut()
        }
    }
}

/// An aligned object: own mapping when large (any power-of-two alignment; a mapping is
/// page-aligned, larger alignments are cut out of a larger mapping), else `small`.
#[inline]
fn aligned(align: usize, size: usize, small: impl FnOnce() -> *mut c_void) -> *mut c_void {
    if size >= THRESHOLD && align.is_power_of_two() {
        let p = large(size, align.max(PAGE), false);
        if !p.is_null() {
            return p;
        }
    }
    small()
}

/// # Safety
/// The C `posix_memalign` contract.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
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
    let p = aligned(align, size, || {
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

/// # Safety
/// The C `aligned_alloc` contract.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, align) };
    // SAFETY: the system aligned_alloc decides what it accepts.
    aligned(align, size, || unsafe { (real.aligned_alloc)(align, size) })
}

/// # Safety
/// The C `memalign` contract (an alignment that is not a power of two is rounded up, as glibc
/// does).
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, align) };
    let a = align.checked_next_power_of_two().unwrap_or(0);
    // SAFETY: the system memalign.
    aligned(a, size, || unsafe { (real.memalign)(align, size) })
}

/// # Safety
/// The C `valloc` contract.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    let Some(real) = real() else { return boot_alloc(size, PAGE) };
    // SAFETY: the system valloc.
    aligned(PAGE, size, || unsafe { (real.valloc)(size) })
}

/// # Safety
/// The C `pvalloc` contract (size rounded up to a page).
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let rounded = size.checked_next_multiple_of(PAGE).unwrap_or(usize::MAX);
    let Some(real) = real() else { return boot_alloc(rounded, PAGE) };
    // SAFETY: the system pvalloc.
    aligned(PAGE, rounded, || unsafe { (real.pvalloc)(size) })
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
