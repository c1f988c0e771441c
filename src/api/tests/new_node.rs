//! The node a group makes: labels the kubelet and cloud node controller set, the group's identity,
//! the template's overrides, and slices as a DRA driver publishes them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use dra_api::{
    CapacityType, NODE_GROUP_LABEL, NodeGroupSpec, NodeTemplate, SLICE_NODE_LABEL, TopologyDomain,
    new_node, new_node_label,
};
use k8s_openapi::api::resource::v1::{Device, ResourcePool, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn spec(labels: &[(&str, &str)], domain: Option<(&str, &str)>) -> NodeGroupSpec {
    NodeGroupSpec {
        provider: "fake".into(),
        provider_id: "g".into(),
        min_size: 0,
        max_size: 3,
        capacity_type: CapacityType::OnDemand,
        reservation: None,
        price_per_hour: 1.0,
        priority: 0,
        topology_domain: domain.map(|(key, value)| TopologyDomain {
            key: key.into(),
            value: value.into(),
        }),
        template: NodeTemplate {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            capacity: BTreeMap::from([("cpu".to_owned(), Quantity("8".into()))]),
            ..NodeTemplate::default()
        },
        scale_down: None,
    }
}

fn labels_of(group: &str, spec: &NodeGroupSpec, node: &str) -> BTreeMap<String, String> {
    new_node(group, spec, node).node.metadata.labels.unwrap()
}

#[test]
fn a_template_without_labels_gets_what_every_kubelet_sets() {
    // kubelet's initialNode: hostname, os and arch, stable and beta keys; the node-group label.
    let labels = labels_of("gpu", &spec(&[], None), "gpu-1");
    let expected: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", "gpu-1"),
        ("kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/arch", "amd64"),
        (NODE_GROUP_LABEL, "gpu"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(labels, expected);
}

#[test]
fn template_labels_override_the_kubelet_defaults() {
    let labels = labels_of("arm", &spec(&[("kubernetes.io/arch", "arm64")], None), "n");
    assert_eq!(labels["kubernetes.io/arch"], "arm64");
    assert_eq!(labels["beta.kubernetes.io/arch"], "arm64");
    assert_eq!(labels["kubernetes.io/os"], "linux");
}

#[test]
fn instance_type_zone_and_region_are_mirrored_to_their_beta_keys() {
    let s = spec(
        &[
            ("node.kubernetes.io/instance-type", "p5.48xlarge"),
            ("failure-domain.beta.kubernetes.io/region", "us-east-1"),
        ],
        Some(("topology.kubernetes.io/zone", "us-east-1a")),
    );
    let labels = labels_of("p5", &s, "n");
    assert_eq!(labels["beta.kubernetes.io/instance-type"], "p5.48xlarge");
    assert_eq!(
        labels["failure-domain.beta.kubernetes.io/zone"],
        "us-east-1a"
    );
    assert_eq!(labels["topology.kubernetes.io/region"], "us-east-1");
}

#[test]
fn the_groups_identity_wins_over_the_template() {
    let s = spec(
        &[
            (NODE_GROUP_LABEL, "other"),
            ("topology.kubernetes.io/zone", "a"),
        ],
        Some(("topology.kubernetes.io/zone", "b")),
    );
    let labels = labels_of("mine", &s, "n");
    assert_eq!(labels[NODE_GROUP_LABEL], "mine");
    assert_eq!(labels["topology.kubernetes.io/zone"], "b");
    assert_eq!(labels["failure-domain.beta.kubernetes.io/zone"], "b");
}

#[test]
fn new_node_label_agrees_with_the_built_node_for_every_key() {
    let cases = [
        spec(&[("zone", "a"), ("tier", "x")], None),
        spec(
            &[
                ("zone", "a"),
                ("kubernetes.io/hostname", "fixed"),
                (NODE_GROUP_LABEL, "other"),
                ("beta.kubernetes.io/arch", "arm64"),
                ("node.kubernetes.io/instance-type", "m5.large"),
            ],
            Some(("zone", "b")),
        ),
        spec(&[], Some((NODE_GROUP_LABEL, "d"))),
        spec(&[], Some(("failure-domain.beta.kubernetes.io/zone", "z"))),
    ];
    for s in &cases {
        let labels = labels_of("g", s, "n-1");
        let mut keys: Vec<&str> = labels.keys().map(String::as_str).collect();
        keys.extend([
            "absent",
            "topology.kubernetes.io/region",
            "beta.kubernetes.io/instance-type",
        ]);
        for key in keys {
            assert_eq!(
                new_node_label("g", s, key, "n-1"),
                labels.get(key).map(String::as_str),
                "key {key} of {:?}",
                s.template.labels
            );
        }
    }
}

#[test]
fn the_node_is_ready_with_the_templates_resources_and_taints() {
    let mut s = spec(&[], None);
    s.template.taints = vec![k8s_openapi::api::core::v1::Taint {
        key: "nvidia.com/gpu".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }];
    let node = new_node("g", &s, "n").node;
    let status = node.status.unwrap();
    assert_eq!(status.allocatable.unwrap()["cpu"].0, "8");
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True");
    assert_eq!(node.spec.unwrap().taints.unwrap()[0].key, "nvidia.com/gpu");
    let info = status.node_info.unwrap();
    assert_eq!(
        (info.operating_system.as_str(), info.architecture.as_str()),
        ("linux", "amd64")
    );
}

#[test]
fn slices_are_published_for_the_node_with_a_positive_count_and_generation() {
    let mut s = spec(&[], None);
    let slice = |driver: &str| ResourceSliceSpec {
        driver: driver.into(),
        pool: ResourcePool {
            name: "template".into(),
            generation: 0,
            resource_slice_count: 0,
        },
        node_name: Some("template".into()),
        devices: Some(vec![Device {
            name: "gpu-0".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    s.template.resource_slices = vec![
        slice("gpu.example.com"),
        slice("gpu.example.com"),
        slice("nic.example.com"),
    ];
    let slices = new_node("g", &s, "n-7").slices;
    let names: Vec<&str> = slices
        .iter()
        .map(|s| s.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "n-7-gpu-example-com-0",
            "n-7-gpu-example-com-1",
            "n-7-nic-example-com-2"
        ]
    );
    for slice in &slices {
        assert_eq!(slice.spec.node_name.as_deref(), Some("n-7"));
        assert_eq!(slice.spec.pool.name, "n-7");
        assert_eq!(slice.spec.pool.generation, 1);
        let labels = slice.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SLICE_NODE_LABEL], "n-7");
        assert_eq!(labels[NODE_GROUP_LABEL], "g");
    }
    let counts: Vec<i64> = slices
        .iter()
        .map(|s| s.spec.pool.resource_slice_count)
        .collect();
    assert_eq!(counts, [2, 2, 1]);
}
