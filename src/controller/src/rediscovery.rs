//! Optional APIs installed while the controller runs: gang APIs (a PodGroup CRD, Volcano,
//! coscheduling) and cluster-autoscaler's ProvisioningRequests and CapacityBuffers (Kueue's
//! admission check) are looked for again every [`INTERVAL`]; one that appears is watched from
//! then on, without a restart, and an operator is told so in the log and in an Event on the
//! object that serves it.
//!
//! The scheduler's feature gates are chosen once, at start, from the gang APIs served then
//! (`--feature-gates` wins either way); a built-in `scheduling.k8s.io` API that appears later
//! (its API server was restarted with new gates) is watched, and the log says that the gates
//! follow at the next restart.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::ApiResource;

use crate::events::{EventSink, Notice};
use crate::watch::{Watches, discover};

/// How often the optional APIs are looked for again.
pub const INTERVAL: Duration = Duration::from_secs(30);

pub use crate::catalog::API_FOUND;

/// The object that serves `ar`, for the Event: its CustomResourceDefinition, or for a built-in
/// `*.k8s.io` group (no CRD) its APIService, as the aggregator names them.
#[must_use]
pub fn served_by(ar: &ApiResource) -> ObjectReference {
    if ar.group.ends_with(".k8s.io") && !ar.group.ends_with(".x-k8s.io") {
        ObjectReference {
            api_version: Some("apiregistration.k8s.io/v1".into()),
            kind: Some("APIService".into()),
            name: Some(format!("{}.{}", ar.version, ar.group)),
            ..ObjectReference::default()
        }
    } else {
        ObjectReference {
            api_version: Some("apiextensions.k8s.io/v1".into()),
            kind: Some("CustomResourceDefinition".into()),
            name: Some(format!("{}.{}", ar.plural, ar.group)),
            ..ObjectReference::default()
        }
    }
}

/// Discovers the optional APIs again and watches those that appeared since the last time;
/// returns them. Each is logged, and told in an Event through `events` (the leader's; a
/// standby writes none). A failed discovery is logged and tried again next time.
pub async fn rediscover(
    client: &kube::Client,
    watches: &mut Watches,
    events: Option<&EventSink>,
    now: Timestamp,
) -> Vec<ApiResource> {
    let found = match discover(client).await {
        Ok(found) => found,
        Err(error) => {
            tracing::debug!(error = %error.0, "discovering optional APIs again failed; trying later");
            return Vec::new();
        }
    };
    let started = watches.watch_new(&found);
    for ar in &started {
        let api = format!("{}/{}", ar.api_version, ar.kind);
        let gates = if ar.group == "scheduling.k8s.io" {
            "; the scheduler's feature gates were chosen at start and follow it at the next restart"
        } else {
            ""
        };
        tracing::info!(%api, "optional API appeared: watching it from now on, no restart needed{gates}");
        let Some(events) = events else {
            continue;
        };
        events
            .publish(
                &Notice {
                    regarding: served_by(ar),
                    warning: false,
                    reason: API_FOUND,
                    action: "Watch",
                    note: format!(
                        "dra-autoscaler found {api} served and watches it from now on (no restart needed){gates}"
                    ),
                },
                now,
            )
            .await;
    }
    started
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    #[test]
    fn events_name_the_crd_or_for_a_built_in_group_the_api_service() {
        let crd = served_by(&ar(
            "autoscaling.x-k8s.io",
            "v1",
            "ProvisioningRequest",
            "provisioningrequests",
        ));
        assert_eq!(crd.kind.as_deref(), Some("CustomResourceDefinition"));
        assert_eq!(
            crd.name.as_deref(),
            Some("provisioningrequests.autoscaling.x-k8s.io")
        );
        let built_in = served_by(&ar("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups"));
        assert_eq!(built_in.kind.as_deref(), Some("APIService"));
        assert_eq!(built_in.name.as_deref(), Some("v1beta1.scheduling.k8s.io"));
    }
}
