//! tracefs mounted on demand by several callers at once (a binary of its own: it unmounts the
//! host's tracefs, which no other test may be reading meanwhile).

use std::sync::{Arc, Barrier};
use terrace_linux::tracefs::EventFormat;

#[test]
fn callers_that_find_tracefs_unmounted_at_once_all_get_it() {
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "mounting tracefs needs root: the CI host must give it");
        eprintln!("skipped: mounting tracefs needs root");
        return;
    }
    for round in 0..20 {
        // Unmounted if nothing holds it (a tracer running on this host keeps it busy, and then
        // the round tests only that a mounted tracefs is found).
        let _ = nix::mount::umount("/sys/kernel/tracing");
        let start = Arc::new(Barrier::new(8));
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    EventFormat::load("sched", "sched_process_fork").map(|f| f.id)
                })
            })
            .collect();
        let ids: Vec<_> = callers.into_iter().map(|c| c.join().unwrap()).collect();
        for id in &ids {
            // The second of two mounts at once fails (EBUSY): it must find the first's.
            assert!(id.is_ok(), "round {round}: {:?}", id.as_ref().err().map(|e| e.to_string()));
        }
    }
}
