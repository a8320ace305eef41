//! `terrace-hotcold`: the workload the live-machine tests manage.
//!
//! It maps a hot set and a cold set of anonymous memory, optionally first-touched on one NUMA
//! node, fills every 8-byte word with a value derived from its index, then for a while keeps
//! rewriting random words of the hot set while never touching the cold set. A running checksum
//! follows every write, so at the end (and every `--verify-every` seconds) a full pass can prove
//! that no write was lost and no page was corrupted by however many migrations happened
//! underneath. It reports where its pages are, as the kernel says (move_pages with no target).

use clap::Parser;
use std::time::{Duration, Instant};
use terrace_linux::numa_sys;
use terrace_linux::shadow_region::ShadowRegion;

#[derive(Parser)]
#[command(about = "Keep a hot set busy and a cold set idle, and prove the data survives migration")]
struct Args {
    /// Hot set size, MiB.
    #[arg(long, default_value_t = 4)]
    hot_mib: usize,
    /// Cold set size, MiB.
    #[arg(long, default_value_t = 16)]
    cold_mib: usize,
    /// A read-hot set, MiB: read as often as the hot set is written, never written (0: none).
    #[arg(long, default_value_t = 0)]
    read_mib: usize,
    /// How long to run, seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// First-touch both sets on this NUMA node (MPOL_BIND while filling, then default policy).
    #[arg(long)]
    start_node: Option<u32>,
    /// First-touch the cold set on this node instead (the others on --start-node's, if given).
    #[arg(long)]
    cold_node: Option<u32>,
    /// Also verify every N seconds (0: only at the end).
    #[arg(long, default_value_t = 0.0)]
    verify_every: f64,
    /// Back the sets with transparent huge pages (2 MiB-aligned, MADV_HUGEPAGE) instead of 4 KiB pages.
    #[arg(long)]
    thp: bool,
    /// Print where the pages are every N seconds (0: only at the end).
    #[arg(long, default_value_t = 0.0)]
    report_every: f64,
    /// Make the read set read-only (mprotect PROT_READ) once it is filled, as mtier's programs
    /// make their read-only data (mtier §3.2).
    #[arg(long, requires = "read_mib")]
    protect_read: bool,
    /// Map the read set through Terrace's shadow agent (a memfd Terrace can keep shadow copies
    /// in: docs/live.md, "Shadow copies"), and serve Terrace's moves if it started us.
    #[arg(long, requires = "read_mib", conflicts_with = "thp")]
    shadow_read: bool,
    /// After this many seconds, make the read set writable and write every word of it once (a
    /// new value each), then go on reading: a shadow of it must never be switched back to. With
    /// `--shadow-read`, the write waits (up to 3 s more) until some page is shadowed, and is
    /// repeated (with the same values, within those 3 s) until it has dropped a shadow.
    #[arg(long, requires = "read_mib")]
    write_read_at: Option<f64>,
    /// At the end, write where each page is to this file, a line per page: set, page within the
    /// set, node (-1: absent). The guest's validation of `terrace advise` compares it with the
    /// placement a replay of the program's recording ends with (docs/your-program.md).
    #[arg(long)]
    placement_file: Option<std::path::PathBuf>,
}

const PAGE: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE / 8;

/// An anonymous private mapping, page-aligned, or the shadow agent's region.
struct Region {
    ptr: *mut u64,
    words: usize,
    shadow: Option<&'static ShadowRegion>,
}

const HUGE: usize = 2 << 20;

impl Region {
    fn map(bytes: usize, thp: bool) -> Region {
        // For huge pages, map 2 MiB more and use the aligned part inside.
        let bytes = if thp { bytes.div_ceil(HUGE) * HUGE } else { bytes };
        let len = if thp { bytes + HUGE } else { bytes };
        // SAFETY: a fresh anonymous private mapping; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            eprintln!("terrace-hotcold: cannot map {bytes} bytes: {}", std::io::Error::last_os_error());
            std::process::exit(2);
        }
        let start = if thp { (p as usize).next_multiple_of(HUGE) } else { p as usize } as *mut libc::c_void;
        let advice = if thp { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
        // SAFETY: advice on (part of) the mapping just made.
        unsafe { libc::madvise(start, bytes, advice) };
        Region { ptr: start as *mut u64, words: bytes / 8, shadow: None }
    }
    /// The shadow agent's region, serving Terrace if Terrace started us.
    fn shadow(bytes: usize) -> Region {
        let region = match ShadowRegion::new(bytes.div_ceil(PAGE)) {
            Ok(r) => &*Box::leak(Box::new(r)),
            Err(e) => {
                eprintln!("terrace-hotcold: cannot map a shadow region of {bytes} bytes: {e}");
                std::process::exit(2);
            }
        };
        match region.serve_terrace() {
            Ok(true) => println!("hotcold shadow agent connected"),
            Ok(false) => println!("hotcold shadow agent: not started by terrace run, serving nobody"),
            Err(e) => println!("hotcold shadow agent could not connect: {e}"),
        }
        Region { ptr: region.as_ptr() as *mut u64, words: region.pages() * PAGE / 8, shadow: Some(region) }
    }
    /// Shadows the program's writes have dropped (a region without shadows: `u64::MAX`, as if
    /// its writes had met every shadow they could).
    fn dropped(&self) -> u64 {
        self.shadow.map_or(u64::MAX, |s| s.shadows_dropped())
    }
    fn words(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is `words` u64s long, readable and writable, and owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.words) }
    }
    /// The words to read only: the read set may be mapped read-only (`--protect-read`).
    fn read_words(&self) -> &[u64] {
        // SAFETY: the mapping is `words` u64s long, readable, and owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.words) }
    }
    fn range(&self) -> (u64, u64) {
        (self.ptr as u64, self.ptr as u64 + self.words as u64 * 8)
    }
    /// Makes the region read-only (a write to it would now fault), or writable again; the
    /// shadow region through its agent, which keeps its shadows' protection.
    fn protect(&self, read_only: bool) {
        let done = match self.shadow {
            Some(s) => s.set_writable(!read_only),
            None => {
                let prot = if read_only { libc::PROT_READ } else { libc::PROT_READ | libc::PROT_WRITE };
                // SAFETY: the region is a mapping of ours, page-aligned, `words * 8` bytes long.
                match unsafe { libc::mprotect(self.ptr as *mut libc::c_void, self.words * 8, prot) } {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            }
        };
        if let Err(e) = done {
            eprintln!("terrace-hotcold: cannot change the read set's protection: {e}");
            std::process::exit(2);
        }
    }
    fn bind(&self, node: Option<u32>) {
        if self.shadow.is_some() {
            // A memfd's pages follow the policy of the thread that first touches them; mbind
            // would set the file's own policy, which would then bind every later copy too.
            let done = match node {
                Some(n) => numa_sys::set_mempolicy(numa_sys::MPOL_BIND, &[n]),
                None => numa_sys::set_mempolicy(numa_sys::MPOL_DEFAULT, &[]),
            };
            if let Err(e) = done {
                eprintln!("terrace-hotcold: cannot set the memory policy ({node:?}): {e}");
                std::process::exit(2);
            }
            return;
        }
        let (mode, what) = match node {
            Some(_) => (numa_sys::MPOL_BIND, "bind"),
            None => (numa_sys::MPOL_DEFAULT, "unbind"),
        };
        if let Err(e) = numa_sys::mbind(self.ptr as usize, self.words * 8, mode, node, 0) {
            eprintln!("terrace-hotcold: cannot {what} memory ({node:?}): {e}");
            std::process::exit(2);
        }
    }
    /// Each page's node, as the kernel says (-1: not present, or the query failed).
    fn page_nodes(&self) -> Vec<i32> {
        let pages: Vec<u64> =
            (0..self.words / WORDS_PER_PAGE).map(|i| self.range().0 + (i * PAGE) as u64).collect();
        let mut status = vec![0i32; pages.len()];
        if numa_sys::query_nodes(0, &pages, &mut status).is_err() {
            return vec![-1; pages.len()];
        }
        status
    }
    /// Pages per node: (node id or -1 for "not present/error", count).
    fn nodes(&self) -> Vec<(i32, usize)> {
        let mut counts: Vec<(i32, usize)> = Vec::new();
        for s in self.page_nodes() {
            let n = s.max(-1);
            match counts.iter_mut().find(|(k, _)| *k == n) {
                Some((_, c)) => *c += 1,
                None => counts.push((n, 1)),
            }
        }
        counts.sort();
        counts
    }
}

/// The initial value of word `i`: distinct per word, so a misplaced or zeroed page shows.
fn initial(i: usize) -> u64 {
    (i as u64 ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9).rotate_left(31)
}

fn placement(name: &str, r: &Region) -> String {
    let parts: Vec<String> = r
        .nodes()
        .iter()
        .map(|(n, c)| if *n >= 0 { format!("node{n}={c}") } else { format!("absent={c}") })
        .collect();
    format!("{name} {}", parts.join(" "))
}

fn main() {
    let args = Args::parse();
    let mut hot = Region::map(args.hot_mib.max(1) << 20, args.thp);
    let mut cold = Region::map(args.cold_mib.max(1) << 20, args.thp);
    let mut read = (args.read_mib > 0).then(|| match args.shadow_read {
        true => Region::shadow(args.read_mib << 20),
        false => Region::map(args.read_mib << 20, args.thp),
    });
    for r in [Some(&hot), read.as_ref()].into_iter().flatten() {
        if args.start_node.is_some() {
            r.bind(args.start_node);
        }
    }
    let cold_node = args.cold_node.or(args.start_node);
    if cold_node.is_some() {
        cold.bind(cold_node);
    }
    let mut sum = 0u64;
    for (i, w) in hot.words().iter_mut().enumerate() {
        *w = initial(i);
        sum = sum.wrapping_add(*w);
    }
    let hot_words = hot.words;
    for (i, w) in cold.words().iter_mut().enumerate() {
        *w = initial(hot_words + i);
        sum = sum.wrapping_add(*w);
    }
    // The read set's words are checked against their initial values, not summed.
    let read_base = hot_words + cold.words;
    if let Some(r) = read.as_mut() {
        for (i, w) in r.words().iter_mut().enumerate() {
            *w = initial(read_base + i);
        }
    }
    // Later moves are Terrace's business, not the policy's.
    for r in [Some(&hot), read.as_ref()].into_iter().flatten() {
        if args.start_node.is_some() {
            r.bind(None);
        }
    }
    if cold_node.is_some() {
        cold.bind(None);
    }
    if args.protect_read {
        if let Some(r) = read.as_ref() {
            r.protect(true);
        }
    }
    // What the read set's words hold: their initial values, then (`--write-read-at`) these.
    let rewritten = |i: usize| initial(i) ^ 0x5a5a_5a5a_5a5a_5a5a;
    let mut read_written = false;
    let mut write_until = f64::INFINITY;
    let (h, c) = (hot.range(), cold.range());
    println!("hotcold pid={} hot={:#x}-{:#x} cold={:#x}-{:#x}", std::process::id(), h.0, h.1, c.0, c.1);
    let report = |hot: &Region, cold: &Region, read: &Option<Region>| {
        let mut line = format!("{} | {}", placement("hot", hot), placement("cold", cold));
        if let Some(r) = read {
            line += &format!(" | {}", placement("read", r));
        }
        line
    };
    println!("hotcold start {}", report(&hot, &cold, &read));

    let verify =
        |hot: &mut Region, cold: &mut Region, read: &mut Option<Region>, sum: u64, written: bool| -> bool {
            let expected = |i: usize| if written { rewritten(read_base + i) } else { initial(read_base + i) };
            let read_ok = read.as_mut().is_none_or(|r| {
                r.read_words().iter().enumerate().all(|(i, w)| {
                    // SAFETY: a word of the read mapping; volatile, so every check really reads memory.
                    unsafe { std::ptr::read_volatile(w) == expected(i) }
                })
            });
            let mut total = 0u64;
            for w in hot.words().iter() {
                total = total.wrapping_add(*w);
            }
            let mut cold_ok = true;
            for (i, w) in cold.words().iter().enumerate() {
                total = total.wrapping_add(*w);
                cold_ok &= *w == initial(hot_words + i);
            }
            read_ok && cold_ok && total == sum
        };

    let start = Instant::now();
    let mut rng = 0x2545_f491_4f6c_dd1du64 ^ std::process::id() as u64;
    let (mut updates, mut next_verify, mut next_report) = (0u64, args.verify_every, args.report_every);
    let words = hot.words;
    let mut seen = 0u64;
    loop {
        // As many reads of the read set as writes of the hot set.
        if let Some(r) = read.as_ref() {
            let n = r.words as u64;
            let rw = r.read_words();
            for _ in 0..4096 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // SAFETY: the index is within the read mapping.
                seen = seen.wrapping_add(unsafe { std::ptr::read_volatile(&rw[(rng % n) as usize]) });
            }
        }
        // A burst of writes between clock checks.
        for _ in 0..4096 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng % words as u64) as usize;
            let w = &mut hot.words()[i];
            let new = w.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            sum = sum.wrapping_add(new.wrapping_sub(*w));
            // A volatile write, so that every update really reaches memory.
            // SAFETY: `w` is a valid, aligned word of the hot mapping.
            unsafe { std::ptr::write_volatile(w, new) };
            updates += 1;
        }
        let t = start.elapsed().as_secs_f64();
        // Write again while no write met a shadow (see below): the values are the same.
        let write_again = read_written && t < write_until && read.as_ref().is_some_and(|r| r.dropped() == 0);
        if let (Some(at), Some(r), true) = (args.write_read_at, read.as_mut(), !read_written || write_again) {
            // With shadows, the write is meant to meet some: if the policy's pool happens to be
            // empty at `at` (between two rotations), wait for it to hold a shadow again, for at
            // most 3 s, so that the run tests what it says. The pool can also empty while the
            // write runs (a bookkeeping epoch switches every page back to its shadow): if no
            // shadow was dropped by it, the program writes again once some page is shadowed,
            // within the same 3 s.
            write_until = at + 3.0;
            let no_shadow_yet = r.shadow.is_some_and(|s| s.shadowed() == 0) && t < write_until;
            if t >= at && !no_shadow_yet {
                // Writable again (if it was made read-only), then every word once.
                r.protect(false);
                for (i, w) in r.words().iter_mut().enumerate() {
                    // SAFETY: a word of the read mapping; volatile, so the write reaches memory.
                    unsafe { std::ptr::write_volatile(w, rewritten(read_base + i)) };
                }
                read_written = true;
                println!("hotcold wrote the read set at t={t:.1}s");
            }
        }
        if args.verify_every > 0.0 && t >= next_verify {
            if !verify(&mut hot, &mut cold, &mut read, sum, read_written) {
                println!("hotcold checksum MISMATCH at t={t:.1}s after {updates} updates");
                std::process::exit(3);
            }
            next_verify += args.verify_every;
        }
        if args.report_every > 0.0 && t >= next_report {
            println!("hotcold t={t:.1}s {}", report(&hot, &cold, &read));
            next_report += args.report_every;
        }
        if t >= args.seconds {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    println!("hotcold end {}", report(&hot, &cold, &read));
    if let Some(path) = &args.placement_file {
        let mut text = String::new();
        for (name, r) in [("hot", Some(&hot)), ("cold", Some(&cold)), ("read", read.as_ref())] {
            for (i, node) in r.map(Region::page_nodes).unwrap_or_default().iter().enumerate() {
                text += &format!("{name} {i} {}\n", node.max(&-1));
            }
        }
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("terrace-hotcold: cannot write {}: {e}", path.display());
        }
    }
    std::hint::black_box(seen);
    if let Some(s) = read.as_ref().and_then(|r| r.shadow) {
        println!(
            "hotcold shadow {} pages shadowed now, {} shadows dropped by writes",
            s.shadowed(),
            s.shadows_dropped()
        );
    }
    if verify(&mut hot, &mut cold, &mut read, sum, read_written) {
        println!("hotcold checksum ok after {updates} updates");
    } else {
        println!("hotcold checksum MISMATCH after {updates} updates");
        std::process::exit(3);
    }
}
