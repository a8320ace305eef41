//! The NUMA system calls Terrace needs and libc does not wrap (they live in libnuma, which a
//! static binary cannot count on): move_pages(2) and mbind(2).

use std::io;

/// mbind(2) modes and flags (include/uapi/linux/mempolicy.h).
pub const MPOL_DEFAULT: i32 = 0;
pub const MPOL_PREFERRED: i32 = 1;
pub const MPOL_BIND: i32 = 2;
pub const MPOL_INTERLEAVE: i32 = 3;
pub const MPOL_MF_MOVE: u32 = 1 << 1;

/// move_pages(2) flag: move pages of the process even if shared (needs CAP_SYS_NICE).
pub const MPOL_MF_MOVE_ALL: i32 = 1 << 2;

/// Where each of `pages` (page-aligned addresses in process `pid`, 0 = this process) is: a node
/// id, or a negative errno per page (-ENOENT: not present; -EFAULT: not mapped). Nothing moves.
pub fn query_nodes(pid: i32, pages: &[u64], status: &mut [i32]) -> io::Result<()> {
    assert_eq!(pages.len(), status.len());
    // SAFETY: the arrays have `pages.len()` entries each; a null node array asks for a query.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            std::ptr::null::<i32>(),
            status.as_mut_ptr(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Moves `pages` of process `pid` to `nodes` (one target per page). Per-page results land in
/// `status` (node id, or negative errno). Returns how many pages could not be moved as the
/// syscall counts them (its positive return value), or the call's own error.
pub fn move_pages(
    pid: i32,
    pages: &[u64],
    nodes: &[i32],
    status: &mut [i32],
    flags: i32,
) -> io::Result<usize> {
    assert!(pages.len() == nodes.len() && pages.len() == status.len());
    // SAFETY: the three arrays have `pages.len()` entries each, as move_pages(2) requires.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            flags,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// Sets the memory policy of `[addr, addr + len)` in this process: `MPOL_BIND` to `node`, or
/// `MPOL_DEFAULT` (node ignored). `flags` may ask for present pages to move (`MPOL_MF_MOVE`).
/// The address is a plain number: mbind only changes kernel policy for the range, never
/// dereferences it in user space.
pub fn mbind(addr: usize, len: usize, mode: i32, node: Option<u32>, flags: u32) -> io::Result<()> {
    let mut mask = [0u64; 16];
    let (mask_ptr, maxnode) = match node {
        Some(n) if (n as usize) < mask.len() * 64 => {
            mask[n as usize / 64] |= 1 << (n % 64);
            (mask.as_ptr(), (mask.len() * 64 + 1) as libc::c_ulong)
        }
        Some(n) => {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("node {n} is out of range")))
        }
        None => (std::ptr::null(), 0),
    };
    // SAFETY: addr/len name a mapping of this process (mbind checks); the mask outlives the call.
    let r =
        unsafe { libc::syscall(libc::SYS_mbind, addr, len as libc::c_ulong, mode, mask_ptr, maxnode, flags) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets this process's default memory policy over `nodes` (what a child inherits across exec).
/// Async-signal-safe: no allocation, so it may run between fork and exec.
pub fn set_mempolicy(mode: i32, nodes: &[u32]) -> io::Result<()> {
    let mut mask = [0u64; 16];
    for &n in nodes {
        if (n as usize) < mask.len() * 64 {
            mask[n as usize / 64] |= 1 << (n % 64);
        }
    }
    let maxnode = (mask.len() * 64 + 1) as libc::c_ulong;
    // SAFETY: the mask outlives the call; maxnode matches its size in bits (+1 as the ABI wants).
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask.as_ptr(), maxnode) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_page_of_this_process_reports_its_node() {
        let v = vec![1u8; 4096 * 4];
        let page = (v.as_ptr() as u64 + 4095) & !4095;
        let mut status = [i32::MIN];
        query_nodes(0, &[page], &mut status).unwrap();
        assert!(status[0] >= 0, "a touched page has a node, got {}", status[0]);
        let mut unmapped = [i32::MIN];
        query_nodes(0, &[4096], &mut unmapped).unwrap();
        assert!(unmapped[0] < 0, "page 1 is never mapped");
    }
}
