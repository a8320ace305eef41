//! Starting a program to manage: what must be set in the child itself, between fork and exec,
//! before it runs a single instruction of the program.
//!
//! Today that is the policy's initial placement, which on Linux is the child's own memory policy
//! (set_mempolicy(2)): a policy that places everything on one tier first gets `MPOL_PREFERRED` on
//! that tier's first node, one that interleaves gets `MPOL_INTERLEAVE` over every tier's nodes,
//! and first touch leaves the kernel's default. The program inherits it across exec, so every page
//! it touches lands where the policy asked without a single migration.

use crate::numa_sys;
use crate::topology::LiveTier;
use std::os::unix::process::CommandExt;
use std::process::Command;
use terrace_model::{InitialPlacement, Requirements};

/// The memory policy a child starts under for `initial` on `tiers`: a mode and its nodes, or
/// `None` for the kernel's default (first touch).
pub fn initial_mempolicy(initial: &InitialPlacement, tiers: &[LiveTier]) -> Option<(i32, Vec<u32>)> {
    match initial {
        InitialPlacement::FirstTouch => None,
        InitialPlacement::Pages { .. } => {
            tracing::warn!("a page-by-page initial placement is simulator-only; the live machine starts it as first touch");
            None
        }
        InitialPlacement::Tier(t) => {
            let node = tiers.get(t.index()).and_then(|t| t.nodes.first().copied());
            Some((numa_sys::MPOL_PREFERRED, node.into_iter().collect()))
        }
        InitialPlacement::Interleave { weights } => {
            if weights.iter().any(|&w| w != weights[0]) {
                tracing::warn!("weighted interleave is applied as plain interleave on the live machine");
            }
            Some((numa_sys::MPOL_INTERLEAVE, tiers.iter().flat_map(|t| t.nodes.iter().copied()).collect()))
        }
    }
}

/// Prepares `cmd` to start a program a policy with requirements `req` will manage on `tiers`:
/// the child sets its initial placement on itself between fork and exec. Spawn it as usual (or
/// stopped, with [`crate::remote_syscall::spawn_stopped`]); if the policy cannot be set, the
/// spawn fails with set_mempolicy's error and no program runs.
pub fn prepare(cmd: &mut Command, req: &Requirements, tiers: &[LiveTier]) {
    if let Some((mode, nodes)) = initial_mempolicy(&req.initial, tiers) {
        // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
        // work is allowed: set_mempolicy builds its node mask on the stack, makes one system call
        // and allocates nothing (its error is an OS error code, which does not allocate either);
        // `nodes` was allocated before the fork and is only read. It touches no lock and no
        // state shared with other threads of the parent, and affects only the child.
        unsafe {
            cmd.pre_exec(move || numa_sys::set_mempolicy(mode, &nodes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::TierId;

    fn tier(id: u8, nodes: Vec<u32>) -> LiveTier {
        let tier = terrace_model::MachineInfo::placeholder(id as usize + 1).tiers.pop().expect("a tier");
        LiveTier { tier, nodes }
    }

    #[test]
    fn each_initial_placement_becomes_its_memory_policy() {
        let tiers = [tier(0, vec![0, 2]), tier(1, vec![1, 3])];
        assert_eq!(initial_mempolicy(&InitialPlacement::FirstTouch, &tiers), None);
        assert_eq!(
            initial_mempolicy(&InitialPlacement::Tier(TierId::SLOW), &tiers),
            Some((numa_sys::MPOL_PREFERRED, vec![1]))
        );
        let even = InitialPlacement::Interleave { weights: vec![1, 1] };
        assert_eq!(initial_mempolicy(&even, &tiers), Some((numa_sys::MPOL_INTERLEAVE, vec![0, 2, 1, 3])));
    }

    /// The child itself runs under the policy: its /proc/self/numa_maps names it. Node 0 is on
    /// every host, so this runs anywhere the kernel has NUMA (CONFIG_NUMA).
    #[test]
    fn the_started_program_runs_under_its_initial_policy() {
        let tiers = [tier(0, vec![0]), tier(1, vec![0])];
        for (initial, expected) in [
            (InitialPlacement::Interleave { weights: vec![1, 1] }, " interleave:0 "),
            (InitialPlacement::Tier(TierId::FAST), " prefer:0 "),
            (InitialPlacement::FirstTouch, " default "),
        ] {
            let req = Requirements { initial: initial.clone(), ..Requirements::default() };
            let mut cmd = Command::new("/bin/sh");
            cmd.args(["-c", "head -n 1 /proc/self/numa_maps"]);
            prepare(&mut cmd, &req, &tiers);
            let out = cmd.output().expect("/bin/sh starts");
            let first = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success() && first.contains(expected), "{initial:?}: {first:?}");
        }
    }
}
