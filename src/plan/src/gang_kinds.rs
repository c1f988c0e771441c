//! The gang APIs' object kinds, each named once: which `(API group, kind)` defines the
//! gangs of which API, and the upstream group's versions this planner reads. A leaf shared
//! by gang detection ([`crate::gang`]) and the discovery of the APIs a cluster uses
//! ([`crate::gang_apis`]).

/// The upstream gang API group.
pub const UPSTREAM_GROUP: &str = "scheduling.k8s.io";

/// The `scheduling.k8s.io` versions whose Workload and PodGroup this planner
/// reads: `v1alpha1` (Kubernetes 1.35), `v1alpha2` (1.36), `v1alpha3` and
/// `v1beta1` (1.37). Objects of another version are not understood: they are
/// neither read nor taken as evidence.
pub const UPSTREAM_VERSIONS: &[&str] = &["v1alpha1", "v1alpha2", "v1alpha3", "v1beta1"];

/// An object kind that defines gangs: its API group and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GangKind {
    /// The API group (`scheduling.k8s.io`, ...).
    pub group: &'static str,
    /// The kind (`Workload`, `PodGroup`).
    pub kind: &'static str,
}

impl GangKind {
    /// `(group, kind)`, the shape [`GANG_KINDS`] lists.
    #[must_use]
    pub const fn pair(self) -> (&'static str, &'static str) {
        (self.group, self.kind)
    }
}

/// The upstream Workload (Kubernetes 1.35).
pub const WORKLOAD: GangKind = GangKind {
    group: UPSTREAM_GROUP,
    kind: "Workload",
};
/// The upstream PodGroup (Kubernetes 1.36+).
pub const UPSTREAM_POD_GROUP: GangKind = GangKind {
    group: UPSTREAM_GROUP,
    kind: "PodGroup",
};
/// scheduler-plugins coscheduling's PodGroup.
pub const COSCHEDULING_POD_GROUP: GangKind = GangKind {
    group: "scheduling.x-k8s.io",
    kind: "PodGroup",
};
/// scheduler-plugins coscheduling's PodGroup under its pre-2023 group.
pub const COSCHEDULING_LEGACY_POD_GROUP: GangKind = GangKind {
    group: "scheduling.sigs.k8s.io",
    kind: "PodGroup",
};
/// Volcano's PodGroup.
pub const VOLCANO_POD_GROUP: GangKind = GangKind {
    group: "scheduling.volcano.sh",
    kind: "PodGroup",
};

/// The kinds of the upstream Workload API 1.35.
pub const WORKLOAD_KINDS: &[(&str, &str)] = &[WORKLOAD.pair()];
/// The kinds of the upstream PodGroup API 1.36+.
pub const UPSTREAM_POD_GROUP_KINDS: &[(&str, &str)] = &[UPSTREAM_POD_GROUP.pair()];
/// The kinds of scheduler-plugins coscheduling, both groups.
pub const COSCHEDULING_KINDS: &[(&str, &str)] = &[
    COSCHEDULING_POD_GROUP.pair(),
    COSCHEDULING_LEGACY_POD_GROUP.pair(),
];
/// The kinds of Volcano.
pub const VOLCANO_KINDS: &[(&str, &str)] = &[VOLCANO_POD_GROUP.pair()];

/// The API groups (and kinds) whose objects gang detection reads; callers ask
/// the loader (or the API server) to keep these.
pub const GANG_KINDS: &[(&str, &str)] = &[
    WORKLOAD.pair(),
    UPSTREAM_POD_GROUP.pair(),
    COSCHEDULING_POD_GROUP.pair(),
    COSCHEDULING_LEGACY_POD_GROUP.pair(),
    VOLCANO_POD_GROUP.pair(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_list_is_part_of_the_whole_and_the_whole_is_their_union() {
        let union: Vec<(&str, &str)> = [
            WORKLOAD_KINDS,
            UPSTREAM_POD_GROUP_KINDS,
            COSCHEDULING_KINDS,
            VOLCANO_KINDS,
        ]
        .concat();
        assert_eq!(union, GANG_KINDS);
    }
}
