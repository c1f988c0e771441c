//! Stand-in pods: the pods ProvisioningRequests ask room for and the chunks
//! of CapacityBuffers, planned like pending pods; and the capacity booked for
//! provisioned requests, taken before anything else is planned (as
//! cluster-autoscaler books it before its scale-up). See [`crate::provreq`]
//! and [`crate::buffers`] for the upstream rules.

use std::collections::BTreeMap;
use std::ops::Range;

use dra_sim::ObjectRef;
use dra_sim::objects::ClusterObjects;
use dra_sim::report::{Outcome, PodReport};
use dra_sim::snapshot::{Snapshot, Verdict};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::{Attempt, PlanOptions, Planner};
use crate::buffers::{self, Buffer};
use crate::gang::{Gang, GangApi, GangRef};
use crate::provreq::{self, Request, Stage};
use crate::report::{GangOutcome, PlanReport};

/// The requests and buffers of one plan, and where their pods sit in the
/// snapshot's pod list.
#[derive(Debug, Default)]
pub(super) struct StandIns {
    requests: Vec<Request>,
    buffers: Vec<Buffer>,
    /// Pod index ranges of requests to plan (by request index).
    request_pods: Vec<(usize, Range<usize>)>,
    /// Pod index ranges of buffers (by buffer index).
    buffer_pods: Vec<(usize, Range<usize>)>,
    /// Pending input pods that consume a request: never planned.
    pub(super) consumers: Vec<usize>,
}

impl StandIns {
    /// Reads the requests (those served and due under `options`: the
    /// check-capacity processor instance, the retry backoffs, the time) and
    /// buffers among `objects.extra` and appends the pods to plan (requests
    /// not provisioned yet, buffer chunks) to `objects.pods`, so the snapshot
    /// holds them as pending pods.
    pub(super) fn add_pods(objects: &mut ClusterObjects, options: &PlanOptions) -> Self {
        let serving = provreq::Serving {
            instance: &options.check_capacity_processor_instance,
            backoff: &options.provisioning_request_backoff,
            now: options.now,
        };
        let requests = provreq::read_requests(&objects.extra, &objects.pods, serving);
        let buffers = buffers::read_buffers(&objects.extra);
        let mut out = StandIns {
            requests,
            buffers,
            ..StandIns::default()
        };
        for (i, request) in out.requests.iter().enumerate() {
            if request.stage == Stage::Plan && !request.pods.is_empty() {
                let start = objects.pods.len();
                objects.pods.extend(request.pods.iter().cloned());
                out.request_pods.push((i, start..objects.pods.len()));
            }
        }
        for (i, buffer) in out.buffers.iter().enumerate() {
            let start = objects.pods.len();
            objects.pods.extend(buffer.pods.iter().cloned());
            out.buffer_pods.push((i, start..objects.pods.len()));
        }
        out
    }

    /// The first pod index that is a stand-in (every index below is a pod
    /// of the input).
    pub(super) fn first_pod(&self, pod_count: usize) -> usize {
        self.request_pods
            .iter()
            .chain(&self.buffer_pods)
            .map(|(_, r)| r.start)
            .min()
            .unwrap_or(pod_count)
    }

    /// One gang per request to plan (all its pods, every one needed; a
    /// check-capacity one on existing capacity only), one single per buffer
    /// chunk.
    pub(super) fn gangs(&self, snapshot: &Snapshot) -> Vec<Gang> {
        let priority = |i: usize| {
            snapshot.pods()[i]
                .spec
                .as_ref()
                .and_then(|s| s.priority)
                .unwrap_or(0)
        };
        let mut gangs = Vec::new();
        for (i, range) in &self.request_pods {
            let request = &self.requests[*i];
            gangs.push(Gang {
                api: GangApi::ProvisioningRequest,
                name: GangRef::object(request.name.clone()),
                min_count: range.len(),
                pending: range.clone().collect(),
                bound: 0,
                topology_key: None,
                blocked: None,
                priority: range.clone().map(priority).max().unwrap_or(0),
                existing_only: request.check_capacity(),
            });
        }
        for (i, range) in &self.buffer_pods {
            for pod_index in range.clone() {
                gangs.push(Gang {
                    api: GangApi::CapacityBuffer,
                    name: GangRef::object(self.buffers[*i].name.clone()),
                    min_count: 1,
                    pending: vec![pod_index],
                    bound: 0,
                    topology_key: None,
                    blocked: None,
                    priority: priority(pod_index),
                    existing_only: false,
                });
            }
        }
        gangs
    }

    /// Books the capacity of provisioned requests whose booking has not run
    /// out at `now`, as cluster-autoscaler's `bookCapacity` does: after
    /// `FilterOutSchedulable` has packed the pending pods onto free existing
    /// and upcoming capacity (the scheduler ignores bookings, so those pods
    /// get that room whatever is booked), each booked pod takes the first
    /// registered node, in name order, that still takes it; one that finds
    /// none is not booked (best effort, never a scale-up). So a booking
    /// holds only capacity that exists and is free, and never the nodes
    /// bought for a pending gang, upcoming or registered. The pending pods'
    /// placements are undone afterwards: `gangs` are planned as usual, on
    /// what the bookings leave. Returns, per request index, the nodes of the
    /// pods booked, one per pod (`None`: the booking has expired).
    pub(super) fn book(
        &self,
        planner: &mut Planner<'_>,
        gangs: &[Gang],
        now: Option<Timestamp>,
    ) -> BTreeMap<usize, Option<Vec<String>>> {
        let mut booked = BTreeMap::new();
        let mut to_book = Vec::new();
        for (i, request) in self.requests.iter().enumerate() {
            let Stage::Booked { since } = request.stage else {
                continue;
            };
            if provreq::booking_expired(since, now) {
                booked.insert(i, None);
            } else {
                to_book.push(i);
            }
        }
        let mut nodes_of: BTreeMap<usize, Vec<String>> =
            to_book.iter().map(|&i| (i, Vec::new())).collect();
        if to_book.iter().all(|&i| self.requests[i].pods.is_empty()) {
            booked.extend(nodes_of.into_iter().map(|(i, nodes)| (i, Some(nodes))));
            return booked;
        }
        let before = planner.snapshot.checkpoint();
        planner.place_what_fits_now(gangs);
        let mut chosen = Vec::new();
        for &i in &to_book {
            for pod in &self.requests[i].pods {
                chosen.push((i, pod, planner.book_pod(pod.clone())));
            }
        }
        planner.snapshot.rollback(before);
        for (i, pod, node) in chosen {
            if let Some(name) = node.and_then(|node| planner.book_pod_on(pod.clone(), node))
                && let Some(nodes) = nodes_of.get_mut(&i)
            {
                nodes.push(name);
            }
        }
        booked.extend(nodes_of.into_iter().map(|(i, nodes)| (i, Some(nodes))));
        booked
    }

    /// Adds the `provisioningRequests` and `capacityBuffers` entries to
    /// `report`, from how their gangs and pods were planned.
    /// `upcoming` maps the names of the nodes standing for upcoming ones to
    /// their groups.
    pub(super) fn report(
        &self,
        report: &mut PlanReport,
        booked: &BTreeMap<usize, Option<Vec<String>>>,
        upcoming: &BTreeMap<String, String>,
        now: Option<Timestamp>,
    ) {
        let pods: BTreeMap<&str, &PodReport> =
            report.pods.iter().map(|p| (p.pod.as_str(), p)).collect();
        let mut requests = Vec::new();
        for (i, request) in self.requests.iter().enumerate() {
            let gang = GangRef::object(request.name.clone());
            let gang_report = report
                .pod_groups
                .iter()
                .find(|g| g.api == GangApi::ProvisioningRequest && g.pod_group == gang);
            let new_nodes = gang_report.is_some_and(|g| {
                g.members.iter().any(|m| {
                    pods.get(m.to_string().as_str())
                        .is_some_and(|p| p.outcome == Outcome::FitsNewNode)
                })
            });
            let planned = provreq::Planned {
                lands: gang_report.is_some_and(|g| g.outcome == GangOutcome::Lands),
                new_nodes,
                placed: gang_report.map_or_else(Vec::new, |g| {
                    where_placed(
                        g.members
                            .iter()
                            .filter_map(|m| pods.get(m.to_string().as_str()).copied()),
                        upcoming,
                    )
                }),
                reasons: gang_report.map_or(&[], |g| g.reasons.as_slice()),
                booked: booked.get(&i).and_then(Option::as_ref).map_or(0, Vec::len),
                booked_nodes: booked
                    .get(&i)
                    .and_then(Option::as_ref)
                    .map(|nodes| {
                        let unique: std::collections::BTreeSet<&String> = nodes.iter().collect();
                        unique.into_iter().cloned().collect()
                    })
                    .unwrap_or_default(),
                expired: booked.get(&i).is_some_and(Option::is_none),
                now,
            };
            requests.push(provreq::report(request, &planned));
        }
        let mut buffers = Vec::new();
        for buffer in &self.buffers {
            buffers.push(buffers::report(buffer, |pod: &ObjectRef| {
                match pods.get(pod.to_string().as_str()) {
                    Some(p) if p.outcome == Outcome::Fits => (Some(false), Vec::new()),
                    Some(p) if p.outcome == Outcome::FitsNewNode => (Some(true), Vec::new()),
                    Some(p) => (None, p.reasons.clone()),
                    None => (None, vec!["not planned".to_string()]),
                }
            }));
        }
        report.provisioning_requests = requests;
        report.capacity_buffers = buffers;
    }
}

/// Where `pods` landed, as people read it: per group, how many new nodes and how
/// many upcoming ones, then the existing nodes by name (each node once).
fn where_placed<'a>(
    pods: impl Iterator<Item = &'a PodReport>,
    upcoming: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut new: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    let mut booting: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    let mut existing: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for pod in pods {
        let Some(node) = pod.node.as_deref() else {
            continue;
        };
        match (pod.outcome, pod.node_group.as_deref(), upcoming.get(node)) {
            (Outcome::FitsNewNode, Some(group), _) => {
                new.entry(group).or_default().insert(node);
            }
            (Outcome::Fits, _, Some(group)) => {
                booting.entry(group).or_default().insert(node);
            }
            (Outcome::Fits, _, None) => {
                existing.insert(node);
            }
            _ => {}
        }
    }
    let mut out: Vec<String> = new
        .iter()
        .map(|(group, nodes)| format!("{} new node(s) of group {group}", nodes.len()))
        .collect();
    out.extend(
        booting
            .iter()
            .map(|(group, nodes)| format!("{} upcoming node(s) of group {group}", nodes.len())),
    );
    if !existing.is_empty() {
        out.push(format!(
            "existing node(s) {}",
            existing.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    out
}

impl Planner<'_> {
    /// Reports the pending pods consuming a request: they wait for its
    /// booked room and never trigger a scale-up.
    pub(super) fn report_consumers(&self, stand_ins: &StandIns, report: &mut PlanReport) {
        for &pod_index in &stand_ins.consumers {
            let pod = &self.snapshot.pods()[pod_index];
            let request = provreq::consumed_request(pod).unwrap_or_default();
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            report.pods.push(self.unschedulable(
                pod_index,
                vec![format!(
                    "it consumes ProvisioningRequest {namespace}/{request}, and pods consuming a request never trigger a scale-up"
                )],
            ));
        }
    }

    /// Places what the scheduler will place now, whatever is booked: every
    /// pending gang of the input (not the stand-ins) that lands whole on the
    /// nodes the snapshot has, registered or upcoming, in plan order, as
    /// cluster-autoscaler's `FilterOutSchedulable` does before bookings are
    /// made. A gang that does not land is left as it was. Leaves the
    /// placements in the snapshot and commits nothing: the caller rolls
    /// back.
    fn place_what_fits_now(&mut self, gangs: &[Gang]) {
        for gang in gangs {
            let stand_in = matches!(
                gang.api,
                GangApi::ProvisioningRequest | GangApi::CapacityBuffer
            );
            if stand_in || gang.blocked.is_some() || gang.existing_only {
                continue;
            }
            let (claims, _) = self.resolve_claims(&gang.pending);
            let existing = self.snapshot.nodes().len();
            let keys = self.colocation_keys(gang);
            for domain in self.domains(&keys, existing) {
                let start = self.snapshot.checkpoint();
                let mut attempt = Attempt::default();
                self.place_on_existing(gang, &claims, (&domain, existing), &mut attempt);
                if !attempt.placements.is_empty() && attempt.placements.len() >= gang.needed() {
                    break;
                }
                self.snapshot.rollback(start);
            }
        }
    }

    /// Places a booked pod on the first registered node that takes it and
    /// returns the node's index; `None` (and nothing changed) when none does.
    /// Upcoming nodes are not capacity that exists yet. Commits nothing (the
    /// caller holds a checkpoint).
    fn book_pod(&mut self, pod: Pod) -> Option<usize> {
        let before = self.snapshot.checkpoint();
        let pod_index = self.snapshot.add_pod(pod);
        if let Ok(claims) = self.snapshot.resolve_claims(pod_index) {
            for node_index in 0..self.cluster_nodes {
                if let Verdict::Fits(allocations) =
                    self.snapshot.check(pod_index, node_index, &claims)
                {
                    self.snapshot
                        .bind(pod_index, node_index, &claims, allocations);
                    return Some(node_index);
                }
            }
        }
        self.snapshot.rollback(before);
        None
    }

    /// Places a booked pod on `node_index` (where [`Self::book_pod`] found
    /// it room with more placed around it) and returns the node's name;
    /// `None` (and nothing changed) when the node does not take it.
    fn book_pod_on(&mut self, pod: Pod, node_index: usize) -> Option<String> {
        let before = self.snapshot.checkpoint();
        let pod_index = self.snapshot.add_pod(pod);
        if let Ok(claims) = self.snapshot.resolve_claims(pod_index)
            && let Verdict::Fits(allocations) = self.snapshot.check(pod_index, node_index, &claims)
        {
            self.snapshot
                .bind(pod_index, node_index, &claims, allocations);
            return self.snapshot.nodes()[node_index].metadata.name.clone();
        }
        self.snapshot.rollback(before);
        None
    }
}
