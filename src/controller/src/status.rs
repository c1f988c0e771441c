//! Writes NodeGroup status with optimistic concurrency, and remembers what it
//! wrote so the next loop does not plan from a watch cache that lags behind.
//!
//! Every write is a server-side apply of the whole status to `/status` (field manager
//! [`FIELD_MANAGER`]) carrying the resourceVersion the decision was made from: if anything
//! changed the object since (another replica, a user, our own earlier write the cache has not
//! seen), the API server answers 409 and nothing is written. That is what makes "record the
//! upcoming nodes, then call the provider" safe against double scale-ups. Apply (rather than a
//! PUT of the object) sends only what this controller owns, and a field it stops setting
//! (a backoff that ended, the last upcoming node) is removed by the server, as kube-rs'
//! controller-rs and upstream controllers write status.
//!
//! This writer is the only one of NodeGroup status, conditions included: the `Valid=False`
//! condition of a group that does not decode goes through the same apply
//! ([`StatusWriter::write_conditions`]), so `managedFields` name one manager for the whole
//! status and the conditions (a map list keyed by `type` in the CRD) are never owned twice.
//! Every write is timed and every failure counted, by [`StatusWrite`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dra_api::{NodeGroup, NodeGroupStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;

use crate::metrics::Metrics;

/// The field manager of the controller's status writes.
pub const FIELD_MANAGER: &str = "dra-autoscaler";

/// A status write that failed.
#[derive(Debug, thiserror::Error)]
#[error("unable to write the status of NodeGroup {node_group:?}")]
pub struct StatusError {
    /// The NodeGroup.
    pub node_group: String,
    /// What the API server said.
    #[source]
    pub source: kube::Error,
}

impl StatusError {
    /// The object changed since it was read (409 Conflict). Any other failure (the API
    /// server unreachable, a 422 for a status the schema refuses, RBAC) is an error, not a
    /// lost race.
    #[must_use]
    pub fn is_conflict(&self) -> bool {
        matches!(&self.source, kube::Error::Api(s) if s.code == 409)
    }
}

/// What a status write is for: the `write` label of the status write metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusWrite {
    /// The loop's reconcile of every group (sizes, timeouts, backoff, conditions).
    Reconcile,
    /// The intent recorded before a provider is asked for nodes.
    ScaleUpIntent,
    /// A provider's answer to a scale-up.
    ScaleUpOutcome,
    /// Nodes started for a gang that did not land whole, given back.
    GiveBack,
    /// `reservedLeft` and `AtMinSize` after the loop's scale-ups.
    Derived,
    /// Scale-down's `unneededNodes`.
    UnneededNodes,
    /// The `Valid` and `ScalingActive` conditions of a group left out as unusable.
    Validity,
}

impl StatusWrite {
    /// The metric label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reconcile => "reconcile",
            Self::ScaleUpIntent => "scale_up_intent",
            Self::ScaleUpOutcome => "scale_up_outcome",
            Self::GiveBack => "give_back",
            Self::Derived => "derived",
            Self::UnneededNodes => "unneeded_nodes",
            Self::Validity => "validity",
        }
    }
}

/// What we wrote to one NodeGroup since the watch cache last caught up. A loop
/// writes a group up to three times, and the cache may show any of the
/// versions those writes replaced for a while.
struct Written {
    /// resourceVersions our writes replaced.
    superseded: BTreeSet<Option<String>>,
    /// The object as our last write left it.
    latest: NodeGroup,
}

/// See the module docs.
pub struct StatusWriter {
    api: Api<NodeGroup>,
    /// The same resource untyped, for groups whose status or spec does not decode.
    untyped: Api<DynamicObject>,
    metrics: Arc<Metrics>,
    /// Our writes per NodeGroup name.
    written: Mutex<HashMap<String, Written>>,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter").finish_non_exhaustive()
    }
}

impl StatusWriter {
    /// Writes through `client`, timing each write into `metrics`.
    #[must_use]
    pub fn new(client: kube::Client, metrics: Arc<Metrics>) -> Self {
        Self {
            untyped: Api::all_with(client.clone(), &ApiResource::erase::<NodeGroup>(&())),
            api: Api::all(client),
            metrics,
            written: Mutex::new(HashMap::new()),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Written>> {
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The newest version of `stored` we know: our own last write while the
    /// watch cache still shows a version one of our writes replaced.
    #[must_use]
    pub fn freshest(&self, stored: &NodeGroup) -> NodeGroup {
        let name = stored.metadata.name.clone().unwrap_or_default();
        let mut cache = self.cache();
        match cache.get(&name) {
            // A version our writes replaced, or our last write itself (a caller passing an
            // object this writer returned): ours is the newest.
            Some(w)
                if w.superseded.contains(&stored.metadata.resource_version)
                    || w.latest.metadata.resource_version == stored.metadata.resource_version =>
            {
                w.latest.clone()
            }
            Some(_) => {
                // The cache caught up with our writes, or someone wrote after us.
                cache.remove(&name);
                stored.clone()
            }
            None => stored.clone(),
        }
    }

    /// Applies `status` as the status of `current`, conditional on `current`'s
    /// resourceVersion. A status equal to the current one is not written. Returns the object
    /// as it now is.
    ///
    /// # Errors
    /// The API server refused the write; [`StatusError::is_conflict`] tells a
    /// lost race from other failures.
    pub async fn write(
        &self,
        what: StatusWrite,
        current: &NodeGroup,
        status: NodeGroupStatus,
    ) -> Result<NodeGroup, StatusError> {
        if current.status.as_ref() == Some(&status) {
            return Ok(current.clone());
        }
        let name = current.metadata.name.clone().unwrap_or_default();
        let config = apply_config(
            &name,
            current.metadata.resource_version.as_deref(),
            &serde_json::json!(status),
        );
        let started = Instant::now();
        let result = self
            .api
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&config),
            )
            .await;
        let written = self.observe(what, started, result, &name)?;
        let mut cache = self.cache();
        let entry = cache.entry(name).or_insert_with(|| Written {
            superseded: BTreeSet::new(),
            latest: written.clone(),
        });
        entry
            .superseded
            .insert(current.metadata.resource_version.clone());
        entry.latest = written.clone();
        Ok(written)
    }

    /// Applies `conditions` as the conditions of `object`, a NodeGroup that may not decode,
    /// conditional on its resourceVersion. The rest of its status is applied back as it is, so
    /// this write, under the same field manager as [`Self::write`], neither drops a field the
    /// manager set before nor leaves the conditions to a second writer.
    ///
    /// # Errors
    /// The API server refused the write.
    pub async fn write_conditions(
        &self,
        object: &DynamicObject,
        conditions: &[Condition],
    ) -> Result<(), StatusError> {
        let name = object.metadata.name.clone().unwrap_or_default();
        let status = status_with_conditions(object.data.get("status"), conditions);
        let config = apply_config(&name, object.metadata.resource_version.as_deref(), &status);
        let started = Instant::now();
        let result = self
            .untyped
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&config),
            )
            .await;
        self.observe(StatusWrite::Validity, started, result, &name)
            .map(drop)
    }

    /// Records one write's duration, and its failure, in the metrics.
    fn observe<T>(
        &self,
        what: StatusWrite,
        started: Instant,
        result: Result<T, kube::Error>,
        name: &str,
    ) -> Result<T, StatusError> {
        let error = result.map_err(|source| StatusError {
            node_group: name.to_owned(),
            source,
        });
        self.metrics.record_status_write(
            what.as_str(),
            started.elapsed().as_secs_f64(),
            error.as_ref().err().map(|e| {
                if e.is_conflict() {
                    STATUS_CONFLICT
                } else {
                    STATUS_ERROR
                }
            }),
        );
        error
    }
}

/// `reason` of a failed status write that lost a race (409).
pub const STATUS_CONFLICT: &str = "conflict";
/// `reason` of any other failed status write.
pub const STATUS_ERROR: &str = "error";

/// `status` (any JSON: the object may not decode) with `conditions` in place of its own.
fn status_with_conditions(
    status: Option<&serde_json::Value>,
    conditions: &[Condition],
) -> serde_json::Value {
    let mut status = match status {
        Some(serde_json::Value::Object(fields)) => fields.clone(),
        _ => serde_json::Map::new(),
    };
    status.insert("conditions".into(), serde_json::json!(conditions));
    serde_json::Value::Object(status)
}

/// The apply configuration of a status write: identity, the precondition and the status.
fn apply_config(
    name: &str,
    resource_version: Option<&str>,
    status: &serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": NodeGroup::api_version(&()),
        "kind": NodeGroup::kind(&()),
        "metadata": {"name": name, "resourceVersion": resource_version},
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apply_configuration_carries_the_precondition_and_only_status() {
        let status = NodeGroupStatus {
            current_size: 2,
            ..NodeGroupStatus::default()
        };
        let config = apply_config("gpu", Some("42"), &serde_json::json!(status));
        assert_eq!(
            config,
            serde_json::json!({
                "apiVersion": "dra-autoscaler.io/v1alpha1",
                "kind": "NodeGroup",
                "metadata": {"name": "gpu", "resourceVersion": "42"},
                "status": {"currentSize": 2, "targetSize": 0, "upcomingSize": 0},
            })
        );
    }

    #[test]
    fn a_conditions_write_keeps_the_rest_of_a_status_that_does_not_decode() {
        let condition = Condition {
            type_: "Valid".into(),
            status: "False".into(),
            reason: "DecodeFailed".into(),
            message: "field spec.capacityType: unknown variant".into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        };
        // `currentSize` of the wrong type: what a status this binary cannot decode may hold.
        let stored = serde_json::json!({
            "currentSize": "three",
            "conditions": [{"type": "Old", "status": "True"}],
        });
        assert_eq!(
            status_with_conditions(Some(&stored), std::slice::from_ref(&condition)),
            serde_json::json!({
                "currentSize": "three",
                "conditions": [{
                    "type": "Valid",
                    "status": "False",
                    "reason": "DecodeFailed",
                    "message": "field spec.capacityType: unknown variant",
                    "lastTransitionTime": "1970-01-01T00:00:00Z",
                }],
            })
        );
        assert_eq!(
            status_with_conditions(None, &[]),
            serde_json::json!({"conditions": []})
        );
    }
}
