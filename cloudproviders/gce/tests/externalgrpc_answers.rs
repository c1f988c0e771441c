//! What the GCE provider answers cluster-autoscaler's `GPULabel`, `GetAvailableGPUTypes` and
//! `NodeGroupGetOptions` (rules in cloudproviders/proto/README.md), against the local Compute
//! Engine stand-in with a GKE A3 node pool whose kube-env sets `cloud.google.com/gke-accelerator`.

use std::time::Duration;

use dra_provider::gpu::NO_DRA_GPU_LABEL;
use dra_provider::{AutoscalingOptions, CloudProvider};
use dra_provider_gce::provider::GPU_LABEL;
use dra_provider_gce::stand_in::{StandIn, World};
use dra_provider_gce::{Config, Gce, GceProvider};
use serde_json::json;

const KUBE_ENV: &str = "AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=a3,cloud.google.com/gke-accelerator=nvidia-h100-80gb;os=linux;os_distribution=cos\n";

fn world() -> World {
    let mut w = World::new("proj");
    w.add_machine_type("a3-highgpu-8g", 208, 1_916_928, &[("nvidia-h100-80gb", 8)]);
    let template = w.add_template(
        "a3",
        json!({
            "machineType": "a3-highgpu-8g",
            "guestAccelerators": [{"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": 8}],
            "disks": [{"boot": true, "initializeParams": {"diskSizeGb": "200"}}],
            "metadata": {"items": [{"key": "kube-env", "value": KUBE_ENV}]},
            "scheduling": {"provisioningModel": "STANDARD"},
        }),
    );
    w.add_zonal_mig("gke-prod-a3", "us-central1-a", &template, 0);
    w
}

async fn provider(stand_in: &StandIn, group: &str) -> GceProvider {
    let config = format!(
        "project: proj\nrefreshSeconds: 0\nnodeGroups:\n  - mig: us-central1-a/gke-prod-a3\n    maxSize: 8\n{group}"
    );
    let gce = Gce::connect("proj", stand_in.connection())
        .await
        .expect("clients");
    GceProvider::new(gce, Config::parse(&config, "test").expect("config"))
}

#[tokio::test]
async fn dra_gpus_under_the_gke_accelerator_label_move_the_gpu_label_off_it() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    // The GPUs are DRA devices (the default): no nvidia.com/gpu in allocatable, yet the node
    // pool labels its nodes with the accelerator.
    let p = provider(&stand_in, "").await;
    assert_eq!(p.gpu_label().await.expect("label"), NO_DRA_GPU_LABEL);
    assert!(p.available_gpu_types().await.expect("types").is_empty());
}

#[tokio::test]
async fn device_plugin_gpus_keep_the_gke_label_and_its_values() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(
        &stand_in,
        "    template: {gpu: {dra: false, devicePlugin: true}}\n",
    )
    .await;
    assert_eq!(p.gpu_label().await.expect("label"), GPU_LABEL);
    assert_eq!(
        p.available_gpu_types().await.expect("types"),
        ["nvidia-h100-80gb"]
    );
}

#[tokio::test]
async fn options_come_from_the_groups_scale_down_setting() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let defaults = AutoscalingOptions {
        scale_down_utilization_threshold: 0.5,
        scale_down_gpu_utilization_threshold: 0.5,
        scale_down_unneeded: Some(Duration::from_secs(600)),
        scale_down_unready: Some(Duration::from_secs(1200)),
        max_node_provision: Some(Duration::from_secs(900)),
        ..AutoscalingOptions::default()
    };
    let plain = provider(&stand_in, "").await;
    assert_eq!(
        plain
            .options("us-central1-a/gke-prod-a3", &defaults)
            .await
            .expect("options"),
        None
    );
    let tuned = provider(
        &stand_in,
        "    scaleDown: {utilizationThreshold: 0.4, unneededTime: 1h}\n",
    )
    .await;
    assert_eq!(
        tuned
            .options("us-central1-a/gke-prod-a3", &defaults)
            .await
            .expect("options"),
        Some(AutoscalingOptions {
            scale_down_utilization_threshold: 0.4,
            scale_down_gpu_utilization_threshold: 0.4,
            scale_down_unneeded: Some(Duration::from_secs(3600)),
            ..defaults.clone()
        })
    );
    let specs = tuned.specs().await.expect("specs");
    assert_eq!(
        specs["us-central1-a/gke-prod-a3"]
            .scale_down
            .as_ref()
            .and_then(|s| s.utilization_threshold),
        Some(0.4),
        "print-nodegroups carries it to the NodeGroup"
    );
}
