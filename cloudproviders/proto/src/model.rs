//! Provider-side domain types: what the [`CloudProvider`](crate::CloudProvider) trait takes and
//! returns and what [`ProviderClient`](crate::ProviderClient) hands to the controller. They are
//! plain Rust values; [`crate::convert`] maps them to and from the wire messages.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;

/// A node group as externalgrpc describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeGroupRef {
    /// The provider's id of the group.
    pub id: String,
    /// Fewest nodes the group may have.
    pub min_size: i32,
    /// Most nodes the group may have.
    pub max_size: i32,
    /// Free-form description for logs.
    pub debug: String,
}

/// A Kubernetes node as externalgrpc identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeRef {
    /// `spec.providerID` of the Node.
    pub provider_id: String,
    /// `metadata.name` of the Node.
    pub name: String,
    /// Labels of the Node.
    pub labels: BTreeMap<String, String>,
    /// Annotations of the Node.
    pub annotations: BTreeMap<String, String>,
}

/// Lifecycle state of one cloud instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceState {
    /// Not known.
    Unspecified,
    /// Running.
    Running,
    /// Being created.
    Creating,
    /// Being deleted.
    Deleting,
}

/// Why an instance (or a scale-up) failed; the classes the planner acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The cloud had no capacity for the machine type (ICE, stockout, reservation full).
    OutOfCapacity,
    /// An account quota or limit was hit.
    Quota,
    /// Anything else.
    Other,
}

impl ErrorClass {
    /// cluster-autoscaler's `InstanceErrorClass` for this class: 1 (out of resources) for
    /// capacity and quota, as CA's own GCE provider maps quota errors, and 99 (other).
    #[must_use]
    pub fn ca_class(self) -> i32 {
        match self {
            Self::OutOfCapacity | Self::Quota => 1,
            Self::Other => 99,
        }
    }
}

/// An instance error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceError {
    /// Class the planner acts on.
    pub class: ErrorClass,
    /// Provider-specific code, e.g. `InsufficientInstanceCapacity`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

/// An instance as externalgrpc reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Instance id; equals the Node's `spec.providerID` once it registers.
    pub id: String,
    /// Lifecycle state.
    pub state: InstanceState,
    /// Set when the instance failed.
    pub error: Option<InstanceError>,
}

/// An instance with the extension's extra facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceDetails {
    /// Instance id (the Node's providerID).
    pub id: String,
    /// Name of the Node the instance registers as.
    pub node_name: String,
    /// Lifecycle state.
    pub state: InstanceState,
    /// Set when the instance failed.
    pub error: Option<InstanceError>,
    /// The reservation it landed in, if any.
    pub reservation_id: Option<String>,
    /// When it was requested.
    pub requested_at: Option<SystemTime>,
}

/// An instance as externalgrpc reports it, from what the extension knows of it.
impl From<InstanceDetails> for Instance {
    fn from(details: InstanceDetails) -> Self {
        Self {
            id: details.id,
            state: details.state,
            error: details.error,
        }
    }
}

/// What a new node of a group looks like.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TemplateNode {
    /// The Node as it will register.
    pub node: Node,
    /// The ResourceSlices its DRA drivers will publish (empty over plain externalgrpc).
    pub resource_slices: Vec<ResourceSlice>,
}

/// How the machines of a group are bought.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapacityType {
    /// Held by a reservation.
    Reserved,
    /// Ordinary on-demand.
    OnDemand,
    /// Interruptible.
    Spot,
}

impl From<dra_api::CapacityType> for CapacityType {
    fn from(capacity_type: dra_api::CapacityType) -> Self {
        match capacity_type {
            dra_api::CapacityType::Reserved => Self::Reserved,
            dra_api::CapacityType::OnDemand => Self::OnDemand,
            dra_api::CapacityType::Spot => Self::Spot,
        }
    }
}

/// The state of the reservation behind a reserved group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationStatus {
    /// Provider reservation id.
    pub id: String,
    /// Machines the reservation holds.
    pub total: i32,
    /// Machines of it in use now.
    pub in_use: i32,
    /// When it ends; `None` for no end.
    pub end_time: Option<SystemTime>,
}

impl ReservationStatus {
    /// Slots still free (never negative).
    #[must_use]
    pub fn left(&self) -> i32 {
        (self.total - self.in_use).max(0)
    }
}

/// Everything the extension knows about a node group.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGroupDetails {
    /// The group's id (same as in externalgrpc).
    pub id: String,
    /// Template Node and ResourceSlices.
    pub template: TemplateNode,
    /// How the capacity is bought.
    pub capacity_type: CapacityType,
    /// Reservation of a reserved group.
    pub reservation: Option<ReservationStatus>,
    /// Price per machine-hour.
    pub price_per_hour: f64,
    /// Topology label (key, value) all machines share.
    pub topology_domain: Option<(String, String)>,
    /// Expander priority; higher wins.
    pub priority: i32,
}

impl NodeGroupDetails {
    /// A group's details as its NodeGroup spec gives them: the one place where the spec's
    /// capacity type, price, topology domain and priority become the extension's fields.
    /// The template and the reservation's live status come from the provider.
    #[must_use]
    pub fn from_spec(
        id: String,
        spec: &dra_api::NodeGroupSpec,
        template: TemplateNode,
        reservation: Option<ReservationStatus>,
    ) -> Self {
        Self {
            id,
            template,
            capacity_type: spec.capacity_type.into(),
            reservation,
            price_per_hour: spec.price_per_hour,
            topology_domain: spec
                .topology_domain
                .as_ref()
                .map(|t| (t.key.clone(), t.value.clone())),
            priority: spec.priority,
        }
    }
}

/// An all-or-nothing scale-up request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtomicIncrease {
    /// Node group id.
    pub id: String,
    /// Instances wanted.
    pub count: i32,
    /// Fewest instances that make the start worthwhile; fewer means none.
    pub min_count: i32,
    /// Idempotency token for retries.
    pub request_id: String,
}

/// cluster-autoscaler's per-group autoscaling options. `None` durations are "use the default".
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AutoscalingOptions {
    /// Utilization below which a node may be scaled down.
    pub scale_down_utilization_threshold: f64,
    /// GPU utilization below which a GPU node may be scaled down.
    pub scale_down_gpu_utilization_threshold: f64,
    /// Scale the group to max or zero at once.
    pub zero_or_max_node_scaling: bool,
    /// Ignore DaemonSet pods when computing utilization.
    pub ignore_daemon_sets_utilization: bool,
    /// How long a node must be unneeded before removal.
    pub scale_down_unneeded: Option<Duration>,
    /// How long an unready node must be unneeded before removal.
    pub scale_down_unready: Option<Duration>,
    /// How long to wait for a node to be provisioned.
    pub max_node_provision: Option<Duration>,
    /// How long to wait for a registered node to become ready.
    pub max_node_startup: Option<Duration>,
    /// Keep a partially failed zero-or-max scale-up instead of cancelling it.
    pub allow_non_atomic_scale_up_to_max: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> dra_api::NodeGroupSpec {
        serde_json::from_value(json).expect("a NodeGroup spec")
    }

    #[test]
    fn details_carry_what_the_spec_says_and_what_the_provider_knows() {
        let spec = spec(serde_json::json!({
            "provider": "aws", "providerID": "p5-block", "minSize": 0, "maxSize": 4,
            "capacityType": "reserved",
            "reservation": {"id": "cr-1", "total": 4},
            "pricePerHour": 31.46, "priority": 7,
            "topologyDomain": {"key": "example.com/placement-group", "value": "pg-1"},
            "template": {"capacity": {"cpu": "192", "memory": "2Ti", "pods": "110"}}
        }));
        let live = ReservationStatus {
            id: "cr-1".into(),
            total: 4,
            in_use: 3,
            end_time: None,
        };
        let details = NodeGroupDetails::from_spec(
            "p5-block".into(),
            &spec,
            TemplateNode::default(),
            Some(live.clone()),
        );
        assert_eq!(details.id, "p5-block");
        assert_eq!(details.capacity_type, CapacityType::Reserved);
        assert_eq!(details.reservation, Some(live));
        assert!((details.price_per_hour - 31.46).abs() < f64::EPSILON);
        assert_eq!(details.priority, 7);
        assert_eq!(
            details.topology_domain,
            Some(("example.com/placement-group".into(), "pg-1".into()))
        );
    }

    #[test]
    fn every_capacity_type_maps_to_its_namesake() {
        for (api, wire) in [
            (dra_api::CapacityType::Reserved, CapacityType::Reserved),
            (dra_api::CapacityType::OnDemand, CapacityType::OnDemand),
            (dra_api::CapacityType::Spot, CapacityType::Spot),
        ] {
            assert_eq!(CapacityType::from(api), wire);
        }
    }
}
