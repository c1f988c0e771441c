//! Scale-down against the API stand-in and the fake cloud provider over gRPC: an underused node
//! is tainted, drained through the Eviction API and its machine deleted; a removal found under
//! way after a restart is finished (or reverted when its pods can no longer go anywhere); an
//! eviction a PodDisruptionBudget keeps refusing times out and the node is untainted; an empty
//! node goes with `ScaleDownEmpty` while an underused node a pod keeps gets `NotRemovable`.

mod common;

use std::time::Duration;

use common::{Controller, cluster, create_node_group_with_id, events, node_group};
use dra_controller::scaledown::ScaleDownConfig;
use dra_plan::scaledown::ScaleDownDefaults;
use dra_plan::scaledown::keys::TO_BE_DELETED_TAINT;
use dra_provider::{ClientConfig, ProviderClient};
use dra_provider_fake::{Config, FakeProvider};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

const FAKE_CONFIG: &str = r#"
sliceDelayMs: 0
nodeGroups:
  - name: cpu
    spec:
      provider: fake
      providerID: cpu
      minSize: 0
      maxSize: 8
      capacityType: on-demand
      pricePerHour: 1.5
      template:
        capacity: {cpu: "4", memory: 16Gi, pods: "110"}
"#;

/// The fake cloud serving gRPC, and a client of it.
struct Cloud {
    addr: std::net::SocketAddr,
    client: ProviderClient,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn cloud(kube: &Client) -> Cloud {
    let provider = FakeProvider::new(
        Config::parse(FAKE_CONFIG, "test").expect("config"),
        kube.clone(),
        None,
    )
    .await
    .expect("fake provider starts");
    let served = common::serve_provider(provider).await;
    let addr = served.addr;
    let client = ProviderClient::connect(ClientConfig::new(format!("http://{addr}")))
        .await
        .expect("provider client");
    Cloud {
        addr,
        client,
        _stop: served.stop,
    }
}

fn config(max_graceful_termination: SignedDuration) -> ScaleDownConfig {
    ScaleDownConfig {
        defaults: ScaleDownDefaults {
            enabled: true,
            utilization_threshold: 0.5,
            unneeded_time: SignedDuration::ZERO,
            empty_unneeded_time: SignedDuration::ZERO,
        },
        delay_after_add: SignedDuration::ZERO,
        max_parallelism: 10,
        max_graceful_termination,
        eviction_retry: Duration::from_millis(100),
        actuate: true,
    }
}

async fn controller(
    server: &dra_fake_apiserver::FakeApiServer,
    cloud: &Cloud,
    timeout: SignedDuration,
) -> Controller {
    let kube = server.client();
    let executor = common::connect_provider("fake", cloud.addr).await;
    let evictions = common::no_retry_client(server);
    Controller::start_with(&kube, executor, Some((config(timeout), evictions))).await
}

/// Two machines of group `cpu` (4 CPUs each), started through the provider: `cpu-1`, `cpu-2`.
async fn two_nodes(kube: &Client, cloud: &Cloud) -> (String, String) {
    create_node_group_with_id(kube, "cpu", "cpu", 8).await;
    cloud
        .client
        .increase_size("cpu", 2)
        .await
        .expect("increase");
    let nodes: Api<Node> = Api::all(kube.clone());
    common::eventually("two nodes registered", || async {
        nodes
            .list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.len() == 2)
    })
    .await;
    let mut names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    (names[0].clone(), names[1].clone())
}

/// A running, ready pod of a ReplicaSet on `node`.
async fn running_pod(kube: &Client, name: &str, node: &str, cpu: &str, extra: serde_json::Value) {
    let mut value = serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{name}-rs"),
                "uid": "0e7a4d1c-0000-4000-8000-000000000001", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "app",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    });
    merge(&mut value, &extra);
    let pod: Pod = serde_json::from_value(value).expect("pod");
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
    let status = serde_json::json!({"status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pod status");
}

fn merge(base: &mut serde_json::Value, extra: &serde_json::Value) {
    match (base, extra) {
        (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (b, e) => *b = e.clone(),
    }
}

async fn tainted(kube: &Client, node: &str) -> Option<bool> {
    let node = Api::<Node>::all(kube.clone())
        .get_opt(node)
        .await
        .expect("read")?;
    Some(
        node.spec
            .and_then(|s| s.taints)
            .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT)),
    )
}

async fn wait_for_stores(controller: &Controller, pods: usize) {
    controller
        .wait_for("nodes and pods in the stores", |i| {
            i.nodes.len() == 2 && i.pods.len() == pods
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_underused_node_is_drained_and_its_machine_deleted() {
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    // first: 1 of 4 CPUs (25%), its pod can move; second: 3 of 4 (75%), not underused.
    running_pod(&kube, "web-0", &first, "1", serde_json::json!({})).await;
    running_pod(&kube, "batch-0", &second, "3", serde_json::json!({})).await;
    let controller = controller(&server, &cloud, SignedDuration::from_secs(20)).await;
    wait_for_stores(&controller, 2).await;

    let t0 = Timestamp::now();
    let summary = controller.run_once_at(t0).await;
    let scale_down = summary.scale_down.expect("scale-down ran");
    assert!(scale_down.started.is_empty(), "unneeded only from now on");
    let status = node_group(&kube, "cpu").await.status.expect("status");
    let unneeded: Vec<&str> = status
        .unneeded_nodes
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    assert_eq!(unneeded, [first.as_str()]);

    let later = controller
        .run_once_at(t0 + SignedDuration::from_secs(2))
        .await;
    let later = later.scale_down.expect("ran");
    assert_eq!(later.started, [first.as_str()], "{later:#?}");
    let scale_downs = controller.autoscaler.scale_downs().expect("on");
    assert!(
        scale_downs.settle(Duration::from_secs(20)).await,
        "removal finished"
    );

    assert_eq!(
        tainted(&kube, &first).await,
        None,
        "the provider deleted the node"
    );
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    assert!(
        pods.get_opt("web-0").await.expect("read").is_none(),
        "evicted"
    );
    assert!(pods.get_opt("batch-0").await.expect("read").is_some());
    let instances = cloud.client.nodes("cpu").await.expect("instances");
    assert_eq!(instances.len(), 1, "one machine left: {instances:?}");
    let removed = events(&kube, "ScaleDown").await;
    let regarding: Vec<(&str, &str)> = removed
        .iter()
        .map(|(kind, name, _, _)| (kind.as_str(), name.as_str()))
        .collect();
    assert_eq!(regarding, [("Node", first.as_str()), ("NodeGroup", "cpu")]);
    assert!(removed[0].3.contains("evicting 1 pod"), "{removed:?}");
    let metrics = controller.metrics.encode();
    assert!(
        metrics.contains(
            "dra_autoscaler_scaled_down_nodes_total{node_group=\"cpu\",reason=\"underutilized\"} 1"
        ),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_found_under_way_after_a_restart_is_finished_or_reverted() {
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    running_pod(&kube, "web-0", &first, "1", serde_json::json!({})).await;
    running_pod(&kube, "batch-0", &second, "3", serde_json::json!({})).await;
    // What a controller that died right after tainting leaves behind.
    let taint = serde_json::json!({"spec": {"taints": [
        {"key": TO_BE_DELETED_TAINT, "value": "1796083200", "effect": "NoSchedule"}]}});
    Api::<Node>::all(kube.clone())
        .patch(&first, &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .expect("tainted");
    let controller = controller(&server, &cloud, SignedDuration::from_secs(20)).await;
    wait_for_stores(&controller, 2).await;

    let summary = controller.run_once().await;
    let scale_down = summary.scale_down.expect("ran");
    assert_eq!(scale_down.resumed, [first.as_str()]);
    assert!(scale_down.started.is_empty());
    let scale_downs = controller.autoscaler.scale_downs().expect("on");
    assert!(scale_downs.settle(Duration::from_secs(20)).await);
    assert_eq!(
        tainted(&kube, &first).await,
        None,
        "finished: the node is gone"
    );
    assert_eq!(cloud.client.nodes("cpu").await.expect("instances").len(), 1);

    // Now a tainted node whose pod has nowhere to go: the removal is reverted.
    Api::<Node>::all(kube.clone())
        .patch(&second, &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .expect("tainted");
    controller
        .wait_for("the taint in the store", |i| {
            i.nodes.len() == 1
                && i.nodes[0]
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| !t.is_empty())
        })
        .await;
    let summary = controller.run_once().await;
    assert_eq!(summary.scale_down.expect("ran").reverted, [second.as_str()]);
    assert_eq!(
        tainted(&kube, &second).await,
        Some(false),
        "untainted, kept"
    );
    let failed = events(&kube, "ScaleDownFailed").await;
    assert!(
        failed
            .iter()
            .any(|(kind, name, kind_of_event, note)| kind == "Node"
                && name == &second
                && kind_of_event == "Warning"
                && note.contains("cannot move")),
        "{failed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_a_budget_keeps_refusing_times_out_and_the_node_is_untainted() {
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    // safe-to-evict "true" lets the simulation move the pod past its budget, as
    // cluster-autoscaler's rules do; the Eviction API still enforces the budget.
    running_pod(
        &kube,
        "guarded-0",
        &first,
        "1",
        serde_json::json!({"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}}}),
    )
    .await;
    running_pod(&kube, "batch-0", &second, "3", serde_json::json!({})).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(kube.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded-0"}}}
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("pdb created");
    let status = serde_json::json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 0,
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
    pdbs.patch_status("guarded", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("pdb status");
    let controller = controller(&server, &cloud, SignedDuration::from_secs(1)).await;
    wait_for_stores(&controller, 2).await;

    let t0 = Timestamp::now();
    controller.run_once_at(t0).await;
    let summary = controller
        .run_once_at(t0 + SignedDuration::from_secs(2))
        .await;
    let summary = summary.scale_down.expect("ran");
    assert_eq!(summary.started, [first.as_str()], "{summary:#?}");
    assert_eq!(tainted(&kube, &first).await, Some(true));
    let scale_downs = controller.autoscaler.scale_downs().expect("on");
    assert!(scale_downs.settle(Duration::from_secs(20)).await);

    assert_eq!(
        tainted(&kube, &first).await,
        Some(false),
        "untainted after the timeout"
    );
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    assert!(
        pods.get_opt("guarded-0").await.expect("read").is_some(),
        "not evicted"
    );
    assert_eq!(cloud.client.nodes("cpu").await.expect("instances").len(), 2);
    let failed = events(&kube, "ScaleDownFailed").await;
    assert!(
        failed.iter().any(|(kind, name, _, note)| kind == "Node"
            && name == &first
            && note.contains(
                "The disruption budget guarded needs 1 healthy pods and has 1 currently"
            )),
        "{failed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_node_goes_as_scale_down_empty_and_a_kept_node_says_why() {
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    // first: no pod (empty). second: 1 of 4 CPUs (25%, underused) held by a pod without a
    // controller, which cluster-autoscaler's default rules never evict.
    running_pod(
        &kube,
        "bare",
        &second,
        "1",
        serde_json::json!({"metadata": {"ownerReferences": []}}),
    )
    .await;
    let controller = controller(&server, &cloud, SignedDuration::from_secs(20)).await;
    wait_for_stores(&controller, 1).await;

    let t0 = Timestamp::now();
    let first_loop = controller.run_once_at(t0).await;
    assert!(first_loop.scale_down.expect("ran").started.is_empty());
    let metrics = controller.metrics.encode();
    assert!(
        metrics.contains("dra_autoscaler_unneeded_nodes{node_group=\"cpu\"} 1"),
        "only the empty node is unneeded: {metrics}"
    );
    let summary = controller
        .run_once_at(t0 + SignedDuration::from_secs(2))
        .await
        .scale_down
        .expect("ran");
    assert_eq!(summary.started, [first.as_str()], "{summary:#?}");
    let scale_downs = controller.autoscaler.scale_downs().expect("on");
    assert!(scale_downs.settle(Duration::from_secs(20)).await);

    assert_eq!(tainted(&kube, &first).await, None, "deleted");
    assert_eq!(
        tainted(&kube, &second).await,
        Some(false),
        "kept, untouched"
    );
    let empty = events(&kube, "ScaleDownEmpty").await;
    let regarding: Vec<(&str, &str)> = empty
        .iter()
        .map(|(kind, name, _, _)| (kind.as_str(), name.as_str()))
        .collect();
    assert_eq!(regarding, [("Node", first.as_str()), ("NodeGroup", "cpu")]);
    assert!(
        events(&kube, "ScaleDown").await.is_empty(),
        "an empty node's removal is ScaleDownEmpty, not ScaleDown"
    );
    let kept = events(&kube, "NotRemovable").await;
    assert!(
        kept.iter().any(|(kind, name, _, note)| kind == "Node"
            && name == &second
            && note.contains("pod default/bare has no controller")),
        "{kept:?}"
    );
    assert!(
        kept.iter().all(|(_, name, _, _)| name != &first),
        "{kept:?}"
    );
    let metrics = controller.metrics.encode();
    assert!(
        metrics.contains(
            "dra_autoscaler_scaled_down_nodes_total{node_group=\"cpu\",reason=\"empty\"} 1"
        ),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_counts_only_removals_in_flight() {
    // --max-scale-down-parallelism bounds the removals under way at once (cluster-autoscaler's
    // deletion tracker counts a node from its taint until its machine's delete returns). A node
    // whose machine is deleted is done: the next pass may remove the next node at once, not 30
    // minutes later.
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    let executor = common::connect_provider("fake", cloud.addr).await;
    let evictions = common::no_retry_client(&server);
    let mut one_at_a_time = config(SignedDuration::from_secs(20));
    one_at_a_time.max_parallelism = 1;
    let controller =
        Controller::start_with(&kube, executor, Some((one_at_a_time, evictions))).await;
    wait_for_stores(&controller, 0).await;

    let t0 = Timestamp::now();
    controller.run_once_at(t0).await;
    let summary = controller
        .run_once_at(t0 + SignedDuration::from_secs(2))
        .await
        .scale_down
        .expect("ran");
    assert_eq!(summary.started.len(), 1, "one at a time: {summary:#?}");
    let removed_first = summary.started[0].clone();
    let scale_downs = controller.autoscaler.scale_downs().expect("on");
    assert!(scale_downs.settle(Duration::from_secs(20)).await);
    assert_eq!(tainted(&kube, &removed_first).await, None, "deleted");
    controller
        .wait_for("the deleted node gone from the store", |i| {
            i.nodes.len() == 1
        })
        .await;

    let summary = controller
        .run_once_at(t0 + SignedDuration::from_secs(4))
        .await
        .scale_down
        .expect("ran");
    let other = if removed_first == first {
        &second
    } else {
        &first
    };
    assert_eq!(
        summary.started,
        [other.as_str()],
        "the first removal is over; nothing is in flight: {summary:#?}"
    );
    assert!(scale_downs.settle(Duration::from_secs(20)).await);
    assert_eq!(cloud.client.nodes("cpu").await.expect("instances").len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_empty_says_since_when_the_node_was_unneeded() {
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    running_pod(&kube, "batch-0", &second, "3", serde_json::json!({})).await;
    let controller = controller(&server, &cloud, SignedDuration::from_secs(20)).await;
    wait_for_stores(&controller, 1).await;

    // metav1.Time keeps whole seconds: the unneeded-since time the status keeps.
    let t0 = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    controller.run_once_at(t0).await;
    let summary = controller
        .run_once_at(t0 + SignedDuration::from_secs(2))
        .await
        .scale_down
        .expect("ran");
    assert_eq!(summary.started, [first.as_str()], "{summary:#?}");
    let scale_downs = controller.autoscaler.scale_downs().expect("on");
    assert!(scale_downs.settle(Duration::from_secs(20)).await);
    let empty = events(&kube, "ScaleDownEmpty").await;
    assert_eq!(empty.len(), 2, "{empty:?}");
    for (_, _, _, note) in &empty {
        assert!(
            note.starts_with(&format!("empty node {first} removed")),
            "{note}"
        );
        assert!(
            note.contains(&format!("it was unneeded since {t0}")),
            "{note}"
        );
    }
}

/// A pod without a controller on `node` (1 CPU): cluster-autoscaler's rules keep its node.
async fn bare_pod(kube: &Client, name: &str, node: &str) {
    running_pod(
        kube,
        name,
        node,
        "1",
        serde_json::json!({"metadata": {"ownerReferences": []}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_not_removable_inside_the_scale_down_delay_after_add() {
    // Within --scale-down-delay-after-add nothing is removed whatever the nodes' state: why a
    // node would be kept is noise then. After the delay it is said.
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    bare_pod(&kube, "bare", &second).await;
    running_pod(&kube, "batch-0", &first, "3", serde_json::json!({})).await;
    let t0 = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let mut group = common::node_group(&kube, "cpu").await;
    group
        .status
        .get_or_insert_with(Default::default)
        .last_scale_up = Some(dra_api::LastScaleUp {
        time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0),
        count: 2,
        outcome: dra_api::ScaleUpOutcome::Succeeded,
        message: "started 2 node(s) for default/x".into(),
    });
    Api::<dra_api::NodeGroup>::all(kube.clone())
        .replace_status("cpu", &PostParams::default(), &group)
        .await
        .expect("status seeded");
    let executor = common::connect_provider("fake", cloud.addr).await;
    let evictions = common::no_retry_client(&server);
    let mut delayed = config(SignedDuration::from_secs(20));
    delayed.delay_after_add = SignedDuration::from_mins(10);
    let controller = Controller::start_with(&kube, executor, Some((delayed, evictions))).await;
    wait_for_stores(&controller, 2).await;
    controller
        .wait_for("the seeded status in the store", |i| {
            i.node_groups
                .iter()
                .any(|g| g.status.as_ref().is_some_and(|s| s.last_scale_up.is_some()))
        })
        .await;

    controller
        .run_once_at(t0 + SignedDuration::from_mins(1))
        .await;
    assert!(
        events(&kube, "NotRemovable").await.is_empty(),
        "inside the delay after a scale-up"
    );
    controller
        .run_once_at(t0 + SignedDuration::from_mins(11))
        .await;
    let kept = events(&kube, "NotRemovable").await;
    assert!(
        kept.iter()
            .any(|(_, name, _, note)| name == &second && note.contains("no controller")),
        "{kept:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_removable_event_goes_with_its_cause() {
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    bare_pod(&kube, "bare", &second).await;
    running_pod(&kube, "batch-0", &first, "3", serde_json::json!({})).await;
    let controller = controller(&server, &cloud, SignedDuration::from_secs(20)).await;
    wait_for_stores(&controller, 2).await;
    let t0 = Timestamp::now();
    controller.run_once_at(t0).await;
    let kept = events(&kube, "NotRemovable").await;
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].3.contains("pod default/bare has no controller"),
        "{kept:?}"
    );

    // The pod goes: the node is empty, unneeded, and no longer kept for that reason.
    Api::<Pod>::namespaced(kube.clone(), "default")
        .delete("bare", &Default::default())
        .await
        .expect("pod deleted");
    controller
        .wait_for("the pod gone from the store", |i| i.pods.len() == 1)
        .await;
    let summary = controller
        .run_once_at(t0 + SignedDuration::from_secs(1))
        .await
        .scale_down
        .expect("ran");
    let report = summary.report.expect("analysed");
    assert!(
        report.unneeded.iter().any(|u| u.node == second),
        "{report:#?}"
    );
    assert!(
        events(&kube, "NotRemovable").await.is_empty(),
        "the Event whose cause is gone is gone too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_a_pending_pod_starts_evaluates_scale_down_once_per_scan_interval() {
    use dra_controller::autoscaler::Trigger;
    let server = cluster().await;
    let kube = server.client();
    let cloud = cloud(&kube).await;
    let (first, second) = two_nodes(&kube, &cloud).await;
    running_pod(&kube, "web-0", &first, "1", serde_json::json!({})).await;
    running_pod(&kube, "batch-0", &second, "3", serde_json::json!({})).await;
    let controller = controller(&server, &cloud, SignedDuration::from_secs(20)).await;
    wait_for_stores(&controller, 2).await;
    let secs = SignedDuration::from_secs;
    let pod = Trigger::PendingPod { every: secs(10) };
    let run = |at: Timestamp, trigger: Trigger| {
        let inputs = controller.watches.stores.inputs();
        let autoscaler = &controller.autoscaler;
        async move { autoscaler.run_once_for(&inputs, at, trigger).await }
    };

    let t0 = Timestamp::now();
    assert!(
        run(t0, pod).await.scale_down.is_some(),
        "never evaluated before"
    );
    let unneeded = node_group(&kube, "cpu").await.status.expect("status");
    assert_eq!(unneeded.unneeded_nodes.len(), 1);
    assert!(
        run(t0 + secs(3), pod).await.scale_down.is_none(),
        "within a scan interval"
    );
    assert_eq!(
        node_group(&kube, "cpu")
            .await
            .status
            .expect("status")
            .unneeded_nodes,
        unneeded.unneeded_nodes,
        "left as the last analysis wrote them"
    );
    assert!(
        run(t0 + secs(4), Trigger::Timer).await.scale_down.is_some(),
        "a timer loop always evaluates"
    );
    assert!(run(t0 + secs(13), pod).await.scale_down.is_none());
    assert!(
        run(t0 + secs(14), pod).await.scale_down.is_some(),
        "a scan interval after the timer loop's"
    );
}
