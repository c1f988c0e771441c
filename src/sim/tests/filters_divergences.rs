//! Pins every divergence from kube-scheduler listed in `docs/divergences.md`
//! (section "Filters"). Each test asserts what we do today, and says what
//! upstream would do instead.

mod filters_support;

use dra_sim::FeatureGates;
use dra_sim::filters::{FilterState, extended_resource_claim};
use filters_support::{bound, filter_on, labelled_node, node, obj, pod, pod_in, requests};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

fn plain_node(name: &str) -> Node {
    node(
        name,
        json!({"topology.kubernetes.io/zone": "zone-a"}),
        json!({"cpu": "4", "memory": "8Gi", "pods": "110"}),
    )
}

fn pvc_pod(name: &str, claim: &str) -> Pod {
    pod(
        name,
        json!({}),
        json!({"containers": [requests(json!({"cpu": "1"}))],
               "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}),
    )
}

/// F1, F5: upstream VolumeBinding would keep this pod pending (its claim
/// does not exist, so it cannot bind); we place it.
#[test]
fn volume_binding_is_not_modelled() {
    let nodes = [plain_node("n1")];
    assert_eq!(
        filter_on(&nodes, &[], &pvc_pod("p", "missing-claim"), 0),
        Ok(())
    );
}

/// F2: upstream VolumeRestrictions refuses a second user of a
/// ReadWriteOncePod claim; we do not look at claims.
#[test]
fn volume_restrictions_are_not_modelled() {
    let nodes = [plain_node("n1")];
    let first = bound(pvc_pod("first", "rwop-claim"), "n1");
    assert_eq!(
        filter_on(&nodes, &[first], &pvc_pod("second", "rwop-claim"), 0),
        Ok(())
    );
}

/// F3: upstream VolumeZone would refuse a node in another zone than the
/// pod's bound PV; PV zone labels play no part here.
#[test]
fn volume_zone_is_not_modelled() {
    let other_zone = node(
        "n2",
        json!({"topology.kubernetes.io/zone": "zone-b"}),
        json!({"cpu": "4", "pods": "110"}),
    );
    assert_eq!(
        filter_on(
            &[other_zone],
            &[],
            &pvc_pod("p", "claim-bound-in-zone-a"),
            0
        ),
        Ok(())
    );
}

/// F4: upstream NodeVolumeLimits would refuse a pod past the node's CSI
/// attach limit; we place any number of volumes.
#[test]
fn node_volume_limits_are_not_modelled() {
    let nodes = [plain_node("n1")];
    let volumes: Vec<_> = (0..200)
        .map(|i| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": format!("c{i}")}}))
        .collect();
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [], "volumes": volumes}),
    );
    assert_eq!(filter_on(&nodes, &[], &p, 0), Ok(()));
}

/// F6: preferred affinity and PreferNoSchedule only score; they never refuse.
#[test]
fn preferences_do_not_refuse_nodes() {
    let tainted: Node = obj(json!({
        "metadata": {"name": "n1", "labels": {"kind": "a"}},
        "spec": {"taints": [{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]},
        "status": {"allocatable": {"pods": "110"}}
    }));
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [], "affinity": {
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [{"key": "kind", "operator": "In", "values": ["b"]}]}}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "kind"}}]}}}),
    );
    let other = bound(pod("other", json!({}), json!({"containers": []})), "n1");
    assert_eq!(filter_on(&[tainted], &[other], &p, 0), Ok(()));
}

/// F7: upstream ≥ 1.35 says "node(s) had untolerated taint(s)".
#[test]
fn taint_reason_names_the_taint() {
    let tainted: Node = obj(json!({
        "metadata": {"name": "gpu-1"},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"pods": "110"}}
    }));
    let p = pod("p", json!({}), json!({"containers": []}));
    let rejection = filter_on(&[tainted], &[], &p, 0).unwrap_err();
    assert_eq!(
        rejection.reason,
        "node(s) had untolerated taint {nvidia.com/gpu: present}"
    );
}

/// F8: upstream would count the resized pod at 3 CPUs (its allocated
/// resources); we count its spec's 1 CPU, so 3 more CPUs still fit.
#[test]
fn resized_pods_count_by_spec() {
    let nodes = [plain_node("n1")];
    let mut resized = bound(
        pod(
            "resized",
            json!({}),
            json!({"containers": [requests(json!({"cpu": "1"}))]}),
        ),
        "n1",
    );
    resized.status = Some(obj(json!({"containerStatuses": [{
        "name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
        "allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3"}}}]})));
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [requests(json!({"cpu": "3"}))]}),
    );
    assert_eq!(filter_on(&nodes, &[resized], &p, 0), Ok(()));
}

/// F9: a profile could ignore `example.com/license`; the default checks it.
#[test]
fn fit_arguments_are_the_defaults() {
    let nodes = [plain_node("n1")];
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [requests(json!({"example.com/license": "1"}))]}),
    );
    assert_eq!(
        filter_on(&nodes, &[], &p, 0).unwrap_err().reason,
        "Insufficient example.com/license"
    );
}

/// F10: with the alpha gate, `Gt` would tolerate a taint whose value is
/// larger; here it tolerates nothing.
#[test]
fn comparison_operators_tolerate_nothing() {
    let tainted: Node = obj(json!({
        "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "tier", "value": "5", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"pods": "110"}}
    }));
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [], "tolerations": [{"key": "tier", "operator": "Gt", "value": "3", "effect": "NoSchedule"}]}),
    );
    assert_eq!(
        filter_on(&[tainted], &[], &p, 0).unwrap_err().plugin,
        "TaintToleration"
    );
}

/// F11: upstream would preempt the low-priority pod; we refuse the node.
#[test]
fn no_preemption() {
    let nodes = [plain_node("n1")];
    let low = bound(
        pod(
            "low",
            json!({}),
            json!({"priority": 0, "containers": [requests(json!({"cpu": "4"}))]}),
        ),
        "n1",
    );
    let high = pod(
        "high",
        json!({}),
        json!({"priority": 1000, "containers": [requests(json!({"cpu": "1"}))]}),
    );
    assert_eq!(
        filter_on(&nodes, &[low], &high, 0).unwrap_err().reason,
        "Insufficient cpu"
    );
}

/// F12: a gated pod passes the filters; the caller must leave it pending.
#[test]
fn scheduling_gates_are_the_callers_job() {
    let nodes = [plain_node("n1")];
    let gated = pod(
        "gated",
        json!({}),
        json!({"containers": [], "schedulingGates": [{"name": "example.com/wait"}]}),
    );
    assert_eq!(filter_on(&nodes, &[], &gated, 0), Ok(()));
}

/// F13: the existing pod's namespace `team-x` is not in the snapshot, yet
/// the incoming pod's anti-affinity with `namespaceSelector: {}` sees it.
#[test]
fn unlisted_namespaces_exist_without_labels() {
    let nodes = [labelled_node("n1", json!({"kubernetes.io/hostname": "n1"}))];
    let existing = bound(
        pod_in(
            "team-x",
            "other",
            json!({"app": "db"}),
            json!({"containers": []}),
        ),
        "n1",
    );
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [], "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "namespaceSelector": {},
             "topologyKey": "kubernetes.io/hostname"}]}}}),
    );
    assert_eq!(
        filter_on(&nodes, &[existing], &p, 0).unwrap_err().reason,
        "node(s) didn't match pod anti-affinity rules"
    );
}

/// F14: the bound pod's request does not parse and counts as zero, so the
/// whole node is free; the node's bad memory entry is zero too.
#[test]
fn bad_quantities_of_bound_objects_count_as_zero() {
    let n = node(
        "n1",
        json!({}),
        json!({"cpu": "2", "memory": "lots", "pods": "110"}),
    );
    let damaged = bound(
        pod(
            "damaged",
            json!({}),
            json!({"containers": [requests(json!({"cpu": "two"}))]}),
        ),
        "n1",
    );
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [requests(json!({"cpu": "2"}))]}),
    );
    assert_eq!(
        filter_on(
            std::slice::from_ref(&n),
            std::slice::from_ref(&damaged),
            &p,
            0
        ),
        Ok(())
    );
    let wants_memory = pod(
        "m",
        json!({}),
        json!({"containers": [requests(json!({"memory": "1"}))]}),
    );
    assert_eq!(
        filter_on(&[n], &[damaged], &wants_memory, 0)
            .unwrap_err()
            .reason,
        "Insufficient memory"
    );
}

/// F15: upstream names the claim `<pod>-extended-resources-<random>` when it
/// writes it.
#[test]
fn the_extended_resource_claim_has_a_stable_name() {
    let class = obj(
        json!({"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}),
    );
    let p = pod(
        "trainer",
        json!({}),
        json!({"containers": [requests(json!({"example.com/gpu": "1"}))]}),
    );
    let claim = extended_resource_claim(&p, &plain_node("n1"), &[class], &FeatureGates::default())
        .expect("test data is valid");
    assert_eq!(
        claim.metadata.name.as_deref(),
        Some("trainer-extended-resources")
    );
}

#[test]
fn the_divergence_list_names_every_pinning_test() {
    let doc = include_str!("../../../docs/divergences.md");
    for test in [
        "volume_binding_is_not_modelled",
        "volume_restrictions_are_not_modelled",
        "volume_zone_is_not_modelled",
        "node_volume_limits_are_not_modelled",
        "preferences_do_not_refuse_nodes",
        "taint_reason_names_the_taint",
        "resized_pods_count_by_spec",
        "fit_arguments_are_the_defaults",
        "comparison_operators_tolerate_nothing",
        "no_preemption",
        "scheduling_gates_are_the_callers_job",
        "unlisted_namespaces_exist_without_labels",
        "bad_quantities_of_bound_objects_count_as_zero",
        "the_extended_resource_claim_has_a_stable_name",
    ] {
        assert!(
            doc.contains(test),
            "docs/divergences.md does not name {test}"
        );
    }
    // A state with no nodes still answers, with its own name as the plugin.
    let state = FilterState::new(&[], &[], &[]);
    let p = pod("p", json!({}), json!({"containers": []}));
    let prepared = state.prepare(&p, &[]).expect("test data is valid");
    assert_eq!(
        state
            .filter(&prepared, 0, &plain_node("x"))
            .unwrap_err()
            .plugin,
        "FilterState"
    );
}
