//! The idle-page bitmap (Documentation/admin-guide/mm/idle_page_tracking.rst): the exact
//! *referenced* bit, where the kernel has it (CONFIG_IDLE_PAGE_TRACKING; no Debian kernel does,
//! so the live machine falls back to DAMON, then soft-dirty, and says so).
//!
//! One bit per page frame, in 64-bit words at byte offset `frame / 64 * 8`. Writing a word marks
//! the frames whose bits are 1 idle (clearing their accessed bits in the page tables); reading it
//! later, a bit still 1 means the frame was not accessed since. Frames come from the pagemap
//! (bits 0-54, which read as 0 without CAP_SYS_ADMIN).

use super::{LiveTracker, ScanView};
use crate::process::{ProcessError, ProcessMemory, PM_PRESENT};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use terrace_model::PAGE_REFERENCED;

pub const BITMAP: &str = "/sys/kernel/mm/page_idle/bitmap";

/// Bits 0-54 of a pagemap entry: the page frame number of a present page.
pub const PFN_MASK: u64 = (1 << 55) - 1;

/// Whether this kernel has the bitmap.
pub fn available() -> bool {
    Path::new(BITMAP).exists()
}

/// The bitmap, or a file laid out like it (tests).
pub struct IdleBitmap<F: FileExt = File> {
    file: F,
    words: Vec<(u64, u64)>,
}

impl IdleBitmap<File> {
    pub fn open() -> io::Result<Self> {
        Ok(IdleBitmap::over(OpenOptions::new().read(true).write(true).open(BITMAP)?))
    }
}

impl<F: FileExt> IdleBitmap<F> {
    pub fn over(file: F) -> Self {
        IdleBitmap { file, words: Vec::new() }
    }

    /// Groups `frames` by bitmap word: (word index, mask of their bits), in word order.
    fn group(&mut self, frames: &[u64]) {
        self.words.clear();
        self.words.extend(frames.iter().filter(|&&f| f != 0).map(|&f| (f / 64, 1u64 << (f % 64))));
        self.words.sort_unstable_by_key(|w| w.0);
        self.words.dedup_by(|b, a| {
            let same = a.0 == b.0;
            if same {
                a.1 |= b.1;
            }
            same
        });
    }

    /// Marks `frames` idle (frame 0, an absent page, is skipped).
    pub fn mark_idle(&mut self, frames: &[u64]) -> io::Result<()> {
        self.group(frames);
        for &(word, mask) in &self.words {
            self.file.write_all_at(&mask.to_ne_bytes(), word * 8)?;
        }
        Ok(())
    }

    /// Whether each of `frames` was accessed since it was marked idle (its bit reads 0). Frame 0
    /// reads as not accessed.
    pub fn accessed(&mut self, frames: &[u64]) -> io::Result<Vec<bool>> {
        self.group(frames);
        let mut idle_words = std::collections::HashMap::with_capacity(self.words.len());
        let mut buf = [0u8; 8];
        for &(word, _) in &self.words {
            self.file.read_exact_at(&mut buf, word * 8)?;
            idle_words.insert(word, u64::from_ne_bytes(buf));
        }
        Ok(frames
            .iter()
            .map(|&f| f != 0 && idle_words.get(&(f / 64)).is_some_and(|w| w & (1 << (f % 64)) == 0))
            .collect())
    }
}

/// The referenced bit from the bitmap: each scan reads whether each present page's frame was
/// accessed since the last scan marked it idle, then marks them all idle again.
pub struct IdlePage {
    bitmap: IdleBitmap,
}

impl IdlePage {
    /// Opens the bitmap for the program whose memory is `mem`, or says why it cannot be used
    /// here (the hint of a refusal when the config insists on it).
    pub fn open(mem: &ProcessMemory) -> Result<Self, String> {
        if !available() {
            return Err(format!(
                "{BITMAP} is missing (kernel without CONFIG_IDLE_PAGE_TRACKING); set [trackers] referenced = \"auto\""
            ));
        }
        let bitmap = IdleBitmap::open().map_err(|e| format!("cannot open {BITMAP}: {e} (it needs root)"))?;
        let mut entries = Vec::new();
        if mem.read_pagemap(&mut entries).is_ok()
            && entries.iter().any(|&e| e & PM_PRESENT != 0)
            && entries.iter().all(|&e| e & PM_PRESENT == 0 || e & PFN_MASK == 0)
        {
            return Err("pagemap shows no frame numbers (they need CAP_SYS_ADMIN)".into());
        }
        Ok(IdlePage { bitmap })
    }
}

impl LiveTracker for IdlePage {
    fn name(&self) -> &'static str {
        "idle-page bitmap"
    }

    /// Referenced: accessed since the last scan marked the page's frame idle.
    fn observe_bits(&mut self, scan: &ScanView<'_>, bits: &mut [u8]) -> Result<(), ProcessError> {
        let frames: Vec<u64> =
            scan.entries.iter().map(|&e| if e & PM_PRESENT != 0 { e & PFN_MASK } else { 0 }).collect();
        let marked = self.bitmap.accessed(&frames).and_then(|accessed| {
            for (b, a) in bits.iter_mut().zip(accessed) {
                if a {
                    *b |= PAGE_REFERENCED;
                }
            }
            self.bitmap.mark_idle(&frames)
        });
        if let Err(e) = marked {
            tracing::warn!("idle-page bitmap for pid {}: {e}", scan.pid);
        }
        Ok(())
    }

    /// The bitmap is indexed by physical frame, and each scan reads the frames from the pagemap
    /// afresh, so it follows the new program by itself.
    fn address_space_replaced(&mut self, _pid: i32) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_marked_idle_read_back_as_accessed_only_once_their_bit_is_cleared() {
        // A regular file stands in for the bitmap: 4 words, all zero.
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(&[0u8; 32], 0).unwrap();
        let mut bitmap = IdleBitmap::over(file);
        // Frames 3 and 5 share word 0, 64 and 127 word 1, 200 is in word 3; 0 is no frame.
        let frames = [3, 5, 64, 127, 200, 0];
        bitmap.mark_idle(&frames).unwrap();
        let mut word = [0u8; 8];
        bitmap.file.read_exact_at(&mut word, 8).unwrap();
        assert_eq!(u64::from_ne_bytes(word), 1 | 1 << 63, "word 1 holds frames 64 and 127");
        assert_eq!(bitmap.accessed(&frames).unwrap(), [false; 6]);
        // The kernel clears a frame's bit when it is accessed: frames 5 and 127 are.
        bitmap.file.write_all_at(&(1u64 << 3).to_ne_bytes(), 0).unwrap();
        bitmap.file.write_all_at(&1u64.to_ne_bytes(), 8).unwrap();
        assert_eq!(bitmap.accessed(&frames).unwrap(), [false, true, false, true, false, false]);
    }
}
