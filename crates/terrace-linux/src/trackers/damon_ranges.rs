//! The address ranges DAMON monitors in a process, where Terrace names them (DAMON's `fvaddr`
//! operations) rather than leaving them to DAMON's `vaddr` (docs/live.md, "DAMON on a
//! dynamically linked program").
//!
//! `vaddr` monitors everything between the address space's two largest unmapped gaps. In a
//! dynamically linked PIE on x86-64 that takes in the gap between the binary and its heap, which
//! the kernel randomises over 1 GiB, and DAMON's largest region is the monitored size over
//! `nr_regions/min`: with the gap counted, a test program's 8 MiB cold set merged with its hot
//! sets into regions of 6-15 MiB, each marking all its pages referenced. Here every mapping is
//! monitored and every gap but the smallest left out, and the ranges are committed again as the
//! program maps memory.

use std::fs;
use std::path::Path;

/// The most ranges one target is given: the `MAX_RANGES - 1` largest gaps between mappings are
/// left out, smaller ones are monitored with their neighbours (DAMON's `vaddr` leaves out 2).
/// Each range is at least one region for DAMON, which keeps at most 1,000 (Terrace's maximum).
pub const MAX_RANGES: usize = 32;

/// The ranges to monitor of a process whose /proc/PID/maps reads `maps`: its mappings, in
/// address order, neighbours joined, and joined across all but the `MAX_RANGES - 1` largest
/// gaps. The vsyscall page, which is no mapping of the process (it lies above user space), is
/// left out.
pub fn monitored_ranges(maps: &str) -> Vec<(u64, u64)> {
    let joined = mappings(maps);
    if joined.len() <= MAX_RANGES {
        return joined;
    }
    // The gaps to keep: the largest, by the index of the range after each.
    let mut gaps: Vec<(u64, usize)> =
        joined.windows(2).enumerate().map(|(i, w)| (w[1].0 - w[0].1, i + 1)).collect();
    gaps.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let mut kept: Vec<usize> = gaps[..MAX_RANGES - 1].iter().map(|g| g.1).collect();
    kept.sort_unstable();
    let mut out = Vec::with_capacity(MAX_RANGES);
    let mut start = joined[0].0;
    for &k in &kept {
        out.push((start, joined[k - 1].1));
        start = joined[k].0;
    }
    out.push((start, joined[joined.len() - 1].1));
    out
}

/// The mappings `maps` lists, in address order, neighbours and overlaps joined, the vsyscall page
/// left out.
fn mappings(maps: &str) -> Vec<(u64, u64)> {
    let mut mappings: Vec<(u64, u64)> = maps
        .lines()
        .filter(|l| !l.ends_with("[vsyscall]"))
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            let (a, b) = (u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?);
            (b > a).then_some((a, b))
        })
        .collect();
    mappings.sort_unstable();
    let mut joined: Vec<(u64, u64)> = Vec::with_capacity(mappings.len());
    for (a, b) in mappings {
        match joined.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => joined.push((a, b)),
        }
    }
    joined
}

/// What DAMON's own `vaddr` operations monitor of a process whose /proc/PID/maps reads `maps`,
/// and what it maps, in bytes: vaddr monitors from the lowest mapping to the highest, less the
/// two largest gaps between mappings (mm/damon/vaddr.c, `__damon_va_three_regions`), so every
/// other gap counts as monitored memory.
pub fn vaddr_extent(maps: &str) -> (u64, u64) {
    let joined = mappings(maps);
    let mapped = joined.iter().map(|(a, b)| b - a).sum();
    let (Some(first), Some(last)) = (joined.first(), joined.last()) else { return (0, 0) };
    let mut gaps: Vec<u64> = joined.windows(2).map(|w| w[1].0 - w[0].1).collect();
    gaps.sort_unstable_by(|x, y| y.cmp(x));
    (last.1 - first.0 - gaps.iter().take(2).sum::<u64>(), mapped)
}

/// Below this much monitored memory beyond the mappings, vaddr's gaps are left unremarked: a
/// statically linked program's or a small process's coarsen no region much.
const VADDR_GAP_WORTH_SAYING: u64 = 64 << 20;

/// Where DAMON runs `vaddr` (a kernel before 6.7, [`commits_regions`]), what its regions take in
/// of a process whose maps read `maps`, said when the gaps it monitors are at least what the
/// process maps and 64 MiB: DAMON keeps each region at most the monitored size over
/// `nr_regions/min` (10 here), so then a region may be wider than a tenth of the program's
/// memory, and all its pages share one count: a cold buffer beside hot memory looks used
/// (docs/live.md, "DAMON on a dynamically linked program").
pub fn vaddr_coarseness(maps: &str) -> Option<String> {
    let (monitored, mapped) = vaddr_extent(maps);
    let gaps = monitored.saturating_sub(mapped);
    (gaps >= mapped && gaps >= VADDR_GAP_WORTH_SAYING).then(|| {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        format!(
            "DAMON's vaddr monitors {:.0} MiB for the {:.1} MiB the program maps, the gaps between its \
             mappings counted (its own ranges, where a kernel from 6.7 on is given the mappings), \
             so a region may span up to {:.0} MiB and a cold buffer beside hot memory can look used; \
             where the kernel has the idle-page bitmap, it tracks each page (`[trackers] referenced = \
             \"idle-page\"`, `terrace record --tracker idle-page`)",
            mib(monitored),
            mib(mapped),
            mib(monitored) / 10.0
        )
    })
}

/// Process `pid`'s /proc/PID/maps, or `None` when it cannot be read (the process exited).
fn maps_of(pid: i32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/maps")).ok()
}

/// [`monitored_ranges`] of process `pid`, or `None` when its maps cannot be read (it exited)
/// or list nothing.
pub fn ranges_of(pid: i32) -> Option<Vec<(u64, u64)>> {
    Some(monitored_ranges(&maps_of(pid)?)).filter(|r| !r.is_empty())
}

/// [`vaddr_coarseness`] of process `pid`; `None` also when its maps cannot be read.
pub fn coarseness_of(pid: i32) -> Option<String> {
    vaddr_coarseness(&maps_of(pid)?)
}

/// Writes `ranges` as the regions of the target whose sysfs directory is `target`
/// (`.../targets/N`), for the next `on` or `commit` to apply.
pub fn write_regions(target: &Path, ranges: &[(u64, u64)]) -> std::io::Result<()> {
    let regions = target.join("regions");
    fs::write(regions.join("nr_regions"), ranges.len().to_string())?;
    for (i, (a, b)) in ranges.iter().enumerate() {
        let r = regions.join(i.to_string());
        fs::write(r.join("start"), a.to_string())?;
        fs::write(r.join("end"), b.to_string())?;
    }
    Ok(())
}

/// Whether a kernel of `release` (/proc/sys/kernel/osrelease) applies a target's regions at a
/// `commit` of a running kdamond: 6.7 and later, which have "mm/damon/sysfs: update monitoring
/// target regions for online input commit" (merged for 6.7; its backports to older stable
/// series are not counted here). Before it the ranges named at the start stay, and mappings
/// made after it would go unmonitored, so such a kernel keeps DAMON's `vaddr`.
pub fn commits_regions(release: &str) -> bool {
    crate::migrate::kernel_release(release).is_some_and(|v| v >= (6, 7))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dynamically linked PIE as the guest showed it: binary, heap 917 MiB above it, the
    /// program's buffers and libraries, the vdso, the stack, the vsyscall page.
    const PIE: &str = "\
55c949e7f000-55c949ec7000 r--p 00000000 00:02 113 /bin/terrace-hotcold
55c949ec7000-55c949f73000 r-xp 00047000 00:02 113 /bin/terrace-hotcold
55c949f73000-55c949f79000 r--p 000f2000 00:02 113 /bin/terrace-hotcold
55c949f79000-55c949f7b000 rw-p 000f7000 00:02 113 /bin/terrace-hotcold
55c983107000-55c983128000 rw-p 00000000 00:00 0 [heap]
7f1a64600000-7f1a65200000 rw-p 00000000 00:00 0
7f1a652df000-7f1a652e0000 ---p 00000000 00:00 0
7f1a652e0000-7f1a652e5000 rw-p 00000000 00:00 0
7f1a652e5000-7f1a6530b000 r--p 00000000 00:02 25 /lib/x86_64-linux-gnu/libc.so.6
7f1a6530b000-7f1a654ba000 r-xp 00026000 00:02 25 /lib/x86_64-linux-gnu/libc.so.6
7f1a654e9000-7f1a654ed000 r--p 00000000 00:00 0 [vvar]
7f1a654ed000-7f1a654ef000 r-xp 00000000 00:00 0 [vdso]
7ffc5b1d6000-7ffc5b1f7000 rw-p 00000000 00:00 0 [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
";

    #[test]
    fn vaddr_counts_every_gap_but_the_two_largest_and_says_so_where_they_outweigh_the_mappings() {
        let (monitored, mapped) = vaddr_extent(PIE);
        // The binary to its heap (917 MiB apart) and the libraries' mappings: the largest gaps,
        // heap to libraries and libraries to stack, are left out.
        assert_eq!(
            monitored,
            (0x55c983128000 - 0x55c949e7f000)
                + (0x7f1a654ef000 - 0x7f1a64600000)
                + (0x7ffc5b1f7000 - 0x7ffc5b1d6000)
        );
        assert_eq!(mapped, monitored_ranges(PIE).iter().map(|(a, b)| b - a).sum::<u64>());
        let said = vaddr_coarseness(PIE).expect("a PIE's gap is said");
        assert!(said.contains("monitors 930 MiB for the 15.1 MiB"), "{said}");
        // A statically linked program: its heap follows its binary.
        let static_maps = "\
00400000-004c0000 r-xp 00000000 00:02 113 /bin/terrace-hotcold
004c0000-004c8000 rw-p 000c0000 00:02 113 /bin/terrace-hotcold
004c8000-004ea000 rw-p 00000000 00:00 0 [heap]
7f1a64600000-7f1a65200000 rw-p 00000000 00:00 0
7ffc5b1d6000-7ffc5b1f7000 rw-p 00000000 00:00 0 [stack]
";
        let (monitored, mapped) = vaddr_extent(static_maps);
        assert_eq!(monitored, mapped);
        assert_eq!(vaddr_coarseness(static_maps), None);
        assert_eq!(vaddr_extent(""), (0, 0));
        assert_eq!(vaddr_coarseness(""), None);
    }

    #[test]
    fn the_gap_between_a_pie_s_binary_and_its_heap_is_not_monitored() {
        let r = monitored_ranges(PIE);
        assert_eq!(
            r,
            [
                (0x55c949e7f000, 0x55c949f7b000),
                (0x55c983107000, 0x55c983128000),
                (0x7f1a64600000, 0x7f1a65200000),
                (0x7f1a652df000, 0x7f1a654ba000),
                (0x7f1a654e9000, 0x7f1a654ef000),
                (0x7ffc5b1d6000, 0x7ffc5b1f7000),
            ]
        );
        let monitored: u64 = r.iter().map(|(a, b)| b - a).sum();
        // 15.1 MiB of mappings, where DAMON's vaddr would monitor the 917 MiB gap with them.
        assert!(monitored < 16 << 20, "{monitored}");
    }

    #[test]
    fn beyond_the_most_ranges_the_smallest_gaps_are_joined_over() {
        // 40 one-page mappings, 39 gaps; gap i (after mapping i) is i + 1 pages, so the 31 largest
        // are the last 31, and the first 8 are monitored with their neighbours.
        let mut maps = String::new();
        let mut at = 0x10000u64;
        let mut starts = Vec::new();
        for i in 0..40u64 {
            starts.push(at);
            maps.push_str(&format!("{:x}-{:x} rw-p 00000000 00:00 0\n", at, at + 0x1000));
            at += 0x1000 + (i + 1) * 0x1000;
        }
        let r = monitored_ranges(&maps);
        assert_eq!(r.len(), MAX_RANGES);
        assert_eq!(r[0], (starts[0], starts[8] + 0x1000));
        for (k, range) in r.iter().enumerate().skip(1) {
            assert_eq!(*range, (starts[8 + k], starts[8 + k] + 0x1000));
        }
        // Sorted and apart, as DAMON's sysfs requires of a target's regions.
        assert!(r.windows(2).all(|w| w[0].1 < w[1].0));
    }

    #[test]
    fn overlapping_or_touching_mappings_are_one_range_and_junk_lines_are_skipped() {
        let maps = "1000-3000 rw-p 0 00:00 0\n3000-5000 r--p 0 00:00 0\nnot a line\n2000-4000 rw-p 0 00:00 0\n9000-9000 rw-p\n";
        assert_eq!(monitored_ranges(maps), [(0x1000, 0x5000)]);
        assert!(monitored_ranges("").is_empty());
    }

    #[test]
    fn regions_are_committed_online_from_linux_6_7() {
        assert!(commits_regions("6.12.117+deb12-cloud-amd64"));
        assert!(commits_regions("6.7.0"));
        assert!(!commits_regions("6.6.30"));
        assert!(!commits_regions("6.1.0-18-amd64"));
        assert!(!commits_regions("5.19.0"));
        assert!(!commits_regions("garbage"));
    }
}
