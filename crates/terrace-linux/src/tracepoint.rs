//! A kernel trace event read through perf: one tracepoint event on each CPU (perf_event_open(2),
//! `PERF_TYPE_TRACEPOINT`, any process), filtered in the kernel, each sampling every record it
//! lets through, with its raw fields and time, into a ring buffer of its own; the rings are read
//! together and their records merged in time order.
//!
//! Why perf and not a tracefs instance: enabling an event through tracefs makes ftrace record
//! the command names of traced tasks (`options/record-cmd`, on by default and not settable per
//! instance) by hooking `sched_switch`, so each enable and disable live-patches the scheduler's
//! static key in `__schedule`, which the emulated guest of the tests (QEMU's TCG) did not always
//! survive (docs/live.md, "Recording a program"). A per-CPU perf event hooks the tracepoint alone:
//! it records no command names, and having no task it needs none of the context-switch hooks that
//! perf patches into the scheduler for per-task events (`perf_sched_events`).

use crate::tracefs::{EventFormat, TracefsError};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use perf_event::events::Tracepoint;
use perf_event::{Builder, SampleFlag, Sampler};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Ring buffer per CPU, bytes: a record of `damon_aggregated` takes 72 bytes with its header,
/// time and size, so 256 KiB holds 3,600 of them, three aggregations of DAMON's 1,000 regions at
/// most, where it is read every aggregation.
const RING_BYTES: usize = 256 << 10;

// PERF_EVENT_IOC_SET_FILTER (include/uapi/linux/perf_event.h): `_IOW('$', 6, char *)`.
nix::ioctl_write_ptr_bad!(
    set_filter_ioctl,
    nix::request_code_write!(b'$', 6, std::mem::size_of::<*const libc::c_char>()),
    libc::c_char
);

#[derive(Debug, thiserror::Error)]
pub enum TracepointError {
    #[error(transparent)]
    Tracefs(#[from] TracefsError),
    #[error("perf cannot open the {event} tracepoint on CPU {cpu}: {source}")]
    Open {
        event: String,
        cpu: usize,
        #[source]
        source: io::Error,
    },
    #[error("perf refused the filter '{filter}' of {event}: {source}")]
    Filter {
        filter: String,
        event: String,
        #[source]
        source: io::Error,
    },
}

/// What a read hands out, in time order.
pub enum Record<'a> {
    /// One event's raw record: its fields where [`TracepointEvents::format`] says.
    Event(&'a [u8]),
    /// Records lost since the last read (a ring was full); which ones is unknown.
    Lost(u64),
}

/// One trace event, enabled on every CPU and read from there.
pub struct TracepointEvents {
    rings: Vec<Sampler>,
    pub format: EventFormat,
    /// This read's records, (time, start, end) in `bytes`, to be put in time order.
    batch: Vec<(u64, usize, usize)>,
    bytes: Vec<u8>,
}

impl TracepointEvents {
    /// Enables `system:event` on every online CPU, recording only what `filter` (the trace
    /// event filter syntax, Documentation/trace/events.rst §5: `common_pid == 123`) lets through.
    pub fn open(system: &str, event: &str, filter: &str) -> Result<Self, TracepointError> {
        let format = EventFormat::load(system, event)?;
        let name = format!("{system}:{event}");
        let c_filter = CString::new(filter).map_err(|e| TracepointError::Filter {
            filter: filter.into(),
            event: name.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        let mut rings = Vec::new();
        // The CPUs online now: one brought online later goes unread (the kernel has no event for
        // a CPU that is not online).
        for cpu in crate::topology::online_cpus() {
            let counter = Builder::new(Tracepoint::with_id(format.id))
                .any_pid()
                .one_cpu(cpu)
                // The event is raised in the kernel (a kdamond is a kernel thread).
                .include_kernel()
                .sample_period(1)
                .sample(SampleFlag::TIME | SampleFlag::RAW)
                .enabled(false)
                .build();
            let counter = match counter {
                Ok(c) => c,
                // A CPU gone offline since the listing.
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => continue,
                Err(source) => return Err(TracepointError::Open { event: name, cpu, source }),
            };
            // Filtered before it is enabled, so that nothing else is ever recorded, and enabled
            // once its ring is mapped, so that nothing is lost before.
            // SAFETY: the fd is the counter's, open; the filter is a NUL-terminated string that
            // outlives the call.
            unsafe { set_filter_ioctl(counter.as_raw_fd(), c_filter.as_ptr()) }.map_err(|e| {
                TracepointError::Filter { filter: filter.into(), event: name.clone(), source: e.into() }
            })?;
            let mut ring = counter.sampled(RING_BYTES).map_err(|source| TracepointError::Open {
                event: name.clone(),
                cpu,
                source,
            })?;
            ring.enable().map_err(|source| TracepointError::Open { event: name.clone(), cpu, source })?;
            rings.push(ring);
        }
        if rings.is_empty() {
            return Err(TracepointError::Open {
                event: name,
                cpu: 0,
                source: io::Error::other("no CPU accepted the event"),
            });
        }
        Ok(TracepointEvents { rings, format, batch: Vec::new(), bytes: Vec::new() })
    }

    /// Waits up to `timeout` for records, then hands every record the rings hold to `f`, events
    /// in time order after any losses; returns how many events that was. Records are read after
    /// the wait whatever poll says (a ring wakes its reader only past its watermark), and nothing
    /// read waits out the timeout, so a caller never spins.
    pub fn read(&mut self, timeout: Duration, mut f: impl FnMut(Record<'_>)) -> io::Result<usize> {
        let started = std::time::Instant::now();
        {
            // SAFETY: each fd is a ring's, open as long as `self.rings`, which outlives the poll.
            let mut fds: Vec<PollFd> = self
                .rings
                .iter()
                .map(|r| PollFd::new(unsafe { BorrowedFd::borrow_raw(r.as_raw_fd()) }, PollFlags::POLLIN))
                .collect();
            let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut lost = 0;
        self.batch.clear();
        self.bytes.clear();
        for ring in &mut self.rings {
            while let Some(record) = ring.next_record() {
                match record.parse_record() {
                    Ok(perf_event::data::Record::Sample(s)) => {
                        if let (Some(time), Some(raw)) = (s.time(), s.raw()) {
                            let start = self.bytes.len();
                            self.bytes.extend_from_slice(raw);
                            self.batch.push((time, start, self.bytes.len()));
                        }
                    }
                    Ok(perf_event::data::Record::Lost(l)) => lost += l.lost,
                    _ => {}
                }
            }
        }
        if lost > 0 {
            f(Record::Lost(lost));
        }
        // Stable: records of one CPU with one time keep their ring's order.
        self.batch.sort_by_key(|&(time, _, _)| time);
        for &(_, start, end) in &self.batch {
            f(Record::Event(&self.bytes[start..end]));
        }
        if self.batch.is_empty() {
            std::thread::sleep(timeout.saturating_sub(started.elapsed()));
        }
        Ok(self.batch.len())
    }
}
