//! A process's memory as Terrace manages it: its anonymous mappings, a stable index of their
//! pages, what pagemap says of each page, and which node each page is really on.
//!
//! Everything here tolerates the process exiting at any moment ([`ProcessError::Gone`]) and
//! mappings changing between calls: the page index only grows (a page keeps its index for the
//! life of the process, so policy state stays valid), and pages of mappings that went away read
//! as absent.

use crate::numa_sys;
use procfs::process::{MMapPath, Process};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_BYTES: u64 = 1 << PAGE_SHIFT;

/// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
pub const PM_PRESENT: u64 = 1 << 63;
pub const PM_SWAP: u64 = 1 << 62;
pub const PM_SOFT_DIRTY: u64 = 1 << 55;
pub const PM_PFN_MASK: u64 = (1 << 55) - 1;

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("process {0} is gone")]
    Gone(i32),
    #[error("not permitted to read {what} of process {pid}: run as root or as the process's owner")]
    Permission { pid: i32, what: &'static str },
    #[error("cannot read {what} of process {pid}: {source}")]
    Io {
        pid: i32,
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

impl ProcessError {
    fn from_io(pid: i32, what: &'static str, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ESRCH) | Some(libc::ENOENT) => ProcessError::Gone(pid),
            Some(libc::EPERM) | Some(libc::EACCES) => ProcessError::Permission { pid, what },
            _ => ProcessError::Io { pid, what, source: e },
        }
    }
    fn from_proc(pid: i32, what: &'static str, e: procfs::ProcError) -> Self {
        match e {
            procfs::ProcError::NotFound(_) => ProcessError::Gone(pid),
            procfs::ProcError::PermissionDenied(_) => ProcessError::Permission { pid, what },
            procfs::ProcError::Io(e, _) => Self::from_io(pid, what, e),
            other => ProcessError::Io { pid, what, source: io::Error::other(other.to_string()) },
        }
    }
}

/// Where a process is in its life, from /proc/PID/stat: its state and its real parent (procfs
/// gives the parent, not a tracer). `None` once the process is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Life {
    pub state: char,
    pub ppid: i32,
}

impl Life {
    pub fn of(pid: i32) -> Option<Life> {
        let stat = Process::new(pid).and_then(|p| p.stat()).ok()?;
        Some(Life { state: stat.state, ppid: stat.ppid })
    }

    /// A zombie, or dead: its memory is torn down or going.
    pub fn exiting(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// The command name of process `pid` (`/proc/PID/comm`), empty once it is gone: for messages.
pub fn name(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.trim().to_string()).unwrap_or_default()
}

/// Whether process `pid` is running: there, and not exiting (a zombie, or dead). A process that
/// exits while Terrace joins it fails the join with what looks like a refusal (ptrace answers
/// EPERM for a process exiting); this tells the two apart.
pub fn running(pid: i32) -> bool {
    Life::of(pid).is_some_and(|life| !life.exiting())
}

/// A run of consecutive pages with consecutive indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    vpn: u64,
    pages: u64,
    first_index: u32,
}

/// Stable page indexes for a growing set of virtual page ranges.
#[derive(Clone, Debug, Default)]
pub struct PageIndex {
    /// In index order.
    spans: Vec<Span>,
    /// Span positions sorted by start vpn.
    by_vpn: Vec<usize>,
    pages: u32,
}

impl PageIndex {
    pub fn len(&self) -> usize {
        self.pages as usize
    }
    pub fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// Gives every page of `[vpn, vpn + pages)` an index, keeping the ones it already has.
    pub fn cover(&mut self, vpn: u64, pages: u64) {
        let end = vpn + pages;
        let mut cursor = vpn;
        let mut gaps = Vec::new();
        for &s in self.by_vpn.iter().map(|&i| &self.spans[i]) {
            let (s0, s1) = (s.vpn, s.vpn + s.pages);
            if s1 <= cursor {
                continue;
            }
            if s0 >= end {
                break;
            }
            if s0 > cursor {
                gaps.push((cursor, s0));
            }
            cursor = cursor.max(s1);
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        for (a, b) in gaps {
            let span = Span { vpn: a, pages: b - a, first_index: self.pages };
            self.pages += (b - a) as u32;
            self.spans.push(span);
            let pos = self.by_vpn.partition_point(|&i| self.spans[i].vpn < a);
            self.by_vpn.insert(pos, self.spans.len() - 1);
        }
    }

    /// The virtual address of page `index`.
    pub fn addr(&self, index: u32) -> u64 {
        let pos = self.spans.partition_point(|s| s.first_index + s.pages as u32 <= index);
        let s = self.spans[pos];
        (s.vpn + (index - s.first_index) as u64) << PAGE_SHIFT
    }

    /// The index of the page holding `addr`, if indexed.
    pub fn index_of(&self, addr: u64) -> Option<u32> {
        let vpn = addr >> PAGE_SHIFT;
        let pos = self.by_vpn.partition_point(|&i| self.spans[i].vpn <= vpn);
        let s = self.spans[*self.by_vpn.get(pos.checked_sub(1)?)?];
        (vpn < s.vpn + s.pages).then(|| s.first_index + (vpn - s.vpn) as u32)
    }

    /// The indexed run holding page `vpn`: the index of `vpn` and how many pages from it on are
    /// indexed consecutively (so a walk over addresses looks the index up once per run).
    pub fn run_at(&self, vpn: u64) -> Option<(u32, u64)> {
        let pos = self.by_vpn.partition_point(|&i| self.spans[i].vpn <= vpn);
        let s = self.spans[*self.by_vpn.get(pos.checked_sub(1)?)?];
        (vpn < s.vpn + s.pages).then(|| (s.first_index + (vpn - s.vpn) as u32, s.vpn + s.pages - vpn))
    }

    /// Runs of (first index, first vpn, pages), in index order.
    pub fn runs(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.spans.iter().map(|s| (s.first_index, s.vpn, s.pages))
    }
}

/// Whether a mapping holds memory Terrace should place: private anonymous memory and the heap,
/// writable or made read-only by the program (mtier's eligible memory, mtier §3.2), and the
/// program's shadow region, memory Terrace's agent maps for it ([`crate::shadow_region`]).
fn is_managed(path: &MMapPath, perms: &procfs::process::MMPermissions) -> bool {
    use procfs::process::MMPermissions as P;
    let shadow_region = || matches!(path, MMapPath::Path(p) if p.to_string_lossy().starts_with(crate::shadow_region::MAPS_NAME));
    perms.contains(P::READ)
        && ((perms.contains(P::PRIVATE) && matches!(path, MMapPath::Anonymous | MMapPath::Heap))
            || (perms.contains(P::SHARED) && shadow_region()))
}

/// Whether a managed mapping is read-only.
fn is_read_only(perms: &procfs::process::MMPermissions) -> bool {
    !perms.contains(procfs::process::MMPermissions::WRITE)
}

/// The managed memory of one process.
pub struct ProcessMemory {
    pid: i32,
    pagemap: File,
    index: PageIndex,
    /// Currently mapped managed ranges, as (vpn, pages).
    mapped: Vec<(u64, u64)>,
    /// Those of them mapped read-only.
    read_only: Vec<(u64, u64)>,
}

impl ProcessMemory {
    pub fn attach(pid: i32) -> Result<Self, ProcessError> {
        let pagemap = File::open(format!("/proc/{pid}/pagemap"))
            .map_err(|e| ProcessError::from_io(pid, "pagemap", e))?;
        let mut m = ProcessMemory {
            pid,
            pagemap,
            index: PageIndex::default(),
            mapped: Vec::new(),
            read_only: Vec::new(),
        };
        m.refresh()?;
        Ok(m)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }
    pub fn index(&self) -> &PageIndex {
        &self.index
    }
    pub fn pages(&self) -> usize {
        self.index.len()
    }

    /// The managed ranges mapped now, as [start, end) addresses.
    pub fn mapped_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.mapped.iter().map(|&(vpn, pages)| (vpn << PAGE_SHIFT, (vpn + pages) << PAGE_SHIFT))
    }

    /// Whether the process replaced its address space (it called exec: a wrapper such as `env`,
    /// `nice`, `numactl` or `sh -c 'exec prog'` does) since pagemap was opened; if so, reopens
    /// pagemap on the new one and returns the program it executes now (its `exe` link).
    ///
    /// How it knows: a pagemap descriptor is bound to the address space the process had when it
    /// was opened. Once that is gone (after an exec the pid stays, the address space is new), the
    /// kernel's `pagemap_read` finds it has no users and returns end of file for every read, even
    /// at offset 0, where a live address space always has an entry. So a probe of the first
    /// entry, one 8-byte pread per full scan, tells exactly whether the descriptor Terrace reads
    /// still sees the program. A fingerprint of `/proc/PID/stat` (`start_code`, `end_code`,
    /// `start_stack`) or of the `exe` link was not chosen: it is a parse per scan, it misses an
    /// exec of the same binary (the same `exe`; the same addresses with ASLR off), and it says
    /// nothing about the descriptor, which is what stops working. A process that is exiting has
    /// no address space either: then the reopened pagemap reads end of file too, and this says
    /// nothing was replaced (the machine finds the exit).
    pub fn follow_exec(&mut self) -> Result<Option<String>, ProcessError> {
        if self.address_space_alive()? {
            return Ok(None);
        }
        let pid = self.pid;
        // An exiting process may refuse the open (no address space to open): keep the old
        // descriptor, which reads nothing, and leave the exit to whoever waits for the process,
        // so `terrace run` still gets the program's exit status.
        let Ok(reopened) = File::open(format!("/proc/{pid}/pagemap")) else { return Ok(None) };
        let old = std::mem::replace(&mut self.pagemap, reopened);
        if !self.address_space_alive()? {
            self.pagemap = old; // exiting: keep reading nothing
            return Ok(None);
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "a new program".into());
        Ok(Some(exe))
    }

    /// Whether the pagemap descriptor still reads an address space (see [`Self::follow_exec`]).
    fn address_space_alive(&self) -> Result<bool, ProcessError> {
        let mut probe = [0u8; 8];
        match self.pagemap.read_at(&mut probe, 0) {
            Ok(n) => Ok(n > 0),
            Err(e) => Err(ProcessError::from_io(self.pid, "pagemap", e)),
        }
    }

    /// Re-reads the mappings; new managed pages get indexes.
    pub fn refresh(&mut self) -> Result<(), ProcessError> {
        let pid = self.pid;
        let maps =
            Process::new(pid).and_then(|p| p.maps()).map_err(|e| ProcessError::from_proc(pid, "maps", e))?;
        self.mapped.clear();
        self.read_only.clear();
        for m in maps {
            if is_managed(&m.pathname, &m.perms) {
                let (start, end) = m.address;
                let (vpn, pages) = (start >> PAGE_SHIFT, (end - start) >> PAGE_SHIFT);
                self.index.cover(vpn, pages);
                self.mapped.push((vpn, pages));
                if is_read_only(&m.perms) {
                    self.read_only.push((vpn, pages));
                }
            }
        }
        Ok(())
    }

    /// The indexes of the pages mapped read-only at the last refresh, as (first index, pages)
    /// runs.
    pub fn read_only_runs(&self) -> Vec<(u32, u64)> {
        let mut runs = Vec::new();
        for &(vpn, pages) in &self.read_only {
            let mut i = 0;
            while i < pages {
                let Some((idx, run)) = self.index.run_at(vpn + i) else {
                    i += 1;
                    continue;
                };
                let n = run.min(pages - i);
                runs.push((idx, n));
                i += n;
            }
        }
        runs
    }

    /// Reads the pagemap entry of every indexed page into `entries` (0 for pages whose mapping
    /// is gone).
    pub fn read_pagemap(&self, entries: &mut Vec<u64>) -> Result<(), ProcessError> {
        entries.clear();
        entries.resize(self.index.len(), 0);
        let mut raw = Vec::new();
        for &(vpn, pages) in &self.mapped {
            raw.resize(pages as usize * 8, 0);
            if let Err(e) = self.pagemap.read_exact_at(&mut raw, vpn * 8) {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    // The address space went away since the mappings were read (an exec or an
                    // exit): its pages read as absent, and the next scan follows an exec.
                    continue;
                }
                return Err(ProcessError::from_io(self.pid, "pagemap", e));
            }
            // One index lookup per indexed run, not per page: this runs at every full scan.
            let mut i = 0;
            while i < pages {
                let Some((idx, run)) = self.index.run_at(vpn + i) else {
                    i += 1;
                    continue;
                };
                let n = run.min(pages - i) as usize;
                let (at, from) = (idx as usize, i as usize * 8);
                for (e, chunk) in entries[at..at + n].iter_mut().zip(raw[from..from + n * 8].chunks_exact(8))
                {
                    *e = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
                }
                i += n as u64;
            }
        }
        Ok(())
    }

    /// Asks the kernel which node each of `indexes` is on; `status` gets a node id or a
    /// negative errno per page.
    pub fn nodes_of(&self, indexes: &[u32], status: &mut Vec<i32>) -> Result<(), ProcessError> {
        const CHUNK: usize = 16 * 1024;
        status.clear();
        let mut addrs = Vec::with_capacity(CHUNK.min(indexes.len()));
        let mut part = vec![0i32; CHUNK.min(indexes.len())];
        for chunk in indexes.chunks(CHUNK) {
            addrs.clear();
            addrs.extend(chunk.iter().map(|&i| self.index.addr(i)));
            let part = &mut part[..chunk.len()];
            numa_sys::query_nodes(self.pid, &addrs, part)
                .map_err(|e| ProcessError::from_io(self.pid, "page nodes", e))?;
            status.extend_from_slice(part);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_indexes_are_stable_as_ranges_grow_and_overlap() {
        let mut ix = PageIndex::default();
        ix.cover(100, 10);
        assert_eq!(ix.len(), 10);
        ix.cover(95, 20); // grows on both sides
        assert_eq!(ix.len(), 20);
        assert_eq!(ix.index_of(100 << PAGE_SHIFT), Some(0));
        assert_eq!(ix.index_of(109 << PAGE_SHIFT), Some(9));
        let before = ix.index_of(95 << PAGE_SHIFT).unwrap();
        assert!(before >= 10);
        assert_eq!(ix.addr(before), 95 << PAGE_SHIFT);
        assert_eq!(ix.index_of(94 << PAGE_SHIFT), None);
        assert_eq!(ix.index_of(115 << PAGE_SHIFT), None);
        for i in 0..ix.len() as u32 {
            assert_eq!(ix.index_of(ix.addr(i)), Some(i));
        }
        ix.cover(100, 5);
        assert_eq!(ix.len(), 20, "covering known pages adds nothing");
    }

    #[test]
    fn this_process_memory_is_indexed_and_present_pages_have_a_node() {
        let v = vec![7u8; 64 << 20]; // a large anonymous allocation
        let me = std::process::id() as i32;
        let mut m = ProcessMemory::attach(me).unwrap();
        m.refresh().unwrap();
        let idx = m.index().index_of(v.as_ptr() as u64 + (1 << 20)).expect("the allocation is managed");
        let mut entries = Vec::new();
        m.read_pagemap(&mut entries).unwrap();
        assert!(entries[idx as usize] & PM_PRESENT != 0, "a written page is present");
        let mut status = Vec::new();
        m.nodes_of(&[idx], &mut status).unwrap();
        assert!(status[0] >= 0);
        assert_eq!(v[1 << 20], 7);
    }

    const SLEEP_CHILD: &str = "TERRACE_SLEEP_CHILD";

    /// The program the exec test's shell execs: sleeps half a minute (it is killed sooner).
    #[test]
    fn memory_made_read_only_is_managed_and_its_pages_are_known() {
        const PAGES: usize = 64;
        // SAFETY: a fresh private anonymous mapping of ours, unmapped at the end.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGES * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: writes within the mapping, then it is made read-only, as mtier's programs do.
        unsafe {
            std::ptr::write_bytes(p as *mut u8, 3, PAGES * 4096);
            assert_eq!(libc::mprotect(p, PAGES * 4096, libc::PROT_READ), 0);
        }
        let mut m = ProcessMemory::attach(std::process::id() as i32).unwrap();
        m.refresh().unwrap();
        let first = m.index().index_of(p as u64).expect("a read-only private mapping is managed");
        let runs = m.read_only_runs();
        let covered: u64 = runs
            .iter()
            .filter(|&&(i, n)| i <= first && (first as u64) < i as u64 + n)
            .map(|&(i, n)| n - u64::from(first - i))
            .sum();
        assert!(covered >= PAGES as u64, "the mapping's pages are read-only runs: {runs:?}");
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, PAGES * 4096) };
    }

    #[test]
    #[ignore = "a child process that a test in this file starts (with --ignored); not a test of its own"]
    fn child_sleeps() {
        if std::env::var_os(SLEEP_CHILD).is_some() {
            let keep = vec![1u8; 1 << 20];
            std::thread::sleep(std::time::Duration::from_secs(30));
            std::hint::black_box(&keep);
        }
    }

    /// A child that execs another program after Terrace attached (as a wrapper does) is followed:
    /// the probe sees the old address space gone, pagemap is reopened, and the new program's
    /// pages read as present again, with every index given before the exec kept.
    #[test]
    fn an_exec_after_attach_is_detected_and_followed() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        // The exec is of this test binary (its `child_sleeps`), not of `sleep`: where /bin/sh is
        // busybox (the guest), `exec sleep` may run the applet in the shell without any exec.
        let exe = std::env::current_exe().unwrap();
        let script =
            format!("read line; exec '{}' --ignored --exact process::tests::child_sleeps", exe.display());
        let mut child = Command::new("/bin/sh")
            .args(["-c", &script])
            .env(SLEEP_CHILD, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut m = ProcessMemory::attach(pid).unwrap();
        assert_eq!(m.follow_exec().unwrap(), None, "no exec yet");
        let before = m.pages();
        let old_first = (before > 0).then(|| m.index().addr(0));
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let exe = loop {
            if let Some(exe) = m.follow_exec().unwrap() {
                break exe;
            }
            assert!(std::time::Instant::now() < deadline, "the exec was never seen");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(exe.contains("terrace_linux"), "{exe}");
        assert_eq!(m.follow_exec().unwrap(), None, "followed once");
        m.refresh().unwrap();
        assert!(m.pages() >= before, "indexes only grow");
        if let Some(a) = old_first {
            assert_eq!(m.index().addr(0), a, "page 0 keeps its index");
        }
        // The exec is seen as soon as the new address space exists, which can be before the new
        // program has touched any page the index holds (the guest's emulated CPU showed it once
        // in many runs): its pages must be seen once it has run a little, through the reopened
        // pagemap (the old one reads nothing of the new address space).
        let mut entries = Vec::new();
        loop {
            m.refresh().unwrap();
            entries.clear();
            m.read_pagemap(&mut entries).unwrap();
            if entries.iter().any(|e| e & PM_PRESENT != 0) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the new program's pages are never seen");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Running: this process, and a child until it exits; a zombie not yet reaped, and a child
    /// reaped, are not.
    #[test]
    fn a_zombie_and_a_reaped_process_are_not_running() {
        assert!(running(std::process::id() as i32));
        assert!(!running(i32::MAX), "no such process");
        assert!(!name(std::process::id() as i32).is_empty());
        assert_eq!(name(i32::MAX), "", "no such process: no name");
        assert_eq!(
            Life::of(std::process::id() as i32).map(|l| l.ppid),
            Some(std::os::unix::process::parent_id() as i32)
        );
        let mut child = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
        let pid = child.id() as i32;
        assert!(running(pid));
        // Not waited for: a zombie once it exits.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while running(pid) {
            assert!(std::time::Instant::now() < deadline, "sleep 0.2 still running");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "a zombie is still listed");
        child.wait().unwrap();
        assert!(!running(pid));
    }

    #[test]
    fn a_process_that_is_gone_says_so() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(matches!(ProcessMemory::attach(pid), Err(ProcessError::Gone(_))));
    }
}
