//! A policy spec's `key=value` items need both a key and a value; each missing half is named.

use terrace_policy::Spec;

#[test]
fn an_item_without_a_key_or_without_a_value_is_refused_naming_what_it_lacks() {
    for (spec, lacks) in [("age:=5", "key"), ("age:rate_limit=", "value"), ("age:interval=2s, =3", "key")] {
        let e = Spec::parse(spec).unwrap_err().to_string();
        assert!(e.contains(&format!("lacks a {lacks}")), "{spec}: {e}");
    }
    let ok = Spec::parse("age: rate_limit = 5 ,interval=2s").unwrap();
    assert_eq!(ok.name, "age");
    assert_eq!(
        ok.params,
        vec![("rate_limit".to_string(), "5".to_string()), ("interval".into(), "2s".into())]
    );
}
