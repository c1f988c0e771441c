use std::sync::Arc;

use dra_plan::PlanOptions;
use dra_plan::handback::plan_keeping_filters;
use dra_sim::FeatureGates;
use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::jiff::SignedDuration;

use super::*;
use crate::pods::PendingPolicy;
use crate::test_support::{node, node_group, now, pending_pod};

fn options() -> BuildOptions {
    BuildOptions {
        pending: PendingPolicy {
            now: now(),
            new_pod_delay: SignedDuration::ZERO,
            expendable_cutoff: -10,
        },
        max_node_provision_time: SignedDuration::from_mins(15),
    }
}

/// Membership as the labels say (no provider lists instances).
fn labels_only(inputs: &Inputs) -> Membership {
    let groups = ["cpu".to_string()].into();
    Membership::resolve(
        inputs.nodes.iter().map(AsRef::as_ref),
        &groups,
        &crate::membership::ProviderView::default(),
    )
}

fn running_pod(name: &str, node: &str) -> Pod {
    let mut pod = pending_pod(name, "100m", 600);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(node.into());
    }
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..Default::default()
    });
    pod
}

/// Three Ready nodes of group `cpu`, one of no group, ten running pods on each, and one
/// pending pod.
fn cluster() -> Inputs {
    let mut nodes: Vec<Arc<Node>> = (0..3)
        .map(|i| Arc::new(node(&format!("cpu-{i}"), Some("cpu"), true, 3600)))
        .collect();
    nodes.push(Arc::new(node("other", None, true, 3600)));
    let mut pods: Vec<Arc<Pod>> = (0..40)
        .map(|i| {
            let on = if i < 30 {
                format!("cpu-{}", i / 10)
            } else {
                "other".into()
            };
            Arc::new(running_pod(&format!("running-{i}"), &on))
        })
        .collect();
    pods.push(Arc::new(pending_pod("waiting", "3", 60)));
    Inputs {
        nodes,
        pods,
        ..Default::default()
    }
}

/// Nodes by name and pods by key, as JSON: the view's order is its own.
fn by_name(objects: &ClusterObjects) -> serde_json::Value {
    let nodes: BTreeMap<String, &Node> = objects.nodes.iter().map(|n| (node_key(n), n)).collect();
    let pods: BTreeMap<String, &Pod> = objects.pods.iter().map(|p| (pod_key(p), p)).collect();
    serde_json::json!({ "nodes": nodes, "pods": pods })
}

/// One loop: the view's input, planned (the planner hands the nodes and pods back), and
/// given back. Returns the input as it was lent, for comparing.
fn one_loop(view: &mut View, inputs: &Inputs, groups: &[NodeGroup]) -> serde_json::Value {
    let built = view.update(inputs, &labels_only(inputs), groups, &options());
    let fresh = super::super::build(inputs, &labels_only(inputs), groups, &options());
    let lent = by_name(&built.objects);
    assert_eq!(
        lent,
        by_name(&fresh.objects),
        "the view's input is the one built afresh"
    );
    assert_eq!(built.planned_for, fresh.planned_for);
    // The index lent with them is the one made afresh of them.
    let mut filters = built.filters.expect("the view lends its index");
    filters.set_namespaces(&built.objects.namespaces);
    assert_eq!(filters.summary(), fresh_index(&built.objects));
    let handed = plan_keeping_filters(
        built.objects,
        Some(filters),
        FeatureGates::default(),
        &PlanOptions {
            now: Some(now()),
            ..PlanOptions::default()
        },
    );
    assert!(handed.filters_reused, "the planner used the view's index");
    view.give_back(handed.objects.nodes, handed.objects.pods, handed.filters);
    lent
}

/// The planner's index of `objects` made afresh (nodes in name order).
fn fresh_index(objects: &ClusterObjects) -> dra_sim::filters::Summary {
    let mut nodes: Vec<&Node> = objects.nodes.iter().collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    FilterState::of_nodes(nodes.into_iter(), &objects.pods, &objects.namespaces).summary()
}

#[test]
fn an_idle_loop_copies_nothing_and_one_pod_event_copies_one_pod() {
    let groups = [node_group("cpu", 10)];
    let mut inputs = cluster();
    let mut view = View::default();
    one_loop(&mut view, &inputs, &groups);
    // The first loop copies every node and running pod (the pending one is the loop's own).
    assert_eq!(
        view.counts(),
        Counts {
            rebuilds: 1,
            copied: 4 + 40,
            dropped: 0,
            indexed: 1,
        }
    );

    one_loop(&mut view, &inputs, &groups);
    assert_eq!(
        view.counts(),
        Counts {
            rebuilds: 1,
            copied: 0,
            dropped: 0,
            indexed: 1,
        },
        "nothing changed: nothing copied, nothing indexed"
    );

    // A watch event replaces one pod's entry in the store.
    let mut relabelled = Pod::clone(&inputs.pods[7]);
    relabelled
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("app".into(), "changed".into());
    inputs.pods[7] = Arc::new(relabelled);
    let lent = one_loop(&mut view, &inputs, &groups);
    assert_eq!(
        view.counts(),
        Counts {
            rebuilds: 1,
            copied: 1,
            dropped: 0,
            indexed: 1,
        },
        "one pod event: one copy, no rebuild, the index kept"
    );
    assert_eq!(
        lent["pods"]["default/running-7"]["metadata"]["labels"]["app"],
        "changed"
    );

    // A pod deleted, and the pending pod bound by the scheduler.
    inputs.pods.remove(3);
    let waiting = inputs.pods.len() - 1;
    inputs.pods[waiting] = Arc::new(running_pod("waiting", "cpu-2"));
    one_loop(&mut view, &inputs, &groups);
    assert_eq!(
        view.counts(),
        Counts {
            rebuilds: 1,
            copied: 1,
            dropped: 1,
            indexed: 1,
        }
    );

    // A pod nominated to a node holds its room there for the loop (the index lent counts
    // it, as `one_loop` checks); the next loop, no longer nominated, it is not counted.
    let mut nominated = pending_pod("nominated", "1", 60);
    nominated
        .status
        .get_or_insert_with(Default::default)
        .nominated_node_name = Some("cpu-0".into());
    inputs.pods.push(Arc::new(nominated));
    let lent = one_loop(&mut view, &inputs, &groups);
    assert_eq!(
        lent["pods"]["default/nominated"]["spec"]["nodeName"],
        "cpu-0"
    );
    inputs.pods.pop();
    one_loop(&mut view, &inputs, &groups);
    assert_eq!(
        view.counts().indexed,
        1,
        "the nominated pod came and went, index kept"
    );

    // A heartbeat on a node changes nothing the filters read: the index is kept.
    let mut heartbeat = Node::clone(&inputs.nodes[0]);
    heartbeat.metadata.resource_version = Some("2".into());
    inputs.nodes[0] = Arc::new(heartbeat);
    one_loop(&mut view, &inputs, &groups);
    assert_eq!((view.counts().copied, view.counts().indexed), (1, 1));

    // A node relabelled is indexed afresh, once.
    let mut relabelled = Node::clone(&inputs.nodes[3]);
    relabelled
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("zone".into(), "b".into());
    inputs.nodes[3] = Arc::new(relabelled);
    one_loop(&mut view, &inputs, &groups);
    assert_eq!(view.counts().indexed, 2);
    one_loop(&mut view, &inputs, &groups);
    assert_eq!(view.counts().indexed, 2);
}

#[test]
fn a_node_booting_again_stands_as_its_template_and_its_copy_goes() {
    let groups = [node_group("cpu", 10)];
    let mut inputs = cluster();
    let mut view = View::default();
    one_loop(&mut view, &inputs, &groups);
    inputs.nodes[1] = Arc::new(node("cpu-1", Some("cpu"), false, 60));
    let lent = one_loop(&mut view, &inputs, &groups);
    // Its copy is replaced by the template, which is kept as a copy is.
    assert_eq!((view.counts().copied, view.counts().dropped), (1, 0));
    // The template a booting node stands as is Ready.
    let template: Node = serde_json::from_value(lent["nodes"]["cpu-1"].clone()).unwrap();
    assert!(super::super::is_ready(&template));
    // Still booting next loop: the template stands, nothing copied.
    let indexed = view.counts().indexed;
    one_loop(&mut view, &inputs, &groups);
    assert_eq!(view.counts().copied, 0);
    assert_eq!(
        view.counts().indexed,
        indexed,
        "nothing changed for the filters"
    );
    // Ready again: copied again, the template gone.
    inputs.nodes[1] = Arc::new(node("cpu-1", Some("cpu"), true, 60));
    one_loop(&mut view, &inputs, &groups);
    assert_eq!((view.counts().copied, view.counts().dropped), (1, 0));
}

/// A watch re-list replaces every store entry: the view copies every pod again and indexes
/// afresh rather than taking each old copy off and counting each new one.
#[test]
fn a_relist_indexes_afresh() {
    let groups = [node_group("cpu", 10)];
    let mut inputs = cluster();
    let mut view = View::default();
    one_loop(&mut view, &inputs, &groups);
    inputs.pods = inputs
        .pods
        .iter()
        .map(|p| Arc::new(Pod::clone(p)))
        .collect();
    one_loop(&mut view, &inputs, &groups);
    assert_eq!((view.counts().copied, view.counts().indexed), (40, 2));
}

#[test]
fn copies_not_handed_back_are_made_again() {
    let groups = [node_group("cpu", 10)];
    let inputs = cluster();
    let mut view = View::default();
    let lost = view.update(&inputs, &labels_only(&inputs), &groups, &options());
    drop(lost);
    one_loop(&mut view, &inputs, &groups);
    assert_eq!(
        view.counts(),
        Counts {
            rebuilds: 2,
            copied: 44,
            dropped: 0,
            indexed: 2,
        }
    );
    // Handed back whole this time.
    one_loop(&mut view, &inputs, &groups);
    assert_eq!(view.counts().copied, 0);
}
