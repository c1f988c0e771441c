//! Our client against our server, for every RPC of both services.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{END, Scripted, start, template_node, template_slice};
use dra_provider::pb::externalgrpc::cloud_provider_server::CloudProviderServer;
use dra_provider::server::ExternalGrpcService;
use dra_provider::{
    AtomicIncrease, AutoscalingOptions, CapacityType, ClientConfig, ErrorCategory, ErrorClass,
    InstanceState, NodeRef, ProviderClient, ServeOptions,
};

async fn client(addr: std::net::SocketAddr) -> ProviderClient {
    let mut config = ClientConfig::new(format!("http://{addr}"));
    config.retry.initial_backoff = Duration::from_millis(5);
    ProviderClient::connect(config).await.unwrap()
}

fn node(name: &str) -> NodeRef {
    NodeRef {
        provider_id: format!("fake://{name}"),
        name: name.into(),
        ..NodeRef::default()
    }
}

#[tokio::test]
async fn every_externalgrpc_rpc_round_trips() {
    let provider = Arc::new(Scripted::default());
    let server = start(Arc::clone(&provider), ServeOptions::default()).await;
    let client = client(server.addr).await;

    let groups = client.node_groups().await.unwrap();
    assert_eq!(groups, vec![common::group()]);
    assert_eq!(
        client.node_group_for_node(&node("gpu-a")).await.unwrap(),
        Some(common::group())
    );
    assert_eq!(
        client.node_group_for_node(&node("cpu-a")).await.unwrap(),
        None,
        "empty id means unmanaged"
    );

    let start_time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let price = client
        .node_price(
            &node("gpu-a"),
            start_time,
            start_time + Duration::from_secs(7200),
        )
        .await
        .unwrap();
    assert!((price - 5.0).abs() < 1e-9, "{price}");
    assert!(
        (client
            .pod_price(vec![1, 2, 3], start_time, start_time)
            .await
            .unwrap()
            - 3.0)
            .abs()
            < 1e-9
    );

    assert_eq!(client.gpu_label().await.unwrap(), "nvidia.com/gpu.product");
    assert_eq!(
        client.available_gpu_types().await.unwrap(),
        vec!["nvidia-b200", "nvidia-h200"]
    );
    client.refresh().await.unwrap();
    client.cleanup().await.unwrap();

    assert_eq!(client.target_size("gpu").await.unwrap(), 0);
    client.increase_size("gpu", 3).await.unwrap();
    assert_eq!(client.target_size("gpu").await.unwrap(), 3);
    client.decrease_target_size("gpu", -1).await.unwrap();
    client
        .delete_nodes("gpu", &[node("gpu-a"), node("gpu-b")])
        .await
        .unwrap();

    let instances = client.nodes("gpu").await.unwrap();
    assert_eq!(instances.len(), 2);
    assert_eq!(instances[0].state, InstanceState::Running);
    let error = instances[1].error.as_ref().unwrap();
    assert_eq!(error.class, ErrorClass::OutOfCapacity);
    assert_eq!(error.code, "InsufficientInstanceCapacity");

    let template = client.template_node_info("gpu").await.unwrap();
    assert_eq!(
        template.node,
        template_node(),
        "node survives the Kubernetes protobuf round trip"
    );
    assert!(
        template.resource_slices.is_empty(),
        "externalgrpc carries no slices"
    );

    let options = client
        .options("gpu", &AutoscalingOptions::default())
        .await
        .unwrap()
        .unwrap();
    assert!(options.zero_or_max_node_scaling);
    assert_eq!(options.max_node_provision, Some(Duration::from_secs(900)));

    let calls = provider.calls.lock().unwrap().clone();
    for expected in [
        "refresh",
        "cleanup",
        "increase_size 3",
        "decrease_target_size -1",
        "delete_nodes gpu-a,gpu-b",
    ] {
        assert!(
            calls.iter().any(|c| c == expected),
            "{expected} missing from {calls:?}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn every_extension_rpc_round_trips() {
    let server = start(Arc::new(Scripted::default()), ServeOptions::default()).await;
    let client = client(server.addr).await;
    assert!(client.extensions_available().await.unwrap());

    let details = client.node_group_details(&[]).await.unwrap();
    assert_eq!(details.len(), 1);
    let gpu = &details[0];
    assert_eq!(gpu.capacity_type, CapacityType::Reserved);
    let reservation = gpu.reservation.as_ref().unwrap();
    assert_eq!(
        (reservation.total, reservation.in_use, reservation.left()),
        (4, 1, 3)
    );
    assert_eq!(reservation.end_time, Some(SystemTime::UNIX_EPOCH + END));
    assert!((gpu.price_per_hour - 12.5).abs() < 1e-9);
    assert_eq!(gpu.topology_domain.as_ref().unwrap().1, "zone-a");
    assert_eq!(gpu.priority, 7);
    assert_eq!(gpu.template.resource_slices, vec![template_slice()]);
    let template = client.template("gpu").await.unwrap();
    assert_eq!(
        template.resource_slices.len(),
        1,
        "the extension's template has the slices"
    );

    let started = client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 2,
            min_count: 2,
            request_id: "r1".into(),
        })
        .await
        .unwrap();
    assert_eq!(started, vec!["fake://gpu-0", "fake://gpu-1"]);

    let quota = client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 3,
            min_count: 3,
            request_id: "r2".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(quota.category(), ErrorCategory::Quota);
    assert_eq!(quota.error_class(), Some(ErrorClass::Quota));

    let ice = client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 4,
            min_count: 4,
            request_id: "r3".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(ice.category(), ErrorCategory::OutOfCapacity);
    match &ice {
        dra_provider::ClientError::Rpc {
            scale_up: Some(detail),
            ..
        } => assert_eq!(detail.rolled_back, 2),
        other => panic!("expected a scale-up detail, got {other:?}"),
    }

    let bad = client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 1,
            min_count: 2,
            request_id: "r4".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        bad.category(),
        ErrorCategory::Rejected,
        "minCount > count is refused by the harness"
    );

    let instances = client.instance_details("gpu").await.unwrap();
    assert_eq!(instances[0].reservation_id.as_deref(), Some("cr-1"));
    assert_eq!(instances[0].node_name, "gpu-a");
    server.shutdown().await;
}

#[tokio::test]
async fn errors_map_to_categories() {
    let server = start(Arc::new(Scripted::default()), ServeOptions::default()).await;
    let client = client(server.addr).await;
    let missing = client.target_size("nope").await.unwrap_err();
    assert_eq!(missing.category(), ErrorCategory::Rejected);
    assert!(
        missing
            .to_string()
            .contains("node group \"nope\" not found"),
        "{missing}"
    );
    let too_big = client.increase_size("gpu", 9).await.unwrap_err();
    assert_eq!(too_big.category(), ErrorCategory::Rejected);
    let zero = client.increase_size("gpu", 0).await.unwrap_err();
    assert_eq!(
        zero.category(),
        ErrorCategory::Rejected,
        "delta must be positive"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn idempotent_calls_retry_transient_failures() {
    let provider = Arc::new(Scripted::default());
    *provider.flaky_nodes.lock().unwrap() = 2;
    let server = start(Arc::clone(&provider), ServeOptions::default()).await;
    let client = client(server.addr).await;
    assert_eq!(
        client.nodes("gpu").await.unwrap().len(),
        2,
        "third attempt succeeds"
    );
    let attempts = provider
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| *c == "nodes")
        .count();
    assert_eq!(attempts, 3);

    *provider.flaky_nodes.lock().unwrap() = 5;
    let err = client.nodes("gpu").await.unwrap_err();
    assert_eq!(
        err.category(),
        ErrorCategory::Unknown,
        "gives up after max_attempts"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn unreachable_provider_is_not_sent_and_times_out_per_call() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut config = ClientConfig::new(format!("http://{addr}"));
    config.retry.max_attempts = 1;
    config.call_timeout = Duration::from_millis(500);
    let client = ProviderClient::connect(config).await.unwrap();
    let err = client.node_groups().await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NotSent, "{err}");
}

#[tokio::test]
async fn client_falls_back_when_the_extension_is_missing() {
    // A plain externalgrpc provider: only the CloudProvider service is registered.
    let provider = Arc::new(Scripted::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(CloudProviderServer::new(ExternalGrpcService::new(
                provider, false,
            )))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let client = client(addr).await;
    assert!(!client.extensions_available().await.unwrap());
    let template = client.template("gpu").await.unwrap();
    assert_eq!(
        template.node,
        template_node(),
        "falls back to externalgrpc's nodeBytes"
    );
    assert!(template.resource_slices.is_empty());
    let err = client
        .atomic_increase_size(&AtomicIncrease {
            id: "gpu".into(),
            count: 1,
            min_count: 1,
            request_id: "x".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NotImplemented);
    assert_eq!(
        client.instance_details("gpu").await.unwrap_err().category(),
        ErrorCategory::NotImplemented
    );
    server.abort();
}

#[tokio::test]
async fn health_reports_serving_for_both_services() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let server = start(Arc::new(Scripted::default()), ServeOptions::default()).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    for service in [
        "",
        "clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider",
        "draautoscaler.provider.v1.NodeGroupExtensions",
    ] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status.status, 1, "{service} should be SERVING");
    }
    server.shutdown().await;
}
