//! Streaming trace writer: constant memory however long the stream.

use super::{
    block_crc, put_varint, tag, zigzag, ThreadContext, TraceError, TraceForm, BLOCK_EVENTS, END_MARKER,
    HEADER_FIXED, MAGIC, PAGE_SHIFT, VERSION,
};
use crate::WorkloadInfo;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use terrace_model::{Access, AccessKind, ObjectEvent, ObjectEventKind, PageCounts};

/// Writes a trace block by block. Call [`finish`](Self::finish): without its end marker the
/// trace reads as truncated.
pub struct TraceWriter<W: Write> {
    out: W,
    what: String,
    declared: u64,
    footprint: u64,
    threads: u32,
    form: TraceForm,
    written: u64,
    /// The last checksum written (the header's, then each block's) and the next block's
    /// sequence number, which the next block's checksum covers.
    previous_crc: u32,
    seq: u64,
    /// The block being built.
    payload: Vec<u8>,
    /// Events (exact) or pages (aggregated) in `payload`.
    entries: u32,
    exact: ExactEncoder,
    epoch: EpochCounts,
}

impl TraceWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes the header.
    pub fn create(path: impl AsRef<Path>, info: WorkloadInfo, form: TraceForm) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let what = path.display().to_string();
        let file = File::create(path).map_err(|source| TraceError::Io { what: what.clone(), source })?;
        Self::with_name(BufWriter::with_capacity(1 << 20, file), what, info, form)
    }
}

impl<W: Write> TraceWriter<W> {
    /// Writes the header to `out`. `info.accesses` must be the number of accesses that will be
    /// written: [`finish`](Self::finish) checks it, so a reader can trust the header's count.
    pub fn new(out: W, info: WorkloadInfo, form: TraceForm) -> Result<Self, TraceError> {
        Self::with_name(out, "trace output".to_string(), info, form)
    }

    fn with_name(out: W, what: String, info: WorkloadInfo, form: TraceForm) -> Result<Self, TraceError> {
        // The reader refuses what this refuses: nothing writes a trace that cannot be read.
        info.validate().map_err(|reason| TraceError::InvalidInfo { reason })?;
        if form == (TraceForm::Aggregated { epoch_accesses: 0 }) {
            return Err(TraceError::CannotAggregate { epoch_accesses: 0 });
        }
        let json = serde_json::to_vec(&info).expect("WorkloadInfo always serialises");
        let mut header = Vec::with_capacity(HEADER_FIXED + json.len() + 4);
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.push(form.code());
        header.extend_from_slice(&form.epoch_accesses().to_le_bytes());
        header.extend_from_slice(&(json.len() as u32).to_le_bytes());
        header.extend_from_slice(&json);
        let crc = crc32fast::hash(&header);
        header.extend_from_slice(&crc.to_le_bytes());
        let mut writer = TraceWriter {
            out,
            what,
            declared: info.accesses,
            footprint: info.footprint_bytes,
            threads: info.threads,
            form,
            written: 0,
            previous_crc: crc,
            seq: 0,
            payload: Vec::new(),
            entries: 0,
            exact: ExactEncoder::new(),
            epoch: EpochCounts::default(),
        };
        writer.put(&header)?;
        Ok(writer)
    }

    /// Appends accesses to the trace. Every address must be inside the footprint and every
    /// thread below the declared thread count, as the reader insists.
    pub fn write_batch(&mut self, batch: &[Access]) -> Result<(), TraceError> {
        for a in batch {
            if a.addr >= self.footprint {
                return Err(TraceError::OutOfFootprint { addr: a.addr, footprint: self.footprint });
            }
            if u32::from(a.thread) >= self.threads {
                return Err(TraceError::OutOfThreads { thread: a.thread, threads: self.threads });
            }
        }
        match self.form {
            TraceForm::Exact => {
                for a in batch {
                    self.exact.encode(a, &mut self.payload);
                    self.entries += 1;
                    if self.entries as usize == BLOCK_EVENTS {
                        self.flush_block()?;
                    }
                }
            }
            TraceForm::Aggregated { epoch_accesses } => {
                for a in batch {
                    self.epoch.add(a);
                    if self.epoch.accesses == epoch_accesses {
                        self.flush_epoch()?;
                    }
                }
            }
        }
        self.written += batch.len() as u64;
        Ok(())
    }

    /// Adds `reads` and `writes` accesses of `page` to an aggregated trace, cutting epochs every
    /// `epoch_accesses` accesses: a count that does not fit the current epoch is split, its
    /// reads first, the rest going to the next. How recorded counts, which come per page and
    /// not per access, are written (`trace::recorded`). Not to be mixed with a partly filled
    /// epoch of [`Self::write_batch`]'s accesses: both add to the same epoch, in order.
    pub fn write_page_counts(
        &mut self,
        page: u32,
        mut reads: u64,
        mut writes: u64,
    ) -> Result<(), TraceError> {
        let TraceForm::Aggregated { epoch_accesses } = self.form else {
            return Err(TraceError::WrongForm {
                what: self.what.clone(),
                expected: "aggregated",
                found: self.form.name(),
            });
        };
        let addr = u64::from(page) << PAGE_SHIFT;
        if addr >= self.footprint {
            return Err(TraceError::OutOfFootprint { addr, footprint: self.footprint });
        }
        while reads + writes > 0 {
            let room = u64::from(epoch_accesses - self.epoch.accesses);
            let r = reads.min(room);
            let w = writes.min(room - r);
            // Both fit a u32: together they are at most the room left in the epoch.
            self.epoch.add_counts(page, r as u32, w as u32);
            reads -= r;
            writes -= w;
            self.written += r + w;
            if self.epoch.accesses == epoch_accesses {
                self.flush_epoch()?;
            }
        }
        Ok(())
    }

    /// Appends an object event after the accesses written so far (version 3, docs/formats.md
    /// "Object events"). Its range must lie inside the footprint. The aggregated form keeps no
    /// object events: there it is left out.
    pub fn write_object_event(&mut self, e: &ObjectEvent) -> Result<(), TraceError> {
        if e.addr.checked_add(e.bytes).is_none_or(|end| end > self.footprint) {
            return Err(TraceError::ObjectOutOfFootprint {
                addr: e.addr,
                bytes: e.bytes,
                footprint: self.footprint,
            });
        }
        if !e.is_object() {
            return Err(TraceError::SeveralPrograms);
        }
        if self.form != TraceForm::Exact {
            return Ok(());
        }
        let kind = if e.kind == ObjectEventKind::Free { tag::OBJECT_FREE } else { 0 };
        self.payload.push(kind | tag::ADDR_OBJECT << tag::ADDR_SHIFT);
        put_varint(&mut self.payload, e.addr);
        put_varint(&mut self.payload, e.bytes);
        put_varint(&mut self.payload, e.site);
        self.entries += 1;
        if self.entries as usize == BLOCK_EVENTS {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Writes the last block and the end marker, flushes, and returns the output.
    pub fn finish(mut self) -> Result<W, TraceError> {
        match self.form {
            TraceForm::Exact if self.entries > 0 => self.flush_block()?,
            TraceForm::Aggregated { .. } if self.epoch.accesses > 0 => self.flush_epoch()?,
            _ => {}
        }
        if self.written != self.declared {
            return Err(TraceError::CountMismatch { declared: self.declared, written: self.written });
        }
        self.payload.clear();
        self.payload.extend_from_slice(&self.written.to_le_bytes());
        self.entries = END_MARKER;
        self.flush_block()?;
        self.out.flush().map_err(|source| TraceError::Io { what: self.what.clone(), source })?;
        Ok(self.out)
    }

    /// Encodes the epoch's pages in increasing order into one block.
    fn flush_epoch(&mut self) -> Result<(), TraceError> {
        self.epoch.touched.sort_unstable();
        let mut previous = 0u32;
        for &page in &self.epoch.touched {
            let c = std::mem::take(&mut self.epoch.counts[page as usize]);
            put_varint(&mut self.payload, u64::from(page - previous));
            put_varint(&mut self.payload, u64::from(c.reads));
            put_varint(&mut self.payload, u64::from(c.writes));
            previous = page;
        }
        self.entries = self.epoch.touched.len() as u32;
        self.epoch.touched.clear();
        self.epoch.accesses = 0;
        self.flush_block()
    }

    /// Writes `payload` as a block of `entries` entries.
    fn flush_block(&mut self) -> Result<(), TraceError> {
        let mut head = [0u8; 12];
        head[..4].copy_from_slice(&self.entries.to_le_bytes());
        head[4..8].copy_from_slice(&(self.payload.len() as u32).to_le_bytes());
        let crc = block_crc(VERSION, self.previous_crc, self.seq, &head[..8], &self.payload);
        head[8..].copy_from_slice(&crc.to_le_bytes());
        self.previous_crc = crc;
        self.seq += 1;
        self.put(&head)?;
        let payload = std::mem::take(&mut self.payload);
        self.put(&payload)?;
        self.payload = payload;
        self.payload.clear();
        self.entries = 0;
        self.exact.reset();
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        self.out.write_all(bytes).map_err(|source| TraceError::Io { what: self.what.clone(), source })
    }
}

/// Encoder state of the exact form; a fresh one starts every block.
struct ExactEncoder {
    threads: Box<[ThreadContext; 256]>,
    previous_thread: u8,
}

impl ExactEncoder {
    fn new() -> Self {
        ExactEncoder { threads: Box::new([ThreadContext::START; 256]), previous_thread: 0 }
    }

    fn reset(&mut self) {
        *self.threads = [ThreadContext::START; 256];
        self.previous_thread = 0;
    }

    fn encode(&mut self, a: &Access, out: &mut Vec<u8>) {
        let t = a.thread;
        let thread_mode = if t == self.previous_thread {
            tag::THREAD_SAME
        } else if t == self.previous_thread.wrapping_add(1) {
            tag::THREAD_NEXT
        } else if t == 0 {
            tag::THREAD_ZERO
        } else {
            tag::THREAD_BYTE
        };
        let ctx = &mut self.threads[usize::from(t)];
        let (slot, addr_mode, stride) = predict(ctx, a.addr);
        let mut fields = 0;
        if a.size != ctx.size {
            fields |= tag::FIELD_SIZE;
        }
        if a.instructions != ctx.instructions {
            fields |= tag::FIELD_INSTRUCTIONS;
        }
        let mut tag = if a.kind == AccessKind::Write { tag::WRITE } else { 0 };
        tag |= thread_mode << tag::THREAD_SHIFT;
        tag |= slot << tag::SLOT_SHIFT;
        tag |= addr_mode << tag::ADDR_SHIFT;
        if fields != 0 {
            tag |= tag::FIELDS;
        }
        out.push(tag);
        if thread_mode == tag::THREAD_BYTE {
            out.push(t);
        }
        if fields != 0 {
            out.push(fields);
        }
        if addr_mode == tag::ADDR_DELTA {
            put_varint(out, zigzag(stride));
        }
        if fields & tag::FIELD_SIZE != 0 {
            put_varint(out, u64::from(a.size));
        }
        if fields & tag::FIELD_INSTRUCTIONS != 0 {
            put_varint(out, u64::from(a.instructions));
        }
        ctx.push(a.addr, stride);
        ctx.size = a.size;
        ctx.instructions = a.instructions;
        self.previous_thread = t;
    }
}

/// The cheapest way to reach `addr` from the thread's recent addresses: repeat a slot's stride
/// (no bytes), the same address as a slot (no bytes), or the slot with the smallest delta.
/// Returns the slot, the address mode and the stride from that slot.
fn predict(ctx: &ThreadContext, addr: u64) -> (u8, u8, u64) {
    let from = |k: u8| ctx.addrs[ctx.slot(k)];
    if let Some(k) = (0..4).find(|&k| from(k).wrapping_add(ctx.strides[ctx.slot(k)]) == addr) {
        return (k, tag::ADDR_STRIDE, ctx.strides[ctx.slot(k)]);
    }
    if let Some(k) = (0..4).find(|&k| from(k) == addr) {
        return (k, tag::ADDR_SAME, 0);
    }
    let k = (0..4).min_by_key(|&k| zigzag(addr.wrapping_sub(from(k)))).unwrap_or(0);
    (k, tag::ADDR_DELTA, addr.wrapping_sub(from(k)))
}

/// Per-page counts of the current epoch: dense by page, plus the list of pages touched so the
/// flush costs the pages touched, not the footprint.
#[derive(Default)]
struct EpochCounts {
    counts: Vec<PageCounts>,
    touched: Vec<u32>,
    accesses: u32,
}

impl EpochCounts {
    /// Counts `a` against the page holding its first byte; `a.addr` is inside the footprint,
    /// which is at most `WorkloadInfo::MAX_FOOTPRINT_BYTES`, so the page index fits a `u32`.
    fn add(&mut self, a: &Access) {
        let page = (a.addr >> PAGE_SHIFT) as usize;
        if page >= self.counts.len() {
            self.counts.resize(page + 1, PageCounts::default());
        }
        let c = &mut self.counts[page];
        if c.reads == 0 && c.writes == 0 {
            self.touched.push(page as u32);
        }
        match a.kind {
            AccessKind::Read => c.reads += 1,
            AccessKind::Write => c.writes += 1,
        }
        self.accesses += 1;
    }

    /// Adds counts of `page`; `reads + writes` fits the room left in the epoch.
    fn add_counts(&mut self, page: u32, reads: u32, writes: u32) {
        let i = page as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, PageCounts::default());
        }
        let c = &mut self.counts[i];
        if c.reads == 0 && c.writes == 0 {
            self.touched.push(page);
        }
        c.reads += reads;
        c.writes += writes;
        self.accesses += reads + writes;
    }
}
