//! Running a system call inside a program Terrace has just started, before its first instruction.
//!
//! The fault sampler needs a userfaultfd of the program's address space, and userfaultfd(2)
//! creates one only for the calling process. An in-process agent (LD_PRELOAD) cannot reach
//! static binaries, so Terrace starts the program traced, stops it at exec, and has it execute
//! `userfaultfd()` and later `close()` by pointing its registers at a `syscall` instruction
//! written over its entry point; the original instruction bytes and registers are put back
//! before the program runs, and tracing ends (the same technique as debuggers and CRIU's
//! parasite). The new descriptor is copied out with pidfd_getfd(2).
//!
//! Only for a child Terrace started (`terrace run`): attaching to a running process would stop it
//! in an unknown system call. x86-64 only.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Command};

/// A program stopped at its exec, traced by Terrace.
pub struct StoppedChild {
    pid: nix::unistd::Pid,
}

/// Starts `cmd` traced and waits until it stops at exec, before its first instruction.
pub fn spawn_stopped(cmd: &mut Command) -> io::Result<(Child, StoppedChild)> {
    use std::os::unix::process::CommandExt;
    // SAFETY: PTRACE_TRACEME allocates nothing; it only marks this (child) process traced.
    unsafe {
        cmd.pre_exec(|| nix::sys::ptrace::traceme().map_err(io::Error::from));
    }
    let child = cmd.spawn()?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    match nix::sys::wait::waitpid(pid, None).map_err(io::Error::from)? {
        nix::sys::wait::WaitStatus::Stopped(_, nix::sys::signal::Signal::SIGTRAP) => {
            Ok((child, StoppedChild { pid }))
        }
        other => Err(io::Error::other(format!("the program did not stop at exec: {other:?}"))),
    }
}

impl StoppedChild {
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Executes system call `nr` with `args` in the child and returns its result (a negative
    /// errno on failure), restoring the child's registers and instructions afterwards.
    #[cfg(target_arch = "x86_64")]
    pub fn syscall(&self, nr: i64, args: [u64; 6]) -> io::Result<i64> {
        use nix::sys::ptrace;
        let saved = ptrace::getregs(self.pid)?;
        let ip = saved.rip as ptrace::AddressType;
        let word = ptrace::read(self.pid, ip)?;
        // `syscall` is 0f 05; little-endian, the low two bytes come first.
        let patched = (word & !0xffff) | 0x050f;
        ptrace::write(self.pid, ip, patched)?;
        let mut regs = saved;
        regs.rax = nr as u64;
        regs.orig_rax = u64::MAX; // not inside a system call: no restart on resume
        (regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9) =
            (args[0], args[1], args[2], args[3], args[4], args[5]);
        let run = || -> io::Result<i64> {
            ptrace::setregs(self.pid, regs)?;
            ptrace::step(self.pid, None)?;
            match nix::sys::wait::waitpid(self.pid, None)? {
                nix::sys::wait::WaitStatus::Stopped(_, nix::sys::signal::Signal::SIGTRAP) => {}
                other => return Err(io::Error::other(format!("unexpected stop: {other:?}"))),
            }
            Ok(ptrace::getregs(self.pid)?.rax as i64)
        };
        let result = run();
        // Put everything back whatever happened, so the program starts as it would have.
        let restored = ptrace::write(self.pid, ip, word).and_then(|_| ptrace::setregs(self.pid, saved));
        let value = result?;
        restored?;
        Ok(value)
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn syscall(&self, _nr: i64, _args: [u64; 6]) -> io::Result<i64> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "creating a descriptor inside a program is x86-64 only",
        ))
    }

    /// Creates a userfaultfd inside the child and returns Terrace's copy of it; the child's own
    /// descriptor is closed again, so its descriptor table ends as it began.
    pub fn create_userfaultfd(&self) -> io::Result<OwnedFd> {
        let flags = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
        let fd = self.syscall(libc::SYS_userfaultfd, [flags, 0, 0, 0, 0, 0])?;
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd as i32));
        }
        let copy = copy_fd(self.pid(), fd as RawFd);
        let closed = self.syscall(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0]);
        let copy = copy?;
        if let Ok(rc) = closed {
            if rc < 0 {
                tracing::warn!("closing the program's own userfaultfd copy failed: errno {}", -rc);
            }
        }
        Ok(copy)
    }

    /// Lets the child run, untraced.
    pub fn release(self) -> io::Result<()> {
        nix::sys::ptrace::detach(self.pid, None).map_err(io::Error::from)
    }
}

/// Copies descriptor `fd` of process `pid` into this process (pidfd_getfd, Linux 5.6+).
fn copy_fd(pid: i32, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pidfd is a fresh descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    use std::os::fd::AsRawFd;
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags; returns a new descriptor.
    let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: copy is a fresh descriptor we own (close-on-exec, as pidfd_getfd makes it).
    Ok(unsafe { OwnedFd::from_raw_fd(copy as RawFd) })
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Ignored by default: a container or a Yama ptrace_scope of 3 may forbid tracing even a
    /// child. The guest (tests/vm) runs it with `--include-ignored`, where it must pass.
    #[test]
    #[ignore = "needs ptrace of a child: runs in the guest (tests/vm)"]
    fn a_system_call_runs_in_the_child_and_the_child_then_runs_as_normal() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exit 7"]);
        let (mut child, stopped) = spawn_stopped(&mut cmd).unwrap_or_else(|e| {
            panic!("cannot trace a child here ({e}); this test needs ptrace: runs in the guest (tests/vm)")
        });
        // getpid() inside the child returns the child's pid, not ours.
        let pid = stopped.syscall(libc::SYS_getpid, [0; 6]).unwrap();
        assert_eq!(pid, child.id() as i64);
        stopped.release().unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(7));
    }
}
