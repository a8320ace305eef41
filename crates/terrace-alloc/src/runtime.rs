//! The runtime's own objects: mapping, recording, advising, reporting and freeing them.

use core::cell::Cell;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use terrace_alloc_ring::{Event, EventKind, RingRef};

use crate::{cache, site, table, PAGE};

thread_local! {
    /// Set while this thread is inside the runtime's large-object path; a nested allocation
    /// (from the unwinder) then goes straight to the system allocator. A const-initialised Cell
    /// of a type without Drop is a plain ELF TLS variable: no lazy initialisation, no destructor
    /// registration, no allocation. The library is preloaded, so its TLS block is static TLS and
    /// `__tls_get_addr` never has to allocate it (a `dlopen`ed runtime could, which is one reason
    /// the runtime supports LD_PRELOAD only).
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
    /// This thread's (pid << 32 | tid), refreshed when the pid changes (after fork).
    static IDS: Cell<u64> = const { Cell::new(0) };
}

/// The reentrancy guard; `None` if this thread is already inside.
pub struct Guard(());

impl Guard {
    #[inline]
    pub fn enter() -> Option<Guard> {
        IN_HOOK.with(|g| {
            if g.get() {
                None
            } else {
                g.set(true);
                Some(Guard(()))
            }
        })
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        IN_HOOK.with(|g| g.set(false));
    }
}

static RING_BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static RING_LEN: AtomicUsize = AtomicUsize::new(0);
/// A page mapped with MADV_WIPEONFORK whose first word caches the pid: a fork child finds it
/// zeroed and looks the pid up again. Null if the kernel lacks WIPEONFORK (pre-4.14): then the pid
/// is asked for at every event.
static PID_PAGE: AtomicPtr<AtomicU32> = AtomicPtr::new(core::ptr::null_mut());
/// The program's priority, from `TERRACE_PRIORITY` at attach (object tiering §5.5: an application
/// sets its priority when it connects to the daemon); 0 without it.
static PRIORITY: AtomicI32 = AtomicI32::new(0);
/// The process that has announced itself with a start event: a fork child inherits the parent's
/// value, finds it is not its own pid at its first event, and announces itself.
static ANNOUNCED: AtomicU32 = AtomicU32::new(0);
/// The variable that sets the priority.
const PRIORITY_ENV: &core::ffi::CStr = c"TERRACE_PRIORITY";

/// Writes `msg` to stderr and aborts (no allocation).
pub fn die(msg: &[u8]) -> ! {
    // SAFETY: writing a valid buffer to fd 2; abort never returns.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

/// Initialisation after the system allocator is known: the side table, the runtime's own text
/// range (for site ids), the pid page and the ring.
pub fn init() {
    table::init();
    cache::init();
    site::init();
    // SAFETY: a fresh anonymous page; madvise on it.
    unsafe {
        let p = libc::mmap(
            core::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p != libc::MAP_FAILED {
            if libc::madvise(p, PAGE, libc::MADV_WIPEONFORK) == 0 {
                PID_PAGE.store(p.cast(), Ordering::Release);
            } else {
                libc::munmap(p, PAGE);
            }
        }
    }
    attach_ring();
}

fn attach_ring() {
    // SAFETY: getenv reads the environment without allocating; the name is NUL-terminated.
    let path = unsafe { libc::getenv(c"TERRACE_OBJECTS_RING".as_ptr()) };
    if path.is_null() {
        return;
    }
    // SAFETY: open/fstat/mmap/close on a path from the environment; every result is checked,
    // and the mapping stays for the life of the process (and is inherited by fork children).
    unsafe {
        let fd = libc::open(path, libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let mut st: libc::stat = core::mem::zeroed();
        let len = if libc::fstat(fd, &mut st) == 0 { st.st_size as usize } else { 0 };
        let p = if len >= terrace_alloc_ring::HEADER_BYTES {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        libc::close(fd);
        if p == libc::MAP_FAILED {
            return;
        }
        match RingRef::from_raw(p.cast(), len) {
            Some(r) => {
                FOLIOS_UNASKED.store(folios_unasked(), Ordering::Relaxed);
                r.note_attached();
                PRIORITY.store(priority_from_env(), Ordering::Relaxed);
                // Announced before the ring is visible to the other threads (release below), so
                // that none of them announces the process a second time.
                let pid = ids().0;
                ANNOUNCED.store(pid, Ordering::Relaxed);
                RING_LEN.store(len, Ordering::Relaxed);
                RING_BASE.store(p.cast(), Ordering::Release);
                push_start(&r, pid);
            }
            None => {
                libc::munmap(p, len);
            }
        }
    }
}

/// Whether the kernel may give an anonymous mapping a large folio it was not asked for
/// (transparent huge pages set to "always", at the PMD size or at any multi-size THP size):
/// only then can a folio span two objects, so only then is [`map_object`]'s MADV_NOHUGEPAGE
/// worth its system call, one per fresh mapping (25,000 in the sqlite3 run of `terrace bench
/// tracking`). Read when the runtime attaches; where the files cannot be read it is assumed.
static FOLIOS_UNASKED: AtomicBool = AtomicBool::new(true);

/// The setting a THP `enabled` file selects (the bracketed word), into `buf`; None if the file
/// is missing, Some(empty) if it cannot be read or parsed.
fn thp_setting<'a>(path: &core::ffi::CStr, buf: &'a mut [u8; 96]) -> Option<&'a [u8]> {
    // SAFETY: open/read/close of a sysfs file into a stack buffer; results checked.
    let n = unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return if errno() == libc::ENOENT { None } else { Some(&[]) };
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    let text = &buf[..n.max(0) as usize];
    let open = text.iter().position(|&c| c == b'[');
    let close = text.iter().position(|&c| c == b']');
    Some(match (open, close) {
        (Some(a), Some(b)) if a < b => &text[a + 1..b],
        _ => &[],
    })
}

/// See [`FOLIOS_UNASKED`]. An unreadable file counts as "always".
fn folios_unasked() -> bool {
    let mut buf = [0u8; 96];
    match thp_setting(c"/sys/kernel/mm/transparent_hugepage/enabled", &mut buf) {
        None => return false, // a kernel without transparent huge pages
        Some(w) if w != b"madvise" && w != b"never" => return true,
        Some(_) => {}
    }
    // Multi-size THP (Linux 6.8): a size set to "always" is used unasked; "inherit" follows the
    // top-level setting, which is not "always" here.
    const SIZES: [&core::ffi::CStr; 9] = [
        c"/sys/kernel/mm/transparent_hugepage/hugepages-8kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-16kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-32kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-128kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-256kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-512kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-1024kB/enabled",
        c"/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled",
    ];
    SIZES.iter().any(|path| {
        let mut buf = [0u8; 96];
        matches!(thp_setting(path, &mut buf), Some(w) if w != b"madvise" && w != b"never" && w != b"inherit")
    })
}

#[inline]
fn ring() -> Option<RingRef> {
    let base = RING_BASE.load(Ordering::Acquire);
    if base.is_null() {
        return None;
    }
    // SAFETY: base/len are a mapping checked at attach and never unmapped.
    unsafe { RingRef::from_raw(base, RING_LEN.load(Ordering::Relaxed)) }
}

fn ids() -> (u32, u32) {
    let page = PID_PAGE.load(Ordering::Acquire);
    let pid = if page.is_null() {
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() as u32 }
    } else {
        // SAFETY: the page is mapped for the life of the process; its first word is an AtomicU32.
        let cached = unsafe { &*page };
        match cached.load(Ordering::Relaxed) {
            0 => {
                // SAFETY: as above.
                let p = unsafe { libc::getpid() as u32 };
                cached.store(p, Ordering::Relaxed);
                p
            }
            p => p,
        }
    };
    let v = IDS.with(|c| c.get());
    if v >> 32 == u64::from(pid) && v != 0 {
        return (pid, v as u32);
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() as u32 };
    IDS.with(|c| c.set((u64::from(pid) << 32) | u64::from(tid)));
    (pid, tid)
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec (vDSO, no allocation).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// `TERRACE_PRIORITY` as an `i32` (an optional sign and decimal digits); anything else is
/// reported in one line on stderr and read as 0, so a typo never stops the program.
fn priority_from_env() -> i32 {
    // SAFETY: getenv reads the environment without allocating; the name is NUL-terminated.
    let v = unsafe { libc::getenv(PRIORITY_ENV.as_ptr()) };
    if v.is_null() {
        return 0;
    }
    // SAFETY: a NUL-terminated string from the environment.
    // `str::parse` allocates nothing (an optional sign, then decimal digits).
    let bytes = unsafe { core::ffi::CStr::from_ptr(v) }.to_bytes();
    match core::str::from_utf8(bytes).ok().and_then(|t| t.parse::<i32>().ok()) {
        Some(p) => p,
        None => {
            let msg =
                b"libterrace_alloc: TERRACE_PRIORITY is not an integer from -2147483648 to 2147483647; \
                        this program runs at priority 0\n";
            // SAFETY: writing a valid buffer to fd 2.
            unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
            0
        }
    }
}

/// Pushes this process image's start event (docs/objects-runtime.md, "The ring file"), once per
/// process: at attach, and in a fork child before its first event.
fn announce(r: &RingRef, pid: u32) {
    ANNOUNCED.store(pid, Ordering::Relaxed);
    push_start(r, pid);
}

fn push_start(r: &RingRef, pid: u32) {
    // SAFETY: getauxval has no preconditions; AT_RANDOM's address is drawn anew at each exec.
    let image = unsafe { libc::getauxval(libc::AT_RANDOM) };
    let tid = ids().1;
    r.push(&Event::start(pid, tid, PRIORITY.load(Ordering::Relaxed), image, now_ns()));
}

fn report(r: &RingRef, kind: EventKind, addr: usize, bytes: usize, site: u64, node: i32) {
    let (pid, tid) = ids();
    if ANNOUNCED.load(Ordering::Relaxed) != pid {
        announce(r, pid);
    }
    r.push(&Event { kind, tid, pid, node, addr: addr as u64, bytes: bytes as u64, site, time_ns: now_ns() });
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(v: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v };
}

fn round_page(n: usize) -> Option<usize> {
    n.checked_add(PAGE - 1).map(|v| v & !(PAGE - 1))
}

pub(crate) fn map(len: usize) -> *mut u8 {
    // SAFETY: a fresh anonymous mapping; the kernel checks the arguments.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        core::ptr::null_mut()
    } else {
        p.cast()
    }
}

pub(crate) fn unmap(p: usize, len: usize) {
    // SAFETY: [p, p+len) is a mapping (or part of one) the runtime made and no longer hands out.
    unsafe { libc::munmap(p as *mut c_void, len) };
}

/// The size of a transparent huge page (x86-64, and arm64 with 4 KiB pages).
const HUGE: usize = 2 << 20;

/// A fresh mapping of `len` bytes (a page multiple) that starts at a multiple of `align` (a power
/// of two); null if there is no memory for it. With `own_folios` (Terrace is attached), no large
/// folio of the mapping holds another object's memory: Terrace places objects one by one and
/// `move_pages` moves a whole folio, so a huge page spanning two objects carries one with the
/// other. Adjacent anonymous mappings merge into one VMA, in which the kernel may fault in (or
/// khugepaged collapse) a huge page across the boundary; tests/vm case 41 saw a demotion of 14
/// pages move 3,584 pages of hot objects beside them. So an object under 2 MiB gets
/// MADV_NOHUGEPAGE (it could only have a huge page by sharing one) where the kernel gives huge
/// pages unasked ([`FOLIOS_UNASKED`]), and a larger object starts on a 2 MiB boundary, so that
/// its huge pages lie inside it (docs/objects-runtime.md, "Huge pages").
fn map_object(len: usize, align: usize, own_folios: bool) -> *mut u8 {
    let align = if own_folios && len >= HUGE { align.max(HUGE) } else { align };
    let p = if align <= PAGE {
        map(len)
    } else {
        let Some(total) = len.checked_add(align) else { return core::ptr::null_mut() };
        let raw = map(total);
        if raw.is_null() {
            return raw;
        }
        let start = (raw as usize + align - 1) & !(align - 1);
        if start > raw as usize {
            unmap(raw as usize, start - raw as usize);
        }
        let tail = raw as usize + total - (start + len);
        if tail > 0 {
            unmap(start + len, tail);
        }
        start as *mut u8
    };
    if own_folios && len < HUGE && !p.is_null() && FOLIOS_UNASKED.load(Ordering::Relaxed) {
        let saved = errno();
        // SAFETY: advice over a mapping just made and not yet handed out. It fails only on a
        // kernel without transparent huge pages, where there is nothing to keep apart.
        unsafe { libc::madvise(p.cast(), len, libc::MADV_NOHUGEPAGE) };
        set_errno(saved);
    }
    p
}

/// Binds [p, p+len) to `node` with MPOL_PREFERRED before anything touches it. Returns whether
/// it took; errno is left as it was.
fn bind(p: usize, len: usize, node: u32) -> bool {
    let mut mask = [0u64; 16];
    if node as usize >= mask.len() * 64 {
        return false;
    }
    mask[node as usize / 64] |= 1 << (node % 64);
    let saved = errno();
    // SAFETY: mbind over a mapping the runtime owns; the mask outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            p,
            len as libc::c_ulong,
            libc::MPOL_PREFERRED,
            mask.as_ptr(),
            (mask.len() * 64 + 1) as libc::c_ulong,
            0u32,
        )
    };
    set_errno(saved);
    r == 0
}

/// A new object of `size` bytes (at least THRESHOLD) aligned to `align` (a power of two) in its
/// own mapping, recorded and reported; null if the runtime cannot take it (mapping or table
/// full), and the caller then asks the system allocator. Zero-filled if `zero` (a fresh mapping
/// is; a cached one is cleared). `entry_cfa` as for [`site::id`]. Call inside the guard.
#[inline(always)]
pub fn alloc_large(size: usize, align: usize, zero: bool, entry_cfa: usize) -> *mut c_void {
    let Some(len) = round_page(size) else { return core::ptr::null_mut() };
    let ring = ring();
    let site = if ring.is_some() { site::id(entry_cfa) } else { 0 };
    let advice = ring.and_then(|r| r.advice(site));
    // Unadvised page-aligned objects are mapped at their cache class's size, so that their
    // mappings can be reused; advised ones always get a fresh mapping (first touch on the node).
    let cacheable = advice.is_none() && align <= PAGE;
    let len = if cacheable { cache::class_len(len) } else { len };
    let cached = if cacheable { cache::take(len) } else { None };
    let p = if let Some(c) = cached {
        if zero {
            // SAFETY: the cached mapping has len >= size bytes and is ours alone now.
            unsafe { core::ptr::write_bytes(c as *mut u8, 0, size) };
        }
        c as *mut u8
    } else {
        map_object(len, align, ring.is_some())
    };
    if p.is_null() {
        return core::ptr::null_mut();
    }
    let mut node = -1;
    let mut flags = 0;
    if let Some(n) = advice {
        if bind(p as usize, len, n) {
            node = n as i32;
            flags = table::BOUND;
        }
    }
    if !table::insert(p as usize, len | flags, size, site, table::MAX_PROBE) {
        unmap(p as usize, len);
        return core::ptr::null_mut();
    }
    if let Some(r) = ring {
        report(&r, EventKind::Alloc, p as usize, size, site, node);
    }
    p.cast()
}

/// Frees a runtime object given its entry: its mapping goes to the cache if it has no policy of
/// its own and fits, else it is unmapped.
pub fn free_large(p: usize, e: &table::Entry) {
    let len = e.len();
    let bound = e.bound();
    let size = e.size.load(Ordering::Acquire);
    let site = e.site.load(Ordering::Acquire);
    table::remove(e);
    if let Some(r) = ring() {
        report(&r, EventKind::Free, p, size, site, -1);
    }
    if bound || !cache::put(p, len) {
        unmap(p, len);
    }
}

/// Resizes a runtime object to `new` bytes (at least THRESHOLD): in place when the pages allow,
/// else by mremap (which moves the pages, and their memory policy, without copying). Null with
/// the object intact if it cannot. `entry_cfa` as for [`site::id`]. Call inside the guard.
pub fn realloc_large(p: usize, e: &'static table::Entry, new: usize, entry_cfa: usize) -> *mut c_void {
    let Some(new_len) = round_page(new) else { return core::ptr::null_mut() };
    let len = e.len();
    let flags = e.map_len.load(Ordering::Acquire) & table::BOUND;
    let old_size = e.size.load(Ordering::Acquire);
    let old_site = e.site.load(Ordering::Acquire);
    let ring = ring();
    let site = if ring.is_some() { site::id(entry_cfa) } else { 0 };
    if new_len <= len {
        if new_len < len {
            unmap(p + new_len, len - new_len);
            e.map_len.store(new_len | flags, Ordering::Release);
        }
        e.size.store(new, Ordering::Release);
        e.site.store(site, Ordering::Release);
        if let Some(r) = ring {
            report(&r, EventKind::Free, p, old_size, old_site, -1);
            report(&r, EventKind::Alloc, p, new, site, -1);
        }
        return p as *mut c_void;
    }
    // Out of the table, and its free reported, before mremap can unmap the old address: another
    // thread's new mapping there must meet no stale entry, and its alloc event must come after
    // this free in the ring.
    table::remove(e);
    if let Some(r) = ring {
        report(&r, EventKind::Free, p, old_size, old_site, -1);
    }
    // SAFETY: [p, p+len) is this object's whole mapping; MREMAP_MAYMOVE lets the kernel move it.
    let q = unsafe { libc::mremap(p as *mut c_void, len, new_len, libc::MREMAP_MAYMOVE) };
    if q == libc::MAP_FAILED {
        // The address is still ours, so its home probe finds the tombstone just left (or an
        // earlier free slot): put the entry back, and say the object lives on.
        if !table::insert(p, len | flags, old_size, old_site, table::SLOTS) {
            die(b"terrace-alloc: side table full while restoring an entry\n");
        }
        if let Some(r) = ring {
            report(&r, EventKind::Alloc, p, old_size, old_site, -1);
        }
        // mremap can refuse where a new mapping would not: Linux 6.12 refused a mapping that
        // Terrace's fault sampler had registered with its userfaultfd (tests/vm case 39, the
        // threaded program). Grow as the system allocator does then: a new object, a copy, and
        // the old one freed; null (the object intact) only if there is no memory for the copy.
        let q = alloc_large(new, PAGE, false, entry_cfa);
        if q.is_null() {
            return q;
        }
        // SAFETY: the old object holds old_size bytes, the new one `new`; distinct mappings.
        unsafe { core::ptr::copy_nonoverlapping(p as *const u8, q.cast::<u8>(), old_size.min(new)) };
        if let Some(e) = table::lookup(p) {
            free_large(p, e);
        }
        return q;
    }
    // The object has moved: from here the call must succeed, so the entry goes in whatever the
    // probe costs (a table with no free slot at all, a million live objects, is fatal).
    let q = q as usize;
    if !table::insert(q, new_len | flags, new, site, table::MAX_PROBE)
        && !table::insert(q, new_len | flags, new, site, table::SLOTS)
    {
        die(b"terrace-alloc: side table full while moving an object\n");
    }
    if let Some(r) = ring {
        report(&r, EventKind::Alloc, q, new, site, -1);
    }
    q as *mut c_void
}
