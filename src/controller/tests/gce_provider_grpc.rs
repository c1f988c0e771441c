//! End to end with the GCE provider against the Compute Engine stand-in, on a real cluster's
//! terms: VMs register as a GKE kubelet registers them, with `spec.providerID`
//! (`gce://<project>/<zone>/<name>`) and no `dra-autoscaler.io/node-group` label, so the
//! controller knows them only because the provider lists their instances.
//!
//! - a pending gang grows the managed instance group with one `instances.bulkInsert` from the
//!   MIG's template, its VMs register and are counted, and once idle they are scaled down;
//! - VMs that never register are deleted by instance id after the provision time, and the
//!   NodeGroup status agrees with the provider's target;
//! - a gang split over two MIGs whose second zone is stocked out
//!   (`ZONE_RESOURCE_POOL_EXHAUSTED`) leaves no VM running.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Controller, cluster, create_gang, node_group, quick_scale_down, register_kubelets,
    serve_and_connect,
};
use dra_api::{NodeGroup, NodeGroupSpec};
use dra_provider::CloudProvider;
use dra_provider_gce::stand_in::{StandIn, World};
use dra_provider_gce::{Config, Gce, GceProvider};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};

/// MIGs `(name, zone)` of n2-standard-16 machines from one GKE node pool template.
fn world(migs: &[(&str, &str)]) -> World {
    let mut w = World::new("proj");
    w.add_machine_type("n2-standard-16", 16, 65_536, &[]);
    let template = w.add_template(
        "pool",
        serde_json::json!({
            "machineType": "n2-standard-16",
            "disks": [{"boot": true, "initializeParams": {"diskSizeGb": "100"}}],
            "metadata": {"items": [{"key": "kube-env", "value":
                "AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=pool;os=linux;os_distribution=cos\n"}]},
        }),
    );
    for (name, zone) in migs {
        w.add_zonal_mig(name, zone, &template, 0);
    }
    w
}

/// The stand-in, the provider over it (groups `(id, NodeGroup name, max)`) and the NodeGroup
/// objects in the cluster.
async fn gce_cloud(
    stand_in: &StandIn,
    client: &Client,
    groups: &[(&str, &str, i32)],
) -> (GceProvider, Vec<NodeGroupSpec>) {
    let gce = Gce::connect("proj", stand_in.connection())
        .await
        .expect("clients");
    let listed: Vec<String> = groups
        .iter()
        .map(|(id, _, max)| format!("{{mig: {id}, maxSize: {max}, pricePerHour: 0.75}}"))
        .collect();
    let provider = GceProvider::new(
        gce,
        Config::parse(
            &format!(
                "project: proj\nrefreshSeconds: 0\nnodeGroups: [{}]",
                listed.join(", ")
            ),
            "test",
        )
        .expect("config"),
    );
    let specs = provider.specs().await.expect("specs");
    let mut out = Vec::new();
    for (id, name, _) in groups {
        let spec = specs[*id].clone();
        assert_eq!(spec.provider, "gce");
        Api::<NodeGroup>::all(client.clone())
            .create(&PostParams::default(), &NodeGroup::new(name, spec.clone()))
            .await
            .expect("NodeGroup created");
        out.push(spec);
    }
    (provider, out)
}

async fn instances(provider: &GceProvider, id: &str) -> Vec<String> {
    let mut ids: Vec<String> = provider
        .nodes(id)
        .await
        .expect("instances")
        .into_iter()
        .map(|i| i.id)
        .collect();
    ids.sort();
    ids
}

fn upcoming(status: &dra_api::NodeGroupStatus) -> Vec<String> {
    let mut names: Vec<String> = status
        .upcoming_nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    names.sort();
    names
}

const POOL: &str = "us-central1-a/gke-prod-pool";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_grows_the_mig_registers_by_provider_id_and_scales_down() {
    let stand_in = StandIn::start(world(&[("gke-prod-pool", "us-central1-a")]))
        .await
        .expect("stand-in");
    let server = cluster().await;
    let client = server.client();
    let (provider, specs) = gce_cloud(&stand_in, &client, &[(POOL, "pool", 4)]).await;
    let members = create_gang(&client, "train", 2, "12").await;
    let (executor, served) = serve_and_connect("gce", Arc::new(provider.clone())).await;
    let evictions = common::no_retry_client(&server);
    let controller =
        Controller::start_with(&client, executor, Some((quick_scale_down(), evictions))).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("pool"), Some(&2), "{summary:?}");
    let planned = upcoming(&node_group(&client, "pool").await.status.expect("status"));
    // One bulkInsert of the gang, from the MIG's template.
    assert_eq!(stand_in.world().bulk_bodies.len(), 1);
    let vms = instances(&provider, POOL).await;
    assert_eq!(vms, planned, "the group's VMs are the planned machines");

    // A GKE kubelet registers each VM: providerID and the node pool's labels, not ours.
    let names = register_kubelets(&client, &specs[0], &vms, |_, id| {
        id.rsplit('/').next().unwrap_or_default().to_owned()
    })
    .await;
    controller
        .wait_for("the registered Nodes", |inputs| inputs.nodes.len() == 2)
        .await;
    let t0 = Timestamp::now();
    let after = controller.run_once_at(t0).await;
    assert!(after.scaled_up.is_empty(), "{after:?}");
    let status = node_group(&client, "pool").await.status.expect("status");
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (2, 0, 2),
        "the nodes are counted by providerID"
    );

    // The gang finishes; scale-down deletes the idle VMs.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for member in &members {
        pods.delete(member, &DeleteParams::default())
            .await
            .expect("deleted");
    }
    controller
        .wait_for("the pods gone", |inputs| inputs.pods.is_empty())
        .await;
    controller
        .run_once_at(t0 + SignedDuration::from_secs(1))
        .await;
    let second = controller
        .run_once_at(t0 + SignedDuration::from_secs(3))
        .await;
    let mut started = second.scale_down.expect("scale-down ran").started;
    started.sort();
    assert_eq!(started, names);
    assert!(
        controller
            .autoscaler
            .scale_downs()
            .expect("on")
            .settle(Duration::from_secs(20))
            .await
    );
    assert!(
        instances(&provider, POOL).await.is_empty(),
        "the VMs are deleted"
    );
    assert_eq!(provider.target_size(POOL).await.expect("target"), 0);

    let _ = served.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_that_never_register_are_deleted_and_the_status_agrees_with_the_provider() {
    let stand_in = StandIn::start(world(&[("gke-prod-pool", "us-central1-a")]))
        .await
        .expect("stand-in");
    let server = cluster().await;
    let client = server.client();
    let (provider, _) = gce_cloud(&stand_in, &client, &[(POOL, "pool", 4)]).await;
    create_gang(&client, "train", 2, "12").await;
    let (executor, served) = serve_and_connect("gce", Arc::new(provider.clone())).await;
    let controller = Controller::start(&client, executor).await;

    let t0 = Timestamp::now();
    let summary = controller.run_once_at(t0).await;
    assert_eq!(summary.scaled_up.get("pool"), Some(&2), "{summary:?}");
    assert_eq!(instances(&provider, POOL).await.len(), 2);
    controller
        .wait_for("the status in the store", |i| {
            i.node_groups
                .iter()
                .any(|g| g.status.as_ref().is_some_and(|s| s.upcoming_size == 2))
        })
        .await;

    let later = t0 + SignedDuration::from_mins(16);
    let timed_out = controller.run_once_at(later).await;
    assert_eq!(timed_out.timed_out.get("pool"), Some(&2), "{timed_out:?}");
    assert!(
        instances(&provider, POOL).await.is_empty(),
        "the VMs are deleted"
    );
    let target = provider.target_size(POOL).await.expect("target");
    let status = node_group(&client, "pool").await.status.expect("status");
    assert_eq!(
        (
            status.current_size,
            status.upcoming_size,
            status.target_size
        ),
        (0, 0, target),
        "the NodeGroup status agrees with the provider"
    );
    let again = controller
        .run_once_at(later + SignedDuration::from_mins(6))
        .await;
    assert_eq!(
        again.scaled_up.get("pool"),
        Some(&2),
        "planned again: {again:?}"
    );

    let _ = served.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_split_over_two_migs_with_a_stockout_in_the_second_zone_leaves_no_vm() {
    let stand_in = StandIn::start(world(&[
        ("gke-prod-pool-a", "us-central1-a"),
        ("gke-prod-pool-b", "us-central1-b"),
    ]))
    .await
    .expect("stand-in");
    stand_in.world().capacity.insert("us-central1-b".into(), 0);
    let server = cluster().await;
    let client = server.client();
    let (a, b) = (
        "us-central1-a/gke-prod-pool-a",
        "us-central1-b/gke-prod-pool-b",
    );
    // One VM each: the gang of two needs both MIGs.
    let (provider, _) = gce_cloud(&stand_in, &client, &[(a, "pool-a", 1), (b, "pool-b", 1)]).await;
    create_gang(&client, "train", 2, "12").await;
    let (executor, served) = serve_and_connect("gce", Arc::new(provider.clone())).await;
    let controller = Controller::start(&client, executor).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.report.as_ref().expect("planned").scale_ups.len(), 2);
    assert!(summary.scaled_up.is_empty(), "{summary:?}");
    assert!(
        summary.failed["pool-b"].contains("out of capacity")
            && summary.failed["pool-b"].contains("us-central1-b"),
        "{:?}",
        summary.failed
    );
    assert!(
        instances(&provider, a).await.is_empty(),
        "pool-a's VM was given back"
    );
    assert!(instances(&provider, b).await.is_empty());
    assert!(stand_in.world().vms.iter().all(|vm| vm.status != "RUNNING"));
    for name in ["pool-a", "pool-b"] {
        let status = node_group(&client, name).await.status.expect("status");
        assert_eq!((status.upcoming_size, status.target_size), (0, 0), "{name}");
    }

    let _ = served.stop.send(());
}
