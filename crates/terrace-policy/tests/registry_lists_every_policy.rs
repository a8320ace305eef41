//! The registry lists every policy and preset (`terrace list policies`), each of which builds
//! under its own name, and a spec prints back as it was given.

use terrace_policy::{build, list, Spec};

#[test]
fn the_list_holds_every_policy_and_each_builds_under_its_name() {
    let names: Vec<&str> = list().iter().map(|p| p.name).collect();
    for name in [
        "all-fast",
        "all-slow",
        "first-touch",
        "memory-mode",
        "oracle",
        "age",
        "age-2m",
        "ambix",
        "hemem",
        "hpwp",
        "kernel-tiering",
    ] {
        assert!(names.contains(&name), "{name} is not listed: {names:?}");
    }
    for name in names {
        assert_eq!(build(name).unwrap().name(), name);
    }
}

#[test]
fn a_spec_prints_as_name_colon_comma_separated_parameters() {
    for text in ["age", "age:rate_limit=5", "kernel-tiering:rate_limit=1,demote_headroom=0%"] {
        assert_eq!(Spec::parse(text).unwrap().to_string(), text);
    }
}
