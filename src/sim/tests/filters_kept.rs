//! A filter state kept between snapshots and brought up to date by what changed counts
//! exactly what a state built afresh from the same objects counts (issue #28).

use dra_sim::filters::{FilterState, same_to_filters};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use proptest::prelude::*;
use serde_json::json;

fn node(name: &str, zone: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"zone": zone, "kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "20", "example.com/gpu": "4"}}
    }))
    .expect("a test object")
}

fn nodes() -> Vec<Node> {
    vec![
        node("n0", "a"),
        node("n1", "a"),
        node("n2", "b"),
        node("n3", "b"),
    ]
}

fn namespaces() -> Vec<Namespace> {
    vec![
        serde_json::from_value(json!({"metadata": {"name": "team-a", "labels": {"team": "a"}}}))
            .expect("a test object"),
    ]
}

/// What a generated pod is made of.
#[derive(Debug, Clone)]
struct Shape {
    namespace: usize,
    app: Option<usize>,
    cpu_millis: u32,
    /// CPU past what an i64 of millicores holds: a node's total saturates.
    huge: bool,
    gpus: u8,
    host_port: Option<u16>,
    anti_affinity: bool,
    finished: bool,
    terminating: bool,
    node: Option<usize>,
}

fn pod(id: usize, shape: &Shape) -> Pod {
    let namespace = ["team-a", "team-b", "default"][shape.namespace];
    let mut labels = serde_json::Map::new();
    if let Some(app) = shape.app {
        labels.insert("app".into(), json!(["x", "y", "z"][app]));
    }
    let mut requests = serde_json::Map::new();
    let cpu = if shape.huge {
        "10E".to_owned()
    } else {
        format!("{}m", shape.cpu_millis)
    };
    requests.insert("cpu".into(), json!(cpu));
    if shape.gpus > 0 {
        requests.insert("example.com/gpu".into(), json!(shape.gpus.to_string()));
    }
    let ports = shape
        .host_port
        .map(|p| json!([{"containerPort": 80, "hostPort": p}]))
        .unwrap_or(json!([]));
    let node = shape
        .node
        .map(|n| ["n0", "n1", "n2", "n3", "gone"][n].to_owned());
    let mut value = json!({
        "metadata": {"name": format!("p{id}"), "namespace": namespace, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": requests}, "ports": ports}]
        },
        "status": {"phase": if shape.finished { "Succeeded" } else { "Running" }}
    });
    if shape.terminating {
        value["metadata"]["deletionTimestamp"] = json!("2026-12-05T00:00:00Z");
    }
    if shape.anti_affinity {
        value["spec"]["affinity"] = json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "zone",
                "labelSelector": {"matchLabels": {"app": "x"}}
            }]
        }});
    }
    serde_json::from_value(value).expect("a test object")
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        (
            0..3usize,
            proptest::option::of(0..3usize),
            100..2000u32,
            proptest::bool::weighted(0.05),
            0..3u8,
        ),
        (
            proptest::option::weighted(0.2, prop_oneof![Just(80u16), Just(8080u16)]),
            proptest::bool::weighted(0.2),
            proptest::bool::weighted(0.1),
            proptest::bool::weighted(0.1),
            proptest::option::weighted(0.9, 0..5usize),
        ),
    )
        .prop_map(
            |(
                (namespace, app, cpu_millis, huge, gpus),
                (host_port, anti_affinity, finished, terminating, node),
            )| Shape {
                namespace,
                app,
                cpu_millis,
                huge,
                gpus,
                host_port,
                anti_affinity,
                finished,
                terminating,
                node,
            },
        )
}

/// One change to the cluster's pods between two snapshots.
#[derive(Debug, Clone)]
enum Change {
    /// A pod is created (bound or not).
    Add(Shape),
    /// The pod at this position (modulo the count) is deleted.
    Delete(usize),
    /// The pod at this position is replaced by a new version of it.
    Replace(usize, Shape),
    /// A plan places pods on the state's nodes and on a template node, then is rolled back.
    Plan(Vec<Shape>),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => shape().prop_map(Change::Add),
        2 => any::<usize>().prop_map(Change::Delete),
        3 => (any::<usize>(), shape()).prop_map(|(i, s)| Change::Replace(i, s)),
        1 => proptest::collection::vec(shape(), 1..4).prop_map(Change::Plan),
    ]
}

fn fresh(nodes: &[Node], pods: &[Pod]) -> dra_sim::filters::Summary {
    FilterState::new(nodes, pods, &namespaces()).summary()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_kept_state_counts_what_a_fresh_one_counts(
        initial in proptest::collection::vec(shape(), 0..12),
        changes in proptest::collection::vec(change(), 1..25),
    ) {
        let nodes = nodes();
        let mut next_id = 0;
        let mut pods: Vec<Pod> = initial
            .iter()
            .map(|s| {
                next_id += 1;
                pod(next_id, s)
            })
            .collect();
        let mut state = FilterState::new(&nodes, &pods, &namespaces());
        for change in changes {
            match change {
                Change::Add(shape) => {
                    next_id += 1;
                    let new = pod(next_id, &shape);
                    state.count_bound(&new);
                    pods.push(new);
                }
                Change::Delete(at) if !pods.is_empty() => {
                    let gone = pods.remove(at % pods.len());
                    prop_assert_eq!(state.forget_bound([&gone]), 0);
                }
                Change::Replace(at, shape) if !pods.is_empty() => {
                    let at = at % pods.len();
                    let mut new = pod(0, &shape);
                    new.metadata.name = pods[at].metadata.name.clone();
                    let old = std::mem::replace(&mut pods[at], new);
                    prop_assert_eq!(state.forget_bound([&old]), 0);
                    state.count_bound(&pods[at]);
                }
                Change::Plan(placed) => {
                    let mark = state.mark();
                    let template = state.add_node(&node("template-0", "c"));
                    for (i, shape) in placed.iter().enumerate() {
                        let mut placed = pod(1000 + i, shape);
                        placed.spec.as_mut().expect("a test object").node_name = None;
                        let on = shape.node.map_or(template, |n| n.min(template));
                        state.add_pod(&placed, on);
                    }
                    prop_assert!(state.roll_back_to(mark).is_ok());
                }
                Change::Delete(_) | Change::Replace(..) => {}
            }
            state.set_namespaces(&namespaces());
            prop_assert_eq!(state.summary(), fresh(&nodes, &pods));
            prop_assert!(state.holds(&nodes, &pods));
        }
    }
}

#[test]
fn a_pod_that_was_never_counted_is_reported_missing() {
    let nodes = nodes();
    let counted = pod(1, &bound_to(0));
    let mut state = FilterState::new(&nodes, std::slice::from_ref(&counted), &namespaces());
    let stranger = pod(2, &bound_to(1));
    let unbound = pod(
        3,
        &Shape {
            node: None,
            ..bound_to(0)
        },
    );
    assert_eq!(
        state.forget_bound([&stranger, &unbound]),
        1,
        "the bound one only"
    );
    assert_eq!(state.forget_bound([&counted]), 0);
    assert_eq!(state.forget_bound([&counted]), 1, "already gone");
    state.set_namespaces(&namespaces());
    assert_eq!(state.summary(), fresh(&nodes, &[]));
}

#[test]
fn a_state_with_pods_taken_off_does_not_roll_back_or_forget() {
    let nodes = nodes();
    let pods = [pod(1, &bound_to(0)), pod(2, &bound_to(1))];
    let mut state = FilterState::new(&nodes, &pods, &namespaces());
    let mark = state.mark();
    let taken = state.take_off(&pods[0], 0).expect("counted on n0");
    assert!(state.roll_back_to(mark).is_err());
    assert_eq!(state.forget_bound([&pods[1]]), 1);
    state.put_back(&taken);
    assert!(state.roll_back_to(mark).is_ok());
    assert_eq!(state.forget_bound([&pods[1]]), 0);
    assert_eq!(state.summary(), fresh(&nodes, &pods[..1]));
}

#[test]
fn a_heartbeat_is_nothing_to_the_filters_but_a_label_or_allocatable_is() {
    let before = node("n0", "a");
    let mut heartbeat = before.clone();
    heartbeat.status.as_mut().expect("a test object").conditions = Some(vec![
        serde_json::from_value(json!({"type": "Ready", "status": "True"})).expect("a test object"),
    ]);
    assert!(same_to_filters(&before, &heartbeat));
    assert!(!same_to_filters(&before, &node("n0", "b")));
    let mut smaller = before.clone();
    smaller
        .status
        .as_mut()
        .expect("a test object")
        .allocatable
        .as_mut()
        .expect("a test object")
        .insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("4".into()),
        );
    assert!(!same_to_filters(&before, &smaller));
    let mut tainted = before.clone();
    tainted.spec = Some(
        serde_json::from_value(json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}))
            .expect("a test object"),
    );
    assert!(!same_to_filters(&before, &tainted));
}

/// A pod whose requests saturate its node's total leaves, found in review: the rest of
/// the node's pods is what counts again, not the saturated total less its requests.
#[test]
fn a_pod_that_saturated_its_node_leaves_the_others_counted() {
    let nodes = nodes();
    let huge = pod(
        1,
        &Shape {
            huge: true,
            ..bound_to(0)
        },
    );
    let small = pod(
        2,
        &Shape {
            anti_affinity: false,
            host_port: None,
            ..bound_to(0)
        },
    );
    let mut state = FilterState::new(&nodes, &[huge.clone(), small.clone()], &namespaces());
    assert_eq!(state.forget_bound([&huge]), 0);
    assert_eq!(state.summary(), fresh(&nodes, &[small]));
}

/// After a watch re-list every pod comes back as a new copy: all of them forgotten and
/// counted again in one go (quadratic before review).
#[test]
fn every_pod_forgotten_at_once_leaves_nothing() {
    let nodes = nodes();
    let pods: Vec<Pod> = (0..2000)
        .map(|i| {
            pod(
                i,
                &Shape {
                    node: Some(i % 4),
                    app: Some(i % 3),
                    ..bound_to(0)
                },
            )
        })
        .collect();
    let mut state = FilterState::new(&nodes, &pods, &namespaces());
    for pod in &pods {
        assert!(state.count_bound(pod));
    }
    assert_eq!(state.forget_bound(&pods), 0);
    assert_eq!(state.summary(), fresh(&nodes, &pods));
}

fn bound_to(node: usize) -> Shape {
    Shape {
        namespace: 0,
        app: Some(0),
        cpu_millis: 500,
        huge: false,
        gpus: 1,
        host_port: Some(80),
        anti_affinity: true,
        finished: false,
        terminating: false,
        node: Some(node),
    }
}
