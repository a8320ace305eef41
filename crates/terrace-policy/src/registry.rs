//! Policies by name and parameters: what `terrace list policies` shows and `--policy SPEC` builds.
//!
//! A policy spec is `NAME` or `NAME:key=value,key=value` (`hpwp:hot_threshold=8`,
//! `age-2m:demote_after=3`). Each policy declares its parameters ([`crate::params`]); a preset is
//! a policy with some of them set (`ambix-noswitch` is `ambix:switch=false`) and takes the same
//! parameters on top. Values are resolved in this order, each step overriding the last: the
//! policy's defaults, its `[policy.NAME]` config table ([`Overrides`]), the preset's values, the
//! preset's own config table, the spec.
//!
//! A built policy's name is canonical: the policy or preset nearest to its values, followed by
//! the parameters that differ from that one's (`hpwp:hot_threshold=8`; `ambix:switch=false` is
//! named `ambix-noswitch`). The name is itself a spec that builds the same policy, so result rows
//! tell parametrisations apart and can be re-run as they read.

use crate::baselines::{all_fast, all_slow, bind_priority, first_touch, interleave, memory_mode, oracle};
use crate::params::{Param, Params, Value};
use crate::{age, ambix, hemem, hpwp, kernel_tiering, mtier, nimble, object_tiering, ping_pong};
use terrace_model::Policy;

/// A registered policy or preset.
#[derive(Clone, Copy)]
pub struct PolicySpec {
    pub name: &'static str,
    pub summary: &'static str,
    /// The parameters it takes (a preset takes its policy's).
    pub params: &'static [Param],
    /// For a preset: the policy it configures, and the values that make it.
    pub preset: Option<Preset>,
    /// What it is for: only placements are advice to a user (`terrace advise`).
    pub purpose: Purpose,
    build: fn(&Params) -> Box<dyn Policy>,
    /// Refuses combinations of values that cannot work together (one line, what to change).
    check: fn(&Params) -> Result<(), String>,
}

/// What a registered policy is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A placement a user can run on a live machine (`terrace run --policy`).
    Placement,
    /// A point of comparison no live machine runs: a bound (all-fast), knowledge of the future
    /// (oracle), or a hardware mode set up outside Terrace (memory-mode).
    Reference,
    /// A test of the machinery (ping-pong): it moves pages to prove moves are safe, not to gain.
    Test,
}

/// A named configuration of another policy.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub of: &'static str,
    pub values: &'static [(&'static str, &'static str)],
}

fn no_check(_: &Params) -> Result<(), String> {
    Ok(())
}

/// A policy without parameters.
const fn fixed(
    name: &'static str,
    summary: &'static str,
    build: fn(&Params) -> Box<dyn Policy>,
) -> PolicySpec {
    PolicySpec {
        name,
        summary,
        params: &[],
        preset: None,
        purpose: Purpose::Placement,
        build,
        check: no_check,
    }
}

/// A policy with parameters.
const fn policy(
    name: &'static str,
    summary: &'static str,
    params: &'static [Param],
    build: fn(&Params) -> Box<dyn Policy>,
    check: fn(&Params) -> Result<(), String>,
) -> PolicySpec {
    PolicySpec { name, summary, params, preset: None, purpose: Purpose::Placement, build, check }
}

/// `spec`, for another purpose than placement.
const fn for_purpose(spec: PolicySpec, purpose: Purpose) -> PolicySpec {
    PolicySpec { purpose, ..spec }
}

/// A preset of `base`: its parameters, builder and check, with `values` set.
const fn preset(
    base: PolicySpec,
    name: &'static str,
    summary: &'static str,
    values: &'static [(&'static str, &'static str)],
) -> PolicySpec {
    PolicySpec { name, summary, preset: Some(Preset { of: base.name, values }), ..base }
}

const INTERLEAVE: PolicySpec = policy(
    interleave::NAME,
    interleave::SUMMARY,
    interleave::PARAMS,
    |p| Box::new(interleave::Interleave::new(p)),
    no_check,
);
const AMBIX: PolicySpec =
    policy(ambix::NAME, ambix::SUMMARY, ambix::PARAMS, |p| Box::new(ambix::Ambix::with(p)), ambix::check);
const NIMBLE: PolicySpec =
    policy(nimble::NAME, nimble::SUMMARY, nimble::PARAMS, |p| Box::new(nimble::Nimble::new(p)), no_check);
const MTIER: PolicySpec =
    policy(mtier::NAME, mtier::SUMMARY, mtier::PARAMS, |p| Box::new(mtier::Mtier::new(p)), no_check);
const OBJECTS: PolicySpec = policy(
    object_tiering::NAME,
    object_tiering::SUMMARY,
    object_tiering::PARAMS,
    |p| Box::new(object_tiering::ObjectTiering::new(p)),
    no_check,
);
const AGE: PolicySpec =
    policy(age::NAME, age::SUMMARY, age::PARAMS, |p| Box::new(age::Age::new(p)), no_check);
const PING_PONG: PolicySpec = for_purpose(
    policy(
        ping_pong::NAME,
        ping_pong::SUMMARY,
        ping_pong::PARAMS,
        |p| Box::new(ping_pong::PingPong::new(p)),
        no_check,
    ),
    Purpose::Test,
);

/// Every policy Terrace has, in the order `list` shows them.
const POLICIES: &[PolicySpec] = &[
    fixed(first_touch::NAME, first_touch::SUMMARY, |_| Box::new(first_touch::FirstTouch)),
    INTERLEAVE,
    preset(INTERLEAVE, interleave::WEIGHTED_NAME, interleave::WEIGHTED_SUMMARY, &[("weights", "bandwidth")]),
    for_purpose(
        fixed(all_fast::NAME, all_fast::SUMMARY, |_| Box::new(all_fast::AllFast)),
        Purpose::Reference,
    ),
    fixed(all_slow::NAME, all_slow::SUMMARY, |_| Box::new(all_slow::AllSlow)),
    fixed(bind_priority::NAME, bind_priority::SUMMARY, |_| Box::new(bind_priority::BindPriority)),
    for_purpose(
        fixed(memory_mode::NAME, memory_mode::SUMMARY, |_| Box::new(memory_mode::MemoryModeCache)),
        Purpose::Reference,
    ),
    for_purpose(
        policy(oracle::NAME, oracle::SUMMARY, oracle::PARAMS, |p| Box::new(oracle::Oracle::new(p)), no_check),
        Purpose::Reference,
    ),
    AMBIX,
    preset(AMBIX, ambix::NOSWITCH_NAME, ambix::NOSWITCH_SUMMARY, &[("switch", "false")]),
    policy(hemem::NAME, hemem::SUMMARY, hemem::PARAMS, |p| Box::new(hemem::Hemem::new(p)), hemem::check),
    policy(hpwp::NAME, hpwp::SUMMARY, hpwp::PARAMS, |p| Box::new(hpwp::Hpwp::new(p)), hpwp::check),
    policy(
        kernel_tiering::NAME,
        kernel_tiering::SUMMARY,
        kernel_tiering::PARAMS,
        |p| Box::new(kernel_tiering::KernelTiering::new(p)),
        kernel_tiering::check,
    ),
    NIMBLE,
    preset(NIMBLE, nimble::LINUX_NAME, nimble::LINUX_SUMMARY, &[("mechanism", "linux")]),
    preset(NIMBLE, nimble::EXCHANGE_4K_NAME, nimble::EXCHANGE_4K_SUMMARY, &[("mechanism", "exchange-4k")]),
    preset(NIMBLE, nimble::THP_NAME, nimble::THP_SUMMARY, &[("mechanism", "thp")]),
    preset(NIMBLE, nimble::OPT_NAME, nimble::OPT_SUMMARY, &[("mechanism", "opt")]),
    MTIER,
    preset(MTIER, mtier::HEAVY_NAME, mtier::HEAVY_SUMMARY, &[("mover", "heavy")]),
    preset(MTIER, mtier::MBIND_NAME, mtier::MBIND_SUMMARY, &[("mover", "mbind")]),
    OBJECTS,
    preset(
        OBJECTS,
        object_tiering::REACTIVE_NAME,
        object_tiering::REACTIVE_SUMMARY,
        &[("proactive", "false")],
    ),
    AGE,
    preset(AGE, age::HUGE_NAME, age::HUGE_SUMMARY, &[("page_size", "2m")]),
    PING_PONG,
    preset(PING_PONG, ping_pong::WP_NAME, ping_pong::WP_SUMMARY, &[("protected_copies", "true")]),
];

/// The policies `terrace compare` runs when none are named.
pub const DEFAULT_COMPARISON: &[&str] = &[
    first_touch::NAME,
    interleave::WEIGHTED_NAME,
    all_fast::NAME,
    all_slow::NAME,
    memory_mode::NAME,
    oracle::NAME,
    age::NAME,
    ambix::NAME,
    hemem::NAME,
    hpwp::NAME,
    nimble::NAME,
    kernel_tiering::NAME,
];

const SPEC_FORM: &str = "write NAME or NAME:key=value,key=value (e.g. hpwp:hot_threshold=8)";
const SEE_PARAMS: &str = "see `terrace list policies --params`";

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy '{0}'; known: {known} (see `terrace list policies`)", known = POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", "))]
    Unknown(String),
    #[error("'{spec}' is not a policy spec: {why}; {SPEC_FORM}")]
    Syntax { spec: String, why: String },
    #[error("{policy} takes no parameters, but '{key}' was given ({SEE_PARAMS})")]
    NoParams { policy: String, key: String },
    #[error("{policy} has no parameter '{key}'; its parameters are {known} ({SEE_PARAMS})")]
    UnknownParam { policy: String, key: String, known: String },
    #[error("{policy}: {key}={value} {why}")]
    BadValue { policy: String, key: String, value: String, why: String },
    #[error("{policy}: {key} is given twice; give each parameter once")]
    Repeated { policy: String, key: String },
    #[error("{policy}: {why}")]
    Inconsistent { policy: String, why: String },
}

pub fn list() -> &'static [PolicySpec] {
    POLICIES
}

/// The registered policy or preset called `name`.
pub fn find(name: &str) -> Option<&'static PolicySpec> {
    POLICIES.iter().find(|p| p.name == name)
}

impl PolicySpec {
    /// The policy whose parameters this one sets: itself, or the policy a preset configures.
    pub fn base(&'static self) -> &'static PolicySpec {
        self.preset.and_then(|p| find(p.of)).unwrap_or(self)
    }

    /// This policy's or preset's values, as nothing else sets them, under its plain name.
    pub fn defaults(&'static self) -> Params {
        let mut p = Params::defaults(self.base().params);
        if let Some(preset) = self.preset {
            for &(key, value) in preset.values {
                let (i, v) =
                    parse_value(self.base(), key, value).expect("a preset's values are its policy's");
                p.set(i, v);
            }
        }
        p.name = self.name.to_string();
        p
    }
}

/// A policy spec as written: a name and `key=value` pairs, not yet checked against the registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    pub params: Vec<(String, String)>,
}

impl Spec {
    /// Parses `NAME` or `NAME:key=value,key=value`.
    pub fn parse(text: &str) -> Result<Spec, PolicyError> {
        let syntax = |why: String| PolicyError::Syntax { spec: text.to_string(), why };
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (text.trim(), None),
        };
        if name.is_empty() {
            return Err(syntax("it names no policy".into()));
        }
        if let Some((key, _)) = name.split_once('=') {
            return Err(syntax(format!(
                "'{name}' is a parameter with no policy before it (POLICY:{key}=...)"
            )));
        }
        let mut params = Vec::new();
        if let Some(rest) = rest {
            if rest.trim().is_empty() {
                return Err(syntax(format!("nothing follows '{name}:'")));
            }
            for item in rest.split(',') {
                let Some((key, value)) = item.split_once('=') else {
                    return Err(syntax(format!("'{}' has no value", item.trim())));
                };
                let (key, value) = (key.trim(), value.trim());
                if key.is_empty() || value.is_empty() {
                    return Err(syntax(format!(
                        "'{}' lacks a {}",
                        item.trim(),
                        if key.is_empty() { "key" } else { "value" }
                    )));
                }
                params.push((key.to_string(), value.to_string()));
            }
        }
        Ok(Spec { name: name.to_string(), params })
    }
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        for (i, (k, v)) in self.params.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { ':' } else { ',' })?;
        }
        Ok(())
    }
}

/// Parameter values set outside a spec, per policy or preset: the live machine's
/// `[policy.NAME]` config tables. They apply whenever that policy is built through
/// [`Overrides::build`]; a spec's own values override them.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    tables: Vec<(&'static str, Vec<(usize, Value)>)>,
}

impl Overrides {
    /// Records `policy`'s table, each value checked against the policy's parameters; then checks
    /// that the policy builds with it.
    pub fn insert<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        policy: &str,
        values: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), PolicyError> {
        let entry = find(policy).ok_or_else(|| PolicyError::Unknown(policy.to_string()))?;
        let mut parsed = Vec::new();
        for (key, value) in values {
            parsed.push(parse_value(entry, key.as_ref(), value.as_ref())?);
        }
        let before = self.tables.clone();
        match self.tables.iter_mut().find(|(n, _)| *n == entry.name) {
            Some((_, t)) => t.extend(parsed),
            None => self.tables.push((entry.name, parsed)),
        }
        // Values that cannot work together are refused here, where the table is named.
        let built = self.resolve(entry.name).map(drop);
        if built.is_err() {
            self.tables = before;
        }
        built
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    fn apply(&self, name: &str, params: &mut Params) {
        for (_, values) in self.tables.iter().filter(|(n, _)| *n == name) {
            for (i, v) in values {
                params.set(*i, v.clone());
            }
        }
    }

    /// Builds the policy `spec` names, with these tables under the spec's own values.
    pub fn build(&self, spec: &str) -> Result<Box<dyn Policy>, PolicyError> {
        let (entry, params) = self.resolve(spec)?;
        Ok((entry.build)(&params))
    }

    /// The canonical name of the policy `spec` builds (as its `name()` and result rows give it).
    pub fn canonical(&self, spec: &str) -> Result<String, PolicyError> {
        Ok(self.resolve(spec)?.1.name().to_string())
    }

    fn resolve(&self, spec: &str) -> Result<(&'static PolicySpec, Params), PolicyError> {
        let s = Spec::parse(spec)?;
        let entry = find(&s.name).ok_or_else(|| PolicyError::Unknown(s.name.clone()))?;
        let base = entry.base();
        let mut params = Params::defaults(base.params);
        self.apply(base.name, &mut params);
        if let Some(preset) = entry.preset {
            for &(key, value) in preset.values {
                let (i, v) = parse_value(base, key, value).expect("a preset's values are its policy's");
                params.set(i, v);
            }
            self.apply(entry.name, &mut params);
        }
        let mut given: Vec<&str> = Vec::new();
        for (key, value) in &s.params {
            if given.contains(&key.as_str()) {
                return Err(PolicyError::Repeated { policy: entry.name.into(), key: key.clone() });
            }
            given.push(key);
            let (i, v) = parse_value(entry, key, value)?;
            params.set(i, v);
        }
        (base.check)(&params).map_err(|why| PolicyError::Inconsistent { policy: entry.name.into(), why })?;
        params.name = canonical_name(base, &params);
        Ok((base, params))
    }
}

/// The values `name` (a registered policy or preset) has when nothing sets them: what a policy's
/// `Default` builds from.
pub(crate) fn defaults_of(name: &str) -> Params {
    find(name).unwrap_or_else(|| panic!("{name} is not registered")).defaults()
}

/// The values `spec` resolves to, as the policy it names is built from them.
#[cfg(test)]
pub(crate) fn params_of(spec: &str) -> Params {
    Overrides::default().resolve(spec).unwrap_or_else(|e| panic!("{e}")).1
}

/// Checks one `key=value` against `entry`'s parameters.
fn parse_value(entry: &PolicySpec, key: &str, value: &str) -> Result<(usize, Value), PolicyError> {
    let defs = entry.params;
    if defs.is_empty() {
        return Err(PolicyError::NoParams { policy: entry.name.into(), key: key.into() });
    }
    let Some(i) = defs.iter().position(|p| p.name == key) else {
        return Err(PolicyError::UnknownParam {
            policy: entry.name.into(),
            key: key.into(),
            known: defs.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        });
    };
    let v = defs[i].kind.parse(value).map_err(|why| PolicyError::BadValue {
        policy: entry.name.into(),
        key: key.into(),
        value: value.into(),
        why,
    })?;
    Ok((i, v))
}

/// The policy or preset of `base` whose values are nearest to `params` (fewest differences; the
/// policy itself on a tie), then the parameters that differ from it.
fn canonical_name(base: &'static PolicySpec, params: &Params) -> String {
    let candidates =
        std::iter::once(base).chain(POLICIES.iter().filter(|p| p.preset.is_some_and(|s| s.of == base.name)));
    let differences = |c: &'static PolicySpec| -> Vec<String> {
        let own = c.defaults();
        params
            .iter()
            .zip(&own.values)
            .filter(|((_, v), o)| v.to_string() != o.to_string())
            .map(|((p, v), _)| format!("{}={v}", p.name))
            .collect()
    };
    let (nearest, diff) = candidates
        .map(|c| (c, differences(c)))
        .min_by_key(|(_, d)| d.len())
        .expect("the policy itself is a candidate");
    if diff.is_empty() {
        nearest.name.to_string()
    } else {
        format!("{}:{}", nearest.name, diff.join(","))
    }
}

/// Builds a policy from a spec: `NAME` or `NAME:key=value,...` (see the module's documentation).
pub fn build(spec: &str) -> Result<Box<dyn Policy>, PolicyError> {
    Overrides::default().build(spec)
}

/// The most tiers the policy `spec` manages (its `Requirements::max_tiers`), `None` for any
/// number; asked of a placeholder two-tier machine, since no policy's answer depends on it.
pub fn max_tiers(spec: &str) -> Result<Option<usize>, PolicyError> {
    Ok(build(spec)?.requirements(&terrace_model::MachineInfo::placeholder(2)).max_tiers)
}

/// The canonical name of the policy `spec` builds.
pub fn canonical(spec: &str) -> Result<String, PolicyError> {
    Overrides::default().canonical(spec)
}

/// Splits a comma-separated list of specs (`compare --policies`, and `--workloads`, whose names
/// take parameters the same way). A spec's own parameters are comma-separated too: an item of
/// the form `key=value`, its key a bare word (letters, digits, `_`, `-`; policy and workload names
/// never hold an `=`), continues the spec before it if that has parameters, so
/// `hpwp:hot_threshold=8,hpw_writes=2,hemem` is two specs, and a trace file `runs/a=b.trace`
/// after a workload with parameters is a workload of its own.
pub fn split_list(list: &str) -> Vec<String> {
    let mut specs: Vec<String> = Vec::new();
    for item in list.split(',') {
        let continues = item.split_once('=').is_some_and(|(key, _)| {
            let key = key.trim();
            !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
        match specs.last_mut() {
            Some(last) if continues && last.contains(':') => {
                last.push(',');
                last.push_str(item);
            }
            _ => specs.push(item.to_string()),
        }
    }
    specs.retain(|s| !s.trim().is_empty());
    specs
}

/// `compare --sweep POLICY.KEY=V1,V2,...`: one spec per value (`POLICY:KEY=V1`, ...), each
/// checked.
pub fn sweep(arg: &str) -> Result<Vec<String>, PolicyError> {
    let bad = |why: &str| PolicyError::Syntax {
        spec: arg.to_string(),
        why: format!("{why}; a sweep is POLICY.KEY=V1,V2,... (e.g. hpwp.hot_threshold=2,4,8)"),
    };
    let (target, values) = arg.split_once('=').ok_or_else(|| bad("it has no '='"))?;
    let (policy, key) = target.trim().split_once('.').ok_or_else(|| bad("it names no POLICY.KEY"))?;
    let specs: Vec<String> = values
        .split(',')
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(|v| format!("{}:{}={v}", policy.trim(), key.trim()))
        .collect();
    if specs.is_empty() {
        return Err(bad("it gives no values"));
    }
    for s in &specs {
        build(s)?;
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_policy_builds_under_its_own_name() {
        for spec in list() {
            assert_eq!(build(spec.name).unwrap().name(), spec.name);
        }
        for name in DEFAULT_COMPARISON {
            assert!(build(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn every_default_parses_prints_as_written_and_names_the_plain_policy() {
        for entry in list() {
            for p in entry.params {
                let v = p.kind.parse(p.default).unwrap_or_else(|e| panic!("{}.{}: {e}", entry.name, p.name));
                assert_eq!(
                    v.to_string(),
                    p.default,
                    "{}.{}: write the default canonically",
                    entry.name,
                    p.name
                );
                assert!(!p.meaning.is_empty() && !p.source.is_empty(), "{}.{}", entry.name, p.name);
                let spec = format!("{}:{}={}", entry.name, p.name, entry.defaults().get(p.name));
                assert_eq!(canonical(&spec).unwrap(), entry.name, "{spec}");
            }
            if let Some(preset) = entry.preset {
                let base = find(preset.of).expect("a preset's policy is registered");
                let names = |ps: &[Param]| ps.iter().map(|p| p.name).collect::<Vec<_>>();
                assert!(base.preset.is_none() && names(base.params) == names(entry.params), "{}", entry.name);
                let explicit: Vec<String> = preset.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
                assert_eq!(canonical(&format!("{}:{}", base.name, explicit.join(","))).unwrap(), entry.name);
            }
        }
    }

    /// docs/policies.md's table of a policy's parameters, as this test expects it.
    fn doc_table(entry: &PolicySpec) -> String {
        let mut t =
            String::from("| parameter | default | range | meaning | source |\n|---|---|---|---|---|\n");
        for p in entry.params {
            t.push_str(&format!(
                "| `{}` | `{}` | {} | {} | {} |\n",
                p.name,
                p.default,
                p.kind.range(),
                p.meaning,
                p.source
            ));
        }
        t
    }

    /// Each policy with parameters has their table in docs/policies.md, equal to what the code
    /// declares; each preset is named there with its values.
    #[test]
    fn docs_tabulate_every_parameter_as_declared() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/policies.md")).unwrap();
        for entry in list() {
            if let Some(preset) = entry.preset {
                let values: Vec<String> = preset.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let spelt = format!("`{}` is `{}:{}`", entry.name, preset.of, values.join(","));
                assert!(doc.contains(&spelt), "docs/policies.md should say {spelt}");
            } else if !entry.params.is_empty() {
                let table = doc_table(entry);
                assert!(
                    doc.contains(&table),
                    "docs/policies.md lacks {}'s table, which is now:\n\n{table}",
                    entry.name
                );
            }
        }
    }

    #[test]
    fn names_identify_parameters_that_differ_from_the_nearest_policy_or_preset() {
        assert_eq!(canonical("hpwp:hot_threshold=8").unwrap(), "hpwp:hot_threshold=8");
        assert_eq!(build("hpwp:hot_threshold=8").unwrap().name(), "hpwp:hot_threshold=8");
        assert_eq!(canonical("ambix:switch=false").unwrap(), "ambix-noswitch");
        assert_eq!(canonical("ambix:period=4s,switch=false").unwrap(), "ambix-noswitch:period=4s");
        assert_eq!(canonical("age-2m:demote_after=3").unwrap(), "age-2m:demote_after=3");
        assert_eq!(canonical("age-2m:page_size=4k").unwrap(), "age");
        assert_eq!(canonical("age:interval=1000ms, page_size=2M").unwrap(), "age-2m");
        assert_eq!(canonical("weighted-interleave:weights=3:1").unwrap(), "interleave:weights=3:1");
        // Parameters appear in declaration order, canonically written.
        assert_eq!(
            canonical("hpwp:hpw_writes=2,hot_threshold=0008").unwrap(),
            "hpwp:hot_threshold=8,hpw_writes=2"
        );
        // A name is a spec that builds the same policy.
        for spec in
            ["hpwp:hot_threshold=8,interval=20ms", "ambix-noswitch:dram_max=90%", "interleave:weights=2:1"]
        {
            let name = canonical(spec).unwrap();
            assert_eq!(canonical(&name).unwrap(), name);
        }
    }

    #[test]
    fn bad_specs_are_refused_in_one_line_saying_what_to_do() {
        let err = |s: &str| {
            let e = build(s).err().unwrap_or_else(|| panic!("{s} built")).to_string();
            assert!(!e.contains('\n'), "{e}");
            e
        };
        let e = err("ambix2");
        assert!(e.contains("first-touch") && e.contains("terrace list policies"), "{e}");
        let e = err("hpwp:hot_treshold=8");
        assert_eq!(
            e,
            "hpwp has no parameter 'hot_treshold'; its parameters are hot_threshold, hpw_writes, \
             sample_period, cooling_threshold, interval, promote_per_pass, copy_threads (see `terrace \
             list policies --params`)"
        );
        assert_eq!(
            err("hpwp:hot_threshold=many"),
            "hpwp: hot_threshold=many is not a whole number; give 1 to 1000 samples"
        );
        assert_eq!(
            err("hpwp:hot_threshold=0"),
            "hpwp: hot_threshold=0 is out of range; give 1 to 1000 samples"
        );
        assert!(err("first-touch:x=1").starts_with("first-touch takes no parameters"));
        assert!(
            err("hpwp:hot_threshold").contains("'hot_threshold' has no value; write NAME or NAME:key=value")
        );
        assert!(err("hpwp:").contains("nothing follows 'hpwp:'"));
        assert!(err(":x=1").contains("names no policy"));
        assert!(err("hot_threshold=8").contains("a parameter with no policy before it"));
        assert!(err("hpwp:hot_threshold=4,hot_threshold=5").contains("given twice"));
        assert!(err("ambix:delay=3s").starts_with("ambix: "), "{}", err("ambix:delay=3s"));
        assert!(err("age:interval=10").contains("needs a unit"));
        assert!(err("age:page_size=1g").contains("give 4k or 2m"));
        assert!(err("ambix:switch=maybe").contains("true or false"));
    }

    #[test]
    fn policy_lists_keep_a_specs_parameters_together() {
        assert_eq!(
            split_list("hpwp:hot_threshold=8,hpw_writes=2,hemem"),
            ["hpwp:hot_threshold=8,hpw_writes=2", "hemem"]
        );
        assert_eq!(
            split_list("first-touch,age-2m:demote_after=3,ambix"),
            ["first-touch", "age-2m:demote_after=3", "ambix"]
        );
        assert_eq!(
            split_list("interleave:weights=2:1,weighted-interleave"),
            ["interleave:weights=2:1", "weighted-interleave"]
        );
        // A parameter with no spec before it stays alone, and building it says why.
        assert_eq!(split_list("hot_threshold=8,hpwp"), ["hot_threshold=8", "hpwp"]);
        // Only a bare key continues a spec: a path holding an `=` is an item of its own.
        assert_eq!(
            split_list("objects:run=4,runs/a=b.trace,objects:run=2, instructions=9"),
            ["objects:run=4", "runs/a=b.trace", "objects:run=2, instructions=9"]
        );
        assert_eq!(split_list("hemem,"), ["hemem"]);
    }

    #[test]
    fn a_sweep_is_one_spec_per_value() {
        assert_eq!(
            sweep("hpwp.hot_threshold=2,4,8").unwrap(),
            ["hpwp:hot_threshold=2", "hpwp:hot_threshold=4", "hpwp:hot_threshold=8"]
        );
        assert_eq!(
            sweep("interleave.weights=1:1,3:1").unwrap(),
            ["interleave:weights=1:1", "interleave:weights=3:1"]
        );
        assert!(sweep("hpwp.hot_threshold").unwrap_err().to_string().contains("POLICY.KEY=V1,V2"));
        assert!(sweep("hpwp=2,4").unwrap_err().to_string().contains("names no POLICY.KEY"));
        assert!(sweep("hpwp.hot_threshold=").unwrap_err().to_string().contains("no values"));
        assert!(sweep("hpwp.hot=2").unwrap_err().to_string().contains("no parameter 'hot'"));
    }

    #[test]
    fn config_tables_sit_under_the_spec_and_presets_keep_their_values() {
        let mut o = Overrides::default();
        o.insert("hpwp", [("hot_threshold", "8")]).unwrap();
        o.insert("ambix", [("switch", "true"), ("period", "4s")]).unwrap();
        assert_eq!(o.canonical("hpwp").unwrap(), "hpwp:hot_threshold=8");
        assert_eq!(o.canonical("hpwp:hot_threshold=5").unwrap(), "hpwp:hot_threshold=5");
        assert_eq!(o.canonical("hpwp:hot_threshold=3").unwrap(), "hpwp");
        // The base table applies to its presets; the preset's own values win over it.
        assert_eq!(o.canonical("ambix-noswitch").unwrap(), "ambix-noswitch:period=4s");
        o.insert("ambix-noswitch", [("period", "1s")]).unwrap();
        assert_eq!(o.canonical("ambix-noswitch").unwrap(), "ambix-noswitch:period=1s");
        assert_eq!(o.canonical("hemem").unwrap(), "hemem");
        let e = o.insert("hpwq", [("hot_threshold", "8")]).unwrap_err().to_string();
        assert!(e.starts_with("unknown policy 'hpwq'"), "{e}");
        let e = o.insert("hpwp", [("hot", "8")]).unwrap_err().to_string();
        assert!(e.contains("no parameter 'hot'"), "{e}");
        let e = o.insert("ambix", [("delay", "5s")]).unwrap_err().to_string();
        assert!(e.starts_with("ambix: delay"), "{e}");
    }
}
