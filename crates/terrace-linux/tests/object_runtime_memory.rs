//! Memory `terrace run --objects` keeps per live object beside the policy's record (issue 15: the
//! seed's runtime keeps 136 bytes per object record, object tiering §5.5; the policy's own record
//! is crates/terrace-policy/tests/object_record_memory.rs): the live machine's map from an
//! object's (pid, address) to its policy ranges, which it needs to tell the policy what a free
//! releases. Measured with a counting allocator (this test binary's own), as the marginal heap
//! bytes of 100,000 more live objects, so the ring's and buffers' fixed sizes cancel out.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use terrace_alloc_ring::{Event, EventKind, Ring};
use terrace_linux::object_runtime::ObjectRuntime;

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

#[test]
fn a_live_object_costs_the_live_machine_less_than_50_bytes() {
    let mut rt = ObjectRuntime::create(PathBuf::from("/usr/lib/libterrace_alloc.so")).unwrap();
    let ring = Ring::open(rt.ring_path()).unwrap();
    let producer = ring.producer();
    let mut out = Vec::new();
    let mut made = 0u64;
    // Allocations of a page each from two processes, handed over in batches the ring holds.
    let mut live_after = |n: u64, rt: &mut ObjectRuntime, out: &mut Vec<terrace_model::ObjectEvent>| {
        while made < n {
            for _ in 0..4096 {
                let (pid, addr) = (1000 + (made % 2) as u32, 0x7f00_0000_0000 + made * 4096);
                let e = Event {
                    kind: EventKind::Alloc,
                    tid: pid,
                    pid,
                    node: -1,
                    addr,
                    bytes: 4096,
                    site: made % 64,
                    time_ns: 0,
                };
                assert!(producer.push(&e));
                made += 1;
            }
            rt.take(1, &mut |_, addr, bytes| Some(vec![(addr, bytes)]), out);
            out.clear();
        }
        LIVE.load(Ordering::Relaxed)
    };
    let at_100k = live_after(100_000, &mut rt, &mut out);
    let at_200k = live_after(200_000, &mut rt, &mut out);
    assert_eq!(rt.counters().allocs, made);
    let per_object = (at_200k - at_100k) as f64 / 100_000.0;
    eprintln!("the live machine keeps {per_object:.1} B per live object");
    // With the policy's record (below 86 B, crates/terrace-policy/tests/object_record_memory.rs),
    // a live object costs a `terrace run --objects` less than the seed's 136 B.
    assert!(per_object < 50.0, "{per_object:.1} B per live object");
}
