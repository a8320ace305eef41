//! This process's own CPU time, all threads together: what a recording costs beside the
//! program it records, and what `optimal` costs when its candidates run on several cores.

/// CPU seconds (user and system) this process has used so far, `None` where the platform does
/// not say (getrusage(2) is Unix's).
pub fn own_cpu_seconds() -> Option<f64> {
    #[cfg(unix)]
    {
        // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
            return None;
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Some(secs(u.ru_utime) + secs(u.ru_stime))
    }
    #[cfg(not(unix))]
    {
        None
    }
}
