//! One node group = one managed instance group: its settings merged from the config file, the
//! instance template (machine type, accelerators, boot disk, kube-env, provisioning model,
//! reservation affinity), `machineTypes.get` and the reservation it consumes; and from those the
//! `NodeGroup` spec whose template is what a machine of the group registers as.

use std::collections::BTreeMap;
use std::time::SystemTime;

use dra_api::{CapacityType, NodeGroupSpec, Reservation};
use dra_provider_machines::gce::accelerator_gpus;
use dra_provider_machines::{
    Architecture, CloudGroup, MachineShape, Platform, gke, node_template_for,
};
use google_cloud_compute_v1::model::InstanceProperties;
use google_cloud_compute_v1::model::reservation_affinity::ConsumeReservationType;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{MachineTypeInfo, MigInfo, Scope, TemplateInfo, last_segment};
use crate::config::{AtomicMode, GroupConfig};
use crate::kube_env::KubeEnv;

/// `reservationAffinity.key` naming a specific reservation.
pub const RESERVATION_KEY: &str = "compute.googleapis.com/reservation-name";

/// How a gang of the group starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Atomic {
    /// A MIG resize request.
    ResizeRequest,
    /// `instances.bulkInsert` from the group's template, tracked by labels.
    BulkInsert,
    /// Not offered.
    None,
}

/// The reservation (or future reservation) a group consumes, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupReservation {
    /// Reservation name.
    pub name: String,
    /// Its zone.
    pub zone: String,
    /// VMs it holds (or will hold, for a future reservation not started yet).
    pub total: i64,
    /// VMs of it in use.
    pub in_use: i64,
    /// When its window starts, for a future reservation.
    pub start: Option<SystemTime>,
    /// When it ends.
    pub end: Option<SystemTime>,
    /// `READY` when it can be consumed now.
    pub status: String,
}

/// Everything known about one group.
#[derive(Debug, Clone)]
pub struct Group {
    /// `<zone or region>/<MIG name>`.
    pub id: String,
    /// Where the MIG lives.
    pub scope: Scope,
    /// The MIG.
    pub mig: MigInfo,
    /// Its settings.
    pub config: GroupConfig,
    /// Its instance template.
    pub template: TemplateInfo,
    /// Machine type name.
    pub machine_type: String,
    /// `STANDARD`, `SPOT`, `FLEX_START` or `RESERVATION_BOUND`.
    pub provisioning_model: String,
    /// The reservation behind a reserved group.
    pub reservation: Option<GroupReservation>,
    /// How gangs start.
    pub atomic: Atomic,
    /// The spec the planner simulates.
    pub spec: NodeGroupSpec,
}

/// The group id of a MIG.
#[must_use]
pub fn group_id(scope: &Scope, name: &str) -> String {
    format!("{}/{name}", scope.name())
}

/// The `NodeGroup` object name of a group (`us-central1-a/gpu` → `gpu-us-central1-a`): ids hold
/// a `/`, which object names and label values cannot.
#[must_use]
pub fn object_name(id: &str) -> String {
    match id.split_once('/') {
        Some((location, name)) => format!("{name}-{location}"),
        None => id.to_owned(),
    }
}

/// Parses a group id into the MIG's scope and name: a name with a letter suffix after its last
/// `-` (`us-central1-a`) is a zone, otherwise a region.
#[must_use]
pub fn parse_id(id: &str) -> Option<(Scope, String)> {
    let (location, name) = id.split_once('/')?;
    let suffix = location.rsplit('-').next()?;
    let scope = if suffix.len() == 1 && suffix.chars().all(|c| c.is_ascii_lowercase()) {
        Scope::Zone(location.to_owned())
    } else {
        Scope::Region(location.to_owned())
    };
    Some((scope, name.to_owned()))
}

/// The reservation a template's `reservationAffinity` names, if it names one.
#[must_use]
pub fn affinity_reservation(properties: &InstanceProperties) -> Option<String> {
    let affinity = properties.reservation_affinity.as_ref()?;
    let specific = matches!(
        affinity.consume_reservation_type,
        Some(ConsumeReservationType::SpecificReservation)
    );
    (specific && affinity.key.as_deref() == Some(RESERVATION_KEY))
        .then(|| affinity.values.first().map(|v| last_segment(v).to_owned()))
        .flatten()
}

/// The template's provisioning model name (`STANDARD` when unset, `SPOT` for preemptible).
#[must_use]
pub fn provisioning_model(properties: &InstanceProperties) -> String {
    let scheduling = properties.scheduling.as_ref();
    let model = scheduling
        .and_then(|s| s.provisioning_model.as_ref())
        .and_then(|m| m.name())
        .map(ToOwned::to_owned);
    match model {
        Some(m) => m,
        None if scheduling.and_then(|s| s.preemptible).unwrap_or(false) => "SPOT".to_owned(),
        None => "STANDARD".to_owned(),
    }
}

/// GPUs of the machine: the machine type's own (A and G series) merged with the template's
/// `guestAccelerators` (N1), one entry per type with the larger count.
#[must_use]
pub fn gpus(
    machine: &MachineTypeInfo,
    properties: &InstanceProperties,
) -> Vec<dra_provider_machines::Gpu> {
    let mut by_type: BTreeMap<String, u32> = BTreeMap::new();
    for (t, n) in &machine.accelerators {
        let slot = by_type.entry(t.clone()).or_default();
        *slot = (*slot).max(*n);
    }
    for a in &properties.guest_accelerators {
        let Some(t) = a.accelerator_type.as_deref() else {
            continue;
        };
        let n = u32::try_from(a.accelerator_count.unwrap_or(0)).unwrap_or(0);
        let slot = by_type.entry(last_segment(t).to_owned()).or_default();
        *slot = (*slot).max(n);
    }
    by_type
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(t, n)| accelerator_gpus(&t, n))
        .collect()
}

fn boot_disk_gib(properties: &InstanceProperties) -> Option<u64> {
    properties
        .disks
        .iter()
        .find(|d| d.boot.unwrap_or(false))
        .and_then(|d| {
            d.initialize_params
                .as_ref()
                .and_then(|p| p.disk_size_gb)
                .or(d.disk_size_gb)
        })
        .and_then(|g| u64::try_from(g).ok())
}

/// The template options with what the node pool's kube-env says folded in (the config wins).
///
/// # Errors
/// A message when the kube-env is unreadable.
pub fn settings(
    config: &GroupConfig,
    kube_env: &KubeEnv,
) -> Result<dra_provider_machines::TemplateOptions, String> {
    let mut options = config.settings.template.clone();
    for (k, v) in kube_env.labels().map_err(|e| e.to_string())? {
        options.labels.entry(k).or_insert(v);
    }
    for taint in kube_env.taints().map_err(|e| e.to_string())? {
        if !options.taints.iter().any(|t| t.key == taint.key) {
            options.taints.push(taint);
        }
    }
    if options.kube_reserved.is_none() {
        options.kube_reserved = kube_env.kube_reserved().map_err(|e| e.to_string())?;
    }
    if options.eviction_hard_memory.is_none() {
        options.eviction_hard_memory =
            kube_env.eviction_hard_memory().map_err(|e| e.to_string())?;
    }
    if options.max_pods.is_none() {
        options.max_pods = kube_env.max_pods();
    }
    Ok(options)
}

/// Inputs of [`build`].
#[derive(Debug)]
pub struct Parts {
    /// The MIG.
    pub mig: MigInfo,
    /// Where it lives.
    pub scope: Scope,
    /// Settings (config entry, or defaults from the discovery spec).
    pub config: GroupConfig,
    /// Its instance template.
    pub template: TemplateInfo,
    /// Its machine type.
    pub machine: MachineTypeInfo,
    /// The reservation it consumes.
    pub reservation: Option<GroupReservation>,
}

fn time(t: SystemTime) -> Time {
    Time(jiff::Timestamp::try_from(t).unwrap_or_default())
}

/// The group with its spec.
///
/// # Errors
/// A message naming what is wrong with the group.
pub fn build(parts: Parts) -> Result<Group, String> {
    let Parts {
        mig,
        scope,
        config,
        template,
        machine,
        reservation,
    } = parts;
    let properties = &template.properties;
    let items = properties
        .metadata
        .as_ref()
        .map(|m| {
            m.items
                .iter()
                .filter_map(|i| Some((i.key.as_deref()?, i.value.as_deref().unwrap_or_default())))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let kube_env = KubeEnv::of_metadata(items).map_err(|e| e.to_string())?;
    let options = settings(&config, &kube_env)?;
    let model = provisioning_model(properties);
    let zone = match &scope {
        Scope::Zone(z) => Some(z.clone()),
        Scope::Region(_) => match (&reservation, mig.zones.as_slice()) {
            (Some(r), _) => Some(r.zone.clone()),
            (None, [only]) => Some(only.clone()),
            _ => None,
        },
    };
    let shape = MachineShape {
        instance_type: machine.name.clone(),
        vcpus: machine.guest_cpus,
        memory_mib: machine.memory_mb,
        architecture: if machine.architecture == "ARM64" {
            Architecture::Arm64
        } else {
            Architecture::Amd64
        },
        max_pods: gke::DEFAULT_MAX_PODS,
        gpus: gpus(&machine, properties),
        neuron: None,
        efa_interfaces: 0,
        zone,
        region: Some(scope.region()),
        root_volume_gib: boot_disk_gib(properties),
    };
    let node_template =
        node_template_for(Platform::Gke, &shape, &options).map_err(|e| e.to_string())?;
    let capacity_type = config
        .settings
        .capacity_type
        .unwrap_or(if reservation.is_some() {
            CapacityType::Reserved
        } else if model == "SPOT" {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        });
    if capacity_type == CapacityType::Reserved && reservation.is_none() {
        return Err("capacityType reserved needs a reservation (config `reservation` or the template's reservationAffinity)".to_owned());
    }
    let queued = model == "FLEX_START" || model == "RESERVATION_BOUND";
    let atomic = match config.atomic {
        AtomicMode::Auto if queued && !mig.autoscaled => Atomic::ResizeRequest,
        AtomicMode::Auto => Atomic::BulkInsert,
        AtomicMode::ResizeRequest => Atomic::ResizeRequest,
        AtomicMode::BulkInsert => Atomic::BulkInsert,
        AtomicMode::None => Atomic::None,
    };
    if atomic == Atomic::ResizeRequest
        && model == "FLEX_START"
        && config.run_duration_seconds.is_none()
    {
        return Err(
            "flex-start resize requests need runDurationSeconds (10 minutes to 7 days)".to_owned(),
        );
    }
    let id = group_id(&scope, &mig.name);
    let spec = config.settings.spec(CloudGroup {
        provider: "gce",
        provider_id: id.clone(),
        min_size: 0,
        max_size: 0,
        capacity_type,
        reservation: reservation.as_ref().map(|r| Reservation {
            id: r.name.clone(),
            total: i32::try_from(r.total).unwrap_or(i32::MAX),
            end_time: r.end.map(time),
        }),
        template: node_template,
    });
    spec.validate().map_err(|e| e.to_string())?;
    Ok(Group {
        id,
        scope,
        machine_type: machine.name,
        provisioning_model: model,
        mig,
        config,
        template,
        reservation,
        atomic,
        spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_compute_v1::model::{AcceleratorConfig, ReservationAffinity};

    #[test]
    fn ids_tell_zones_from_regions() {
        assert_eq!(
            parse_id("us-central1-a/gpu"),
            Some((Scope::Zone("us-central1-a".into()), "gpu".into()))
        );
        assert_eq!(
            parse_id("europe-west4/gpu"),
            Some((Scope::Region("europe-west4".into()), "gpu".into()))
        );
        assert_eq!(parse_id("gpu"), None);
    }

    #[test]
    fn accelerators_of_the_machine_type_and_the_template_merge_per_type() {
        let a3 = MachineTypeInfo {
            name: "a3-highgpu-8g".into(),
            accelerators: vec![("nvidia-h100-80gb".into(), 8)],
            ..MachineTypeInfo::default()
        };
        // GKE templates list the A3's GPUs again: not 16.
        let listed = InstanceProperties::new().set_guest_accelerators([AcceleratorConfig::new()
            .set_accelerator_type("nvidia-h100-80gb")
            .set_accelerator_count(8)]);
        let merged = gpus(&a3, &listed);
        assert_eq!((merged.len(), merged[0].count), (1, 8));
        // N1: the machine type has none, the template attaches four T4s.
        let n1 = MachineTypeInfo {
            name: "n1-standard-16".into(),
            ..MachineTypeInfo::default()
        };
        let t4 = InstanceProperties::new().set_guest_accelerators([AcceleratorConfig::new()
            .set_accelerator_type("projects/p/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4")
            .set_accelerator_count(4)]);
        let merged = gpus(&n1, &t4);
        assert_eq!((merged[0].name.as_str(), merged[0].count), ("T4", 4));
    }

    #[test]
    fn a_specific_reservation_affinity_names_the_reservation() {
        let props = InstanceProperties::new().set_reservation_affinity(
            ReservationAffinity::new()
                .set_consume_reservation_type(ConsumeReservationType::SpecificReservation)
                .set_key(RESERVATION_KEY)
                .set_values(["projects/p/reservations/h100-block"]),
        );
        assert_eq!(affinity_reservation(&props).as_deref(), Some("h100-block"));
        let any = InstanceProperties::new().set_reservation_affinity(
            ReservationAffinity::new()
                .set_consume_reservation_type(ConsumeReservationType::AnyReservation),
        );
        assert_eq!(affinity_reservation(&any), None);
    }
}
