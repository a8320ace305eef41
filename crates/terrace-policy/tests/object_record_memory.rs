//! Memory per object record of the object policy's engine (issue 15: the seed's runtime keeps 136
//! bytes per object record, object tiering §5.5; goal: below it, with what the live machine keeps
//! per object, crates/terrace-linux/tests/object_runtime_memory.rs). Measured, not computed from
//! struct sizes: a counting allocator (this test binary's own) adds up what the heap holds after
//! the engine records many live objects, over the records, tree nodes included.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use terrace_model::TierId;
use terrace_policy::object_tiering::{Engine, Priority, Settings, Trigger};

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator, only counting the bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Live heap bytes per record once `n` objects of a page each have been recorded, all in one
/// interval or over `intervals` of them (each interval's records merged into the tree).
fn bytes_per_record(n: u64, intervals: u64) -> f64 {
    let settings = Settings {
        priority: Priority::AccessesPerByte,
        trigger: Trigger::Time { intervals: u32::MAX },
        alpha: 0.1,
        split_bytes: 64 << 20,
        fast_fill: 0.9,
        site_share: Some(1.0),
    };
    let mut engine = Engine::new(settings);
    let before = LIVE.load(Ordering::Relaxed);
    let per = n / intervals;
    for interval in 0..intervals {
        for j in 0..per {
            // Interleaved addresses: each interval's objects fall between earlier ones.
            let k = j * intervals + interval;
            engine.allocated(0x7f00_0000_0000 + k * 4096, 4096, k % 64, 0, TierId::SLOW, k);
        }
        // The interval's end turns its pending allocations into records.
        engine.close_interval();
    }
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    assert_eq!(engine.records().count() as u64, per * intervals);
    bytes as f64 / (per * intervals) as f64
}

#[test]
fn an_object_record_takes_less_memory_than_the_seeds() {
    let n = 200_000;
    let one = bytes_per_record(n, 1);
    let many = bytes_per_record(n, 100);
    eprintln!(
        "object records: {one:.1} B each (recorded in one interval), {many:.1} B (over 100); seed 136 B"
    );
    assert!(one > 0.0 && many > 0.0);
    // The seed's figure is the goal (issue 15) for all a live object costs: this record (about
    // 82 B) and the live machine's map entry (below 50 B,
    // crates/terrace-linux/tests/object_runtime_memory.rs) together below 136 B.
    assert!(
        one.max(many) < 86.0,
        "{one:.1} / {many:.1} B per record: with the live machine's 50 B, over the seed's 136"
    );
}
