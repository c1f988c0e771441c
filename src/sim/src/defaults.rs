//! The API server's defaulting (and the few validations the allocator relies
//! on), applied to objects read from files.
//!
//! Objects from `kubectl get -o yaml` are already defaulted; hand-written ones
//! are not, and upstream's allocator fails on an empty `allocationMode`, so we
//! default exactly as the API server would before anything looks at them.

use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec};
use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceClass, DeviceTaintRule, DeviceToleration, ResourceClaim,
    ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `allocationMode` value for a fixed number of devices.
pub const EXACT_COUNT: &str = "ExactCount";
/// `allocationMode` value for every matching device.
pub const ALL: &str = "All";

/// A field that is missing or invalid, by JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field, `spec.devices.requests[0]`.
    pub field: String,
    /// What was wrong.
    pub message: String,
}

fn require_name(meta: &ObjectMeta) -> Result<(), FieldError> {
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => Ok(()),
        _ => Err(FieldError {
            field: "metadata.name".into(),
            message: "required".into(),
        }),
    }
}

fn default_namespace(meta: &mut ObjectMeta) {
    if meta.namespace.as_deref().is_none_or(str::is_empty) {
        meta.namespace = Some("default".into());
    }
}

/// Node: only a name is required.
///
/// # Errors
/// Missing name.
pub fn node(node: &mut Node) -> Result<(), FieldError> {
    require_name(&node.metadata)
}

/// Namespace: only a name is required.
///
/// # Errors
/// Missing name.
pub fn namespace(namespace: &mut Namespace) -> Result<(), FieldError> {
    require_name(&namespace.metadata)
}

/// Pod: namespace `default`; container requests default to limits, as the API
/// server does for resources that have a limit but no request.
///
/// # Errors
/// Missing name.
pub fn pod(pod: &mut Pod) -> Result<(), FieldError> {
    require_name(&pod.metadata)?;
    default_namespace(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        for container in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            default_requests_from_limits(container);
        }
        validate_containers(spec)?;
    }
    Ok(())
}

/// The API server's checks on the container fields the filters read:
/// quantities are not negative, and every claim a container names is one of
/// the pod's `spec.resourceClaims`.
fn validate_containers(spec: &PodSpec) -> Result<(), FieldError> {
    let pod_claims: Vec<&str> = spec
        .resource_claims
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    let none = Vec::new();
    let lists = [
        ("containers", &spec.containers),
        (
            "initContainers",
            spec.init_containers.as_ref().unwrap_or(&none),
        ),
    ];
    for (list, containers) in lists {
        for (i, container) in containers.iter().enumerate() {
            let Some(resources) = container.resources.as_ref() else {
                continue;
            };
            let here = format!("spec.{list}[{i}].resources");
            for (kind, amounts) in [
                ("requests", &resources.requests),
                ("limits", &resources.limits),
            ] {
                for (name, quantity) in amounts.iter().flatten() {
                    if crate::quantity::nano_value(&quantity.0).is_ok_and(|v| v < 0) {
                        return Err(FieldError {
                            field: format!("{here}.{kind}[{name}]"),
                            message: format!(
                                "Invalid value: {:?}: must be greater than or equal to 0",
                                quantity.0
                            ),
                        });
                    }
                }
            }
            for (j, claim) in resources.claims.iter().flatten().enumerate() {
                if !pod_claims.contains(&claim.name.as_str()) {
                    let detail = if pod_claims.is_empty() {
                        "must be one of the names in pod.spec.resourceClaims which is empty"
                            .to_string()
                    } else {
                        format!(
                            "must be one of the names in pod.spec.resourceClaims: {}",
                            pod_claims.join(", ")
                        )
                    };
                    return Err(FieldError {
                        field: format!("{here}.claims[{j}]"),
                        message: format!("Not found: {:?}: {detail}", claim.name),
                    });
                }
            }
        }
    }
    Ok(())
}

fn default_requests_from_limits(container: &mut Container) {
    let Some(resources) = container.resources.as_mut() else {
        return;
    };
    let Some(limits) = resources.limits.as_ref() else {
        return;
    };
    let requests = resources.requests.get_or_insert_with(Default::default);
    for (name, quantity) in limits {
        requests
            .entry(name.clone())
            .or_insert_with(|| quantity.clone());
    }
}

/// DeviceClass: only a name is required.
///
/// # Errors
/// Missing name.
pub fn device_class(class: &mut DeviceClass) -> Result<(), FieldError> {
    require_name(&class.metadata)
}

/// ResourceSlice: only a name is required; an invalid node selection is left
/// for the allocator, which ignores such slices as upstream does.
///
/// # Errors
/// Missing name.
pub fn resource_slice(slice: &mut ResourceSlice) -> Result<(), FieldError> {
    require_name(&slice.metadata)?;
    for (i, device) in slice.spec.devices.iter().flatten().enumerate() {
        for (name, capacity) in device.capacity.iter().flatten() {
            if crate::quantity::nano_value(&capacity.value.0).is_ok_and(|v| v < 0) {
                return Err(FieldError {
                    field: format!("spec.devices[{i}].capacity[{name}].value"),
                    message: format!(
                        "Invalid value: {:?}: must be greater than or equal to 0",
                        capacity.value.0
                    ),
                });
            }
        }
    }
    Ok(())
}

/// DeviceTaintRule: only a name is required.
///
/// # Errors
/// Missing name.
pub fn device_taint_rule(rule: &mut DeviceTaintRule) -> Result<(), FieldError> {
    require_name(&rule.metadata)
}

/// ResourceClaim: namespace `default` and the device-request defaults.
///
/// # Errors
/// Missing name, or a request that sets neither or both of `exactly` and
/// `firstAvailable`.
pub fn resource_claim(claim: &mut ResourceClaim) -> Result<(), FieldError> {
    require_name(&claim.metadata)?;
    default_namespace(&mut claim.metadata);
    if let Some(devices) = claim.spec.as_mut().and_then(|s| s.devices.as_mut()) {
        device_claim(devices, "spec.devices")?;
    }
    Ok(())
}

/// ResourceClaimTemplate: namespace `default` and the device-request defaults
/// of the claim spec it carries.
///
/// # Errors
/// As [`resource_claim`], with paths under `spec.spec`.
pub fn resource_claim_template(template: &mut ResourceClaimTemplate) -> Result<(), FieldError> {
    require_name(&template.metadata)?;
    default_namespace(&mut template.metadata);
    if let Some(devices) = template
        .spec
        .as_mut()
        .and_then(|s| s.spec.as_mut())
        .and_then(|s| s.devices.as_mut())
    {
        device_claim(devices, "spec.spec.devices")?;
    }
    Ok(())
}

/// Defaults one claim's device requests in place: `allocationMode` empty →
/// `ExactCount`, `count` 0 or unset → 1 for `ExactCount`, toleration `operator`
/// empty → `Equal`.
///
/// # Errors
/// A request with neither or both of `exactly` and `firstAvailable`.
pub fn device_claim(devices: &mut DeviceClaim, path: &str) -> Result<(), FieldError> {
    for (i, request) in devices.requests.iter_mut().flatten().enumerate() {
        let here = format!("{path}.requests[{i}]");
        match (request.exactly.as_mut(), request.first_available.as_mut()) {
            (Some(exact), None) => {
                default_mode_and_count(&mut exact.allocation_mode, &mut exact.count);
                default_tolerations(exact.tolerations.as_mut());
                validate_count(exact.count, &format!("{here}.exactly.count"))?;
            }
            (None, Some(subrequests)) if !subrequests.is_empty() => {
                for (j, sub) in subrequests.iter_mut().enumerate() {
                    default_mode_and_count(&mut sub.allocation_mode, &mut sub.count);
                    default_tolerations(sub.tolerations.as_mut());
                    validate_count(sub.count, &format!("{here}.firstAvailable[{j}].count"))?;
                }
            }
            (Some(_), Some(_)) => {
                return Err(FieldError {
                    field: here,
                    message: "exactly one of exactly or firstAvailable may be set, not both".into(),
                });
            }
            _ => {
                return Err(FieldError {
                    field: here,
                    message: "one of exactly or firstAvailable (non-empty) is required".into(),
                });
            }
        }
    }
    Ok(())
}

/// The API server refuses a count below one (0 was already defaulted to 1).
fn validate_count(count: Option<i64>, field: &str) -> Result<(), FieldError> {
    match count {
        Some(c) if c < 1 => Err(FieldError {
            field: field.to_string(),
            message: format!("Invalid value: {c}: must be greater than zero"),
        }),
        _ => Ok(()),
    }
}

fn default_mode_and_count(mode: &mut Option<String>, count: &mut Option<i64>) {
    if mode.as_deref().is_none_or(str::is_empty) {
        *mode = Some(EXACT_COUNT.into());
    }
    if mode.as_deref() == Some(EXACT_COUNT) && count.is_none_or(|c| c == 0) {
        *count = Some(1);
    }
}

fn default_tolerations(tolerations: Option<&mut Vec<DeviceToleration>>) {
    for toleration in tolerations.into_iter().flatten() {
        if toleration.operator.as_deref().is_none_or(str::is_empty) {
            toleration.operator = Some("Equal".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{DeviceRequest, DeviceSubRequest, ExactDeviceRequest};

    #[test]
    fn request_defaults_match_the_api_server() {
        let mut devices = DeviceClaim {
            requests: Some(vec![
                DeviceRequest {
                    name: "a".into(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: "gpu".into(),
                        tolerations: Some(vec![DeviceToleration {
                            key: Some("k".into()),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                DeviceRequest {
                    name: "b".into(),
                    first_available: Some(vec![DeviceSubRequest {
                        name: "all".into(),
                        device_class_name: "gpu".into(),
                        allocation_mode: Some(ALL.into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        device_claim(&mut devices, "spec.devices").unwrap();
        let requests = devices.requests.unwrap();
        let exact = requests[0].exactly.as_ref().unwrap();
        assert_eq!(exact.allocation_mode.as_deref(), Some(EXACT_COUNT));
        assert_eq!(exact.count, Some(1));
        assert_eq!(
            exact.tolerations.as_ref().unwrap()[0].operator.as_deref(),
            Some("Equal")
        );
        let sub = &requests[1].first_available.as_ref().unwrap()[0];
        assert_eq!(sub.allocation_mode.as_deref(), Some(ALL));
        assert_eq!(sub.count, None, "All mode has no count");
    }

    #[test]
    fn a_request_without_a_body_is_an_error_with_its_path() {
        let mut devices = DeviceClaim {
            requests: Some(vec![DeviceRequest {
                name: "a".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let err = device_claim(&mut devices, "spec.devices").unwrap_err();
        assert_eq!(err.field, "spec.devices.requests[0]");
    }

    #[test]
    fn pod_requests_default_to_limits_and_namespace_to_default() {
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}, "requests": {"memory": "1Gi"}}}]}
        }))
        .unwrap();
        pod(&mut p).unwrap();
        assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
        let requests = p.spec.unwrap().containers[0]
            .resources
            .clone()
            .unwrap()
            .requests
            .unwrap();
        assert_eq!(requests["cpu"].0, "2");
        assert_eq!(requests["memory"].0, "1Gi");
    }
}
