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
///
/// Object events (allocations and frees, object tiering §3.2) are handed to the policy here,
/// one call of [`Policy::object_event`] each, before the tick that follows them: the one loop
/// carries them on both machines, and [`Observations`](crate::Observations) stays a borrow of
/// the machine's per-interval state, which an event-driven record table (the MAT daemon's
/// object records, §3.3) does not need to rescan. Events after the last tick are handed over
/// when the program ends, so a policy sees every event once.
pub fn drive(machine: &mut dyn Machine, policy: &mut dyn Policy) -> Result<(), DriveError> {
    drive_within(machine, policy, u64::MAX).map(drop)
}

/// [`drive`], stopped once the machine's clock reaches `limit_ns` with the program still running:
/// returns whether the program finished. The offline reference (terrace-ceiling) stops a
/// candidate's run there once it cannot beat the best run so far.
pub fn drive_within(
    machine: &mut dyn Machine,
    policy: &mut dyn Policy,
    limit_ns: u64,
) -> Result<bool, DriveError> {
    drive_checked(machine, policy, limit_ns, u64::MAX, |_, _| false)
}

/// [`drive_within`], also stopped where `stop(machine, now_ns)` says so: it is asked between
/// stretches of the run, after each tick and, for a policy without ticks, every `every_ns` of
/// the machine's clock. The offline reference stops a static placement once what is left of its
/// trace cannot take less than the time the best run so far has over its clock.
pub fn drive_checked<M: Machine + ?Sized>(
    machine: &mut M,
    policy: &mut dyn Policy,
    limit_ns: u64,
    every_ns: u64,
    mut stop: impl FnMut(&M, u64) -> bool,
) -> Result<bool, DriveError> {
    let req = policy.requirements(machine.info());
    let refuse = |source| DriveError::Unsupported { policy: policy.name().to_string(), source };
    let tiers = &machine.info().tiers;
    if let Some(max) = req.max_tiers.filter(|&m| tiers.len() > m) {
        let names = tiers.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ");
        return Err(refuse(MachineError::TooManyTiers { max, tiers: tiers.len(), names }));
    }
    let mechanisms = &machine.info().mechanisms;
    if let Some(mechanism) = mechanisms.first_missing(&req.required_mechanisms()) {
        let hint = mechanisms.why_not(mechanism);
        return Err(refuse(MachineError::MissingMechanism { mechanism, hint }));
    }
    machine.prepare(&req).map_err(refuse)?;
    policy.start(machine.info());
    let mut events = Vec::new();
    let mut deliver = |machine: &mut M, policy: &mut dyn Policy| {
        events.clear();
        machine.take_object_events(&mut events);
        for e in &events {
            policy.object_event(e);
        }
    };
    let Some(tick_ns) = req.tick_ns else {
        let mut next = every_ns;
        loop {
            let progress = machine.advance(next.min(limit_ns));
            deliver(machine, policy);
            match progress {
                Progress::Finished { .. } => return Ok(true),
                Progress::Running { now_ns } if now_ns >= limit_ns || stop(machine, now_ns) => {
                    return Ok(false)
                }
                Progress::Running { now_ns } => next = now_ns.saturating_add(every_ns),
            }
        }
    };
    // Seed periods are real time; a scaled-down run ticks proportionally faster (MachineInfo::scale).
    let scale = machine.info().scale;
    let scaled = |ns: u64| ((ns as f64 / scale).round() as u64).max(1);
    let mut next = scaled(policy.next_tick_ns().unwrap_or(tick_ns));
    loop {
        let progress = machine.advance(next.min(limit_ns));
        deliver(machine, policy);
        match progress {
            Progress::Finished { .. } => return Ok(true),
            Progress::Running { now_ns } if now_ns >= limit_ns || stop(machine, now_ns) => return Ok(false),
            Progress::Running { now_ns } => {
                let plan = {
                    let obs = machine.observe();
                    policy.tick(&obs)
                };
                if !plan.is_empty() {
                    let applied = machine.apply(&plan);
                    policy.applied(&applied);
                }
                next = next.max(now_ns) + scaled(policy.next_tick_ns().unwrap_or(tick_ns));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Applied, MachineInfo, Observations, Plan, Requirements, TierStatus, TrackerRequest};

    /// A machine whose program runs for `end_ns` and records when it was observed.
    struct Clock {
        info: MachineInfo,
        now: u64,
        end_ns: u64,
        observed_at: Vec<u64>,
        applied: usize,
        refuse: bool,
        /// Object events, each with the time it happens.
        events: Vec<(u64, crate::ObjectEvent)>,
        taken: usize,
    }

    impl Clock {
        fn new(end_ns: u64, scale: f64) -> Self {
            let info = MachineInfo {
                name: "clock".into(),
                tiers: vec![],
                page_size: Default::default(),
                pages: 0,
                threads: 1,
                scale,
                mechanisms: crate::Mechanisms::default(),
                programs: Vec::new(),
                move_unit_bytes: 0,
            };
            Clock {
                info,
                now: 0,
                end_ns,
                observed_at: vec![],
                applied: 0,
                refuse: false,
                events: vec![],
                taken: 0,
            }
        }
    }

    impl Machine for Clock {
        fn info(&self) -> &MachineInfo {
            &self.info
        }
        fn prepare(&mut self, _: &Requirements) -> Result<(), MachineError> {
            if self.refuse {
                return Err(MachineError::MissingTracker {
                    tracker: "page-table bits",
                    hint: "enable it".into(),
                });
            }
            Ok(())
        }
        fn advance(&mut self, until_ns: u64) -> Progress {
            self.now = until_ns.min(self.end_ns);
            if self.now >= self.end_ns {
                Progress::Finished { now_ns: self.now }
            } else {
                Progress::Running { now_ns: self.now }
            }
        }
        fn observe(&mut self) -> Observations<'_> {
            self.observed_at.push(self.now);
            const NONE: &[TierStatus] = &[];
            Observations {
                now_ns: self.now,
                previous_ns: 0,
                placement: &[],
                tiers: NONE,
                page_bits: None,
                samples: &[],
                future: None,
                hint_faults: &[],
                in_flight: &[],
            }
        }
        fn apply(&mut self, _: &Plan) -> Applied {
            self.applied += 1;
            Applied::default()
        }
        fn take_object_events(&mut self, out: &mut Vec<crate::ObjectEvent>) {
            let due = self.events[self.taken..].iter().take_while(|(t, _)| *t <= self.now).count();
            out.extend(self.events[self.taken..self.taken + due].iter().map(|(_, e)| *e));
            self.taken += due;
        }
    }

    struct Ticker(Option<u64>, Vec<crate::Mechanism>);
    impl Policy for Ticker {
        fn name(&self) -> &str {
            "ticker"
        }
        fn requirements(&self, _: &MachineInfo) -> Requirements {
            Requirements {
                trackers: vec![TrackerRequest::page_bits()],
                tick_ns: self.0,
                mechanisms: self.1.clone(),
                ..Default::default()
            }
        }
        fn tick(&mut self, _: &Observations<'_>) -> Plan {
            Plan { moves: vec![crate::Move { page: 0, to: crate::TierId::FAST }], ..Plan::none() }
        }
    }

    #[test]
    fn ticks_come_at_the_period_divided_by_the_scale() {
        let mut m = Clock::new(1_000, 10.0);
        drive(&mut m, &mut Ticker(Some(2_000), vec![])).unwrap();
        assert_eq!(m.observed_at, [200, 400, 600, 800]);
        assert_eq!(m.applied, 4, "non-empty plans are applied");
    }

    #[test]
    fn a_run_stops_at_the_limit_unless_it_finishes_first() {
        let mut m = Clock::new(1_000, 1.0);
        assert!(!drive_within(&mut m, &mut Ticker(Some(100), vec![]), 450).unwrap());
        assert_eq!(m.observed_at, [100, 200, 300, 400], "no tick at or past the limit");
        let mut m = Clock::new(1_000, 1.0);
        assert!(!drive_within(&mut m, &mut Ticker(None, vec![]), 999).unwrap());
        assert_eq!(m.now, 999);
        let mut m = Clock::new(1_000, 1.0);
        assert!(drive_within(&mut m, &mut Ticker(Some(300), vec![]), 5_000).unwrap());
        assert_eq!(m.observed_at, [300, 600, 900]);
    }

    /// The check is asked every `every_ns` of a run without ticks and after each tick of one
    /// with them, sees the clock, and stops the run where it says so.
    #[test]
    fn a_check_is_asked_between_stretches_and_stops_the_run() {
        let mut m = Clock::new(1_000, 1.0);
        let mut asked = Vec::new();
        let stopped = !drive_checked(&mut m, &mut Ticker(None, vec![]), u64::MAX, 150, |_, now| {
            asked.push(now);
            now >= 400
        })
        .unwrap();
        assert!(stopped);
        assert_eq!(asked, [150, 300, 450]);
        let mut m = Clock::new(1_000, 1.0);
        let mut asked = Vec::new();
        assert!(drive_checked(&mut m, &mut Ticker(Some(300), vec![]), u64::MAX, 7, |_, now| {
            asked.push(now);
            false
        })
        .unwrap());
        assert_eq!(asked, [300, 600, 900], "after each tick, not every 7 ns");
    }

    #[test]
    fn a_policy_without_a_period_is_never_asked() {
        let mut m = Clock::new(1_000, 1.0);
        drive(&mut m, &mut Ticker(None, vec![])).unwrap();
        assert!(m.observed_at.is_empty());
    }

    #[test]
    fn a_machine_that_lacks_a_tracker_says_so() {
        let mut m = Clock::new(1_000, 1.0);
        m.refuse = true;
        let e = drive(&mut m, &mut Ticker(Some(10), vec![])).unwrap_err();
        let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(
            text.contains("ticker") && text.contains("page-table bits") && text.contains("enable it"),
            "{text}"
        );
    }

    /// A policy that manages two tiers.
    struct TwoTiers;
    impl Policy for TwoTiers {
        fn name(&self) -> &str {
            "two-tiers"
        }
        fn requirements(&self, _: &MachineInfo) -> Requirements {
            Requirements { tick_ns: Some(10), max_tiers: Some(2), ..Default::default() }
        }
        fn tick(&mut self, _: &Observations<'_>) -> Plan {
            Plan::none()
        }
    }

    fn tier(i: u8, name: &str) -> crate::Tier {
        crate::Tier {
            id: crate::TierId(i),
            name: name.into(),
            kind: crate::TierKind::Dram,
            capacity_pages: None,
            read_latency_ns: None,
            read_bandwidth_gb_s: None,
            write_bandwidth_gb_s: None,
        }
    }

    #[test]
    fn a_two_tier_policy_is_refused_on_three_tiers_and_runs_on_two() {
        let mut m = Clock::new(1_000, 1.0);
        m.info.tiers = vec![tier(0, "DRAM"), tier(1, "remote DRAM"), tier(2, "CXL")];
        let e = drive(&mut m, &mut TwoTiers).unwrap_err();
        let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(
            text.contains("two-tiers")
                && text.contains("at most 2 tiers")
                && text.contains("DRAM, remote DRAM, CXL"),
            "{text}"
        );
        assert!(m.observed_at.is_empty(), "refused before the program ran");
        m.info.tiers.pop();
        drive(&mut m, &mut TwoTiers).unwrap();
        assert!(!m.observed_at.is_empty());
    }

    #[test]
    fn a_policy_that_needs_a_mechanism_the_machine_lacks_is_refused_before_it_starts() {
        let mut m = Clock::new(1_000, 1.0);
        m.info.mechanisms = crate::Mechanisms::new([], 1, 1)
            .lacking(crate::Mechanism::CopyThreads, "the kernel copies with one thread");
        let e = drive(&mut m, &mut Ticker(Some(10), vec![crate::Mechanism::CopyThreads])).unwrap_err();
        let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(text.contains("multi-threaded copy") && text.contains("one thread"), "{text}");
        assert!(m.observed_at.is_empty() && m.applied == 0, "refused before the program ran");
        // What the machine offers passes.
        let mut m = Clock::new(1_000, 1.0);
        m.info.mechanisms = crate::Mechanisms::new([crate::Mechanism::CopyThreads], 4, 1);
        drive(&mut m, &mut Ticker(Some(100), vec![crate::Mechanism::CopyThreads])).unwrap();
    }

    /// Records each object event with the number of ticks before it.
    struct Recorder {
        period: Option<u64>,
        ticks: usize,
        seen: Vec<(usize, crate::ObjectEvent)>,
    }
    impl Policy for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        fn requirements(&self, _: &MachineInfo) -> Requirements {
            Requirements {
                trackers: vec![TrackerRequest::object_events()],
                tick_ns: self.period,
                ..Default::default()
            }
        }
        fn tick(&mut self, _: &Observations<'_>) -> Plan {
            self.ticks += 1;
            Plan::none()
        }
        fn object_event(&mut self, e: &crate::ObjectEvent) {
            self.seen.push((self.ticks, *e));
        }
    }

    #[test]
    fn object_events_reach_the_policy_once_each_in_order_before_the_tick_after_them() {
        use crate::ObjectEvent;
        let events = vec![
            (0, ObjectEvent::alloc(0, 4096, 7)),
            (150, ObjectEvent::alloc(8192, 100, 8)),
            (150, ObjectEvent::free(0, 4096, 7)),
            (420, ObjectEvent::alloc(0, 64, 9)),
            // After the last tick (at 900), before the end (1000).
            (950, ObjectEvent::free(8192, 100, 8)),
        ];
        let mut m = Clock::new(1_000, 1.0);
        m.events = events.clone();
        let mut p = Recorder { period: Some(300), ticks: 0, seen: vec![] };
        drive(&mut m, &mut p).unwrap();
        // Ticks at 300, 600, 900: events up to 300 come before the first, and so on.
        let ticks_before: Vec<usize> = p.seen.iter().map(|(t, _)| *t).collect();
        assert_eq!(ticks_before, [0, 0, 0, 1, 3]);
        let seen: Vec<ObjectEvent> = p.seen.iter().map(|(_, e)| *e).collect();
        assert_eq!(seen, events.iter().map(|(_, e)| *e).collect::<Vec<_>>());
        // A policy that never ticks sees them all too.
        let mut m = Clock::new(1_000, 1.0);
        m.events = events.clone();
        let mut p = Recorder { period: None, ticks: 0, seen: vec![] };
        drive(&mut m, &mut p).unwrap();
        assert_eq!(p.seen.len(), events.len());
    }
}
