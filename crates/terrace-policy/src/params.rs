//! Policy parameters: each value a seed leaves open, or a user could sensibly tune, declared as
//! data beside the policy that reads it: its name, default, kind and range, meaning, and source
//! (the seed section it comes from, or why Terrace chose it where the seed is silent).
//!
//! `terrace list policies --params` prints them; docs/policies.md tabulates them per policy (a
//! test keeps the tables equal to these declarations). A policy spec sets them
//! (`hpwp:hot_threshold=8`, see [`crate::registry`]); so does a `[policy.NAME]` table in the live
//! machine's config.
//!
//! Values are written as on the command line: whole numbers (`8`, `19_997`), durations with a
//! unit (`10ms`, `2s`), sizes with an optional binary unit (`10GiB`), numbers with an optional
//! unit (`100`, `100MB/s`), percentages (`95%` or `95`), `true`/`false`, or one of a few words.

use std::fmt;

/// What a parameter takes, and its allowed range.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A whole number from `min` to `max`, counted in `unit` ("samples", "pages").
    Count { min: u64, max: u64, unit: &'static str },
    /// A duration with a unit (ns, us, ms, s), from `min_ns` to `max_ns`.
    Duration { min_ns: u64, max_ns: u64 },
    /// A size in bytes with an optional binary unit (KiB, MiB, GiB, TiB).
    Bytes { min: u64, max: u64 },
    /// A number from `min` to `max`, `unit` optional after it ("MB/s").
    Number { min: f64, max: f64, unit: &'static str },
    /// A percentage from `min` to `max`: `95%`, or `95`.
    Percent { min: f64, max: f64 },
    /// `true` or `false`.
    Flag,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Interleave weights per tier, fastest first: `even`, `bandwidth`, or whole numbers from 1 to
    /// 255 joined by colons (`3:1`).
    Weights,
}

/// One parameter of a policy.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    /// The default, written as a user would write it (and as [`Value`] prints it).
    pub default: &'static str,
    pub kind: Kind,
    /// What it does, in one line.
    pub meaning: &'static str,
    /// Where the default comes from: a seed section, or "unstated by the seed: chosen because ...".
    pub source: &'static str,
}

/// A parameter's value, as parsed for its kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Count(u64),
    /// Nanoseconds.
    Duration(u64),
    Bytes(u64),
    Number(f64),
    /// In percent (95.0 for 95%).
    Percent(f64),
    Flag(bool),
    /// A choice's word, or interleave weights as written (canonical form).
    Word(String),
}

impl fmt::Display for Value {
    /// The canonical spelling: parsing it gives the same value back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Duration(ns) => {
                let ns = *ns;
                for (unit, per) in
                    [("h", 3_600_000_000_000), ("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)]
                {
                    if ns >= per && ns.is_multiple_of(per) {
                        return write!(f, "{}{unit}", ns / per);
                    }
                }
                write!(f, "{ns}ns")
            }
            Value::Bytes(b) => {
                let b = *b;
                for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
                    if b >= 1 << shift && b.is_multiple_of(1 << shift) {
                        return write!(f, "{}{unit}", b >> shift);
                    }
                }
                write!(f, "{b}")
            }
            Value::Number(x) => write!(f, "{x}"),
            Value::Percent(p) => write!(f, "{p}%"),
            Value::Flag(b) => write!(f, "{b}"),
            Value::Word(w) => f.write_str(w),
        }
    }
}

/// Why a value was refused: the rest of a sentence that starts with the parameter and its
/// value, saying what to give instead.
pub type Refusal = String;

impl Kind {
    /// The range or choices, as `list --params` and the error messages show them.
    pub fn range(&self) -> String {
        match *self {
            Kind::Count { min, max, unit } => format!("{min} to {max} {unit}"),
            Kind::Duration { min_ns, max_ns } => {
                format!("{} to {}", Value::Duration(min_ns), Value::Duration(max_ns))
            }
            Kind::Bytes { min, max } => format!("{} to {}", Value::Bytes(min), Value::Bytes(max)),
            Kind::Number { min, max, unit } => format!("{min} to {max} {unit}"),
            Kind::Percent { min, max } => format!("{min}% to {max}%"),
            Kind::Flag => "true or false".into(),
            Kind::Choice(words) => words.join(" or "),
            Kind::Weights => "even, bandwidth, or N:N:... (1 to 255 per tier, fastest first)".into(),
        }
    }

    /// Parses `text` as a value of this kind, within its range.
    pub fn parse(&self, text: &str) -> Result<Value, Refusal> {
        let t = text.trim();
        let out_of_range = || format!("is out of range; give {}", self.range());
        match *self {
            Kind::Count { min, max, .. } => {
                let n: u64 = t
                    .replace('_', "")
                    .parse()
                    .map_err(|_| format!("is not a whole number; give {}", self.range()))?;
                if !(min..=max).contains(&n) {
                    return Err(out_of_range());
                }
                Ok(Value::Count(n))
            }
            Kind::Duration { min_ns, max_ns } => {
                let (num, unit) = split_number(t);
                let per: f64 = match unit.to_ascii_lowercase().as_str() {
                    "ns" => 1.0,
                    "us" | "µs" => 1e3,
                    "ms" => 1e6,
                    "s" => 1e9,
                    "min" => 60e9,
                    "h" => 3600e9,
                    "" => return Err(format!("needs a unit (ns, us, ms, s, min, h), e.g. {t}ms")),
                    other => {
                        return Err(format!("has an unknown unit '{other}'; use ns, us, ms, s, min or h"))
                    }
                };
                let v: f64 = num
                    .parse()
                    .map_err(|_| format!("is not a duration; write e.g. 10ms or 2s ({})", self.range()))?;
                let ns = (v * per).round();
                if !(ns.is_finite() && ns >= min_ns as f64 && ns <= max_ns as f64) {
                    return Err(out_of_range());
                }
                Ok(Value::Duration(ns as u64))
            }
            Kind::Bytes { min, max } => {
                let (num, unit) = split_number(t);
                let shift = match unit.to_ascii_lowercase().as_str() {
                    "" | "b" => 0,
                    "k" | "kb" | "kib" => 10,
                    "m" | "mb" | "mib" => 20,
                    "g" | "gb" | "gib" => 30,
                    "t" | "tb" | "tib" => 40,
                    other => return Err(format!("has an unknown unit '{other}'; use KiB, MiB, GiB or TiB")),
                };
                let v: f64 =
                    num.parse().map_err(|_| format!("is not a size; write e.g. 2GiB ({})", self.range()))?;
                let b = (v * (1u64 << shift) as f64).round();
                if !(b.is_finite() && b >= min as f64 && b <= max as f64) {
                    return Err(out_of_range());
                }
                Ok(Value::Bytes(b as u64))
            }
            Kind::Number { min, max, unit } => {
                let num = strip_suffix_ignore_case(t, unit).unwrap_or(t).trim();
                let v: f64 = num.parse().map_err(|_| format!("is not a number; give {}", self.range()))?;
                if !(v.is_finite() && v >= min && v <= max) {
                    return Err(out_of_range());
                }
                Ok(Value::Number(v))
            }
            Kind::Percent { min, max } => {
                let num = t.strip_suffix('%').unwrap_or(t).trim();
                let v: f64 =
                    num.parse().map_err(|_| format!("is not a percentage; give {}", self.range()))?;
                if !(v.is_finite() && v >= min && v <= max) {
                    return Err(out_of_range());
                }
                Ok(Value::Percent(v))
            }
            Kind::Flag => match t.to_ascii_lowercase().as_str() {
                "true" => Ok(Value::Flag(true)),
                "false" => Ok(Value::Flag(false)),
                _ => Err("is not true or false".into()),
            },
            Kind::Choice(words) => words
                .iter()
                .find(|w| w.eq_ignore_ascii_case(t))
                .map(|w| Value::Word(w.to_string()))
                .ok_or_else(|| format!("is not one of the choices; give {}", self.range())),
            Kind::Weights => {
                let lower = t.to_ascii_lowercase();
                if lower == "even" || lower == "bandwidth" {
                    return Ok(Value::Word(lower));
                }
                let weights: Option<Vec<u32>> = t
                    .split(':')
                    .map(|w| w.trim().parse::<u32>().ok().filter(|w| (1..=255).contains(w)))
                    .collect();
                match weights {
                    Some(w) if w.len() >= 2 => {
                        Ok(Value::Word(w.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(":")))
                    }
                    _ => Err(format!("is not a set of weights; give {}", self.range())),
                }
            }
        }
    }
}

/// Splits "10ms" into ("10", "ms"), "1.5 GiB" into ("1.5", "GiB").
fn split_number(t: &str) -> (&str, &str) {
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == '-' || c == '+'));
    let (num, unit) = t.split_at(split.unwrap_or(t.len()));
    (num.trim(), unit.trim())
}

fn strip_suffix_ignore_case<'a>(t: &'a str, suffix: &str) -> Option<&'a str> {
    if suffix.is_empty() || t.len() < suffix.len() || !t.is_char_boundary(t.len() - suffix.len()) {
        return None;
    }
    let (head, tail) = t.split_at(t.len() - suffix.len());
    tail.eq_ignore_ascii_case(suffix).then_some(head)
}

/// A policy's parameters with their values for one build: the defaults, with whatever a preset,
/// a config table and the spec set. Policies read them by name; asking for a name the policy does
/// not declare, or as another kind, is a bug in the policy (every registered policy is built at
/// its defaults in the tests).
#[derive(Clone, Debug)]
pub struct Params {
    pub(crate) defs: &'static [Param],
    pub(crate) values: Vec<Value>,
    /// The name the built policy reports ([`terrace_model::Policy::name`]): canonical, set by
    /// the registry.
    pub(crate) name: String,
}

impl Params {
    /// The defaults of `defs` (which the registry's tests check all parse).
    pub fn defaults(defs: &'static [Param]) -> Params {
        let values = defs
            .iter()
            .map(|p| {
                p.kind
                    .parse(p.default)
                    .unwrap_or_else(|e| panic!("default of {}: '{}' {e}", p.name, p.default))
            })
            .collect();
        Params { defs, values, name: String::new() }
    }

    /// The name the policy built from these values reports: the plain name at a policy's or
    /// preset's own values, else followed by the parameters that differ (`hpwp:hot_threshold=8`).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn defs(&self) -> &'static [Param] {
        self.defs
    }

    /// Each parameter with its value, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static Param, &Value)> {
        self.defs.iter().zip(&self.values)
    }

    pub(crate) fn index(&self, name: &str) -> Option<usize> {
        self.defs.iter().position(|p| p.name == name)
    }

    pub fn get(&self, name: &str) -> &Value {
        match self.index(name) {
            Some(i) => &self.values[i],
            None => panic!("the policy reads parameter {name}, which it does not declare"),
        }
    }

    pub(crate) fn set(&mut self, i: usize, v: Value) {
        self.values[i] = v;
    }

    fn wrong(&self, name: &str, want: &str) -> ! {
        panic!("parameter {name} is {:?}, read as {want}", self.get(name))
    }

    pub fn count(&self, name: &str) -> u64 {
        match self.get(name) {
            Value::Count(n) => *n,
            _ => self.wrong(name, "a count"),
        }
    }

    pub fn duration_ns(&self, name: &str) -> u64 {
        match self.get(name) {
            Value::Duration(ns) => *ns,
            _ => self.wrong(name, "a duration"),
        }
    }

    pub fn bytes(&self, name: &str) -> u64 {
        match self.get(name) {
            Value::Bytes(b) => *b,
            _ => self.wrong(name, "a size"),
        }
    }

    pub fn number(&self, name: &str) -> f64 {
        match self.get(name) {
            Value::Number(x) => *x,
            _ => self.wrong(name, "a number"),
        }
    }

    /// A percentage as a fraction (0.95 for 95%).
    pub fn fraction(&self, name: &str) -> f64 {
        match self.get(name) {
            Value::Percent(p) => *p / 100.0,
            _ => self.wrong(name, "a percentage"),
        }
    }

    pub fn flag(&self, name: &str) -> bool {
        match self.get(name) {
            Value::Flag(b) => *b,
            _ => self.wrong(name, "a flag"),
        }
    }

    pub fn word(&self, name: &str) -> &str {
        match self.get(name) {
            Value::Word(w) => w,
            _ => self.wrong(name, "a word"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_they_parse() {
        let cases: [(Kind, &str, &str); 12] = [
            (Kind::Count { min: 0, max: 100_000, unit: "" }, "19_997", "19997"),
            (Kind::Duration { min_ns: 1, max_ns: u64::MAX / 2 }, "10ms", "10ms"),
            (Kind::Duration { min_ns: 1, max_ns: u64::MAX / 2 }, "1.5s", "1500ms"),
            (Kind::Duration { min_ns: 1, max_ns: u64::MAX / 2 }, "2000 ms", "2s"),
            (Kind::Duration { min_ns: 1, max_ns: u64::MAX / 2 }, "50us", "50us"),
            (Kind::Bytes { min: 1, max: 1 << 50 }, "10GiB", "10GiB"),
            (Kind::Bytes { min: 1, max: 1 << 50 }, "1536K", "1536KiB"),
            (Kind::Number { min: 0.0, max: 1e9, unit: "MB/s" }, "100 MB/s", "100"),
            (Kind::Percent { min: 0.0, max: 100.0 }, "95", "95%"),
            (Kind::Flag, "FALSE", "false"),
            (Kind::Choice(&["4k", "2m"]), "2M", "2m"),
            (Kind::Weights, "3 : 1", "3:1"),
        ];
        for (kind, text, canonical) in cases {
            let v = kind.parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(v.to_string(), canonical, "{text}");
            assert_eq!(kind.parse(canonical), Ok(v), "{canonical}");
        }
    }

    #[test]
    fn bad_values_say_what_to_give() {
        let count = Kind::Count { min: 1, max: 10, unit: "samples" };
        assert_eq!(count.parse("x").unwrap_err(), "is not a whole number; give 1 to 10 samples");
        assert_eq!(count.parse("11").unwrap_err(), "is out of range; give 1 to 10 samples");
        let d = Kind::Duration { min_ns: 1_000_000, max_ns: 3_600_000_000_000 };
        assert_eq!(d.parse("10").unwrap_err(), "needs a unit (ns, us, ms, s, min, h), e.g. 10ms");
        assert!(d.parse("10 days").unwrap_err().contains("unknown unit 'days'"));
        assert_eq!(d.parse("10us").unwrap_err(), "is out of range; give 1ms to 1h");
        assert!(Kind::Flag.parse("yes").unwrap_err().contains("true or false"));
        assert!(Kind::Weights.parse("3:0").is_err() && Kind::Weights.parse("3").is_err());
        assert!(Kind::Percent { min: 0.0, max: 100.0 }.parse("101%").is_err());
        assert!(Kind::Number { min: 0.0, max: 1.0, unit: "" }.parse("NaN").is_err());
    }
}
