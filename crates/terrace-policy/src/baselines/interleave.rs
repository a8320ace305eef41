//! Page interleaving across tiers at first touch (MPOL_INTERLEAVE), and its weighted form
//! (MPOL_WEIGHTED_INTERLEAVE, Linux 6.9), whose default weights follow each node's bandwidth as
//! the firmware reports it. Never migrates.

use crate::params::{Kind, Param, Params};
use terrace_model::{InitialPlacement, MachineInfo, Observations, Plan, Policy, Requirements};

pub const NAME: &str = "interleave";
pub const SUMMARY: &str = "pages alternate between tiers at first touch (MPOL_INTERLEAVE); never migrates";
pub const WEIGHTED_NAME: &str = "weighted-interleave";
pub const WEIGHTED_SUMMARY: &str =
    "pages spread over tiers in proportion to their read bandwidth (MPOL_WEIGHTED_INTERLEAVE); never migrates";

/// The parameters: the weights, whose `bandwidth` choice is the weighted-interleave preset.
pub const PARAMS: &[Param] = &[Param {
    name: "weights",
    default: "even",
    kind: Kind::Weights,
    meaning: "pages per tier in each turn, fastest tier first (missing tiers weigh 1, extra weights are \
              dropped): even is 1 each, bandwidth follows each tier's read bandwidth",
    source: "MPOL_INTERLEAVE is even; MPOL_WEIGHTED_INTERLEAVE (Linux 6.9) derives its default weights from \
             HMAT bandwidth (the weighted-interleave preset) and takes others in \
             /sys/kernel/mm/mempolicy/weighted_interleave/",
}];

/// How the weights are set.
enum Weights {
    Even,
    Bandwidth,
    Given(Vec<u32>),
}

pub struct Interleave {
    name: String,
    weights: Weights,
}

impl Interleave {
    pub fn new(p: &Params) -> Self {
        let weights = match p.word("weights") {
            "even" => Weights::Even,
            "bandwidth" => Weights::Bandwidth,
            given => Weights::Given(given.split(':').map(|w| w.parse().expect("weights parse")).collect()),
        };
        Interleave { name: p.name().to_string(), weights }
    }

    pub fn even() -> Self {
        Interleave::new(&crate::registry::defaults_of(NAME))
    }
    pub fn by_bandwidth() -> Self {
        Interleave::new(&crate::registry::defaults_of(WEIGHTED_NAME))
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
        &self.name
    }
    fn requirements(&self, machine: &MachineInfo) -> Requirements {
        let tiers = machine.tiers.len().max(2);
        let weights = match &self.weights {
            Weights::Even => vec![1; tiers],
            Weights::Bandwidth => Self::weights(machine),
            Weights::Given(w) => {
                let mut w = w.clone();
                w.resize(tiers, 1);
                w
            }
        };
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
            mechanisms: Default::default(),
            programs: Vec::new(),
            move_unit_bytes: 0,
        }
    }

    #[test]
    fn weights_follow_bandwidth_and_fall_back_to_even() {
        assert_eq!(Interleave::weights(&machine(vec![tier(0, Some(100.0)), tier(1, Some(25.0))])), [4, 1]);
        assert_eq!(Interleave::weights(&machine(vec![tier(0, Some(100.0)), tier(1, None)])), [1, 1]);
    }

    #[test]
    fn given_weights_are_per_tier_fastest_first() {
        let m = machine(vec![tier(0, Some(100.0)), tier(1, Some(25.0)), tier(2, None)]);
        let weights = |spec: &str| match crate::build(spec).unwrap().requirements(&m).initial {
            InitialPlacement::Interleave { weights } => weights,
            other => panic!("{other:?}"),
        };
        assert_eq!(weights("interleave"), [1, 1, 1]);
        assert_eq!(weights("interleave:weights=3:2"), [3, 2, 1], "a missing tier weighs 1");
        assert_eq!(weights("interleave:weights=3:2:2:9"), [3, 2, 2], "extra weights are dropped");
    }
}
