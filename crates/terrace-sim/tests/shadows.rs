//! Shadow copies on the simulated machine (docs/model.md §4, "Shadow copies"; mtier §3.1): a
//! promoted clean page keeps its slow copy, a demotion back to it is a mapping switch that copies
//! nothing, a write drops the shadow so the page is copied when demoted (never switched back to
//! stale data), the shadows' slow-tier memory is reported, and a policy that does not ask for
//! shadows sees nothing change.

use terrace_model::{
    drive, Access, InitialPlacement, MachineInfo, Move, MoveOptions, Mover, Observations, Plan, Policy,
    Requirements, TierId, TlbFlush,
};
use terrace_sim::{Profile, RunReport, SimMachine};
use terrace_workloads::{MemorySource, WorkloadInfo};

const PAGE: u64 = 4096;
const PAGES: u64 = 8;
const F: TierId = TierId::FAST;
const S: TierId = TierId::SLOW;

/// Every page touched in the slow tier, then `rounds` rounds of reads of every page; in the
/// 50th round (between the promotion and the demotion), one write to each page of `written`.
fn program(rounds: u64, written: &[u64]) -> Box<MemorySource> {
    let mut a: Vec<Access> = Vec::new();
    for r in 0..rounds {
        for p in 0..PAGES {
            for line in 0..64 {
                a.push(Access::read(p * PAGE + line * 64, 64, 0, 50));
            }
            if r == 50 && written.contains(&p) {
                a.push(Access::write(p * PAGE, 8, 0, 50));
            }
        }
    }
    let info = WorkloadInfo {
        name: "shadows".into(),
        description: String::new(),
        footprint_bytes: PAGES * PAGE,
        threads: 1,
        scale: 1.0,
        suggested_fast_bytes: PAGES * PAGE,
        accesses: a.len() as u64,
        recording: None,
    };
    Box::new(MemorySource::new(info, a))
}

/// Promotes pages 0..4 at its first tick and demotes them at its last, with or without shadows.
struct UpThenDown {
    shadow: bool,
    ticks: u32,
}

impl Policy for UpThenDown {
    fn name(&self) -> &str {
        "up-then-down"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            tick_ns: Some(200_000),
            initial: InitialPlacement::Tier(S),
            mover: Mover::PolicyThread,
            ..Requirements::default()
        }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        self.ticks += 1;
        let to = match self.ticks {
            1 => F,
            8 => S,
            _ => return Plan::none(),
        };
        Plan {
            moves: (0..4).map(|page| Move { page, to }).collect(),
            options: MoveOptions {
                shadow: self.shadow,
                tlb_flush: TlbFlush::PerBatch,
                ..MoveOptions::default()
            },
            ..Plan::none()
        }
    }
}

fn run(shadow: bool, written: &[u64]) -> RunReport {
    let profile = Profile::load("remote-socket").unwrap();
    let mut m = SimMachine::new(profile, program(400, written), 4 * PAGE, None).unwrap();
    let mut p = UpThenDown { shadow, ticks: 0 };
    drive(&mut m, &mut p).unwrap();
    assert!(m.placement().is_consistent());
    assert!(p.ticks >= 8, "the run lasts past the demotion");
    assert!((0..4).all(|page| m.placement().tiers[page] == S), "every page back in the slow tier");
    m.report()
}

#[test]
fn read_only_pages_go_back_to_their_shadows_without_a_copy() {
    let r = run(true, &[]);
    assert_eq!((r.pages_migrated, r.pages_switched, r.pages_not_done), (8, 4, 0));
    assert_eq!(r.bytes_migrated, 4 * PAGE, "only the promotions copied");
    assert_eq!(r.tiers[1].copy_write_bytes, 0, "nothing was written into the slow tier");
    assert_eq!(r.shadow_peak_bytes, 4 * PAGE, "four shadows held in the slow tier at once");
    assert_eq!(r.shadows_dropped, 0);
}

#[test]
fn a_page_written_after_its_promotion_is_copied_when_demoted() {
    let r = run(true, &[1, 3]);
    assert_eq!(r.shadows_dropped, 2);
    assert_eq!(r.pages_switched, 2, "pages 0 and 2 only");
    assert_eq!(r.bytes_migrated, 6 * PAGE, "4 promotions and the 2 written pages' demotions");
    assert_eq!(r.tiers[1].copy_write_bytes, 2 * PAGE);
}

#[test]
fn without_shadows_every_move_is_a_copy_and_costs_more_mover_time() {
    let plain = run(false, &[]);
    assert_eq!((plain.pages_switched, plain.shadow_peak_bytes), (0, 0));
    assert_eq!(plain.bytes_migrated, 8 * PAGE);
    let shadowed = run(true, &[]);
    assert!(
        shadowed.migration_ns < plain.migration_ns,
        "switches and shadowed copies skip the kernel's migration path: {} vs {} ns",
        shadowed.migration_ns,
        plain.migration_ns
    );
}
