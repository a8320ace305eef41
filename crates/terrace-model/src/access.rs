//! Memory accesses and object (allocation) events: what a program does.

use serde::{Deserialize, Serialize};

/// Whether an access reads or writes memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum AccessKind {
    Read = 0,
    Write = 1,
}

impl AccessKind {
    pub fn is_write(self) -> bool {
        self == AccessKind::Write
    }
}

/// One access that reaches memory (a last-level-cache miss or a write-back), as a trace holds it.
///
/// 16 bytes, so that a batch of a million fits comfortably in cache-friendly buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Access {
    /// Virtual address, offset from the start of the managed region.
    pub addr: u64,
    /// Instructions the issuing thread retired since its previous access (its compute between misses).
    pub instructions: u32,
    /// Bytes accessed (1..=65535); a 64-byte cache line is the usual unit.
    pub size: u16,
    /// Issuing thread.
    pub thread: u8,
    pub kind: AccessKind,
}

impl Access {
    pub const fn read(addr: u64, size: u16, thread: u8, instructions: u32) -> Self {
        Access { addr, instructions, size, thread, kind: AccessKind::Read }
    }
    pub const fn write(addr: u64, size: u16, thread: u8, instructions: u32) -> Self {
        Access { addr, instructions, size, thread, kind: AccessKind::Write }
    }
}

/// Allocation or free of an object, with the allocation site it came from (object tiering §3.2,
/// §3.5): what bkmalloc sends its daemon. A free names the same range and site as its
/// allocation. Addresses are in the managed region, as [`Access::addr`]. Where several programs
/// share the machine (object tiering §5.5), `program` says whose, and a program's start (with
/// its priority and its address range) and end come through the same channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectEvent {
    pub kind: ObjectEventKind,
    pub addr: u64,
    pub bytes: u64,
    /// Hash of the allocation's call stack (up to 16 return addresses, §3.5).
    pub site: u64,
    /// The program the event is of: 0 for the one program of most runs.
    #[serde(default)]
    pub program: u32,
}

impl ObjectEvent {
    pub const fn alloc(addr: u64, bytes: u64, site: u64) -> Self {
        ObjectEvent { kind: ObjectEventKind::Alloc, addr, bytes, site, program: 0 }
    }
    pub const fn free(addr: u64, bytes: u64, site: u64) -> Self {
        ObjectEvent { kind: ObjectEventKind::Free, addr, bytes, site, program: 0 }
    }
    /// Program `program` starts, at `priority` (higher first; object tiering §5.5: an
    /// application sets its priority when it connects to the daemon), its memory the `bytes`
    /// from `addr`.
    pub const fn program_start(program: u32, priority: i32, addr: u64, bytes: u64) -> Self {
        ObjectEvent { kind: ObjectEventKind::ProgramStart { priority }, addr, bytes, site: 0, program }
    }
    /// Program `program` has ended.
    pub const fn program_end(program: u32, addr: u64, bytes: u64) -> Self {
        ObjectEvent { kind: ObjectEventKind::ProgramEnd, addr, bytes, site: 0, program }
    }
    /// The same event, of program `program`.
    pub const fn of_program(self, program: u32) -> Self {
        ObjectEvent { program, ..self }
    }
    /// Whether it is an allocation or a free (not a program's start or end).
    pub const fn is_object(&self) -> bool {
        matches!(self.kind, ObjectEventKind::Alloc | ObjectEventKind::Free)
    }
    /// The pages of `page_bytes` the object overlaps, first to last; empty for 0 bytes.
    pub fn pages(&self, page_bytes: u64) -> std::ops::Range<u64> {
        if self.bytes == 0 {
            return 0..0;
        }
        let last = self.addr.saturating_add(self.bytes - 1);
        self.addr / page_bytes..last / page_bytes + 1
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ObjectEventKind {
    Alloc,
    Free,
    /// A program starts sharing the machine (object tiering §5.5).
    ProgramStart {
        priority: i32,
    },
    /// A program has ended: its memory is released and its priority holds the others back no more.
    ProgramEnd,
}
