//! PAGEMAP_SCAN (ioctl_pagemap_scan(2), Linux 6.7): which pages of another process were written
//! since they were write-protected, read in one system call per range.
//!
//! With a userfaultfd in asynchronous write-protect mode (`UFFD_FEATURE_WP_ASYNC`), a write to
//! a protected page faults, and the kernel lifts the page's protection itself, at once, without
//! waking anyone: the program never waits for Terrace. What is left behind is the page's
//! uffd-wp bit, now clear, which this ioctl reports as `PAGE_IS_WRITTEN`. The fault sampler uses
//! the pair to sample writes where no copy needs guarding
//! ([`crate::trackers::write_faults`]). The ioctl works on the address space the pagemap file
//! was opened for, so after an exec the file is opened again.
//!
//! The few structures are declared here from linux/fs.h (the build machines' headers predate
//! them).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The page lies in a range registered for asynchronous write-protection.
const PAGE_IS_WPALLOWED: u64 = 1 << 0;
/// The page was written since it was last write-protected.
const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// A page is mapped there (a frame, or a huge page's part).
const PAGE_IS_PRESENT: u64 = 1 << 3;
/// A swap entry is there (a page swapped out, or a marker standing for a protected hole).
const PAGE_IS_SWAPPED: u64 = 1 << 4;
/// The page is the shared zero page (mapped by a read of memory never written).
const PAGE_IS_PFNZERO: u64 = 1 << 5;
/// Write-protect the pages that match, in the same walk.
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;

/// struct pm_scan_arg.
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// struct page_region: [start, end) with the categories asked for in `return_mask`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

nix::ioctl_readwrite!(pagemap_scan, b'f', 16, PmScanArg);

/// Regions read per call; a longer answer takes more calls.
const REGIONS_PER_CALL: usize = 64;

/// An open `/proc/PID/pagemap`, for PAGEMAP_SCAN on that process's address space.
#[derive(Debug)]
pub struct PagemapScan {
    file: File,
}

impl PagemapScan {
    /// Opens the pagemap of `pid` (`"self"` for this process).
    pub fn open(pid: &str) -> io::Result<Self> {
        Ok(PagemapScan { file: File::open(format!("/proc/{pid}/pagemap"))? })
    }

    /// Appends to `out` the runs of pages in [start, end) that lie in a range registered for
    /// asynchronous write-protection and were written since they were last protected, as
    /// [start, end) pairs. Pages outside such a range are never reported; neither are holes,
    /// pages never touched, and pages only read since they were mapped (the zero page).
    pub fn written(&self, start: u64, end: u64, out: &mut Vec<(u64, u64)>) -> io::Result<()> {
        self.scan(start, end, 0, out)
    }

    /// [`Self::written`], and protects the pages reported again in the same walk, so that the
    /// next call reports the pages written after this one.
    pub fn take_written(&self, start: u64, end: u64, out: &mut Vec<(u64, u64)>) -> io::Result<()> {
        self.scan(start, end, PM_SCAN_WP_MATCHING, out)
    }

    fn scan(&self, start: u64, end: u64, flags: u64, out: &mut Vec<(u64, u64)>) -> io::Result<()> {
        let mut regions = [PageRegion::default(); REGIONS_PER_CALL];
        let mut from = start;
        while from < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags,
                start: from,
                end,
                vec: regions.as_mut_ptr() as u64,
                vec_len: REGIONS_PER_CALL as u64,
                // Written, in an asynchronously protected range, and not the zero page; and
                // there, present or swapped out: the kernel calls a hole never protected
                // "written" too (nothing protects it), which it is not, and protecting it would
                // fill the page tables of a sparse reservation (checked on Linux 6.18: a 64 MiB
                // mapping with 1,000 pages read was otherwise reported 15,384 pages written).
                category_inverted: PAGE_IS_PFNZERO,
                category_mask: PAGE_IS_WPALLOWED | PAGE_IS_WRITTEN | PAGE_IS_PFNZERO,
                category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                return_mask: PAGE_IS_WRITTEN,
                ..PmScanArg::default()
            };
            // SAFETY: PAGEMAP_SCAN reads one struct pm_scan_arg, writes its walk_end, and writes
            // at most vec_len page_regions into `regions`, which outlives the call.
            let n = unsafe { pagemap_scan(self.file.as_raw_fd(), &mut arg) }.map_err(io::Error::from)?;
            out.extend(regions[..n as usize].iter().map(|r| (r.start, r.end)));
            // The walk stops early only when the regions are full (the pages past it are neither
            // reported nor protected yet); it always moves forward.
            if (n as usize) < REGIONS_PER_CALL || arg.walk_end <= from {
                break;
            }
            from = arg.walk_end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structures_match_the_kernel_abi() {
        assert_eq!(std::mem::size_of::<PmScanArg>(), 96);
        assert_eq!(std::mem::size_of::<PageRegion>(), 24);
        // _IOWR('f', 16, struct pm_scan_arg) as linux/fs.h spells it on x86-64.
        assert_eq!(nix::request_code_readwrite!(b'f', 16, 96), 0xC060_6610);
    }
}
