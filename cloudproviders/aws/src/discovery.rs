//! Reads every node group from AWS: the ASGs (discovered by tags and listed), their launch
//! templates, instance types, subnets' zones and reservations, batched so a loop costs a few
//! calls whatever the number of groups. A group that cannot be used is set aside with the
//! reason; it never stops the others.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use dra_provider::ProviderError;

use crate::groups::{self, Parts};
use crate::provider::{Groups, Inner};

/// All groups, read now.
///
/// # Errors
/// Errors of the calls every group needs (listing ASGs, describing instance types, subnets,
/// reservations); per-group problems end up in [`Groups::bad`].
pub(crate) async fn read_groups(inner: &Inner) -> Result<Groups, ProviderError> {
    let config = &inner.config;
    let aws = &inner.aws;
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
        let settings = groups::settings(asg, config.group(&asg.name));
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
            Err(err) => {
                bad.insert(asg.name.clone(), err.to_string());
            }
        }
    }

    let types: Vec<String> = staged.iter().map(|(_, _, _, t)| t.clone()).collect();
    let shapes = match inner.types.shapes(aws, &types).await {
        Ok(shapes) => shapes,
        Err(ProviderError::NotFound { .. }) => {
            // Describe one by one so one bad type does not hide the others.
            let mut shapes = BTreeMap::new();
            for t in &types {
                if let Ok(one) = inner.types.shapes(aws, std::slice::from_ref(t)).await {
                    shapes.extend(one);
                }
            }
            shapes
        }
        Err(err) => return Err(err),
    };
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
    let zones = aws
        .subnet_zones(&subnets.into_iter().collect::<Vec<_>>())
        .await?;
    let reservation_ids: BTreeSet<String> = staged
        .iter()
        .filter_map(|(_, s, _, _)| s.capacity_reservation_id.clone())
        .collect();
    let reservations = aws
        .reservations(&reservation_ids.into_iter().collect::<Vec<_>>())
        .await?;

    let mut good = BTreeMap::new();
    for (asg, settings, lt, instance_type) in staged {
        let Some(shape) = shapes.get(&instance_type).cloned() else {
            bad.insert(
                asg.name.clone(),
                format!("instance type {instance_type} is unknown to DescribeInstanceTypes"),
            );
            continue;
        };
        let wanted = if settings.subnets.is_empty() {
            &asg.subnets
        } else {
            &settings.subnets
        };
        let subnets: BTreeMap<String, String> = wanted
            .iter()
            .filter_map(|s| zones.get(s).map(|z| (s.clone(), z.clone())))
            .collect();
        let reservation = settings
            .capacity_reservation_id
            .as_ref()
            .and_then(|id| reservations.iter().find(|r| &r.id == id).cloned());
        if let Some(id) = &settings.capacity_reservation_id
            && reservation.is_none()
        {
            bad.insert(
                asg.name.clone(),
                format!("capacity reservation {id} not found by DescribeCapacityReservations"),
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
    Ok(Groups {
        read_at: Some(Instant::now()),
        good,
        bad,
    })
}
