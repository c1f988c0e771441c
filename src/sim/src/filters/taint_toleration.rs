//! TaintToleration: a node's `NoSchedule` and `NoExecute` taints must each be
//! tolerated by the pod (`v1helper.FindMatchingUntoleratedTaint`).
//! `PreferNoSchedule` only affects scoring, which is not modelled.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Upstream plugin name.
pub const NAME: &str = "TaintToleration";

/// `Toleration.ToleratesTaint` (without the alpha comparison operators of
/// `TaintTolerationComparisonOperators`, which are off by default).
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    if let Some(key) = toleration.key.as_deref().filter(|k| !k.is_empty())
        && key != taint.key
    {
        return false;
    }
    match toleration.operator.as_deref() {
        None | Some("" | "Equal") => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        Some("Exists") => true,
        Some(_) => false,
    }
}

/// `v1helper.TolerationsTolerateTaint`.
pub(crate) fn tolerations_tolerate(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// Taints that keep pods off a node at scheduling time.
pub(crate) fn is_do_not_schedule(taint: &Taint) -> bool {
    taint.effect == "NoSchedule" || taint.effect == "NoExecute"
}

/// The index of the first `NoSchedule`/`NoExecute` taint no toleration
/// covers, in the node's order, as upstream reports the first one.
pub(crate) fn first_untolerated(taints: &[Taint], tolerations: &[Toleration]) -> Option<usize> {
    taints
        .iter()
        .position(|taint| is_do_not_schedule(taint) && !tolerations_tolerate(tolerations, taint))
}

/// The reason for an untolerated taint, in the wording upstream used through
/// 1.34.1 (later releases drop key and value; see docs/divergences.md).
pub(crate) fn reason(taint: &Taint) -> String {
    format!(
        "node(s) had untolerated taint {{{}: {}}}",
        taint.key,
        taint.value.as_deref().unwrap_or_default()
    )
}
