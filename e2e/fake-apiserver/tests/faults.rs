//! Fault injection and the request log.

use dra_fake_apiserver::{FakeApiServer, Verb};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use serde_json::json;

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}})).expect("node")
}

fn api_code(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn fail_next_fails_exactly_n_matching_requests() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let nodes: Api<Node> = Api::all(server.client());
    server.fail_next(Verb::Create, "nodes", 2, 500);

    // Other verbs and resources are unaffected.
    assert!(nodes.get_opt("n0").await.expect("get_opt").is_none());
    for _ in 0..2 {
        let (code, reason) = api_code(
            nodes
                .create(&PostParams::default(), &node("n1"))
                .await
                .expect_err("injected"),
        );
        assert_eq!((code, reason.as_str()), (500, "InternalError"));
    }
    nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .expect("third create succeeds");

    let creates: Vec<u16> = server
        .request_log()
        .iter()
        .filter(|r| r.verb == Some(Verb::Create) && r.resource.as_deref() == Some("nodes"))
        .map(|r| r.status)
        .collect();
    assert_eq!(creates, [500, 500, 201]);
}

#[tokio::test]
async fn status_subresource_faults_leave_the_main_resource_alone() {
    let server = FakeApiServer::builder()
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
        .expect("server");
    let gvk = GroupVersionKind::gvk("dra-autoscaler.io", "v1alpha1", "NodeGroup");
    let api: Api<DynamicObject> = Api::all_with(
        server.client(),
        &ApiResource::from_gvk_with_plural(&gvk, "nodegroups"),
    );
    let ng: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "dra-autoscaler.io/v1alpha1", "kind": "NodeGroup",
        "metadata": {"name": "h200"}, "spec": {"maxSize": 4},
    }))
    .expect("nodegroup");
    api.create(&PostParams::default(), &ng)
        .await
        .expect("create");
    server.fail_next(Verb::Patch, "nodegroups/status", 1, 409);
    let pp = PatchParams::default();
    api.patch("h200", &pp, &Patch::Merge(json!({"spec": {"maxSize": 5}})))
        .await
        .expect("spec patch is not affected");
    let (code, reason) = api_code(
        api.patch_status("h200", &pp, &Patch::Merge(json!({"status": {"size": 1}})))
            .await
            .expect_err("injected conflict"),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    api.patch_status("h200", &pp, &Patch::Merge(json!({"status": {"size": 1}})))
        .await
        .expect("next status patch succeeds");
}

#[tokio::test]
async fn kube_retries_injected_503s_by_default() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    server.fail_next(Verb::Get, "configmaps", 1, 503);
    // kube's default client retries 429/503/504, so the caller sees the retry's answer.
    assert!(cms.get_opt("absent").await.expect("retried").is_none());
    let gets: Vec<u16> = server
        .request_log()
        .iter()
        .filter(|r| r.verb == Some(Verb::Get))
        .map(|r| r.status)
        .collect();
    assert_eq!(gets, [503, 404]);
}

#[tokio::test]
async fn request_log_records_what_the_client_did() {
    let server = FakeApiServer::builder().start().await.expect("server");
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}})).expect("configmap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .expect("patch");
    let log = server.request_log();
    let last = log.last().expect("logged");
    assert_eq!(last.method, "PATCH");
    assert_eq!(last.verb, Some(Verb::Patch));
    assert_eq!(last.resource.as_deref(), Some("configmaps"));
    assert_eq!(last.namespace.as_deref(), Some("kube-system"));
    assert_eq!(last.name.as_deref(), Some("c"));
    assert_eq!(
        last.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(last.path, "/api/v1/namespaces/kube-system/configmaps/c");
    server.clear_request_log();
    assert!(server.request_log().is_empty());
}
