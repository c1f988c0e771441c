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

/// The filter state a fresh one of `objects` would be (nodes in name order).
fn fresh_filters(objects: &ClusterObjects) -> dra_sim::filters::Summary {
    let mut nodes: Vec<&Node> = objects.nodes.iter().collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    FilterState::of_nodes(nodes.into_iter(), &objects.pods, &objects.namespaces).summary()
}

/// The state handed back, with the namespaces refreshed as a snapshot given it does.
fn handed_filters(handed: &mut HandedBack) -> Option<dra_sim::filters::Summary> {
    let filters = handed.filters.as_mut()?;
    filters.set_namespaces(&handed.objects.namespaces);
    Some(filters.summary())
}

#[test]
fn the_filter_state_comes_back_as_a_fresh_one_and_plans_as_one() {
    // With the filter cases: their bound pods hold host ports and anti-affinity terms.
    let cases = crate::simulate::tests::snapshots_in(&["scenarios", "simulate", "filters"]);
    assert!(cases.len() > 130, "testdata not found: {}", cases.len());
    let options = PlanOptions::default();
    let (mut with_anti, mut with_ports, mut placed) = (0, 0, 0);
    for (case, objects) in cases {
        let gates = FeatureGates::default();
        let expected_plan = serde_json::to_value(crate::plan(objects.clone(), gates, &options));
        let fresh = fresh_filters(&objects);
        with_anti += usize::from(!fresh.anti.is_empty());
        with_ports += usize::from(fresh.nodes.iter().any(|n| !n.ports.is_empty()));

        // First plan: no state given; the planner's own comes back, its plan undone.
        let mut first = plan_keeping_filters(objects, None, gates, &options);
        assert!(!first.filters_reused, "{case}");
        assert_eq!(handed_filters(&mut first).as_ref(), Some(&fresh), "{case}");
        placed += first.plan.pods.iter().filter(|p| p.node.is_some()).count();

        // Second plan of the same objects with that state: used, the same plan, and the
        // state comes back as it was given again.
        let mut second = plan_keeping_filters(first.objects, first.filters, gates, &options);
        assert!(second.filters_reused, "{case}");
        assert_eq!(
            serde_json::to_value(&second.plan).unwrap(),
            *expected_plan.as_ref().unwrap(),
            "{case}"
        );
        assert_eq!(handed_filters(&mut second).as_ref(), Some(&fresh), "{case}");
    }
    // The cases place pods (which the hand-back undoes), hold host ports, and have
    // placed pods with anti-affinity, so each part of the record was rolled back somewhere.
    assert!(placed > 100, "{placed}");
    assert!(with_ports > 0, "{with_ports}");
    assert!(with_anti > 0, "{with_anti}");
}

#[test]
fn a_filter_state_of_other_nodes_is_not_used() {
    let node = |name: &str| -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}
        }))
        .unwrap()
    };
    let objects = ClusterObjects {
        nodes: vec![node("a"), node("b")],
        ..ClusterObjects::default()
    };
    let other = FilterState::new(&[node("a"), node("c")], &[], &[]);
    let handed = plan_keeping_filters(
        objects,
        Some(other),
        FeatureGates::default(),
        &PlanOptions::default(),
    );
    assert!(!handed.filters_reused);
    let summary = handed.filters.map(|f| f.summary()).unwrap();
    let names: Vec<_> = summary.nodes.iter().map(|n| n.name.clone()).collect();
    assert_eq!(names, [Some("a".to_owned()), Some("b".to_owned())]);
}
