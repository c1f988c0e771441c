//! What the client can tell about a failed call that changes the cloud: it was never sent,
//! its outcome is unknown, or the provider refused. And a provider keeps working on a start
//! after the client gave up on it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_provider::{
    AtomicIncrease, ClientConfig, CloudProvider, ErrorCategory, Instance, NodeGroupRef, NodeRef,
    ProviderClient, ProviderError, ServeOptions,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A provider whose increases take `latency` and whose atomic increase with count 5 reports
/// that it started nothing.
struct Slow {
    latency: Duration,
    finished: Mutex<Vec<String>>,
}

#[tonic::async_trait]
impl CloudProvider for Slow {
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError> {
        Ok(Vec::new())
    }
    async fn node_group_for_node(
        &self,
        _: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError> {
        Ok(None)
    }
    async fn gpu_label(&self) -> Result<String, ProviderError> {
        Ok(String::new())
    }
    async fn target_size(&self, _: &str) -> Result<i32, ProviderError> {
        Ok(0)
    }
    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        tokio::time::sleep(self.latency).await;
        self.finished
            .lock()
            .unwrap()
            .push(format!("increase {id} {delta}"));
        Ok(())
    }
    async fn delete_nodes(&self, _: &str, _: &[NodeRef]) -> Result<(), ProviderError> {
        Ok(())
    }
    async fn decrease_target_size(&self, _: &str, _: i32) -> Result<(), ProviderError> {
        Ok(())
    }
    async fn nodes(&self, _: &str) -> Result<Vec<Instance>, ProviderError> {
        Ok(Vec::new())
    }
    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        if request.count == 5 {
            return Err(ProviderError::NotStarted {
                message: "Kubernetes write failed; the 5 instances were rolled back".into(),
            });
        }
        tokio::time::sleep(self.latency).await;
        self.finished
            .lock()
            .unwrap()
            .push(format!("atomic {}", request.request_id));
        Ok(vec!["i-1".into()])
    }
}

fn config(addr: impl std::fmt::Display, timeout: Duration) -> ClientConfig {
    let mut config = ClientConfig::new(format!("http://{addr}"));
    config.retry.max_attempts = 1;
    config.call_timeout = timeout;
    config
}

fn atomic(count: i32) -> AtomicIncrease {
    AtomicIncrease {
        id: "gpu".into(),
        count,
        min_count: 1,
        request_id: "req-1".into(),
    }
}

#[tokio::test]
async fn connection_refused_is_not_sent() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = ProviderClient::connect(config(addr, Duration::from_millis(500)))
        .await
        .unwrap();
    let err = client.increase_size("gpu", 2).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NotSent, "{err}");
    let err = client.atomic_increase_size(&atomic(2)).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NotSent, "{err}");
}

#[tokio::test]
async fn a_provider_that_started_nothing_says_so() {
    let provider = Arc::new(Slow {
        latency: Duration::ZERO,
        finished: Mutex::default(),
    });
    let server = common::start(provider, ServeOptions::default()).await;
    let client = ProviderClient::connect(config(server.addr, Duration::from_secs(5)))
        .await
        .unwrap();
    let err = client.atomic_increase_size(&atomic(5)).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NotSent, "{err}");
    assert!(err.to_string().contains("rolled back"), "{err}");
    assert!(!err.category().is_refusal());
    server.shutdown().await;
}

#[tokio::test]
async fn a_deadline_after_sending_is_unknown_and_the_provider_finishes_anyway() {
    let provider = Arc::new(Slow {
        latency: Duration::from_millis(600),
        finished: Mutex::default(),
    });
    let server = common::start(Arc::clone(&provider), ServeOptions::default()).await;
    let client = ProviderClient::connect(config(server.addr, Duration::from_millis(200)))
        .await
        .unwrap();
    let err = client.atomic_increase_size(&atomic(2)).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Unknown, "{err}");
    let err = client.increase_size("gpu", 3).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Unknown, "{err}");
    // The client is gone; the starts are not tied to its deadline.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut finished = provider.finished.lock().unwrap().clone();
    finished.sort();
    assert_eq!(finished, vec!["atomic req-1", "increase gpu 3"]);
    server.shutdown().await;
}

/// Serves one connection with `answer` and closes it.
async fn one_shot_server(answer: &'static [u8]) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf).await;
            let _ = stream.write_all(answer).await;
            let _ = stream.shutdown().await;
        }
    });
    addr
}

#[tokio::test]
async fn an_endpoint_that_does_not_speak_grpc_was_never_sent_the_request() {
    let addr = one_shot_server(
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    let client = ProviderClient::connect(config(addr, Duration::from_secs(2)))
        .await
        .unwrap();
    let err = client.increase_size("gpu", 2).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::NotSent, "{err:?}");
}

#[tokio::test]
async fn a_connection_that_breaks_during_the_call_leaves_the_outcome_unknown() {
    // The peer takes the request and hangs up: a provider that crashed mid-call
    // looks the same, and it may have acted.
    let addr = one_shot_server(b"").await;
    let client = ProviderClient::connect(config(addr, Duration::from_secs(2)))
        .await
        .unwrap();
    let err = client.atomic_increase_size(&atomic(2)).await.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Unknown, "{err:?}");
}
