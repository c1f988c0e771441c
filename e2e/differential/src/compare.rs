//! Compares our report with kube-scheduler's, pod by pod: the pods placed
//! and their order, each outcome, the node, and for every claim allocated
//! on the way its node selector and its results device for device (request,
//! driver, pool, device, admin access, whether a share ID was given, the
//! capacity consumed, tolerations and binding conditions).
//!
//! Not compared: reasons (our wording is deliberately more detailed), and
//! share IDs' values (both sides generate them). Consumed capacity is
//! compared by value (`1Gi` and `1073741824` are the same amount): upstream
//! writes the canonical form, we keep the one the request was written in.

use std::collections::BTreeMap;

use dra_sim::report::{ClaimAllocation, DeviceResult, PodReport, Report};
use serde_json::Value;

/// How the oracle's allocator picks among equally good devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceOrder {
    /// Pools and slices in name order (the incubating and experimental
    /// allocators), as ours: devices must match one for one.
    Sorted,
    /// Pools in Go map order (the stable allocator, used when only its
    /// features are on): which devices a pod gets may differ from run to
    /// run, whether it fits may not. Pods are compared until the first whose
    /// devices differ (with outcome and node equal); after it the two
    /// clusters' states differ and nothing more is compared.
    Arbitrary,
}

/// Every difference between `ours` and the oracle's pods, as sentences;
/// empty when they agree.
#[must_use]
pub fn differences(ours: &Report, oracle: &[PodReport], order: DeviceOrder) -> Vec<String> {
    let mut out = Vec::new();
    let our_names: Vec<&str> = ours.pods.iter().map(|p| p.pod.as_str()).collect();
    let their_names: Vec<&str> = oracle.iter().map(|p| p.pod.as_str()).collect();
    if our_names != their_names {
        out.push(format!(
            "pods placed differ: ours {our_names:?}, kube-scheduler {their_names:?}"
        ));
        return out;
    }
    for (a, b) in ours.pods.iter().zip(oracle) {
        let before = out.len();
        pod(a, b, &mut out);
        if order == DeviceOrder::Arbitrary && out.len() > before {
            if a.outcome == b.outcome && a.node == b.node {
                // Other devices of a stable allocator's choice: not a
                // disagreement, but the states part here.
                out.truncate(before);
            }
            break;
        }
    }
    out
}

fn pod(ours: &PodReport, theirs: &PodReport, out: &mut Vec<String>) {
    let name = &ours.pod;
    if ours.outcome != theirs.outcome {
        out.push(format!(
            "{name}: outcome {} here, {} in kube-scheduler (ours: {}; kube-scheduler: {})",
            ours.outcome.as_str(),
            theirs.outcome.as_str(),
            first(&ours.reasons),
            first(&theirs.reasons),
        ));
        return;
    }
    if ours.node != theirs.node {
        out.push(format!(
            "{name}: node {:?} here, {:?} in kube-scheduler",
            ours.node, theirs.node
        ));
        return;
    }
    let index = |list: &Option<Vec<ClaimAllocation>>| -> BTreeMap<String, ClaimAllocation> {
        list.iter()
            .flatten()
            .map(|a| (a.claim.clone(), a.clone()))
            .collect()
    };
    let (a, b) = (index(&ours.allocations), index(&theirs.allocations));
    let claims_a: Vec<&String> = a.keys().collect();
    let claims_b: Vec<&String> = b.keys().collect();
    if claims_a != claims_b {
        out.push(format!(
            "{name}: claims allocated {claims_a:?} here, {claims_b:?} in kube-scheduler"
        ));
        return;
    }
    for (claim, ours) in &a {
        let Some(theirs) = b.get(claim) else { continue };
        allocation(name, claim, ours, theirs, out);
    }
}

fn allocation(
    pod: &str,
    claim: &str,
    ours: &ClaimAllocation,
    theirs: &ClaimAllocation,
    out: &mut Vec<String>,
) {
    let devices = |a: &ClaimAllocation| -> Vec<String> {
        a.results
            .iter()
            .map(|r| format!("{} {}/{}/{}", r.request, r.driver, r.pool, r.device))
            .collect()
    };
    if ours.results.len() != theirs.results.len()
        || ours
            .results
            .iter()
            .zip(&theirs.results)
            .any(|(a, b)| !same_result(a, b))
    {
        let detail = ours
            .results
            .iter()
            .zip(&theirs.results)
            .find(|(a, b)| !same_result(a, b))
            .map(|(a, b)| {
                format!(
                    "; first difference: {} here, {} in kube-scheduler",
                    describe(a),
                    describe(b)
                )
            })
            .unwrap_or_default();
        out.push(format!(
            "{pod}: claim {claim}: devices {:?} here, {:?} in kube-scheduler{detail}",
            devices(ours),
            devices(theirs)
        ));
    }
    if normalized(&ours.node_selector) != normalized(&theirs.node_selector) {
        out.push(format!(
            "{pod}: claim {claim}: nodeSelector {} here, {} in kube-scheduler",
            ours.node_selector, theirs.node_selector
        ));
    }
}

fn same_result(a: &DeviceResult, b: &DeviceResult) -> bool {
    a.request == b.request
        && a.driver == b.driver
        && a.pool == b.pool
        && a.device == b.device
        && a.admin_access.unwrap_or(false) == b.admin_access.unwrap_or(false)
        && a.share_id.as_deref().is_some_and(|s| !s.is_empty())
            == b.share_id.as_deref().is_some_and(|s| !s.is_empty())
        && same_amounts(a.consumed_capacity.as_ref(), b.consumed_capacity.as_ref())
        && a.binding_conditions == b.binding_conditions
        && a.binding_failure_conditions == b.binding_failure_conditions
        && same_tolerations(a, b)
}

fn same_amounts(
    a: Option<&BTreeMap<String, String>>,
    b: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    a.len() == b.len()
        && a.iter().all(|(name, amount)| {
            b.get(name).is_some_and(|other| {
                match (
                    dra_sim::quantity::nano_value(amount),
                    dra_sim::quantity::nano_value(other),
                ) {
                    (Ok(x), Ok(y)) => x == y,
                    _ => amount == other,
                }
            })
        })
}

/// Tolerations as JSON, with the API server's default operator (`Equal`)
/// filled in on both sides.
fn same_tolerations(a: &DeviceResult, b: &DeviceResult) -> bool {
    let norm = |r: &DeviceResult| -> Vec<Value> {
        r.tolerations
            .iter()
            .flatten()
            .map(|t| {
                let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
                if let Value::Object(map) = &mut v {
                    map.entry("operator")
                        .or_insert_with(|| Value::from("Equal"));
                }
                v
            })
            .collect()
    };
    norm(a) == norm(b)
}

fn describe(r: &DeviceResult) -> String {
    serde_json::to_string(r).unwrap_or_default()
}

/// A node selector with empty lists dropped, so `{"matchExpressions": []}`
/// and a missing key compare equal.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !matches!(v, Value::Array(a) if a.is_empty()) && !v.is_null())
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

fn first(reasons: &[String]) -> String {
    match reasons {
        [] => "no reason given".into(),
        [one] => one.clone(),
        [one, rest @ ..] => format!("{one} (+{} more)", rest.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(v: Value) -> Report {
        serde_json::from_value(v).unwrap()
    }

    fn fits(device: &str, capacity: &str, share: Option<&str>) -> Value {
        let mut result = json!({"request": "r", "driver": "d", "pool": "p", "device": device,
                                "consumedCapacity": {"memory": capacity}});
        if let Some(s) = share {
            result["shareID"] = json!(s);
        }
        json!({"pods": [{"pod": "ns/a", "outcome": "fits", "node": "n1", "reasons": [],
            "allocations": [{"claim": "ns/c", "nodeSelector": {}, "results": [result]}]}]})
    }

    #[test]
    fn equal_amounts_in_other_forms_and_any_share_ids_agree() {
        let ours = report(fits("d1", "1Gi", Some("a")));
        let theirs = report(fits("d1", "1073741824", Some("b")));
        assert!(differences(&ours, &theirs.pods, DeviceOrder::Sorted).is_empty());
    }

    #[test]
    fn another_device_amount_share_or_outcome_is_a_difference() {
        let ours = report(fits("d1", "1Gi", Some("a")));
        for theirs in [
            fits("d2", "1Gi", Some("a")),
            fits("d1", "2Gi", Some("a")),
            fits("d1", "1Gi", None),
        ] {
            let theirs = report(theirs);
            assert_eq!(
                differences(&ours, &theirs.pods, DeviceOrder::Sorted).len(),
                1,
                "{theirs:?}"
            );
        }
        let pending = report(
            json!({"pods": [{"pod": "ns/a", "outcome": "unschedulable", "reasons": ["x"]}]}),
        );
        let found = differences(&ours, &pending.pods, DeviceOrder::Sorted);
        assert!(
            found[0].contains("outcome fits here, unschedulable"),
            "{found:?}"
        );
        let other_pod =
            report(json!({"pods": [{"pod": "ns/b", "outcome": "unschedulable", "reasons": []}]}));
        assert!(
            differences(&ours, &other_pod.pods, DeviceOrder::Sorted)[0]
                .contains("pods placed differ")
        );
    }

    #[test]
    fn a_stable_allocator_may_pick_other_devices_but_not_another_outcome() {
        let two = |first: &str, second_outcome: &str| {
            let mut r = fits(first, "1Gi", None);
            r["pods"]
                .as_array_mut()
                .unwrap()
                .push(json!({"pod": "ns/b", "outcome": second_outcome, "reasons": []}));
            report(r)
        };
        let ours = two("d1", "unschedulable");
        // Other devices for the first pod: the second is not compared.
        let theirs = two("d2", "error");
        assert!(differences(&ours, &theirs.pods, DeviceOrder::Arbitrary).is_empty());
        assert_eq!(
            differences(&ours, &theirs.pods, DeviceOrder::Sorted).len(),
            2
        );
        // Same devices: the second pod is compared.
        let theirs = two("d1", "error");
        assert_eq!(
            differences(&ours, &theirs.pods, DeviceOrder::Arbitrary).len(),
            1
        );
        // Another outcome is a disagreement either way.
        let pending = report(
            json!({"pods": [{"pod": "ns/a", "outcome": "unschedulable", "reasons": []},
                                               {"pod": "ns/b", "outcome": "unschedulable", "reasons": []}]}),
        );
        assert_eq!(
            differences(&ours, &pending.pods, DeviceOrder::Arbitrary).len(),
            1
        );
    }

    #[test]
    fn node_selectors_compare_without_empty_lists() {
        let a = json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]});
        let b = json!({"nodeSelectorTerms": [{"matchExpressions": [], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]});
        assert_eq!(normalized(&a), normalized(&b));
        let c = json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}]}]});
        assert_ne!(normalized(&a), normalized(&c));
    }
}
