//! The Internet-scale workload (issue #28) is the shape the issue names, at a size a test
//! can plan: 800 nodes (80 with 8 GPUs), 400 pending pods (320 singles, 10 gangs of 8).

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use dra_benches::internet::{self, Counts, GANG_SIZE, ZONES};
use dra_plan::PlanOptions;
use dra_plan::gang_apis::GangApisFound;
use dra_plan::report::GangOutcome;
use dra_sim::FeatureGates;
use dra_sim::report::Outcome;

const NODES: usize = 800;

fn load(text: &str) -> dra_sim::ClusterObjects {
    let mut loader = dra_plan::simulate::loader();
    loader.add_json("internet.json", text).unwrap();
    loader.finish().objects
}

#[test]
fn the_generator_is_deterministic_and_writes_one_list() {
    let text = internet::json_text(NODES);
    assert_eq!(text, internet::json_text(NODES));
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["apiVersion"], "v1");
}

#[test]
fn the_cluster_has_the_shape_of_the_issue() {
    let counts = Counts::of(NODES);
    assert_eq!(counts.gpu_nodes, 80);
    assert_eq!(counts.pending(), 400);
    let objects = load(&internet::json_text(NODES));
    assert_eq!(objects.nodes.len(), NODES);
    // One 8-GPU slice per GPU node.
    assert_eq!(objects.resource_slices.len(), counts.gpu_nodes);
    for slice in &objects.resource_slices {
        assert_eq!(slice.spec.devices.as_ref().map(Vec::len), Some(8));
        assert!(slice.spec.node_name.is_some());
    }
    // One running pod per node, then the pending ones.
    let (bound, pending): (Vec<_>, Vec<_>) = objects
        .pods
        .iter()
        .partition(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some());
    assert_eq!(bound.len(), NODES);
    assert_eq!(pending.len(), counts.singles + counts.gangs * GANG_SIZE);
    // 18 node groups over 6 zones, each below its maximum size.
    let groups: Vec<_> = objects
        .extra
        .iter()
        .filter(|o| o.kind == "NodeGroup")
        .collect();
    assert_eq!(groups.len(), 18);
    let zones: BTreeSet<_> = groups
        .iter()
        .map(|g| g.value["spec"]["topologyDomain"]["value"].as_str().unwrap())
        .collect();
    assert_eq!(zones.len(), ZONES.len());
    let mut current: BTreeMap<&str, u64> = BTreeMap::new();
    for node in &objects.nodes {
        let labels = node.metadata.labels.as_ref().unwrap();
        *current
            .entry(labels["dra-autoscaler.io/node-group"].as_str())
            .or_default() += 1;
    }
    for group in &groups {
        let name = group.value["metadata"]["name"].as_str().unwrap();
        let max = group.value["spec"]["maxSize"].as_u64().unwrap();
        assert!(current[name] < max, "{name} is at size");
    }
}

#[test]
fn every_pending_pod_needs_a_new_node_and_every_gang_gets_one_gpu_node() {
    // Every node is full, so nothing pending fits where it is; a gang of 8 one-GPU,
    // 8-CPU, 64 GiB pods fills exactly one 8-GPU, 96-CPU, 1 TiB node.
    let objects = load(&internet::json_text(NODES));
    let gates =
        GangApisFound::in_objects(&objects.extra, &objects.pods, &objects.pod_workload_refs)
            .resolve_gates(FeatureGates::default(), "")
            .unwrap()
            .gates;
    let options = PlanOptions {
        now: None,
        ..PlanOptions::default()
    };
    let (plan, _scale_down) = dra_plan::simulate::plan_and_scale_down(objects, gates, &options);
    let counts = Counts::of(NODES);
    assert_eq!(plan.pods.len(), counts.pending());
    for pod in &plan.pods {
        assert_eq!(pod.outcome, Outcome::FitsNewNode, "{}", pod.pod);
    }
    // Singles are reported as groups of one; the gangs need all 8 members.
    let gangs: Vec<_> = plan
        .pod_groups
        .iter()
        .filter(|g| g.members.len() > 1)
        .collect();
    assert_eq!(gangs.len(), counts.gangs);
    assert_eq!(plan.pod_groups.len(), counts.gangs + counts.singles);
    for gang in &gangs {
        assert_eq!(gang.min_count, GANG_SIZE);
        assert_eq!(gang.outcome, GangOutcome::Lands);
    }
    let gpu_nodes: usize = plan
        .scale_ups
        .iter()
        .filter(|s| s.node_group.starts_with("gpu-"))
        .map(|s| s.count)
        .sum();
    assert_eq!(gpu_nodes, counts.gangs);
}
