use super::*;
use crate::scaledown::ScaleDownOptions;

/// Nodes, pods and every other kind of `objects`, as JSON, nodes in name order (the
/// order the planner's snapshot keeps them in).
fn as_json(objects: &ClusterObjects) -> serde_json::Value {
    let mut nodes = objects.nodes.clone();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    serde_json::json!({
        "nodes": nodes,
        "pods": objects.pods,
        "namespaces": objects.namespaces,
        "deviceClasses": objects.device_classes,
        "resourceSlices": objects.resource_slices,
        "resourceClaims": objects.resource_claims,
        "resourceClaimTemplates": objects.resource_claim_templates,
        "deviceTaintRules": objects.device_taint_rules,
        "extra": objects.extra.iter().map(|e| &e.value).collect::<Vec<_>>(),
        "workloadRefs": objects.pod_workload_refs.iter().map(|(k, v)| (format!("{}/{}", k.0, k.1), v)).collect::<std::collections::BTreeMap<_, _>>(),
    })
}

#[test]
fn the_objects_come_back_as_given_and_the_plan_is_the_plan_of_a_copy() {
    let cases = crate::simulate::tests::snapshots();
    assert!(cases.len() > 100, "testdata not found: {}", cases.len());
    let options = PlanOptions::default();
    let mut planned_nodes = 0;
    for (case, objects) in cases {
        let gates = FeatureGates::default();
        let expected_plan = crate::plan(objects.clone(), gates, &options);
        let given = as_json(&objects);
        let (plan, back) = plan_handing_back(objects, gates, &options);
        assert_eq!(
            serde_json::to_value(&plan).unwrap(),
            serde_json::to_value(&expected_plan).unwrap(),
            "{case}"
        );
        assert_eq!(as_json(&back), given, "{case}");
        planned_nodes += plan.scale_ups.iter().map(|s| s.count).sum::<usize>();
    }
    // The planner bought nodes (and bound pods to them) in some cases, so what was
    // taken off mattered.
    assert!(planned_nodes > 10, "{planned_nodes}");
}

#[test]
fn the_analysis_hands_the_nodes_and_pods_back_as_given_and_analyses_as_before() {
    let cases = crate::simulate::tests::snapshots();
    assert!(cases.len() > 100, "testdata not found: {}", cases.len());
    let options = ScaleDownOptions::default();
    let mut with_scale_downs = 0;
    for (case, objects) in cases {
        let gates = FeatureGates::default();
        let plan = crate::plan(objects.clone(), gates, &PlanOptions::default());
        let expected = crate::scaledown::analyse(objects.clone(), gates, &plan, &options);
        let given = as_json(&objects);
        let (report, nodes, pods) = analyse_handing_back(objects.clone(), gates, &plan, &options);
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::to_value(&expected).unwrap(),
            "{case}"
        );
        let back = ClusterObjects {
            nodes,
            pods,
            ..objects
        };
        assert_eq!(as_json(&back), given, "{case}");
        with_scale_downs += usize::from(!expected.scale_downs.is_empty());
    }
    // The analysis moved pods (to empty the nodes it removes) in some of them.
    assert!(with_scale_downs > 3, "{with_scale_downs}");
}

/// A pod whose `spec.nodeName` is the empty string is pending to the planner, which binds
/// it; it comes back with its empty node name, as given (found in review).
#[test]
fn a_pod_with_an_empty_node_name_comes_back_with_it() {
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}
    }))
    .unwrap();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "", "containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    let objects = ClusterObjects {
        nodes: vec![node],
        pods: vec![pod],
        ..ClusterObjects::default()
    };
    let given = as_json(&objects);
    let (plan, back) = plan_handing_back(objects, FeatureGates::default(), &PlanOptions::default());
    // The planner did bind it (it fits on n1), so the hand-back had something to undo.
    assert!(
        plan.pods.iter().any(|p| p.node.as_deref() == Some("n1")),
        "{:?}",
        plan.pods
    );
    assert_eq!(as_json(&back), given);
}
