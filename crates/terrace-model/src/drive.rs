//! The policy loop: the one place where a policy meets a machine.

use crate::{Machine, MachineError, Policy, Progress};

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error("policy {policy} cannot run here")]
    Unsupported {
        policy: String,
        #[source]
        source: MachineError,
    },
}

/// Runs `policy` on `machine` until the program finishes: advance to the next tick, observe,
/// decide, apply. A policy without a tick period just lets the program run.
pub fn drive(machine: &mut dyn Machine, policy: &mut dyn Policy) -> Result<(), DriveError> {
    let req = policy.requirements(machine.info());
    machine
        .prepare(&req)
        .map_err(|source| DriveError::Unsupported {
            policy: policy.name().to_string(),
            source,
        })?;
    policy.start(machine.info());
    let Some(tick_ns) = req.tick_ns else {
        while let Progress::Running { .. } = machine.advance(u64::MAX) {}
        return Ok(());
    };
    // Seed periods are real time; a scaled-down run ticks proportionally faster (MachineInfo::scale).
    let period = ((tick_ns as f64 / machine.info().scale).round() as u64).max(1);
    let mut next = period;
    loop {
        match machine.advance(next) {
            Progress::Finished { .. } => return Ok(()),
            Progress::Running { now_ns } => {
                let plan = {
                    let obs = machine.observe();
                    policy.tick(&obs)
                };
                if !plan.is_empty() {
                    let applied = machine.apply(&plan);
                    policy.applied(&applied);
                }
                next = next.max(now_ns) + period;
            }
        }
    }
}
