//! Per-request validation and sizing before the search (upstream
//! `validateDeviceRequest` and the claim loop in `Allocate`): gate checks,
//! class lookup, selector ids, parsed capacity requests, the device count and,
//! for `allocationMode: All`, the fixed list of devices that must all be
//! allocated.

use k8s_openapi::api::resource::v1::{
    CapacityRequirements, DeviceRequest, DeviceSelector, DeviceSubRequest, DeviceToleration,
    ExactDeviceRequest, ResourceClaim,
};

use super::capacity;
use super::cel_cache::EvalError;
use super::model::{Checker, ClassEntry, DevRef, Mode, RequestData, Slot};
use super::pools::Pool;
use super::quantity::Value;
use super::request_error::{RequestAt, RequestError};
use super::select_error::{SelectError, SelectorOwner};
use super::state::FixedMap;
use super::{Variant, claim_ref};
use crate::selectors::node_matches;

/// The fields a request and a subrequest share.
struct Fields<'c> {
    name: &'c str,
    class_name: &'c str,
    selectors: &'c [DeviceSelector],
    mode: Option<&'c str>,
    count: Option<i64>,
    admin_access: Option<bool>,
    tolerations: &'c [DeviceToleration],
    capacity: Option<&'c CapacityRequirements>,
}

impl<'c> Fields<'c> {
    fn exact(name: &'c str, r: &'c ExactDeviceRequest) -> Self {
        Fields {
            name,
            class_name: &r.device_class_name,
            selectors: r.selectors.as_deref().unwrap_or_default(),
            mode: r.allocation_mode.as_deref(),
            count: r.count,
            admin_access: r.admin_access,
            tolerations: r.tolerations.as_deref().unwrap_or_default(),
            capacity: r.capacity.as_ref(),
        }
    }

    fn sub(r: &'c DeviceSubRequest) -> Self {
        Fields {
            name: &r.name,
            class_name: &r.device_class_name,
            selectors: r.selectors.as_deref().unwrap_or_default(),
            mode: r.allocation_mode.as_deref(),
            count: r.count,
            admin_access: None,
            tolerations: r.tolerations.as_deref().unwrap_or_default(),
            capacity: r.capacity.as_ref(),
        }
    }
}

/// Validates all requests of one claim; returns its slots and the minimum
/// number of devices it needs.
///
/// # Errors
/// The fatal error upstream would return.
pub(crate) fn validate_claim<'c>(
    chk: &mut Checker<'_>,
    classes: &'c FixedMap<String, ClassEntry>,
    claim: &'c ResourceClaim,
) -> Result<(Vec<Slot<'c>>, i64), Box<RequestError>> {
    let requests: &'c [DeviceRequest] = claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_deref())
        .unwrap_or_default();
    let mut slots = Vec::with_capacity(requests.len());
    let mut min_devices: i64 = 0;
    for request in requests {
        let subs = request.first_available.as_deref().unwrap_or_default();
        if !chk.f.prioritized_list && !subs.is_empty() {
            return Err(Box::new(RequestError::SubrequestsDisabled {
                at: RequestAt {
                    claim: claim_ref(claim),
                    request: request.name.clone(),
                },
            }));
        }
        // The stable allocator knows no capacity requests and ignores them;
        // incubating and experimental refuse them with the feature off.
        if !chk.f.consumable_capacity && chk.f.variant() != Variant::Stable {
            if request
                .exactly
                .as_ref()
                .is_some_and(|e| e.capacity.is_some())
            {
                return Err(Box::new(RequestError::CapacityDisabled {
                    claim: claim_ref(claim),
                    kind: "request",
                    name: request.name.clone(),
                }));
            }
            if let Some(sub) = subs.iter().find(|s| s.capacity.is_some()) {
                return Err(Box::new(RequestError::CapacityDisabled {
                    claim: claim_ref(claim),
                    kind: "subrequest",
                    name: sub.name.clone(),
                }));
            }
        }
        if subs.is_empty() {
            let Some(exact) = request.exactly.as_ref() else {
                return Err(Box::new(RequestError::MissingClassName {
                    at: RequestAt {
                        claim: claim_ref(claim),
                        request: request.name.clone(),
                    },
                }));
            };
            let data = validate(
                chk,
                classes,
                claim,
                Fields::exact(&request.name, exact),
                None,
            )?;
            min_devices += data.num_devices;
            slots.push(Slot::Exact(data));
        } else {
            let mut datas = Vec::with_capacity(subs.len());
            let mut min = i64::MAX;
            for sub in subs {
                let data = validate(chk, classes, claim, Fields::sub(sub), Some(&request.name))?;
                min = min.min(data.num_devices);
                datas.push(data);
            }
            min_devices += min;
            slots.push(Slot::FirstAvailable(datas));
        }
    }
    Ok((slots, min_devices))
}

fn validate<'c>(
    chk: &mut Checker<'_>,
    classes: &'c FixedMap<String, ClassEntry>,
    claim: &'c ResourceClaim,
    fields: Fields<'c>,
    parent: Option<&'c str>,
) -> Result<RequestData<'c>, Box<RequestError>> {
    let at = || RequestAt {
        claim: claim_ref(claim),
        request: fields.name.to_owned(),
    };
    let mut selectors = Vec::with_capacity(fields.selectors.len());
    for (i, selector) in fields.selectors.iter().enumerate() {
        let Some(cel) = &selector.cel else {
            return Err(Box::new(RequestError::EmptySelector { at: at(), index: i }));
        };
        selectors.push(chk.table.id(&cel.expression));
    }
    if !chk.f.admin_access && fields.admin_access.is_some() {
        return Err(Box::new(RequestError::AdminAccessDisabled { at: at() }));
    }
    if fields.class_name.is_empty() {
        return Err(Box::new(RequestError::MissingClassName { at: at() }));
    }
    let Some(class) = classes.get(fields.class_name) else {
        return Err(Box::new(RequestError::ClassNotFound {
            at: at(),
            class: fields.class_name.to_owned(),
        }));
    };
    let stable = chk.f.variant() == Variant::Stable;
    let capacity = match fields.capacity.and_then(|c| c.requests.as_ref()) {
        _ if stable => None,
        None => None,
        Some(requests) => {
            let mut parsed = Vec::with_capacity(requests.len());
            for (name, quantity) in requests {
                let value = Value::from_quantity(quantity).map_err(|source| {
                    RequestError::CapacityQuantity {
                        at: at(),
                        name: name.clone(),
                        source,
                    }
                })?;
                parsed.push((name.clone(), value));
            }
            Some(parsed)
        }
    };
    // The API server defaults both; objects that skipped it get the same.
    let mode = fields.mode.unwrap_or("ExactCount");
    let mut data = RequestData {
        name: fields.name,
        parent,
        class,
        class_name: fields.class_name,
        selectors,
        mode: Mode::ExactCount,
        num_devices: 0,
        all_devices: Vec::new(),
        admin: fields.admin_access == Some(true),
        tolerations: fields.tolerations,
        capacity,
    };
    match mode {
        "ExactCount" => {
            data.num_devices = fields.count.unwrap_or(1);
        }
        "All" => {
            data.mode = Mode::All;
            for pool in chk.pools {
                if pool.incomplete {
                    return Err(Box::new(RequestError::AllPoolIncomplete {
                        at: at(),
                        pool: pool.id(),
                    }));
                }
                if pool.invalid.is_some() {
                    return Err(Box::new(RequestError::AllPoolInvalid {
                        at: at(),
                        pool: pool.id(),
                    }));
                }
            }
            let mut all = Vec::new();
            for (pool_idx, pool) in chk.pools.iter().enumerate() {
                for (slice_idx, slice) in pool.slices.iter().enumerate() {
                    for (device_idx, device) in slice.devices.iter().enumerate() {
                        let dev = DevRef {
                            pool: pool_idx,
                            slice: slice_idx,
                            device: device_idx,
                            flat: pool.offsets[slice_idx] + device_idx,
                        };
                        if !selectable(chk, claim, &data, dev)
                            .map_err(|e| Box::new(RequestError::from(e)))?
                        {
                            continue;
                        }
                        // Static capacity only (kubernetes#140769): a matching
                        // device whose capacity is used up stays in the list, so
                        // the request fails instead of shrinking.
                        if chk.f.consumable_capacity {
                            let fits = capacity::fits(
                                data.capacity.as_deref(),
                                device,
                                None,
                                None,
                                chk.f.fractional_capacity_range,
                            )
                            .map_err(|source| {
                                RequestError::CapacityCheck {
                                    at: at(),
                                    device: device.name.clone(),
                                    source,
                                }
                            })?;
                            if fits != Some(true) {
                                continue;
                            }
                        }
                        all.push(dev);
                    }
                }
            }
            data.num_devices = i64::try_from(all.len()).unwrap_or(i64::MAX);
            data.all_devices = all;
        }
        other => {
            return Err(Box::new(RequestError::UnsupportedMode {
                at: at(),
                mode: other.to_owned(),
            }));
        }
    }
    Ok(data)
}

/// The node feature a kubelet declares when it can skip node operations.
pub(crate) const OPTIONAL_NODE_OPERATIONS: &str = "DRAOptionalNodeOperations";

pub(crate) fn node_declares(node: &k8s_openapi::api::core::v1::Node, feature: &str) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.declared_features.as_ref())
        .is_some_and(|f| f.iter().any(|d| d == feature))
}

/// Upstream `isSelectable`: binding conditions need their feature, then the
/// class's selectors and the request's, then per-device node selection.
///
/// # Errors
/// CEL compile and runtime errors, and unparsable per-device node selectors.
pub(crate) fn selectable(
    chk: &mut Checker<'_>,
    claim: &ResourceClaim,
    data: &RequestData<'_>,
    dev: DevRef,
) -> Result<bool, SelectError> {
    let pools: &[Pool] = chk.pools;
    let pool = &pools[dev.pool];
    let slice = &pool.slices[dev.slice];
    let device = &slice.devices[dev.device];
    if !chk.f.binding_and_status && device.has_binding_conditions {
        return Ok(false);
    }
    let id = || format!("{}/{}/{}", pool.driver, pool.name, device.name);
    for (index, selector) in data.class.selectors.iter().enumerate() {
        let class = || SelectorOwner::Class(data.class.name.to_string());
        let Some(selector) = selector else {
            return Err(SelectError::EmptyClassSelector {
                class: data.class.name.to_string(),
                index,
            });
        };
        match chk
            .caches
            .evaluate(chk.table, chk.gates, &slice.driver, device, *selector)
        {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(EvalError::Compile(message)) => {
                return Err(SelectError::Compile {
                    owner: class(),
                    index,
                    message,
                });
            }
            Err(EvalError::Runtime(message)) => {
                return Err(SelectError::Runtime {
                    owner: class(),
                    index,
                    device: id(),
                    message,
                });
            }
        }
    }
    for (index, selector) in data.selectors.iter().enumerate() {
        match chk
            .caches
            .evaluate(chk.table, chk.gates, &slice.driver, device, *selector)
        {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(EvalError::Compile(message)) => {
                return Err(SelectError::Compile {
                    owner: SelectorOwner::Claim(claim_ref(claim)),
                    index,
                    message,
                });
            }
            Err(EvalError::Runtime(message)) => {
                return Err(SelectError::Runtime {
                    owner: SelectorOwner::Claim(claim_ref(claim)),
                    index,
                    device: id(),
                    message,
                });
            }
        }
    }
    // Skipping node operations is only safe on a node whose kubelet
    // declares that it supports it.
    if chk.f.optional_node_operations
        && !slice.skip_node_operations.is_empty()
        && !node_declares(chk.node, OPTIONAL_NODE_OPERATIONS)
    {
        return Ok(false);
    }
    if slice.per_device() {
        return Ok(node_matches(
            chk.node,
            device.node_name.as_deref(),
            device.all_nodes,
            device.node_selector.as_ref().map(|s| &s.parsed),
        )?);
    }
    Ok(true)
}
