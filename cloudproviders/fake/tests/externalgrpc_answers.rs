//! What the fake provider answers a cluster-autoscaler over plain externalgrpc: its template's
//! ResourceSlices in `resourceSliceBytes`, `NodeGroupGetOptions` from the NodeGroup's
//! `spec.scaleDown`, and GPU answers that hold no DRA GPU node as "GPU not ready". The bytes
//! and answers are checked with upstream's own client in
//! cloudproviders/proto/tests/upstream_client.rs; here, that the fake gives them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dra_fake_apiserver::FakeApiServer;
use dra_provider::k8s_proto::encode_resource_slice;
use dra_provider::pb::externalgrpc as ca;
use dra_provider::pb::externalgrpc::cloud_provider_client::CloudProviderClient;
use dra_provider::{AutoscalingOptions, ClientConfig, ProviderClient, ServeOptions};
use dra_provider_fake::{Config, FakeProvider};

/// A DRA-only GPU group carrying GPU feature discovery's product label, a device-plugin GPU
/// group, and a CPU group with scale-down settings.
const CONFIG: &str = r#"
nodeGroups:
  - name: h100
    spec:
      provider: fake
      providerID: h100
      minSize: 0
      maxSize: 4
      capacityType: on-demand
      pricePerHour: 30
      template:
        labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
        capacity: {cpu: "192", memory: 2Ti, pods: "110"}
        resourceSlices:
          - driver: gpu.nvidia.com
            pool: {name: "", generation: 1, resourceSliceCount: 1}
            devices:
              - name: gpu-0
                attributes: {productName: {string: NVIDIA H100 80GB HBM3}}
                capacity: {memory: {value: 80Gi}}
              - name: gpu-1
                attributes: {productName: {string: NVIDIA H100 80GB HBM3}}
                capacity: {memory: {value: 80Gi}}
  - name: a100
    spec:
      provider: fake
      providerID: a100
      minSize: 0
      maxSize: 4
      capacityType: on-demand
      pricePerHour: 20
      template:
        labels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
        capacity: {cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "8"}
  - name: cpu
    spec:
      provider: fake
      providerID: cpu
      minSize: 0
      maxSize: 10
      capacityType: on-demand
      pricePerHour: 1
      template:
        capacity: {cpu: "16", memory: 64Gi, pods: "110"}
      scaleDown: {utilizationThreshold: 0.25, unneededTime: 30m, emptyUnneededTime: 1m}
"#;

struct Served {
    _api: FakeApiServer,
    addr: std::net::SocketAddr,
    client: ProviderClient,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn serve(config: &str) -> Served {
    let api = FakeApiServer::builder().start().await.unwrap();
    let config = Config::parse(config, "test").unwrap();
    let provider = FakeProvider::new(config, api.client(), None).await.unwrap();
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
    Served {
        _api: api,
        addr,
        client,
        stop,
    }
}

#[tokio::test]
async fn template_node_info_carries_the_template_slices() {
    let served = serve(CONFIG).await;
    let details = served
        .client
        .node_group_details(&["h100".to_owned()])
        .await
        .unwrap();
    let slices = &details[0].template.resource_slices;
    assert_eq!(slices.len(), 1);
    let mut raw = CloudProviderClient::connect(format!("http://{}", served.addr))
        .await
        .unwrap();
    let response = raw
        .node_group_template_node_info(ca::NodeGroupTemplateNodeInfoRequest { id: "h100".into() })
        .await
        .unwrap()
        .into_inner();
    // The same slices as the extension's JSON, one Go-Marshal()ed message each.
    let expected: Vec<Vec<u8>> = slices.iter().map(encode_resource_slice).collect();
    assert_eq!(response.resource_slice_bytes, expected);
    assert!(!response.node_bytes.is_empty());
    // A group without DRA devices sends none.
    let plain = raw
        .node_group_template_node_info(ca::NodeGroupTemplateNodeInfoRequest { id: "cpu".into() })
        .await
        .unwrap()
        .into_inner();
    assert!(plain.resource_slice_bytes.is_empty());
    let _ = served.stop.send(());
}

#[tokio::test]
async fn options_come_from_the_node_group_spec() {
    let served = serve(CONFIG).await;
    let defaults = AutoscalingOptions {
        scale_down_utilization_threshold: 0.5,
        scale_down_gpu_utilization_threshold: 0.5,
        scale_down_unneeded: Some(Duration::from_secs(600)),
        scale_down_unready: Some(Duration::from_secs(1200)),
        max_node_provision: Some(Duration::from_secs(900)),
        ..AutoscalingOptions::default()
    };
    let options = served.client.options("cpu", &defaults).await.unwrap();
    assert_eq!(
        options,
        Some(AutoscalingOptions {
            scale_down_utilization_threshold: 0.25,
            scale_down_gpu_utilization_threshold: 0.25,
            scale_down_unneeded: Some(Duration::from_secs(1800)),
            ..defaults.clone()
        })
    );
    // No spec.scaleDown: "use your defaults".
    assert_eq!(
        served.client.options("h100", &defaults).await.unwrap(),
        None
    );
    let unknown = served.client.options("nope", &defaults).await.unwrap_err();
    assert_eq!(unknown.category(), dra_provider::ErrorCategory::Rejected);
    let _ = served.stop.send(());
}

#[tokio::test]
async fn gpu_answers_follow_the_templates() {
    // With the DRA-only H100 group, the product label would hold its nodes as GPU-unready.
    let served = serve(CONFIG).await;
    let label = served.client.gpu_label().await.unwrap();
    assert_eq!(label, dra_provider::gpu::NO_DRA_GPU_LABEL);
    assert!(
        served
            .client
            .available_gpu_types()
            .await
            .unwrap()
            .is_empty()
    );
    let _ = served.stop.send(());

    // Device-plugin GPUs only: the product label, and its values as the GPU types.
    let h100_start = CONFIG.find("  - name: h100").unwrap();
    let a100_start = CONFIG.find("  - name: a100").unwrap();
    let without_dra = format!("{}{}", &CONFIG[..h100_start], &CONFIG[a100_start..]);
    let served = serve(&without_dra).await;
    assert_eq!(
        served.client.gpu_label().await.unwrap(),
        "nvidia.com/gpu.product"
    );
    assert_eq!(
        served.client.available_gpu_types().await.unwrap(),
        ["NVIDIA-A100-SXM4-80GB"]
    );
    let _ = served.stop.send(());
}
