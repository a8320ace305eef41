//! Latency by pointer chase: each load's address is the value the previous load returned, so
//! loads cannot overlap and the time per load is the memory's latency.
//!
//! The random chase links one word per 64 B line into a single cycle in random order over a
//! buffer larger than the last-level cache (`read_latency_random_ns`); the sequential chase links
//! the lines in address order (`read_latency_sequential_ns`). Prefetchers stay on (turning them
//! off needs model-specific registers), so the sequential figure is what a dependent walk in
//! address order costs with them: lower than a figure measured with them off.

use super::{pin_to_cpu, thread_cpu_time, NodeBuffer, ProbeError, SplitMix};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Words per 64 B line.
const LINE_WORDS: usize = 8;

/// Links every line of `words` into one cycle in random order; returns the first word's index.
/// Each line's first word holds the word index of the next line.
pub fn link_random(words: &mut [u64], seed: u64) -> usize {
    let lines = words.len() / LINE_WORDS;
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut rng = SplitMix(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    for k in 0..lines {
        let next = order[(k + 1) % lines] as usize;
        words[order[k] as usize * LINE_WORDS] = (next * LINE_WORDS) as u64;
    }
    order[0] as usize * LINE_WORDS
}

/// Links every line to the next one in address order, the last back to the first.
pub fn link_sequential(words: &mut [u64]) -> usize {
    let lines = words.len() / LINE_WORDS;
    for k in 0..lines {
        words[k * LINE_WORDS] = (((k + 1) % lines) * LINE_WORDS) as u64;
    }
    0
}

/// Words a streamer reads between looks at the clock's flags: 1 MiB.
const PIECE_WORDS: usize = 1 << 17;

/// Loads per timed round: long enough that reading the clock costs nothing, short enough to stop
/// near the time asked for.
const ROUND: u64 = 1 << 16;

/// Follows the chase from `start` for about `time` of wall clock, after `warm` untimed loads;
/// ns per load of the thread's CPU time.
pub fn chase(words: &[u64], start: usize, warm: u64, time: Duration) -> f64 {
    let mut at = start;
    for _ in 0..warm {
        at = words[at] as usize;
    }
    let begun = Instant::now();
    let cpu = thread_cpu_time();
    let mut loads = 0u64;
    while loads == 0 || begun.elapsed() < time {
        for _ in 0..ROUND {
            at = words[at] as usize;
        }
        loads += ROUND;
    }
    let ns = (thread_cpu_time() - cpu).as_nanos() as f64;
    std::hint::black_box(at);
    ns / loads as f64
}

/// Latency of the random chase (already linked in `buffer`, from `start`) measured on
/// `chaser_cpu` while `streamer_cpus` each read their share of the same buffer as fast as they
/// can: returns (ns per load, the streamers' GB/s plus the chase's own).
pub fn loaded(
    buffer: &NodeBuffer,
    start: usize,
    chaser_cpu: u32,
    streamer_cpus: &[u32],
    time: Duration,
) -> Result<(f64, f64), ProbeError> {
    let words = buffer.words();
    let stop = AtomicBool::new(false);
    let started = AtomicBool::new(false);
    // Each streamer's bytes per ns of its own CPU time, as f64 bits, once it has stopped.
    let rates: Vec<AtomicU64> = streamer_cpus.iter().map(|_| AtomicU64::new(0)).collect();
    let share = words.len() / streamer_cpus.len().max(1);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, &cpu) in streamer_cpus.iter().enumerate() {
            let part = &words[i * share..(i + 1) * share];
            let (stop, started, rate) = (&stop, &started, &rates[i]);
            handles.push(s.spawn(move || -> Result<(), ProbeError> {
                pin_to_cpu(cpu)?;
                // Short pieces, so the streamer notices the chase's start and stop promptly;
                // it streams untimed until the chase starts and counts only what ran beside it.
                let mut pieces = part.chunks(PIECE_WORDS).cycle();
                while !started.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                    std::hint::black_box(super::bandwidth::read_pass(pieces.next().unwrap_or_default()));
                }
                let cpu = thread_cpu_time();
                let mut bytes = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let piece = pieces.next().unwrap_or_default();
                    std::hint::black_box(super::bandwidth::read_pass(piece));
                    bytes += std::mem::size_of_val(piece) as u64;
                }
                let ns = (thread_cpu_time() - cpu).as_nanos().max(1) as f64;
                rate.store((bytes as f64 / ns).to_bits(), Ordering::Relaxed);
                Ok(())
            }));
        }
        let chased = (|| {
            pin_to_cpu(chaser_cpu)?;
            // Let the streamers reach full speed before timing.
            std::thread::sleep(Duration::from_millis(20));
            started.store(true, Ordering::Relaxed);
            Ok(chase(words, start, 0, time))
        })();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().expect("a streamer thread does not panic")?;
        }
        let ns: f64 = chased?;
        // Bytes per ns is GB/s.
        let streamed: f64 = rates.iter().map(|r| f64::from_bits(r.load(Ordering::Relaxed))).sum();
        Ok((ns, streamed + 64.0 / ns))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycle_len(words: &[u64], start: usize) -> usize {
        let mut at = words[start] as usize;
        let mut n = 1;
        while at != start {
            at = words[at] as usize;
            n += 1;
        }
        n
    }

    #[test]
    fn random_links_form_one_cycle_through_every_line() {
        let mut words = vec![0u64; 8 * 1000];
        let start = link_random(&mut words, 3);
        assert_eq!(cycle_len(&words, start), 1000);
        // Not address order: some line's successor is not the next line.
        assert!((0..1000).any(|k| words[k * 8] != (((k + 1) % 1000) * 8) as u64));
    }

    #[test]
    fn sequential_links_follow_address_order() {
        let mut words = vec![0u64; 8 * 10];
        let start = link_sequential(&mut words);
        assert_eq!(cycle_len(&words, start), 10);
        assert_eq!(words[9 * 8], 0);
        assert_eq!(words[3 * 8], 32);
    }
}
