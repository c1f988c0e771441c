//! Atomic increase: a gang of `minCount..=count` VMs started together, or none.
//!
//! * Groups whose template uses the flex-start or reservation-bound provisioning model (or that
//!   are configured so) get a **MIG resize request** (`resizeBy`): the MIG creates all VMs at
//!   once or none, queueing until capacity exists. The answer comes once the request succeeds,
//!   or after `resizeRequestWaitSeconds` with the request's (still creating) instances, which a
//!   watcher follows: a request that FAILS (GCE removes what it created) or is cancelled after
//!   `resizeRequestTimeoutSeconds` marks those instances failed with the error's class.
//! * Other groups get **`instances.bulkInsert`** of `count` VMs with `minCount` from the group's
//!   instance template, labelled with the group and the request; fewer than `minCount` created
//!   (an operation error, or a short count) are deleted again before the error is returned.
//!
//! Before either: the request id already answered → the same ids; maxSize; for reserved groups
//! a fresh read of the reservation (its window started, READY, enough free slots).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use dra_api::CapacityType;
use dra_provider::{AtomicIncrease, InstanceDetails, InstanceError, InstanceState, ProviderError};

use crate::api::{BulkInsert, ResizeRequestState, Scope};
use crate::discovery::find_reservation;
use crate::errors::{error_class, scale_up_error};
use crate::groups::{Atomic, Group};
use crate::provider::{Inner, LOCATION_LABEL, MIG_LABEL, REQUEST_LABEL, provider_id};

/// A GCE `requestId`: a UUID (the API requires that form), random per call.
#[must_use]
pub fn new_request_id() -> String {
    uuid_from(&fastrand_u128())
}

fn fastrand_u128() -> u128 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let counter = u128::from(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    u128::from(fnv(&format!("{nanos}-{counter}-{}", std::process::id()))) << 64
        | u128::from(fnv(&format!("{counter}-{nanos}")))
}

static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn uuid_from(value: &u128) -> String {
    let hex = format!("{value:032x}");
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// FNV-1a, stable across restarts and builds (names derived from a request id must be).
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A stable, label- and name-safe key of a request id (`r` + 12 hex digits).
#[must_use]
pub fn request_key(request_id: &str) -> String {
    format!("r{:012x}", fnv(request_id) & 0xffff_ffff_ffff)
}

/// The `requestId` GCE gets for an atomic request: derived from ours, so a retried request is
/// the same operation.
fn gce_request_id(request_id: &str, step: &str) -> String {
    let high = u128::from(fnv(&format!("{step}/{request_id}")));
    let low = u128::from(fnv(&format!("{request_id}/{step}")));
    uuid_from(&(high << 64 | low))
}

/// Names of the VMs of a bulkInsert: `<base>-<4 chars>`, like the MIG's own, derived from the
/// request so a retry asks for the same VMs.
#[must_use]
pub fn instance_names(base: &str, request_id: &str, count: usize) -> Vec<String> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(count);
    let mut salt = 0u64;
    while out.len() < count {
        let mut h = fnv(&format!("{request_id}/{salt}"));
        salt += 1;
        let suffix: String = (0..4)
            .map(|_| {
                let c = ALPHABET[usize::try_from(h % 36).unwrap_or(0)];
                h /= 36;
                char::from(c)
            })
            .collect();
        let name = format!("{base}-{suffix}");
        if seen.insert(name.clone()) {
            out.push(name);
        }
    }
    out
}

fn out_of_capacity(code: &str, message: String) -> ProviderError {
    ProviderError::OutOfCapacity {
        code: code.to_owned(),
        message,
        rolled_back: 0,
    }
}

/// Checks a reserved group's reservation afresh and narrows `count` to its free slots.
async fn check_reservation(
    inner: &Inner,
    group: &Group,
    min_count: i32,
    count: i32,
) -> Result<i32, ProviderError> {
    let Some(name) = group.reservation.as_ref().map(|r| r.name.clone()) else {
        return Err(ProviderError::Internal {
            message: format!("reserved node group {:?} lost its reservation", group.id),
        });
    };
    let reservations = inner.gce.reservations().await?;
    let futures = inner.gce.future_reservations().await?;
    let Some(reservation) = find_reservation(&name, &reservations, &futures) else {
        return Err(out_of_capacity(
            "RESERVATION_NOT_FOUND",
            format!("reservation {name} no longer exists"),
        ));
    };
    let now = SystemTime::now();
    if reservation.start.is_some_and(|start| start > now)
        || reservation.status.starts_with("FUTURE_")
    {
        return Err(out_of_capacity(
            "RESERVATION_NOT_STARTED",
            format!("future reservation {name} has not started its window"),
        ));
    }
    if reservation.end.is_some_and(|end| end <= now) {
        return Err(out_of_capacity(
            "RESERVATION_ENDED",
            format!("reservation {name} has ended"),
        ));
    }
    if reservation.status != "READY" {
        return Err(out_of_capacity(
            "RESERVATION_NOT_READY",
            format!("reservation {name} is {}", reservation.status),
        ));
    }
    let free = i32::try_from((reservation.total - reservation.in_use).max(0)).unwrap_or(i32::MAX);
    if free < min_count {
        return Err(out_of_capacity(
            "RESERVATION_CAPACITY_EXCEEDED",
            format!(
                "reservation {name} has {free} of {} VMs free, {min_count} needed",
                reservation.total
            ),
        ));
    }
    Ok(count.min(free))
}

/// Starts the gang; see the module docs.
///
/// # Errors
/// [`ProviderError::OutOfCapacity`]/[`ProviderError::Quota`] when fewer than `minCount` could
/// start (after rolling back what did), [`ProviderError::InvalidArgument`] for sizes the group
/// cannot take, [`ProviderError::NotImplemented`] for groups configured without atomic starts.
pub(crate) async fn atomic_increase(
    inner: &Arc<Inner>,
    request: &AtomicIncrease,
) -> Result<Vec<String>, ProviderError> {
    let id = &request.id;
    if request.min_count < 1 || request.count < request.min_count {
        return Err(ProviderError::InvalidArgument {
            message: format!(
                "node group {id:?}: need 1 <= minCount <= count, got minCount {} count {}",
                request.min_count, request.count
            ),
        });
    }
    let _scaling = inner.scaling.lock().await;
    if !request.request_id.is_empty()
        && let Some(ids) = inner.requests.lock().await.get(&request.request_id)
    {
        tracing::info!(
            group = id,
            request = request.request_id,
            "request already answered"
        );
        return Ok(ids.clone());
    }
    inner.ensure_groups(true).await?;
    let group = inner.group(id).await?;
    if group.atomic == Atomic::None {
        return Err(ProviderError::NotImplemented {
            method: "AtomicIncreaseSize",
        });
    }
    let (size, _) = inner.size(&group).await?;
    let headroom = group.spec.max_size - size;
    if headroom < request.min_count {
        return Err(ProviderError::InvalidArgument {
            message: format!(
                "node group {id:?}: {} more machines would exceed maxSize {} (size {size})",
                request.min_count, group.spec.max_size
            ),
        });
    }
    let mut count = request.count.min(headroom);
    if group.spec.capacity_type == CapacityType::Reserved {
        count = check_reservation(inner, &group, request.min_count, count).await?;
    }
    let request_id = if request.request_id.is_empty() {
        new_request_id()
    } else {
        request.request_id.clone()
    };
    let ids = match group.atomic {
        Atomic::ResizeRequest => resize_request(inner, &group, count, &request_id).await?,
        Atomic::BulkInsert => {
            bulk_insert(inner, &group, count, request.min_count, &request_id).await?
        }
        Atomic::None => Vec::new(),
    };
    if !request.request_id.is_empty() {
        inner
            .requests
            .lock()
            .await
            .insert(request.request_id.clone(), ids.clone());
    }
    Ok(ids)
}

async fn bulk_insert(
    inner: &Inner,
    group: &Group,
    count: i32,
    min_count: i32,
    request_id: &str,
) -> Result<Vec<String>, ProviderError> {
    let gce = &inner.gce;
    let key = request_key(request_id);
    let names = instance_names(
        &group.mig.base_instance_name,
        request_id,
        usize::try_from(count).unwrap_or(0),
    );
    // A reserved group's VMs land where its reservation is.
    let scope = match (&group.scope, &group.reservation) {
        (Scope::Region(_), Some(r)) => Scope::Zone(r.zone.clone()),
        (scope, _) => scope.clone(),
    };
    let bulk = BulkInsert {
        scope,
        zones: group.mig.zones.clone(),
        names,
        min_count: i64::from(min_count),
        template: group.template.url.clone(),
        labels: [
            (MIG_LABEL.to_owned(), group.mig.name.clone()),
            (LOCATION_LABEL.to_owned(), group.scope.name().to_owned()),
            (REQUEST_LABEL.to_owned(), key.clone()),
        ]
        .into(),
        request_id: gce_request_id(request_id, "bulkInsert"),
    };
    tracing::info!(
        group = group.id,
        count,
        min_count,
        template = group.template.name,
        "instances.bulkInsert"
    );
    let result = gce.bulk_insert(&bulk).await;
    let created = gce.labelled_instances(REQUEST_LABEL, &key).await?;
    let started = i32::try_from(created.len()).unwrap_or(i32::MAX);
    let failure = match result {
        Ok(()) if started >= min_count => None,
        Ok(()) => Some(out_of_capacity(
            "INSUFFICIENT_CAPACITY",
            format!(
                "node group {:?}: bulkInsert created {started} of minCount {min_count}",
                group.id
            ),
        )),
        Err(err) => Some(err),
    };
    let Some(err) = failure else {
        return Ok(created
            .iter()
            .map(|i| provider_id(&gce.project, &i.zone, &i.name))
            .collect());
    };
    if !created.is_empty() {
        tracing::warn!(
            group = group.id,
            started,
            min_count,
            "partial bulkInsert, rolling back"
        );
        for i in &created {
            gce.delete_instance(&i.zone, &i.name).await?;
        }
    }
    Err(with_rollback(err, started))
}

/// The same error with the number of VMs the rollback deleted.
fn with_rollback(err: ProviderError, rolled: i32) -> ProviderError {
    match err {
        ProviderError::OutOfCapacity { code, message, .. } => ProviderError::OutOfCapacity {
            code,
            message,
            rolled_back: rolled,
        },
        other => other,
    }
}

async fn resize_request(
    inner: &Arc<Inner>,
    group: &Group,
    count: i32,
    request_id: &str,
) -> Result<Vec<String>, ProviderError> {
    let gce = &inner.gce;
    let name = format!("dra-{}", request_key(request_id));
    let before: BTreeSet<String> = gce
        .managed_instances(&group.scope, &group.mig.name)
        .await?
        .into_iter()
        .map(|m| m.name)
        .collect();
    tracing::info!(
        group = group.id,
        count,
        request = name,
        model = group.provisioning_model,
        "instanceGroupManagerResizeRequests.insert"
    );
    gce.insert_resize_request(
        &group.scope,
        &group.mig.name,
        &name,
        count,
        group.config.run_duration_seconds,
        &gce_request_id(request_id, "resizeRequest"),
    )
    .await?;
    let created: Vec<(String, String)> = gce
        .managed_instances(&group.scope, &group.mig.name)
        .await?
        .into_iter()
        .filter(|m| !before.contains(&m.name))
        .map(|m| (m.zone, m.name))
        .collect();
    let ids: Vec<String> = created
        .iter()
        .map(|(zone, n)| provider_id(&gce.project, zone, n))
        .collect();
    let poll = Duration::from_millis(inner.config.resize_request_poll_millis);
    let deadline = Instant::now() + Duration::from_secs(inner.config.resize_request_wait_seconds);
    loop {
        let info = gce
            .get_resize_request(&group.scope, &group.mig.name, &name)
            .await?;
        match info.state {
            ResizeRequestState::Succeeded => return Ok(ids),
            ResizeRequestState::Failed | ResizeRequestState::Cancelled => {
                let (code, message) = info
                    .errors
                    .first()
                    .cloned()
                    .unwrap_or_else(|| ("RESIZE_REQUEST_FAILED".to_owned(), String::new()));
                return Err(scale_up_error(
                    &code,
                    format!("resize request {name} of {:?}: {message}", group.id),
                    0,
                ));
            }
            _ if Instant::now() >= deadline => break,
            _ => tokio::time::sleep(poll).await,
        }
    }
    tracing::info!(
        group = group.id,
        request = name,
        "resize request queued, watching it"
    );
    inner
        .watching
        .lock()
        .await
        .entry(group.id.clone())
        .or_default()
        .push(name.clone());
    tokio::spawn(watch(Arc::clone(inner), group.clone(), name, ids.clone()));
    Ok(ids)
}

/// Follows a queued resize request to its end; cancels it when it stays queued too long; marks
/// its instances failed when it does not succeed.
async fn watch(inner: Arc<Inner>, group: Group, name: String, ids: Vec<String>) {
    let gce = &inner.gce;
    let poll = Duration::from_millis(inner.config.resize_request_poll_millis);
    let give_up = Instant::now() + Duration::from_secs(inner.config.resize_request_timeout_seconds);
    let mut cancelled = false;
    let outcome = loop {
        tokio::time::sleep(poll).await;
        match gce
            .get_resize_request(&group.scope, &group.mig.name, &name)
            .await
        {
            Ok(info) => match info.state {
                ResizeRequestState::Succeeded => break None,
                ResizeRequestState::Failed | ResizeRequestState::Cancelled => {
                    break Some(info.errors.first().cloned().unwrap_or_else(|| {
                        if cancelled {
                            (
                                "RESIZE_REQUEST_TIMEOUT".to_owned(),
                                format!(
                                    "queued longer than {} s",
                                    inner.config.resize_request_timeout_seconds
                                ),
                            )
                        } else {
                            ("RESIZE_REQUEST_FAILED".to_owned(), String::new())
                        }
                    }));
                }
                _ if Instant::now() >= give_up && !cancelled => {
                    tracing::warn!(
                        group = group.id,
                        request = name,
                        "resize request queued too long, cancelling"
                    );
                    cancelled = true;
                    if let Err(err) = gce
                        .cancel_resize_request(&group.scope, &group.mig.name, &name)
                        .await
                    {
                        tracing::error!(group = group.id, request = name, error = %err, "cancelling the resize request failed");
                    }
                }
                _ => {}
            },
            Err(ProviderError::NotFound { .. }) => {
                break Some(("RESIZE_REQUEST_NOT_FOUND".to_owned(), "deleted".to_owned()));
            }
            Err(err) => {
                tracing::warn!(group = group.id, request = name, error = %err, "reading the resize request failed")
            }
        }
    };
    if let Some((code, message)) = outcome {
        tracing::warn!(
            group = group.id,
            request = name,
            code,
            message,
            "resize request did not succeed"
        );
        let now = SystemTime::now();
        let mut failed = inner.failed.lock().await;
        let list = failed.entry(group.id.clone()).or_default();
        for id in &ids {
            list.push(InstanceDetails {
                id: id.clone(),
                node_name: String::new(),
                state: InstanceState::Deleting,
                error: Some(InstanceError {
                    class: error_class(&code),
                    code: code.clone(),
                    message: format!("resize request {name}: {message}"),
                }),
                reservation_id: None,
                requested_at: Some(now),
            });
        }
    }
    if let Some(list) = inner.watching.lock().await.get_mut(&group.id) {
        list.retain(|n| n != &name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_are_stable_per_request() {
        let a = instance_names("gke-pool-abc", "req-1", 3);
        assert_eq!(a, instance_names("gke-pool-abc", "req-1", 3));
        assert_ne!(a, instance_names("gke-pool-abc", "req-2", 3));
        assert_eq!(a.iter().collect::<BTreeSet<_>>().len(), 3);
        assert!(
            a.iter()
                .all(|n| n.starts_with("gke-pool-abc-") && n.len() == "gke-pool-abc-".len() + 4)
        );
        assert_eq!(request_key("x"), request_key("x"));
        assert_eq!(request_key("x").len(), 13);
        let uuid = gce_request_id("x", "bulkInsert");
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid, gce_request_id("x", "bulkInsert"));
        assert_ne!(new_request_id(), new_request_id());
    }
}
