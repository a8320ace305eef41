//! damo's recordings (`damo record --output_type json`, and `damo report raw --json`-style
//! dumps of the same records) read as recorded intervals: each snapshot an interval, each
//! region's `nr_accesses` the samples in which it was seen accessed (docs/formats.md,
//! "Importing damo's recordings"). The form followed is damo's `DamonRecord.to_kvpairs`
//! (src/_damo_records.py and src/_damon.py of damonitor/damo, v2.x): a JSON list of records,
//! each with `intervals` and `snapshots`, each snapshot with `regions` of `start`, `end` and
//! `nr_accesses: {samples, percent}`. Numbers may be JSON numbers or decimal strings (damo
//! writes raw numbers as strings).

use super::recorded::{Interval, Span, ACCESSES_PER_TOUCH};
use super::PAGE_SHIFT;
use serde_json::Value;

/// One damo record made into intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct DamoRecording {
    pub intervals: Vec<Interval>,
    /// The aggregation interval (µs), from the record's `intervals` or else its snapshots' times.
    pub aggregation_us: Option<u64>,
    /// Samples per aggregation, when the record's intervals say.
    pub samples_per_aggregation: Option<u64>,
    /// Records in the file, of which one was read.
    pub records: usize,
}

/// Why a damo file cannot be read; the message names the place in the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DamoError(String);

fn bad(what: impl Into<String>) -> DamoError {
    DamoError(what.into())
}

/// A number as damo writes it: a JSON number, or a string of digits (commas allowed).
fn number(v: &Value, place: &str) -> Result<u64, DamoError> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| bad(format!("{place} is {n}, not a whole number ≥ 0"))),
        Value::String(s) => {
            let digits: String = s.chars().filter(|&c| c != ',').collect();
            digits.trim().parse().map_err(|_| bad(format!("{place} is \"{s}\", not a number")))
        }
        other => Err(bad(format!("{place} is {}, not a number", kind(other)))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn field<'a>(v: &'a Value, key: &str, place: &str) -> Result<&'a Value, DamoError> {
    v.get(key).ok_or_else(|| bad(format!("{place} has no \"{key}\"")))
}

fn list<'a>(v: &'a Value, place: &str) -> Result<&'a Vec<Value>, DamoError> {
    v.as_array().ok_or_else(|| bad(format!("{place} is {}, not a list", kind(v))))
}

/// Parses damo's JSON record file `text` and takes record number `index` (0: the first).
pub fn parse(text: &str, index: usize) -> Result<DamoRecording, DamoError> {
    let root: Value = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "not JSON ({e}); damo's json_compressed output \
             is zlib-compressed: decompress it first, or record with --output_type json"
        ))
    })?;
    let records = list(&root, "the file (damo writes a list of records)")?;
    let record = records
        .get(index)
        .ok_or_else(|| bad(format!("it has {} record(s), so there is no record {index}", records.len())))?;
    let place = format!("record {index}");
    let (sample_us, aggregation_us) = match record.get("intervals") {
        Some(i) if !i.is_null() => (
            i.get("sample_us").and_then(|v| number(v, "sample_us").ok()),
            i.get("aggr_us").and_then(|v| number(v, "aggr_us").ok()),
        ),
        _ => (None, None),
    };
    let samples_per_aggregation = match (sample_us, aggregation_us) {
        (Some(s), Some(a)) if s > 0 && a >= s => Some(a / s),
        _ => None,
    };
    let snapshots = list(field(record, "snapshots", &place)?, &format!("{place}'s snapshots"))?;
    let mut intervals = Vec::with_capacity(snapshots.len());
    let mut durations = Vec::new();
    for (k, snapshot) in snapshots.iter().enumerate() {
        let place = format!("{place}, snapshot {k}");
        let regions = list(field(snapshot, "regions", &place)?, &format!("{place}'s regions"))?;
        if let (Some(s), Some(e)) = (snapshot.get("start_time"), snapshot.get("end_time")) {
            if let (Ok(s), Ok(e)) = (number(s, "start_time"), number(e, "end_time")) {
                if e > s {
                    durations.push(e - s);
                }
            }
        }
        let mut interval = Vec::with_capacity(regions.len());
        for (j, region) in regions.iter().enumerate() {
            let place = format!("{place}, region {j}");
            let start = number(field(region, "start", &place)?, &format!("{place}'s start"))?;
            let end = number(field(region, "end", &place)?, &format!("{place}'s end"))?;
            if end < start {
                return Err(bad(format!("{place} ends ({end:#x}) before it starts ({start:#x})")));
            }
            // damo's fake snapshot (start = end = 0, nr_accesses -1) and empty regions hold nothing.
            if end == start {
                continue;
            }
            let samples =
                accessed_samples(field(region, "nr_accesses", &place)?, samples_per_aggregation, &place)?;
            if samples == 0 {
                continue;
            }
            let first = start >> PAGE_SHIFT;
            let last = (end - 1) >> PAGE_SHIFT;
            interval.push(Span {
                first_page: first,
                pages: last - first + 1,
                reads: samples.saturating_mul(ACCESSES_PER_TOUCH),
                writes: 0,
            });
        }
        intervals.push(interval);
    }
    // Snapshot times are in ns; the median is robust to the first snapshot's guessed start.
    durations.sort_unstable();
    let from_times = durations.get(durations.len() / 2).map(|ns| ns / 1000);
    Ok(DamoRecording {
        intervals,
        aggregation_us: aggregation_us.or(from_times),
        samples_per_aggregation,
        records: records.len(),
    })
}

/// A region's `nr_accesses` in samples: `{samples, percent}` (either may be null), or a plain
/// number (older damo).
fn accessed_samples(v: &Value, per_aggregation: Option<u64>, place: &str) -> Result<u64, DamoError> {
    if !v.is_object() {
        // damo's fake snapshot writes -1: nothing accessed.
        if v.as_i64().is_some_and(|n| n < 0) {
            return Ok(0);
        }
        return number(v, &format!("{place}'s nr_accesses"));
    }
    match (v.get("samples").filter(|s| !s.is_null()), v.get("percent").filter(|p| !p.is_null())) {
        (Some(s), _) if s.as_i64().is_some_and(|n| n < 0) => Ok(0),
        (Some(s), _) => number(s, &format!("{place}'s nr_accesses.samples")),
        (None, Some(p)) => {
            let percent = number(p, &format!("{place}'s nr_accesses.percent"))?;
            let per = per_aggregation.ok_or_else(|| {
                bad(format!(
                    "{place} gives nr_accesses only in percent and the record has no intervals to turn it \
                     into samples"
                ))
            })?;
            Ok((percent * per).div_ceil(100))
        }
        (None, None) => Err(bad(format!("{place}'s nr_accesses has neither samples nor percent"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_in_damos_form_becomes_intervals() {
        let text = r#"[{"kdamond_idx": "0", "context_idx": "0",
            "intervals": {"sample_us": "5000", "aggr_us": "100000", "ops_update_us": "1000000"},
            "scheme_idx": null, "target_id": "0", "scheme_filters": [],
            "snapshots": [
              {"start_time": "1000000000", "end_time": "1100000000", "total_bytes": "16384",
               "regions": [
                 {"start": "4096", "end": "12288", "nr_accesses": {"samples": "3", "percent": null},
                  "age": {"usec": null, "aggr_intervals": "2"}, "sz_filter_passed": "0"},
                 {"start": 12288, "end": 20480, "nr_accesses": {"samples": 0, "percent": null},
                  "age": {"usec": null, "aggr_intervals": "9"}}]},
              {"start_time": "1100000000", "end_time": "1200000000",
               "regions": [{"start": "4096", "end": "6000", "nr_accesses": {"samples": null, "percent": 50},
                  "age": {"usec": null, "aggr_intervals": "0"}}]}
            ]}]"#;
        let r = parse(text, 0).unwrap();
        assert_eq!(r.aggregation_us, Some(100_000));
        assert_eq!(r.samples_per_aggregation, Some(20));
        assert_eq!(r.intervals.len(), 2);
        assert_eq!(r.intervals[0], vec![Span { first_page: 1, pages: 2, reads: 3 * 64, writes: 0 }]);
        // 50% of 20 samples; the region ends inside page 1, which it counts whole.
        assert_eq!(r.intervals[1], vec![Span { first_page: 1, pages: 1, reads: 10 * 64, writes: 0 }]);
    }

    #[test]
    fn malformed_files_say_where() {
        for (text, says) in [
            ("{", "not JSON"),
            ("{}", "not a list"),
            ("[]", "no record 0"),
            (r#"[{"snapshots": 3}]"#, "record 0's snapshots is a number"),
            (r#"[{"snapshots": [{"regions": [{"start": "x", "end": 1}]}]}]"#, "snapshot 0, region 0's start"),
            (r#"[{"snapshots": [{"regions": [{"start": 9, "end": 1}]}]}]"#, "ends"),
            (
                r#"[{"snapshots": [{"regions": [{"start": 0, "end": 4096, "nr_accesses": {"percent": 5}}]}]}]"#,
                "percent",
            ),
        ] {
            let e = parse(text, 0).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
