//! The fake provider registers the very Node and ResourceSlices the planner simulated: a pod the
//! plan puts on a new node must find the same labels, taints, resources and devices there. The
//! one difference is the `dra-autoscaler.io/node-group` label: a kubelet does not set it, so the
//! fake does not either; the controller adds it to its copy of a Node it knows by providerID.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use dra_api::{NODE_GROUP_LABEL, NodeGroup};
use dra_plan::groups::{Group, template_node};
use dra_provider_fake::config::{Faults, GroupConfig};
use dra_provider_fake::kube_writer::KubeWriter;
use k8s_openapi::api::core::v1::Node;

fn example(file: &str) -> NodeGroup {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/nodegroups")
        .join(file);
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Clears what only a running machine has and no plan can know.
fn without_runtime_facts(mut node: Node) -> Node {
    node.metadata.annotations = None;
    if let Some(spec) = node.spec.as_mut() {
        spec.provider_id = None;
    }
    if let Some(status) = node.status.as_mut() {
        for c in status.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
            c.last_transition_time = None;
            c.message = None;
        }
        if let Some(info) = status.node_info.as_mut() {
            info.kubelet_version = String::new();
            info.os_image = String::new();
        }
        status.addresses = None;
    }
    node
}

#[test]
fn the_fake_providers_node_is_the_planners_template_node() {
    for file in [
        "h200-on-demand.yaml",
        "h200-reserved.yaml",
        "partitionable-gpu.yaml",
        "cpu.yaml",
    ] {
        let group = example(file);
        let name = group.metadata.name.clone().unwrap();
        let config = GroupConfig::from_file(&name, group.spec.clone(), Faults::default());
        let planned = Group {
            name,
            spec: group.spec,
            current: 0,
            upcoming: 0,
        };
        let (template, _) = template_node(&planned, "node-x");
        let node = KubeWriter::node_object(&config, "node-x");
        assert_eq!(
            node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
            Some("fake://node-x"),
            "{file}: known by providerID"
        );
        let registered = without_runtime_facts(node);
        let mut expected = template.clone();
        let label = expected
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(NODE_GROUP_LABEL);
        assert!(
            label.is_some(),
            "{file}: the planner's node carries its group"
        );
        assert_eq!(registered, expected, "{file}");
        let labels = template.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/os"], "linux", "{file}");
    }
}
