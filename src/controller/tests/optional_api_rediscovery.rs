//! Optional APIs installed while the controller runs are watched without a restart (issue 31,
//! item 6): Kueue's ProvisioningRequests (or a PodGroup CRD) appearing after the start are
//! found by the next discovery, watched from then on, and said in an Event on their CRD.

mod common;

use common::{cluster, events, eventually};
use dra_controller::events::EventSink;
use dra_controller::{rediscovery, watch};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, PostParams};

#[tokio::test]
async fn an_api_installed_after_the_start_is_watched_without_a_restart() {
    let server = cluster().await;
    let client = server.client();
    let optional = watch::discover(&client).await.expect("discovery");
    assert!(optional.stand_ins.is_empty(), "{optional:?}");
    let mut watches = watch::start(&client, &optional);
    watches.stores.wait_ready().await;
    let sink = EventSink::new(
        client.clone(),
        "dra-autoscaler",
        "test",
        SignedDuration::from_mins(10),
    );
    assert!(
        rediscovery::rediscover(&client, &mut watches, Some(&sink), Timestamp::now())
            .await
            .is_empty(),
        "nothing new yet"
    );

    // cluster-autoscaler's ProvisioningRequest CRD is installed (as Kueue's setup does), and
    // a request created.
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/crds/autoscaling.x-k8s.io_provisioningrequests.yaml"),
    )
    .expect("CRD file");
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("CRD YAML");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD accepted");
    let resource = dra_controller::provreq::apis::provisioning_requests();
    let request: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": "hold", "namespace": "default"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": "hold"}, "count": 1}]}
    }))
    .expect("request");
    Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource)
        .create(&PostParams::default(), &request)
        .await
        .expect("request created");

    let started =
        rediscovery::rediscover(&client, &mut watches, Some(&sink), Timestamp::now()).await;
    let kinds: Vec<&str> = started.iter().map(|ar| ar.kind.as_str()).collect();
    assert_eq!(kinds, ["ProvisioningRequest"]);
    eventually("the request in the stores", || async {
        watches.stores.inputs().stand_in_objects.iter().any(|o| {
            o.kind == "ProvisioningRequest" && o.object.metadata.name.as_deref() == Some("hold")
        })
    })
    .await;
    let found = events(&client, rediscovery::API_FOUND).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let (kind, name, type_, note) = &found[0];
    assert_eq!(
        (kind.as_str(), name.as_str(), type_.as_str()),
        (
            "CustomResourceDefinition",
            "provisioningrequests.autoscaling.x-k8s.io",
            "Normal"
        )
    );
    assert!(
        note.contains("autoscaling.x-k8s.io/v1/ProvisioningRequest"),
        "{note}"
    );
    assert!(note.contains("no restart needed"), "{note}");

    // Found once: the next discovery starts nothing.
    assert!(
        rediscovery::rediscover(&client, &mut watches, Some(&sink), Timestamp::now())
            .await
            .is_empty()
    );
}
