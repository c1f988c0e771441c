//! Extended resources backed by DRA (KEP-5004, gate `DRAExtendedResource`).
//!
//! A pod may ask for `example.com/gpu: 2` in its container requests. On a
//! node whose allocatable advertises the resource, the device plugin serves
//! it and NodeResourcesFit counts it. On a node that does not (absent or
//! zero), a DeviceClass whose `extendedResourceName` is that name — or any
//! class through the implicit `deviceclass.resource.kubernetes.io/<class>` —
//! serves it through a claim the scheduler makes up for the pod. This module
//! builds that claim the way the DynamicResources plugin does
//! (`filterExtendedResources`, `createRequestsAndMappings`).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::requests::{
    DEVICE_CLASS_PREFIX, exact_units, is_dra_extended, node_allocatable, pod_requests, units,
};
use crate::gates::FeatureGates;

/// Annotation upstream puts on the claim it creates for extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

/// Extended resource name → DeviceClass name, as the scheduler's
/// `ExtendedResourceCache` resolves it: every class serves its implicit name;
/// when several classes claim the same explicit name, the most recently
/// created wins and the lower name breaks a tie.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExtendedResourceMap {
    classes: HashMap<String, String>,
}

impl ExtendedResourceMap {
    pub(crate) fn new(classes: &[DeviceClass]) -> Self {
        let mut explicit: HashMap<String, &DeviceClass> = HashMap::new();
        let mut map = HashMap::new();
        for class in classes {
            let Some(name) = class.metadata.name.as_deref() else {
                continue;
            };
            map.insert(format!("{DEVICE_CLASS_PREFIX}{name}"), name.to_string());
            let Some(resource) = class
                .spec
                .as_ref()
                .and_then(|s| s.extended_resource_name.as_deref())
            else {
                continue;
            };
            let keep_new = match explicit.get(resource) {
                None => true,
                Some(current) => {
                    let new_time = &class.metadata.creation_timestamp;
                    let current_time = &current.metadata.creation_timestamp;
                    new_time > current_time
                        || (new_time == current_time
                            && Some(name) < current.metadata.name.as_deref())
                }
            };
            if keep_new {
                explicit.insert(resource.to_string(), class);
            }
        }
        for (resource, class) in explicit {
            if let Some(name) = class.metadata.name.as_deref() {
                map.insert(resource, name.to_string());
            }
        }
        Self { classes: map }
    }

    /// The class serving a resource name.
    pub(crate) fn class_for(&self, resource: &str) -> Option<&str> {
        self.classes.get(resource).map(String::as_str)
    }
}

/// The claim through which `node` would serve the pod's extended resources,
/// or `None` when nothing needs DRA there: the gate is off, no class maps
/// the pod's extended resources, or the node's device plugins advertise
/// them all. (A resource neither advertised nor mapped makes the pod not fit
/// the node at all; NodeResourcesFit refuses such nodes first.)
///
/// The claim lives in the pod's namespace and is named
/// `<pod>-extended-resources` (upstream generates a random suffix at bind
/// time); it is annotated and owned like upstream's, with one `ExactCount`
/// request per container and resource, named `container-<i>-request-<j>`
/// (`i` indexes init containers then containers, `j` the resource among the
/// container's sorted request names). Non-sidecar init containers reuse the
/// devices of containers that start after them and only the largest of their
/// remaining requests is kept, as in upstream's `createRequestsAndMappings`.
#[must_use]
pub fn extended_resource_claim(
    pod: &Pod,
    node: &Node,
    classes: &[DeviceClass],
    gates: &FeatureGates,
) -> Option<ResourceClaim> {
    if !gates.extended_resource {
        return None;
    }
    let map = ExtendedResourceMap::new(classes);
    let requests = pod_requests(pod, false).ok()?;
    let allocatable = node_allocatable(node);
    let mut via_dra: Vec<(&str, &str)> = Vec::new();
    for (name, nanos) in &requests {
        if !is_dra_extended(name) || units(*nanos) == 0 {
            continue;
        }
        let advertised = allocatable.get(name).map(|n| units(*n));
        match map.class_for(name) {
            Some(class) if advertised.unwrap_or(0) == 0 => via_dra.push((name, class)),
            Some(_) => {}
            // Neither the node nor a class provides it: the pod cannot fit.
            None if advertised.is_none() => return None,
            None => {}
        }
    }
    if via_dra.is_empty() {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    let containers: Vec<&Container> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .collect();
    let init_count = spec.init_containers.as_ref().map_or(0, Vec::len);
    let mut device_requests = Vec::new();
    // `via_dra` is in name order (the request list is a BTreeMap).
    for (resource, class) in via_dra {
        device_requests.extend(requests_for_resource(
            &containers,
            init_count,
            resource,
            class,
        ));
    }
    device_requests.sort_by(|a, b| a.name.cmp(&b.name));
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    Some(ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("{pod_name}-extended-resources")),
            generate_name: Some(format!("{pod_name}-extended-resources-")),
            namespace: Some(
                pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
            ),
            annotations: Some(BTreeMap::from([(
                EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
                "true".to_string(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name,
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(device_requests),
                ..Default::default()
            }),
        }),
        status: None,
    })
}

/// The whole-number request of one container for a resource, if any.
fn container_count(container: &Container, resource: &str) -> Option<i64> {
    let quantity = container
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get(resource)?;
    let nanos = crate::quantity::nano_value(&quantity.0).ok()?;
    exact_units(nanos).filter(|n| *n != 0)
}

/// Index of `resource` among the container's sorted request names.
fn resource_index(container: &Container, resource: &str) -> usize {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|requests| requests.keys().position(|k| k == resource))
        .unwrap_or(0)
}

fn device_request(name: String, class: &str, count: i64) -> DeviceRequest {
    DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(count),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Requests for one resource across the containers.
fn requests_for_resource(
    containers: &[&Container],
    init_count: usize,
    resource: &str,
    class: &str,
) -> Vec<DeviceRequest> {
    let is_short_lived =
        |i: usize| i < init_count && containers[i].restart_policy.as_deref() != Some("Always");
    let name_of = |i: usize| {
        format!(
            "container-{i}-request-{}",
            resource_index(containers[i], resource)
        )
    };
    // Sidecars and regular containers hold their devices for the pod's life.
    let long_lived: Vec<Option<i64>> = (0..containers.len())
        .map(|i| {
            if is_short_lived(i) {
                None
            } else {
                container_count(containers[i], resource)
            }
        })
        .collect();
    // A short-lived init container first reuses the devices of long-lived
    // containers at or after its position, and asks only for the rest.
    let mut largest_short: Option<(usize, i64)> = None;
    for i in (0..containers.len()).filter(|i| is_short_lived(*i)) {
        let Some(wanted) = container_count(containers[i], resource) else {
            continue;
        };
        let mut reused = 0i64;
        for count in long_lived[i..].iter().flatten() {
            reused = reused.saturating_add(*count);
            if reused >= wanted {
                break;
            }
        }
        if reused >= wanted {
            continue;
        }
        let extra = wanted - reused;
        if largest_short.is_none_or(|(_, c)| c < extra) {
            largest_short = Some((i, extra));
        }
    }
    let mut out: Vec<DeviceRequest> = Vec::new();
    if let Some((i, count)) = largest_short {
        out.push(device_request(name_of(i), class, count));
    }
    for (i, count) in long_lived.iter().enumerate() {
        if let Some(count) = count {
            out.push(device_request(name_of(i), class, *count));
        }
    }
    out
}
