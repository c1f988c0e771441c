//! The GCE provider's state between calls, shared with the resize-request watchers: the
//! Compute client and settings, the skeleton's groups, failures and scaling lock, and the
//! labels and ids by which the provider finds the VMs it started outside a MIG.

use std::collections::BTreeMap;
use std::time::Duration;

use dra_provider::skeleton::{Failures, GroupCache, Requests};
use dra_provider::{GroupCatalog, ProviderError};
use tokio::sync::{Mutex, MutexGuard};

use crate::api::{Gce, TrackedInstance};
use crate::config::Config;
use crate::groups::Group;

/// VM label naming the MIG a VM started outside the MIG (bulkInsert) belongs to.
pub const MIG_LABEL: &str = "dra-autoscaler-mig";
/// VM label naming that MIG's zone or region.
pub const LOCATION_LABEL: &str = "dra-autoscaler-location";
/// VM label naming the atomic request that started it.
pub const REQUEST_LABEL: &str = "dra-autoscaler-request";

/// Groups as last read.
pub(crate) type Groups = GroupCatalog<Group>;

/// `spec.providerID` of a GCE VM: `gce://<project>/<zone>/<name>`.
#[must_use]
pub fn provider_id(project: &str, zone: &str, name: &str) -> String {
    format!("gce://{project}/{zone}/{name}")
}

/// (project, zone, name) of a providerID.
#[must_use]
pub fn parse_provider_id(id: &str) -> Option<(&str, &str, &str)> {
    let rest = id.strip_prefix("gce://")?;
    let mut parts = rest.splitn(3, '/');
    Some((parts.next()?, parts.next()?, parts.next()?))
}

/// Shared state of the provider (also used by the resize-request watchers).
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) gce: Gce,
    pub(crate) config: Config,
    pub(crate) groups: GroupCache<Group>,
    /// Instances of failed scale-ups, reported with their error until the group is read anew
    /// after `failed_ttl`.
    pub(crate) failed: Failures,
    /// Resize requests being watched: group id → request names.
    pub(crate) watching: Mutex<BTreeMap<String, Vec<String>>>,
    /// One scale-up or scale-down at a time: sizes are read, checked and written together.
    /// It guards the answers to atomic requests by request id.
    pub(crate) scaling: Mutex<Requests>,
}

impl Inner {
    pub(crate) fn new(gce: Gce, config: Config) -> Self {
        Self {
            groups: GroupCache::new(
                Duration::from_secs(config.refresh_seconds),
                "managed instance group",
            ),
            gce,
            config,
            failed: Failures::default(),
            watching: Mutex::new(BTreeMap::new()),
            scaling: Mutex::new(Requests::default()),
        }
    }

    /// Reads the groups again when forced or older than `refreshSeconds`.
    pub(crate) async fn ensure_groups(&self, force: bool) -> Result<(), ProviderError> {
        self.catalog(force).await.map(drop)
    }

    /// The groups, read again when forced or older than `refreshSeconds`.
    pub(crate) async fn catalog(
        &self,
        force: bool,
    ) -> Result<MutexGuard<'_, Groups>, ProviderError> {
        self.groups
            .ensure(force, || {
                crate::discovery::read_groups(&self.gce, &self.config)
            })
            .await
    }

    pub(crate) async fn group(&self, id: &str) -> Result<Group, ProviderError> {
        self.catalog(false).await?.get(id).cloned()
    }

    /// The VMs the provider started for `group` outside its MIG.
    pub(crate) async fn tracked(
        &self,
        group: &Group,
    ) -> Result<Vec<TrackedInstance>, ProviderError> {
        let scope = group.scope.name().to_owned();
        Ok(self
            .gce
            .labelled_instances(MIG_LABEL, &group.mig.name)
            .await?
            .into_iter()
            .filter(|i| i.labels.get(LOCATION_LABEL) == Some(&scope))
            .filter(|i| !matches!(i.status.as_str(), "TERMINATED" | "STOPPING" | "SUSPENDED"))
            .collect())
    }

    /// Current size: the MIG's target plus the VMs started outside it.
    pub(crate) async fn size(
        &self,
        group: &Group,
    ) -> Result<(i32, Vec<TrackedInstance>), ProviderError> {
        let mig = self.gce.get_mig(&group.scope, &group.mig.name).await?;
        let tracked = self.tracked(group).await?;
        Ok((
            mig.target_size + i32::try_from(tracked.len()).unwrap_or(i32::MAX),
            tracked,
        ))
    }
}
