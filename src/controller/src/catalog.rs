//! The controller's vocabulary toward users, in one table: every Event reason it writes on
//! its own objects and the Nodes and Pods it acts on, and every NodeGroup condition type with
//! its reasons. The emitting modules take their constants from here, and the reference pages
//! (`docs/reference/events.md`, `docs/reference/conditions.md`) are generated from
//! [`EVENTS`] and [`NODE_GROUP_CONDITIONS`], so the pages list exactly what the code writes.
//!
//! A leaf: it names strings and imports nothing of the controller.

/// On a pod (and its PodGroup): new nodes were requested for it.
pub const TRIGGERED_SCALE_UP: &str = "TriggeredScaleUp";
/// On a pod (and its PodGroup): no group can help; the note has the reasons.
pub const NOT_TRIGGER_SCALE_UP: &str = "NotTriggerScaleUp";
/// On a NodeGroup: the provider started nodes.
pub const SCALED_UP_GROUP: &str = "ScaledUpGroup";
/// On a NodeGroup: the provider refused or failed.
pub const FAILED_TO_SCALE_UP_GROUP: &str = "FailedToScaleUpGroup";
/// On a NodeGroup: requested nodes did not register in time.
pub const SCALE_UP_TIMED_OUT: &str = "ScaleUpTimedOut";
/// On a NodeGroup: it is not scaled until its backoff ends.
pub const BACK_OFF: &str = "BackOff";
/// On a NodeGroup: it does not decode or validate and is left out.
pub const INVALID_NODE_GROUP: &str = "InvalidNodeGroup";
/// On a node and its NodeGroup: a node with pods was drained and its machine deleted.
pub const SCALE_DOWN: &str = "ScaleDown";
/// On a node and its NodeGroup: an empty node's machine was deleted.
pub const SCALE_DOWN_EMPTY: &str = "ScaleDownEmpty";
/// On a node and its NodeGroup: a removal was given up; the node stays, untainted.
pub const SCALE_DOWN_FAILED: &str = "ScaleDownFailed";
/// On an underused node: why it is kept.
pub const NOT_REMOVABLE: &str = "NotRemovable";
/// On a CustomResourceDefinition (or APIService): an optional API appeared and is watched
/// from now on.
pub const API_FOUND: &str = "OptionalAPIFound";

/// `type` of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
    /// `Normal` as a rule, `Warning` in the case its `when` names (cluster-autoscaler
    /// writes `NotTriggerScaleUp` both ways).
    NormalOrWarning,
}

impl EventType {
    /// The API's spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
            Self::NormalOrWarning => "Normal or Warning",
        }
    }

    /// Whether an Event written as Warning (`warning`) or Normal has this type.
    #[must_use]
    pub fn allows(self, warning: bool) -> bool {
        match self {
            Self::Normal => !warning,
            Self::Warning => warning,
            Self::NormalOrWarning => true,
        }
    }
}

/// The type [`EVENTS`] gives `reason`, if it is listed there.
#[must_use]
pub fn event_type(reason: &str) -> Option<EventType> {
    EVENTS.iter().find(|e| e.reason == reason).map(|e| e.type_)
}

/// One Event reason, as the reference page lists it.
#[derive(Debug, Clone, Copy)]
pub struct EventDoc {
    /// The reason.
    pub reason: &'static str,
    /// Its type.
    pub type_: EventType,
    /// The kinds of object it is on (`regarding`).
    pub on: &'static str,
    /// When it is written.
    pub when: &'static str,
    /// What the note says.
    pub message: &'static str,
}

/// Every Event reason the controller writes on NodeGroups, Nodes, Pods and API definitions,
/// in the order a scale-up and a scale-down meet them. (ProvisioningRequest Events carry
/// cluster-autoscaler's condition reasons; they are listed with those conditions.)
pub const EVENTS: &[EventDoc] = &[
    EventDoc {
        reason: TRIGGERED_SCALE_UP,
        type_: EventType::Normal,
        on: "Pod, PodGroup",
        when: "Nodes were asked for this pod or gang.",
        message: "the groups and node counts asked for",
    },
    EventDoc {
        reason: NOT_TRIGGER_SCALE_UP,
        type_: EventType::NormalOrWarning,
        on: "Pod, PodGroup",
        when: "No group can help the pending pod or gang (Normal), or the scale-up planned for it failed (Warning).",
        message: "why, per group (too small, backing off, at max size, ...)",
    },
    EventDoc {
        reason: SCALED_UP_GROUP,
        type_: EventType::Normal,
        on: "NodeGroup",
        when: "The provider started nodes, confirmed an unconfirmed request, or nodes registered for a scale-up whose answer no one recorded.",
        message: "how many nodes, for which pods or gangs",
    },
    EventDoc {
        reason: FAILED_TO_SCALE_UP_GROUP,
        type_: EventType::Warning,
        on: "NodeGroup",
        when: "The provider call failed, or machines started for a gang were given back because another group's request for it failed.",
        message: "the provider's error and what happens next (retry shortly, placeholders kept, or a `BackOff` follows)",
    },
    EventDoc {
        reason: SCALE_UP_TIMED_OUT,
        type_: EventType::Warning,
        on: "NodeGroup",
        when: "Requested nodes did not register within `--max-node-provision-time`.",
        message: "how many started machines were deleted and how many never started",
    },
    EventDoc {
        reason: BACK_OFF,
        type_: EventType::Warning,
        on: "NodeGroup",
        when: "The group is not scaled up until its backoff window ends.",
        message: "until when, and the failure that started it",
    },
    EventDoc {
        reason: INVALID_NODE_GROUP,
        type_: EventType::Warning,
        on: "NodeGroup",
        when: "The group does not decode or validate and is left out (once per change of the problem).",
        message: "the problem, as in its `Valid` condition",
    },
    EventDoc {
        reason: SCALE_DOWN_EMPTY,
        type_: EventType::Normal,
        on: "Node, NodeGroup",
        when: "An empty node's machine was deleted.",
        message: "since when the node was unneeded, and for how long",
    },
    EventDoc {
        reason: SCALE_DOWN,
        type_: EventType::Normal,
        on: "Node, NodeGroup",
        when: "An underused node was drained (PodDisruptionBudgets respected) and its machine deleted.",
        message: "how many pods were evicted, and since when the node was unneeded",
    },
    EventDoc {
        reason: SCALE_DOWN_FAILED,
        type_: EventType::Warning,
        on: "Node, NodeGroup",
        when: "A removal was given up (evictions refused for `--max-graceful-termination`, the provider's delete failed, or a removal found under way after a restart can no longer finish); the node stays, untainted.",
        message: "why the removal stopped",
    },
    EventDoc {
        reason: NOT_REMOVABLE,
        type_: EventType::Normal,
        on: "Node",
        when: "An underused node is kept for a reason other than time; at most one per node, replaced when the cause changes and deleted once it is gone; none within `--scale-down-delay-after-add` of a scale-up.",
        message: "the `reason` words of `simulate`'s `scaleDownBlocked` (its `code` names the kind)",
    },
    EventDoc {
        reason: API_FOUND,
        type_: EventType::Normal,
        on: "CustomResourceDefinition (APIService for a built-in `*.k8s.io` group)",
        when: "A gang API or a ProvisioningRequest/CapacityBuffer API was installed while the controller ran; it is watched from now on (looked for every 30 s).",
        message: "the API found",
    },
];

/// NodeGroup condition type: whether the controller can use the group.
pub const VALID: &str = "Valid";
/// `Valid=True` reason.
pub const VALID_REASON: &str = "Valid";
/// `Valid=False` reason: the object does not decode as a NodeGroup.
pub const DECODE_FAILED: &str = "DecodeFailed";
/// `Valid=False` reason: it decodes, and breaks a rule of the spec.
pub const INVALID_SPEC: &str = "InvalidSpec";
/// `Valid=False` reason: its provider does not serve the group it names.
pub const PROVIDER_REFUSED: &str = "ProviderRefused";

/// NodeGroup condition type: the group's size against `spec.minSize`.
pub const AT_MIN_SIZE: &str = "AtMinSize";
/// `AtMinSize=False` reason: fewer nodes than `minSize`.
pub const BELOW_MIN_SIZE: &str = "BelowMinSize";
/// `AtMinSize=True` reason.
pub const AT_MIN_SIZE_REASON: &str = "AtMinSize";
/// `AtMinSize=False` reason: more nodes than `minSize`.
pub const ABOVE_MIN_SIZE: &str = "AboveMinSize";

/// NodeGroup condition type: whether the controller scales the group when needed (the
/// HorizontalPodAutoscaler's `ScalingActive`).
pub const SCALING_ACTIVE: &str = "ScalingActive";
/// `ScalingActive=True` reason.
pub const ACTIVE: &str = "Active";
/// `ScalingActive=False` reason: `spec.maxSize` is 0.
pub const SCALING_DISABLED: &str = "ScalingDisabled";
/// `ScalingActive=False` reason of a group left out because it does not decode or validate.
pub const SCALING_INACTIVE_INVALID: &str = "InvalidNodeGroup";

/// NodeGroup condition type: a backoff window after a failed scale-up.
pub const BACKOFF: &str = "Backoff";
/// `Backoff=False` reason: the window has passed.
pub const BACKOFF_ENDED: &str = "BackoffEnded";
/// `Backoff=False` reason: a scale-up succeeded and closed the window.
pub const SCALE_UP_SUCCEEDED: &str = "ScaleUpSucceeded";

/// One reason of a condition type.
#[derive(Debug, Clone, Copy)]
pub struct ConditionReason {
    /// `True` or `False`.
    pub status: &'static str,
    /// The reason.
    pub reason: &'static str,
    /// When it is set, and what to do.
    pub when: &'static str,
}

/// One NodeGroup condition type.
#[derive(Debug, Clone, Copy)]
pub struct ConditionDoc {
    /// The type.
    pub type_: &'static str,
    /// What it tells.
    pub meaning: &'static str,
    /// Its reasons.
    pub reasons: &'static [ConditionReason],
}

/// Every condition type the controller sets on NodeGroups, with its reasons.
pub const NODE_GROUP_CONDITIONS: &[ConditionDoc] = &[
    ConditionDoc {
        type_: VALID,
        meaning: "Whether the controller can use the group. A group that is not valid is left out of planning and scale-down.",
        reasons: &[
            ConditionReason {
                status: "True",
                reason: VALID_REASON,
                when: "The spec decodes and validates, and the provider serves the group.",
            },
            ConditionReason {
                status: "False",
                reason: DECODE_FAILED,
                when: "The object does not decode as a NodeGroup; the message names the field. Fix the object.",
            },
            ConditionReason {
                status: "False",
                reason: INVALID_SPEC,
                when: "It decodes and breaks a rule of the spec; the message names the rule. Fix the spec.",
            },
            ConditionReason {
                status: "False",
                reason: PROVIDER_REFUSED,
                when: "Its provider does not serve the group it names (unknown there, or unusable: a bad launch template, an unknown instance type, a bad tag). Fix the provider side or `providerID`.",
            },
        ],
    },
    ConditionDoc {
        type_: SCALING_ACTIVE,
        meaning: "Whether the controller scales the group when needed (correctly configured and not disabled). Whether scaling is held back for a while is `Backoff`.",
        reasons: &[
            ConditionReason {
                status: "True",
                reason: ACTIVE,
                when: "Planned with in every loop: nodes are added for pending pods up to `spec.maxSize`.",
            },
            ConditionReason {
                status: "False",
                reason: SCALING_DISABLED,
                when: "`spec.maxSize` is 0: no node is ever added.",
            },
            ConditionReason {
                status: "False",
                reason: SCALING_INACTIVE_INVALID,
                when: "The group is left out as invalid; see `Valid`.",
            },
        ],
    },
    ConditionDoc {
        type_: AT_MIN_SIZE,
        meaning: "The group's size (registered and upcoming nodes) against `spec.minSize`. Nodes are added only for pending pods; `minSize` bounds scale-down.",
        reasons: &[
            ConditionReason {
                status: "False",
                reason: BELOW_MIN_SIZE,
                when: "Fewer nodes than `minSize`: nothing is added for that alone.",
            },
            ConditionReason {
                status: "True",
                reason: AT_MIN_SIZE_REASON,
                when: "At `minSize`: scale-down removes no more.",
            },
            ConditionReason {
                status: "False",
                reason: ABOVE_MIN_SIZE,
                when: "More nodes than `minSize`.",
            },
        ],
    },
    ConditionDoc {
        type_: BACKOFF,
        meaning: "A backoff window after a failed scale-up: the group is not scaled up until it ends (`status.backoffUntil`).",
        reasons: &[
            ConditionReason {
                status: "True",
                reason: "(the provider error's category)",
                when: "A scale-up failed: `OutOfCapacity`, `QuotaExceeded`, `ProviderRejected`, `ProviderConfigError`, `NotImplemented`, ... The message is the provider's error.",
            },
            ConditionReason {
                status: "False",
                reason: BACKOFF_ENDED,
                when: "The window has passed; scale-ups are tried again.",
            },
            ConditionReason {
                status: "False",
                reason: SCALE_UP_SUCCEEDED,
                when: "A scale-up succeeded and closed the window.",
            },
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_once() {
        let mut reasons: Vec<&str> = EVENTS.iter().map(|e| e.reason).collect();
        reasons.sort_unstable();
        let before = reasons.len();
        reasons.dedup();
        assert_eq!(before, reasons.len(), "an Event reason listed twice");
        for condition in NODE_GROUP_CONDITIONS {
            let mut pairs: Vec<(&str, &str)> = condition
                .reasons
                .iter()
                .map(|r| (r.status, r.reason))
                .collect();
            pairs.sort_unstable();
            let before = pairs.len();
            pairs.dedup();
            assert_eq!(before, pairs.len(), "{}", condition.type_);
            assert!(
                condition
                    .reasons
                    .iter()
                    .all(|r| r.status == "True" || r.status == "False")
            );
        }
    }
}
