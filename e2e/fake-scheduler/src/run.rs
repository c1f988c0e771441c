//! The loop: read the cluster, create missing template claims, decide, write.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use dra_sim::objects::{ExtraObject, Origin};
use dra_sim::{ClusterObjects, FeatureGates};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::claims::{self, Needed};
use crate::decide::{self, claims_created};
use crate::writer::{SCHEDULER_NAME, Writer};

/// How the stand-in runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The scheduler features to model.
    pub gates: FeatureGates,
    /// Time between cycles.
    pub interval: Duration,
    /// Name this instance reports in Events.
    pub instance: String,
}

/// What one cycle did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Claims created from templates.
    pub claims_created: usize,
    /// Pods bound.
    pub bound: usize,
    /// Pods left pending.
    pub waiting: usize,
    /// Writes that failed (retried next cycle).
    pub failed_writes: usize,
}

async fn list<K>(client: &Client) -> Result<Vec<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items)
}

/// A list of a kind the cluster may not serve: empty when it does not.
async fn list_optional<K>(client: &Client) -> Result<Vec<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    match list::<K>(client).await {
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(Vec::new()),
        other => other,
    }
}

fn is_ours(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|n| n == SCHEDULER_NAME)
        && spec
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
        && !matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// Reads everything a cycle needs.
async fn read(client: &Client, gang_apis: &[ApiResource]) -> Result<ClusterObjects, kube::Error> {
    let classes: Vec<PriorityClass> = list(client).await?;
    let priorities = dra_controller::pods::Priorities::new(classes.iter());
    let mut pods: Vec<Pod> = list(client).await?;
    for pod in &mut pods {
        let priority = priorities.of(pod);
        if let Some(spec) = pod.spec.as_mut() {
            spec.priority.get_or_insert(priority);
        }
    }
    let mut extra = Vec::new();
    for ar in gang_apis {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        let objects = match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(kube::Error::Api(status)) if status.is_not_found() => Vec::new(),
            Err(err) => return Err(err),
        };
        for object in objects {
            let Ok(mut value) = serde_json::to_value(&object) else {
                continue;
            };
            value["apiVersion"] = json!(ar.api_version);
            value["kind"] = json!(ar.kind);
            extra.push(ExtraObject {
                origin: Origin {
                    source: format!(
                        "API server {} {}",
                        ar.kind,
                        object.metadata.name.clone().unwrap_or_default()
                    ),
                    document: 0,
                    item: None,
                },
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
                value,
            });
        }
    }
    Ok(ClusterObjects {
        nodes: list::<Node>(client).await?,
        pods,
        namespaces: list::<Namespace>(client).await?,
        device_classes: list::<DeviceClass>(client).await?,
        resource_slices: list::<ResourceSlice>(client).await?,
        resource_claims: list::<ResourceClaim>(client).await?,
        resource_claim_templates: list::<ResourceClaimTemplate>(client).await?,
        device_taint_rules: list_optional::<DeviceTaintRule>(client).await?,
        extra,
        ..ClusterObjects::default()
    })
}

/// Creates the claims pods make from templates and records them in the pods' status.
async fn create_claims(client: &Client, objects: &ClusterObjects, summary: &mut Summary) {
    for pod in objects
        .pods
        .iter()
        .filter(|p| is_ours(p) && !claims_created(p))
    {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let templates: BTreeMap<String, &ResourceClaimTemplate> = objects
            .resource_claim_templates
            .iter()
            .filter(|t| t.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .filter_map(|t| Some((t.metadata.name.clone()?, t)))
            .collect();
        let claims: Vec<&ResourceClaim> = objects
            .resource_claims
            .iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .collect();
        let mut recorded: Vec<serde_json::Value> = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|s| serde_json::to_value(s).ok())
            .collect();
        let before = recorded.len();
        let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &namespace);
        for need in claims::needed(pod, &templates, &claims) {
            match need {
                Needed::Create { pod_claim, claim } => {
                    match api.create(&PostParams::default(), &claim).await {
                        Ok(created) => {
                            summary.claims_created += 1;
                            let name = created.metadata.name.unwrap_or_default();
                            tracing::info!(pod = ?pod.metadata.name, claim = %name, "created ResourceClaim from template");
                            recorded.push(json!({"name": pod_claim, "resourceClaimName": name}));
                        }
                        Err(err) => {
                            summary.failed_writes += 1;
                            tracing::warn!(%err, pod = ?pod.metadata.name, "unable to create a ResourceClaim");
                        }
                    }
                }
                Needed::Record { pod_claim, name } => {
                    recorded.push(json!({"name": pod_claim, "resourceClaimName": name}));
                }
                Needed::MissingTemplate {
                    pod_claim,
                    template,
                } => {
                    tracing::debug!(pod = ?pod.metadata.name, pod_claim, template, "waiting for the ResourceClaimTemplate");
                }
            }
        }
        if recorded.len() == before {
            continue;
        }
        let patch = json!({"status": {"resourceClaimStatuses": recorded}});
        let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Err(err) = pods
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            summary.failed_writes += 1;
            tracing::warn!(%err, pod = %name, "unable to record the pod's claims");
        }
    }
}

/// The node lifecycle controller's part (kube-controller-manager): lifts the
/// `node.kubernetes.io/not-ready:NoSchedule` taint the API server gives every new Node once
/// the node reports `Ready=True`. Returns whether any Node changed.
async fn lift_not_ready_taints(
    client: &Client,
    objects: &ClusterObjects,
    summary: &mut Summary,
) -> bool {
    const KEY: &str = "node.kubernetes.io/not-ready";
    let mut changed = false;
    for node in &objects.nodes {
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if !ready || !taints.iter().any(|t| t.key == KEY) {
            continue;
        }
        let kept: Vec<_> = taints.into_iter().filter(|t| t.key != KEY).collect();
        let name = node.metadata.name.clone().unwrap_or_default();
        let patch = json!({"spec": {"taints": kept}});
        match Api::<Node>::all(client.clone())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                changed = true;
                tracing::info!(node = %name, "node is Ready: not-ready taint lifted");
            }
            Err(err) => {
                summary.failed_writes += 1;
                tracing::warn!(%err, node = %name, "unable to lift the not-ready taint");
            }
        }
    }
    changed
}

/// One cycle: read, lift the not-ready taints of Ready nodes, create claims, decide, write.
///
/// # Errors
/// The cluster could not be read (nothing was written).
pub async fn cycle(
    client: &Client,
    writer: &Writer,
    gates: &FeatureGates,
    gang_apis: &[ApiResource],
) -> Result<Summary, kube::Error> {
    let mut summary = Summary::default();
    let mut objects = read(client, gang_apis).await?;
    let lifted = lift_not_ready_taints(client, &objects, &mut summary).await;
    create_claims(client, &objects, &mut summary).await;
    if summary.claims_created > 0 || lifted {
        // The pods' claim statuses changed: decide on what the cluster holds now.
        objects = read(client, gang_apis).await?;
    }
    // Pods another scheduler owns are the cluster's, not ours to place.
    objects
        .pods
        .retain(|p| !dra_sim::pods::is_pending(p) || is_ours(p));
    let decision = decide::decide(&objects, gates);
    let pods: BTreeMap<dra_sim::objects::ObjectRef, &Pod> = objects
        .pods
        .iter()
        .map(|p| (dra_sim::objects::ObjectRef::namespaced(&p.metadata), p))
        .collect();
    let nodes: BTreeMap<String, &Node> = objects
        .nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, n)))
        .collect();
    for placement in &decision.placements {
        let Some(pod) = pods.get(&placement.pod) else {
            continue;
        };
        match writer.place(pod, placement, &nodes).await {
            Ok(()) => summary.bound += 1,
            Err(err) => {
                summary.failed_writes += 1;
                tracing::warn!(error = %err, cause = %err.source, "placement not written; retrying next cycle");
            }
        }
    }
    summary.waiting = decision.refusals.len();
    for refusal in &decision.refusals {
        let Some(pod) = pods.get(&refusal.pod) else {
            continue;
        };
        if let Err(err) = writer.refuse(pod, refusal).await {
            summary.failed_writes += 1;
            tracing::warn!(error = %err, cause = %err.source, "refusal not written");
        }
    }
    Ok(summary)
}

/// Runs cycles every `config.interval` until `shutdown` completes.
///
/// # Errors
/// Never in practice: read failures are logged and retried.
pub async fn run(
    client: Client,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let writer = Writer::new(client.clone(), &config.instance);
    tokio::pin!(shutdown);
    tracing::info!(
        interval_ms = config.interval.as_millis(),
        "scheduling pending pods"
    );
    let mut gang_apis: Vec<ApiResource> = Vec::new();
    let mut discovered_at: Option<tokio::time::Instant> = None;
    let mut failing = false;
    loop {
        let stale = discovered_at.is_none_or(|t| t.elapsed() > Duration::from_secs(30));
        if stale {
            match dra_controller::watch::discover(&client).await {
                Ok(optional) => {
                    gang_apis = optional.gangs;
                    discovered_at = Some(tokio::time::Instant::now());
                }
                Err(err) => tracing::debug!(%err, "gang API discovery failed; retrying"),
            }
        }
        match cycle(&client, &writer, &config.gates, &gang_apis).await {
            Ok(summary) => {
                if failing {
                    tracing::info!("reading the cluster again");
                    failing = false;
                }
                if summary != Summary::default() {
                    tracing::debug!(?summary, "cycle");
                }
            }
            Err(err) => {
                if !failing {
                    tracing::warn!(%err, "unable to read the cluster; retrying");
                }
                failing = true;
            }
        }
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(config.interval) => {}
        }
    }
    tracing::info!("scheduler stopped");
    Ok(())
}
