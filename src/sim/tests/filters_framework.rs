//! The framework around the plugins: upstream's Filter order (the first
//! refusal wins), `check` agreeing with `filter`, node indexes, and a
//! property test that arbitrary quantities and labels never make a filter
//! panic.

mod filters_support;

use dra_sim::filters::{FilterState, Plugin};
use filters_support::{bound, labelled_node, node, obj, pod, requests};
use k8s_openapi::api::core::v1::{Node, Pod};
use proptest::prelude::*;
use serde_json::{Value, json};

/// (name, node, pods on it, incoming pod, refusing plugin).
type Step = (&'static str, Node, Vec<Pod>, Pod, Option<&'static str>);

/// A node that fails every filter, and the pod it fails them for; each step
/// removes the first problem, so the next plugin in upstream's order speaks.
#[test]
fn filters_run_in_upstream_order_and_the_first_refusal_wins() {
    let problems = |cordoned: bool,
                    tainted: bool,
                    labelled: bool,
                    port_taken: bool,
                    small: bool,
                    zone: bool| {
        let mut labels = json!({});
        if labelled {
            labels["disk"] = json!("ssd");
        }
        if zone {
            labels["zone"] = json!("z1");
        }
        let taints = if tainted {
            json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        let cpu = if small { "1" } else { "8" };
        let n: Node = obj(json!({
            "metadata": {"name": "node-1", "labels": labels},
            "spec": {"unschedulable": cordoned, "taints": taints},
            "status": {"allocatable": {"cpu": cpu, "pods": "110"}}
        }));
        let mut bound_pods = Vec::new();
        if port_taken {
            bound_pods.push(bound(
                pod("web", json!({}), json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]})),
                "node-1",
            ));
        }
        (n, bound_pods)
    };
    let incoming = |node_name: &str| -> Pod {
        pod(
            "p",
            json!({"app": "x"}),
            json!({
                "nodeName": node_name,
                "nodeSelector": {"disk": "ssd"},
                "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}],
                                "resources": {"requests": {"cpu": "2"}}}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "x"}}}]
            }),
        )
    };
    let steps: Vec<Step> = {
        let mut v = Vec::new();
        let (n, b) = problems(true, true, false, true, true, false);
        v.push((
            "cordoned",
            n,
            b,
            incoming("elsewhere"),
            Some("NodeUnschedulable"),
        ));
        let (n, b) = problems(false, true, false, true, true, false);
        v.push((
            "named elsewhere",
            n,
            b,
            incoming("elsewhere"),
            Some("NodeName"),
        ));
        let (n, b) = problems(false, true, false, true, true, false);
        v.push(("tainted", n, b, incoming("node-1"), Some("TaintToleration")));
        let (n, b) = problems(false, false, false, true, true, false);
        v.push(("unlabelled", n, b, incoming("node-1"), Some("NodeAffinity")));
        let (n, b) = problems(false, false, true, true, true, false);
        v.push(("port taken", n, b, incoming("node-1"), Some("NodePorts")));
        let (n, b) = problems(false, false, true, false, true, false);
        v.push((
            "too small",
            n,
            b,
            incoming("node-1"),
            Some("NodeResourcesFit"),
        ));
        let (n, b) = problems(false, false, true, false, false, false);
        v.push((
            "no zone label",
            n,
            b,
            incoming("node-1"),
            Some("PodTopologySpread"),
        ));
        let (n, b) = problems(false, false, true, false, false, true);
        v.push(("fits", n, b, incoming("node-1"), None));
        v
    };
    for (name, n, bound_pods, p, want) in steps {
        let state = FilterState::new(std::slice::from_ref(&n), &bound_pods, &[]);
        let prepared = state
            .prepare(&p, std::slice::from_ref(&n))
            .expect("test data is valid");
        let got = state.filter(&prepared, 0, &n).err();
        assert_eq!(got.as_ref().map(|r| r.plugin), want, "{name}: {got:?}");
        let checked = state.check(&prepared, 0, &n).err();
        assert_eq!(checked.map(|r| r.plugin()), want, "{name}: check agrees");
        if let (Some(rejection), Some(refusal)) = (got, checked) {
            assert_eq!(
                refusal.reason(&prepared, &n),
                rejection.reason,
                "{name}: same words"
            );
        }
    }
}

#[test]
fn plugin_order_is_upstreams() {
    let names: Vec<&str> = Plugin::ORDER.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "PodTopologySpread",
            "InterPodAffinity"
        ]
    );
}

#[test]
fn nodes_are_indexed_in_the_order_given_and_added() {
    let nodes = [labelled_node("b", json!({})), labelled_node("a", json!({}))];
    let mut state = FilterState::new(&nodes, &[], &[]);
    assert_eq!(state.node_count(), 2);
    assert_eq!(state.node_index("b"), Some(0));
    assert_eq!(state.add_node(&labelled_node("template", json!({}))), 2);
    assert_eq!(state.node_index("template"), Some(2));
    assert_eq!(state.node_index("missing"), None);
}

#[test]
fn resources_of_a_template_node_added_later_count() {
    let mut state = FilterState::new(&[], &[], &[]);
    let p = pod(
        "p",
        json!({}),
        json!({"containers": [requests(json!({"nvidia.com/gpu": "2"}))]}),
    );
    let prepared = state.prepare(&p, &[]).expect("test data is valid");
    let template = node(
        "gpu-template",
        json!({}),
        json!({"nvidia.com/gpu": "8", "pods": "110"}),
    );
    let index = state.add_node(&template);
    assert_eq!(state.filter(&prepared, index, &template), Ok(()));
    let small = node(
        "small",
        json!({}),
        json!({"nvidia.com/gpu": "1", "pods": "110"}),
    );
    let index = state.add_node(&small);
    assert_eq!(
        state.filter(&prepared, index, &small).unwrap_err().reason,
        "Insufficient nvidia.com/gpu"
    );
}

fn quantity() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..100_000).prop_map(|n| n.to_string()),
        (0u64..100_000).prop_map(|n| format!("{n}m")),
        (0u64..64).prop_map(|n| format!("{n}Gi")),
        "[0-9]{1,30}(\\.[0-9]{0,12})?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|e[0-9]{1,3}|e-[0-9]{1,3})?",
        "\\PC{0,12}",
    ]
}

fn label() -> impl Strategy<Value = (String, String)> {
    ("[a-z]{1,3}(/[a-z]{1,3})?", "[a-z0-9]{0,3}")
}

fn resource_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cpu".to_string()),
        Just("memory".to_string()),
        Just("ephemeral-storage".to_string()),
        Just("pods".to_string()),
        Just("hugepages-2Mi".to_string()),
        Just("nvidia.com/gpu".to_string()),
        "[a-z]{1,4}(\\.[a-z]{1,3})?/[a-z]{1,4}",
    ]
}

fn list(entries: Vec<(String, String)>) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the quantities and labels, prepare either succeeds or says
    /// why, and no filter panics.
    #[test]
    fn filters_never_panic(
        allocatable in proptest::collection::vec((resource_name(), quantity()), 0..6),
        used in proptest::collection::vec((resource_name(), quantity()), 0..4),
        wanted in proptest::collection::vec((resource_name(), quantity()), 0..4),
        node_labels in proptest::collection::vec(label(), 0..4),
        pod_labels in proptest::collection::vec(label(), 0..4),
        selector in proptest::collection::vec(label(), 0..3),
        max_skew in -2i32..4,
        min_domains in proptest::option::of(-1i32..4),
    ) {
        let n = node("n", list(node_labels.clone()), list(allocatable));
        let existing = bound(pod("e", list(pod_labels.clone()), json!({"containers": [requests(list(used))]})), "n");
        let key = node_labels.first().map_or("zone".to_string(), |(k, _)| k.clone());
        let mut constraint = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": list(selector.clone())}});
        if let Some(min) = min_domains {
            constraint["minDomains"] = json!(min);
        }
        let p = pod("p", list(pod_labels), json!({
            "containers": [requests(list(wanted))],
            "nodeSelector": list(selector.clone()),
            "topologySpreadConstraints": [constraint],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": list(selector)}, "topologyKey": key}]}}
        }));
        let mut state = FilterState::new(std::slice::from_ref(&n), std::slice::from_ref(&existing), &[]);
        if let Ok(prepared) = state.prepare(&p, std::slice::from_ref(&n)) {
            let _ = state.filter(&prepared, 0, &n);
            for plugin in Plugin::ORDER {
                let _ = state.check_plugin(plugin, &prepared, 0, &n);
            }
            state.add_pod(&p, 0);
            let _ = state.filter(&prepared, 0, &n);
            let _ = state.filter(&prepared, 7, &n);
        }
    }

    /// For whole numbers, NodeResourcesFit is upstream's arithmetic:
    /// cpu fits iff request <= allocatable - requested.
    #[test]
    fn cpu_fits_exactly_when_upstream_says_so(alloc in 0i64..10_000, used in 0i64..10_000, want in 1i64..10_000) {
        let n = node("n", json!({}), json!({"cpu": format!("{alloc}m"), "pods": "10"}));
        let existing = bound(pod("e", json!({}), json!({"containers": [requests(json!({"cpu": format!("{used}m")}))]})), "n");
        let p = pod("p", json!({}), json!({"containers": [requests(json!({"cpu": format!("{want}m")}))]}));
        let state = FilterState::new(std::slice::from_ref(&n), &[existing], &[]);
        let prepared = state.prepare(&p, std::slice::from_ref(&n)).expect("test data is valid");
        let fits = state.filter(&prepared, 0, &n).is_ok();
        prop_assert_eq!(fits, want <= alloc - used);
    }
}

#[test]
fn rolling_back_placements_and_template_nodes_restores_every_answer() {
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            node(
                &format!("n{i}"),
                json!({"kubernetes.io/hostname": format!("n{i}"), "zone": format!("z{}", i % 2)}),
                json!({"cpu": "4", "pods": "110"}),
            )
        })
        .collect();
    let replica = pod(
        "r",
        json!({"app": "web"}),
        json!({
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}],
                            "resources": {"requests": {"cpu": "2"}}}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        }),
    );
    let mut state = FilterState::new(&nodes, &[], &[]);
    let answers = |state: &FilterState| -> Vec<Option<String>> {
        let prepared = state.prepare(&replica, &nodes).expect("valid pod");
        (0..nodes.len())
            .map(|i| {
                state
                    .filter(&prepared, i, &nodes[i])
                    .err()
                    .map(|r| r.reason.to_string())
            })
            .collect()
    };
    let before = answers(&state);
    state.add_pod(&replica, 0);
    let template = node(
        "template",
        json!({"kubernetes.io/hostname": "template", "zone": "z9"}),
        json!({"cpu": "4", "pods": "110"}),
    );
    let index = state.add_node(&template);
    state.add_pod(&replica, index);
    assert_ne!(answers(&state), before, "the placements change the answers");
    state.remove_last_pod();
    state.remove_last_node();
    state.remove_last_pod();
    assert_eq!(answers(&state), before);
    assert_eq!(state.node_count(), 3);
    assert_eq!(state.node_index("template"), None);
}
