//! Reflector stores → [`ClusterObjects`]: the pure step between the watches and
//! the planner.
//!
//! The stores hold `Arc`s that watch events replace one at a time; this module
//! only reads them, never relists, and copies a node or pod only when its entry
//! changed since the last loop ([`View`]). It applies the controller's view of the
//! cluster on top of what the API server says:
//!
//! - pending pods the autoscaler must not act for are dropped (see [`crate::pods`]);
//!   a pod nominated by preemption is placed on its nominated node instead, so it
//!   still takes its room there;
//! - a registered Node of a group that is not Ready yet is replaced by the group's
//!   template under the same name, so a booting GPU node counts as the capacity
//!   it will be (the planner adds template ResourceSlices for nodes whose drivers
//!   have not published yet);
//! - NodeGroups are the ones given by the caller, with the status it reconciled
//!   (upcoming nodes), and gang objects travel untyped for the gang detector,
//!   as do ProvisioningRequests, CapacityBuffers and their templates for the
//!   planner's stand-in pods.

use std::collections::BTreeMap;
use std::sync::Arc;

use dra_api::NodeGroup;
use dra_plan::groups::{Group, template_node};
use dra_sim::objects::{ExtraObject, Origin};
use dra_sim::{ClusterObjects, ObjectRef};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;
use kube::api::DynamicObject;

use crate::membership::Membership;
use crate::pods::{PendingPolicy, Skip};

mod kept;
mod view;

pub use view::{Counts, View};

/// An object watched untyped (of a gang API, or a ProvisioningRequest,
/// CapacityBuffer or an object whose pod template they name), with the type
/// it was watched as.
#[derive(Debug, Clone)]
pub struct GangObject {
    /// `group/version` it was listed under.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// The object.
    pub object: Arc<DynamicObject>,
}

/// What the stores hold at one moment, as shared pointers.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Pods.
    pub pods: Vec<Arc<Pod>>,
    /// Namespaces.
    pub namespaces: Vec<Arc<Namespace>>,
    /// DeviceClasses.
    pub device_classes: Vec<Arc<DeviceClass>>,
    /// ResourceSlices.
    pub resource_slices: Vec<Arc<ResourceSlice>>,
    /// ResourceClaims.
    pub resource_claims: Vec<Arc<ResourceClaim>>,
    /// ResourceClaimTemplates.
    pub resource_claim_templates: Vec<Arc<ResourceClaimTemplate>>,
    /// DeviceTaintRules (empty when the cluster does not serve them).
    pub device_taint_rules: Vec<Arc<DeviceTaintRule>>,
    /// DaemonSets: passed to the planner as extra objects.
    pub daemon_sets: Vec<Arc<DaemonSet>>,
    /// PriorityClasses, to resolve pod priorities.
    pub priority_classes: Vec<Arc<PriorityClass>>,
    /// PodDisruptionBudgets: passed to scale-down as extra objects.
    pub pod_disruption_budgets: Vec<Arc<PodDisruptionBudget>>,
    /// NodeGroups as watched that decode and pass validation.
    pub node_groups: Vec<Arc<NodeGroup>>,
    /// NodeGroups as watched that the loop must leave out, and why.
    pub unusable_node_groups: Vec<crate::validity::Unusable>,
    /// Objects of every gang API the cluster serves.
    pub gang_objects: Vec<GangObject>,
    /// ProvisioningRequests, CapacityBuffers, and the PodTemplates and
    /// scalable objects they name (empty when the cluster serves neither).
    pub stand_in_objects: Vec<GangObject>,
    /// `spec.workloadRef` of pods on 1.35 clusters, by (namespace, name).
    pub pod_workload_refs: BTreeMap<(String, String), serde_json::Value>,
}

/// Settings of the conversion.
#[derive(Debug, Clone, Copy)]
pub struct BuildOptions {
    /// Which pending pods count.
    pub pending: PendingPolicy,
    /// A registered node that has not become Ready for this long no longer
    /// counts as upcoming capacity.
    pub max_node_provision_time: SignedDuration,
}

/// The planner's input and what was left out of it.
#[derive(Debug, Default)]
pub struct Built {
    /// The objects to plan with.
    pub objects: ClusterObjects,
    /// Pending pods left out, by reason.
    pub skipped: BTreeMap<Skip, usize>,
    /// Pending pods planned for.
    pub planned_for: Vec<ObjectRef>,
    /// Registered nodes standing in as their group's template (not Ready yet).
    pub booting_nodes: Vec<String>,
    /// The planner's index of `objects`' nodes and bound pods, made before (see
    /// [`View`]); `None` from [`build`], which keeps nothing.
    pub filters: Option<dra_sim::filters::FilterState>,
}

/// Where objects read from the API server say they came from, for messages.
fn origin(kind: &str, name: &str) -> Origin {
    Origin {
        source: format!("API server {kind} {name}"),
        document: 0,
        item: None,
    }
}

/// Serialises a typed object as an [`ExtraObject`] with its type meta.
pub(crate) fn extra<K>(object: &K) -> Option<ExtraObject>
where
    K: Resource<DynamicType = ()> + serde::Serialize,
{
    let mut value = serde_json::to_value(object).ok()?;
    let api_version = K::api_version(&()).into_owned();
    let kind = K::kind(&()).into_owned();
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), api_version.clone().into());
        map.insert("kind".into(), kind.clone().into());
    }
    let name = object.meta().name.clone().unwrap_or_default();
    Some(ExtraObject {
        origin: origin(&kind, &name),
        api_version,
        kind,
        value,
    })
}

/// Taints that say a node cannot run pods yet, whatever its conditions say: the ones the
/// API server and the node lifecycle controller put on a node that is not ready (a new Node
/// carries `not-ready` from its creation until KCM sees `Ready=True`), as
/// cluster-autoscaler's `GetNodeReadiness` lists them.
const NOT_READY_TAINTS: [&str; 3] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/network-unavailable",
];

/// Taint key prefixes of startup taints: a node that still has one is starting up
/// (cluster-autoscaler's `startup-taint.` and deprecated `ignore-taint.` prefixes).
const STARTUP_TAINT_PREFIXES: [&str; 2] = [
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "ignore-taint.cluster-autoscaler.kubernetes.io/",
];

/// Whether the node can take pods now, as cluster-autoscaler judges it: `Ready=True`, no
/// `DiskPressure` or `NetworkUnavailable`, and none of the not-ready or startup taints. A
/// node that is Ready but still carries the `not-ready` taint the API server adds at
/// creation is not: the scheduler refuses it until the node lifecycle controller lifts the
/// taint, so counting it as it is would make its pods look unplaceable and buy again.
#[must_use]
pub fn is_ready(node: &Node) -> bool {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let ready = conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let pressure = conditions.iter().any(|c| {
        matches!(c.type_.as_str(), "DiskPressure" | "NetworkUnavailable") && c.status == "True"
    });
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|t| {
            NOT_READY_TAINTS.contains(&t.key.as_str())
                || STARTUP_TAINT_PREFIXES.iter().any(|p| t.key.starts_with(p))
        });
    ready && !pressure && !tainted
}

/// Builds the planner's input from the stores' contents, the group of each
/// node ([`Membership`]) and the NodeGroups to plan with (reconciled by the
/// caller; groups in backoff left out). A node of a group carries that group's
/// `dra-autoscaler.io/node-group` label in the planner's copy, whatever the
/// kubelet registered: the planner reads membership from it.
///
/// Every node and pod is copied; the loop keeps a [`View`] instead, which copies only
/// what changed since the last loop.
#[must_use]
pub fn build(
    inputs: &Inputs,
    membership: &Membership,
    node_groups: &[NodeGroup],
    options: &BuildOptions,
) -> Built {
    let mut built = View::default().update(inputs, membership, node_groups, options);
    built.filters = None;
    built
}

/// The template standing for `node` when it is a registered node of a group that is not
/// Ready yet, and young enough to be still booting: it counts as the capacity it will
/// be (the planner adds template ResourceSlices for nodes whose drivers have not
/// published yet).
fn booting_template(
    node: &Node,
    name: &str,
    membership: &Membership,
    groups: &BTreeMap<&str, &NodeGroup>,
    options: &BuildOptions,
) -> Option<Node> {
    let group = membership
        .group_of(name)
        .and_then(|g| groups.get(g))
        .filter(|_| !is_ready(node) && node.metadata.deletion_timestamp.is_none())
        .filter(|_| {
            younger_than(
                node.metadata.creation_timestamp.as_ref(),
                options.pending.now,
                options.max_node_provision_time,
            )
        })?;
    let group = Group {
        name: group.metadata.name.clone().unwrap_or_default(),
        spec: group.spec.clone(),
        current: 0,
        upcoming: 0,
    };
    let (mut template, _) = template_node(&group, name);
    template.metadata.creation_timestamp = node.metadata.creation_timestamp.clone();
    template.metadata.uid = node.metadata.uid.clone();
    Some(template)
}

/// Everything of the planner's input but the nodes and pods: few objects, copied each
/// loop.
fn rest(inputs: &Inputs, node_groups: &[NodeGroup]) -> ClusterObjects {
    let mut objects = ClusterObjects {
        namespaces: inputs
            .namespaces
            .iter()
            .map(|o| Namespace::clone(o))
            .collect(),
        device_classes: inputs
            .device_classes
            .iter()
            .map(|o| DeviceClass::clone(o))
            .collect(),
        resource_slices: inputs
            .resource_slices
            .iter()
            .map(|o| ResourceSlice::clone(o))
            .collect(),
        resource_claims: inputs
            .resource_claims
            .iter()
            .map(|o| ResourceClaim::clone(o))
            .collect(),
        resource_claim_templates: inputs
            .resource_claim_templates
            .iter()
            .map(|o| ResourceClaimTemplate::clone(o))
            .collect(),
        device_taint_rules: inputs
            .device_taint_rules
            .iter()
            .map(|o| DeviceTaintRule::clone(o))
            .collect(),
        pod_workload_refs: inputs.pod_workload_refs.clone(),
        ..ClusterObjects::default()
    };
    objects.extra.extend(node_groups.iter().filter_map(extra));
    objects
        .extra
        .extend(inputs.daemon_sets.iter().filter_map(|d| extra(d.as_ref())));
    objects.extra.extend(
        inputs
            .pod_disruption_budgets
            .iter()
            .filter_map(|p| extra(p.as_ref())),
    );
    for gang in inputs.gang_objects.iter().chain(&inputs.stand_in_objects) {
        let Ok(mut value) = serde_json::to_value(gang.object.as_ref()) else {
            continue;
        };
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), gang.api_version.clone().into());
            map.insert("kind".into(), gang.kind.clone().into());
        }
        let name = gang.object.metadata.name.clone().unwrap_or_default();
        objects.extra.push(ExtraObject {
            origin: origin(&gang.kind, &name),
            api_version: gang.api_version.clone(),
            kind: gang.kind.clone(),
            value,
        });
    }
    objects
}

fn younger_than(
    created: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now: Timestamp,
    limit: SignedDuration,
) -> bool {
    created.is_none_or(|c| c.0.checked_add(limit).is_ok_and(|deadline| deadline > now))
}

#[cfg(test)]
mod tests;
