//! What the fake DRA driver does for a claim allocated on one of its nodes: sets every
//! `bindingConditions` of the allocated devices True in the claim's `status.devices`, as a
//! driver's controller does once the device is attached, so the scheduler's PreBind, which
//! waits for them, lets the pod bind.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::DEVICE_READY_REASON;

/// The node a claim's allocation is for: its node selector's `metadata.name` field (what the
/// allocator writes for node-local devices).
fn allocated_node(claim: &ResourceClaim) -> Option<&str> {
    let terms = &claim
        .status
        .as_ref()?
        .allocation
        .as_ref()?
        .node_selector
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|term| {
        term.match_fields.iter().flatten().find_map(|field| {
            (field.key == "metadata.name" && field.operator == "In")
                .then(|| field.values.as_ref()?.first().map(String::as_str))
                .flatten()
        })
    })
}

/// The merge patch of a claim's `status.devices` that sets, for every device allocated on one
/// of `owned`'s nodes, each of its `bindingConditions` True; `None` when nothing is missing.
/// Entries for other devices and other conditions are kept (a merge patch replaces the list).
pub(super) fn devices_ready_patch(
    claim: &ResourceClaim,
    owned: &BTreeSet<String>,
) -> Option<Value> {
    let node = allocated_node(claim)?;
    if !owned.contains(node) {
        return None;
    }
    let status = claim.status.as_ref()?;
    let results = status
        .allocation
        .as_ref()?
        .devices
        .as_ref()?
        .results
        .as_deref()?;
    let mut devices: Vec<AllocatedDeviceStatus> = status.devices.clone().unwrap_or_default();
    let mut changed = false;
    for result in results {
        let wanted = result.binding_conditions.as_deref().unwrap_or_default();
        if wanted.is_empty() {
            continue;
        }
        let position = devices.iter().position(|d| {
            d.driver == result.driver && d.pool == result.pool && d.device == result.device
        });
        let entry = match position {
            Some(i) => &mut devices[i],
            None => {
                devices.push(AllocatedDeviceStatus {
                    driver: result.driver.clone(),
                    pool: result.pool.clone(),
                    device: result.device.clone(),
                    share_id: result.share_id.clone(),
                    ..AllocatedDeviceStatus::default()
                });
                let last = devices.len() - 1;
                &mut devices[last]
            }
        };
        let conditions = entry.conditions.get_or_insert_with(Vec::new);
        for type_ in wanted {
            let ready = conditions
                .iter()
                .any(|c| &c.type_ == type_ && c.status == "True");
            if ready {
                continue;
            }
            conditions.retain(|c| &c.type_ != type_);
            conditions.push(Condition {
                type_: type_.clone(),
                status: "True".to_owned(),
                reason: DEVICE_READY_REASON.to_owned(),
                message: "the fake DRA driver attached the device".to_owned(),
                last_transition_time: Time(Timestamp::now()),
                observed_generation: claim.metadata.generation,
            });
            changed = true;
        }
    }
    changed.then(|| json!({"status": {"devices": devices}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(yaml: &str) -> ResourceClaim {
        serde_saphyr::from_str(yaml).expect("claim parses")
    }

    const ALLOCATED: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default, generation: 1}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
status:
  allocation:
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-a]}]
    devices:
      results:
      - {request: gpu, driver: gpu.example.com, pool: node-a, device: gpu-0, bindingConditions: [Attached, Healthy]}
      - {request: gpu, driver: gpu.example.com, pool: node-a, device: gpu-1}
"#;

    fn owned(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn every_binding_condition_of_a_device_on_an_owned_node_is_set_true() {
        let patch = devices_ready_patch(&claim(ALLOCATED), &owned(&["node-a"])).expect("patch");
        let devices = patch["status"]["devices"].as_array().expect("devices");
        assert_eq!(
            devices.len(),
            1,
            "only the device with binding conditions: {patch}"
        );
        assert_eq!(devices[0]["device"], "gpu-0");
        let types: Vec<&str> = devices[0]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| {
                assert_eq!(c["status"], "True");
                c["type"].as_str().expect("type")
            })
            .collect();
        assert_eq!(types, ["Attached", "Healthy"]);
    }

    #[test]
    fn devices_on_other_nodes_or_already_ready_are_left_alone() {
        assert!(devices_ready_patch(&claim(ALLOCATED), &owned(&["node-b"])).is_none());
        let first = devices_ready_patch(&claim(ALLOCATED), &owned(&["node-a"])).expect("patch");
        let mut ready = claim(ALLOCATED);
        let devices: Vec<AllocatedDeviceStatus> =
            serde_json::from_value(first["status"]["devices"].clone()).expect("devices");
        if let Some(status) = ready.status.as_mut() {
            status.devices = Some(devices);
        }
        assert!(devices_ready_patch(&ready, &owned(&["node-a"])).is_none());
    }
}
