//! Selector behaviour, table-driven. Expectations come from upstream's
//! `dynamic-resource-allocation/cel/compile_test.go` (case names kept), the
//! CEL quantity/semver library documentation and the spec digest (§4).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use proptest::prelude::*;

use super::compiler::PARSER_PANIC;
use super::*;
use crate::gates::{FeatureGates, KubeVersion};

const DRIVER: &str = "dra.example.com";

fn b(v: bool) -> DeviceAttribute {
    DeviceAttribute {
        bool: Some(v),
        ..Default::default()
    }
}
fn i(v: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(v),
        ..Default::default()
    }
}
fn s(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(v.to_string()),
        ..Default::default()
    }
}
fn ver(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        version: Some(v.to_string()),
        ..Default::default()
    }
}
fn bools(v: &[bool]) -> DeviceAttribute {
    DeviceAttribute {
        bools: Some(v.to_vec()),
        ..Default::default()
    }
}
fn ints(v: &[i64]) -> DeviceAttribute {
    DeviceAttribute {
        ints: Some(v.to_vec()),
        ..Default::default()
    }
}
fn strs(v: &[&str]) -> DeviceAttribute {
    DeviceAttribute {
        strings: Some(v.iter().map(ToString::to_string).collect()),
        ..Default::default()
    }
}
fn vers(v: &[&str]) -> DeviceAttribute {
    DeviceAttribute {
        versions: Some(v.iter().map(ToString::to_string).collect()),
        ..Default::default()
    }
}
fn numbered(n: usize) -> DeviceAttribute {
    DeviceAttribute {
        strings: Some((0..n).map(|k| format!("value-{k}")).collect()),
        ..Default::default()
    }
}

/// What a case expects.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Match(bool),
    Compile(&'static str),
    Runtime(&'static str),
}
use Expect::{Compile, Match, Runtime};

/// Which compiler a case runs with.
#[derive(Debug, Clone, Copy)]
enum Env {
    /// kube-scheduler 1.37 (StoredExpressions); run with the list gate off and on.
    Scheduler,
    /// The apiserver's NewExpressions environment with (consumable capacity, list attributes).
    New(bool, bool),
}

struct Case {
    name: &'static str,
    env: Env,
    expression: String,
    driver: &'static str,
    attributes: Vec<(&'static str, DeviceAttribute)>,
    capacity: Vec<(&'static str, &'static str)>,
    allow_multiple_allocations: Option<bool>,
    expect: Expect,
}

fn case(name: &'static str, expression: impl Into<String>, expect: Expect) -> Case {
    Case {
        name,
        env: Env::Scheduler,
        expression: expression.into(),
        driver: DRIVER,
        attributes: Vec::new(),
        capacity: Vec::new(),
        allow_multiple_allocations: None,
        expect,
    }
}

impl Case {
    fn attrs(mut self, attributes: Vec<(&'static str, DeviceAttribute)>) -> Self {
        self.attributes = attributes;
        self
    }
    fn caps(mut self, capacity: Vec<(&'static str, &'static str)>) -> Self {
        self.capacity = capacity;
        self
    }
    fn driver(mut self, driver: &'static str) -> Self {
        self.driver = driver;
        self
    }
    fn multi(mut self, v: Option<bool>) -> Self {
        self.allow_multiple_allocations = v;
        self
    }
    fn env(mut self, env: Env) -> Self {
        self.env = env;
        self
    }
}

fn make_device(
    attributes: &[(&str, DeviceAttribute)],
    capacity: &[(&str, &str)],
    multi: Option<bool>,
) -> Device {
    Device {
        name: "dev-0".to_string(),
        attributes: Some(
            attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        ),
        capacity: Some(
            capacity
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        DeviceCapacity {
                            value: K8sQuantity(v.to_string()),
                            ..Default::default()
                        },
                    )
                })
                .collect(),
        ),
        allow_multiple_allocations: multi,
        ..Default::default()
    }
}

fn run(c: &Case, compiler: &mut SelectorCompiler, gates: &FeatureGates) -> Result<(), String> {
    let device = CelDevice::new(
        c.driver,
        &make_device(&c.attributes, &c.capacity, c.allow_multiple_allocations),
        gates,
    );
    let compiled = compiler.compile(&c.expression);
    match (c.expect, compiled) {
        (Compile(want), Err(e)) => {
            if e.kind != CelErrorKind::Compile || !e.message.contains(want) {
                return Err(format!("want compile error containing {want:?}, got {e}"));
            }
            Ok(())
        }
        (Compile(want), Ok(_)) => Err(format!("want compile error {want:?}, compiled fine")),
        (_, Err(e)) => Err(format!("unexpected compile error: {e}")),
        (Match(want), Ok(sel)) => match sel.matches(&device) {
            Ok(got) if got == want => Ok(()),
            other => Err(format!("want Ok({want}), got {other:?}")),
        },
        (Runtime(want), Ok(sel)) => match sel.matches(&device) {
            Err(e) if e.kind == CelErrorKind::Runtime && e.message.contains(want) => Ok(()),
            other => Err(format!(
                "want runtime error containing {want:?}, got {other:?}"
            )),
        },
    }
}

fn upstream_cases() -> Vec<Case> {
    let d = |attrs| -> Vec<(&'static str, DeviceAttribute)> { attrs };
    vec![
        case("true", "true", Match(true)),
        case("false", "false", Match(false)),
        case("syntax-error", "?!", Compile("Syntax error")),
        case("type-error", "1", Compile("must evaluate to bool or the unknown type, not int")),
        case(
            "runtime-error-lookup-identifier",
            r#"device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))"#,
            Runtime("no such key: noSuchAttr"),
        ),
        case(
            "runtime-error-lookup-map",
            r#"device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))"#,
            Runtime("no such key: noSuchAttr"),
        ),
        case("domain-check-negative", r#""no-such-domain" in device.attributes"#, Match(false)),
        case("domain-check-positive", r#""dra.example.com" in device.attributes"#, Match(true))
            .attrs(d(vec![("dra.example.com/something", b(true))])),
        case("empty-driver-name", r#"device.driver == """#, Match(true)).driver(""),
        case("real-driver-name", r#"device.driver == "dra.example.com""#, Match(true)),
        case("driver-name-qualifier", r#"device.attributes["dra.example.com"].name"#, Match(true))
            .attrs(d(vec![("name", b(true))])),
        case("driver-name-qualifier-map-lookup", r#"device.attributes["dra.example.com"]["name"]"#, Match(true))
            .attrs(d(vec![("name", b(true))])),
        case("bind", r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#, Match(true))
            .attrs(d(vec![("name", b(true))])),
        case("qualified-attribute-name", r#"device.attributes["other.example.com"].name"#, Match(true))
            .attrs(d(vec![("other.example.com/name", b(true))])),
        case("bool", r#"device.attributes["dra.example.com"].name"#, Match(true)).attrs(d(vec![("name", b(true))])),
        case("int", r#"device.attributes["dra.example.com"].name > 0"#, Match(true)).attrs(d(vec![("name", i(1))])),
        case("string", r#"device.attributes["dra.example.com"].name == "fish""#, Match(true))
            .attrs(d(vec![("name", s("fish"))])),
        case("macro-exists-on-int", r#"device.attributes["dra.example.com"].name.exists(x, x > 0)"#, Runtime("no such overload"))
            .attrs(d(vec![("name", i(1))])),
        case("macro-exists-on-bool", r#"device.attributes["dra.example.com"].name.exists(x, x == true)"#, Runtime("no such overload"))
            .attrs(d(vec![("name", b(true))])),
        case("macro-exists-on-string", r#"device.attributes["dra.example.com"].name.exists(x, x == "fish")"#, Runtime("no such overload"))
            .attrs(d(vec![("name", s("fish"))])),
        case(
            "list-result-type-causes-match-error",
            r#"device.attributes["dra.example.com"].names"#,
            Runtime("CEL result of type list could not be converted to bool"),
        )
        .attrs(d(vec![("names", strs(&["fish", "bird"]))])),
        case("includes-function-can-evaluate", r#"device.attributes["dra.example.com"].name.includes("fish")"#, Match(true))
            .attrs(d(vec![("name", strs(&["fish", "bird"]))])),
        case("list-of-bool", r#"device.attributes["dra.example.com"].names.size() == 2"#, Match(true))
            .attrs(d(vec![("names", bools(&[true, false]))])),
        case("list-of-int", r#"device.attributes["dra.example.com"].names.size() == 2"#, Match(true))
            .attrs(d(vec![("names", ints(&[1, 2]))])),
        case("list-of-string", r#"device.attributes["dra.example.com"].names.size() == 2"#, Match(true))
            .attrs(d(vec![("names", strs(&["fish", "bird"]))])),
        case("list-of-semver", r#"device.attributes["dra.example.com"].names.size() == 2"#, Match(true))
            .attrs(d(vec![("names", vers(&["1.0.0", "2.0.0"]))])),
        case("macro-on-list-of-int", r#"device.attributes["dra.example.com"].names.exists(x, x > 0)"#, Match(true))
            .attrs(d(vec![("names", ints(&[1, 2]))])),
        case("macro-on-list-of-string", r#"device.attributes["dra.example.com"].names.all(x, x != "")"#, Match(true))
            .attrs(d(vec![("names", strs(&["fish", "bird"]))])),
        case(
            "macro-on-list-of-semver",
            r#"device.attributes["dra.example.com"].names.all(x, x.isGreaterThan(semver("0.0.1")))"#,
            Match(true),
        )
        .attrs(d(vec![("names", vers(&["1.0.0", "2.0.0"]))])),
        case(
            "includes-function-compilation-error",
            r#"device.attributes["dra.example.com"].attr.includes("fish")"#,
            Compile("undeclared reference to 'includes'"),
        )
        .env(Env::New(false, false)),
        case(
            "includes-function-compilation-and-eval-success",
            r#"device.attributes["dra.example.com"].attr.includes("fish")"#,
            Match(true),
        )
        .attrs(d(vec![("attr", s("fish"))]))
        .env(Env::New(false, true)),
        case("includes-function-on-bool-scalar-positive", r#"device.attributes["dra.example.com"].name.includes(true)"#, Match(true))
            .attrs(d(vec![("name", b(true))])),
        case("includes-function-on-bool-scalar-negative", r#"device.attributes["dra.example.com"].name.includes(true)"#, Match(false))
            .attrs(d(vec![("name", b(false))])),
        case("includes-function-on-bool-list-positive", r#"device.attributes["dra.example.com"].name.includes(true)"#, Match(true))
            .attrs(d(vec![("name", bools(&[true, false]))])),
        case("includes-function-on-bool-list-negative", r#"device.attributes["dra.example.com"].name.includes(false)"#, Match(false))
            .attrs(d(vec![("name", bools(&[true, true]))])),
        case("includes-function-on-int-scalar-positive", r#"device.attributes["dra.example.com"].name.includes(1)"#, Match(true))
            .attrs(d(vec![("name", i(1))])),
        case("includes-function-on-int-scalar-negative", r#"device.attributes["dra.example.com"].name.includes(1)"#, Match(false))
            .attrs(d(vec![("name", i(2))])),
        case("includes-function-on-int-list-positive", r#"device.attributes["dra.example.com"].name.includes(1)"#, Match(true))
            .attrs(d(vec![("name", ints(&[1, 2]))])),
        case("includes-function-on-int-list-negative", r#"device.attributes["dra.example.com"].name.includes(3)"#, Match(false))
            .attrs(d(vec![("name", ints(&[1, 2]))])),
        case("includes-function-on-string-scalar-positive", r#"device.attributes["dra.example.com"].name.includes("fish")"#, Match(true))
            .attrs(d(vec![("name", s("fish"))])),
        case("includes-function-on-string-scalar-negative", r#"device.attributes["dra.example.com"].name.includes("bird")"#, Match(false))
            .attrs(d(vec![("name", s("fish"))])),
        case("includes-function-on-string-list-positive", r#"device.attributes["dra.example.com"].name.includes("fish")"#, Match(true))
            .attrs(d(vec![("name", strs(&["fish", "bird"]))])),
        case("includes-function-on-string-list-negative", r#"device.attributes["dra.example.com"].name.includes("cat")"#, Match(false))
            .attrs(d(vec![("name", strs(&["fish", "bird"]))])),
        case(
            "includes-function-on-semver-scalar-positive",
            r#"device.attributes["dra.example.com"].name.includes(semver("1.0.0"))"#,
            Match(true),
        )
        .attrs(d(vec![("name", ver("1.0.0"))])),
        case(
            "includes-function-on-semver-scalar-negative",
            r#"device.attributes["dra.example.com"].name.includes(semver("2.0.0"))"#,
            Match(false),
        )
        .attrs(d(vec![("name", ver("1.0.0"))])),
        case(
            "includes-function-on-semver-list-positive",
            r#"device.attributes["dra.example.com"].name.includes(semver("1.0.0"))"#,
            Match(true),
        )
        .attrs(d(vec![("name", vers(&["1.0.0", "2.0.0"]))])),
        case(
            "includes-function-on-semver-list-negative",
            r#"device.attributes["dra.example.com"].name.includes(semver("3.0.0"))"#,
            Match(false),
        )
        .attrs(d(vec![("name", vers(&["1.0.0", "2.0.0"]))])),
        case("includes-function-on-very-long-list-positive", r#"device.attributes["dra.example.com"].name.includes("value-48")"#, Match(false))
            .attrs(d(vec![("name", numbered(48))])),
        case(
            "includes-function-on-very-long-list-runtime-error",
            r#"device.attributes["dra.example.com"].name.includes("value-49")"#,
            Runtime("'includes' function cannot be applied to lists longer than 48 values"),
        )
        .attrs(d(vec![("name", numbered(49))])),
        case("in-operator-on-list", r#"1 in device.attributes["dra.example.com"].names"#, Match(true))
            .attrs(d(vec![("names", ints(&[1, 2, 3]))])),
        case("version", r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))"#, Match(true))
            .attrs(d(vec![("name", ver("1.0.0"))])),
        case(
            "version_v",
            r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)"#,
            Match(true),
        )
        .attrs(d(vec![("name", ver("1.0.0"))])),
        case(
            "macro-exists-on-version",
            r#"device.attributes["dra.example.com"].name.exists(x, x.isGreaterThan(semver("0.0.1")))"#,
            Runtime("no such overload"),
        )
        .attrs(d(vec![("name", ver("1.0.0"))])),
        case("quantity", r#"device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#, Match(true))
            .caps(vec![("name", "1Mi")]),
        case(
            "check-positive",
            r#""name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
            Match(true),
        )
        .caps(vec![("name", "1Mi")]),
        case(
            "check-negative",
            r#"!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
            Match(true),
        ),
        case(
            "all",
            r#"
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
"#,
            Match(true),
        )
        .attrs(d(vec![("bool", b(true)), ("int", i(1)), ("string", s("fish")), ("version", ver("1.0.0"))]))
        .caps(vec![("quantity", "1Mi")]),
        case(
            "many",
            r#"device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c"#,
            Match(true),
        )
        .attrs(d(vec![("a", b(true)), ("b", b(true)), ("c", b(true))])),
        case("check_attribute_domains", r#"device.attributes.exists_one(x, x == "dra.example.com")"#, Match(true))
            .attrs(d(vec![("services", s("some_example_value"))])),
        case("check_attribute_ids", r#"device.attributes["dra.example.com"].exists_one(x, x == "services")"#, Match(true))
            .attrs(d(vec![("services", s("some_example_value"))])),
        case("split_attribute", r#"device.attributes["dra.example.com"].services.split("example").size() >= 2"#, Match(true))
            .attrs(d(vec![("services", s("some_example_value"))])),
        case("regexp_attribute", r#"device.attributes["dra.example.com"].services.matches("[^a]?sym")"#, Match(true))
            .attrs(d(vec![("services", s("asymetric"))])),
        case("check_capacity_domains", r#"device.capacity.exists_one(x, x == "dra.example.com")"#, Match(true))
            .caps(vec![("memory", "1Mi")]),
        case("check_capacity_ids", r#"device.capacity["dra.example.com"].exists_one(x, x == "memory")"#, Match(true))
            .caps(vec![("memory", "1Mi")]),
        case(
            "expensive",
            "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))",
            Runtime("actual cost limit exceeded"),
        ),
        case("allow_multiple_allocations", "device.allowMultipleAllocations == true", Match(true)).multi(Some(true)),
        case("allow_multiple_allocations_default", "device.allowMultipleAllocations == false", Match(true)),
        case("allow_multiple_allocations_false", "device.allowMultipleAllocations == false", Match(true)).multi(Some(false)),
        case("allow_multiple_allocations_new", "device.allowMultipleAllocations == false", Match(true))
            .multi(Some(false))
            .env(Env::New(true, false)),
        case(
            "allow_multiple_allocations_disabled",
            "device.allowMultipleAllocations == false",
            Compile("undefined field 'allowMultipleAllocations'"),
        )
        .env(Env::New(false, false)),
    ]
}

/// Cases from the spec digest and the task: GPU-shaped devices, missing
/// keys, semver and quantity edge cases, and the checker's rejections.
fn digest_cases() -> Vec<Case> {
    let gpu = |memory: &'static str, driver_version: &'static str| {
        case("", "", Match(true))
            .driver("gpu.nvidia.com")
            .attrs(vec![
                ("productName", s("NVIDIA H200")),
                ("driverVersion", ver(driver_version)),
            ])
            .caps(vec![("memory", memory)])
    };
    let with = |c: Case, name: &'static str, expression: &str, expect: Expect| Case {
        name,
        expression: expression.to_string(),
        expect,
        ..c
    };
    let mem40 = r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0"#;
    let drv550 =
        r#"device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))"#;
    vec![
        with(
            gpu("141Gi", "570.86.15"),
            "h200-memory-at-least-40Gi",
            mem40,
            Match(true),
        ),
        with(
            gpu("16Gi", "535.0.0"),
            "t4-memory-below-40Gi",
            mem40,
            Match(false),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "driver-newer-than-550",
            drv550,
            Match(true),
        ),
        with(
            gpu("16Gi", "535.0.0"),
            "driver-older-than-550",
            drv550,
            Match(false),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "driver-compare-to",
            r#"device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("570.86.15")) == 0"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "semver-major",
            r#"device.attributes["gpu.nvidia.com"].driverVersion.major() == 570"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "gi-equals-bytes",
            r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("151397597184")) == 0"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "gi-greater-than-decimal-g",
            r#"device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("151G"))"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "quantity-equality",
            r#"device.capacity["gpu.nvidia.com"].memory == quantity("151397597184")"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "product-name",
            r#"device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200""#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "bare-names-go-under-the-driver-domain",
            r#"device.attributes["gpu.nvidia.com"]["productName"].startsWith("NVIDIA")"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "v570.86"),
            "bad-semver-fails-every-selector",
            "true",
            Runtime("attribute driverVersion: parse semantic version"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "missing-id-in-present-domain",
            r#"device.attributes["gpu.nvidia.com"].model == "a100""#,
            Runtime("no such key: model. consider using CEL optional chaining"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "missing-domain-is-empty-map",
            r#"size(device.attributes["other.io"]) == 0 && size(device.capacity["other.io"]) == 0"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "has-on-missing-domain",
            r#"has(device.attributes["other.io"].x)"#,
            Match(false),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "in-on-missing-domain",
            r#""x" in device.attributes["other.io"]"#,
            Match(false),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "has-on-present-id",
            r#"has(device.attributes["gpu.nvidia.com"].productName)"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "has-on-missing-id",
            r#"has(device.attributes["gpu.nvidia.com"].model)"#,
            Match(false),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "optional-chaining-default",
            r#"device.attributes["gpu.nvidia.com"].?model.orValue("none") == "none""#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "optional-chaining-present",
            r#"device.attributes["gpu.nvidia.com"].?productName.orValue("") == "NVIDIA H200""#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "optional-chaining-missing-domain",
            r#"device.attributes["other.io"].?x.hasValue()"#,
            Match(false),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "optional-index",
            r#"device.capacity["gpu.nvidia.com"][?"memory"].hasValue()"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "bind-reused",
            r#"cel.bind(g, device.attributes["gpu.nvidia.com"], g.productName.startsWith("NVIDIA") && g.driverVersion.major() > 500)"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "bind-on-attributes-map-keeps-missing-domain-default",
            r#"cel.bind(a, device.attributes, size(a["other.io"]) == 0 && a["gpu.nvidia.com"].productName != "")"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "dynamic-domain-key",
            r#"["other.io", "gpu.nvidia.com"].exists(d, has(device.attributes[d].productName))"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "non-bool-attribute-result",
            r#"device.attributes["gpu.nvidia.com"].productName"#,
            Runtime("CEL result of type string could not be converted to bool"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "field-selection-on-string-attribute-is-an-error",
            r#"device.attributes["gpu.nvidia.com"].productName.vendor == "x""#,
            Runtime("does not support field selection"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "has-on-string-attribute-is-an-error",
            r#"has(device.attributes["gpu.nvidia.com"].productName.vendor)"#,
            Runtime("invalid type for field selection"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "non-bool-static-result",
            "device.driver",
            Compile("must evaluate to bool or the unknown type, not string"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "undeclared-variable",
            "foo == 1",
            Compile("undeclared reference to 'foo'"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "undefined-device-field",
            "device.name == 'x'",
            Compile("undefined field 'name'"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "undeclared-function",
            "device.driver.frobnicate()",
            Compile("undeclared reference to 'frobnicate'"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "wrong-argument-count",
            r#"quantity("1", "2").sign() == 1"#,
            Compile("found no matching overload for 'quantity'"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "static-field-selection-on-string",
            "device.driver.vendor == 'x'",
            Compile("type 'string' does not support field selection"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "math-is-not-in-the-kubernetes-environment",
            "math.greatest(1, 2) == 2",
            Compile("undeclared reference"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "bad-quantity-literal",
            r#"device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40K"))"#,
            Runtime("unable to parse quantity's suffix"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "semver-against-quantity-has-no-overload",
            r#"device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(quantity("1"))"#,
            Runtime("no such overload"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "huge-quantity-literal-compares-exactly",
            r#"quantity("1e40").isGreaterThan(device.capacity["gpu.nvidia.com"].memory)"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "string-extensions",
            r#"device.attributes["gpu.nvidia.com"].productName.lowerAscii().replace("nvidia ", "") == "h200""#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "sets-extension",
            r#"sets.contains(["a", "b", "c"], ["b"])"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "list-concatenation",
            "size([1, 2] + [3]) == 3",
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "exponential-growth-is-stopped",
            "cel.bind(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], cel.bind(b, a + a + a + a + a + a + a + a + a + a, cel.bind(c, b + b + b + b + b + b + b + b + b + b, cel.bind(d, c + c + c + c + c + c + c + c + c + c, cel.bind(e, d + d + d + d + d + d + d + d + d + d, cel.bind(f, e + e + e + e + e + e + e + e + e + e, size(f) > 0))))))",
            Runtime("actual cost limit exceeded"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "integer-overflow",
            "9223372036854775807 + 1 > 0",
            Runtime("integer overflow"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "struct-literal",
            "Foo{a: 1}.a == 1",
            Compile("undeclared reference to 'Foo'"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "index-on-device",
            r#"device["driver"] == "x""#,
            Compile("found no matching overload for '_[_]'"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "allow-multiple-allocations-compiles-in-the-scheduler-even-with-the-gate-off",
            "!device.allowMultipleAllocations",
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "has-on-device-fields",
            "has(device.driver) && has(device.attributes) && has(device.allowMultipleAllocations)",
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "device-bound-as-a-whole",
            r#"cel.bind(d, device, d.driver == "gpu.nvidia.com" && d.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("1Gi")) && size(d.attributes["other.io"]) == 0)"#,
            Match(true),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "device-bound-as-a-whole-keeps-field-checks",
            "cel.bind(d, device, d.name == 'x')",
            Compile("undefined field 'name'"),
        ),
        with(
            gpu("141Gi", "570.86.15"),
            "optional-chaining-on-device",
            r#"device.?driver.orValue("") == "gpu.nvidia.com""#,
            Match(true),
        ),
    ]
}

fn gates_with(list: bool, consumable: bool) -> FeatureGates {
    FeatureGates {
        list_type_attributes: list,
        consumable_capacity: consumable,
        ..FeatureGates::default()
    }
}

fn run_all(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in &cases {
        let runs: Vec<(FeatureGates, SelectorCompiler)> = match c.env {
            Env::Scheduler => [false, true]
                .into_iter()
                .map(|list| {
                    let gates = gates_with(list, false);
                    let compiler = SelectorCompiler::new(&gates);
                    (gates, compiler)
                })
                .collect(),
            Env::New(consumable, list) => {
                let gates = gates_with(list, consumable);
                let compiler = SelectorCompiler::with_environment(
                    &gates,
                    KubeVersion::NEWEST,
                    CelEnvironment::NewExpressions,
                );
                vec![(gates, compiler)]
            }
        };
        for (gates, mut compiler) in runs {
            if let Err(e) = run(c, &mut compiler, &gates) {
                failures.push(format!(
                    "{} (list gate {}): {e}",
                    c.name, gates.list_type_attributes
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn upstream_compile_test_cases() {
    let cases = upstream_cases();
    assert!(cases.len() >= 60, "ported {} cases", cases.len());
    run_all(cases);
}

#[test]
fn digest_and_checker_cases() {
    run_all(digest_cases());
}

#[test]
fn error_display_reads_like_upstream() {
    let mut compiler = SelectorCompiler::new(&FeatureGates::default());
    let expression = r#"device.attributes["x"].model == 1"#;
    let device = CelDevice::new(
        DRIVER,
        &make_device(&[], &[], None),
        &FeatureGates::default(),
    );
    let err = compiler
        .compile(expression)
        .unwrap()
        .matches(&device)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "CEL expression \"device.attributes[\\\"x\\\"].model == 1\": runtime error: no such key: model. {NO_SUCH_KEY_HINT}"
        )
    );
    let err = compiler.compile("?!").unwrap_err();
    assert!(err.to_string().starts_with("CEL expression \"?!\": compile error: compilation failed: ERROR: <input>:1:1: Syntax error"), "{err}");
}

#[test]
fn compile_results_are_cached_including_errors() {
    let mut compiler = SelectorCompiler::new(&FeatureGates::default());
    let a = compiler.compile("device.driver == 'x'").unwrap();
    let b = compiler.compile("device.driver == 'x'").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.expression(), "device.driver == 'x'");
    let first = compiler.compile("nope").unwrap_err();
    assert_eq!(compiler.compile("nope").unwrap_err(), first);
    assert_eq!(
        first.message,
        "compilation failed: undeclared reference to 'nope'"
    );
}

#[test]
fn one_device_serves_many_selectors() {
    let gates = FeatureGates::default();
    let mut compiler = SelectorCompiler::new(&gates);
    let device = CelDevice::new(
        "gpu.example.com",
        &make_device(
            &[("model", s("a100")), ("cores", i(108))],
            &[("memory", "80Gi")],
            None,
        ),
        &gates,
    );
    let selectors = [
        (
            r#"device.attributes["gpu.example.com"].model == "a100""#,
            true,
        ),
        (
            r#"device.attributes["gpu.example.com"].cores >= 128"#,
            false,
        ),
        (
            r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("81Gi"))"#,
            true,
        ),
    ];
    for _ in 0..3 {
        for (expr, want) in selectors {
            assert_eq!(
                compiler.compile(expr).unwrap().matches(&device),
                Ok(want),
                "{expr}"
            );
        }
    }
}

#[test]
fn list_attributes_before_1_37_need_the_gate() {
    let device_attrs = [("ids", ints(&[1, 2]))];
    let expr = r#"device.attributes["dra.example.com"].ids.exists(id, id == 1)"#;
    // 1.36, gate off: upstream does not convert list values and fails the device.
    let off = gates_with(false, false);
    let device = CelDevice::new(DRIVER, &make_device(&device_attrs, &[], None), &off);
    let mut old = SelectorCompiler::with_environment(
        &off,
        KubeVersion { minor: 36 },
        CelEnvironment::StoredExpressions,
    );
    let err = old.compile("true").unwrap().matches(&device).unwrap_err();
    assert_eq!(err.message, "attribute ids: unsupported attribute value");
    // 1.36, gate on: lists are exposed.
    let on = gates_with(true, false);
    let device_on = CelDevice::new(DRIVER, &make_device(&device_attrs, &[], None), &on);
    let mut old_on = SelectorCompiler::with_environment(
        &on,
        KubeVersion { minor: 36 },
        CelEnvironment::StoredExpressions,
    );
    assert_eq!(old_on.compile(expr).unwrap().matches(&device_on), Ok(true));
    // 1.37: exposed regardless of the gate (upstream commit "should be usable
    // in StoredExpression environment even if the feature gate is disabled").
    assert_eq!(
        SelectorCompiler::new(&off)
            .compile(expr)
            .unwrap()
            .matches(&device),
        Ok(true)
    );
    // 1.35 has no includes() at all.
    let mut v135 = SelectorCompiler::with_environment(
        &off,
        KubeVersion { minor: 35 },
        CelEnvironment::StoredExpressions,
    );
    assert!(
        v135.compile(r#"device.attributes["d"].x.includes(1)"#)
            .is_err()
    );
}

#[test]
fn capacity_that_is_not_a_quantity_fails_every_selector() {
    let gates = FeatureGates::default();
    let device = CelDevice::new(
        DRIVER,
        &make_device(&[], &[("memory", "lots")], None),
        &gates,
    );
    let err = SelectorCompiler::new(&gates)
        .compile("true")
        .unwrap()
        .matches(&device)
        .unwrap_err();
    assert!(
        err.message
            .starts_with("capacity memory: quantities must match"),
        "{}",
        err.message
    );
}

/// Tokens that make random expressions likely to parse and reach the evaluator.
const TOKENS: &[&str] = &[
    "device",
    ".",
    "attributes",
    "capacity",
    "driver",
    "allowMultipleAllocations",
    "[",
    "]",
    "(",
    ")",
    "\"dra.example.com\"",
    "\"other.io\"",
    "'x'",
    "name",
    "memory",
    "==",
    "!=",
    "<",
    ">=",
    "&&",
    "||",
    "!",
    "?",
    ":",
    "+",
    "-",
    "*",
    "/",
    "%",
    "in",
    "1",
    "0",
    "-1",
    "2.5",
    "true",
    "false",
    "null",
    "[1, 2]",
    "{'a': 1}",
    "has(",
    "exists(x, x",
    "all(x, x",
    "map(x, x",
    "filter(x, x",
    "cel.bind(v,",
    "v",
    "x",
    ",",
    "quantity(\"1Gi\")",
    "semver(\"1.0.0\")",
    "isGreaterThan(",
    "compareTo(",
    "includes(",
    "size(",
    "?.",
    "[?",
    "orValue(",
    "hasValue()",
    "optional.of(",
    "'a' + 'b'",
    "lists.range(3)",
    "replace('a', 'bb')",
    "matches('a.*')",
    "split(',')",
    "join()",
    "format([1])",
    "sets.contains(",
    "int(",
    "string(",
    "b'\\x00'",
    "1u",
    "Foo{a: 1}",
    "@",
    "#",
    "\\",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..24).prop_map(|t| t.concat())
}

fn attribute_strategy() -> impl Strategy<Value = DeviceAttribute> {
    let text = "[a-zA-Z0-9.+-]{0,12}";
    prop_oneof![
        any::<bool>().prop_map(b),
        any::<i64>().prop_map(i),
        text.prop_map(|v| s(&v)),
        text.prop_map(|v| ver(&v)),
        prop::collection::vec(any::<i64>(), 0..60).prop_map(|v| ints(&v)),
        prop::collection::vec(text, 0..4).prop_map(|v| DeviceAttribute {
            versions: Some(v),
            ..Default::default()
        }),
        Just(DeviceAttribute::default()),
    ]
}

fn device_strategy() -> impl Strategy<Value = Device> {
    let name = prop_oneof![
        "[a-z]{1,6}",
        "[a-z]{1,4}\\.io/[a-z]{1,6}",
        "dra\\.example\\.com/[a-z]{1,4}",
        ".{0,8}"
    ];
    let quantity = prop_oneof![
        "[0-9]{1,4}(Ki|Mi|Gi|m|k|e[0-9]{1,3}|)",
        ".{0,8}",
        "-?[0-9.]{1,30}(E|Ei|n|e-[0-9]{1,10})"
    ];
    (
        prop::collection::btree_map(name.clone(), attribute_strategy(), 0..6),
        prop::collection::btree_map(name, quantity, 0..4),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(attributes, capacity, multi)| Device {
            name: "dev".to_string(),
            attributes: Some(attributes),
            capacity: Some(
                capacity
                    .into_iter()
                    .map(|(k, v)| {
                        (
                            k,
                            DeviceCapacity {
                                value: K8sQuantity(v),
                                ..Default::default()
                            },
                        )
                    })
                    .collect(),
            ),
            allow_multiple_allocations: multi,
            ..Default::default()
        })
}

/// Fixed selectors that exercise every device field.
const PROBES: &[&str] = &[
    "true",
    r#"device.attributes["dra.example.com"].name == 1"#,
    r#"device.attributes.exists(d, device.attributes[d].exists(k, device.attributes[d][k] == device.attributes[d][k]))"#,
    r#"device.capacity.exists(d, device.capacity[d].exists(k, device.capacity[d][k].isGreaterThan(quantity("1Gi"))))"#,
    r#"device.capacity.all(d, device.capacity[d].all(k, device.capacity[d][k].add(quantity("1e-30")).sign() >= -1))"#,
    r#"device.attributes.all(d, device.attributes[d].all(k, device.attributes[d][k].includes(1)))"#,
    "device.allowMultipleAllocations || device.driver != ''",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Nothing panics, inside or out: an internal panic would show up as a
    /// "panicked" error because compile and matches catch them.
    #[test]
    fn arbitrary_expressions_never_panic(expr in prop_oneof![token_soup(), ".{0,64}"], device in device_strategy()) {
        let gates = FeatureGates::default();
        let mut compiler = SelectorCompiler::new(&gates);
        let device = CelDevice::new(DRIVER, &device, &gates);
        match compiler.compile(&expr) {
            Ok(sel) => {
                if let Err(e) = sel.matches(&device) {
                    prop_assert!(!e.message.contains("panicked"), "{e}");
                    prop_assert_eq!(e.kind, CelErrorKind::Runtime);
                }
            }
            Err(e) => {
                prop_assert!(!e.message.contains("panicked"), "{e}");
                prop_assert_eq!(e.kind, CelErrorKind::Compile);
            }
        }
    }

    #[test]
    fn arbitrary_devices_never_panic(device in device_strategy(), list_gate in any::<bool>()) {
        let gates = gates_with(list_gate, true);
        let mut compiler = SelectorCompiler::new(&gates);
        let device = CelDevice::new(DRIVER, &device, &gates);
        for probe in PROBES {
            let sel = compiler.compile(probe).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if let Err(e) = sel.matches(&device) {
                prop_assert!(!e.message.contains("panicked"), "{probe}: {e}");
            }
        }
    }
}

/// Nanoseconds this thread has spent on a CPU (Linux), so that timings on a
/// shared, loaded machine are not inflated by waiting for a core.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn time_per_iteration(n: u32, mut f: impl FnMut()) -> (f64, Option<f64>) {
    let cpu0 = thread_cpu_ns();
    let start = std::time::Instant::now();
    for _ in 0..n {
        f();
    }
    let wall = start.elapsed().as_nanos() as f64 / f64::from(n);
    let cpu = cpu0
        .zip(thread_cpu_ns())
        .map(|(a, b)| (b - a) as f64 / f64::from(n));
    (wall, cpu)
}

/// Rough timing of the hot path; run with
/// `cargo test -p dra-sim --release --lib -- --ignored selector_timing --nocapture`.
#[test]
#[ignore = "timing, not a correctness check"]
fn selector_timing() {
    let gates = FeatureGates::default();
    let mut compiler = SelectorCompiler::new(&gates);
    let k8s_device = make_device(
        &[
            ("productName", s("NVIDIA H200")),
            ("driverVersion", ver("570.86.15")),
            ("cores", i(132)),
        ],
        &[("memory", "141Gi")],
        None,
    );
    let device = CelDevice::new("gpu.example.com", &k8s_device, &gates);
    for expr in [
        r#"device.driver == "gpu.example.com""#,
        r#""gpu.example.com" in device.attributes"#,
        r#"size(device.attributes["gpu.example.com"]) == 3"#,
        r#"quantity("40Gi").sign() == 1"#,
        r#"device.capacity["gpu.example.com"].memory.sign() == 1"#,
        r#"device.attributes["gpu.example.com"].productName == "NVIDIA H200""#,
        r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
        r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("550.0.0"))"#,
    ] {
        let sel = compiler.compile(expr).unwrap();
        let (wall, cpu) = time_per_iteration(200_000, || assert!(sel.matches(&device).unwrap()));
        eprintln!(
            "{wall:>8.0} ns wall {:>8.0} ns cpu  {expr}",
            cpu.unwrap_or(f64::NAN)
        );
    }
    let (wall, cpu) = time_per_iteration(20_000, || {
        std::hint::black_box(CelDevice::new("gpu.example.com", &k8s_device, &gates));
    });
    eprintln!(
        "{wall:>8.0} ns wall {:>8.0} ns cpu  CelDevice::new",
        cpu.unwrap_or(f64::NAN)
    );
}

/// Deep trees are either refused at compile time or evaluated; a stack
/// overflow would abort the process, which no `catch_unwind` can stop.
#[test]
fn deep_expressions_do_not_overflow_the_stack() {
    let gates = FeatureGates::default();
    let device = CelDevice::new(DRIVER, &make_device(&[("name", i(1))], &[], None), &gates);
    type Shape = fn(usize) -> String;
    let shapes: [(&str, Shape); 9] = [
        ("plus-chain", |n| {
            format!("{} == {n}", vec!["1"; n].join(" + "))
        }),
        ("and-chain", |n| vec!["true"; n].join(" && ")),
        ("not-prefix", |n| format!("{}true", "!".repeat(n * 2))),
        ("parens", |n| {
            format!("{}true{}", "(".repeat(n), ")".repeat(n))
        }),
        ("nested-lists", |n| {
            format!("size({}1{}) == 1", "[".repeat(n), "]".repeat(n))
        }),
        ("select-chain", |n| {
            format!("has(device.attributes[\"d\"]{})", ".a".repeat(n))
        }),
        ("nested-calls", |n| {
            format!("{}'x'{} == 'x'", "string(".repeat(n), ")".repeat(n))
        }),
        ("nested-ternary", |n| {
            format!("{}true", "false ? false : ".repeat(n))
        }),
        ("nested-exists", |n| {
            format!("{}true{}", "[1].exists(x, ".repeat(n), ")".repeat(n))
        }),
    ];
    for (name, shape) in &shapes {
        for n in [10, 90, 150, 240, 250, 1000, 1500, 5000] {
            let expr = shape(n);
            let mut compiler = SelectorCompiler::new(&gates);
            // Run on a thread with the default 2 MiB test stack, like the allocator's callers.
            let outcome = std::thread::scope(|scope| {
                scope
                    .spawn(|| match compiler.compile(&expr) {
                        Ok(sel) => sel.matches(&device).map(|_| ()).map_err(|e| e.message),
                        Err(e) => Err(e.message),
                    })
                    .join()
            });
            let outcome = outcome.unwrap_or_else(|_| panic!("{name} at {n} panicked"));
            if let Err(message) = outcome {
                // cel-rust's recursion guard underflows in debug builds once
                // its limit trips (it wraps to the limit in release builds);
                // that panic is caught and reported as a compile error.
                let parser_limit = message.contains(PARSER_PANIC);
                assert!(
                    parser_limit || !message.contains("panicked"),
                    "{name} at {n}: {message}"
                );
            }
        }
    }
}

/// Callers may share compiled selectors and converted devices across threads.
#[test]
fn public_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<SelectorCompiler>();
    check::<CompiledSelector>();
    check::<CelDevice>();
    check::<CelError>();
}
