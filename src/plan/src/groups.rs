//! Node groups as the planner sees them: the spec, how big the group is now,
//! how much room it has left, and what one more node of it looks like.

use std::collections::BTreeMap;

use dra_api::{
    CapacityType, NODE_GROUP_API_VERSION, NODE_GROUP_LABEL, NodeGroup, NodeGroupSpec,
    ValidationError,
};
use dra_sim::objects::ExtraObject;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// A NodeGroup document that cannot be used, and why. The group is left out
/// of planning; everything else goes on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupError {
    /// The group's name (or `?` when it has none).
    pub node_group: String,
    /// Where it came from: file and document.
    pub origin: String,
    /// What was wrong, naming the field.
    pub error: String,
}

/// A usable node group.
#[derive(Debug, Clone)]
pub struct Group {
    /// `metadata.name`.
    pub name: String,
    /// The validated spec.
    pub spec: NodeGroupSpec,
    /// Nodes of the group in the snapshot (label `dra-autoscaler.io/node-group`).
    pub current: usize,
    /// Nodes requested but not registered yet (`status.upcomingSize`).
    pub upcoming: usize,
}

impl Group {
    /// Rank of the capacity type for tie-breaking: reserved first.
    #[must_use]
    pub fn capacity_rank(&self) -> u8 {
        match self.spec.capacity_type {
            CapacityType::Reserved => 0,
            CapacityType::OnDemand => 1,
            CapacityType::Spot => 2,
        }
    }
}

/// Every rule a NodeGroup spec must meet to be planned for: those of
/// [`NodeGroupSpec::validate`] (template quantities included: `cpu: "lots"`
/// would otherwise count as 0), the one validation every reader of a spec
/// shares (the controller, `simulate`, the providers).
///
/// # Errors
/// Every problem, each naming its field (printed joined by `; `).
pub fn check(spec: &NodeGroupSpec) -> Result<(), SpecProblems> {
    spec.validate()
        .map_err(|invalid| SpecProblems(invalid.errors))
}

/// Why a NodeGroup spec cannot be planned for: every problem
/// [`NodeGroupSpec::validate`] found, printed joined by `; ` (without the
/// "invalid node group spec" prefix: status conditions and events name the
/// group already).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", join(.0))]
pub struct SpecProblems(pub Vec<ValidationError>);

fn join(errors: &[ValidationError]) -> String {
    let words: Vec<String> = errors.iter().map(ToString::to_string).collect();
    words.join("; ")
}

/// Why a group may get no more nodes ([`Budget::left`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRoom {
    /// The group is at `maxSize` before planning.
    #[error("max size reached: {size} of {max} nodes ({running} running, {upcoming} upcoming)")]
    MaxSize {
        /// Running plus upcoming nodes.
        size: usize,
        /// `maxSize`.
        max: usize,
        /// Running nodes.
        running: usize,
        /// Upcoming nodes.
        upcoming: usize,
    },
    /// The group's reservation ends within `--min-reservation-left`.
    #[error("reservation {id} ends at {end} (less than {within} from now)")]
    ReservationEnding {
        /// The reservation id.
        id: String,
        /// Its end time.
        end: Timestamp,
        /// `--min-reservation-left`, as a flag spells it.
        within: String,
    },
    /// Nodes planned already use the room `maxSize` left.
    #[error(
        "max size reached: {planned} new node(s) planned use the group's remaining {remaining}"
    )]
    PlannedUpToMaxSize {
        /// Nodes planned for the group.
        planned: usize,
        /// Room before planning.
        remaining: usize,
    },
    /// The reservation's instances are all in use or planned.
    #[error("reservation {id} is used up: {used} of {total} instances in use or planned")]
    ReservationUsedUp {
        /// The reservation id.
        id: String,
        /// Instances in use or planned.
        used: usize,
        /// The reservation's instances.
        total: usize,
    },
}

/// Reads the NodeGroups among `extra`, checking each ([`check`]); invalid ones become
/// [`GroupError`]s. Groups are returned in name order.
#[must_use]
pub fn read_groups(extra: &[ExtraObject], nodes: &[Node]) -> (Vec<Group>, Vec<GroupError>) {
    let mut per_group: BTreeMap<&str, usize> = BTreeMap::new();
    for node in nodes {
        if let Some(group) = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_GROUP_LABEL))
        {
            *per_group.entry(group.as_str()).or_default() += 1;
        }
    }
    let mut groups = Vec::new();
    let mut errors = Vec::new();
    for obj in extra
        .iter()
        .filter(|o| o.kind == "NodeGroup" && o.api_version.starts_with("dra-autoscaler.io/"))
    {
        let name = obj
            .value
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
            .to_string();
        let error = |error: String| GroupError {
            node_group: name.clone(),
            origin: obj.origin.to_string(),
            error,
        };
        // The CRD serves v1alpha1 only; the API server refuses other versions.
        if obj.api_version != NODE_GROUP_API_VERSION {
            errors.push(error(format!(
                "apiVersion {}: the NodeGroup CRD serves only {NODE_GROUP_API_VERSION}",
                obj.api_version
            )));
            continue;
        }
        let parsed: Result<NodeGroup, _> = serde_path_to_error::deserialize(obj.value.clone());
        let group = match parsed {
            Ok(group) => group,
            Err(e) => {
                errors.push(error(format!("field {}: {}", e.path(), e.inner())));
                continue;
            }
        };
        if let Err(e) = check(&group.spec) {
            errors.push(error(e.to_string()));
            continue;
        }
        let upcoming = group
            .status
            .as_ref()
            .map_or(0, |s| usize::try_from(s.upcoming_size.max(0)).unwrap_or(0));
        groups.push(Group {
            current: per_group.get(name.as_str()).copied().unwrap_or(0),
            upcoming,
            name,
            spec: group.spec,
        });
    }
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    (groups, errors)
}

/// Every capacity and allocatable value of the template as a Kubernetes
/// quantity: the API server refuses a Node whose status carries anything
/// else, so a group with one can never make the node it describes (and
/// reading `cpu: lots` as no CPU would plan against a node that cannot be).
/// How many more nodes each group may get: `maxSize`, the reservation's
/// remaining slots (shared by every group of that reservation) and its end
/// time. Planned nodes are counted against both as planning goes.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Per group: room by `maxSize` (and end time), or why there is none.
    by_size: Vec<Result<usize, NoRoom>>,
    /// Per group: its reservation id, if reserved.
    reservation_of: Vec<Option<String>>,
    /// Per reservation id: (slots left before planning, total).
    reservations: BTreeMap<String, (usize, usize)>,
}

impl Budget {
    /// The budget before anything is planned.
    #[must_use]
    pub fn new(
        groups: &[Group],
        now: Option<Timestamp>,
        min_reservation_left: SignedDuration,
    ) -> Self {
        let mut in_reservation: BTreeMap<String, usize> = BTreeMap::new();
        let mut totals: BTreeMap<String, usize> = BTreeMap::new();
        for group in groups {
            if let Some(r) = &group.spec.reservation {
                *in_reservation.entry(r.id.clone()).or_default() += group.current + group.upcoming;
                totals.insert(r.id.clone(), usize::try_from(r.total.max(0)).unwrap_or(0));
            }
        }
        let reservations = totals
            .into_iter()
            .map(|(id, total)| {
                let used = in_reservation.get(&id).copied().unwrap_or(0);
                (id, (total.saturating_sub(used), total))
            })
            .collect();
        let by_size = groups
            .iter()
            .map(|group| {
                let size = group.current + group.upcoming;
                let max = usize::try_from(group.spec.max_size.max(0)).unwrap_or(0);
                if size >= max {
                    return Err(NoRoom::MaxSize {
                        size,
                        max,
                        running: group.current,
                        upcoming: group.upcoming,
                    });
                }
                if let (Some(r), Some(now)) = (&group.spec.reservation, now)
                    && let Some(end) = r.end_time.as_ref()
                {
                    let horizon = now
                        .checked_add(min_reservation_left)
                        .unwrap_or(Timestamp::MAX);
                    if end.0 <= horizon {
                        return Err(NoRoom::ReservationEnding {
                            id: r.id.clone(),
                            end: end.0,
                            within: friendly(min_reservation_left),
                        });
                    }
                }
                Ok(max - size)
            })
            .collect();
        Budget {
            by_size,
            reservation_of: groups
                .iter()
                .map(|g| g.spec.reservation.as_ref().map(|r| r.id.clone()))
                .collect(),
            reservations,
        }
    }

    /// How many more nodes group `group` may get when `planned(g)` nodes are
    /// already planned for each group `g`, or why none (naming the limit).
    ///
    /// # Errors
    /// The limit that leaves no room, in words.
    pub fn left(&self, group: usize, planned: impl Fn(usize) -> usize) -> Result<usize, NoRoom> {
        let by_size = self.by_size[group].clone()?;
        let mine = planned(group);
        if mine >= by_size {
            return Err(NoRoom::PlannedUpToMaxSize {
                planned: mine,
                remaining: by_size,
            });
        }
        let mut left = by_size - mine;
        if let Some(id) = &self.reservation_of[group] {
            let (slots, total) = self.reservations.get(id).copied().unwrap_or((0, 0));
            let planned_in_reservation: usize = (0..self.reservation_of.len())
                .filter(|&g| self.reservation_of[g].as_ref() == Some(id))
                .map(&planned)
                .sum();
            if planned_in_reservation >= slots {
                return Err(NoRoom::ReservationUsedUp {
                    id: id.clone(),
                    used: total - slots + planned_in_reservation,
                    total,
                });
            }
            left = left.min(slots - planned_in_reservation);
        }
        Ok(left)
    }
}

/// `d` as a flag would spell it: `1h`, `10m`, `90s`, `500ms`.
pub(crate) fn friendly(d: SignedDuration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 {
        format!("{}ms", d.as_millis())
    } else if secs == 0 {
        "0s".to_string()
    } else if secs % 3600 == 0 {
        format!("{}h", secs / 3600)
    } else if secs % 60 == 0 {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

/// One new node of `group` named `node_name`, and the slices its drivers
/// would publish: exactly what a provider registers ([`dra_api::new_node`]).
#[must_use]
pub fn template_node(group: &Group, node_name: &str) -> (Node, Vec<ResourceSlice>) {
    let made = dra_api::new_node(&group.name, &group.spec, node_name);
    (made.node, made.slices)
}

/// The value [`template_node`]`(group, node_name)` gives label `key`, without
/// building the node ([`dra_api::new_node_label`]).
#[must_use]
pub fn new_node_label<'a>(group: &'a Group, key: &str, node_name: &'a str) -> Option<&'a str> {
    dra_api::new_node_label(&group.name, &group.spec, key, node_name)
}

/// The topology domain value every new node of a group has for `key`, if
/// they share one (a per-node value such as the hostname is no shared domain).
#[must_use]
pub fn domain_of(group: &Group, key: &str) -> Option<String> {
    // An empty node name leaves the hostname unset unless the template fixes it.
    dra_api::new_node_label(&group.name, &group.spec, key, "")
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(capacity: serde_json::Value) -> NodeGroupSpec {
        serde_json::from_value(serde_json::json!({
            "provider": "fake", "providerID": "gpu", "minSize": 0, "maxSize": 4,
            "capacityType": "on-demand", "pricePerHour": 1.0,
            "template": {"capacity": capacity},
        }))
        .expect("a spec")
    }

    #[test]
    fn template_quantities_must_be_kubernetes_quantities() {
        assert_eq!(
            check(&spec(serde_json::json!({"cpu": "4", "memory": "64Gi"}))),
            Ok(())
        );
        let problems = check(&spec(serde_json::json!({"cpu": "lots", "memory": "1.5Gi"})))
            .expect_err("lots is no quantity");
        assert_eq!(problems.0.len(), 1, "{problems:?}");
        let error = problems.to_string();
        assert!(error.starts_with("spec.template.capacity.cpu: "), "{error}");
        assert!(error.contains("\"lots\""), "{error}");
        assert!(!error.contains("memory"), "{error}");
    }
}
