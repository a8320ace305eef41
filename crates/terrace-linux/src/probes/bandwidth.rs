//! Streaming bandwidth: threads pinned one per CPU, each reading (or writing) its own share of a
//! buffer bound to the node, pass after pass, for a fixed time. Writes use non-temporal stores
//! on x86_64, as the shipped profiles' write figures do (ntstore, docs/hardware.md §3), and plain
//! stores elsewhere.

use super::{pin_to_cpu, thread_cpu_time, ProbeError};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Reads every word of `words` once; the sum keeps the loads from being optimised away.
pub fn read_pass(words: &[u64]) -> u64 {
    let mut sums = [0u64; 8];
    for chunk in words.chunks_exact(8) {
        for (s, w) in sums.iter_mut().zip(chunk) {
            *s = s.wrapping_add(*w);
        }
    }
    sums.iter().fold(0, |a, b| a.wrapping_add(*b))
}

/// Writes every word of `words` once with `value`.
pub fn write_pass(words: &mut [u64], value: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_set1_epi64x, _mm_sfence, _mm_stream_si128};
        let (head, body, tail) = {
            // SAFETY: any bit pattern of two u64 is a valid __m128i; align_to keeps the middle
            // part aligned to 16 bytes, as _mm_stream_si128 requires.
            unsafe { words.align_to_mut::<__m128i>() }
        };
        head.fill(value);
        tail.fill(value);
        // SAFETY: SSE2 is part of every x86_64 CPU; each pointer is an aligned element of `body`.
        unsafe {
            let v = _mm_set1_epi64x(value as i64);
            for slot in body.iter_mut() {
                _mm_stream_si128(slot, v);
            }
            _mm_sfence();
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    words.fill(value);
}

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
}

/// GB/s of `cpus.len()` threads, one pinned per CPU, each streaming its equal share of `words`
/// for about `time` of wall clock, each timed by its own CPU time.
pub fn stream(
    words: &mut [u64],
    cpus: &[u32],
    direction: Direction,
    time: Duration,
) -> Result<f64, ProbeError> {
    let share = (words.len() / cpus.len().max(1)) & !7;
    let barrier = Barrier::new(cpus.len());
    let results: Vec<Result<(u64, f64), ProbeError>> = std::thread::scope(|s| {
        let handles: Vec<_> = words
            .chunks_mut(share.max(8))
            .zip(cpus)
            .map(|(part, &cpu)| {
                let barrier = &barrier;
                s.spawn(move || {
                    let pinned = pin_to_cpu(cpu);
                    barrier.wait();
                    pinned?;
                    let begun = Instant::now();
                    let cpu = thread_cpu_time();
                    let mut bytes = 0u64;
                    let mut pass = 0u64;
                    while bytes == 0 || begun.elapsed() < time {
                        match direction {
                            Direction::Read => {
                                std::hint::black_box(read_pass(part));
                            }
                            Direction::Write => write_pass(part, pass),
                        }
                        pass += 1;
                        bytes += std::mem::size_of_val(part) as u64;
                    }
                    Ok((bytes, (thread_cpu_time() - cpu).as_secs_f64()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a stream thread does not panic")).collect()
    });
    // Each thread's rate over its own CPU time, summed: what the threads stream when they run at
    // once, even where a busy host made them take turns.
    let mut total = 0.0;
    for r in results {
        let (bytes, secs) = r?;
        total += bytes as f64 / secs.max(1e-9) / 1e9;
    }
    Ok(total)
}

/// The two-point bandwidth curve a profile takes: `[[1, one], [n, all]]`, or the one point when
/// there is one CPU.
pub fn curve(one_thread_gb_s: f64, threads: usize, all_threads_gb_s: f64) -> Vec<(f64, f64)> {
    if threads <= 1 {
        vec![(1.0, one_thread_gb_s)]
    } else {
        vec![(1.0, one_thread_gb_s), (threads as f64, all_threads_gb_s)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_has_one_point_per_thread_count_measured() {
        assert_eq!(curve(7.5, 1, 7.5), vec![(1.0, 7.5)]);
        assert_eq!(curve(7.5, 8, 40.25), vec![(1.0, 7.5), (8.0, 40.25)]);
    }

    #[test]
    fn passes_read_and_write_every_word() {
        let mut words = vec![0u64; 1003];
        write_pass(&mut words, 3);
        assert!(words.iter().all(|&w| w == 3));
        assert_eq!(read_pass(&words), 3 * 1000, "read_pass reads whole 64 B lines");
    }
}
