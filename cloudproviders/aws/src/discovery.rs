//! Reads every node group from AWS: the ASGs (discovered by tags and listed), their launch
//! templates, instance types, subnets' zones and reservations, batched so a loop costs a few
//! calls whatever the number of groups. A group that cannot be used is set aside with the
//! reason; it never stops the others.

use std::collections::{BTreeMap, BTreeSet};

use dra_provider::ProviderError;

use crate::aws::Aws;
use crate::config::Config;
use crate::groups::{self, Group, Parts};
use crate::instance_types::InstanceTypes;

/// Groups as one read found them.
type Groups = dra_provider::GroupCatalog<Group>;

/// All groups, read now.
///
/// # Errors
/// Errors of the calls every group needs (listing ASGs, describing instance types, subnets,
/// reservations); per-group problems end up in [`Groups::bad`].
pub(crate) async fn read_groups(
    aws: &Aws,
    config: &Config,
    instance_types: &InstanceTypes,
) -> Result<Groups, ProviderError> {
    let listed: Vec<String> = config.node_groups.iter().map(|g| g.asg.clone()).collect();
    let asgs = aws.describe_groups(&config.discovery(), &listed).await?;
    let mut bad: BTreeMap<String, String> = listed
        .iter()
        .filter(|name| !asgs.iter().any(|a| &a.name == *name))
        .map(|name| {
            (
                name.clone(),
                "no Auto Scaling group of that name".to_owned(),
            )
        })
        .collect();

    let mut staged = Vec::new();
    for asg in &asgs {
        let settings = match groups::settings(asg, config.group(&asg.name)) {
            Ok(settings) => settings,
            Err(reason) => {
                bad.insert(asg.name.clone(), reason);
                continue;
            }
        };
        let Some(lt) = &asg.launch_template else {
            bad.insert(
                asg.name.clone(),
                "uses a launch configuration; launch templates are required for CreateFleet"
                    .to_owned(),
            );
            continue;
        };
        match aws.launch_template(lt).await {
            Ok(info) => match groups::instance_type(asg, &info) {
                Ok(t) => staged.push((asg, settings, info, t)),
                Err(reason) => {
                    bad.insert(asg.name.clone(), reason);
                }
            },
            Err(err) if err.is_transient() => return Err(err),
            Err(err) => {
                bad.insert(asg.name.clone(), err.to_string());
            }
        }
    }

    let types: Vec<String> = staged.iter().map(|(_, _, _, t)| t.clone()).collect();
    let (shapes, bad_types) = batched(&types, |some| async move {
        instance_types.shapes(aws, &some).await
    })
    .await?;
    let subnets: BTreeSet<String> = staged
        .iter()
        .flat_map(|(asg, settings, _, _)| {
            if settings.subnets.is_empty() {
                asg.subnets.clone()
            } else {
                settings.subnets.clone()
            }
        })
        .collect();
    let (zones, bad_subnets) = batched(
        &subnets.into_iter().collect::<Vec<_>>(),
        |some| async move { aws.subnet_zones(&some).await },
    )
    .await?;
    let reservation_ids: BTreeSet<String> = staged
        .iter()
        .filter_map(|(_, s, _, _)| s.capacity_reservation_id.clone())
        .collect();
    let (reservations, bad_reservations) = batched(
        &reservation_ids.into_iter().collect::<Vec<_>>(),
        |some| async move {
            Ok(aws
                .reservations(&some)
                .await?
                .into_iter()
                .map(|r| (r.id.clone(), r))
                .collect())
        },
    )
    .await?;

    let mut good = BTreeMap::new();
    for (asg, settings, lt, instance_type) in staged {
        let Some(shape) = shapes.get(&instance_type).cloned() else {
            let why = bad_types
                .get(&instance_type)
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            bad.insert(
                asg.name.clone(),
                format!("instance type {instance_type} is unknown to DescribeInstanceTypes{why}"),
            );
            continue;
        };
        let wanted = if settings.subnets.is_empty() {
            &asg.subnets
        } else {
            &settings.subnets
        };
        if let Some((subnet, why)) = wanted
            .iter()
            .find_map(|s| bad_subnets.get(s).map(|e| (s, e)))
        {
            bad.insert(
                asg.name.clone(),
                format!("subnet {subnet} cannot be described: {why}"),
            );
            continue;
        }
        let subnets: BTreeMap<String, String> = wanted
            .iter()
            .filter_map(|s| zones.get(s).map(|z| (s.clone(), z.clone())))
            .collect();
        let reservation = settings
            .capacity_reservation_id
            .as_ref()
            .and_then(|id| reservations.get(id).cloned());
        if let Some(id) = &settings.capacity_reservation_id
            && reservation.is_none()
        {
            let why = bad_reservations
                .get(id)
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            bad.insert(
                asg.name.clone(),
                format!("capacity reservation {id} not found by DescribeCapacityReservations{why}"),
            );
            continue;
        }
        match groups::build(Parts {
            asg,
            config: settings,
            launch_template: lt,
            shape,
            subnets,
            reservation,
            region: &aws.region,
        }) {
            Ok(group) => {
                good.insert(asg.name.clone(), group);
            }
            Err(reason) => {
                bad.insert(asg.name.clone(), reason);
            }
        }
    }
    Ok(Groups::read_now(good, bad))
}

/// What a batched describe call found, by key, and the keys it failed for (with the reason).
type Found<V> = (BTreeMap<String, V>, BTreeMap<String, String>);

/// Describes all `keys` in one `call`; if that fails for a reason other than AWS being
/// unavailable (an unknown instance type, a deleted subnet or reservation refuses the whole
/// batch), each key alone, so one bad key is held against the groups that use it and never
/// hides the others.
///
/// # Errors
/// A transient error (throttling, the endpoint unreachable): nothing can be told then.
async fn batched<V, F, Fut>(keys: &[String], call: F) -> Result<Found<V>, ProviderError>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<BTreeMap<String, V>, ProviderError>>,
{
    if keys.is_empty() {
        return Ok((BTreeMap::new(), BTreeMap::new()));
    }
    match call(keys.to_vec()).await {
        Ok(found) => return Ok((found, BTreeMap::new())),
        Err(err) if err.is_transient() => return Err(err),
        Err(err) if keys.len() == 1 => {
            return Ok((
                BTreeMap::new(),
                BTreeMap::from([(keys[0].clone(), err.to_string())]),
            ));
        }
        Err(_) => {}
    }
    let mut found = BTreeMap::new();
    let mut failed = BTreeMap::new();
    for key in keys {
        match call(vec![key.clone()]).await {
            Ok(one) => found.extend(one),
            Err(err) if err.is_transient() => return Err(err),
            Err(err) => {
                failed.insert(key.clone(), err.to_string());
            }
        }
    }
    Ok((found, failed))
}
