//! The trace format: exact and aggregated round trips, and robustness against damaged input.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::io::Cursor;
use terrace_model::{AccessKind, PageCounts};
use terrace_workloads::trace::{
    aggregate, record, trace_info, TraceError, TraceForm, TraceReader, TraceWriter,
};
use terrace_workloads::{build, Access, AccessSource, WorkloadInfo};

fn info(accesses: u64, footprint_bytes: u64) -> WorkloadInfo {
    WorkloadInfo {
        name: "test".into(),
        description: "events made up by a test".into(),
        footprint_bytes,
        threads: 256,
        scale: 1.0,
        suggested_fast_bytes: 0,
        accesses,
        recording: None,
    }
}

fn all(source: &mut dyn AccessSource) -> Vec<Access> {
    let mut out = Vec::new();
    while source.fill(&mut out, 1 << 16) > 0 {}
    out
}

/// The largest footprint a trace may declare: the awkward events' addresses span all of it.
const FOOTPRINT: u64 = WorkloadInfo::MAX_FOOTPRINT_BYTES;

fn write_exact(events: &[Access]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), info(events.len() as u64, FOOTPRINT), TraceForm::Exact).unwrap();
    // Uneven batches, so block boundaries fall inside them.
    for chunk in events.chunks(1000) {
        w.write_batch(chunk).unwrap();
    }
    w.finish().unwrap()
}

/// Reads an exact trace to the end, with a batch size that does not divide blocks.
fn read_exact(bytes: &[u8]) -> Result<Vec<Access>, TraceError> {
    let mut r = TraceReader::from_reader(bytes)?;
    let mut out = Vec::new();
    while r.read_batch(&mut out, 7_777)? > 0 {}
    Ok(out)
}

/// Reads an aggregated trace to the end.
fn read_epochs(bytes: &[u8]) -> Result<Vec<Vec<(u32, PageCounts)>>, TraceError> {
    let mut r = TraceReader::from_reader(bytes)?;
    let mut epochs = Vec::new();
    while let Some(e) = r.next_epoch()? {
        epochs.push(e);
    }
    Ok(epochs)
}

/// Reads any trace fully, whatever its form.
fn read_any(bytes: &[u8]) -> Result<(), TraceError> {
    match TraceReader::from_reader(bytes)?.form() {
        TraceForm::Exact => read_exact(bytes).map(drop),
        TraceForm::Aggregated { .. } => read_epochs(bytes).map(drop),
    }
}

/// Events exercising every encoding path: strides, same address, random jumps across the whole
/// footprint, thread switches of every kind, changing sizes and instruction counts, extreme
/// values.
fn awkward_events(n: usize) -> Vec<Access> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| {
            let r = next();
            let thread = match r % 4 {
                0 => (i % 16) as u8,
                1 => 0,
                2 => 255,
                _ => (r >> 8) as u8,
            };
            let addr = match (r >> 16) % 4 {
                0 => i as u64 * 64,
                1 => FOOTPRINT - 1 - (r >> 40),
                _ => next() % FOOTPRINT,
            };
            let size = if r & (1 << 30) != 0 { 64 } else { (r >> 31) as u16 };
            let instructions = if r & (1 << 50) != 0 { 8 } else { (r >> 20) as u32 };
            let kind = if r & (1 << 60) != 0 { AccessKind::Write } else { AccessKind::Read };
            Access { addr, instructions, size, thread, kind }
        })
        .collect()
}

#[test]
fn generated_workloads_round_trip_exactly() {
    for name in ["gups", "pmbench-s25-r80", "stream-triad"] {
        let expected = all(build(name, 5, 1.0 / 64.0).unwrap().as_mut());
        let bytes = record(build(name, 5, 1.0 / 64.0).unwrap().as_mut(), Vec::new()).unwrap();
        // Replayed as an AccessSource, like the simulator would.
        let mut replay = TraceReader::from_reader(bytes.as_slice()).unwrap();
        assert_eq!(replay.info(), build(name, 5, 1.0 / 64.0).unwrap().info());
        let got = all(&mut replay);
        assert!(replay.error().is_none());
        assert!(got == expected, "{name} did not round-trip");
        assert_eq!(read_exact(&bytes).unwrap(), expected);
        eprintln!("{name}: {:.2} bytes per access", bytes.len() as f64 / expected.len() as f64);
    }
}

#[test]
fn many_awkward_events_round_trip_across_blocks() {
    let events = awkward_events(200_000);
    let bytes = write_exact(&events);
    assert!(read_exact(&bytes).unwrap() == events);
}

proptest! {
    #[test]
    fn any_events_round_trip(raw in prop::collection::vec(
        (0..FOOTPRINT, any::<u32>(), any::<u16>(), any::<u8>(), any::<bool>()), 0..400)
    ) {
        let events: Vec<Access> = raw
            .into_iter()
            .map(|(addr, instructions, size, thread, w)| Access {
                addr,
                instructions,
                size,
                thread,
                kind: if w { AccessKind::Write } else { AccessKind::Read },
            })
            .collect();
        let bytes = write_exact(&events);
        prop_assert_eq!(read_exact(&bytes).unwrap(), events);
    }
}

#[test]
fn aggregated_trace_equals_a_direct_aggregation() {
    let epoch = 10_000u32;
    let events = all(build("pmbench-s12-r50", 3, 1.0 / 64.0).unwrap().as_mut());
    let bytes =
        aggregate(build("pmbench-s12-r50", 3, 1.0 / 64.0).unwrap().as_mut(), epoch, Vec::new()).unwrap();
    let expected: Vec<Vec<(u32, PageCounts)>> = events
        .chunks(epoch as usize)
        .map(|chunk| {
            let mut pages: BTreeMap<u32, PageCounts> = BTreeMap::new();
            for a in chunk {
                let c = pages.entry((a.addr / 4096) as u32).or_default();
                match a.kind {
                    AccessKind::Read => c.reads += 1,
                    AccessKind::Write => c.writes += 1,
                }
            }
            pages.into_iter().collect()
        })
        .collect();
    let r = TraceReader::from_reader(bytes.as_slice()).unwrap();
    assert_eq!(r.form(), TraceForm::Aggregated { epoch_accesses: epoch });
    assert_eq!(read_epochs(&bytes).unwrap(), expected);
}

/// A small trace of each form, for the damage tests.
fn small_traces() -> Vec<Vec<u8>> {
    let events: Vec<Access> =
        awkward_events(300).into_iter().map(|a| Access { addr: a.addr % 40_000, ..a }).collect();
    let exact = write_exact(&events);
    let mut w = TraceWriter::new(
        Vec::new(),
        info(events.len() as u64, 40_000),
        TraceForm::Aggregated { epoch_accesses: 100 },
    )
    .unwrap();
    w.write_batch(&events).unwrap();
    vec![exact, w.finish().unwrap()]
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    for bytes in small_traces() {
        read_any(&bytes).unwrap();
        for cut in 0..bytes.len() {
            assert!(read_any(&bytes[..cut]).is_err(), "cut at {cut} of {} read fine", bytes.len());
        }
    }
}

#[test]
fn a_flipped_byte_anywhere_is_an_error() {
    for bytes in small_traces() {
        for i in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                assert!(read_any(&bad).is_err(), "flip {flip:#x} at {i} went unnoticed");
            }
        }
    }
}

#[test]
fn a_flipped_payload_byte_is_a_checksum_error() {
    let bytes = write_exact(&awkward_events(100));
    // The first block's payload starts after the header and its 12-byte block header.
    let header = 19 + u32::from_le_bytes(bytes[15..19].try_into().unwrap()) as usize + 4;
    let mut bad = bytes.clone();
    bad[header + 12 + 5] ^= 0x10;
    assert!(matches!(read_exact(&bad), Err(TraceError::Checksum { .. })));
}

#[test]
fn trailing_garbage_is_an_error() {
    let mut bytes = write_exact(&awkward_events(10));
    bytes.push(0);
    assert!(read_exact(&bytes).is_err());
}

#[test]
fn bad_magic_says_how_to_make_a_trace() {
    let err = TraceReader::from_reader(&b"PK\x03\x04 definitely a zip file"[..]).err().unwrap();
    assert_eq!(
        err.to_string(),
        "trace input is not a Terrace trace (bad magic); make one with `terrace trace generate`"
    );
}

#[test]
fn other_versions_are_refused_by_number() {
    for version in [0u16, 4, u16::MAX] {
        let mut bytes = write_exact(&awkward_events(3));
        bytes[8..10].copy_from_slice(&version.to_le_bytes());
        let err = read_exact(&bytes).unwrap_err();
        assert!(
            matches!(err, TraceError::UnsupportedVersion { found, supported: 3, .. } if found == version)
        );
        assert!(err.to_string().contains("reads versions 1 to 3"), "{err}");
    }
}

#[test]
fn truncation_reports_where() {
    let bytes = write_exact(&awkward_events(100));
    let err = read_exact(&bytes[..bytes.len() - 3]).unwrap_err();
    let TraceError::Truncated { place, offset, .. } = &err else { panic!("{err}") };
    assert_eq!(place, "block 1");
    assert_eq!(*offset, bytes.len() as u64 - 3);
}

#[test]
fn the_writer_insists_on_the_declared_count() {
    let mut w = TraceWriter::new(Vec::new(), info(5, FOOTPRINT), TraceForm::Exact).unwrap();
    w.write_batch(&awkward_events(4)).unwrap();
    assert!(matches!(w.finish(), Err(TraceError::CountMismatch { declared: 5, written: 4 })));
}

#[test]
fn aggregation_needs_addresses_inside_the_footprint_and_a_real_epoch() {
    let form = TraceForm::Aggregated { epoch_accesses: 10 };
    let mut w = TraceWriter::new(Vec::new(), info(1, 4096), form).unwrap();
    let err = w.write_batch(&[Access::read(4096, 8, 0, 0)]).unwrap_err();
    assert!(matches!(err, TraceError::OutOfFootprint { addr: 4096, .. }));
    let zero = TraceForm::Aggregated { epoch_accesses: 0 };
    assert!(matches!(
        TraceWriter::new(Vec::new(), info(1, 4096), zero),
        Err(TraceError::CannotAggregate { epoch_accesses: 0 })
    ));
}

#[test]
fn reading_the_wrong_form_is_an_error_not_a_panic() {
    let [exact, aggregated]: [Vec<u8>; 2] = small_traces().try_into().unwrap();
    let mut r = TraceReader::from_reader(Cursor::new(aggregated)).unwrap();
    assert!(matches!(r.read_batch(&mut Vec::new(), 10), Err(TraceError::WrongForm { .. })));
    assert_eq!(r.fill(&mut Vec::new(), 10), 0);
    assert!(r.error().is_some());
    let mut r = TraceReader::from_reader(Cursor::new(exact)).unwrap();
    assert!(matches!(r.next_epoch(), Err(TraceError::WrongForm { .. })));
}

#[test]
fn files_and_trace_info() {
    let dir = std::env::temp_dir().join(format!("terrace-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (exact, agg) = (dir.join("gups.trace"), dir.join("gups.agg"));

    let mut source = build("gups", 9, 1.0 / 64.0).unwrap();
    let events = all(source.as_mut());
    let info = source.info().clone();
    let mut w = TraceWriter::create(&exact, info.clone(), TraceForm::Exact).unwrap();
    w.write_batch(&events).unwrap();
    w.finish().unwrap();
    let file = std::fs::File::create(&agg).unwrap();
    aggregate(build("gups", 9, 1.0 / 64.0).unwrap().as_mut(), 50_000, file).unwrap();

    let mut pages: Vec<u64> = events.iter().map(|a| a.addr / 4096).collect();
    pages.sort_unstable();
    pages.dedup();
    let reads = events.iter().filter(|a| a.kind == AccessKind::Read).count() as u64;

    let s = trace_info(&exact).unwrap();
    assert_eq!(s.info, info);
    assert_eq!((s.events, s.reads, s.writes), (info.accesses, reads, info.accesses - reads));
    assert_eq!(s.distinct_pages, pages.len() as u64);
    assert_eq!(s.footprint_bytes, info.footprint_bytes);
    assert_eq!((s.threads, s.epochs), (Some(16), None));

    let a = trace_info(&agg).unwrap();
    assert_eq!((a.events, a.reads, a.distinct_pages), (s.events, s.reads, s.distinct_pages));
    assert_eq!(a.threads, None);
    assert_eq!(a.epochs, Some(info.accesses.div_ceil(50_000)));
    assert!(std::fs::metadata(&agg).unwrap().len() < std::fs::metadata(&exact).unwrap().len());

    let missing = TraceReader::open(dir.join("missing")).err().unwrap();
    assert!(matches!(missing, TraceError::Input(_)));
    assert!(missing.to_string().contains("does not exist"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Object events between accesses (version 3): `record` writes each at its place, the reader
/// hands them back at the same places, across block boundaries, with every field intact.
#[test]
fn object_events_round_trip_at_their_places() {
    use terrace_workloads::{MemorySource, ObjectEvent, ObjectEventAt};
    let accesses = awkward_events(150_000);
    let mut events = Vec::new();
    for (i, at) in [0u64, 0, 1, 65_535, 65_536, 65_536, 99_999, 150_000, 150_000].into_iter().enumerate() {
        let i = i as u64;
        let event = if i.is_multiple_of(2) {
            ObjectEvent::alloc(i << 30, FOOTPRINT - (i << 30), u64::MAX - i)
        } else {
            ObjectEvent::free(FOOTPRINT - 1, 1, i)
        };
        events.push(ObjectEventAt { at, event });
    }
    let info = info(accesses.len() as u64, FOOTPRINT);
    let mut source = MemorySource::with_events(info.clone(), accesses.clone(), events.clone());
    let bytes = record(&mut source, Vec::new()).unwrap();
    assert_eq!(trace_info_of(&bytes).object_events, events.len() as u64);
    // Read back with batch sizes that cut blocks, taking events after every batch.
    for batch in [7_777, 1 << 16, 1] {
        let mut r = TraceReader::from_reader(&bytes[..]).unwrap();
        let (mut got, mut got_events) = (Vec::new(), Vec::new());
        loop {
            let n = r.fill(&mut got, batch);
            let before = got_events.len();
            r.take_object_events(&mut got_events);
            assert!(
                got_events[before..].iter().all(|e| e.at <= got.len() as u64),
                "an event ahead of its place"
            );
            if n == 0 {
                break;
            }
        }
        assert!(r.take_error().is_none());
        assert_eq!(got, accesses);
        assert_eq!(got_events, events, "batch {batch}");
    }
    // The writer refuses an object outside the footprint; the aggregated form leaves events out.
    let mut w = TraceWriter::new(Vec::new(), info.clone(), TraceForm::Exact).unwrap();
    let e = w.write_object_event(&ObjectEvent::alloc(FOOTPRINT - 10, 11, 0)).unwrap_err();
    assert!(matches!(e, TraceError::ObjectOutOfFootprint { .. }), "{e}");
    let mut source = MemorySource::with_events(info, accesses, events);
    let epochs = aggregate(&mut source, 10_000, Vec::new()).unwrap();
    assert_eq!(trace_info_of(&epochs).object_events, 0);
}

/// A version 2 trace (no object events) still reads, and its address mode 3 stays invalid.
#[test]
fn a_version_2_trace_still_reads_and_cannot_hold_object_events() {
    use terrace_workloads::{MemorySource, ObjectEvent, ObjectEventAt};
    let accesses = awkward_events(1000);
    let v3 = write_exact(&accesses);
    // Version 2 differs only in its version field: the header checksum, and so every block's
    // (each chains to it), change with it.
    let v2 = relabel(&v3, 2);
    assert_eq!(read_exact(&v2).unwrap(), accesses);
    let info = info(accesses.len() as u64, FOOTPRINT);
    let event = ObjectEventAt { at: 10, event: ObjectEvent::alloc(0, 4096, 1) };
    let with =
        record(&mut MemorySource::with_events(info, accesses.clone(), vec![event]), Vec::new()).unwrap();
    assert_eq!(read_exact(&with).unwrap(), accesses);
    let e = read_exact(&relabel(&with, 2)).unwrap_err().to_string();
    assert!(e.contains("reserved address mode"), "{e}");
}

fn trace_info_of(bytes: &[u8]) -> terrace_workloads::trace::TraceSummary {
    let path =
        std::env::temp_dir().join(format!("terrace-objects-{}-{}.trace", std::process::id(), bytes.len()));
    std::fs::write(&path, bytes).unwrap();
    let s = trace_info(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    s
}

/// `bytes` (a trace written by this build) as version `version`, every checksum recomputed as
/// docs/formats.md says (versions 2 and 3 chain alike).
fn relabel(bytes: &[u8], version: u16) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[8..10].copy_from_slice(&version.to_le_bytes());
    let json_len = u32::from_le_bytes(out[15..19].try_into().unwrap()) as usize;
    let header_end = 19 + json_len;
    let mut previous = crc32fast::hash(&out[..header_end]);
    out[header_end..header_end + 4].copy_from_slice(&previous.to_le_bytes());
    let mut at = header_end + 4;
    let mut seq = 0u64;
    while at < out.len() {
        let len = u32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap()) as usize;
        let mut h = crc32fast::Hasher::new();
        h.update(&previous.to_le_bytes());
        h.update(&seq.to_le_bytes());
        h.update(&out[at..at + 8]);
        h.update(&out[at + 12..at + 12 + len]);
        previous = h.finalize();
        out[at + 8..at + 12].copy_from_slice(&previous.to_le_bytes());
        at += 12 + len;
        seq += 1;
    }
    out
}
