//! Replays a program's memory accesses on this host's memory, mapped once with 4 KiB pages and
//! once with 2 MiB transparent huge pages, and times both (`terrace bench page-size`). The
//! simulated machine charges a page size only in its moves, never in the program's TLB misses
//! (docs/model.md §10); this measures, on a real CPU and a given access stream, what that leaves
//! out. Nimble runs its base-page configurations on THPs split into 4 KB pages (Nimble §4.3), so
//! the difference is what a split costs the program on this host.

use crate::aligned_mapping::AlignedMapping;
use std::hint::black_box;
use std::time::Instant;

const HUGE: u64 = 2 << 20;

/// One access of a replayed stream: its byte offset in the region, 8-byte aligned, with the low
/// bit set for a write.
pub fn encode(offset: u64, write: bool) -> u64 {
    (offset & !7) | write as u64
}

/// What one page size gave.
#[derive(Clone, Debug)]
pub struct Replay {
    /// Best of the timed replays, seconds.
    pub secs: f64,
    /// Bytes of the region in transparent huge pages while it was replayed (/proc/self/smaps).
    pub huge_bytes: u64,
    /// Bytes of the region.
    pub region_bytes: u64,
    /// Sum of every value read in one replay (each 8-byte word holds its own index at the
    /// start): proves the replay read where the stream said.
    pub read_sum: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("an access at byte {offset} lies outside the {region} bytes replayed: the stream and the region disagree")]
    OutOfRegion { offset: u64, region: u64 },
    #[error("mapping {bytes} bytes to replay on failed: {source}")]
    Map { bytes: u64, source: std::io::Error },
    #[error(
        "replaying needs {needed_mib} MiB of memory and this host has {available_mib} MiB available: use a smaller \
         --size-scale or --accesses"
    )]
    TooLarge { needed_mib: u64, available_mib: u64 },
}

/// Whether a replay of a region of `region_bytes`, with `held_bytes` more held beside it (the
/// stream), fits in 90% of the host's available memory: filling a mapping larger than that would
/// make the kernel kill this process, or another.
pub fn check_fits(region_bytes: u64, held_bytes: u64) -> Result<(), ReplayError> {
    let needed = region_bytes.div_ceil(HUGE) * HUGE + held_bytes;
    match crate::probes::mem_available_bytes() {
        Some(available) if needed > available / 10 * 9 => {
            Err(ReplayError::TooLarge { needed_mib: needed >> 20, available_mib: available >> 20 })
        }
        _ => Ok(()),
    }
}

/// How the replayed accesses depend on each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chain {
    /// Each access's address is known ahead: the core overlaps misses and page walks, as a loop
    /// over arrays does (NPB's sweeps, GUPS's updates).
    Independent,
    /// Each address waits for the previous read's value: one miss and one walk at a time, as
    /// pointer chasing does (a BFS's neighbour lists). The worst case for walks.
    Dependent,
}

/// Replays `stream` ([`encode`]d accesses into `[0, region_bytes)`) on a fresh mapping of that
/// size with 2 MiB pages asked for (`huge`) or forbidden: every 4 KiB page is written first (so
/// no fault is timed), one replay warms the caches and TLBs, and the best of `repeat` more is
/// kept.
pub fn replay(
    stream: &[u64],
    region_bytes: u64,
    huge: bool,
    chain: Chain,
    repeat: u32,
) -> Result<Replay, ReplayError> {
    if let Some(&bad) = stream.iter().find(|&&e| (e & !7) + 8 > region_bytes) {
        return Err(ReplayError::OutOfRegion { offset: bad & !7, region: region_bytes });
    }
    check_fits(region_bytes, 0)?;
    let len = region_bytes.div_ceil(HUGE) * HUGE;
    let mut mapping = AlignedMapping::new(len as usize, huge, false)
        .map_err(|source| ReplayError::Map { bytes: len, source })?;
    // Every word holds its index, so a read's value says where it read.
    // SAFETY: the mapping is `len` bytes, 2 MiB-aligned, read-write and owned here.
    let words = unsafe {
        std::slice::from_raw_parts_mut(mapping.bytes_mut().as_mut_ptr() as *mut u64, len as usize / 8)
    };
    for (i, w) in words.iter_mut().enumerate() {
        *w = i as u64;
    }
    let huge_bytes = mapping.huge_bytes().unwrap_or(0);
    let base = mapping.addr();
    let run = || {
        let mut sum = 0u64;
        // Zero whenever the last word read held its index, which every word always does; the
        // CPU cannot know that, so under `Chain::Dependent` each address waits for it.
        let mut carry = 0u64;
        for &e in stream {
            let offset = (e & !7) + if chain == Chain::Dependent { carry } else { 0 };
            let p = (base + offset as usize) as *mut u64;
            // SAFETY: every offset was checked to lie, with its 8 bytes, inside the mapping, and
            // `carry` is zero (the words hold their indexes; writes keep them).
            unsafe {
                if e & 1 == 1 {
                    std::ptr::write_volatile(p, offset / 8);
                } else {
                    let v = std::ptr::read_volatile(p);
                    carry = (v ^ (offset / 8)) * 8;
                    sum = sum.wrapping_add(v);
                }
            }
        }
        black_box(sum)
    };
    let read_sum = run();
    let mut secs = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        black_box(run());
        secs = secs.min(t.elapsed().as_secs_f64());
    }
    drop(mapping);
    Ok(Replay { secs, huge_bytes, region_bytes: len, read_sum })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_reads_and_writes_where_the_stream_says() {
        // Reads of words 0, 513 and 1,000,000 (8 MB in), and a write that leaves each word's
        // index in place: the read sum is the indexes read, at either page size.
        let stream =
            [encode(0, false), encode(513 * 8 + 3, false), encode(8_000_000, false), encode(64, true)];
        for (huge, chain) in
            [(false, Chain::Independent), (true, Chain::Independent), (false, Chain::Dependent)]
        {
            let r = replay(&stream, 9 << 20, huge, chain, 2).unwrap();
            assert_eq!(r.read_sum, 513 + 1_000_000, "huge {huge}, {chain:?}");
            assert_eq!(r.region_bytes, 10 << 20);
            assert!(r.secs.is_finite() && r.secs >= 0.0);
            if !huge {
                assert_eq!(r.huge_bytes, 0, "MADV_NOHUGEPAGE must keep huge pages out");
            }
        }
    }

    #[test]
    fn a_region_larger_than_the_host_s_memory_is_refused_before_it_is_mapped() {
        let err = replay(&[encode(0, false)], 1 << 50, false, Chain::Independent, 1).unwrap_err();
        assert!(matches!(err, ReplayError::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("use a smaller --size-scale"), "{err}");
        assert!(check_fits(1 << 20, 1 << 20).is_ok());
    }

    #[test]
    fn an_access_outside_the_region_is_refused() {
        let err = replay(&[encode(4096, false)], 4096, false, Chain::Independent, 1).unwrap_err();
        assert!(err.to_string().contains("outside the 4096 bytes"), "{err}");
    }
}
