//! The cost of move_pages(2) between two nodes, timed as Zi Yan's figures that the shipped
//! profiles cite (docs/hardware.md §10): one 4 KiB page in a call, 512 pages in one call, and one
//! transparent huge page; then fitted to the profile's `call_us`, `page_us` and `copy_gb_s`
//! ([`fit`]).

use super::{io_err, NodeBuffer, ProbeError};
use crate::numa_sys;
use std::time::Instant;

const SMALL: usize = 4096;
/// The least per-page cost a profile takes (terrace-sim's range for `migration.page_us`).
pub const LEAST_PAGE_US: f64 = 0.01;
const HUGE: usize = 2 << 20;

/// The three timings, µs each (the fastest of the repetitions in both directions: other load
/// on the host, or an emulated guest's stalls, only ever add time to a call).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timings {
    pub one_page_us: f64,
    pub batch_512_us: f64,
    /// `None` where the kernel gave no transparent huge page.
    pub one_thp_us: Option<f64>,
}

/// The profile's migration fields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    pub call_us: f64,
    pub page_us: f64,
    pub copy_gb_s: f64,
    /// The 2 MiB page cost more per byte than a 4 KiB page's whole cost, leaving no fixed
    /// per-page cost: `page_us` is [`LEAST_PAGE_US`] and the copy rate the 4 KiB pages' ([`fit`]).
    pub no_fixed_page_cost: bool,
}

/// Fits `t = call + pages x (page + bytes / copy)` to the three timings, as the shipped profiles
/// do with Zi Yan's: the 4 KiB page's share from 1 and 512 pages, the call's from 1 page, and the
/// copy rate from how much more a 2 MiB page costs than a 4 KiB one (the same fixed part,
/// 2093056 more bytes).
pub fn fit(t: &Timings) -> Result<Fit, String> {
    let per_small = (t.batch_512_us - t.one_page_us) / 511.0;
    let call_us = t.one_page_us - per_small;
    let thp = t.one_thp_us.ok_or("no 2 MiB timing")?;
    let extra_copy_us = thp - call_us - per_small;
    if per_small <= 0.0 || call_us <= 0.0 || extra_copy_us <= 0.0 {
        return Err(format!(
            "move_pages timings do not fit call + pages x per-page ({:.2} us for 1 page, {:.2} us for 512, {thp:.2} us for one 2 MiB page)",
            t.one_page_us, t.batch_512_us
        ));
    }
    let copy_gb_s = (HUGE - SMALL) as f64 / extra_copy_us / 1e3;
    let page_us = per_small - SMALL as f64 / copy_gb_s / 1e3;
    if page_us <= 0.0 {
        // The 2 MiB page's bytes came slower than a 4 KiB page's whole cost (an emulated guest
        // copies slowly and unevenly: 14-18 ms for 2 MiB against 29-36 us a 4 KiB page). One
        // copy rate cannot match both; the 4 KiB pages are what most moves are, so they are
        // matched exactly, with the least fixed per-page cost a profile takes, and a 2 MiB move
        // comes out cheaper than it was timed.
        return Ok(Fit {
            call_us,
            page_us: LEAST_PAGE_US,
            copy_gb_s: SMALL as f64 / (per_small - LEAST_PAGE_US) / 1e3,
            no_fixed_page_cost: true,
        });
    }
    Ok(Fit { call_us, page_us, copy_gb_s, no_fixed_page_cost: false })
}

/// As [`fit`] without a 2 MiB timing: the copy rate comes from elsewhere (another profile).
pub fn fit_with_copy_rate(t: &Timings, copy_gb_s: f64) -> Result<Fit, String> {
    let per_small = (t.batch_512_us - t.one_page_us) / 511.0;
    let call_us = t.one_page_us - per_small;
    let page_us = per_small - SMALL as f64 / copy_gb_s / 1e3;
    if per_small <= 0.0 || call_us <= 0.0 || page_us <= 0.0 {
        return Err(format!(
            "move_pages timings do not fit call + pages x per-page ({:.2} us for 1 page, {:.2} us for 512, copy at {copy_gb_s} GB/s)",
            t.one_page_us, t.batch_512_us
        ));
    }
    Ok(Fit { call_us, page_us, copy_gb_s, no_fixed_page_cost: false })
}

fn fastest(v: Vec<f64>) -> f64 {
    v.into_iter().fold(f64::INFINITY, f64::min)
}

/// Moves `pages` to `node` in one call and checks they landed; µs of the call.
fn timed_move(pages: &[u64], node: u32) -> Result<f64, ProbeError> {
    let nodes = vec![node as i32; pages.len()];
    let mut status = vec![i32::MIN; pages.len()];
    let begun = Instant::now();
    numa_sys::move_pages(0, pages, &nodes, &mut status, 0)
        .map_err(io_err(format!("move_pages to node {node}")))?;
    let us = begun.elapsed().as_secs_f64() * 1e6;
    if let Some(bad) = status.iter().find(|&&s| s != node as i32) {
        return Err(ProbeError::Implausible(format!(
            "move_pages left a page off node {node} (status {bad}); is node {node} full?"
        )));
    }
    Ok(us)
}

/// A buffer first touched on `node`, its policy then reset so move_pages may move it anywhere.
fn region(bytes: usize, node: u32, huge: bool) -> Result<NodeBuffer, ProbeError> {
    let buffer = NodeBuffer::new(bytes, node, huge)?;
    numa_sys::mbind(buffer.addr(), buffer.len(), numa_sys::MPOL_DEFAULT, None, 0)
        .map_err(io_err("mbind back to the default policy"))?;
    Ok(buffer)
}

/// Whether the kernel backed `[start, start + len)` with transparent huge pages.
fn is_huge(start: usize, len: usize) -> bool {
    std::fs::read_to_string("/proc/self/smaps")
        .map(|t| crate::bench_migrate::anon_huge_bytes(&t, start as u64, (start + len) as u64) >= len as u64)
        .unwrap_or(false)
}

/// Times the three moves between nodes `a` and `b`, `reps` times each way.
pub fn measure(a: u32, b: u32, reps: usize) -> Result<Timings, ProbeError> {
    let reps = reps.max(1);
    // 4 KiB pages: `reps` single pages each way, then 512 at once each way.
    let small = region(HUGE * 2, a, false)?;
    let addrs: Vec<u64> = (0..small.len() / SMALL).map(|i| (small.addr() + i * SMALL) as u64).collect();
    let mut one = Vec::new();
    for &page in addrs.iter().take(reps) {
        one.push(timed_move(&[page], b)?);
        one.push(timed_move(&[page], a)?);
    }
    let batch = &addrs[addrs.len() - 512..];
    let mut many = Vec::new();
    for _ in 0..reps {
        many.push(timed_move(batch, b)?);
        many.push(timed_move(batch, a)?);
    }
    drop(small);
    let huge = region(HUGE, a, true)?;
    let one_thp_us = if is_huge(huge.addr(), HUGE) {
        let page = [huge.addr() as u64];
        let mut thp = Vec::new();
        for _ in 0..reps {
            thp.push(timed_move(&page, b)?);
            thp.push(timed_move(&page, a)?);
        }
        // A split page moves as 512 small ones: only a page still whole counts.
        is_huge(huge.addr(), HUGE).then(|| fastest(thp))
    } else {
        None
    };
    Ok(Timings { one_page_us: fastest(one), batch_512_us: fastest(many), one_thp_us })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zi Yan's timings as profiles/cxl.toml fits them by hand: 58.70 us a call, 2.600 us a
    /// page, 3.511 GB/s.
    #[test]
    fn fit_reproduces_the_shipped_profiles_arithmetic() {
        let f =
            fit(&Timings { one_page_us: 62.47, batch_512_us: 1987.38, one_thp_us: Some(658.54) }).unwrap();
        assert!((f.call_us - 58.70).abs() < 0.005, "{f:?}");
        assert!((f.page_us - 2.600).abs() < 0.0005, "{f:?}");
        assert!((f.copy_gb_s - 3.511).abs() < 0.0005, "{f:?}");
    }

    #[test]
    fn fit_without_a_huge_page_takes_the_copy_rate_given() {
        // 10 us for 1 page, 10 + 511 x 2 = 1032 us for 512: 2 us a page, 8 us a call; at
        // 4.096 GB/s a 4 KiB copy takes 1 us, so 1 us is fixed.
        let t = Timings { one_page_us: 10.0, batch_512_us: 1032.0, one_thp_us: None };
        let f = fit_with_copy_rate(&t, 4.096).unwrap();
        assert!((f.call_us - 8.0).abs() < 1e-9 && (f.page_us - 1.0).abs() < 1e-9, "{f:?}");
        assert!(fit(&t).is_err());
    }

    /// A 2 MiB page slower per byte than a 4 KiB page's whole cost: the 4 KiB timings are
    /// matched with no fixed per-page cost (this guest's numbers under a busy host).
    #[test]
    fn a_slow_huge_page_leaves_the_small_pages_matched_without_a_fixed_cost() {
        let t =
            Timings { one_page_us: 358.0, batch_512_us: 358.0 + 511.0 * 28.786, one_thp_us: Some(18_000.0) };
        let f = fit(&t).unwrap();
        assert!(f.no_fixed_page_cost && f.page_us == LEAST_PAGE_US, "{f:?}");
        // One 4 KiB page's cost is now (almost) all copy: 28.786 us in all.
        assert!((f.page_us + 4096.0 / f.copy_gb_s / 1e3 - 28.786).abs() < 1e-6, "{f:?}");
        assert!((f.call_us - (358.0 - 28.786)).abs() < 1e-6, "{f:?}");
    }

    #[test]
    fn timings_that_cannot_fit_are_refused() {
        // 512 pages cheaper than one: no positive per-page cost.
        let t = Timings { one_page_us: 100.0, batch_512_us: 50.0, one_thp_us: Some(200.0) };
        assert!(fit(&t).unwrap_err().contains("do not fit"));
    }
}
