//! Each program bound to a tier by its priority (object tiering §5.5, the baseline of Fig. 8):
//! numactl binds the high-priority program to DRAM and the low-priority one to Optane. Here the
//! highest priority's programs go to the fastest tier and every other program to the slowest,
//! each spilling to the next tier when its own is full; with one program (or one priority) it is
//! first touch. It never migrates.

use terrace_model::{
    InitialPlacement, MachineInfo, Observations, PageSize, Plan, Policy, Requirements, TierId,
};

pub const NAME: &str = "bind-priority";
pub const SUMMARY: &str =
    "each program bound to a tier by priority (numactl --membind): the highest priority's \
                           to the fastest, the others' to the slowest; never migrates";

pub struct BindPriority;

impl Policy for BindPriority {
    fn name(&self) -> &str {
        NAME
    }
    fn requirements(&self, m: &MachineInfo) -> Requirements {
        let top = m.programs.iter().map(|p| p.priority).max();
        let slowest = TierId(m.tiers.len().saturating_sub(1) as u8);
        // A placement by 4 KiB page, the size it asks for (the default).
        let page = PageSize::Base4K.bytes();
        let pages = m.programs.iter().map(|p| p.range().end.div_ceil(page)).max().unwrap_or(0);
        let mut tiers = vec![TierId::UNPLACED; pages as usize];
        let split = m.programs.iter().any(|p| Some(p.priority) != top);
        for p in m.programs.iter().filter(|_| split) {
            let tier = if Some(p.priority) == top { TierId::FAST } else { slowest };
            tiers[(p.first_byte / page) as usize..p.range().end.div_ceil(page) as usize].fill(tier);
        }
        Requirements { initial: InitialPlacement::Pages { tiers }, ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::ProgramInfo;

    fn machine(priorities: &[i32]) -> MachineInfo {
        let mut m = MachineInfo::placeholder(2);
        m.programs = priorities
            .iter()
            .enumerate()
            .map(|(i, &priority)| ProgramInfo {
                name: format!("p{i}"),
                priority,
                first_byte: i as u64 * 8192,
                bytes: 8192,
                threads: 1,
            })
            .collect();
        m
    }

    fn tiers(m: &MachineInfo) -> Vec<TierId> {
        match BindPriority.requirements(m).initial {
            InitialPlacement::Pages { tiers } => tiers,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_highest_priority_is_bound_fast_and_the_rest_slow() {
        let (f, s) = (TierId::FAST, TierId::SLOW);
        assert_eq!(tiers(&machine(&[0, 5, 1])), [s, s, f, f, s, s]);
    }

    #[test]
    fn one_program_or_one_priority_is_first_touch() {
        assert!(tiers(&machine(&[])).is_empty());
        assert!(tiers(&machine(&[3, 3])).iter().all(|t| !t.is_placed()));
    }
}
