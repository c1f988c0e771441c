//! Feature gates, named as kube-scheduler names them, with each supported
//! Kubernetes minor's defaults.
//!
//! The autoscaler must decide as *that* cluster's scheduler decides, so the
//! defaults follow the cluster's version and every gate can be switched either
//! way, including gates that upstream locks on: an operator who runs a patched
//! scheduler, or who wants to ask "what if", must be able to say so.

use std::fmt;
use std::str::FromStr;

/// A Kubernetes minor version this project models (1.34 to 1.37).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    /// The minor number: 34 for Kubernetes 1.34.
    pub minor: u32,
}

impl KubeVersion {
    /// The oldest minor whose scheduler we model.
    pub const OLDEST: KubeVersion = KubeVersion { minor: 34 };
    /// The newest minor whose scheduler we model; the default.
    pub const NEWEST: KubeVersion = KubeVersion { minor: 37 };
}

impl Default for KubeVersion {
    fn default() -> Self {
        Self::NEWEST
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

/// Why a `--kubernetes-version` or `--feature-gates` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The version string is not `1.N`, `v1.N` or `1.N.P`.
    #[error("invalid Kubernetes version {0:?}: expected a form like 1.36 or v1.36.2")]
    BadVersion(String),
    /// The version is outside the range this project models.
    #[error("Kubernetes version {0} is not supported: dra-autoscaler models 1.34 to 1.37")]
    UnsupportedVersion(String),
    /// An entry of `--feature-gates` is not `Name=true|false`.
    #[error("invalid feature gate entry {0:?}: expected Name=true or Name=false")]
    BadEntry(String),
    /// The gate name is not one kube-scheduler knows for DRA or gangs.
    #[error("unknown feature gate {0:?}; known gates: {known}", known = FeatureGates::NAMES.join(", "))]
    UnknownGate(String),
    /// A negative `filterTimeout`.
    #[error("invalid DRA filter timeout {0}: must not be negative (0s disables it)")]
    NegativeTimeout(String),
}

/// A `--feature-gates` list as one release's scheduler reads it: see
/// [`FeatureGates::flag_for`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagForVersion {
    /// The entries that release has, comma-separated.
    pub flag: String,
    /// The gates it does not have, left out.
    pub dropped: Vec<DroppedGate>,
}

/// A gate of `--feature-gates` left out because the modelled release does not
/// have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedGate {
    /// The gate (`GangScheduling`).
    pub gate: String,
    /// The release modelled.
    pub version: KubeVersion,
}

impl fmt::Display for DroppedGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--feature-gates: {gate} does not exist in Kubernetes {version} and is ignored \
             (merged into GenericWorkload, which alone turns gang scheduling on); \
             kube-scheduler {version} would refuse to start with it",
            gate = self.gate,
            version = self.version
        )
    }
}

impl FromStr for KubeVersion {
    type Err = GateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim().trim_start_matches('v');
        let mut parts = trimmed.split('.');
        let major = parts.next().and_then(|p| p.parse::<u32>().ok());
        let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
        let rest_ok = parts.all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '+')
        });
        match (major, minor, rest_ok) {
            (Some(1), Some(minor), true) => {
                let v = KubeVersion { minor };
                if v < KubeVersion::OLDEST || v > KubeVersion::NEWEST {
                    Err(GateError::UnsupportedVersion(s.to_string()))
                } else {
                    Ok(v)
                }
            }
            _ => Err(GateError::BadVersion(s.to_string())),
        }
    }
}

/// The gates that change what the DRA allocator, the DynamicResources plugin or
/// gang scheduling decide. Field names follow the upstream gate names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(clippy::struct_excessive_bools)] // one bool per upstream gate is the point
pub struct FeatureGates {
    /// `DRAAdminAccess`: `adminAccess` in requests and results.
    pub admin_access: bool,
    /// `DRAPrioritizedList`: `firstAvailable` subrequests.
    pub prioritized_list: bool,
    /// `DRAPartitionableDevices`: shared counters and per-device node selection.
    pub partitionable_devices: bool,
    /// `DRADeviceTaints`: device taints and request tolerations.
    pub device_taints: bool,
    /// `DRADeviceTaintRules`: DeviceTaintRule objects add taints to devices.
    pub device_taint_rules: bool,
    /// `DRADeviceBindingConditions`: binding conditions (needs device status too).
    pub device_binding_conditions: bool,
    /// `DRAResourceClaimDeviceStatus`: `status.devices` of claims.
    pub resource_claim_device_status: bool,
    /// `DRAConsumableCapacity`: shared devices with consumable capacity.
    pub consumable_capacity: bool,
    /// `DRAFractionalCapacityRange`: milli-unit arithmetic in capacity `validRange`s.
    pub fractional_capacity_range: bool,
    /// `DRAListTypeAttributes`: list-valued attributes and `includes()`.
    pub list_type_attributes: bool,
    /// `DRAExtendedResource`: extended resources satisfied through DeviceClasses.
    pub extended_resource: bool,
    /// `DRADeviceCompatibilityGroups`: compatibility groups on counter consumption.
    pub device_compatibility_groups: bool,
    /// `DRAOptionalNodeOperations`: `skipNodeOperations` of ResourceSlices.
    pub optional_node_operations: bool,
    /// `GenericWorkload`: the Workload/PodGroup API and pod links to it.
    pub generic_workload: bool,
    /// `GangScheduling`: the GangScheduling plugin. Merged into GenericWorkload
    /// in 1.37, where it defaults to true so that GenericWorkload alone decides.
    pub gang_scheduling: bool,
    /// `TopologyAwareWorkloadScheduling`: `schedulingConstraints.topology` of PodGroups.
    pub topology_aware_workload_scheduling: bool,
    /// `DRASchedulerFilterTimeout`: the DynamicResources Filter gives up on a
    /// node after [`FeatureGates::dra_filter_timeout_ms`].
    pub scheduler_filter_timeout: bool,
    /// The DynamicResources plugin's `filterTimeout` argument in milliseconds
    /// (upstream default 10 s; 0 disables the bound, as upstream's `0s`). Not a
    /// gate, but only meaningful with [`FeatureGates::scheduler_filter_timeout`],
    /// so it travels with the gates to every allocator.
    pub dra_filter_timeout_ms: u64,
}

/// Upstream's `DynamicResourcesFilterTimeoutDefault`.
pub const DRA_FILTER_TIMEOUT_DEFAULT_MS: u64 = 10_000;

/// Search steps (upstream's `allocateOne` invocations) that stand for one
/// millisecond of the Filter's time: the simulator reads no clock, so
/// upstream's time bound becomes a work bound. One million steps per second
/// is the order of upstream's Go allocator on one core, and within a factor
/// of a few of ours (docs/benchmarks.md).
pub const SEARCH_STEPS_PER_MS: u64 = 1_000;

impl Default for FeatureGates {
    fn default() -> Self {
        Self::for_version(KubeVersion::default())
    }
}

impl FeatureGates {
    /// Every gate name accepted by [`FeatureGates::set`], as upstream spells it.
    pub const NAMES: &'static [&'static str] = &[
        "DRAAdminAccess",
        "DRAPrioritizedList",
        "DRAPartitionableDevices",
        "DRADeviceTaints",
        "DRADeviceTaintRules",
        "DRADeviceBindingConditions",
        "DRAResourceClaimDeviceStatus",
        "DRAConsumableCapacity",
        "DRAFractionalCapacityRange",
        "DRAListTypeAttributes",
        "DRAExtendedResource",
        "DRADeviceCompatibilityGroups",
        "DRAOptionalNodeOperations",
        "GenericWorkload",
        "GangScheduling",
        "TopologyAwareWorkloadScheduling",
        "DRASchedulerFilterTimeout",
    ];

    /// The defaults of a Kubernetes minor, from upstream's versioned gate table.
    #[must_use]
    pub fn for_version(version: KubeVersion) -> Self {
        let m = version.minor;
        Self {
            admin_access: true,
            prioritized_list: true,
            partitionable_devices: m >= 36,
            device_taints: m >= 36,
            // Beta but off in 1.36, GA in 1.37.
            device_taint_rules: m >= 37,
            device_binding_conditions: m >= 36,
            resource_claim_device_status: true,
            consumable_capacity: m >= 36,
            // Beta in 1.37, but on only with --min-compatibility-version 1.37: a 1.37
            // scheduler's default compatibility version is 1.36, so it is off (its
            // `--help`: "default=false, or default=true if --min-compatibility-version>=1.37").
            fractional_capacity_range: false,
            list_type_attributes: false,
            extended_resource: m >= 36,
            device_compatibility_groups: false,
            // Alpha in 1.37.
            optional_node_operations: false,
            // Beta in 1.37 but off by default; alpha before.
            generic_workload: false,
            // From 1.37 the GangScheduling plugin is governed by GenericWorkload
            // alone, so this gate no longer holds it back.
            gang_scheduling: m >= 37,
            topology_aware_workload_scheduling: false,
            // Beta and on since 1.34.
            scheduler_filter_timeout: true,
            dra_filter_timeout_ms: DRA_FILTER_TIMEOUT_DEFAULT_MS,
        }
    }

    /// Sets the DynamicResources plugin's `filterTimeout`
    /// (`--dra-filter-timeout`); zero disables the bound.
    ///
    /// # Errors
    /// A negative duration.
    pub fn set_dra_filter_timeout(
        &mut self,
        timeout: k8s_openapi::jiff::SignedDuration,
    ) -> Result<(), GateError> {
        let ms = u64::try_from(timeout.as_millis())
            .map_err(|_| GateError::NegativeTimeout(timeout.to_string()))?;
        self.dra_filter_timeout_ms = ms;
        Ok(())
    }

    /// The allocator's work bound per node check: `filterTimeout` as search
    /// steps, `None` when the gate is off or the timeout is 0.
    #[must_use]
    pub fn search_budget(&self) -> Option<u64> {
        (self.scheduler_filter_timeout && self.dra_filter_timeout_ms > 0).then(|| {
            self.dra_filter_timeout_ms
                .saturating_mul(SEARCH_STEPS_PER_MS)
        })
    }

    /// The allocator's `DeviceBindingAndStatus` feature: binding conditions need
    /// both gates.
    #[must_use]
    pub fn binding_and_status(&self) -> bool {
        self.device_binding_conditions && self.resource_claim_device_status
    }

    /// Whether kube-scheduler of `version` has gate `name`: every name of
    /// [`FeatureGates::NAMES`] except `GangScheduling` from 1.37, where it was merged
    /// into `GenericWorkload` and the scheduler refuses it as unrecognized.
    #[must_use]
    pub fn exists_in(name: &str, version: KubeVersion) -> bool {
        Self::NAMES.contains(&name) && !(name == "GangScheduling" && version.minor >= 37)
    }

    /// The entries of a `--feature-gates` list that `version`'s scheduler has,
    /// and the names of those it does not (`GangScheduling` from 1.37).
    ///
    /// That scheduler refuses to start with such a gate ("unrecognized feature
    /// gate"), but the same flags are commonly kept across upgrades and the gate's
    /// meaning lives on in `GenericWorkload`, so we plan on without it and say so
    /// rather than refuse to plan. Malformed and unknown entries are kept, for
    /// [`FeatureGates::apply_flag`] to reject.
    #[must_use]
    pub fn flag_for(version: KubeVersion, flag: &str) -> FlagForVersion {
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for entry in flag.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let name = entry.split_once('=').map_or(entry, |(name, _)| name).trim();
            if Self::NAMES.contains(&name) && !Self::exists_in(name, version) {
                dropped.push(name.to_owned());
            } else {
                kept.push(entry);
            }
        }
        FlagForVersion {
            flag: kept.join(","),
            dropped: dropped
                .into_iter()
                .map(|gate| DroppedGate { gate, version })
                .collect(),
        }
    }

    /// Reads one gate by its upstream name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<bool> {
        let mut copy = *self;
        copy.slot_mut(name).map(|slot| *slot)
    }

    /// Sets one gate by its upstream name.
    ///
    /// # Errors
    /// [`GateError::UnknownGate`] for a name not in [`FeatureGates::NAMES`].
    pub fn set(&mut self, name: &str, value: bool) -> Result<(), GateError> {
        let slot = self
            .slot_mut(name)
            .ok_or_else(|| GateError::UnknownGate(name.to_string()))?;
        *slot = value;
        Ok(())
    }

    /// Applies a kube-scheduler style list, `Name=true,Other=false`, on top of
    /// the current values. Empty entries are ignored.
    ///
    /// # Errors
    /// A [`GateError`] naming the first entry that is malformed or unknown.
    pub fn apply_flag(&mut self, flag: &str) -> Result<(), GateError> {
        for entry in flag.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| GateError::BadEntry(entry.to_string()))?;
            let value = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(GateError::BadEntry(entry.to_string())),
            };
            self.set(name.trim(), value)?;
        }
        Ok(())
    }

    fn slot_mut(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "DRAAdminAccess" => &mut self.admin_access,
            "DRAPrioritizedList" => &mut self.prioritized_list,
            "DRAPartitionableDevices" => &mut self.partitionable_devices,
            "DRADeviceTaints" => &mut self.device_taints,
            "DRADeviceTaintRules" => &mut self.device_taint_rules,
            "DRADeviceBindingConditions" => &mut self.device_binding_conditions,
            "DRAResourceClaimDeviceStatus" => &mut self.resource_claim_device_status,
            "DRAConsumableCapacity" => &mut self.consumable_capacity,
            "DRAFractionalCapacityRange" => &mut self.fractional_capacity_range,
            "DRAListTypeAttributes" => &mut self.list_type_attributes,
            "DRAExtendedResource" => &mut self.extended_resource,
            "DRADeviceCompatibilityGroups" => &mut self.device_compatibility_groups,
            "DRAOptionalNodeOperations" => &mut self.optional_node_operations,
            "GenericWorkload" => &mut self.generic_workload,
            "GangScheduling" => &mut self.gang_scheduling,
            "TopologyAwareWorkloadScheduling" => &mut self.topology_aware_workload_scheduling,
            "DRASchedulerFilterTimeout" => &mut self.scheduler_filter_timeout,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gang_scheduling_is_left_out_from_1_37_where_the_scheduler_no_longer_knows_it() {
        // kube-scheduler 1.37.2: "unrecognized feature gate: GangScheduling".
        let v37 = KubeVersion { minor: 37 };
        assert!(!FeatureGates::exists_in("GangScheduling", v37));
        let read = FeatureGates::flag_for(v37, "GenericWorkload=true, GangScheduling=false");
        assert_eq!(read.flag, "GenericWorkload=true");
        assert_eq!(read.dropped.len(), 1);
        assert_eq!(read.dropped[0].gate, "GangScheduling");
        let said = read.dropped[0].to_string();
        assert!(
            said.contains("GangScheduling") && said.contains("1.37"),
            "{said}"
        );
        // Left out, so `GangScheduling=false` cannot turn off what 1.37 cannot.
        let mut gates = FeatureGates::for_version(v37);
        gates.apply_flag(&read.flag).unwrap();
        assert!(gates.generic_workload && gates.gang_scheduling);
        let v36 = KubeVersion { minor: 36 };
        assert!(FeatureGates::exists_in("GangScheduling", v36));
        let read = FeatureGates::flag_for(v36, "GenericWorkload=true,GangScheduling=true");
        assert_eq!(read.flag, "GenericWorkload=true,GangScheduling=true");
        assert!(read.dropped.is_empty());
        // Malformed entries stay for apply_flag to reject.
        assert_eq!(FeatureGates::flag_for(v37, "Bogus").flag, "Bogus");
    }

    #[test]
    fn fractional_capacity_ranges_are_off_in_1_37_at_its_default_compatibility_version() {
        // kube-scheduler 1.37.2 --help: "DRAFractionalCapacityRange=true|false (BETA -
        // default=false), or ... (BETA - default=true) if --min-compatibility-version>=1.37".
        assert!(!FeatureGates::for_version(KubeVersion { minor: 37 }).fractional_capacity_range);
    }

    #[test]
    fn version_parsing_accepts_common_forms() {
        assert_eq!("1.36".parse::<KubeVersion>(), Ok(KubeVersion { minor: 36 }));
        assert_eq!(
            "v1.35.2".parse::<KubeVersion>(),
            Ok(KubeVersion { minor: 35 })
        );
        assert_eq!(
            "1.34.0-gke.100".parse::<KubeVersion>(),
            Ok(KubeVersion { minor: 34 })
        );
        assert!(matches!(
            "1.33".parse::<KubeVersion>(),
            Err(GateError::UnsupportedVersion(_))
        ));
        assert!(matches!(
            "2.1".parse::<KubeVersion>(),
            Err(GateError::BadVersion(_))
        ));
        assert!(matches!(
            "abc".parse::<KubeVersion>(),
            Err(GateError::BadVersion(_))
        ));
    }

    #[test]
    fn defaults_follow_upstream_maturity() {
        let v134 = FeatureGates::for_version(KubeVersion { minor: 34 });
        assert!(v134.admin_access && v134.prioritized_list);
        assert!(!v134.partitionable_devices && !v134.consumable_capacity && !v134.device_taints);
        let v136 = FeatureGates::for_version(KubeVersion { minor: 36 });
        assert!(v136.partitionable_devices && v136.consumable_capacity && v136.device_taints);
        assert!(
            !v136.device_taint_rules,
            "DeviceTaintRules is beta but off in 1.36"
        );
        let v137 = FeatureGates::default();
        assert!(v137.device_taint_rules && v137.extended_resource);
        assert!(!v137.list_type_attributes && !v137.generic_workload);
        assert!(v137.gang_scheduling, "merged into GenericWorkload in 1.37");
        assert!(!v136.gang_scheduling);
    }

    #[test]
    fn flag_overrides_including_locked_gates() {
        let mut gates = FeatureGates::default();
        gates
            .apply_flag("DRAPrioritizedList=false, DRAListTypeAttributes=true")
            .unwrap();
        assert_eq!(gates.get("DRAPrioritizedList"), Some(false));
        assert_eq!(gates.get("DRAListTypeAttributes"), Some(true));
        assert_eq!(
            gates.apply_flag("DRAFoo=true"),
            Err(GateError::UnknownGate("DRAFoo".into()))
        );
        assert!(matches!(
            gates.apply_flag("DRAAdminAccess"),
            Err(GateError::BadEntry(_))
        ));
        assert!(matches!(
            gates.apply_flag("DRAAdminAccess=yes"),
            Err(GateError::BadEntry(_))
        ));
    }

    #[test]
    fn every_listed_name_is_settable() {
        for name in FeatureGates::NAMES {
            let mut gates = FeatureGates::default();
            gates.set(name, true).unwrap();
            assert_eq!(gates.get(name), Some(true), "{name}");
            gates.set(name, false).unwrap();
            assert_eq!(gates.get(name), Some(false), "{name}");
        }
    }

    #[test]
    fn binding_needs_both_gates() {
        let mut gates = FeatureGates::default();
        assert!(gates.binding_and_status());
        gates.resource_claim_device_status = false;
        assert!(!gates.binding_and_status());
    }
}
