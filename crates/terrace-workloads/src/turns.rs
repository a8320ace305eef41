//! Threads take turns: every multi-threaded generator emits one access per thread in rotation,
//! as concurrently running threads interleave in the memory system.

/// Passes the turn from thread `next` to the following one of `threads`; says whether the
/// rotation wrapped around to thread 0.
pub(crate) fn pass(next: &mut usize, threads: usize) -> bool {
    *next += 1;
    let wrapped = *next == threads;
    if wrapped {
        *next = 0;
    }
    wrapped
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_turn_goes_round_and_wraps_at_the_last_thread() {
        let mut t = 0;
        let seen: Vec<(usize, bool)> = (0..4).map(|_| (t, super::pass(&mut t, 3))).collect();
        assert_eq!(seen, [(0, false), (1, false), (2, true), (0, false)]);
    }
}
