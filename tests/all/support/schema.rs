//! A JSON Schema (2020-12) validator for the keywords the server's OpenAPI documents use,
//! so that the tests check real answers against them. A keyword it does not know fails the
//! check rather than passing unseen: a new kind of schema needs its rule here first.

use serde_json::{Map, Value};

/// Keywords that only describe (annotations): they never fail an instance. `format` is one
/// in 2020-12 unless a validator is asked to assert it.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$comment",
    "title",
    "description",
    "format",
    "default",
    "example",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "discriminator",
    "externalDocs",
    "xml",
    "components",
];

/// Every way `instance` fails `schema` (refs resolve in `root`), one line each, with where.
pub fn errors(root: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check(root, schema, instance, "", &mut out, 0);
    out
}

fn check(root: &Value, schema: &Value, v: &Value, at: &str, out: &mut Vec<String>, depth: u32) {
    assert!(depth < 64, "schema recursion too deep at {at:?}");
    let map = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => return out.push(format!("{at}/: no value is allowed here")),
        Value::Object(m) => m,
        other => panic!("not a schema at {at:?}: {other}"),
    };
    let place = if at.is_empty() { "/" } else { at };
    for (key, rule) in map {
        match key.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
            "$ref" => {
                let target = resolve(root, rule.as_str().expect("$ref is a string"));
                check(root, target, v, at, out, depth + 1);
            }
            "allOf" => {
                for s in array(rule) {
                    check(root, s, v, at, out, depth + 1);
                }
            }
            "anyOf" | "oneOf" => {
                let passing = array(rule)
                    .iter()
                    .filter(|s| errors_at(root, s, v, at, depth).is_empty())
                    .count();
                if passing == 0 {
                    let why: Vec<String> = array(rule)
                        .iter()
                        .flat_map(|s| errors_at(root, s, v, at, depth))
                        .collect();
                    fail(out, place, format!("matches none of {key}: {why:?}"));
                } else if key == "oneOf" && passing > 1 {
                    fail(
                        out,
                        place,
                        format!("matches {passing} schemas of oneOf, not one"),
                    );
                }
            }
            "not" => {
                if errors_at(root, rule, v, at, depth).is_empty() {
                    fail(out, place, format!("matches the schema of `not`: {rule}"));
                }
            }
            "type" => {
                let kinds: Vec<&str> = match rule {
                    Value::String(s) => vec![s.as_str()],
                    Value::Array(a) => a.iter().map(|k| k.as_str().expect("a type")).collect(),
                    other => panic!("bad type {other}"),
                };
                if !kinds.iter().any(|k| is_type(v, k)) {
                    fail(out, place, format!("{v} is not of type {kinds:?}"));
                }
            }
            "enum" => {
                if !array(rule).contains(v) {
                    fail(out, place, format!("{v} is not one of {rule}"));
                }
            }
            "const" => {
                if rule != v {
                    fail(out, place, format!("{v} is not {rule}"));
                }
            }
            "properties" => {
                if let Value::Object(o) = v {
                    for (name, s) in object(rule) {
                        if let Some(x) = o.get(name) {
                            check(root, s, x, &format!("{at}/{name}"), out, depth + 1);
                        }
                    }
                }
            }
            "required" => {
                if let Value::Object(o) = v {
                    for name in array(rule) {
                        let name = name.as_str().expect("a property name");
                        if !o.contains_key(name) {
                            fail(out, place, format!("`{name}` is required"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Value::Object(o) = v {
                    let known = map.get("properties").map(object);
                    for (name, x) in o {
                        if known.is_some_and(|k| k.contains_key(name)) {
                            continue;
                        }
                        check(root, rule, x, &format!("{at}/{name}"), out, depth + 1);
                    }
                }
            }
            "items" => {
                if let Value::Array(a) = v {
                    for (i, x) in a.iter().enumerate() {
                        check(root, rule, x, &format!("{at}/{i}"), out, depth + 1);
                    }
                }
            }
            "minItems" | "maxItems" => {
                if let Value::Array(a) = v {
                    bound(key, a.len() as f64, rule, out, place);
                }
            }
            "minProperties" | "maxProperties" => {
                if let Value::Object(o) = v {
                    bound(key, o.len() as f64, rule, out, place);
                }
            }
            "minLength" | "maxLength" => {
                if let Value::String(s) = v {
                    bound(key, s.chars().count() as f64, rule, out, place);
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if let Some(n) = v.as_f64() {
                    bound(key, n, rule, out, place);
                }
            }
            other => panic!("schema keyword `{other}` at {at:?} is not checked by this validator"),
        }
    }
}

fn fail(out: &mut Vec<String>, place: &str, msg: String) {
    out.push(format!("{place}: {msg}"));
}

fn errors_at(root: &Value, schema: &Value, v: &Value, at: &str, depth: u32) -> Vec<String> {
    let mut out = Vec::new();
    check(root, schema, v, at, &mut out, depth + 1);
    out
}

fn bound(key: &str, n: f64, rule: &Value, out: &mut Vec<String>, place: &str) {
    let limit = rule.as_f64().expect("a numeric bound");
    let ok = match key {
        "minimum" | "minItems" | "minProperties" | "minLength" => n >= limit,
        "maximum" | "maxItems" | "maxProperties" | "maxLength" => n <= limit,
        "exclusiveMinimum" => n > limit,
        "exclusiveMaximum" => n < limit,
        _ => unreachable!(),
    };
    if !ok {
        fail(out, place, format!("{n} is outside {key} {limit}"));
    }
}

fn is_type(v: &Value, kind: &str) -> bool {
    match kind {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => panic!("unknown type `{other}`"),
    }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> &'a Value {
    let pointer = reference
        .strip_prefix('#')
        .unwrap_or_else(|| panic!("only local references are checked: {reference}"));
    root.pointer(pointer)
        .unwrap_or_else(|| panic!("{reference} points at nothing"))
}

fn array(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}"))
}

fn object(v: &Value) -> &Map<String, Value> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::errors;

    /// The validator fails what it should, so that a check that passes means something.
    #[test]
    fn the_schema_check_refuses_what_does_not_match() {
        let root = json!({
            "allOf": [{"$ref": "#/components/schemas/Reply"}],
            "components": {"schemas": {
                "Reply": {
                    "type": "object",
                    "required": ["id", "status"],
                    "additionalProperties": false,
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": ["ok", "failed"]},
                        "code": {"type": ["integer", "null"], "minimum": 0},
                        "items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}},
                        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    },
                },
                "Item": {"type": "object", "required": ["n"], "properties": {"n": {"type": "number"}}},
            }},
        });
        let fine =
            json!({"id": "a", "status": "ok", "code": null, "items": [{"n": 1.5}], "either": 3});
        assert_eq!(errors(&root, &root, &fine), Vec::<String>::new());
        for (bad, why) in [
            (json!({"status": "ok"}), "`id` is required"),
            (json!({"id": "", "status": "ok"}), "minLength"),
            (json!({"id": "a", "status": "maybe"}), "is not one of"),
            (json!({"id": "a", "status": "ok", "code": -1}), "minimum"),
            (
                json!({"id": "a", "status": "ok", "code": 1.5}),
                "is not of type",
            ),
            (
                json!({"id": "a", "status": "ok", "extra": 1}),
                "no value is allowed",
            ),
            (
                json!({"id": "a", "status": "ok", "items": [{}]}),
                "/items/0: `n` is required",
            ),
            (
                json!({"id": "a", "status": "ok", "either": true}),
                "matches none of oneOf",
            ),
            (json!([1]), "is not of type"),
        ] {
            let found = errors(&root, &root, &bad);
            assert!(
                found.iter().any(|e| e.contains(why)),
                "{bad}: {found:?} lacks {why}"
            );
        }
        let both = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
        assert!(errors(&both, &both, &json!(2))[0].contains("not one"));
    }

    #[test]
    #[should_panic(expected = "is not checked by this validator")]
    fn an_unknown_keyword_fails_the_check() {
        let schema = json!({"type": "string", "pattern": "^a"});
        errors(&schema, &schema, &json!("b"));
    }
}
