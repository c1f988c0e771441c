//! Watches: one kube-runtime reflector per kind, kept current by watch events.
//!
//! Each reflector's store is a map from object reference to `Arc<K>`; a watch
//! event replaces one entry, so the snapshot is incremental and a loop reads it
//! without a relist. kube-runtime's watcher relists after a watch ends, after a
//! `410 Gone` and after errors (with the default exponential backoff); during a
//! relist the store keeps serving the previous state and swaps in the new one
//! when the relist completes, so nothing is lost in between.
//!
//! Optional APIs (every gang API, DeviceTaintRules, ProvisioningRequests and
//! CapacityBuffers) are discovered at start: a cluster without them simply
//! has no store for them. Gang APIs and cluster-autoscaler's APIs installed
//! later (Kueue, a PodGroup CRD) are found by discovering again while running
//! ([`Watches::watch_new`], `crate::rediscovery`) and watched from then on.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock};

use dra_api::NodeGroup;
use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::discovery::Discovery;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::pods::{is_pending, is_unschedulable};
use crate::snapshot::{GangObject, Inputs};

/// Discovery failed.
#[derive(Debug, thiserror::Error)]
#[error("unable to discover the API groups the cluster serves")]
pub struct DiscoveryError(#[source] pub kube::Error);

/// The optional APIs a cluster serves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptionalApis {
    /// Gang APIs, one resource per (group, kind) at its most stable version.
    pub gangs: Vec<ApiResource>,
    /// Whether `resource.k8s.io/v1` serves DeviceTaintRules.
    pub device_taint_rules: bool,
    /// cluster-autoscaler's ProvisioningRequests (`v1`) and CapacityBuffers
    /// (`v1beta1`), when served at those versions (see [`crate::provreq`]).
    pub stand_ins: Vec<ApiResource>,
}

/// Picks the gang kinds and DeviceTaintRules out of discovered resources,
/// given as (API group, resources at their most stable version).
#[must_use]
pub fn select_optional<'a>(
    groups: impl IntoIterator<Item = (&'a str, Vec<ApiResource>)>,
) -> OptionalApis {
    let mut out = OptionalApis::default();
    for (group, resources) in groups {
        for ar in resources {
            if dra_plan::gang::GANG_KINDS
                .iter()
                .any(|(g, k)| *g == group && *k == ar.kind)
            {
                out.gangs.push(ar.clone());
            }
            if group == "resource.k8s.io" && ar.kind == "DeviceTaintRule" && ar.version == "v1" {
                out.device_taint_rules = true;
            }
            if crate::provreq::apis::is_read(group, &ar) {
                out.stand_ins.push(ar.clone());
            }
        }
    }
    out.gangs
        .sort_by(|a, b| (&a.group, &a.kind).cmp(&(&b.group, &b.kind)));
    out
}

/// Asks the API server which optional APIs it serves. Missing CRDs are not an
/// error; an unreachable API server is.
///
/// # Errors
/// Discovery requests failed.
pub async fn discover(client: &Client) -> Result<OptionalApis, DiscoveryError> {
    let mut wanted: Vec<&str> = dra_plan::gang::GANG_KINDS.iter().map(|(g, _)| *g).collect();
    wanted.push("resource.k8s.io");
    wanted.push(dra_plan::provreq::API_GROUP);
    wanted.sort_unstable();
    wanted.dedup();
    let discovery = Discovery::new(client.clone())
        .filter(&wanted)
        .run()
        .await
        .map_err(DiscoveryError)?;
    let groups: Vec<(String, Vec<ApiResource>)> = discovery
        .groups()
        .map(|g| {
            (
                g.name().to_string(),
                g.resources_by_stability()
                    .into_iter()
                    .map(|(ar, _)| ar)
                    .collect(),
            )
        })
        .collect();
    Ok(select_optional(
        groups.iter().map(|(g, r)| (g.as_str(), r.clone())),
    ))
}

/// The reflector stores of every watched kind.
#[derive(Clone)]
pub struct Stores {
    nodes: Store<Node>,
    pods: Store<Pod>,
    namespaces: Store<Namespace>,
    device_classes: Store<DeviceClass>,
    resource_slices: Store<ResourceSlice>,
    resource_claims: Store<ResourceClaim>,
    resource_claim_templates: Store<ResourceClaimTemplate>,
    device_taint_rules: Option<Store<DeviceTaintRule>>,
    daemon_sets: Store<DaemonSet>,
    priority_classes: Store<PriorityClass>,
    pod_disruption_budgets: Store<PodDisruptionBudget>,
    /// Untyped, so that one object this binary cannot decode does not fail
    /// the whole list (see [`crate::validity`]).
    node_groups: Store<DynamicObject>,
    gangs: Untyped,
    /// ProvisioningRequests, CapacityBuffers and the objects whose pod
    /// templates they name, untyped (read leniently by the planner).
    stand_ins: Untyped,
    /// Pods as untyped objects, only on clusters serving the 1.35
    /// `scheduling.k8s.io/v1alpha1` Workload API: their `spec.workloadRef`
    /// was removed from the Pod type in 1.36, so the typed store drops it.
    legacy_pods: Option<Store<DynamicObject>>,
    ready: tokio::sync::watch::Receiver<bool>,
}

/// Untyped stores of optional kinds, shared by every clone of [`Stores`]: a
/// kind found while running joins once its first list is in.
type Untyped = Arc<RwLock<Vec<(ApiResource, Store<DynamicObject>)>>>;

fn read(stores: &Untyped) -> Vec<(ApiResource, Store<DynamicObject>)> {
    stores
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field(
                "gangs",
                &read(&self.gangs)
                    .iter()
                    .map(|(ar, _)| ar.kind.clone())
                    .collect::<Vec<_>>(),
            )
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

/// Running watches: their stores, the trigger they pull, and their tasks.
pub struct Watches {
    /// The stores.
    pub stores: Stores,
    /// Notified when a pod becomes unschedulable.
    pub trigger: Arc<crate::signal::Signal>,
    tasks: Vec<JoinHandle<()>>,
    client: Client,
    /// The optional kinds watched, as `(group, kind)`.
    watched: BTreeSet<(String, String)>,
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches")
            .field("stores", &self.stores)
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

fn key(ar: &ApiResource) -> (String, String) {
    (ar.group.clone(), ar.kind.clone())
}

impl Watches {
    /// Starts watching the gang kinds and cluster-autoscaler kinds of `found` (a later
    /// discovery) that are not watched yet, with the objects they need; each joins the stores
    /// once it has listed. Returns the kinds started, as discovery named them (the kinds
    /// watched along with them, such as PodTemplates, are not repeated).
    pub fn watch_new(&mut self, found: &OptionalApis) -> Vec<ApiResource> {
        let mut started = Vec::new();
        let start = |ar: &ApiResource, into: &Untyped, tasks: &mut Vec<JoinHandle<()>>| {
            let store = untyped(&self.client, tasks, ar);
            let into = into.clone();
            let ar = ar.clone();
            tasks.push(tokio::spawn(async move {
                if store.wait_until_ready().await.is_ok() {
                    into.write()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((ar, store));
                }
            }));
        };
        for ar in &found.gangs {
            if self.watched.insert(key(ar)) {
                start(ar, &self.stores.gangs, &mut self.tasks);
                started.push(ar.clone());
            }
        }
        for ar in crate::provreq::apis::watched(&found.stand_ins) {
            if self.watched.insert(key(&ar)) {
                start(&ar, &self.stores.stand_ins, &mut self.tasks);
                if found.stand_ins.iter().any(|s| key(s) == key(&ar)) {
                    started.push(ar);
                }
            }
        }
        started
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Stores {
    /// Whether every store has finished its first list.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// What the stores hold now.
    #[must_use]
    pub fn inputs(&self) -> Inputs {
        let (node_groups, unusable_node_groups) = crate::validity::decode(self.node_groups.state());
        Inputs {
            nodes: self.nodes.state(),
            pods: self.pods.state(),
            namespaces: self.namespaces.state(),
            device_classes: self.device_classes.state(),
            resource_slices: self.resource_slices.state(),
            resource_claims: self.resource_claims.state(),
            resource_claim_templates: self.resource_claim_templates.state(),
            device_taint_rules: self
                .device_taint_rules
                .as_ref()
                .map(Store::state)
                .unwrap_or_default(),
            daemon_sets: self.daemon_sets.state(),
            priority_classes: self.priority_classes.state(),
            pod_disruption_budgets: self.pod_disruption_budgets.state(),
            node_groups,
            unusable_node_groups,
            pod_workload_refs: self
                .legacy_pods
                .as_ref()
                .map(|store| workload_refs(&store.state()))
                .unwrap_or_default(),
            gang_objects: untyped_objects(&read(&self.gangs)),
            stand_in_objects: untyped_objects(&read(&self.stand_ins)),
        }
    }
}

/// Every object of the untyped stores, with the type each was watched as.
fn untyped_objects(stores: &[(ApiResource, Store<DynamicObject>)]) -> Vec<GangObject> {
    stores
        .iter()
        .flat_map(|(ar, store)| {
            store.state().into_iter().map(|object| GangObject {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
                object,
            })
        })
        .collect()
}

/// `spec.workloadRef` of untyped pods, by (namespace, name).
fn workload_refs(
    pods: &[Arc<DynamicObject>],
) -> std::collections::BTreeMap<(String, String), serde_json::Value> {
    pods.iter()
        .filter_map(|pod| {
            let reference = pod.data.pointer("/spec/workloadRef")?.clone();
            let key = (
                pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                pod.metadata.name.clone().unwrap_or_default(),
            );
            Some((key, reference))
        })
        .collect()
}

/// Whether the cluster serves the 1.35 Workload API, whose pods link to it
/// through `spec.workloadRef`.
fn serves_workload_v1alpha1(optional: &OptionalApis) -> bool {
    optional.gangs.iter().any(|ar| {
        ar.group == "scheduling.k8s.io" && ar.kind == "Workload" && ar.version == "v1alpha1"
    })
}

/// Drops what nothing reads of an object of any kind before it is cached: its managed
/// fields, large and never read.
fn trim_meta<K: Resource>(object: &mut K) {
    object.managed_fields_mut().clear();
}

/// Of an untyped pod, keeps only the metadata and `spec.workloadRef`: the typed pod store
/// has the rest, and this store exists only for that field ([`workload_refs`]).
fn keep_workload_ref(pod: &mut DynamicObject) {
    trim_meta(pod);
    let reference = pod
        .data
        .pointer_mut("/spec/workloadRef")
        .map(serde_json::Value::take);
    pod.data = match reference {
        Some(reference) => serde_json::json!({ "spec": { "workloadRef": reference } }),
        None => serde_json::Value::Object(serde_json::Map::new()),
    };
}

fn spawn_reflector<K>(
    kind: String,
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
    tasks: &mut Vec<JoinHandle<()>>,
    trim: fn(&mut K),
    on_object: impl Fn(&K) + Send + 'static,
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    tasks.push(tokio::spawn(async move {
        let stream = watcher(api, config)
            .default_backoff()
            // The stores hold every object of the cluster: keep only what is read
            // (see `dra_sim::trim`), so their memory follows the cluster's size and not
            // what kubelets and controllers write for people.
            .modify(trim)
            .reflect(writer)
            .touched_objects();
        futures::pin_mut!(stream);
        loop {
            match stream.try_next().await {
                Ok(Some(object)) => on_object(&object),
                Ok(None) => break,
                Err(error) => tracing::warn!(%error, kind, "watch failed; retrying with backoff"),
            }
        }
    }));
}

fn typed<K>(client: &Client, tasks: &mut Vec<JoinHandle<()>>, config: watcher::Config) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    typed_trimmed(client, tasks, config, trim_meta::<K>)
}

fn typed_trimmed<K>(
    client: &Client,
    tasks: &mut Vec<JoinHandle<()>>,
    config: watcher::Config,
    trim: fn(&mut K),
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    spawn_reflector(
        K::kind(&()).into_owned(),
        Api::<K>::all(client.clone()),
        config,
        writer,
        tasks,
        trim,
        |_| {},
    );
    reader
}

fn untyped(
    client: &Client,
    tasks: &mut Vec<JoinHandle<()>>,
    ar: &ApiResource,
) -> Store<DynamicObject> {
    let writer = Writer::<DynamicObject>::new(ar.clone());
    let reader = writer.as_reader();
    spawn_reflector(
        ar.kind.clone(),
        Api::<DynamicObject>::all_with(client.clone(), ar),
        watcher::Config::default(),
        writer,
        tasks,
        trim_meta,
        |_| {},
    );
    reader
}

/// Starts a reflector for every kind and returns once they are running (not
/// synced: see [`Stores::is_ready`]).
#[must_use]
pub fn start(client: &Client, optional: &OptionalApis) -> Watches {
    let mut tasks = Vec::new();
    let trigger = Arc::new(crate::signal::Signal::new());
    let all = watcher::Config::default;
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);

    let (pods, pod_writer) = reflector::store();
    let pod_trigger = trigger.clone();
    // Finished pods hold no resources: the API server filters them out, as
    // cluster-autoscaler's pod lister does.
    let pod_config = all().fields("status.phase!=Succeeded,status.phase!=Failed");
    let legacy_pods = serves_workload_v1alpha1(optional).then(|| {
        let ar = ApiResource::erase::<Pod>(&());
        let writer = Writer::<DynamicObject>::new(ar.clone());
        let reader = writer.as_reader();
        spawn_reflector(
            "Pod (spec.workloadRef)".into(),
            Api::<DynamicObject>::all_with(client.clone(), &ar),
            pod_config.clone(),
            writer,
            &mut tasks,
            keep_workload_ref,
            |_| {},
        );
        reader
    });
    spawn_reflector(
        "Pod".into(),
        Api::<Pod>::all(client.clone()),
        pod_config,
        pod_writer,
        &mut tasks,
        dra_sim::trim::pod,
        move |pod: &Pod| {
            if is_pending(pod) && is_unschedulable(pod) {
                pod_trigger.raise();
            }
        },
    );

    let gangs: Vec<(ApiResource, Store<DynamicObject>)> = optional
        .gangs
        .iter()
        .map(|ar| (ar.clone(), untyped(client, &mut tasks, ar)))
        .collect();
    let stand_ins: Vec<(ApiResource, Store<DynamicObject>)> =
        crate::provreq::apis::watched(&optional.stand_ins)
            .iter()
            .map(|ar| (ar.clone(), untyped(client, &mut tasks, ar)))
            .collect();
    let watched = gangs
        .iter()
        .chain(&stand_ins)
        .map(|(ar, _)| key(ar))
        .collect();

    let stores = Stores {
        nodes: typed_trimmed(client, &mut tasks, all(), dra_sim::trim::node),
        pods,
        namespaces: typed(client, &mut tasks, all()),
        device_classes: typed(client, &mut tasks, all()),
        resource_slices: typed(client, &mut tasks, all()),
        resource_claims: typed(client, &mut tasks, all()),
        resource_claim_templates: typed(client, &mut tasks, all()),
        device_taint_rules: optional
            .device_taint_rules
            .then(|| typed(client, &mut tasks, all())),
        daemon_sets: typed(client, &mut tasks, all()),
        priority_classes: typed(client, &mut tasks, all()),
        pod_disruption_budgets: typed(client, &mut tasks, all()),
        node_groups: untyped(client, &mut tasks, &ApiResource::erase::<NodeGroup>(&())),
        gangs: Arc::new(RwLock::new(gangs)),
        stand_ins: Arc::new(RwLock::new(stand_ins)),
        legacy_pods,
        ready: ready_rx,
    };

    // kube-runtime's readiness signal wakes a single waiter, so exactly one
    // task waits on the stores and everyone else watches its flag.
    let waiting = stores.clone();
    tasks.push(tokio::spawn(async move {
        if waiting.wait_all().await.is_ok() {
            ready_tx.send_replace(true);
            tracing::info!("all watches listed");
        }
    }));
    Watches {
        stores,
        trigger,
        tasks,
        client: client.clone(),
        watched,
    }
}

impl Stores {
    async fn wait_all(&self) -> Result<(), reflector::store::WriterDropped> {
        self.nodes.wait_until_ready().await?;
        self.pods.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await?;
        self.device_classes.wait_until_ready().await?;
        self.resource_slices.wait_until_ready().await?;
        self.resource_claims.wait_until_ready().await?;
        self.resource_claim_templates.wait_until_ready().await?;
        if let Some(s) = &self.device_taint_rules {
            s.wait_until_ready().await?;
        }
        if let Some(s) = &self.legacy_pods {
            s.wait_until_ready().await?;
        }
        self.daemon_sets.wait_until_ready().await?;
        self.priority_classes.wait_until_ready().await?;
        self.pod_disruption_budgets.wait_until_ready().await?;
        self.node_groups.wait_until_ready().await?;
        for (_, s) in read(&self.gangs).iter().chain(&read(&self.stand_ins)) {
            s.wait_until_ready().await?;
        }
        Ok(())
    }

    /// Waits until every store has listed once (forever if a watch task
    /// ended before its first list).
    pub async fn wait_ready(&self) {
        let mut ready = self.ready.clone();
        if ready.wait_for(|r| *r).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests;
