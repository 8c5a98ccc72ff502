//! Generators for the fuzz tests of the parsers a client controls: JSON shaped like each
//! protocol's messages (its own field names, so that parsing gets past the first field)
//! with the wrong types, extreme numbers, NULs, odd Unicode and sizes a hostile client
//! sends, and bytes that are no JSON at all.
//!
//! Each test runs `WASBOX_FUZZ_CASES` cases (64 by default, a few seconds in CI); on
//! demand: `WASBOX_FUZZ_CASES=20000 cargo test -p wasbox --test all fuzz_`.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

pub fn cases() -> u32 {
    std::env::var("WASBOX_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// A runner of [`cases`] cases that writes no regression files into the source tree.
pub fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

fn text() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        Just(String::new()),
        any::<String>(),
        proptest::collection::vec(any::<char>(), 0..40).prop_map(|v| v.into_iter().collect()),
        select(vec![
            "true",
            "echo",
            "sh",
            "-c",
            "exit 3",
            "/workspace",
            "..",
            "../../etc/passwd",
            "x\u{0}y",
            "\u{0}",
            "€",
            "\u{202e}rtl",
            "\r\n",
            "%00",
            "a/b/../c",
            "   ",
        ])
        .prop_map(String::from),
        (1usize..5000).prop_map(|n| "a".repeat(n)),
    ]
}

fn number() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        select(vec![0i64, 1, -1, 2, 80, 4096, 65_536, i64::MAX, i64::MIN]).prop_map(Value::from),
        Just(json!(1e300)),
        Just(json!(0.5)),
    ]
}

fn key(keys: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop_oneof![4 => select(keys.to_vec()).prop_map(String::from), 1 => text()]
}

/// Any JSON value, objects keyed mostly by `keys`.
pub fn json_value(keys: &'static [&'static str]) -> impl Strategy<Value = Value> + Clone {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 32, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key(keys), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// `template` with a few of its fields (at any depth) replaced by anything or removed:
/// a message that is almost right, which reaches the checks a random one never does.
pub fn near(template: Value, keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    proptest::collection::vec(
        (
            any::<prop::sample::Index>(),
            json_value(keys),
            any::<bool>(),
        ),
        1..4,
    )
    .prop_map(move |edits| {
        let mut v = template.clone();
        for (at, replacement, remove) in edits {
            let mut paths = Vec::new();
            collect_paths(&v, &mut Vec::new(), &mut paths);
            if paths.is_empty() {
                break;
            }
            let path = at.get(&paths).clone();
            replace(&mut v, &path, replacement, remove);
        }
        v
    })
}

fn collect_paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Value::Object(m) = v {
        for (k, child) in m {
            at.push(k.clone());
            out.push(at.clone());
            collect_paths(child, at, out);
            at.pop();
        }
    }
}

fn replace(v: &mut Value, path: &[String], replacement: Value, remove: bool) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for p in parents {
        match cur.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Value::Object(m) = cur {
        if remove {
            m.remove(last);
        } else {
            m.insert(last.clone(), replacement);
        }
    }
}

/// A request body: an almost-right message, any JSON, or bytes that are no JSON.
pub fn body(template: Value, keys: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        5 => near(template, keys).prop_map(|v| serde_json::to_vec(&v).unwrap()),
        2 => json_value(keys).prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => proptest::collection::vec(any::<u8>(), 0..256),
    ]
}
