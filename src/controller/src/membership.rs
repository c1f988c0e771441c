//! Which NodeGroup each Node belongs to, as the providers say: the one answer the snapshot,
//! the in-flight accounting, scale-down and the status use.
//!
//! A kubelet registers its Node with `spec.providerID` (`aws:///us-east-1a/i-0abc…`,
//! `gce://project/zone/name`) and the cloud's labels; nothing puts our
//! `dra-autoscaler.io/node-group` label there unless the node pool's `--node-labels` adds it.
//! So, as cluster-autoscaler maps nodes to groups by provider id (its clusterstate registry
//! lists every group's instances, and `NodeGroupForNode` answers for the rest), a Node belongs
//! to the NodeGroup whose provider reports its instance:
//!
//! 1. its providerID is among the instances the group's provider lists (`NodeGroupNodes`,
//!    read once per loop and group: [`ProviderView::instances`]);
//! 2. else its `dra-autoscaler.io/node-group` label names a NodeGroup (the fast path of
//!    clusters whose nodes carry it, and the fallback when a provider cannot list instances);
//! 3. else a provider claimed it through `NodeGroupForNode` ([`ProviderView::for_node`]; asked
//!    only for such nodes, and its answers are kept, see [`Asked`]).
//!
//! The resolution is pure ([`Membership::resolve`]); [`gather`] makes the provider calls.
//! The snapshot hands the planner copies of the Nodes that carry the label of the group
//! resolved here, so the pure planner and scale-down analysis keep reading group membership
//! from labels, whatever the kubelet registered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use dra_api::{NODE_GROUP_LABEL, NodeGroup};
use dra_provider::model::{Instance, InstanceState};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::executor::{ErrorCategory, GroupRef, NodeToDelete, ScaleExecutor};

/// How a node's group was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The group's provider lists the node's instance.
    Instance,
    /// The node's `dra-autoscaler.io/node-group` label.
    Label,
    /// A provider's `NodeGroupForNode` answer.
    ForNode,
}

/// What the providers said in one loop.
#[derive(Debug, Clone, Default)]
pub struct ProviderView {
    /// Per NodeGroup name: the instances its provider lists. A group whose provider could
    /// not list them is absent (its nodes are then found by label or `NodeGroupForNode`).
    pub instances: BTreeMap<String, Vec<Instance>>,
    /// `NodeGroupForNode` answers by providerID: the NodeGroup the provider named, or `None`
    /// when no provider manages the node.
    pub for_node: BTreeMap<String, Option<String>>,
    /// NodeGroups whose provider refused to list their instances because it does not serve
    /// the group (unknown, or found and unusable: a bad launch template, an unknown
    /// instance type), with its message: the loop leaves them out.
    pub refused: BTreeMap<String, String>,
}

/// The group of every Node that belongs to one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Membership {
    by_node: BTreeMap<String, (String, Source)>,
    /// Per group: its registered nodes' names and provider ids.
    per_group: BTreeMap<String, BTreeSet<String>>,
    /// Provider ids of every registered Node, of any group or none.
    registered_ids: BTreeSet<String>,
}

/// `spec.providerID` of a node, when set.
#[must_use]
pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|id| !id.is_empty())
}

fn label(node: &Node) -> Option<&str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_GROUP_LABEL))
        .map(String::as_str)
}

impl Membership {
    /// Resolves the group of each of `nodes` among the NodeGroups named `groups`, from what
    /// the providers said (see the module docs for the order).
    #[must_use]
    pub fn resolve<'a>(
        nodes: impl IntoIterator<Item = &'a Node>,
        groups: &BTreeSet<String>,
        view: &ProviderView,
    ) -> Self {
        let by_instance: BTreeMap<&str, &str> = view
            .instances
            .iter()
            .filter(|(group, _)| groups.contains(*group))
            .flat_map(|(group, instances)| {
                instances
                    .iter()
                    .map(move |i| (i.id.as_str(), group.as_str()))
            })
            .collect();
        let mut membership = Self::default();
        for node in nodes {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            let id = provider_id(node);
            if let Some(id) = id {
                membership.registered_ids.insert(id.to_owned());
            }
            let found = id
                .and_then(|id| by_instance.get(id))
                .map(|g| ((*g).to_owned(), Source::Instance))
                .or_else(|| {
                    label(node)
                        .filter(|g| groups.contains(*g))
                        .map(|g| (g.to_owned(), Source::Label))
                })
                .or_else(|| {
                    id.and_then(|id| view.for_node.get(id))
                        .and_then(Option::as_ref)
                        .filter(|g| groups.contains(*g))
                        .map(|g| (g.clone(), Source::ForNode))
                });
            if let Some((group, source)) = found {
                let ids = membership.per_group.entry(group.clone()).or_default();
                ids.insert(name.to_owned());
                ids.extend(id.map(ToOwned::to_owned));
                membership.by_node.insert(name.to_owned(), (group, source));
            }
        }
        membership
    }

    /// The group of node `name`.
    #[must_use]
    pub fn group_of(&self, name: &str) -> Option<&str> {
        self.by_node.get(name).map(|(g, _)| g.as_str())
    }

    /// The group of `node` (by its name).
    #[must_use]
    pub fn group_of_node(&self, node: &Node) -> Option<&str> {
        node.metadata
            .name
            .as_deref()
            .and_then(|name| self.group_of(name))
    }

    /// How node `name`'s group was found.
    #[must_use]
    pub fn source_of(&self, name: &str) -> Option<Source> {
        self.by_node.get(name).map(|(_, s)| *s)
    }

    /// How many registered Nodes `group` has, and their names and provider ids (providers
    /// answer a scale-up with instance ids, which become the node's providerID).
    #[must_use]
    pub fn registered(&self, group: &str) -> (usize, BTreeSet<String>) {
        let count = self.by_node.values().filter(|(g, _)| g == group).count();
        (
            count,
            self.per_group.get(group).cloned().unwrap_or_default(),
        )
    }

    /// Whether some registered Node has provider id `id`.
    #[must_use]
    pub fn is_registered(&self, id: &str) -> bool {
        self.registered_ids.contains(id)
    }

    /// A copy of `node` carrying the label of its resolved group (the planner reads group
    /// membership from it), or `None` when it needs none: no group, or the label is there.
    #[must_use]
    pub fn labelled(&self, node: &Node) -> Option<Node> {
        let group = self.group_of_node(node)?;
        if label(node) == Some(group) {
            return None;
        }
        let mut node = node.clone();
        node.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(NODE_GROUP_LABEL.to_owned(), group.to_owned());
        Some(node)
    }
}

/// Instances of a group that no registered Node stands for, and that are not being deleted:
/// the machines that never registered (cluster-autoscaler's unregistered nodes).
#[must_use]
pub fn unregistered<'a>(membership: &Membership, instances: &'a [Instance]) -> Vec<&'a Instance> {
    instances
        .iter()
        .filter(|i| i.state != InstanceState::Deleting && !membership.is_registered(&i.id))
        .collect()
}

/// How long a "not managed" answer of `NodeGroupForNode` is believed before it is asked again.
pub const NOT_MANAGED_TTL: SignedDuration = SignedDuration::from_mins(1);

/// Provider answers kept across loops. `NodeGroupForNode` answers by providerID: an
/// instance's group never changes, so a positive answer is kept while the node exists; "not
/// managed" is asked again after [`NOT_MANAGED_TTL`] (a provider may learn of an instance
/// after its node registers). And each group's last instance list: when listing fails (the
/// provider restarting, throttled), the last list stands in, so the group's Nodes do not
/// drop out of it for a loop.
#[derive(Debug, Default)]
pub struct Asked {
    answers: BTreeMap<String, (Option<String>, Timestamp)>,
    listed: BTreeMap<String, Vec<Instance>>,
}

impl Asked {
    fn fresh(&self, id: &str, now: Timestamp) -> Option<&Option<String>> {
        let (answer, at) = self.answers.get(id)?;
        let believed = answer.is_some()
            || at
                .checked_add(NOT_MANAGED_TTL)
                .is_ok_and(|until| until > now);
        believed.then_some(answer)
    }
}

/// `NodeGroupForNode` calls in flight at once while a loop learns which group unlabelled
/// nodes belong to.
const ASKING_AT_ONCE: usize = 16;

/// Asks each provider in turn which group the node `identity` is in, until one names a
/// group: the node's providerID, the NodeGroup that group is (if any), and whether every
/// provider answered.
async fn group_of(
    executor: &dyn ScaleExecutor,
    providers: &BTreeSet<&str>,
    by_provider_id: &BTreeMap<(String, String), String>,
    identity: NodeToDelete,
) -> (String, Option<String>, bool) {
    let mut answer = None;
    let mut asked_all = true;
    for provider in providers {
        match executor.group_for_node(provider, &identity).await {
            Ok(Some(provider_group)) => {
                answer = by_provider_id
                    .get(&((*provider).to_owned(), provider_group.clone()))
                    .cloned();
                if answer.is_none() {
                    tracing::debug!(node = %identity.name, provider, provider_group, "the provider's group of this node has no NodeGroup");
                }
                break;
            }
            Ok(None) => {}
            Err(error) if error.category == ErrorCategory::NotImplemented => {}
            Err(error) => {
                asked_all = false;
                tracing::debug!(node = %identity.name, provider, %error, "NodeGroupForNode failed; asking again next loop");
            }
        }
    }
    (identity.provider_id, answer, asked_all)
}

/// The NodeGroup name of each (provider, provider's group id).
fn names_by_provider_id(groups: &[Arc<NodeGroup>]) -> BTreeMap<(String, String), String> {
    groups
        .iter()
        .filter_map(|g| {
            let name = g.metadata.name.clone()?;
            Some(((g.spec.provider.clone(), g.spec.provider_id.clone()), name))
        })
        .collect()
}

fn group_ref(group: &NodeGroup) -> GroupRef {
    GroupRef {
        name: group.metadata.name.clone().unwrap_or_default(),
        provider: group.spec.provider.clone(),
        provider_id: group.spec.provider_id.clone(),
    }
}

/// Asks the providers what [`Membership::resolve`] needs: every group's instances, then
/// `NodeGroupForNode` for the nodes with a providerID that neither an instance list nor the
/// label places (answers kept in `asked`). A provider that fails or does not implement a call
/// is logged and left out: its nodes fall back to the label.
pub async fn gather(
    executor: &dyn ScaleExecutor,
    groups: &[Arc<NodeGroup>],
    nodes: &[Arc<Node>],
    asked: &std::sync::Mutex<Asked>,
    now: Timestamp,
) -> ProviderView {
    let mut view = ProviderView::default();
    for group in groups {
        let group = group_ref(group);
        match executor.instances(&group).await {
            Ok(instances) => {
                lock(asked)
                    .listed
                    .insert(group.name.clone(), instances.clone());
                view.instances.insert(group.name.clone(), instances);
            }
            Err(error) if error.category == ErrorCategory::NotImplemented => {
                tracing::debug!(node_group = %group.name, "the provider lists no instances; its nodes are known by label");
            }
            Err(error) if error.category == ErrorCategory::Rejected => {
                view.refused
                    .insert(group.name.clone(), error.message.clone());
            }
            Err(error) => {
                let last = lock(asked).listed.get(&group.name).cloned();
                let fallback = if last.is_some() {
                    "its last list of instances stands in"
                } else {
                    "its nodes are known by label this loop"
                };
                tracing::warn!(node_group = %group.name, %error, "unable to list the group's instances; {fallback}");
                if let Some(last) = last {
                    view.instances.insert(group.name.clone(), last);
                }
            }
        }
    }
    let names: BTreeSet<String> = groups
        .iter()
        .filter_map(|g| g.metadata.name.clone())
        .collect();
    let listed: BTreeSet<&str> = view
        .instances
        .values()
        .flatten()
        .map(|i| i.id.as_str())
        .collect();
    let to_ask: Vec<&Node> = nodes
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| label(n).is_none_or(|g| !names.contains(g)))
        .filter(|n| provider_id(n).is_some_and(|id| !listed.contains(id)))
        .collect();
    let by_provider_id = names_by_provider_id(groups);
    let providers: BTreeSet<&str> = groups.iter().map(|g| g.spec.provider.as_str()).collect();
    let mut uncached = Vec::new();
    let mut queued: BTreeSet<&str> = BTreeSet::new();
    for node in to_ask {
        let Some(id) = provider_id(node) else {
            continue;
        };
        // Two Nodes claiming one providerID (outside input): ask once, for the first.
        if !queued.insert(id) {
            continue;
        }
        let cached = lock(asked).fresh(id, now).cloned();
        if let Some(answer) = cached {
            view.for_node.insert(id.to_owned(), answer);
            continue;
        }
        uncached.push(NodeToDelete {
            provider_id: id.to_owned(),
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            annotations: node.metadata.annotations.clone().unwrap_or_default(),
        });
    }
    // Independent questions, asked a few at a time: one after the other, the 10,000
    // unmanaged nodes of a large cluster took a loop 2 s every NOT_MANAGED_TTL (issue #28).
    let asked_now: Vec<(String, Option<String>, bool)> = futures::stream::iter(uncached)
        .map(|identity| group_of(executor, &providers, &by_provider_id, identity))
        .buffer_unordered(ASKING_AT_ONCE)
        .collect()
        .await;
    let mut answers = Vec::new();
    for (id, answer, asked_all) in asked_now {
        view.for_node.insert(id.clone(), answer.clone());
        // A failed call is not an answer: ask again next loop.
        if answer.is_some() || asked_all {
            answers.push((id, answer));
        }
    }
    let mut asked = lock(asked);
    for (id, answer) in answers {
        asked.answers.insert(id, (answer, now));
    }
    // Forget nodes and groups that are gone.
    let present: BTreeSet<&str> = nodes.iter().filter_map(|n| provider_id(n)).collect();
    asked.answers.retain(|id, _| present.contains(id.as_str()));
    asked.listed.retain(|group, _| names.contains(group));
    view
}

fn lock(asked: &std::sync::Mutex<Asked>) -> std::sync::MutexGuard<'_, Asked> {
    asked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::node;

    fn with_id(mut node: Node, id: &str) -> Node {
        node.spec.get_or_insert_with(Default::default).provider_id = Some(id.into());
        node
    }

    fn running(id: &str) -> Instance {
        Instance {
            id: id.into(),
            state: InstanceState::Running,
            error: None,
        }
    }

    fn groups(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Answers `NodeGroupForNode` after a pause, counting the calls in flight: node ids
    /// ending in an even digit are in the provider's group `gpu`, the others unmanaged.
    #[derive(Default)]
    struct SlowAnswers {
        in_flight: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
        calls: std::sync::atomic::AtomicUsize,
    }

    impl ScaleExecutor for SlowAnswers {
        fn increase<'a>(
            &'a self,
            _: &'a crate::executor::IncreaseRequest,
        ) -> futures::future::BoxFuture<
            'a,
            Result<crate::executor::Increased, crate::executor::ScaleError>,
        > {
            unreachable!("membership never scales")
        }

        fn delete_unregistered<'a>(
            &'a self,
            _: &'a GroupRef,
            _: &'a [String],
        ) -> futures::future::BoxFuture<'a, Result<(), crate::executor::ScaleError>> {
            unreachable!("membership never deletes")
        }

        fn group_for_node<'a>(
            &'a self,
            _: &'a str,
            node: &'a NodeToDelete,
        ) -> futures::future::BoxFuture<'a, Result<Option<String>, crate::executor::ScaleError>>
        {
            use std::sync::atomic::Ordering::SeqCst;
            Box::pin(async move {
                self.calls.fetch_add(1, SeqCst);
                let now = self.in_flight.fetch_add(1, SeqCst) + 1;
                self.most.fetch_max(now, SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                self.in_flight.fetch_sub(1, SeqCst);
                let even = node
                    .provider_id
                    .chars()
                    .last()
                    .and_then(|c| c.to_digit(10))
                    .is_some_and(|d| d % 2 == 0);
                Ok(even.then(|| "gpu".to_owned()))
            })
        }
    }

    #[tokio::test]
    async fn unlabelled_nodes_are_asked_about_a_few_at_a_time_and_each_answer_kept() {
        use std::sync::atomic::Ordering::SeqCst;
        let provider = SlowAnswers::default();
        let groups = vec![Arc::new(crate::test_support::node_group("gpu", 100))];
        let nodes: Vec<Arc<Node>> = (0..40)
            .map(|i| {
                Arc::new(with_id(
                    node(&format!("n{i}"), None, true, 60),
                    &format!("fake://{i}"),
                ))
            })
            .collect();
        let asked = std::sync::Mutex::new(Asked::default());
        let now = crate::test_support::now();
        let view = gather(&provider, &groups, &nodes, &asked, now).await;
        for i in 0..40 {
            let expected = (i % 2 == 0).then(|| "gpu".to_owned());
            assert_eq!(
                view.for_node.get(&format!("fake://{i}")),
                Some(&expected),
                "node {i}"
            );
        }
        let most = provider.most.load(SeqCst);
        assert!(
            (2..=ASKING_AT_ONCE).contains(&most),
            "{most} calls in flight at most"
        );
        // The answers are kept: the next loop asks nothing.
        let again = gather(&provider, &groups, &nodes, &asked, now).await;
        assert_eq!(again.for_node, view.for_node);
        assert_eq!(provider.calls.load(SeqCst), 40);
    }

    #[test]
    fn a_node_registered_with_only_a_provider_id_belongs_to_the_group_listing_its_instance() {
        // What an EKS kubelet registers: providerID and cloud labels, not ours.
        let kubelet = with_id(
            node("ip-10-0-0-1.ec2.internal", None, true, 60),
            "aws:///us-east-1a/i-0abc",
        );
        let view = ProviderView {
            instances: BTreeMap::from([
                ("p5".to_owned(), vec![running("aws:///us-east-1a/i-0abc")]),
                ("cpu".to_owned(), vec![running("aws:///us-east-1a/i-0def")]),
            ]),
            ..Default::default()
        };
        let m = Membership::resolve([&kubelet], &groups(&["p5", "cpu"]), &view);
        assert_eq!(m.group_of("ip-10-0-0-1.ec2.internal"), Some("p5"));
        assert_eq!(
            m.source_of("ip-10-0-0-1.ec2.internal"),
            Some(Source::Instance)
        );
        let (count, ids) = m.registered("p5");
        assert_eq!(count, 1);
        assert!(
            ids.contains("aws:///us-east-1a/i-0abc") && ids.contains("ip-10-0-0-1.ec2.internal")
        );
        assert_eq!(m.registered("cpu").0, 0);
        // The planner's copy carries the group's label; the API server's object is untouched.
        let copy = m.labelled(&kubelet).expect("labelled copy");
        assert_eq!(label(&copy), Some("p5"));
        assert_eq!(label(&kubelet), None);
    }

    #[test]
    fn the_provider_s_word_wins_over_the_label_and_the_label_is_the_fallback() {
        let mislabelled = with_id(node("a", Some("cpu"), true, 60), "fake://a");
        let labelled = node("b", Some("cpu"), true, 60);
        let unknown_label = node("c", Some("gone"), true, 60);
        let view = ProviderView {
            instances: BTreeMap::from([("gpu".to_owned(), vec![running("fake://a")])]),
            ..Default::default()
        };
        let m = Membership::resolve(
            [&mislabelled, &labelled, &unknown_label],
            &groups(&["gpu", "cpu"]),
            &view,
        );
        assert_eq!(m.group_of("a"), Some("gpu"));
        assert_eq!(m.group_of("b"), Some("cpu"));
        assert_eq!(m.source_of("b"), Some(Source::Label));
        assert_eq!(
            m.group_of("c"),
            None,
            "a label naming no NodeGroup places nothing"
        );
        assert!(m.labelled(&labelled).is_none(), "already labelled");
    }

    #[test]
    fn node_group_for_node_places_what_no_list_or_label_does() {
        let n = with_id(node("gce-vm", None, true, 60), "gce://p/us-central1-a/vm-1");
        let other = with_id(node("system", None, true, 60), "gce://p/us-central1-a/sys");
        let view = ProviderView {
            for_node: BTreeMap::from([
                (
                    "gce://p/us-central1-a/vm-1".to_owned(),
                    Some("a3".to_owned()),
                ),
                ("gce://p/us-central1-a/sys".to_owned(), None),
            ]),
            ..Default::default()
        };
        let m = Membership::resolve([&n, &other], &groups(&["a3"]), &view);
        assert_eq!(m.group_of("gce-vm"), Some("a3"));
        assert_eq!(m.source_of("gce-vm"), Some(Source::ForNode));
        assert_eq!(m.group_of("system"), None);
        assert!(m.is_registered("gce://p/us-central1-a/sys"));
    }

    #[test]
    fn instances_without_a_node_are_unregistered_unless_being_deleted() {
        let n = with_id(node("n1", None, true, 60), "fake://n1");
        let m = Membership::resolve([&n], &groups(&["g"]), &ProviderView::default());
        let instances = vec![
            running("fake://n1"),
            running("fake://n2"),
            Instance {
                id: "fake://n3".into(),
                state: InstanceState::Deleting,
                error: None,
            },
        ];
        let ids: Vec<&str> = unregistered(&m, &instances)
            .iter()
            .map(|i| i.id.as_str())
            .collect();
        assert_eq!(ids, vec!["fake://n2"]);
    }

    #[test]
    fn not_managed_answers_expire_and_positive_ones_stay() {
        let mut asked = Asked::default();
        let t0 = crate::test_support::now();
        asked.answers.insert("x".into(), (None, t0));
        asked.answers.insert("y".into(), (Some("g".into()), t0));
        assert_eq!(asked.fresh("x", t0), Some(&None));
        let later = t0 + SignedDuration::from_mins(2);
        assert_eq!(asked.fresh("x", later), None);
        assert_eq!(asked.fresh("y", later), Some(&Some("g".to_owned())));
    }
}
