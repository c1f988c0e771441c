//! What kubectl needs from a server, asked the way kubectl asks: server-side Tables for
//! `kubectl get`, core Events for `kubectl describe` (also those written through
//! `events.k8s.io`, which share their storage), and the OpenAPI v3 documents whose
//! `fieldValidation` parameter makes `kubectl apply` leave validation to the server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dra_fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

async fn get(client: &Client, path: &str, accept: &str) -> Value {
    let request = http::Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())
        .unwrap();
    serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap()
}

fn column_names(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn kubectl_get_tables_have_upstreams_columns_for_pods_and_nodes() {
    let server = FakeApiServer::builder().start().await.unwrap();
    let client = server.client();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "train-0"},
        "spec": {"containers": [{"name": "main", "image": "x"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "gpu-1", "labels": {"node-role.kubernetes.io/gpu": ""}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {
            "kubeletVersion": "v1.37.0", "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();

    let pods = get(&client, "/api/v1/namespaces/default/pods", TABLE).await;
    assert_eq!(pods["kind"], "Table");
    assert_eq!(
        column_names(&pods),
        vec!["Name", "Ready", "Status", "Restarts", "Age"]
    );
    let cells = &pods["rows"][0]["cells"];
    assert_eq!(cells[0], "train-0");
    assert_eq!(cells[1], "0/1");
    assert_eq!(cells[2], "Pending");
    assert_eq!(
        pods["rows"][0]["object"]["metadata"]["namespace"],
        "default"
    );

    let nodes = get(&client, "/api/v1/nodes", TABLE).await;
    assert_eq!(
        column_names(&nodes),
        vec!["Name", "Status", "Roles", "Age", "Version"]
    );
    let cells = &nodes["rows"][0]["cells"];
    assert_eq!(
        (&cells[1], &cells[2], &cells[4]),
        (&json!("Ready"), &json!("gpu"), &json!("v1.37.0"))
    );

    // A single object is a one-row Table too, and plain JSON is still served.
    let one = get(&client, "/api/v1/nodes/gpu-1", TABLE).await;
    assert_eq!(one["rows"].as_array().map(Vec::len), Some(1));
    let plain = get(&client, "/api/v1/nodes/gpu-1", "application/json").await;
    assert_eq!(plain["kind"], "Node");
}

#[tokio::test]
async fn events_written_through_events_k8s_io_are_what_kubectl_describe_lists() {
    let server = FakeApiServer::builder().start().await.unwrap();
    let client = server.client();
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "train-0.scaleup", "namespace": "default"},
        "regarding": {"kind": "Pod", "namespace": "default", "name": "train-0", "uid": "u-1", "apiVersion": "v1"},
        "reason": "TriggeredScaleUp", "note": "pod triggered scale-up: [gpu 0->2 (max: 4)]",
        "type": "Normal", "action": "ScaleUp",
        "reportingController": "dra-autoscaler", "reportingInstance": "dra-autoscaler-0",
        "eventTime": "2026-01-01T00:00:00.000000Z"
    }))
    .unwrap();
    Api::<Event>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &event)
        .await
        .unwrap();

    // kubectl describe pod's query.
    let selector =
        "involvedObject.name=train-0,involvedObject.namespace=default,involvedObject.uid=u-1";
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let listed = core
        .list(&ListParams::default().fields(selector))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let seen = &listed.items[0];
    assert_eq!(
        seen.message.as_deref(),
        Some("pod triggered scale-up: [gpu 0->2 (max: 4)]")
    );
    assert_eq!(seen.involved_object.name.as_deref(), Some("train-0"));
    assert_eq!(seen.reporting_component.as_deref(), Some("dra-autoscaler"));
    let other = core
        .list(&ListParams::default().fields("involvedObject.name=train-1"))
        .await
        .unwrap();
    assert!(other.items.is_empty());

    // One object, two views: a core write is read through events.k8s.io too.
    let v1: Api<Event> = Api::namespaced(client.clone(), "default");
    let through_v1 = v1.get("train-0.scaleup").await.unwrap();
    assert_eq!(
        through_v1.note.as_deref(),
        Some("pod triggered scale-up: [gpu 0->2 (max: 4)]")
    );
    let table = get(&client, "/api/v1/namespaces/default/events", TABLE).await;
    assert_eq!(table["rows"][0]["cells"][3], "pod/train-0");

    // The real server prints the times the recorder left unset as null (Go's metav1.Time),
    // so `kubectl get events -A --sort-by=.lastTimestamp` finds the key on every Event.
    let raw = get(
        &client,
        "/api/v1/namespaces/default/events/train-0.scaleup",
        "application/json",
    )
    .await;
    let raw = raw.as_object().unwrap();
    assert_eq!(raw.get("lastTimestamp"), Some(&Value::Null));
    assert_eq!(raw.get("firstTimestamp"), Some(&Value::Null));
    assert_eq!(raw["eventTime"], "2026-01-01T00:00:00.000000Z");
}

#[tokio::test]
async fn openapi_v3_lets_kubectl_leave_validation_to_the_server() {
    let server = FakeApiServer::builder().start().await.unwrap();
    let client = server.client();
    let index = get(&client, "/openapi/v3", "application/json").await;
    let url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    let doc = get(&client, &url, "application/json").await;
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
    );
    assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"].is_object());

    // What kubectl apply then sends: fieldValidation=Strict.
    let body = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typo"},
        "spec": {"containers": [{"name": "c", "image": "x", "imagePullPolice": "Always"}]}
    }))
    .unwrap();
    let request = http::Request::post("/api/v1/namespaces/default/pods?fieldValidation=Strict")
        .header("Content-Type", "application/json")
        .body(body.clone())
        .unwrap();
    match client.request_text(request).await.unwrap_err() {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 400);
            assert_eq!(
                status.message,
                "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.containers[0].imagePullPolice\""
            );
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    // Without Strict the default (Warn) accepts it with a warning.
    let request = http::Request::post("/api/v1/namespaces/default/pods")
        .header("Content-Type", "application/json")
        .body(body)
        .unwrap();
    let response = client.send(request.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("warning").is_some());
}
