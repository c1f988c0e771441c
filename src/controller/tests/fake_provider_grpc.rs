//! The whole path with the real provider protocol: the controller asks the
//! fake provider over gRPC (AtomicIncreaseSize), the provider creates the
//! Nodes in the API server as kubelets register them (providerID, no node-group
//! label), and the controller knows them by providerID, sees them register and
//! stops counting them as upcoming — without ever asking twice.

mod common;

use common::{
    Controller, cluster, create_gang, create_node_group_with_id, node_group, serve_and_connect,
};
use dra_api::NODE_GROUP_LABEL;
use dra_provider_fake::{Config, FakeProvider};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_scale_up_through_the_fake_provider_registers_nodes_once() {
    let server = cluster().await;
    let client = server.client();
    create_node_group_with_id(&client, "gpu", "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;

    let provider = FakeProvider::new(
        Config::parse(FAKE_CONFIG, "test").expect("config"),
        client.clone(),
        None,
    )
    .await
    .expect("fake provider starts");
    let (executor, served) = serve_and_connect("fake", provider).await;
    let (stop, grpc) = (served.stop, served.task);
    let controller = Controller::start(&client, executor).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("gpu"), Some(&2), "{summary:?}");
    let status = node_group(&client, "gpu").await.status.expect("status");
    assert_eq!(status.upcoming_size, 2);
    let requested: Vec<String> = status
        .upcoming_nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();

    controller
        .wait_for("the provider's Nodes in the store", |i| {
            i.nodes
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
    let mut registered: Vec<String> = controller
        .watches
        .stores
        .inputs()
        .nodes
        .iter()
        .filter_map(|n| n.spec.as_ref().and_then(|s| s.provider_id.clone()))
        .collect();
    registered.sort();
    let mut expected = requested.clone();
    expected.sort();
    assert_eq!(
        registered, expected,
        "the instance ids recorded are the Nodes' provider ids"
    );

    assert!(
        controller.watches.stores.inputs().nodes.iter().all(|n| n
            .metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key(NODE_GROUP_LABEL))),
        "registered as a kubelet does, without the node-group label"
    );
    let after = controller.run_once().await;
    assert!(after.scaled_up.is_empty(), "{after:?}");
    let status = node_group(&client, "gpu").await.status.expect("status");
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (2, 0, 2)
    );

    let _ = stop.send(());
    grpc.await
        .expect("server task")
        .expect("server stops cleanly");
}
