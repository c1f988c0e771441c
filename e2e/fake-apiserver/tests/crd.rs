//! CustomResourceDefinitions created through `apiextensions.k8s.io/v1`, as
//! `dra-autoscaler crd | kubectl apply -f -` does: the resource is then served with discovery,
//! CRUD, watch, status, short names and printer columns, and its objects are defaulted,
//! pruned and validated from the CRD's schema.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, Discovery,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

fn node_group(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "dra-autoscaler.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

fn spec() -> Value {
    json!({
        "provider": "fake", "providerID": "gpu", "minSize": 0, "maxSize": 4,
        "capacityType": "on-demand", "pricePerHour": 3.5,
        "template": {"capacity": {"cpu": "8", "memory": "32Gi"}}
    })
}

fn node_groups(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::erase::<dra_api::NodeGroup>(&()),
    )
}

async fn with_crd() -> FakeApiServer {
    let server = FakeApiServer::builder().start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(&PostParams::default(), &dra_api::crd())
        .await
        .expect("the CRD is accepted");
    server
}

fn api_error(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => Box::new(*status),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// GET `path` with `accept`, as kubectl asks for Tables.
async fn get_with_accept(client: &Client, path: &str, accept: &str) -> Value {
    let request = http::Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(request).await.unwrap();
    serde_json::from_str(&text).unwrap()
}

#[cfg(feature = "kubectl")]
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

#[tokio::test]
async fn a_created_crd_is_established_and_served_with_discovery_and_short_names() {
    let server = with_crd().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let stored = crds.get("nodegroups.dra-autoscaler.io").await.unwrap();
    let status = stored.status.expect("status written");
    let accepted = status.accepted_names.clone().expect("accepted names");
    assert_eq!(accepted.short_names, Some(vec!["ng".to_owned()]));
    let established = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Established")
        .expect("Established condition");
    assert_eq!(established.status, "True");
    assert_eq!(status.stored_versions, Some(vec!["v1alpha1".to_owned()]));

    let discovery = Discovery::new(server.client()).run().await.unwrap();
    let (resource, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(r, _)| r.kind == "NodeGroup")
        .expect("NodeGroup discovered");
    assert_eq!(resource.plural, "nodegroups");
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "status"));
    let doc = get_with_accept(
        &server.client(),
        "/apis/dra-autoscaler.io/v1alpha1",
        "application/json",
    )
    .await;
    assert_eq!(doc["resources"][0]["shortNames"], json!(["ng"]));
    assert_eq!(doc["resources"][0]["singularName"], "nodegroup");
}

/// What a controller writing status with server-side apply relies on (upstream semantics):
/// the apply is conditional when it carries a resourceVersion (409 Conflict if the object
/// moved on), only `status` changes through `/status`, and a field the manager applied before
/// and leaves out now is removed, while fields another writer set stay.
#[tokio::test]
async fn status_applied_with_a_resource_version_is_conditional_and_drops_released_fields() {
    let server = with_crd().await;
    let api = node_groups(&server.client());
    let created = api
        .create(&PostParams::default(), &node_group("gpu", spec()))
        .await
        .unwrap();
    let apply = PatchParams::apply("dra-autoscaler").force();
    let config = |rv: Option<String>, status: Value| {
        json!({
            "apiVersion": "dra-autoscaler.io/v1alpha1", "kind": "NodeGroup",
            "metadata": {"name": "gpu", "resourceVersion": rv},
            "spec": {"maxSize": 99},
            "status": status,
        })
    };
    let first = api
        .patch_status(
            "gpu",
            &apply,
            &Patch::Apply(config(
                created.metadata.resource_version.clone(),
                json!({"currentSize": 1, "upcomingSize": 2, "backoffUntil": "2026-12-01T10:00:00Z",
                       "lastScaleUp": {"time": "2026-12-01T09:00:00Z", "count": 2, "outcome": "Failed"}}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(first.data["status"]["upcomingSize"], 2);
    assert_eq!(
        first.data["spec"]["maxSize"], 4,
        "/status changes only status"
    );
    // Someone else sets a status field by merge patch.
    let merged = api
        .patch_status(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"targetSize": 3}})),
        )
        .await
        .unwrap();

    // A stale resourceVersion: 409, nothing written.
    let stale = api
        .patch_status(
            "gpu",
            &apply,
            &Patch::Apply(config(
                first.metadata.resource_version.clone(),
                json!({"currentSize": 9}),
            )),
        )
        .await
        .expect_err("stale resourceVersion");
    let status = api_error(stale);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        api.get("gpu").await.unwrap().data["status"]["currentSize"],
        1
    );

    // The current one: backoffUntil, no longer applied, is removed; targetSize, set by
    // someone else, stays.
    let last = json!({"time": "2026-12-01T09:00:00Z", "count": 2, "outcome": "Failed"});
    let second = api
        .patch_status(
            "gpu",
            &apply,
            &Patch::Apply(config(
                merged.metadata.resource_version.clone(),
                json!({"currentSize": 3, "upcomingSize": 0, "lastScaleUp": last}),
            )),
        )
        .await
        .unwrap();
    let status = &second.data["status"];
    assert_eq!(status.get("backoffUntil"), None, "{status}");
    assert_eq!(
        (
            &status["currentSize"],
            &status["upcomingSize"],
            &status["targetSize"]
        ),
        (&json!(3), &json!(0), &json!(3)),
        "{status}"
    );
    assert_eq!(status["lastScaleUp"]["outcome"], "Failed", "{status}");
    let owners: Vec<(String, Option<String>)> = second
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager.unwrap_or_default(), m.subresource))
        .collect();
    assert_eq!(
        owners,
        [("dra-autoscaler".to_owned(), Some("status".to_owned()))]
    );

    // The same apply again changes nothing, not even the resourceVersion.
    let again = api
        .patch_status(
            "gpu",
            &apply,
            &Patch::Apply(config(
                second.metadata.resource_version.clone(),
                json!({"currentSize": 3, "upcomingSize": 0, "lastScaleUp": last}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        second.metadata.resource_version
    );
}

#[tokio::test]
async fn custom_resources_get_crud_status_and_schema_defaults() {
    let server = with_crd().await;
    let api = node_groups(&server.client());
    let created = api
        .create(&PostParams::default(), &node_group("gpu", spec()))
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"]["priority"], 0,
        "schema default applied"
    );
    let status = json!({"status": {"currentSize": 2, "targetSize": 2}});
    let patched = api
        .patch_status("gpu", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["currentSize"], 2);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    api.delete("gpu", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("gpu").await.unwrap().is_none());
}

#[tokio::test]
async fn objects_breaking_the_schema_are_invalid_and_name_every_field() {
    let server = with_crd().await;
    let api = node_groups(&server.client());
    let mut bad = spec();
    bad["capacityType"] = json!("flex");
    bad["maxSize"] = json!("lots");
    let err = api_error(
        api.create(&PostParams::default(), &node_group("bad", bad))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(err.reason, "Invalid");
    assert!(
        err.message
            .starts_with("NodeGroup.dra-autoscaler.io \"bad\" is invalid: ["),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("spec.capacityType: Unsupported value: \"flex\""),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("spec.maxSize: Invalid value: \"string\": spec.maxSize in body must be of type integer: \"string\""),
        "{}",
        err.message
    );
    let mut missing = spec();
    missing.as_object_mut().unwrap().remove("template");
    let err = api_error(
        api.create(&PostParams::default(), &node_group("bare", missing))
            .await
            .unwrap_err(),
    );
    assert!(
        err.message.contains("spec.template: Required value"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn unknown_fields_are_pruned_with_a_warning_or_refused_when_strict() {
    let server = with_crd().await;
    let client = server.client();
    let mut extra = spec();
    extra["colour"] = json!("blue");
    let body = serde_json::to_vec(&node_group("warned", extra.clone())).unwrap();
    let request = http::Request::post("/apis/dra-autoscaler.io/v1alpha1/nodegroups")
        .header("Content-Type", "application/json")
        .body(body)
        .unwrap();
    let response = client.send(request.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), 201);
    let warning = response
        .headers()
        .get("warning")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(warning, r#"299 - "unknown field \"spec.colour\"""#);
    let stored = node_groups(&client).get("warned").await.unwrap();
    assert!(stored.data["spec"].get("colour").is_none(), "pruned");

    let body = serde_json::to_vec(&node_group("strict", extra)).unwrap();
    let request =
        http::Request::post("/apis/dra-autoscaler.io/v1alpha1/nodegroups?fieldValidation=Strict")
            .header("Content-Type", "application/json")
            .body(body)
            .unwrap();
    let err = api_error(client.request_text(request).await.unwrap_err());
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "NodeGroup in version \"v1alpha1\" cannot be handled as a NodeGroup: strict decoding error: unknown field \"spec.colour\""
    );
}

#[cfg(feature = "kubectl")]
#[tokio::test]
async fn tables_show_the_crds_printer_columns() {
    let server = with_crd().await;
    let api = node_groups(&server.client());
    api.create(&PostParams::default(), &node_group("gpu", spec()))
        .await
        .unwrap();
    let status = json!({"status": {"currentSize": 1, "targetSize": 3, "upcomingSize": 2}});
    api.patch_status("gpu", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let table = get_with_accept(
        &server.client(),
        "/apis/dra-autoscaler.io/v1alpha1/nodegroups",
        TABLE,
    )
    .await;
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec![
            "Name",
            "Capacity",
            "Min",
            "Max",
            "Current",
            "Target",
            "Upcoming",
            "Reserved Left",
            "Backoff Until"
        ]
    );
    assert_eq!(
        table["rows"][0]["cells"],
        json!(["gpu", "on-demand", 0, 4, 1, 3, 2, null, null])
    );
}

#[tokio::test]
async fn deleting_the_crd_removes_the_resource_and_its_objects() {
    let server = with_crd().await;
    let api = node_groups(&server.client());
    api.create(&PostParams::default(), &node_group("gpu", spec()))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.delete("nodegroups.dra-autoscaler.io", &DeleteParams::default())
        .await
        .unwrap();
    let err = api_error(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 404);
    // Created again, the resource starts empty.
    crds.create(&PostParams::default(), &dra_api::crd())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn invalid_crds_are_refused_naming_the_rule() {
    let server = FakeApiServer::builder().start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let mut crd = dra_api::crd();
    crd.metadata.name = Some("groups.dra-autoscaler.io".into());
    let err = api_error(crds.create(&PostParams::default(), &crd).await.unwrap_err());
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("metadata.name: Invalid value: \"groups.dra-autoscaler.io\": must be spec.names.plural+\".\"+spec.group"),
        "{}",
        err.message
    );
}
