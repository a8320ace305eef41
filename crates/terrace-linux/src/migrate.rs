//! The migrator: carries a plan out on a real process with move_pages(2), in batches, several
//! batches at once, under a rate limit, and checks afterwards where every page really landed.
//!
//! Never fatal to the managed program: move_pages moves each page atomically or not at all, so
//! stopping between (or during) batches leaves every page intact on one node or the other.

use crate::numa_sys;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use terrace_model::{Mechanism, Mechanisms, MoveFailure, MoveOptions};

/// One page to move: its address in the target process and the node it should go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageMove {
    pub addr: u64,
    pub node: i32,
    /// Caller's tag for the page (Terrace's page index), returned with failures.
    pub tag: u32,
}

/// What happened to a batch of moves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MoveOutcome {
    /// Pages found on their target node afterwards.
    pub moved: u64,
    /// Pages that did not move, with the reason.
    pub failed: Vec<(u32, MoveFailure)>,
    pub batches: u64,
    pub elapsed: Duration,
    /// The batches where more than half the pages did not move, for the machine's warning.
    pub bad_batches: Vec<BadBatch>,
}

/// A batch where more than half the pages did not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadBatch {
    pub pages: usize,
    pub failed: usize,
    /// The most common reason, and how many pages of the batch failed for it.
    pub dominant: (MoveFailure, usize),
}

/// Why pages did not move, most common first.
pub fn tally(failed: &[(u32, MoveFailure)]) -> Vec<(MoveFailure, usize)> {
    let mut why: Vec<(MoveFailure, usize)> = Vec::new();
    for (_, f) in failed {
        match why.iter_mut().find(|(w, _)| w == f) {
            Some((_, n)) => *n += 1,
            None => why.push((*f, 1)),
        }
    }
    why.sort_by_key(|w| std::cmp::Reverse(w.1));
    why
}

/// What a failure means and what to do about it, for a warning.
pub fn meaning(why: MoveFailure) -> &'static str {
    match why {
        MoveFailure::NotPresent => {
            "the program freed or unmapped those pages since the scan, never touched them, or exited during \
             the batch; nothing to do unless it persists, which means the policy plans from memory the program \
             no longer uses"
        }
        MoveFailure::NoSpace => {
            "the target node is full: free memory there (`numastat -m`), or lower the program's share of the \
             fast tier with `tiers.fast_limit_mib`"
        }
        MoveFailure::Busy => {
            "the kernel could not take the pages (pinned for I/O, locked, or being migrated); they are retried \
             at the next plan. If it persists, the program pins its memory (RDMA, vfio, io_uring buffers)"
        }
        MoveFailure::Permission => {
            "Terrace may not move this process's pages: run it as root, or as the process's owner with \
             CAP_SYS_NICE"
        }
        MoveFailure::Misplaced => {
            "move_pages reported them moved but they are on another node: something else moves them back \
             (the kernel's NUMA balancing: `echo 0 > /proc/sys/kernel/numa_balancing`, or a memory policy \
             with MPOL_MF_MOVE)"
        }
        MoveFailure::Invalid => "the kernel refused the address or node; please report it with this log",
        MoveFailure::RateLimited => "the plan's rate limit held them back; the policy asks again",
        // This machine's moves are synchronous (move_pages returns when the copies are done), so
        // no mover queue can fill; kept meaningful should one ever report it.
        MoveFailure::QueueFull => "the mover's queue was full; the policy asks again next round",
    }
}

/// Maps a per-page move_pages status (negative errno) to why the page did not move.
pub fn failure_of(status: i32) -> MoveFailure {
    match -status {
        libc::EBUSY | libc::EAGAIN => MoveFailure::Busy,
        libc::ENOMEM | libc::ENOSPC => MoveFailure::NoSpace,
        libc::ENOENT | libc::EFAULT => MoveFailure::NotPresent,
        libc::EACCES | libc::EPERM => MoveFailure::Permission,
        _ => MoveFailure::Invalid,
    }
}

/// Most batches the migrator keeps in flight: one thread each.
pub const MAX_CONCURRENT_BATCHES: u32 = 16;

/// `major.minor` of a kernel release string (`/proc/sys/kernel/osrelease`).
pub(crate) fn kernel_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// What the live machine's mover can do on a kernel of `release`, for a program whose
/// userfaultfd it holds (`userfaultfd`) or not.
///
/// - Exchange: as pairs of batches, a demotion batch followed by its partners' promotion batch
///   ([`execute_exchange`]; move_pages has no swap).
/// - Concurrent batches: threads issuing move_pages at once, up to [`MAX_CONCURRENT_BATCHES`].
/// - Copy threads: no; the kernel copies each page with one thread (Nimble's multi-threaded copy
///   is a kernel patch, Nimble §3.1.2).
/// - TLB flushes: not a choice: since Linux 6.3 migrate_pages flushes once per batch, before it
///   once per page (docs/hardware.md §10).
/// - Rate limit: yes, by dropping what exceeds it ([`terrace_model::RateBudget`]).
/// - Write-protected copies: with the program's userfaultfd, which only `terrace run` can give.
/// - Huge-page moves: move_pages moves a transparent huge page whole since Linux 4.14 (Nimble's
///   native THP migration, Nimble §3.1.1), on a kernel with THP (`thp`: its sysfs directory).
/// - Huge pages split to move: only before Linux 4.14, where move_pages splits every huge page it
///   moves; later kernels move them whole and offer no split.
/// - Shadow copies: only in memory Terrace's agent maps for a program `terrace run` started
///   (`shadow_agent`: [`crate::shadow_region`]); elsewhere pages are copied as usual.
pub fn mechanisms(
    release: Option<(u32, u32)>,
    userfaultfd: bool,
    thp: bool,
    shadow_agent: bool,
    object_runtime: bool,
) -> Mechanisms {
    let mut m = Mechanisms::new(
        [
            Mechanism::Exchange,
            Mechanism::ConcurrentBatches,
            Mechanism::RateLimit,
            Mechanism::HugePageMoves,
            Mechanism::SplitHugePages,
            Mechanism::TlbFlushPerPage,
            Mechanism::TlbFlushPerBatch,
            Mechanism::WriteProtectedCopies,
            Mechanism::Shadowing,
            Mechanism::SiteAdvice,
        ],
        1,
        MAX_CONCURRENT_BATCHES,
    )
    .lacking(
        Mechanism::CopyThreads,
        "move_pages copies each page with one kernel thread; multi-threaded copy needs Nimble's kernel \
         patches (simulate it with `terrace sim`)",
    );
    if !shadow_agent {
        m = m.lacking(
            Mechanism::Shadowing,
            "user space cannot point an arbitrary page's mapping back at its slow copy; shadow copies work only \
             in memory Terrace's agent maps for a program started by `terrace run` (docs/live.md, \"Shadow \
             copies\"; simulate them with `terrace sim`)",
        );
    }
    m = match release {
        Some(r) if r >= (6, 3) => m.lacking(
            Mechanism::TlbFlushPerPage,
            "since Linux 6.3 migrate_pages flushes the TLB once per batch and cannot be told otherwise",
        ),
        _ => m.lacking(
            Mechanism::TlbFlushPerBatch,
            "this kernel flushes the TLB once per migrated page; batched flushing came with Linux 6.3",
        ),
    };
    if !thp {
        m = m.lacking(
            Mechanism::HugePageMoves,
            "this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage): use a 4 KiB \
             policy or a kernel built with CONFIG_TRANSPARENT_HUGEPAGE=y",
        );
    } else if release.is_some_and(|r| r < (4, 14)) {
        m = m.lacking(
            Mechanism::HugePageMoves,
            "before Linux 4.14 move_pages splits a huge page into 512 base pages: use a 4 KiB policy or a newer \
             kernel",
        );
    }
    if release.is_none_or(|r| r >= (4, 14)) {
        m = m.lacking(
            Mechanism::SplitHugePages,
            "since Linux 4.14 move_pages moves a transparent huge page whole and cannot be told to split it, so \
             huge pages move whole (memory without huge pages moves as base pages anyway; simulate the split \
             with `terrace sim`)",
        );
    }
    if !userfaultfd {
        m = m.lacking(
            Mechanism::WriteProtectedCopies,
            "copies are write-protected with the program's userfaultfd, which Terrace creates inside the \
             program as it starts: start it with `terrace run --policy P -- PROGRAM`",
        );
    }
    if !object_runtime {
        m = m.lacking(
            Mechanism::SiteAdvice,
            "placing a site's new objects at allocation needs the object runtime in the program: start it with \
             `terrace run --objects --policy P -- PROGRAM` (a running process cannot be given it)",
        );
    }
    m
}

/// The running kernel's [`mechanisms`].
/// `userfaultfd`, `shadow_agent` and `object_runtime` say what the program was given: a
/// userfaultfd made inside it, a shadow agent's socket, the object runtime (all three only for a
/// program `terrace run` starts).
pub fn host_mechanisms(userfaultfd: bool, shadow_agent: bool, object_runtime: bool) -> Mechanisms {
    kernel_mechanisms(Path::new("/sys"), Path::new("/proc"), userfaultfd, shadow_agent, object_runtime)
}

/// The [`mechanisms`] of the kernel whose sysfs and procfs are at `sys` and `proc_`.
pub fn kernel_mechanisms(
    sys: &Path,
    proc_: &Path,
    userfaultfd: bool,
    shadow_agent: bool,
    object_runtime: bool,
) -> Mechanisms {
    let release = std::fs::read_to_string(proc_.join("sys/kernel/osrelease")).ok();
    let thp = sys.join("kernel/mm/transparent_hugepage").is_dir();
    mechanisms(release.as_deref().and_then(kernel_release), userfaultfd, thp, shadow_agent, object_runtime)
}

/// The largest piece of a program's memory a move may carry whole on the kernel whose sysfs is
/// at `sys` (`MachineInfo::move_unit_bytes`): its transparent huge page size, unless the kernel
/// has none or makes none (`enabled` is `[never]`); 0 then. With `madvise` a program may still ask
/// for them on its own memory, so only `never` rules them out.
pub fn move_unit_bytes(sys: &Path) -> u64 {
    let dir = sys.join("kernel/mm/transparent_hugepage");
    match std::fs::read_to_string(dir.join("enabled")) {
        Ok(enabled) if !enabled.contains("[never]") => std::fs::read_to_string(dir.join("hpage_pmd_size"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(2 << 20),
        _ => 0,
    }
}

/// How the live machine carries out an offered mechanism, for `terrace doctor`.
pub fn how(m: Mechanism) -> String {
    match m {
        Mechanism::SiteAdvice => "for a program started with `terrace run --objects`: the object runtime \
                                  (LD_PRELOAD) places a site's new objects with mbind(MPOL_PREFERRED)"
            .into(),
        Mechanism::Exchange => "as pairs of move_pages batches, each demotion batch followed by its partners' \
                                promotion batch, so neither tier overflows (stock kernels have no exchange_pages, \
                                Nimble §3.1.4)"
            .into(),
        Mechanism::ConcurrentBatches => {
            format!("up to {MAX_CONCURRENT_BATCHES} threads issuing move_pages batches at once")
        }
        Mechanism::CopyThreads => "several kernel threads copying one page".into(),
        Mechanism::TlbFlushPerPage => "migrate_pages flushes once per page (before Linux 6.3)".into(),
        Mechanism::TlbFlushPerBatch => "migrate_pages flushes once per batch (Linux 6.3 and later)".into(),
        Mechanism::RateLimit => "bytes beyond the limit are dropped and asked for again".into(),
        Mechanism::WriteProtectedCopies => {
            "userfaultfd write-protection around each copy, for programs started by `terrace run`".into()
        }
        Mechanism::HugePageMoves => {
            "move_pages moves a transparent huge page whole (thp_migration_success)".into()
        }
        Mechanism::SplitHugePages => {
            "move_pages splits each transparent huge page it moves (kernels before 4.14)".into()
        }
        Mechanism::Shadowing => "in memory Terrace's agent maps for the program (terrace-hotcold's \
                                 --shadow-read): two slots of a memfd per page, switched with mmap(MAP_FIXED), \
                                 a write fault dropping the shadow; pages elsewhere are copied"
            .into(),
    }
}

/// Something that must hold while a batch is copied: hpwp's write protection
/// ([`crate::trackers::write_faults::WriteFaultSampler`]).
pub trait CopyGuard: Sync {
    /// Called before the batch's move_pages; returns what `end` needs to undo it.
    fn begin(&self, batch: &[PageMove]) -> Vec<u64>;
    /// Called after the batch's check, whatever happened.
    fn end(&self, token: &[u64]);
}

impl CopyGuard for crate::trackers::write_faults::WriteFaultSampler {
    fn begin(&self, batch: &[PageMove]) -> Vec<u64> {
        self.begin_copy(batch.iter().map(|m| m.addr))
    }
    fn end(&self, token: &[u64]) {
        self.end_copy(token)
    }
}

/// Moves `moves` of process `pid` in order: batches of `opts.batch_pages`, up to
/// `opts.concurrent_batches` at once. After each batch it asks the kernel where the pages are
/// and counts any page not on its target as failed. The rate limit is not applied here: the
/// machine drops what exceeds it before the moves are handed over ([`terrace_model::RateBudget`]).
///
/// Logs one line per batch: how many pages went to which nodes, what failed, and `reason`, the
/// policy's word for why.
pub fn execute(pid: i32, moves: &[PageMove], opts: &MoveOptions, reason: &str) -> MoveOutcome {
    execute_guarded(pid, moves, opts, reason, None)
}

/// [`execute`], with `guard` held around each batch's copy.
pub fn execute_guarded(
    pid: i32,
    moves: &[PageMove],
    opts: &MoveOptions,
    reason: &str,
    guard: Option<&dyn CopyGuard>,
) -> MoveOutcome {
    let start = Instant::now();
    let batch = opts.batch_pages.max(1) as usize;
    let batches: Vec<&[PageMove]> = moves.chunks(batch).collect();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(MoveOutcome::default());
    let workers = (opts.concurrent_batches.max(1) as usize).min(batches.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chunk) = batches.get(i) else { break };
                let part = guarded_batch(pid, chunk, reason, guard);
                add_batch(&mut results.lock().expect("results lock"), chunk.len(), part);
            });
        }
    });
    let mut out = results.into_inner().expect("results");
    out.elapsed = start.elapsed();
    out
}

/// One move_pages call of `chunk` with `guard` held around it, checked and logged.
fn guarded_batch(pid: i32, chunk: &[PageMove], reason: &str, guard: Option<&dyn CopyGuard>) -> MoveOutcome {
    let token = guard.map(|g| g.begin(chunk));
    let part = move_batch(pid, chunk);
    if let (Some(g), Some(t)) = (guard, &token) {
        g.end(t);
    }
    log_batch(pid, chunk, &part, reason);
    part
}

/// Adds one batch of `pages` moves to the totals.
fn add_batch(r: &mut MoveOutcome, pages: usize, part: MoveOutcome) {
    if part.failed.len() * 2 > pages {
        let dominant = tally(&part.failed)[0];
        r.bad_batches.push(BadBatch { pages, failed: part.failed.len(), dominant });
    }
    r.moved += part.moved;
    r.failed.extend(part.failed);
    r.batches += 1;
}

/// One exchange as the mover sees it: the moves of the page going down and of its partner going
/// up (one move for a 4 KiB page; a 2 MiB page's present 4 KiB pages), each side tagged with its
/// page's tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairMoves {
    pub down_tag: u32,
    pub down: Vec<PageMove>,
    pub up_tag: u32,
    pub up: Vec<PageMove>,
}

/// What happened to one exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairResult {
    /// The demotion: done, or why not.
    pub down: Result<(), MoveFailure>,
    /// The promotion: done, or why not; `None` when it was held back because its partner's
    /// demotion did not happen (moving it would overfill the tier it goes to).
    pub up: Option<Result<(), MoveFailure>>,
}

impl PairResult {
    /// Both halves happened.
    pub fn exchanged(&self) -> bool {
        self.down.is_ok() && self.up == Some(Ok(()))
    }
}

/// What an exchange run came to: every batch of both halves, and each pair's result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExchangeOutcome {
    pub moves: MoveOutcome,
    /// In the order the pairs were given.
    pub pairs: Vec<PairResult>,
}

/// Per page (tag), why it did not move, given the moves sent and the moves that failed. A page
/// of one move fails with it. A 2 MiB page is its present 4 KiB pages: it moved if some of them
/// moved and none failed for a reason other than `NotPresent` (a page the program freed since the
/// scan is not a failure of the range), and fails `NotPresent` only if none of them was there any
/// more.
pub fn failed_pages(moves: &[PageMove], failed: &[(u32, MoveFailure)]) -> HashMap<u32, MoveFailure> {
    let mut by_page = HashMap::new();
    let mut attempted: HashMap<u32, usize> = HashMap::new();
    for m in moves {
        *attempted.entry(m.tag).or_default() += 1;
    }
    let mut absent: HashMap<u32, usize> = HashMap::new();
    for &(tag, why) in failed {
        if why == MoveFailure::NotPresent {
            *absent.entry(tag).or_default() += 1;
        } else {
            by_page.entry(tag).or_insert(why);
        }
    }
    for (tag, n) in absent {
        if !by_page.contains_key(&tag) && attempted.get(&tag).is_none_or(|&a| n >= a) {
            by_page.insert(tag, MoveFailure::NotPresent);
        }
    }
    by_page
}

/// The exchanges' batches: consecutive runs of pairs, each as many as fit in `batch` moves (a
/// pair takes the larger of its two sides, at least one), at least one pair each. Each run is
/// one demotion batch and, after it, its promotion batch.
pub fn pair_batches(pairs: &[PairMoves], batch: usize) -> Vec<std::ops::Range<usize>> {
    let batch = batch.max(1);
    let mut out = Vec::new();
    let (mut start, mut filled) = (0, 0);
    for (i, p) in pairs.iter().enumerate() {
        let size = p.down.len().max(p.up.len()).max(1);
        if i > start && filled + size > batch {
            out.push(start..i);
            (start, filled) = (i, 0);
        }
        filled += size;
    }
    if start < pairs.len() {
        out.push(start..pairs.len());
    }
    out
}

/// Of `pairs`, after their demotion batch whose moves failed as `failed`: each pair's demotion
/// result, and the promotions that go ahead (those whose partner went down; the others are held
/// back).
pub fn after_demotion(
    pairs: &[PairMoves],
    failed: &[(u32, MoveFailure)],
) -> (Vec<Result<(), MoveFailure>>, Vec<PageMove>) {
    let downs: Vec<PageMove> = pairs.iter().flat_map(|p| p.down.iter().copied()).collect();
    let by_page = failed_pages(&downs, failed);
    let results: Vec<Result<(), MoveFailure>> =
        pairs.iter().map(|p| by_page.get(&p.down_tag).map_or(Ok(()), |&w| Err(w))).collect();
    let ups = pairs
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_ok())
        .flat_map(|(p, _)| p.up.iter().copied())
        .collect();
    (results, ups)
}

/// Carries exchanges out as paired batches ([`pair_batches`] of `opts.batch_pages` moves): a
/// demotion batch, then the promotion batch of the partners whose demotion happened
/// ([`after_demotion`]), then the next pair of batches. Up to `opts.concurrent_batches` callers
/// each work through whole pairs of batches, so the tier pages go down to holds at most callers
/// x batch more pages than before at any moment, and the tier pages come up to never more than
/// before (move_pages has no swap; Nimble's exchange_pages is a kernel patch). Each batch is
/// checked afterwards as [`execute`] checks it, with `guard` held around its copy.
pub fn execute_exchange(
    pid: i32,
    pairs: &[PairMoves],
    opts: &MoveOptions,
    reason: &str,
    guard: Option<&dyn CopyGuard>,
) -> ExchangeOutcome {
    let batch = opts.batch_pages.max(1) as usize;
    run_pairs(pairs, batch, opts.concurrent_batches, &|chunk: &[PageMove]| {
        // A side larger than a batch (a 2 MiB page in batches of fewer addresses) is sent in
        // several calls.
        let mut out = MoveOutcome::default();
        for part in chunk.chunks(batch) {
            add_batch(&mut out, part.len(), guarded_batch(pid, part, reason, guard));
        }
        out
    })
}

/// [`execute_exchange`] with the mover given: `mover` carries out one side of a pair of batches
/// and says what happened.
fn run_pairs(
    pairs: &[PairMoves],
    batch: usize,
    callers: u32,
    mover: &(dyn Fn(&[PageMove]) -> MoveOutcome + Sync),
) -> ExchangeOutcome {
    let start = Instant::now();
    let runs = pair_batches(pairs, batch);
    let next = AtomicUsize::new(0);
    let results = Mutex::new(ExchangeOutcome {
        pairs: vec![PairResult { down: Ok(()), up: None }; pairs.len()],
        ..Default::default()
    });
    let workers = (callers.max(1) as usize).min(runs.len().max(1));
    let merge = |r: &mut MoveOutcome, part: MoveOutcome| {
        r.moved += part.moved;
        r.failed.extend(part.failed);
        r.batches += part.batches;
        r.bad_batches.extend(part.bad_batches);
    };
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(run) = runs.get(i) else { break };
                let these = &pairs[run.clone()];
                let downs: Vec<PageMove> = these.iter().flat_map(|p| p.down.iter().copied()).collect();
                let down = if downs.is_empty() { MoveOutcome::default() } else { mover(&downs) };
                let (demoted, ups) = after_demotion(these, &down.failed);
                let up = if ups.is_empty() { MoveOutcome::default() } else { mover(&ups) };
                let up_failed = failed_pages(&ups, &up.failed);
                let mut r = results.lock().expect("results lock");
                for ((p, d), slot) in these.iter().zip(demoted).zip(&mut r.pairs[run.clone()]) {
                    slot.down = d;
                    slot.up = d.is_ok().then(|| up_failed.get(&p.up_tag).map_or(Ok(()), |&w| Err(w)));
                }
                merge(&mut r.moves, down);
                merge(&mut r.moves, up);
            });
        }
    });
    let mut out = results.into_inner().expect("results");
    out.moves.elapsed = start.elapsed();
    out
}

fn log_batch(pid: i32, chunk: &[PageMove], out: &MoveOutcome, reason: &str) {
    let mut nodes: Vec<i32> = chunk.iter().map(|m| m.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let why = tally(&out.failed);
    tracing::info!(
        target: "terrace::batch",
        "pid {pid}: moved {}/{} pages to node {:?} ({reason}){}",
        out.moved,
        chunk.len(),
        nodes,
        if why.is_empty() { String::new() } else { format!("; not moved: {why:?}") }
    );
}

/// Whether one page of a move_pages call moved: its `status` from the call, where it is now
/// (`landed`, from a second call without nodes; `None` if that call failed), and its `target`.
/// A page on its target moved, whatever its status said: the kernel reports EBUSY for the
/// second 4 KiB page of a transparent huge page whose first page it has just isolated, and then
/// moves the whole huge page with it (`add_page_for_migration` cannot isolate the folio twice).
fn page_result(status: i32, landed: Option<i32>, target: i32) -> Result<(), MoveFailure> {
    match landed {
        Some(node) if node == target => Ok(()),
        _ if status < 0 => Err(failure_of(status)),
        Some(node) if node < 0 => Err(failure_of(node)),
        Some(_) => Err(MoveFailure::Misplaced),
        None => Ok(()),
    }
}

/// One move_pages call and its check.
fn move_batch(pid: i32, chunk: &[PageMove]) -> MoveOutcome {
    let addrs: Vec<u64> = chunk.iter().map(|m| m.addr).collect();
    let nodes: Vec<i32> = chunk.iter().map(|m| m.node).collect();
    let mut status = vec![0i32; chunk.len()];
    let mut out = MoveOutcome::default();
    if let Err(e) = numa_sys::move_pages(pid, &addrs, &nodes, &mut status, 0) {
        // The whole call failed (the process went away, no permission): nothing moved.
        let mut why = failure_of(-e.raw_os_error().unwrap_or(libc::EINVAL));
        if why == MoveFailure::Invalid && !crate::process::running(pid) {
            why = MoveFailure::NotPresent;
        }
        out.failed.extend(chunk.iter().map(|m| (m.tag, why)));
        return out;
    }
    // Do not trust the status alone: ask where the pages are now.
    let mut landed = vec![0i32; chunk.len()];
    let checked = numa_sys::query_nodes(pid, &addrs, &mut landed).is_ok();
    for (i, m) in chunk.iter().enumerate() {
        match page_result(status[i], checked.then_some(landed[i]), m.node) {
            Ok(()) => out.moved += 1,
            Err(why) => out.failed.push((m.tag, why)),
        }
    }
    // A program that exits during the batch takes its pages with it: the kernel then refuses
    // their addresses (EINVAL) as it would a bad one, but nothing is wrong with the plan.
    if out.failed.iter().any(|&(_, w)| w == MoveFailure::Invalid) && !crate::process::running(pid) {
        for (_, w) in &mut out.failed {
            if *w == MoveFailure::Invalid {
                *w = MoveFailure::NotPresent;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_move_unit_is_the_huge_page_unless_the_kernel_makes_none() {
        let sys = std::env::temp_dir().join(format!("terrace-move-unit-{}", std::process::id()));
        let dir = sys.join("kernel/mm/transparent_hugepage");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(move_unit_bytes(&sys.join("absent")), 0, "no THP in the kernel");
        for (enabled, unit) in [("always [madvise] never\n", 2 << 20), ("always madvise [never]\n", 0)] {
            std::fs::write(dir.join("enabled"), enabled).unwrap();
            assert_eq!(move_unit_bytes(&sys), unit, "{enabled}");
        }
        std::fs::write(dir.join("enabled"), "[always] madvise never\n").unwrap();
        std::fs::write(dir.join("hpage_pmd_size"), "524288\n").unwrap();
        assert_eq!(move_unit_bytes(&sys), 512 << 10, "the kernel's own size when it says");
        std::fs::remove_dir_all(&sys).unwrap();
    }

    #[test]
    fn a_page_on_its_target_moved_whatever_its_status_said() {
        let busy = -libc::EBUSY;
        // The second page of a huge page: EBUSY, but it went with the first.
        assert_eq!(page_result(busy, Some(1), 1), Ok(()));
        // EBUSY and still where it was: busy.
        assert_eq!(page_result(busy, Some(0), 1), Err(MoveFailure::Busy));
        assert_eq!(page_result(busy, None, 1), Err(MoveFailure::Busy));
        // Reported moved but elsewhere, or gone.
        assert_eq!(page_result(1, Some(0), 1), Err(MoveFailure::Misplaced));
        assert_eq!(page_result(1, Some(-libc::ENOENT), 1), Err(MoveFailure::NotPresent));
        // Reported moved, and the check could not be made: taken at its word.
        assert_eq!(page_result(1, None, 1), Ok(()));
    }

    #[test]
    fn errno_maps_to_a_reason() {
        assert_eq!(failure_of(-libc::EBUSY), MoveFailure::Busy);
        assert_eq!(failure_of(-libc::ENOMEM), MoveFailure::NoSpace);
        assert_eq!(failure_of(-libc::EFAULT), MoveFailure::NotPresent);
        assert_eq!(failure_of(-libc::ENOENT), MoveFailure::NotPresent);
        assert_eq!(failure_of(-libc::EACCES), MoveFailure::Permission);
    }

    #[test]
    fn moving_own_pages_to_their_own_node_succeeds_and_counts_batches() {
        let v = vec![3u8; 64 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let addrs: Vec<u64> = (0..32).map(|i| base + i * 4096).collect();
        let mut here = vec![0i32; addrs.len()];
        numa_sys::query_nodes(0, &addrs, &mut here).unwrap();
        let moves: Vec<PageMove> = addrs
            .iter()
            .zip(&here)
            .enumerate()
            .map(|(i, (&a, &n))| PageMove { addr: a, node: n, tag: i as u32 })
            .collect();
        let opts = MoveOptions { batch_pages: 8, concurrent_batches: 2, ..Default::default() };
        let out = execute(0, &moves, &opts, "test");
        assert_eq!(out.moved, 32, "{:?}", out.failed);
        assert_eq!(out.batches, 4);
        assert!(v.iter().all(|&b| b == 3));
    }

    #[test]
    fn a_node_that_does_not_exist_fails_every_page_without_harm() {
        let v = vec![5u8; 8 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let moves: Vec<PageMove> =
            (0..4).map(|i| PageMove { addr: base + i * 4096, node: 63, tag: i as u32 }).collect();
        let out = execute(0, &moves, &MoveOptions::default(), "test");
        assert_eq!(out.moved, 0);
        assert_eq!(out.failed.len(), 4);
        assert_eq!(out.bad_batches.len(), 1, "a batch that failed whole is reported");
        assert_eq!(out.bad_batches[0].failed, 4);
        assert!(v.iter().all(|&b| b == 5));
    }

    #[test]
    fn a_guard_is_held_around_every_batch() {
        struct Count(Mutex<Vec<String>>);
        impl CopyGuard for Count {
            fn begin(&self, batch: &[PageMove]) -> Vec<u64> {
                self.0.lock().unwrap().push(format!("begin {}", batch.len()));
                vec![batch.len() as u64]
            }
            fn end(&self, token: &[u64]) {
                self.0.lock().unwrap().push(format!("end {}", token[0]));
            }
        }
        let v = vec![2u8; 16 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let moves: Vec<PageMove> =
            (0..10).map(|i| PageMove { addr: base + i * 4096, node: 63, tag: i as u32 }).collect();
        let guard = Count(Mutex::new(Vec::new()));
        let opts = MoveOptions { batch_pages: 4, ..Default::default() };
        execute_guarded(0, &moves, &opts, "test", Some(&guard));
        assert_eq!(
            guard.0.into_inner().unwrap(),
            ["begin 4", "end 4", "begin 4", "end 4", "begin 2", "end 2"]
        );
    }

    /// `n` exchanges of 4 KiB pages: pair i sends page i (tag i) down to node 1 and page 100 + i
    /// (tag 100 + i) up to node 0.
    fn pairs(n: u32) -> Vec<PairMoves> {
        (0..n)
            .map(|i| PairMoves {
                down_tag: i,
                down: vec![PageMove { addr: (i as u64) << 12, node: 1, tag: i }],
                up_tag: 100 + i,
                up: vec![PageMove { addr: ((100 + i) as u64) << 12, node: 0, tag: 100 + i }],
            })
            .collect()
    }

    #[test]
    fn exchanges_are_batched_by_whole_pairs() {
        assert_eq!(pair_batches(&pairs(5), 2), [0..2, 2..4, 4..5]);
        assert_eq!(pair_batches(&pairs(3), 1), [0..1, 1..2, 2..3]);
        assert_eq!(pair_batches(&pairs(3), 512), vec![0..3]);
        assert!(pair_batches(&[], 4).is_empty());
        // A pair takes the larger of its sides: 2 MiB pages of 512 and 300 present 4 KiB pages,
        // in batches of 1024 addresses (two huge pages); a side larger than the batch still goes.
        let mut huge = pairs(3);
        huge[0].down = vec![huge[0].down[0]; 512];
        huge[1].up = vec![huge[1].up[0]; 300];
        huge[2].down = vec![huge[2].down[0]; 512];
        assert_eq!(pair_batches(&huge, 1024), [0..2, 2..3]);
        assert_eq!(pair_batches(&huge, 100), [0..1, 1..2, 2..3]);
    }

    #[test]
    fn only_the_partners_of_pages_that_went_down_go_up() {
        let p = pairs(3);
        let (down, ups) = after_demotion(&p, &[(1, MoveFailure::Busy)]);
        assert_eq!(down, [Ok(()), Err(MoveFailure::Busy), Ok(())]);
        assert_eq!(ups.iter().map(|m| m.tag).collect::<Vec<_>>(), [100, 102]);
        // A 2 MiB page that went down except for 4 KiB pages freed since the scan went down; one
        // with a page that could not move did not.
        let mut huge = pairs(2);
        huge[0].down = vec![huge[0].down[0]; 4];
        huge[1].down = vec![huge[1].down[0]; 4];
        let failed = [(0, MoveFailure::NotPresent), (1, MoveFailure::NotPresent), (1, MoveFailure::NoSpace)];
        let (down, ups) = after_demotion(&huge, &failed);
        assert_eq!(down, [Ok(()), Err(MoveFailure::NoSpace)]);
        assert_eq!(ups.iter().map(|m| m.tag).collect::<Vec<_>>(), [100]);
    }

    /// A mover that records each call's pages and fails the demotion of `fail`.
    struct Recorder {
        calls: Mutex<Vec<Vec<u32>>>,
        fail: u32,
    }
    impl Recorder {
        fn mover(&self, chunk: &[PageMove]) -> MoveOutcome {
            self.calls.lock().unwrap().push(chunk.iter().map(|m| m.tag).collect());
            let failed: Vec<(u32, MoveFailure)> =
                chunk.iter().filter(|m| m.tag == self.fail).map(|m| (m.tag, MoveFailure::Busy)).collect();
            MoveOutcome {
                moved: (chunk.len() - failed.len()) as u64,
                failed,
                batches: 1,
                ..Default::default()
            }
        }
    }

    #[test]
    fn one_caller_alternates_demotion_and_promotion_batches() {
        let r = Recorder { calls: Mutex::new(Vec::new()), fail: 2 };
        let out = run_pairs(&pairs(5), 2, 1, &|c: &[PageMove]| r.mover(c));
        // Pairs (0, 1), (2, 3), (4): each demotion batch, then its partners' promotions; page 2's
        // demotion failed, so 102 is held back. Demotions all first would be [0, 1], [2, 3], [4], ...
        let calls = r.calls.into_inner().unwrap();
        assert_eq!(calls, [vec![0, 1], vec![100, 101], vec![2, 3], vec![103], vec![4], vec![104]]);
        assert_eq!(out.moves.batches, 6);
        assert_eq!(out.moves.moved, 8);
        assert_eq!(out.pairs[2], PairResult { down: Err(MoveFailure::Busy), up: None });
        assert_eq!(out.pairs.iter().filter(|p| p.exchanged()).count(), 4);
    }

    #[test]
    fn several_callers_never_overfill_either_tier() {
        // Nodes 0 and 1 each hold 64 pages; 64 exchanges in batches of 4 with 3 callers. The
        // mover applies each call at once and checks the counts: node 1 may hold at most
        // 3 x 4 pages more than it started with, node 0 never more.
        let (callers, batch, n) = (3u32, 4usize, 64u32);
        let counts = Mutex::new((64i64, 64i64, 0i64));
        let mover = |chunk: &[PageMove]| {
            let mut c = counts.lock().unwrap();
            for m in chunk {
                if m.node == 1 {
                    (c.0, c.1) = (c.0 - 1, c.1 + 1);
                } else {
                    (c.0, c.1) = (c.0 + 1, c.1 - 1);
                }
            }
            assert!(c.0 <= 64, "node 0 holds {} pages, more than its 64", c.0);
            c.2 = c.2.max(c.1 - 64);
            drop(c);
            std::thread::sleep(Duration::from_micros(200));
            MoveOutcome { moved: chunk.len() as u64, batches: 1, ..Default::default() }
        };
        let out = run_pairs(&pairs(n), batch, callers, &mover);
        let (fast, slow, most) = counts.into_inner().unwrap();
        assert_eq!((fast, slow), (64, 64), "every page swapped");
        assert!(most <= (callers as i64) * batch as i64, "node 1 held {most} extra pages");
        assert!(most >= batch as i64, "node 1 held {most} extra pages");
        assert_eq!(out.pairs.iter().filter(|p| p.exchanged()).count(), n as usize);
    }

    #[test]
    fn a_real_exchange_of_own_pages_reports_every_pair() {
        let v = vec![9u8; 16 * 4096];
        let base = (v.as_ptr() as u64 + 4095) & !4095;
        let addrs: Vec<u64> = (0..8).map(|i| base + i * 4096).collect();
        let mut here = vec![0i32; addrs.len()];
        numa_sys::query_nodes(0, &addrs, &mut here).unwrap();
        let moves: Vec<PageMove> =
            (0..8).map(|i| PageMove { addr: addrs[i], node: here[i], tag: i as u32 }).collect();
        let p: Vec<PairMoves> = (0..4)
            .map(|i| PairMoves {
                down_tag: i,
                down: vec![moves[i as usize]],
                up_tag: 4 + i,
                up: vec![moves[4 + i as usize]],
            })
            .collect();
        let opts = MoveOptions { batch_pages: 2, concurrent_batches: 2, ..Default::default() };
        let out = execute_exchange(0, &p, &opts, "test", None);
        assert_eq!(out.moves.batches, 4, "two pairs of batches");
        assert!(out.pairs.iter().all(|p| p.exchanged()), "{out:?}");
        assert!(v.iter().all(|&b| b == 9));
    }

    #[test]
    fn the_kernel_release_decides_the_tlb_flush() {
        assert_eq!(kernel_release("6.12.48+deb13-cloud-amd64"), Some((6, 12)));
        assert_eq!(kernel_release("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(kernel_release("garbage"), None);
        let m = mechanisms(Some((6, 3)), true, true, false, false);
        assert!(m.offers(Mechanism::TlbFlushPerBatch) && !m.offers(Mechanism::TlbFlushPerPage));
        assert!(m.why_not(Mechanism::TlbFlushPerPage).contains("6.3"));
        let m = mechanisms(Some((6, 2)), false, true, false, false);
        assert!(m.offers(Mechanism::TlbFlushPerPage) && !m.offers(Mechanism::TlbFlushPerBatch));
        assert!(!m.offers(Mechanism::WriteProtectedCopies) && !m.offers(Mechanism::CopyThreads));
        assert!(m.offers(Mechanism::Exchange) && m.offers(Mechanism::RateLimit));
        assert!(m.offers(Mechanism::HugePageMoves));
    }

    #[test]
    fn huge_pages_move_whole_only_on_a_kernel_with_thp_since_4_14() {
        assert!(!mechanisms(Some((6, 12)), true, false, false, false).offers(Mechanism::HugePageMoves));
        let old = mechanisms(Some((4, 9)), true, true, false, false);
        assert!(!old.offers(Mechanism::HugePageMoves));
        assert!(old.why_not(Mechanism::HugePageMoves).contains("4.14"));
        assert!(mechanisms(Some((4, 14)), true, true, false, false).offers(Mechanism::HugePageMoves));
    }

    #[test]
    fn shadows_are_offered_only_with_an_agent_socket_and_say_where_not() {
        assert!(mechanisms(Some((6, 12)), true, true, true, false).offers(Mechanism::Shadowing));
        let m = mechanisms(Some((6, 12)), true, true, false, false);
        assert!(!m.offers(Mechanism::Shadowing));
        assert!(
            m.why_not(Mechanism::Shadowing).contains("terrace run"),
            "{}",
            m.why_not(Mechanism::Shadowing)
        );
    }

    #[test]
    fn site_advice_is_offered_only_with_the_object_runtime() {
        assert!(mechanisms(Some((6, 12)), true, true, false, true).offers(Mechanism::SiteAdvice));
        let m = mechanisms(Some((6, 12)), true, true, true, false);
        assert!(!m.offers(Mechanism::SiteAdvice));
        assert!(m.why_not(Mechanism::SiteAdvice).contains("terrace run --objects"));
    }
}
