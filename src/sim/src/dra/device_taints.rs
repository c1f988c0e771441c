//! Device taints against a request's tolerations (upstream
//! `resourceclaim.ToleratesTaint` and the allocator's taint check).

use k8s_openapi::api::resource::v1::DeviceToleration;

use super::inventory::Taint;

/// Whether an untolerated `NoSchedule` or `NoExecute` taint blocks the
/// device; other effects (`None`, unknown ones) never do.
pub(crate) fn taint_prevents(taints: &[Taint], tolerations: &[DeviceToleration]) -> bool {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Upstream `resourceclaim.ToleratesTaint`.
pub(crate) fn tolerates(toleration: &DeviceToleration, taint: &Taint) -> bool {
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
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => toleration.value.as_deref().unwrap_or("") == taint.value,
        "Exists" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        }
    }

    fn tol(
        key: Option<&str>,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> DeviceToleration {
        DeviceToleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_matching_follows_upstream() {
        let t = taint("k", "v", "NoSchedule");
        assert!(tolerates(
            &tol(Some("k"), Some("Equal"), Some("v"), None),
            &t
        ));
        assert!(
            tolerates(&tol(Some("k"), None, Some("v"), Some("NoSchedule")), &t),
            "empty operator is Equal"
        );
        assert!(!tolerates(
            &tol(Some("k"), Some("Equal"), Some("w"), None),
            &t
        ));
        assert!(
            tolerates(&tol(None, Some("Exists"), None, None), &t),
            "empty key with Exists tolerates all"
        );
        assert!(!tolerates(
            &tol(Some("k"), Some("Exists"), None, Some("NoExecute")),
            &t
        ));
        assert!(!tolerates(&tol(Some("k"), Some("Gt"), Some("v"), None), &t));
    }

    #[test]
    fn only_blocking_effects_prevent_allocation() {
        assert!(!taint_prevents(&[taint("k", "v", "None")], &[]));
        assert!(!taint_prevents(&[taint("k", "v", "Whatever")], &[]));
        assert!(taint_prevents(&[taint("k", "v", "NoExecute")], &[]));
        assert!(!taint_prevents(
            &[taint("k", "v", "NoExecute")],
            &[tol(Some("k"), Some("Exists"), None, None)]
        ));
    }
}
