//! `pods/<name>/eviction` through kube's `Api::evict`, with the PodDisruptionBudget answers
//! kube-apiserver gives (pkg/registry/core/pod/storage/eviction.go): 201 and the pod gone when
//! the budget allows, 429 with a `DisruptionBudget` cause when it does not, budgets ignored for
//! pods that are not running, 500 for a pod under two budgets.

use dra_fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::json;

async fn server() -> FakeApiServer {
    FakeApiServer::builder()
        .start()
        .await
        .expect("server starts")
}

/// A client without kube's built-in retry of 429 answers, so a refused eviction comes back
/// at once (as a drain wants it: it retries on its own clock).
fn no_retry(server: &FakeApiServer) -> kube::Client {
    let mut config = kube::Config::new(server.url().parse().expect("server URL"));
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

fn api_error(err: kube::Error) -> Box<Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A running, ready pod labelled `app=<app>`.
async fn running_pod(pods: &Api<Pod>, name: &str, app: &str, phase: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("valid pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let status =
        json!({"status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod status set");
}

/// A budget selecting `app=<app>`, with the status the disruption controller would write.
async fn budget(
    pdbs: &Api<PodDisruptionBudget>,
    name: &str,
    app: &str,
    allowed: i32,
    observed: i64,
) {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }))
    .expect("valid budget");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("budget created");
    let status = json!({"status": {
        "observedGeneration": observed,
        "disruptionsAllowed": allowed,
        "currentHealthy": 2,
        "desiredHealthy": 2 - allowed,
        "expectedPods": 2,
    }});
    pdbs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("budget status set");
}

#[tokio::test]
async fn a_pod_without_a_budget_is_evicted_and_gone() {
    let server = server().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    running_pod(&pods, "free", "free", "Running").await;
    pods.evict("free", &EvictParams::default())
        .await
        .expect("evicted");
    assert!(pods.get_opt("free").await.expect("read").is_none());
    let missing = api_error(
        pods.evict("free", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(missing.code, 404);
}

#[tokio::test]
async fn a_budget_spends_one_disruption_per_eviction_then_answers_429() {
    let server = server().await;
    let client = no_retry(&server);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "default");
    running_pod(&pods, "web-0", "web", "Running").await;
    running_pod(&pods, "web-1", "web", "Running").await;
    budget(&pdbs, "web", "web", 1, 1).await;

    pods.evict("web-0", &EvictParams::default())
        .await
        .expect("the budget allows one");
    assert!(pods.get_opt("web-0").await.expect("read").is_none());
    let status = pdbs.get("web").await.expect("read").status.expect("status");
    assert_eq!(status.disruptions_allowed, Some(0));
    assert!(
        status
            .disrupted_pods
            .as_ref()
            .is_some_and(|d| d.contains_key("web-0")),
        "{status:?}"
    );

    let refused = api_error(
        pods.evict("web-1", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 429);
    assert_eq!(refused.reason, "TooManyRequests");
    assert_eq!(
        refused.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &refused.details.as_ref().expect("details").causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    // No disruption controller has recounted the healthy pods yet (2 > desired 1): upstream's
    // default wording.
    assert_eq!(
        cause.message,
        "The disruption budget web does not allow evicting pods currently"
    );
    assert!(pods.get_opt("web-1").await.expect("read").is_some());

    // What the disruption controller writes once web-0 is gone.
    let recounted = json!({"status": {"currentHealthy": 1, "desiredHealthy": 1}});
    pdbs.patch_status("web", &PatchParams::default(), &Patch::Merge(&recounted))
        .await
        .expect("recounted");
    let refused = api_error(
        pods.evict("web-1", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        refused.details.as_ref().expect("details").causes[0].message,
        "The disruption budget web needs 1 healthy pods and has 1 currently"
    );
}

#[tokio::test]
async fn an_unprocessed_budget_refuses_and_pending_pods_ignore_budgets() {
    let server = server().await;
    let client = no_retry(&server);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "default");
    running_pod(&pods, "db-0", "db", "Running").await;
    running_pod(&pods, "db-1", "db", "Pending").await;
    // The controller has not seen generation 1 yet.
    budget(&pdbs, "db", "db", 1, 0).await;

    let refused = api_error(
        pods.evict("db-0", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 429);
    let details = refused.details.as_ref().expect("details");
    assert_eq!(
        details.causes[0].message,
        "The disruption budget db is still being processed by the server."
    );
    assert_eq!(details.retry_after_seconds, 10);

    // A pod that is not running has caused its disruption already.
    pods.evict("db-1", &EvictParams::default())
        .await
        .expect("pending pods ignore budgets");
    assert!(pods.get_opt("db-1").await.expect("read").is_none());
}

#[tokio::test]
async fn two_budgets_on_one_pod_are_refused_and_dry_runs_change_nothing() {
    let server = server().await;
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "default");
    running_pod(&pods, "api-0", "api", "Running").await;
    budget(&pdbs, "api-a", "api", 1, 1).await;

    let dry = EvictParams {
        post_options: PostParams {
            dry_run: true,
            ..Default::default()
        },
        ..Default::default()
    };
    pods.evict("api-0", &dry).await.expect("dry run allowed");
    assert!(pods.get_opt("api-0").await.expect("read").is_some());
    let status = pdbs
        .get("api-a")
        .await
        .expect("read")
        .status
        .expect("status");
    assert_eq!(
        status.disruptions_allowed,
        Some(1),
        "a dry run spends nothing"
    );

    budget(&pdbs, "api-b", "api", 1, 1).await;
    let refused = api_error(
        pods.evict("api-0", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 500);
    assert_eq!(
        refused.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[tokio::test]
async fn discovery_lists_the_eviction_subresource() {
    let server = server().await;
    let discovery = kube::Discovery::new(server.client())
        .run()
        .await
        .expect("discovery");
    assert!(discovery.has_group("policy"));
    let request = http::Request::get("/api/v1")
        .body(Vec::new())
        .expect("request");
    let list: serde_json::Value = server.client().request(request).await.expect("resources");
    let eviction = list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "pods/eviction")
        .expect("pods/eviction listed");
    assert_eq!(eviction["verbs"], json!(["create"]));
}
