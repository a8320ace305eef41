//! Terrace's object runtime: `libterrace_alloc.so`, loaded with `LD_PRELOAD` into an unmodified
//! program (`terrace run --objects -- CMD`). docs/objects-runtime.md is the user's and the
//! Terrace side's description; this page says how it works and why it is safe.
//!
//! # What it does
//!
//! It exports `malloc`, `free`, `calloc`, `realloc`, `reallocarray`, `posix_memalign`,
//! `aligned_alloc`, `memalign`, `valloc`, `pvalloc` and `malloc_usable_size` under their C names
//! (`#[no_mangle] extern "C"`), so that the dynamic linker binds the program's and the C
//! library's calls to them. A request of at least [`THRESHOLD`] bytes (one page, the seed's
//! threshold, object tiering §3.2) gets its own anonymous, page-aligned mapping, so that Terrace
//! can move that object alone with `move_pages` (and, attached, no huge page holds two objects:
//! `runtime::map_object`); smaller ones go to the system allocator, found
//! with `dlsym(RTLD_NEXT, ...)`. Each object is recorded in a side table ([`table`]); when
//! `TERRACE_OBJECTS_RING` names a ring file made by Terrace, each object's allocation and free are
//! reported there with a site id ([`site`]), and an object whose site Terrace has advised is bound
//! with `mbind(MPOL_PREFERRED)` to the advised node before anything touches it (preferred, not
//! bind: a wrong advice must cost placement, never an OOM kill). Freed mappings without a policy
//! are reused through a bounded cache ([`cache`]), which keeps first-touch faults off the
//! allocation path. The ring and
//! advice layout live in the crate `terrace-alloc-ring`, shared with Terrace's reader.
//!
//! # Why it is safe
//!
//! - **No allocation in the hooks.** The hooks use atomics, raw system calls, libc's `getenv`,
//!   `dlsym` (once), `dl_iterate_phdr` (once) and libgcc's unwinder; no `Vec`, `String`,
//!   formatting or std lock. `dlsym` itself may call `malloc`/`calloc`: until the system
//!   allocator is known, every request is served from a static 256 KiB bootstrap arena
//!   ([`real`]) whose blocks are recognised by address and never handed to the system
//!   allocator.
//! - **Reentrancy.** A thread-local flag (const-initialised `Cell<bool>`, no destructor: a plain
//!   static-TLS variable, which allocates nothing in a preloaded library) marks a thread inside
//!   the large-object path; a nested call (the unwinder may allocate for registered frames) goes
//!   straight to the system allocator.
//! - **Telling pointers apart.** Only page-aligned pointers are looked up in the side table, a
//!   lock-free open-addressing table in one `mmap` made at initialisation; the runtime never
//!   reads a header in front of a pointer, so it never touches memory it does not own.
//! - **Threads and fork.** There is no lock anywhere in the runtime, so nothing can be held
//!   across `fork` and no `pthread_atfork` handler is needed. The table is private memory, copied
//!   into the child consistent for every object the child can see (see [`table`]); the ring is
//!   shared, so a child's events reach the same ring with its own pid, which the runtime caches
//!   in a `MADV_WIPEONFORK` page so that a child never reports its parent's pid.
//! - **Terrace may die.** The producer never waits: a full ring (nobody draining) drops the event
//!   and counts it; the program runs on. Terrace must never truncate the ring file while a program
//!   has it mapped (that would be SIGBUS in the program); deleting it is harmless.
//! - **No unwinding across FFI.** Nothing in the hooks panics (checked arithmetic, no indexing
//!   that can fail, no `unwrap`), and a panic inside a Rust `extern "C"` function aborts instead
//!   of unwinding (Rust 1.81+), which is the `panic = "abort"` behaviour the hooks need without a
//!   workspace-wide profile setting.
//! - **A program that never calls malloc** is unaffected: the runtime has no constructor and
//!   initialises itself on the first hook call.
//! - **LD_PRELOAD only.** `dlopen`ing the library after start would leave earlier blocks with
//!   the system allocator (fine) but put its TLS in dynamic TLS, which glibc allocates with
//!   `malloc` on first use (recursion); it is not supported.
#![cfg(target_os = "linux")]

// The unit-test harness is an ordinary Rust program: it must keep the system allocator, so the
// exported hooks are left out of it (and the rest is then partly unused there).
#[cfg_attr(test, allow(dead_code))]
mod cache;
#[cfg(not(test))]
mod hooks;
#[cfg_attr(test, allow(dead_code))]
mod real;
#[cfg_attr(test, allow(dead_code))]
mod runtime;
#[cfg_attr(test, allow(dead_code))]
mod site;
#[cfg_attr(test, allow(dead_code))]
mod table;

/// The page size the runtime assumes (x86-64 and the default aarch64 kernels).
pub const PAGE: usize = 4096;

/// Requests of at least this many bytes get their own mapping (one page: the seed's threshold,
/// object tiering §3.2; smaller objects would waste most of a page each).
pub const THRESHOLD: usize = 4096;
