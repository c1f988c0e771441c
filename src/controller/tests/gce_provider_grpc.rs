//! End to end with the GCE provider against the Compute Engine stand-in: a pending gang of two
//! pods, each needing most of an n2-standard-16, makes the controller ask the GCE provider over
//! gRPC for an atomic increase; the provider starts the gang with `instances.bulkInsert` from
//! the MIG's instance template. The test plays the kubelet: it registers a Node per VM, built by
//! `dra_api::new_node` from the group's spec as the provider serves it, and the controller sees
//! exactly the machines it asked for register.

mod common;

use std::sync::Arc;

use common::{Controller, cluster, create_gang, node_group, serve_and_connect};
use dra_api::NodeGroup;
use dra_provider::CloudProvider;
use dra_provider_gce::stand_in::{StandIn, World};
use dra_provider_gce::{Config, Gce, GceProvider};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};

fn world() -> World {
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
    w.add_zonal_mig("gke-prod-pool", "us-central1-a", &template, 0);
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_grows_the_managed_instance_group_and_the_planned_nodes_register() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let gce = Gce::connect("proj", stand_in.connection())
        .await
        .expect("clients");
    let provider = GceProvider::new(
        gce,
        Config::parse(
            "project: proj\nrefreshSeconds: 0\nnodeGroups: [{mig: us-central1-a/gke-prod-pool, maxSize: 4, pricePerHour: 0.78}]",
            "test",
        )
        .expect("config"),
    );
    let id = "us-central1-a/gke-prod-pool";
    let spec = provider.specs().await.expect("specs")[id].clone();
    assert_eq!(spec.provider, "gce");
    let server = cluster().await;
    let client = server.client();
    Api::<NodeGroup>::all(client.clone())
        .create(
            &PostParams::default(),
            &NodeGroup::new("pool", spec.clone()),
        )
        .await
        .expect("NodeGroup created");
    create_gang(&client, "train", 2, "12").await;

    let (executor, served) = serve_and_connect("gce", Arc::new(provider.clone())).await;
    let (stop, grpc) = (served.stop, served.task);
    let controller = Controller::start(&client, executor).await;

    let summary = controller.run_once().await;
    assert_eq!(summary.scaled_up.get("pool"), Some(&2), "{summary:?}");
    let status = node_group(&client, "pool").await.status.expect("status");
    assert_eq!(status.upcoming_size, 2);
    let mut planned: Vec<String> = status
        .upcoming_nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    planned.sort();
    // One bulkInsert of the gang, from the MIG's template.
    assert_eq!(stand_in.world().bulk_bodies.len(), 1);
    let mut instances: Vec<String> = provider
        .nodes(id)
        .await
        .expect("instances")
        .into_iter()
        .map(|i| i.id)
        .collect();
    instances.sort();
    assert_eq!(
        instances, planned,
        "the group's VMs are the planned machines"
    );

    // Play the kubelet: each VM registers as the Node the group's spec describes.
    let nodes: Api<Node> = Api::all(client.clone());
    for id in &instances {
        let name = id.rsplit('/').next().unwrap_or_default();
        let mut node = dra_api::new_node("pool", &spec, name).node;
        if let Some(s) = node.spec.as_mut() {
            s.provider_id = Some(id.clone());
        }
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("Node registered");
    }
    controller
        .wait_for("the registered Nodes", |inputs| {
            inputs
                .nodes
                .iter()
                .filter(|n| {
                    n.spec
                        .as_ref()
                        .and_then(|s| s.provider_id.as_ref())
                        .is_some()
                })
                .count()
                == 2
        })
        .await;
    let after = controller.run_once().await;
    assert!(after.scaled_up.is_empty(), "{after:?}");
    let status = node_group(&client, "pool").await.status.expect("status");
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
