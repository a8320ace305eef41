//! A private anonymous mapping of its own, 2 MiB-aligned, with transparent huge pages asked for
//! or forbidden: what the machine's probes (`terrace profile measure`) and the migration
//! benchmark (`terrace bench migrate`) bind to one node and time. Aligned and alone in its VMA
//! so that a huge page can back every 2 MiB of it, and a 4 KiB one never merges with another.

use std::io;

const HUGE: usize = 2 << 20;

/// The mapping; unmapped when dropped.
#[derive(Debug)]
pub struct AlignedMapping {
    start: usize,
    len: usize,
}

impl AlignedMapping {
    /// Maps `len` bytes (a multiple of 4 KiB) at a 2 MiB boundary and advises huge pages
    /// (`huge`) or none. A refused advice (THP compiled out) is returned as an error only when
    /// `advice_required`: a probe loses nothing but page walks without it.
    pub fn new(len: usize, huge: bool, advice_required: bool) -> io::Result<AlignedMapping> {
        let raw_len = len + HUGE;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                raw_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let raw = raw as usize;
        let start = (raw + HUGE - 1) & !(HUGE - 1);
        // Trim the mapping to exactly [start, start + len).
        // SAFETY: both trimmed ranges lie inside the mapping just made and are page-aligned.
        unsafe {
            if start > raw {
                libc::munmap(raw as *mut libc::c_void, start - raw);
            }
            let end = raw + raw_len;
            if end > start + len {
                libc::munmap((start + len) as *mut libc::c_void, end - start - len);
            }
        }
        let mapping = AlignedMapping { start, len };
        let advice = if huge { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
        // SAFETY: the range is this mapping.
        if unsafe { libc::madvise(start as *mut libc::c_void, len, advice) } != 0 && advice_required {
            return Err(io::Error::last_os_error());
        }
        Ok(mapping)
    }

    pub fn addr(&self) -> usize {
        self.start
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the mapping the kernel backs with transparent huge pages (/proc/self/smaps).
    pub fn huge_bytes(&self) -> io::Result<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps")?;
        Ok(crate::bench_migrate::anon_huge_bytes(&smaps, self.start as u64, (self.start + self.len) as u64))
    }

    /// The mapping's bytes.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is read-write and owned by `self`, borrowed mutably for as long
        // as the slice lives.
        unsafe { std::slice::from_raw_parts_mut(self.start as *mut u8, self.len) }
    }

    /// The mapping's bytes, read-only.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is readable and owned by `self`, borrowed for the slice's life.
        unsafe { std::slice::from_raw_parts(self.start as *const u8, self.len) }
    }
}

impl Drop for AlignedMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value owns.
        unsafe { libc::munmap(self.start as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mapping_is_aligned_writable_and_of_the_length_asked() {
        let mut m = AlignedMapping::new(3 * 4096, false, false).unwrap();
        assert_eq!(m.addr() % HUGE, 0);
        assert_eq!(m.len(), 3 * 4096);
        m.bytes_mut().fill(7);
        assert!(m.bytes().iter().all(|&b| b == 7));
        assert_eq!(m.huge_bytes().unwrap(), 0, "12 KiB cannot hold a huge page");
    }
}
