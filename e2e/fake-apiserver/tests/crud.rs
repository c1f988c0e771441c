//! CRUD round trips through a kube 5 client: built-ins, a DRA ResourceSlice and a
//! custom resource with a status subresource, with upstream's error reasons.

use dra_fake_apiserver::FakeApiServer;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Namespace, Node, Pod},
    resource::v1::ResourceSlice,
};
use kube::{
    Api, Discovery, ResourceExt,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams,
    },
    core::Status,
    discovery::Scope,
};
use serde_json::json;

async fn server() -> FakeApiServer {
    FakeApiServer::builder()
        .resource(
            "dra-autoscaler.io",
            "v1alpha1",
            "nodegroups",
            "NodeGroup",
            false,
            true,
        )
        .start()
        .await
        .expect("server starts")
}

fn api_error(err: kube::Error) -> Box<Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn rv(obj: &impl ResourceExt) -> u64 {
    obj.resource_version()
        .expect("resourceVersion set")
        .parse()
        .expect("resourceVersion is an integer")
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }))
    .expect("valid pod")
}

#[tokio::test]
async fn pod_round_trip_stamps_server_fields() {
    let server = server().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");

    let created = pods
        .create(&PostParams::default(), &pod("p1"))
        .await
        .expect("create");
    assert!(!created.uid().expect("uid").is_empty());
    assert!(created.creation_timestamp().is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.namespace().as_deref(), Some("default"));
    // Upstream's pod strategy resets status on create to Pending.
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );

    let fetched = pods.get("p1").await.expect("get");
    assert_eq!(fetched, created);

    let mut changed = fetched.clone();
    changed.labels_mut().insert("tier".into(), "front".into());
    let replaced = pods
        .replace("p1", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert!(rv(&replaced) > rv(&created));
    assert_eq!(replaced.uid(), created.uid());
    assert_eq!(replaced.creation_timestamp(), created.creation_timestamp());
    // Labels are metadata: generation tracks spec only.
    assert_eq!(replaced.metadata.generation, Some(1));

    let deleted = pods
        .delete("p1", &DeleteParams::default())
        .await
        .expect("delete");
    let deleted = deleted.left().expect("delete returns the object");
    assert_eq!(deleted.name_any(), "p1");
    assert_eq!(pods.get_opt("p1").await.expect("get_opt"), None);
}

#[tokio::test]
async fn node_status_is_kept_on_create_and_only_changed_through_status() {
    let server = server().await;
    let nodes: Api<Node> = Api::all(server.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "gpu-node-1", "labels": {"pool": "a"}},
        "spec": {"providerID": "fake://gpu-node-1"},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}},
    }))
    .expect("valid node");
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create");
    let allocatable = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get("cpu"))
            .map(|q| q.0.clone())
    };
    assert_eq!(allocatable(&created).as_deref(), Some("8"));

    let mut edit = created.clone();
    edit.status =
        Some(serde_json::from_value(json!({"allocatable": {"cpu": "2"}})).expect("status"));
    edit.spec = Some(
        serde_json::from_value(json!({"providerID": "fake://gpu-node-1", "unschedulable": true}))
            .expect("spec"),
    );
    let replaced = nodes
        .replace("gpu-node-1", &PostParams::default(), &edit)
        .await
        .expect("replace");
    assert_eq!(
        allocatable(&replaced).as_deref(),
        Some("8"),
        "main resource writes ignore status"
    );
    assert_eq!(
        replaced.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true)
    );

    let status_patch =
        json!({"status": {"allocatable": {"cpu": "16"}}, "spec": {"unschedulable": false}});
    let patched = nodes
        .patch_status(
            "gpu-node-1",
            &PatchParams::default(),
            &Patch::Merge(&status_patch),
        )
        .await
        .expect("patch status");
    assert_eq!(allocatable(&patched).as_deref(), Some("16"));
    assert_eq!(
        patched.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true),
        "status writes ignore spec"
    );
}

#[tokio::test]
async fn resource_slice_round_trip() {
    let server = server().await;
    let slices: Api<ResourceSlice> = Api::all(server.client());
    let slice: ResourceSlice = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.example.com"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {"model": {"string": "H200"}}, "capacity": {"memory": {"value": "141Gi"}}},
                {"name": "gpu-1", "attributes": {"model": {"string": "H200"}}, "capacity": {"memory": {"value": "141Gi"}}},
            ],
        },
    }))
    .expect("valid slice");
    let created = slices
        .create(&PostParams::default(), &slice)
        .await
        .expect("create");
    assert_eq!(created.spec.devices.as_ref().map(Vec::len), Some(2));
    assert_eq!(created.spec.driver, "gpu.example.com");

    let listed = slices.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    let list_rv: u64 = listed
        .metadata
        .resource_version
        .expect("list rv")
        .parse()
        .expect("int");
    assert!(list_rv >= rv(&created));

    slices
        .delete("node-1-gpu.example.com", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        slices
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}

fn nodegroups(server: &FakeApiServer) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("dra-autoscaler.io", "v1alpha1", "NodeGroup");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "nodegroups");
    Api::all_with(server.client(), &ar)
}

#[tokio::test]
async fn custom_resource_status_subresource_and_generation() {
    let server = server().await;
    let api = nodegroups(&server);
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "dra-autoscaler.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": "h200"},
        "spec": {"minSize": 0, "maxSize": 4},
        "status": {"size": 3},
    }))
    .expect("valid object");
    let created = api
        .create(&PostParams::default(), &body)
        .await
        .expect("create");
    assert!(
        created.data.get("status").is_none(),
        "CR status is dropped on create"
    );
    assert_eq!(created.metadata.generation, Some(1));

    let with_status = api
        .patch_status(
            "h200",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"size": 2}})),
        )
        .await
        .expect("patch status");
    assert_eq!(with_status.data["status"]["size"], 2);
    assert_eq!(
        with_status.metadata.generation,
        Some(1),
        "status changes keep generation"
    );

    let spec_change = api
        .patch(
            "h200",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxSize": 8}})),
        )
        .await
        .expect("patch spec");
    assert_eq!(spec_change.metadata.generation, Some(2));
    assert_eq!(spec_change.data["status"]["size"], 2);

    // A status change sent to the main resource is ignored, so nothing changes.
    let ignored = api
        .patch(
            "h200",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"size": 7}})),
        )
        .await
        .expect("patch main with status");
    assert_eq!(ignored.data["status"]["size"], 2);
    assert_eq!(ignored.resource_version(), spec_change.resource_version());

    let status = api.get_status("h200").await.expect("get status");
    assert_eq!(status.data["spec"]["maxSize"], 8);
}

#[tokio::test]
async fn errors_carry_upstream_reasons() {
    let server = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let missing = api_error(cms.get("nope").await.expect_err("missing"));
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "configmaps \"nope\" not found");
    assert_eq!(cms.get_opt("nope").await.expect("get_opt"), None);

    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).expect("cm");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let dup = api_error(
        cms.create(&PostParams::default(), &cm)
            .await
            .expect_err("duplicate"),
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    let bad: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "Not_Valid"}})).expect("cm");
    let invalid = api_error(
        cms.create(&PostParams::default(), &bad)
            .await
            .expect_err("bad name"),
    );
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn put_with_a_stale_resource_version_conflicts() {
    let server = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"k": "1"}})).expect("cm");
    let v1 = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");

    let mut first = v1.clone();
    first.data = Some([("k".to_owned(), "2".to_owned())].into());
    cms.replace("c", &PostParams::default(), &first)
        .await
        .expect("first writer wins");

    let mut second = v1.clone();
    second.data = Some([("k".to_owned(), "3".to_owned())].into());
    let conflict = api_error(
        cms.replace("c", &PostParams::default(), &second)
            .await
            .expect_err("stale"),
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));

    // Without a resourceVersion, PUT is an unconditional replace.
    second.metadata.resource_version = None;
    let forced = cms
        .replace("c", &PostParams::default(), &second)
        .await
        .expect("unconditional");
    assert_eq!(
        forced
            .data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("3")
    );
}

#[tokio::test]
async fn lease_updates_with_a_resource_version_precondition() {
    let server = server().await;
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "dra-autoscaler"},
        "spec": {"holderIdentity": "replica-a", "leaseDurationSeconds": 15},
    }))
    .expect("lease");
    let held = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("acquire");

    let mut renew = held.clone();
    renew.spec.as_mut().expect("spec").lease_transitions = Some(0);
    let renewed = leases
        .replace("dra-autoscaler", &PostParams::default(), &renew)
        .await
        .expect("renew");

    // A second replica that read the lease before the renewal must lose.
    let mut steal = held.clone();
    steal.spec.as_mut().expect("spec").holder_identity = Some("replica-b".into());
    let lost = api_error(
        leases
            .replace("dra-autoscaler", &PostParams::default(), &steal)
            .await
            .expect_err("stale"),
    );
    assert_eq!(lost.code, 409);

    let mut takeover = renewed.clone();
    takeover.spec.as_mut().expect("spec").holder_identity = Some("replica-b".into());
    let taken = leases
        .replace("dra-autoscaler", &PostParams::default(), &takeover)
        .await
        .expect("fresh");
    assert_eq!(
        taken.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("replica-b")
    );
}

#[tokio::test]
async fn generate_name_creates_distinct_objects() {
    let server = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "scale-up-"}})).expect("cm");
    let a = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create a");
    let b = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create b");
    assert!(a.name_any().starts_with("scale-up-"));
    assert_eq!(a.name_any().len(), "scale-up-".len() + 5);
    assert_ne!(a.name_any(), b.name_any());
}

#[tokio::test]
async fn fresh_server_has_the_default_namespaces() {
    let server = server().await;
    let namespaces: Api<Namespace> = Api::all(server.client());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let default = namespaces.get("default").await.expect("get");
    assert_eq!(
        default.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );
}

#[tokio::test]
async fn discovery_and_version() {
    let server = FakeApiServer::builder()
        .version("1.36.4")
        .resource(
            "dra-autoscaler.io",
            "v1alpha1",
            "nodegroups",
            "NodeGroup",
            false,
            true,
        )
        .resource(
            "scheduling.x-k8s.io",
            "v1alpha1",
            "podgroups",
            "PodGroup",
            true,
            true,
        )
        .start()
        .await
        .expect("server starts");
    let client = server.client();
    let version = client.apiserver_version().await.expect("version");
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "36")
    );
    assert_eq!(version.git_version, "v1.36.4");

    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let gvk = GroupVersionKind::gvk("dra-autoscaler.io", "v1alpha1", "NodeGroup");
    let (ar, caps) = discovery.resolve_gvk(&gvk).expect("NodeGroup discovered");
    assert_eq!(ar.plural, "nodegroups");
    assert_eq!(caps.scope, Scope::Cluster);
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status")
    );

    let pg = GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup");
    assert_eq!(
        discovery.resolve_gvk(&pg).map(|(_, c)| c.scope),
        Some(Scope::Namespaced)
    );
    let slice = GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceSlice");
    assert!(discovery.resolve_gvk(&slice).is_some());
    let pods = GroupVersionKind::gvk("", "v1", "Pod");
    let (_, pod_caps) = discovery.resolve_gvk(&pods).expect("pods");
    assert!(pod_caps.supports_operation("watch"));
    assert!(
        pod_caps
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "binding")
    );

    // Aggregated discovery (two requests) finds the same resources.
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    let (agg_ar, agg_caps) = aggregated
        .resolve_gvk(&gvk)
        .expect("NodeGroup in aggregated");
    assert_eq!(agg_ar.plural, "nodegroups");
    assert_eq!(agg_caps.scope, Scope::Cluster);
    assert!(
        agg_caps
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status")
    );
    let (_, agg_pod) = aggregated.resolve_gvk(&pods).expect("pods in aggregated");
    assert_eq!(agg_pod.scope, Scope::Namespaced);
    assert_eq!(
        aggregated
            .get("scheduling.k8s.io")
            .map(|g| g.preferred_version_or_latest().to_owned()),
        Some("v1".to_owned())
    );

    let (pinned, _) = kube::discovery::pinned_kind(&client, &gvk)
        .await
        .expect("pinned kind");
    assert_eq!(pinned.plural, "nodegroups");
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let server = server().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p1"))
        .await
        .expect("create");
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
    });
    let _: serde_json::Value = pods
        .create_subresource("binding", "p1", &PostParams::default(), &binding)
        .await
        .expect("bind");
    let bound = pods.get("p1").await.expect("get");
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("node-a")
    );
    let scheduled = bound
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| c.status);
    assert_eq!(scheduled.as_deref(), Some("True"));

    let again = pods
        .create_subresource::<_, serde_json::Value>(
            "binding",
            "p1",
            &PostParams::default(),
            &binding,
        )
        .await
        .expect_err("already bound");
    assert_eq!(api_error(again).code, 409);
}

#[tokio::test]
async fn delete_collection_removes_selected_objects() {
    let server = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}}}))
                .expect("cm");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let deleted = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=web"),
        )
        .await
        .expect("deletecollection")
        .left()
        .expect("a list of deleted objects");
    let names: Vec<String> = deleted.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["a", "b"]);
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(left, ["c"]);
}

#[tokio::test]
async fn with_taint_admission_a_new_node_is_created_not_ready_as_kube_apiserver_does() {
    // kube-apiserver's TaintNodesByCondition admission: every Node create gets
    // node.kubernetes.io/not-ready:NoSchedule; an update does not get it back.
    let server = FakeApiServer::builder()
        .taint_new_nodes(true)
        .start()
        .await
        .expect("server starts");
    let nodes: Api<Node> = Api::all(server.client());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
    }))
    .expect("valid node");
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("created");
    let keys = |n: &Node| -> Vec<String> {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    };
    assert_eq!(
        keys(&created),
        [
            "nvidia.com/gpu:NoSchedule",
            "node.kubernetes.io/not-ready:NoSchedule"
        ]
    );
    let lifted = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}),
            ),
        )
        .await
        .expect("patched");
    assert_eq!(keys(&lifted), ["nvidia.com/gpu:NoSchedule"]);

    // Without the option (the default), nodes are stored as sent.
    let plain = server_without_admission().await;
    let created = Api::<Node>::all(plain.client())
        .create(&PostParams::default(), &node)
        .await
        .expect("created");
    assert_eq!(keys(&created), ["nvidia.com/gpu:NoSchedule"]);
}

async fn server_without_admission() -> FakeApiServer {
    server().await
}
