//! The buffer a machine reads its accesses ahead into, handed on to the next machine of the same
//! thread when the machine is dropped.
//!
//! A policy with the `future` tracker (the oracle) makes the machine read a whole horizon ahead,
//! which grows the buffer to tens of MiB at the built-in workloads' default sizes. Freed, memory
//! that large goes back to the kernel (glibc serves it with mmap), and the next run faults every
//! page of its buffer in again: 37% of an oracle run on `gups` at size 0.25 was page faults
//! (`perf record`, 2026-11-29), and `optimal` and `compare` run machine after machine on each
//! thread. Kept here, the next buffer is already mapped. The accesses themselves are never
//! carried over: a buffer is handed out empty.

use std::cell::RefCell;
use terrace_model::Access;

/// The largest buffer kept, in accesses (512 MiB): past this a run is long enough that a new
/// buffer's faults are a small part of it, and an idle thread should not hold more.
const MAX_KEPT: usize = 32 << 20;

thread_local! {
    static SPARE: RefCell<Vec<Access>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for at least `capacity` accesses: the thread's spare if it has one.
pub(crate) fn take(capacity: usize) -> Vec<Access> {
    let mut buf = SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()));
    buf.reserve(capacity);
    buf
}

/// Keeps `buf` (emptied) as the thread's spare, unless the spare is larger or `buf` is larger
/// than [`MAX_KEPT`].
pub(crate) fn give_back(mut buf: Vec<Access>) {
    if buf.capacity() > MAX_KEPT {
        return;
    }
    buf.clear();
    SPARE.with(|s| {
        let mut spare = s.borrow_mut();
        if spare.capacity() < buf.capacity() {
            *spare = buf;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_comes_back_empty_with_its_room() {
        let mut buf = take(16);
        buf.extend(std::iter::repeat_n(Access::read(64, 64, 0, 1), 1000));
        let room = buf.capacity();
        give_back(buf);
        let again = take(16);
        assert!(again.is_empty());
        assert_eq!(again.capacity(), room);
        // Taken, the spare is gone: a second machine on the thread gets a new buffer.
        assert!(take(0).capacity() < room);
    }
}
