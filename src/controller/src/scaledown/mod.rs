//! Scale-down in the loop: the pure analysis ([`dra_plan::scaledown`]) decides; this module
//! remembers how long nodes have been unneeded, taints and removes the nodes whose time has
//! come, and reports.
//!
//! ```text
//!  loop ──► analyse(snapshot after the plan, unneeded-since, removals under way)
//!             │ unneeded ──► NodeGroup status.unneededNodes (survives restarts), gauge
//!             │ blocked  ──► Event NotRemovable on the node
//!             │ abandoned ─► untaint (a removal whose pods can no longer go anywhere)
//!             └ scaleDowns ─► taint, then in a task: evict (PDBs) ─► provider DeleteNodes
//!                              ok: Event ScaleDown/ScaleDownEmpty, counter
//!                              failed or timed out: untaint, Event ScaleDownFailed
//! ```
//!
//! Crash safety. The taint is written before anything is evicted, and it is the record of a
//! removal under way: a restarted controller (or a new leader) finds nodes carrying it that no
//! task of its own is removing, and either finishes the removal (its pods can still go
//! elsewhere) or reverts it (takes the taint off). Unneeded-since times live in the NodeGroup
//! status, as cluster-autoscaler keeps them in its deletion-candidate taints, so a restart does
//! not restart the clock. No node is removed for `--scale-down-delay-after-add` after a
//! scale-up (the groups' `status.lastScaleUp` records it across restarts).

mod actuation;
pub mod taint;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dra_api::{NodeGroup, ScaleUpOutcome, UnneededNode};
use dra_plan::handback::analyse_handing_back;
use dra_plan::report::PlanReport;
use dra_plan::scaledown::{ScaleDownDefaults, ScaleDownOptions, ScaleDownReport, Unremovable};
use dra_sim::{ClusterObjects, FeatureGates};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;

use crate::events::{EventSink, Notice};
use crate::executor::{GroupRef, ScaleExecutor};
use crate::metrics::{GroupLabels, Metrics, ScaleDownLabels};
use crate::status::StatusWriter;

pub use crate::catalog::{NOT_REMOVABLE, SCALE_DOWN, SCALE_DOWN_EMPTY, SCALE_DOWN_FAILED};

/// Scale-down settings of the controller.
#[derive(Debug, Clone)]
pub struct ScaleDownConfig {
    /// The defaults under each group's `spec.scaleDown`.
    pub defaults: ScaleDownDefaults,
    /// No removal this long after a scale-up.
    pub delay_after_add: SignedDuration,
    /// At most this many removals under way.
    pub max_parallelism: usize,
    /// Time limit of one removal (evictions and termination).
    pub max_graceful_termination: SignedDuration,
    /// Pause between retries of a refused eviction.
    pub eviction_retry: Duration,
    /// `false` (dry run): analyse and report, but taint, evict and delete nothing.
    pub actuate: bool,
}

/// What scale-down did in one loop.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScaleDownSummary {
    /// The analysis, when it ran.
    pub report: Option<ScaleDownReport>,
    /// Removals started in this loop (node names).
    pub started: Vec<String>,
    /// Removals found under way from before a restart and resumed.
    pub resumed: Vec<String>,
    /// Removals found under way that could no longer finish, reverted.
    pub reverted: Vec<String>,
    /// Why nothing was removed although nodes could go (`scale-up cooldown until …`).
    pub held: Option<String>,
    /// How long the analysis took (its snapshot's indexing included).
    pub analysis: Duration,
}

/// Removals this process is running, and machines it deleted recently (their Node objects
/// may linger a while, still tainted: they are not removals from before a restart).
#[derive(Debug, Default)]
struct Removals {
    running: BTreeSet<String>,
    deleted: BTreeMap<String, Timestamp>,
}

/// How long a deleted node is remembered as such.
const DELETED_MEMORY: SignedDuration = SignedDuration::from_mins(30);

/// The scale-down part of the loop.
pub struct ScaleDowns {
    client: kube::Client,
    evictions: kube::Client,
    executor: Arc<dyn ScaleExecutor>,
    events: Arc<EventSink>,
    metrics: Arc<Metrics>,
    config: ScaleDownConfig,
    removals: Arc<Mutex<Removals>>,
}

impl std::fmt::Debug for ScaleDowns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScaleDowns")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What one loop hands to scale-down.
#[derive(Debug)]
pub struct LoopState<'a> {
    /// The planner's input objects (Nodes, Pods, DRA objects, extras).
    pub objects: ClusterObjects,
    /// Where the analysis hands the nodes and pods of `objects` back, as they were given,
    /// when it ran (see `dra_plan::handback`).
    pub hand_back: Option<tokio::sync::oneshot::Sender<(Vec<Node>, Vec<Pod>)>>,
    /// Every NodeGroup, with the status the loop wrote.
    pub groups: &'a BTreeMap<String, NodeGroup>,
    /// The loop's plan (empty when nothing was pending).
    pub plan: &'a PlanReport,
    /// Registered nodes still booting (never candidates).
    pub booting: &'a [String],
    /// The Nodes as the API server has them.
    pub nodes: &'a [Arc<Node>],
    /// The group of each node.
    pub membership: &'a crate::membership::Membership,
    /// Groups scaled up in this loop.
    pub scaled_up_now: bool,
    /// The time of the loop.
    pub now: Timestamp,
}

fn lock(removals: &Mutex<Removals>) -> std::sync::MutexGuard<'_, Removals> {
    removals.lock().unwrap_or_else(PoisonError::into_inner)
}

fn group_ref(group: &NodeGroup) -> GroupRef {
    GroupRef {
        name: group.metadata.name.clone().unwrap_or_default(),
        provider: group.spec.provider.clone(),
        provider_id: group.spec.provider_id.clone(),
    }
}

fn notice(regarding: ObjectReference, warning: bool, reason: &'static str, note: String) -> Notice {
    Notice {
        regarding,
        warning,
        reason,
        action: "ScaleDown",
        note,
    }
}

/// Whole seconds: what a `metav1.Time` keeps on the wire.
fn seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// When scale-down may act again, `delay` after the last successful scale-up of any group (this
/// loop's, or the latest `status.lastScaleUp` that succeeded), if that is still ahead of `now`.
/// Failed scale-ups add nothing, so they hold nothing back.
fn cooldown_until(
    groups: &BTreeMap<String, NodeGroup>,
    scaled_up_now: bool,
    now: Timestamp,
    delay: SignedDuration,
) -> Option<Timestamp> {
    let last = groups
        .values()
        .filter_map(|g| g.status.as_ref()?.last_scale_up.as_ref())
        .filter(|l| l.outcome == ScaleUpOutcome::Succeeded)
        .map(|l| l.time.0)
        .max();
    let last = if scaled_up_now { Some(now) } else { last };
    let until = last?.checked_add(delay).ok()?;
    (until > now).then_some(until)
}

/// `; unneeded since <time> (<how long> before it went)`, or nothing when unknown.
fn unneeded_since(since: Option<Timestamp>, removed: Timestamp) -> String {
    since.map_or_else(String::new, |since| {
        let since = seconds(since);
        let waited = SignedDuration::from_secs(removed.duration_since(since).as_secs().max(0));
        format!("; it was unneeded since {since} ({waited:#} before it went)")
    })
}

impl ScaleDowns {
    /// Scale-down acting through `client` and `executor`. Evictions go through `evictions`,
    /// which should not retry `429 TooManyRequests` itself (kube's default client does, for
    /// minutes): a refused eviction is a PodDisruptionBudget's answer, and the drain retries
    /// it on its own clock within `--max-graceful-termination`.
    #[must_use]
    pub fn new(
        client: kube::Client,
        evictions: kube::Client,
        executor: Arc<dyn ScaleExecutor>,
        events: EventSink,
        metrics: Arc<Metrics>,
        config: ScaleDownConfig,
    ) -> Self {
        Self {
            client,
            evictions,
            executor,
            events: Arc::new(events),
            metrics,
            config,
            removals: Arc::new(Mutex::new(Removals::default())),
        }
    }

    /// Node names whose removal a task of this process is running.
    #[must_use]
    pub fn running(&self) -> BTreeSet<String> {
        lock(&self.removals).running.clone()
    }

    /// Waits until no removal task of this process is running (for tests and shutdown).
    pub async fn settle(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !lock(&self.removals).running.is_empty() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// One loop's scale-down.
    pub async fn run(
        &self,
        state: LoopState<'_>,
        gates: FeatureGates,
        status: &StatusWriter,
    ) -> ScaleDownSummary {
        let mut summary = ScaleDownSummary::default();
        let now = state.now;
        // Removals under way: our tasks, and nodes carrying our taint from before a restart.
        let (running, recently_deleted) = {
            let mut removals = lock(&self.removals);
            removals
                .deleted
                .retain(|_, at| at.checked_add(DELETED_MEMORY).is_ok_and(|end| end > now));
            (
                removals.running.clone(),
                removals.deleted.keys().cloned().collect::<BTreeSet<_>>(),
            )
        };
        let tainted: BTreeMap<String, Arc<Node>> = state
            .nodes
            .iter()
            .filter(|n| taint::is_tainted(n))
            .filter_map(|n| n.metadata.name.clone().map(|name| (name, n.clone())))
            .collect();
        let orphans: BTreeSet<String> = tainted
            .keys()
            .filter(|n| !running.contains(*n) && !recently_deleted.contains(*n))
            .cloned()
            .collect();
        // Removals in flight: our tasks, and removals from before a restart. A machine already
        // deleted is no removal in flight, though its Node may linger (tainted, so neither a
        // candidate nor a destination): counting it would hold `--max-scale-down-parallelism`
        // for as long as it is remembered, as cluster-autoscaler's deletion tracker does not.
        let in_progress: BTreeSet<String> = running.iter().chain(&orphans).cloned().collect();

        let unneeded_since: BTreeMap<String, Timestamp> = state
            .groups
            .values()
            .flat_map(|g| g.status.iter().flat_map(|s| s.unneeded_nodes.iter()))
            .map(|u| (u.name.clone(), u.since.0))
            .collect();
        let mut objects = state.objects;
        // Every group, also those the planner left out (in backoff).
        objects.extra.retain(|o| {
            !(o.kind == "NodeGroup" && o.api_version.starts_with("dra-autoscaler.io/"))
        });
        objects
            .extra
            .extend(state.groups.values().filter_map(crate::snapshot::extra));
        let options = ScaleDownOptions {
            defaults: self.config.defaults,
            now: Some(now),
            unneeded_since: Some(unneeded_since),
            max_parallelism: self.config.max_parallelism,
            in_progress,
            keep: state
                .booting
                .iter()
                .map(|n| (n.clone(), Unremovable::Booting))
                .collect(),
        };
        let plan = state.plan.clone();
        let hand_back = state.hand_back;
        let analysis_started = std::time::Instant::now();
        let report = match tokio::task::spawn_blocking(move || {
            analyse_handing_back(objects, gates, &plan, &options)
        })
        .await
        {
            Ok((report, nodes, pods)) => {
                summary.analysis = analysis_started.elapsed();
                if let Some(hand_back) = hand_back {
                    let _ = hand_back.send((nodes, pods));
                }
                report
            }
            Err(error) => {
                tracing::error!(%error, "the scale-down analysis panicked");
                return summary;
            }
        };

        self.metrics.set_unremovable_nodes(&report);
        self.record_unneeded(&report, state.groups, now, status)
            .await;
        let cooldown = cooldown_until(
            state.groups,
            state.scaled_up_now,
            now,
            self.config.delay_after_add,
        );
        // Within the delay after a scale-up nothing is removed, whatever the nodes' state: why
        // one would be kept is no news then (the nodes just added are usually the ones asked
        // about).
        if cooldown.is_none() {
            self.tell_why_kept(&report, state.nodes, now).await;
        }

        // Removals from before a restart: finish the ones that still can, revert the rest.
        let abandoned: BTreeSet<&str> = report.abandoned.iter().map(|b| b.node.as_str()).collect();
        for name in &orphans {
            let Some(node) = tainted.get(name) else {
                continue;
            };
            if abandoned.contains(name.as_str()) {
                let why = report
                    .abandoned
                    .iter()
                    .find(|b| &b.node == name)
                    .map(|b| b.reason.to_string())
                    .unwrap_or_default();
                if self.config.actuate {
                    self.revert(
                        node,
                        state
                            .membership
                            .group_of(name)
                            .and_then(|g| state.groups.get(g)),
                        &format!("removal under way before a restart cannot finish: {why}"),
                        now,
                    )
                    .await;
                }
                summary.reverted.push(name.clone());
            } else if self.config.actuate
                && let Some(group) = state
                    .membership
                    .group_of(name)
                    .and_then(|g| state.groups.get(g))
            {
                tracing::info!(node = %name, "resuming a removal found under way");
                self.spawn_removal(node.clone(), group, false, None, now);
                summary.resumed.push(name.clone());
            }
        }

        if let Some(until) = cooldown {
            if !report.scale_downs.is_empty() {
                summary.held = Some(format!("scale-up cooldown until {until}"));
            }
        } else if self.config.actuate {
            for removal in &report.scale_downs {
                let Some(node) = state
                    .nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(removal.node.as_str()))
                else {
                    continue;
                };
                let Some(group) = state.groups.get(&removal.node_group) else {
                    continue;
                };
                if let Err(error) = taint::set(&self.client, &removal.node, Some(now)).await {
                    tracing::warn!(%error, node = %removal.node, "unable to taint the node; not removing it");
                    continue;
                }
                tracing::info!(node = %removal.node, node_group = %removal.node_group, reason = %removal.reason, "removing node");
                let since = report
                    .unneeded
                    .iter()
                    .find(|u| u.node == removal.node)
                    .and_then(|u| u.since);
                self.spawn_removal(node.clone(), group, removal.is_empty(), since, now);
                summary.started.push(removal.node.clone());
            }
        }
        summary.report = Some(report);
        summary
    }

    /// Writes each group's `status.unneededNodes` (when it changed) and the gauge.
    async fn record_unneeded(
        &self,
        report: &ScaleDownReport,
        groups: &BTreeMap<String, NodeGroup>,
        now: Timestamp,
        status: &StatusWriter,
    ) {
        for (name, group) in groups {
            let mut unneeded: Vec<UnneededNode> = report
                .unneeded
                .iter()
                .filter(|u| &u.node_group == name)
                .map(|u| UnneededNode {
                    name: u.node.clone(),
                    since: Time(seconds(u.since.unwrap_or(now))),
                })
                .collect();
            unneeded.sort_by(|a, b| a.name.cmp(&b.name));
            self.metrics
                .unneeded_nodes
                .get_or_create(&GroupLabels {
                    node_group: name.clone(),
                })
                .set(i64::try_from(unneeded.len()).unwrap_or(i64::MAX));
            let group = status.freshest(group);
            let mut desired = group.status.clone().unwrap_or_default();
            if desired.unneeded_nodes == unneeded {
                continue;
            }
            desired.unneeded_nodes = unneeded;
            if let Err(error) = status
                .write(crate::status::StatusWrite::UnneededNodes, &group, desired)
                .await
            {
                tracing::warn!(%error, node_group = %name, "unneeded nodes not recorded; retried next loop");
            }
        }
    }

    /// `NotRemovable` on each underused node kept for a reason other than time, as the one
    /// such Event on it; a node kept for no such reason any more (unneeded, busy again, or
    /// removable) loses the one it had, so its last `NotRemovable` never outlives its cause.
    async fn tell_why_kept(&self, report: &ScaleDownReport, nodes: &[Arc<Node>], now: Timestamp) {
        let kept: BTreeMap<&str, &Unremovable> = report
            .scale_down_blocked
            .iter()
            .filter(|b| !b.reason.is_waiting())
            .map(|b| (b.node.as_str(), &b.reason))
            .collect();
        for node in nodes {
            let regarding = node.object_ref(&());
            match kept.get(node.metadata.name.as_deref().unwrap_or_default()) {
                Some(reason) => {
                    self.events
                        .replace(
                            &notice(regarding, false, NOT_REMOVABLE, reason.to_string()),
                            now,
                        )
                        .await;
                }
                None => self.events.retract(&regarding, NOT_REMOVABLE).await,
            }
        }
    }

    async fn revert(&self, node: &Node, group: Option<&NodeGroup>, why: &str, now: Timestamp) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if let Err(error) = taint::set(&self.client, &name, None).await {
            tracing::warn!(%error, node = %name, "unable to take the to-be-deleted taint off");
            return;
        }
        let note = format!("not removing node {name}: {why}");
        self.events
            .publish(
                &notice(node.object_ref(&()), true, SCALE_DOWN_FAILED, note.clone()),
                now,
            )
            .await;
        if let Some(group) = group {
            self.events
                .publish(
                    &notice(group.object_ref(&()), true, SCALE_DOWN_FAILED, note),
                    now,
                )
                .await;
        }
    }

    /// Starts the task that drains `node` and deletes its machine; `since` is when it was first
    /// found unneeded (unknown for a removal resumed after a restart).
    fn spawn_removal(
        &self,
        node: Arc<Node>,
        group: &NodeGroup,
        empty: bool,
        since: Option<Timestamp>,
        now: Timestamp,
    ) {
        let name = node.metadata.name.clone().unwrap_or_default();
        {
            let mut removals = lock(&self.removals);
            if !removals.running.insert(name.clone()) {
                return;
            }
        }
        let removal = actuation::Removal {
            client: self.client.clone(),
            evictions: self.evictions.clone(),
            executor: self.executor.clone(),
            node: name.clone(),
            group: group_ref(group),
            timeout: self.config.max_graceful_termination,
            retry: self.config.eviction_retry,
        };
        let group = group.clone();
        let client = self.client.clone();
        let events = self.events.clone();
        let metrics = self.metrics.clone();
        let removals = self.removals.clone();
        tokio::spawn(async move {
            let outcome = removal.run().await;
            let group_name = group.metadata.name.clone().unwrap_or_default();
            let done_at = Timestamp::now().max(now);
            match outcome {
                Ok(evicted) => {
                    let unneeded = unneeded_since(since, done_at);
                    let (reason, label, note) = if empty && evicted == 0 {
                        (
                            SCALE_DOWN_EMPTY,
                            crate::metrics::SCALED_DOWN_EMPTY,
                            format!("empty node {name} removed{unneeded}"),
                        )
                    } else {
                        (
                            SCALE_DOWN,
                            crate::metrics::SCALED_DOWN_UNDERUTILIZED,
                            format!(
                                "node {name} removed after evicting {evicted} pod(s){unneeded}"
                            ),
                        )
                    };
                    metrics
                        .scaled_down_nodes
                        .get_or_create(&ScaleDownLabels {
                            node_group: group_name.clone(),
                            reason: label.to_string(),
                        })
                        .inc();
                    tracing::info!(node = %name, node_group = %group_name, evicted, "node removed");
                    events
                        .publish(
                            &notice(node.object_ref(&()), false, reason, note.clone()),
                            done_at,
                        )
                        .await;
                    events
                        .publish(&notice(group.object_ref(&()), false, reason, note), done_at)
                        .await;
                    let mut removals = lock(&removals);
                    removals.running.remove(&name);
                    removals.deleted.insert(name, done_at);
                }
                Err(failed) => {
                    tracing::warn!(node = %name, node_group = %group_name, error = %failed, "removal failed; untainting");
                    if let Err(error) = taint::set(&client, &name, None).await {
                        tracing::warn!(%error, node = %name, "unable to take the to-be-deleted taint off");
                    }
                    let note = format!("failed to remove node {name}: {failed}");
                    events
                        .publish(
                            &notice(node.object_ref(&()), true, SCALE_DOWN_FAILED, note.clone()),
                            done_at,
                        )
                        .await;
                    events
                        .publish(
                            &notice(group.object_ref(&()), true, SCALE_DOWN_FAILED, note),
                            done_at,
                        )
                        .await;
                    lock(&removals).running.remove(&name);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn group(last_scale_up: Option<(&str, &str)>) -> NodeGroup {
        let mut value = serde_json::json!({
            "apiVersion": "dra-autoscaler.io/v1alpha1", "kind": "NodeGroup",
            "metadata": {"name": "g"},
            "spec": {"provider": "fake", "providerID": "g", "minSize": 0, "maxSize": 4,
                "capacityType": "on-demand", "pricePerHour": 1.0,
                "template": {"capacity": {"cpu": "4"}}}
        });
        if let Some((time, outcome)) = last_scale_up {
            value["status"] = serde_json::json!({"lastScaleUp": {
                "time": time, "count": 1, "outcome": outcome}});
        }
        serde_json::from_value(value).unwrap()
    }

    fn groups(list: Vec<NodeGroup>) -> BTreeMap<String, NodeGroup> {
        list.into_iter()
            .enumerate()
            .map(|(i, g)| (format!("g{i}"), g))
            .collect()
    }

    #[test]
    fn no_removal_within_the_delay_after_a_successful_scale_up() {
        let delay = SignedDuration::from_mins(10);
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        let recent = groups(vec![
            group(Some(("2026-12-01T11:40:00Z", "Succeeded"))),
            group(Some(("2026-12-01T11:55:00Z", "Succeeded"))),
        ]);
        assert_eq!(
            cooldown_until(&recent, false, now, delay),
            Some("2026-12-01T12:05:00Z".parse().unwrap()),
            "the latest scale-up of any group counts"
        );
        let old = groups(vec![group(Some(("2026-12-01T11:50:00Z", "Succeeded")))]);
        assert_eq!(
            cooldown_until(&old, false, now, delay),
            None,
            "ten minutes have passed"
        );
        let failed = groups(vec![group(Some(("2026-12-01T11:59:00Z", "Failed")))]);
        assert_eq!(cooldown_until(&failed, false, now, delay), None);
        assert_eq!(
            cooldown_until(&groups(vec![group(None)]), false, now, delay),
            None
        );
        assert_eq!(
            cooldown_until(&old, true, now, delay),
            Some("2026-12-01T12:10:00Z".parse().unwrap()),
            "a scale-up in this loop starts the delay now"
        );
        assert_eq!(
            cooldown_until(&old, true, now, SignedDuration::ZERO),
            None,
            "no delay configured"
        );
    }
}
