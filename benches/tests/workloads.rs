//! The benchmark workloads are what they claim to be.

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use dra_benches::{gpu_cluster, karpenter};
use dra_sim::FeatureGates;
use dra_sim::report::Outcome;
use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeSet;

#[test]
fn gpu_cluster_fills_exactly_its_gpus() {
    // 10 nodes × 8 GPUs = 80 devices: 80 pods fit, the 81st does not.
    let report = dra_sim::simulate::simulate(gpu_cluster(10, 8, 81), FeatureGates::default());
    let fits = report
        .pods
        .iter()
        .filter(|p| p.outcome == Outcome::Fits)
        .count();
    assert_eq!(fits, 80);
    assert_eq!(report.pods[80].outcome, Outcome::Unschedulable);
    // First fit in node name order: the first 8 pods land on the first node.
    assert_eq!(report.pods[7].node.as_deref(), Some("node-00000"));
    assert_eq!(report.pods[8].node.as_deref(), Some("node-00001"));
}

#[test]
fn karpenter_workload_matches_the_upstream_benchmark_facts() {
    let groups = karpenter::node_groups();
    assert_eq!(groups.len(), 2_000, "400 shapes × 5 offerings");
    let (read, errors) = dra_plan::groups::read_groups(&groups, &[]);
    assert!(errors.is_empty(), "{errors:?}");
    let smallest = read
        .iter()
        .find(|g| g.name == "fake-it-0-test-zone-1-spot")
        .unwrap();
    assert_eq!(smallest.spec.template.capacity["cpu"].0, "1");
    assert_eq!(smallest.spec.template.capacity["memory"].0, "2Gi");
    assert_eq!(smallest.spec.template.capacity["pods"].0, "10");
    assert!((karpenter::price(0) - (0.1 + 0.1 * 2.147_483_648)).abs() < 1e-12);
    karpenter_pods_match_upstream_make_diverse_pods();
}

/// What a Karpenter benchmark pod is, by upstream's `makeDiversePods` part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Generic,
    ZoneSpread,
    HostnameSpread,
    ZoneAffinity,
    HostnameAntiAffinity,
}

fn match_labels(selector: Option<&LabelSelector>) -> Vec<(String, String)> {
    selector
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// Classifies `pod` and checks its labels and its constraint are the ones
/// upstream gives that part.
fn part_of(pod: &Pod) -> Part {
    let name = pod.metadata.name.as_deref().unwrap();
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let keys: Vec<&str> = labels.keys().map(String::as_str).collect();
    let spec = pod.spec.as_ref().unwrap();
    let values = ["a", "b", "c", "d", "e", "f", "g"];
    let random_value = |labels: &[(String, String)], key: &str| {
        labels.len() == 1 && labels[0].0 == key && values.contains(&labels[0].1.as_str())
    };
    let own: Vec<(String, String)> = labels.clone().into_iter().collect();
    match (&spec.topology_spread_constraints, &spec.affinity) {
        (None, None) => {
            assert!(random_value(&own, "my-label"), "{name}: {labels:?}");
            Part::Generic
        }
        (Some(constraints), None) => {
            assert!(random_value(&own, "my-label"), "{name}: {labels:?}");
            assert_eq!(constraints.len(), 1, "{name}");
            let c = &constraints[0];
            assert_eq!(
                (c.max_skew, c.when_unsatisfiable.as_str()),
                (1, "DoNotSchedule"),
                "{name}"
            );
            let selected = match_labels(c.label_selector.as_ref());
            assert!(random_value(&selected, "my-label"), "{name}: {selected:?}");
            match c.topology_key.as_str() {
                karpenter::ZONE => Part::ZoneSpread,
                karpenter::HOSTNAME => Part::HostnameSpread,
                other => panic!("{name}: spread on {other}"),
            }
        }
        (None, Some(affinity)) => {
            let required = |terms: Option<&Vec<PodAffinityTerm>>| {
                let terms = terms.unwrap();
                assert_eq!(terms.len(), 1, "{name}");
                (
                    match_labels(terms[0].label_selector.as_ref()),
                    terms[0].topology_key.clone(),
                )
            };
            match (&affinity.pod_affinity, &affinity.pod_anti_affinity) {
                (Some(a), None) => {
                    assert!(random_value(&own, "my-affininity"), "{name}: {labels:?}");
                    let (selected, key) = required(
                        a.required_during_scheduling_ignored_during_execution
                            .as_ref(),
                    );
                    assert_eq!((selected, key.as_str()), (own, karpenter::ZONE), "{name}");
                    assert!(
                        a.preferred_during_scheduling_ignored_during_execution
                            .is_none()
                    );
                    Part::ZoneAffinity
                }
                (None, Some(a)) => {
                    assert_eq!(keys, ["app"], "{name}");
                    let nginx = vec![("app".to_string(), "nginx".to_string())];
                    assert_eq!(own, nginx, "{name}");
                    let (selected, key) = required(
                        a.required_during_scheduling_ignored_during_execution
                            .as_ref(),
                    );
                    assert_eq!(
                        (selected, key.as_str()),
                        (nginx, karpenter::HOSTNAME),
                        "{name}"
                    );
                    assert!(
                        a.preferred_during_scheduling_ignored_during_execution
                            .is_none()
                    );
                    Part::HostnameAntiAffinity
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        other => panic!("{name}: both spread and affinity: {other:?}"),
    }
}

fn karpenter_pods_match_upstream_make_diverse_pods() {
    // 103 pods: five parts of 103 / 5 = 20, then the 3 left over as generic.
    let pods = karpenter::pods(103);
    assert_eq!(pods.len(), 103);
    let parts: Vec<Part> = pods.iter().map(part_of).collect();
    let expected: Vec<Part> = [
        (Part::Generic, 20),
        (Part::ZoneSpread, 20),
        (Part::HostnameSpread, 20),
        (Part::ZoneAffinity, 20),
        (Part::HostnameAntiAffinity, 20),
        (Part::Generic, 3),
    ]
    .into_iter()
    .flat_map(|(part, count)| std::iter::repeat_n(part, count))
    .collect();
    assert_eq!(parts, expected);
    // Only the anti-affinity pods carry app=nginx.
    for (pod, part) in pods.iter().zip(&parts) {
        let nginx = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .is_some_and(|v| v == "nginx");
        assert_eq!(
            nginx,
            *part == Part::HostnameAntiAffinity,
            "{:?}",
            pod.metadata.name
        );
    }
    // The spread selector's value is a second draw, not the pod's own label.
    let independent = pods.iter().any(|p| {
        let spec = p.spec.as_ref().unwrap();
        spec.topology_spread_constraints.as_ref().is_some_and(|c| {
            match_labels(c[0].label_selector.as_ref())
                != p.metadata
                    .labels
                    .clone()
                    .unwrap()
                    .into_iter()
                    .collect::<Vec<_>>()
        })
    });
    assert!(
        independent,
        "some spread pod selects other pods than its own kind"
    );
    // Requests come from upstream's sets, and the draws are not all alike.
    let values = ["a", "b", "c", "d", "e", "f", "g"];
    let cpus = ["100m", "250m", "500m", "1000m", "1500m"];
    let memories = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"];
    let mut seen_cpu = BTreeSet::new();
    let mut seen_memory = BTreeSet::new();
    let mut seen_values = BTreeSet::new();
    for pod in &pods {
        let name = pod.metadata.name.as_deref().unwrap();
        let containers = &pod.spec.as_ref().unwrap().containers;
        assert_eq!(containers.len(), 1, "{name}");
        let requests = containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .unwrap();
        assert_eq!(requests.len(), 2, "{name}: {requests:?}");
        let cpu = requests["cpu"].0.as_str();
        let memory = requests["memory"].0.as_str();
        assert!(cpus.contains(&cpu), "{name}: cpu {cpu}");
        assert!(memories.contains(&memory), "{name}: memory {memory}");
        seen_cpu.insert(cpu.to_string());
        seen_memory.insert(memory.to_string());
        seen_values.extend(pod.metadata.labels.clone().unwrap().into_values());
    }
    assert_eq!(
        seen_cpu.len(),
        cpus.len(),
        "every cpu value drawn in 103 pods"
    );
    assert_eq!(
        seen_memory.len(),
        memories.len(),
        "every memory value drawn in 103 pods"
    );
    assert_eq!(seen_values.len(), 8, "a..g and nginx: {seen_values:?}");
    // Seed 42 and upstream's order of draws per pod: the label value, then
    // (spread pods) the selector's value, then CPU, then memory.
    let mut rng = karpenter::SplitMix::new(42);
    let mut draw = |of: &[&'static str]| of[rng.below(of.len() as u64) as usize];
    for (pod, part) in pods.iter().zip(&parts) {
        let name = pod.metadata.name.as_deref().unwrap();
        let labels = pod.metadata.labels.as_ref().unwrap();
        let spec = pod.spec.as_ref().unwrap();
        if *part != Part::HostnameAntiAffinity {
            let key = if *part == Part::ZoneAffinity {
                "my-affininity"
            } else {
                "my-label"
            };
            assert_eq!(labels[key], draw(&values), "{name}: label value");
        }
        if let Some(constraints) = &spec.topology_spread_constraints {
            let selected = match_labels(constraints[0].label_selector.as_ref());
            assert_eq!(selected[0].1, draw(&values), "{name}: selector value");
        }
        let requests = spec.containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .unwrap();
        assert_eq!(requests["cpu"].0, draw(&cpus), "{name}: cpu");
        assert_eq!(requests["memory"].0, draw(&memories), "{name}: memory");
    }
    // Fewer than five pods: all generic.
    let few = karpenter::pods(4);
    assert!(few.iter().all(|p| part_of(p) == Part::Generic));
    assert!(karpenter::pods(0).is_empty());
    // Fixed seed: the same pods every time.
    assert_eq!(karpenter::pods(103), pods);
}

#[test]
fn karpenter_price_lower_bound_takes_the_binding_resource() {
    let mut pods = karpenter::pods(5);
    // Part order: generic, zone spread, hostname spread, zone affinity,
    // anti-affinity; set the requests by hand.
    for (pod, (cpu, memory)) in pods.iter_mut().zip([
        ("1500m", "4096Mi"),
        ("1500m", "4096Mi"),
        ("100m", "4096Mi"),
        ("100m", "100Mi"),
        ("100m", "100Mi"),
    ]) {
        let requests = pod.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap()
            .requests
            .as_mut()
            .unwrap();
        requests.insert("cpu".into(), Quantity(cpu.into()));
        requests.insert("memory".into(), Quantity(memory.into()));
    }
    // CPU 3.3 cores, memory 12Gi + 200Mi = 6.1 units of 2 GiB → 7 units.
    let bound = karpenter::price_lower_bound(&pods);
    assert!((bound - 7.0 * karpenter::price(0)).abs() < 1e-9, "{bound}");
    // One pod alone still needs one unit.
    assert!((karpenter::price_lower_bound(&pods[3..4]) - karpenter::price(0)).abs() < 1e-9);
}

fn with_requests(
    mut pod: k8s_openapi::api::core::v1::Pod,
    cpu: &str,
    memory: &str,
) -> k8s_openapi::api::core::v1::Pod {
    let requests = pod.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap();
    requests.insert("cpu".into(), Quantity(cpu.into()));
    requests.insert("memory".into(), Quantity(memory.into()));
    pod
}

#[test]
fn karpenter_model_packs_fewest_pods_first_and_keeps_anti_affinity_apart() {
    let pods = karpenter::pods(5);
    let (generic, anti) = (pods[0].clone(), pods[4].clone());
    let input = [
        with_requests(anti.clone(), "1000m", "1Gi"),
        with_requests(generic, "1500m", "4Gi"),
        with_requests(anti, "100m", "100Mi"),
    ];
    // Queue order by CPU: the generic pod opens node 0; the first anti pod
    // joins it (2.5 CPU, 5 GiB: 3 units); the second anti pod may not, and
    // opens node 1 (1 unit).
    let (nodes, price) = karpenter::karpenter_model(&input);
    assert_eq!(nodes, 2);
    assert!((price - 4.0 * karpenter::price(0)).abs() < 1e-9, "{price}");
}

#[test]
fn colocated_gang_lands_whole_in_the_only_domain_that_holds_it() {
    use dra_benches::colocated;
    let report = dra_plan::plan(
        colocated::workload(64, 50),
        FeatureGates::default(),
        &dra_plan::PlanOptions::default(),
    );
    assert_eq!(report.pod_groups.len(), 1);
    assert_eq!(
        report.pod_groups[0].outcome,
        dra_plan::report::GangOutcome::Lands
    );
    assert_eq!(report.scale_ups.len(), 1, "{:?}", report.scale_ups);
    assert_eq!(report.scale_ups[0].node_group, "pg-49");
    assert_eq!(report.scale_ups[0].count, 64 / colocated::PER_NODE);
    // One domain short of the gang: it waits, naming all 50 domains.
    let mut short = colocated::workload(64, 50);
    short.extra.retain(|o| {
        o.value
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            != Some("pg-49")
    });
    let report = dra_plan::plan(
        short,
        FeatureGates::default(),
        &dra_plan::PlanOptions::default(),
    );
    let reasons = &report.pod_groups[0].reasons;
    assert!(report.scale_ups.is_empty());
    for i in 0..49 {
        let prefix = format!("{}=pg-{i:02}: ", colocated::KEY);
        assert!(
            reasons.iter().any(|r| r.starts_with(&prefix)),
            "{prefix} in {reasons:?}"
        );
    }
}
