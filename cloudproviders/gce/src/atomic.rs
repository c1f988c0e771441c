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
use dra_provider::skeleton::sizes;
use dra_provider::{AtomicIncrease, InstanceDetails, InstanceError, InstanceState, ProviderError};

use crate::api::{BulkInsert, ResizeRequestState, Scope};
use crate::discovery::find_reservation;
use crate::errors::{error_class, scale_up_error};
use crate::groups::{Atomic, Group};
use crate::names::gce_request_id;
pub use crate::names::{instance_names, new_request_id, request_key};
use crate::state::{Inner, LOCATION_LABEL, MIG_LABEL, REQUEST_LABEL, provider_id};

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
pub(crate) async fn start(
    inner: &Arc<Inner>,
    request: &AtomicIncrease,
) -> Result<Vec<String>, ProviderError> {
    let id = &request.id;
    inner.ensure_groups(true).await?;
    let group = inner.group(id).await?;
    if group.atomic == Atomic::None {
        return Err(ProviderError::NotImplemented {
            method: "AtomicIncreaseSize",
        });
    }
    let (size, _) = inner.size(&group).await?;
    let headroom = sizes::headroom(id, size, group.spec.max_size, request.min_count)?;
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
        let failed = ids.iter().map(|id| InstanceDetails {
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
        inner.failed.add(&group.id, failed).await;
    }
    if let Some(list) = inner.watching.lock().await.get_mut(&group.id) {
        list.retain(|n| n != &name);
    }
}
