//! Machine types, reservations and future reservations.

use dra_provider::ProviderError;
use google_cloud_compute_v1::model::{self, FutureReservation, Reservation};
use google_cloud_gax::paginator::Paginator;

use super::{Gce, last_segment};

/// What `machineTypes.get` says about a machine type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineTypeInfo {
    /// Name, e.g. `a3-highgpu-8g`.
    pub name: String,
    /// vCPUs.
    pub guest_cpus: u32,
    /// Memory in MiB.
    pub memory_mb: u64,
    /// Accelerators the machine type attaches by itself (A and G series): (type, count).
    pub accelerators: Vec<(String, u32)>,
    /// `ARM64` or `X86_64` (empty when not reported).
    pub architecture: String,
}

/// A reservation (specific SKU) as the provider uses it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReservationInfo {
    /// Name (what `reservationAffinity` names).
    pub name: String,
    /// Zone.
    pub zone: String,
    /// VMs it holds.
    pub count: i64,
    /// VMs of it in use.
    pub in_use: i64,
    /// Machine type it holds.
    pub machine_type: String,
    /// Accelerators of its VMs: (type, count).
    pub accelerators: Vec<(String, u32)>,
    /// Only VMs that name it may use it.
    pub specific_required: bool,
    /// `READY`, `CREATING`, `UPDATING`, `DELETING`.
    pub status: String,
    /// When it is deleted (RFC 3339), if it has an end.
    pub delete_at: Option<String>,
}

impl ReservationInfo {
    /// Free slots (never negative).
    #[must_use]
    pub fn free(&self) -> i64 {
        (self.count - self.in_use).max(0)
    }
}

/// A future reservation: capacity promised for a time window.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FutureReservationInfo {
    /// Name.
    pub name: String,
    /// Zone.
    pub zone: String,
    /// Name of the reservation created at the window's start.
    pub reservation_name: String,
    /// VMs promised.
    pub total_count: i64,
    /// Machine type.
    pub machine_type: String,
    /// Window start (RFC 3339).
    pub start_time: Option<String>,
    /// Window end (RFC 3339), or the start plus its duration.
    pub end_time: Option<String>,
    /// `procurementStatus` (`APPROVED`, `PROVISIONING`, `FULFILLED`, ...).
    pub procurement_status: String,
}

fn accelerators(list: &[model::AcceleratorConfig]) -> Vec<(String, u32)> {
    list.iter()
        .filter_map(|a| {
            Some((
                last_segment(a.accelerator_type.as_deref()?).to_owned(),
                u32::try_from(a.accelerator_count.unwrap_or(0)).unwrap_or(0),
            ))
        })
        .collect()
}

fn reservation(r: &Reservation) -> Option<ReservationInfo> {
    let sku = r.specific_reservation.as_ref()?;
    let props = sku.instance_properties.as_ref();
    Some(ReservationInfo {
        name: r.name.clone().unwrap_or_default(),
        zone: r
            .zone
            .as_deref()
            .map(|z| last_segment(z).to_owned())
            .unwrap_or_default(),
        count: sku.count.unwrap_or(0),
        in_use: sku.in_use_count.unwrap_or(0),
        machine_type: props
            .and_then(|p| p.machine_type.as_deref())
            .map(|m| last_segment(m).to_owned())
            .unwrap_or_default(),
        accelerators: props
            .map(|p| accelerators(&p.guest_accelerators))
            .unwrap_or_default(),
        specific_required: r.specific_reservation_required.unwrap_or(false),
        status: r
            .status
            .as_ref()
            .and_then(|s| s.name())
            .unwrap_or_default()
            .to_owned(),
        delete_at: r.delete_at_time.clone(),
    })
}

fn end_of(window: &model::FutureReservationTimeWindow) -> Option<String> {
    if let Some(end) = &window.end_time {
        return Some(end.clone());
    }
    let start: jiff::Timestamp = window.start_time.as_deref()?.parse().ok()?;
    let seconds = window.duration.as_ref()?.seconds?;
    start
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .ok()
        .map(|t| t.to_string())
}

fn future(f: &FutureReservation) -> FutureReservationInfo {
    let sku = f.specific_sku_properties.as_ref();
    let window = f.time_window.as_ref();
    FutureReservationInfo {
        name: f.name.clone().unwrap_or_default(),
        zone: f
            .zone
            .as_deref()
            .map(|z| last_segment(z).to_owned())
            .unwrap_or_default(),
        reservation_name: f
            .reservation_name
            .clone()
            .or_else(|| f.name.clone())
            .unwrap_or_default(),
        total_count: sku.and_then(|s| s.total_count).unwrap_or(0),
        machine_type: sku
            .and_then(|s| s.instance_properties.as_ref())
            .and_then(|p| p.machine_type.as_deref())
            .map(|m| last_segment(m).to_owned())
            .unwrap_or_default(),
        start_time: window.and_then(|w| w.start_time.clone()),
        end_time: window.and_then(end_of),
        procurement_status: f
            .status
            .as_ref()
            .and_then(|s| s.procurement_status.as_ref())
            .and_then(|p| p.name())
            .unwrap_or_default()
            .to_owned(),
    }
}

impl Gce {
    /// `machineTypes.get` in `zone`.
    ///
    /// # Errors
    /// [`ProviderError::NotFound`] for an unknown type; the API's error otherwise.
    pub async fn machine_type(
        &self,
        zone: &str,
        name: &str,
    ) -> Result<MachineTypeInfo, ProviderError> {
        let m = self
            .call("machineTypes.get", || {
                self.machine_types
                    .get()
                    .set_project(&self.project)
                    .set_zone(zone)
                    .set_machine_type(name)
                    .send()
            })
            .await?;
        Ok(MachineTypeInfo {
            name: m.name.clone().unwrap_or_else(|| name.to_owned()),
            guest_cpus: u32::try_from(m.guest_cpus.unwrap_or(0)).unwrap_or(0),
            memory_mb: u64::try_from(m.memory_mb.unwrap_or(0)).unwrap_or(0),
            accelerators: m
                .accelerators
                .iter()
                .filter_map(|a| {
                    Some((
                        last_segment(a.guest_accelerator_type.as_deref()?).to_owned(),
                        u32::try_from(a.guest_accelerator_count.unwrap_or(0)).unwrap_or(0),
                    ))
                })
                .collect(),
            architecture: m
                .architecture
                .as_ref()
                .and_then(|a| a.name())
                .unwrap_or_default()
                .to_owned(),
        })
    }

    /// Every specific-SKU reservation of the project (`reservations.aggregatedList`).
    ///
    /// # Errors
    /// The API's error.
    pub async fn reservations(&self) -> Result<Vec<ReservationInfo>, ProviderError> {
        let mut out = self
            .call("reservations.aggregatedList", || async move {
                let mut pages = self
                    .reservations
                    .aggregated_list()
                    .set_project(&self.project)
                    .by_page();
                let mut out = Vec::new();
                while let Some(page) = pages.next().await {
                    for scoped in page?.items.into_values() {
                        out.extend(scoped.reservations.iter().filter_map(reservation));
                    }
                }
                Ok(out)
            })
            .await?;
        out.sort_by(|a, b| (&a.zone, &a.name).cmp(&(&b.zone, &b.name)));
        Ok(out)
    }

    /// Every future reservation of the project (`futureReservations.aggregatedList`).
    ///
    /// # Errors
    /// The API's error.
    pub async fn future_reservations(&self) -> Result<Vec<FutureReservationInfo>, ProviderError> {
        let mut out = self
            .call("futureReservations.aggregatedList", || async move {
                let mut pages = self
                    .future_reservations
                    .aggregated_list()
                    .set_project(&self.project)
                    .by_page();
                let mut out = Vec::new();
                while let Some(page) = pages.next().await {
                    for scoped in page?.items.into_values() {
                        out.extend(scoped.future_reservations.iter().map(future));
                    }
                }
                Ok(out)
            })
            .await?;
        out.sort_by(|a, b| (&a.zone, &a.name).cmp(&(&b.zone, &b.name)));
        Ok(out)
    }
}
