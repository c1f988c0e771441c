//! Flags `simulate` and `run` both take, for the command lines (feature
//! `clap`). They live here, not in the controller, so that the
//! simulate-only build (`--no-default-features`) has them too.

use clap::Args;
use dra_sim::gates::{DroppedGate, GateError};
use dra_sim::{FeatureGates, KubeVersion};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::gang_apis::{GangApisFound, ResolvedGates};
use crate::provreq::RetryBackoff;
use crate::{Expander, PlanOptions};

/// Flags `simulate` and `run` both take: the scheduler modelled (version,
/// feature gates, DRA filter timeout) and how the planner chooses (expander, reservation
/// horizon). Defined once so both commands spell, default and check them
/// alike; a bad value is refused by clap before anything runs.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// Kubernetes version whose scheduler is modelled (1.34 to 1.37).
    /// Default: for `run` the API server's own version, for `simulate` the
    /// newest modelled (1.37).
    #[arg(long, env = "DRA_AUTOSCALER_KUBERNETES_VERSION")]
    pub kubernetes_version: Option<KubeVersion>,

    /// Feature gates on top of the version's defaults, as kube-scheduler takes
    /// them: `DRAPartitionableDevices=false,DRAListTypeAttributes=true`. Set
    /// them as your scheduler has them, or the plan and the scheduler disagree.
    /// Known gates: DRAAdminAccess, DRAPrioritizedList, DRAPartitionableDevices,
    /// DRADeviceTaints, DRADeviceTaintRules, DRADeviceBindingConditions,
    /// DRAResourceClaimDeviceStatus, DRAConsumableCapacity,
    /// DRAFractionalCapacityRange, DRAListTypeAttributes, DRAExtendedResource,
    /// DRADeviceCompatibilityGroups, DRAOptionalNodeOperations, GenericWorkload,
    /// GangScheduling, TopologyAwareWorkloadScheduling, DRASchedulerFilterTimeout.
    /// Gang scheduling (GenericWorkload, GangScheduling,
    /// TopologyAwareWorkloadScheduling) is turned on when the cluster serves
    /// the scheduling.k8s.io Workload/PodGroup API (`run`) or the input holds
    /// such objects or pods linked to them (`simulate`), unless this flag
    /// turns it off.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_FEATURE_GATES",
        default_value = "",
        value_parser = feature_gates_flag
    )]
    pub feature_gates: String,

    /// The DynamicResources plugin's `filterTimeout` as your scheduler has it
    /// (upstream default 10s, with the `DRASchedulerFilterTimeout` gate; `0s`
    /// disables): one pod's device allocation on one candidate node stops
    /// there and the node counts as "timed out trying to allocate devices",
    /// so one pathological claim never stalls a plan. Modelled as a work
    /// bound (1,000 search steps per millisecond).
    #[arg(
        long,
        env = "DRA_AUTOSCALER_DRA_FILTER_TIMEOUT",
        default_value = "10s",
        value_parser = not_negative,
        allow_hyphen_values = true
    )]
    pub dra_filter_timeout: SignedDuration,

    /// How to choose between node groups that can all take a gang.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_EXPANDER",
        value_enum,
        default_value_t = Expander::LeastCost
    )]
    pub expander: Expander,

    /// A reservation that ends sooner than this (e.g. 1h, 30m, 2h30m) is not
    /// used for new nodes.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_MIN_RESERVATION_LEFT",
        default_value = "1h"
    )]
    pub min_reservation_left: SignedDuration,

    /// cluster-autoscaler's flag of the same name, for clusters where several
    /// autoscalers answer ProvisioningRequests: when set, only check-capacity
    /// requests whose parameter `processorInstance` is this value (or, a form
    /// upstream deprecates, whose class is this value followed by
    /// `check-capacity.autoscaling.x-k8s.io`) are served, and no
    /// best-effort-atomic ones; when empty, requests naming an instance are
    /// left to it.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_CHECK_CAPACITY_PROCESSOR_INSTANCE",
        default_value = ""
    )]
    pub check_capacity_processor_instance: String,

    /// cluster-autoscaler's flag of the same name: a ProvisioningRequest left
    /// `Provisioned=False` is tried again only this long after the condition
    /// last changed; each try doubles the wait, up to
    /// `--provisioning-request-max-backoff-time`.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_PROVISIONING_REQUEST_INITIAL_BACKOFF_TIME",
        default_value = "1m",
        value_parser = not_negative,
        allow_hyphen_values = true
    )]
    pub provisioning_request_initial_backoff_time: SignedDuration,

    /// cluster-autoscaler's flag of the same name: the longest wait between
    /// two tries of a ProvisioningRequest left `Provisioned=False`.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_PROVISIONING_REQUEST_MAX_BACKOFF_TIME",
        default_value = "10m",
        value_parser = not_negative,
        allow_hyphen_values = true
    )]
    pub provisioning_request_max_backoff_time: SignedDuration,

    /// cluster-autoscaler's flag of the same name: for how many
    /// ProvisioningRequests the doubled waits are remembered (the least
    /// recently used is forgotten first and starts again at the initial
    /// wait).
    #[arg(
        long,
        env = "DRA_AUTOSCALER_PROVISIONING_REQUEST_MAX_BACKOFF_CACHE_SIZE",
        default_value_t = crate::provreq::backoff::DEFAULT_CACHE_SIZE
    )]
    pub provisioning_request_max_backoff_cache_size: usize,
}

/// `--feature-gates` as clap checks it: every entry `Name=true|false` with a
/// gate kube-scheduler knows (which gates exist does not depend on the
/// version).
fn feature_gates_flag(value: &str) -> Result<String, GateError> {
    FeatureGates::default()
        .apply_flag(value)
        .map(|()| value.to_string())
}

/// A duration flag clap refuses (clap prints it after the flag's name).
#[derive(Debug, thiserror::Error)]
enum DurationFlagError {
    /// Not a duration.
    #[error("{0}")]
    Parse(#[from] k8s_openapi::jiff::Error),
    /// A negative duration.
    #[error("must not be negative, got {0}")]
    Negative(String),
}

/// A duration flag that may be zero but not negative.
fn not_negative(value: &str) -> Result<SignedDuration, DurationFlagError> {
    let duration: SignedDuration = value.parse()?;
    if duration.is_negative() {
        return Err(DurationFlagError::Negative(value.to_string()));
    }
    Ok(duration)
}

impl PlanArgs {
    /// The scheduler's feature gates: `version`'s defaults, then
    /// `--feature-gates`, with `--dra-filter-timeout`.
    ///
    /// # Errors
    /// A flag value clap did not check (set by hand) that does not apply.
    pub fn gates(&self, version: KubeVersion) -> Result<FeatureGates, GateError> {
        let flag = FeatureGates::flag_for(version, &self.feature_gates);
        let mut gates = FeatureGates::for_version(version);
        gates.apply_flag(&flag.flag)?;
        gates.set_dra_filter_timeout(self.dra_filter_timeout)?;
        Ok(gates)
    }

    /// The gates of `--feature-gates` that `version`'s scheduler does not have,
    /// which [`PlanArgs::gates`] and [`PlanArgs::planning_gates`] leave out: a
    /// shell says so (see [`dra_sim::gates::DroppedGate`]).
    #[must_use]
    pub fn dropped_gates(&self, version: KubeVersion) -> Vec<DroppedGate> {
        FeatureGates::flag_for(version, &self.feature_gates).dropped
    }

    /// The gates to plan with: `version`'s defaults, the gang gates `found`
    /// shows the cluster runs (see [`dra_plan::gang_apis`]), then
    /// `--feature-gates`, which always wins; with `--dra-filter-timeout`.
    /// Also says which gang gates were turned on and the line naming the
    /// gang APIs found and used.
    ///
    /// # Errors
    /// A flag value clap did not check (set by hand) that does not apply.
    pub fn planning_gates(
        &self,
        version: KubeVersion,
        found: &GangApisFound,
    ) -> Result<ResolvedGates, GateError> {
        let flag = FeatureGates::flag_for(version, &self.feature_gates);
        let mut resolved = found.resolve_gates(FeatureGates::for_version(version), &flag.flag)?;
        resolved
            .gates
            .set_dra_filter_timeout(self.dra_filter_timeout)?;
        Ok(resolved)
    }

    /// The planner's options at `now` (`None`: reservation end times are
    /// ignored).
    #[must_use]
    pub fn plan_options(&self, now: Option<Timestamp>) -> PlanOptions {
        PlanOptions {
            expander: self.expander,
            now,
            min_reservation_left: self.min_reservation_left,
            check_capacity_processor_instance: self.check_capacity_processor_instance.clone(),
            provisioning_request_backoff: self.provisioning_request_backoff(),
        }
    }

    /// An empty memory of ProvisioningRequest retry backoffs with these
    /// flags' initial and maximum waits and size.
    #[must_use]
    pub fn provisioning_request_backoff(&self) -> RetryBackoff {
        RetryBackoff::new(
            self.provisioning_request_initial_backoff_time,
            self.provisioning_request_max_backoff_time,
            self.provisioning_request_max_backoff_cache_size,
        )
    }
}
