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
