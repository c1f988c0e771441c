//! Spec and status of the `NodeGroup` custom resource.
//!
//! Field names follow the issue that defines the resource (camelCase on the wire). The template
//! carries Kubernetes' own types (`Taint`, `Quantity`, `ResourceSliceSpec`) so that what the
//! planner simulates is byte for byte what the provider later publishes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::api::resource::v1::ResourceSliceSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scale_down::{ScaleDownPolicy, UnneededNode};

/// Label every Node started for a node group carries; its value is the node group's name.
pub const NODE_GROUP_LABEL: &str = "dra-autoscaler.io/node-group";

/// The one `apiVersion` the NodeGroup CRD serves (the derive below must agree;
/// a test pins it).
pub const NODE_GROUP_API_VERSION: &str = "dra-autoscaler.io/v1alpha1";

/// A pool of identical machines the autoscaler may grow and shrink.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "dra-autoscaler.io",
    version = "v1alpha1",
    kind = "NodeGroup",
    plural = "nodegroups",
    shortname = "ng",
    status = "NodeGroupStatus",
    doc = "A pool of identical machines (template Node plus its DRA ResourceSlices) that dra-autoscaler may scale.",
    printcolumn = r#"{"name": "Capacity", "type": "string", "jsonPath": ".spec.capacityType"}"#,
    printcolumn = r#"{"name": "Min", "type": "integer", "jsonPath": ".spec.minSize"}"#,
    printcolumn = r#"{"name": "Max", "type": "integer", "jsonPath": ".spec.maxSize"}"#,
    printcolumn = r#"{"name": "Current", "type": "integer", "jsonPath": ".status.currentSize"}"#,
    printcolumn = r#"{"name": "Target", "type": "integer", "jsonPath": ".status.targetSize"}"#,
    printcolumn = r#"{"name": "Upcoming", "type": "integer", "jsonPath": ".status.upcomingSize"}"#,
    printcolumn = r#"{"name": "Reserved Left", "type": "integer", "jsonPath": ".status.reservedLeft"}"#,
    // `string`, not `date`: kubectl prints a `date` column as the age of the time, and a
    // backoff's end lies ahead, which it prints as `<invalid>`.
    printcolumn = r#"{"name": "Backoff Until", "type": "string", "jsonPath": ".status.backoffUntil"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupSpec {
    /// Name of the cloud provider that owns the machines (`fake`, `aws`, `gce`, ...).
    pub provider: String,
    /// The provider's own id of the group (ASG name, MIG URL, fake group id).
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// Fewest machines the group may shrink to.
    #[schemars(range(min = 0))]
    pub min_size: i32,
    /// Most machines the group may grow to.
    #[schemars(range(min = 0))]
    pub max_size: i32,
    /// How the machines are bought; decides whether `reservation` must be set.
    pub capacity_type: CapacityType,
    /// The reservation backing the group; present exactly when `capacityType` is `reserved`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
    /// Price of one machine per hour, in the currency the operator uses everywhere.
    #[schemars(range(min = 0))]
    pub price_per_hour: f64,
    /// Higher wins when the expander has to choose between equally good groups.
    #[serde(default)]
    pub priority: i32,
    /// The topology domain (for example a rack or a placement group) all machines share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_domain: Option<TopologyDomain>,
    /// What a freshly started machine of this group looks like.
    pub template: NodeTemplate,
    /// How the group shrinks; unset fields take the controller's `--scale-down-*` defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<ScaleDownPolicy>,
}

/// How the machines of a group are bought.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    /// Capacity held by a reservation (ODCR, capacity block, GCE reservation).
    Reserved,
    /// Ordinary on-demand capacity.
    OnDemand,
    /// Interruptible spot/preemptible capacity.
    Spot,
}

impl CapacityType {
    /// The value as written in YAML (`reserved`, `on-demand`, `spot`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "reserved",
            Self::OnDemand => "on-demand",
            Self::Spot => "spot",
        }
    }
}

impl std::fmt::Display for CapacityType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A capacity reservation that backs a `reserved` group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// The provider's reservation id (`cr-…`, a GCE reservation name, ...).
    pub id: String,
    /// How many machines the reservation holds in total.
    #[schemars(range(min = 0))]
    pub total: i32,
    /// When the reservation ends (RFC 3339); absent for reservations without an end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
}

/// A topology label every machine of the group carries, e.g. one placement group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct TopologyDomain {
    /// Label key, e.g. `topology.kubernetes.io/zone`.
    pub key: String,
    /// Label value shared by all machines of the group.
    pub value: String,
}

/// What a freshly started machine of the group looks like.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTemplate {
    /// Labels of the Node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints of the Node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// `status.capacity` of the Node.
    #[serde(default)]
    #[schemars(schema_with = "quantities")]
    pub capacity: BTreeMap<String, Quantity>,
    /// `status.allocatable` of the Node; when absent it equals `capacity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_quantities")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    /// ResourceSlices the node's DRA drivers publish. `nodeName` and `pool.name` are replaced by
    /// the (simulated or real) node's name, as a kubelet plugin does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_slices: Vec<ResourceSliceSpec>,
}

/// The pattern of a `resource.Quantity` string, as Kubernetes' CRD generator (controller-tools)
/// writes it for every Quantity field: a sign, digits with an optional fraction, and an optional
/// binary or decimal suffix or exponent. The API server then refuses `"lots"` at once, as the
/// controller's validation ([`NodeGroupSpec::validate`]) would one loop later.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A map of resource names to quantities, each an int or a string matching
/// [`QUANTITY_PATTERN`] (`x-kubernetes-int-or-string`, as k8s-openapi describes a Quantity; the
/// pattern applies to strings only).
fn quantities(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<BTreeMap<String, Quantity>>();
    if let Some(values) = schema.get_mut("additionalProperties")
        && let Some(values) = values.as_object_mut()
    {
        values.insert("pattern".into(), QUANTITY_PATTERN.into());
    }
    schema
}

/// [`quantities`], for a map that may be absent.
fn optional_quantities(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = quantities(generator);
    schema.insert("nullable".into(), true.into());
    schema
}

/// Conditions as a list keyed by `type` (`x-kubernetes-list-type: map`), as upstream declares
/// every `conditions` field: server-side apply then merges and owns them one by one, and the
/// API server refuses two conditions of one type.
fn conditions_map_list(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

impl NodeTemplate {
    /// `allocatable`, or `capacity` when `allocatable` is not given (the documented default).
    #[must_use]
    pub fn effective_allocatable(&self) -> &BTreeMap<String, Quantity> {
        self.allocatable.as_ref().unwrap_or(&self.capacity)
    }

    /// The template's slices as a driver publishes them for `node_name`: `nodeName` and
    /// `pool.name` set to the node, everything else copied verbatim.
    #[must_use]
    pub fn slices_for_node(&self, node_name: &str) -> Vec<ResourceSliceSpec> {
        self.resource_slices
            .iter()
            .map(|slice| {
                let mut slice = slice.clone();
                slice.node_name = Some(node_name.to_owned());
                slice.pool.name = node_name.to_owned();
                slice
            })
            .collect()
    }
}

/// What the controller last observed and did for a group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupStatus {
    /// Machines that exist and are registered as Nodes.
    #[serde(default)]
    pub current_size: i32,
    /// The size the provider is asked to reach.
    #[serde(default)]
    pub target_size: i32,
    /// Machines requested but not yet registered.
    #[serde(default)]
    pub upcoming_size: i32,
    /// Free slots left in the reservation (reserved groups only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_left: Option<i32>,
    /// No scale-up is tried before this time after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_until: Option<Time>,
    /// When the last backoff window began: with `backoffUntil` it gives the window's
    /// length, which the next failure soon after doubles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_started: Option<Time>,
    /// The most recent scale-up attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_up: Option<LastScaleUp>,
    /// Machines requested and not yet registered, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upcoming_nodes: Vec<UpcomingNode>,
    /// Nodes found unneeded (underused, every pod able to move), with the time each was first
    /// found so; a node is removed once it has been unneeded for the group's unneeded time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unneeded_nodes: Vec<UnneededNode>,
    /// All-or-nothing requests whose outcome the provider has not confirmed yet:
    /// recorded before the provider is called and removed once it answers. One
    /// still here after a restart or a lost answer is sent again with the same
    /// request id, which the provider answers without starting machines twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfirmed_requests: Vec<UnconfirmedRequest>,
    /// Standard conditions (`Ready`, `Backoff`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_map_list")]
    pub conditions: Vec<Condition>,
}

/// One scale-up attempt and how it ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastScaleUp {
    /// When the attempt was made.
    pub time: Time,
    /// How many machines were asked for.
    pub count: i32,
    /// How it ended.
    pub outcome: ScaleUpOutcome,
    /// Human-readable detail (the provider's error message on failure).
    #[serde(default)]
    pub message: String,
}

/// How a scale-up attempt ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ScaleUpOutcome {
    /// All requested machines were started.
    Succeeded,
    /// The provider had no capacity; nothing was started (or the start was rolled back).
    OutOfCapacity,
    /// A quota or limit stopped the request.
    QuotaExceeded,
    /// Any other failure.
    Failed,
}

/// An all-or-nothing increase sent (or about to be sent) whose answer is not known.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnconfirmedRequest {
    /// The idempotency token; also the prefix of its `upcomingNodes` placeholders.
    pub request_id: String,
    /// Machines asked for.
    pub count: i32,
    /// The fewest machines worth starting together.
    pub min_count: i32,
}

/// A machine that was requested and has not registered yet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpcomingNode {
    /// Name the Node will have.
    pub name: String,
    /// When the machine was requested.
    pub requested_at: Time,
}

#[cfg(test)]
mod api_version_tests {
    #[test]
    fn the_constant_is_the_derived_api_version() {
        assert_eq!(
            <super::NodeGroup as kube::Resource>::api_version(&()),
            super::NODE_GROUP_API_VERSION
        );
    }
}
