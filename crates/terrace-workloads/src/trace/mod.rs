//! Terrace's binary trace format: a stream of accesses stored exactly, or as per-epoch page
//! counts, compact enough to keep next to results and fast enough to replay at generator speed.
//!
//! The byte layout is specified in `docs/formats.md`; this module is its only implementation.
//! In short: a checksummed header (magic, version, form, epoch length, the [`WorkloadInfo`] as
//! JSON), then checksummed blocks, then an end marker holding the total access count, so that
//! truncation anywhere (even at a block boundary) is detected. From version 2 each block's
//! checksum also covers the checksum before it (the header's, for the first block) and the
//! block's position, so blocks cannot be reordered, dropped, repeated or spliced in from another
//! trace unnoticed. From version 3 an exact trace also holds the program's object events
//! (allocations and frees with their sites, object tiering §3.2) between its accesses.

pub mod damo;
mod expand;
mod reader;
pub mod recorded;
mod writer;

pub use expand::ExpandedTrace;
pub use reader::TraceReader;
pub use writer::TraceWriter;

use crate::{AccessSource, WorkloadInfo};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;
use terrace_model::{Access, AccessKind};

/// First 8 bytes of every trace.
pub const MAGIC: [u8; 8] = *b"TRRCTRC\0";
/// The format version this build writes.
pub const VERSION: u16 = 3;
/// The oldest version this build reads: version 2 differs only in having no object events,
/// version 1 also in its block checksums, which do not bind a block to its position.
pub const MIN_VERSION: u16 = 1;
/// The first version whose exact blocks may hold object events.
pub const OBJECTS_VERSION: u16 = 3;
/// Events per block in the exact form: big enough to amortise the block header and checksum,
/// small enough that a reader's buffers stay in L2.
pub const BLOCK_EVENTS: usize = 65_536;
/// Page size of the aggregated form.
pub const PAGE_SHIFT: u32 = 12;

/// Bytes before the header's JSON: magic, version, form, epoch length, JSON length.
const HEADER_FIXED: usize = 8 + 2 + 1 + 4 + 4;
/// A header larger than this is corruption, not a workload description; refusing it bounds
/// what a bad length field can make the reader allocate.
const MAX_HEADER_JSON: u32 = 1 << 20;
/// Block header: entry count, payload length, checksum.
const BLOCK_HEADER: usize = 12;
/// The count field of the end marker.
const END_MARKER: u32 = u32::MAX;
/// Worst-case encoded access: tag, thread byte, fields byte, 10-byte address varint, 3-byte
/// size varint, 5-byte instructions varint. Bounds a block's payload length before version 3.
const MAX_EVENT_BYTES: usize = 21;
/// Worst-case encoded object event (version 3): tag and three 10-byte varints.
const MAX_OBJECT_EVENT_BYTES: usize = 31;
/// Worst-case aggregated entry: three 5-byte varints.
const MAX_ENTRY_BYTES: usize = 15;

/// How a trace stores its accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceForm {
    /// Every access, bit for bit: replayable as an [`AccessSource`].
    Exact,
    /// Per-page read and write counts for each epoch of `epoch_accesses` accesses: what an
    /// oracle or a heat-map needs, at a fraction of the size.
    Aggregated { epoch_accesses: u32 },
}

impl TraceForm {
    fn code(self) -> u8 {
        match self {
            TraceForm::Exact => 0,
            TraceForm::Aggregated { .. } => 1,
        }
    }

    fn epoch_accesses(self) -> u32 {
        match self {
            TraceForm::Exact => 0,
            TraceForm::Aggregated { epoch_accesses } => epoch_accesses,
        }
    }

    fn name(self) -> &'static str {
        match self {
            TraceForm::Exact => "exact",
            TraceForm::Aggregated { .. } => "aggregated",
        }
    }
}

/// Why a trace could not be read or written. Messages name the file and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "a trace holds one program, and this stream is several sharing the machine; trace each \
         program's workload on its own"
    )]
    SeveralPrograms,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} is not a Terrace trace (bad magic); make one with `terrace trace generate`")]
    BadMagic { what: String },
    #[error(
        "{what} is trace format version {found}, but this build reads versions {min} to \
         {supported}; regenerate it with `terrace trace generate`",
        min = MIN_VERSION
    )]
    UnsupportedVersion { what: String, found: u16, supported: u16 },
    #[error(
        "{what} is truncated in {place} (the file ends at byte offset {offset}); it was not \
         written completely: regenerate it with `terrace trace generate`"
    )]
    Truncated { what: String, place: String, offset: u64 },
    #[error(
        "{what} is corrupt: checksum mismatch in {place} (byte offset {offset}); regenerate it \
         with `terrace trace generate`"
    )]
    Checksum { what: String, place: String, offset: u64 },
    #[error(
        "{what} is corrupt: malformed varint in block {block} (byte offset {offset}); \
         regenerate it with `terrace trace generate`"
    )]
    BadVarint { what: String, block: u64, offset: u64 },
    #[error(
        "{what} has a malformed JSON header ({source}); regenerate it with `terrace trace \
         generate`"
    )]
    BadHeader {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{what} has an invalid header: {reason}; regenerate it with `terrace trace generate`")]
    BadInfo { what: String, reason: String },
    #[error("cannot write a trace of this workload: {reason}")]
    InvalidInfo { reason: String },
    /// The path is not a readable regular file (missing, a FIFO, a device, a directory).
    #[error(transparent)]
    Input(#[from] terrace_input::InputError),
    #[error(
        "{what} is corrupt: {reason} in {place} (byte offset {offset}); regenerate it with \
         `terrace trace generate`"
    )]
    Malformed { what: String, place: String, offset: u64, reason: String },
    #[error(
        "{what} is an {found} trace, but this needs an {expected} one; make one with `terrace \
         trace generate`"
    )]
    WrongForm { what: String, expected: &'static str, found: &'static str },
    #[error(
        "the trace header declares {declared} accesses but {written} were written; set \
         WorkloadInfo::accesses to the number of accesses you write"
    )]
    CountMismatch { declared: u64, written: u64 },
    #[error(
        "access at address {addr:#x} is outside the workload's footprint of {footprint} bytes; \
         every address must be below WorkloadInfo::footprint_bytes, so fix the footprint"
    )]
    OutOfFootprint { addr: u64, footprint: u64 },
    #[error(
        "object event at address {addr:#x} of {bytes} bytes reaches outside the workload's footprint \
         of {footprint} bytes; every object must lie below WorkloadInfo::footprint_bytes, so fix \
         the footprint"
    )]
    ObjectOutOfFootprint { addr: u64, bytes: u64, footprint: u64 },
    #[error(
        "access by thread {thread} but the workload declares {threads} threads; thread ids must \
         be below WorkloadInfo::threads, so fix the thread count"
    )]
    OutOfThreads { thread: u8, threads: u32 },
    #[error("an aggregated trace needs an epoch of at least 1 access; got {epoch_accesses}")]
    CannotAggregate { epoch_accesses: u32 },
}

/// What `terrace trace info` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceSummary {
    pub info: WorkloadInfo,
    pub form: TraceForm,
    /// Accesses recorded (for an aggregated trace, the sum of its counts).
    pub events: u64,
    pub reads: u64,
    pub writes: u64,
    /// 4 KiB pages touched at least once.
    pub distinct_pages: u64,
    /// Distinct threads seen; `None` for an aggregated trace, which does not keep them.
    pub threads: Option<u32>,
    /// Memory actually touched: `distinct_pages` x 4 KiB.
    pub footprint_bytes: u64,
    /// Epochs stored; `None` for an exact trace.
    pub epochs: Option<u64>,
    /// Object events (allocations and frees) stored; 0 for an aggregated trace.
    pub object_events: u64,
}

/// Reads a whole trace (verifying every checksum) and summarises it.
pub fn trace_info(path: impl AsRef<Path>) -> Result<TraceSummary, TraceError> {
    let mut reader = TraceReader::open(path)?;
    let info = reader.info().clone();
    let form = reader.form();
    let mut pages = PageSet::new(info.footprint_bytes);
    let (mut reads, mut writes) = (0u64, 0u64);
    let mut object_events = 0u64;
    let (threads, epochs) = match form {
        TraceForm::Exact => {
            let mut seen = [false; 256];
            let mut buf = Vec::with_capacity(BLOCK_EVENTS);
            let mut events = Vec::new();
            loop {
                buf.clear();
                let n = reader.read_batch(&mut buf, BLOCK_EVENTS)?;
                events.clear();
                reader.take_events(&mut events);
                object_events += events.len() as u64;
                if n == 0 {
                    break;
                }
                for a in &buf {
                    match a.kind {
                        AccessKind::Read => reads += 1,
                        AccessKind::Write => writes += 1,
                    }
                    seen[usize::from(a.thread)] = true;
                    pages.insert(a.addr >> PAGE_SHIFT);
                }
            }
            (Some(seen.iter().filter(|&&s| s).count() as u32), None)
        }
        TraceForm::Aggregated { .. } => {
            let mut epoch = Vec::new();
            let mut epochs = 0u64;
            while reader.read_epoch_into(&mut epoch)? {
                epochs += 1;
                for (page, c) in &epoch {
                    reads += u64::from(c.reads);
                    writes += u64::from(c.writes);
                    pages.insert(u64::from(*page));
                }
            }
            (None, Some(epochs))
        }
    };
    let distinct_pages = pages.len();
    Ok(TraceSummary {
        info,
        form,
        events: reads + writes,
        reads,
        writes,
        distinct_pages,
        threads,
        footprint_bytes: distinct_pages << PAGE_SHIFT,
        epochs,
        object_events,
    })
}

/// Writes every access and object event of `source` as an exact trace to `out`, each event
/// at its place between the accesses; returns `out`, flushed.
pub fn record<S, W>(source: &mut S, out: W) -> Result<W, TraceError>
where
    S: AccessSource + ?Sized,
    W: std::io::Write,
{
    if !source.programs().is_empty() {
        return Err(TraceError::SeveralPrograms);
    }
    let mut writer = TraceWriter::new(out, source.info().clone(), TraceForm::Exact)?;
    let mut buf = Vec::with_capacity(BLOCK_EVENTS);
    let mut events = Vec::new();
    let mut before = 0u64;
    loop {
        buf.clear();
        let n = source.fill(&mut buf, BLOCK_EVENTS);
        source.take_object_events(&mut events);
        let mut i = 0;
        for e in events.drain(..) {
            let upto = (e.at.saturating_sub(before) as usize).clamp(i, buf.len());
            writer.write_batch(&buf[i..upto])?;
            i = upto;
            writer.write_object_event(&e.event)?;
        }
        writer.write_batch(&buf[i..])?;
        before += n as u64;
        if n == 0 {
            return writer.finish();
        }
    }
}

/// Writes `source` as an aggregated trace with epochs of `epoch_accesses` accesses to `out`;
/// returns `out`, flushed. The aggregated form keeps no object events (as it keeps no order
/// within an epoch): they are left out.
pub fn aggregate<S, W>(source: &mut S, epoch_accesses: u32, out: W) -> Result<W, TraceError>
where
    S: AccessSource + ?Sized,
    W: std::io::Write,
{
    if !source.programs().is_empty() {
        return Err(TraceError::SeveralPrograms);
    }
    let form = TraceForm::Aggregated { epoch_accesses };
    let mut writer = TraceWriter::new(out, source.info().clone(), form)?;
    drain(source, |batch| writer.write_batch(batch))?;
    writer.finish()
}

/// Feeds every batch of `source` to `sink`.
fn drain<S: AccessSource + ?Sized>(
    source: &mut S,
    mut sink: impl FnMut(&[Access]) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut buf = Vec::with_capacity(BLOCK_EVENTS);
    loop {
        buf.clear();
        if source.fill(&mut buf, BLOCK_EVENTS) == 0 {
            return Ok(());
        }
        sink(&buf)?;
    }
}

/// Distinct pages: a bitmap over the declared footprint, a hash set for anything outside it
/// (the reader refuses such addresses, but counting them costs nothing).
struct PageSet {
    bits: Vec<u64>,
    outside: HashSet<u64>,
    count: u64,
}

impl PageSet {
    /// Bitmaps above 2^28 pages (1 TiB) would cost more memory than they save.
    const MAX_BITMAP_PAGES: u64 = 1 << 28;

    fn new(footprint_bytes: u64) -> Self {
        let pages = footprint_bytes.div_ceil(1 << PAGE_SHIFT).min(Self::MAX_BITMAP_PAGES);
        PageSet { bits: vec![0; pages.div_ceil(64) as usize], outside: HashSet::new(), count: 0 }
    }

    fn insert(&mut self, page: u64) {
        let word = usize::try_from(page / 64).ok().and_then(|i| self.bits.get_mut(i));
        match word {
            Some(word) => {
                let bit = 1u64 << (page % 64);
                self.count += u64::from(*word & bit == 0);
                *word |= bit;
            }
            None => {
                self.count += u64::from(self.outside.insert(page));
            }
        }
    }

    fn len(&self) -> u64 {
        self.count
    }
}

/// Zigzag: small negative and positive deltas both become small unsigned numbers.
#[inline(always)]
fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

#[inline(always)]
fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// LEB128: 7 bits per byte, low bits first, high bit = more bytes follow.
#[inline(always)]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a varint at `*pos`; `None` if it runs past the end or past 64 bits.
#[inline(always)]
fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    if first < 0x80 {
        *pos += 1;
        return Some(u64::from(first));
    }
    // Fast path: with 8 bytes at hand, find the end and gather the 7-bit groups without a
    // branch per byte (random addresses make the length unpredictable).
    if let Some(bytes) = buf.get(*pos..*pos + 8) {
        let word = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        let stops = !word & 0x8080_8080_8080_8080;
        if stops != 0 {
            let len = (stops.trailing_zeros() as usize + 1) / 8;
            let x = (word & (u64::MAX >> (64 - 8 * len))) & 0x7f7f_7f7f_7f7f_7f7f;
            let x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
            let x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
            let x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
            *pos += len;
            return Some(x);
        }
    }
    *pos += 1;
    let mut v = u64::from(first & 0x7f);
    let mut shift = 7;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
    }
}

/// CRC-32 of a block. Version 2: the checksum stored before it (the header's for the first
/// block, else the previous block's) and its sequence number (u64, 0 = the first block after
/// the header), then its count and length fields, then its payload; so a block is valid only at
/// its own place after its own predecessors. Version 1: count, length and payload only.
fn block_crc(version: u16, previous_crc: u32, seq: u64, count_and_len: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if version >= 2 {
        h.update(&previous_crc.to_le_bytes());
        h.update(&seq.to_le_bytes());
    }
    h.update(count_and_len);
    h.update(payload);
    h.finalize()
}

/// Per-thread context the exact form encodes against, reset at every block so blocks decode
/// independently: the thread's last four addresses, each with the stride that led to it, so
/// that interleaved sequential streams (STREAM's b, c, a) each find their own predecessor.
#[derive(Clone, Copy)]
struct ThreadContext {
    addrs: [u64; 4],
    strides: [u64; 4],
    /// Ring position of the newest address.
    head: u8,
    size: u16,
    instructions: u32,
}

impl ThreadContext {
    const START: ThreadContext =
        ThreadContext { addrs: [0; 4], strides: [0; 4], head: 0, size: 64, instructions: 0 };

    /// Ring index of the address `k` accesses back (0 = the newest).
    #[inline(always)]
    fn slot(&self, k: u8) -> usize {
        usize::from(self.head.wrapping_sub(k) & 3)
    }

    #[inline(always)]
    fn push(&mut self, addr: u64, stride: u64) {
        self.head = (self.head + 1) & 3;
        self.addrs[usize::from(self.head)] = addr;
        self.strides[usize::from(self.head)] = stride;
    }
}

/// Tag byte of an exact-form event, and the optional fields byte (see docs/formats.md).
mod tag {
    pub const WRITE: u8 = 1;
    pub const THREAD_SHIFT: u8 = 1;
    pub const THREAD_SAME: u8 = 0;
    pub const THREAD_NEXT: u8 = 1;
    pub const THREAD_ZERO: u8 = 2;
    pub const THREAD_BYTE: u8 = 3;
    pub const SLOT_SHIFT: u8 = 3;
    pub const ADDR_SHIFT: u8 = 5;
    pub const ADDR_STRIDE: u8 = 0;
    pub const ADDR_DELTA: u8 = 1;
    pub const ADDR_SAME: u8 = 2;
    pub const FIELDS: u8 = 1 << 7;
    pub const FIELD_SIZE: u8 = 1;
    pub const FIELD_INSTRUCTIONS: u8 = 2;
    /// Address mode 3, from version 3: the entry is an object event, bit 0 its kind (0 alloc,
    /// 1 free), bits 1-4 and 7 zero; address, bytes and site varints follow.
    pub const ADDR_OBJECT: u8 = 3;
    pub const OBJECT_FREE: u8 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos), Some(v));
            assert_eq!(pos, buf.len());
            // Every proper prefix is incomplete.
            for cut in 0..buf.len() {
                assert_eq!(get_varint(&buf[..cut], &mut 0), None);
            }
        }
        // An 11th byte, or 10th byte above 1, overflows 64 bits.
        let mut too_long = vec![0xff; 9];
        too_long.push(0x02);
        assert_eq!(get_varint(&too_long, &mut 0), None);
        assert_eq!(get_varint(&[0x80; 11], &mut 0), None);
        // The 8-byte fast path and the byte loop agree, with bytes after the varint.
        for v in (0..64).map(|s| (1u64 << s) + 3) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let len = buf.len();
            buf.extend_from_slice(&[0xff; 9]);
            let mut pos = 0;
            assert_eq!(get_varint(&buf, &mut pos), Some(v));
            assert_eq!(pos, len);
        }
    }

    #[test]
    fn zigzag_round_trips() {
        for d in [0u64, 1, u64::MAX, 64, 64u64.wrapping_neg(), 1 << 63, (1 << 63) - 1] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!(zigzag(u64::MAX), 1); // -1
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn page_set_counts_distinct_pages_inside_and_outside() {
        let mut s = PageSet::new(10 << PAGE_SHIFT);
        for p in [0, 3, 3, 9, 10, 1 << 50, 1 << 50, u64::MAX >> PAGE_SHIFT] {
            s.insert(p);
        }
        assert_eq!(s.len(), 6);
    }
}
