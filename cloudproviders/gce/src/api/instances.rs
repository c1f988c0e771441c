//! VMs outside a MIG: a gang started with `instances.bulkInsert` from the group's template,
//! found again by the labels the provider puts on them, and deleted one by one.

use std::collections::HashMap;

use dra_provider::ProviderError;
use google_cloud_compute_v1::model::{
    BulkInsertInstanceResource, BulkInsertInstanceResourcePerInstanceProperties,
    InstanceProperties, LocationPolicy, LocationPolicyLocation,
};
use google_cloud_gax::paginator::Paginator;
use google_cloud_lro::Poller;

use super::{Gce, Scope, finished, last_segment};

/// A bulkInsert of a gang.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkInsert {
    /// Zone (zonal bulkInsert) or region (one zone of it chosen by capacity).
    pub scope: Scope,
    /// Zones a regional bulkInsert may use (the MIG's).
    pub zones: Vec<String>,
    /// Names of the VMs, `count` of them.
    pub names: Vec<String>,
    /// Fewest that make the start worthwhile; fewer and none are kept.
    pub min_count: i64,
    /// URL of the instance template.
    pub template: String,
    /// Labels added to the template's (group and request), merged over its properties.
    pub labels: HashMap<String, String>,
    /// Idempotency key.
    pub request_id: String,
}

/// A VM the provider started outside a MIG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedInstance {
    /// Name.
    pub name: String,
    /// Zone.
    pub zone: String,
    /// VM status (`PROVISIONING`, `RUNNING`, `STOPPING`, ...).
    pub status: String,
    /// Its labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// `creationTimestamp` (RFC 3339).
    pub created: Option<String>,
}

/// The VM as [`TrackedInstance`] when its label `key` is `value`. The filter is the server's;
/// checking again means a looser server never makes a foreign VM ours.
fn tracked(
    i: &google_cloud_compute_v1::model::Instance,
    key: &str,
    value: &str,
) -> Option<TrackedInstance> {
    if i.labels.get(key).map(String::as_str) != Some(value) {
        return None;
    }
    Some(TrackedInstance {
        name: i.name.clone().unwrap_or_default(),
        zone: i
            .zone
            .as_deref()
            .map(|z| last_segment(z).to_owned())
            .unwrap_or_default(),
        status: i
            .status
            .as_ref()
            .and_then(|s| s.name())
            .unwrap_or_default()
            .to_owned(),
        labels: i.labels.clone().into_iter().collect(),
        created: i.creation_timestamp.clone(),
    })
}

impl Gce {
    /// Starts between `min_count` and `names.len()` VMs of the template together, or none:
    /// bulkInsert deletes what it created when fewer than `minCount` can be.
    ///
    /// # Errors
    /// The API's or the operation's error, classified (stockout, quota, ...).
    pub async fn bulk_insert(&self, request: &BulkInsert) -> Result<(), ProviderError> {
        let count = i64::try_from(request.names.len()).unwrap_or(i64::MAX);
        let mut body = BulkInsertInstanceResource::new()
            .set_count(count)
            .set_min_count(request.min_count)
            .set_source_instance_template(request.template.clone())
            .set_per_instance_properties(request.names.iter().map(|n| {
                (
                    n.clone(),
                    BulkInsertInstanceResourcePerInstanceProperties::new().set_name(n.clone()),
                )
            }))
            .set_instance_properties(InstanceProperties::new().set_labels(request.labels.clone()));
        let op = match &request.scope {
            Scope::Zone(zone) => {
                self.call("instances.bulkInsert", || {
                    self.instances
                        .bulk_insert()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_body(body.clone())
                        .set_request_id(&request.request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
            Scope::Region(region) => {
                body = body.set_location_policy(LocationPolicy::new().set_locations(
                    request.zones.iter().map(|z| {
                        (
                            format!("zones/{z}"),
                            LocationPolicyLocation::new().set_preference(
                                google_cloud_compute_v1::model::location_policy_location::Preference::Allow,
                            ),
                        )
                    }),
                ));
                self.call("regionInstances.bulkInsert", || {
                    self.region_instances
                        .bulk_insert()
                        .set_project(&self.project)
                        .set_region(region)
                        .set_body(body.clone())
                        .set_request_id(&request.request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
        };
        finished("bulkInsert", op).map(drop)
    }

    /// VMs of the project whose label `key` is `value`, in every zone.
    ///
    /// # Errors
    /// The API's error.
    pub async fn labelled_instances(
        &self,
        key: &str,
        value: &str,
    ) -> Result<Vec<TrackedInstance>, ProviderError> {
        let mut out = self
            .call("instances.aggregatedList", || async move {
                let mut pages = self
                    .instances
                    .aggregated_list()
                    .set_project(&self.project)
                    .set_filter(format!("labels.{key} = \"{value}\""))
                    .by_page();
                let mut out = Vec::new();
                while let Some(page) = pages.next().await {
                    for scoped in page?.items.into_values() {
                        out.extend(
                            scoped
                                .instances
                                .iter()
                                .filter_map(|i| tracked(i, key, value)),
                        );
                    }
                }
                Ok(out)
            })
            .await?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes one VM and waits for it.
    ///
    /// # Errors
    /// The API's or the operation's error; a VM already gone is not an error.
    pub async fn delete_instance(&self, zone: &str, name: &str) -> Result<(), ProviderError> {
        let result = self
            .call("instances.delete", || {
                self.instances
                    .delete()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_instance(name)
                    .poller()
                    .until_done()
            })
            .await;
        match result {
            Ok(op) => finished("instances.delete", op).map(drop),
            Err(ProviderError::NotFound { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }
}
