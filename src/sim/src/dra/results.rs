//! Turning a found solution into `AllocationResult`s (spec §5.9, §5.10):
//! device results in allocation order, class and claim configuration, and
//! the node selector that says where the allocation can be used.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceRequest,
    DeviceRequestAllocationResult,
};

use super::model::{RequestData, Slot};
use super::search::{RKey, Search};

/// A solution whose results cannot be written (upstream's `createNodeSelector` error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "create NodeSelector for claim {claim}: unsupported ResourceSlice.NodeSelector with {terms} terms"
)]
pub(crate) struct ResultError {
    /// The claim's name (upstream prints the name only).
    pub claim: String,
    /// How many terms the chosen device's slice selector has (more than one).
    pub terms: usize,
}

/// Builds one result per claim.
///
/// # Errors
/// [`ResultError`]: a node selector with more than one term on a chosen device's slice.
pub(crate) fn assemble(
    search: &Search<'_, '_>,
    node_name: &str,
) -> Result<Vec<AllocationResult>, ResultError> {
    let mut out = Vec::with_capacity(search.claims.len());
    for (claim_idx, claim) in search.claims.iter().enumerate() {
        let chosen = &search.results[claim_idx];
        let mut results = Vec::with_capacity(chosen.len());
        for c in chosen {
            let data = search.request_of(c.key);
            let pool = &search.chk.pools[c.dev.pool];
            let slice = &pool.slices[c.dev.slice];
            let device = &slice.devices[c.dev.device];
            let consumed_capacity = c.consumed.as_ref().map(|values| {
                device
                    .capacities
                    .iter()
                    .zip(values)
                    .map(|(cap, v)| (cap.name.clone(), v.to_quantity()))
                    .collect()
            });
            let (binding_conditions, binding_failure_conditions) =
                if search.chk.f.binding_and_status {
                    (
                        device.raw.binding_conditions.clone(),
                        device.raw.binding_failure_conditions.clone(),
                    )
                } else {
                    (None, None)
                };
            results.push(DeviceRequestAllocationResult {
                request: data.full_name(),
                driver: pool.driver.clone(),
                pool: pool.name.clone(),
                device: device.name.clone(),
                admin_access: c.admin.then_some(true),
                tolerations: (!data.tolerations.is_empty()).then(|| data.tolerations.to_vec()),
                share_id: c.share_id.clone(),
                consumed_capacity,
                binding_conditions,
                binding_failure_conditions,
                skip_node_operations: (search.chk.f.optional_node_operations
                    && !slice.skip_node_operations.is_empty())
                .then(|| slice.skip_node_operations.clone()),
            });
        }
        let requests: &[DeviceRequest] = claim
            .spec
            .as_ref()
            .and_then(|s| s.devices.as_ref())
            .and_then(|d| d.requests.as_deref())
            .unwrap_or_default();
        let chosen_data: Vec<&RequestData<'_>> = (0..requests.len())
            .map(|request| {
                let sub = match &search.slots[claim_idx][request] {
                    Slot::Exact(_) => 0,
                    Slot::FirstAvailable(_) => search.selected[claim_idx][request],
                };
                search.request_of(RKey {
                    claim: claim_idx,
                    request,
                    sub,
                })
            })
            .collect();
        let config = configs(claim, requests, &chosen_data);
        let node_selector =
            node_selector(search, claim_idx, node_name).map_err(|terms| ResultError {
                claim: claim.metadata.name.clone().unwrap_or_default(),
                terms,
            })?;
        out.push(AllocationResult {
            allocation_timestamp: None,
            devices: Some(DeviceAllocationResult {
                results: Some(results),
                config: (!config.is_empty()).then_some(config),
            }),
            node_selector,
        });
    }
    Ok(out)
}

/// Class configs once per class (collecting the requests that use it), then
/// the claim's configs that apply to a request or to a chosen subrequest;
/// configs that cover every request get an empty (= all) request list.
fn configs(
    claim: &k8s_openapi::api::resource::v1::ResourceClaim,
    requests: &[DeviceRequest],
    chosen: &[&RequestData<'_>],
) -> Vec<DeviceAllocationConfiguration> {
    let mut out: Vec<DeviceAllocationConfiguration> = Vec::new();
    let mut class_ranges: Vec<(&str, usize, usize)> = Vec::new();
    for data in chosen {
        let name = data.full_name();
        if let Some((_, start, end)) = class_ranges.iter().find(|(c, _, _)| *c == data.class.name) {
            for config in &mut out[*start..*end] {
                config
                    .requests
                    .get_or_insert_with(Vec::new)
                    .push(name.clone());
            }
            continue;
        }
        let start = out.len();
        let class_configs = data
            .class
            .class
            .spec
            .as_ref()
            .and_then(|s| s.config.as_deref())
            .unwrap_or_default();
        for config in class_configs {
            out.push(DeviceAllocationConfiguration {
                opaque: config.opaque.clone(),
                requests: Some(vec![name.clone()]),
                source: "FromClass".into(),
            });
        }
        class_ranges.push((&data.class.name, start, out.len()));
    }
    let claim_configs = claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.config.as_deref())
        .unwrap_or_default();
    for config in claim_configs {
        let named = config.requests.as_deref().unwrap_or_default();
        let entry = DeviceAllocationConfiguration {
            opaque: config.opaque.clone(),
            requests: (!named.is_empty()).then(|| named.to_vec()),
            source: "FromClaim".into(),
        };
        if named.is_empty() {
            out.push(entry);
            continue;
        }
        let applies = requests.iter().zip(chosen).any(|(request, data)| {
            named.contains(&request.name)
                || (data.parent.is_some() && named.contains(&data.full_name()))
        });
        if applies {
            out.push(entry);
        }
    }
    for config in &mut out {
        let Some(named) = config.requests.as_ref() else {
            continue;
        };
        if named.is_empty() {
            continue;
        }
        let covers_all = requests.iter().zip(chosen).all(|(request, data)| {
            named.contains(&request.name)
                || (data.parent.is_some() && named.contains(&data.full_name()))
        });
        if covers_all {
            config.requests = None;
        }
    }
    out
}

/// Upstream `createNodeSelector`; the error is the number of terms of a slice selector it
/// cannot merge (more than one).
fn node_selector(
    search: &Search<'_, '_>,
    claim_idx: usize,
    node_name: &str,
) -> Result<Option<NodeSelector>, usize> {
    let mut fields: Vec<NodeSelectorRequirement> = Vec::new();
    let mut expressions: Vec<NodeSelectorRequirement> = Vec::new();
    for c in &search.results[claim_idx] {
        let pool = &search.chk.pools[c.dev.pool];
        let slice = &pool.slices[c.dev.slice];
        let device = &slice.devices[c.dev.device];
        let (name, selector) = if slice.per_device() {
            (device.node_name.as_ref(), device.node_selector.as_ref())
        } else {
            (slice.node_name.as_ref(), slice.node_selector.as_ref())
        };
        if name.is_some() || device.binds_to_node {
            return Ok(Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: None,
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node_name.to_string()]),
                    }]),
                }],
            }));
        }
        if let Some(selector) = selector {
            match selector.raw.node_selector_terms.as_slice() {
                [] => {}
                [term] => {
                    merge(
                        &mut fields,
                        term.match_fields.as_deref().unwrap_or_default(),
                    );
                    merge(
                        &mut expressions,
                        term.match_expressions.as_deref().unwrap_or_default(),
                    );
                }
                terms => {
                    return Err(terms.len());
                }
            }
        }
    }
    if fields.is_empty() && expressions.is_empty() {
        return Ok(None);
    }
    Ok(Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: (!expressions.is_empty()).then_some(expressions),
            match_fields: (!fields.is_empty()).then_some(fields),
        }],
    }))
}

fn merge(into: &mut Vec<NodeSelectorRequirement>, from: &[NodeSelectorRequirement]) {
    for requirement in from {
        let values: BTreeSet<&String> = requirement.values.iter().flatten().collect();
        let present = into.iter().any(|existing| {
            existing.key == requirement.key
                && existing.operator == requirement.operator
                && existing.values.iter().flatten().collect::<BTreeSet<_>>() == values
        });
        if !present {
            into.push(requirement.clone());
        }
    }
}

#[cfg(test)]
mod result_error_tests {
    use super::ResultError;

    /// Upstream's words: `createNodeSelector`'s error wrapped by the allocator with the
    /// claim's name (`create NodeSelector for claim %s: %w`).
    #[test]
    fn a_slice_selector_with_two_terms_is_named_as_upstream_does() {
        let err = ResultError {
            claim: "gpu-claim".into(),
            terms: 2,
        };
        assert_eq!(
            err.to_string(),
            "create NodeSelector for claim gpu-claim: unsupported ResourceSlice.NodeSelector with 2 terms"
        );
    }
}
