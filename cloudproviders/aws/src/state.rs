//! The AWS provider's state between calls, shared with the tasks that attach launched gangs:
//! the SDK client and settings, the skeleton's groups, failures and scaling lock, and the
//! instances launched for a gang that wait to be attached.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use dra_provider::skeleton::{Failures, GroupCache, Requests};
use dra_provider::{GroupCatalog, InstanceDetails, InstanceError, InstanceState, ProviderError};
use tokio::sync::{Mutex, MutexGuard};

use crate::aws::Aws;
use crate::config::Config;
use crate::errors::UnavailableOfferings;
use crate::groups::Group;
use crate::instance_types::InstanceTypes;

/// Groups as last read from AWS.
pub(crate) type Groups = GroupCatalog<Group>;

/// An instance launched for a group and not attached yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// `i-…`.
    pub id: String,
    /// Zone.
    pub zone: String,
    /// When it was requested.
    pub requested_at: SystemTime,
}

/// Shared state of the provider (also used by background attach tasks).
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) aws: Aws,
    pub(crate) config: Config,
    pub(crate) types: InstanceTypes,
    pub(crate) ice: UnavailableOfferings,
    pub(crate) groups: GroupCache<Group>,
    /// One scale-up or scale-down at a time: sizes are read, checked and written together.
    /// It guards the answers to atomic requests by request id.
    pub(crate) scaling: Mutex<Requests>,
    /// Launched instances waiting to be attached, by group.
    pub(crate) pending: Mutex<BTreeMap<String, Vec<Pending>>>,
    /// Launches that failed after starting (attach failures), by group.
    pub(crate) failed: Failures,
    /// How often (ms) a launched instance is checked for `running` before attaching it.
    pub(crate) attach_poll_ms: AtomicU64,
}

impl Inner {
    pub(crate) fn new(aws: Aws, config: Config) -> Self {
        Self {
            types: InstanceTypes::new(Duration::from_secs(config.instance_type_ttl_seconds)),
            ice: UnavailableOfferings::new(Duration::from_secs(config.ice_ttl_seconds)),
            groups: GroupCache::new(
                Duration::from_secs(config.refresh_seconds),
                "Auto Scaling group",
            ),
            aws,
            config,
            scaling: Mutex::new(Requests::default()),
            pending: Mutex::new(BTreeMap::new()),
            failed: Failures::default(),
            attach_poll_ms: AtomicU64::new(2000),
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
                crate::discovery::read_groups(&self.aws, &self.config, &self.types)
            })
            .await
    }

    pub(crate) async fn group(&self, id: &str) -> Result<Group, ProviderError> {
        self.catalog(false).await?.get(id).cloned()
    }

    pub(crate) fn attach_poll(&self) -> Duration {
        Duration::from_millis(self.attach_poll_ms.load(Ordering::Relaxed))
    }

    pub(crate) async fn pending_of(&self, id: &str) -> Vec<Pending> {
        self.pending
            .lock()
            .await
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    /// A group's target size: its desired capacity plus the instances launched for it and not
    /// attached yet.
    pub(crate) async fn target(&self, group: &Group) -> i32 {
        let pending = i32::try_from(self.pending_of(&group.asg.name).await.len()).unwrap_or(0);
        group.asg.desired + pending
    }
}

/// A failed instance as the extension reports it.
#[must_use]
pub(crate) fn failed_instance(
    id: String,
    code: &str,
    message: String,
    at: SystemTime,
) -> InstanceDetails {
    InstanceDetails {
        id,
        node_name: String::new(),
        state: InstanceState::Deleting,
        error: Some(InstanceError {
            class: crate::errors::error_class(code),
            code: code.to_owned(),
            message,
        }),
        reservation_id: None,
        requested_at: Some(at),
    }
}
