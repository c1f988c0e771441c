//! The suite on the real control plane: kube-apiserver, kube-scheduler and
//! kube-controller-manager v1.37.2 as local processes (`e2e/cluster`), with `dra-autoscaler run`
//! and the fake provider acting as the chart's ServiceAccounts. The real scheduler binds every
//! pod and writes every device allocation; KCM creates claims from templates and removes the
//! not-ready taint. Each test starts its own cluster.
//!
//! Run with `e2e/cluster/test.sh` (or `cargo nextest run -p dra-local-stack --test real_cluster
//! --run-ignored only` once `e2e/cluster/build.sh` has built the binaries).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cluster::{
    count_of_group, describe_pods, events, manifest, node_names, node_of, nodes, phase, pods,
    real_stack, wait_running,
};
use common::predict::{assert_devices_match_simulate, assert_devices_match_simulate_any_gpu};
use common::wait_for;

const LANDS_WITHIN: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: e2e/cluster/test.sh"]
async fn gpu_gang_lands_whole_on_the_nodes_bought_with_the_devices_simulate_predicts() {
    let mut stack = real_stack("").await;
    stack
        .apply_yaml(&manifest("deviceclass.yaml"))
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("gpu-nodegroups.yaml"))
        .await
        .unwrap();
    stack
        .start_controller(&["--scan-interval", "1s"])
        .await
        .unwrap();
    stack.apply_yaml(&manifest("gang-8.yaml")).await.unwrap();

    let running = wait_running(&stack, "default", "train-", 8, LANDS_WITHIN).await;
    let bought = node_names(&nodes(&stack).await);
    // 8 workers x 2 GPUs = 16 GPUs = four 4-GPU machines: both of the free reservation first,
    // then two on demand.
    assert_eq!(bought.len(), 4, "nodes: {bought:?}");
    assert_eq!(count_of_group(&bought, "gpu-reserved"), 2, "{bought:?}");
    for pod in &running {
        let node = pod.spec.as_ref().unwrap().node_name.as_deref().unwrap();
        assert!(bought.contains(node), "{node} is not one of ours");
    }
    // A few more loops buy nothing more.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(node_names(&nodes(&stack).await), bought);

    let exact = assert_devices_match_simulate(stack.real().unwrap(), "default", "train-");
    println!("{exact} of 8 pods got exactly the devices simulate predicted for them");
    for group in ["gpu-reserved", "gpu-on-demand-a", "gpu-on-demand-b"] {
        assert_status_has_one_owner(&stack, group).await;
    }
    stack.shutdown().await;
}

/// The status of NodeGroup `name`, conditions included, has one writer: the real API
/// server's `managedFields` show one manager for the `status` subresource, the
/// controller's server-side apply, and it owns the conditions (a map list keyed by `type`).
async fn assert_status_has_one_owner(stack: &dra_local_stack::Stack, name: &str) {
    let api: kube::Api<dra_api::NodeGroup> = kube::Api::all(stack.client());
    let group = api.get(name).await.unwrap();
    let status_managers: Vec<_> = group
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.subresource.as_deref() == Some("status"))
        .collect();
    let who: Vec<_> = status_managers
        .iter()
        .map(|m| (m.manager.clone(), m.operation.clone()))
        .collect();
    assert_eq!(
        who,
        [(Some("dra-autoscaler".to_owned()), Some("Apply".to_owned()))],
        "{name}: managers of status: {status_managers:?}"
    );
    let fields = serde_json::to_value(&status_managers[0].fields_v1).unwrap();
    let conditions = &fields["f:status"]["f:conditions"];
    assert!(
        conditions
            .as_object()
            .is_some_and(|c| c.keys().any(|k| k.starts_with("k:{\"type\":"))),
        "{name}: conditions not owned entry by entry: {fields}"
    );
    let status = group.status.unwrap_or_default();
    assert!(
        status.conditions.iter().any(|c| c.type_ == "ScalingActive"),
        "{name}: {:?}",
        status.conditions
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: e2e/cluster/test.sh"]
async fn pods_asking_for_gpu_partitions_land_on_the_partitions_simulate_predicts() {
    let mut stack = real_stack("").await;
    stack
        .apply_yaml(&manifest("deviceclass.yaml"))
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("partitionable-nodegroup.yaml"))
        .await
        .unwrap();
    stack
        .start_controller(&["--scan-interval", "1s"])
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("partitions.yaml"))
        .await
        .unwrap();

    let running = wait_running(&stack, "default", "infer-", 7, LANDS_WITHIN).await;
    let bought = node_names(&nodes(&stack).await);
    // Six quarters and one whole GPU: 6/8 of one machine's counters, and the whole GPU needs
    // both counter sets of a GPU untouched, which only a second machine has.
    assert_eq!(bought.len(), 2, "nodes: {bought:?}");
    assert_eq!(count_of_group(&bought, "partitionable-gpu"), 2);
    assert_eq!(running.len(), 7);
    // Which GPU of a machine the whole-GPU pod takes depends on the order the scheduler
    // took the pods in (seen in one run of four on 2026-12-05: the whole GPU first on a
    // machine, quarters first in simulate), so the devices compare up to the GPU's index.
    assert_devices_match_simulate_any_gpu(stack.real().unwrap(), "default", "infer-");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: e2e/cluster/test.sh"]
async fn a_gang_no_template_can_hold_buys_nothing_and_its_pods_and_podgroup_say_why() {
    let mut stack = real_stack("").await;
    stack
        .apply_yaml(&manifest("deviceclass.yaml"))
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("gpu-nodegroups.yaml"))
        .await
        .unwrap();
    stack
        .start_controller(&["--scan-interval", "1s"])
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("unfit-gang.yaml"))
        .await
        .unwrap();

    // Our Warning on each pod and on the PodGroup, from dra-autoscaler.
    let regarding = wait_for(
        "NotTriggerScaleUp on both pods and the PodGroup",
        LANDS_WITHIN,
        async || {
            let ours: Vec<(String, String, String)> = events(&stack)
                .await
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("NotTriggerScaleUp"))
                .filter_map(|e| {
                    let r = e.regarding?;
                    Some((r.kind?, r.name?, e.note.unwrap_or_default()))
                })
                .collect();
            let kinds: Vec<&str> = ours
                .iter()
                .map(|(k, n, _)| {
                    if n.starts_with("too-big") {
                        k.as_str()
                    } else {
                        ""
                    }
                })
                .collect();
            if kinds.iter().filter(|k| **k == "Pod").count() >= 2 && kinds.contains(&"PodGroup") {
                Ok(ours)
            } else {
                Err(format!("{ours:?}"))
            }
        },
    )
    .await;
    for (kind, name, note) in &regarding {
        // The reason a user can act on: no group's machine has 8 of these devices.
        assert!(
            note.contains("gpu-on-demand-a") && note.contains('8'),
            "{kind} {name}: {note}"
        );
    }
    // The scheduler's own verdict stays: Unschedulable, and nothing was bought.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(node_names(&nodes(&stack).await).is_empty());
    for pod in pods(&stack, "default").await {
        assert_eq!(phase(&pod), "Pending");
        assert!(node_of(&pod).is_none());
    }
    stack.shutdown().await;
}

/// The zone of each pod's node.
async fn zones_of(
    stack: &dra_local_stack::Stack,
    running: &[k8s_openapi::api::core::v1::Pod],
) -> Vec<String> {
    let nodes = nodes(stack).await;
    running
        .iter()
        .map(|p| {
            let node = node_of(p).unwrap();
            nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(node))
                .and_then(|n| {
                    n.metadata
                        .labels
                        .as_ref()?
                        .get("topology.kubernetes.io/zone")
                        .cloned()
                })
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: e2e/cluster/test.sh"]
async fn a_jobset_style_exclusive_gang_lands_in_one_zone_and_a_spread_gang_over_both() {
    let mut stack = real_stack("").await;
    stack
        .apply_yaml(&manifest("deviceclass.yaml"))
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("gpu-nodegroups.yaml"))
        .await
        .unwrap();
    stack
        .start_controller(&["--scan-interval", "1s"])
        .await
        .unwrap();

    // Exclusive: four 2-GPU workers share one zone: two 4-GPU machines there.
    stack
        .apply_yaml(&manifest("exclusive-zone-gang.yaml"))
        .await
        .unwrap();
    let exclusive = wait_running(&stack, "default", "js-", 4, LANDS_WITHIN).await;
    let zones = zones_of(&stack, &exclusive).await;
    assert!(
        zones.iter().all(|z| z == &zones[0] && !z.is_empty()),
        "{zones:?}"
    );
    let after_first = node_names(&nodes(&stack).await);
    assert_eq!(after_first.len(), 2, "{after_first:?}");

    // Spread: at most one more worker in a zone than in the other: two and two. The
    // exclusive job's anti-affinity keeps the spread gang out of nothing (it names only
    // jobset pods), but its zone's machines are full.
    stack
        .apply_yaml(&manifest("zone-spread-gang.yaml"))
        .await
        .unwrap();
    let spread = wait_running(&stack, "default", "spread-", 4, LANDS_WITHIN).await;
    let zones = zones_of(&stack, &spread).await;
    let in_a = zones.iter().filter(|z| z.as_str() == "us-east-1a").count();
    let in_b = zones.iter().filter(|z| z.as_str() == "us-east-1b").count();
    assert_eq!((in_a, in_b), (2, 2), "{zones:?}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let bought = node_names(&nodes(&stack).await);
    assert_eq!(
        bought.len(),
        4,
        "{bought:?}; spread gang: {}",
        describe_pods(&spread)
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: e2e/cluster/test.sh"]
async fn scale_down_drains_through_the_eviction_api_waits_for_the_pdb_and_keeps_a_running_gang() {
    let mut stack = real_stack("").await;
    stack
        .apply_yaml(&manifest("deviceclass.yaml"))
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("gpu-nodegroups.yaml"))
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("cpu-nodegroup.yaml"))
        .await
        .unwrap();
    stack
        .start_controller(&[
            "--scan-interval",
            "1s",
            "--scale-down-unneeded-time",
            "3s",
            "--scale-down-empty-unneeded-time",
            "3s",
            "--scale-down-delay-after-add",
            "0s",
        ])
        .await
        .unwrap();
    // A running gang whose machines are full: they must stay.
    stack
        .apply_yaml(&manifest("exclusive-zone-gang.yaml"))
        .await
        .unwrap();
    wait_running(&stack, "default", "js-", 4, LANDS_WITHIN).await;
    let gpu_nodes: BTreeSet<String> = node_names(&nodes(&stack).await);
    assert_eq!(gpu_nodes.len(), 2);

    stack
        .apply_yaml(&manifest("scale-down-fillers.yaml"))
        .await
        .unwrap();
    wait_running(&stack, "default", "filler-", 2, LANDS_WITHIN).await;
    stack
        .apply_yaml(&manifest("scale-down-web.yaml"))
        .await
        .unwrap();
    let web = wait_running(&stack, "default", "web-", 2, LANDS_WITHIN).await;
    let web_nodes: BTreeSet<&str> = web.iter().filter_map(node_of).collect();
    assert_eq!(
        web_nodes.len(),
        2,
        "one replica per CPU machine: {}",
        describe_pods(&web)
    );

    // The workload goes: each CPU machine keeps one 1-CPU replica, both are under the
    // utilisation threshold, and one machine's replica fits on the other.
    let real = stack.real().unwrap();
    real.kubectl(&["delete", "pod", "filler-0", "filler-1", "--wait=false"])
        .unwrap();
    // minAvailable 2 of 2: every eviction is refused (429), so both machines stay.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let cpu_nodes = |all: &BTreeSet<String>| count_of_group(all, "cpu");
    assert_eq!(cpu_nodes(&node_names(&nodes(&stack).await)), 2);
    let web = wait_running(&stack, "default", "web-", 2, Duration::from_secs(5)).await;
    assert!(web.iter().all(|p| p.metadata.deletion_timestamp.is_none()));

    // The budget allows one disruption: the drain goes through, the replica moves, and the
    // emptied machine is deleted. The gang's machines stay.
    real.kubectl(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":1}}"#,
    ])
    .unwrap();
    let left = wait_for("one CPU machine left", LANDS_WITHIN, async || {
        let all = node_names(&nodes(&stack).await);
        if cpu_nodes(&all) == 1 {
            Ok(all)
        } else {
            Err(format!("{all:?}"))
        }
    })
    .await;
    for node in &gpu_nodes {
        assert!(
            left.contains(node),
            "the running gang's {node} was removed: {left:?}"
        );
    }
    let web = wait_running(&stack, "default", "web-", 2, LANDS_WITHIN).await;
    let on: BTreeSet<&str> = web.iter().filter_map(node_of).collect();
    assert_eq!(
        on.len(),
        1,
        "both replicas on the machine left: {}",
        describe_pods(&web)
    );
    wait_running(&stack, "default", "js-", 4, Duration::from_secs(5)).await;
    stack.shutdown().await;
}

/// Applies cluster-autoscaler's CRDs, unchanged from upstream (`testdata/crds/`).
async fn apply_upstream_crds(stack: &dra_local_stack::Stack) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/crds");
    for file in [
        "autoscaling.x-k8s.io_provisioningrequests.yaml",
        "autoscaling.x-k8s.io_capacitybuffers.yaml",
    ] {
        stack
            .apply_yaml(&std::fs::read_to_string(dir.join(file)).unwrap())
            .await
            .unwrap();
    }
}

/// `(status, reason)` of condition `type_` of ProvisioningRequest `default/name`.
fn request_condition(
    real: &dra_local_stack::RealCluster,
    name: &str,
    type_: &str,
) -> Option<(String, String)> {
    let out = real
        .kubectl(&[
            "get",
            "provisioningrequests.autoscaling.x-k8s.io",
            name,
            "-o",
            "json",
        ])
        .ok()?;
    let object: serde_json::Value = serde_json::from_str(&out).ok()?;
    let found = object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        found["status"].as_str()?.to_owned(),
        found["reason"].as_str().unwrap_or_default().to_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: e2e/cluster/test.sh"]
async fn provisioning_requests_get_cluster_autoscalers_conditions_and_their_pods_land() {
    let mut stack = real_stack("").await;
    apply_upstream_crds(&stack).await;
    stack
        .apply_yaml(&manifest("cpu-nodegroup.yaml"))
        .await
        .unwrap();
    stack
        .start_controller(&["--scan-interval", "1s"])
        .await
        .unwrap();
    let real = stack.real().unwrap();

    // best-effort-atomic-scale-up: both machines bought at once, then Provisioned=True.
    stack
        .apply_yaml(&manifest("provisioning-requests.yaml"))
        .await
        .unwrap();
    wait_for(
        "batch Provisioned",
        LANDS_WITHIN,
        async || match request_condition(real, "batch", "Provisioned") {
            Some((status, reason)) if status == "True" => Ok(reason),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert_eq!(
        request_condition(real, "batch", "Accepted")
            .map(|c| c.0)
            .as_deref(),
        Some("True")
    );
    assert_eq!(count_of_group(&node_names(&nodes(&stack).await), "cpu"), 2);

    // The pods that consume the request land on those machines, and nothing more is bought.
    stack
        .apply_yaml(&manifest("provisioning-consumers.yaml"))
        .await
        .unwrap();
    wait_running(&stack, "default", "batch-", 2, LANDS_WITHIN).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(node_names(&nodes(&stack).await).len(), 2);

    // check-capacity: room for two 1-CPU pods (one CPU free per machine), none for a 2-CPU pod;
    // neither buys anything.
    stack
        .apply_yaml(&manifest("provisioning-check-capacity.yaml"))
        .await
        .unwrap();
    let fits = wait_for("fits answered", LANDS_WITHIN, async || {
        request_condition(real, "fits", "Provisioned").ok_or_else(|| "no condition".to_owned())
    })
    .await;
    assert_eq!(fits.0, "True", "{fits:?}");
    let no_room = wait_for("no-room answered", LANDS_WITHIN, async || {
        request_condition(real, "no-room", "Provisioned").ok_or_else(|| "no condition".to_owned())
    })
    .await;
    assert_eq!(
        no_room,
        ("False".to_owned(), "CapacityIsNotFound".to_owned())
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(node_names(&nodes(&stack).await).len(), 2);
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: e2e/cluster/test.sh"]
async fn kubectl_shows_an_operator_our_node_groups_and_events_on_the_real_server() {
    let mut stack = real_stack("").await;
    stack
        .apply_yaml(&manifest("deviceclass.yaml"))
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("gpu-nodegroups.yaml"))
        .await
        .unwrap();
    stack
        .start_controller(&["--scan-interval", "1s"])
        .await
        .unwrap();
    stack
        .apply_yaml(&manifest("exclusive-zone-gang.yaml"))
        .await
        .unwrap();
    wait_running(&stack, "default", "js-", 4, LANDS_WITHIN).await;
    let real = stack.real().unwrap();

    let table = real.kubectl(&["get", "nodegroups"]).unwrap();
    println!("{table}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    for column in [
        "NAME", "CAPACITY", "MIN", "MAX", "CURRENT", "TARGET", "UPCOMING",
    ] {
        assert!(header.contains(&column), "{column} missing: {header:?}");
    }
    let reserved = table
        .lines()
        .find(|l| l.starts_with("gpu-reserved "))
        .unwrap_or_else(|| panic!("no gpu-reserved row:\n{table}"));
    // Both reserved machines were bought (the exclusive gang needs two in one zone, and the
    // reservation is free), so its target and current size read 2.
    let cells: Vec<&str> = reserved.split_whitespace().collect();
    assert_eq!(&cells[1..5], ["reserved", "0", "2", "2"], "{reserved}");

    let described = real
        .kubectl(&["describe", "nodegroup", "gpu-reserved"])
        .unwrap();
    println!("{described}");
    let events = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{described}"));
    assert!(events.contains("ScaledUpGroup"), "{events}");

    for sort in [
        ".lastTimestamp",
        ".eventTime",
        ".metadata.creationTimestamp",
    ] {
        let listed = real
            .kubectl(&["get", "events", "-A", &format!("--sort-by={sort}")])
            .unwrap_or_else(|e| panic!("--sort-by={sort}: {e}"));
        assert!(
            listed.contains("TriggeredScaleUp"),
            "--sort-by={sort}:\n{listed}"
        );
    }
    stack.shutdown().await;
}
