//! Atomic increase: a gang of `minCount..=count` instances started together with EC2 Fleet, or
//! none; then attached to the group once running (AttachInstances needs running instances).
//!
//! Order of checks, so nothing is started that would have to be undone: request id already
//! answered → the same ids; maxSize; insufficient-capacity cache; for reserved groups the
//! reservation's state, end and `AvailableInstanceCount`; then one `CreateFleet` whose
//! `ClientToken` comes from the request id (a retried call, by the SDK or by the controller
//! after a lost answer, returns the same fleet instead of starting a second gang).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dra_api::CapacityType;
use dra_provider::skeleton::sizes;
use dra_provider::{AtomicIncrease, ProviderError};

use crate::aws::provider_id;
use crate::errors::{AwsErrorKind, classify, launch_error};
use crate::fleet::{self, Capacity, FleetRequest};
use crate::groups::Group;
use crate::state::{Inner, Pending, failed_instance};

/// Karpenter stops launching into a Capacity Block 40 minutes before its end (AWS terminates
/// its instances from 30 minutes before).
const CAPACITY_BLOCK_CUTOFF: Duration = Duration::from_secs(40 * 60);
/// How long a launched instance may take to reach `running` before it is given up.
const RUNNING_DEADLINE: Duration = Duration::from_secs(15 * 60);

fn out_of_capacity(code: &str, message: String) -> ProviderError {
    ProviderError::OutOfCapacity {
        code: code.to_owned(),
        message,
        rolled_back: 0,
    }
}

/// Subnets not marked unavailable for the group's type; the ICE code when all are.
fn usable_subnets(
    inner: &Inner,
    group: &Group,
    zone: Option<&str>,
) -> Result<Vec<(String, String)>, ProviderError> {
    let mut cached = None;
    let subnets: Vec<(String, String)> = group
        .subnets
        .iter()
        .filter(|(_, z)| zone.is_none_or(|want| want == z.as_str()))
        .filter(
            |(_, z)| match inner.ice.unavailable(&group.instance_type, z) {
                Some(code) => {
                    cached = Some(code);
                    false
                }
                None => true,
            },
        )
        .map(|(s, z)| (s.clone(), z.clone()))
        .collect();
    if subnets.is_empty() {
        return Err(match cached {
            Some(code) => out_of_capacity(
                &code,
                format!(
                    "{} answered {code} in every zone of node group {:?} within the last {} s",
                    group.instance_type, group.asg.name, inner.config.ice_ttl_seconds
                ),
            ),
            None => ProviderError::InvalidArgument {
                message: format!(
                    "node group {:?} has no subnet{}",
                    group.asg.name,
                    zone.map(|z| format!(" in {z}")).unwrap_or_default()
                ),
            },
        });
    }
    Ok(subnets)
}

/// Starts the gang; see the module docs.
///
/// # Errors
/// [`ProviderError::OutOfCapacity`]/[`ProviderError::Quota`] when fewer than `minCount` could
/// start (after rolling back what did), [`ProviderError::InvalidArgument`] for sizes the group
/// cannot take, AWS errors otherwise.
pub(crate) async fn launch(
    inner: &Arc<Inner>,
    request: &AtomicIncrease,
) -> Result<Vec<String>, ProviderError> {
    let id = &request.id;
    inner.ensure_groups(true).await?;
    let group = inner.group(id).await?;
    let headroom = sizes::headroom(
        id,
        inner.target(&group).await,
        group.spec.max_size,
        request.min_count,
    )?;
    let mut count = request.count.min(headroom);
    let mut zone = None;
    let mut capacity_block = false;
    if group.spec.capacity_type == CapacityType::Reserved {
        let Some(reservation_id) = group.reservation.as_ref().map(|r| r.id.clone()) else {
            return Err(ProviderError::Internal {
                message: format!("reserved node group {id:?} lost its reservation"),
            });
        };
        // A fresh count: the cached one may be a minute old.
        let reservation = inner
            .aws
            .reservations(std::slice::from_ref(&reservation_id))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| ProviderError::NotFound {
                what: format!("capacity reservation {reservation_id}"),
            })?;
        if reservation.state != "active" {
            return Err(out_of_capacity(
                "ReservationNotActive",
                format!(
                    "capacity reservation {reservation_id} is {}",
                    reservation.state
                ),
            ));
        }
        if reservation.capacity_block
            && reservation.end.is_some_and(|end| {
                end.duration_since(SystemTime::now())
                    .is_ok_and(|left| left < CAPACITY_BLOCK_CUTOFF)
                    || end <= SystemTime::now()
            })
        {
            return Err(out_of_capacity(
                "ReservationExpiring",
                format!("Capacity Block {reservation_id} ends in less than 40 minutes"),
            ));
        }
        if reservation.available < request.min_count {
            return Err(out_of_capacity(
                "ReservationCapacityExceeded",
                format!(
                    "capacity reservation {reservation_id} has {} of {} instances free, {} needed",
                    reservation.available, reservation.total, request.min_count
                ),
            ));
        }
        count = count.min(reservation.available);
        capacity_block = reservation.capacity_block;
        zone = Some(reservation.zone);
    }
    let subnets = usable_subnets(inner, &group, zone.as_deref())?;
    let fleet_request = FleetRequest {
        group: id.clone(),
        launch_template_id: group.launch_template.id.clone().unwrap_or_default(),
        launch_template_version: group
            .launch_template
            .version
            .clone()
            .unwrap_or_else(|| "$Default".to_owned()),
        instance_type: group.instance_type.clone(),
        subnets,
        count,
        min_count: request.min_count,
        capacity: Capacity::of(group.spec.capacity_type, capacity_block),
        request_id: request.request_id.clone(),
    };
    tracing::info!(
        group = id,
        count,
        min_count = request.min_count,
        instance_type = group.instance_type,
        capacity = ?fleet_request.capacity,
        "CreateFleet instant"
    );
    let outcome = fleet::create_fleet(&inner.aws, &fleet_request).await?;
    for (code, _, instance_type, zone) in &outcome.errors {
        if classify(code) == AwsErrorKind::InsufficientCapacity && !zone.is_empty() {
            let instance_type = if instance_type.is_empty() {
                &group.instance_type
            } else {
                instance_type
            };
            inner.ice.mark(instance_type, zone, code);
        }
    }
    let launched = i32::try_from(outcome.instances.len()).unwrap_or(i32::MAX);
    if launched < request.min_count {
        let ids: Vec<String> = outcome.instances.iter().map(|(i, _)| i.clone()).collect();
        if !ids.is_empty() {
            tracing::warn!(
                group = id,
                launched,
                min = request.min_count,
                "partial launch, rolling back"
            );
            inner.aws.terminate(&ids).await?;
        }
        let (code, message) = outcome
            .errors
            .first()
            .map(|(c, m, _, _)| (c.clone(), m.clone()))
            .unwrap_or_else(|| {
                (
                    "InsufficientInstanceCapacity".to_owned(),
                    "the fleet launched fewer instances than minCount".to_owned(),
                )
            });
        return Err(launch_error(
            &code,
            format!(
                "node group {id:?}: {launched} of minCount {} started: {message}",
                request.min_count
            ),
            launched,
        ));
    }
    let now = SystemTime::now();
    let started: Vec<Pending> = outcome
        .instances
        .iter()
        .map(|(i, z)| Pending {
            id: i.clone(),
            zone: z.clone(),
            requested_at: now,
        })
        .collect();
    let ids: Vec<String> = started
        .iter()
        .map(|p| provider_id(&p.zone, &p.id))
        .collect();
    inner
        .pending
        .lock()
        .await
        .entry(id.clone())
        .or_default()
        .extend(started.iter().cloned());
    tokio::spawn(attach_when_running(Arc::clone(inner), id.clone(), started));
    Ok(ids)
}

/// Waits until every instance runs, then attaches them to the group; terminates them if that
/// cannot happen (the gang is whole or gone).
async fn attach_when_running(inner: Arc<Inner>, group: String, instances: Vec<Pending>) {
    let ids: Vec<String> = instances.iter().map(|p| p.id.clone()).collect();
    let result = wait_and_attach(&inner, &group, &ids).await;
    // Instances given back while they waited (DeleteNodes of a gang that did not start
    // whole) are terminated already and no failure.
    let still_pending: Vec<String> = inner
        .pending
        .lock()
        .await
        .get(&group)
        .map(|list| {
            list.iter()
                .filter(|p| ids.contains(&p.id))
                .map(|p| p.id.clone())
                .collect()
        })
        .unwrap_or_default();
    if result.is_err() && still_pending.is_empty() {
        tracing::info!(group, instances = ?ids, "the gang was given back before it was attached");
    } else if let Err(err) = &result {
        tracing::error!(group, error = %err, "attaching the gang failed, terminating it");
        if let Err(terminate) = inner.aws.terminate(&ids).await {
            tracing::error!(group, error = %terminate, "terminating the unattached gang failed");
        }
        let failed = instances.iter().map(|p| {
            failed_instance(
                provider_id(&p.zone, &p.id),
                "AttachFailed",
                err.to_string(),
                p.requested_at,
            )
        });
        inner.failed.add(&group, failed).await;
    }
    // Read the group again before dropping the pending entries, so its instances (or their
    // absence) are visible the moment they stop being pending.
    if let Err(err) = inner.ensure_groups(true).await {
        tracing::warn!(group, error = %err, "re-reading groups after attach failed");
    }
    if let Some(list) = inner.pending.lock().await.get_mut(&group) {
        list.retain(|p| !ids.contains(&p.id));
    }
}

async fn wait_and_attach(inner: &Inner, group: &str, ids: &[String]) -> Result<(), ProviderError> {
    let started = tokio::time::Instant::now();
    loop {
        let states = inner.aws.instance_states(ids).await?;
        if let Some((id, state)) = states.iter().find(|(_, s)| {
            matches!(
                s.as_str(),
                "shutting-down" | "terminated" | "stopping" | "stopped"
            )
        }) {
            return Err(ProviderError::Internal {
                message: format!("instance {id} of the gang is {state}"),
            });
        }
        if ids
            .iter()
            .all(|i| states.get(i).is_some_and(|s| s == "running"))
        {
            break;
        }
        if started.elapsed() > RUNNING_DEADLINE {
            return Err(ProviderError::Internal {
                message: format!("gang not running after {} s", RUNNING_DEADLINE.as_secs()),
            });
        }
        tokio::time::sleep(inner.attach_poll()).await;
    }
    let _scaling = inner.scaling.lock().await;
    // Instances given back while this task waited for the lock (DeleteNodes) are not
    // attached: they are terminating.
    let still: Vec<String> = inner
        .pending
        .lock()
        .await
        .get(group)
        .map(|list| {
            list.iter()
                .filter(|p| ids.contains(&p.id))
                .map(|p| p.id.clone())
                .collect()
        })
        .unwrap_or_default();
    if still.is_empty() {
        return Ok(());
    }
    tracing::info!(group, instances = still.len(), "AttachInstances");
    inner.aws.attach(group, &still).await
}
