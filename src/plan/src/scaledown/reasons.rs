//! Why a node may go, why it stays, and what a pod blocks — as values.
//!
//! cluster-autoscaler keeps these outcomes as enums (`simulator.UnremovableReason` for a node,
//! `drain.BlockingPodReason` for a pod) and counts nodes by them
//! (`unremovable_nodes_count{reason}`). Ours are the same: a value per outcome with the details
//! it names, a stable code ([`UnremovableReason`], [`BlockingPodReason`], [`RemovableReason`];
//! upstream's names where the meaning is the same) that JSON `code` keys and metric labels
//! carry, and `Display` for the words `simulate` prints. Reading `{reason, code}` back
//! ([`Unremovable::parse`]) inverts `Display` for the variant the code names.

use std::fmt;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::drain_error::DrainError;
use super::keys::SAFE_TO_EVICT;
use super::pdb::BudgetError;

/// Why an underused node stays: the code of an [`Unremovable`]. Its spelling
/// ([`UnremovableReason::as_str`]) is a contract (JSON `code`, the `reason` label of
/// `dra_autoscaler_unremovable_nodes`): add variants, never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum UnremovableReason {
    /// The node is still booting (registered, not yet ready for pods).
    NodeBooting,
    /// Its NodeGroup has `spec.scaleDown.enabled: false`.
    NodeGroupScaleDownDisabled,
    /// A node annotation forbids removing it (cluster-autoscaler's name; also Karpenter's and
    /// our do-not-disrupt).
    ScaleDownDisabledAnnotation,
    /// The scale-up plan puts a pending pod on it.
    PlannedForPendingPod,
    /// A CapacityBuffer's or ProvisioningRequest's stand-in pod is kept on it.
    KeptForStandInPod,
    /// Capacity on it is booked for a provisioned ProvisioningRequest.
    BookedForProvisioningRequest,
    /// Its NodeGroup is reserved capacity whose reservation has not ended.
    ReservedCapacity,
    /// Its NodeGroup is at `minSize` (cluster-autoscaler's name).
    NodeGroupMinSizeReached,
    /// A member of a running gang that may not be moved runs on it.
    RunningGang,
    /// A pod on it cannot be moved; the pod and why are in the value (cluster-autoscaler's
    /// name).
    BlockedByPod,
    /// Its pods would fit nowhere else (cluster-autoscaler's name).
    NoPlaceToMovePods,
    /// Unneeded, but not for the group's unneeded time yet (cluster-autoscaler's name).
    NotUnneededLongEnough,
    /// Removable, but the pass already removes as many nodes as it may
    /// (cluster-autoscaler's name for its per-loop cap).
    NodeGroupMaxDeletionCountReached,
    /// The simulation failed in a way no rule explains (cluster-autoscaler's name).
    UnexpectedError,
}

impl UnremovableReason {
    /// Every code, in declaration order (metrics reset each of them every pass).
    pub const ALL: [UnremovableReason; 14] = [
        Self::NodeBooting,
        Self::NodeGroupScaleDownDisabled,
        Self::ScaleDownDisabledAnnotation,
        Self::PlannedForPendingPod,
        Self::KeptForStandInPod,
        Self::BookedForProvisioningRequest,
        Self::ReservedCapacity,
        Self::NodeGroupMinSizeReached,
        Self::RunningGang,
        Self::BlockedByPod,
        Self::NoPlaceToMovePods,
        Self::NotUnneededLongEnough,
        Self::NodeGroupMaxDeletionCountReached,
        Self::UnexpectedError,
    ];

    /// The stable spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeBooting => "NodeBooting",
            Self::NodeGroupScaleDownDisabled => "NodeGroupScaleDownDisabled",
            Self::ScaleDownDisabledAnnotation => "ScaleDownDisabledAnnotation",
            Self::PlannedForPendingPod => "PlannedForPendingPod",
            Self::KeptForStandInPod => "KeptForStandInPod",
            Self::BookedForProvisioningRequest => "BookedForProvisioningRequest",
            Self::ReservedCapacity => "ReservedCapacity",
            Self::NodeGroupMinSizeReached => "NodeGroupMinSizeReached",
            Self::RunningGang => "RunningGang",
            Self::BlockedByPod => "BlockedByPod",
            Self::NoPlaceToMovePods => "NoPlaceToMovePods",
            Self::NotUnneededLongEnough => "NotUnneededLongEnough",
            Self::NodeGroupMaxDeletionCountReached => "NodeGroupMaxDeletionCountReached",
            Self::UnexpectedError => "UnexpectedError",
        }
    }
}

impl fmt::Display for UnremovableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a pod on a candidate node blocks by: the code of a [`PodBlock`]
/// (cluster-autoscaler's `drain.BlockingPodReason` names where the meaning is the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BlockingPodReason {
    /// A do-not-disrupt annotation (Karpenter's or ours).
    DoNotDisruptAnnotation,
    /// No controller owns it.
    NotReplicated,
    /// A kube-system pod no PodDisruptionBudget selects.
    UnmovableKubeSystemPod,
    /// `safe-to-evict: "false"`.
    NotSafeToEvictAnnotation,
    /// A local volume it does not list as safe to evict.
    LocalStorageRequested,
    /// Its PodDisruptionBudget allows no more disruptions (or has not been processed yet).
    NotEnoughPdb,
    /// More than one PodDisruptionBudget selects it: the Eviction API refuses it.
    MultiplePdbs,
}

impl BlockingPodReason {
    /// The stable spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DoNotDisruptAnnotation => "DoNotDisruptAnnotation",
            Self::NotReplicated => "NotReplicated",
            Self::UnmovableKubeSystemPod => "UnmovableKubeSystemPod",
            Self::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation",
            Self::LocalStorageRequested => "LocalStorageRequested",
            Self::NotEnoughPdb => "NotEnoughPdb",
            Self::MultiplePdbs => "MultiplePdbs",
        }
    }
}

/// Why a pod keeps its node, by the per-pod rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodBlock {
    /// Annotated with this do-not-disrupt key.
    DoNotDisrupt {
        /// The annotation key.
        key: String,
    },
    /// No controller owns it.
    NoController,
    /// A kube-system pod without a PodDisruptionBudget.
    KubeSystemWithoutBudget,
    /// `safe-to-evict: "false"`.
    NotSafeToEvict,
    /// This local volume is not listed as safe to evict.
    LocalStorage {
        /// The volume's name.
        volume: String,
    },
}

impl PodBlock {
    /// The code.
    #[must_use]
    pub fn code(&self) -> BlockingPodReason {
        match self {
            Self::DoNotDisrupt { .. } => BlockingPodReason::DoNotDisruptAnnotation,
            Self::NoController => BlockingPodReason::NotReplicated,
            Self::KubeSystemWithoutBudget => BlockingPodReason::UnmovableKubeSystemPod,
            Self::NotSafeToEvict => BlockingPodReason::NotSafeToEvictAnnotation,
            Self::LocalStorage { .. } => BlockingPodReason::LocalStorageRequested,
        }
    }
}

/// A pod that keeps its node, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockingPod {
    /// `namespace/name`.
    pub pod: String,
    /// Why.
    pub block: PodBlock,
}

impl fmt::Display for BlockingPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pod = &self.pod;
        match &self.block {
            PodBlock::DoNotDisrupt { key } => write!(f, "pod {pod} is annotated {key}"),
            PodBlock::NoController => write!(f, "pod {pod} has no controller"),
            PodBlock::KubeSystemWithoutBudget => write!(
                f,
                "pod {pod} is a kube-system pod without a PodDisruptionBudget"
            ),
            PodBlock::NotSafeToEvict => write!(f, "pod {pod} is annotated {SAFE_TO_EVICT}=false"),
            PodBlock::LocalStorage { volume } => {
                write!(f, "pod {pod} has local storage (volume {volume})")
            }
        }
    }
}

impl BlockingPod {
    /// Reads the words `Display` writes.
    #[must_use]
    pub fn parse(words: &str) -> Option<Self> {
        let rest = words.strip_prefix("pod ")?;
        let (pod, rest) = rest.split_once(' ')?;
        let block = if rest == "has no controller" {
            PodBlock::NoController
        } else if rest == "is a kube-system pod without a PodDisruptionBudget" {
            PodBlock::KubeSystemWithoutBudget
        } else if rest == format!("is annotated {SAFE_TO_EVICT}=false") {
            PodBlock::NotSafeToEvict
        } else if let Some(key) = rest.strip_prefix("is annotated ") {
            PodBlock::DoNotDisrupt { key: key.into() }
        } else {
            let volume = rest
                .strip_prefix("has local storage (volume ")?
                .strip_suffix(')')?;
            PodBlock::LocalStorage {
                volume: volume.into(),
            }
        };
        Some(Self {
            pod: pod.into(),
            block,
        })
    }
}

/// A reserved group's nodes stay until the reservation ends (or the group opts in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedHold {
    /// The reservation's id (empty when the group names none).
    pub reservation: String,
    /// When it ends, if the group says.
    pub ends: Option<Timestamp>,
}

impl fmt::Display for ReservedHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = &self.reservation;
        match self.ends {
            Some(end) => write!(
                f,
                "reserved capacity (reservation {id} ends {end}; set spec.scaleDown.removeReservedNodes to remove earlier)"
            ),
            None => write!(
                f,
                "reserved capacity (reservation {id}; set spec.scaleDown.removeReservedNodes to remove it)"
            ),
        }
    }
}

impl ReservedHold {
    fn parse(words: &str) -> Option<Self> {
        let rest = words.strip_prefix("reserved capacity (reservation ")?;
        if let Some(rest) =
            rest.strip_suffix("; set spec.scaleDown.removeReservedNodes to remove earlier)")
        {
            let (id, end) = rest.rsplit_once(" ends ")?;
            return Some(Self {
                reservation: id.into(),
                ends: Some(end.parse().ok()?),
            });
        }
        let id = rest.strip_suffix("; set spec.scaleDown.removeReservedNodes to remove it)")?;
        Some(Self {
            reservation: id.into(),
            ends: None,
        })
    }
}

/// Why an underused node stays.
#[derive(Debug, Clone, PartialEq)]
pub enum Unremovable {
    /// Still booting.
    Booting,
    /// Scale-down is disabled for its group.
    ScaleDownDisabled {
        /// The NodeGroup.
        node_group: String,
    },
    /// A node annotation keeps it.
    Annotated {
        /// The annotation key.
        key: String,
    },
    /// The plan puts this pending pod on it.
    PendingPodPlanned {
        /// `namespace/name`.
        pod: String,
    },
    /// A stand-in pod is kept on it.
    StandInPod {
        /// `CapacityBuffer` or `ProvisioningRequest`.
        kind: String,
        /// `namespace/name` of the buffer or request.
        owner: String,
        /// The stand-in pod.
        pod: String,
    },
    /// Capacity on it is booked for this ProvisioningRequest.
    Booked {
        /// `namespace/name`.
        request: String,
    },
    /// Reserved capacity before its reservation ends.
    Reserved(ReservedHold),
    /// Its group is at `minSize`.
    MinSize {
        /// The group's `minSize`.
        min: usize,
    },
    /// A member of this gang runs on it, and the gang may not move.
    RunningGang {
        /// `namespace/name`.
        gang: String,
    },
    /// A pod on it cannot move.
    Pod(BlockingPod),
    /// A member of a gang that may move whole cannot move.
    GangMember {
        /// `namespace/name` of the gang.
        gang: String,
        /// The member and why.
        pod: BlockingPod,
    },
    /// A PodDisruptionBudget keeps a pod.
    Budget(BudgetError),
    /// Its pods cannot be placed elsewhere.
    Drain(DrainError),
    /// Unneeded for `elapsed` of the group's `wait`.
    NotUnneededLongEnough {
        /// How long so far.
        elapsed: SignedDuration,
        /// How long it must be.
        wait: SignedDuration,
    },
    /// The pass removes `max` nodes already.
    MaxParallelism {
        /// `--max-scale-down-parallelism`.
        max: usize,
    },
}

impl Unremovable {
    /// The code.
    #[must_use]
    pub fn code(&self) -> UnremovableReason {
        use UnremovableReason as R;
        match self {
            Self::Booting => R::NodeBooting,
            Self::ScaleDownDisabled { .. } => R::NodeGroupScaleDownDisabled,
            Self::Annotated { .. } => R::ScaleDownDisabledAnnotation,
            Self::PendingPodPlanned { .. } => R::PlannedForPendingPod,
            Self::StandInPod { .. } => R::KeptForStandInPod,
            Self::Booked { .. } => R::BookedForProvisioningRequest,
            Self::Reserved(_) => R::ReservedCapacity,
            Self::MinSize { .. } => R::NodeGroupMinSizeReached,
            Self::RunningGang { .. } => R::RunningGang,
            Self::Pod(_) | Self::GangMember { .. } | Self::Budget(_) => R::BlockedByPod,
            Self::Drain(DrainError::CannotMove { .. }) => R::NoPlaceToMovePods,
            Self::Drain(DrainError::Unbind(_)) => R::UnexpectedError,
            Self::NotUnneededLongEnough { .. } => R::NotUnneededLongEnough,
            Self::MaxParallelism { .. } => R::NodeGroupMaxDeletionCountReached,
        }
    }

    /// The code of the pod that keeps the node, when a pod does ([`UnremovableReason::BlockedByPod`]).
    #[must_use]
    pub fn blocking_pod_reason(&self) -> Option<BlockingPodReason> {
        match self {
            Self::Pod(p) | Self::GangMember { pod: p, .. } => Some(p.block.code()),
            Self::Budget(b) => Some(b.code()),
            _ => None,
        }
    }

    /// Kept only for now: unneeded, but not for long enough yet, or waiting for room among
    /// the removals of the pass.
    #[must_use]
    pub fn is_waiting(&self) -> bool {
        matches!(
            self,
            Self::NotUnneededLongEnough { .. } | Self::MaxParallelism { .. }
        )
    }

    /// Reads back the words `Display` writes for a value of code `code`; `None` when they are
    /// not that code's words.
    #[must_use]
    pub fn parse(code: UnremovableReason, words: &str) -> Option<Self> {
        use UnremovableReason as R;
        Some(match code {
            R::NodeBooting => (words == "node is still booting").then_some(Self::Booting)?,
            R::NodeGroupScaleDownDisabled => Self::ScaleDownDisabled {
                node_group: words
                    .strip_prefix("scale-down disabled for node group ")?
                    .into(),
            },
            R::ScaleDownDisabledAnnotation => Self::Annotated {
                key: words.strip_prefix("node annotated ")?.into(),
            },
            R::PlannedForPendingPod => Self::PendingPodPlanned {
                pod: words
                    .strip_prefix("pending pod ")?
                    .strip_suffix(" is planned onto it")?
                    .into(),
            },
            R::KeptForStandInPod => {
                let rest = words.strip_suffix(" on it")?;
                let (kind, rest) = rest.split_once(' ')?;
                let (owner, pod) = rest.split_once(" keeps pod ")?;
                Self::StandInPod {
                    kind: kind.into(),
                    owner: owner.into(),
                    pod: pod.into(),
                }
            }
            R::BookedForProvisioningRequest => Self::Booked {
                request: words
                    .strip_prefix("capacity is booked on it for ProvisioningRequest ")?
                    .into(),
            },
            R::ReservedCapacity => Self::Reserved(ReservedHold::parse(words)?),
            R::NodeGroupMinSizeReached => Self::MinSize {
                min: words.strip_prefix("minSize ")?.parse().ok()?,
            },
            R::RunningGang => Self::RunningGang {
                gang: words.strip_prefix("running gang ")?.into(),
            },
            R::BlockedByPod => {
                if let Some(rest) = words.strip_prefix("gang ")
                    && let Some((gang, pod)) = rest.split_once(" cannot move whole: ")
                {
                    Self::GangMember {
                        gang: gang.into(),
                        pod: BlockingPod::parse(pod)?,
                    }
                } else if let Some(budget) = BudgetError::parse(words) {
                    Self::Budget(budget)
                } else {
                    Self::Pod(BlockingPod::parse(words)?)
                }
            }
            R::NoPlaceToMovePods => Self::Drain(DrainError::parse(words)?),
            R::UnexpectedError => Self::Drain(DrainError::Unbind(words.into())),
            R::NotUnneededLongEnough => {
                let (elapsed, wait) = words.strip_prefix("unneeded for ")?.split_once(" of ")?;
                Self::NotUnneededLongEnough {
                    elapsed: elapsed.parse().ok()?,
                    wait: wait.parse().ok()?,
                }
            }
            R::NodeGroupMaxDeletionCountReached => Self::MaxParallelism {
                max: words
                    .strip_prefix("waiting: at most ")?
                    .strip_suffix(" removals at a time (--max-scale-down-parallelism)")?
                    .parse()
                    .ok()?,
            },
        })
    }
}

impl fmt::Display for Unremovable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Booting => f.write_str("node is still booting"),
            Self::ScaleDownDisabled { node_group } => {
                write!(f, "scale-down disabled for node group {node_group}")
            }
            Self::Annotated { key } => write!(f, "node annotated {key}"),
            Self::PendingPodPlanned { pod } => write!(f, "pending pod {pod} is planned onto it"),
            Self::StandInPod { kind, owner, pod } => {
                write!(f, "{kind} {owner} keeps pod {pod} on it")
            }
            Self::Booked { request } => write!(
                f,
                "capacity is booked on it for ProvisioningRequest {request}"
            ),
            Self::Reserved(hold) => hold.fmt(f),
            Self::MinSize { min } => write!(f, "minSize {min}"),
            Self::RunningGang { gang } => write!(f, "running gang {gang}"),
            Self::Pod(pod) => pod.fmt(f),
            Self::GangMember { gang, pod } => write!(f, "gang {gang} cannot move whole: {pod}"),
            Self::Budget(budget) => budget.fmt(f),
            Self::Drain(drain) => drain.fmt(f),
            Self::NotUnneededLongEnough { elapsed, wait } => {
                write!(f, "unneeded for {elapsed:#} of {wait:#}")
            }
            Self::MaxParallelism { max } => write!(
                f,
                "waiting: at most {max} removals at a time (--max-scale-down-parallelism)"
            ),
        }
    }
}

/// Why a node may go: the code of a [`Removable`]. Its spelling is a contract (JSON `code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RemovableReason {
    /// No pod needs a new place.
    Empty,
    /// Underused, and every pod that must move fits elsewhere.
    Underutilized,
}

/// Why a node may go, with what its removal moves.
#[derive(Debug, Clone, PartialEq)]
pub enum Removable {
    /// No pod needs a new place (only DaemonSet, mirror or finished pods).
    Empty,
    /// Underused; its pods move.
    Underutilized {
        /// Its utilisation as a whole percentage.
        percent: u64,
        /// The resource that sets it (`cpu`, `memory`, `<driver>/<pool>`).
        resource: String,
        /// The gang moved whole with it, if any.
        gang: Option<String>,
        /// Pods to evict, `namespace/name`, with the node each would land on.
        moves: Vec<(String, String)>,
    },
}

impl Removable {
    /// The code.
    #[must_use]
    pub fn code(&self) -> RemovableReason {
        match self {
            Self::Empty => RemovableReason::Empty,
            Self::Underutilized { .. } => RemovableReason::Underutilized,
        }
    }

    /// Reads back the words `Display` writes for code `code`.
    #[must_use]
    pub fn parse(code: RemovableReason, words: &str) -> Option<Self> {
        match code {
            RemovableReason::Empty => (words == "empty").then_some(Self::Empty),
            RemovableReason::Underutilized => {
                let rest = words.strip_prefix("underutilized: ")?;
                let (head, pods) = rest.rsplit_once("; pods: ")?;
                let (head, gang) = match head.rsplit_once("; gang ") {
                    Some((head, gang)) => (head, Some(gang.strip_suffix(" moves whole")?.into())),
                    None => (head, None),
                };
                let (percent, resource) = head.split_once("% (")?;
                let moves = pods
                    .split(", ")
                    .map(|m| {
                        m.split_once(" -> ")
                            .map(|(p, n)| (p.to_string(), n.to_string()))
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(Self::Underutilized {
                    percent: percent.parse().ok()?,
                    resource: resource.strip_suffix(')')?.into(),
                    gang,
                    moves,
                })
            }
        }
    }
}

impl fmt::Display for Removable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty"),
            Self::Underutilized {
                percent,
                resource,
                gang,
                moves,
            } => {
                write!(f, "underutilized: {percent}% ({resource})")?;
                if let Some(gang) = gang {
                    write!(f, "; gang {gang} moves whole")?;
                }
                f.write_str("; pods: ")?;
                for (i, (pod, node)) in moves.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{pod} -> {node}")?;
                }
                Ok(())
            }
        }
    }
}

/// A budget's refusal as the code of what the pod blocks by (here, not in `pdb`, so the
/// budget simulation need not import the reasons that hold its errors).
impl BudgetError {
    /// The code of what the pod blocks by.
    #[must_use]
    pub fn code(&self) -> BlockingPodReason {
        match self {
            Self::MultipleBudgets { .. } => BlockingPodReason::MultiplePdbs,
            Self::NotProcessed { .. } | Self::NoDisruptionsLeft { .. } => {
                BlockingPodReason::NotEnoughPdb
            }
        }
    }
}

#[cfg(test)]
mod tests;
