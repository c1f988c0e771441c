//! In-flight capacity: nodes a group was asked for that have not registered.
//!
//! The record lives in the NodeGroup status, never only in memory, so a
//! restarted controller or a new leader sees what was asked for and does not
//! ask again. `status.upcomingNodes` is the authority: one entry per machine
//! requested, written *before* the provider is called; `targetSize` is the size
//! the provider was asked to reach. Each loop reconciles the record against the
//! Nodes that registered:
//!
//! - an entry whose name is a registered Node of the group, by name or by
//!   `spec.providerID` (providers answer with instance ids), is done;
//! - registered nodes that match no entry by name still account for entries:
//!   when `targetSize - registered` drops below the number of entries, the
//!   oldest entries are done (providers do not always know node names up front);
//! - an entry older than the max provision time has timed out: the caller asks
//!   the provider to delete it and backs the group off.
//!
//! A request's answer moves the record on ([`record_intent`], [`confirm`],
//! [`release`], [`unconfirmed_lost`]): those functions are the only place the
//! sizes are recomputed from the entries. An all-or-nothing request also leaves
//! an `unconfirmedRequests` entry until its answer is recorded, so one whose
//! answer was lost is re-sent with the same request id instead of waiting out
//! the provision time; the entry goes once none of its placeholders is left.
//!
//! Nodes that registered but are not Ready yet are not upcoming here; the
//! snapshot builder lets them stand in as their group's template instead.

use std::collections::BTreeSet;

use dra_api::{NodeGroupSpec, NodeGroupStatus, UnconfirmedRequest, UpcomingNode};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The outcome of reconciling one group.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciled {
    /// The status to write (unchanged fields copied).
    pub status: NodeGroupStatus,
    /// Entries that timed out in this pass, oldest first.
    pub timed_out: Vec<UpcomingNode>,
    /// Entries that registered in this pass.
    pub registered: usize,
    /// Scale-ups whose machines registered although no answer of the provider was ever
    /// recorded for them, oldest first: the controller that asked stopped (or lost its lease)
    /// between the intent and the answer. The caller records and reports them.
    pub adopted: Vec<Adopted>,
}

/// A scale-up found done by its nodes, whose answer was never recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    /// When it was asked for (its placeholders' `requestedAt`).
    pub requested_at: Timestamp,
    /// Its request id, when its placeholders still carry it.
    pub request_id: Option<String>,
    /// Its machines that registered in this pass.
    pub count: usize,
}

/// The request id a placeholder [`placeholders`] named (`<request id>-<n>`), if `name` is one.
fn request_of(name: &str) -> Option<&str> {
    let (id, n) = name.rsplit_once('-')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(id)
}

/// Of the entries done in this pass, those asked for after the last recorded answer
/// (`lastScaleUp`, written with the intent's time when the answer comes): nobody recorded
/// their answer, so their purchase is reported now, per request.
fn unrecorded(done: &[UpcomingNode], status: &NodeGroupStatus) -> Vec<Adopted> {
    let answered_up_to = status.last_scale_up.as_ref().map(|l| l.time.0);
    let mut adopted: Vec<Adopted> = Vec::new();
    for entry in done {
        let at = entry.requested_at.0;
        if answered_up_to.is_some_and(|last| at <= last) {
            continue;
        }
        match adopted.iter_mut().find(|a| a.requested_at == at) {
            Some(a) => a.count += 1,
            None => adopted.push(Adopted {
                requested_at: at,
                request_id: request_of(&entry.name).map(str::to_owned),
                count: 1,
            }),
        }
    }
    adopted
}

/// Reconciles `status` with the group's `registered` nodes at `now`;
/// `known_ids` holds their names and provider ids.
#[must_use]
pub fn reconcile(
    status: &NodeGroupStatus,
    registered: usize,
    known_ids: &BTreeSet<String>,
    now: Timestamp,
    max_provision_time: SignedDuration,
) -> Reconciled {
    let mut entries: Vec<UpcomingNode> = status.upcoming_nodes.clone();
    entries.sort_by(|a, b| {
        a.requested_at
            .0
            .cmp(&b.requested_at.0)
            .then_with(|| a.name.cmp(&b.name))
    });
    let before = entries.len();
    let (mut done, rest): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .partition(|e| known_ids.contains(&e.name));
    entries = rest;

    // Registered nodes the entries do not name: the provider's names differ
    // from our placeholders. The target tells how many are still missing.
    let target = usize::try_from(status.target_size.max(0)).unwrap_or(0);
    let missing = target.saturating_sub(registered);
    if entries.len() > missing {
        let count = entries.len() - missing;
        done.extend(entries.drain(..count));
    }
    let registered_now = before - entries.len();
    done.sort_by_key(|a| a.requested_at.0);
    let adopted = unrecorded(&done, status);

    let (timed_out, waiting): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| {
        e.requested_at
            .0
            .checked_add(max_provision_time)
            .is_ok_and(|deadline| deadline <= now)
    });

    let mut status = status.clone();
    status.current_size = i32::try_from(registered).unwrap_or(i32::MAX);
    status.upcoming_nodes = waiting;
    // A request none of whose machines is still awaited has been answered by
    // the nodes themselves (or given up on): nothing to re-send.
    let awaited = &status.upcoming_nodes;
    status.unconfirmed_requests.retain(|r| {
        awaited
            .iter()
            .any(|e| is_placeholder_of(&e.name, &r.request_id))
    });
    resize(&mut status);
    Reconciled {
        status,
        timed_out,
        registered: registered_now,
        adopted,
    }
}

/// What to give back for entries that timed out, from the instances the group's provider
/// lists that no Node registered for (cluster-autoscaler deletes such long-unregistered
/// machines by instance id, and drops only never-started ones from the target).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GiveBack {
    /// Machines to delete by instance id (`NodeGroupDeleteNodes`), each with the timed-out
    /// entry it stands for.
    pub delete: Vec<(UpcomingNode, String)>,
    /// Timed-out entries no machine stands for: the provider never started them; only its
    /// target drops (`NodeGroupDecreaseTargetSize`).
    pub never_started: Vec<UpcomingNode>,
}

/// Matches timed-out entries with the `unregistered` instance ids of their group: an entry
/// named after an instance (the provider answered its request with ids) takes that one; a
/// placeholder takes one no other entry (timed out or still awaited) names, in the
/// provider's order; what is left never started. An entry named after an instance that is
/// not unregistered any more (gone, or being deleted) needs nothing.
#[must_use]
pub fn give_back(
    timed_out: &[UpcomingNode],
    waiting: &[UpcomingNode],
    unregistered: &[&str],
) -> GiveBack {
    let named: BTreeSet<&str> = timed_out
        .iter()
        .chain(waiting)
        .map(|e| e.name.as_str())
        .collect();
    let mut free = unregistered.iter().filter(|id| !named.contains(**id));
    let mut out = GiveBack::default();
    for entry in timed_out {
        if unregistered.contains(&entry.name.as_str()) {
            out.delete.push((entry.clone(), entry.name.clone()));
        } else if is_instance_id(&entry.name) {
            // Its machine is gone already.
        } else if let Some(id) = free.next() {
            out.delete.push((entry.clone(), (*id).to_owned()));
        } else {
            out.never_started.push(entry.clone());
        }
    }
    out
}

/// Whether an entry is named after a provider's instance (`aws:///…`, `gce://…`,
/// `fake://…`) rather than a placeholder of ours.
#[must_use]
pub fn is_instance_id(name: &str) -> bool {
    name.contains("://")
}

/// Free slots of a reservation, shared by every group it backs:
/// `total - Σ(current + upcoming)` over those groups, never below 0.
#[must_use]
pub fn reserved_left<'a>(
    spec: &NodeGroupSpec,
    all: impl IntoIterator<Item = (&'a NodeGroupSpec, &'a NodeGroupStatus)>,
) -> Option<i32> {
    let reservation = spec.reservation.as_ref()?;
    let used: i64 = all
        .into_iter()
        .filter(|(s, _)| {
            s.reservation
                .as_ref()
                .is_some_and(|r| r.id == reservation.id)
        })
        .map(|(_, st)| i64::from(st.current_size.max(0)) + i64::from(st.upcoming_size.max(0)))
        .sum();
    Some(i32::try_from((i64::from(reservation.total) - used).max(0)).unwrap_or(0))
}

/// Placeholder entries for a request of `count` machines, written before the
/// provider is called. The names embed the request id so they are unique and
/// a log line can tie a node back to the request.
#[must_use]
pub fn placeholders(request_id: &str, count: usize, now: Timestamp) -> Vec<UpcomingNode> {
    (0..count)
        .map(|i| UpcomingNode {
            name: format!("{request_id}-{i}"),
            requested_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
        })
        .collect()
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `upcomingSize` and `targetSize` from the entries and the registered nodes.
fn resize(status: &mut NodeGroupStatus) {
    status.upcoming_size = to_i32(status.upcoming_nodes.len());
    status.target_size = status
        .current_size
        .max(0)
        .saturating_add(status.upcoming_size);
}

/// Whether `name` is one of the placeholders [`placeholders`] made for `request_id`.
fn is_placeholder_of(name: &str, request_id: &str) -> bool {
    name.strip_prefix(request_id)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

/// Records, before the provider is called, that `count` machines are asked for
/// under `request_id`; an all-or-nothing request (`atomic_min`) is also kept as
/// unconfirmed until its answer is recorded.
pub fn record_intent(
    status: &mut NodeGroupStatus,
    request_id: &str,
    count: usize,
    atomic_min: Option<usize>,
    now: Timestamp,
) {
    status
        .upcoming_nodes
        .extend(placeholders(request_id, count, now));
    if let Some(min) = atomic_min {
        status.unconfirmed_requests.push(UnconfirmedRequest {
            request_id: request_id.to_string(),
            count: to_i32(count),
            min_count: to_i32(min),
        });
    }
    resize(status);
}

/// The provider started `started` machines for `request_id`: the surplus
/// placeholders go, the others take the instance ids when the provider gave
/// one per machine, and the request is confirmed.
pub fn confirm(
    status: &mut NodeGroupStatus,
    request_id: &str,
    started: usize,
    instance_ids: &[String],
) {
    let (mut mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut status.upcoming_nodes)
        .into_iter()
        .partition(|e| is_placeholder_of(&e.name, request_id));
    mine.truncate(started);
    if instance_ids.len() == mine.len() {
        for (entry, id) in mine.iter_mut().zip(instance_ids) {
            entry.name.clone_from(id);
        }
    }
    status.upcoming_nodes = others;
    status.upcoming_nodes.extend(mine);
    forget(status, request_id);
}

/// Nothing of `request_id` exists (the provider refused, or the request never
/// reached it): its placeholders and its record go.
pub fn release(status: &mut NodeGroupStatus, request_id: &str) {
    status
        .upcoming_nodes
        .retain(|e| !is_placeholder_of(&e.name, request_id));
    forget(status, request_id);
}

/// The machines `request_id` started (`instance_ids`, when the provider named them) are
/// being given back (a gang that did not start whole): its entries go, whether still named
/// after the request or after the instances.
pub fn withdraw(status: &mut NodeGroupStatus, request_id: &str, instance_ids: &[String]) {
    status
        .upcoming_nodes
        .retain(|e| !is_placeholder_of(&e.name, request_id) && !instance_ids.contains(&e.name));
    forget(status, request_id);
}

/// The answer to `request_id` is lost and the request cannot be sent again
/// safely (a plain increase has no request id): its placeholders stay until
/// the machines register or time out, and nothing is re-sent.
pub fn unconfirmed_lost(status: &mut NodeGroupStatus, request_id: &str) {
    forget(status, request_id);
}

fn forget(status: &mut NodeGroupStatus, request_id: &str) {
    status
        .unconfirmed_requests
        .retain(|r| r.request_id != request_id);
    resize(status);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{ago, now};

    fn entry(name: &str, age: i64) -> UpcomingNode {
        UpcomingNode {
            name: name.into(),
            requested_at: ago(age),
        }
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_string()).collect()
    }

    const MAX: SignedDuration = SignedDuration::from_mins(15);

    #[test]
    fn nothing_registered_keeps_every_entry_upcoming() {
        // One node was there when three more were asked for.
        let status = NodeGroupStatus {
            target_size: 4,
            upcoming_nodes: vec![entry("a", 60), entry("b", 60), entry("c", 60)],
            ..Default::default()
        };
        let r = reconcile(&status, 1, &names(&["old"]), now(), MAX);
        assert_eq!(r.status.upcoming_size, 3);
        assert_eq!(r.status.current_size, 1);
        assert_eq!(r.status.target_size, 4);
        assert!(r.timed_out.is_empty());
    }

    #[test]
    fn node_registering_under_its_entry_name_completes_it() {
        let status = NodeGroupStatus {
            target_size: 2,
            upcoming_nodes: vec![entry("a", 60), entry("b", 30)],
            ..Default::default()
        };
        let r = reconcile(&status, 1, &names(&["b"]), now(), MAX);
        assert_eq!(r.status.upcoming_nodes, vec![entry("a", 60)]);
        assert_eq!(r.status.upcoming_size, 1);
        assert_eq!(r.registered, 1);
    }

    #[test]
    fn node_with_another_name_completes_the_oldest_entry() {
        let status = NodeGroupStatus {
            current_size: 1,
            target_size: 3,
            upcoming_nodes: vec![entry("req-1", 30), entry("req-0", 60)],
            ..Default::default()
        };
        let r = reconcile(&status, 2, &names(&["seed", "i-0abc"]), now(), MAX);
        assert_eq!(r.status.upcoming_nodes, vec![entry("req-1", 30)]);
        assert_eq!(r.status.target_size, 3);
        // Reconciling again changes nothing: the same node is not counted twice.
        let again = reconcile(&r.status, 2, &names(&["seed", "i-0abc"]), now(), MAX);
        assert_eq!(again.status, r.status);
    }

    #[test]
    fn machines_that_register_with_no_answer_recorded_are_adopted_once() {
        // The leader recorded intents at 60 s and 30 s ago and died before the answers; the
        // last answer it recorded is older. Both registered before the next leader's loop.
        let mut status = NodeGroupStatus {
            target_size: 3,
            upcoming_nodes: vec![
                entry("g-100-0", 60),
                entry("g-100-1", 60),
                entry("g-200-0", 30),
            ],
            last_scale_up: Some(dra_api::LastScaleUp {
                time: ago(600),
                count: 1,
                outcome: dra_api::ScaleUpOutcome::Succeeded,
                message: "started 1 node(s) for ml/earlier".into(),
            }),
            ..Default::default()
        };
        let r = reconcile(&status, 3, &names(&["i-1", "i-2", "i-3"]), now(), MAX);
        assert_eq!(
            r.adopted,
            vec![
                Adopted {
                    requested_at: ago(60).0,
                    request_id: Some("g-100".into()),
                    count: 2
                },
                Adopted {
                    requested_at: ago(30).0,
                    request_id: Some("g-200".into()),
                    count: 1
                },
            ]
        );
        // An answer recorded with the intent (lastScaleUp at the intent's time) leaves nothing
        // to adopt.
        status.last_scale_up.as_mut().unwrap().time = ago(30);
        let r = reconcile(&status, 3, &names(&["i-1", "i-2", "i-3"]), now(), MAX);
        assert!(r.adopted.is_empty(), "{:?}", r.adopted);
    }

    #[test]
    fn entries_past_the_max_provision_time_time_out() {
        let status = NodeGroupStatus {
            target_size: 2,
            upcoming_nodes: vec![entry("slow", 16 * 60), entry("fresh", 60)],
            ..Default::default()
        };
        let r = reconcile(&status, 0, &BTreeSet::new(), now(), MAX);
        assert_eq!(r.timed_out, vec![entry("slow", 16 * 60)]);
        assert_eq!(r.status.upcoming_nodes, vec![entry("fresh", 60)]);
        assert_eq!(r.status.target_size, 1);
    }

    #[test]
    fn timed_out_entries_take_the_unregistered_machines_and_the_rest_never_started() {
        // A plain increase of 3 (placeholders), an atomic one answered with an id, one
        // still awaited; the provider lists 3 machines no Node registered for.
        let timed_out = vec![
            entry("r1-0", 1000),
            entry("r1-1", 1000),
            entry("r1-2", 1000),
            entry("aws:///us-east-1a/i-aaa", 1000),
        ];
        let waiting = vec![entry("aws:///us-east-1a/i-new", 60)];
        let unregistered = [
            "aws:///us-east-1a/i-new",
            "aws:///us-east-1a/i-aaa",
            "aws:///us-east-1a/i-bbb",
        ];
        let plan = give_back(&timed_out, &waiting, &unregistered);
        let deleted: Vec<(&str, &str)> = plan
            .delete
            .iter()
            .map(|(e, id)| (e.name.as_str(), id.as_str()))
            .collect();
        assert_eq!(
            deleted,
            vec![
                ("r1-0", "aws:///us-east-1a/i-bbb"),
                ("aws:///us-east-1a/i-aaa", "aws:///us-east-1a/i-aaa"),
            ],
            "the awaited machine is never taken"
        );
        let never: Vec<&str> = plan.never_started.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(never, vec!["r1-1", "r1-2"]);
        // A named machine that is gone needs nothing.
        let gone = give_back(&[entry("fake://x", 1000)], &[], &[]);
        assert_eq!(gone, GiveBack::default());
    }

    #[test]
    fn reservation_slots_are_shared_between_groups() {
        let mut a = crate::test_support::node_group("a", 10).spec;
        a.capacity_type = dra_api::CapacityType::Reserved;
        a.reservation = Some(dra_api::Reservation {
            id: "cr-1".into(),
            total: 8,
            end_time: None,
        });
        let b = a.clone();
        let on_demand = crate::test_support::node_group("c", 10).spec;
        let st = |current, upcoming| NodeGroupStatus {
            current_size: current,
            upcoming_size: upcoming,
            ..Default::default()
        };
        let (sa, sb, sc) = (st(2, 1), st(3, 0), st(50, 0));
        let all = [(&a, &sa), (&b, &sb), (&on_demand, &sc)];
        assert_eq!(reserved_left(&a, all), Some(2));
        assert_eq!(reserved_left(&on_demand, all), None);
    }
}
