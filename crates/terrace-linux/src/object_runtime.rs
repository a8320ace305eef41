//! The object runtime joined to the live machine (object tiering §3.2, §3.5): `terrace run
//! --objects` preloads `libterrace_alloc.so` into the program with a ring file of its own
//! (docs/objects-runtime.md); the machine drains the ring's allocation and free events, renames
//! each object from the program's addresses to the policy's page numbers, hands them to the policy
//! through the one loop ([`terrace_model::Machine::take_object_events`]), and writes the policy's
//! site advice into the ring, where the runtime reads it at each allocation.
//!
//! An object's address is known at once, its page numbers only once a full scan has indexed its
//! mapping: an event waits in order behind the first allocation not yet indexed, and an
//! allocation that a full scan after it still did not find (its mapping was gone, or its process
//! was never managed) is dropped with its free, and counted. A process that leaves or execs takes
//! its objects with it: they are freed for the policy.
//!
//! Programs by priority (object tiering §5.5): each process image announces itself with its
//! priority (`TERRACE_PRIORITY`, the runtime's start event). The processes of one priority are one
//! program for the policy: its start reaches the policy when the first of them announces itself,
//! its end when the last leaves, and their objects are that program's.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use terrace_alloc_ring::{Event, EventKind, Ring, DEFAULT_ADVICE_SLOTS, DEFAULT_CAPACITY, RING_ENV};
use terrace_model::ObjectEvent;

/// The variable naming the runtime library, for an install that keeps it elsewhere.
pub const LIBRARY_ENV: &str = "TERRACE_ALLOC_LIB";
/// The runtime library's file name.
pub const LIBRARY_NAME: &str = "libterrace_alloc.so";
/// Events at most waiting for their pages to be indexed (about 40 bytes each): past it the oldest
/// is dropped and counted, so a program that allocates faster than scans index never grows
/// Terrace's memory without bound.
pub const MAX_WAITING: usize = 1 << 18;

/// Where `libterrace_alloc.so` is: `$TERRACE_ALLOC_LIB`, or beside the `terrace` executable (as
/// `cargo build --release` leaves it), or in `../lib` or `../lib/terrace` from it (an install's
/// layout). The error says where it looked and what to do.
pub fn find_library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(LIBRARY_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(format!("{LIBRARY_ENV}={} names no file", p.display())) };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find terrace's own executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [
        dir.join(LIBRARY_NAME),
        dir.join("../lib").join(LIBRARY_NAME),
        dir.join("../lib/terrace").join(LIBRARY_NAME),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        format!(
            "no {LIBRARY_NAME} beside {} (nor in ../lib or ../lib/terrace): build it with `cargo build --release \
             -p terrace-alloc` (it lands beside target/release/terrace) or name it with {LIBRARY_ENV}=PATH",
            exe.display()
        )
    })
}

/// What happened to the runtime's events, for the run's closing line and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectCounters {
    /// Objects handed to the policy, and their frees.
    pub allocs: u64,
    pub frees: u64,
    /// Allocations never handed over: their mapping was gone (or their process unmanaged) by the
    /// next full scan; their frees are dropped with them.
    pub unseen: u64,
    /// Events dropped because too many were waiting ([`MAX_WAITING`]).
    pub overflowed: u64,
    /// Advice the ring's table had no room for.
    pub advice_refused: u64,
    /// Objects freed for the policy because their process exited or exec'd.
    pub freed_with_process: u64,
}

/// A live object's policy ranges (model address, bytes): nearly every object is one range (a
/// mapping of its own is contiguous in the page index), kept inline in 16 bytes, so that keeping
/// an object costs no allocation of its own; more ranges (or one over 4 GiB) on the heap.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ranges {
    One {
        addr: u64,
        bytes: u32,
    },
    /// A thin pointer to the vector (a boxed slice's would make the enum 24 bytes).
    #[allow(clippy::box_collection)]
    Many(Box<Vec<(u64, u64)>>),
}

impl Ranges {
    fn of(v: &[(u64, u64)]) -> Ranges {
        match v {
            &[(addr, bytes)] if u32::try_from(bytes).is_ok() => Ranges::One { addr, bytes: bytes as u32 },
            _ => Ranges::Many(Box::new(v.to_vec())),
        }
    }

    /// Each range, in order.
    fn each(&self, mut f: impl FnMut(u64, u64)) {
        match self {
            Ranges::One { addr, bytes } => f(*addr, u64::from(*bytes)),
            Ranges::Many(v) => v.iter().for_each(|&(a, b)| f(a, b)),
        }
    }
}

struct Waiting {
    event: Event,
    /// Full scans completed when it was drained: one more, and its mapping had been indexed.
    scans_at_drain: u64,
}

/// The variable that gives a program its priority (read by the runtime when it attaches).
pub const PRIORITY_ENV: &str = "TERRACE_PRIORITY";

/// The processes at one priority, one program for the policy.
#[derive(Clone, Copy, Debug)]
struct PriorityProgram {
    /// Its program number (1 and up; 0 is a process that never announced itself).
    program: u32,
    /// Processes announced at this priority that have not left.
    processes: u32,
}

/// The ring of one `terrace run --objects`, and the events on their way to the policy.
pub struct ObjectRuntime {
    ring: Ring,
    path: PathBuf,
    library: PathBuf,
    waiting: VecDeque<Waiting>,
    /// Objects handed to the policy and not yet freed: (pid, address) to the policy's ranges.
    live: HashMap<(u32, u64), Ranges>,
    /// Events ready for the policy ahead of the waiting ones: frees made for processes that left,
    /// programs' starts and ends. Delivered first at the next take.
    ready: Vec<ObjectEvent>,
    /// Each announced process: its image id and priority (the runtime's start event).
    processes: HashMap<u32, (u64, i32)>,
    /// The programs by priority, started and not ended.
    programs: HashMap<i32, PriorityProgram>,
    next_program: u32,
    counters: ObjectCounters,
    drained: Vec<Event>,
}

impl ObjectRuntime {
    /// A new ring file for a program about to start, in `/dev/shm` (a tmpfs, so events never go
    /// to disk) or, without it, the temporary directory; `library` is the runtime to preload.
    /// The directory is shared with every user, so the file is created anew (never an existing
    /// path, which could be a link someone planted) under a name with a random part (std's
    /// per-process random hash keys).
    pub fn create(library: PathBuf) -> std::io::Result<Self> {
        use std::hash::{BuildHasher, Hasher};
        let dir =
            if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let (path, ring) = loop {
            let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
            let path = dir.join(format!("terrace-objects-{}-{random:016x}", std::process::id()));
            match Ring::create_new(&path, DEFAULT_CAPACITY, DEFAULT_ADVICE_SLOTS) {
                Ok(ring) => break (path, ring),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        Ok(ObjectRuntime::with_ring(ring, path, library))
    }

    fn with_ring(ring: Ring, path: PathBuf, library: PathBuf) -> Self {
        ObjectRuntime {
            ring,
            path,
            library,
            waiting: VecDeque::new(),
            live: HashMap::new(),
            ready: Vec::new(),
            processes: HashMap::new(),
            programs: HashMap::new(),
            next_program: 1,
            counters: ObjectCounters::default(),
            drained: Vec::new(),
        }
    }

    /// The variables the program starts with: the runtime first in `LD_PRELOAD` (before any the
    /// user set, which stay), and the ring.
    pub fn environment(&self, preload: Option<OsString>) -> [(OsString, OsString); 2] {
        let mut value = OsString::from(self.library.as_os_str());
        if let Some(p) = preload.filter(|p| !p.is_empty()) {
            value.push(" ");
            value.push(p);
        }
        [
            (OsString::from("LD_PRELOAD"), value),
            (OsString::from(RING_ENV), self.path.clone().into_os_string()),
        ]
    }

    pub fn ring_path(&self) -> &Path {
        &self.path
    }

    pub fn counters(&self) -> ObjectCounters {
        self.counters
    }

    /// Events the runtime dropped because the ring was full, and processes that attached.
    pub fn ring_dropped(&self) -> u64 {
        self.ring.dropped()
    }
    pub fn attached(&self) -> u64 {
        self.ring.attached()
    }
    /// Events the runtime put in the ring.
    pub fn reported(&self) -> u64 {
        self.ring.accepted()
    }

    /// Drains the ring and appends to `out`, in program order, the events whose objects have
    /// policy pages now. `scans` is the number of full scans completed; `pieces(pid, addr,
    /// bytes)` gives an object's policy ranges (model addresses and bytes, one per run of
    /// consecutive policy pages), or `None` while its pages are not all indexed.
    pub fn take(
        &mut self,
        scans: u64,
        pieces: &mut dyn FnMut(u32, u64, u64) -> Option<Vec<(u64, u64)>>,
        out: &mut Vec<ObjectEvent>,
    ) {
        self.drain_ring(scans);
        out.append(&mut self.ready);
        while self.waiting.len() > MAX_WAITING {
            self.waiting.pop_front();
            self.counters.overflowed += 1;
        }
        while let Some(w) = self.waiting.front() {
            let e = w.event;
            let program = self.program_of(e.pid);
            match e.kind {
                EventKind::Alloc => match pieces(e.pid, e.addr, e.bytes) {
                    Some(ranges) => {
                        out.extend(ranges.iter().map(|&(addr, bytes)| {
                            ObjectEvent::alloc(addr, bytes, e.site).of_program(program)
                        }));
                        // A reused address whose free was lost replaces the old object.
                        if let Some(old) = self.live.insert((e.pid, e.addr), Ranges::of(&ranges)) {
                            old.each(|addr, bytes| {
                                out.push(ObjectEvent::free(addr, bytes, e.site).of_program(program))
                            });
                        }
                        self.counters.allocs += 1;
                    }
                    None if scans > w.scans_at_drain => self.counters.unseen += 1,
                    // Wait for the next full scan, and keep the program's order.
                    None => return,
                },
                EventKind::Free => {
                    if let Some(ranges) = self.live.remove(&(e.pid, e.addr)) {
                        ranges.each(|addr, bytes| {
                            out.push(ObjectEvent::free(addr, bytes, e.site).of_program(program))
                        });
                        self.counters.frees += 1;
                    }
                }
                // Taken as they were drained (`drain_ring`).
                EventKind::Start => {}
            }
            self.waiting.pop_front();
        }
    }

    /// Empties the ring into the waiting queue between the policy's ticks, so that a program
    /// allocating faster than the ring holds in a tick (sqlite3 reports some 60,000 events a
    /// second; the ring holds 65,536 and an object policy ticks every 2 s) loses no events to a
    /// full ring. `scans` as for [`Self::take`].
    pub fn pump(&mut self, scans: u64) {
        self.drain_ring(scans);
    }

    /// Moves the ring's events into the waiting queue, and takes each start event at once: a
    /// start needs no pages, and a process that leaves must find its start taken
    /// ([`ObjectRuntime::process_left`]).
    fn drain_ring(&mut self, scans: u64) {
        self.drained.clear();
        while self.ring.drain(&mut self.drained, DEFAULT_CAPACITY) > 0 {
            let mut drained = std::mem::take(&mut self.drained);
            for event in drained.drain(..) {
                if event.kind == EventKind::Start {
                    self.started(&event);
                } else {
                    self.waiting.push_back(Waiting { event, scans_at_drain: scans });
                }
            }
            self.drained = drained;
            // The ring refills while we read: stop once it is empty or we hold enough.
            if self.waiting.len() >= MAX_WAITING {
                break;
            }
        }
    }

    /// The program of process `pid`'s objects: its priority's, or 0 if it never announced
    /// itself (its start was dropped with a full ring).
    fn program_of(&self, pid: u32) -> u32 {
        self.processes.get(&pid).and_then(|(_, prio)| self.programs.get(prio)).map_or(0, |p| p.program)
    }

    /// A process image announced itself: it joins its priority's program, which starts for the
    /// policy with its first process. A new image of a known pid (an exec seen first by its start)
    /// replaces the old one; the same image again (two threads of a fork child racing) is nothing.
    fn started(&mut self, e: &Event) {
        let priority = e.priority();
        match self.processes.get(&e.pid) {
            Some(&(image, _)) if image == e.addr => return,
            Some(_) => self.leave_program(e.pid),
            None => {}
        }
        self.processes.insert(e.pid, (e.addr, priority));
        let next = &mut self.next_program;
        let p = self.programs.entry(priority).or_insert_with(|| {
            *next += 1;
            PriorityProgram { program: *next - 1, processes: 0 }
        });
        p.processes += 1;
        if p.processes == 1 {
            tracing::debug!("pid {} started the program of priority {priority}", e.pid);
            self.ready.push(ObjectEvent::program_start(p.program, priority, 0, 0));
        }
    }

    /// Process `pid` leaves its priority's program, which ends for the policy with its last
    /// process.
    fn leave_program(&mut self, pid: u32) {
        let Some((_, priority)) = self.processes.remove(&pid) else { return };
        if let Some(p) = self.programs.get_mut(&priority) {
            p.processes -= 1;
            if p.processes == 0 {
                tracing::debug!("pid {pid} was the last of the program of priority {priority}: it ended");
                self.ready.push(ObjectEvent::program_end(p.program, 0, 0));
                self.programs.remove(&priority);
            }
        }
    }

    /// Process `pid` left (`image` is `None`) or replaced its address space with the image
    /// `image` (an exec; [`image_id`]): its objects are freed for the policy at the next take, and
    /// its old image leaves its program. The ring is drained first, so that a start the old image
    /// made is taken before it leaves; the new image's start, if already taken, stays.
    pub fn process_left(&mut self, pid: u32, image: Option<u64>, scans: u64) {
        self.drain_ring(scans);
        let program = self.program_of(pid);
        let gone: Vec<(u32, u64)> = self.live.keys().filter(|(p, _)| *p == pid).copied().collect();
        for key in gone {
            if let Some(ranges) = self.live.remove(&key) {
                ranges.each(|addr, bytes| {
                    self.ready.push(ObjectEvent::free(addr, bytes, 0).of_program(program))
                });
                self.counters.freed_with_process += 1;
            }
        }
        if self.processes.get(&pid).is_some_and(|&(old, _)| Some(old) != image) {
            self.leave_program(pid);
        }
    }

    /// Advises `node` for the new objects of `site` (`None` withdraws it); false if the ring's
    /// table is full (counted).
    pub fn advise(&mut self, site: u64, node: Option<u32>) -> bool {
        let ok = self.ring.set_advice(site, node).is_ok();
        if !ok {
            self.counters.advice_refused += 1;
        }
        ok
    }
}

impl Drop for ObjectRuntime {
    fn drop(&mut self) {
        // Processes that still run keep their mapping of it; the name goes with Terrace.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The id of the image process `pid` runs now, as its runtime's start event gives it: the address
/// of its `AT_RANDOM` bytes, from `/proc/PID/auxv` (an exec draws it anew); `None` if it cannot be
/// read (the process is gone).
pub fn image_id(pid: u32) -> Option<u64> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    auxv_entry(&auxv, libc::AT_RANDOM)
}

/// The value of entry `key` of an auxiliary vector (native-endian pairs of words).
fn auxv_entry(auxv: &[u8], key: u64) -> Option<u64> {
    const WORD: usize = std::mem::size_of::<usize>();
    auxv.chunks_exact(2 * WORD).find_map(|pair| {
        let word = |b: &[u8]| {
            let mut w = [0u8; WORD];
            w.copy_from_slice(b);
            usize::from_ne_bytes(w) as u64
        };
        (word(&pair[..WORD]) == key).then(|| word(&pair[WORD..]))
    })
}

/// The policy ranges of the object `[addr, addr + bytes)`: each unit of `unit` bytes it overlaps
/// (a policy page: 4 KiB, or a 2 MiB range) is renamed by `page_of`, and units with consecutive
/// policy numbers make one range, as model addresses (`page * unit + offset`). `None` if any
/// unit has no number.
pub fn object_ranges(
    addr: u64,
    bytes: u64,
    unit: u64,
    page_of: impl Fn(u64) -> Option<u32>,
) -> Option<Vec<(u64, u64)>> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let end = addr.checked_add(bytes)?;
    let mut at = addr;
    while at < end {
        let next = ((at / unit) + 1).saturating_mul(unit).min(end);
        let model = page_of(at)? as u64 * unit + at % unit;
        match out.last_mut() {
            Some(last) if last.0 + last.1 == model => last.1 += next - at,
            _ => out.push((model, next - at)),
        }
        at = next;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_alloc_ring::EventKind;
    use terrace_model::ObjectEventKind;

    const PAGE: u64 = 4096;

    fn runtime() -> (tempfile::TempDir, ObjectRuntime) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring");
        let ring = Ring::create(&path, 64, 16).unwrap();
        (dir, ObjectRuntime::with_ring(ring, path, PathBuf::from("/lib/libterrace_alloc.so")))
    }

    fn push(rt: &ObjectRuntime, kind: EventKind, pid: u32, addr: u64, bytes: u64, site: u64) {
        let e = Event { kind, tid: pid, pid, node: -1, addr, bytes, site, time_ns: 0 };
        assert!(rt.ring.producer().push(&e));
    }

    #[test]
    fn ranges_keep_one_range_inline_and_give_back_what_they_were_given() {
        assert_eq!(std::mem::size_of::<Ranges>(), 16);
        for v in [vec![(4096, 8192)], vec![(0, 4096), (40960, 4096)], vec![(0, 8 << 30)]] {
            let mut back = Vec::new();
            Ranges::of(&v).each(|a, b| back.push((a, b)));
            assert_eq!(back, v);
        }
        assert!(matches!(Ranges::of(&[(4096, 8192)]), Ranges::One { .. }));
        assert!(matches!(Ranges::of(&[(0, 8 << 30)]), Ranges::Many(_)));
    }

    #[test]
    fn an_object_becomes_one_range_per_run_of_consecutive_policy_pages() {
        // Pages 0x10..0x14 of the program are policy pages 7, 8, 3, 4.
        let page_of = |a: u64| [7u32, 8, 3, 4].get((a / PAGE).checked_sub(0x10)? as usize).copied();
        let r = object_ranges(0x10 * PAGE, 4 * PAGE - 100, PAGE, page_of).unwrap();
        assert_eq!(r, vec![(7 * PAGE, 2 * PAGE), (3 * PAGE, 2 * PAGE - 100)]);
        assert_eq!(object_ranges(0x10 * PAGE, 5 * PAGE, PAGE, page_of), None, "a page without a number");
        // 2 MiB units: an object starting inside one keeps its offset.
        let huge = 2 << 20;
        let r = object_ranges(huge + 4 * PAGE, huge, huge, |a| Some((a / huge) as u32 + 10)).unwrap();
        assert_eq!(r, vec![(11 * huge + 4 * PAGE, huge)]);
    }

    #[test]
    fn events_wait_in_order_for_their_pages_and_unseen_ones_are_dropped_with_their_frees() {
        let (_d, mut rt) = runtime();
        push(&rt, EventKind::Alloc, 1, 0x1000, PAGE, 5);
        push(&rt, EventKind::Alloc, 1, 0x9000, PAGE, 6);
        push(&rt, EventKind::Free, 1, 0x1000, PAGE, 5);
        // Page 0x9 is not indexed yet: the first alloc goes, the rest waits in order.
        let mut indexed = vec![0x1u64];
        let mut out = Vec::new();
        let pieces = |indexed: &Vec<u64>| {
            let idx = indexed.clone();
            move |_pid: u32, addr: u64, bytes: u64| {
                object_ranges(addr, bytes, PAGE, |a| {
                    idx.iter().position(|&p| p == a / PAGE).map(|i| i as u32)
                })
            }
        };
        rt.take(0, &mut pieces(&indexed), &mut out);
        assert_eq!(out, vec![ObjectEvent::alloc(0, PAGE, 5)]);
        out.clear();
        // No scan since: still waiting, and the free behind it too.
        rt.take(0, &mut pieces(&indexed), &mut out);
        assert!(out.is_empty());
        // A scan indexed it: both come, in order.
        indexed.push(0x9);
        rt.take(1, &mut pieces(&indexed), &mut out);
        assert_eq!(out, vec![ObjectEvent::alloc(PAGE, PAGE, 6), ObjectEvent::free(0, PAGE, 5)]);
        out.clear();
        // One never indexed (gone before the scan): dropped after a scan, with its free.
        push(&rt, EventKind::Alloc, 1, 0x20000, PAGE, 7);
        push(&rt, EventKind::Free, 1, 0x20000, PAGE, 7);
        rt.take(1, &mut pieces(&indexed), &mut out);
        assert!(out.is_empty());
        rt.take(2, &mut pieces(&indexed), &mut out);
        assert!(out.is_empty());
        let c = rt.counters();
        assert_eq!((c.allocs, c.frees, c.unseen), (2, 1, 1));
    }

    /// Pumped between ticks, a ring of 64 carries 200 allocations to one tick without a drop;
    /// unpumped, the runtime's pushes fail once it is full.
    #[test]
    fn pumping_between_ticks_keeps_a_full_ring_from_dropping_events() {
        let alloc = |i: u64| Event {
            kind: EventKind::Alloc,
            tid: 1,
            pid: 1,
            node: -1,
            addr: 0x1000 * (i + 1),
            bytes: PAGE,
            site: 9,
            time_ns: 0,
        };
        let (_d, mut rt) = runtime();
        for i in 0..200u64 {
            assert!(rt.ring.producer().push(&alloc(i)));
            if i % 50 == 49 {
                rt.pump(0);
            }
        }
        let mut out = Vec::new();
        rt.take(0, &mut |_, addr, bytes| Some(vec![(addr, bytes)]), &mut out);
        assert_eq!(out.len(), 200);
        assert_eq!(rt.ring_dropped(), 0);
        let (_d, rt) = runtime();
        let pushed = (0..200u64).filter(|&i| rt.ring.producer().push(&alloc(i))).count();
        assert!(pushed < 200 && rt.ring_dropped() > 0, "{pushed} pushed");
    }

    #[test]
    fn a_process_that_leaves_frees_its_objects_for_the_policy() {
        let (_d, mut rt) = runtime();
        push(&rt, EventKind::Alloc, 1, 0x1000, 2 * PAGE, 5);
        push(&rt, EventKind::Alloc, 2, 0x1000, PAGE, 6);
        let mut out = Vec::new();
        rt.take(0, &mut |pid, _, bytes| Some(vec![(pid as u64 * 100 * PAGE, bytes)]), &mut out);
        assert_eq!(out.len(), 2);
        out.clear();
        rt.process_left(1, None, 0);
        rt.take(0, &mut |_, _, _| None, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].kind, out[0].addr, out[0].bytes), (ObjectEventKind::Free, 100 * PAGE, 2 * PAGE));
        // Its late free of the same object is not a second one.
        push(&rt, EventKind::Free, 1, 0x1000, 2 * PAGE, 5);
        out.clear();
        rt.take(0, &mut |_, _, _| None, &mut out);
        assert!(out.is_empty());
        assert_eq!(rt.counters().freed_with_process, 1);
    }

    fn start(rt: &ObjectRuntime, pid: u32, priority: i32, image: u64) {
        assert!(rt.ring.producer().push(&Event::start(pid, pid, priority, image, 0)));
    }

    fn kinds(out: &[ObjectEvent]) -> Vec<(ObjectEventKind, u32)> {
        out.iter().map(|e| (e.kind, e.program)).collect()
    }

    /// Object tiering §5.5 on the live machine: the processes of one priority are one program,
    /// which starts with the first to announce itself and ends when the last leaves; objects
    /// carry their process's program.
    #[test]
    fn processes_of_one_priority_are_one_program() {
        let (_d, mut rt) = runtime();
        let all = |_: u32, _: u64, bytes: u64| Some(vec![(0, bytes)]);
        let mut out = Vec::new();
        start(&rt, 10, 0, 0xa);
        push(&rt, EventKind::Alloc, 10, 0x1000, PAGE, 5);
        start(&rt, 11, 1, 0xb);
        push(&rt, EventKind::Alloc, 11, 0x1000, PAGE, 6);
        start(&rt, 12, 1, 0xc);
        start(&rt, 12, 1, 0xc); // two threads of a fork child announcing it: one process
        push(&rt, EventKind::Alloc, 13, 0x1000, PAGE, 7); // never announced: program 0
        rt.take(0, &mut { all }, &mut out);
        let (low, high) = (1, 2);
        assert_eq!(
            kinds(&out),
            vec![
                (ObjectEventKind::ProgramStart { priority: 0 }, low),
                (ObjectEventKind::ProgramStart { priority: 1 }, high),
                (ObjectEventKind::Alloc, low),
                (ObjectEventKind::Alloc, high),
                (ObjectEventKind::Alloc, 0),
            ]
        );
        // One of the two high-priority processes leaves: its objects go, the program stays.
        out.clear();
        rt.process_left(11, None, 0);
        rt.take(0, &mut { all }, &mut out);
        assert_eq!(kinds(&out), vec![(ObjectEventKind::Free, high)]);
        // The last leaves: the program ends.
        out.clear();
        rt.process_left(12, None, 0);
        rt.take(0, &mut { all }, &mut out);
        assert_eq!(kinds(&out), vec![(ObjectEventKind::ProgramEnd, high)]);
        // A start still in the ring when its process left is taken, and ended, at once.
        out.clear();
        start(&rt, 14, 5, 0xd);
        rt.process_left(14, None, 0);
        rt.take(0, &mut { all }, &mut out);
        assert_eq!(
            kinds(&out),
            vec![(ObjectEventKind::ProgramStart { priority: 5 }, 3), (ObjectEventKind::ProgramEnd, 3)]
        );
    }

    /// An exec replaces a process's image: the old image leaves its program whether the new
    /// image's start came before the exec was seen or after, and the new image keeps its own.
    #[test]
    fn an_exec_moves_the_process_to_its_new_images_priority() {
        let all = |_: u32, _: u64, bytes: u64| Some(vec![(0, bytes)]);
        // The new image's start is in the ring when the exec is seen (a wrapper that sets
        // TERRACE_PRIORITY=1 and execs the program).
        let (_d, mut rt) = runtime();
        let mut out = Vec::new();
        start(&rt, 20, 0, 0x01d);
        rt.take(0, &mut { all }, &mut out);
        start(&rt, 20, 1, 0x2e3);
        push(&rt, EventKind::Alloc, 20, 0x1000, PAGE, 6);
        rt.process_left(20, Some(0x2e3), 0);
        rt.take(0, &mut { all }, &mut out);
        // The old image's program ends, the new image's starts.
        let hand_over = [
            (ObjectEventKind::ProgramStart { priority: 0 }, 1),
            (ObjectEventKind::ProgramEnd, 1),
            (ObjectEventKind::ProgramStart { priority: 1 }, 2),
        ];
        assert_eq!(kinds(&out), [&hand_over[..], &[(ObjectEventKind::Alloc, 2)]].concat());
        // The exec seen before the new image announced itself.
        let (_d, mut rt) = runtime();
        out.clear();
        start(&rt, 20, 0, 0x01d);
        rt.process_left(20, Some(0x2e3), 0);
        start(&rt, 20, 1, 0x2e3);
        rt.take(0, &mut { all }, &mut out);
        assert_eq!(kinds(&out), hand_over);
    }

    #[test]
    fn the_image_id_is_at_random_from_auxv() {
        let words: Vec<usize> = vec![6, 4096, 25, 0x7ffd_0000_1234, 0, 0];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(auxv_entry(&bytes, libc::AT_RANDOM), Some(0x7ffd_0000_1234));
        assert_eq!(auxv_entry(&bytes, 99), None);
        // This process's own: what getauxval gives the runtime.
        // SAFETY: getauxval has no preconditions.
        let own = unsafe { libc::getauxval(libc::AT_RANDOM) };
        assert_eq!(image_id(std::process::id()), Some(own));
        assert_ne!(own, 0);
    }

    #[test]
    fn the_preload_puts_the_runtime_first_and_keeps_the_users() {
        let (_d, rt) = runtime();
        let env = rt.environment(Some(OsString::from("/x/libother.so")));
        assert_eq!(env[0].1, OsString::from("/lib/libterrace_alloc.so /x/libother.so"));
        assert_eq!(env[1].0, OsString::from(RING_ENV));
        assert_eq!(rt.environment(None)[0].1, OsString::from("/lib/libterrace_alloc.so"));
    }

    /// A path that exists already, a planted link above all, is refused, never followed or
    /// truncated; the runtime's own files get names of their own.
    #[test]
    fn the_ring_file_is_always_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let link = dir.path().join("ring");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let refused = Ring::create_new(&link, 64, 16).map(|_| ());
        assert_eq!(refused.map_err(|e| e.kind()), Err(std::io::ErrorKind::AlreadyExists));
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        let (a, b) =
            (ObjectRuntime::create("/x.so".into()).unwrap(), ObjectRuntime::create("/x.so".into()).unwrap());
        assert_ne!(a.ring_path(), b.ring_path());
        let path = a.ring_path().to_path_buf();
        drop(a);
        assert!(!path.exists(), "the ring file goes with Terrace");
    }

    #[test]
    fn advice_reaches_the_ring() {
        let (_d, mut rt) = runtime();
        assert!(rt.advise(42, Some(1)));
        assert_eq!(rt.ring.advice(42), Some(1));
        assert!(rt.advise(42, None));
        assert_eq!(rt.ring.advice(42), None);
    }
}
