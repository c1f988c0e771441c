//! Groups pods into gangs: sets of pods that the scheduler places all together
//! or not at all.
//!
//! Recognised links, newest upstream API first:
//! - upstream Workload API 1.36+: `spec.schedulingGroup.podGroupName` → a
//!   `scheduling.k8s.io` PodGroup (`schedulingPolicy.gang.minCount`,
//!   `schedulingConstraints.topology`);
//! - upstream Workload API 1.35: `spec.workloadRef{name, podGroup,
//!   podGroupReplicaKey}` → a `scheduling.k8s.io/v1alpha1` Workload's
//!   `podGroups[].policy.gang.minCount`;
//! - scheduler-plugins coscheduling: label `scheduling.x-k8s.io/pod-group`
//!   (or the pre-2023 `pod-group.scheduling.sigs.k8s.io`) → PodGroup `minMember`;
//! - Volcano: annotation `scheduling.k8s.io/group-name` (or
//!   `scheduling.volcano.sh/group-name`) → PodGroup `minMember`;
//! - Kueue plain pods: label `kueue.x-k8s.io/pod-group-name` with annotation
//!   `kueue.x-k8s.io/pod-group-total-count`.
//!
//! A pod in no group is a gang of one. A `basic` (non-gang) upstream policy
//! makes every pod its own gang, as upstream does not gate them. The upstream
//! API counts only when the cluster's scheduler runs the GangScheduling plugin
//! (gates `GenericWorkload` and, before 1.37, `GangScheduling`); its topology
//! constraint only with `TopologyAwareWorkloadScheduling`. Otherwise the
//! scheduler places those pods one by one, and so do we. Callers turn those
//! gates on when the cluster shows it uses the API ([`crate::gang_apis`]).

use std::collections::BTreeMap;

use dra_sim::api_version::ApiGroupVersion;
use dra_sim::objects::ExtraObject;
use dra_sim::pods::{
    LinkField, gang_link, is_bound, is_scheduling_gated as is_gated, is_terminal, priority,
};
use dra_sim::{FeatureGates, ObjectRef};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::gang_kinds::{
    COSCHEDULING_KINDS, UPSTREAM_GROUP, UPSTREAM_POD_GROUP_KINDS, UPSTREAM_VERSIONS, VOLCANO_KINDS,
    WORKLOAD_KINDS,
};

/// The gang kinds, as they were first listed here.
pub use crate::gang_kinds::GANG_KINDS;

// The links pods carry are read by `dra_sim::pods`; the names stay here too.
pub use dra_sim::pods::{
    COSCHEDULING_LABEL, COSCHEDULING_LEGACY_LABEL, KUEUE_GROUP_LABEL, KUEUE_TOTAL_ANNOTATION,
    VOLCANO_ANNOTATION, VOLCANO_ANNOTATION_ALT,
};

/// Which API a gang comes from. Written (in JSON, text and logs) as
/// [`GangApi::as_str`] says: `single`, `pod-group`, `workload`,
/// `coscheduling`, `volcano`, `kueue`, `provisioning-request`,
/// `capacity-buffer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GangApi {
    /// Not in any group.
    Single,
    /// `scheduling.k8s.io` PodGroup (Kubernetes 1.36+).
    PodGroup,
    /// `scheduling.k8s.io/v1alpha1` Workload pod group (Kubernetes 1.35).
    Workload,
    /// scheduler-plugins coscheduling.
    Coscheduling,
    /// Volcano.
    Volcano,
    /// Kueue plain-pod group.
    Kueue,
    /// The pods a ProvisioningRequest (`autoscaling.x-k8s.io/v1`) asks room
    /// for: one gang of all its pod sets (see [`crate::provreq`]).
    ProvisioningRequest,
    /// One chunk of a CapacityBuffer (`autoscaling.x-k8s.io/v1beta1`): a
    /// stand-in pod placed on its own, like a single pod (see
    /// [`crate::buffers`]).
    CapacityBuffer,
}

impl GangApi {
    /// Every API, in declaration order.
    pub const ALL: [GangApi; 8] = [
        GangApi::Single,
        GangApi::PodGroup,
        GangApi::Workload,
        GangApi::Coscheduling,
        GangApi::Volcano,
        GangApi::Kueue,
        GangApi::ProvisioningRequest,
        GangApi::CapacityBuffer,
    ];

    /// The API's name: the one table between the enum and its spelling
    /// (serde, `Display` and `FromStr` all go through it).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            GangApi::Single => "single",
            GangApi::PodGroup => "pod-group",
            GangApi::Workload => "workload",
            GangApi::Coscheduling => "coscheduling",
            GangApi::Volcano => "volcano",
            GangApi::Kueue => "kueue",
            GangApi::ProvisioningRequest => "provisioning-request",
            GangApi::CapacityBuffer => "capacity-buffer",
        }
    }

    /// Whether pods of this API start together (everything but `single`
    /// and buffer chunks, which land one by one).
    #[must_use]
    pub fn is_gang(self) -> bool {
        !matches!(self, GangApi::Single | GangApi::CapacityBuffer)
    }

    /// `(API group, kind)` of the objects that define gangs of this API
    /// (none for Kueue, whose groups live on the pods, and for single pods).
    #[must_use]
    pub fn object_kinds(self) -> &'static [(&'static str, &'static str)] {
        match self {
            GangApi::Workload => WORKLOAD_KINDS,
            GangApi::PodGroup => UPSTREAM_POD_GROUP_KINDS,
            GangApi::Coscheduling => COSCHEDULING_KINDS,
            GangApi::Volcano => VOLCANO_KINDS,
            GangApi::Kueue
            | GangApi::Single
            | GangApi::ProvisioningRequest
            | GangApi::CapacityBuffer => &[],
        }
    }

    /// The API whose gangs an object of `group`/`kind` defines.
    #[must_use]
    pub fn of_kind(group: &str, kind: &str) -> Option<GangApi> {
        GangApi::ALL
            .into_iter()
            .find(|api| api.object_kinds().contains(&(group, kind)))
    }
}

impl std::fmt::Display for GangApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A gang API name that is not one of [`GangApi::as_str`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown gang API {0:?}: expected single, pod-group, workload, coscheduling, volcano, kueue, provisioning-request or capacity-buffer"
)]
pub struct UnknownGangApi(pub String);

impl std::str::FromStr for GangApi {
    type Err = UnknownGangApi;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GangApi::ALL
            .into_iter()
            .find(|api| api.as_str() == s)
            .ok_or_else(|| UnknownGangApi(s.to_string()))
    }
}

impl serde::Serialize for GangApi {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for GangApi {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Which gang: the object that defines it (for a pod in no group, the pod;
/// for a Kueue group, its name in the pods' namespace) and, for a 1.35
/// Workload, which of its pod groups and which replica of it.
///
/// Written `namespace/name`, then `/podGroup` and `/replicaKey` when set,
/// and serialised as that string (names cannot contain `/`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GangRef {
    /// The defining object.
    pub object: ObjectRef,
    /// 1.35 Workload: the pod group's name in `spec.podGroups`.
    pub pod_group: Option<String>,
    /// 1.35 Workload: the pod's `workloadRef.podGroupReplicaKey`, when set.
    pub replica_key: Option<String>,
}

impl GangRef {
    /// The gang an object defines (or a single pod is).
    #[must_use]
    pub fn object(object: ObjectRef) -> Self {
        GangRef {
            object,
            pod_group: None,
            replica_key: None,
        }
    }
}

impl std::fmt::Display for GangRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.object)?;
        for part in [&self.pod_group, &self.replica_key].into_iter().flatten() {
            write!(f, "/{part}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for GangRef {
    type Err = std::convert::Infallible;

    /// `namespace/name[/podGroup[/replicaKey]]`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.splitn(4, '/');
        let (first, second) = (parts.next().unwrap_or_default(), parts.next());
        let object = match second {
            Some(name) => ObjectRef::new(first, name),
            None => ObjectRef::new("", first),
        };
        Ok(GangRef {
            object,
            pod_group: parts.next().map(str::to_string),
            replica_key: parts.next().map(str::to_string),
        })
    }
}

impl serde::Serialize for GangRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for GangRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        let Ok(r) = s.parse();
        Ok(r)
    }
}

/// A gang of pods.
#[derive(Debug, Clone, PartialEq)]
pub struct Gang {
    /// Where the gang is defined.
    pub api: GangApi,
    /// Which gang (for a single pod, the pod).
    pub name: GangRef,
    /// How many members must run together.
    pub min_count: usize,
    /// Indices (into the pod list) of members waiting for a node, in
    /// placement order.
    pub pending: Vec<usize>,
    /// Members already bound to a node; they count towards `min_count`.
    pub bound: usize,
    /// A topology key all members must share a value of, if any.
    pub topology_key: Option<String>,
    /// Why the scheduler would not try this gang yet, so no scale-up may be
    /// triggered for it (under-populated, gated, group object missing).
    pub blocked: Option<String>,
    /// The highest priority among pending members.
    pub priority: i32,
    /// Only existing (and upcoming) capacity may take it: a check-capacity
    /// ProvisioningRequest never scales up.
    pub existing_only: bool,
}

impl Gang {
    /// How many pending members must land for the gang to reach `min_count`.
    #[must_use]
    pub fn needed(&self) -> usize {
        self.min_count.saturating_sub(self.bound)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    api: GangApi,
    name: GangRef,
}

/// Reads one group object's policy: (minCount, topology key), or why it is
/// not usable.
#[derive(Debug, Clone)]
enum Policy {
    Gang {
        min: usize,
        topology: Option<String>,
    },
    /// Upstream `basic`: members are scheduled one by one.
    Basic,
}

/// The object `obj` is, its namespace defaulted as the API server does.
fn ref_of(obj: &ExtraObject) -> ObjectRef {
    let meta = obj.value.get("metadata");
    let get = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let ns = get("namespace");
    ObjectRef::new(
        if ns.is_empty() { "default".into() } else { ns },
        get("name"),
    )
}

fn group_of(obj: &ExtraObject) -> &str {
    ApiGroupVersion::parse(&obj.api_version).group()
}

fn as_count(value: Option<&Value>) -> Option<usize> {
    value
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// The policy of an upstream `schedulingPolicy` (1.36+) or `policy` (1.35).
fn upstream_policy(policy: Option<&Value>, topology: Option<String>) -> Policy {
    match policy.and_then(|p| p.get("gang")) {
        Some(gang) => Policy::Gang {
            min: as_count(gang.get("minCount")).unwrap_or(1).max(1),
            topology,
        },
        None => Policy::Basic,
    }
}

fn topology_of(spec: Option<&Value>) -> Option<String> {
    spec?
        .pointer("/schedulingConstraints/topology/0/key")
        .and_then(Value::as_str)
        .map(str::to_string)
}

struct Groups {
    policies: BTreeMap<GroupKey, Policy>,
}

impl Groups {
    fn new(extra: &[ExtraObject]) -> Self {
        let mut policies = BTreeMap::new();
        for obj in extra {
            let Some(api) = GangApi::of_kind(group_of(obj), &obj.kind) else {
                continue;
            };
            let object = ref_of(obj);
            let spec = obj.value.get("spec");
            // A version whose shape we do not know is not read: its pods then
            // wait on a group "not found" rather than being planned by guess.
            if group_of(obj) == UPSTREAM_GROUP
                && !UPSTREAM_VERSIONS.contains(&ApiGroupVersion::parse(&obj.api_version).version())
            {
                continue;
            }
            let min_member = || Policy::Gang {
                min: as_count(spec.and_then(|s| s.get("minMember")))
                    .unwrap_or(1)
                    .max(1),
                topology: None,
            };
            match api {
                GangApi::PodGroup => {
                    let policy = upstream_policy(
                        spec.and_then(|s| s.get("schedulingPolicy")),
                        topology_of(spec),
                    );
                    policies.insert(
                        GroupKey {
                            api,
                            name: GangRef::object(object),
                        },
                        policy,
                    );
                }
                GangApi::Workload => {
                    // 1.35 v1alpha1: spec.podGroups[]. (1.36+ Workloads carry
                    // podGroupTemplates; their runtime PodGroups are separate
                    // objects handled above.)
                    for group in spec
                        .and_then(|s| s.get("podGroups"))
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let group_name = group
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        policies.insert(
                            GroupKey {
                                api,
                                name: GangRef {
                                    object: object.clone(),
                                    pod_group: Some(group_name.to_string()),
                                    replica_key: None,
                                },
                            },
                            upstream_policy(group.get("policy"), None),
                        );
                    }
                }
                GangApi::Coscheduling | GangApi::Volcano => {
                    policies.insert(
                        GroupKey {
                            api,
                            name: GangRef::object(object),
                        },
                        min_member(),
                    );
                }
                GangApi::Kueue
                | GangApi::Single
                | GangApi::ProvisioningRequest
                | GangApi::CapacityBuffer => {}
            }
        }
        Groups { policies }
    }
}

/// Which group a pod claims to be in, and (for Kueue) the size it declares.
fn link_of(
    pod: &Pod,
    workload_ref: Option<&Value>,
    upstream: bool,
) -> Option<(GroupKey, Option<usize>)> {
    let link = gang_link(pod, workload_ref, upstream)?;
    let api = match link.field {
        LinkField::SchedulingGroup => GangApi::PodGroup,
        LinkField::WorkloadRef => GangApi::Workload,
        LinkField::CoschedulingLabel => GangApi::Coscheduling,
        LinkField::VolcanoAnnotation => GangApi::Volcano,
        LinkField::KueueLabel => GangApi::Kueue,
    };
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    // The replica key separates gang instances of one pod group; the policy
    // is the pod group's, looked up without it.
    let name = GangRef {
        object: ObjectRef::new(ns, link.group),
        pod_group: link.pod_group,
        replica_key: link.replica_key,
    };
    Some((GroupKey { api, name }, link.declared_size))
}

fn pod_name(pod: &Pod) -> ObjectRef {
    ObjectRef::namespaced(&pod.metadata)
}

/// Groups `pods` into gangs. `pending_order` lists the pending pods (indices
/// into `pods`) in placement order; gangs are returned in the order their first
/// pending member appears there, and only gangs with pending members are
/// returned. `workload_refs` carries 1.35 `spec.workloadRef` values by
/// `(namespace, name)`.
#[must_use]
pub fn detect_gangs(
    pods: &[Pod],
    pending_order: &[usize],
    extra: &[ExtraObject],
    workload_refs: &BTreeMap<(String, String), Value>,
    gates: &FeatureGates,
) -> Vec<Gang> {
    let upstream = gates.generic_workload && gates.gang_scheduling;
    let mut groups = Groups::new(extra);
    if !gates.topology_aware_workload_scheduling {
        for policy in groups.policies.values_mut() {
            if let Policy::Gang { topology, .. } = policy {
                *topology = None;
            }
        }
    }
    // The map is keyed by owned strings; most clusters carry no `spec.workloadRef`, and
    // making the key for each of their 100,000 pods was a tenth of a loop's plan (#28).
    let workload_ref = |pod: &Pod| {
        if workload_refs.is_empty() {
            return None;
        }
        workload_refs.get(&(
            pod.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            pod.metadata.name.clone().unwrap_or_default(),
        ))
    };

    // Count every non-terminal member per group, and remember bound ones.
    struct Members {
        known: usize,
        bound: usize,
        gated: usize,
        kueue_total: Option<usize>,
    }
    let mut members: BTreeMap<GroupKey, Members> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !is_terminal(p)) {
        if let Some((key, total)) = link_of(pod, workload_ref(pod), upstream) {
            let entry = members.entry(key).or_insert(Members {
                known: 0,
                bound: 0,
                gated: 0,
                kueue_total: None,
            });
            entry.known += 1;
            entry.bound += usize::from(is_bound(pod));
            entry.gated += usize::from(is_gated(pod));
            entry.kueue_total = entry.kueue_total.or(total);
        }
    }

    let mut gangs: Vec<Gang> = Vec::new();
    let mut index_of: BTreeMap<GroupKey, usize> = BTreeMap::new();
    for &pod_index in pending_order {
        let pod = &pods[pod_index];
        let Some((key, _)) = link_of(pod, workload_ref(pod), upstream) else {
            gangs.push(single(pod, pod_index));
            continue;
        };
        if let Some(&g) = index_of.get(&key) {
            let gang = &mut gangs[g];
            gang.pending.push(pod_index);
            gang.priority = gang.priority.max(priority(pod));
            continue;
        }
        let counts = &members[&key];
        // The replica key is not part of the Workload's pod-group name.
        let policy_key = GroupKey {
            api: key.api,
            name: GangRef {
                replica_key: None,
                ..key.name.clone()
            },
        };
        let (min_count, topology_key, mut blocked) = match key.api {
            GangApi::Kueue => match counts.kueue_total {
                Some(total) => (total.max(1), None, None),
                None => (
                    1,
                    None,
                    Some(format!(
                        "pod {} has label {KUEUE_GROUP_LABEL} but no valid {KUEUE_TOTAL_ANNOTATION} annotation",
                        pod_name(pod)
                    )),
                ),
            },
            _ => match groups.policies.get(&policy_key) {
                Some(Policy::Gang { min, topology }) => (*min, topology.clone(), None),
                Some(Policy::Basic) => {
                    gangs.push(single(pod, pod_index));
                    continue;
                }
                None => (
                    1,
                    None,
                    Some(format!(
                        "{} {} not found",
                        api_object(key.api),
                        policy_key.name
                    )),
                ),
            },
        };
        if blocked.is_none() && counts.gated > 0 {
            blocked = Some(format!(
                "{} of the gang's pods are scheduling-gated; the scheduler does not try gated pods",
                counts.gated
            ));
        }
        if blocked.is_none() && counts.known < min_count {
            blocked = Some(format!(
                "the gang has {} of its minimum {min_count} pods; the scheduler waits for the rest before trying it",
                counts.known
            ));
        }
        index_of.insert(key.clone(), gangs.len());
        gangs.push(Gang {
            api: key.api,
            name: key.name.clone(),
            min_count,
            pending: vec![pod_index],
            bound: counts.bound,
            topology_key,
            blocked,
            priority: priority(pod),
            existing_only: false,
        });
    }
    gangs
}

fn api_object(api: GangApi) -> &'static str {
    match api {
        GangApi::PodGroup => "PodGroup (scheduling.k8s.io)",
        GangApi::Workload => "Workload pod group (scheduling.k8s.io/v1alpha1)",
        GangApi::Coscheduling => "PodGroup (scheduling.x-k8s.io)",
        GangApi::Volcano => "PodGroup (scheduling.volcano.sh)",
        GangApi::Kueue
        | GangApi::Single
        | GangApi::ProvisioningRequest
        | GangApi::CapacityBuffer => "group",
    }
}

fn single(pod: &Pod, pod_index: usize) -> Gang {
    Gang {
        api: GangApi::Single,
        name: GangRef::object(pod_name(pod)),
        min_count: 1,
        pending: vec![pod_index],
        bound: 0,
        topology_key: None,
        blocked: is_gated(pod).then(|| "the pod is scheduling-gated".to_string()),
        priority: priority(pod),
        existing_only: false,
    }
}
