//! ProvisioningRequests as Kueue's ProvisioningRequest admission check drives
//! them, against the API stand-in serving cluster-autoscaler's own CRDs
//! (`testdata/crds/`, applied as a user would) and the fake provider over
//! gRPC: the conditions cluster-autoscaler writes, with its reasons and
//! timing (`Accepted`, `Provisioned`, `Failed`, `BookingExpired`), the
//! provider's atomic increase, and the nodes coming up. Also a CapacityBuffer
//! with upstream's status.

mod common;

use common::{Controller, cluster, create_node_group_with_id, eventually, serve_and_connect};
use dra_provider_fake::{Config, FakeProvider};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

const FAKE_CONFIG: &str = r#"
sliceDelayMs: 0
nodeGroups:
  - name: gpu
    spec:
      provider: fake
      providerID: gpu
      minSize: 0
      maxSize: 8
      capacityType: on-demand
      pricePerHour: 1.5
      template:
        capacity: {cpu: "4", memory: 16Gi, pods: "110"}
"#;

const ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
const CHECK: &str = "check-capacity.autoscaling.x-k8s.io";

/// Applies cluster-autoscaler's CRDs, unchanged from upstream.
async fn apply_upstream_crds(client: &Client) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/crds");
    for file in [
        "autoscaling.x-k8s.io_provisioningrequests.yaml",
        "autoscaling.x-k8s.io_capacitybuffers.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).expect("CRD file");
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("CRD YAML");
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .expect("upstream CRD accepted");
    }
}

/// The fake provider serving group `gpu` over gRPC, and the controller
/// connected to it. Returns the controller and what stops the provider.
async fn controller_with_provider(
    client: &Client,
) -> (
    Controller,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), dra_provider::ServeError>>,
) {
    let provider = FakeProvider::new(
        Config::parse(FAKE_CONFIG, "test").expect("config"),
        client.clone(),
        None,
    )
    .await
    .expect("fake provider starts");
    let (executor, served) = serve_and_connect("fake", provider).await;
    let (stop, grpc) = (served.stop, served.task);
    (Controller::start(client, executor).await, stop, grpc)
}

fn resource(kind: &str) -> kube::discovery::ApiResource {
    match kind {
        "ProvisioningRequest" => dra_controller::provreq::apis::provisioning_requests(),
        _ => dra_controller::provreq::apis::capacity_buffers(),
    }
}

async fn create(client: &Client, kind: &str, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).expect("object JSON");
    let ar = match kind {
        "PodTemplate" => {
            kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::PodTemplate>(&())
        }
        other => resource(other),
    };
    Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar)
        .create(&PostParams::default(), &object)
        .await
        .expect("object created");
}

/// A PodTemplate and a ProvisioningRequest for `count` pods of `cpu` CPUs,
/// as Kueue's admission check writes them for workload `workload`.
async fn kueue_request(
    client: &Client,
    workload: &str,
    class: &str,
    parameters: Value,
    count: u32,
    cpu: &str,
) -> String {
    let request = format!("{workload}-dws-prov-1");
    let template = format!("ppt-{request}-main");
    create(
        client,
        "PodTemplate",
        json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": template, "namespace": "default",
                         "labels": {"kueue.x-k8s.io/managed": "true"}},
            "template": {
                "metadata": {"labels": {"app": workload}},
                "spec": {
                    "containers": [{"name": "main", "image": "trainer",
                                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
                    "restartPolicy": "Never"
                }
            }
        }),
    )
    .await;
    create(
        client,
        "ProvisioningRequest",
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": request, "namespace": "default",
                         "labels": {"kueue.x-k8s.io/managed": "true"},
                         "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                                              "name": workload, "uid": format!("uid-{workload}"),
                                              "controller": true, "blockOwnerDeletion": true}]},
            "spec": {
                "provisioningClassName": class,
                "podSets": [{"podTemplateRef": {"name": template}, "count": count}],
                "parameters": parameters
            }
        }),
    )
    .await;
    request
}

/// The request's `status.conditions` as the API server has them.
async fn raw_conditions(client: &Client, name: &str) -> Vec<Value> {
    let object = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &resource("ProvisioningRequest"),
    )
    .get(name)
    .await
    .expect("request read");
    object
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The request's conditions as `(type, status, reason, message)`.
async fn conditions(client: &Client, name: &str) -> Vec<(String, String, String, String)> {
    raw_conditions(client, name)
        .await
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("type"), s("status"), s("reason"), s("message"))
        })
        .collect()
}

fn kinds(conditions: &[(String, String, String, String)]) -> Vec<(&str, &str, &str)> {
    conditions
        .iter()
        .map(|(t, s, r, _)| (t.as_str(), s.as_str(), r.as_str()))
        .collect()
}

/// Waits until the controller's store shows the `kind` object `name` with
/// conditions that satisfy `check` (`what` names it in a timeout).
async fn seen_where(
    controller: &Controller,
    kind: &str,
    name: &str,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) {
    controller
        .wait_for(&format!("{kind} {name} with {what}"), |inputs| {
            inputs.stand_in_objects.iter().any(|o| {
                o.kind == kind
                    && o.object.metadata.name.as_deref() == Some(name)
                    && o.object
                        .data
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|c| check(c))
            })
        })
        .await;
}

/// Waits until the controller's store shows `name` with `count` conditions.
async fn seen(controller: &Controller, kind: &str, name: &str, count: usize) {
    seen_where(
        controller,
        kind,
        name,
        &format!("{count} conditions"),
        |c| c.len() == count,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kueue_request_is_provisioned_its_nodes_come_up_and_its_booking_expires() {
    let server = cluster().await;
    let client = server.client();
    apply_upstream_crds(&client).await;
    create_node_group_with_id(&client, "gpu", "gpu", 8).await;
    // Two pods of 3 CPUs: one 4-CPU node each, started together.
    let request = kueue_request(&client, "train-1", ATOMIC, json!({}), 2, "3").await;
    let (controller, stop, grpc) = controller_with_provider(&client).await;

    let t0 = Timestamp::now();
    let summary = controller.run_once_at(t0).await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    assert_eq!(summary.stand_ins.requests, [format!("default/{request}")]);
    let written = conditions(&client, &request).await;
    assert_eq!(
        kinds(&written),
        [
            ("Accepted", "True", "Accepted"),
            ("Provisioned", "True", "CapacityIsProvisioned")
        ],
        "{written:?}"
    );
    assert_eq!(
        written[0].3,
        "ProvisioningRequest is accepted by ClusterAutoscaler"
    );

    // The provider's nodes register.
    eventually("two gpu Nodes", || async {
        Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|id| id.starts_with("fake://gpu-"))
            })
            .count()
            == 2
    })
    .await;

    // Provisioned: its capacity is booked, nothing more is bought and the
    // conditions stay as written (Provisioned keeps its time).
    seen(&controller, "ProvisioningRequest", &request, 2).await;
    controller
        .wait_for("the Nodes in the store", |i| i.nodes.len() == 2)
        .await;
    let later = controller
        .run_once_at(t0 + SignedDuration::from_mins(5))
        .await;
    assert!(later.scaled_up.is_empty(), "{later:?}");
    assert!(later.stand_ins.requests.is_empty(), "{later:?}");
    let report = later.report.expect("planned: a request is pending");
    let booked = &report.provisioning_requests[0];
    assert_eq!(
        (booked.booked, booked.booked_nodes.len()),
        (2, 2),
        "{booked:?}"
    );

    // Ten minutes after Provisioned turned true, the booking expires.
    let expired = controller
        .run_once_at(t0 + SignedDuration::from_mins(10) + SignedDuration::from_secs(1))
        .await;
    assert_eq!(expired.stand_ins.requests, [format!("default/{request}")]);
    let written = conditions(&client, &request).await;
    assert_eq!(
        kinds(&written),
        [
            ("Accepted", "True", "Accepted"),
            ("Provisioned", "True", "CapacityIsProvisioned"),
            ("BookingExpired", "True", "CapacityReservationTimeExpired")
        ],
        "{written:?}"
    );
    assert_eq!(written[2].3, "Capacity reservation time is expired");

    let _ = stop.send(());
    grpc.await.expect("server task").expect("server stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_cannot_fit_says_why_and_check_capacity_never_scales() {
    let server = cluster().await;
    let client = server.client();
    apply_upstream_crds(&client).await;
    create_node_group_with_id(&client, "gpu", "gpu", 8).await;
    // 16 CPUs: no 4-CPU node of the group holds one pod.
    let too_big = kueue_request(&client, "huge", ATOMIC, json!({}), 2, "16").await;
    // Fits new nodes, but check-capacity never adds any; noRetry fails it.
    let check = kueue_request(&client, "probe", CHECK, json!({"noRetry": "true"}), 1, "1").await;
    // One bad request (its PodTemplate is gone) fails on its own.
    create(
        &client,
        "ProvisioningRequest",
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": "orphan-dws-prov-1", "namespace": "default"},
            "spec": {"provisioningClassName": ATOMIC,
                     "podSets": [{"podTemplateRef": {"name": "ppt-gone"}, "count": 1}]}
        }),
    )
    .await;
    let (controller, stop, grpc) = controller_with_provider(&client).await;

    let summary = controller.run_once().await;
    assert!(summary.scaled_up.is_empty(), "{summary:?}");

    let written = conditions(&client, &too_big).await;
    assert_eq!(
        kinds(&written),
        [
            ("Accepted", "True", "Accepted"),
            ("Provisioned", "False", "CapacityIsNotFound")
        ],
        "{written:?}"
    );
    let message = &written[1].3;
    assert!(
        message.starts_with("Capacity is not found, CA will try to find it later. Why: "),
        "{message}"
    );
    assert!(message.contains("Insufficient cpu"), "{message}");

    let written = conditions(&client, &check).await;
    assert_eq!(
        kinds(&written),
        [
            ("Accepted", "True", "Accepted"),
            ("Failed", "True", "CapacityIsNotFound")
        ],
        "{written:?}"
    );
    assert!(
        written[1].3.contains("never adds nodes"),
        "{}",
        written[1].3
    );

    let written = conditions(&client, "orphan-dws-prov-1").await;
    assert_eq!(
        kinds(&written),
        [("Failed", "True", "FailedToCreatePods")],
        "{written:?}"
    );
    assert!(
        written[0]
            .3
            .contains("PodTemplate default/ppt-gone not found"),
        "{}",
        written[0].3
    );

    // A warning Event on each request says the same.
    let events = common::events(&client, "CapacityIsNotFound").await;
    let regarding: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|(kind, name, type_, _)| (kind.as_str(), name.as_str(), type_.as_str()))
        .collect();
    assert_eq!(
        regarding,
        [
            ("ProvisioningRequest", too_big.as_str(), "Warning"),
            ("ProvisioningRequest", check.as_str(), "Warning")
        ]
    );

    // A failed request is finished: later loops leave it alone.
    seen(&controller, "ProvisioningRequest", &check, 2).await;
    let later = controller.run_once().await;
    assert!(
        !later
            .stand_ins
            .requests
            .contains(&format!("default/{check}"))
    );

    let _ = stop.send(());
    grpc.await.expect("server task").expect("server stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_buffer_gets_upstream_status_and_its_chunks_get_nodes() {
    let server = cluster().await;
    let client = server.client();
    apply_upstream_crds(&client).await;
    create_node_group_with_id(&client, "gpu", "gpu", 8).await;
    create(
        &client,
        "PodTemplate",
        json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": "warm-slot", "namespace": "default"},
            "template": {"spec": {"containers": [{"name": "pause", "image": "pause",
                "resources": {"requests": {"cpu": "3"}}}]}}
        }),
    )
    .await;
    create(
        &client,
        "CapacityBuffer",
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "default"},
            "spec": {"podTemplateRef": {"name": "warm-slot"}, "replicas": 2}
        }),
    )
    .await;
    let (controller, stop, grpc) = controller_with_provider(&client).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    assert_eq!(summary.stand_ins.buffers, ["default/headroom"]);
    let buffer = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &resource("CapacityBuffer"),
    )
    .get("headroom")
    .await
    .expect("buffer");
    let status = &buffer.data["status"];
    assert_eq!(status["replicas"], 2);
    assert_eq!(status["podTemplateRef"], json!({"name": "warm-slot"}));
    assert_eq!(
        status["provisioningStrategy"],
        "buffer.x-k8s.io/active-capacity"
    );
    let condition = |t: &str| {
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == t))
            .map(|c| (c["status"].clone(), c["reason"].clone()))
    };
    assert_eq!(
        condition("ReadyForProvisioning"),
        Some((json!("True"), json!("AttributesSetSuccessfully")))
    );
    assert_eq!(
        condition("Provisioning"),
        Some((json!("True"), json!("FakePodsInjected")))
    );

    let _ = stop.send(());
    grpc.await.expect("server task").expect("server stops");
}

/// When `conditions` say `Provisioned` last changed.
fn provisioned_at(conditions: &[Value]) -> Option<Timestamp> {
    conditions
        .iter()
        .find(|c| c["type"] == "Provisioned")?
        .get("lastTransitionTime")?
        .as_str()?
        .parse()
        .ok()
}

/// When the request's `Provisioned` condition last changed, as the API
/// server has it.
async fn provisioned_since(client: &Client, name: &str) -> Option<Timestamp> {
    provisioned_at(&raw_conditions(client, name).await)
}

/// Waits until the controller's store shows `name`'s `Provisioned` condition
/// stamped at `since`.
async fn seen_since(controller: &Controller, name: &str, since: Timestamp) {
    let what = format!("Provisioned since {since}");
    seen_where(controller, "ProvisioningRequest", name, &what, |c| {
        provisioned_at(c) == Some(since)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_not_found_is_retried_after_a_backoff_that_doubles() {
    // cluster-autoscaler's ProvisioningRequestPodsInjector: Provisioned=False is tried again
    // once its lastTransitionTime plus the backoff (1m, doubled by each try, up to 10m) has
    // passed; each try stamps the condition anew; nothing is written in between.
    let server = cluster().await;
    let client = server.client();
    apply_upstream_crds(&client).await;
    create_node_group_with_id(&client, "gpu", "gpu", 8).await;
    let request = kueue_request(&client, "huge", ATOMIC, json!({}), 2, "16").await;
    let (controller, stop, grpc) = controller_with_provider(&client).await;
    let name = format!("default/{request}");
    // Whole seconds: the API server keeps condition times to the second.
    let t0 = Timestamp::from_second(Timestamp::now().as_second()).expect("time");
    let at = |secs: i64| t0 + SignedDuration::from_secs(secs);

    let first = controller.run_once_at(t0).await;
    assert_eq!(
        first.stand_ins.requests,
        std::slice::from_ref(&name),
        "{first:?}"
    );
    seen_since(&controller, &request, t0).await;

    // Within the first minute (and at its very end): left alone, said why.
    for secs in [30, 60] {
        let waiting = controller.run_once_at(at(secs)).await;
        assert!(waiting.stand_ins.requests.is_empty(), "{waiting:?}");
        let report = waiting.report.expect("planned");
        let r = &report.provisioning_requests[0];
        assert_eq!(r.outcome, dra_plan::provreq::RequestOutcome::RetryLater);
        assert_eq!(r.retry_at, Some(at(60)));
    }
    assert_eq!(provisioned_since(&client, &request).await, Some(t0));

    // Past it: tried, the same condition stamped anew (that it is no new
    // Event is `write::tests`; the sink's dedup window would hide one here).
    let retried = controller.run_once_at(at(61)).await;
    assert_eq!(
        retried.stand_ins.requests,
        std::slice::from_ref(&name),
        "{retried:?}"
    );
    assert_eq!(provisioned_since(&client, &request).await, Some(at(61)));
    seen_since(&controller, &request, at(61)).await;

    // The next wait is two minutes from that try.
    let early = controller.run_once_at(at(61 + 120)).await;
    assert!(early.stand_ins.requests.is_empty(), "{early:?}");
    let again = controller.run_once_at(at(61 + 121)).await;
    assert_eq!(again.stand_ins.requests, [name], "{again:?}");

    let _ = stop.send(());
    grpc.await.expect("server task").expect("server stops");
}
