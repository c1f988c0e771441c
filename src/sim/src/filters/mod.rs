//! kube-scheduler's Filter plugins other than DynamicResources, with
//! upstream's semantics and reasons.
//!
//! The framework mirrors the scheduler's two phases:
//!
//! ```text
//! FilterState::new(nodes, bound pods, namespaces)      ← the scheduler cache
//!   │  add_node (template nodes)  add_pod (placements)  ← kept current
//!   ▼
//! prepare(pod) → PreparedPod                           ← PreFilter, once per pod
//!   ▼
//! filter(pod, node) → Ok | Rejection{plugin, reason}   ← Filter, per node
//! ```
//!
//! Filters run in upstream's order — NodeUnschedulable, NodeName,
//! TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
//! PodTopologySpread, InterPodAffinity — and the first refusal wins, as the
//! framework stops at the first failing plugin. The DRA allocator, which
//! upstream runs last (DynamicResources), is the caller's next step.
//!
//! Everything a check needs per node is an integer in a flat vector indexed
//! by node, or a per-topology-domain count prepared once per pod, so a check
//! costs O(constraints), never O(pods). Counts behind PodTopologySpread and
//! InterPodAffinity are computed once per distinct selector and kept current
//! as pods are placed (see [`index`]).
//!
//! Volume plugins and scoring are not modelled: see `docs/divergences.md`.

mod capacity;
mod extended_resources;
mod index;
mod inter_pod_affinity;
mod kept;
mod labels;
mod node_affinity;
mod node_name;
mod node_ports;
mod node_resources_fit;
mod node_unschedulable;
mod pod_topology_spread;
mod records;
mod requests;
mod rollback;
mod taint_toleration;
mod topology;
mod unbind;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Toleration};
use k8s_openapi::api::resource::v1::DeviceClass;

pub use crate::selectors::SelectorParseError;
pub use capacity::Allocatable;
pub use extended_resources::{EXTENDED_RESOURCE_CLAIM_ANNOTATION, extended_resource_claim};
pub use kept::{Mark, NodeSummary, RollBackError, Summary, same_to_filters};
pub use unbind::TakenOff;

use crate::gates::FeatureGates;
use crate::objects::ObjectRef;
use crate::reason::{Code, Reason, Words};
use extended_resources::ExtendedResourceMap;
use index::{Index, NodeRecord, Placed, PodRecord};
use inter_pod_affinity::{AffinityRefusal, PreparedAffinity};
use labels::{Interned, NamespaceRegistry};
use node_affinity::RequiredNodeAffinity;
use node_ports::HostPort;
use node_resources_fit::{NodeResources, PodRequest};
use pod_topology_spread::{PreparedConstraint, SpreadRefusal};
use requests::{ResourceTable, ResourceVec, bound_pod_vec, pod_requests};

/// One of the Filter plugins, in upstream's order ([`Plugin::ORDER`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plugin {
    /// Cordoned nodes.
    NodeUnschedulable,
    /// `spec.nodeName`.
    NodeName,
    /// Node taints against pod tolerations.
    TaintToleration,
    /// `nodeSelector` and required node affinity.
    NodeAffinity,
    /// Host ports.
    NodePorts,
    /// Requests against allocatable.
    NodeResourcesFit,
    /// DoNotSchedule topology spread constraints.
    PodTopologySpread,
    /// Required pod affinity and anti-affinity.
    InterPodAffinity,
}

impl Plugin {
    /// kube-scheduler's default Filter order (volume plugins left out).
    pub const ORDER: [Plugin; 8] = [
        Plugin::NodeUnschedulable,
        Plugin::NodeName,
        Plugin::TaintToleration,
        Plugin::NodeAffinity,
        Plugin::NodePorts,
        Plugin::NodeResourcesFit,
        Plugin::PodTopologySpread,
        Plugin::InterPodAffinity,
    ];

    /// The plugin's upstream name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Plugin::NodeUnschedulable => node_unschedulable::NAME,
            Plugin::NodeName => node_name::NAME,
            Plugin::TaintToleration => taint_toleration::NAME,
            Plugin::NodeAffinity => node_affinity::NAME,
            Plugin::NodePorts => node_ports::NAME,
            Plugin::NodeResourcesFit => node_resources_fit::NAME,
            Plugin::PodTopologySpread => pod_topology_spread::NAME,
            Plugin::InterPodAffinity => inter_pod_affinity::NAME,
        }
    }
}

/// Name reported when a node index is not in the state (a caller bug).
const STATE_NAME: &str = "FilterState";

/// A node refused a pod: the plugin and the reason in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Upstream plugin name, e.g. `NodeResourcesFit`.
    pub plugin: &'static str,
    /// Upstream's reason, e.g. `Insufficient nvidia.com/gpu` (several
    /// reasons of one plugin are joined with ", "), with its code.
    pub reason: Reason,
}

/// What went wrong, kept as a few integers so the hot loop allocates
/// nothing; [`Refusal::reason`] spells it out when a caller reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RefusalKind {
    UnknownNode,
    NotInPreFilterResult,
    Unschedulable,
    NodeName,
    Taint(usize),
    NodeAffinity,
    NodePorts,
    Resources(u64),
    Spread(SpreadRefusal),
    Affinity(AffinityRefusal),
}

/// A refusal before it is put into words; see [`FilterState::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    plugin: &'static str,
    kind: RefusalKind,
}

impl Refusal {
    /// The refusing plugin's upstream name.
    #[must_use]
    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    /// Which refusal it is.
    #[must_use]
    pub fn code(&self) -> Code {
        match self.kind {
            RefusalKind::UnknownNode => Code::UnknownNode,
            RefusalKind::NotInPreFilterResult => Code::NotInPreFilterResult,
            RefusalKind::Unschedulable => Code::NodeUnschedulable,
            RefusalKind::NodeName => Code::NodeNameMismatch,
            RefusalKind::Taint(_) => Code::UntoleratedTaint,
            RefusalKind::NodeAffinity => Code::NodeAffinityMismatch,
            RefusalKind::NodePorts => Code::HostPortsTaken,
            RefusalKind::Resources(_) => Code::InsufficientResources,
            RefusalKind::Spread(SpreadRefusal::MissingLabel) => Code::SpreadMissingLabel,
            RefusalKind::Spread(SpreadRefusal::Skew) => Code::SpreadSkew,
            RefusalKind::Affinity(AffinityRefusal::Affinity) => Code::PodAffinityMismatch,
            RefusalKind::Affinity(AffinityRefusal::AntiAffinity) => Code::PodAntiAffinityMismatch,
            RefusalKind::Affinity(AffinityRefusal::ExistingAntiAffinity) => {
                Code::ExistingPodAntiAffinityMismatch
            }
        }
    }

    /// The refusal as a reason with its plugin and code only: no words, no
    /// node. For callers that throw the reason away (a first-fit scan), so
    /// refusing allocates nothing.
    #[must_use]
    pub fn unexplained(&self) -> Reason {
        Reason {
            plugin: self.plugin,
            code: self.code(),
            node: None,
            detail: Words::default(),
        }
    }

    /// The reason as a value, printing upstream's words. `pod` and `node`
    /// must be the ones the check ran with (the taint and resource names
    /// come from them).
    #[must_use]
    pub fn reason(&self, pod: &PreparedPod, node: &Node) -> Reason {
        let name = node.metadata.name.as_deref();
        let words: String = match self.kind {
            RefusalKind::UnknownNode => format!(
                "node {:?} is not in the filter state (add it with add_node first)",
                name.unwrap_or_default()
            ),
            RefusalKind::NotInPreFilterResult => node_affinity::PREFILTER_REASON.into(),
            RefusalKind::Unschedulable => node_unschedulable::REASON.into(),
            RefusalKind::NodeName => node_name::REASON.into(),
            RefusalKind::Taint(index) => node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .and_then(|t| t.get(index))
                .map_or_else(
                    || "node(s) had untolerated taint(s)".into(),
                    taint_toleration::reason,
                ),
            RefusalKind::NodeAffinity => node_affinity::REASON.into(),
            RefusalKind::NodePorts => node_ports::REASON.into(),
            RefusalKind::Resources(mask) => node_resources_fit::reason(&pod.request, mask),
            RefusalKind::Spread(SpreadRefusal::MissingLabel) => {
                pod_topology_spread::MISSING_LABEL_REASON.into()
            }
            RefusalKind::Spread(SpreadRefusal::Skew) => pod_topology_spread::REASON.into(),
            RefusalKind::Affinity(AffinityRefusal::Affinity) => {
                inter_pod_affinity::AFFINITY_REASON.into()
            }
            RefusalKind::Affinity(AffinityRefusal::AntiAffinity) => {
                inter_pod_affinity::ANTI_AFFINITY_REASON.into()
            }
            RefusalKind::Affinity(AffinityRefusal::ExistingAntiAffinity) => {
                inter_pod_affinity::EXISTING_ANTI_AFFINITY_REASON.into()
            }
        };
        Reason {
            plugin: self.plugin,
            code: self.code(),
            node: name.map(str::to_string),
            detail: Words::text(words),
        }
    }

    /// The full rejection.
    #[must_use]
    pub fn into_rejection(self, pod: &PreparedPod, node: &Node) -> Rejection {
        Rejection {
            plugin: self.plugin,
            reason: self.reason(pod, node),
        }
    }
}

/// Everything about one pod that the filters compute once (PreFilter):
/// requests, tolerations, node affinity, host ports, spread constraints and
/// affinity terms with the domain counts of the moment it was prepared.
#[derive(Debug, Clone)]
pub struct PreparedPod {
    /// Extended resources (KEP-5004) a DeviceClass can serve, with the pod's
    /// total request of each: on a node that does not advertise one, it is
    /// left to the DRA allocator through [`extended_resource_claim`] instead
    /// of being counted by NodeResourcesFit.
    pub extended_via_dra: Vec<(String, i64)>,
    node_name: Option<String>,
    tolerations: Vec<Toleration>,
    node_affinity: Option<RequiredNodeAffinity>,
    prefilter_nodes: Option<HashSet<String>>,
    ports: Vec<HostPort>,
    request: PodRequest,
    spread: Vec<PreparedConstraint>,
    affinity: PreparedAffinity,
}

/// Per-node resource and port usage.
#[derive(Debug, Clone, Default)]
struct NodeUsage {
    allocatable: ResourceVec,
    allowed_pods: i64,
    requested: ResourceVec,
    pod_count: i64,
    ports: Vec<HostPort>,
}

/// Per-node aggregates (requested resources, used host ports, pod count,
/// pods with labels for affinity and spread) plus per-topology-domain
/// indexes, so affinity and spread checks are O(1)–O(constraints) per node.
#[derive(Debug)]
pub struct FilterState {
    nodes: Vec<NodeRecord>,
    usage: Vec<NodeUsage>,
    node_ids: HashMap<String, usize, foldhash::fast::RandomState>,
    pods: Vec<PodRecord>,
    /// Per entry of `pods`: what it added to its node's requested total.
    pod_requested: Vec<ResourceVec>,
    namespaces: NamespaceRegistry,
    /// The namespaces and label sets of `pods`, one copy of each.
    interned: Interned,
    resources: ResourceTable,
    extended: ExtendedResourceMap,
    extended_gate: bool,
    /// Built lazily by `prepare`, which only has `&self`.
    index: Mutex<Index>,
    /// Records taken off their node and not put back yet ([`FilterState::take_off`]).
    taken_off: usize,
}

/// Pods that hold resources on their node: bound and not finished (the
/// scheduler's informer leaves out Succeeded and Failed pods).
fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed"))
}

impl FilterState {
    /// `nodes` in the simulation's node order (index = node index); `pods`
    /// all pods, of which those bound to one of `nodes` and not finished are
    /// counted on their node.
    #[must_use]
    pub fn new(nodes: &[Node], pods: &[Pod], namespaces: &[Namespace]) -> Self {
        Self::of_nodes(nodes.iter(), pods, namespaces)
    }

    /// [`FilterState::new`] over borrowed nodes, in the order given (index = node index):
    /// for a caller whose nodes are not in one vector in that order.
    #[must_use]
    pub fn of_nodes<'a>(
        nodes: impl ExactSizeIterator<Item = &'a Node>,
        pods: &[Pod],
        namespaces: &[Namespace],
    ) -> Self {
        // Room for the template nodes a plan adds, as the loader leaves it in the
        // snapshot's own vector of nodes (`Loader::reserve_for`).
        let count = nodes.len();
        let room = count + count / 8;
        let mut state = Self {
            nodes: Vec::with_capacity(room),
            usage: Vec::with_capacity(room),
            node_ids: HashMap::with_capacity_and_hasher(count, Default::default()),
            pods: Vec::new(),
            pod_requested: Vec::new(),
            namespaces: NamespaceRegistry::new(namespaces),
            interned: Interned::default(),
            resources: ResourceTable::default(),
            extended: ExtendedResourceMap::default(),
            extended_gate: false,
            index: Mutex::new(Index::default()),
            taken_off: 0,
        };
        for node in nodes {
            state.add_node(node);
        }
        // Most pods of a cluster are bound: room for them all up front spares the
        // records' vectors their doublings (each a copy into freshly zeroed pages).
        state.pods.reserve(pods.len());
        state.pod_requested.reserve(pods.len());
        for pod in pods {
            state.count_bound(pod);
        }
        state
    }

    /// Enables KEP-5004 (extended resources backed by DRA) when the gate is
    /// on: names the classes map are left to DRA on nodes that do not
    /// advertise them. Without this call every extended resource is counted
    /// against node allocatable, as with the gate off.
    pub fn set_device_classes(&mut self, classes: &[DeviceClass], gates: &FeatureGates) {
        self.extended = ExtendedResourceMap::new(classes);
        self.extended_gate = gates.extended_resource;
    }

    /// A node added later (template node of a node group); returns its index
    /// (== previous number of nodes).
    pub fn add_node(&mut self, node: &Node) -> usize {
        let mut allocatable = ResourceVec::default();
        let allowed_pods = allocatable.add_node_allocatable(node, &mut self.resources);
        self.usage.push(NodeUsage {
            allocatable,
            allowed_pods,
            ..NodeUsage::default()
        });
        self.nodes.push(NodeRecord::of(node));
        let index = self.nodes.len() - 1;
        if let Some(name) = node.metadata.name.as_deref() {
            self.node_ids.entry(name.to_string()).or_insert(index);
        }
        self.index
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .on_add_node(&self.nodes);
        index
    }

    /// Counts a pod placed on node `node_index` (resources, ports, affinity
    /// and spread indexes). An index past the known nodes is ignored.
    pub fn add_pod(&mut self, pod: &Pod, node_index: usize) {
        self.add_pod_prepared(pod, node_index, None);
    }

    /// [`FilterState::add_pod`] with the requests PreFilter already parsed,
    /// when the caller has them.
    pub(crate) fn add_pod_prepared(
        &mut self,
        pod: &Pod,
        node_index: usize,
        prepared: Option<&PreparedPod>,
    ) {
        if node_index >= self.usage.len() {
            return;
        }
        let requested = match prepared {
            Some(prepared) => prepared.request.to_vec(&mut self.resources),
            // Bound pods passed validation; a bad quantity counts as zero.
            None => bound_pod_vec(pod, &mut self.resources),
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let (shared_namespace, first_seen) = self.interned.namespace(namespace);
        if first_seen {
            // The registry knows every namespace the interned ones were seen on: it needs
            // telling once per namespace, not once per pod (a sorted map's string
            // comparisons, for every pod of the cluster, every loop).
            self.namespaces.note(namespace);
        }
        let record = PodRecord {
            namespace: shared_namespace,
            labels: pod
                .metadata
                .labels
                .as_ref()
                .map(|labels| self.interned.labels(labels)),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            node_index,
            placed: Placed::of(
                node_ports::pod_host_ports(pod),
                inter_pod_affinity::placed_anti_terms(pod),
            ),
        };
        self.pods.push(record);
        self.pod_requested.push(requested);
        self.count(self.pods.len() - 1);
    }

    /// How many nodes the state knows.
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Whether every pod of `others` matches all of `pod`'s required pod
    /// affinity terms, namespaces resolved as InterPodAffinity resolves them:
    /// the pods that term counts. `false` when `pod` has no such term.
    pub fn required_affinity_counts_all<'a>(
        &self,
        pod: &Pod,
        others: impl IntoIterator<Item = &'a Pod>,
    ) -> bool {
        inter_pod_affinity::affinity_counts_all(pod, others, &self.namespaces)
    }

    /// The index of a node by name.
    #[must_use]
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.node_ids.get(name).copied()
    }

    /// PreFilter: everything about the pod computed once (requests,
    /// tolerations, affinity terms, spread constraints with their current
    /// domain counts). `nodes` is accepted for symmetry with the scheduler's
    /// PreFilter; the state already holds what it needs.
    ///
    /// # Errors
    /// What upstream's PreFilter refuses, making the pod unschedulable on
    /// every node: a request that is not a quantity, node affinity terms
    /// pinning disjoint node names, a label selector that does not parse.
    pub fn prepare(&self, pod: &Pod, _nodes: &[Node]) -> Result<PreparedPod, Reason> {
        let key = ObjectRef::namespaced(&pod.metadata);
        let prefilter_nodes = node_affinity::prefilter_node_names(pod)
            .map_err(|e| Reason::new(Code::NodeAffinityConflict, e))?;
        let spec = pod.spec.as_ref();
        let ports = node_ports::pod_host_ports(pod);
        let requests = pod_requests(pod, true)
            .map_err(|e| Reason::new(Code::InvalidResourceRequest, format!("pod {key}: {e}")))?;
        let request = PodRequest::new(&requests, &self.resources, |name| {
            self.extended_gate && self.extended.class_for(name).is_some()
        });
        let extended_via_dra = request
            .scalars
            .iter()
            .filter(|s| s.via_dra && s.quantity > 0)
            .map(|s| (s.name.clone(), s.quantity))
            .collect();
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        let spread = pod_topology_spread::prepare(pod, &mut index, &self.nodes, &self.pods)
            .map_err(|e| Reason::new(Code::InvalidSpreadConstraint, e.to_string()))?;
        let affinity =
            inter_pod_affinity::prepare(pod, &self.namespaces, &mut index, &self.nodes, &self.pods)
                .map_err(|e| Reason::new(Code::InvalidAffinityTerm, e.to_string()))?;
        Ok(PreparedPod {
            extended_via_dra,
            node_name: spec.and_then(|s| s.node_name.clone()),
            tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
            node_affinity: RequiredNodeAffinity::of(pod),
            prefilter_nodes,
            ports,
            request,
            spread,
            affinity,
        })
    }

    /// Runs the filters in upstream's order and returns the first rejection.
    ///
    /// # Errors
    /// The first plugin that refuses the node, with upstream's reason.
    pub fn filter(
        &self,
        pod: &PreparedPod,
        node_index: usize,
        node: &Node,
    ) -> Result<(), Rejection> {
        self.check(pod, node_index, node)
            .map_err(|refusal| refusal.into_rejection(pod, node))
    }

    /// [`filter`](Self::filter) without building the reason string, for hot
    /// loops that only report some refusals.
    ///
    /// # Errors
    /// The first plugin that refuses the node.
    pub fn check(&self, pod: &PreparedPod, node_index: usize, node: &Node) -> Result<(), Refusal> {
        if node_index >= self.nodes.len() {
            return Err(Refusal {
                plugin: STATE_NAME,
                kind: RefusalKind::UnknownNode,
            });
        }
        if let Some(names) = &pod.prefilter_nodes
            && !node
                .metadata
                .name
                .as_ref()
                .is_some_and(|n| names.contains(n))
        {
            return Err(Refusal {
                plugin: node_affinity::NAME,
                kind: RefusalKind::NotInPreFilterResult,
            });
        }
        for plugin in Plugin::ORDER {
            self.check_plugin(plugin, pod, node_index, node)?;
        }
        Ok(())
    }

    /// One plugin's Filter alone (for per-plugin costs and tests).
    ///
    /// # Errors
    /// The plugin refuses the node.
    pub fn check_plugin(
        &self,
        plugin: Plugin,
        pod: &PreparedPod,
        node_index: usize,
        node: &Node,
    ) -> Result<(), Refusal> {
        let refuse = |kind| {
            Err(Refusal {
                plugin: plugin.name(),
                kind,
            })
        };
        let Some(usage) = self.usage.get(node_index) else {
            return Err(Refusal {
                plugin: STATE_NAME,
                kind: RefusalKind::UnknownNode,
            });
        };
        match plugin {
            Plugin::NodeUnschedulable => {
                if !node_unschedulable::passes(node, &pod.tolerations) {
                    return refuse(RefusalKind::Unschedulable);
                }
            }
            Plugin::NodeName => {
                if !node_name::passes(pod.node_name.as_deref(), node) {
                    return refuse(RefusalKind::NodeName);
                }
            }
            Plugin::TaintToleration => {
                let taints = node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_deref())
                    .unwrap_or_default();
                if let Some(index) = taint_toleration::first_untolerated(taints, &pod.tolerations) {
                    return refuse(RefusalKind::Taint(index));
                }
            }
            Plugin::NodeAffinity => {
                if pod.node_affinity.as_ref().is_some_and(|a| !a.matches(node)) {
                    return refuse(RefusalKind::NodeAffinity);
                }
            }
            Plugin::NodePorts => {
                if !node_ports::passes(&usage.ports, &pod.ports) {
                    return refuse(RefusalKind::NodePorts);
                }
            }
            Plugin::NodeResourcesFit => {
                let resources = NodeResources {
                    allocatable: &usage.allocatable,
                    allowed_pods: usage.allowed_pods,
                    requested: &usage.requested,
                    pod_count: usage.pod_count,
                };
                if let Err(mask) =
                    node_resources_fit::check(&pod.request, &resources, &self.resources)
                {
                    return refuse(RefusalKind::Resources(mask));
                }
            }
            Plugin::PodTopologySpread => {
                if let Err(why) = pod_topology_spread::check(&pod.spread, node_index, node) {
                    return refuse(RefusalKind::Spread(why));
                }
            }
            Plugin::InterPodAffinity => {
                if pod.affinity.is_empty() {
                    return Ok(());
                }
                if let Err(why) = inter_pod_affinity::check(&pod.affinity, node_index, node) {
                    return refuse(RefusalKind::Affinity(why));
                }
            }
        }
        Ok(())
    }
}
