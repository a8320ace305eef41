//! Page interleaving across tiers at first touch (MPOL_INTERLEAVE), and its weighted form
//! (MPOL_WEIGHTED_INTERLEAVE, Linux 6.9), whose default weights follow each node's bandwidth as
//! the firmware reports it. Never migrates.

use terrace_model::{InitialPlacement, MachineInfo, Observations, Plan, Policy, Requirements};

pub const NAME: &str = "interleave";
pub const SUMMARY: &str = "pages alternate between tiers at first touch (MPOL_INTERLEAVE); never migrates";
pub const WEIGHTED_NAME: &str = "weighted-interleave";
pub const WEIGHTED_SUMMARY: &str =
    "pages spread over tiers in proportion to their read bandwidth (MPOL_WEIGHTED_INTERLEAVE); never migrates";

pub struct Interleave {
    weighted: bool,
}

impl Interleave {
    pub fn even() -> Self {
        Interleave { weighted: false }
    }
    pub fn by_bandwidth() -> Self {
        Interleave { weighted: true }
    }

    /// Weights proportional to each tier's read bandwidth, the slowest getting 1 (as the kernel
    /// derives them from HMAT); 1:1 where a tier's bandwidth is unknown.
    pub fn weights(machine: &MachineInfo) -> Vec<u32> {
        let bw: Option<Vec<f64>> = machine.tiers.iter().map(|t| t.read_bandwidth_gb_s).collect();
        match bw {
            Some(bw) if bw.iter().all(|b| *b > 0.0) => {
                let min = bw.iter().cloned().fold(f64::INFINITY, f64::min);
                bw.iter().map(|b| (b / min).round().clamp(1.0, 255.0) as u32).collect()
            }
            _ => vec![1; machine.tiers.len()],
        }
    }
}

impl Policy for Interleave {
    fn name(&self) -> &str {
        if self.weighted {
            WEIGHTED_NAME
        } else {
            NAME
        }
    }
    fn requirements(&self, machine: &MachineInfo) -> Requirements {
        let weights =
            if self.weighted { Self::weights(machine) } else { vec![1; machine.tiers.len().max(2)] };
        Requirements { initial: InitialPlacement::Interleave { weights }, ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::{Tier, TierId, TierKind};

    fn tier(id: u8, bw: Option<f64>) -> Tier {
        Tier {
            id: TierId(id),
            name: String::new(),
            kind: TierKind::Dram,
            capacity_pages: None,
            read_latency_ns: None,
            read_bandwidth_gb_s: bw,
            write_bandwidth_gb_s: None,
        }
    }

    fn machine(tiers: Vec<Tier>) -> MachineInfo {
        MachineInfo {
            name: String::new(),
            tiers,
            page_size: Default::default(),
            pages: 0,
            threads: 1,
            scale: 1.0,
        }
    }

    #[test]
    fn weights_follow_bandwidth_and_fall_back_to_even() {
        assert_eq!(Interleave::weights(&machine(vec![tier(0, Some(100.0)), tier(1, Some(25.0))])), [4, 1]);
        assert_eq!(Interleave::weights(&machine(vec![tier(0, Some(100.0)), tier(1, None)])), [1, 1]);
    }
}
