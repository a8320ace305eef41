//! Malformed and hostile traces (issue 9): every one is refused with one line or read back as
//! exactly what was written; none hangs, panics or allocates without bound.
//!
//! The helpers below take a trace apart into header and blocks and put it back together with
//! freshly computed checksums, following docs/formats.md independently of the crate, so a test
//! can change one field and see the reader's rules (not its checksums) refuse it.

use std::io::Cursor;
use std::path::Path;
use terrace_model::{AccessKind, PageCounts};
use terrace_workloads::trace::{trace_info, TraceError, TraceForm, TraceReader, TraceWriter};
use terrace_workloads::{build, list, Access, AccessSource, WorkloadInfo};

const END_MARKER: u32 = u32::MAX;

fn info(accesses: u64, footprint_bytes: u64, threads: u32) -> WorkloadInfo {
    WorkloadInfo {
        name: "hostile".into(),
        description: "events made up by a test".into(),
        footprint_bytes,
        threads,
        scale: 1024.0,
        suggested_fast_bytes: footprint_bytes / 4,
        accesses,
        recording: None,
    }
}

/// A small xorshift: the mutation loop must be the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `n` events of 16 threads in a 1 MiB footprint: strided runs, repeats and random jumps, so
/// blocks differ from each other.
fn events(n: usize, seed: u64) -> Vec<Access> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|i| {
            let r = rng.next();
            let addr = if r.is_multiple_of(3) { (i as u64 * 64) % (1 << 20) } else { (r >> 8) % (1 << 20) };
            let kind = if r & (1 << 60) != 0 { AccessKind::Write } else { AccessKind::Read };
            let size = if r & (1 << 50) != 0 { 64 } else { 8 };
            Access { addr, instructions: (r >> 40) as u32 % 16, size, thread: (r % 16) as u8, kind }
        })
        .collect()
}

fn write(events: &[Access], info: WorkloadInfo, form: TraceForm) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), info, form).unwrap();
    for chunk in events.chunks(10_000) {
        w.write_batch(chunk).unwrap();
    }
    w.finish().unwrap()
}

/// An exact trace of three blocks (65,536 events each but the last).
fn three_blocks() -> (Vec<Access>, Vec<u8>) {
    let ev = events(150_000, 7);
    let bytes = write(&ev, info(ev.len() as u64, 1 << 20, 16), TraceForm::Exact);
    (ev, bytes)
}

/// An aggregated trace of 30 epochs of 100 accesses.
fn epochs_trace() -> (Vec<Access>, Vec<u8>) {
    let ev = events(3_000, 11);
    let bytes = write(&ev, info(ev.len() as u64, 1 << 20, 16), TraceForm::Aggregated { epoch_accesses: 100 });
    (ev, bytes)
}

/// What a trace holds, whatever its form.
#[derive(Debug, PartialEq)]
enum Content {
    Events(Vec<Access>),
    Epochs(Vec<Vec<(u32, PageCounts)>>),
}

/// Reads a whole trace; the info comes back too, to check it against the header.
fn read(bytes: &[u8]) -> Result<(WorkloadInfo, Content), TraceError> {
    let mut r = TraceReader::from_reader(bytes)?;
    let info = r.info().clone();
    match r.form() {
        TraceForm::Exact => {
            let mut out = Vec::new();
            while r.read_batch(&mut out, 30_000)? > 0 {}
            Ok((info, Content::Events(out)))
        }
        TraceForm::Aggregated { .. } => {
            let mut out = Vec::new();
            while let Some(e) = r.next_epoch()? {
                out.push(e);
            }
            Ok((info, Content::Epochs(out)))
        }
    }
}

fn err(bytes: &[u8]) -> String {
    let e = read(bytes).expect_err("the reader accepted a bad trace").to_string();
    assert!(!e.contains('\n'), "not one line: {e}");
    e
}

/// A trace taken apart: the fixed header fields, the JSON, the data blocks (count, payload) and
/// the end marker's total.
#[derive(Clone)]
struct Parts {
    version: u16,
    form: u8,
    epoch: u32,
    json: Vec<u8>,
    blocks: Vec<(u32, Vec<u8>)>,
    total: u64,
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().unwrap())
}

impl Parts {
    fn parse(bytes: &[u8]) -> Parts {
        assert_eq!(&bytes[..8], b"TRRCTRC\0");
        let n = le32(&bytes[15..]) as usize;
        let mut pos = 19 + n + 4;
        let mut blocks = Vec::new();
        loop {
            let (count, len) = (le32(&bytes[pos..]), le32(&bytes[pos + 4..]) as usize);
            let payload = bytes[pos + 12..pos + 12 + len].to_vec();
            pos += 12 + len;
            if count == END_MARKER {
                assert_eq!(pos, bytes.len());
                let total = u64::from_le_bytes(payload.try_into().unwrap());
                let json = bytes[19..19 + n].to_vec();
                let (version, form, epoch) =
                    (u16::from_le_bytes([bytes[8], bytes[9]]), bytes[10], le32(&bytes[11..]));
                return Parts { version, form, epoch, json, blocks, total };
            }
            blocks.push((count, payload));
        }
    }

    /// The bytes, every checksum computed as docs/formats.md says for `self.version`.
    fn bytes(&self) -> Vec<u8> {
        let mut out = b"TRRCTRC\0".to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.push(self.form);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&(self.json.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.json);
        let header_crc = crc32fast::hash(&out);
        out.extend_from_slice(&header_crc.to_le_bytes());
        let end = (END_MARKER, self.total.to_le_bytes().to_vec());
        let mut previous = header_crc;
        for (seq, (count, payload)) in self.blocks.iter().chain([&end]).enumerate() {
            let mut fields = count.to_le_bytes().to_vec();
            fields.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            let mut covered = Vec::new();
            if self.version >= 2 {
                covered.extend_from_slice(&previous.to_le_bytes());
                covered.extend_from_slice(&(seq as u64).to_le_bytes());
            }
            covered.extend_from_slice(&fields);
            covered.extend_from_slice(payload);
            previous = crc32fast::hash(&covered);
            out.extend_from_slice(&fields);
            out.extend_from_slice(&previous.to_le_bytes());
            out.extend_from_slice(payload);
        }
        out
    }

    fn json_value(&self) -> serde_json::Value {
        serde_json::from_slice(&self.json).unwrap()
    }

    /// The same trace with one header field set to `value` (checksums recomputed).
    fn with_field(&self, field: &str, value: serde_json::Value) -> Vec<u8> {
        let mut v = self.json_value();
        v[field] = value;
        Parts { json: serde_json::to_vec(&v).unwrap(), ..self.clone() }.bytes()
    }

    /// The bytes where each block starts (data blocks, then the end marker), and where the
    /// last ends.
    fn block_offsets(bytes: &[u8]) -> Vec<usize> {
        let mut pos = 19 + le32(&bytes[15..]) as usize + 4;
        let mut starts = vec![];
        while pos < bytes.len() {
            starts.push(pos);
            pos += 12 + le32(&bytes[pos + 4..]) as usize;
        }
        starts.push(pos);
        starts
    }
}

/// The trace's raw block byte ranges (with their stored checksums), reordered by `order`.
fn reorder_blocks(bytes: &[u8], order: &[usize]) -> Vec<u8> {
    let at = Parts::block_offsets(bytes);
    let data = at.len() - 2;
    let mut out = bytes[..at[0]].to_vec();
    for &i in order {
        out.extend_from_slice(&bytes[at[i]..at[i + 1]]);
    }
    out.extend_from_slice(&bytes[at[data]..]);
    out
}

#[test]
fn the_writer_output_parses_and_rebuilds_bit_for_bit() {
    // The independent checksum computation above agrees with the writer's.
    for (_, bytes) in [three_blocks(), epochs_trace()] {
        let parts = Parts::parse(&bytes);
        assert_eq!(parts.version, terrace_workloads::trace::VERSION);
        assert!(parts.bytes() == bytes);
    }
    assert_eq!(Parts::parse(&three_blocks().1).blocks.len(), 3);
}

#[test]
fn swapped_reversed_repeated_dropped_or_foreign_blocks_are_refused() {
    for (_, bytes) in [three_blocks(), epochs_trace()] {
        let n = Parts::parse(&bytes).blocks.len();
        let mut orders: Vec<Vec<usize>> = vec![(0..n).rev().collect()];
        let mut swapped: Vec<usize> = (0..n).collect();
        swapped.swap(0, 1);
        orders.push(swapped);
        let mut swapped: Vec<usize> = (0..n).collect();
        swapped.swap(n - 2, n - 1);
        orders.push(swapped);
        orders.push((0..n).chain([n - 1]).collect()); // the last block twice
        orders.push((1..n).collect()); // the first dropped
        orders.push((0..n - 1).collect()); // the last dropped
        for order in orders {
            let e = err(&reorder_blocks(&bytes, &order));
            assert!(e.contains("checksum mismatch"), "{order:?}: {e}");
        }
    }
    // Block 1 of a trace of other events, at position 1 of this one: the checksum binds it to
    // the blocks before it, so even a trace with the same header (another seed) cannot lend it.
    let (_, ours) = three_blocks();
    for name in ["hostile", "other"] {
        let ev = events(150_000, 99);
        let info = WorkloadInfo { name: name.into(), ..info(ev.len() as u64, 1 << 20, 16) };
        let theirs = write(&ev, info, TraceForm::Exact);
        let (a, b) = (Parts::block_offsets(&ours), Parts::block_offsets(&theirs));
        let mut spliced = ours[..a[1]].to_vec();
        spliced.extend_from_slice(&theirs[b[1]..b[2]]);
        spliced.extend_from_slice(&ours[a[2]..]);
        assert!(err(&spliced).contains("checksum mismatch in block 1"));
        // Its blocks from 1 on, after our block 0: refused too.
        let mut tail = ours[..a[1]].to_vec();
        tail.extend_from_slice(&theirs[b[1]..]);
        assert!(err(&tail).contains("checksum mismatch in block 1"));
    }
}

#[test]
fn a_hand_made_version_1_trace_is_still_read() {
    // docs/formats.md's version 1 layout, byte by byte: three events, one block.
    let json = br#"{"name":"v1","description":"by hand","footprint_bytes":1048576,"threads":4,"scale":1024.0,"suggested_fast_bytes":262144,"accesses":3}"#;
    let mut t = b"TRRCTRC\0".to_vec();
    t.extend_from_slice(&1u16.to_le_bytes());
    t.push(0); // exact
    t.extend_from_slice(&0u32.to_le_bytes());
    t.extend_from_slice(&(json.len() as u32).to_le_bytes());
    t.extend_from_slice(json);
    t.extend_from_slice(&crc32fast::hash(&t).to_le_bytes());
    let payload = [
        // Write; a thread byte (2); a fields byte (size and instructions follow); delta
        // zigzag(0x1000) = 0x2000 as a varint; size 8; instructions 100.
        &[0xa7, 2, 3, 0x80, 0x40, 8, 100][..],
        // Read, same thread, slot 0's address + its stride: 0x2000.
        &[0x00],
        // Read, thread 0, the same address as its slot 0 (0).
        &[0x44],
    ]
    .concat();
    for (count, payload) in [(3u32, &payload[..]), (END_MARKER, &3u64.to_le_bytes()[..])] {
        let mut fields = count.to_le_bytes().to_vec();
        fields.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32fast::hash(&[&fields[..], payload].concat());
        t.extend_from_slice(&fields);
        t.extend_from_slice(&crc.to_le_bytes());
        t.extend_from_slice(payload);
    }
    let (info, content) = read(&t).unwrap();
    assert_eq!((info.name.as_str(), info.threads, info.accesses), ("v1", 4, 3));
    let expected = vec![
        Access::write(0x1000, 8, 2, 100),
        Access { addr: 0x2000, instructions: 100, size: 8, thread: 2, kind: AccessKind::Read },
        Access::read(0, 64, 0, 0),
    ];
    assert_eq!(content, Content::Events(expected));
    // The same blocks labelled version 2 fail: version 2 checksums cover more. Written with
    // version 2 checksums, they read.
    let as_v2 = Parts { version: 2, ..Parts::parse(&t) };
    let mut relabelled = t.clone();
    relabelled[8] = 2;
    let header_end = 19 + json.len();
    let crc = crc32fast::hash(&relabelled[..header_end]);
    relabelled[header_end..header_end + 4].copy_from_slice(&crc.to_le_bytes());
    assert!(err(&relabelled).contains("checksum mismatch in block 0"));
    assert!(read(&as_v2.bytes()).is_ok());
}

#[test]
fn version_1_traces_of_both_forms_read_back_but_their_blocks_are_not_bound() {
    for (_, bytes) in [three_blocks(), epochs_trace()] {
        let v2 = read(&bytes).unwrap();
        let mut v1 = Parts::parse(&bytes);
        v1.version = 1;
        let v1_bytes = v1.bytes();
        assert_eq!(read(&v1_bytes).unwrap(), v2);
        // What version 2 fixes: a version 1 trace's blocks swap unnoticed (docs/formats.md).
        let n = v1.blocks.len();
        let swapped = reorder_blocks(&v1_bytes, &[[1, 0].as_slice(), &(2..n).collect::<Vec<_>>()].concat());
        let (_, content) = read(&swapped).unwrap();
        assert_ne!(content, v2.1);
    }
}

/// `bytes` with header field `field` set to `value`, checksums made right.
fn with_field(bytes: &[u8], field: &str, value: serde_json::Value) -> Vec<u8> {
    Parts::parse(bytes).with_field(field, value)
}

#[test]
fn every_header_field_is_checked_with_a_message_naming_it() {
    use serde_json::json;
    let (_, exact) = three_blocks();
    let (_, agg) = epochs_trace();
    let cases = [
        ("threads", json!(0), "threads 0 is not between 1 and 256"),
        ("threads", json!(257), "threads 257"),
        ("threads", json!(1u64 << 31), "threads 2147483648"),
        ("scale", json!(0.0), "scale 0.0 is not a number between 1"),
        ("scale", json!(-1.0), "scale -1.0 is not"),
        ("scale", json!(0.5), "scale 0.5 is not"),
        ("scale", json!(1e300), "scale 1e300 is not"),
        ("footprint_bytes", json!(0), "footprint_bytes is 0"),
        ("footprint_bytes", json!(1u64 << 63), "footprint_bytes 9223372036854775808 is above"),
        ("footprint_bytes", json!(1u64 << 44), "footprint_bytes 17592186044416 is above"),
        ("footprint_bytes", json!((64u64 << 30) + 1), "is above the limit of 68719476736"),
        ("suggested_fast_bytes", json!((64u64 << 30) + 1), "suggested_fast_bytes 68719476737 is above"),
        ("suggested_fast_bytes", json!(u64::MAX), "suggested_fast_bytes 18446744073709551615 is above"),
        ("name", json!(""), "name is empty"),
        ("name", json!("n".repeat(65)), "name is 65 bytes long"),
        ("name", json!("gups\u{1b}[2J"), "name contains the control character '\\u{1b}'"),
        ("name", json!("a\nb"), "name contains the control character '\\n'"),
        ("description", json!("d".repeat(1025)), "description is 1025 bytes long"),
        ("description", json!("ok \u{9b}31m"), "description contains the control character '\\u{9b}'"),
        ("description", json!("bell\u{7}"), "description contains"),
    ];
    for bytes in [&exact, &agg] {
        for (field, value, expected) in &cases {
            let e = err(&with_field(bytes, field, value.clone()));
            assert!(e.contains("has an invalid header: ") && e.contains(expected), "{field}={value}: {e}");
            // No control character of the header reaches the message.
            assert!(!e.chars().any(char::is_control), "{e:?}");
        }
        // Types JSON cannot hold are malformed JSON.
        for (field, value) in [("scale", json!(null)), ("threads", json!(-1)), ("accesses", json!("3"))] {
            assert!(err(&with_field(bytes, field, value)).contains("malformed JSON header"));
        }
    }
    // The largest legal values read fine.
    let max = with_field(&exact, "footprint_bytes", json!(64u64 << 30));
    let max = with_field(&max, "threads", json!(256));
    let max = with_field(&max, "name", json!("n".repeat(64)));
    let max = with_field(&max, "description", json!("é".repeat(512)));
    read(&max).unwrap();
}

#[test]
fn the_access_count_must_match_the_blocks() {
    let (ev, exact) = three_blocks();
    let (agg_ev, agg) = epochs_trace();
    for (bytes, n) in [(&exact, ev.len() as u64), (&agg, agg_ev.len() as u64)] {
        let e = err(&with_field(bytes, "accesses", serde_json::json!(n + 1)));
        assert!(e.contains("end marker counts"), "{e}");
        let e = err(&with_field(bytes, "accesses", serde_json::json!(n - 1)));
        assert!(e.contains("more accesses than the"), "{e}");
        let mut parts = Parts::parse(bytes);
        parts.total += 1;
        assert!(err(&parts.bytes()).contains("end marker counts"));
    }
}

#[test]
fn events_outside_the_threads_or_footprint_are_refused() {
    let (_, exact) = three_blocks();
    // The events use threads 0-15 and addresses up to 1 MiB.
    let e = err(&with_field(&exact, "threads", serde_json::json!(15)));
    assert!(e.contains("an event of thread 15, but the header declares 15 threads in block 0"), "{e}");
    let e = err(&with_field(&exact, "footprint_bytes", serde_json::json!(1 << 19)));
    assert!(e.contains("outside the footprint of 524288 bytes"), "{e}");
    let (_, agg) = epochs_trace();
    let small = with_field(&agg, "suggested_fast_bytes", serde_json::json!(0));
    let e = err(&with_field(&small, "footprint_bytes", serde_json::json!(1 << 19)));
    assert!(e.contains("outside the footprint of 128 pages"), "{e}");
    // The writer refuses the same, so it never writes what the reader refuses.
    let mut w = TraceWriter::new(Vec::new(), info(2, 4096, 4), TraceForm::Exact).unwrap();
    assert!(matches!(
        w.write_batch(&[Access::read(0, 8, 4, 0)]),
        Err(TraceError::OutOfThreads { thread: 4, threads: 4 })
    ));
    assert!(matches!(w.write_batch(&[Access::read(4096, 8, 0, 0)]), Err(TraceError::OutOfFootprint { .. })));
}

#[test]
fn the_writer_refuses_what_the_reader_refuses() {
    let ok = info(0, 1 << 20, 16);
    let bad = [
        WorkloadInfo { threads: 0, ..ok.clone() },
        WorkloadInfo { threads: 257, ..ok.clone() },
        WorkloadInfo { scale: f64::NAN, ..ok.clone() },
        WorkloadInfo { scale: f64::INFINITY, ..ok.clone() },
        WorkloadInfo { scale: 0.0, ..ok.clone() },
        WorkloadInfo { footprint_bytes: 0, suggested_fast_bytes: 0, ..ok.clone() },
        WorkloadInfo { footprint_bytes: 1 << 44, ..ok.clone() },
        WorkloadInfo { suggested_fast_bytes: 1 << 40, ..ok.clone() },
        WorkloadInfo { name: "\u{1b}]0;pwned\u{7}".into(), ..ok.clone() },
        WorkloadInfo { description: "x".repeat(2000), ..ok.clone() },
    ];
    for info in bad {
        let e = TraceWriter::new(Vec::new(), info.clone(), TraceForm::Exact).err().unwrap();
        assert!(matches!(e, TraceError::InvalidInfo { .. }), "{info:?}: {e}");
        assert_eq!(
            Err(e.to_string().replace("cannot write a trace of this workload: ", "")),
            info.validate()
        );
    }
    TraceWriter::new(Vec::new(), ok, TraceForm::Exact).unwrap().finish().unwrap();
}

#[test]
fn every_built_in_workload_passes_the_same_rules() {
    for spec in list() {
        let w = build(spec.name, 1, 1.0 / 64.0).unwrap();
        if let Err(e) = w.info().validate() {
            panic!("{}: {e}", spec.name);
        }
    }
    // At the default size too, and the generators' own names and descriptions fit everywhere.
    for spec in list() {
        build(spec.name, 1, 1.0).unwrap().info().validate().unwrap();
    }
}

#[test]
fn length_fields_cannot_make_the_reader_allocate() {
    let (_, exact) = three_blocks();
    let (_, agg) = epochs_trace();
    // Claimed counts and lengths far beyond the limits, checksums made right: refused from the
    // 12-byte block header alone.
    for (bytes, count, len) in [
        (&exact, 65_537u32, 65_537usize),
        (&exact, 1000, 31_001), // more than 31 bytes an entry (an object event's most)
        (&exact, u32::MAX - 1, 100),
        (&agg, 101, 303),  // more entries than an epoch has accesses
        (&agg, 100, 1501), // more than 15 bytes an entry
        (&agg, u32::MAX - 1, 100),
    ] {
        let mut parts = Parts::parse(bytes);
        parts.blocks[0] = (count, vec![0; len]);
        let e = err(&parts.bytes());
        assert!(e.contains("impossible block size"), "{e}");
    }
    // Before version 3 (no object events) an entry is at most 21 bytes.
    let mut parts = Parts { version: 2, ..Parts::parse(&exact) };
    parts.blocks[0] = (1000, vec![0; 21_001]);
    assert!(err(&parts.bytes()).contains("impossible block size"));
    // An epoch may not list more pages than the footprint has, whatever its length.
    let mut parts = Parts::parse(&agg);
    let mut v = parts.json_value();
    v["footprint_bytes"] = 8192.into();
    v["suggested_fast_bytes"] = 0.into();
    parts.json = serde_json::to_vec(&v).unwrap();
    parts.blocks[0] = (3, vec![1; 9]);
    assert!(err(&parts.bytes()).contains("impossible block size (3 entries"));
    // The largest epoch block there can be (16 Mi pages in 240 MiB), its bytes missing: read in
    // 4 MiB steps, so truncation is found before 240 MiB are allocated.
    let mut parts = Parts::parse(&with_field(&agg, "footprint_bytes", serde_json::json!(64u64 << 30)));
    parts.epoch = u32::MAX;
    parts.blocks.truncate(1);
    let mut bytes = parts.bytes();
    let at = Parts::block_offsets(&bytes)[0];
    bytes.truncate(at + 12 + 1000);
    bytes[at..at + 4].copy_from_slice(&(1u32 << 24).to_le_bytes());
    bytes[at + 4..at + 8].copy_from_slice(&(15u32 << 24).to_le_bytes());
    assert!(err(&bytes).contains("truncated in block 0"));
}

#[test]
fn only_the_last_epoch_may_be_short() {
    let (_, agg) = epochs_trace();
    // Epochs of 100 read as epochs of 150: every epoch but the last is short.
    let mut parts = Parts::parse(&agg);
    parts.epoch = 150;
    assert!(err(&parts.bytes()).contains("an epoch after one of fewer than 150 accesses"));
    // Epochs of 100 read as epochs of 99: too many accesses in one (or more pages than that).
    parts.epoch = 99;
    let e = err(&parts.bytes());
    assert!(e.contains("more accesses than an epoch holds") || e.contains("impossible block size"), "{e}");
}

#[test]
fn files_that_are_not_traces_are_refused_before_reading() {
    let dir = std::env::temp_dir().join(format!("terrace-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one_line = |p: &Path| {
        let e = TraceReader::open(p).err().unwrap().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    };
    assert!(one_line(Path::new("/dev/zero")).contains("not a regular file (a character device)"));
    assert!(one_line(&dir).contains("(a directory)"));
    assert!(one_line(&dir.join("absent.trace")).contains("does not exist"));
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success());
    if made.unwrap_or(false) {
        // Opening it would block forever: refused first.
        assert!(one_line(&fifo).contains("(a FIFO)"));
    }
    assert!(trace_info(&dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One random mutation of `bytes`: raw damage with the stored checksums, or a header field set
/// to an extreme with every checksum recomputed (only changes the reader's rules must catch or
/// that leave the accesses alone: a recomputed checksum cannot tell other events from the real
/// ones).
fn mutate(bytes: &[u8], rng: &mut Rng, version: u16) -> Vec<u8> {
    let parts = Parts::parse(bytes);
    let n = parts.blocks.len();
    match rng.below(10) {
        // Flip 1-3 bytes anywhere.
        0 | 1 => {
            let mut b = bytes.to_vec();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8) | (rng.next() as u8 & 1);
            }
            b
        }
        // Cut anywhere.
        2 => bytes[..rng.below(bytes.len())].to_vec(),
        // Overwrite a run with one byte value.
        3 => {
            let mut b = bytes.to_vec();
            let i = rng.below(b.len());
            let v = [0u8, 0xff, 0x80][rng.below(3)];
            let end = (i + 1 + rng.below(16)).min(b.len());
            b[i..end].fill(v);
            b
        }
        // Reorder, repeat or drop blocks, stored checksums kept (not for version 1, whose
        // blocks are not bound to their place).
        4 if version >= 2 => {
            let mut order: Vec<usize> = (0..n).collect();
            match rng.below(3) {
                0 => order.swap(rng.below(n), rng.below(n)),
                1 => order.insert(rng.below(n + 1), rng.below(n)),
                _ => drop(order.remove(rng.below(n))),
            }
            reorder_blocks(bytes, &order)
        }
        // Fixed header fields to extremes, checksums recomputed.
        5 => {
            let mut p = parts.clone();
            match rng.below(3) {
                0 => p.form = [0, 1, 2, 0xff][rng.below(4)],
                1 => p.epoch = [0, 1, 50, 99, 101, 150, u32::MAX][rng.below(7)],
                _ => p.total = [0, p.total - 1, p.total + 1, u64::MAX][rng.below(4)],
            }
            p.bytes()
        }
        // JSON fields to extremes, checksums recomputed.
        _ => {
            use serde_json::json;
            let (field, value) = match rng.below(7) {
                0 => (
                    "threads",
                    [json!(0), json!(1), json!(15), json!(16), json!(256), json!(u32::MAX)][rng.below(6)]
                        .clone(),
                ),
                1 => (
                    "scale",
                    [json!(0.0), json!(-1.0), json!(1.0), json!(1e9), json!(f64::MAX)][rng.below(5)].clone(),
                ),
                2 => (
                    "footprint_bytes",
                    [
                        json!(0),
                        json!(4096),
                        json!(1 << 19),
                        json!(1 << 20),
                        json!(64u64 << 30),
                        json!(u64::MAX),
                    ][rng.below(6)]
                    .clone(),
                ),
                3 => ("suggested_fast_bytes", [json!(0), json!(u64::MAX)][rng.below(2)].clone()),
                4 => (
                    "accesses",
                    [json!(0), json!(parts.total - 1), json!(parts.total + 1), json!(u64::MAX)][rng.below(4)]
                        .clone(),
                ),
                5 => (
                    "name",
                    [json!(""), json!("\u{1b}[31mred"), json!("x".repeat(100)), json!("fine")][rng.below(4)]
                        .clone(),
                ),
                _ => (
                    "description",
                    [json!("\u{7f}"), json!("y".repeat(2000)), json!("")][rng.below(3)].clone(),
                ),
            };
            parts.with_field(field, value)
        }
    }
}

#[test]
fn mutated_traces_are_refused_or_read_back_exactly() {
    let (_, exact) = three_blocks();
    let (_, agg) = epochs_trace();
    let v1 = |bytes: &[u8]| Parts { version: 1, ..Parts::parse(bytes) }.bytes();
    let traces: Vec<(Vec<u8>, u16, Content)> = [v1(&exact), v1(&agg), exact, agg]
        .into_iter()
        .map(|t| {
            let version = Parts::parse(&t).version;
            let content = read(&t).unwrap().1;
            (t, version, content)
        })
        .collect();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let (mut refused, mut harmless) = (0, 0);
    for case in 0..600 {
        let (original, version, expected) = &traces[case % traces.len()];
        let bad = mutate(original, &mut rng, *version);
        let got = std::panic::catch_unwind(|| read(&bad));
        match got {
            Err(_) => panic!("case {case}: the reader panicked"),
            Ok(Err(e)) => {
                assert!(!e.to_string().contains('\n'), "case {case}: {e}");
                refused += 1;
            }
            Ok(Ok((_, content))) => {
                assert!(content == *expected, "case {case}: a mutation changed what was read");
                harmless += 1;
            }
        }
    }
    eprintln!("{refused} mutations refused, {harmless} harmless");
    assert!(refused > 400, "{refused} refused, {harmless} harmless");
}

#[test]
fn a_real_trace_survives_the_reader_as_an_access_source() {
    // The mutation-free path through AccessSource, after all the rules: what the simulator sees.
    let mut gups = build("gups", 2, 1.0 / 64.0).unwrap();
    let mut expected = Vec::new();
    while gups.fill(&mut expected, 1 << 16) > 0 {}
    let bytes =
        terrace_workloads::trace::record(build("gups", 2, 1.0 / 64.0).unwrap().as_mut(), Vec::new()).unwrap();
    let mut r = TraceReader::from_reader(Cursor::new(bytes)).unwrap();
    let mut got = Vec::new();
    while r.fill(&mut got, 12_345) > 0 {}
    assert!(r.take_error().is_none());
    assert!(got == expected);
}
