#![allow(clippy::unwrap_used)]

use super::*;
use crate::scaledown::drain_error::MoveFailure;

fn pod(block: PodBlock) -> BlockingPod {
    BlockingPod {
        pod: "ml/p-0".into(),
        block,
    }
}

/// Every kind of value, with the words it prints and the code upstream gives the same case.
fn cases() -> Vec<(Unremovable, &'static str, UnremovableReason)> {
    use UnremovableReason as R;
    vec![
        (
            Unremovable::Booting,
            "node is still booting",
            R::NodeBooting,
        ),
        (
            Unremovable::ScaleDownDisabled {
                node_group: "gpu".into(),
            },
            "scale-down disabled for node group gpu",
            R::NodeGroupScaleDownDisabled,
        ),
        (
            Unremovable::Annotated {
                key: "karpenter.sh/do-not-disrupt".into(),
            },
            "node annotated karpenter.sh/do-not-disrupt",
            R::ScaleDownDisabledAnnotation,
        ),
        (
            Unremovable::PendingPodPlanned {
                pod: "ml/w-1".into(),
            },
            "pending pod ml/w-1 is planned onto it",
            R::PlannedForPendingPod,
        ),
        (
            Unremovable::StandInPod {
                kind: "CapacityBuffer".into(),
                owner: "ml/warm".into(),
                pod: "ml/warm-0".into(),
            },
            "CapacityBuffer ml/warm keeps pod ml/warm-0 on it",
            R::KeptForStandInPod,
        ),
        (
            Unremovable::Booked {
                request: "ml/job".into(),
            },
            "capacity is booked on it for ProvisioningRequest ml/job",
            R::BookedForProvisioningRequest,
        ),
        (
            Unremovable::Reserved(ReservedHold {
                reservation: "r-1".into(),
                ends: Some("2026-12-01T00:00:00Z".parse().unwrap()),
            }),
            "reserved capacity (reservation r-1 ends 2026-12-01T00:00:00Z; set spec.scaleDown.removeReservedNodes to remove earlier)",
            R::ReservedCapacity,
        ),
        (
            Unremovable::Reserved(ReservedHold {
                reservation: "r-1".into(),
                ends: None,
            }),
            "reserved capacity (reservation r-1; set spec.scaleDown.removeReservedNodes to remove it)",
            R::ReservedCapacity,
        ),
        (
            Unremovable::MinSize { min: 2 },
            "minSize 2",
            R::NodeGroupMinSizeReached,
        ),
        (
            Unremovable::RunningGang {
                gang: "ml/train".into(),
            },
            "running gang ml/train",
            R::RunningGang,
        ),
        (
            Unremovable::Pod(pod(PodBlock::NoController)),
            "pod ml/p-0 has no controller",
            R::BlockedByPod,
        ),
        (
            Unremovable::Pod(pod(PodBlock::KubeSystemWithoutBudget)),
            "pod ml/p-0 is a kube-system pod without a PodDisruptionBudget",
            R::BlockedByPod,
        ),
        (
            Unremovable::Pod(pod(PodBlock::NotSafeToEvict)),
            "pod ml/p-0 is annotated cluster-autoscaler.kubernetes.io/safe-to-evict=false",
            R::BlockedByPod,
        ),
        (
            Unremovable::Pod(pod(PodBlock::LocalStorage {
                volume: "scratch".into(),
            })),
            "pod ml/p-0 has local storage (volume scratch)",
            R::BlockedByPod,
        ),
        (
            Unremovable::GangMember {
                gang: "ml/train".into(),
                pod: pod(PodBlock::DoNotDisrupt {
                    key: "dra-autoscaler.io/do-not-disrupt".into(),
                }),
            },
            "gang ml/train cannot move whole: pod ml/p-0 is annotated dra-autoscaler.io/do-not-disrupt",
            R::BlockedByPod,
        ),
        (
            Unremovable::Budget(BudgetError::NoDisruptionsLeft {
                budget: "ml/web".into(),
                pod: "ml/web-1".into(),
            }),
            "PodDisruptionBudget ml/web allows no more disruptions (pod ml/web-1)",
            R::BlockedByPod,
        ),
        (
            Unremovable::Drain(DrainError::CannotMove {
                pod: "ml/a".into(),
                why: MoveFailure::NoOtherNode,
            }),
            "pod ml/a cannot move: no other node to move to",
            R::NoPlaceToMovePods,
        ),
        (
            Unremovable::Drain(DrainError::CannotMove {
                pod: "ml/a".into(),
                why: MoveFailure::Refused {
                    shown: vec![(2, "Insufficient cpu".into())],
                    more: 0,
                },
            }),
            "pod ml/a cannot move: no other node fits it (2 nodes: Insufficient cpu)",
            R::NoPlaceToMovePods,
        ),
        (
            Unremovable::Drain(DrainError::Unbind("pod ml/a is not bound".into())),
            "pod ml/a is not bound",
            R::UnexpectedError,
        ),
        (
            Unremovable::NotUnneededLongEnough {
                elapsed: SignedDuration::from_secs(90),
                wait: SignedDuration::from_mins(10),
            },
            "unneeded for 1m 30s of 10m",
            R::NotUnneededLongEnough,
        ),
        (
            Unremovable::MaxParallelism { max: 3 },
            "waiting: at most 3 removals at a time (--max-scale-down-parallelism)",
            R::NodeGroupMaxDeletionCountReached,
        ),
    ]
}

#[test]
fn every_reason_prints_its_words_has_its_code_and_reads_back() {
    for (value, words, code) in cases() {
        assert_eq!(value.to_string(), words);
        assert_eq!(value.code(), code, "{words}");
        assert_eq!(
            Unremovable::parse(code, words).as_ref(),
            Some(&value),
            "{words}"
        );
    }
}

#[test]
fn every_code_is_covered_and_spelled_as_its_name() {
    let covered: std::collections::BTreeSet<_> = cases().into_iter().map(|c| c.2).collect();
    for code in UnremovableReason::ALL {
        assert!(covered.contains(&code), "{code} has no case");
        assert_eq!(
            serde_json::to_value(code).unwrap(),
            serde_json::json!(code.as_str())
        );
    }
}

#[test]
fn words_of_another_code_do_not_read_back() {
    assert_eq!(
        Unremovable::parse(
            UnremovableReason::NodeGroupMinSizeReached,
            "running gang ml/a"
        ),
        None
    );
    assert_eq!(
        Unremovable::parse(UnremovableReason::NodeBooting, "minSize 1"),
        None
    );
}

#[test]
fn only_time_and_the_removal_cap_are_waiting() {
    let waiting: Vec<UnremovableReason> = cases()
        .into_iter()
        .filter(|c| c.0.is_waiting())
        .map(|c| c.2)
        .collect();
    assert_eq!(
        waiting,
        [
            UnremovableReason::NotUnneededLongEnough,
            UnremovableReason::NodeGroupMaxDeletionCountReached
        ]
    );
}

#[test]
fn pods_blocking_carry_cluster_autoscalers_blocking_pod_reason() {
    let of = |v: Unremovable| v.blocking_pod_reason();
    assert_eq!(
        of(Unremovable::Pod(pod(PodBlock::NoController))),
        Some(BlockingPodReason::NotReplicated)
    );
    assert_eq!(
        of(Unremovable::Pod(pod(PodBlock::NotSafeToEvict))),
        Some(BlockingPodReason::NotSafeToEvictAnnotation)
    );
    assert_eq!(
        of(Unremovable::Pod(pod(PodBlock::KubeSystemWithoutBudget))),
        Some(BlockingPodReason::UnmovableKubeSystemPod)
    );
    assert_eq!(
        of(Unremovable::Pod(pod(PodBlock::LocalStorage {
            volume: "v".into()
        }))),
        Some(BlockingPodReason::LocalStorageRequested)
    );
    assert_eq!(
        of(Unremovable::Budget(BudgetError::NotProcessed {
            budget: "ml/b".into(),
            pod: "ml/p".into()
        })),
        Some(BlockingPodReason::NotEnoughPdb)
    );
    assert_eq!(of(Unremovable::MinSize { min: 1 }), None);
}

#[test]
fn removals_print_and_read_back() {
    let moved = Removable::Underutilized {
        percent: 13,
        resource: "gpu.example.com/pool-a".into(),
        gang: Some("ml/train".into()),
        moves: vec![("ml/a".into(), "n-1".into()), ("ml/b".into(), "n-2".into())],
    };
    let words = "underutilized: 13% (gpu.example.com/pool-a); gang ml/train moves whole; pods: ml/a -> n-1, ml/b -> n-2";
    assert_eq!(moved.to_string(), words);
    assert_eq!(
        Removable::parse(RemovableReason::Underutilized, words),
        Some(moved)
    );
    assert_eq!(
        Removable::parse(RemovableReason::Empty, "empty"),
        Some(Removable::Empty)
    );
    assert_eq!(Removable::parse(RemovableReason::Empty, words), None);
}
