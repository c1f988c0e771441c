//! cel-spec's `simple` conformance cases that a DRA selector can express
//! (`testdata/cel-spec/cases.jsonl`, ported by `testdata/cel-spec/port.py`),
//! evaluated through the same parse, check and interpreter path as selectors,
//! with the result compared by type and value.
//!
//! The cases this module cannot pass are listed in [`KNOWN_DIVERGENCES`],
//! each with its reason (and an entry in `docs/divergences.md`); a listed case
//! that starts passing fails the test too, so the list stays exact.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::Device;
use kube_cel::cel::Value;
use kube_cel::cel::objects::Key;
use serde_json::Value as Json;

use super::checker::{self, Declarations};
use super::compiler::parse;
use super::device::CelDevice;
use super::error::runtime_message;
use super::library::reset_budget;
use crate::gates::FeatureGates;

const CASES: &str = include_str!("../../../../testdata/cel-spec/cases.jsonl");

// Why a case is known to fail; each is an entry of docs/divergences.md.
const HETERO_EQ: &str = "C6: lists and maps of mixed numeric types compare unequal (cel-go: heterogeneous numeric equality)";
const BOOL_CONV: &str = "C7: bool() conversion is not declared";
const CONVERSIONS: &str =
    "C7: string() of invalid UTF-8 bytes is lossy, bytes() of bytes is refused";
const OPTIONALS: &str =
    "C8: optMap/optFlatMap, selection on optional values and optional equality are missing";
const TWO_VAR: &str = "C9: two-variable comprehensions are not supported";
const ABSORB: &str = "C10: an error in one element of all()/exists() is not absorbed";

/// `file/section/name` of cases we knowingly fail, with why.
const KNOWN_DIVERGENCES: &[(&str, &str)] = &[
    (
        "comparisons/eq_literal/eq_list_mixed_type_numbers",
        HETERO_EQ,
    ),
    (
        "comparisons/eq_literal/eq_map_mixed_type_numbers",
        HETERO_EQ,
    ),
    ("conversions/bool/string_1", BOOL_CONV),
    ("conversions/bool/string_t", BOOL_CONV),
    ("conversions/bool/string_true_lowercase", BOOL_CONV),
    ("conversions/bool/string_true_uppercase", BOOL_CONV),
    ("conversions/bool/string_true_pascalcase", BOOL_CONV),
    ("conversions/bool/string_0", BOOL_CONV),
    ("conversions/bool/string_f", BOOL_CONV),
    ("conversions/bool/string_false_lowercase", BOOL_CONV),
    ("conversions/bool/string_false_uppercase", BOOL_CONV),
    ("conversions/bool/string_false_pascalcase", BOOL_CONV),
    ("conversions/identity/bool", BOOL_CONV),
    ("conversions/string/bytes_invalid", CONVERSIONS),
    ("conversions/identity/bytes", CONVERSIONS),
    ("optionals/optionals/none_optMap_hasValue", OPTIONALS),
    (
        "optionals/optionals/empty_map_optFlatMap_hasValue",
        OPTIONALS,
    ),
    (
        "optionals/optionals/map_empty_submap_optFlatMap_hasValue",
        OPTIONALS,
    ),
    (
        "optionals/optionals/map_undefined_entry_hasValue",
        OPTIONALS,
    ),
    (
        "optionals/optionals/map_submap_subkey_optFlatMap_value",
        OPTIONALS,
    ),
    ("optionals/optionals/map_submap_optFlatMap_value", OPTIONALS),
    (
        "optionals/optionals/map_optindex_optFlatMap_optional_ofNonZeroValue_hasValue",
        OPTIONALS,
    ),
    ("optionals/optionals/optional_of_optMap_value", OPTIONALS),
    ("optionals/optionals/has_map_optindex", OPTIONALS),
    ("optionals/optionals/has_map_optindex_field", OPTIONALS),
    ("optionals/optionals/optional_chaining_4", OPTIONALS),
    ("optionals/optionals/optional_chaining_5", OPTIONALS),
    ("optionals/optionals/optional_chaining_6", OPTIONALS),
    ("optionals/optionals/optional_chaining_7", OPTIONALS),
    ("optionals/optionals/optional_chaining_8", OPTIONALS),
    ("optionals/optionals/optional_chaining_9", OPTIONALS),
    ("optionals/optionals/optional_chaining_11", OPTIONALS),
    (
        "optionals/optionals/map_key_mixed_numbers_double_key_optindex_value",
        OPTIONALS,
    ),
    (
        "optionals/optionals/map_key_mixed_numbers_uint_key_optindex_value",
        OPTIONALS,
    ),
    (
        "optionals/optionals/map_key_mixed_numbers_int_key_optindex_value",
        OPTIONALS,
    ),
    ("optionals/optionals/optional_eq_none_none", OPTIONALS),
    ("optionals/optionals/optional_eq_int_int", OPTIONALS),
    ("optionals/optionals/optional_ne_none_none", OPTIONALS),
    ("optionals/optionals/optional_ne_int_int", OPTIONALS),
    ("optionals/optionals/map_optional_select_has", OPTIONALS),
    ("macros2/exists/list_elem_all_true", TWO_VAR),
    ("macros2/exists/list_elem_some_true", TWO_VAR),
    ("macros2/exists/list_elem_none_true", TWO_VAR),
    ("macros2/exists/list_elem_type_shortcircuit", TWO_VAR),
    ("macros2/exists/list_elem_type_exhaustive", TWO_VAR),
    ("macros2/exists/list_empty", TWO_VAR),
    ("macros2/exists/map_key", TWO_VAR),
    ("macros2/exists/not_map_key", TWO_VAR),
    ("macros2/exists/map_key_type_shortcircuit", TWO_VAR),
    ("macros2/exists/map_key_type_exhaustive", TWO_VAR),
    ("macros2/all/list_elem_all_true", TWO_VAR),
    ("macros2/all/list_elem_some_true", TWO_VAR),
    ("macros2/all/list_elem_none_true", TWO_VAR),
    ("macros2/all/list_elem_type_shortcircuit", TWO_VAR),
    ("macros2/all/list_elem_type_exhaustive", TWO_VAR),
    ("macros2/all/list_elem_error_shortcircuit", TWO_VAR),
    ("macros2/all/list_empty", TWO_VAR),
    ("macros2/all/map_key", TWO_VAR),
    ("macros2/existsOne/list_empty", TWO_VAR),
    ("macros2/existsOne/list_one_true", TWO_VAR),
    ("macros2/existsOne/list_one_false", TWO_VAR),
    ("macros2/existsOne/list_none", TWO_VAR),
    ("macros2/existsOne/list_one", TWO_VAR),
    ("macros2/existsOne/list_many", TWO_VAR),
    ("macros2/existsOne/list_all", TWO_VAR),
    ("macros2/existsOne/map_one", TWO_VAR),
    ("macros2/transformList/empty", TWO_VAR),
    ("macros2/transformList/empty_filter", TWO_VAR),
    ("macros2/transformList/one", TWO_VAR),
    ("macros2/transformList/one_filter", TWO_VAR),
    ("macros2/transformList/many", TWO_VAR),
    ("macros2/transformList/many_filter", TWO_VAR),
    ("macros2/transformMap/empty", TWO_VAR),
    ("macros2/transformMap/empty_filter", TWO_VAR),
    ("macros2/transformMap/one", TWO_VAR),
    ("macros2/transformMap/one_filter", TWO_VAR),
    ("macros2/transformMap/many", TWO_VAR),
    ("macros2/transformMap/many_filter", TWO_VAR),
    ("macros/all/list_elem_error_shortcircuit", ABSORB),
];

fn value_of(json: &Json) -> Value {
    let (kind, v) = json
        .as_object()
        .and_then(|o| o.iter().next())
        .expect("typed value");
    match kind.as_str() {
        "int" => Value::Int(v.as_str().and_then(|s| s.parse().ok()).expect("int")),
        "uint" => Value::UInt(v.as_str().and_then(|s| s.parse().ok()).expect("uint")),
        "double" => Value::Float(match v.as_str().expect("double") {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            s => s.parse().expect("double"),
        }),
        "string" => Value::String(Arc::new(v.as_str().expect("string").to_string())),
        "bytes" => Value::Bytes(Arc::new(
            v.as_array()
                .expect("bytes")
                .iter()
                .map(|b| u8::try_from(b.as_u64().expect("byte")).expect("byte"))
                .collect(),
        )),
        "bool" => Value::Bool(v.as_bool().expect("bool")),
        "null" => Value::Null,
        "list" => Value::List(Arc::new(
            v.as_array().expect("list").iter().map(value_of).collect(),
        )),
        "map" => {
            let entries: HashMap<Key, Value> = v
                .as_array()
                .expect("map")
                .iter()
                .map(|e| {
                    let key = match value_of(&e[0]) {
                        Value::Int(i) => Key::Int(i),
                        Value::UInt(u) => Key::Uint(u),
                        Value::Bool(b) => Key::Bool(b),
                        Value::String(s) => Key::String(s),
                        other => panic!("map key {other:?}"),
                    };
                    (key, value_of(&e[1]))
                })
                .collect();
            Value::from(entries)
        }
        other => panic!("unknown value kind {other}"),
    }
}

/// Same type and value; NaN equals NaN, and doubles compare by bits
/// otherwise only through `==` (so -0.0 equals 0.0 as in CEL).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => (x.is_nan() && y.is_nan()) || x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.map.len() == y.map.len()
                && x.map
                    .iter()
                    .all(|(k, v)| y.map.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Which stage refused a case, with its message (printed on a failure).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("parse: {0}")]
    Parse(String),
    #[error("check: {0}")]
    Check(checker::CheckError),
    #[error("runtime: {0}")]
    Runtime(String),
}

fn evaluate(expr: &str, device: &CelDevice) -> Result<Value, Refused> {
    let mut program = parse(expr).map_err(|e| Refused::Parse(e.message))?;
    let decls = Declarations {
        allow_multiple_allocations: true,
        includes: true,
    };
    checker::check_any(&mut program, decls).map_err(Refused::Check)?;
    reset_budget();
    Value::resolve(&program, device.scope()).map_err(|e| Refused::Runtime(runtime_message(&e)))
}

#[test]
fn cel_spec_simple_cases() {
    let gates = FeatureGates::default();
    let device = CelDevice::new("dra.example.com", &Device::default(), &gates);
    let mut failures = Vec::new();
    let mut passed = 0;
    for line in CASES.lines().filter(|l| !l.trim().is_empty()) {
        let case: Json = serde_json::from_str(line).expect("case is JSON");
        let id = format!(
            "{}/{}/{}",
            case["file"].as_str().unwrap_or_default(),
            case["section"].as_str().unwrap_or_default(),
            case["name"].as_str().unwrap_or_default()
        );
        let expr = case["expr"].as_str().expect("expr");
        let got = evaluate(expr, &device);
        let ok = match (&got, case.get("value")) {
            (Ok(v), Some(want)) => same(v, &value_of(want)),
            (Err(_), None) => true,
            _ => false,
        };
        let known = KNOWN_DIVERGENCES.iter().any(|(k, _)| *k == id);
        match (ok, known) {
            (true, false) => passed += 1,
            (false, true) => {}
            (true, true) => failures.push(format!("{id}: listed as divergent but passes")),
            (false, false) => failures.push(format!(
                "{id}: {expr:?} gave {}, want {}",
                got.as_ref()
                    .map_or_else(|e| format!("error {e}"), |v| format!("{v:?}")),
                case.get("value")
                    .map_or_else(|| format!("error {}", case["error"]), ToString::to_string)
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures ({passed} passed):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(passed > 600, "only {passed} cases passed");
}
