//! The Node and ResourceSlices a node group's new machine has once it registers: the one place
//! that answers "what does the node a group makes look like".
//!
//! The planner simulates exactly this object, every provider registers (or describes) exactly
//! this object, so a pod the planner places on a new node is judged against the labels, taints,
//! allocatable and devices the real node will have. Runtime facts that no plan can know
//! (timestamps, `providerID`, uids, owner references) are left for the caller to add.
//!
//! Labels, in order of precedence (later steps never overwrite earlier ones unless noted):
//! 1. the group's identity, which always wins: [`NODE_GROUP_LABEL`] = the group's name, and the
//!    group's `topologyDomain` key = its value;
//! 2. the template's labels (a kubelet's `--node-labels` override its own defaults the same way);
//! 3. what the kubelet sets on registration when the template says nothing else
//!    (`kubernetes.io/hostname` = the node's name, `kubernetes.io/os` = `linux`,
//!    `kubernetes.io/arch` = `amd64`, and their `beta.kubernetes.io/` twins, see kubelet's
//!    `initialNode`);
//! 4. what the cloud node controller mirrors: the stable and deprecated beta keys of instance
//!    type, zone and region carry the same value when the template gives either one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::nodegroup::{NODE_GROUP_LABEL, NodeGroupSpec};

/// Label on every ResourceSlice of a new node naming that node, so a provider can find and remove
/// the slices when the machine goes.
pub const SLICE_NODE_LABEL: &str = "dra-autoscaler.io/node";

/// `kubernetes.io/hostname`.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// `kubernetes.io/os`.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// `kubernetes.io/arch`.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// `topology.kubernetes.io/zone`.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// OS a kubelet reports when the template does not say (every node group we scale runs Linux).
pub const DEFAULT_OS: &str = "linux";
/// Architecture a kubelet reports when the template does not say.
pub const DEFAULT_ARCH: &str = "amd64";

/// Stable keys and the deprecated beta keys the kubelet or the cloud node controller still
/// writes beside them with the same value.
const MIRRORED: &[(&str, &str)] = &[
    (OS_LABEL, "beta.kubernetes.io/os"),
    (ARCH_LABEL, "beta.kubernetes.io/arch"),
    (INSTANCE_TYPE_LABEL, "beta.kubernetes.io/instance-type"),
    (ZONE_LABEL, "failure-domain.beta.kubernetes.io/zone"),
    (REGION_LABEL, "failure-domain.beta.kubernetes.io/region"),
];

/// A new machine of a node group as the cluster will see it.
#[derive(Clone, Debug, PartialEq)]
pub struct NewNode {
    /// The Node as registered and Ready.
    pub node: Node,
    /// The ResourceSlices its DRA drivers publish (`nodeName` and pool name set to the node).
    pub slices: Vec<ResourceSlice>,
}

/// The Node and ResourceSlices machine `node_name` of group `group` (spec `spec`) has once it
/// registers and its drivers have published. Pure: the same input always gives the same object.
#[must_use]
pub fn new_node(group: &str, spec: &NodeGroupSpec, node_name: &str) -> NewNode {
    NewNode {
        node: node_object(group, spec, node_name),
        slices: slice_objects(group, spec, node_name),
    }
}

/// The value label `key` has on [`new_node`]`(group, spec, node_name)`, without building it
/// (the planner asks this for thousands of label keys).
#[must_use]
pub fn new_node_label<'a>(
    group: &'a str,
    spec: &'a NodeGroupSpec,
    key: &str,
    node_name: &'a str,
) -> Option<&'a str> {
    if key == NODE_GROUP_LABEL {
        return Some(group);
    }
    if let Some(domain) = &spec.topology_domain
        && domain.key == key
    {
        return Some(&domain.value);
    }
    let template = &spec.template.labels;
    if let Some(value) = template.get(key) {
        return Some(value);
    }
    match key {
        HOSTNAME_LABEL => return Some(node_name),
        OS_LABEL | "beta.kubernetes.io/os" => return Some(mirrored(spec, OS_LABEL, DEFAULT_OS)),
        ARCH_LABEL | "beta.kubernetes.io/arch" => {
            return Some(mirrored(spec, ARCH_LABEL, DEFAULT_ARCH));
        }
        _ => {}
    }
    // A key whose stable or beta twin the group sets (a topology domain or a template label).
    let twin = MIRRORED.iter().find_map(|&(stable, beta)| {
        (key == stable)
            .then_some(beta)
            .or_else(|| (key == beta).then_some(stable))
    })?;
    if let Some(domain) = &spec.topology_domain
        && domain.key == twin
    {
        return Some(&domain.value);
    }
    template.get(twin).map(String::as_str)
}

/// The value of stable key `stable` or its beta twin as the group sets them, else `default`.
fn mirrored<'a>(spec: &'a NodeGroupSpec, stable: &str, default: &'a str) -> &'a str {
    let beta = MIRRORED
        .iter()
        .find(|(s, _)| *s == stable)
        .map_or("", |(_, b)| *b);
    [stable, beta]
        .iter()
        .find_map(|key| match &spec.topology_domain {
            Some(domain) if domain.key == *key => Some(domain.value.as_str()),
            _ => spec.template.labels.get(*key).map(String::as_str),
        })
        .unwrap_or(default)
}

fn labels(group: &str, spec: &NodeGroupSpec, node_name: &str) -> BTreeMap<String, String> {
    let mut keys: Vec<&str> = spec.template.labels.keys().map(String::as_str).collect();
    keys.extend([NODE_GROUP_LABEL, HOSTNAME_LABEL]);
    keys.extend(spec.topology_domain.iter().map(|d| d.key.as_str()));
    keys.extend(MIRRORED.iter().flat_map(|(stable, beta)| [*stable, *beta]));
    keys.into_iter()
        .filter_map(|key| {
            new_node_label(group, spec, key, node_name).map(|v| (key.to_owned(), v.to_owned()))
        })
        .collect()
}

fn node_object(group: &str, spec: &NodeGroupSpec, node_name: &str) -> Node {
    let template = &spec.template;
    let labels = labels(group, spec, node_name);
    let os = labels.get(OS_LABEL).cloned().unwrap_or_default();
    let architecture = labels.get(ARCH_LABEL).cloned().unwrap_or_default();
    let condition = |type_: &str, status: &str, reason: &str| NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        ..NodeCondition::default()
    };
    Node {
        metadata: ObjectMeta {
            name: Some(node_name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(template.taints.clone()).filter(|t| !t.is_empty()),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(template.capacity.clone()),
            allocatable: Some(template.effective_allocatable().clone()),
            phase: Some("Running".to_owned()),
            conditions: Some(vec![
                condition("Ready", "True", "KubeletReady"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("NetworkUnavailable", "False", "RouteCreated"),
            ]),
            node_info: Some(NodeSystemInfo {
                architecture,
                operating_system: os,
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

fn slice_objects(group: &str, spec: &NodeGroupSpec, node_name: &str) -> Vec<ResourceSlice> {
    let template = &spec.template;
    template
        .slices_for_node(node_name)
        .into_iter()
        .enumerate()
        .map(|(index, mut slice)| {
            // A driver always publishes a positive slice count and generation (the API server
            // rejects zero); a template that leaves them out means "every slice of this driver".
            if slice.pool.resource_slice_count <= 0 {
                let same_driver = template
                    .resource_slices
                    .iter()
                    .filter(|s| s.driver == slice.driver)
                    .count();
                slice.pool.resource_slice_count = i64::try_from(same_driver).unwrap_or(1).max(1);
            }
            slice.pool.generation = slice.pool.generation.max(1);
            ResourceSlice {
                metadata: ObjectMeta {
                    name: Some(format!(
                        "{node_name}-{}-{index}",
                        slice.driver.replace('.', "-")
                    )),
                    labels: Some(BTreeMap::from([
                        (SLICE_NODE_LABEL.to_owned(), node_name.to_owned()),
                        (NODE_GROUP_LABEL.to_owned(), group.to_owned()),
                    ])),
                    ..ObjectMeta::default()
                },
                spec: slice,
            }
        })
        .collect()
}
