//! The shared memory between Terrace and its object runtime (`libterrace_alloc.so`, crate
//! `terrace-alloc`): an event ring the runtime writes and Terrace drains, and a site-advice table
//! Terrace writes and the runtime reads. docs/objects-runtime.md describes the whole interface.
//!
//! This crate is the one definition of the layout, used by both sides: the runtime links it into
//! the preloaded library and calls only [`RingRef`]'s producer and advice lookups (atomics and
//! plain stores, no allocation, no lock, no system call); Terrace uses [`Ring`] to create the file,
//! drain events and write advice. It is a separate crate from the runtime so that linking the
//! reader never links the runtime's `malloc` into Terrace itself.
//!
//! # Layout (all integers little-endian, native alignment; one file, mapped `MAP_SHARED`)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | `magic` = `b"TRRCOBJ1"`, written last by [`Ring::create`] |
//! | 8 | 4 | `version` = [`VERSION`] |
//! | 12 | 4 | `record_bytes` = [`RECORD_BYTES`] (64) |
//! | 16 | 8 | `capacity`: records in the ring, a power of two |
//! | 24 | 8 | `records_offset` = [`HEADER_BYTES`] (4096) |
//! | 32 | 8 | `advice_offset` = `records_offset + capacity * 64` |
//! | 40 | 8 | `advice_slots`: entries in the advice table, a power of two |
//! | 48 | 8 | `attached`: processes that attached (a `fork` child inherits its parent's attachment and is not counted again; each exec'd program that allocates is) |
//! | 56 | 8 | `advice_count`: advice entries ever claimed (0: the runtime skips the lookup) |
//! | 128 | 8 | `tail`: producers' claim counter = events accepted since creation |
//! | 192 | 8 | `dropped`: events dropped because the ring was full (or too contended) |
//! | 256 | 8 | `head`: the reader's position (events drained) |
//!
//! `tail`, `dropped` and `head` each sit on their own 64-byte line. Records follow the header:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | `seq`: the slot's sequence number (the ring's protocol, below) |
//! | 8 | 4 | `kind`: 1 = alloc, 2 = free, 3 = start (a process image announces itself, below) |
//! | 12 | 4 | `tid`: the thread's kernel id (gettid) |
//! | 16 | 4 | `pid`: the process (a forked child writes to the same ring) |
//! | 20 | 4 | `node`: the node the object was bound to by advice, or -1 |
//! | 24 | 8 | `addr`: the object's start, page-aligned |
//! | 32 | 8 | `bytes`: the size the program asked for (a free repeats it) |
//! | 40 | 8 | `site`: the allocation site id (never 0); a free repeats the alloc's |
//! | 48 | 8 | `time_ns`: CLOCK_MONOTONIC |
//! | 56 | 8 | reserved, 0 |
//!
//! A start event (kind 3) is the first event of each process image: the runtime pushes it when
//! it attaches (an exec'd program) and before the first event of a `fork` child. It carries the
//! program's priority (object tiering §5.5: "an application sets it when it connects") in `site`,
//! as an `i32` sign-extended to 64 bits, and an id of the image in `addr` (the address of its
//! `AT_RANDOM` bytes, which every exec draws anew and a fork child shares with its parent), so
//! that the reader can tell an exec'd image's start from its predecessor's; `bytes` is 0.
//!
//! The advice table follows the records: `advice_slots` entries of 16 bytes, `site: u64`
//! (0 = empty) and `node: i32` (-1 = no advice) and 4 bytes of padding, open addressing with
//! linear probing from `site * 0x9E3779B97F4A7C15 >> (64 - log2(advice_slots))`.
//!
//! # The ring's protocol
//!
//! A bounded multi-producer queue with a sequence number per slot (D. Vyukov's bounded MPMC
//! queue, single consumer). Slot `i` starts with `seq = i`. A producer reads `tail = t`; if the
//! slot `t % capacity` has `seq == t` it claims `t` by compare-and-swap of `tail` from `t` to
//! `t + 1`, writes the payload and publishes with `seq = t + 1` (release). If `seq < t` the
//! slot still holds an event of the previous lap, so the ring is full: the producer adds one to
//! `dropped` and returns. It gives up (and counts a drop) after [`MAX_TRIES`] lost races, so it
//! never waits for anyone. The reader at `head = h` takes the slot when `seq == h + 1`
//! (acquire), copies it and frees it with `seq = h + capacity`. Every event pushed is therefore
//! either drained exactly once, whole, or counted in `dropped`: `tail + dropped` is the number
//! of pushes. One reader only.
#![deny(unsafe_op_in_unsafe_fn)]

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// `b"TRRCOBJ1"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"TRRCOBJ1");
/// Layout version; a runtime that finds another one attaches nothing. Version 2 added the start
/// event (kind 3), which a version-1 reader would have taken for a free.
pub const VERSION: u32 = 2;
/// Bytes of the header page before the records.
pub const HEADER_BYTES: usize = 4096;
/// Bytes of one event record.
pub const RECORD_BYTES: usize = 64;
/// Bytes of one advice entry.
pub const ADVICE_BYTES: usize = 16;
/// Lost compare-and-swap races after which a producer drops its event instead of retrying.
pub const MAX_TRIES: u32 = 64;
/// The environment variable naming the ring file for the runtime.
pub const RING_ENV: &str = "TERRACE_OBJECTS_RING";
/// Default number of records ([`Ring::create`] callers may choose another power of two).
pub const DEFAULT_CAPACITY: usize = 1 << 16;
/// Default number of advice entries.
pub const DEFAULT_ADVICE_SLOTS: usize = 1 << 12;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_RECORD_BYTES: usize = 12;
const OFF_CAPACITY: usize = 16;
const OFF_RECORDS: usize = 24;
const OFF_ADVICE: usize = 32;
const OFF_ADVICE_SLOTS: usize = 40;
const OFF_ATTACHED: usize = 48;
const OFF_ADVICE_COUNT: usize = 56;
const OFF_TAIL: usize = 128;
const OFF_DROPPED: usize = 192;
const OFF_HEAD: usize = 256;

/// An event's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EventKind {
    /// An object was placed in its own mapping.
    Alloc = 1,
    /// An object was freed (its mapping unmapped). A realloc that resizes an object is a free of
    /// the old one and an alloc of the new one.
    Free = 2,
    /// A process image attached (or a fork child made its first event): `site` holds its
    /// priority, `addr` its image id.
    Start = 3,
}

/// One event as the reader returns it (the record without its sequence number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub tid: u32,
    pub pid: u32,
    /// The node the object was bound to by advice (MPOL_PREFERRED), or -1.
    pub node: i32,
    pub addr: u64,
    pub bytes: u64,
    pub site: u64,
    pub time_ns: u64,
}

impl Event {
    /// The start event of process image `image` of `pid` at priority `priority`.
    pub fn start(pid: u32, tid: u32, priority: i32, image: u64, time_ns: u64) -> Event {
        Event {
            kind: EventKind::Start,
            tid,
            pid,
            node: -1,
            addr: image,
            bytes: 0,
            site: i64::from(priority) as u64,
            time_ns,
        }
    }

    /// A start event's priority (`site`, sign-extended; 0 for a value out of `i32`'s range).
    pub fn priority(&self) -> i32 {
        i32::try_from(self.site as i64).unwrap_or(0)
    }
}

/// The bytes a ring file of `capacity` records and `advice_slots` advice entries takes.
pub fn file_bytes(capacity: usize, advice_slots: usize) -> usize {
    HEADER_BYTES + capacity * RECORD_BYTES + advice_slots * ADVICE_BYTES
}

fn advice_home(site: u64, slots: u64) -> u64 {
    let bits = slots.trailing_zeros();
    if bits == 0 {
        return 0;
    }
    site.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)
}

/// A view of a mapped, initialised ring: the producer and the advice lookup, both free of
/// allocation, locks and system calls, so the runtime may call them inside `malloc`. `Copy`: it
/// is a pointer and two numbers read once from the header.
#[derive(Clone, Copy, Debug)]
pub struct RingRef {
    base: *mut u8,
    capacity: u64,
    advice_slots: u64,
}

// SAFETY: every field the view touches through `base` is either atomic or written by exactly one
// party under the slot protocol described in the crate docs; the pointer itself is immutable.
unsafe impl Send for RingRef {}
// SAFETY: as for Send; all shared accesses go through atomics.
unsafe impl Sync for RingRef {}

impl RingRef {
    /// Checks the header of `len` bytes mapped at `base` and returns a view, or `None` if it is
    /// not a ring of this version or its sizes do not fit `len`.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `len` bytes, aligned to a page, for as long as
    /// the view (and its copies) is used, and the file must not be truncated meanwhile.
    pub unsafe fn from_raw(base: *mut u8, len: usize) -> Option<RingRef> {
        if base.is_null() || len < HEADER_BYTES {
            return None;
        }
        let r = RingRef { base, capacity: 0, advice_slots: 0 };
        // SAFETY: the header lies within the `len >= HEADER_BYTES` bytes the caller vouches for.
        let (magic, version, rec, cap, rec_off, adv_off, adv_slots) = unsafe {
            (
                r.atomic_u64(OFF_MAGIC).load(Ordering::Acquire),
                base.add(OFF_VERSION).cast::<u32>().read(),
                base.add(OFF_RECORD_BYTES).cast::<u32>().read(),
                base.add(OFF_CAPACITY).cast::<u64>().read(),
                base.add(OFF_RECORDS).cast::<u64>().read(),
                base.add(OFF_ADVICE).cast::<u64>().read(),
                base.add(OFF_ADVICE_SLOTS).cast::<u64>().read(),
            )
        };
        let ok = magic == MAGIC
            && version == VERSION
            && rec as usize == RECORD_BYTES
            && cap.is_power_of_two()
            && rec_off == HEADER_BYTES as u64
            && adv_slots.is_power_of_two()
            && cap.checked_mul(RECORD_BYTES as u64).and_then(|b| b.checked_add(rec_off)) == Some(adv_off)
            && adv_slots
                .checked_mul(ADVICE_BYTES as u64)
                .and_then(|b| b.checked_add(adv_off))
                .is_some_and(|end| end <= len as u64);
        ok.then_some(RingRef { base, capacity: cap, advice_slots: adv_slots })
    }

    /// # Safety
    /// `off` is a header offset of an 8-byte field (within the checked mapping).
    unsafe fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        // SAFETY: per the caller, `base + off` is an aligned u64 in the mapping, which lives as
        // long as self; shared memory fields are only ever accessed atomically.
        unsafe { &*self.base.add(off).cast::<AtomicU64>() }
    }

    fn slot(&self, pos: u64) -> *mut u8 {
        let i = (pos & (self.capacity - 1)) as usize;
        // SAFETY: i < capacity, and the records lie within the mapping (checked in from_raw).
        unsafe { self.base.add(HEADER_BYTES + i * RECORD_BYTES) }
    }

    fn seq(&self, slot: *mut u8) -> &AtomicU64 {
        // SAFETY: a record starts with its 8-byte, 8-aligned sequence number.
        unsafe { &*slot.cast::<AtomicU64>() }
    }

    fn header(&self, off: usize) -> &AtomicU64 {
        // SAFETY: only called with the header's u64 offsets.
        unsafe { self.atomic_u64(off) }
    }

    /// Records in the ring.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Pushes one event; `false` if it was dropped (and counted in `dropped`). Never blocks,
    /// never allocates.
    pub fn push(&self, ev: &Event) -> bool {
        let tail = self.header(OFF_TAIL);
        let mut pos = tail.load(Ordering::Relaxed);
        for _ in 0..MAX_TRIES {
            let slot = self.slot(pos);
            let seq = self.seq(slot).load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos) as i64;
            if diff == 0 {
                match tail.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        // SAFETY: the CAS gave this producer slot `pos` alone until it publishes
                        // `seq = pos + 1`; the payload lies after the 8-byte seq in the record.
                        unsafe {
                            slot.add(8).cast::<u32>().write(ev.kind as u32);
                            slot.add(12).cast::<u32>().write(ev.tid);
                            slot.add(16).cast::<u32>().write(ev.pid);
                            slot.add(20).cast::<i32>().write(ev.node);
                            slot.add(24).cast::<u64>().write(ev.addr);
                            slot.add(32).cast::<u64>().write(ev.bytes);
                            slot.add(40).cast::<u64>().write(ev.site);
                            slot.add(48).cast::<u64>().write(ev.time_ns);
                            slot.add(56).cast::<u64>().write(0);
                        }
                        self.seq(slot).store(pos + 1, Ordering::Release);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if diff < 0 {
                break; // the slot still holds last lap's event: full
            } else {
                pos = tail.load(Ordering::Relaxed);
            }
        }
        self.header(OFF_DROPPED).fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The node advised for `site`, if any. Never allocates.
    pub fn advice(&self, site: u64) -> Option<u32> {
        if site == 0 || self.header(OFF_ADVICE_COUNT).load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mask = self.advice_slots - 1;
        let mut i = advice_home(site, self.advice_slots);
        for _ in 0..self.advice_slots {
            let (key, node) = self.advice_entry(i);
            match key.load(Ordering::Acquire) {
                0 => return None,
                k if k == site => {
                    let n = node.load(Ordering::Acquire);
                    return (n >= 0).then_some(n as u32);
                }
                _ => i = (i + 1) & mask,
            }
        }
        None
    }

    fn advice_entry(&self, i: u64) -> (&AtomicU64, &AtomicI32) {
        // SAFETY: i < advice_slots (masked by callers), and the table lies within the mapping.
        unsafe {
            let adv = self.base.add(HEADER_BYTES + self.capacity as usize * RECORD_BYTES);
            let e = adv.add(i as usize * ADVICE_BYTES);
            (&*e.cast::<AtomicU64>(), &*e.add(8).cast::<AtomicI32>())
        }
    }

    /// Counts one more attached process (the runtime calls it once per process, at attach).
    pub fn note_attached(&self) {
        self.header(OFF_ATTACHED).fetch_add(1, Ordering::Relaxed);
    }
}

/// The reader's side: owns the mapping of a ring file, drains events and writes advice. Terrace
/// creates one per managed program ([`Ring::create`]) and passes its path to the program in
/// [`RING_ENV`]. One reader per ring.
#[derive(Debug)]
pub struct Ring {
    view: RingRef,
    len: usize,
}

// SAFETY: the mapping is owned by this value and shared memory is accessed through atomics or
// under the slot protocol; moving it to another thread moves that ownership.
unsafe impl Send for Ring {}

/// The advice table has no free entry for a new site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdviceFull;

impl std::fmt::Display for AdviceFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the site-advice table is full")
    }
}

impl std::error::Error for AdviceFull {}

impl Ring {
    /// Creates (or replaces) the ring file at `path` with `capacity` records and `advice_slots`
    /// advice entries (both rounded up to powers of two, at least 2), mode 0600, and maps it.
    pub fn create(path: &Path, capacity: usize, advice_slots: usize) -> io::Result<Ring> {
        Self::make(path, capacity, advice_slots, false)
    }

    /// As [`Ring::create`], but only a new file: an existing path (a file, or a link someone
    /// planted in a shared directory such as /dev/shm) is refused with `AlreadyExists`, never
    /// followed or truncated (O_CREAT | O_EXCL).
    pub fn create_new(path: &Path, capacity: usize, advice_slots: usize) -> io::Result<Ring> {
        Self::make(path, capacity, advice_slots, true)
    }

    fn make(path: &Path, capacity: usize, advice_slots: usize, new: bool) -> io::Result<Ring> {
        let capacity = capacity.max(2).next_power_of_two();
        let advice_slots = advice_slots.max(2).next_power_of_two();
        let len = file_bytes(capacity, advice_slots);
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            let mut o = OpenOptions::new();
            o.read(true).write(true).mode(0o600);
            if new {
                o.create_new(true);
            } else {
                o.create(true).truncate(true);
            }
            o.open(path)?
        };
        file.set_len(len as u64)?;
        let base = map(&file, len)?;
        // SAFETY: `base` maps `len` bytes of a file of that size that nobody else uses yet (the
        // magic is not written, so no runtime attaches): plain writes initialise it.
        unsafe {
            base.add(OFF_VERSION).cast::<u32>().write(VERSION);
            base.add(OFF_RECORD_BYTES).cast::<u32>().write(RECORD_BYTES as u32);
            base.add(OFF_CAPACITY).cast::<u64>().write(capacity as u64);
            base.add(OFF_RECORDS).cast::<u64>().write(HEADER_BYTES as u64);
            base.add(OFF_ADVICE).cast::<u64>().write((HEADER_BYTES + capacity * RECORD_BYTES) as u64);
            base.add(OFF_ADVICE_SLOTS).cast::<u64>().write(advice_slots as u64);
            for i in 0..capacity {
                base.add(HEADER_BYTES + i * RECORD_BYTES).cast::<u64>().write(i as u64);
            }
            let adv = base.add(HEADER_BYTES + capacity * RECORD_BYTES);
            for i in 0..advice_slots {
                adv.add(i * ADVICE_BYTES + 8).cast::<i32>().write(-1);
            }
            (*base.cast::<AtomicU64>()).store(MAGIC, Ordering::Release);
        }
        // SAFETY: just initialised; the mapping lives as long as the returned Ring.
        let view = unsafe { RingRef::from_raw(base, len) }.ok_or_else(|| io::Error::other("ring layout"))?;
        Ok(Ring { view, len })
    }

    /// Maps an existing ring file (e.g. to read a finished run's counters).
    pub fn open(path: &Path) -> io::Result<Ring> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len() as usize;
        let base = map(&file, len)?;
        // SAFETY: `base` maps the whole file, `len` bytes, for the Ring's life.
        match unsafe { RingRef::from_raw(base, len) } {
            Some(view) => Ok(Ring { view, len }),
            None => {
                // SAFETY: unmapping the mapping made above, which nothing else refers to.
                unsafe { libc::munmap(base.cast(), len) };
                Err(io::Error::new(io::ErrorKind::InvalidData, "not a terrace object ring of this version"))
            }
        }
    }

    /// The producer view (for tests, or for a producer in this process).
    pub fn producer(&self) -> RingRef {
        self.view
    }

    /// Takes the next event, if one is published.
    pub fn pop(&mut self) -> Option<Event> {
        let v = &self.view;
        let head = v.header(OFF_HEAD);
        let pos = head.load(Ordering::Relaxed);
        let slot = v.slot(pos);
        if v.seq(slot).load(Ordering::Acquire) != pos + 1 {
            return None;
        }
        // SAFETY: seq == pos + 1 means the producer of `pos` published the payload (acquire
        // above) and no producer writes it again until we release it below.
        let ev = unsafe {
            let kind = match slot.add(8).cast::<u32>().read() {
                1 => EventKind::Alloc,
                3 => EventKind::Start,
                _ => EventKind::Free,
            };
            Event {
                kind,
                tid: slot.add(12).cast::<u32>().read(),
                pid: slot.add(16).cast::<u32>().read(),
                node: slot.add(20).cast::<i32>().read(),
                addr: slot.add(24).cast::<u64>().read(),
                bytes: slot.add(32).cast::<u64>().read(),
                site: slot.add(40).cast::<u64>().read(),
                time_ns: slot.add(48).cast::<u64>().read(),
            }
        };
        v.seq(slot).store(pos + v.capacity, Ordering::Release);
        head.store(pos + 1, Ordering::Release);
        Some(ev)
    }

    /// Appends every published event to `out` (at most `max`), returning how many.
    pub fn drain(&mut self, out: &mut Vec<Event>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            match self.pop() {
                Some(e) => {
                    out.push(e);
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Events accepted by producers since creation.
    pub fn accepted(&self) -> u64 {
        self.view.header(OFF_TAIL).load(Ordering::Acquire)
    }

    /// Events dropped because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.view.header(OFF_DROPPED).load(Ordering::Acquire)
    }

    /// Events drained by the reader.
    pub fn drained(&self) -> u64 {
        self.view.header(OFF_HEAD).load(Ordering::Acquire)
    }

    /// Processes that attached to the ring.
    pub fn attached(&self) -> u64 {
        self.view.header(OFF_ATTACHED).load(Ordering::Acquire)
    }

    /// Advises that new objects of `site` be placed on `node` (`None` withdraws the advice).
    /// Objects allocated after this call see it; existing ones are not moved. Single writer.
    pub fn set_advice(&self, site: u64, node: Option<u32>) -> Result<(), AdviceFull> {
        let v = &self.view;
        let value = node.map_or(-1, |n| n.min(i32::MAX as u32) as i32);
        if site == 0 {
            return Err(AdviceFull);
        }
        let mask = v.advice_slots - 1;
        let mut i = advice_home(site, v.advice_slots);
        for _ in 0..v.advice_slots {
            let (key, n) = v.advice_entry(i);
            match key.load(Ordering::Acquire) {
                k if k == site => {
                    n.store(value, Ordering::Release);
                    return Ok(());
                }
                0 => {
                    if node.is_none() {
                        return Ok(());
                    }
                    n.store(value, Ordering::Relaxed);
                    key.store(site, Ordering::Release);
                    v.header(OFF_ADVICE_COUNT).fetch_add(1, Ordering::Release);
                    return Ok(());
                }
                _ => i = (i + 1) & mask,
            }
        }
        Err(AdviceFull)
    }

    /// The advice for `site` as the runtime would read it.
    pub fn advice(&self, site: u64) -> Option<u32> {
        self.view.advice(site)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in create/open, `len` bytes, used by nothing after this.
        unsafe { libc::munmap(self.view.base.cast(), self.len) };
    }
}

fn map(file: &std::fs::File, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping of an open file of at least `len` bytes; the kernel checks
    // the arguments.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("terrace-ring-{}-{name}", std::process::id()))
    }

    fn ev(t: u32, i: u64) -> Event {
        let addr = (u64::from(t) << 40) | i;
        Event {
            kind: if i.is_multiple_of(2) { EventKind::Alloc } else { EventKind::Free },
            tid: t,
            pid: 7,
            node: -1,
            addr,
            bytes: addr ^ 0x5555_5555_5555,
            site: addr.wrapping_mul(3) | 1,
            time_ns: !addr,
        }
    }

    /// Producer threads and the reader agree: every event drained is whole (its fields are
    /// functions of its address), each thread's events come in order, none twice, and
    /// accepted + dropped equals the pushes, with drops counted exactly.
    #[test]
    fn producers_and_reader_agree() {
        let path = tmp("agree");
        let ring = Ring::create(&path, 1024, 16).unwrap();
        let prod = ring.producer();
        let threads = 4u32;
        let per = 200_000u64;
        let done = Arc::new(AtomicBool::new(false));
        let pushed_ok: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut ok = 0u64;
                    for i in 0..per {
                        ok += u64::from(prod.push(&ev(t, i)));
                    }
                    ok
                })
            })
            .collect();
        let reader = {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut ring = ring;
                let mut last: HashMap<u32, u64> = HashMap::new();
                let mut n = 0u64;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    while let Some(e) = ring.pop() {
                        let want = ev(e.tid, e.addr & ((1 << 40) - 1));
                        assert_eq!(e, want, "torn record");
                        let i = e.addr & ((1 << 40) - 1);
                        if let Some(&prev) = last.get(&e.tid) {
                            assert!(i > prev, "thread {} out of order: {i} after {prev}", e.tid);
                        }
                        last.insert(e.tid, i);
                        n += 1;
                    }
                    if finished {
                        break;
                    }
                    std::thread::yield_now();
                }
                (ring, n)
            })
        };
        let ok: u64 = pushed_ok.into_iter().map(|h| h.join().unwrap()).sum();
        done.store(true, Ordering::Release);
        let (ring, n) = reader.join().unwrap();
        let total = u64::from(threads) * per;
        assert_eq!(ring.accepted(), ok);
        assert_eq!(n, ok, "reader drained exactly the accepted events");
        assert_eq!(ring.dropped(), total - ok, "every refused push is counted once");
        assert_eq!(ring.drained(), n);
        drop(ring);
        std::fs::remove_file(&path).unwrap();
    }

    /// With no reader, a ring of 8 takes 8 events and counts every later push as dropped.
    #[test]
    fn full_ring_drops_and_counts() {
        let path = tmp("full");
        let mut ring = Ring::create(&path, 8, 4).unwrap();
        let p = ring.producer();
        let accepted = (0..20).filter(|&i| p.push(&ev(1, i))).count();
        assert_eq!(accepted, 8);
        assert_eq!(ring.dropped(), 12);
        let mut out = Vec::new();
        assert_eq!(ring.drain(&mut out, usize::MAX), 8);
        assert_eq!(out[0], ev(1, 0));
        assert!(p.push(&ev(1, 99)));
        assert_eq!(ring.pop(), Some(ev(1, 99)));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn advice_round_trip_and_reopen() {
        let path = tmp("advice");
        let ring = Ring::create(&path, 8, 4).unwrap();
        assert_eq!(ring.advice(42), None);
        ring.set_advice(42, Some(0)).unwrap();
        ring.set_advice(43, Some(3)).unwrap();
        assert_eq!(ring.advice(42), Some(0));
        assert_eq!(ring.advice(43), Some(3));
        ring.set_advice(42, None).unwrap();
        assert_eq!(ring.advice(42), None);
        ring.set_advice(44, Some(1)).unwrap();
        ring.set_advice(45, Some(1)).unwrap();
        assert_eq!(ring.set_advice(46, Some(1)), Err(AdviceFull));
        let other = Ring::open(&path).unwrap();
        assert_eq!(other.advice(43), Some(3));
        assert_eq!(other.producer().advice(44), Some(1));
        std::fs::write(&path, b"nonsense").unwrap();
        assert!(Ring::open(&path).is_err());
        std::fs::remove_file(&path).unwrap();
    }

    /// A start event goes through the ring whole, its priority's sign included, and is read back
    /// as a start (a version-1 reader would have read kind 3 as a free).
    #[test]
    fn start_events_carry_priority_and_image() {
        let path = tmp("start");
        let mut ring = Ring::create(&path, 8, 4).unwrap();
        let p = ring.producer();
        for prio in [0, 3, -2, i32::MAX, i32::MIN] {
            assert!(p.push(&Event::start(11, 12, prio, 0x7ffd_1234_5678, 99)));
        }
        let mut out = Vec::new();
        ring.drain(&mut out, usize::MAX);
        let got: Vec<(EventKind, i32, u64, u32)> =
            out.iter().map(|e| (e.kind, e.priority(), e.addr, e.pid)).collect();
        let want: Vec<_> = [0, 3, -2, i32::MAX, i32::MIN]
            .iter()
            .map(|&q| (EventKind::Start, q, 0x7ffd_1234_5678, 11))
            .collect();
        assert_eq!(got, want);
        std::fs::remove_file(&path).unwrap();
    }
}
