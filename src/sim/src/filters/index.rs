//! The per-topology-domain indexes behind PodTopologySpread and
//! InterPodAffinity, built the way upstream's PreFilter builds its maps but
//! kept alive across pods.
//!
//! Upstream scans every pod on every node in each pod's PreFilter. Replicas of
//! one workload ask the same question (same selector, same topology key), so
//! here the answer is computed once per distinct question and then kept
//! current as pods are placed: a pod placed on a node bumps the counts of
//! every question it matches. Each pod's PreFilter then costs a lookup and a
//! reference-count increment. Counts are shared copy-on-write (`Arc`), so a
//! prepared pod keeps the snapshot it was prepared against.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use super::node_affinity::RequiredNodeAffinity;
use super::node_ports::HostPort;
use super::taint_toleration::{is_do_not_schedule, tolerations_tolerate};
use super::topology::{Domain, DomainCounts, TopologyColumn};
use crate::selectors::{Labels, Selector};

/// What the indexes need to know about a node: its name, labels and taints. (A
/// skeleton `Node` held these before: about 1.5 KB of mostly empty fields per node,
/// and a vector of them copied whole when the planner added its first node: 310 MB
/// allocated at 100,000 nodes, issue #28.)
#[derive(Debug, Clone)]
pub(crate) struct NodeRecord {
    pub(crate) name: Option<String>,
    labels: Option<Labels>,
    taints: Option<Vec<Taint>>,
}

impl NodeRecord {
    /// The parts of `node` the indexes read.
    pub(crate) fn of(node: &Node) -> Self {
        Self {
            name: node.metadata.name.clone(),
            labels: node.metadata.labels.clone(),
            taints: node.spec.as_ref().and_then(|s| s.taints.clone()),
        }
    }

    pub(crate) fn labels(&self) -> Option<&Labels> {
        self.labels.as_ref()
    }
}

/// What the indexes need to know about a pod counted on a node. Namespace and labels
/// are shared between pods that have the same ([`super::labels::Interned`]): the pods of
/// one workload do, and 100,000 copies of them were 54 MB of a large plan (issue #28).
#[derive(Debug, Clone)]
pub(crate) struct PodRecord {
    pub(crate) namespace: Arc<str>,
    pub(crate) labels: Option<Arc<Labels>>,
    /// `metadata.deletionTimestamp` is set.
    pub(crate) terminating: bool,
    pub(crate) node_index: usize,
    /// What else the pod holds where it is placed; `None` for most pods, which hold
    /// neither. Kept so the record alone can be taken off its node again, without the pod
    /// (a state kept between snapshots rolls a plan's placements back this way).
    pub(crate) placed: Option<Box<Placed>>,
}

/// Host ports and required anti-affinity terms of a placed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    pub(crate) ports: Vec<HostPort>,
    pub(crate) anti_terms: Vec<AntiTerm>,
}

impl Placed {
    /// `None` when the pod holds no host port and has no required anti-affinity term.
    pub(crate) fn of(ports: Vec<HostPort>, anti_terms: Vec<AntiTerm>) -> Option<Box<Self>> {
        (!ports.is_empty() || !anti_terms.is_empty()).then(|| Box::new(Self { ports, anti_terms }))
    }
}

/// One affinity-style term: the pod's namespace must be in the set and its
/// labels must match.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Clause {
    pub(crate) namespaces: BTreeSet<String>,
    pub(crate) selector: Selector,
}

impl Clause {
    /// Whether a pod of `namespace` with `labels` matches the clause.
    pub(crate) fn matches(&self, namespace: &str, labels: Option<&Labels>) -> bool {
        self.namespaces.contains(namespace) && self.selector.matches(labels)
    }
}

/// A question about existing pods: do they match all clauses? An empty clause
/// list matches nothing (upstream's `podMatchesAllAffinityTerms` and the
/// spread plugin's empty-selector rule).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PodMatcher {
    pub(crate) clauses: Vec<Clause>,
    /// PodTopologySpread bypasses terminating pods; InterPodAffinity does not.
    pub(crate) skip_terminating: bool,
}

impl PodMatcher {
    pub(crate) fn matches(&self, pod: &PodRecord) -> bool {
        if self.clauses.is_empty() || (self.skip_terminating && pod.terminating) {
            return false;
        }
        self.clauses
            .iter()
            .all(|c| c.matches(&pod.namespace, pod.labels.as_deref()))
    }
}

/// Which nodes a spread constraint counts on (`nodeLabelsMatchSpreadConstraints`
/// plus `matchNodeInclusionPolicies`).
#[derive(Debug, Clone)]
pub(crate) struct MaskSpec {
    /// Every topology key of the pod's constraints: a node must have them all.
    pub(crate) keys: Vec<String>,
    /// `nodeAffinityPolicy: Honor` with the pod's node affinity.
    pub(crate) affinity: Option<RequiredNodeAffinity>,
    /// `nodeTaintsPolicy: Honor` with the pod's tolerations.
    pub(crate) tolerations: Option<Vec<Toleration>>,
}

impl MaskSpec {
    fn cache_key(&self) -> String {
        let affinity = self.affinity.as_ref().map(RequiredNodeAffinity::cache_key);
        let tolerations = self
            .tolerations
            .as_ref()
            .map(|t| serde_json::to_string(t).unwrap_or_default());
        format!("{:?}|{affinity:?}|{tolerations:?}", self.keys)
    }

    fn admits(&self, node: &NodeRecord) -> bool {
        let labels = node.labels();
        if !self
            .keys
            .iter()
            .all(|k| labels.is_some_and(|l| l.contains_key(k)))
        {
            return false;
        }
        if let Some(affinity) = &self.affinity
            && !affinity.matches_name_and_labels(node.name.as_deref().unwrap_or(""), labels)
        {
            return false;
        }
        if let Some(tolerations) = &self.tolerations {
            let taints = node.taints.as_deref().unwrap_or_default();
            if taints
                .iter()
                .any(|t| is_do_not_schedule(t) && !tolerations_tolerate(tolerations, t))
            {
                return false;
            }
        }
        true
    }
}

#[derive(Debug)]
struct Mask {
    spec: MaskSpec,
    admits: Vec<bool>,
}

/// Counts for one matcher: per node, and per (topology key, mask) view.
#[derive(Debug)]
struct MatcherEntry {
    matcher: PodMatcher,
    per_node: Vec<u32>,
    views: HashMap<(String, Option<usize>), Arc<DomainCounts>>,
}

/// A required anti-affinity term of a pod already placed, as it judges an
/// incoming pod: its namespace selector stays a selector, evaluated against
/// the incoming pod's namespace labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AntiTerm {
    pub(crate) namespaces: BTreeSet<String>,
    pub(crate) namespace_selector: Selector,
    pub(crate) selector: Selector,
    pub(crate) topology_key: String,
}

impl AntiTerm {
    /// `AffinityTerm.Matches(incoming, nsLabels)`.
    pub(crate) fn matches(
        &self,
        namespace: &str,
        labels: Option<&Labels>,
        namespace_labels: Option<&Labels>,
    ) -> bool {
        (self.namespaces.contains(namespace) || self.namespace_selector.matches(namespace_labels))
            && self.selector.matches(labels)
    }
}

/// All placed pods that carry one identical anti-affinity term, counted per
/// domain of its topology key.
#[derive(Debug)]
struct AntiGroup {
    term: AntiTerm,
    counts: Arc<DomainCounts>,
}

/// The lazily built, incrementally maintained indexes.
#[derive(Debug, Default)]
pub(crate) struct Index {
    columns: HashMap<String, Arc<TopologyColumn>>,
    masks: Vec<Mask>,
    mask_ids: HashMap<String, usize>,
    matchers: Vec<MatcherEntry>,
    matcher_ids: HashMap<PodMatcher, usize>,
    anti_groups: Vec<AntiGroup>,
    anti_ids: HashMap<AntiTerm, usize>,
    /// Which anti-affinity groups match pods of one namespace and label set:
    /// replicas share labels, and groups are only ever appended, so only the
    /// groups added since the last look need matching.
    anti_matches: HashMap<(String, Option<Labels>), AntiMatches>,
}

/// Groups (by index) whose term matches one kind of pod, among the first
/// `checked` groups.
#[derive(Debug, Default)]
struct AntiMatches {
    checked: usize,
    groups: Vec<usize>,
}

impl Index {
    /// The column of a topology key, built on first use.
    pub(crate) fn column(&mut self, key: &str, nodes: &[NodeRecord]) -> Arc<TopologyColumn> {
        self.columns
            .entry(key.to_string())
            .or_insert_with(|| {
                let mut column = TopologyColumn::new(key);
                for node in nodes {
                    column.push_node(node.labels());
                }
                Arc::new(column)
            })
            .clone()
    }

    /// The id of a spread eligibility mask, built on first use.
    pub(crate) fn mask(&mut self, spec: MaskSpec, nodes: &[NodeRecord]) -> usize {
        let key = spec.cache_key();
        if let Some(id) = self.mask_ids.get(&key) {
            return *id;
        }
        let admits = nodes.iter().map(|n| spec.admits(n)).collect();
        self.masks.push(Mask { spec, admits });
        let id = self.masks.len() - 1;
        self.mask_ids.insert(key, id);
        id
    }

    fn matcher(&mut self, matcher: &PodMatcher, nodes: &[NodeRecord], pods: &[PodRecord]) -> usize {
        if let Some(id) = self.matcher_ids.get(matcher) {
            return *id;
        }
        let mut per_node = vec![0u32; nodes.len()];
        for pod in pods.iter().filter(|p| matcher.matches(p)) {
            if let Some(slot) = per_node.get_mut(pod.node_index) {
                *slot += 1;
            }
        }
        self.matchers.push(MatcherEntry {
            matcher: matcher.clone(),
            per_node,
            views: HashMap::new(),
        });
        let id = self.matchers.len() - 1;
        self.matcher_ids.insert(matcher.clone(), id);
        id
    }

    /// Counts of the pods `matcher` selects per domain of `key`, over the
    /// nodes of `mask` (all nodes when `None`), with the key's column.
    pub(crate) fn view(
        &mut self,
        matcher: &PodMatcher,
        key: &str,
        mask: Option<usize>,
        nodes: &[NodeRecord],
        pods: &[PodRecord],
    ) -> (Arc<TopologyColumn>, Arc<DomainCounts>) {
        let column = self.column(key, nodes);
        let id = self.matcher(matcher, nodes, pods);
        let admits = mask.and_then(|m| self.masks.get(m)).map(|m| &m.admits);
        let entry = &mut self.matchers[id];
        let counts = entry
            .views
            .entry((key.to_string(), mask))
            .or_insert_with(|| {
                let mut counts = DomainCounts::default();
                for (node_index, pods_here) in entry.per_node.iter().enumerate() {
                    if admits.is_some_and(|a| !a.get(node_index).copied().unwrap_or(false)) {
                        continue;
                    }
                    if let Some(Domain::Known(domain)) = column.indexed(node_index) {
                        counts.add_node(domain);
                        counts.add_pods(domain, i64::from(*pods_here));
                    }
                }
                Arc::new(counts)
            })
            .clone();
        (column, counts)
    }

    /// Counts one more placed pod carrying an anti-affinity term.
    pub(crate) fn add_anti_term(
        &mut self,
        term: AntiTerm,
        node_index: usize,
        nodes: &[NodeRecord],
    ) {
        let column = self.column(&term.topology_key, nodes);
        let id = match self.anti_ids.get(&term) {
            Some(id) => *id,
            None => {
                self.anti_groups.push(AntiGroup {
                    term: term.clone(),
                    counts: Arc::new(DomainCounts::default()),
                });
                let id = self.anti_groups.len() - 1;
                self.anti_ids.insert(term, id);
                id
            }
        };
        if let Some(Domain::Known(domain)) = column.indexed(node_index) {
            Arc::make_mut(&mut self.anti_groups[id].counts).add_pods(domain, 1);
        }
    }

    /// The anti-affinity groups whose term rejects an incoming pod somewhere.
    pub(crate) fn matching_anti_groups(
        &mut self,
        namespace: &str,
        labels: Option<&Labels>,
        namespace_labels: Option<&Labels>,
        nodes: &[NodeRecord],
    ) -> Vec<(Arc<TopologyColumn>, Arc<DomainCounts>)> {
        // Most clusters have no anti-affinity at all: skip the memo's key.
        if self.anti_groups.is_empty() {
            return Vec::new();
        }
        let entry = self
            .anti_matches
            .entry((namespace.to_string(), labels.cloned()))
            .or_default();
        for index in entry.checked..self.anti_groups.len() {
            if self.anti_groups[index]
                .term
                .matches(namespace, labels, namespace_labels)
            {
                entry.groups.push(index);
            }
        }
        entry.checked = self.anti_groups.len();
        let matching: Vec<(String, Arc<DomainCounts>)> = entry
            .groups
            .iter()
            .map(|i| &self.anti_groups[*i])
            .filter(|g| g.counts.any_pods())
            .map(|g| (g.term.topology_key.clone(), g.counts.clone()))
            .collect();
        matching
            .into_iter()
            .map(|(key, counts)| (self.column(&key, nodes), counts))
            .collect()
    }

    /// A node was appended (its index is `nodes.len() - 1`).
    pub(crate) fn on_add_node(&mut self, nodes: &[NodeRecord]) {
        let Some(record) = nodes.last() else {
            return;
        };
        let node_index = nodes.len() - 1;
        for column in self.columns.values_mut() {
            Arc::make_mut(column).push_node(record.labels());
        }
        for mask in &mut self.masks {
            let admits = mask.spec.admits(record);
            mask.admits.push(admits);
        }
        for entry in &mut self.matchers {
            entry.per_node.push(0);
            for ((key, mask), counts) in &mut entry.views {
                let admitted =
                    mask.is_none_or(|m| self.masks.get(m).is_some_and(|m| m.admits[node_index]));
                let domain = self.columns.get(key).and_then(|c| c.indexed(node_index));
                if admitted && let Some(Domain::Known(domain)) = domain {
                    Arc::make_mut(counts).add_node(domain);
                }
            }
        }
    }

    /// A pod was counted on a node.
    pub(crate) fn on_add_pod(&mut self, pod: &PodRecord) {
        let node_index = pod.node_index;
        for entry in &mut self.matchers {
            if !entry.matcher.matches(pod) {
                continue;
            }
            if let Some(slot) = entry.per_node.get_mut(node_index) {
                *slot += 1;
            }
            for ((key, mask), counts) in &mut entry.views {
                let admitted = mask.is_none_or(|m| {
                    self.masks
                        .get(m)
                        .is_some_and(|m| m.admits.get(node_index).copied().unwrap_or(false))
                });
                let domain = self.columns.get(key).and_then(|c| c.indexed(node_index));
                if admitted && let Some(Domain::Known(domain)) = domain {
                    Arc::make_mut(counts).add_pods(domain, 1);
                }
            }
        }
    }
}

/// Inverses of the incremental updates, for a simulation rolling back what
/// it tried (always last in, first out).
impl Index {
    /// Forgets everything built on demand (topology columns, spread masks, the counts of
    /// pods matching each selector, and which anti-affinity terms match which pods), and
    /// the anti-affinity groups no placed pod carries any more. What stays is what placed
    /// pods put in eagerly, the groups' per-domain counts, whose domain ids a column
    /// rebuilt from the same nodes gives again (ids follow the nodes' order). A state kept
    /// from one snapshot to the next does this when a plan is rolled back, so the questions
    /// of one plan's pending pods do not pile up, nor cost every pod counted later.
    pub(crate) fn forget_derived(&mut self) {
        self.columns.clear();
        self.forget_matchers();
        if self.anti_groups.iter().any(|g| !g.counts.any_pods()) {
            self.anti_groups.retain(|g| g.counts.any_pods());
            self.anti_ids = self
                .anti_groups
                .iter()
                .enumerate()
                .map(|(id, g)| (g.term.clone(), id))
                .collect();
        }
    }

    /// Forgets the spread masks, the counts of pods matching each selector and which
    /// anti-affinity terms match which pods, but not the topology columns: the groups'
    /// counts are by the columns' domain ids, which a column rebuilt after nodes were
    /// rolled back may not give again (an id stays taken by a value only a rolled-back node
    /// had). Before a rollback, so that undoing each pod and node does not update them.
    pub(crate) fn forget_matchers(&mut self) {
        self.masks.clear();
        self.mask_ids.clear();
        self.matchers.clear();
        self.matcher_ids.clear();
        self.anti_matches.clear();
    }

    /// Per anti-affinity group with pods: its term, and the count of its pods in each
    /// node's domain (for comparing two states, see `FilterState::summary`).
    pub(crate) fn anti_counts_per_node(
        &mut self,
        nodes: &[NodeRecord],
    ) -> Vec<(AntiTerm, Vec<i64>)> {
        let groups: Vec<(AntiTerm, Arc<DomainCounts>)> = self
            .anti_groups
            .iter()
            .filter(|g| g.counts.any_pods())
            .map(|g| (g.term.clone(), g.counts.clone()))
            .collect();
        groups
            .into_iter()
            .map(|(term, counts)| {
                let column = self.column(&term.topology_key, nodes);
                let per_node = (0..nodes.len())
                    .map(|i| column.indexed(i).map_or(0, |d| counts.pods_in(d)))
                    .collect();
                (term, per_node)
            })
            .collect()
    }

    /// The inverse of [`Index::on_add_pod`].
    pub(crate) fn on_remove_pod(&mut self, pod: &PodRecord) {
        let node_index = pod.node_index;
        for entry in &mut self.matchers {
            if !entry.matcher.matches(pod) {
                continue;
            }
            if let Some(slot) = entry.per_node.get_mut(node_index) {
                *slot = slot.saturating_sub(1);
            }
            for ((key, mask), counts) in &mut entry.views {
                let admitted = mask.is_none_or(|m| {
                    self.masks
                        .get(m)
                        .is_some_and(|m| m.admits.get(node_index).copied().unwrap_or(false))
                });
                let domain = self.columns.get(key).and_then(|c| c.indexed(node_index));
                if admitted && let Some(Domain::Known(domain)) = domain {
                    Arc::make_mut(counts).add_pods(domain, -1);
                }
            }
        }
    }

    /// The inverse of [`Index::add_anti_term`]. The group stays (with its
    /// counts back at zero), so group ids cached elsewhere remain valid.
    pub(crate) fn remove_anti_term(
        &mut self,
        term: &AntiTerm,
        node_index: usize,
        nodes: &[NodeRecord],
    ) {
        let Some(&id) = self.anti_ids.get(term) else {
            return;
        };
        let column = self.column(&term.topology_key, nodes);
        if let Some(Domain::Known(domain)) = column.indexed(node_index) {
            Arc::make_mut(&mut self.anti_groups[id].counts).add_pods(domain, -1);
        }
    }

    /// The inverse of [`Index::on_add_node`] for the last node of `nodes`
    /// (called before the node is popped; no pod may remain on it).
    pub(crate) fn on_remove_last_node(&mut self, nodes: &[NodeRecord]) {
        let Some(node_index) = nodes.len().checked_sub(1) else {
            return;
        };
        for entry in &mut self.matchers {
            for ((key, mask), counts) in &mut entry.views {
                let admitted = mask.is_none_or(|m| {
                    self.masks
                        .get(m)
                        .is_some_and(|m| m.admits.get(node_index).copied().unwrap_or(false))
                });
                let domain = self.columns.get(key).and_then(|c| c.indexed(node_index));
                if admitted && let Some(Domain::Known(domain)) = domain {
                    Arc::make_mut(counts).remove_node(domain);
                }
            }
            entry.per_node.truncate(node_index);
        }
        for mask in &mut self.masks {
            mask.admits.truncate(node_index);
        }
        for column in self.columns.values_mut() {
            Arc::make_mut(column).pop_node();
        }
    }
}
