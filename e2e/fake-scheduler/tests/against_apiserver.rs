//! The scheduler stand-in against the API stand-in: claims from templates are created, pods
//! that fit are bound with their devices allocated and end Running; the others carry
//! `PodScheduled=False/Unschedulable` with kube-scheduler's message and a `FailedScheduling`
//! Event that `kubectl describe` finds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dra_fake_apiserver::FakeApiServer;
use dra_fake_scheduler::writer::Writer;
use dra_fake_scheduler::{Summary, cycle};
use dra_sim::{FeatureGates, KubeVersion};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

async fn create<K>(client: &Client, namespace: Option<&str>, object: Value)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let typed: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(client.clone(), namespace.unwrap_or("default"))
        .create(&PostParams::default(), &typed)
        .await
        .unwrap();
}

async fn create_cluster<K>(client: &Client, object: Value)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let typed: K = serde_json::from_value(object).unwrap();
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &typed)
        .await
        .unwrap();
}

fn node(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.0.10"}]
        }
    })
}

fn pod(name: &str, cpu: &str, claim_template: Option<&str>) -> Value {
    let mut pod = json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"containers": [{"name": "main", "image": "trainer:1",
                                 "resources": {"requests": {"cpu": cpu}}}]}
    });
    if let Some(template) = claim_template {
        pod["spec"]["resourceClaims"] =
            json!([{"name": "gpu", "resourceClaimTemplateName": template}]);
        pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    }
    pod
}

async fn setup() -> (FakeApiServer, Client) {
    let server = FakeApiServer::builder()
        .namespaces(&["default", "ml"])
        .start()
        .await
        .unwrap();
    let client = server.client();
    create_cluster::<Node>(&client, node("cpu-1")).await;
    create_cluster::<Node>(&client, node("gpu-1")).await;
    create_cluster::<DeviceClass>(
        &client,
        json!({"metadata": {"name": "gpu.example.com"},
               "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
    )
    .await;
    create_cluster::<ResourceSlice>(
        &client,
        json!({"metadata": {"name": "gpu-1-gpu"},
               "spec": {"driver": "gpu.example.com", "nodeName": "gpu-1",
                        "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "gpu-0"}]}}),
    )
    .await;
    create::<ResourceClaimTemplate>(
        &client,
        Some("ml"),
        json!({"metadata": {"name": "one-gpu", "namespace": "ml"},
               "spec": {"spec": {"devices": {"requests": [
                   {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}),
    )
    .await;
    (server, client)
}

async fn run_cycles(client: &Client, n: usize) -> Vec<Summary> {
    let writer = Writer::new(client.clone(), "test");
    let gates = FeatureGates::for_version(KubeVersion::NEWEST);
    let mut summaries = Vec::new();
    for _ in 0..n {
        summaries.push(cycle(client, &writer, &gates, &[]).await.unwrap());
    }
    summaries
}

#[tokio::test]
async fn pods_with_claims_from_templates_end_running_on_the_node_with_the_device() {
    let (_server, client) = setup().await;
    create::<Pod>(&client, Some("ml"), pod("train-0", "1", Some("one-gpu"))).await;
    create::<Pod>(&client, Some("ml"), pod("web", "2", None)).await;
    let summaries = run_cycles(&client, 2).await;
    assert_eq!(summaries[0].claims_created, 1, "{summaries:?}");
    assert_eq!(summaries[0].bound, 2, "{summaries:?}");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let train = pods.get("train-0").await.unwrap();
    let spec = train.spec.as_ref().unwrap();
    assert_eq!(
        spec.node_name.as_deref(),
        Some("gpu-1"),
        "the only node with the device"
    );
    let status = train.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.host_ip.as_deref(), Some("192.168.0.10"));
    assert!(status.container_statuses.as_ref().unwrap()[0].ready);
    let claim_name = status.resource_claim_statuses.as_ref().unwrap()[0]
        .resource_claim_name
        .clone()
        .unwrap();
    assert!(claim_name.starts_with("train-0-gpu-"), "{claim_name}");
    let claim = Api::<ResourceClaim>::namespaced(client.clone(), "ml")
        .get(&claim_name)
        .await
        .unwrap();
    let claim_status = claim.status.unwrap();
    let results = claim_status
        .allocation
        .unwrap()
        .devices
        .unwrap()
        .results
        .unwrap();
    assert_eq!(
        (results[0].pool.as_str(), results[0].device.as_str()),
        ("gpu-1", "gpu-0")
    );
    let reserved = claim_status.reserved_for.unwrap();
    assert_eq!(reserved[0].name, "train-0");
    assert_eq!(reserved[0].uid, train.metadata.uid.clone().unwrap());
    let web = pods.get("web").await.unwrap();
    assert_eq!(web.spec.unwrap().node_name.as_deref(), Some("cpu-1"));
    assert_eq!(summaries[1], Summary::default(), "nothing left to do");
}

#[tokio::test]
async fn pods_that_fit_nowhere_are_unschedulable_with_the_reason_and_an_event() {
    let (_server, client) = setup().await;
    create::<Pod>(&client, Some("ml"), pod("huge", "64", None)).await;
    let summaries = run_cycles(&client, 2).await;
    assert_eq!(summaries[0].waiting, 1);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let huge = pods.get("huge").await.unwrap();
    assert!(huge.spec.as_ref().unwrap().node_name.is_none());
    let condition = huge
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .cloned()
        .unwrap();
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        condition.message.as_deref(),
        Some("0/2 nodes are available: 2 Insufficient cpu.")
    );
    // kubectl describe pod's query; one Event although two cycles saw the pod.
    let selector = format!(
        "involvedObject.name=huge,involvedObject.namespace=ml,involvedObject.uid={}",
        huge.metadata.uid.clone().unwrap()
    );
    let events = Api::<Event>::namespaced(client.clone(), "ml")
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap()
        .items;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert_eq!(
        events[0].message.as_deref(),
        Some("0/2 nodes are available: 2 Insufficient cpu.")
    );
}
