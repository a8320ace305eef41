//! Shadow copies in memory Terrace controls: the live machine's half of mtier's mechanism
//! (mtier §3.1; docs/live.md, "Shadow copies").
//!
//! User space cannot point an arbitrary page's mapping at another frame, but it can for memory
//! it maps itself. A [`ShadowRegion`] is `n` pages the program reads and writes at one address
//! range, backed by a memfd of `2n` pages: page `i` is file page `i` or file page `n + i`, its
//! two slots. mmap(MAP_FIXED) points an address at the other slot atomically (the old mapping is
//! replaced under the address-space lock, so a thread sees the old frame or the new, never a
//! hole), and the frames belong to the file, so the slot left behind keeps its data:
//!
//! - A move copies the page into its other slot (pwrite from the agent thread, whose memory
//!   policy binds the new frame to the target node) and switches to it. A promotion may keep
//!   the old slot as the page's shadow (mtier's copy + switch).
//! - Moving a shadowed page back to its shadow's node is the switch alone: no copy, no
//!   allocation (mtier's mapping switch). The fast slot is then freed (punched).
//! - A shadowed page is mapped read-only, so the program's first write faults; the fault
//!   handler drops the shadow, maps the page writable and lets the write go ahead. A switch
//!   therefore never returns to a stale shadow.
//! - A page is locked while it is copied or switched, and mapped read-only during the copy: a
//!   write waits in the fault handler until the page is in its new place, and lands there.
//!
//! Terrace asks for moves over a Unix socket ([`crate::shadow_link`]); the agent thread that
//! answers runs in the program ([`ShadowRegion::serve`]). If Terrace dies, the socket closes,
//! the thread ends and the program runs on with its pages where they are. One region per
//! process: the fault handler finds it through a static. Being a shared mapping, the region is
//! shared with a child the program forks, not copied; it is meant for memory Terrace controls.

use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

use crate::numa_sys;
use crate::shadow_link::{self, MoveReply, MoveRequest, PageResult};

const PAGE: usize = 4096;

/// Page state bits.
const LOCKED: u8 = 1;
/// The page is mapped from its second slot (`n + i`), not its first (`i`).
const SECOND: u8 = 2;
/// The slot not mapped holds a valid copy: the shadow.
const SHADOW: u8 = 4;

/// What the fault handler and the agent thread share; leaked, so it lives as long as the process.
struct Shared {
    base: usize,
    pages: usize,
    fd: i32,
    state: Box<[AtomicU8]>,
    /// The node of each page's shadow, while it has one.
    shadow_node: Box<[AtomicU8]>,
    /// Whether the program may write the region (its own protection; shadows aside).
    writable: AtomicBool,
    /// Shadows dropped because the program wrote their page.
    dropped: AtomicU64,
}

static REGION: AtomicPtr<Shared> = AtomicPtr::new(std::ptr::null_mut());
/// The SIGSEGV action before ours, put back for a fault that is not ours.
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

/// Memory the program uses whose pages Terrace can move with shadow copies.
pub struct ShadowRegion {
    shared: &'static Shared,
    /// Keeps the memfd open for the process's life (the handler uses its number).
    _fd: &'static OwnedFd,
}

/// What happened to one page of a move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Pointed back at its shadow: no copy.
    Switched,
    /// Copied to the target node and switched (the old copy kept as a shadow if asked).
    Copied,
    /// Already on the target node.
    Stayed,
}

impl ShadowRegion {
    /// Maps `pages` pages, readable and writable, zero-filled; installs the write-fault handler.
    /// Fails if this process already has a region.
    pub fn new(pages: usize) -> io::Result<ShadowRegion> {
        if pages == 0 || pages > u32::MAX as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a shadow region needs 1 to 2^32 pages"));
        }
        // SAFETY: memfd_create with a NUL-terminated name; checked below.
        let fd = unsafe { libc::memfd_create(c"terrace-shadow".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just created and is owned here alone.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let file_bytes = (2 * pages * PAGE) as libc::off_t;
        // SAFETY: a plain system call on our own descriptor.
        if unsafe { libc::ftruncate(fd, file_bytes) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new shared mapping of the memfd's first half; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let shared = Box::leak(Box::new(Shared {
            base: p as usize,
            pages,
            fd,
            state: (0..pages).map(|_| AtomicU8::new(0)).collect(),
            shadow_node: (0..pages).map(|_| AtomicU8::new(0)).collect(),
            writable: AtomicBool::new(true),
            dropped: AtomicU64::new(0),
        }));
        if REGION.compare_exchange(std::ptr::null_mut(), shared, Ordering::AcqRel, Ordering::Acquire).is_err()
        {
            // SAFETY: unmapping the mapping made above, used by nobody yet.
            unsafe { libc::munmap(p, pages * PAGE) };
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "this process already has a shadow region",
            ));
        }
        install_fault_handler()?;
        Ok(ShadowRegion { shared, _fd: Box::leak(Box::new(owned)) })
    }

    /// The region's first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.shared.base as *mut u8
    }

    pub fn pages(&self) -> usize {
        self.shared.pages
    }

    /// Shadows dropped so far because the program wrote their page.
    pub fn shadows_dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Pages that have a shadow now.
    pub fn shadowed(&self) -> usize {
        self.shared.state.iter().filter(|s| s.load(Ordering::Relaxed) & SHADOW != 0).count()
    }

    /// Sets the program's own protection of the region: read-only (a write is then the
    /// program's bug and faults as usual) or writable. Shadowed pages stay read-only to Terrace
    /// until written.
    pub fn set_writable(&self, writable: bool) -> io::Result<()> {
        let s = self.shared;
        s.writable.store(writable, Ordering::Release);
        for i in 0..s.pages {
            let st = s.lock(i);
            let r = s.protect(i, 1, writable && st & SHADOW == 0);
            s.unlock(i, st);
            r?;
        }
        Ok(())
    }

    /// Moves pages `indices` to `node`; a promotion (`keep_shadow`) keeps each page's old copy
    /// as its shadow. A page whose shadow is on `node` is switched back to it without a copy.
    pub fn move_pages(&self, indices: &[u32], node: u32, keep_shadow: bool) -> Vec<Result<Moved, i32>> {
        let s = self.shared;
        // The copies are allocated by this thread, under its own memory policy.
        let bound = numa_sys::set_mempolicy(numa_sys::MPOL_BIND, &[node]);
        let out = indices
            .iter()
            .map(|&i| match (&bound, (i as usize) < s.pages) {
                (Err(e), _) => Err(e.raw_os_error().unwrap_or(libc::EINVAL)),
                (_, false) => Err(libc::EINVAL),
                (Ok(()), true) => s.move_page(i as usize, node, keep_shadow),
            })
            .collect();
        let _ = numa_sys::set_mempolicy(numa_sys::MPOL_DEFAULT, &[]);
        out
    }

    /// Serves Terrace's move requests on a thread of its own, if Terrace started the program
    /// with a socket for it (`TERRACE_SHADOW_AGENT`); returns whether it connected. The thread
    /// ends when Terrace closes the socket or dies.
    pub fn serve_terrace(&'static self) -> io::Result<bool> {
        let Some(path) = std::env::var_os(shadow_link::ENV) else { return Ok(false) };
        let mut stream = UnixStream::connect(path)?;
        writeln!(stream, "{}", shadow_link::hello(self.shared.base as u64, self.shared.pages as u64))?;
        std::thread::Builder::new().name("terrace-shadow".into()).spawn(move || {
            let _ = self.serve(stream);
        })?;
        Ok(true)
    }

    /// Answers each request line on `stream` until it closes.
    fn serve(&self, stream: UnixStream) -> io::Result<()> {
        let mut out = stream.try_clone()?;
        for line in BufReader::new(stream).lines() {
            let line = line?;
            let reply = match MoveRequest::parse(&line) {
                Ok(req) => {
                    let results = self.move_pages(&req.pages, req.node, req.keep_shadow);
                    MoveReply {
                        results: results
                            .iter()
                            .map(|r| match r {
                                Ok(Moved::Switched) => PageResult::Switched,
                                Ok(Moved::Copied) => PageResult::Copied,
                                Ok(Moved::Stayed) => PageResult::Stayed,
                                Err(e) => PageResult::Failed(*e),
                            })
                            .collect(),
                        dropped: self.shadows_dropped(),
                    }
                    .to_line()
                }
                Err(e) => format!("error {e}"),
            };
            writeln!(out, "{reply}")?;
        }
        Ok(())
    }
}

impl Shared {
    fn page_addr(&self, i: usize) -> usize {
        self.base + i * PAGE
    }

    fn slot_offset(&self, i: usize, second: bool) -> libc::off_t {
        ((if second { self.pages + i } else { i }) * PAGE) as libc::off_t
    }

    /// Takes page `i`'s lock (spinning: it is held for one page's copy) and returns its state.
    fn lock(&self, i: usize) -> u8 {
        loop {
            let st = self.state[i].load(Ordering::Acquire);
            if st & LOCKED == 0
                && self.state[i]
                    .compare_exchange_weak(st, st | LOCKED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return st;
            }
            std::hint::spin_loop();
        }
    }

    fn unlock(&self, i: usize, st: u8) {
        self.state[i].store(st & !LOCKED, Ordering::Release);
    }

    fn protect(&self, i: usize, n: usize, writable: bool) -> io::Result<()> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: pages of our own mapping; only their protection changes.
        if unsafe { libc::mprotect(self.page_addr(i) as *mut libc::c_void, n * PAGE, prot) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Frees one slot's frame (async-signal-safe: one system call).
    fn punch(&self, offset: libc::off_t) {
        // SAFETY: a hole in our own memfd, in a slot no address maps now.
        unsafe {
            libc::fallocate(
                self.fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset,
                PAGE as libc::off_t,
            )
        };
    }

    /// Points page `i`'s address at one of its slots, atomically. The page-table entry is
    /// filled at once (MAP_POPULATE): an address whose entry is empty reads as not present to
    /// move_pages and pagemap, and Terrace would count the page in no tier until the program
    /// touched it again.
    fn map_slot(&self, i: usize, second: bool, writable: bool) -> io::Result<()> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: replaces one page of our own mapping with another page of the same file;
        // MAP_FIXED does it under the address-space lock, so no thread sees a hole.
        let p = unsafe {
            libc::mmap(
                self.page_addr(i) as *mut libc::c_void,
                PAGE,
                prot,
                libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE,
                self.fd,
                self.slot_offset(i, second),
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn node_of(&self, i: usize) -> Option<u32> {
        let mut status = [-1i32];
        numa_sys::query_nodes(0, &[self.page_addr(i) as u64], &mut status).ok()?;
        (status[0] >= 0).then_some(status[0] as u32)
    }

    fn move_page(&self, i: usize, node: u32, keep_shadow: bool) -> Result<Moved, i32> {
        let st = self.lock(i);
        let result = self.move_locked(i, st, node, keep_shadow);
        let new = match result {
            Ok((_, st)) => st,
            Err(_) => st,
        };
        self.unlock(i, new);
        result.map(|(m, _)| m)
    }

    /// Moves locked page `i` (state `st`); returns what happened and its new state.
    fn move_locked(&self, i: usize, st: u8, node: u32, keep_shadow: bool) -> Result<(Moved, u8), i32> {
        let errno = |e: io::Error| e.raw_os_error().unwrap_or(libc::EIO);
        let second = st & SECOND != 0;
        let writable = self.writable.load(Ordering::Acquire);
        if st & SHADOW != 0 && u32::from(self.shadow_node[i].load(Ordering::Relaxed)) == node {
            // The shadow is unwritten (a write would have dropped it): switch, free the copy.
            self.map_slot(i, !second, writable).map_err(errno)?;
            self.punch(self.slot_offset(i, second));
            return Ok((Moved::Switched, (st ^ SECOND) & !SHADOW));
        }
        let old_node = self.node_of(i);
        if old_node == Some(node) {
            return Ok((Moved::Stayed, st));
        }
        let shadow_node = old_node.filter(|_| keep_shadow).and_then(|n| u8::try_from(n).ok());
        let st = self.copy_and_switch(i, st, shadow_node).map_err(errno)?;
        Ok((Moved::Copied, st))
    }

    /// Copies locked page `i` (state `st`) into its other slot, under this thread's memory
    /// policy, and switches to it; the old slot stays as the shadow if `shadow_node` names its
    /// node, else it is freed. Returns the new state.
    fn copy_and_switch(&self, i: usize, st: u8, shadow_node: Option<u8>) -> io::Result<u8> {
        let second = st & SECOND != 0;
        let writable = self.writable.load(Ordering::Acquire);
        // A shadow elsewhere is no use for this move: its slot takes the new copy.
        self.punch(self.slot_offset(i, !second));
        // No write while the page is copied: a writer waits in the fault handler for the lock.
        self.protect(i, 1, false)?;
        // SAFETY: reads one page of our own mapping into the other slot of our memfd.
        let n = unsafe {
            libc::pwrite(
                self.fd,
                self.page_addr(i) as *const libc::c_void,
                PAGE,
                self.slot_offset(i, !second),
            )
        };
        let copied = match n {
            n if n == PAGE as isize => Ok(()),
            n if n < 0 => Err(io::Error::last_os_error()),
            _ => Err(io::Error::from_raw_os_error(libc::EIO)),
        };
        if let Err(e) = copied.and_then(|()| self.map_slot(i, !second, writable && shadow_node.is_none())) {
            // Still on the old slot, which is intact: put its protection back.
            self.punch(self.slot_offset(i, !second));
            let _ = self.protect(i, 1, writable && st & SHADOW == 0);
            return Err(e);
        }
        match shadow_node {
            Some(n) => {
                self.shadow_node[i].store(n, Ordering::Relaxed);
                Ok((st ^ SECOND) | SHADOW)
            }
            None => {
                self.punch(self.slot_offset(i, second));
                Ok((st ^ SECOND) & !SHADOW)
            }
        }
    }

    /// A write to page `i`: drop its shadow, let the program write. Async-signal-safe.
    fn on_write(&self, i: usize) {
        let st = self.lock(i);
        if st & SHADOW != 0 {
            self.punch(self.slot_offset(i, st & SECOND == 0));
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self.protect(i, 1, true);
        self.unlock(i, st & !SHADOW);
    }
}

fn install_fault_handler() -> io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler below is async-signal-safe (atomics and
    // system calls only), and PREVIOUS is written once, before the handler can run.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_fault as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let previous = &raw mut PREVIOUS;
        if libc::sigaction(libc::SIGSEGV, &action, (*previous).as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO; REGION, once set, points to a
    // leaked Shared that is never freed.
    unsafe {
        let addr = (*info).si_addr() as usize;
        let shared = REGION.load(Ordering::Acquire);
        if let Some(s) = shared.as_ref() {
            if addr >= s.base && addr < s.base + s.pages * PAGE && s.writable.load(Ordering::Acquire) {
                s.on_write((addr - s.base) / PAGE);
                return;
            }
        }
        // Not ours, or a write the program itself forbade: what would have happened without
        // us happens. A handler of the program's own is called; for the default action, it is
        // put back and the faulting instruction runs again and faults as it would have.
        let previous = &*(&raw const PREVIOUS).cast::<libc::sigaction>();
        let handler = previous.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            libc::sigaction(libc::SIGSEGV, previous, std::ptr::null_mut());
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(sig);
        }
    }
}

/// The memfd name the region's mappings carry in /proc/PID/maps.
pub const MAPS_NAME: &str = "/memfd:terrace-shadow";

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// One region per process: the tests share it, one at a time.
    fn region() -> &'static ShadowRegion {
        static R: OnceLock<ShadowRegion> = OnceLock::new();
        R.get_or_init(|| ShadowRegion::new(8).expect("a shadow region"))
    }
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn words(r: &ShadowRegion) -> &'static mut [u64] {
        // SAFETY: the region is pages * 4096 bytes, mapped for the process's life.
        unsafe { std::slice::from_raw_parts_mut(r.as_ptr() as *mut u64, r.pages() * PAGE / 8) }
    }

    fn fill(r: &ShadowRegion, salt: u64) {
        for (i, w) in words(r).iter_mut().enumerate() {
            // SAFETY: a word of the region; volatile so the write really happens.
            unsafe { std::ptr::write_volatile(w, i as u64 ^ salt) };
        }
    }

    fn check(r: &ShadowRegion, salt: u64) {
        for (i, w) in words(r).iter().enumerate() {
            // SAFETY: as above.
            assert_eq!(unsafe { std::ptr::read_volatile(w) }, i as u64 ^ salt, "word {i}");
        }
    }

    /// Gives pages `range` a shadow "on node 0" the way a promotion does (node 0 exists on
    /// every host; moves between nodes are tested in the guest, tests/vm case 38).
    fn shadow(r: &ShadowRegion, range: std::ops::Range<usize>) {
        let s = r.shared;
        for i in range {
            let st = s.lock(i);
            let st = s.copy_and_switch(i, st, Some(0)).expect("a copy into the other slot");
            s.unlock(i, st);
        }
    }

    #[test]
    fn a_copy_keeps_every_value_and_a_shadow_and_the_way_back_is_a_switch() {
        let _g = SERIAL.lock().unwrap();
        let r = region();
        r.set_writable(true).unwrap();
        fill(r, 0x55);
        shadow(r, 0..8);
        assert_eq!(r.shadowed(), 8);
        // Present before the program touches them again: Terrace must see them in a tier.
        let addrs: Vec<u64> = (0..8).map(|i| r.shared.page_addr(i) as u64).collect();
        let mut nodes = [-1i32; 8];
        numa_sys::query_nodes(0, &addrs, &mut nodes).unwrap();
        assert!(nodes.iter().all(|&n| n >= 0), "{nodes:?}");
        check(r, 0x55);
        // The shadow is on the target node: a switch each, no copy.
        let out = r.move_pages(&(0..8).collect::<Vec<_>>(), 0, false);
        assert!(out.iter().all(|m| *m == Ok(Moved::Switched)), "{out:?}");
        assert_eq!(r.shadowed(), 0);
        check(r, 0x55);
        // Already there: nothing happens.
        assert_eq!(r.move_pages(&[0], 0, true), vec![Ok(Moved::Stayed)]);
        check(r, 0x55);
    }

    #[test]
    fn a_write_drops_the_shadow_and_lands() {
        let _g = SERIAL.lock().unwrap();
        let r = region();
        r.set_writable(true).unwrap();
        fill(r, 0x77);
        shadow(r, 1..2);
        check(r, 0x77);
        let before = r.shadows_dropped();
        // The write faults (a shadowed page is read-only), the handler drops the shadow, and
        // the write lands.
        words(r)[512 + 3] = 42;
        assert_eq!(r.shadows_dropped(), before + 1);
        assert_eq!(words(r)[512 + 3], 42);
        assert_eq!(r.shadowed(), 0);
        // A move to the old shadow's node is never a switch to the stale slot.
        assert_ne!(r.move_pages(&[1], 0, false)[0], Ok(Moved::Switched));
        assert_eq!(words(r)[512 + 3], 42);
        words(r)[512 + 3] = (512 + 3) ^ 0x77;
        check(r, 0x77);
        // Written after the switch back, a page does not fault again.
        shadow(r, 2..3);
        assert_eq!(r.move_pages(&[2], 0, false), vec![Ok(Moved::Switched)]);
        let before = r.shadows_dropped();
        words(r)[2 * 512] = 7;
        assert_eq!(r.shadows_dropped(), before);
        words(r)[2 * 512] = (2 * 512) ^ 0x77;
        check(r, 0x77);
    }

    /// A writer races the moves: every write lands, none is lost to a copy or a switch, and a
    /// switch never goes back to a copy older than the last write.
    #[test]
    fn writes_during_copies_and_switches_are_never_lost() {
        let _g = SERIAL.lock().unwrap();
        let r = region();
        r.set_writable(true).unwrap();
        fill(r, 0);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let w = words(region());
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for p in 0..8 {
                        // SAFETY: a word of the region.
                        unsafe { std::ptr::write_volatile(&mut w[p * 512 + 9], n) };
                    }
                    n += 1;
                }
                n
            })
        };
        let pages: Vec<u32> = (0..8).collect();
        let mut switched = 0;
        for _ in 0..300 {
            shadow(r, 0..8);
            switched += r.move_pages(&pages, 0, false).iter().filter(|m| **m == Ok(Moved::Switched)).count();
        }
        stop.store(true, Ordering::Relaxed);
        let last = writer.join().unwrap() - 1;
        for p in 0..8 {
            assert_eq!(words(r)[p * 512 + 9], last, "page {p}");
        }
        // Some shadows survived to be switched to, and some were dropped by the writes.
        assert!(switched < 300 * 8, "the writer dropped no shadow");
        for p in 0..8 {
            words(r)[p * 512 + 9] = (p * 512 + 9) as u64;
        }
        check(r, 0);
    }

    #[test]
    fn a_read_only_region_leaves_a_stray_write_to_fault() {
        let _g = SERIAL.lock().unwrap();
        let r = region();
        r.set_writable(false).unwrap();
        // Probe in a child: a write there must die of SIGSEGV, not be let through.
        // SAFETY: the child only writes and exits.
        match unsafe { libc::fork() } {
            0 => {
                words(r)[0] = 1;
                // SAFETY: exiting the child without running the parent's destructors.
                unsafe { libc::_exit(0) }
            }
            pid => {
                let mut status = 0;
                // SAFETY: waiting for our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert!(
                    libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV,
                    "status {status}"
                );
            }
        }
        r.set_writable(true).unwrap();
    }

    #[test]
    fn a_bad_page_index_fails_that_page_only() {
        let _g = SERIAL.lock().unwrap();
        let r = region();
        let out = r.move_pages(&[99, 0], 0, false);
        assert_eq!(out[0], Err(libc::EINVAL));
        assert!(out[1].is_ok());
    }
}
