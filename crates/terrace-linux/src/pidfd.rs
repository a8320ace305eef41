//! A process descriptor (pidfd_open(2), Linux 5.3): polling it wakes when the process exits, so
//! a watcher sees the exit at once rather than at its next look, and it names the process even
//! after its pid is reused.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A descriptor of one process.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
}

impl Pidfd {
    /// Opens a descriptor of process `pid`.
    pub fn open(pid: i32) -> io::Result<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Pidfd { fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) } })
    }

    /// Waits up to `timeout` for the process to exit; true if it has (a zombie not yet waited
    /// for included).
    pub fn wait_exit(&self, timeout: Duration) -> io::Result<bool> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)) {
            Ok(n) => Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsRawFd for Pidfd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The poll wakes when the child exits, well before the timeout, and not while it runs.
    #[test]
    fn polling_wakes_at_the_exit() {
        let mut child = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
        let pidfd = Pidfd::open(child.id() as i32).unwrap();
        assert!(!pidfd.wait_exit(Duration::from_millis(10)).unwrap(), "sleep 0.2 still runs");
        let t = Instant::now();
        assert!(pidfd.wait_exit(Duration::from_secs(20)).unwrap());
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(child.try_wait().unwrap().is_some());
    }
}
