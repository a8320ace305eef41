//! The runtime under real programs: each runs without and with `LD_PRELOAD=libterrace_alloc.so`
//! (and a ring), and must print the same and exit the same; the ring must then hold the
//! program's large objects. Needs `cc`, `python3`, `sqlite3` and `sort` on the host.
#![cfg(target_os = "linux")]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use terrace_alloc_ring::{Event, EventKind, Ring, DEFAULT_ADVICE_SLOTS, RING_ENV};

/// libterrace_alloc.so next to this test's executable, in target/<profile>/deps: cargo builds it
/// there before the tests (the copy one level up is refreshed only by `cargo build`).
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let so = exe.parent().unwrap().join("libterrace_alloc.so");
    assert!(so.exists(), "{} is missing: build it with cargo build -p terrace-alloc", so.display());
    so
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("terrace-alloc-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn compile(dir: &Scratch, name: &str, src: &str) -> PathBuf {
    let c = dir.path(&format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.path(name);
    let out = Command::new("cc")
        .args(["-O2", "-fno-optimize-sibling-calls", "-pthread", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .expect("cc");
    assert!(out.status.success(), "cc {name}: {}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// Runs `cmd` with `stdin`, optionally under the runtime with a ring.
fn run(cmd: &mut Command, stdin: &[u8], preload: Option<Option<&Path>>) -> Output {
    cmd.env_remove("LD_PRELOAD").env_remove(RING_ENV).env("LC_ALL", "C");
    if let Some(ring) = preload {
        cmd.env("LD_PRELOAD", library());
        if let Some(r) = ring {
            cmd.env(RING_ENV, r);
        }
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

/// Runs `make()` without the runtime and with it (with a ring), asserts identical output and
/// status, and returns the ring's events and the ring.
fn same_with_and_without(
    dir: &Scratch,
    make: impl Fn() -> Command,
    stdin: &[u8],
    capacity: usize,
) -> (Output, Vec<Event>, Ring) {
    let plain = run(&mut make(), stdin, None);
    let ring_path = dir.path("ring");
    let mut ring = Ring::create(&ring_path, capacity, DEFAULT_ADVICE_SLOTS).unwrap();
    let under = run(&mut make(), stdin, Some(Some(&ring_path)));
    assert_eq!(
        String::from_utf8_lossy(&plain.stderr),
        String::from_utf8_lossy(&under.stderr),
        "stderr differs under the runtime"
    );
    assert!(plain.stdout == under.stdout, "stdout differs under the runtime");
    assert_eq!(plain.status.code(), under.status.code(), "exit status differs under the runtime");
    let mut events = Vec::new();
    ring.drain(&mut events, usize::MAX);
    (under, events, ring)
}

fn count(events: &[Event], kind: EventKind) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

/// Every free names a live object of the same process, and at the end none is left.
fn frees_match_allocs(events: &[Event]) {
    let mut live: HashMap<(u32, u64), u64> = HashMap::new();
    for e in events {
        match e.kind {
            EventKind::Alloc => {
                assert!(live.insert((e.pid, e.addr), e.bytes).is_none(), "address allocated twice: {e:?}");
                assert_eq!(e.addr % 4096, 0, "objects are page-aligned");
                assert!(e.bytes >= 4096, "only objects of a page or more are reported");
                assert_ne!(e.site, 0);
            }
            EventKind::Free => {
                let bytes =
                    live.remove(&(e.pid, e.addr)).unwrap_or_else(|| panic!("free of no object: {e:?}"));
                assert_eq!(bytes, e.bytes, "a free repeats its object's size");
            }
            EventKind::Start => {}
        }
    }
    assert!(live.is_empty(), "{} objects never freed", live.len());
}

#[test]
fn python_script_is_unchanged() {
    let dir = Scratch::new("python");
    let script = r#"
import json, hashlib
words = ["w%07d-%s" % ((i * 7919) % 200003, "x" * (i % 13)) for i in range(200000)]
words.sort()
d = {}
for i, w in enumerate(words):
    d[w[:6]] = d.get(w[:6], 0) + i
for k in list(d)[::3]:
    del d[k]
blob = json.dumps({"words": words[::7], "d": d}, sort_keys=True)
big = [bytearray(i * 100) for i in range(1, 300)]
print(len(words), len(d), len(blob), sum(len(b) for b in big))
print(hashlib.sha256(blob.encode()).hexdigest())
"#;
    let (out, events, ring) = same_with_and_without(
        &dir,
        || {
            let mut c = Command::new("python3");
            c.args(["-c", script]);
            c
        },
        b"",
        1 << 18,
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("200000 "));
    assert!(count(&events, EventKind::Alloc) > 0, "python's large objects reach the ring");
    assert!(count(&events, EventKind::Free) > 0);
    assert_eq!(ring.dropped(), 0);
}

#[test]
fn sqlite_workload_is_unchanged() {
    let dir = Scratch::new("sqlite");
    let sql = b"
create table t(id integer primary key, k integer, v text);
with recursive c(x) as (select 1 union all select x + 1 from c where x < 50000)
  insert into t(k, v) select x % 97, printf('%08d-%d-%s', x, x * x, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26)) from c;
create index tk on t(k);
select k, count(*), sum(length(v)), max(v) from t group by k order by k;
select v from t order by v desc limit 5;
select count(distinct substr(v, 10, 3)) from t;
";
    let (out, events, _ring) = same_with_and_without(
        &dir,
        || {
            let mut c = Command::new("sqlite3");
            c.arg(":memory:");
            c
        },
        sql,
        1 << 18,
    );
    assert!(String::from_utf8_lossy(&out.stdout).lines().count() > 97);
    assert!(count(&events, EventKind::Alloc) > 0, "sqlite's large objects reach the ring");
}

#[test]
fn sort_of_a_large_file_is_unchanged() {
    let dir = Scratch::new("sort");
    let input = dir.path("input.txt");
    let mut text = Vec::with_capacity(21 << 20);
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    while text.len() < 20 << 20 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        writeln!(text, "{:016x} {} {}", s, s % 1000, "abcdefghij".repeat((s % 5) as usize)).unwrap();
    }
    std::fs::write(&input, &text).unwrap();
    let (out, events, _ring) = same_with_and_without(
        &dir,
        || {
            let mut c = Command::new("sort");
            c.arg(&input);
            c
        },
        b"",
        1 << 16,
    );
    assert_eq!(out.stdout.len(), text.len());
    assert!(count(&events, EventKind::Alloc) > 0, "sort's buffers reach the ring");
}

#[test]
fn threaded_program_runs_and_reports_every_object() {
    let dir = Scratch::new("threads");
    let exe = compile(&dir, "threads", include_str!("c/threads.c"));
    let (out, events, ring) = same_with_and_without(&dir, || Command::new(&exe), b"", 1 << 18);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("errors 0\n"));
    assert_eq!(ring.attached(), 1, "the runtime attached to the ring once");
    assert_eq!(ring.dropped(), 0, "the ring was large enough");
    assert!(count(&events, EventKind::Alloc) > 1000);
    frees_match_allocs(&events);
    let tids: HashSet<u32> = events.iter().map(|e| e.tid).collect();
    assert!(tids.len() >= 4, "events carry the threads' ids");
}

/// Terrace gone: nobody drains a tiny ring. The program runs the same; the ring counts drops.
#[test]
fn full_ring_never_stops_the_program() {
    let dir = Scratch::new("full");
    let exe = compile(&dir, "threads", include_str!("c/threads.c"));
    let (out, events, ring) = same_with_and_without(&dir, || Command::new(&exe), b"", 64);
    assert!(out.status.success());
    assert_eq!(events.len(), 64);
    assert!(ring.dropped() > 1000, "drops counted: {}", ring.dropped());
    assert_eq!(ring.accepted(), 64);
}

#[test]
fn forking_program_runs_and_children_report_themselves() {
    let dir = Scratch::new("fork");
    let exe = compile(&dir, "fork", include_str!("c/fork.c"));
    let (out, events, ring) = same_with_and_without(&dir, || Command::new(&exe), b"", 1 << 18);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(ring.dropped(), 0);
    let pids: HashSet<u32> = events.iter().map(|e| e.pid).collect();
    assert_eq!(pids.len(), 7, "the parent and its six children each report with their own pid");
    // Each process announces itself once, before any other event of its own, at the priority
    // of the environment (none here: 0), the children with their parent's image (a fork).
    let mut starts: HashMap<u32, Event> = HashMap::new();
    for e in &events {
        if e.kind == EventKind::Start {
            assert!(starts.insert(e.pid, *e).is_none(), "pid {} announced twice", e.pid);
        } else {
            assert!(starts.contains_key(&e.pid), "an event of pid {} before its start: {e:?}", e.pid);
        }
    }
    assert_eq!(starts.len(), 7);
    assert!(starts.values().all(|e| e.priority() == 0 && e.addr != 0));
    let images: HashSet<u64> = starts.values().map(|e| e.addr).collect();
    assert_eq!(images.len(), 1, "fork children share their parent's image id");
    // Per process: a child frees what it inherited, so count frees of inherited objects as
    // matching the parent's allocs: check only that no process frees the same address twice.
    let mut freed: HashSet<(u32, u64, u64)> = HashSet::new();
    for e in events.iter().filter(|e| e.kind == EventKind::Free) {
        assert!(freed.insert((e.pid, e.addr, e.time_ns)));
    }
}

/// The priority comes from `TERRACE_PRIORITY` in each start event; a value that is no integer is
/// said in one line on stderr and read as 0, and the program runs on unchanged.
#[test]
fn priority_comes_from_the_environment() {
    let dir = Scratch::new("priority");
    let exe = compile(&dir, "threads", include_str!("c/threads.c"));
    for (value, want, warns) in
        [("7", 7, false), ("-12", -12, false), ("high", 0, true), ("99999999999", 0, true)]
    {
        let ring_path = dir.path(&format!("ring-{want}-{warns}"));
        let mut ring = Ring::create(&ring_path, 1 << 18, DEFAULT_ADVICE_SLOTS).unwrap();
        let out = run(Command::new(&exe).env("TERRACE_PRIORITY", value), b"", Some(Some(&ring_path)));
        assert!(out.status.success(), "TERRACE_PRIORITY={value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.contains("TERRACE_PRIORITY is not an integer"), warns, "{value}: {stderr}");
        let mut events = Vec::new();
        ring.drain(&mut events, usize::MAX);
        let starts: Vec<&Event> = events.iter().filter(|e| e.kind == EventKind::Start).collect();
        assert_eq!(starts.len(), 1, "one process, one start");
        assert_eq!(starts[0].priority(), want, "TERRACE_PRIORITY={value}");
        assert_eq!(events[0].kind, EventKind::Start, "the start comes first");
    }
}

#[test]
fn run_without_ring_and_without_cache_is_unchanged() {
    let dir = Scratch::new("noring");
    let exe = compile(&dir, "threads", include_str!("c/threads.c"));
    let plain = run(&mut Command::new(&exe), b"", None);
    let under = run(&mut Command::new(&exe), b"", Some(None));
    assert_eq!(plain.stdout, under.stdout);
    assert!(under.status.success());
    // Without the mapping cache every object is a fresh mapping and every free an munmap.
    let fresh = run(Command::new(&exe).env("TERRACE_OBJECTS_CACHE_MB", "0"), b"", Some(None));
    assert_eq!(plain.stdout, fresh.stdout);
    assert!(fresh.status.success());
}

/// A program that never allocates never meets the runtime: it has no constructor, so nothing
/// runs, not even the attach to the ring.
#[test]
fn program_without_malloc_is_untouched() {
    let dir = Scratch::new("nomalloc");
    let exe = compile(
        &dir,
        "nomalloc",
        "#include <unistd.h>\nint main(void) { return write(1, \"plain\\n\", 6) != 6; }\n",
    );
    let (out, events, ring) = same_with_and_without(&dir, || Command::new(&exe), b"", 64);
    assert_eq!(out.stdout, b"plain\n");
    assert!(events.is_empty());
    assert_eq!(ring.attached(), 0, "the runtime never initialised");
}

/// The site ids of the allocations of `bytes` bytes.
fn site_ids(events: &[Event], bytes: u64) -> HashSet<u64> {
    events.iter().filter(|e| e.kind == EventKind::Alloc && e.bytes == bytes).map(|e| e.site).collect()
}

#[test]
fn two_call_sites_have_two_stable_ids() {
    let dir = Scratch::new("sites");
    let exe = compile(&dir, "sites", include_str!("c/sites.c"));
    let (_out, events, _ring) = same_with_and_without(&dir, || Command::new(&exe), b"", 1 << 12);
    let sites = |bytes: u64| site_ids(&events, bytes);
    let (a, b) = (sites(8192), sites(12288));
    assert_eq!(count(&events, EventKind::Alloc), 100);
    assert_eq!(a.len(), 1, "one site, one id every time: {a:?}");
    assert_eq!(b.len(), 1, "one site, one id every time: {b:?}");
    assert_ne!(a, b, "two sites, two ids");
}

/// The site ids the runtime remembers (by return address and stack depth) stay those of a walk:
/// one wrapper called from two callers at the same depth gives two ids, and a caller whose frame
/// changes size every call keeps one id (tests/c/wrapper.c).
#[test]
fn one_wrapper_called_from_three_places_has_three_stable_ids() {
    let dir = Scratch::new("wrapper");
    let exe = compile(&dir, "wrapper", include_str!("c/wrapper.c"));
    let (_out, events, _ring) = same_with_and_without(&dir, || Command::new(&exe), b"", 1 << 12);
    let sites = |bytes: u64| site_ids(&events, bytes);
    let (a, b, c) = (sites(8192), sites(12288), sites(16384));
    assert_eq!(count(&events, EventKind::Alloc), 180);
    for (name, s) in [("from_a", &a), ("from_b", &b), ("from_c", &c)] {
        assert_eq!(s.len(), 1, "{name}: one place, one id every time: {s:?}");
    }
    assert!(a != b && b != c && a != c, "three places, three ids: {a:?} {b:?} {c:?}");
}

/// Advice for a site binds that site's next object to node 0 (MPOL_PREFERRED) before first
/// touch; the object allocated before the advice has no policy of its own.
#[test]
fn advised_site_is_bound_before_first_touch() {
    let dir = Scratch::new("advice");
    let exe = compile(&dir, "advice", include_str!("c/advice.c"));
    let ring_path = dir.path("ring");
    let mut ring = Ring::create(&ring_path, 1 << 10, 64).unwrap();
    let mut child = Command::new(&exe)
        .env("LD_PRELOAD", library())
        .env(RING_ENV, &ring_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let mut events = Vec::new();
    ring.drain(&mut events, usize::MAX);
    let first =
        *events.iter().find(|e| e.kind == EventKind::Alloc && e.bytes == 65536).expect("first object");
    assert_eq!(first.node, -1);
    ring.set_advice(first.site, Some(0)).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let lines: Vec<&str> = rest.lines().collect();
    events.clear();
    ring.drain(&mut events, usize::MAX);
    // MPOL_DEFAULT = 0: no policy of its own; MPOL_PREFERRED = 1 over node 0 (mask 1).
    assert_eq!(lines[0], "object 0 rc 0 mode 0 mask 0 node 0 (rc 0)");
    assert_eq!(lines[1], "object 1 rc 0 mode 1 mask 1 node 0 (rc 0)");
    let second =
        events.iter().find(|e| e.kind == EventKind::Alloc && e.bytes == 65536).expect("second object");
    assert_eq!(second.site, first.site);
    assert_eq!(second.node, 0, "the event says where the object was bound");
}

/// The threaded program while an advisor (as `terrace run --objects` is) drains the ring and
/// advises node 0 for every site it sees: advised objects of every kind the program makes
/// (aligned, zeroed, reallocated) keep every byte, their alignment and usable size.
#[test]
fn threaded_program_with_every_site_advised_keeps_its_data() {
    let dir = Scratch::new("threads-advised");
    let exe = compile(&dir, "threads", include_str!("c/threads.c"));
    let ring_path = dir.path("ring");
    let mut ring = Ring::create(&ring_path, 1 << 16, DEFAULT_ADVICE_SLOTS).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let advised = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let advisor = {
        let (stop, advised) = (stop.clone(), advised.clone());
        std::thread::spawn(move || {
            let mut seen = HashSet::new();
            let mut events = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                events.clear();
                ring.drain(&mut events, usize::MAX);
                for e in &events {
                    if e.kind == EventKind::Alloc
                        && seen.insert(e.site)
                        && ring.set_advice(e.site, Some(0)).is_ok()
                    {
                        advised.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let out = run(&mut Command::new(&exe), b"", Some(Some(&ring_path)));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    advisor.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(advised.load(std::sync::atomic::Ordering::Relaxed) > 0, "no site was advised");
    assert!(stdout.contains("errors 0") && out.status.success(), "{stdout}");
}

/// The VmFlags of the mapping of `pid` that holds `addr`, from /proc/PID/smaps.
fn vm_flags(pid: u32, addr: u64) -> Vec<String> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        // A mapping's first line is its range ("7f12a000-7f12b000 rw-p ..."); its fields follow.
        let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
        if let Some((Ok(a), Ok(b))) =
            range.map(|(a, b)| (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)))
        {
            inside = a <= addr && addr < b;
        } else if let Some(flags) = line.strip_prefix("VmFlags:").filter(|_| inside) {
            return flags.split_whitespace().map(String::from).collect();
        }
    }
    panic!("no mapping holds {addr:#x}");
}

/// Runs tests/c/huge.c (under a ring if `ring`) and returns, for each of its four objects, its
/// address and whether its mapping has MADV_NOHUGEPAGE ("nh").
fn huge_page_flags(dir: &Scratch, exe: &Path, ring: Option<&Path>) -> Vec<(u64, bool)> {
    let mut cmd = Command::new(exe);
    cmd.env("LD_PRELOAD", library()).env_remove(RING_ENV);
    if let Some(r) = ring {
        cmd.env(RING_ENV, r);
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let addrs: Vec<u64> = line.split_whitespace().map(|a| u64::from_str_radix(a, 16).unwrap()).collect();
    assert_eq!(addrs.len(), 4, "{line:?} ({})", dir.0.display());
    let flags = addrs.iter().map(|&a| (a, vm_flags(child.id(), a).iter().any(|f| f == "nh"))).collect();
    child.stdin.take().unwrap().write_all(b"done\n").unwrap();
    assert!(child.wait().unwrap().success());
    flags
}

/// Whether this kernel gives anonymous memory huge pages (or multi-size THP folios) unasked:
/// a THP `enabled` file set to "always" (or "inherit" from an "always" top level).
fn huge_pages_unasked() -> bool {
    let setting = |path: &Path| -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        let (_, rest) = text.split_once('[')?;
        Some(rest.split_once(']')?.0.to_string())
    };
    let dir = Path::new("/sys/kernel/mm/transparent_hugepage");
    let Some(top) = setting(&dir.join("enabled")) else { return false };
    let sizes = std::fs::read_dir(dir).into_iter().flatten().flatten();
    top == "always"
        || sizes
            .filter(|e| e.file_name().to_string_lossy().starts_with("hugepages-"))
            .any(|e| setting(&e.path().join("enabled")).is_some_and(|s| s == "always"))
}

/// Attached, no object shares a huge page with another: where the kernel gives huge pages
/// unasked, those under 2 MiB get none (MADV_NOHUGEPAGE); elsewhere they are left alone (no
/// huge page can come unasked, so the system call is saved); a larger one starts on a 2 MiB
/// boundary. Without a ring the runtime leaves the kernel's choice alone.
#[test]
fn attached_objects_never_share_a_huge_page() {
    let dir = Scratch::new("huge");
    let exe = compile(&dir, "huge", include_str!("c/huge.c"));
    let ring_path = dir.path("ring");
    let _ring = Ring::create(&ring_path, 1 << 10, DEFAULT_ADVICE_SLOTS).unwrap();
    let attached = huge_page_flags(&dir, &exe, Some(&ring_path));
    let [small0, small1, large, aligned] = attached[..] else { unreachable!() };
    let unasked = huge_pages_unasked();
    assert_eq!(
        (small0.1, small1.1, aligned.1),
        (unasked, unasked, unasked),
        "1 MiB objects with MADV_NOHUGEPAGE where huge pages come unasked ({unasked}), else without: {attached:x?}"
    );
    assert_eq!(aligned.0 % 65536, 0, "the aligned 1 MiB object: {aligned:x?}");
    assert!(!large.1, "the 3 MiB object keeps its huge pages: {large:x?}");
    assert_eq!(large.0 % (2 << 20), 0, "the 3 MiB object starts on a 2 MiB boundary: {large:x?}");
    let alone = huge_page_flags(&dir, &exe, None);
    assert!(alone.iter().all(|&(_, nh)| !nh), "without a ring the kernel's choice stands: {alone:x?}");
}
