//! The userfaultfd(2) interface Terrace uses: write-protect faults on anonymous memory.
//!
//! Only the part of the ABI the fault sampler and hpwp's protected copies need: the API
//! handshake, registering ranges for write-protect faults, setting and clearing protection (which
//! wakes a thread waiting on the range), and reading fault messages. The `userfaultfd` crate
//! generates its write-protect bindings with bindgen at build time (libclang), which the build
//! machines and the static guest build lack, so the few structures are declared here from
//! linux/userfaultfd.h.
//!
//! A userfaultfd acts on the address space it was created in (its `ctx->mm`), whichever process
//! issues the ioctls: Terrace creates one inside the managed program ([`crate::remote_syscall`])
//! and works it from outside. Closing the last descriptor unregisters every range and wakes every
//! waiting thread, so if Terrace dies the program runs on.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const UFFD_API: u64 = 0xAA;
/// Fault messages say whether a fault was a write-protect fault.
pub const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
/// Write-protect faults resolved by the kernel itself: the write goes on at once and leaves the
/// page's uffd-wp bit clear for PAGEMAP_SCAN to report (Linux 6.7; [`crate::pagemap_scan`]).
pub const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_PAGEFAULT_FLAG_WP: u64 = 1 << 1;

#[repr(C)]
#[derive(Default)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// struct uffd_msg: an event byte, padding, then (for page faults) flags, address and thread id.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct UffdMsg {
    event: u8,
    reserved1: u8,
    reserved2: u16,
    reserved3: u32,
    flags: u64,
    address: u64,
    ptid: u32,
    pad: u32,
}

nix::ioctl_readwrite!(uffdio_api, 0xAA, 0x3F, UffdioApi);
nix::ioctl_readwrite!(uffdio_register, 0xAA, 0x00, UffdioRegister);
nix::ioctl_read!(uffdio_unregister, 0xAA, 0x01, UffdioRange);
nix::ioctl_readwrite!(uffdio_writeprotect, 0xAA, 0x06, UffdioWriteprotect);

/// One write-protect fault: the faulting address (not page-aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteFault {
    pub addr: u64,
}

/// A userfaultfd descriptor, possibly of another process's address space.
#[derive(Debug)]
pub struct Userfaultfd {
    fd: OwnedFd,
}

impl Userfaultfd {
    /// Creates a userfaultfd of this process (for tests and `terrace doctor`). `flags` are
    /// userfaultfd(2)'s: O_CLOEXEC, O_NONBLOCK, UFFD_USER_MODE_ONLY.
    pub fn new_here(flags: libc::c_int) -> io::Result<Self> {
        // SAFETY: userfaultfd takes only flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Userfaultfd { fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) } })
    }

    /// Wraps a descriptor obtained elsewhere (pidfd_getfd).
    pub fn from_fd(fd: OwnedFd) -> Self {
        Userfaultfd { fd }
    }

    /// The API handshake, asking for `features`; returns the features the kernel granted.
    pub fn handshake(&self, features: u64) -> io::Result<u64> {
        let mut api = UffdioApi { api: UFFD_API, features, ioctls: 0 };
        // SAFETY: UFFDIO_API reads and writes exactly one struct uffdio_api.
        unsafe { uffdio_api(self.fd.as_raw_fd(), &mut api) }.map_err(io::Error::from)?;
        Ok(api.features)
    }

    /// The API handshake asking for `feature` (one of the `UFFD_FEATURE_*` bits), refused as
    /// unsupported where the kernel does not offer it.
    pub fn handshake_requiring(&self, feature: u64) -> io::Result<()> {
        if self.handshake(feature)? & feature == 0 {
            let name = if feature == UFFD_FEATURE_WP_ASYNC {
                "UFFD_FEATURE_WP_ASYNC (Linux 6.7+)"
            } else {
                "write-protect faults"
            };
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("userfaultfd without {name}")));
        }
        Ok(())
    }

    /// Registers `[start, start + len)` for write-protect faults.
    pub fn register_wp(&self, start: u64, len: u64) -> io::Result<()> {
        let mut reg =
            UffdioRegister { range: UffdioRange { start, len }, mode: UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
        // SAFETY: UFFDIO_REGISTER reads and writes exactly one struct uffdio_register.
        unsafe { uffdio_register(self.fd.as_raw_fd(), &mut reg) }.map_err(io::Error::from)?;
        Ok(())
    }

    /// Unregisters a range (and wakes any thread waiting in it).
    pub fn unregister(&self, start: u64, len: u64) -> io::Result<()> {
        let mut range = UffdioRange { start, len };
        // SAFETY: UFFDIO_UNREGISTER reads exactly one struct uffdio_range.
        unsafe { uffdio_unregister(self.fd.as_raw_fd(), &mut range) }.map_err(io::Error::from)?;
        Ok(())
    }

    /// Write-protects a registered range (`on`), or lifts the protection and wakes every thread
    /// waiting to write in it.
    pub fn write_protect(&self, start: u64, len: u64, on: bool) -> io::Result<()> {
        let mode = if on { UFFDIO_WRITEPROTECT_MODE_WP } else { 0 };
        let mut wp = UffdioWriteprotect { range: UffdioRange { start, len }, mode };
        // SAFETY: UFFDIO_WRITEPROTECT reads exactly one struct uffdio_writeprotect.
        unsafe { uffdio_writeprotect(self.fd.as_raw_fd(), &mut wp) }.map_err(io::Error::from)?;
        Ok(())
    }

    /// Waits up to `timeout_ms` for fault messages and appends the write-protect faults to `out`.
    /// Returns Ok(false) when the address space is gone (end of file).
    pub fn read_faults(&self, timeout_ms: u16, out: &mut Vec<WriteFault>) -> io::Result<bool> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(timeout_ms)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return Ok(true),
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        let mut msgs = [UffdMsg::default(); 64];
        let bytes = std::mem::size_of_val(&msgs);
        // SAFETY: reads at most `bytes` into `msgs`, plain old data of that size.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), msgs.as_mut_ptr().cast(), bytes) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(true),
                _ => Err(e),
            };
        }
        if n == 0 {
            return Ok(false);
        }
        let count = n as usize / std::mem::size_of::<UffdMsg>();
        out.extend(
            msgs[..count]
                .iter()
                .filter(|m| m.event == UFFD_EVENT_PAGEFAULT && m.flags & UFFD_PAGEFAULT_FLAG_WP != 0)
                .map(|m| WriteFault { addr: m.address }),
        );
        Ok(true)
    }
}

/// Why userfaultfd write-protect faults are unavailable, and how to get them.
#[derive(Debug)]
pub struct Unavailable {
    pub detail: String,
    pub enable: &'static str,
}

/// Whether this process may open a userfaultfd that sees every fault (kernel-mode ones too, as
/// the fault sampler needs: a user-mode-only descriptor would fail the program's own system calls
/// that write to a protected page) and gets write-protect faults. A program Terrace starts has
/// Terrace's credentials, so the answer holds for it too.
pub fn probe_write_protect() -> Result<(), Unavailable> {
    let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).map_err(|e| Unavailable {
        detail: format!("userfaultfd() failed: {e}"),
        enable: match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                "run as root (CAP_SYS_PTRACE), or sysctl vm.unprivileged_userfaultfd=1"
            }
            _ => "use a kernel with CONFIG_USERFAULTFD=y",
        },
    })?;
    match uffd.handshake(UFFD_FEATURE_PAGEFAULT_FLAG_WP) {
        Ok(f) if f & UFFD_FEATURE_PAGEFAULT_FLAG_WP != 0 => Ok(()),
        Ok(_) => Err(Unavailable {
            detail: "userfaultfd works but does not offer write-protect faults".into(),
            enable: "use a kernel with CONFIG_HAVE_ARCH_USERFAULTFD_WP (5.7+ on x86-64)",
        }),
        Err(e) => Err(Unavailable {
            detail: format!("UFFDIO_API with UFFD_FEATURE_PAGEFAULT_FLAG_WP failed: {e}"),
            enable: "use a kernel with CONFIG_HAVE_ARCH_USERFAULTFD_WP (5.7+ on x86-64)",
        }),
    }
}

/// Whether write-protect faults can be resolved by the kernel (`UFFD_FEATURE_WP_ASYNC`) and the
/// written pages read back with PAGEMAP_SCAN, both Linux 6.7: tried once on a page of this
/// process (protect, write, scan), then remembered. The error says which step failed.
pub fn probe_kernel_resolved() -> Result<(), String> {
    static ANSWER: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    ANSWER.get_or_init(try_kernel_resolved).clone()
}

fn try_kernel_resolved() -> Result<(), String> {
    use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};
    let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .map_err(|e| format!("userfaultfd() failed: {e}"))?;
    match uffd.handshake(UFFD_FEATURE_WP_ASYNC) {
        Ok(f) if f & UFFD_FEATURE_WP_ASYNC != 0 => {}
        Ok(_) => return Err("userfaultfd does not offer UFFD_FEATURE_WP_ASYNC (Linux 6.7+)".into()),
        Err(e) => {
            return Err(format!("UFFDIO_API with UFFD_FEATURE_WP_ASYNC failed ({e}): Linux 6.7+ has it"))
        }
    }
    let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
    let len = std::num::NonZeroUsize::new(4096).expect("non-zero");
    // SAFETY: a fresh private anonymous page, used only here and unmapped below.
    let page = unsafe { mmap_anonymous(None, len, rw, MapFlags::MAP_PRIVATE) }
        .map_err(|e| format!("mmap failed: {e}"))?;
    let addr = page.as_ptr() as u64;
    let result = (|| {
        // SAFETY: the page is ours and mapped read-write.
        unsafe { std::ptr::write_volatile(page.as_ptr().cast::<u8>(), 1) };
        uffd.register_wp(addr, 4096).map_err(|e| format!("UFFDIO_REGISTER for write-protect failed: {e}"))?;
        uffd.write_protect(addr, 4096, true).map_err(|e| format!("UFFDIO_WRITEPROTECT failed: {e}"))?;
        let scan =
            crate::pagemap_scan::PagemapScan::open("self").map_err(|e| format!("/proc/self/pagemap: {e}"))?;
        let mut written = Vec::new();
        scan.written(addr, addr + 4096, &mut written)
            .map_err(|e| format!("PAGEMAP_SCAN failed ({e}): Linux 6.7+ has it"))?;
        if !written.is_empty() {
            return Err("PAGEMAP_SCAN reported a protected page as written".into());
        }
        // SAFETY: as above; the kernel resolves the write-protect fault itself.
        unsafe { std::ptr::write_volatile(page.as_ptr().cast::<u8>(), 2) };
        scan.written(addr, addr + 4096, &mut written).map_err(|e| format!("PAGEMAP_SCAN failed: {e}"))?;
        if written != [(addr, addr + 4096)] {
            return Err("PAGEMAP_SCAN did not report a written page as written".into());
        }
        Ok(())
    })();
    drop(uffd);
    // SAFETY: unmapping the page mapped above, no longer used.
    let _ = unsafe { munmap(page, 4096) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structures_match_the_kernel_abi() {
        assert_eq!(std::mem::size_of::<UffdioApi>(), 24);
        assert_eq!(std::mem::size_of::<UffdioRegister>(), 32);
        assert_eq!(std::mem::size_of::<UffdioWriteprotect>(), 24);
        assert_eq!(std::mem::size_of::<UffdMsg>(), 32);
        // _IOWR(0xAA, 0x3F, struct uffdio_api) and _IOWR(0xAA, 0x06, struct uffdio_writeprotect)
        // as linux/userfaultfd.h spells them on x86-64.
        assert_eq!(nix::request_code_readwrite!(0xAA, 0x3F, 24), 0xC018_AA3F);
        assert_eq!(nix::request_code_readwrite!(0xAA, 0x06, 24), 0xC018_AA06);
    }
}
