//! The loader's tests: documents, lists, errors and limits.

use super::*;

const SLICE: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.example.com
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  nodeName: node-a
  devices:
  - name: gpu-0
"#;

#[test]
fn multi_document_yaml_and_lists_are_read() {
    let text = format!(
        "{SLICE}---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {{name: node-a}}\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {{name: d, namespace: x}}\n---\n"
    );
    let mut loader = Loader::new();
    loader.add_yaml("a.yaml", &text).unwrap();
    let loaded = loader.finish();
    assert_eq!(loaded.objects.resource_slices.len(), 1);
    assert_eq!(loaded.objects.nodes.len(), 1);
    assert_eq!(loaded.skipped.get("apps/v1 Deployment"), Some(&1));
    let note = loaded.skipped_note().unwrap();
    assert!(note.contains("apps/v1 Deployment ×1"), "{note}");
}

#[test]
fn kept_kinds_are_returned_untyped() {
    let mut loader = Loader::new();
    loader.keep_kind("dra-autoscaler.io", "NodeGroup");
    loader
        .add_yaml(
            "ng.yaml",
            "apiVersion: dra-autoscaler.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {maxSize: 2}\n",
        )
        .unwrap();
    let loaded = loader.finish();
    assert_eq!(loaded.objects.extra.len(), 1);
    assert_eq!(loaded.objects.extra[0].kind, "NodeGroup");
    assert!(loaded.skipped.is_empty());
}

#[test]
fn a_bad_field_is_reported_with_file_document_object_and_path() {
    let text = format!(
        "{SLICE}---\napiVersion: v1\nkind: Node\nmetadata: {{name: node-n}}\nspec: {{unschedulable: maybe}}\n"
    );
    let mut loader = Loader::new();
    let err = loader.add_yaml("cluster.yaml", &text).unwrap_err();
    assert_eq!(err.origin.document, 1);
    assert_eq!(err.object.as_deref(), Some("Node node-n"));
    assert_eq!(err.field.as_deref(), Some("spec.unschedulable"));
    let shown = err.to_string();
    assert!(
        shown.starts_with("cluster.yaml: document 1 (Node node-n): field spec.unschedulable:"),
        "{shown}"
    );
}

#[test]
fn unsupported_versions_and_missing_kinds_are_errors() {
    let mut loader = Loader::new();
    let err = loader
        .add_yaml(
            "x.yaml",
            "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nmetadata: {name: s}\n",
        )
        .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("apiVersion"));
    let err = loader
        .add_yaml("x.yaml", "metadata: {name: s}\n")
        .unwrap_err();
    assert_eq!(err.field.as_deref(), Some("kind"));
    let err = loader.add_yaml("x.yaml", "- 1\n- 2\n").unwrap_err();
    assert!(err.message.contains("found a list"), "{}", err.message);
}

#[test]
fn yaml_1_1_boolean_spellings_stay_strings() {
    let mut loader = Loader::new();
    loader
        .add_yaml(
            "x.yaml",
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-y\n  labels: {a: Y, b: on, c: yes}\n",
        )
        .unwrap();
    let node = &loader.finish().objects.nodes[0];
    let labels = node.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["a"], "Y");
    assert_eq!(labels["b"], "on");
    assert_eq!(labels["c"], "yes");
}

#[test]
fn yaml_limits_grow_with_the_file() {
    // 30,000 objects are ~300,000 YAML nodes: over serde-saphyr's fixed
    // default of 250,000, which refused real `kubectl get -o yaml` files.
    let mut text = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..30_000 {
        text.push_str(&format!(
            "- apiVersion: v1\n  kind: Namespace\n  metadata: {{name: ns-{i}, labels: {{a: b}}}}\n"
        ));
    }
    let mut loader = Loader::new();
    loader.add_yaml("big.yaml", &text).unwrap();
    assert_eq!(loader.finish().objects.namespaces.len(), 30_000);
}

#[test]
fn an_alias_bomb_is_refused_naming_the_limit_and_the_document() {
    let mut bomb = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ok}\n---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..10 {
        let prev = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let err = Loader::new().add_yaml("bomb.yaml", &bomb).unwrap_err();
    assert_eq!(err.origin.document, 1, "{err}");
    assert!(err.message.starts_with("YAML limit hit"), "{err}");
    assert!(err.message.contains("aliases"), "{err}");
}

#[test]
fn duplicate_objects_are_kept_once_and_reported_once() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n";
    let pod_default = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: {containers: [{name: c, image: i}]}\n";
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n";
    let mut loader = Loader::new();
    for source in ["a.yaml", "b.yaml", "c.yaml"] {
        loader.add_yaml(source, pod).unwrap();
        loader.add_yaml(source, node).unwrap();
    }
    loader.add_yaml("d.yaml", pod_default).unwrap();
    let loaded = loader.finish();
    assert_eq!(loaded.objects.pods.len(), 1);
    assert_eq!(loaded.objects.nodes.len(), 1);
    assert_eq!(loaded.duplicates.len(), 2);
    let note = loaded.duplicates_note().unwrap();
    assert!(
        note.contains("Pod default/p") || note.contains("Pod p"),
        "{note}"
    );
    assert!(note.contains("Node n"), "{note}");
}

#[test]
fn empty_yaml_and_json_files_are_alike() {
    for text in ["", "  \n", "\n\n"] {
        let mut loader = Loader::new();
        loader.add_yaml("e.yaml", text).unwrap();
        loader.add_json("e.json", text).unwrap();
        let loaded = loader.finish();
        assert!(loaded.objects.pods.is_empty() && loaded.skipped.is_empty());
    }
}

#[test]
fn fields_the_api_server_would_refuse_are_errors() {
    let cases = [
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, count: -1}}]}}\n",
            "spec.devices.requests[0].exactly.count",
            "must be greater than zero",
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec: {spec: {devices: {requests: [{name: r, firstAvailable: [{name: a, deviceClassName: g, count: -2}]}]}}}\n",
            "spec.spec.devices.requests[0].firstAvailable[0].count",
            "must be greater than zero",
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, pool: {name: p, generation: 1, resourceSliceCount: 1}, nodeName: n, devices: [{name: x, capacity: {mem: {value: -1Gi}}}]}\n",
            "spec.devices[0].capacity[mem].value",
            "must be greater than or equal to 0",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {requests: {cpu: '-1'}}}]}\n",
            "spec.containers[0].resources.requests[cpu]",
            "must be greater than or equal to 0",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}], resourceClaims: [{name: other, resourceClaimName: x}]}\n",
            "spec.containers[0].resources.claims[0]",
            "Not found: \"gpu\": must be one of the names in pod.spec.resourceClaims: other",
        ),
    ];
    for (text, field, message) in cases {
        let err = Loader::new().add_yaml("x.yaml", text).unwrap_err();
        assert_eq!(err.field.as_deref(), Some(field), "{err}");
        assert!(err.message.contains(message), "{err}");
    }
    // Zero is the API server's "unset", defaulted to one.
    let ok = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, count: 0}}]}}\n";
    Loader::new().add_yaml("x.yaml", ok).unwrap();
}

#[test]
fn invalid_yaml_and_json_are_errors_not_panics() {
    let mut loader = Loader::new();
    assert!(loader.add_yaml("x.yaml", "a: [b\n").is_err());
    assert!(loader.add_json("x.json", "{").is_err());
    loader
        .add_json(
            "x.json",
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ml"}}"#,
        )
        .unwrap();
    assert_eq!(loader.finish().objects.namespaces.len(), 1);
}

mod fuzz {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the bytes, loading returns objects or an error; it never
        /// panics.
        #[test]
        fn loader_never_panics(text in "\\PC{0,400}") {
            let mut loader = Loader::new();
            let _ = loader.add_yaml("fuzz.yaml", &text);
            let _ = loader.add_json("fuzz.json", &text);
        }

        /// Structurally valid documents with arbitrary field values.
        #[test]
        fn loader_never_panics_on_odd_values(
            kind in prop::sample::select(vec!["Node", "Pod", "ResourceSlice", "ResourceClaim", "DeviceClass", "List"]),
            value in "\\PC{0,40}",
            count in any::<i64>(),
        ) {
            let api = if kind == "Node" || kind == "Pod" || kind == "List" { "v1" } else { "resource.k8s.io/v1" };
            let text = format!(
                "apiVersion: {api}\nkind: {kind}\nmetadata: {{name: {value:?}}}\nspec:\n  devices:\n    requests:\n    - name: {value:?}\n      exactly: {{deviceClassName: {value:?}, count: {count}}}\n  driver: {value:?}\n  pool: {{name: {value:?}, generation: {count}, resourceSliceCount: {count}}}\nitems: [{value:?}]\n"
            );
            let mut loader = Loader::new();
            let _ = loader.add_yaml("fuzz.yaml", &text);
        }
    }
}

/// Room is made up front for each typed kind the list's items name (by their
/// `apiVersion` and `kind`), and none for kinds that are not loaded as such.
#[test]
fn a_list_makes_room_for_its_nodes_and_pods_before_loading_them() {
    let node =
        |n: &str| format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{n}"}}}}"#);
    let pod = |n: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{n}"}},"spec":{{"containers":[]}}}}"#
        )
    };
    let items = [
        node("a"),
        pod("p"),
        node("b"),
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}"#.to_string(),
        pod("q"),
        node("c"),
        r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"}}"#
            .to_string(),
    ];
    let text = format!(r#"{{"kind":"List","items":[{}]}}"#, items.join(","));
    let found = stream::list_items(&text).unwrap();
    assert_eq!(found.len(), items.len());
    let mut loader = Loader::new();
    loader.reserve_for(&found);
    let objects = &loader.loaded.objects;
    assert!(
        objects.nodes.capacity() >= 3,
        "{}",
        objects.nodes.capacity()
    );
    assert!(objects.pods.capacity() >= 2, "{}", objects.pods.capacity());
    assert!(objects.resource_slices.capacity() >= 1);
    assert_eq!(objects.resource_claims.capacity(), 0);
    assert!(objects.nodes.is_empty() && objects.pods.is_empty());
}

/// A list of many items of every path a list item can take: typed directly (nodes,
/// pods, slices, claims, namespaces, classes), through the general path (a pod with
/// `workloadRef`, one with a `\u` escape, a template), kept untyped (NodeGroups),
/// skipped (Deployments), and duplicates of items read chunks before.
fn mixed_list(items: usize, invalid_at: Option<usize>) -> String {
    let item = |i: usize| -> String {
        if Some(i) == invalid_at {
            return format!(
                r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"bad-{i}"}},"spec":{{"unschedulable":"maybe"}}}}"#
            );
        }
        match i % 11 {
            0 => format!(
                r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"n-{i}","labels":{{"zone":"z{}"}}}},"status":{{"allocatable":{{"cpu":"4"}},"images":[{{"names":["x"]}}]}}}}"#,
                i % 3
            ),
            1 => format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p-{i}","namespace":"ns{}"}},"spec":{{"containers":[{{"name":"c","env":[{{"name":"A"}}],"resources":{{"requests":{{"cpu":"1"}}}}}}]}}}}"#,
                i % 4
            ),
            2 => format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"w-{i}"}},"spec":{{"workloadRef":{{"name":"wl","podGroup":"g"}},"containers":[{{"name":"c"}}]}}}}"#
            ),
            3 => format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"e-{i}"}},"spec":{{"containers":[{{"name":"\u0063"}}]}}}}"#
            ),
            4 => format!(
                r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"s-{i}"}},"spec":{{"driver":"d","pool":{{"name":"p{i}","generation":1,"resourceSliceCount":1}},"nodeName":"n-{i}","devices":[{{"name":"gpu-0"}}]}}}}"#
            ),
            5 => format!(
                r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{{"name":"c-{i}","namespace":"ns"}},"spec":{{}}}}"#
            ),
            6 => format!(
                r#"{{"apiVersion":"dra-autoscaler.io/v1alpha1","kind":"NodeGroup","metadata":{{"name":"g-{i}"}},"spec":{{"maxSize":2}}}}"#
            ),
            7 => format!(
                r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"d-{i}","namespace":"x"}}}}"#
            ),
            8 => format!(
                r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"ns-{i}"}}}}"#
            ),
            9 => format!(
                r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{{"name":"t-{i}","namespace":"ns"}},"spec":{{"spec":{{}}}}}}"#
            ),
            // A copy of a node (and, further on, of a pod) read hundreds of items before.
            _ if i > 600 && i.is_multiple_of(2) => format!(
                r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"n-{}","labels":{{"copy":"yes"}}}}}}"#,
                (i - 600) / 11 * 11
            ),
            _ if i > 600 => format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p-{}","namespace":"ns{}"}},"spec":{{"containers":[]}}}}"#,
                (i - 600) / 11 * 11 + 1,
                ((i - 600) / 11 * 11 + 1) % 4
            ),
            _ => format!(
                r#"{{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{{"name":"dc-{i}"}},"spec":{{}}}}"#
            ),
        }
    };
    let items: Vec<String> = (0..items).map(item).collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        items.join(",")
    )
}

fn load_on(threads: usize, text: &str) -> (Result<(), LoadError>, Loaded) {
    let mut loader = Loader::new();
    loader
        .trim_unread()
        .keep_kind("dra-autoscaler.io", "NodeGroup")
        .type_on_threads(threads);
    let result = loader.add_json("list.json", text);
    (result, loader.finish())
}

/// Typed on two or three threads, a list loads as on one: the same objects of every
/// kind in the same order, the same duplicates and skipped kinds, and, for a list with
/// an invalid item, the same error (the first in the list's order).
#[test]
fn a_list_typed_on_several_threads_loads_as_on_one() {
    let text = mixed_list(3_000, None);
    let (result, one) = load_on(1, &text);
    result.unwrap();
    // Every path was taken, by many items.
    let objects = &one.objects;
    // 273 of each residue mod 11 among 3,000; the copies (residue 10 past item 600) are
    // dropped.
    assert_eq!((objects.nodes.len(), objects.pods.len()), (273, 3 * 273));
    assert!(objects.pod_workload_refs.len() > 200);
    assert!(objects.resource_claim_templates.len() > 200 && objects.extra.len() > 200);
    assert!(one.duplicates.len() > 100, "{}", one.duplicates.len());
    assert_eq!(one.skipped.get("apps/v1 Deployment"), Some(&273));
    for threads in [2, 3] {
        let (result, many) = load_on(threads, &text);
        result.unwrap();
        let (a, b) = (&one.objects, &many.objects);
        assert_eq!(a.nodes, b.nodes, "{threads} threads");
        assert_eq!(a.pods, b.pods, "{threads} threads");
        assert_eq!(a.namespaces, b.namespaces);
        assert_eq!(a.device_classes, b.device_classes);
        assert_eq!(a.resource_slices, b.resource_slices);
        assert_eq!(a.resource_claims, b.resource_claims);
        assert_eq!(a.resource_claim_templates, b.resource_claim_templates);
        assert_eq!(a.extra, b.extra);
        assert_eq!(a.pod_workload_refs, b.pod_workload_refs);
        assert_eq!(one.duplicates, many.duplicates);
        assert_eq!(one.skipped, many.skipped);
    }
    // The first copy of a duplicate is the one kept.
    assert!(objects.nodes.iter().all(|n| {
        n.metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key("copy"))
    }));
}

#[test]
fn a_list_typed_on_several_threads_stops_at_the_same_invalid_item() {
    let text = mixed_list(3_000, Some(2_222));
    let (expected, _) = load_on(1, &text);
    let expected = expected.unwrap_err();
    assert_eq!(expected.origin.item, Some(2_222));
    assert_eq!(expected.field.as_deref(), Some("spec.unschedulable"));
    for threads in [2, 3] {
        let (actual, _) = load_on(threads, &text);
        assert_eq!(actual.unwrap_err(), expected, "{threads} threads");
    }
}
