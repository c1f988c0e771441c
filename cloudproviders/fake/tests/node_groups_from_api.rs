//! The fake provider serves the NodeGroups it finds in the API server: no spec in its config,
//! faults still from the file, groups added later picked up by its watch, and one NodeGroup it
//! cannot read never hides the others.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use dra_provider::{ClientConfig, ErrorCategory, ProviderClient, ServeOptions};
use dra_provider_fake::{Config, FakeProvider};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::json;

fn node_group(name: &str, id: &str, capacity_type: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "dra-autoscaler.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": name},
        "spec": {
            "provider": "fake", "providerID": id, "minSize": 0, "maxSize": 5,
            "capacityType": capacity_type, "pricePerHour": 2.5,
            "template": {
                "labels": {"node.kubernetes.io/instance-type": "c8"},
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}
            }
        }
    }))
    .unwrap()
}

async fn create(client: &kube::Client, object: &DynamicObject) {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<dra_api::NodeGroup>(&()),
    );
    api.create(&PostParams::default(), object).await.unwrap();
}

async fn start(
    api: &FakeApiServer,
    config: &str,
) -> (ProviderClient, tokio::sync::oneshot::Sender<()>) {
    let provider = FakeProvider::new(Config::parse(config, "test").unwrap(), api.client(), None)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(dra_provider::serve(
        provider,
        listener,
        ServeOptions::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let client = ProviderClient::connect(ClientConfig::new(format!("http://{addr}")))
        .await
        .unwrap();
    (client, stop)
}

async fn served(client: &ProviderClient) -> Vec<String> {
    let mut ids: Vec<String> = client
        .node_groups()
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.id)
        .collect();
    ids.sort();
    ids
}

async fn api_server() -> FakeApiServer {
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
        .unwrap()
}

#[tokio::test]
async fn node_groups_in_the_api_server_are_served_with_the_files_faults() {
    let api = api_server().await;
    create(
        &api.client(),
        &node_group("cpu-large", "pool-c8", "on-demand"),
    )
    .await;
    let (client, stop) = start(
        &api,
        "nodeGroups:\n  - name: pool-c8\n    faults: {quotaLimit: 1}\n",
    )
    .await;

    assert_eq!(served(&client).await, vec!["pool-c8"]);
    client.increase_size("pool-c8", 1).await.unwrap();
    let nodes = Api::<Node>::all(api.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(nodes.len(), 1);
    let labels = nodes[0].metadata.labels.as_ref().unwrap();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "c8");
    // The Node belongs to the NodeGroup whose provider id is the group id: the provider
    // says so for its providerID, as for a kubelet's node.
    let node = &nodes[0];
    let owner = client
        .node_group_for_node(&dra_provider::NodeRef {
            provider_id: node.spec.as_ref().unwrap().provider_id.clone().unwrap(),
            name: node.metadata.name.clone().unwrap(),
            labels: labels.clone(),
            annotations: Default::default(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owner.id, "pool-c8");
    let listed = client.nodes("pool-c8").await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        vec![node.spec.as_ref().unwrap().provider_id.as_deref().unwrap()]
    );
    let err = client.increase_size("pool-c8", 1).await.unwrap_err();
    assert_eq!(
        err.category(),
        ErrorCategory::Quota,
        "the file's fault applies"
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn node_groups_created_later_are_served_and_undecodable_ones_are_skipped() {
    let api = api_server().await;
    let (client, stop) = start(&api, "{}").await;
    assert!(served(&client).await.is_empty());

    create(&api.client(), &node_group("newer", "pool-new", "flex")).await;
    create(&api.client(), &node_group("gpu", "pool-gpu", "spot")).await;
    let mut ids = Vec::new();
    for _ in 0..100 {
        ids = served(&client).await;
        if !ids.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        ids,
        vec!["pool-gpu"],
        "the NodeGroup with an unknown capacityType is skipped alone"
    );
    let details = client
        .node_group_details(&["pool-gpu".to_owned()])
        .await
        .unwrap();
    assert_eq!(details[0].capacity_type, dra_provider::CapacityType::Spot);
    let _ = stop.send(());
}
