//! Soft-dirty: "written since the last clear" per page. Writing 4 to /proc/PID/clear_refs clears
//! the bits (and write-protects the pages so the next write sets the bit again); bit 55 of each
//! pagemap entry reads it (Documentation/admin-guide/mm/soft-dirty.rst).
//!
//! This is the live machine's dirty bit for the page-table-bits tracker. Where the idle-page
//! bitmap is missing (every Debian kernel), it also stands in for the referenced bit, so a policy
//! sees written pages as referenced and read-only pages as idle; the machine logs the substitute.

use super::{LiveTracker, ScanView};
use crate::process::{ProcessError, PM_PRESENT, PM_SOFT_DIRTY};
use std::io::Write;
use terrace_model::{PAGE_DIRTY, PAGE_REFERENCED};

/// The dirty bit of the page-table-bits tracker (and the referenced bit where nothing better is
/// there): each scan reads the bits, then clears them for the next.
#[derive(Default)]
pub struct SoftDirty {
    /// Pages moved since the last scan, with the bits they showed before: the move itself sets
    /// their soft-dirty bits (docs/live.md, "Soft-dirty after a move").
    before_move: Vec<(u32, u8)>,
}

impl LiveTracker for SoftDirty {
    fn name(&self) -> &'static str {
        "soft-dirty"
    }

    /// A page written since the last scan is dirty and referenced.
    fn observe_bits(&mut self, scan: &ScanView<'_>, bits: &mut [u8]) -> Result<(), ProcessError> {
        for (b, &e) in bits.iter_mut().zip(scan.entries) {
            if is_dirty(e) && e & PM_PRESENT != 0 {
                *b |= PAGE_REFERENCED | PAGE_DIRTY;
            }
        }
        clear(scan.pid)?;
        for (i, before) in self.before_move.drain(..) {
            if let Some(b) = bits.get_mut(i as usize) {
                *b = before;
            }
        }
        Ok(())
    }

    /// Moving a page the program has written sets its soft-dirty bit: the kernel re-makes the
    /// mapping dirty after the copy, and on x86 making an entry dirty sets soft-dirty too. So at
    /// the next scan a moved page shows what it showed before the move.
    fn after_moves(&mut self, scan: &ScanView<'_>, moved: &[u64], bits: &[u8]) {
        for &addr in moved {
            if let Some(i) = scan.index().index_of(addr) {
                if let Some(&b) = bits.get(i as usize) {
                    self.before_move.push((i, b));
                }
            }
        }
    }

    /// clear_refs acts on whatever address space the pid has, and the new program's pages start
    /// out soft-dirty (as any new page does), so only the bits of moved pages, which belonged to
    /// the old one, are dropped.
    fn address_space_replaced(&mut self, _pid: i32) -> Result<(), String> {
        self.before_move.clear();
        Ok(())
    }
}

/// Clears the soft-dirty bits of every page of `pid`.
pub fn clear(pid: i32) -> Result<(), ProcessError> {
    let path = format!("/proc/{pid}/clear_refs");
    let io = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ESRCH) => ProcessError::Gone(pid),
        Some(libc::EACCES) | Some(libc::EPERM) => ProcessError::Permission { pid, what: "clear_refs" },
        _ => ProcessError::Io { pid, what: "clear_refs", source: e },
    };
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).map_err(io)?;
    f.write_all(b"4").map_err(io)
}

/// Whether a pagemap entry says the page was written since the last clear.
pub fn is_dirty(entry: u64) -> bool {
    entry & PM_SOFT_DIRTY != 0
}

/// Whether soft-dirty tracking works for `pid`: clear, then see the bit come back on a page
/// written after the clear. Only meaningful for this process (it writes the page itself).
pub fn works_here() -> bool {
    let me = std::process::id() as i32;
    let mut page = vec![0u8; 2 * 4096];
    let addr = (page.as_mut_ptr() as u64 + 4095) & !4095;
    if clear(me).is_err() {
        return false;
    }
    // SAFETY: addr is inside `page`, which is alive and writable.
    unsafe { std::ptr::write_volatile(addr as *mut u8, 1) };
    let Ok(f) = std::fs::File::open("/proc/self/pagemap") else { return false };
    let mut raw = [0u8; 8];
    use std::os::unix::fs::FileExt;
    if f.read_exact_at(&mut raw, (addr >> 12) * 8).is_err() {
        return false;
    }
    std::hint::black_box(&page);
    is_dirty(u64::from_ne_bytes(raw))
}
