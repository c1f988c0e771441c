//! Consumable capacity (KEP-5075): how much of each capacity a request
//! consumes on a device, whether that respects the capacity's request
//! policy, and whether it still fits next to what is already consumed.
//!
//! Upstream runs the fit check for every device, shared or not; on an
//! exclusive device nothing is consumed yet, so it acts as a "capacity ≥
//! request" filter.

use super::inventory::{CapacityEntry, DeviceEntry, Policy};
use super::quantity::{Amount, Value};

/// What a request asks of each capacity, by name; `None` when the request
/// has no `capacity.requests` map.
pub(crate) type Requested<'c> = Option<&'c [(String, Value)]>;

fn requested_for<'c>(requested: Requested<'c>, name: &str) -> Option<&'c Value> {
    requested?.iter().find(|(n, _)| n == name).map(|(_, v)| v)
}

/// Upstream `calculateConsumedCapacity`: the amount a request consumes of
/// one capacity after applying the request policy's default and rounding.
pub(crate) fn consumed_value(requested: Option<&Value>, capacity: &CapacityEntry) -> Value {
    let Some(requested) = requested else {
        return match capacity.policy.as_ref().and_then(|p| p.default) {
            Some(default) => default,
            None => capacity.value,
        };
    };
    let Some(policy) = &capacity.policy else {
        return *requested;
    };
    if let Some(range) = &policy.valid_range {
        if requested.amount < range.min.amount {
            return range.min;
        }
        let Some(step) = range.step else {
            return *requested;
        };
        let step_units = step.amount.ceil_units();
        if step_units <= 0 {
            return *requested;
        }
        let min_units = range.min.amount.ceil_units();
        let added = requested.amount.ceil_units() - min_units;
        let mut n = added / step_units;
        if added % step_units != 0 {
            n += 1;
        }
        return Value::binary_units(min_units + step_units * n);
    }
    if let Some(values) = &policy.valid_values {
        return values
            .iter()
            .find(|v| requested.amount <= v.amount)
            .copied()
            .unwrap_or(*requested);
    }
    *requested
}

/// Upstream `violatesPolicy`.
pub(crate) fn violates_policy(consumed: Amount, policy: Option<&Policy>) -> bool {
    let Some(policy) = policy else { return false };
    if policy.default.is_some_and(|d| d.amount == consumed) {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        if range.max.is_some_and(|max| consumed > max.amount) {
            return true;
        }
        if let Some(step) = range.step {
            let step_units = step.amount.ceil_units();
            if step_units != 0
                && (consumed.ceil_units() - range.min.amount.ceil_units()) % step_units != 0
            {
                return true;
            }
        }
        return false;
    }
    match &policy.valid_values {
        Some(values) if !values.is_empty() => !values.iter().any(|v| v.amount == consumed),
        _ => false,
    }
}

/// Upstream `CmpRequestOverCapacity`: `None` when the request names a
/// capacity the device lacks (the device is skipped), otherwise whether
/// every capacity still fits. `consumed` and `allocating` are aligned with
/// the device's capacities.
pub(crate) fn fits(
    requested: Requested<'_>,
    device: &DeviceEntry,
    consumed: Option<&[Amount]>,
    allocating: Option<&[Amount]>,
) -> Option<bool> {
    if let Some(requested) = requested {
        for (name, _) in requested {
            if !device.capacities.iter().any(|c| &c.name == name) {
                return None;
            }
        }
    }
    for (i, capacity) in device.capacities.iter().enumerate() {
        let value = consumed_value(requested_for(requested, &capacity.name), capacity);
        if violates_policy(value.amount, capacity.policy.as_ref()) {
            return Some(false);
        }
        let mut total = value.amount;
        if let Some(c) = consumed.and_then(|c| c.get(i)) {
            total = total.plus(*c);
        }
        if let Some(a) = allocating.and_then(|a| a.get(i)) {
            total = total.plus(*a);
        }
        if total > capacity.value.amount {
            return Some(false);
        }
    }
    Some(true)
}

/// Upstream `GetConsumedCapacityFromRequest`: every capacity of the device.
pub(crate) fn consumed_by(requested: Requested<'_>, device: &DeviceEntry) -> Vec<Value> {
    device
        .capacities
        .iter()
        .map(|c| consumed_value(requested_for(requested, &c.name), c))
        .collect()
}

#[cfg(test)]
mod tests {
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
                violates_policy(q(requested).amount, policy.as_ref()),
                expect,
                "{name}"
            );
        }
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
            let got = consumed_value(requested.as_ref(), &cap(value, Some(policy)));
            assert_eq!(got.amount, q(expect).amount, "{name}");
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
        let consumed = consumed_by(Some(&requested), &device);
        assert_eq!(consumed.len(), 3);
        assert!(consumed.iter().all(|v| v.amount == q("1").amount));
        // Requests for unknown capacities make the device ineligible, not an error.
        let unknown = vec![("nope".to_string(), q("1"))];
        assert_eq!(fits(Some(&unknown), &device, None, None), None);
        // 1 already consumed + default 2 > 2.
        assert_eq!(
            fits(None, &device, Some(&[q("1").amount]), None),
            Some(false)
        );
        assert_eq!(fits(None, &device, None, None), Some(true));
    }
}
