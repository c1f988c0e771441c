//! Unit tests of consumable-capacity rounding and sharing.

use super::super::inventory::Range;
use super::*;

fn q(s: &str) -> Value {
    Value::parse(s).unwrap()
}

fn cap(value: &str, policy: Option<Policy>) -> CapacityEntry {
    CapacityEntry {
        name: "capacity-0".into(),
        value: q(value),
        policy,
    }
}

fn range(default: Option<&str>, min: &str, max: Option<&str>, step: Option<&str>) -> Policy {
    Policy {
        default: default.map(q),
        valid_values: None,
        valid_range: Some(Range {
            min: q(min),
            max: max.map(q),
            step: step.map(q),
        }),
    }
}

fn values(default: &str, values: &[&str]) -> Policy {
    Policy {
        default: Some(q(default)),
        valid_values: Some(values.iter().map(|v| q(v)).collect()),
        valid_range: None,
    }
}

// Ported from upstream consumable_capacity_test.go, testViolateCapacityRequestPolicy.
#[test]
fn violate_capacity_request_policy() {
    let cases: Vec<(&str, &str, Option<Policy>, bool)> = vec![
        ("no constraint", "1", None, false),
        (
            "less than maximum",
            "1",
            Some(range(Some("1"), "1", Some("2"), None)),
            false,
        ),
        (
            "more than maximum",
            "2",
            Some(range(Some("1"), "1", Some("1"), None)),
            true,
        ),
        ("in set", "1", Some(values("1", &["1"])), false),
        ("not in set", "2", Some(values("1", &["1"])), true),
    ];
    for (name, requested, policy, expect) in cases {
        assert_eq!(
            violates_policy(q(requested), policy.as_ref(), false),
            expect,
            "{name}"
        );
    }
    // Fractional steps (min 0.2, step 0.1, max 1) with DRAFractionalCapacityRange.
    let fractional = range(Some("200m"), "200m", Some("1"), Some("100m"));
    assert!(
        !violates_policy(q("300m"), Some(&fractional), true),
        "fractional step aligned (0.3 = min+1*step)"
    );
    assert!(
        violates_policy(q("250m"), Some(&fractional), true),
        "fractional step not aligned (0.25 is not a multiple of 0.1 from 0.2)"
    );
    assert!(
        violates_policy(
            q(TOO_BIG_FOR_MILLI),
            Some(&range(Some("1"), "1", None, Some("1"))),
            true
        ),
        "requested value overflows milli representation"
    );
}

/// MilliValue() of this overflows int64 (upstream's `tooBigForMilli`).
const TOO_BIG_FOR_MILLI: &str = "9224372036854776E3";

// Ported from upstream consumable_capacity_test.go, testSafeMilliValue.
#[test]
fn safe_milli_value() {
    assert_eq!(milli(q("1")), Some(1000), "whole number");
    assert_eq!(milli(q("100m")), Some(100), "fractional milli");
    assert_eq!(
        milli(q(TOO_BIG_FOR_MILLI)),
        None,
        "too large for milli (overflows int64)"
    );
    assert_eq!(milli(q("1.0000001")), None, "sub-milli");
}

// Ported from upstream consumable_capacity_test.go, testUseMilli.
#[test]
fn use_milli_arithmetic() {
    let r = |min: &str, max: Option<&str>, step: Option<&str>| Range {
        min: q(min),
        max: max.map(q),
        step: step.map(q),
    };
    assert!(
        !use_milli(&r("200m", Some("1"), Some("100m")), false),
        "fractional disabled"
    );
    assert!(
        use_milli(&r("200m", Some("1"), Some("100m")), true),
        "all fractional, fits in milli"
    );
    assert!(
        use_milli(&r("1", Some("3"), Some("1")), true),
        "all integer, fits in milli"
    );
    assert!(
        !use_milli(&r(TOO_BIG_FOR_MILLI, None, Some("1")), true),
        "min overflows milli, falls back to integer"
    );
    assert!(
        !use_milli(&r("1", None, Some("0")), true),
        "step too small (sub-milli)"
    );
}

// Ported from upstream consumable_capacity_test.go,
// testCmpRequestOverCapacityFatalBeatsSoft.
#[test]
fn cmp_request_over_capacity_fatal_beats_soft() {
    let device = DeviceEntry {
        capacities: vec![
            CapacityEntry {
                name: "capacity-0".into(),
                value: q("1"),
                policy: None,
            },
            CapacityEntry {
                name: "capacity-1".into(),
                value: q("9223372036854775808"),
                policy: Some(range(None, "0", None, Some("2"))),
            },
        ],
        ..device_with(vec![])
    };
    let requested = vec![
        ("capacity-0".to_string(), q("2")),
        ("capacity-1".to_string(), q("9223372036854775807")),
    ];
    let got = fits(Some(&requested), &device, None, None, false);
    assert!(
        got.as_ref()
            .is_err_and(|e| e.to_string().contains("cannot be represented")),
        "{got:?}"
    );
}

// Ported from upstream consumable_capacity_test.go, testCalculateConsumedCapacity.
#[test]
fn calculate_consumed_capacity() {
    let empty = Policy {
        default: None,
        valid_values: None,
        valid_range: None,
    };
    let cases: Vec<(&str, Option<&str>, &str, Policy, &str)> = vec![
        ("empty", None, "1", empty, "1"),
        (
            "min in range",
            None,
            "2",
            range(Some("1"), "1", None, None),
            "1",
        ),
        ("default in set", None, "2", values("1", &["1"]), "1"),
        (
            "more than min in range",
            Some("2"),
            "2",
            range(Some("1"), "1", None, None),
            "2",
        ),
        (
            "less than min in range",
            Some("1"),
            "2",
            range(Some("1"), "2", None, None),
            "2",
        ),
        (
            "with step (round up)",
            Some("2"),
            "3",
            range(Some("1"), "1", None, Some("2")),
            "3",
        ),
        (
            "with step (no remaining)",
            Some("2"),
            "2",
            range(Some("1"), "1", None, Some("1")),
            "2",
        ),
        (
            "valid value in set",
            Some("2"),
            "3",
            values("1", &["1", "2", "3"]),
            "2",
        ),
        (
            "set (round up)",
            Some("2"),
            "3",
            values("1", &["1", "3"]),
            "3",
        ),
        (
            "larger than set",
            Some("3"),
            "3",
            values("1", &["1", "2"]),
            "3",
        ),
    ];
    for (name, requested, value, policy, expect) in cases {
        let requested = requested.map(q);
        let got = consumed_value(requested.as_ref(), &cap(value, Some(policy)), false).unwrap();
        assert_eq!(got.amount, q(expect).amount, "{name}");
    }
}

// Ported from upstream consumable_capacity_test.go, testCalculateConsumedCapacity:
// the DRAFractionalCapacityRange and representability cases.
#[test]
fn calculate_consumed_capacity_fractional_and_limits() {
    // (name, requested, capacity, policy, fractional, expected or None for an error,
    // error substring)
    type Row = (
        &'static str,
        &'static str,
        &'static str,
        Policy,
        bool,
        Option<&'static str>,
        &'static str,
    );
    let cases: Vec<Row> = vec![
        (
            "request-above-maxint64-is-rejected",
            "18446744073709551619",
            "18446744073709551619",
            range(Some("0"), "0", None, Some("3")),
            false,
            None,
            "",
        ),
        (
            "rounded-value-above-maxint64-is-rejected",
            "9223372036854775807",
            "9223372036854775808",
            range(Some("0"), "0", None, Some("2")),
            false,
            None,
            "",
        ),
        (
            "max-safe-boundary-rounds-to-maxint64",
            "9223372036854775806",
            "9223372036854775807",
            range(Some("1"), "1", None, Some("2")),
            false,
            Some("9223372036854775807"),
            "",
        ),
        (
            "fractional step round up (0.25 to 0.3)",
            "250m",
            "1",
            range(Some("200m"), "200m", Some("1"), Some("100m")),
            true,
            Some("300m"),
            "",
        ),
        (
            "fractional step already aligned (0.4 = min+2*step)",
            "400m",
            "1",
            range(Some("200m"), "200m", Some("1"), Some("100m")),
            true,
            Some("400m"),
            "",
        ),
        (
            "integer-step-sub-milli-request",
            "1.0000001",
            "3",
            range(Some("1"), "1", None, Some("1")),
            true,
            None,
            "",
        ),
        (
            "integer-step-milli-request-rounds-up",
            "1.001",
            "3",
            range(Some("1"), "1", None, Some("1")),
            true,
            Some("2"),
            "",
        ),
        (
            "integer-step-sub-milli-request-rounds-up-without-fractional-range",
            "1.0000001",
            "3",
            range(Some("1"), "1", None, Some("1")),
            false,
            Some("2"),
            "",
        ),
        (
            "fractional-step-sub-milli-request",
            "1.0000001",
            "2",
            range(Some("500m"), "500m", None, Some("500m")),
            true,
            None,
            "",
        ),
        (
            "fractional-step-milli-request-rounds-up",
            "1.001",
            "2",
            range(Some("500m"), "500m", None, Some("500m")),
            true,
            Some("1500m"),
            "",
        ),
        (
            "negative-step-request-above-min-is-rejected",
            "15",
            "15",
            range(Some("10"), "10", None, Some("-1")),
            false,
            None,
            "rounding request 15 up to the next step passes MaxInt64",
        ),
        (
            "negative-step-request-above-min-is-rejected-with-fractional-range",
            "15",
            "15",
            range(Some("10"), "10", None, Some("-1")),
            true,
            None,
            "rounding request 15 up to the next step passes MaxInt64",
        ),
        (
            "negative-step-request-equal-to-min-is-rejected",
            "10",
            "15",
            range(Some("10"), "10", None, Some("-1")),
            false,
            None,
            "rounding request 10 up to the next step passes MaxInt64",
        ),
        (
            "negative-step-request-below-min-returns-min",
            "5",
            "15",
            range(Some("10"), "10", None, Some("-1")),
            false,
            Some("10"),
            "",
        ),
        (
            "negative-binary-step-request-above-min-is-rejected",
            "3Gi",
            "3Gi",
            range(Some("1Gi"), "1Gi", None, Some("-1Gi")),
            false,
            None,
            "rounding request 3Gi up to the next step passes MaxInt64",
        ),
        (
            "positive-binary-step-request-above-min-rounds-to-itself",
            "3Gi",
            "3Gi",
            range(Some("1Gi"), "1Gi", None, Some("1Gi")),
            false,
            Some("3Gi"),
            "",
        ),
        (
            "fractional-step-request-not-milli-representable-is-rejected",
            TOO_BIG_FOR_MILLI,
            TOO_BIG_FOR_MILLI,
            range(Some("1"), "100m", None, Some("100m")),
            true,
            None,
            "",
        ),
        (
            "fractional-step-rounded-value-passes-milli-range-is-rejected",
            "9223372036854775.806",
            "9223372036854775.807",
            range(Some("100m"), "100m", None, Some("100m")),
            true,
            None,
            "",
        ),
    ];
    for (name, requested, value, policy, fractional, expect, message) in cases {
        let got = consumed_value(Some(&q(requested)), &cap(value, Some(policy)), fractional);
        match expect {
            Some(expect) => {
                assert_eq!(got.map(|v| v.amount), Ok(q(expect).amount), "{name}");
            }
            None => {
                let err = got.expect_err(name).to_string();
                assert!(err.contains("cannot be represented"), "{name}: {err}");
                assert!(err.contains(message), "{name}: {err}");
            }
        }
    }
}

// The rounded value keeps the step's format (upstream
// `resource.NewQuantity(v, step.Format)`), so the result serialises as
// the step does.
#[test]
fn rounded_values_take_the_format_of_the_step() {
    let binary = consumed_value(
        Some(&q("1500")),
        &cap("4Ki", Some(range(None, "1Ki", None, Some("1Ki")))),
        false,
    )
    .unwrap();
    assert_eq!(binary.canonical(), "2Ki");
    let decimal = consumed_value(
        Some(&q("1500")),
        &cap("4k", Some(range(None, "1k", None, Some("1k")))),
        false,
    )
    .unwrap();
    assert_eq!(decimal.canonical(), "2k");
    let milli = consumed_value(
        Some(&q("250m")),
        &cap("1", Some(range(None, "200m", None, Some("100m")))),
        true,
    )
    .unwrap();
    assert_eq!(milli.canonical(), "300m");
}

fn device_with(capacities: Vec<CapacityEntry>) -> DeviceEntry {
    DeviceEntry {
        name: "device-1".into(),
        raw: Default::default(),
        slot: 0,
        capacities,
        consumes: vec![],
        taints: vec![],
        allow_multi: true,
        binds_to_node: false,
        has_binding_conditions: false,
        binding_conditions_set: false,
        node_name: None,
        all_nodes: false,
        node_selector: None,
    }
}

// Ported from upstream consumable_capacity_test.go, get-consumed-capacity-from-request.
#[test]
fn get_consumed_capacity_from_request() {
    let device = DeviceEntry {
        name: "device-1".into(),
        raw: Default::default(),
        slot: 0,
        capacities: vec![
            CapacityEntry {
                name: "capacity-0".into(),
                value: q("2"),
                policy: Some(range(Some("2"), "1", None, None)),
            },
            CapacityEntry {
                name: "capacity-1".into(),
                value: q("2"),
                policy: Some(range(Some("1"), "1", None, None)),
            },
            CapacityEntry {
                name: "dummy".into(),
                value: q("1"),
                policy: None,
            },
        ],
        consumes: vec![],
        taints: vec![],
        allow_multi: true,
        binds_to_node: false,
        has_binding_conditions: false,
        binding_conditions_set: false,
        node_name: None,
        all_nodes: false,
        node_selector: None,
    };
    let requested = vec![
        ("capacity-0".to_string(), q("1")),
        ("dummy".to_string(), q("1")),
    ];
    let consumed = consumed_by(Some(&requested), &device, false).unwrap();
    assert_eq!(consumed.len(), 3);
    assert!(consumed.iter().all(|v| v.amount == q("1").amount));
    // Requests for unknown capacities make the device ineligible, not an error.
    let unknown = vec![("nope".to_string(), q("1"))];
    assert_eq!(fits(Some(&unknown), &device, None, None, false), Ok(None));
    // 1 already consumed + default 2 > 2.
    assert_eq!(
        fits(None, &device, Some(&[q("1").amount]), None, false),
        Ok(Some(false))
    );
    assert_eq!(fits(None, &device, None, None, false), Ok(Some(true)));
}
