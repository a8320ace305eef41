//! Running a system call inside the managed program: to create the fault sampler's userfaultfd.
//!
//! userfaultfd(2) creates a descriptor only for the calling process's address space, and an
//! in-process agent (LD_PRELOAD) cannot reach static binaries, so Terrace has the program itself
//! execute `userfaultfd()` and later `close()`, under ptrace, and copies the descriptor out with
//! pidfd_getfd(2) (the technique of debuggers and CRIU's parasite code). Two ways in:
//!
//! - A program Terrace starts ([`spawn_stopped`]) is traced from its exec and stopped before its
//!   first instruction, single-threaded: a `syscall` instruction is written over its entry point
//!   for the call and the bytes are put back before it runs.
//! - A program that is running ([`create_userfaultfd_in_running`]: the program a wrapper exec'd)
//!   is seized and interrupted for the call and let go at once; it is never left traced. Its other
//!   threads go on running, so no instruction is written: the call runs on a `syscall`
//!   instruction the program already has (its vDSO has some).
//!
//! Both share [`Tracee`]: save every register, run the call with `orig_rax = -1` (so the kernel
//! does not take it for an interrupted call to restart), single-step it, and put every register
//! back, `orig_rax` and `rax` included, so that a system call the program was blocked in is
//! restarted as if the stop had not happened (as CRIU's compel does). While Terrace holds the
//! thread its signals are blocked (PTRACE_SETSIGMASK), so one sent meanwhile (a shell's SIGCHLD)
//! waits, pending, until the mask is put back as Terrace lets go; one that comes first, as the
//! thread stops, or cannot be blocked is passed on, never dropped, and a running program is
//! stopped again for the call. x86-64 only.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Command};

use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// A program stopped at its exec, traced by Terrace.
pub struct StoppedChild {
    tracee: Tracee,
}

/// Starts `cmd` traced and waits until it stops at exec, before its first instruction.
pub fn spawn_stopped(cmd: &mut Command) -> io::Result<(Child, StoppedChild)> {
    use std::os::unix::process::CommandExt;
    // SAFETY: PTRACE_TRACEME allocates nothing; it only marks this (child) process traced.
    unsafe {
        cmd.pre_exec(|| nix::sys::ptrace::traceme().map_err(io::Error::from));
    }
    let child = cmd.spawn()?;
    let pid = Pid::from_raw(child.id() as i32);
    let stopped = match nix::sys::wait::waitpid(pid, None).map_err(io::Error::from)? {
        nix::sys::wait::WaitStatus::Stopped(_, Signal::SIGTRAP) => Tracee::stopped(pid),
        other => Err(io::Error::other(format!("the program did not stop at exec: {other:?}"))),
    };
    match stopped {
        Ok(tracee) => Ok((child, StoppedChild { tracee })),
        Err(e) => {
            // It is ours and stopped: let it run rather than leave it stopped for ever.
            let _ = ptrace::detach(pid, None);
            Err(e)
        }
    }
}

impl StoppedChild {
    pub fn pid(&self) -> i32 {
        self.tracee.pid.as_raw()
    }

    /// Executes system call `nr` with `args` in the child and returns its result (a negative
    /// errno on failure), restoring the child's registers and instructions afterwards.
    pub fn syscall(&self, nr: i64, args: [u64; 6]) -> io::Result<i64> {
        let pid = self.tracee.pid;
        // The program has not run yet and has one thread: the `syscall` instruction may be
        // written over its first one.
        let ip = self.tracee.saved_ip() as ptrace::AddressType;
        let word = ptrace::read(pid, ip)?;
        // `syscall` is 0f 05; little-endian, the low two bytes come first.
        ptrace::write(pid, ip, (word & !0xffff) | 0x050f)?;
        let result = self.tracee.call(ip as u64, nr, args);
        // Put everything back whatever happened, so the program starts as it would have.
        let restored =
            ptrace::write(pid, ip, word).map_err(io::Error::from).and_then(|_| self.tracee.restore());
        let value = result?;
        restored?;
        Ok(value)
    }

    /// Creates a userfaultfd inside the child and returns Terrace's copy of it; the child's own
    /// descriptor is closed again, so its descriptor table ends as it began.
    pub fn create_userfaultfd(&self) -> io::Result<OwnedFd> {
        make_userfaultfd(self.pid(), |nr, args| self.syscall(nr, args))
    }

    /// Lets the child run, untraced (with a signal that arrived while it was held, if one did).
    pub fn release(self) -> io::Result<()> {
        self.tracee.detach()
    }
}

/// Creates a userfaultfd inside the running process `pid` (all of whose threads may be running,
/// or blocked in system calls) and returns Terrace's copy; the process's own descriptor is closed
/// again. The process is seized, its main thread interrupted, the calls run on a `syscall`
/// instruction of its own (its vDSO's), every register put back and the process let go: it is
/// traced for a few system calls' time, never left stopped or traced, and a system call the main
/// thread was blocked in is restarted (except the few Linux never restarts after a stop, such as
/// epoll_wait, which return EINTR as after SIGSTOP and SIGCONT; signal(7)).
///
/// Refused, with the reason, where it is not safe or not allowed: another tracer (a debugger),
/// a seccomp filter Terrace did not pass on to the process (it might kill the process for the
/// call), a 32-bit process, ptrace forbidden (Yama, no CAP_SYS_PTRACE), or the main thread gone.
/// A signal that arrives before the call runs is passed on and the process let go untouched;
/// then it is stopped again, up to five times in all.
pub fn create_userfaultfd_in_running(pid: i32) -> io::Result<OwnedFd> {
    // A signal that comes first (a shell's SIGCHLD, as a wrapper script runs its commands) is
    // passed on with nothing run, so the call is tried again: once the process has taken the
    // signal, the next stop most likely finds none.
    let mut attempt = 1;
    loop {
        match create_userfaultfd_once(pid) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted && attempt < SIGNAL_ATTEMPTS => {
                tracing::debug!("pid {pid}: {e}; trying again");
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                return Err(io::Error::new(e.kind(), format!("{e} ({SIGNAL_ATTEMPTS} times)")))
            }
            made => return made,
        }
    }
}

/// How many times [`create_userfaultfd_in_running`] stops the process when each time a signal
/// comes first.
const SIGNAL_ATTEMPTS: usize = 5;

fn create_userfaultfd_once(pid: i32) -> io::Result<OwnedFd> {
    fits_injection(pid)?;
    let tracee = Tracee::seize(Pid::from_raw(pid))?;
    let made = find_syscall_instruction(pid)
        .and_then(|at| make_userfaultfd(pid, |nr, args| tracee.call(at, nr, args)));
    let released = tracee.detach();
    let fd = made?;
    released?;
    Ok(fd)
}

/// Has the process make a userfaultfd with `syscall` (which runs one system call inside it),
/// copies it out and has the process close its own.
fn make_userfaultfd(pid: i32, syscall: impl Fn(i64, [u64; 6]) -> io::Result<i64>) -> io::Result<OwnedFd> {
    let flags = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
    let fd = syscall(libc::SYS_userfaultfd, [flags, 0, 0, 0, 0, 0])?;
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd as i32));
    }
    let copy = copy_fd(pid, fd as RawFd);
    match syscall(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0]) {
        Ok(0) => {}
        Ok(rc) => tracing::warn!("pid {pid} could not close its own userfaultfd copy ({fd}): errno {}", -rc),
        Err(e) => tracing::warn!(
            "pid {pid} keeps descriptor {fd}, a close-on-exec userfaultfd Terrace had it create: \
             closing it failed: {e}"
        ),
    }
    copy
}

/// Why a running process must not be made to run a system call, if it must not: read from
/// /proc/PID/status before touching it.
fn fits_injection(pid: i32) -> io::Result<()> {
    let field = |status: &str, name: &str| -> Option<String> {
        status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string())
    };
    let theirs = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let ours = std::fs::read_to_string("/proc/self/status")?;
    if let Some(tracer) = field(&theirs, "TracerPid:").filter(|t| t != "0") {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!("pid {tracer} (a debugger or tracer) traces the program, and a process has one tracer"),
        ));
    }
    // A filter may kill the process for a system call it does not expect. The filters Terrace
    // passed on when it started the program let userfaultfd() through (Terrace checked it may
    // call it); a filter the program added itself is unknown.
    let mode = field(&theirs, "Seccomp:").unwrap_or_default();
    if mode != "0" && !mode.is_empty() {
        let filters = (field(&theirs, "Seccomp_filters:"), field(&ours, "Seccomp_filters:"));
        let inherited = mode == "2"
            && field(&ours, "Seccomp:").as_deref() == Some("2")
            && matches!(&filters, (Some(a), Some(b)) if a == b);
        if !inherited {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the program runs under a seccomp filter of its own (Seccomp: {mode} in \
                     /proc/{pid}/status), which might kill it for a userfaultfd() call"
                ),
            ));
        }
    }
    Ok(())
}

/// The address of a `syscall` instruction (0f 05) in an executable mapping of `pid`: the vDSO's
/// (its fallbacks call the kernel), else the first executable mapping that has one. Only these
/// two bytes are executed, single-stepped, so they may even sit inside a longer instruction.
fn find_syscall_instruction(pid: i32) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem"))?;
    let mut executable: Vec<(u64, u64, bool)> = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        let Some((s, e)) = range.split_once('-') else { continue };
        let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else { continue };
        // [vsyscall] is emulated or execute-only: never run there.
        if perms.starts_with("r-x") && !line.ends_with("[vsyscall]") {
            executable.push((s, e, line.ends_with("[vdso]")));
        }
    }
    executable.sort_by_key(|&(_, _, vdso)| !vdso);
    const CHUNK: u64 = 1 << 20;
    for (s, e, _) in executable {
        let mut at = s;
        // Up to 64 MiB of each mapping, in chunks overlapping by one byte.
        while at < e && at < s + (64 << 20) {
            let len = (e - at).min(CHUNK) as usize;
            let mut buf = vec![0u8; len];
            let Ok(n) = mem.read_at(&mut buf, at) else { break };
            if let Some(i) = buf[..n].windows(2).position(|w| w == [0x0f, 0x05]) {
                return Ok(at + i as u64);
            }
            if n < 2 {
                break;
            }
            at += n as u64 - 1;
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "no `syscall` instruction found in the program's executable mappings",
    ))
}

/// A thread of the program held in a ptrace stop, with every register it had: the one place
/// that runs a system call inside the program and puts the thread back as it was.
struct Tracee {
    pid: Pid,
    #[cfg(target_arch = "x86_64")]
    saved: libc::user_regs_struct,
    /// A signal that arrived while Terrace held the thread: passed on when it lets go.
    pending: std::cell::Cell<Option<Signal>>,
    /// The thread's signal mask when it stopped, put back when Terrace lets go. Meanwhile every
    /// signal is blocked (PTRACE_SETSIGMASK), so one sent meanwhile stays pending, to be taken
    /// after, rather than stopping the calls (a shell gets a SIGCHLD for every command it runs).
    mask: u64,
    /// Whether another process is its parent (a process the program started): then an exit
    /// Terrace sees while it traces the process is Terrace's to collect first, and until it
    /// does the parent waits for it (ptrace(2): a tracee's exit goes to its tracer first).
    hand_back: bool,
}

/// The signal mask of traced thread `pid` (PTRACE_GETSIGMASK, Linux 3.11; the mask a system
/// call such as ppoll will put back, where it runs with a temporary one).
fn signal_mask(pid: Pid) -> io::Result<u64> {
    let mut mask = 0u64;
    // SAFETY: PTRACE_GETSIGMASK writes `addr` bytes (the kernel's sigset_t, 8) to `data`.
    let rc = unsafe {
        libc::ptrace(libc::PTRACE_GETSIGMASK, pid.as_raw(), std::mem::size_of::<u64>(), &mut mask as *mut u64)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(mask)
}

/// Sets the signal mask of traced thread `pid` (PTRACE_SETSIGMASK; SIGKILL and SIGSTOP stay
/// unblocked whatever it says).
fn set_signal_mask(pid: Pid, mask: u64) -> io::Result<()> {
    // SAFETY: PTRACE_SETSIGMASK reads `addr` bytes (the kernel's sigset_t, 8) from `data`.
    let rc = unsafe {
        libc::ptrace(libc::PTRACE_SETSIGMASK, pid.as_raw(), std::mem::size_of::<u64>(), &mask as *const u64)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How a traced thread stopped (ptrace(2), "Stopped states").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Signal-delivery-stop: `sig` is about to be delivered.
    Signal(i32),
    /// PTRACE_EVENT stop `event`, with its signal (SIGTRAP after PTRACE_INTERRUPT, the stopping
    /// signal for a group-stop).
    Event { event: i32, sig: i32 },
}

/// waitid(2) for `pid` with `flags`; None if WNOHANG found nothing.
fn waitid(pid: Pid, flags: libc::c_int) -> io::Result<Option<libc::siginfo_t>> {
    loop {
        // SAFETY: siginfo_t is plain old data; all zeroes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes at most one siginfo_t into `info`.
        let rc = unsafe { libc::waitid(libc::P_PID, pid.as_raw() as libc::id_t, &mut info, flags) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: waitid filled in a SIGCHLD siginfo (or left zeroes): si_pid is valid in both.
        return Ok((unsafe { info.si_pid() } != 0).then_some(info));
    }
}

/// Waits until the traced thread `pid` stops. If the process exits instead, an error says it is
/// gone. Terrace's own child is not reaped (Terrace's machine reaps it and learns its status);
/// another's (`hand_back`) is collected, which hands it back to its parent: left uncollected,
/// it would stay a traced zombie its parent waits for as long as Terrace runs (a shell whose
/// command exited as Terrace made a userfaultfd in it hung in wait4 for ten minutes).
fn wait_stop(pid: Pid, hand_back: bool) -> io::Result<Stop> {
    loop {
        let peek = libc::WSTOPPED | libc::WEXITED | libc::WNOWAIT | libc::__WALL;
        let info = waitid(pid, peek)?.ok_or_else(|| io::Error::other("waitid reported nothing"))?;
        if matches!(info.si_code, libc::CLD_EXITED | libc::CLD_KILLED | libc::CLD_DUMPED) {
            if hand_back {
                hand_back_exit(pid);
            }
            return Err(io::Error::new(io::ErrorKind::NotFound, "the program exited"));
        }
        // Consume the stop; without WEXITED this cannot reap an exit that happened since.
        let Some(info) = waitid(pid, libc::WSTOPPED | libc::WNOHANG | libc::__WALL)? else { continue };
        // SAFETY: a stop's siginfo carries the status (the ptrace stop's exit code).
        let code = unsafe { info.si_status() };
        let (sig, event) = (code & 0xff, (code >> 8) & 0xff);
        return Ok(if event == 0 { Stop::Signal(sig) } else { Stop::Event { event, sig } });
    }
}

/// Collects the exit of `pid`, a process Terrace traces but did not start, if it has exited or
/// exits within a second (it was found gone, or killed while held), so that its parent can
/// reap it: as its tracer Terrace is told first, and the parent only once Terrace has waited.
fn hand_back_exit(pid: Pid) {
    for _ in 0..1000 {
        match waitid(pid, libc::WEXITED | libc::WNOHANG | libc::__WALL) {
            // Collected (the parent is told now), or no longer Terrace's to collect.
            Ok(Some(_)) => {
                tracing::debug!("pid {pid} exited while traced: handed back to its parent");
                return;
            }
            Err(_) => return,
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
    tracing::warn!("pid {pid} did not exit within a second of its tracer losing it");
}

/// Whether `pid`'s parent is another process than this one (procfs gives the real parent, not
/// a tracer); a process gone reads as another's, which costs a wait that finds nothing.
fn parent_is_another(pid: Pid) -> bool {
    crate::process::Life::of(pid.as_raw()).map(|life| life.ppid as u32) != Some(std::process::id())
}

impl Tracee {
    /// Takes a thread already in a ptrace stop (a program stopped at exec), and blocks its
    /// signals until it is let go.
    fn stopped(pid: Pid) -> io::Result<Self> {
        let tracee = Tracee {
            pid,
            #[cfg(target_arch = "x86_64")]
            saved: ptrace::getregs(pid)?,
            pending: std::cell::Cell::new(None),
            mask: signal_mask(pid)?,
            hand_back: parent_is_another(pid),
        };
        tracee.check_arch()?;
        set_signal_mask(pid, !0)?;
        Ok(tracee)
    }

    /// Seizes the running process `pid` and stops its main thread (PTRACE_SEIZE, then
    /// PTRACE_INTERRUPT); lets it go again on any failure.
    fn seize(pid: Pid) -> io::Result<Self> {
        let hand_back = parent_is_another(pid);
        ptrace::seize(pid, ptrace::Options::empty()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("cannot attach to pid {pid} with ptrace: {e} (needs CAP_SYS_PTRACE or a Yama ptrace_scope below 2)"),
            )
        })?;
        if let Err(e) = ptrace::interrupt(pid) {
            // Not stopped: the process is gone, or going (detaching a running tracee fails); its
            // exit is Terrace's to collect where another process is its parent.
            if ptrace::detach(pid, None).is_err() && hand_back {
                hand_back_exit(pid);
            }
            return Err(io::Error::other(format!("cannot stop pid {pid}: {e}")));
        }
        match wait_stop(pid, hand_back)? {
            Stop::Event { event: libc::PTRACE_EVENT_STOP, sig: libc::SIGTRAP } => {}
            Stop::Signal(sig) => {
                // A signal came first: let it through and leave the process alone.
                let sig = Signal::try_from(sig).ok();
                let _ = ptrace::detach(pid, sig);
                let name = sig.map_or("a signal".into(), |s| s.as_str().to_string());
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    format!("{name} arrived for pid {pid} as Terrace stopped it: passed on, and the process let go"),
                ));
            }
            Stop::Event { sig, .. } => {
                let _ = ptrace::detach(pid, None);
                return Err(io::Error::other(format!(
                    "pid {pid} is stopped (signal {sig}, job control): it was not made to run anything"
                )));
            }
        }
        let tracee = Tracee::stopped(pid).inspect_err(|_| {
            let _ = ptrace::detach(pid, None);
        })?;
        #[cfg(target_arch = "x86_64")]
        let tracee = {
            let mut t = tracee;
            t.abort_rseq_section();
            t
        };
        Ok(tracee)
    }

    #[cfg(target_arch = "x86_64")]
    fn check_arch(&self) -> io::Result<()> {
        // __USER_CS: a 64-bit process; a 32-bit one (0x23) has other system call numbers.
        if self.saved.cs != 0x33 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("pid {} is not a 64-bit process (cs {:#x})", self.pid, self.saved.cs),
            ));
        }
        Ok(())
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn check_arch(&self) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "running a system call inside a program is x86-64 only",
        ))
    }

    #[cfg(target_arch = "x86_64")]
    fn saved_ip(&self) -> u64 {
        self.saved.rip
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn saved_ip(&self) -> u64 {
        0
    }

    /// A thread stopped inside a restartable sequence (rseq(2)) must resume at its abort handler:
    /// it was preempted, and the kernel's own fixup at resume would see the injected call's
    /// instruction pointer instead, clear the section and let it run on as if it had not been.
    /// So the saved instruction pointer moves to the abort handler, as the kernel would move it.
    #[cfg(target_arch = "x86_64")]
    fn abort_rseq_section(&mut self) {
        use std::os::unix::fs::FileExt;
        /// struct ptrace_rseq_configuration (Linux 5.13+).
        #[repr(C)]
        #[derive(Default)]
        struct RseqConfig {
            rseq_abi_pointer: u64,
            rseq_abi_size: u32,
            signature: u32,
            flags: u32,
            pad: u32,
        }
        const PTRACE_GET_RSEQ_CONFIGURATION: libc::c_uint = 0x420f;
        let mut config = RseqConfig::default();
        // SAFETY: the kernel writes at most `addr` bytes (the structure's size) into `config`.
        let rc = unsafe {
            libc::ptrace(
                PTRACE_GET_RSEQ_CONFIGURATION,
                self.pid.as_raw(),
                std::mem::size_of::<RseqConfig>(),
                &mut config as *mut RseqConfig,
            )
        };
        if rc < 0 || config.rseq_abi_pointer == 0 {
            return; // an older kernel, or no rseq area registered
        }
        let Ok(mem) = std::fs::File::open(format!("/proc/{}/mem", self.pid)) else { return };
        let read_u64 = |addr: u64| -> Option<u64> {
            let mut b = [0u8; 8];
            mem.read_exact_at(&mut b, addr).ok().map(|()| u64::from_ne_bytes(b))
        };
        // struct rseq: cpu_id_start, cpu_id (u32 each), then the rseq_cs pointer.
        let Some(cs) = read_u64(config.rseq_abi_pointer + 8).filter(|&cs| cs != 0) else { return };
        // struct rseq_cs: version, flags (u32 each), start_ip, post_commit_offset, abort_ip.
        let (Some(start), Some(len), Some(abort)) = (read_u64(cs + 8), read_u64(cs + 16), read_u64(cs + 24))
        else {
            return;
        };
        let mut sig = [0u8; 4];
        let signed = mem.read_exact_at(&mut sig, abort.wrapping_sub(4)).is_ok()
            && u32::from_ne_bytes(sig) == config.signature;
        if self.saved.rip.wrapping_sub(start) < len && signed {
            tracing::debug!(
                "pid {} was stopped in a restartable sequence: it resumes at its abort handler",
                self.pid
            );
            self.saved.rip = abort;
        }
    }

    /// Runs system call `nr` with `args` in the thread, on the `syscall` instruction at `at`, and
    /// returns its result (a negative errno on failure). The registers stay changed until
    /// [`Self::restore`]. If a signal arrives for the thread first, it is kept to be passed on
    /// when Terrace lets go, and no further call is made.
    #[cfg(target_arch = "x86_64")]
    fn call(&self, at: u64, nr: i64, args: [u64; 6]) -> io::Result<i64> {
        if let Some(sig) = self.pending.get() {
            return Err(io::Error::other(format!(
                "{sig} arrived for the program meanwhile, so it runs nothing more"
            )));
        }
        let mut regs = self.saved;
        regs.rip = at;
        regs.rax = nr as u64;
        regs.orig_rax = u64::MAX; // not inside a system call: nothing to restart on resume
        (regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9) =
            (args[0], args[1], args[2], args[3], args[4], args[5]);
        ptrace::setregs(self.pid, regs)?;
        ptrace::step(self.pid, None)?;
        let stop = wait_stop(self.pid, self.hand_back)?;
        let after = ptrace::getregs(self.pid)?;
        // The call ran if the thread got past the instruction.
        let ran = after.rip == at + 2;
        match stop {
            Stop::Signal(libc::SIGTRAP) => {
                // The single step's trap comes from the kernel (si_code > 0); a SIGTRAP someone
                // sent (kill: si_code <= 0) is theirs and is passed on.
                if ptrace::getsiginfo(self.pid).map(|i| i.si_code <= 0).unwrap_or(false) {
                    self.pending.set(Some(Signal::SIGTRAP));
                }
            }
            Stop::Signal(sig) => self.pending.set(Signal::try_from(sig).ok()),
            Stop::Event { event, sig } => {
                return Err(io::Error::other(format!("unexpected ptrace stop: event {event}, signal {sig}")))
            }
        }
        if ran {
            Ok(after.rax as i64)
        } else {
            let sig = self.pending.get().map_or("a signal".into(), |s| s.as_str().to_string());
            Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("{sig} arrived for the program before the system call ran"),
            ))
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn call(&self, _at: u64, _nr: i64, _args: [u64; 6]) -> io::Result<i64> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "running a system call inside a program is x86-64 only",
        ))
    }

    /// Puts every register back as it was when the thread stopped.
    fn restore(&self) -> io::Result<()> {
        #[cfg(target_arch = "x86_64")]
        ptrace::setregs(self.pid, self.saved)?;
        Ok(())
    }

    /// Restores the registers and the signal mask and lets the thread go, untraced, passing on a
    /// signal that arrived meanwhile (one blocked meanwhile is pending, and taken as it runs).
    fn detach(self) -> io::Result<()> {
        let unmasked = set_signal_mask(self.pid, self.mask);
        let restored = self.restore().and(unmasked);
        let detached = ptrace::detach(self.pid, self.pending.get()).map_err(io::Error::from);
        // Not detached: it was killed while held (SIGKILL ends even a stopped tracee), and its
        // exit is Terrace's to collect where another process is its parent.
        if detached.is_err() && self.hand_back {
            hand_back_exit(self.pid);
        }
        restored.and(detached)
    }
}

/// Copies descriptor `fd` of process `pid` into this process (pidfd_getfd, Linux 5.6+).
fn copy_fd(pid: i32, fd: RawFd) -> io::Result<OwnedFd> {
    let pidfd = crate::pidfd::Pidfd::open(pid)?;
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
        use std::io::Read;
        let mut cmd = Command::new("/bin/sh");
        // The shell prints its own mask of blocked signals: std starts a child with none blocked.
        cmd.args([
            "-c",
            "while read -r l; do case $l in SigBlk*) echo \"$l\";; esac; done < /proc/self/status; exit 7",
        ])
        .stdout(std::process::Stdio::piped());
        let (mut child, stopped) = spawn_stopped(&mut cmd).unwrap_or_else(|e| {
            panic!("cannot trace a child here ({e}); this test needs ptrace: runs in the guest (tests/vm)")
        });
        // getpid() inside the child returns the child's pid, not ours.
        let pid = stopped.syscall(libc::SYS_getpid, [0; 6]).unwrap();
        assert_eq!(pid, child.id() as i64);
        stopped.release().unwrap();
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert_eq!(out, "SigBlk:\t0000000000000000\n", "the signals blocked while it was held stay blocked");
        assert_eq!(child.wait().unwrap().code(), Some(7));
    }

    /// Waits until `pid` is blocked in one of the system calls `nrs` (per /proc/PID/syscall).
    fn wait_blocked_in(pid: u32, nrs: &[i64]) {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let now = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            let nr = now.split_whitespace().next().and_then(|n| n.parse::<i64>().ok());
            if nr.is_some_and(|nr| nrs.contains(&nr)) {
                return;
            }
            assert!(std::time::Instant::now() < end, "pid {pid} never blocked in system call {nrs:?}: {now}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The process's descriptors that are userfaultfds.
    fn userfaultfds_of(pid: u32) -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
            .filter(|l| l.to_string_lossy().contains("userfaultfd"))
            .count()
    }

    fn is_userfaultfd(fd: &OwnedFd) -> bool {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .is_ok_and(|l| l.to_string_lossy().contains("userfaultfd"))
    }

    /// Runs `/bin/sh -c script` and, every few milliseconds while it runs, gives it a
    /// userfaultfd, up to `times` times, each time checking that its own copy was closed (no
    /// signal cut the calls short); then that it printed `printed` and exited 0. Returns how
    /// many it was given before it ended.
    fn inject_while_running(script: &str, times: usize, printed: &str) -> usize {
        use std::io::Read;
        use std::process::Stdio;
        let mut child = Command::new("/bin/sh").args(["-c", script]).stdout(Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        let mut injected = 0;
        while injected < times {
            match create_userfaultfd_in_running(pid as i32) {
                Ok(fd) => {
                    assert!(is_userfaultfd(&fd));
                    assert_eq!(userfaultfds_of(pid), 0, "the child kept its copy");
                    injected += 1;
                }
                Err(e) if child.try_wait().unwrap().is_some() => {
                    eprintln!("the child ended: {e}");
                    break;
                }
                Err(e) => panic!(
                    "injection {} into pid {pid} failed: {e}; this test needs ptrace: runs in the guest (tests/vm)",
                    injected + 1
                ),
            }
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert_eq!(out, printed);
        assert!(child.wait().unwrap().success());
        injected
    }

    /// A shell that runs one command after another gets a SIGCHLD for each: injections into it
    /// all succeed, each closing the shell's own descriptor (a signal sent meanwhile waits), the
    /// signals reach the shell (it counts every command it waited for) and it exits as it would.
    #[test]
    #[ignore = "needs ptrace of a child: runs in the guest (tests/vm)"]
    fn a_shell_taking_sigchld_after_sigchld_gets_its_userfaultfds() {
        let script = "i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done; echo $i";
        let injected = inject_while_running(script, 40, "1000\n");
        assert!(injected >= 10, "the child ended after {injected} injections");
    }

    /// A shell blocked in `read` on a pipe (dash reads; busybox polls first) is given a
    /// userfaultfd, keeps none itself, and its read goes on: it gets the line written afterwards
    /// and exits as it would have.
    #[test]
    #[ignore = "needs ptrace of a child: runs in the guest (tests/vm)"]
    fn a_child_blocked_in_read_gets_a_userfaultfd_and_its_read_goes_on() {
        use std::io::{Read, Write};
        use std::process::Stdio;
        let mut child = Command::new("/bin/sh")
            .args(["-c", "read line; echo \"got $line\"; exit 3"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        wait_blocked_in(pid, &[libc::SYS_read, libc::SYS_poll, libc::SYS_ppoll]);
        let blocked = || {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            status.lines().find(|l| l.starts_with("SigBlk:")).unwrap().to_string()
        };
        let before = blocked();
        for _ in 0..2 {
            let fd = create_userfaultfd_in_running(pid as i32).unwrap_or_else(|e| {
                panic!("cannot inject into pid {pid} ({e}); this test needs ptrace: runs in the guest (tests/vm)")
            });
            assert!(is_userfaultfd(&fd));
            assert_eq!(userfaultfds_of(pid), 0, "the child kept its copy");
            // Blocked again: the call was restarted, not failed (poll restarts through
            // restart_syscall, which carries its timeout on).
            let restarted = [libc::SYS_read, libc::SYS_poll, libc::SYS_ppoll, libc::SYS_restart_syscall];
            wait_blocked_in(pid, &restarted);
            // Its signals, all blocked while it was held, are as they were.
            assert_eq!(blocked(), before);
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(status.contains("TracerPid:\t0"), "the child is left traced");
        child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert_eq!(out, "got hello\n");
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }

    /// A shell counting in a loop (mostly in user mode, the main and only thread) is given a
    /// userfaultfd several times over and counts right.
    #[test]
    #[ignore = "needs ptrace of a child: runs in the guest (tests/vm)"]
    fn a_busy_child_gets_a_userfaultfd_and_counts_right() {
        // About 0.1 s natively, seconds in the guest (TCG).
        let script = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo $i";
        assert!(
            inject_while_running(script, 10, "20000\n") > 0,
            "the child ended before anything was injected"
        );
    }

    /// A child in `sleep` is given a userfaultfd and sleeps its full time, then exits 0.
    #[test]
    #[ignore = "needs ptrace of a child: runs in the guest (tests/vm)"]
    fn a_sleeping_child_gets_a_userfaultfd_and_sleeps_its_time() {
        let t = std::time::Instant::now();
        let mut child = Command::new("sleep").arg("1").spawn().unwrap();
        let pid = child.id();
        // coreutils sleep: clock_nanosleep; busybox: nanosleep (either, restarted alike).
        wait_blocked_in(pid, &[libc::SYS_clock_nanosleep, libc::SYS_nanosleep]);
        let fd = create_userfaultfd_in_running(pid as i32).unwrap_or_else(|e| {
            panic!("cannot inject into pid {pid} ({e}); this test needs ptrace: runs in the guest (tests/vm)")
        });
        assert!(is_userfaultfd(&fd));
        assert_eq!(userfaultfds_of(pid), 0, "the child kept its copy");
        assert!(t.elapsed() < std::time::Duration::from_millis(900), "the injection took too long to test");
        assert!(child.wait().unwrap().success());
        let slept = t.elapsed();
        assert!(slept >= std::time::Duration::from_secs(1), "slept only {slept:?}");
    }
}
