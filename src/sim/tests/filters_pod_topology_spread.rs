//! PodTopologySpread (DoNotSchedule), ported from upstream: the unit tables
//! of `podtopologyspread/filtering_test.go` (TestSingleConstraint,
//! TestMultipleConstraints; the plugin alone, per node) and the whole-filter
//! table of `test/integration/scheduler/filters` (TestPodTopologySpreadFilter;
//! which nodes the pod can land on). Case names are upstream's.

mod filters_support;

use std::collections::BTreeMap;

use dra_sim::filters::{FilterState, Plugin};
use filters_support::{bound, fitting_nodes, obj, plugin_reason, pod};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

const SKEW: &str = "node(s) didn't match pod topology spread constraints";
const MISSING: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

fn node(name: &str, labels: Value) -> Node {
    obj(
        json!({"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"pods": "110"}}}),
    )
}

fn tainted_node(name: &str, labels: Value) -> Node {
    obj(json!({"metadata": {"name": name, "labels": labels},
               "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
               "status": {"allocatable": {"pods": "110"}}}))
}

/// `MakeLabelSelector().Exists(key)`.
fn exists(key: &str) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "Exists"}]})
}

fn constraint(max_skew: i32, key: &str, selector: Value) -> Value {
    json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector})
}

fn incoming(labels: Value, constraints: Vec<Value>, extra: Value) -> Pod {
    let mut spec = json!({"containers": [], "topologySpreadConstraints": constraints});
    if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
        spec.extend(extra);
    }
    pod("p", labels, spec)
}

fn existing(name: &str, node: &str, labels: Value) -> Pod {
    bound(pod(name, labels, json!({"containers": []})), node)
}

/// (name, nodes, placed pods, incoming pod, plugin reason per node).
type PerNodeCase = (
    &'static str,
    Vec<Node>,
    Vec<Pod>,
    Pod,
    Vec<(&'static str, Option<&'static str>)>,
);

/// (name, nodes, placed pods, incoming pod, nodes it can land on).
type CandidateCase = (&'static str, Vec<Node>, Vec<Pod>, Pod, Vec<&'static str>);

fn foo() -> Value {
    json!({"foo": ""})
}

/// Four nodes: node-a, node-b in zone1; node-x, node-y in zone2.
fn zone_nodes() -> Vec<Node> {
    ["node-a", "node-b", "node-x", "node-y"]
        .iter()
        .map(|n| {
            let zone = if *n < "node-x" { "zone1" } else { "zone2" };
            node(n, json!({"zone": zone, "node": n}))
        })
        .collect()
}

/// Runs the plugin alone on every node: node name → reason (None = fits).
fn per_node(nodes: &[Node], existing: &[Pod], pod: &Pod) -> BTreeMap<String, Option<String>> {
    let state = FilterState::new(nodes, existing, &[]);
    let prepared = state.prepare(pod, nodes).expect("test data is valid");
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let name = n.metadata.name.clone().expect("test data is valid");
            (
                name,
                plugin_reason(&state, Plugin::PodTopologySpread, &prepared, i, n),
            )
        })
        .collect()
}

fn expect(nodes: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
    nodes
        .iter()
        .map(|(n, r)| ((*n).to_string(), r.map(str::to_string)))
        .collect()
}

#[test]
fn single_constraint() {
    let zone_foo = || incoming(foo(), vec![constraint(1, "zone", exists("foo"))], json!({}));
    let node_foo = |skew| {
        incoming(
            foo(),
            vec![constraint(skew, "node", exists("foo"))],
            json!({}),
        )
    };
    let pods_2_1_0_3 = || {
        vec![
            existing("p-a1", "node-a", foo()),
            existing("p-a2", "node-a", foo()),
            existing("p-b1", "node-b", foo()),
            existing("p-y1", "node-y", foo()),
            existing("p-y2", "node-y", foo()),
            existing("p-y3", "node-y", foo()),
        ]
    };
    let s = Some(SKEW);
    let cases: Vec<PerNodeCase> = vec![
        (
            "no existing pods",
            zone_nodes(),
            vec![],
            zone_foo(),
            vec![
                ("node-a", None),
                ("node-b", None),
                ("node-x", None),
                ("node-y", None),
            ],
        ),
        (
            "no existing pods, incoming pod doesn't match itself",
            zone_nodes(),
            vec![],
            incoming(foo(), vec![constraint(1, "zone", exists("bar"))], json!({})),
            vec![
                ("node-a", None),
                ("node-b", None),
                ("node-x", None),
                ("node-y", None),
            ],
        ),
        (
            "existing pods in a different namespace do not count",
            zone_nodes(),
            vec![
                bound(
                    filters_support::pod_in("ns1", "p-a1", foo(), json!({"containers": []})),
                    "node-a",
                ),
                bound(
                    filters_support::pod_in("ns2", "p-b1", foo(), json!({"containers": []})),
                    "node-a",
                ),
                existing("p-x1", "node-x", foo()),
                existing("p-y1", "node-y", foo()),
            ],
            zone_foo(),
            vec![
                ("node-a", None),
                ("node-b", None),
                ("node-x", s),
                ("node-y", s),
            ],
        ),
        (
            "pods spread across zones as 3/3, all nodes fit",
            zone_nodes(),
            pods_2_1_0_3(),
            zone_foo(),
            vec![
                ("node-a", None),
                ("node-b", None),
                ("node-x", None),
                ("node-y", None),
            ],
        ),
        (
            "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
            vec![
                node("node-a", json!({"zone": "zone1", "node": "node-a"})),
                node("node-b", json!({"zon": "zone1", "node": "node-b"})),
                node("node-x", json!({"zone": "zone2", "node": "node-x"})),
                node("node-y", json!({"zone": "zone2", "node": "node-y"})),
            ],
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-b1", "node-b", foo()),
                existing("p-x1", "node-x", foo()),
                existing("p-y1", "node-y", foo()),
            ],
            zone_foo(),
            vec![
                ("node-a", None),
                ("node-b", Some(MISSING)),
                ("node-x", s),
                ("node-y", s),
            ],
        ),
        (
            "pod cannot be scheduled as all nodes don't have label 'rack'",
            vec![
                node("node-a", json!({"zone": "zone1", "node": "node-a"})),
                node("node-x", json!({"zone": "zone2", "node": "node-x"})),
            ],
            vec![],
            incoming(foo(), vec![constraint(1, "rack", exists("foo"))], json!({})),
            vec![("node-a", Some(MISSING)), ("node-x", Some(MISSING))],
        ),
        (
            "pods spread across nodes as 2/1/0/3, only node-x fits",
            zone_nodes(),
            pods_2_1_0_3(),
            node_foo(1),
            vec![
                ("node-a", s),
                ("node-b", s),
                ("node-x", None),
                ("node-y", s),
            ],
        ),
        (
            "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
            zone_nodes(),
            pods_2_1_0_3(),
            node_foo(2),
            vec![
                ("node-a", s),
                ("node-b", None),
                ("node-x", None),
                ("node-y", s),
            ],
        ),
        (
            "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
            zone_nodes(),
            pods_2_1_0_3(),
            incoming(
                json!({"bar": ""}),
                vec![constraint(1, "node", exists("foo"))],
                json!({}),
            ),
            vec![
                ("node-a", s),
                ("node-b", None),
                ("node-x", None),
                ("node-y", s),
            ],
        ),
        (
            "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
            zone_nodes(),
            pods_2_1_0_3(),
            incoming(
                foo(),
                vec![constraint(1, "node", exists("foo"))],
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}]}}}}),
            ),
            // node-b and node-x fail NodeAffinity itself; the plugin alone passes them.
            vec![
                ("node-a", None),
                ("node-b", None),
                ("node-x", None),
                ("node-y", s),
            ],
        ),
        (
            "terminating Pods should be excluded",
            vec![
                node("node-a", json!({"node": "node-a"})),
                node("node-b", json!({"node": "node-b"})),
            ],
            vec![
                {
                    let mut p = existing("p-a", "node-a", foo());
                    p.metadata.deletion_timestamp = Some(obj(json!("2026-01-01T00:00:00Z")));
                    p
                },
                existing("p-b", "node-b", foo()),
            ],
            node_foo(1),
            vec![("node-a", None), ("node-b", s)],
        ),
    ];
    for (name, nodes, pods, p, want) in cases {
        assert_eq!(per_node(&nodes, &pods, &p), expect(&want), "{name}");
    }
}

#[test]
fn multiple_constraints() {
    let both = |zone_sel: Value, node_sel: Value, labels: Value| {
        incoming(
            labels,
            vec![
                constraint(1, "zone", zone_sel),
                constraint(1, "node", node_sel),
            ],
            json!({}),
        )
    };
    let s = Some(SKEW);
    let foo_bar = || json!({"foo": "", "bar": ""});
    let cases: Vec<PerNodeCase> = vec![
        (
            "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
            zone_nodes(),
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-a2", "node-a", foo()),
                existing("p-b1", "node-b", foo()),
                existing("p-y1", "node-y", foo()),
                existing("p-y2", "node-y", foo()),
                existing("p-y3", "node-y", foo()),
            ],
            both(exists("foo"), exists("foo"), foo()),
            vec![
                ("node-a", s),
                ("node-b", s),
                ("node-x", None),
                ("node-y", s),
            ],
        ),
        (
            "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
            zone_nodes(),
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-a2", "node-a", foo()),
                existing("p-b1", "node-b", foo()),
                existing("p-y1", "node-y", foo()),
                existing("p-y2", "node-y", foo()),
                existing("p-y3", "node-y", foo()),
                existing("p-y4", "node-y", foo()),
            ],
            both(exists("foo"), exists("foo"), foo()),
            vec![("node-a", s), ("node-b", s), ("node-x", s), ("node-y", s)],
        ),
        (
            "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
            zone_nodes(),
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-y1", "node-y", json!({"bar": ""})),
            ],
            both(exists("foo"), exists("bar"), foo_bar()),
            vec![
                ("node-a", s),
                ("node-b", s),
                ("node-x", None),
                ("node-y", s),
            ],
        ),
        (
            "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
            zone_nodes(),
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-x1", "node-x", json!({"bar": ""})),
                existing("p-y1", "node-y", json!({"bar": ""})),
            ],
            both(exists("foo"), exists("bar"), foo_bar()),
            vec![("node-a", s), ("node-b", s), ("node-x", s), ("node-y", s)],
        ),
        (
            "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
            zone_nodes(),
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-a2", "node-a", foo_bar()),
                existing("p-y1", "node-y", foo()),
                existing("p-y2", "node-y", foo_bar()),
                existing("p-y3", "node-y", foo()),
            ],
            both(exists("foo"), exists("bar"), foo_bar()),
            vec![
                ("node-a", s),
                ("node-b", None),
                ("node-x", s),
                ("node-y", s),
            ],
        ),
        (
            "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
            zone_nodes(),
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-x1", "node-x", json!({"bar": ""})),
                existing("p-y1", "node-y", json!({"bar": ""})),
            ],
            both(exists("foo"), exists("bar"), json!({"bar": ""})),
            vec![
                ("node-a", None),
                ("node-b", None),
                ("node-x", s),
                ("node-y", s),
            ],
        ),
        (
            "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
            vec![
                node("node-a", json!({"zone": "zone1", "node": "node-a"})),
                node("node-b", json!({"zone": "zone1", "node": "node-b"})),
                node("node-x", json!({"zone": "zone2"})),
                node("node-y", json!({"zone": "zone2", "node": "node-y"})),
            ],
            vec![
                existing("p-a1", "node-a", foo()),
                existing("p-y3", "node-y", foo()),
            ],
            both(exists("foo"), exists("foo"), foo()),
            vec![
                ("node-a", s),
                ("node-b", None),
                ("node-x", Some(MISSING)),
                ("node-y", s),
            ],
        ),
    ];
    for (name, nodes, pods, p, want) in cases {
        assert_eq!(per_node(&nodes, &pods, &p), expect(&want), "{name}");
    }
}

/// node-0, node-1 in zone-0; node-2, node-3 in zone-1.
fn default_nodes() -> Vec<Node> {
    (0..4)
        .map(|i| {
            node(
                &format!("node-{i}"),
                json!({"node": format!("node-{i}"), "zone": format!("zone-{}", i / 2)}),
            )
        })
        .collect()
}

/// Four nodes of the node-inclusion cases: node-3 lacks label foo.
fn inclusion_nodes(tainted: &[&str]) -> Vec<Node> {
    (1..=4)
        .map(|i| {
            let name = format!("node-{i}");
            let mut labels =
                json!({"node": name, "zone": format!("zone-{}", if i <= 2 { 1 } else { 2 })});
            if i != 3 {
                labels["foo"] = json!("");
            }
            if tainted.contains(&name.as_str()) {
                tainted_node(&name, labels)
            } else {
                node(&name, labels)
            }
        })
        .collect()
}

fn with_min_domains(mut c: Value, min: i32) -> Value {
    c["minDomains"] = json!(min);
    c
}

fn not_node_0() -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "node", "operator": "NotIn", "values": ["node-0"]}]}]}}}})
}

#[test]
fn pod_topology_spread_filter() {
    let on = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(n, node)| existing(n, node, foo()))
            .collect::<Vec<_>>()
    };
    let two_two_one = || {
        on(&[
            ("p1a", "node-1"),
            ("p1b", "node-1"),
            ("p2a", "node-2"),
            ("p2b", "node-2"),
            ("p3", "node-3"),
        ])
    };
    let honor = |mut c: Value, field: &str| {
        c[field] = json!("Honor");
        c
    };
    let ignore = |mut c: Value, field: &str| {
        c[field] = json!("Ignore");
        c
    };
    let cases: Vec<CandidateCase> = vec![
        (
            "place pod on a 1/1/0/1 cluster with MaxSkew=1, node-2 is the only fit",
            default_nodes(),
            on(&[("p0", "node-0"), ("p1", "node-1"), ("p3", "node-3")]),
            incoming(foo(), vec![constraint(1, "node", exists("foo"))], json!({})),
            vec!["node-2"],
        ),
        (
            "place pod on a 2/0/0/1 cluster with MaxSkew=2, node-{1,2,3} are good fits",
            default_nodes(),
            on(&[("p0a", "node-0"), ("p0b", "node-0"), ("p3", "node-3")]),
            incoming(foo(), vec![constraint(2, "node", exists("foo"))], json!({})),
            vec!["node-1", "node-2", "node-3"],
        ),
        (
            "pod is required to be placed on zone0, so only node-1 fits",
            default_nodes(),
            on(&[("p0", "node-0"), ("p3", "node-3")]),
            incoming(
                foo(),
                vec![constraint(1, "node", exists("foo"))],
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["zone-0"]}]}]}}}}),
            ),
            vec!["node-1"],
        ),
        (
            "two constraints: pod can only be placed to zone-1/node-2",
            default_nodes(),
            on(&[
                ("p0", "node-0"),
                ("p1", "node-1"),
                ("p3a", "node-3"),
                ("p3b", "node-3"),
            ]),
            incoming(
                foo(),
                vec![
                    constraint(1, "zone", exists("foo")),
                    constraint(1, "node", exists("foo")),
                ],
                json!({}),
            ),
            vec!["node-2"],
        ),
        (
            "pod cannot be placed onto any node",
            default_nodes(),
            two_two_one(),
            incoming(
                foo(),
                vec![
                    constraint(1, "zone", exists("foo")),
                    constraint(1, "node", exists("foo")),
                ],
                not_node_0(),
            ),
            vec![],
        ),
        (
            "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
            default_nodes(),
            two_two_one(),
            incoming(
                foo(),
                vec![with_min_domains(constraint(2, "node", exists("foo")), 4)],
                not_node_0(),
            ),
            vec!["node-3"],
        ),
        (
            "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
            default_nodes(),
            two_two_one(),
            incoming(
                foo(),
                vec![with_min_domains(constraint(2, "node", exists("foo")), 2)],
                not_node_0(),
            ),
            vec!["node-1", "node-2", "node-3"],
        ),
        (
            "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
            default_nodes(),
            on(&[("p1a", "node-0"), ("p2a", "node-1"), ("p3a", "node-2")]),
            incoming(
                foo(),
                vec![with_min_domains(constraint(2, "zone", exists("foo")), 3)],
                json!({}),
            ),
            vec!["node-2", "node-3"],
        ),
        (
            "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the all nodes fit",
            default_nodes(),
            on(&[("p1a", "node-1"), ("p2a", "node-2"), ("p3a", "node-3")]),
            incoming(
                foo(),
                vec![with_min_domains(constraint(2, "zone", exists("foo")), 1)],
                json!({}),
            ),
            vec!["node-0", "node-1", "node-2", "node-3"],
        ),
        (
            "NodeAffinityPolicy honored with labelSelectors, pods spread across zone as 2/1",
            inclusion_nodes(&[]),
            on(&[
                ("p1a", "node-1"),
                ("p2a", "node-2"),
                ("p3a", "node-3"),
                ("p4a", "node-4"),
            ]),
            incoming(
                foo(),
                vec![honor(
                    constraint(1, "zone", exists("foo")),
                    "nodeAffinityPolicy",
                )],
                json!({"nodeSelector": {"foo": ""}}),
            ),
            vec!["node-4"],
        ),
        (
            "NodeAffinityPolicy ignored with nodeAffinity, pods spread across zone as 1/~2~",
            inclusion_nodes(&[]),
            on(&[("p1a", "node-1"), ("p3a", "node-3"), ("p4a", "node-4")]),
            incoming(
                foo(),
                vec![ignore(
                    constraint(1, "zone", exists("foo")),
                    "nodeAffinityPolicy",
                )],
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}]}}}}),
            ),
            vec!["node-1", "node-2"],
        ),
        (
            "NodeTaintsPolicy honored, pods spread across zone as 2/1",
            inclusion_nodes(&["node-3"]),
            on(&[
                ("p1a", "node-1"),
                ("p2a", "node-2"),
                ("p3a", "node-3"),
                ("p4a", "node-4"),
            ]),
            incoming(
                foo(),
                vec![honor(
                    constraint(1, "zone", exists("foo")),
                    "nodeTaintsPolicy",
                )],
                json!({}),
            ),
            vec!["node-4"],
        ),
        (
            "NodeTaintsPolicy ignored, pods spread across zone as 2/2",
            inclusion_nodes(&["node-3"]),
            on(&[
                ("p1a", "node-1"),
                ("p2a", "node-2"),
                ("p3a", "node-3"),
                ("p4a", "node-4"),
            ]),
            incoming(foo(), vec![constraint(1, "zone", exists("foo"))], json!({})),
            vec!["node-1", "node-2", "node-4"],
        ),
        (
            "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
            inclusion_nodes(&["node-2"]),
            on(&[
                ("p1a", "node-1"),
                ("p2a", "node-2"),
                ("p3a", "node-3"),
                ("p4a", "node-4"),
            ]),
            incoming(
                foo(),
                vec![
                    constraint(1, "zone", exists("foo")),
                    constraint(1, "node", exists("foo")),
                ],
                json!({"nodeSelector": {"foo": ""}}),
            ),
            vec!["node-4"],
        ),
        (
            "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
            inclusion_nodes(&["node-2"]),
            on(&[
                ("p1a", "node-1"),
                ("p2a", "node-2"),
                ("p3a", "node-3"),
                ("p4a", "node-4"),
            ]),
            incoming(
                foo(),
                vec![
                    ignore(constraint(1, "zone", exists("foo")), "nodeAffinityPolicy"),
                    honor(constraint(1, "node", exists("foo")), "nodeTaintsPolicy"),
                ],
                json!({"nodeSelector": {"foo": ""}}),
            ),
            vec!["node-1", "node-4"],
        ),
        (
            "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty, pods spread across zone as 0/1",
            default_nodes(),
            vec![
                existing("p1a", "node-0", foo()),
                existing("p2a", "node-1", foo()),
                existing("p3a", "node-2", json!({"foo": "", "bar": ""})),
            ],
            incoming(
                json!({"foo": "", "bar": ""}),
                vec![{
                    let mut c = constraint(1, "zone", exists("foo"));
                    c["matchLabelKeys"] = json!(["bar"]);
                    c
                }],
                json!({}),
            ),
            vec!["node-0", "node-1"],
        ),
        (
            "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty, pods spread across zone as 2/1",
            default_nodes(),
            on(&[("p1a", "node-0"), ("p2a", "node-1"), ("p3a", "node-2")]),
            incoming(
                foo(),
                vec![{
                    let mut c = constraint(1, "zone", json!({}));
                    c["matchLabelKeys"] = json!(["foo"]);
                    c
                }],
                json!({}),
            ),
            vec!["node-2", "node-3"],
        ),
    ];
    for (name, nodes, pods, p, want) in cases {
        let state = FilterState::new(&nodes, &pods, &[]);
        assert_eq!(fitting_nodes(&state, &nodes, &p), want, "{name}");
    }
}

#[test]
fn an_empty_selector_counts_no_existing_pod_but_matches_the_pod_itself() {
    // countPodsMatchSelector returns 0 for an empty selector; the pod still
    // matches it, so every domain sits at 0 and skew is 1 everywhere.
    let nodes = default_nodes();
    let pods: Vec<Pod> = (0..3)
        .map(|i| existing(&format!("e{i}"), "node-0", foo()))
        .collect();
    let p = incoming(foo(), vec![constraint(1, "node", json!({}))], json!({}));
    let state = FilterState::new(&nodes, &pods, &[]);
    assert_eq!(
        fitting_nodes(&state, &nodes, &p),
        vec!["node-0", "node-1", "node-2", "node-3"]
    );
}

#[test]
fn pods_placed_in_the_simulation_move_the_spread() {
    let nodes = default_nodes();
    let mut state = FilterState::new(&nodes, &[], &[]);
    let p = incoming(foo(), vec![constraint(1, "zone", exists("foo"))], json!({}));
    // First-fit in node order alternates zones: node-0, then zone-1, then zone-0 ...
    let mut placed = Vec::new();
    for _ in 0..4 {
        let prepared = state.prepare(&p, &nodes).expect("test data is valid");
        let index = (0..nodes.len())
            .find(|i| state.filter(&prepared, *i, &nodes[*i]).is_ok())
            .expect("test data is valid");
        state.add_pod(&p, index);
        placed.push(
            nodes[index]
                .metadata
                .name
                .clone()
                .expect("test data is valid"),
        );
    }
    assert_eq!(placed, vec!["node-0", "node-2", "node-0", "node-2"]);
}

#[test]
fn a_prepared_pod_keeps_the_counts_it_was_prepared_with() {
    let nodes = default_nodes();
    let mut state = FilterState::new(&nodes, &[], &[]);
    let p = incoming(foo(), vec![constraint(1, "zone", exists("foo"))], json!({}));
    let before = state.prepare(&p, &nodes).expect("test data is valid");
    state.add_pod(&p, 0);
    let after = state.prepare(&p, &nodes).expect("test data is valid");
    assert!(
        state.filter(&before, 1, &nodes[1]).is_ok(),
        "snapshot from before the placement"
    );
    assert_eq!(state.filter(&after, 1, &nodes[1]).unwrap_err().reason, SKEW);
}

#[test]
fn template_nodes_added_later_join_the_domains() {
    let nodes = default_nodes();
    let mut state = FilterState::new(&nodes, &[], &[]);
    let p = incoming(foo(), vec![constraint(1, "zone", exists("foo"))], json!({}));
    for i in 0..4 {
        state.add_pod(&p, i);
    }
    // A new zone with no pod: every existing zone now has skew 2 - 0 + 1 > 1.
    let template = node(
        "template-1",
        json!({"node": "template-1", "zone": "zone-2"}),
    );
    let index = state.add_node(&template);
    let mut all = nodes.clone();
    all.push(template);
    assert_eq!(fitting_nodes(&state, &all, &p), vec!["template-1"]);
    assert_eq!(index, 4);
}

/// A `DoNotSchedule` constraint whose selector does not parse fails the pod in PreFilter
/// (upstream: `LabelSelectorAsSelector`'s error as the plugin's status), on every node.
#[test]
fn a_constraint_whose_selector_does_not_parse_fails_prefilter_naming_it() {
    let nodes = zone_nodes();
    let bad = json!({"matchExpressions": [{"key": "foo", "operator": "Near"}]});
    let pod = incoming(foo(), vec![constraint(1, "zone", bad)], json!({}));
    let state = FilterState::new(&nodes, &[], &[]);
    let reason = state
        .prepare(&pod, &nodes)
        .expect_err("the selector cannot be parsed");
    assert_eq!(reason.code, dra_sim::reason::Code::InvalidSpreadConstraint);
    assert_eq!(reason.plugin, "PodTopologySpread");
    assert!(reason.node.is_none(), "a PreFilter refusal is every node's");
    let text = reason.to_string();
    assert!(text.contains("topologySpreadConstraints[zone]: "), "{text}");
    assert!(text.contains("Near"), "{text}");
}
