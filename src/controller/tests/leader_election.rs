//! Two replicas of the whole controller elect one leader with a Lease; only it
//! scales, and when it shuts down the other takes over without scaling again.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{cluster, create_gang, create_node_group, eventually};
use dra_controller::RunArgs;
use dra_controller::executor::memory::InMemoryProvider;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;

fn args(identity: &str) -> RunArgs {
    common::run_args([
        "run",
        "--identity",
        identity,
        "--kubernetes-version",
        "1.37",
        "--listen-address",
        "127.0.0.1:0",
        "--scan-interval",
        "100ms",
        "--lease-namespace",
        "default",
        "--lease-duration",
        "3s",
        "--renew-deadline",
        "2s",
        "--retry-period",
        "100ms",
        "--dry-run",
    ])
}

struct Replica {
    provider: Arc<InMemoryProvider>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

fn replica(client: &Client, identity: &str) -> Replica {
    let provider = Arc::new(InMemoryProvider::new());
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(dra_controller::run_until(
        client.clone(),
        args(identity),
        provider.clone(),
        stop_rx,
    ));
    Replica {
        provider,
        stop,
        task,
    }
}

async fn holder(client: &Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "default")
        .get_opt("dra-autoscaler")
        .await
        .expect("lease read")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_leader_and_hand_over() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "gpu", 8).await;
    create_gang(&client, "train", 2, "3").await;

    let a = replica(&client, "replica-a");
    let b = replica(&client, "replica-b");
    eventually("a leader to scale the gang up", || async {
        a.provider.increases().len() + b.provider.increases().len() == 1
    })
    .await;
    let leader = holder(&client).await.expect("lease held");
    let (leading, following) = if leader == "replica-a" {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(
        leading.provider.increases().len(),
        1,
        "the holder is the one that scaled"
    );

    // Several more loops: the follower never acts, the leader never repeats.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(following.provider.increases().len(), 0);
    assert_eq!(leading.provider.increases().len(), 1);
    assert_eq!(holder(&client).await.as_deref(), Some(leader.as_str()));

    // Graceful shutdown releases the lease; the other replica takes over at
    // once and, reading the same NodeGroup status, does not scale again.
    leading.stop.send_replace(true);
    leading
        .task
        .await
        .expect("leader task")
        .expect("leader stops cleanly");
    let other = if leader == "replica-a" {
        "replica-b"
    } else {
        "replica-a"
    };
    eventually("the follower to take the lease over", || async {
        holder(&client).await.as_deref() == Some(other)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        following.provider.increases().len(),
        0,
        "no duplicate scale-up after a leader change"
    );

    following.stop.send_replace(true);
    following
        .task
        .await
        .expect("follower task")
        .expect("follower stops cleanly");
    assert_eq!(
        holder(&client).await,
        None,
        "the last replica released the lease too"
    );
}
