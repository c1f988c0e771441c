//! The fake provider against the in-process Kubernetes API stand-in, driven over gRPC by our
//! client: Nodes and slices appear, atomic requests are all-or-nothing, rollback, restart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use dra_provider::{AtomicIncrease, ClientConfig, ErrorCategory, ProviderClient, ServeOptions};
use dra_provider_fake::{Config, FakeProvider};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Api;
use kube::api::ListParams;

fn config(faults: &str) -> Config {
    let text = format!(
        r#"
sliceDelayMs: 50
nodeGroups:
  - name: gpu
    spec:
      provider: fake
      providerID: gpu
      minSize: 0
      maxSize: 10
      capacityType: on-demand
      pricePerHour: 10
      template:
        labels: {{node.kubernetes.io/instance-type: gpu-2x}}
        taints: [{{key: nvidia.com/gpu, value: present, effect: NoSchedule}}]
        capacity: {{cpu: "16", memory: 64Gi, pods: "110"}}
        resourceSlices:
          - driver: gpu.example.com
            pool: {{name: "", generation: 1, resourceSliceCount: 1}}
            devices:
              - name: gpu-0
              - name: gpu-1
    faults: {faults}
"#
    );
    Config::parse(&text, "test").unwrap()
}

struct Harness {
    api: FakeApiServer,
    client: ProviderClient,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), dra_provider::ServeError>>,
}

async fn serve(
    api_client: kube::Client,
    config: Config,
    state: Option<std::path::PathBuf>,
) -> (
    ProviderClient,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), dra_provider::ServeError>>,
) {
    let (_, client, stop, server) = serve_at(api_client, config, state).await;
    (client, stop, server)
}

/// As [`serve`], with the address served.
async fn serve_at(
    api_client: kube::Client,
    config: Config,
    state: Option<std::path::PathBuf>,
) -> (
    std::net::SocketAddr,
    ProviderClient,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), dra_provider::ServeError>>,
) {
    let provider = FakeProvider::new(config, api_client, state).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(dra_provider::serve(
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
    (addr, client, stop, server)
}

async fn harness(faults: &str) -> Harness {
    let api = FakeApiServer::builder().start().await.unwrap();
    let (client, stop, server) = serve(api.client(), config(faults), None).await;
    Harness {
        api,
        client,
        stop,
        server,
    }
}

async fn nodes(api: &FakeApiServer) -> Vec<Node> {
    Api::<Node>::all(api.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

async fn slices(api: &FakeApiServer) -> Vec<ResourceSlice> {
    Api::<ResourceSlice>::all(api.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

async fn wait_for_slices(api: &FakeApiServer, count: usize) -> Vec<ResourceSlice> {
    for _ in 0..100 {
        let found = slices(api).await;
        if found.len() >= count {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("expected {count} ResourceSlices");
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn scaling_by_three_gives_three_ready_nodes_with_their_slices() {
    let h = harness("{}").await;
    h.client.increase_size("gpu", 3).await.unwrap();
    assert_eq!(h.client.target_size("gpu").await.unwrap(), 3);
    let nodes = nodes(&h.api).await;
    assert_eq!(nodes.len(), 3);
    for node in &nodes {
        assert!(is_ready(node), "{:?} not Ready", node.metadata.name);
        let addresses = node.status.as_ref().unwrap().addresses.as_ref().unwrap();
        assert!(
            addresses
                .iter()
                .any(|a| a.type_ == "InternalIP" && a.address.starts_with("192.168.")),
            "{addresses:?}"
        );
        // What a kubelet registers by default (kubelet's initialNode): its hostname, OS and
        // architecture, and the node pool's labels; not the autoscaler's group label.
        let labels = node.metadata.labels.as_ref().unwrap();
        let name = node.metadata.name.as_deref().unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], name);
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["kubernetes.io/arch"], "amd64");
        assert_eq!(labels["node.kubernetes.io/instance-type"], "gpu-2x");
        assert!(
            !labels.contains_key("dra-autoscaler.io/node-group"),
            "{labels:?}"
        );
        let spec = node.spec.as_ref().unwrap();
        assert_eq!(spec.taints.as_ref().unwrap()[0].key, "nvidia.com/gpu");
        assert!(
            spec.provider_id
                .as_ref()
                .unwrap()
                .starts_with("fake://gpu-")
        );
        assert_eq!(
            node.status.as_ref().unwrap().allocatable.as_ref().unwrap()["memory"].0,
            "64Gi"
        );
    }
    let slices = wait_for_slices(&h.api, 3).await;
    for node in &nodes {
        let name = node.metadata.name.clone().unwrap();
        let slice = slices
            .iter()
            .find(|s| s.spec.node_name.as_deref() == Some(name.as_str()))
            .unwrap();
        assert_eq!(slice.spec.pool.name, name, "pool is named after the node");
        assert_eq!(slice.spec.pool.resource_slice_count, 1);
        assert_eq!(slice.spec.devices.as_ref().unwrap().len(), 2);
        let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Node", node.metadata.uid.as_deref().unwrap())
        );
    }
    let leases = Api::<Lease>::namespaced(h.api.client(), "kube-node-lease")
        .list(&ListParams::default())
        .await;
    assert_eq!(leases.unwrap().items.len(), 3, "one Lease per node");
    assert_eq!(h.client.nodes("gpu").await.unwrap().len(), 3);

    let victim = nodes[0].metadata.name.clone().unwrap();
    let node_ref = dra_provider::NodeRef {
        provider_id: format!("fake://{victim}"),
        name: victim.clone(),
        ..Default::default()
    };
    h.client.delete_nodes("gpu", &[node_ref]).await.unwrap();
    assert_eq!(self::nodes(&h.api).await.len(), 2);
    assert!(
        self::slices(&h.api)
            .await
            .iter()
            .all(|s| s.spec.node_name.as_deref() != Some(victim.as_str()))
    );
    let _ = h.stop.send(());
    h.server.await.unwrap().unwrap();
}

#[tokio::test]
async fn node_labels_are_added_as_kubelet_node_labels_would_be() {
    let api = FakeApiServer::builder().start().await.unwrap();
    let mut config = config("{}");
    config.node_labels = [("team".to_owned(), "ml".to_owned())].into();
    config.label_node_group = true;
    config.node_groups[0].node_labels = [("pool".to_owned(), "a".to_owned())].into();
    let (client, stop, server) = serve(api.client(), config, None).await;
    client.increase_size("gpu", 1).await.unwrap();
    let nodes = nodes(&api).await;
    let labels = nodes[0].metadata.labels.as_ref().unwrap();
    assert_eq!(labels["team"], "ml");
    assert_eq!(labels["pool"], "a");
    assert_eq!(labels["dra-autoscaler.io/node-group"], "gpu");
    assert_eq!(labels["node.kubernetes.io/instance-type"], "gpu-2x");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn atomic_request_for_four_with_three_available_starts_none() {
    let h = harness("{outOfCapacityAfter: 3}").await;
    let err = h
        .client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 4,
            min_count: 4,
            request_id: "g1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::OutOfCapacity);
    assert!(nodes(&h.api).await.is_empty(), "no Node may be created");
    assert_eq!(h.client.target_size("gpu").await.unwrap(), 0);

    let started = h
        .client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 3,
            min_count: 3,
            request_id: "g2".into(),
        })
        .await
        .unwrap();
    assert_eq!(started.len(), 3);
    let again = h
        .client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 3,
            min_count: 3,
            request_id: "g2".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        again, started,
        "same request id, same answer, no second gang"
    );
    assert_eq!(nodes(&h.api).await.len(), 3);
    let _ = h.stop.send(());
}

#[tokio::test]
async fn quota_limit_is_reported_as_quota() {
    let h = harness("{quotaLimit: 1}").await;
    let err = h
        .client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 2,
            min_count: 2,
            request_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Quota);
    assert!(nodes(&h.api).await.is_empty());
    let _ = h.stop.send(());
}

#[tokio::test]
async fn partial_fulfilment_is_rolled_back() {
    let h = harness("{partialFulfilment: 2}").await;
    let err = h
        .client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 4,
            min_count: 4,
            request_id: "p".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::OutOfCapacity);
    match &err {
        dra_provider::ClientError::Rpc {
            scale_up: Some(detail),
            ..
        } => assert_eq!(detail.rolled_back, 2),
        other => panic!("expected a scale-up detail, got {other:?}"),
    }
    assert!(
        nodes(&h.api).await.is_empty(),
        "the two started nodes are gone again"
    );
    // Their slices were due 50 ms after the Nodes: well after the rollback. A publication
    // racing the rollback would leave them behind with no Node.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.client.target_size("gpu").await.unwrap(), 0);
    assert!(
        slices(&h.api).await.is_empty(),
        "no ResourceSlice outlives the rolled-back nodes"
    );
    assert!(nodes(&h.api).await.is_empty());
    let _ = h.stop.send(());
}

#[tokio::test]
async fn deleting_a_node_before_its_slices_are_due_leaves_no_slices() {
    let h = harness("{}").await;
    h.client.increase_size("gpu", 1).await.unwrap();
    let node = nodes(&h.api).await.remove(0);
    let name = node.metadata.name.clone().unwrap();
    let provider_id = node.spec.unwrap().provider_id.unwrap();
    h.client
        .delete_nodes(
            "gpu",
            &[dra_provider::NodeRef {
                name,
                provider_id,
                ..Default::default()
            }],
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(nodes(&h.api).await.is_empty());
    assert!(
        slices(&h.api).await.is_empty(),
        "the pending slices were cancelled"
    );
    let _ = h.stop.send(());
}

#[tokio::test]
async fn kubernetes_write_failure_rolls_back_the_start() {
    let h = harness("{failKubernetesWrites: 1}").await;
    let err = h.client.increase_size("gpu", 2).await.unwrap_err();
    // Nothing of the start is left, and the provider says so: retry at once.
    assert_eq!(err.category(), ErrorCategory::NotSent, "{err}");
    assert!(err.to_string().contains("rolled back"), "{err}");
    assert!(nodes(&h.api).await.is_empty());
    h.client.increase_size("gpu", 2).await.unwrap();
    assert_eq!(nodes(&h.api).await.len(), 2, "the next attempt works");
    let _ = h.stop.send(());
}

#[tokio::test]
async fn restart_keeps_state_with_a_state_file_and_without_one() {
    let api = FakeApiServer::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");

    let (client, stop, server) = serve(api.client(), config("{}"), Some(state.clone())).await;
    client.increase_size("gpu", 2).await.unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();

    // Restart from the state file.
    let (client, stop, server) = serve(api.client(), config("{}"), Some(state.clone())).await;
    assert_eq!(client.target_size("gpu").await.unwrap(), 2);
    client.increase_size("gpu", 1).await.unwrap();
    let names: Vec<_> = nodes(&api)
        .await
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(names.len(), 3);
    assert_eq!(
        names
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "no name reused"
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();

    // Restart without a state file: state is derived from the Nodes it owns.
    let (client, stop, _server) = serve(api.client(), config("{}"), None).await;
    assert_eq!(client.target_size("gpu").await.unwrap(), 3);
    assert_eq!(client.nodes("gpu").await.unwrap().len(), 3);
    let _ = stop.send(());
}

#[tokio::test]
async fn extension_describes_the_group_and_its_template() {
    let h = harness("{}").await;
    let details = h
        .client
        .node_group_details(&["gpu".to_owned()])
        .await
        .unwrap();
    assert_eq!(
        details[0].capacity_type,
        dra_provider::CapacityType::OnDemand
    );
    assert!((details[0].price_per_hour - 10.0).abs() < f64::EPSILON);
    let slices = &details[0].template.resource_slices;
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0].spec.node_name.as_deref(), Some("gpu-template"));
    let template = h.client.template_node_info("gpu").await.unwrap();
    assert_eq!(
        template.node.status.unwrap().capacity.unwrap()["cpu"].0,
        "16"
    );
    let _ = h.stop.send(());
}

#[tokio::test]
async fn a_start_slower_than_the_clients_deadline_finishes_and_a_resend_starts_nothing_twice() {
    let api = FakeApiServer::builder().start().await.unwrap();
    let (addr, client, stop, _server) =
        serve_at(api.client(), config("{startLatencyMs: 700}"), None).await;
    let mut hasty = ClientConfig::new(format!("http://{addr}"));
    hasty.call_timeout = Duration::from_millis(200);
    hasty.retry.max_attempts = 1;
    let hasty = ProviderClient::connect(hasty).await.unwrap();
    let request = AtomicIncrease {
        id: "gpu".into(),
        count: 2,
        min_count: 2,
        request_id: "req-slow".into(),
    };
    let err = hasty.atomic_increase_size(&request).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Unknown, "{err}");

    // The client gave up; the provider did not.
    let mut started = Vec::new();
    for _ in 0..100 {
        started = nodes(&api).await;
        if started.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(started.len(), 2, "the start finished after the deadline");

    // The same request id again: the same instances, nothing new.
    let ids = client.atomic_increase_size(&request).await.unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(nodes(&api).await.len(), 2);
    assert_eq!(client.target_size("gpu").await.unwrap(), 2);
    let _ = stop.send(());
}
