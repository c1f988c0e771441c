//! Builders shared by the unit tests.

use std::collections::BTreeMap;

use dra_api::{CapacityType, NODE_GROUP_LABEL, NodeGroup, NodeGroupSpec, NodeTemplate};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeStatus, Pod, PodCondition, PodSpec, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The fixed time unit tests run at.
pub fn now() -> Timestamp {
    "2026-11-29T12:00:00Z".parse().unwrap()
}

/// `now()` minus `secs`.
pub fn ago(secs: i64) -> Time {
    Time(now() - SignedDuration::from_secs(secs))
}

fn quantities(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    [
        ("cpu".to_string(), Quantity(cpu.into())),
        ("memory".to_string(), Quantity(memory.into())),
        ("pods".to_string(), Quantity("110".into())),
    ]
    .into()
}

/// An on-demand group of 4-CPU machines.
pub fn node_group(name: &str, max: i32) -> NodeGroup {
    let mut group = NodeGroup::new(
        name,
        NodeGroupSpec {
            provider: "fake".into(),
            provider_id: name.into(),
            min_size: 0,
            max_size: max,
            capacity_type: CapacityType::OnDemand,
            reservation: None,
            price_per_hour: 1.0,
            priority: 0,
            topology_domain: None,
            template: NodeTemplate {
                capacity: quantities("4", "16Gi"),
                ..Default::default()
            },
            scale_down: None,
        },
    );
    group.metadata.resource_version = Some("1".into());
    group
}

/// A Ready (or not) node of `group` with 4 CPUs, created `age` seconds ago.
pub fn node(name: &str, group: Option<&str>, ready: bool, age: i64) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: group.map(|g| [(NODE_GROUP_LABEL.to_string(), g.to_string())].into()),
            creation_timestamp: Some(ago(age)),
            ..Default::default()
        },
        spec: None,
        status: Some(NodeStatus {
            capacity: Some(quantities("4", "16Gi")),
            allocatable: Some(quantities("4", "16Gi")),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// A pending, unschedulable pod asking for `cpu`, created `age` seconds ago.
pub fn pending_pod(name: &str, cpu: &str, age: i64) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            creation_timestamp: Some(ago(age)),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}
