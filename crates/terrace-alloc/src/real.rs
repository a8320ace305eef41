//! The system allocator behind the runtime, found with `dlsym(RTLD_NEXT, ...)` on the first
//! hook call, and the static bootstrap arena that serves allocations made before it is found
//! (glibc's `dlsym` may call `calloc` or `malloc` for its error buffer).

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void, CStr};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

pub type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
pub type FreeFn = unsafe extern "C" fn(*mut c_void);
pub type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
pub type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
pub type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;
pub type AlignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
pub type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;

/// The next definitions of the hooked functions (normally glibc's).
pub struct Real {
    pub malloc: MallocFn,
    pub free: FreeFn,
    pub calloc: CallocFn,
    pub realloc: ReallocFn,
    pub posix_memalign: PosixMemalignFn,
    pub aligned_alloc: AlignFn,
    pub memalign: AlignFn,
    pub valloc: MallocFn,
    pub pvalloc: MallocFn,
    pub malloc_usable_size: UsableFn,
}

struct RealCell(UnsafeCell<MaybeUninit<Real>>);
// SAFETY: written once by the thread that wins UNINIT -> INITIALIZING, before it stores READY
// with release; read only after an acquire load of READY.
unsafe impl Sync for RealCell {}
static REAL: RealCell = RealCell(UnsafeCell::new(MaybeUninit::uninit()));

const UNINIT: u8 = 0;
const INITIALIZING: u8 = 1;
const READY: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNINIT);

/// The system allocator, or `None` while it is being looked up (the caller then uses the
/// bootstrap arena). The first call initialises the runtime.
#[inline]
pub fn real() -> Option<&'static Real> {
    if STATE.load(Ordering::Acquire) == READY {
        // SAFETY: READY is stored (release) only after REAL was written.
        return Some(unsafe { (*REAL.0.get()).assume_init_ref() });
    }
    init()
}

/// The system allocator if it is already known; never initialises.
#[inline]
pub fn real_if_ready() -> Option<&'static Real> {
    if STATE.load(Ordering::Acquire) == READY {
        // SAFETY: as in `real`.
        return Some(unsafe { (*REAL.0.get()).assume_init_ref() });
    }
    None
}

#[cold]
fn init() -> Option<&'static Real> {
    if STATE.compare_exchange(UNINIT, INITIALIZING, Ordering::Acquire, Ordering::Acquire).is_err() {
        // Another thread (or this one, re-entered from dlsym) is initialising.
        return real_if_ready();
    }
    let real = Real {
        malloc: sym(c"malloc"),
        free: sym(c"free"),
        calloc: sym(c"calloc"),
        realloc: sym(c"realloc"),
        posix_memalign: sym(c"posix_memalign"),
        aligned_alloc: sym(c"aligned_alloc"),
        memalign: sym(c"memalign"),
        valloc: sym(c"valloc"),
        pvalloc: sym(c"pvalloc"),
        malloc_usable_size: sym(c"malloc_usable_size"),
    };
    // SAFETY: only the thread that moved the state to INITIALIZING writes REAL, and no one
    // reads it before READY.
    unsafe { (*REAL.0.get()).write(real) };
    crate::runtime::init();
    STATE.store(READY, Ordering::Release);
    real_if_ready()
}

/// Looks up the next definition of `name`; without one the program cannot allocate at all, so
/// the runtime says so on stderr and aborts.
fn sym<F: Copy>(name: &CStr) -> F {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT searches the objects after this one.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if p.is_null() {
        crate::runtime::die(b"terrace-alloc: the system allocator is missing a function\n");
    }
    debug_assert_eq!(core::mem::size_of::<F>(), core::mem::size_of::<*mut c_void>());
    // SAFETY: F is one of the fn-pointer types above, matching the C prototype of `name`; a
    // function pointer and a data pointer have the same size and representation on Linux.
    unsafe { core::mem::transmute_copy::<*mut c_void, F>(&p) }
}

/// Bytes in the bootstrap arena. glibc's dlsym asks for at most a few hundred bytes; the rest is
/// headroom for other threads that allocate while the first one initialises.
pub const BOOT_BYTES: usize = 256 * 1024;
const BOOT_HEADER: usize = 16;

#[repr(C, align(4096))]
struct Boot(UnsafeCell<[u8; BOOT_BYTES]>);
// SAFETY: disjoint ranges are handed out by an atomic bump pointer; each is used by the caller
// it was given to, like any other heap block.
unsafe impl Sync for Boot {}
static BOOT: Boot = Boot(UnsafeCell::new([0; BOOT_BYTES]));
static BOOT_USED: AtomicUsize = AtomicUsize::new(0);

fn boot_base() -> usize {
    BOOT.0.get() as usize
}

/// A block of `size` bytes aligned to `align` (a power of two up to 4096) from the arena, zeroed
/// (the arena is never reused); null when the arena is exhausted. Never freed.
pub fn boot_alloc(size: usize, align: usize) -> *mut c_void {
    let align = align.max(16);
    if align > 4096 || size > BOOT_BYTES {
        return core::ptr::null_mut();
    }
    let mut cur = BOOT_USED.load(Ordering::Relaxed);
    loop {
        let start = (cur + BOOT_HEADER + align - 1) & !(align - 1);
        let end = start + size.max(1);
        if end > BOOT_BYTES {
            return core::ptr::null_mut();
        }
        match BOOT_USED.compare_exchange_weak(cur, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => {
                let p = (boot_base() + start) as *mut u8;
                // SAFETY: [start - 16, end) is ours alone (the CAS claimed it) and inside the
                // arena; the size header sits in the 16 bytes before the block.
                unsafe { p.sub(BOOT_HEADER).cast::<usize>().write(size) };
                return p.cast();
            }
            Err(now) => cur = now,
        }
    }
}

/// Whether `p` came from the bootstrap arena.
#[inline]
pub fn is_boot(p: *mut c_void) -> bool {
    let a = p as usize;
    a >= boot_base() && a < boot_base() + BOOT_BYTES
}

/// The size a bootstrap block was asked for.
///
/// # Safety
/// `p` must be a block returned by [`boot_alloc`].
pub unsafe fn boot_size(p: *mut c_void) -> usize {
    // SAFETY: per the caller, the header precedes p inside the arena.
    unsafe { p.cast::<u8>().sub(BOOT_HEADER).cast::<usize>().read() }
}
