//! The perf sampler: hardware sampling of loads and stores with their data addresses, as HeMem
//! and HPWP use it (PEBS `MEM_INST_RETIRED.ALL_LOADS` / `ALL_STORES`, HPWP thesis §5.2), or AMD
//! IBS op sampling; the live twin of the simulator's sampling tracker, one sample per `period`
//! events. Where the CPU offers neither (no machine Terrace is tested on does: perf_event_open
//! finds no PMU there), the live machine uses the fault sampler instead ([`super::write_faults`]).
//!
//! Events are opened per thread of the target and per CPU, inherited by threads created later
//! (the kernel refuses to map the ring buffer of an inherited per-thread event on any CPU), and
//! each has its own ring buffer, drained at every tick. The same machinery runs any sampled
//! event with a data address; the tests drive it with the software page-fault event, which
//! every kernel has.

use super::{LiveTracker, ScanView};
use perf_event::events::{Dynamic, Raw, Software};
use perf_event::{Builder, SampleFlag, SampleSkid, Sampler};
use std::io;
use terrace_model::{AccessKind, Sample};

/// Ring buffer per event, bytes (a power of two): 256 KiB holds about 8,000 samples of 32
/// bytes, some 80 ms of samples at HeMem's period on a core issuing 2 G accesses a second.
const RING_BYTES: usize = 256 << 10;

/// A sampled event and the kind of access its samples are (unless the sample's data source
/// says otherwise).
pub struct SampledEvent {
    pub kind: AccessKind,
    make: Box<dyn Fn() -> Builder<'static>>,
    precise: bool,
}

impl SampledEvent {
    /// Software page faults, every one (for tests: every kernel has them).
    pub fn page_faults(kind: AccessKind) -> Self {
        SampledEvent { kind, make: Box::new(|| Builder::new(Software::PAGE_FAULTS)), precise: false }
    }

    fn raw(kind: AccessKind, config: u64) -> Self {
        SampledEvent { kind, make: Box::new(move || Builder::new(Raw::new(config))), precise: true }
    }
}

/// Which load and store events this CPU samples with data addresses, if any.
pub fn memory_events() -> Result<Vec<SampledEvent>, String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let pmus = std::path::Path::new("/sys/bus/event_source/devices");
    if cpuinfo.contains("GenuineIntel") && pmus.join("cpu/events/mem-loads").exists() {
        // MEM_INST_RETIRED.ALL_LOADS (event 0xD0, umask 0x81) and ALL_STORES (umask 0x82), the
        // PEBS events HeMem and HPWP sample (Skylake and later server cores).
        return Ok(vec![
            SampledEvent::raw(AccessKind::Read, 0x81d0),
            SampledEvent::raw(AccessKind::Write, 0x82d0),
        ]);
    }
    if cpuinfo.contains("AuthenticAMD") && pmus.join("ibs_op").is_dir() {
        let ibs = Dynamic::builder("ibs_op")
            .and_then(|b| b.build().map_err(io::Error::other))
            .map_err(|e| format!("the ibs_op PMU is unusable: {e}"))?;
        // IBS op samples every kind of op; the data source says load or store.
        return Ok(vec![SampledEvent {
            kind: AccessKind::Read,
            make: Box::new(move || Builder::new(ibs)),
            precise: false,
        }]);
    }
    Err("this CPU offers no load/store sampling with data addresses (PEBS or IBS) to this kernel".into())
}

pub struct PerfSampler {
    rings: Vec<(AccessKind, Sampler)>,
    /// Samples that said nothing usable (no address), and records lost to full rings.
    pub unusable: u64,
}

impl PerfSampler {
    /// Opens `events` on every thread of `pid` and every online CPU, one sample per `period`
    /// events, user-mode accesses only.
    pub fn open(pid: i32, events: &[SampledEvent], period: u64) -> io::Result<Self> {
        let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        let mut rings = Vec::new();
        for ev in events {
            for &tid in &tids {
                for cpu in crate::topology::online_cpus() {
                    let mut b = (ev.make)();
                    b.observe_pid(tid)
                        .one_cpu(cpu)
                        .inherit(true)
                        .exclude_kernel(true)
                        .exclude_hv(true)
                        .sample_period(period.max(1))
                        .sample(SampleFlag::ADDR | SampleFlag::TID | SampleFlag::DATA_SRC)
                        .enabled(true);
                    if ev.precise {
                        b.precise_ip(SampleSkid::RequestZero);
                    }
                    let counter = match b.build() {
                        Ok(c) => c,
                        // A CPU that is offline, or a thread that has exited since the listing.
                        Err(e) if matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ESRCH)) => {
                            continue
                        }
                        Err(e) => return Err(e),
                    };
                    rings.push((ev.kind, counter.sampled(RING_BYTES)?));
                }
            }
        }
        if rings.is_empty() {
            return Err(io::Error::other("no thread or CPU accepted a sampling event"));
        }
        Ok(PerfSampler { rings, unusable: 0 })
    }

    /// Hands every sample since the last call to `f(process, data address, kind)`: the events
    /// are inherited by the processes the target starts as well as by its threads, and each
    /// sample says whose it is (`None` if it does not).
    pub fn drain(&mut self, mut f: impl FnMut(Option<u32>, u64, AccessKind)) {
        use perf_event::data::MemOp;
        use perf_event::data::Record;
        for (kind, ring) in &mut self.rings {
            while let Some(record) = ring.next_record() {
                match record.parse_record() {
                    Ok(Record::Sample(s)) => {
                        let kind = match s.data_src().map(|d| d.mem_op()) {
                            Some(op) if op.contains(MemOp::STORE) => AccessKind::Write,
                            Some(op) if op.contains(MemOp::LOAD) => AccessKind::Read,
                            _ => *kind,
                        };
                        match s.addr() {
                            Some(a) if a != 0 => f(s.pid(), a, kind),
                            _ => self.unusable += 1,
                        }
                    }
                    Ok(Record::Lost(l)) => self.unusable += l.lost,
                    _ => {}
                }
            }
        }
    }
}

impl LiveTracker for PerfSampler {
    fn name(&self) -> &'static str {
        "perf sampler"
    }

    /// Each sample's data address, as the policy page it hit.
    fn observe_samples(&mut self, scan: &ScanView<'_>, samples: &mut Vec<Sample>) {
        // A process the program started inherits the events, and its samples come here too:
        // its addresses are not this address space's.
        self.drain(|from, addr, kind| {
            if from.is_some_and(|p| p as i32 != scan.pid) {
                return;
            }
            if let Some(page) = scan.policy_page(addr) {
                samples.push(Sample { page, kind });
            }
        });
    }

    /// The events belong to the program's threads, not to its address space: the thread that
    /// calls exec keeps them (and threads the new program creates inherit them), so samples of
    /// the new program arrive by themselves.
    fn address_space_replaced(&mut self, _pid: i32) -> Result<(), String> {
        Ok(())
    }
}
