//! The mutable cluster state one simulation works on: nodes in name order,
//! pods, claims with their allocations, and the DRA inventory.
//!
//! Placing a pod commits its claims' allocations here, so pods placed later see
//! those devices in use, exactly as the scheduler's assume cache makes them.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClass, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClaimStatus, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::dra::{AllocError, AllocateOutcome, AllocatedState, DraCatalog, ShareIdGenerator};
use crate::filters::{FilterState, PreparedPod, extended_resource_claim};
use crate::gates::FeatureGates;
use crate::objects::ClusterObjects;
pub use crate::pods::{is_pending, priority};
use crate::selectors::node_selector_matches;

mod unbind;

/// `namespace/name` of a namespaced object.
pub type ObjectKey = (String, String);

/// Annotation the ResourceClaim controller puts on generated claims, naming
/// the pod's claim entry they were made for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// Formats a key as `namespace/name`.
#[must_use]
pub fn key_string(key: &ObjectKey) -> String {
    format!("{}/{}", key.0, key.1)
}

/// The key of any namespaced object.
#[must_use]
pub fn object_key(meta: &ObjectMeta) -> ObjectKey {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The claims one pod needs, resolved.
#[derive(Debug, Clone, Default)]
pub struct PodClaims {
    /// Claims that are already allocated (their node selector must match).
    pub allocated: Vec<ObjectKey>,
    /// Claims to allocate now, in pod order.
    pub to_allocate: Vec<ObjectKey>,
}

/// The cluster state of one simulation.
#[derive(Debug)]
pub struct Snapshot {
    gates: FeatureGates,
    nodes: Vec<Node>,
    node_index: HashMap<String, usize>,
    pods: Vec<Pod>,
    claims: BTreeMap<ObjectKey, ResourceClaim>,
    templates: BTreeMap<ObjectKey, ResourceClaimTemplate>,
    namespaces: BTreeMap<String, Namespace>,
    dra: DraCatalog,
    allocated: AllocatedState,
    share_ids: ShareIdGenerator,
    undo: Vec<Undo>,
    filters: FilterState,
    device_classes: Vec<DeviceClass>,
    /// PreFilter result of the pod checked last, valid while `generation`
    /// is unchanged (placements change domain counts).
    prepared: Option<(usize, u64, Result<PreparedPod, String>)>,
    generation: u64,
    /// Per pod: its scheduling signature, once computed (`None` inside when
    /// the pod's fit is not monotonic, see [`Snapshot::signature`]).
    signatures: Vec<Option<Option<u64>>>,
    /// Per signature: every node before this index refused such a pod.
    cursors: HashMap<u64, usize>,
    /// Whether any pod has a required anti-affinity term: only then do a
    /// pod's labels decide where it fits.
    labels_matter: bool,
    /// Generated claims by (namespace, owner `uid:…`/`name:…`, pod claim entry).
    generated: HashMap<(String, String, String), ObjectKey>,
    /// PreFilter results of pods whose result does not depend on placements.
    stateless_prepared: HashMap<usize, Result<PreparedPod, String>>,
    /// Reused by [`Snapshot::signature`] to serialise a pod for hashing.
    signature_buffer: Vec<u8>,
}

/// Suffix of the claim the scheduler creates for extended resources served
/// by DRA (KEP-5004). Upstream uses generateName; a simulation needs a stable
/// name.
pub const EXTENDED_RESOURCES_SUFFIX: &str = "extended-resources";

/// The key of a pod's extended-resource claim.
#[must_use]
pub fn extended_claim_key(pod: &ObjectKey) -> ObjectKey {
    (
        pod.0.clone(),
        format!("{}-{EXTENDED_RESOURCES_SUFFIX}", pod.1),
    )
}

/// What one node says about one pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The pod fits; one allocation per claim that needed allocating.
    Fits(Vec<AllocationResult>),
    /// This node refuses the pod, for the reason given (upstream's words first).
    Refused(String),
    /// The scheduler would fail the pod outright (not try other nodes).
    Fatal(String),
    /// PreFilter refuses the pod on every node (unschedulable, not an error).
    Unresolvable(String),
}

/// A point the snapshot can roll back to. Checkpoints nest: rolling back to
/// an older one undoes everything after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a checkpoint does nothing unless rolled back to"]
pub struct Checkpoint(usize);

/// One change, with what is needed to undo it.
#[derive(Debug)]
enum Undo {
    NodeAdded,
    PodAdded,
    Cursor {
        signature: u64,
        previous: Option<usize>,
    },
    PodBound {
        pod_index: usize,
        previous_node: Option<String>,
        claims: Vec<(ObjectKey, Option<ResourceClaimStatus>)>,
        allocations: Vec<AllocationResult>,
    },
    PodUnbound(Box<unbind::Unbound>),
}

impl Snapshot {
    /// Builds the state from loaded objects. Nodes are kept in name order.
    #[must_use]
    pub fn new(objects: ClusterObjects, gates: FeatureGates) -> Self {
        let ClusterObjects {
            mut nodes,
            pods,
            namespaces,
            device_classes,
            resource_slices,
            resource_claims,
            resource_claim_templates,
            device_taint_rules,
            extra: _,
            pod_workload_refs: _,
        } = objects;
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let labels_matter = pods.iter().any(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .is_some_and(|terms| !terms.is_empty())
        });
        let mut filters = FilterState::new(&nodes, &pods, &namespaces);
        filters.set_device_classes(&device_classes, &gates);
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.metadata.name.clone().unwrap_or_default(), i))
            .collect();
        let dra = DraCatalog::new(
            gates,
            &device_classes,
            &resource_slices,
            &device_taint_rules,
        );
        let allocated = AllocatedState::from_claims(resource_claims.iter(), &gates);
        let mut snapshot = Snapshot {
            gates,
            nodes,
            node_index,
            pods,
            claims: resource_claims
                .into_iter()
                .map(|c| (object_key(&c.metadata), c))
                .collect(),
            templates: resource_claim_templates
                .into_iter()
                .map(|t| (object_key(&t.metadata), t))
                .collect(),
            namespaces: namespaces
                .into_iter()
                .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
                .collect(),
            dra,
            allocated,
            share_ids: ShareIdGenerator::default(),
            undo: Vec::new(),
            filters,
            device_classes,
            prepared: None,
            generation: 0,
            signatures: Vec::new(),
            cursors: HashMap::new(),
            labels_matter,
            generated: HashMap::new(),
            stateless_prepared: HashMap::new(),
            signature_buffer: Vec::new(),
        };
        let keys: Vec<ObjectKey> = snapshot.claims.keys().cloned().collect();
        for key in &keys {
            snapshot.index_generated(key);
        }
        snapshot
    }

    /// A hash of everything about a pod that decides where it fits, when that
    /// only gets worse as pods are placed (monotonic): pods with the same
    /// signature are refused by the same full nodes, so a scan can start
    /// where the last one found room. Pods with topology spread or required
    /// pod affinity get `None`: placing pods can make nodes fit them again.
    pub fn signature(&mut self, pod_index: usize) -> Option<u64> {
        use std::hash::Hasher;
        if self.signatures.len() < self.pods.len() {
            self.signatures.resize(self.pods.len(), None);
        }
        if let Some(known) = self.signatures[pod_index] {
            return known;
        }
        let pod = &self.pods[pod_index];
        let labels_matter = self.labels_matter;
        let computed = pod.spec.as_ref().and_then(|spec| {
            let non_monotonic = spec
                .topology_spread_constraints
                .as_ref()
                .is_some_and(|c| !c.is_empty())
                || spec
                    .affinity
                    .as_ref()
                    .and_then(|a| a.pod_affinity.as_ref())
                    .is_some();
            if non_monotonic {
                return None;
            }
            // The node name is where a pod went, not what it needs; pending
            // pods have none, so only bound ones pay for a copy without it.
            let unbound;
            let spec = if spec.node_name.is_some() {
                let mut copy = spec.clone();
                copy.node_name = None;
                unbound = copy;
                &unbound
            } else {
                spec
            };
            let labels = if labels_matter {
                pod.metadata.labels.as_ref()
            } else {
                None
            };
            // Serialised into one reused buffer, hashed in one call.
            let buffer = &mut self.signature_buffer;
            buffer.clear();
            serde_json::to_writer(&mut *buffer, &(&pod.metadata.namespace, labels, spec)).ok()?;
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hasher.write(buffer);
            Some(hasher.finish())
        });
        self.signatures[pod_index] = Some(computed);
        computed
    }

    /// Whether any pod has required anti-affinity, so that a pod's labels (and
    /// not just its spec) decide where it fits.
    #[must_use]
    pub fn labels_matter(&self) -> bool {
        self.labels_matter
    }

    /// Where a first-fit scan for a pod of `signature` may start.
    #[must_use]
    pub fn scan_start(&self, signature: Option<u64>) -> usize {
        signature
            .and_then(|s| self.cursors.get(&s).copied())
            .unwrap_or(0)
    }

    /// Records that every node before `node_index` refused a pod of
    /// `signature` (undone by rollback).
    pub fn refused_before(&mut self, signature: Option<u64>, node_index: usize) {
        let Some(signature) = signature else {
            return;
        };
        let previous = self.cursors.get(&signature).copied();
        if previous.is_some_and(|p| p >= node_index) {
            return;
        }
        self.cursors.insert(signature, node_index);
        self.undo.push(Undo::Cursor {
            signature,
            previous,
        });
    }

    /// Adds a node that does not exist yet (a node-group template node) with
    /// the ResourceSlices its drivers would publish. Returns its index; node
    /// indices of earlier nodes do not change.
    pub fn add_node(&mut self, node: Node, slices: Vec<ResourceSlice>) -> usize {
        let name = node.metadata.name.clone().unwrap_or_default();
        for slice in slices {
            self.dra.add_slice(slice);
        }
        let index = self.nodes.len();
        self.drop_stale_prepared();
        self.filters.add_node(&node);
        self.node_index.insert(name, index);
        self.nodes.push(node);
        self.undo.push(Undo::NodeAdded);
        self.generation += 1;
        index
    }

    /// Adds a pod that does not exist yet (a DaemonSet's pod for a template
    /// node), unbound; returns its index.
    pub fn add_pod(&mut self, pod: Pod) -> usize {
        self.pods.push(pod);
        self.undo.push(Undo::PodAdded);
        self.pods.len() - 1
    }

    /// Marks the current state so that [`Snapshot::rollback`] can return to it.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint(self.undo.len())
    }

    /// Keeps everything since `checkpoint`. Committing the outermost checkpoint
    /// drops the undo log, so long simulations do not accumulate it.
    pub fn commit(&mut self, checkpoint: Checkpoint) {
        if checkpoint.0 == 0 {
            self.undo.clear();
        }
    }

    /// Makes everything so far permanent: drops the undo log. Only for a
    /// caller that holds no checkpoint (older checkpoints become invalid).
    pub fn seal(&mut self) {
        self.undo.clear();
    }

    /// Forgets the PreFilter result kept for the last pod checked before the
    /// filters' indexes change: it would be stale anyway, and while it shares
    /// their per-domain columns and counts, every change would copy them
    /// whole (copy on write), making each added node or pod cost O(nodes).
    fn drop_stale_prepared(&mut self) {
        self.prepared = None;
    }

    /// Undoes every node added and pod bound since `checkpoint`.
    pub fn rollback(&mut self, checkpoint: Checkpoint) {
        self.drop_stale_prepared();
        self.generation += 1;
        while self.undo.len() > checkpoint.0 {
            let Some(change) = self.undo.pop() else {
                break;
            };
            match change {
                Undo::Cursor {
                    signature,
                    previous,
                } => match previous {
                    Some(p) => {
                        self.cursors.insert(signature, p);
                    }
                    None => {
                        self.cursors.remove(&signature);
                    }
                },
                Undo::PodAdded => {
                    let index = self.pods.len().saturating_sub(1);
                    self.pods.pop();
                    self.signatures.truncate(index);
                    self.stateless_prepared.remove(&index);
                    if matches!(&self.prepared, Some((p, _, _)) if *p == index) {
                        self.prepared = None;
                    }
                }
                Undo::NodeAdded => {
                    self.filters.remove_last_node();
                    if let Some(node) = self.nodes.pop() {
                        let name = node.metadata.name.unwrap_or_default();
                        self.dra.remove_slices_for_node(&name);
                        self.node_index.remove(&name);
                    }
                }
                Undo::PodUnbound(unbound) => self.undo_unbind(*unbound),
                Undo::PodBound {
                    pod_index,
                    previous_node,
                    claims,
                    allocations,
                } => {
                    self.filters.remove_last_pod(&self.pods[pod_index]);
                    if let Some(spec) = self.pods[pod_index].spec.as_mut() {
                        spec.node_name = previous_node;
                    }
                    for allocation in &allocations {
                        self.allocated.remove_allocation(allocation, &self.gates);
                    }
                    for (key, status) in claims {
                        if let Some(claim) = self.claims.get_mut(&key) {
                            claim.status = status;
                        }
                    }
                }
            }
        }
    }

    /// The node a pod is bound to (in the snapshot or by this simulation).
    #[must_use]
    pub fn pod_node(&self, pod_index: usize) -> Option<usize> {
        let name = self.pods[pod_index].spec.as_ref()?.node_name.as_deref()?;
        self.node_index(name)
    }

    /// An allocatable resource list (a node template's), parsed once, for
    /// [`Snapshot::usage_fits`].
    pub fn allocatable_from(
        &mut self,
        list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    ) -> crate::filters::Allocatable {
        self.filters.allocatable_from(list)
    }

    /// What `node_index` has left within `target`: CPU (millicores), memory
    /// (bytes) and pod slots, each possibly negative.
    #[must_use]
    pub fn room_within(
        &self,
        node_index: usize,
        target: &crate::filters::Allocatable,
    ) -> Option<(i64, i64, i64)> {
        self.filters.room_within(node_index, target)
    }

    /// Pod `pod_index`'s requests as an amount for [`Snapshot::usage_fits`];
    /// `None` when a request is not a quantity.
    pub fn requests_of(&mut self, pod_index: usize) -> Option<crate::filters::Allocatable> {
        let pod = self.pods.get(pod_index)?;
        self.filters.requests_of(pod)
    }

    /// Whether the requests of the pods on `node_index` — plus `extra`, a
    /// pod's [`Snapshot::requests_of`], when given — fit within `target`
    /// (pod slots included): exactly when NodeResourcesFit would pass each
    /// of them, in any order, on a node with that allocatable.
    #[must_use]
    pub fn usage_fits(
        &self,
        node_index: usize,
        extra: Option<&crate::filters::Allocatable>,
        target: &crate::filters::Allocatable,
    ) -> bool {
        self.filters.usage_fits(node_index, extra, target)
    }

    /// Would the scheduler put the pod on this node, and with which devices?
    /// Runs the filters, checks the pod's allocated claims are usable here,
    /// then allocates its other claims. Nothing is committed.
    pub fn check(&mut self, pod_index: usize, node_index: usize, claims: &PodClaims) -> Verdict {
        // A pod without spread or pod-affinity terms, in a cluster without
        // anti-affinity, prepares to the same result whatever is placed:
        // keep it. Others are prepared again after every change.
        let stateless = !self.labels_matter && self.signature(pod_index).is_some();
        if stateless {
            if !self.stateless_prepared.contains_key(&pod_index) {
                let prepared = self.filters.prepare(&self.pods[pod_index], &self.nodes);
                self.stateless_prepared.insert(pod_index, prepared);
            }
        } else {
            let fresh = matches!(&self.prepared, Some((p, g, _)) if *p == pod_index && *g == self.generation);
            if !fresh {
                let prepared = self.filters.prepare(&self.pods[pod_index], &self.nodes);
                self.prepared = Some((pod_index, self.generation, prepared));
            }
        }
        let entry = if stateless {
            self.stateless_prepared.get(&pod_index)
        } else {
            self.prepared.as_ref().map(|(_, _, p)| p)
        };
        let Some(prepared) = entry else {
            return Verdict::Unresolvable("internal: PreFilter result missing".into());
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(reason) => return Verdict::Unresolvable(reason.clone()),
        };
        let node = &self.nodes[node_index];
        let pod = &self.pods[pod_index];
        if let Err(refusal) = self.filters.check(prepared, node_index, node) {
            return Verdict::Refused(refusal.reason(prepared, node));
        }
        let extended = if prepared.extended_via_dra.is_empty() {
            None
        } else {
            extended_resource_claim(pod, node, &self.device_classes, &self.gates)
        };
        for key in &claims.allocated {
            let selector = self
                .claims
                .get(key)
                .and_then(|c| c.status.as_ref())
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.node_selector.as_ref());
            if let Some(selector) = selector {
                match node_selector_matches(selector, node) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Verdict::Refused(format!(
                            "resourceclaim not available on the node: {} is allocated for other nodes",
                            key_string(key)
                        ));
                    }
                    Err(e) => {
                        return Verdict::Fatal(format!(
                            "resourceclaim {}: allocation nodeSelector: {e}",
                            key_string(key)
                        ));
                    }
                }
            }
        }
        if claims.to_allocate.is_empty() && extended.is_none() {
            return Verdict::Fits(Vec::new());
        }
        let mut claim_refs: Vec<&ResourceClaim> = claims
            .to_allocate
            .iter()
            .filter_map(|k| self.claims.get(k))
            .collect();
        if let Some(claim) = &extended {
            claim_refs.push(claim);
        }
        let outcome = self.dra.allocate(
            &self.nodes[node_index],
            &claim_refs,
            &self.allocated,
            &mut self.share_ids,
        );
        match outcome {
            Ok(AllocateOutcome::Allocated(allocations)) => Verdict::Fits(allocations),
            Ok(AllocateOutcome::Unschedulable { reasons }) => {
                Verdict::Refused(if reasons.is_empty() {
                    "cannot allocate all claims".to_string()
                } else {
                    reasons.join("; ")
                })
            }
            Err(AllocError::FailedOnNode(message)) => Verdict::Refused(message),
            Err(AllocError::Fatal(message)) => Verdict::Fatal(message),
        }
    }

    /// The feature gates in force.
    #[must_use]
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// Nodes, in name order.
    #[must_use]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The index of a node by name.
    #[must_use]
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// All pods, bound or pending.
    #[must_use]
    pub fn pods(&self) -> &[Pod] {
        &self.pods
    }

    /// A namespace by name.
    #[must_use]
    pub fn namespace(&self, name: &str) -> Option<&Namespace> {
        self.namespaces.get(name)
    }

    /// A claim by key.
    #[must_use]
    pub fn claim(&self, key: &ObjectKey) -> Option<&ResourceClaim> {
        self.claims.get(key)
    }

    /// Indices of the pods waiting for a node, in the order the simulation
    /// places them: highest priority first, then oldest, then by
    /// namespace/name so that equal pods keep a stable order.
    #[must_use]
    pub fn pending_pods(&self) -> Vec<usize> {
        let mut pending: Vec<usize> = self
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| is_pending(p))
            .map(|(i, _)| i)
            .collect();
        pending.sort_by(|&a, &b| {
            let (pa, pb) = (&self.pods[a], &self.pods[b]);
            priority(pb)
                .cmp(&priority(pa))
                .then_with(|| {
                    pa.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0)
                        .cmp(&pb.metadata.creation_timestamp.as_ref().map(|t| t.0))
                })
                .then_with(|| object_key(&pa.metadata).cmp(&object_key(&pb.metadata)))
        });
        pending
    }

    /// Resolves the claims of a pod as the DynamicResources plugin's PreFilter
    /// does, instantiating claims from templates that the ResourceClaim
    /// controller would already have created.
    ///
    /// # Errors
    /// An operator-readable reason the pod cannot be scheduled anywhere (a
    /// missing claim or template, a claim owned by another pod).
    pub fn resolve_claims(&mut self, pod_index: usize) -> Result<PodClaims, String> {
        let pod = &self.pods[pod_index];
        let pod_key = object_key(&pod.metadata);
        let pod_uid = pod.metadata.uid.clone();
        let namespace = pod_key.0.clone();
        let entries = pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.clone())
            .unwrap_or_default();
        let statuses: BTreeMap<String, Option<String>> = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|s| (s.name.clone(), s.resource_claim_name.clone()))
            .collect();
        let mut resolved = PodClaims::default();
        for entry in entries {
            let key = if let Some(name) = &entry.resource_claim_name {
                (namespace.clone(), name.clone())
            } else if let Some(template_name) = &entry.resource_claim_template_name {
                match statuses.get(&entry.name) {
                    // A recorded nil name means "no claim needed".
                    Some(None) => continue,
                    Some(Some(name)) => (namespace.clone(), name.clone()),
                    None => match self.generated_claim(&pod_key, pod_uid.as_deref(), &entry.name) {
                        Some(key) => key,
                        None => self.instantiate_claim(
                            &pod_key,
                            pod_uid.as_deref(),
                            &entry.name,
                            template_name,
                        )?,
                    },
                }
            } else {
                // Neither source: nothing to resolve, as upstream skips it.
                continue;
            };
            let claim = self.claims.get(&key).ok_or_else(|| {
                format!(
                    "resourceclaim {} (pod claim {:?}) not found",
                    key_string(&key),
                    entry.name
                )
            })?;
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(format!(
                    "resourceclaim {} is being deleted",
                    key_string(&key)
                ));
            }
            let allocated = claim
                .status
                .as_ref()
                .is_some_and(|s| s.allocation.is_some());
            if resolved.allocated.contains(&key) || resolved.to_allocate.contains(&key) {
                continue;
            }
            if allocated {
                resolved.allocated.push(key);
            } else {
                resolved.to_allocate.push(key);
            }
        }
        Ok(resolved)
    }

    /// An existing claim generated for this pod entry: owned by the pod (by
    /// uid when the pod has one) and annotated with the entry's name.
    fn generated_claim(
        &self,
        pod: &ObjectKey,
        pod_uid: Option<&str>,
        entry: &str,
    ) -> Option<ObjectKey> {
        let owner = pod_uid.map_or_else(|| format!("name:{}", pod.1), |uid| format!("uid:{uid}"));
        self.generated
            .get(&(pod.0.clone(), owner, entry.to_string()))
            .cloned()
    }

    /// Indexes a claim the ResourceClaim controller generated for a pod's
    /// claim entry, by (namespace, owner, entry), under the owner's uid and
    /// under its name (a pod read without a uid is matched by name).
    fn index_generated(&mut self, key: &ObjectKey) {
        let Some(claim) = self.claims.get(key) else {
            return;
        };
        let Some(entry) = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION))
        else {
            return;
        };
        let owners: Vec<String> = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.kind == "Pod" && o.controller == Some(true))
            .flat_map(|o| [format!("uid:{}", o.uid), format!("name:{}", o.name)])
            .collect();
        for owner in owners {
            self.generated
                .entry((key.0.clone(), owner, entry.clone()))
                .or_insert_with(|| key.clone());
        }
    }

    fn instantiate_claim(
        &mut self,
        pod: &ObjectKey,
        pod_uid: Option<&str>,
        entry: &str,
        template_name: &str,
    ) -> Result<ObjectKey, String> {
        let template_key = (pod.0.clone(), template_name.to_string());
        let template = self.templates.get(&template_key).ok_or_else(|| {
            format!(
                "resourceclaimtemplate {} (pod claim {entry:?}) not found",
                key_string(&template_key)
            )
        })?;
        // The controller uses generateName with a random suffix; a simulation
        // needs a stable name, so the suffix is left out.
        let key = (pod.0.clone(), format!("{}-{entry}", pod.1));
        let template_spec = template.spec.clone().unwrap_or_default();
        let mut annotations = template_spec
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        annotations.insert(POD_CLAIM_NAME_ANNOTATION.into(), entry.to_string());
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(key.1.clone()),
                namespace: Some(key.0.clone()),
                labels: template_spec
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: pod.1.clone(),
                    uid: pod_uid.unwrap_or_default().to_string(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: template_spec.spec,
            status: None,
        };
        self.claims.insert(key.clone(), claim);
        self.index_generated(&key);
        Ok(key)
    }

    /// Runs the allocator for `claims` on node `node_index`.
    ///
    /// # Errors
    /// As [`DraCatalog::allocate`].
    pub fn allocate(
        &mut self,
        node_index: usize,
        claims: &[ObjectKey],
    ) -> Result<crate::dra::AllocateOutcome, crate::dra::AllocError> {
        let claim_refs: Vec<&ResourceClaim> =
            claims.iter().filter_map(|k| self.claims.get(k)).collect();
        self.dra.allocate(
            &self.nodes[node_index],
            &claim_refs,
            &self.allocated,
            &mut self.share_ids,
        )
    }

    /// Commits a placement: the pod is bound to the node, each newly allocated
    /// claim gets its allocation, and every claim of the pod is reserved for it.
    pub fn bind(
        &mut self,
        pod_index: usize,
        node_index: usize,
        claims: &PodClaims,
        allocations: Vec<AllocationResult>,
    ) {
        let mut keys = claims.to_allocate.clone();
        if allocations.len() > keys.len() {
            // The extended-resource claim the scheduler creates at PreBind.
            let pod = &self.pods[pod_index];
            let pod_key = object_key(&pod.metadata);
            if let Some(mut claim) = extended_resource_claim(
                pod,
                &self.nodes[node_index],
                &self.device_classes,
                &self.gates,
            ) {
                let key = extended_claim_key(&pod_key);
                claim.metadata.name = Some(key.1.clone());
                claim.metadata.namespace = Some(key.0.clone());
                claim.metadata.generate_name = None;
                self.claims.insert(key.clone(), claim);
                keys.push(key);
            }
        }
        let node_name = self.nodes[node_index].metadata.name.clone();
        let saved_claims: Vec<(ObjectKey, Option<ResourceClaimStatus>)> = claims
            .allocated
            .iter()
            .chain(&keys)
            .map(|k| (k.clone(), self.claims.get(k).and_then(|c| c.status.clone())))
            .collect();
        let pod = &mut self.pods[pod_index];
        let previous_node = pod
            .spec
            .as_mut()
            .and_then(|spec| std::mem::replace(&mut spec.node_name, node_name));
        self.undo.push(Undo::PodBound {
            pod_index,
            previous_node,
            claims: saved_claims,
            allocations: allocations.clone(),
        });
        // PreFilter parsed the pod's requests when it was checked: reuse them.
        let prepared = match self.prepared.take() {
            Some((p, _, Ok(prepared))) if p == pod_index => Some(prepared),
            _ => None,
        };
        let prepared = prepared.as_ref().or_else(|| {
            self.stateless_prepared
                .get(&pod_index)
                .and_then(|p| p.as_ref().ok())
        });
        self.filters
            .add_pod_prepared(&self.pods[pod_index], node_index, prepared);
        self.generation += 1;
        let pod = &self.pods[pod_index];
        let consumer = ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        };
        for (key, allocation) in keys.iter().zip(allocations) {
            self.allocated.add_allocation(&allocation, &self.gates);
            if let Some(claim) = self.claims.get_mut(key) {
                let status = claim
                    .status
                    .get_or_insert_with(ResourceClaimStatus::default);
                status.allocation = Some(allocation);
            }
        }
        for key in claims.allocated.iter().chain(&keys) {
            if let Some(claim) = self.claims.get_mut(key) {
                let status = claim
                    .status
                    .get_or_insert_with(ResourceClaimStatus::default);
                status
                    .reserved_for
                    .get_or_insert_with(Vec::new)
                    .push(consumer.clone());
            }
        }
    }
}
