//! Streaming trace reader: verifies every checksum and bound, so any byte input yields either
//! the accesses that were written or an error, never a panic or a huge allocation.

use super::{
    block_crc, get_varint, tag, unzigzag, ThreadContext, TraceError, TraceForm, BLOCK_EVENTS, BLOCK_HEADER,
    END_MARKER, HEADER_FIXED, MAGIC, MAX_ENTRY_BYTES, MAX_EVENT_BYTES, MAX_HEADER_JSON,
    MAX_OBJECT_EVENT_BYTES, MIN_VERSION, OBJECTS_VERSION, PAGE_SHIFT, VERSION,
};
use crate::{AccessSource, ObjectEventAt, WorkloadInfo};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::Path;
use terrace_model::{Access, AccessKind, ObjectEvent, ObjectEventKind, PageCounts, PageIdx};

/// Reads a trace written by [`TraceWriter`](super::TraceWriter). An exact trace is also an
/// [`AccessSource`], so the simulator replays it exactly as it would run the generator.
pub struct TraceReader<R: Read> {
    input: R,
    what: String,
    info: WorkloadInfo,
    form: TraceForm,
    /// The file's format version, and the checksum stored last (the header's, then each
    /// block's), which (from version 2) the next block's checksum covers.
    version: u16,
    previous_crc: u32,
    /// 4 KiB pages in the declared footprint: bounds page indexes and entries per epoch.
    footprint_pages: u64,
    /// The last epoch read held fewer accesses than an epoch: only the last epoch may.
    short_epoch: bool,
    /// Bytes consumed so far: where the next read starts.
    offset: u64,
    /// Index of the block read last (or about to be read).
    block: u64,
    /// Payload of the current block, and the file offset it started at.
    payload: Vec<u8>,
    payload_len: usize,
    payload_offset: u64,
    /// Decoded events not yet handed out (when a caller asks for fewer than a block).
    pending: Vec<Access>,
    pending_pos: usize,
    /// Object events decoded and not yet taken, each placed by the accesses before it.
    events: VecDeque<ObjectEventAt>,
    /// Accesses decoded so far, checked against the end marker.
    accesses: u64,
    done: bool,
    /// The error that ended an [`AccessSource::fill`], which cannot return it.
    error: Option<TraceError>,
}

/// What is wrong inside a payload, and where (bytes from the payload's start).
enum Problem {
    Varint(usize),
    Malformed(usize, String),
}

/// A malformed payload at `pos`; cold, so the decoders' hot loops stay small.
#[cold]
fn malformed(pos: usize, reason: impl Into<String>) -> Problem {
    Problem::Malformed(pos, reason.into())
}

impl TraceReader<BufReader<File>> {
    /// Opens the trace at `path` and reads its header. A missing path, a FIFO, a device or a
    /// directory is refused before anything blocks or reads without end.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let (file, _) = terrace_input::open_regular("trace", path)?;
        Self::with_name(BufReader::with_capacity(1 << 20, file), path.display().to_string())
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads the header from `input`; errors call the input "trace input".
    pub fn from_reader(input: R) -> Result<Self, TraceError> {
        Self::with_name(input, "trace input".to_string())
    }

    fn with_name(input: R, what: String) -> Result<Self, TraceError> {
        let mut reader = TraceReader {
            input,
            what,
            info: WorkloadInfo {
                name: String::new(),
                description: String::new(),
                footprint_bytes: 0,
                threads: 0,
                scale: 1.0,
                suggested_fast_bytes: 0,
                accesses: 0,
                recording: None,
            },
            form: TraceForm::Exact,
            version: VERSION,
            previous_crc: 0,
            footprint_pages: 0,
            short_epoch: false,
            offset: 0,
            block: 0,
            payload: Vec::new(),
            payload_len: 0,
            payload_offset: 0,
            pending: Vec::new(),
            pending_pos: 0,
            events: VecDeque::new(),
            accesses: 0,
            done: false,
            error: None,
        };
        reader.read_header()?;
        Ok(reader)
    }

    pub fn info(&self) -> &WorkloadInfo {
        &self.info
    }

    pub fn form(&self) -> TraceForm {
        self.form
    }

    /// The error that ended the stream early when it was read as an [`AccessSource`].
    pub fn error(&self) -> Option<&TraceError> {
        self.error.as_ref()
    }

    /// Takes that error out, e.g. to return it from a simulation.
    pub fn take_error(&mut self) -> Option<TraceError> {
        self.error.take()
    }

    /// Moves the object events of the accesses read so far to `out`, in order (all of them once
    /// the trace has ended): each comes with the number of accesses before it in the trace.
    /// A caller of [`Self::read_batch`] that wants no events need not call it: they are kept
    /// until taken, a block's worth at most unless a caller reads on without taking them.
    pub fn take_events(&mut self, out: &mut Vec<ObjectEventAt>) {
        let handed = self.accesses - (self.pending.len() - self.pending_pos) as u64;
        let all = self.done && self.pending_pos == self.pending.len();
        while let Some(e) = self.events.front() {
            if e.at > handed && !all {
                break;
            }
            out.push(*e);
            self.events.pop_front();
        }
    }

    /// Decodes up to `max` accesses of an exact trace, appending them to `buf`; returns how
    /// many (0 at the end). The object events between them are kept for [`Self::take_events`].
    /// No allocation per access: with `max` >= 65,536 and a reused `buf`, blocks decode straight
    /// into it.
    pub fn read_batch(&mut self, buf: &mut Vec<Access>, max: usize) -> Result<usize, TraceError> {
        if self.form != TraceForm::Exact {
            return Err(self.wrong_form("exact"));
        }
        let mut n = 0;
        while n < max {
            if self.pending_pos < self.pending.len() {
                let k = (max - n).min(self.pending.len() - self.pending_pos);
                buf.extend_from_slice(&self.pending[self.pending_pos..self.pending_pos + k]);
                self.pending_pos += k;
                n += k;
                continue;
            }
            let Some(count) = self.next_block_or_fail()? else {
                break;
            };
            let limits = Limits {
                threads: self.info.threads,
                footprint: self.info.footprint_bytes,
                objects: self.version >= OBJECTS_VERSION,
            };
            let before = self.events.len();
            let decoded = if max - n >= count {
                let start = buf.len();
                let decoded = decode_exact(
                    &self.payload[..self.payload_len],
                    count,
                    limits,
                    buf,
                    self.accesses,
                    &mut self.events,
                );
                match decoded {
                    Ok(k) if self.accesses.saturating_add(k as u64) <= self.info.accesses => n += k,
                    _ => buf.truncate(start),
                }
                decoded
            } else {
                self.pending.clear();
                self.pending_pos = 0;
                let mut pending = std::mem::take(&mut self.pending);
                let decoded = decode_exact(
                    &self.payload[..self.payload_len],
                    count,
                    limits,
                    &mut pending,
                    self.accesses,
                    &mut self.events,
                );
                self.pending = pending;
                decoded
            };
            let checked = decoded.and_then(|k| {
                if self.accesses.saturating_add(k as u64) > self.info.accesses {
                    return Err(self.more_than_declared(k as u64));
                }
                Ok(k)
            });
            match checked {
                Ok(k) => self.accesses += k as u64,
                Err(p) => {
                    self.pending.clear();
                    self.events.truncate(before);
                    return Err(self.fail_problem(p));
                }
            }
        }
        Ok(n)
    }

    /// Reads the next epoch of an aggregated trace into `out` (cleared first), pages in
    /// increasing order; returns false at the end.
    pub fn read_epoch_into(&mut self, out: &mut Vec<(PageIdx, PageCounts)>) -> Result<bool, TraceError> {
        out.clear();
        let TraceForm::Aggregated { epoch_accesses } = self.form else {
            return Err(self.wrong_form("aggregated"));
        };
        let Some(count) = self.next_block_or_fail()? else {
            return Ok(false);
        };
        // Epochs are cut every N accesses: a short one must be the last, or the epochs after it
        // would be shifted in time.
        let decoded = if self.short_epoch {
            Err(malformed(0, format!("an epoch after one of fewer than {epoch_accesses} accesses")))
        } else {
            decode_epoch(&self.payload[..self.payload_len], count, epoch_accesses, self.footprint_pages, out)
        };
        let decoded = decoded.and_then(|accesses| {
            if self.accesses.saturating_add(accesses) > self.info.accesses {
                return Err(self.more_than_declared(accesses));
            }
            Ok(accesses)
        });
        match decoded {
            Ok(accesses) => {
                self.accesses += accesses;
                self.short_epoch = accesses < u64::from(epoch_accesses);
                Ok(true)
            }
            Err(p) => {
                out.clear();
                Err(self.fail_problem(p))
            }
        }
    }

    /// A block that would take the accesses read past the header's count.
    fn more_than_declared(&self, more: u64) -> Problem {
        malformed(
            0,
            format!(
                "the blocks hold more accesses than the {} the header declares ({} more after {})",
                self.info.accesses, more, self.accesses
            ),
        )
    }

    /// The next epoch of an aggregated trace, or `None` at the end.
    pub fn next_epoch(&mut self) -> Result<Option<Vec<(PageIdx, PageCounts)>>, TraceError> {
        let mut out = Vec::new();
        Ok(self.read_epoch_into(&mut out)?.then_some(out))
    }

    fn wrong_form(&self, expected: &'static str) -> TraceError {
        TraceError::WrongForm { what: self.what.clone(), expected, found: self.form.name() }
    }

    fn read_header(&mut self) -> Result<(), TraceError> {
        let mut fixed = [0u8; HEADER_FIXED];
        let got = self.read_some(&mut fixed)?;
        if fixed[..got.min(8)] != MAGIC[..got.min(8)] {
            return Err(TraceError::BadMagic { what: self.what.clone() });
        }
        if got < 10 {
            return Err(self.truncated("the header", got));
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(TraceError::UnsupportedVersion {
                what: self.what.clone(),
                found: version,
                supported: VERSION,
            });
        }
        if got < HEADER_FIXED {
            return Err(self.truncated("the header", got));
        }
        self.offset += got as u64;
        let form_code = fixed[10];
        let epoch = u32::from_le_bytes(fixed[11..15].try_into().expect("4 bytes"));
        let json_len = u32::from_le_bytes(fixed[15..19].try_into().expect("4 bytes"));
        if json_len > MAX_HEADER_JSON {
            return Err(self.malformed("the header", 15, format!("a {json_len}-byte JSON header")));
        }
        let mut rest = vec![0u8; json_len as usize + 4];
        self.read_all(&mut rest, "the header")?;
        let (json, crc) = rest.split_at(json_len as usize);
        // The checksum covers every byte of the header before it.
        let mut h = crc32fast::Hasher::new();
        h.update(&fixed);
        h.update(json);
        if h.finalize().to_le_bytes() != crc {
            return Err(TraceError::Checksum {
                what: self.what.clone(),
                place: "the header".to_string(),
                offset: 0,
            });
        }
        self.form = match (form_code, epoch) {
            (0, 0) => TraceForm::Exact,
            (1, e) if e > 0 => TraceForm::Aggregated { epoch_accesses: e },
            _ => {
                let reason = format!("form {form_code} with epoch length {epoch}");
                return Err(self.malformed("the header", 10, reason));
            }
        };
        self.info = serde_json::from_slice(json)
            .map_err(|source| TraceError::BadHeader { what: self.what.clone(), source })?;
        // What the writer refuses, the reader refuses: a header crafted with a valid checksum
        // must not make the simulator allocate without bound or print escape sequences.
        self.info.validate().map_err(|reason| TraceError::BadInfo { what: self.what.clone(), reason })?;
        self.version = version;
        self.previous_crc = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        self.footprint_pages = self.info.footprint_bytes.div_ceil(1 << PAGE_SHIFT);
        Ok(())
    }

    /// [`Self::next_block`], marking the stream finished on error so later calls stop cleanly.
    fn next_block_or_fail(&mut self) -> Result<Option<usize>, TraceError> {
        if self.done {
            return Ok(None);
        }
        let r = self.next_block();
        if r.is_err() {
            self.done = true;
        }
        r
    }

    /// Reads and verifies the next block into `payload`; returns its entry count, or `None`
    /// after a valid end marker.
    fn next_block(&mut self) -> Result<Option<usize>, TraceError> {
        let start = self.offset;
        let block = self.block;
        let place = move || format!("block {block}");
        let mut head = [0u8; BLOCK_HEADER];
        self.read_all(&mut head, &place())?;
        let count = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        let end = count == END_MARKER;
        // Bounds checked before anything is allocated: an exact block at most 65,536 events of
        // at most 21 bytes; an epoch at most one entry per page of the footprint (16 Mi at most)
        // and per access, of at most 15 bytes.
        let (max_entries, min_bytes, max_bytes) = match self.form {
            TraceForm::Exact if self.version >= OBJECTS_VERSION => (BLOCK_EVENTS, 1, MAX_OBJECT_EVENT_BYTES),
            TraceForm::Exact => (BLOCK_EVENTS, 1, MAX_EVENT_BYTES),
            TraceForm::Aggregated { epoch_accesses } => {
                let entries = u64::from(epoch_accesses).min(self.footprint_pages);
                (entries as usize, 3, MAX_ENTRY_BYTES)
            }
        };
        let entries = count as usize;
        let fits = if end {
            len == 8
        } else {
            (1..=max_entries).contains(&entries)
                && (entries.saturating_mul(min_bytes)..=entries.saturating_mul(max_bytes)).contains(&len)
        };
        if !fits {
            let reason = format!("impossible block size ({count} entries in {len} bytes)");
            return Err(self.malformed(&place(), start, reason));
        }
        self.payload_len = len;
        self.payload_offset = self.offset;
        // Grow the buffer as bytes arrive, so a corrupt length field cannot make us allocate
        // more than the input holds (an aggregated block may legitimately be large).
        let mut payload = std::mem::take(&mut self.payload);
        payload.clear();
        let mut read = Ok(());
        while payload.len() < len && read.is_ok() {
            let filled = payload.len();
            payload.resize(len.min(filled + (4 << 20)), 0);
            read = self.read_all(&mut payload[filled..], &place());
        }
        self.payload = payload;
        read?;
        if block_crc(self.version, self.previous_crc, block, &head[..8], &self.payload[..len]) != crc {
            return Err(TraceError::Checksum { what: self.what.clone(), place: place(), offset: start });
        }
        self.previous_crc = crc;
        if end {
            let total = u64::from_le_bytes(self.payload[..8].try_into().expect("8 bytes"));
            if total != self.accesses || total != self.info.accesses {
                let reason = format!(
                    "end marker counts {total} accesses, the blocks hold {} and the header declares {}",
                    self.accesses, self.info.accesses
                );
                return Err(self.malformed("the end marker", start, reason));
            }
            let mut extra = [0u8; 1];
            if self.read_some(&mut extra)? > 0 {
                let reason = "bytes after the end marker".to_string();
                return Err(self.malformed("the end marker", self.offset, reason));
            }
            self.done = true;
            return Ok(None);
        }
        self.block += 1;
        Ok(Some(entries))
    }

    /// Turns a payload problem into an error naming the block and file offset.
    fn fail_problem(&mut self, p: Problem) -> TraceError {
        self.done = true;
        let block = self.block - 1;
        match p {
            Problem::Varint(pos) => TraceError::BadVarint {
                what: self.what.clone(),
                block,
                offset: self.payload_offset + pos as u64,
            },
            Problem::Malformed(pos, reason) => TraceError::Malformed {
                what: self.what.clone(),
                place: format!("block {block}"),
                offset: self.payload_offset + pos as u64,
                reason,
            },
        }
    }

    /// Fills `buf` completely or reports truncation in `place`.
    fn read_all(&mut self, buf: &mut [u8], place: &str) -> Result<(), TraceError> {
        let got = self.read_some(buf)?;
        self.offset += got as u64;
        if got < buf.len() {
            return Err(TraceError::Truncated {
                what: self.what.clone(),
                place: place.to_string(),
                offset: self.offset,
            });
        }
        Ok(())
    }

    /// Reads until `buf` is full or the input ends; returns the bytes read.
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, TraceError> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(source) => return Err(TraceError::Io { what: self.what.clone(), source }),
            }
        }
        Ok(got)
    }

    fn truncated(&self, place: &str, got: usize) -> TraceError {
        TraceError::Truncated {
            what: self.what.clone(),
            place: place.to_string(),
            offset: self.offset + got as u64,
        }
    }

    fn malformed(&self, place: &str, offset: u64, reason: String) -> TraceError {
        TraceError::Malformed { what: self.what.clone(), place: place.to_string(), offset, reason }
    }
}

impl<R: Read + Send> AccessSource for TraceReader<R> {
    fn info(&self) -> &WorkloadInfo {
        &self.info
    }

    /// Ends the stream on a read error and keeps the error for [`TraceReader::error`].
    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        match self.read_batch(buf, max) {
            Ok(n) => n,
            Err(e) => {
                self.done = true;
                self.error = Some(e);
                0
            }
        }
    }

    fn take_error(&mut self) -> Option<TraceError> {
        self.error.take()
    }

    fn take_object_events(&mut self, out: &mut Vec<ObjectEventAt>) {
        self.take_events(out)
    }
}

/// What the header allows an event: threads below `threads`, addresses below `footprint`, and
/// object events only from version 3.
#[derive(Clone, Copy)]
struct Limits {
    threads: u32,
    footprint: u64,
    objects: bool,
}

/// Decodes `count` exact-form entries from `payload`, appending the accesses to `out` and the
/// object events to `events` (placed after the `base` accesses before the block and those of
/// the block before them); returns the accesses decoded. The payload must be consumed exactly,
/// and every entry must be within `limits`.
fn decode_exact(
    payload: &[u8],
    count: usize,
    limits: Limits,
    out: &mut Vec<Access>,
    base: u64,
    events: &mut VecDeque<ObjectEventAt>,
) -> Result<usize, Problem> {
    #[inline(always)]
    fn varint(payload: &[u8], pos: &mut usize) -> Result<u64, Problem> {
        let at = *pos;
        get_varint(payload, pos).ok_or(Problem::Varint(at))
    }
    #[inline(always)]
    fn byte(payload: &[u8], pos: &mut usize) -> Result<u8, Problem> {
        let Some(&b) = payload.get(*pos) else {
            return Err(malformed(*pos, "block holds fewer events than its count"));
        };
        *pos += 1;
        Ok(b)
    }
    // Decode into initialised slots rather than `push`: no capacity check per event.
    let start = out.len();
    out.resize(start + count, Access::read(0, 0, 0, 0));
    let mut threads = [ThreadContext::START; 256];
    let mut thread = 0u8;
    let mut pos = 0usize;
    let mut k = start;
    for _ in 0..count {
        let at = pos;
        let t = byte(payload, &mut pos)?;
        if (t >> tag::ADDR_SHIFT) & 3 == tag::ADDR_OBJECT && limits.objects {
            if t & !(tag::OBJECT_FREE | tag::ADDR_OBJECT << tag::ADDR_SHIFT) != 0 {
                return Err(malformed(at, "reserved bit set in an object event"));
            }
            let (addr, bytes, site) =
                (varint(payload, &mut pos)?, varint(payload, &mut pos)?, varint(payload, &mut pos)?);
            if addr.checked_add(bytes).is_none_or(|end| end > limits.footprint) {
                return Err(malformed(
                    at,
                    format!(
                        "an object of {bytes} bytes at {addr:#x}, outside the footprint of {} bytes",
                        limits.footprint
                    ),
                ));
            }
            let kind = if t & tag::OBJECT_FREE != 0 { ObjectEventKind::Free } else { ObjectEventKind::Alloc };
            let event = ObjectEvent { kind, addr, bytes, site, program: 0 };
            events.push_back(ObjectEventAt { at: base + (k - start) as u64, event });
            continue;
        }
        // Selects rather than matches: they compile to moves, not mispredicted jumps.
        let thread_mode = (t >> tag::THREAD_SHIFT) & 3;
        thread = [thread, thread.wrapping_add(1), 0, 0][usize::from(thread_mode)];
        if thread_mode == tag::THREAD_BYTE {
            thread = byte(payload, &mut pos)?;
        }
        let fields = if t & tag::FIELDS != 0 {
            let at = pos;
            let f = byte(payload, &mut pos)?;
            if f & !(tag::FIELD_SIZE | tag::FIELD_INSTRUCTIONS) != 0 {
                return Err(malformed(at, "reserved field bit set"));
            }
            f
        } else {
            0
        };
        let ctx = &mut threads[usize::from(thread)];
        let slot = ctx.slot((t >> tag::SLOT_SHIFT) & 3);
        let addr_mode = (t >> tag::ADDR_SHIFT) & 3;
        let mut stride = if addr_mode == tag::ADDR_SAME { 0 } else { ctx.strides[slot] };
        if addr_mode == tag::ADDR_DELTA {
            stride = unzigzag(varint(payload, &mut pos)?);
        } else if addr_mode > tag::ADDR_SAME {
            return Err(malformed(at, "reserved address mode"));
        }
        let addr = ctx.addrs[slot].wrapping_add(stride);
        // One predictable branch: the simulator indexes its per-page state by address and its
        // per-thread state by thread, and the header sized both.
        if (addr >= limits.footprint) | (u32::from(thread) >= limits.threads) {
            return Err(out_of_limits(at, addr, thread, limits));
        }
        ctx.push(addr, stride);
        if fields & tag::FIELD_SIZE != 0 {
            let at = pos;
            let v = varint(payload, &mut pos)?;
            ctx.size = u16::try_from(v).map_err(|_| Problem::Varint(at))?;
        }
        if fields & tag::FIELD_INSTRUCTIONS != 0 {
            let at = pos;
            let v = varint(payload, &mut pos)?;
            ctx.instructions = u32::try_from(v).map_err(|_| Problem::Varint(at))?;
        }
        out[k] = Access {
            addr,
            instructions: ctx.instructions,
            size: ctx.size,
            thread,
            kind: if t & tag::WRITE != 0 { AccessKind::Write } else { AccessKind::Read },
        };
        k += 1;
    }
    if pos != payload.len() {
        return Err(malformed(pos, "bytes after the block's last event"));
    }
    out.truncate(k);
    Ok(k - start)
}

#[cold]
fn out_of_limits(at: usize, addr: u64, thread: u8, limits: Limits) -> Problem {
    if addr >= limits.footprint {
        malformed(at, format!("address {addr:#x} outside the footprint of {} bytes", limits.footprint))
    } else {
        malformed(
            at,
            format!("an event of thread {thread}, but the header declares {} threads", limits.threads),
        )
    }
}

/// Decodes one epoch's `count` page entries (pages below `pages`) into `out`; returns the
/// accesses they count.
fn decode_epoch(
    payload: &[u8],
    count: usize,
    epoch_accesses: u32,
    pages: u64,
    out: &mut Vec<(PageIdx, PageCounts)>,
) -> Result<u64, Problem> {
    out.reserve(count);
    let mut pos = 0usize;
    let mut page = 0u64;
    let mut total = 0u64;
    let field = |pos: &mut usize| -> Result<u32, Problem> {
        let at = *pos;
        let v = get_varint(payload, pos).ok_or(Problem::Varint(at))?;
        u32::try_from(v).map_err(|_| Problem::Varint(at))
    };
    for i in 0..count {
        let at = pos;
        let delta = field(&mut pos)?;
        if i > 0 && delta == 0 {
            return Err(malformed(at, "pages not in increasing order"));
        }
        page += u64::from(delta);
        if page >= pages {
            return Err(malformed(at, format!("page {page} outside the footprint of {pages} pages")));
        }
        let Ok(p) = PageIdx::try_from(page) else {
            return Err(malformed(at, "page index beyond 2^32"));
        };
        let c = PageCounts { reads: field(&mut pos)?, writes: field(&mut pos)? };
        if c.reads == 0 && c.writes == 0 {
            return Err(malformed(at, "a page entry with no accesses"));
        }
        total += u64::from(c.reads) + u64::from(c.writes);
        out.push((p, c));
    }
    if total > u64::from(epoch_accesses) {
        return Err(malformed(0, "more accesses than an epoch holds"));
    }
    if pos != payload.len() {
        return Err(malformed(pos, "bytes after the epoch's last page"));
    }
    Ok(total)
}
