//! Mapping between the domain types of [`crate::model`] and the wire messages of [`crate::pb`].
//!
//! Version skew lives here: readers take the >= 1.35 field first and fall back to the <= 1.34
//! one (`legacy*`); writers fill the legacy fields only when asked to serve old peers.

use std::time::{Duration, SystemTime};

use crate::model::{
    AutoscalingOptions, CapacityType, ErrorClass, Instance, InstanceDetails, InstanceError,
    InstanceState, NodeGroupDetails, NodeGroupRef, NodeRef, ReservationStatus, TemplateNode,
};
use crate::pb::extensions as ext;
use crate::pb::externalgrpc as ca;

/// The extension's error class for an optional domain class.
#[must_use]
pub fn error_class_to_pb(class: Option<ErrorClass>) -> ext::ErrorClass {
    match class {
        None => ext::ErrorClass::None,
        Some(ErrorClass::OutOfCapacity) => ext::ErrorClass::OutOfCapacity,
        Some(ErrorClass::Quota) => ext::ErrorClass::Quota,
        Some(ErrorClass::Other) => ext::ErrorClass::Other,
    }
}

/// The domain class of an extension error class (`None` for "no error").
#[must_use]
pub fn error_class_from_pb(value: i32) -> Option<ErrorClass> {
    match ext::ErrorClass::try_from(value) {
        Ok(ext::ErrorClass::OutOfCapacity) => Some(ErrorClass::OutOfCapacity),
        Ok(ext::ErrorClass::Quota) => Some(ErrorClass::Quota),
        Ok(ext::ErrorClass::None) => None,
        Ok(ext::ErrorClass::Other) | Err(_) => Some(ErrorClass::Other),
    }
}

/// `SystemTime` as a protobuf Timestamp.
#[must_use]
pub fn timestamp(time: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(time)
}

/// A protobuf Timestamp as `SystemTime` (`None` when out of range).
#[must_use]
pub fn system_time(ts: &prost_types::Timestamp) -> Option<SystemTime> {
    SystemTime::try_from(*ts).ok()
}

/// Reads the >= 1.35 timestamp, else the <= 1.34 `meta.v1.Time` (same layout).
#[must_use]
pub fn either_time(
    new: Option<&prost_types::Timestamp>,
    legacy: Option<&ca::LegacyTime>,
) -> Option<SystemTime> {
    new.and_then(system_time).or_else(|| {
        legacy.and_then(|t| {
            system_time(&prost_types::Timestamp {
                seconds: t.seconds,
                nanos: t.nanos,
            })
        })
    })
}

/// The <= 1.34 `meta.v1.Time` for a time.
#[must_use]
pub fn legacy_time(time: SystemTime) -> ca::LegacyTime {
    let ts = timestamp(time);
    ca::LegacyTime {
        seconds: ts.seconds,
        nanos: ts.nanos,
    }
}

impl From<&NodeGroupRef> for ca::NodeGroup {
    fn from(group: &NodeGroupRef) -> Self {
        Self {
            id: group.id.clone(),
            min_size: group.min_size,
            max_size: group.max_size,
            debug: group.debug.clone(),
        }
    }
}

impl From<ca::NodeGroup> for NodeGroupRef {
    fn from(group: ca::NodeGroup) -> Self {
        Self {
            id: group.id,
            min_size: group.min_size,
            max_size: group.max_size,
            debug: group.debug,
        }
    }
}

impl From<&NodeRef> for ca::ExternalGrpcNode {
    fn from(node: &NodeRef) -> Self {
        Self {
            provider_id: node.provider_id.clone(),
            name: node.name.clone(),
            labels: node.labels.clone(),
            annotations: node.annotations.clone(),
        }
    }
}

impl From<ca::ExternalGrpcNode> for NodeRef {
    fn from(node: ca::ExternalGrpcNode) -> Self {
        Self {
            provider_id: node.provider_id,
            name: node.name,
            labels: node.labels,
            annotations: node.annotations,
        }
    }
}

fn state_to_ca(state: InstanceState) -> ca::instance_status::InstanceState {
    use ca::instance_status::InstanceState as S;
    match state {
        InstanceState::Unspecified => S::Unspecified,
        InstanceState::Running => S::InstanceRunning,
        InstanceState::Creating => S::InstanceCreating,
        InstanceState::Deleting => S::InstanceDeleting,
    }
}

fn state_from_ca(value: i32) -> InstanceState {
    use ca::instance_status::InstanceState as S;
    match S::try_from(value) {
        Ok(S::InstanceRunning) => InstanceState::Running,
        Ok(S::InstanceCreating) => InstanceState::Creating,
        Ok(S::InstanceDeleting) => InstanceState::Deleting,
        Ok(S::Unspecified) | Err(_) => InstanceState::Unspecified,
    }
}

/// Error code the externalgrpc side uses for quota, as CA's GCE provider does.
pub const QUOTA_ERROR_CODE: &str = "QUOTA_EXCEEDED";

impl From<&Instance> for ca::Instance {
    fn from(instance: &Instance) -> Self {
        let error_info = instance.error.as_ref().map(|err| ca::InstanceErrorInfo {
            // CA has no quota class; keep quota recognisable by its code.
            error_code: match err.class {
                ErrorClass::Quota if err.code.is_empty() => QUOTA_ERROR_CODE.to_owned(),
                _ => err.code.clone(),
            },
            error_message: err.message.clone(),
            instance_error_class: err.class.ca_class(),
        });
        Self {
            id: instance.id.clone(),
            status: Some(ca::InstanceStatus {
                instance_state: state_to_ca(instance.state).into(),
                error_info,
            }),
        }
    }
}

impl From<ca::Instance> for Instance {
    fn from(instance: ca::Instance) -> Self {
        let status = instance.status.unwrap_or_default();
        let error = status
            .error_info
            .filter(|e| !e.error_code.is_empty())
            .map(|e| InstanceError {
                class: match e.instance_error_class {
                    1 if e.error_code.contains("QUOTA") => ErrorClass::Quota,
                    1 => ErrorClass::OutOfCapacity,
                    _ => ErrorClass::Other,
                },
                code: e.error_code,
                message: e.error_message,
            });
        Self {
            id: instance.id,
            state: state_from_ca(status.instance_state),
            error,
        }
    }
}

fn duration_to_pb(d: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration {
        seconds: i64::MAX,
        nanos: 0,
    })
}

fn duration_from_pb(
    d: Option<&prost_types::Duration>,
    legacy: Option<&ca::LegacyDuration>,
) -> Option<Duration> {
    d.and_then(|d| Duration::try_from(*d).ok()).or_else(|| {
        legacy
            .and_then(|l| u64::try_from(l.duration).ok())
            .map(Duration::from_nanos)
    })
}

fn legacy_duration(d: Duration) -> ca::LegacyDuration {
    ca::LegacyDuration {
        duration: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
    }
}

/// Options as the wire message; with `legacy` the <= 1.34 duration fields are filled too.
#[must_use]
pub fn options_to_pb(
    options: &AutoscalingOptions,
    legacy: bool,
) -> ca::NodeGroupAutoscalingOptions {
    let legacy_of = |d: Option<Duration>| if legacy { d.map(legacy_duration) } else { None };
    ca::NodeGroupAutoscalingOptions {
        scale_down_utilization_threshold: options.scale_down_utilization_threshold,
        scale_down_gpu_utilization_threshold: options.scale_down_gpu_utilization_threshold,
        legacy_scale_down_unneeded_time: legacy_of(options.scale_down_unneeded),
        legacy_scale_down_unready_time: legacy_of(options.scale_down_unready),
        legacy_max_node_provision_time: legacy_of(options.max_node_provision),
        zero_or_max_node_scaling: options.zero_or_max_node_scaling,
        ignore_daemon_sets_utilization: options.ignore_daemon_sets_utilization,
        scale_down_unneeded_duration: options.scale_down_unneeded.map(duration_to_pb),
        scale_down_unready_duration: options.scale_down_unready.map(duration_to_pb),
        max_node_provision_duration: options.max_node_provision.map(duration_to_pb),
        max_node_startup_duration: options.max_node_startup.map(duration_to_pb),
        allow_non_atomic_scale_up_to_max: options.allow_non_atomic_scale_up_to_max,
    }
}

/// Options from the wire, preferring google Durations (>= 1.35) over meta.v1.Durations.
#[must_use]
pub fn options_from_pb(options: &ca::NodeGroupAutoscalingOptions) -> AutoscalingOptions {
    AutoscalingOptions {
        scale_down_utilization_threshold: options.scale_down_utilization_threshold,
        scale_down_gpu_utilization_threshold: options.scale_down_gpu_utilization_threshold,
        zero_or_max_node_scaling: options.zero_or_max_node_scaling,
        ignore_daemon_sets_utilization: options.ignore_daemon_sets_utilization,
        scale_down_unneeded: duration_from_pb(
            options.scale_down_unneeded_duration.as_ref(),
            options.legacy_scale_down_unneeded_time.as_ref(),
        ),
        scale_down_unready: duration_from_pb(
            options.scale_down_unready_duration.as_ref(),
            options.legacy_scale_down_unready_time.as_ref(),
        ),
        max_node_provision: duration_from_pb(
            options.max_node_provision_duration.as_ref(),
            options.legacy_max_node_provision_time.as_ref(),
        ),
        max_node_startup: duration_from_pb(options.max_node_startup_duration.as_ref(), None),
        allow_non_atomic_scale_up_to_max: options.allow_non_atomic_scale_up_to_max,
    }
}

fn ext_state(state: InstanceState) -> ext::instance_info::State {
    use ext::instance_info::State as S;
    match state {
        InstanceState::Unspecified => S::Unspecified,
        InstanceState::Running => S::Running,
        InstanceState::Creating => S::Creating,
        InstanceState::Deleting => S::Deleting,
    }
}

impl From<&InstanceDetails> for ext::InstanceInfo {
    fn from(details: &InstanceDetails) -> Self {
        let error = details.error.as_ref();
        Self {
            id: details.id.clone(),
            node_name: details.node_name.clone(),
            state: ext_state(details.state).into(),
            error_class: error_class_to_pb(error.map(|e| e.class)).into(),
            error_code: error.map(|e| e.code.clone()).unwrap_or_default(),
            error_message: error.map(|e| e.message.clone()).unwrap_or_default(),
            reservation_id: details.reservation_id.clone().unwrap_or_default(),
            requested_at: details.requested_at.map(timestamp),
        }
    }
}

impl From<ext::InstanceInfo> for InstanceDetails {
    fn from(info: ext::InstanceInfo) -> Self {
        use ext::instance_info::State as S;
        let state = match S::try_from(info.state) {
            Ok(S::Running) => InstanceState::Running,
            Ok(S::Creating) => InstanceState::Creating,
            Ok(S::Deleting) => InstanceState::Deleting,
            Ok(S::Unspecified) | Err(_) => InstanceState::Unspecified,
        };
        let error = error_class_from_pb(info.error_class).map(|class| InstanceError {
            class,
            code: info.error_code,
            message: info.error_message,
        });
        Self {
            id: info.id,
            node_name: info.node_name,
            state,
            error,
            reservation_id: Some(info.reservation_id).filter(|r| !r.is_empty()),
            requested_at: info.requested_at.as_ref().and_then(system_time),
        }
    }
}

/// Failure to turn a [`NodeGroupDetails`] into JSON or back.
#[derive(Debug, thiserror::Error)]
#[error("unable to convert {what} of node group {group:?} to or from JSON")]
pub struct JsonError {
    /// Node group id.
    pub group: String,
    /// `template node` or `resource slice`.
    pub what: &'static str,
    /// The serde error.
    #[source]
    pub source: serde_json::Error,
}

/// Details as the extension message (Kubernetes objects as JSON).
///
/// # Errors
/// [`JsonError`] if an object cannot be serialized.
pub fn details_to_pb(details: &NodeGroupDetails) -> Result<ext::NodeGroupInfo, JsonError> {
    let json_err = |what| {
        let group = details.id.clone();
        move |source| JsonError {
            group,
            what,
            source,
        }
    };
    let template_node_json =
        serde_json::to_vec(&details.template.node).map_err(json_err("template node"))?;
    let resource_slice_json = details
        .template
        .resource_slices
        .iter()
        .map(|slice| serde_json::to_vec(slice).map_err(json_err("resource slice")))
        .collect::<Result<_, _>>()?;
    Ok(ext::NodeGroupInfo {
        id: details.id.clone(),
        template_node_json,
        resource_slice_json,
        capacity_type: match details.capacity_type {
            CapacityType::Reserved => ext::CapacityType::Reserved,
            CapacityType::OnDemand => ext::CapacityType::OnDemand,
            CapacityType::Spot => ext::CapacityType::Spot,
        }
        .into(),
        reservation: details.reservation.as_ref().map(|r| ext::Reservation {
            id: r.id.clone(),
            total: r.total,
            in_use: r.in_use,
            end_time: r.end_time.map(timestamp),
        }),
        price_per_hour: details.price_per_hour,
        topology_domain: details
            .topology_domain
            .as_ref()
            .map(|(key, value)| ext::TopologyDomain {
                key: key.clone(),
                value: value.clone(),
            }),
        priority: details.priority,
    })
}

/// Details from the extension message.
///
/// # Errors
/// [`JsonError`] if an embedded object is not valid Kubernetes JSON.
pub fn details_from_pb(info: ext::NodeGroupInfo) -> Result<NodeGroupDetails, JsonError> {
    let group = info.id.clone();
    let node = serde_json::from_slice(&info.template_node_json).map_err(|source| JsonError {
        group: group.clone(),
        what: "template node",
        source,
    })?;
    let resource_slices = info
        .resource_slice_json
        .iter()
        .map(|bytes| {
            serde_json::from_slice(bytes).map_err(|source| JsonError {
                group: group.clone(),
                what: "resource slice",
                source,
            })
        })
        .collect::<Result<_, _>>()?;
    let capacity_type = match ext::CapacityType::try_from(info.capacity_type) {
        Ok(ext::CapacityType::Reserved) => CapacityType::Reserved,
        Ok(ext::CapacityType::Spot) => CapacityType::Spot,
        // Unspecified is read as the safe default: capacity that is bought, not held.
        _ => CapacityType::OnDemand,
    };
    Ok(NodeGroupDetails {
        id: info.id,
        template: TemplateNode {
            node,
            resource_slices,
        },
        capacity_type,
        reservation: info.reservation.map(|r| ReservationStatus {
            id: r.id,
            total: r.total,
            in_use: r.in_use,
            end_time: r.end_time.as_ref().and_then(system_time),
        }),
        price_per_hour: info.price_per_hour,
        topology_domain: info.topology_domain.map(|t| (t.key, t.value)),
        priority: info.priority,
    })
}
