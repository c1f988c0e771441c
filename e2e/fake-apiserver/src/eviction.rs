//! The Eviction subresource, `POST /api/v1/namespaces/<ns>/pods/<name>/eviction`, with the
//! PodDisruptionBudget rules of kube-apiserver's `pkg/registry/core/pod/storage/eviction.go`:
//!
//! - a pod that is `Succeeded`, `Failed`, `Pending` or already being deleted is deleted without
//!   looking at budgets;
//! - more than one PodDisruptionBudget selecting the pod: `500`, which the eviction subresource
//!   does not support;
//! - an unready pod is deleted without spending the budget when the budget's
//!   `unhealthyPodEvictionPolicy` is `AlwaysAllow`, or (the default, `IfHealthyBudget`) when
//!   `currentHealthy >= desiredHealthy > 0`;
//! - otherwise the budget must have been processed (`status.observedGeneration >=
//!   metadata.generation`) and allow a disruption: `status.disruptionsAllowed == 0` answers
//!   `429 TooManyRequests` with a `DisruptionBudget` cause, a negative value `403`; else the
//!   budget's `disruptionsAllowed` goes down by one, the pod is recorded in
//!   `status.disruptedPods`, and the pod is deleted;
//! - success is `201` with a `Success` Status; the pod first gets the `DisruptionTarget`
//!   condition (reason `EvictionByEvictionAPI`), as with the PodDisruptionConditions feature.
//!
//! No disruption controller runs here: a test sets a budget's status itself (as the controller
//! would have computed it) and it changes only through evictions.

use serde_json::{Value, json};

use crate::{
    error::ApiError,
    object::{Target, meta_str},
    resource::{Registry, ResourceDef},
    selector::{LabelSelector, Selectors},
    store::{DeleteOptions, Store, now_rfc3339},
};

/// Group, version and plural of PodDisruptionBudgets.
pub(crate) const PDB: (&str, &str, &str) = ("policy", "v1", "poddisruptionbudgets");

/// The message of every budget refusal (`apierrors.NewTooManyRequests` in upstream).
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// A finished eviction request: the HTTP code, the body to send, and the `Retry-After` header
/// the real server adds when the Status suggests a delay.
pub(crate) struct Answer {
    pub code: u16,
    pub body: Value,
    pub retry_after: Option<u32>,
}

fn success() -> Answer {
    Answer {
        code: 201,
        body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
        retry_after: None,
    }
}

fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Answer {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let (Some(details), Some(map)) = (details, body.as_object_mut()) {
        map.insert("details".into(), details);
    }
    Answer {
        code,
        body,
        retry_after: None,
    }
}

fn too_many_requests(cause: String, retry_after: u32) -> Answer {
    let mut details = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
    if retry_after > 0
        && let Some(map) = details.as_object_mut()
    {
        map.insert("retryAfterSeconds".into(), Value::from(retry_after));
    }
    let mut answer = failure(429, "TooManyRequests", REFUSED, Some(details));
    answer.retry_after = (retry_after > 0).then_some(retry_after);
    answer
}

/// `metav1.LabelSelectorAsSelector` as label-selector text: `matchLabels` and
/// `matchExpressions` joined; `None` for a missing selector, which matches nothing.
fn selector_text(selector: &Value) -> Option<String> {
    if selector.is_null() {
        return None;
    }
    let mut terms = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            terms.push(format!("{key}={}", value.as_str().unwrap_or_default()));
        }
    }
    for expression in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = expression
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let values: Vec<&str> = expression
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match expression.get("operator").and_then(Value::as_str) {
            Some("In") => terms.push(format!("{key} in ({})", values.join(","))),
            Some("NotIn") => terms.push(format!("{key} notin ({})", values.join(","))),
            Some("Exists") => terms.push(key.to_owned()),
            Some("DoesNotExist") => terms.push(format!("!{key}")),
            // An invalid selector matches no pod (upstream skips such a budget).
            _ => return None,
        }
    }
    Some(terms.join(","))
}

fn selects(pdb: &Value, pod: &Value) -> bool {
    let Some(text) = pdb.pointer("/spec/selector").and_then(selector_text) else {
        return false;
    };
    LabelSelector::parse(&text).is_ok_and(|s| s.matches(pod))
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn int(value: &Value, pointer: &str) -> i64 {
    value.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// Why a budget that allows no disruption refuses, in upstream's words (`checkAndDecrement`).
fn denial_message(pdb: &Value) -> String {
    let name = meta_str(pdb, "name").unwrap_or_default();
    let condition = pdb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionAllowed");
    let text = |c: &Value, k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let false_with_message = condition
        .filter(|c| c["status"] == "False" && !text(c, "message").is_empty())
        .cloned();
    let (current, desired) = (
        int(pdb, "/status/currentHealthy"),
        int(pdb, "/status/desiredHealthy"),
    );
    match false_with_message {
        Some(c) if text(&c, "reason") == "SyncFailed" => format!(
            "The disruption budget {name} does not allow evicting pods currently because it failed sync: {}",
            text(&c, "message")
        ),
        _ if current <= desired => format!(
            "The disruption budget {name} needs {desired} healthy pods and has {current} currently"
        ),
        Some(c) => format!(
            "The disruption budget {name} does not allow evicting pods currently ({}): {}",
            text(&c, "reason"),
            text(&c, "message")
        ),
        None => format!("The disruption budget {name} does not allow evicting pods currently"),
    }
}

/// Spends one disruption of `pdb` for `pod_name`, or says why not (`checkAndDecrement`).
fn spend(
    store: &mut Store,
    def: &ResourceDef,
    pdb: &Value,
    pod_name: &str,
    dry_run: bool,
) -> Result<(), Answer> {
    let name = meta_str(pdb, "name").unwrap_or_default().to_owned();
    let namespace = meta_str(pdb, "namespace").map(str::to_owned);
    if int(pdb, "/status/observedGeneration") < int(pdb, "/metadata/generation") {
        return Err(too_many_requests(
            format!("The disruption budget {name} is still being processed by the server."),
            10,
        ));
    }
    let allowed = int(pdb, "/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(failure(
            403,
            "Forbidden",
            &format!(
                "poddisruptionbudgets.policy \"{name}\" is forbidden: pdb disruptions allowed is negative"
            ),
            None,
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(denial_message(pdb), 0));
    }
    if dry_run {
        return Ok(());
    }
    let mut updated = pdb.clone();
    if let Some(status) = updated.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("disruptionsAllowed".into(), Value::from(allowed - 1));
        let disrupted = status.entry("disruptedPods").or_insert_with(|| json!({}));
        if let Some(map) = disrupted.as_object_mut() {
            map.insert(pod_name.to_owned(), Value::String(now_rfc3339()));
        }
    }
    store
        .update(
            def,
            Target::Status,
            namespace.as_deref(),
            &name,
            updated,
            false,
        )
        .map(drop)
        .map_err(|e| failure(e.code(), &e.reason(), &e.to_string(), None))
}

/// Marks the pod as a disruption target, then deletes it.
fn delete_pod(
    store: &mut Store,
    pods: &ResourceDef,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<(), ApiError> {
    if !dry_run {
        let mut pod = store.get(pods, Some(namespace), name)?;
        if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
            let conditions = status.entry("conditions").or_insert_with(|| json!([]));
            if let Some(list) = conditions.as_array_mut() {
                list.retain(|c| c["type"] != "DisruptionTarget");
                list.push(json!({
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                    "lastTransitionTime": now_rfc3339(),
                }));
            }
        }
        store.update(pods, Target::Status, Some(namespace), name, pod, false)?;
    }
    store.delete(
        pods,
        Some(namespace),
        name,
        &DeleteOptions {
            dry_run,
            ..DeleteOptions::default()
        },
    )?;
    Ok(())
}

/// Serves one eviction of pod `namespace/name` with request body `body`.
pub(crate) fn evict(
    store: &mut Store,
    registry: &Registry,
    pods: &ResourceDef,
    namespace: &str,
    name: &str,
    body: &Value,
    dry_run_param: bool,
) -> Result<Answer, ApiError> {
    if let Some(named) = meta_str(body, "name")
        && named != name
    {
        return Err(ApiError::BadRequest(
            "name in URL does not match name in Eviction object".into(),
        ));
    }
    let dry_run = dry_run_param
        || body
            .pointer("/deleteOptions/dryRun")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|v| v == "All"));
    let pod = store.get(pods, Some(namespace), name)?;
    let terminal_or_pending = matches!(phase(&pod), "Succeeded" | "Failed" | "Pending");
    if terminal_or_pending || meta_str(&pod, "deletionTimestamp").is_some() {
        delete_pod(store, pods, namespace, name, dry_run)?;
        return Ok(success());
    }
    let budgets: Vec<Value> = match registry.get(PDB.0, PDB.1, PDB.2) {
        Some(def) => store
            .list(def, Some(namespace), &Selectors::default())
            .0
            .into_iter()
            .filter(|pdb| selects(pdb, &pod))
            .collect(),
        None => Vec::new(),
    };
    if budgets.len() > 1 {
        return Ok(failure(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            None,
        ));
    }
    if let (Some(pdb), Some(def)) = (budgets.first(), registry.get(PDB.0, PDB.1, PDB.2)) {
        let def = def.clone();
        let unhealthy_may_go = !is_ready(&pod)
            && (pdb.pointer("/spec/unhealthyPodEvictionPolicy") == Some(&json!("AlwaysAllow"))
                || (int(pdb, "/status/currentHealthy") >= int(pdb, "/status/desiredHealthy")
                    && int(pdb, "/status/desiredHealthy") > 0));
        if !unhealthy_may_go && let Err(answer) = spend(store, &def, pdb, name, dry_run) {
            return Ok(answer);
        }
    }
    delete_pod(store, pods, namespace, name, dry_run)?;
    Ok(success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_selectors_become_label_selector_text() {
        let selector = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}
            ]
        });
        assert_eq!(
            selector_text(&selector).as_deref(),
            Some("app=web,tier in (a,b),!canary")
        );
        assert_eq!(selector_text(&json!({})).as_deref(), Some(""));
        assert_eq!(selector_text(&Value::Null), None);
    }

    #[test]
    fn an_empty_selector_selects_every_pod_and_a_missing_one_none() {
        let pod = json!({"metadata": {"name": "p", "labels": {"app": "web"}}});
        assert!(selects(&json!({"spec": {"selector": {}}}), &pod));
        assert!(!selects(&json!({"spec": {}}), &pod));
        assert!(!selects(
            &json!({"spec": {"selector": {"matchLabels": {"app": "db"}}}}),
            &pod
        ));
    }

    #[test]
    fn the_denial_names_healthy_counts_or_the_failed_sync() {
        let pdb = json!({"metadata": {"name": "web"}, "status": {"currentHealthy": 2, "desiredHealthy": 2}});
        assert_eq!(
            denial_message(&pdb),
            "The disruption budget web needs 2 healthy pods and has 2 currently"
        );
        let failed = json!({"metadata": {"name": "web"}, "status": {"conditions": [
            {"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed", "message": "boom"}
        ]}});
        assert!(denial_message(&failed).ends_with("failed sync: boom"));
    }
}
