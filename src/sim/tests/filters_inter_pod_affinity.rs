//! InterPodAffinity, ported from upstream's `interpodaffinity/filtering_test.go`
//! (TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes).
//! Case names are upstream's. Upstream's pods without a namespace are in ""
//! here they are all in `default`, which changes nothing: only equality of
//! namespaces matters.

mod filters_support;

use dra_sim::filters::{FilterState, Plugin};
use filters_support::{bound, labelled_node, namespace, obj, plugin_reason};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use serde_json::{Value, json};

const AFFINITY: &str = "node(s) didn't match pod affinity rules";
const ANTI: &str = "node(s) didn't match pod anti-affinity rules";
const EXISTING: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

fn term(key: &str, op: &str, values: &[&str], topology_key: &str) -> Value {
    let requirement = if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    };
    json!({"labelSelector": {"matchExpressions": [requirement]}, "topologyKey": topology_key})
}

/// A pod with labels and required affinity / anti-affinity terms.
fn pod(namespace: &str, labels: Value, affinity: Vec<Value>, anti: Vec<Value>) -> Pod {
    let mut spec = json!({"containers": []});
    if !affinity.is_empty() || !anti.is_empty() {
        spec["affinity"] = json!({
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}
        });
    }
    obj(json!({"metadata": {"name": "p", "namespace": namespace, "labels": labels}, "spec": spec}))
}

fn on(node: &str, pod: Pod) -> Pod {
    bound(pod, node)
}

fn security() -> Value {
    json!({"service": "securityscan"})
}

fn s1() -> Value {
    json!({"security": "S1"})
}

/// The namespaces of upstream's test setup.
fn namespaces() -> Vec<Namespace> {
    vec![
        namespace("subteam1.team1", json!({"team": "team1"})),
        namespace("subteam2.team1", json!({"team": "team1"})),
        namespace("subteam1.team2", json!({"team": "team2"})),
    ]
}

fn reason_on(nodes: &[Node], pods: &[Pod], p: &Pod, index: usize) -> Option<String> {
    let state = FilterState::new(nodes, pods, &namespaces());
    let prepared = state.prepare(p, nodes).expect("test data is valid");
    plugin_reason(
        &state,
        Plugin::InterPodAffinity,
        &prepared,
        index,
        &nodes[index],
    )
}

#[test]
fn required_affinity_single_node() {
    let node1 = labelled_node("node1", json!({"region": "r1", "zone": "z11"}));
    let existing = || on("node1", pod("default", security(), vec![], vec![]));
    let ns_selector_term = |topology: &str| {
        json!({"labelSelector": {"matchExpressions": [
                  {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}]},
               "namespaceSelector": {"matchExpressions": [
                  {"key": "team", "operator": "In", "values": ["team1"]}]},
               "topologyKey": topology})
    };
    let cases: Vec<(&str, Pod, Vec<Pod>, Option<&str>)> = vec![
        (
            "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
            pod("default", json!({}), vec![], vec![]),
            vec![],
            None,
        ),
        (
            "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
            pod(
                "default",
                s1(),
                vec![term("service", "In", &["securityscan", "value2"], "region")],
                vec![],
            ),
            vec![existing()],
            None,
        ),
        (
            "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
            pod(
                "default",
                s1(),
                vec![term(
                    "service",
                    "NotIn",
                    &["securityscan3", "value3"],
                    "region",
                )],
                vec![],
            ),
            vec![existing()],
            None,
        ),
        (
            "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
            pod(
                "default",
                s1(),
                vec![json!({"labelSelector": {"matchExpressions": [
                    {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}]},
                    "namespaces": ["DiffNameSpace"]})],
                vec![],
            ),
            vec![on("node1", pod("ns", security(), vec![], vec![]))],
            Some(AFFINITY),
        ),
        (
            "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
            pod(
                "default",
                security(),
                vec![term("service", "In", &["antivirusscan", "value2"], "")],
                vec![],
            ),
            vec![existing()],
            Some(AFFINITY),
        ),
        (
            "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution ",
            pod(
                "default",
                s1(),
                vec![
                    json!({"labelSelector": {"matchExpressions": [
                        {"key": "service", "operator": "Exists"}, {"key": "wrongkey", "operator": "DoesNotExist"}]},
                        "topologyKey": "region"}),
                    json!({"labelSelector": {"matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan"]},
                        {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]},
                        "topologyKey": "region"}),
                ],
                vec![],
            ),
            vec![existing()],
            None,
        ),
        (
            "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
            pod(
                "default",
                s1(),
                vec![
                    json!({"labelSelector": {"matchExpressions": [
                        {"key": "service", "operator": "Exists"}, {"key": "wrongkey", "operator": "DoesNotExist"}]},
                        "topologyKey": "region"}),
                    json!({"labelSelector": {"matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan2"]},
                        {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]},
                        "topologyKey": "region"}),
                ],
                vec![],
            ),
            vec![existing()],
            Some(AFFINITY),
        ),
        (
            "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
            pod(
                "default",
                s1(),
                vec![term("service", "In", &["securityscan", "value2"], "region")],
                vec![term("service", "In", &["antivirusscan", "value2"], "node")],
            ),
            vec![existing()],
            None,
        ),
        (
            "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
            pod(
                "default",
                s1(),
                vec![term("service", "In", &["securityscan", "value2"], "region")],
                vec![term("service", "In", &["antivirusscan", "value2"], "node")],
            ),
            vec![on(
                "node1",
                pod(
                    "default",
                    security(),
                    vec![],
                    vec![term("service", "In", &["antivirusscan", "value2"], "node")],
                ),
            )],
            None,
        ),
        (
            "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
            pod(
                "default",
                s1(),
                vec![term("service", "In", &["securityscan", "value2"], "region")],
                vec![term("service", "In", &["securityscan", "value2"], "zone")],
            ),
            vec![existing()],
            Some(ANTI),
        ),
        (
            "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
            pod(
                "default",
                security(),
                vec![term("service", "In", &["securityscan", "value2"], "region")],
                vec![term("service", "In", &["antivirusscan", "value2"], "node")],
            ),
            vec![on(
                "node1",
                pod(
                    "default",
                    security(),
                    vec![],
                    vec![term("service", "In", &["securityscan", "value2"], "zone")],
                ),
            )],
            Some(EXISTING),
        ),
        (
            "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
            pod(
                "default",
                security(),
                vec![term(
                    "service",
                    "NotIn",
                    &["securityscan", "value2"],
                    "region",
                )],
                vec![],
            ),
            vec![on("node2", pod("default", security(), vec![], vec![]))],
            Some(AFFINITY),
        ),
        (
            "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
            pod("default", security(), vec![], vec![]),
            vec![on(
                "node1",
                pod(
                    "default",
                    security(),
                    vec![],
                    vec![term("service", "In", &["securityscan", "value2"], "zone")],
                ),
            )],
            Some(EXISTING),
        ),
        (
            "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
            pod("default", security(), vec![], vec![]),
            vec![on(
                "node1",
                pod(
                    "default",
                    security(),
                    vec![],
                    vec![term(
                        "service",
                        "NotIn",
                        &["securityscan", "value2"],
                        "zone",
                    )],
                ),
            )],
            None,
        ),
        (
            "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
            pod(
                "default",
                security(),
                vec![],
                vec![
                    term("service", "Exists", &[], "region"),
                    term("security", "Exists", &[], "region"),
                ],
            ),
            vec![on(
                "node1",
                pod(
                    "default",
                    s1(),
                    vec![],
                    vec![term("security", "Exists", &[], "zone")],
                ),
            )],
            Some(ANTI),
        ),
        (
            "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
            pod(
                "default",
                security(),
                vec![],
                vec![
                    term("service", "Exists", &[], "zone"),
                    term("security", "Exists", &[], "zone"),
                ],
            ),
            vec![on(
                "node1",
                pod(
                    "default",
                    s1(),
                    vec![],
                    vec![term("security", "Exists", &[], "zone")],
                ),
            )],
            Some(ANTI),
        ),
        (
            "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
            pod(
                "default",
                s1(),
                vec![],
                vec![term("security", "Exists", &[], "zone")],
            ),
            vec![on(
                "node1",
                pod(
                    "default",
                    security(),
                    vec![],
                    vec![
                        term("service", "Exists", &[], "zone"),
                        term("security", "Exists", &[], "zone"),
                    ],
                ),
            )],
            Some(EXISTING),
        ),
        (
            "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
            pod(
                "default",
                json!({"abc": "", "xyz": ""}),
                vec![],
                vec![
                    term("abc", "Exists", &[], "zone"),
                    term("def", "Exists", &[], "zone"),
                ],
            ),
            vec![on(
                "node1",
                pod(
                    "default",
                    json!({"def": "", "xyz": ""}),
                    vec![],
                    vec![
                        term("abc", "Exists", &[], "zone"),
                        term("def", "Exists", &[], "zone"),
                    ],
                ),
            )],
            Some(ANTI),
        ),
        (
            "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
            pod(
                "default",
                json!({"def": "", "xyz": ""}),
                vec![],
                vec![
                    term("abc", "Exists", &[], "zone"),
                    term("def", "Exists", &[], "zone"),
                ],
            ),
            vec![on(
                "node1",
                pod(
                    "default",
                    json!({"abc": "", "xyz": ""}),
                    vec![],
                    vec![
                        term("abc", "Exists", &[], "zone"),
                        term("def", "Exists", &[], "zone"),
                    ],
                ),
            )],
            Some(ANTI),
        ),
        (
            "affinity with NamespaceSelector",
            pod("default", s1(), vec![ns_selector_term("region")], vec![]),
            vec![on(
                "node1",
                pod("subteam1.team1", security(), vec![], vec![]),
            )],
            None,
        ),
        (
            "affinity with non-matching NamespaceSelector",
            pod("default", s1(), vec![ns_selector_term("region")], vec![]),
            vec![on(
                "node1",
                pod("subteam1.team2", security(), vec![], vec![]),
            )],
            Some(AFFINITY),
        ),
        (
            "anti-affinity with matching NamespaceSelector",
            pod(
                "subteam1.team1",
                s1(),
                vec![],
                vec![ns_selector_term("zone")],
            ),
            vec![on(
                "node1",
                pod("subteam2.team1", security(), vec![], vec![]),
            )],
            Some(ANTI),
        ),
        (
            "anti-affinity with matching all NamespaceSelector",
            pod(
                "subteam1.team1",
                s1(),
                vec![],
                vec![json!({"labelSelector": {"matchExpressions": [
                    {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}]},
                    "namespaceSelector": {}, "topologyKey": "zone"})],
            ),
            vec![on(
                "node1",
                pod("subteam2.team1", security(), vec![], vec![]),
            )],
            Some(ANTI),
        ),
        (
            "anti-affinity with non-matching NamespaceSelector",
            pod(
                "subteam1.team1",
                s1(),
                vec![],
                vec![ns_selector_term("zone")],
            ),
            vec![on(
                "node1",
                pod("subteam1.team2", security(), vec![], vec![]),
            )],
            None,
        ),
    ];
    for (name, p, pods, want) in cases {
        let nodes = std::slice::from_ref(&node1);
        assert_eq!(reason_on(nodes, &pods, &p, 0).as_deref(), want, "{name}");
    }
}

#[test]
fn an_invalid_label_value_fails_pre_filter() {
    // "PodAffinity fails PreFilter with an invalid affinity label syntax"
    let node1 = labelled_node("node1", json!({"region": "r1"}));
    let p = pod(
        "default",
        security(),
        vec![
            term("service", "In", &["{{.bad-value.}}"], "region"),
            term("service", "In", &["antivirusscan", "value2"], "node"),
        ],
        vec![],
    );
    let state = FilterState::new(std::slice::from_ref(&node1), &[], &[]);
    let error = state.prepare(&p, std::slice::from_ref(&node1)).unwrap_err();
    assert_eq!(
        (error.plugin, error.code),
        (
            "InterPodAffinity",
            dra_sim::reason::Code::InvalidAffinityTerm
        )
    );
    let error = error.to_string();
    assert!(
        error.starts_with("parsing pod: requiredAffinityTerms:"),
        "{error}"
    );
    assert!(error.contains("{{.bad-value.}}"), "{error}");
}

/// (name, incoming pod, placed pods, nodes, reason per node).
type MultiNodeCase = (
    &'static str,
    Pod,
    Vec<Pod>,
    Vec<Node>,
    Vec<Option<&'static str>>,
);

#[test]
fn required_affinity_multiple_nodes() {
    let china = json!({"region": "China"});
    let china_az1 = json!({"region": "China", "az": "az1"});
    let india = json!({"region": "India"});
    let cases: Vec<MultiNodeCase> = vec![
        (
            "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",
            pod(
                "default",
                json!({}),
                vec![term("foo", "In", &["bar"], "region")],
                vec![],
            ),
            vec![on(
                "node1",
                pod("default", json!({"foo": "bar"}), vec![], vec![]),
            )],
            vec![
                labelled_node("node1", china.clone()),
                labelled_node("node2", china_az1.clone()),
                labelled_node("node3", india.clone()),
            ],
            vec![None, None, Some(AFFINITY)],
        ),
        (
            "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
            pod(
                "default",
                json!({"foo": "bar", "service": "securityscan"}),
                vec![
                    term("foo", "In", &["bar"], "zone"),
                    term("service", "In", &["securityscan"], "zone"),
                ],
                vec![],
            ),
            vec![on(
                "nodeA",
                pod("default", json!({"foo": "bar"}), vec![], vec![]),
            )],
            vec![
                labelled_node("nodeA", json!({"zone": "az1", "hostname": "h1"})),
                labelled_node("nodeB", json!({"zone": "az2", "hostname": "h2"})),
            ],
            vec![None, None],
        ),
        (
            "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
            pod(
                "default",
                json!({"foo": "bar", "service": "securityscan"}),
                vec![
                    term("foo", "In", &["bar"], "zone"),
                    term("service", "In", &["securityscan"], "zone"),
                ],
                vec![],
            ),
            vec![on(
                "nodeA",
                pod("default", json!({"foo": "bar"}), vec![], vec![]),
            )],
            vec![
                labelled_node("nodeA", json!({"zoneLabel": "az1", "hostname": "h1"})),
                labelled_node("nodeB", json!({"zoneLabel": "az2", "hostname": "h2"})),
            ],
            vec![Some(AFFINITY), Some(AFFINITY)],
        ),
        (
            "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
            pod(
                "default",
                json!({}),
                vec![],
                vec![term("foo", "In", &["abc"], "region")],
            ),
            vec![on(
                "nodeA",
                pod("default", json!({"foo": "abc"}), vec![], vec![]),
            )],
            vec![
                labelled_node("nodeA", json!({"region": "r1", "hostname": "nodeA"})),
                labelled_node("nodeB", json!({"region": "r1", "hostname": "nodeB"})),
            ],
            vec![Some(ANTI), Some(ANTI)],
        ),
        (
            "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
            pod(
                "default",
                json!({}),
                vec![],
                vec![
                    term("foo", "In", &["abc"], "region"),
                    term("service", "In", &["securityscan"], "zone"),
                ],
            ),
            vec![on(
                "nodeA",
                pod(
                    "default",
                    json!({"foo": "abc", "service": "securityscan"}),
                    vec![],
                    vec![],
                ),
            )],
            vec![
                labelled_node(
                    "nodeA",
                    json!({"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                ),
                labelled_node(
                    "nodeB",
                    json!({"region": "r1", "zone": "z2", "hostname": "nodeB"}),
                ),
            ],
            vec![Some(ANTI), Some(ANTI)],
        ),
        (
            "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
            pod(
                "default",
                json!({}),
                vec![],
                vec![term("foo", "In", &["abc"], "region")],
            ),
            vec![on(
                "nodeA",
                pod("default", json!({"foo": "abc"}), vec![], vec![]),
            )],
            vec![
                labelled_node("nodeA", china.clone()),
                labelled_node("nodeB", china_az1.clone()),
                labelled_node("nodeC", india.clone()),
            ],
            vec![Some(ANTI), Some(ANTI), None],
        ),
        (
            "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
            pod(
                "NS1",
                json!({"foo": "123"}),
                vec![],
                vec![term("foo", "In", &["bar"], "region")],
            ),
            vec![
                on("nodeA", pod("NS1", json!({"foo": "bar"}), vec![], vec![])),
                on(
                    "nodeC",
                    pod(
                        "NS2",
                        json!({}),
                        vec![],
                        vec![term("foo", "In", &["123"], "region")],
                    ),
                ),
            ],
            vec![
                labelled_node("nodeA", china.clone()),
                labelled_node("nodeB", china_az1.clone()),
                labelled_node("nodeC", india.clone()),
            ],
            vec![Some(ANTI), Some(ANTI), None],
        ),
        (
            "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
            pod("default", json!({"foo": ""}), vec![], vec![]),
            vec![on(
                "nodeA",
                pod(
                    "default",
                    json!({}),
                    vec![],
                    vec![term("foo", "Exists", &[], "invalid-node-label")],
                ),
            )],
            vec![
                labelled_node(
                    "nodeA",
                    json!({"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                ),
                labelled_node(
                    "nodeB",
                    json!({"region": "r1", "zone": "z1", "hostname": "nodeB"}),
                ),
            ],
            vec![None, None],
        ),
        (
            "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
            pod(
                "default",
                json!({}),
                vec![],
                vec![term("foo", "Exists", &[], "invalid-node-label")],
            ),
            vec![on(
                "nodeA",
                pod("default", json!({"foo": ""}), vec![], vec![]),
            )],
            vec![
                labelled_node(
                    "nodeA",
                    json!({"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                ),
                labelled_node(
                    "nodeB",
                    json!({"region": "r1", "zone": "z1", "hostname": "nodeB"}),
                ),
            ],
            vec![None, None],
        ),
    ];
    for (name, p, pods, nodes, want) in cases {
        for (index, want) in want.into_iter().enumerate() {
            assert_eq!(
                reason_on(&nodes, &pods, &p, index).as_deref(),
                want,
                "{name} [node {index}]"
            );
        }
    }
}

#[test]
fn hostname_anti_affinity_spreads_replicas_placed_in_the_simulation() {
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            labelled_node(
                &format!("n{i}"),
                json!({"kubernetes.io/hostname": format!("n{i}")}),
            )
        })
        .collect();
    let replica = pod(
        "default",
        json!({"app": "web"}),
        vec![],
        vec![term("app", "In", &["web"], "kubernetes.io/hostname")],
    );
    let mut state = FilterState::new(&nodes, &[], &[]);
    let mut placed = Vec::new();
    for _ in 0..4 {
        let prepared = state.prepare(&replica, &nodes).expect("test data is valid");
        match (0..nodes.len()).find(|i| state.filter(&prepared, *i, &nodes[*i]).is_ok()) {
            Some(i) => {
                state.add_pod(&replica, i);
                placed.push(i);
            }
            None => {
                let reason = state.filter(&prepared, 0, &nodes[0]).unwrap_err().reason;
                assert_eq!(reason, ANTI);
                break;
            }
        }
    }
    assert_eq!(
        placed,
        vec![0, 1, 2],
        "one replica per host, the fourth fits nowhere"
    );
}

#[test]
fn match_label_keys_narrow_the_term_to_the_pods_own_revision() {
    // KEP-3633: the API server merges `key In (this pod's value)` into the
    // selector; a pod of revision 2 ignores revision-1 pods.
    let nodes = vec![labelled_node("n0", json!({"kubernetes.io/hostname": "n0"}))];
    let mut with_keys = term("app", "In", &["web"], "kubernetes.io/hostname");
    with_keys["matchLabelKeys"] = json!(["pod-template-hash"]);
    let old = on(
        "n0",
        pod(
            "default",
            json!({"app": "web", "pod-template-hash": "v1"}),
            vec![],
            vec![],
        ),
    );
    let new = pod(
        "default",
        json!({"app": "web", "pod-template-hash": "v2"}),
        vec![],
        vec![with_keys.clone()],
    );
    assert_eq!(reason_on(&nodes, std::slice::from_ref(&old), &new, 0), None);
    let same_revision = pod(
        "default",
        json!({"app": "web", "pod-template-hash": "v1"}),
        vec![],
        vec![with_keys],
    );
    assert_eq!(
        reason_on(&nodes, &[old], &same_revision, 0).as_deref(),
        Some(ANTI)
    );
}

/// The pods a required affinity term counts: those matching all of the pod's
/// terms, in the namespaces the terms name (own namespace by default, the
/// namespace selector's otherwise). The planner asks this to see that a
/// gang's members must share their domains.
#[test]
fn required_affinity_counts_only_pods_matching_all_terms() {
    let state = FilterState::new(&[], &[], &namespaces());
    let both = pod(
        "subteam1.team1",
        json!({"service": "securityscan", "security": "S1"}),
        vec![
            term("service", "In", &["securityscan"], "zone"),
            term("security", "Exists", &[], "rack"),
        ],
        vec![],
    );
    let peer = pod(
        "subteam1.team1",
        json!({"service": "securityscan", "security": "S2"}),
        vec![],
        vec![],
    );
    let half = pod("subteam1.team1", security(), vec![], vec![]);
    let elsewhere = pod(
        "subteam1.team2",
        json!({"service": "securityscan", "security": "S1"}),
        vec![],
        vec![],
    );
    assert!(state.required_affinity_counts_all(&both, [&both, &peer]));
    assert!(
        !state.required_affinity_counts_all(&both, [&peer, &half]),
        "half matches one term only"
    );
    assert!(
        !state.required_affinity_counts_all(&both, [&elsewhere]),
        "terms default to the pod's own namespace"
    );
    let mut across = both.clone();
    if let Some(terms) = across
        .spec
        .as_mut()
        .and_then(|s| s.affinity.as_mut())
        .and_then(|a| a.pod_affinity.as_mut())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_mut()
        })
    {
        for t in terms {
            t.namespace_selector = Some(Default::default());
        }
    }
    assert!(
        state.required_affinity_counts_all(&across, [&elsewhere]),
        "an empty namespace selector counts every namespace"
    );
    assert!(
        !state.required_affinity_counts_all(&peer, [&both]),
        "a pod without terms counts nobody"
    );
}
