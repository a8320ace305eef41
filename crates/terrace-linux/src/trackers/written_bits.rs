//! Written bits where the kernel has no soft-dirty: userfaultfd's asynchronous write-protection
//! (`UFFD_FEATURE_WP_ASYNC`, Linux 6.7), read and reset with PAGEMAP_SCAN.
//!
//! Every page of the program's anonymous memory is write-protected; the first write to a page
//! faults, and the kernel lifts the page's protection itself, at once (the program never waits
//! for Terrace). Each scan asks PAGEMAP_SCAN for the pages whose protection is gone and protects
//! them again in the same call (`PM_SCAN_WP_MATCHING`), as soft-dirty's read of
//! `/proc/PID/pagemap` and write of `clear_refs` do together, so what a scan reports is each page
//! written since the one before. It costs the program what soft-dirty does: a fault on the first
//! write to each page after each scan. Unlike soft-dirty it needs a userfaultfd made inside the
//! program ([`crate::remote_syscall`]), which acts on one address space, so an exec takes a new
//! one ([`WrittenBits::follow`]).
//!
//! A range's present pages are protected when it is registered, by the same call, which reports
//! those already written (in a range mapped since the last scan, or after an exec, written since
//! it); a page not there yet is protected at the first scan after its first touch, which
//! reports it written if that touch was a write (a read maps the shared zero page, which is
//! never reported: nothing was written). Protecting unpopulated pages ahead would fill the page
//! tables of every sparse reservation a program maps. If Terrace dies, the kernel closes the
//! descriptor, which lifts every protection.

use crate::pagemap_scan::PagemapScan;
use crate::userfaultfd::{Userfaultfd, UFFD_FEATURE_WP_ASYNC};
use std::io;

/// Whether this kernel and Terrace's privileges allow it (the probe of
/// [`crate::userfaultfd::probe_kernel_resolved`]); the error says what is missing.
pub fn works_here() -> Result<(), String> {
    crate::userfaultfd::probe_kernel_resolved()
}

/// The written bits of one process, through a userfaultfd of its address space.
pub struct WrittenBits {
    uffd: Userfaultfd,
    pagemap: PagemapScan,
    pid: i32,
    /// Ranges registered and protected, [start, end).
    registered: Vec<(u64, u64)>,
}

impl WrittenBits {
    /// Starts on `uffd`, a userfaultfd made inside process `pid`: nothing is registered yet.
    pub fn start(uffd: Userfaultfd, pid: i32) -> io::Result<Self> {
        let pagemap = PagemapScan::open(&pid.to_string())?;
        uffd.handshake_requiring(UFFD_FEATURE_WP_ASYNC)?;
        Ok(WrittenBits { uffd, pagemap, pid, registered: Vec::new() })
    }

    /// Moves to `uffd`, a userfaultfd made inside the program that process `pid` exec'd: what
    /// was registered belonged to the address space it left.
    pub fn follow(&mut self, uffd: Userfaultfd) -> io::Result<()> {
        *self = WrittenBits::start(uffd, self.pid)?;
        Ok(())
    }

    /// Registers and protects every range of `ranges` ([start, end) of anonymous private
    /// memory) not registered yet, appending to `out` the runs of its pages already written
    /// (present, not the zero page), and forgets registered ranges no longer among `ranges`
    /// (unmapped, or grown into a new one). A range new since the last call was mapped since
    /// it, so its written pages were written since it, as soft-dirty would report them in a
    /// new mapping or after an exec; a range grown past its old end reports the writes to its
    /// old part since the last call; only at the first call of a recording do they predate it,
    /// and the caller drops them. A range the kernel refuses (another userfaultfd has it, the
    /// mapping changed meanwhile) is left out, and tried again at the next call; returns how
    /// many were.
    pub fn register(
        &mut self,
        ranges: impl IntoIterator<Item = (u64, u64)>,
        out: &mut Vec<(u64, u64)>,
    ) -> usize {
        let mut refused = 0;
        let mut now = Vec::with_capacity(self.registered.len());
        for (s, e) in ranges {
            if self.registered.contains(&(s, e)) {
                now.push((s, e));
                continue;
            }
            match self.uffd.register_wp(s, e - s).and_then(|()| self.pagemap.take_written(s, e, out)) {
                Ok(()) => now.push((s, e)),
                Err(_) => refused += 1,
            }
        }
        self.registered = now;
        refused
    }

    /// Appends to `out` the runs of pages written since the last call (or since their range was
    /// registered), [start, end), and protects them again.
    pub fn take(&mut self, out: &mut Vec<(u64, u64)>) -> io::Result<()> {
        for &(s, e) in &self.registered {
            match self.pagemap.take_written(s, e, out) {
                Ok(()) => {}
                // Unmapped since it was registered: nothing of it to read.
                Err(err) if err.raw_os_error() == Some(libc::ENOMEM) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recording of this process's own writes: pages written between two scans come back
    /// once, pages only read or not touched never, and the values written stay.
    #[test]
    #[ignore = "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest"]
    fn each_scan_reports_the_pages_written_since_the_last() {
        if let Err(e) = works_here() {
            panic!("the kernel cannot resolve write-protect faults ({e}); this test runs in the guest");
        }
        use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
        let len = 16 * 4096usize;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p = unsafe { mmap_anonymous(None, len.try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }.unwrap();
        let base = p.as_ptr() as u64;
        // SAFETY: our mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u8>(), len) };
        // Pages 0-7 present, 8-15 untouched.
        mem[..8 * 4096].fill(1);
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        let mut bits = WrittenBits::start(uffd, std::process::id() as i32).unwrap();
        let page = |i: u64| (base + i * 4096, base + (i + 1) * 4096);
        let mut out = Vec::new();
        assert_eq!(bits.register([(base, base + len as u64)], &mut out), 0);
        assert_eq!(out, vec![(base, page(7).1)], "the pages written before the range was registered");
        out.clear();
        assert_eq!(bits.register([(base, base + len as u64)], &mut out), 0);
        assert!(out.is_empty(), "a registered range registers once: {out:x?}");
        bits.take(&mut out).unwrap();
        assert!(out.is_empty(), "nothing written since the range was registered: {out:x?}");
        // Writes to 2, 3 (twice) and 9 (unpopulated until now); reads of 5 and 12 (unpopulated:
        // the zero page).
        mem[2 * 4096] = 7;
        mem[3 * 4096] = 8;
        mem[3 * 4096 + 1] = 9;
        mem[9 * 4096] = 10;
        let read = std::hint::black_box(mem[5 * 4096]) + std::hint::black_box(mem[12 * 4096]);
        assert_eq!(read, 1);
        bits.take(&mut out).unwrap();
        assert_eq!(out, vec![(page(2).0, page(3).1), page(9)]);
        out.clear();
        bits.take(&mut out).unwrap();
        assert!(out.is_empty(), "a write reported twice: {out:x?}");
        mem[3 * 4096] = 11;
        bits.take(&mut out).unwrap();
        assert_eq!(out, vec![page(3)]);
        assert_eq!((mem[2 * 4096], mem[3 * 4096], mem[3 * 4096 + 1], mem[9 * 4096]), (7, 11, 9, 10));
        drop(bits);
        // SAFETY: unmapping the test's own mapping.
        unsafe { nix::sys::mman::munmap(p, len) }.unwrap();
    }

    /// A sparse range: the pages only read (the zero page) and the holes are neither reported
    /// written when it is registered nor protected (which would fill its page tables); the one
    /// page written is reported, and a hole written later is reported at the next scan.
    #[test]
    #[ignore = "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest"]
    fn a_sparse_range_reports_only_its_written_pages() {
        if let Err(e) = works_here() {
            panic!("the kernel cannot resolve write-protect faults ({e}); this test runs in the guest");
        }
        use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
        let len = 64usize << 20;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p = unsafe { mmap_anonymous(None, len.try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }.unwrap();
        let base = p.as_ptr() as u64;
        // Base pages, where THP is `always` (the guest's): a write would fill, and report, 2 MiB.
        // SAFETY: advice on our own mapping.
        unsafe { nix::sys::mman::madvise(p, len, nix::sys::mman::MmapAdvise::MADV_NOHUGEPAGE) }.unwrap();
        // SAFETY: our mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u8>(), len) };
        let page = |i: u64| (base + i * 4096, base + (i + 1) * 4096);
        let read: u64 = (0..1000).map(|i| u64::from(std::hint::black_box(mem[i * 4096]))).sum();
        assert_eq!(read, 0);
        mem[5000 * 4096] = 1;
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        let mut bits = WrittenBits::start(uffd, std::process::id() as i32).unwrap();
        let mut out = Vec::new();
        assert_eq!(bits.register([(base, base + len as u64)], &mut out), 0);
        assert_eq!(out, vec![page(5000)], "only the page written, not the holes after the pages read");
        out.clear();
        let read: u64 = (0..2000).map(|i| u64::from(std::hint::black_box(mem[i * 4096]))).sum();
        assert_eq!(read, 0);
        mem[9000 * 4096] = 2;
        bits.take(&mut out).unwrap();
        assert_eq!(out, vec![page(9000)]);
        drop(bits);
        // SAFETY: unmapping the test's own mapping.
        unsafe { nix::sys::mman::munmap(p, len) }.unwrap();
    }
}
