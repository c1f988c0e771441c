//! NodeAffinity, ported from upstream's `node_affinity_test.go`
//! (TestNodeAffinity). Case names are upstream's; the cases about the
//! plugin's `addedAffinity` argument are left out (not configurable here).

mod filters_support;

use dra_sim::filters::{FilterState, Plugin};
use filters_support::{labelled_node, plugin_reason, pod};
use serde_json::{Value, json};

const REASON: &str = "node(s) didn't match Pod's node affinity/selector";
const PREFILTER_REASON: &str = "node(s) didn't satisfy plugin(s) [NodeAffinity]";

fn required(terms: Value) -> Value {
    json!({"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

fn name_in(names: &[&str]) -> Value {
    json!({"key": "metadata.name", "operator": "In", "values": names})
}

struct Case {
    name: &'static str,
    spec: Value,
    node_name: &'static str,
    labels: Value,
    /// What the NodeAffinity Filter says.
    want: Option<&'static str>,
    /// What the whole pipeline says, when the PreFilterResult refuses first.
    want_pipeline: Option<&'static str>,
}

fn case(name: &'static str, spec: Value, labels: Value, want: Option<&'static str>) -> Case {
    Case {
        name,
        spec,
        node_name: "node1",
        labels,
        want,
        want_pipeline: want,
    }
}

#[test]
fn node_affinity() {
    let foo_bar = json!({"foo": "bar"});
    let gpu = json!({"GPU": "NVIDIA-GRID-K1"});
    let fail = Some(REASON);
    let cases = vec![
        case(
            "missing labels",
            json!({"containers": [], "nodeSelector": {"foo": "bar"}}),
            json!({}),
            fail,
        ),
        case(
            "same labels",
            json!({"containers": [], "nodeSelector": {"foo": "bar"}}),
            foo_bar.clone(),
            None,
        ),
        case(
            "node labels are superset",
            json!({"containers": [], "nodeSelector": {"foo": "bar"}}),
            json!({"foo": "bar", "baz": "blah"}),
            None,
        ),
        case(
            "node labels are subset",
            json!({"containers": [], "nodeSelector": {"foo": "bar", "baz": "blah"}}),
            foo_bar.clone(),
            fail,
        ),
        case(
            "Pod with matchExpressions using In operator that matches the existing node",
            required(json!([{"matchExpressions": [expr("foo", "In", &["bar", "value2"])]}])),
            foo_bar.clone(),
            None,
        ),
        case(
            "Pod with matchExpressions using Gt operator that matches the existing node",
            required(json!([{"matchExpressions": [expr("kernel-version", "Gt", &["0204"])]}])),
            json!({"kernel-version": "0206"}),
            None,
        ),
        case(
            "Pod with matchExpressions using NotIn operator that matches the existing node",
            required(json!([{"matchExpressions": [expr("mem-type", "NotIn", &["DDR", "DDR2"])]}])),
            json!({"mem-type": "DDR3"}),
            None,
        ),
        case(
            "Pod with matchExpressions using Exists operator that matches the existing node",
            required(json!([{"matchExpressions": [expr("GPU", "Exists", &[])]}])),
            gpu.clone(),
            None,
        ),
        case(
            "Pod with affinity that don't match node's labels won't schedule onto the node",
            required(json!([{"matchExpressions": [expr("foo", "In", &["value1", "value2"])]}])),
            foo_bar.clone(),
            fail,
        ),
        case(
            "Pod with empty MatchExpressions is not a valid value will match no objects and won't schedule onto the node",
            required(json!([{"matchExpressions": []}])),
            foo_bar.clone(),
            fail,
        ),
        case(
            "Pod with no Affinity will schedule onto a node",
            json!({"containers": []}),
            foo_bar.clone(),
            None,
        ),
        case(
            "Pod with Affinity but nil NodeSelector will schedule onto a node",
            json!({"containers": [], "affinity": {"nodeAffinity": {}}}),
            foo_bar.clone(),
            None,
        ),
        case(
            "Pod with multiple matchExpressions ANDed that matches the existing node",
            required(
                json!([{"matchExpressions": [expr("GPU", "Exists", &[]), expr("GPU", "NotIn", &["AMD", "INTER"])]}]),
            ),
            gpu.clone(),
            None,
        ),
        case(
            "Pod with multiple matchExpressions ANDed that doesn't match the existing node",
            required(
                json!([{"matchExpressions": [expr("GPU", "Exists", &[]), expr("GPU", "In", &["AMD", "INTER"])]}]),
            ),
            gpu.clone(),
            fail,
        ),
        case(
            "Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels and will schedule onto the node",
            required(json!([
                {"matchExpressions": [expr("foo", "In", &["bar", "value2"])]},
                {"matchExpressions": [expr("diffkey", "In", &["wrong", "value2"])]}
            ])),
            foo_bar.clone(),
            None,
        ),
        case(
            "Pod with an Affinity and a PodSpec.NodeSelector(the old thing that we are deprecating) both are satisfied, will schedule onto the node",
            {
                let mut spec =
                    required(json!([{"matchExpressions": [expr("foo", "Exists", &[])]}]));
                spec["nodeSelector"] = json!({"foo": "bar"});
                spec
            },
            foo_bar.clone(),
            None,
        ),
        case(
            "Pod with an Affinity matches node's labels but the PodSpec.NodeSelector(the old thing that we are deprecating) is not satisfied, won't schedule onto the node",
            {
                let mut spec =
                    required(json!([{"matchExpressions": [expr("foo", "Exists", &[])]}]));
                spec["nodeSelector"] = json!({"foo": "bar"});
                spec
            },
            json!({"foo": "barrrrrr"}),
            fail,
        ),
        case(
            "Pod with an invalid value in Affinity term won't be scheduled onto the node",
            required(
                json!([{"matchExpressions": [expr("foo", "NotIn", &["invalid value: ___@#$%^"])]}]),
            ),
            foo_bar.clone(),
            fail,
        ),
        case(
            "Pod with matchFields using In operator that matches the existing node",
            required(json!([{"matchFields": [name_in(&["node1"])]}])),
            json!({}),
            None,
        ),
        Case {
            name: "Pod with matchFields using In operator that does not match the existing node",
            spec: required(json!([{"matchFields": [name_in(&["node1"])]}])),
            node_name: "node2",
            labels: json!({}),
            want: fail,
            want_pipeline: Some(PREFILTER_REASON),
        },
        Case {
            name: "Pod with two terms: matchFields does not match, but matchExpressions matches",
            spec: required(json!([
                {"matchFields": [name_in(&["node1"])]},
                {"matchExpressions": [expr("foo", "In", &["bar"])]}
            ])),
            node_name: "node2",
            labels: foo_bar.clone(),
            want: None,
            want_pipeline: None,
        },
        Case {
            name: "Pod with one term: matchFields does not match, but matchExpressions matches",
            spec: required(json!([
                {"matchFields": [name_in(&["node1"])], "matchExpressions": [expr("foo", "In", &["bar"])]}
            ])),
            node_name: "node2",
            labels: foo_bar.clone(),
            want: fail,
            want_pipeline: Some(PREFILTER_REASON),
        },
        case(
            "Pod with one term: both matchFields and matchExpressions match",
            required(json!([
                {"matchFields": [name_in(&["node1"])], "matchExpressions": [expr("foo", "In", &["bar"])]}
            ])),
            foo_bar.clone(),
            None,
        ),
        Case {
            name: "Pod with two terms: both matchFields and matchExpressions do not match",
            spec: required(json!([
                {"matchFields": [name_in(&["node1"])]},
                {"matchExpressions": [expr("foo", "In", &["not-match-to-bar"])]}
            ])),
            node_name: "node2",
            labels: foo_bar.clone(),
            want: fail,
            want_pipeline: fail,
        },
        Case {
            name: "Pod with two terms of node.Name affinity",
            spec: required(json!([
                {"matchFields": [name_in(&["node1"])]},
                {"matchFields": [name_in(&["node2"])]}
            ])),
            node_name: "node2",
            labels: json!({}),
            want: None,
            want_pipeline: None,
        },
    ];
    for c in cases {
        let node = labelled_node(c.node_name, c.labels);
        let state = FilterState::new(std::slice::from_ref(&node), &[], &[]);
        let p = pod("p", json!({}), c.spec);
        let prepared = state
            .prepare(&p, std::slice::from_ref(&node))
            .expect("test data is valid");
        let got = plugin_reason(&state, Plugin::NodeAffinity, &prepared, 0, &node);
        assert_eq!(got.as_deref(), c.want, "{}", c.name);
        let pipeline = state
            .filter(&prepared, 0, &node)
            .err()
            .map(|r| r.reason.to_string());
        assert_eq!(
            pipeline.as_deref(),
            c.want_pipeline,
            "{} (all filters)",
            c.name
        );
    }
}

#[test]
fn pod_with_two_conflicting_mach_field_requirements() {
    let node = labelled_node("node2", json!({"foo": "bar"}));
    let state = FilterState::new(std::slice::from_ref(&node), &[], &[]);
    let p = pod(
        "p",
        json!({}),
        required(json!([{"matchFields": [name_in(&["node1"]), name_in(&["node2"])]}])),
    );
    assert_eq!(
        state.prepare(&p, std::slice::from_ref(&node)).unwrap_err(),
        "pod affinity terms conflict"
    );
}
