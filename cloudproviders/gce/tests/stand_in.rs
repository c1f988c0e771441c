//! The provider against the local Compute Engine stand-in: discovery and templates, plain
//! increases, gangs through bulkInsert (success, stockout, quota, a partial start rolled back,
//! an operation that finishes with an error) and through resize requests (success, one that
//! stays ACCEPTED and then FAILS), reservations, instance errors and rate limits.
//! Expectations come from the API's documented behaviour, not from the provider's output.

use std::time::Duration;

use dra_provider::{AtomicIncrease, CloudProvider, ErrorClass, InstanceState, ProviderError};
use dra_provider_gce::stand_in::{BulkScript, ResizeScript, StandIn, World};
use dra_provider_gce::{Config, Gce, GceProvider};
use serde_json::json;

const KUBE_ENV: &str = "KUBELET_ARGS: --v=2 --max-pods=110\nAUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=a3,cloud.google.com/gke-accelerator=nvidia-h100-80gb;node_taints=nvidia.com/gpu=present:NoSchedule;kube_reserved=cpu=1060m,memory=9Gi,ephemeral-storage=41Gi;os=linux;os_distribution=cos\n";

fn properties(model: &str, reservation: Option<&str>) -> serde_json::Value {
    let mut p = json!({
        "machineType": "a3-highgpu-8g",
        "guestAccelerators": [{"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": 8}],
        "disks": [{"boot": true, "initializeParams": {"diskSizeGb": "200"}}],
        "labels": {"goog-k8s-cluster-name": "prod"},
        "metadata": {"items": [{"key": "kube-env", "value": KUBE_ENV}]},
        "scheduling": {"provisioningModel": model},
    });
    if let Some(name) = reservation {
        p["reservationAffinity"] = json!({"consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name", "values": [name]});
    }
    p
}

fn world() -> World {
    let mut w = World::new("proj");
    w.add_machine_type("a3-highgpu-8g", 208, 1_916_928, &[("nvidia-h100-80gb", 8)]);
    let plain = w.add_template("a3", properties("STANDARD", None));
    let flex = w.add_template("a3-flex", properties("FLEX_START", None));
    let reserved = w.add_template("a3-res", properties("STANDARD", Some("h100-block")));
    let other = w.add_template(
        "other",
        json!({"machineType": "a3-highgpu-8g", "labels": {"goog-k8s-cluster-name": "dev"}}),
    );
    w.add_zonal_mig("gke-prod-a3", "us-central1-a", &plain, 0);
    w.add_zonal_mig("gke-prod-a3-flex", "us-central1-b", &flex, 0);
    w.add_zonal_mig("gke-prod-a3-res", "us-central1-c", &reserved, 0);
    w.add_zonal_mig("gke-prod-dev", "us-central1-a", &other, 0);
    w.add_zonal_mig("unrelated", "us-central1-a", &plain, 0);
    w.add_reservation("h100-block", "us-central1-c", "a3-highgpu-8g", 4, 1);
    w
}

const CONFIG: &str = r#"
project: proj
discovery: ["mig:namePrefix=gke-prod-,min=0,max=8"]
templateLabels: {goog-k8s-cluster-name: prod}
refreshSeconds: 0
resizeRequestWaitSeconds: 0
resizeRequestPollMillis: 10
nodeGroups:
  - mig: us-central1-b/gke-prod-a3-flex
    maxSize: 8
    runDurationSeconds: 3600
    pricePerHour: 40.5
"#;

async fn provider(stand_in: &StandIn) -> GceProvider {
    let gce = Gce::connect("proj", stand_in.connection())
        .await
        .expect("clients");
    GceProvider::new(gce, Config::parse(CONFIG, "test").expect("config"))
}

fn gang(id: &str, count: i32, min_count: i32, request: &str) -> AtomicIncrease {
    AtomicIncrease {
        id: id.into(),
        count,
        min_count,
        request_id: request.into(),
    }
}

#[tokio::test]
async fn groups_are_found_by_prefix_and_template_labels_with_gke_templates() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let mut ids: Vec<String> = p
        .node_groups()
        .await
        .expect("groups")
        .into_iter()
        .map(|g| g.id)
        .collect();
    ids.sort();
    // `unrelated` lacks the prefix, `gke-prod-dev`'s template belongs to another cluster.
    assert_eq!(
        ids,
        [
            "us-central1-a/gke-prod-a3",
            "us-central1-b/gke-prod-a3-flex",
            "us-central1-c/gke-prod-a3-res"
        ]
    );
    let specs = p.specs().await.expect("specs");
    let a3 = &specs["us-central1-a/gke-prod-a3"];
    assert_eq!((a3.min_size, a3.max_size), (0, 8));
    assert_eq!(a3.provider, "gce");
    let t = &a3.template;
    assert_eq!(t.labels["cloud.google.com/gke-nodepool"], "a3");
    assert_eq!(
        t.labels["node.kubernetes.io/instance-type"],
        "a3-highgpu-8g"
    );
    assert_eq!(t.labels["topology.kubernetes.io/zone"], "us-central1-a");
    assert_eq!(t.labels["topology.kubernetes.io/region"], "us-central1");
    assert_eq!(t.taints[0].key, "nvidia.com/gpu");
    // kube_reserved from the node pool: 208 cores less 1060m.
    assert_eq!(
        t.allocatable.as_ref().expect("allocatable")["cpu"].0,
        "206940m"
    );
    // Eight H100s (machine type and template list them both: not sixteen).
    let devices = t.resource_slices[0].devices.as_ref().expect("devices");
    assert_eq!(devices.len(), 8);
    assert_eq!(specs["us-central1-b/gke-prod-a3-flex"].price_per_hour, 40.5);
    let reserved = &specs["us-central1-c/gke-prod-a3-res"];
    assert_eq!(reserved.capacity_type, dra_api::CapacityType::Reserved);
    assert_eq!(
        reserved
            .reservation
            .as_ref()
            .map(|r| (r.id.as_str(), r.total)),
        Some(("h100-block", 4))
    );
    let details = p
        .node_group_details(&["us-central1-c/gke-prod-a3-res".into()])
        .await
        .expect("details");
    assert_eq!(details[0].reservation.as_ref().map(|r| r.left()), Some(3));
}

#[tokio::test]
async fn a_plain_increase_resizes_the_mig_and_instance_errors_are_classified() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let id = "us-central1-a/gke-prod-a3";
    stand_in.world().resize_error = Some("ZONE_RESOURCE_POOL_EXHAUSTED".into());
    p.increase_size(id, 2).await.expect("resize");
    assert_eq!(p.target_size(id).await.expect("size"), 2);
    let nodes = p.nodes(id).await.expect("nodes");
    assert_eq!(nodes.len(), 2);
    for n in &nodes {
        assert!(
            n.id.starts_with("gce://proj/us-central1-a/gke-prod-a3-"),
            "{}",
            n.id
        );
        assert_eq!(n.state, InstanceState::Creating);
        let error = n.error.as_ref().expect("last attempt error");
        assert_eq!(
            (error.class, error.code.as_str()),
            (ErrorClass::OutOfCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED")
        );
    }
    let over = p.increase_size(id, 7).await.expect_err("above maxSize");
    assert!(
        matches!(over, ProviderError::InvalidArgument { .. }),
        "{over:?}"
    );
}

#[tokio::test]
async fn a_gang_starts_whole_with_bulk_insert_from_the_group_template() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let id = "us-central1-a/gke-prod-a3";
    let ids = p
        .atomic_increase_size(&gang(id, 4, 4, "train-1"))
        .await
        .expect("gang");
    assert_eq!(ids.len(), 4);
    let body = stand_in.world().bulk_bodies[0].clone();
    // int64 fields travel as strings; the VMs come from the MIG's template, named like its own.
    assert_eq!(
        (body["count"].as_str(), body["minCount"].as_str()),
        (Some("4"), Some("4"))
    );
    assert!(
        body["sourceInstanceTemplate"]
            .as_str()
            .is_some_and(|t| t.ends_with("/global/instanceTemplates/a3"))
    );
    assert_eq!(
        body["instanceProperties"]["labels"]["dra-autoscaler-mig"],
        "gke-prod-a3"
    );
    // They count as the group's: size, instances, and the same answer for a retried request.
    assert_eq!(p.target_size(id).await.expect("size"), 4);
    let mut listed: Vec<String> = p
        .nodes(id)
        .await
        .expect("nodes")
        .into_iter()
        .map(|n| n.id)
        .collect();
    listed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(
        p.atomic_increase_size(&gang(id, 4, 4, "train-1"))
            .await
            .expect("retry"),
        ids
    );
    assert_eq!(
        stand_in.world().bulk_bodies.len(),
        1,
        "a retried request starts nothing new"
    );
    // Scale-down deletes them one by one.
    let node = dra_provider::NodeRef {
        provider_id: ids[0].clone(),
        name: "n".into(),
        ..Default::default()
    };
    p.delete_nodes(id, &[node]).await.expect("delete");
    assert_eq!(p.target_size(id).await.expect("size"), 3);
}

#[tokio::test]
async fn a_stockout_operation_error_is_out_of_capacity_although_the_poller_says_ok() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let id = "us-central1-a/gke-prod-a3";
    stand_in.world().capacity.insert("us-central1-a".into(), 2);
    let err = p
        .atomic_increase_size(&gang(id, 4, 3, "train-2"))
        .await
        .expect_err("stockout");
    match err {
        ProviderError::OutOfCapacity {
            code, rolled_back, ..
        } => {
            assert_eq!(
                (code.as_str(), rolled_back),
                ("ZONE_RESOURCE_POOL_EXHAUSTED", 0)
            );
        }
        other => panic!("expected out of capacity, got {other:?}"),
    }
    assert!(stand_in.world().vms.is_empty());
    // The operation was polled to its end: the first answer said RUNNING.
    assert!(
        stand_in
            .world()
            .log
            .iter()
            .any(|l| l.contains("/zones/us-central1-a/operations/"))
    );
    // With minCount 2 the two free VMs are enough.
    let ids = p
        .atomic_increase_size(&gang(id, 4, 2, "train-3"))
        .await
        .expect("two fit");
    assert_eq!(ids.len(), 2);
}

#[tokio::test]
async fn quota_is_reported_as_quota() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    stand_in.world().bulk = BulkScript::Fail("QUOTA_EXCEEDED".into());
    let err = p
        .atomic_increase_size(&gang("us-central1-a/gke-prod-a3", 2, 2, "q"))
        .await
        .expect_err("quota");
    assert!(
        matches!(&err, ProviderError::Quota { code, .. } if code == "QUOTA_EXCEEDED"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_partial_bulk_insert_is_rolled_back() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    stand_in.world().bulk =
        BulkScript::Partial(2, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS".into());
    let err = p
        .atomic_increase_size(&gang("us-central1-a/gke-prod-a3", 4, 4, "p"))
        .await
        .expect_err("partial");
    assert!(
        matches!(err, ProviderError::OutOfCapacity { rolled_back: 2, .. }),
        "{err:?}"
    );
    assert!(
        stand_in.world().vms.is_empty(),
        "the two started VMs were deleted"
    );
    assert_eq!(
        stand_in
            .world()
            .log
            .iter()
            .filter(|l| l.starts_with("DELETE "))
            .count(),
        2
    );
}

#[tokio::test]
async fn a_resize_request_that_stays_accepted_then_fails_marks_its_instances_failed() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let id = "us-central1-b/gke-prod-a3-flex";
    stand_in.world().resize_request =
        ResizeScript::AcceptThenFail(3, "ZONE_RESOURCE_POOL_EXHAUSTED".into());
    let ids = p
        .atomic_increase_size(&gang(id, 3, 3, "flex-1"))
        .await
        .expect("queued");
    assert_eq!(ids.len(), 3);
    let body = stand_in.world().resize_bodies[0].clone();
    assert_eq!(body["resizeBy"], 3);
    assert_eq!(body["requestedRunDuration"]["seconds"], "3600");
    // Queued: the MIG's target holds the request's placeholders, creating.
    assert_eq!(p.target_size(id).await.expect("size"), 3);
    for _ in 0..200 {
        if p.watched_requests().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        p.watched_requests().await,
        0,
        "the watcher saw the request end"
    );
    // FAILED: GCE removed the VMs; the instances are reported with the error's class.
    assert_eq!(p.target_size(id).await.expect("size"), 0);
    let details = p.instance_details(id).await.expect("details");
    assert_eq!(details.len(), 3);
    for d in &details {
        assert!(ids.contains(&d.id));
        let e = d.error.as_ref().expect("error");
        assert_eq!(e.class, ErrorClass::OutOfCapacity);
    }
}

#[tokio::test]
async fn a_resize_request_that_succeeds_returns_the_mig_instances() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let id = "us-central1-b/gke-prod-a3-flex";
    let ids = p
        .atomic_increase_size(&gang(id, 2, 2, "flex-2"))
        .await
        .expect("gang");
    assert_eq!(ids.len(), 2);
    let nodes = p.nodes(id).await.expect("nodes");
    assert!(
        nodes
            .iter()
            .all(|n| n.state == InstanceState::Running && ids.contains(&n.id))
    );
    assert!(
        stand_in.world().bulk_bodies.is_empty(),
        "flex-start groups never bulkInsert"
    );
}

#[tokio::test]
async fn a_reserved_gang_needs_free_slots_in_its_reservation() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let id = "us-central1-c/gke-prod-a3-res";
    let err = p
        .atomic_increase_size(&gang(id, 4, 4, "r-1"))
        .await
        .expect_err("3 free");
    assert!(
        matches!(&err, ProviderError::OutOfCapacity { code, .. } if code == "RESERVATION_CAPACITY_EXCEEDED"),
        "{err:?}"
    );
    assert!(
        stand_in.world().bulk_bodies.is_empty(),
        "nothing was started"
    );
    let ids = p
        .atomic_increase_size(&gang(id, 4, 3, "r-2"))
        .await
        .expect("3 fit");
    assert_eq!(ids.len(), 3);
}

#[tokio::test]
async fn a_future_reservation_before_its_window_has_no_room() {
    let mut w = world();
    w.reservations.clear();
    w.future_reservations.push(json!({
        "name": "h100-fr", "zone": "https://www.googleapis.com/compute/v1/projects/proj/zones/us-central1-c",
        "reservationName": "h100-block",
        "specificSkuProperties": {"totalCount": "8", "instanceProperties": {"machineType": "a3-highgpu-8g"}},
        "timeWindow": {"startTime": "2099-01-01T00:00:00Z", "endTime": "2099-01-08T00:00:00Z"},
        "status": {"procurementStatus": "APPROVED"},
    }));
    let stand_in = StandIn::start(w).await.expect("stand-in");
    let p = provider(&stand_in).await;
    let id = "us-central1-c/gke-prod-a3-res";
    let details = p.node_group_details(&[id.into()]).await.expect("details");
    let r = details[0].reservation.as_ref().expect("reservation");
    assert_eq!((r.total, r.left()), (8, 0));
    assert!(r.end_time.is_some());
    let err = p
        .atomic_increase_size(&gang(id, 1, 1, "fr"))
        .await
        .expect_err("not started");
    assert!(
        matches!(&err, ProviderError::OutOfCapacity { code, .. } if code == "RESERVATION_NOT_STARTED"),
        "{err:?}"
    );
}

#[tokio::test]
async fn rate_limited_calls_are_retried() {
    let stand_in = StandIn::start(world()).await.expect("stand-in");
    let p = provider(&stand_in).await;
    p.node_groups().await.expect("groups");
    stand_in.world().rate_limited = 2;
    assert_eq!(
        p.target_size("us-central1-a/gke-prod-a3")
            .await
            .expect("after retries"),
        0
    );
    stand_in.world().rate_limited = 10;
    let err = p
        .target_size("us-central1-a/gke-prod-a3")
        .await
        .expect_err("gives up");
    assert!(matches!(err, ProviderError::Unavailable { .. }), "{err:?}");
}
