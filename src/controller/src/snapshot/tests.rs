use std::sync::Arc;

use k8s_openapi::jiff::SignedDuration;

use super::*;
use crate::pods::PendingPolicy;
use crate::test_support::{node, node_group, now, pending_pod};

/// Membership as the labels say (no provider lists instances).
fn labels_only(inputs: &Inputs) -> Membership {
    let groups = ["cpu".to_string(), "gpu".to_string()].into();
    Membership::resolve(
        inputs.nodes.iter().map(AsRef::as_ref),
        &groups,
        &crate::membership::ProviderView::default(),
    )
}

fn options() -> BuildOptions {
    BuildOptions {
        pending: PendingPolicy {
            now: now(),
            new_pod_delay: SignedDuration::from_secs(10),
            expendable_cutoff: -10,
        },
        max_node_provision_time: SignedDuration::from_mins(15),
    }
}

#[test]
fn booting_node_of_a_group_stands_in_as_its_template() {
    let group = node_group("cpu", 5);
    let mut not_ready = node("cpu-1", Some("cpu"), false, 60);
    // What the node lifecycle controller puts on a NotReady node.
    not_ready.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
        taints: Some(vec![k8s_openapi::api::core::v1::Taint {
            key: "node.kubernetes.io/not-ready".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let inputs = Inputs {
        nodes: vec![
            Arc::new(not_ready),
            Arc::new(node("other", None, false, 60)),
        ],
        ..Default::default()
    };
    let built = build(&inputs, &labels_only(&inputs), &[group], &options());
    assert_eq!(built.booting_nodes, vec!["cpu-1".to_string()]);
    let named = |name: &str| {
        built
            .objects
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
            .unwrap()
    };
    let stand_in = named("cpu-1");
    assert!(is_ready(stand_in));
    assert!(
        stand_in
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_none()
    );
    // A node of no group stays what it is.
    assert!(!is_ready(named("other")));
}

#[test]
fn a_ready_node_still_tainted_not_ready_is_booting_as_cluster_autoscaler_judges_it() {
    // What the API server's TaintNodesByCondition admission gives every new Node: Ready=True
    // from the kubelet, and `not-ready:NoSchedule` until KCM's node lifecycle controller
    // lifts it. The real kube-scheduler refuses the node meanwhile.
    let taint = |key: &str| k8s_openapi::api::core::v1::Taint {
        key: key.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/network-unavailable",
        "startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver",
    ] {
        let mut fresh = node("cpu-1", Some("cpu"), true, 2);
        fresh.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            taints: Some(vec![taint(key)]),
            ..Default::default()
        });
        assert!(!is_ready(&fresh), "{key}");
        let inputs = Inputs {
            nodes: vec![Arc::new(fresh)],
            ..Default::default()
        };
        let built = build(
            &inputs,
            &labels_only(&inputs),
            &[node_group("cpu", 5)],
            &options(),
        );
        assert_eq!(built.booting_nodes, vec!["cpu-1".to_string()], "{key}");
    }
    // A taint of the workload's own (a GPU taint the pods tolerate) is not a readiness one.
    let mut gpu = node("cpu-1", Some("cpu"), true, 2);
    gpu.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
        taints: Some(vec![taint("nvidia.com/gpu")]),
        ..Default::default()
    });
    assert!(is_ready(&gpu));
}

#[test]
fn node_that_never_became_ready_stops_counting_after_max_provision_time() {
    let inputs = Inputs {
        nodes: vec![Arc::new(node("cpu-1", Some("cpu"), false, 16 * 60))],
        ..Default::default()
    };
    let built = build(
        &inputs,
        &labels_only(&inputs),
        &[node_group("cpu", 5)],
        &options(),
    );
    assert!(built.booting_nodes.is_empty());
    assert!(!is_ready(&built.objects.nodes[0]));
}

#[test]
fn skipped_pods_are_left_out_and_counted() {
    let mut nominated = pending_pod("nominated", "1", 60);
    if let Some(s) = nominated.status.as_mut() {
        s.nominated_node_name = Some("n1".into());
    }
    let inputs = Inputs {
        nodes: vec![Arc::new(node("n1", None, true, 600))],
        pods: vec![
            Arc::new(pending_pod("old", "1", 60)),
            Arc::new(pending_pod("young", "1", 1)),
            Arc::new(nominated),
        ],
        ..Default::default()
    };
    let built = build(&inputs, &labels_only(&inputs), &[], &options());
    assert_eq!(built.planned_for, vec![ObjectRef::new("default", "old")]);
    assert_eq!(built.skipped.get(&Skip::TooYoung), Some(&1));
    assert_eq!(built.skipped.get(&Skip::Nominated), Some(&1));
    let names: Vec<_> = built
        .objects
        .pods
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap(),
                p.spec.as_ref().unwrap().node_name.clone(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("old".to_string(), None),
            ("nominated".to_string(), Some("n1".to_string()))
        ]
    );
}

/// A 1.35 gang member the scheduler holds back (no `PodScheduled=False`
/// yet) is linked only by `spec.workloadRef`, which the typed Pod cannot
/// carry: the controller must still plan for it, as the planner counts it.
#[test]
fn members_linked_by_a_1_35_workload_ref_are_planned_for() {
    let mut held_back = pending_pod("worker-0", "1", 60);
    if let Some(s) = held_back.status.as_mut() {
        s.conditions = None;
    }
    let mut alone = pending_pod("alone", "1", 60);
    if let Some(s) = alone.status.as_mut() {
        s.conditions = None;
    }
    let inputs = Inputs {
        pods: vec![Arc::new(held_back), Arc::new(alone)],
        pod_workload_refs: [(
            ("default".to_string(), "worker-0".to_string()),
            serde_json::json!({"name": "trainer", "podGroup": "workers"}),
        )]
        .into(),
        ..Default::default()
    };
    let built = build(&inputs, &labels_only(&inputs), &[], &options());
    assert_eq!(
        built.planned_for,
        vec![ObjectRef::new("default", "worker-0")]
    );
    assert_eq!(built.skipped.get(&Skip::NotUnschedulable), Some(&1));
}

#[test]
fn node_groups_and_gang_objects_travel_as_typed_extras() {
    let pod_group: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 2}
    }))
    .unwrap();
    let inputs = Inputs {
        gang_objects: vec![GangObject {
            api_version: "scheduling.x-k8s.io/v1alpha1".into(),
            kind: "PodGroup".into(),
            object: Arc::new(pod_group),
        }],
        ..Default::default()
    };
    let built = build(
        &inputs,
        &labels_only(&inputs),
        &[node_group("cpu", 5)],
        &options(),
    );
    let kinds: Vec<_> = built
        .objects
        .extra
        .iter()
        .map(|e| (e.api_version.as_str(), e.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("dra-autoscaler.io/v1alpha1", "NodeGroup"),
            ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
        ]
    );
    let (groups, errors) =
        dra_plan::groups::read_groups(&built.objects.extra, &built.objects.nodes);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(groups[0].name, "cpu");
    assert_eq!(built.objects.extra[1].value["spec"]["minMember"], 2);
}
