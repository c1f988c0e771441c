//! One node group = one Auto Scaling group: its settings merged from the config file, the ASG's
//! tags (cluster-autoscaler's `node-template` tags), the launch template, the instance type
//! and, for reserved groups, the capacity reservation; and from those the `NodeGroup` spec
//! whose template is what a machine of the group registers as.

use std::collections::BTreeMap;

use dra_api::{CapacityType, NodeGroupSpec, Reservation};
use dra_provider_machines::{CloudGroup, MachineShape, TemplateOptions, node_template};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::aws::{AsgInfo, LaunchTemplateInfo, ReservationInfo};
use crate::config::{GroupConfig, PRICE_TAG, RESERVATION_TAG};

/// Prefix of cluster-autoscaler's scale-from-zero template tags.
pub const NODE_TEMPLATE_TAG: &str = "k8s.io/cluster-autoscaler/node-template/";

/// Everything known about one group.
#[derive(Debug, Clone)]
pub struct Group {
    /// The ASG.
    pub asg: AsgInfo,
    /// Its settings (config entry, or defaults and tags for a discovered group).
    pub config: GroupConfig,
    /// The launch template version it uses.
    pub launch_template: LaunchTemplateInfo,
    /// Its instance type.
    pub instance_type: String,
    /// Subnets CreateFleet may use, with their zones.
    pub subnets: BTreeMap<String, String>,
    /// The reservation behind a reserved group.
    pub reservation: Option<ReservationInfo>,
    /// The spec (with template) the planner simulates.
    pub spec: NodeGroupSpec,
}

/// The group's settings with what its tags say folded in (the config file wins).
///
/// # Errors
/// A message naming the tag whose value cannot be used (a price that is not a number, a
/// taint whose effect is not one of Kubernetes'): the group is left out rather than served
/// with a value nobody set.
pub fn settings(asg: &AsgInfo, listed: Option<&GroupConfig>) -> Result<GroupConfig, String> {
    let mut config = listed.cloned().unwrap_or_else(|| GroupConfig {
        asg: asg.name.clone(),
        ..GroupConfig::default()
    });
    if config.settings.price_per_hour.is_none()
        && let Some(price) = asg.tags.get(PRICE_TAG)
    {
        match price.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => config.settings.price_per_hour = Some(p),
            _ => {
                return Err(format!(
                    "tag {PRICE_TAG} is {price:?}, not a price per hour (a number >= 0)"
                ));
            }
        }
    }
    if config.capacity_reservation_id.is_none() {
        config.capacity_reservation_id = asg.tags.get(RESERVATION_TAG).cloned();
    }
    let from_tags = template_from_tags(&asg.tags);
    let options = &mut config.settings.template;
    for (k, v) in from_tags.labels {
        options.labels.entry(k).or_insert(v);
    }
    for taint in from_tags.taints {
        if !options.taints.iter().any(|t| t.key == taint.key) {
            options.taints.push(taint);
        }
    }
    for (k, v) in from_tags.capacity {
        options
            .capacity
            .entry(k.clone())
            .or_insert_with(|| v.clone());
        options.allocatable.entry(k).or_insert(v);
    }
    if let Some(taint) = options.taints.iter().find(|t| {
        !matches!(
            t.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        )
    }) {
        return Err(format!(
            "taint {:?} has effect {:?}; the tag {NODE_TEMPLATE_TAG}taint/{} takes value:NoSchedule, value:PreferNoSchedule or value:NoExecute",
            taint.key, taint.effect, taint.key
        ));
    }
    Ok(config)
}

/// cluster-autoscaler's node-template tags: `…/label/<key>` = value, `…/taint/<key>` =
/// `value:Effect`, `…/resources/<name>` = quantity.
#[must_use]
pub fn template_from_tags(tags: &BTreeMap<String, String>) -> TemplateOptions {
    let mut options = TemplateOptions::default();
    for (key, value) in tags {
        let Some(rest) = key.strip_prefix(NODE_TEMPLATE_TAG) else {
            continue;
        };
        if let Some(label) = rest.strip_prefix("label/") {
            options.labels.insert(label.to_owned(), value.clone());
        } else if let Some(taint) = rest.strip_prefix("taint/") {
            let (value, effect) = value.rsplit_once(':').unwrap_or(("", value.as_str()));
            options.taints.push(Taint {
                key: taint.to_owned(),
                value: Some(value.to_owned()).filter(|v| !v.is_empty()),
                effect: effect.to_owned(),
                ..Taint::default()
            });
        } else if let Some(resource) = rest.strip_prefix("resources/") {
            options
                .capacity
                .insert(resource.to_owned(), Quantity(value.clone()));
        }
    }
    options
}

/// The instance type a group launches: the launch template's, else the first override of the
/// mixed instances policy (what cluster-autoscaler uses for templates).
///
/// # Errors
/// A message when neither names one.
pub fn instance_type(asg: &AsgInfo, lt: &LaunchTemplateInfo) -> Result<String, String> {
    asg.override_types
        .first()
        .cloned()
        .or_else(|| lt.instance_type.clone())
        .ok_or_else(|| {
            "neither the launch template nor the mixed instances policy names an instance type"
                .to_owned()
        })
}

/// How the group's machines are bought.
#[must_use]
pub fn capacity_type(config: &GroupConfig, lt: &LaunchTemplateInfo) -> CapacityType {
    config.settings.capacity_type.unwrap_or_else(|| {
        if config.capacity_reservation_id.is_some() {
            CapacityType::Reserved
        } else if lt.market_type.as_deref() == Some("spot") {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        }
    })
}

/// Checks that a reserved group's launch template can only land in its reservation.
///
/// # Errors
/// A message saying what the launch template must set.
pub fn check_reserved(
    lt: &LaunchTemplateInfo,
    reservation: &ReservationInfo,
) -> Result<(), String> {
    if lt.reservation_preference.as_deref() != Some("capacity-reservations-only")
        || lt.reservation_target.as_deref() != Some(reservation.id.as_str())
    {
        return Err(format!(
            "launch template must set CapacityReservationSpecification {{CapacityReservationPreference: capacity-reservations-only, CapacityReservationTarget.CapacityReservationId: {}}} so launches never fall back to on-demand",
            reservation.id
        ));
    }
    if reservation.capacity_block && lt.market_type.as_deref() != Some("capacity-block") {
        return Err(format!(
            "{} is a Capacity Block: the launch template must set InstanceMarketOptions.MarketType capacity-block",
            reservation.id
        ));
    }
    Ok(())
}

fn single<'a>(mut zones: impl Iterator<Item = &'a String>) -> Option<String> {
    let first = zones.next()?;
    zones.all(|z| z == first).then(|| first.clone())
}

/// Inputs of [`build`].
#[derive(Debug)]
pub struct Parts<'a> {
    /// The ASG.
    pub asg: &'a AsgInfo,
    /// Merged settings.
    pub config: GroupConfig,
    /// Launch template.
    pub launch_template: LaunchTemplateInfo,
    /// Shape of the instance type.
    pub shape: MachineShape,
    /// Subnets with zones.
    pub subnets: BTreeMap<String, String>,
    /// Reservation of a reserved group.
    pub reservation: Option<ReservationInfo>,
    /// Region.
    pub region: &'a str,
}

/// The group with its spec.
///
/// # Errors
/// A message naming what is wrong with the group.
pub fn build(parts: Parts<'_>) -> Result<Group, String> {
    let Parts {
        asg,
        config,
        launch_template,
        mut shape,
        subnets,
        reservation,
        region,
    } = parts;
    let capacity_type = capacity_type(&config, &launch_template);
    if capacity_type == CapacityType::Reserved {
        let Some(reservation) = &reservation else {
            return Err("reserved group without a capacity reservation".to_owned());
        };
        check_reserved(&launch_template, reservation)?;
    }
    shape.region = Some(region.to_owned()).filter(|r| !r.is_empty());
    shape.zone = match &reservation {
        Some(r) => Some(r.zone.clone()),
        None => single(subnets.values()).or_else(|| single(asg.zones.iter())),
    };
    shape.root_volume_gib = launch_template.root_volume_gib;
    let template = node_template(&shape, &config.settings.template).map_err(|e| e.to_string())?;
    let spec = config.settings.spec(CloudGroup {
        provider: "aws",
        provider_id: asg.name.clone(),
        min_size: asg.min_size,
        max_size: asg.max_size,
        capacity_type,
        reservation: reservation.as_ref().map(|r| Reservation {
            id: r.id.clone(),
            total: r.total,
            end_time: r
                .end
                .map(|t| Time(jiff::Timestamp::try_from(t).unwrap_or_default())),
        }),
        template,
    });
    spec.validate().map_err(|e| e.to_string())?;
    Ok(Group {
        asg: asg.clone(),
        instance_type: shape.instance_type.clone(),
        config,
        launch_template,
        subnets,
        reservation,
        spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_template_tags_become_labels_taints_and_resources() {
        let tags = BTreeMap::from([
            (
                format!("{NODE_TEMPLATE_TAG}label/nvidia.com/gpu.present"),
                "true".to_owned(),
            ),
            (
                format!("{NODE_TEMPLATE_TAG}taint/nvidia.com/gpu"),
                "present:NoSchedule".to_owned(),
            ),
            (
                format!("{NODE_TEMPLATE_TAG}resources/ephemeral-storage"),
                "100G".to_owned(),
            ),
            ("Name".to_owned(), "ignored".to_owned()),
        ]);
        let options = template_from_tags(&tags);
        assert_eq!(options.labels["nvidia.com/gpu.present"], "true");
        assert_eq!(options.taints[0].key, "nvidia.com/gpu");
        assert_eq!(options.taints[0].value.as_deref(), Some("present"));
        assert_eq!(options.taints[0].effect, "NoSchedule");
        assert_eq!(options.capacity["ephemeral-storage"].0, "100G");
        assert_eq!(options.labels.len(), 1);
    }

    #[test]
    fn a_tag_that_does_not_parse_leaves_the_group_out_with_the_tag_named() {
        let asg = |tags: &[(&str, &str)]| AsgInfo {
            name: "p5".into(),
            tags: tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..AsgInfo::default()
        };
        let ok = settings(&asg(&[(PRICE_TAG, "98.32")]), None).expect("a price");
        assert_eq!(ok.settings.price_per_hour, Some(98.32));
        let err = settings(&asg(&[(PRICE_TAG, "ninety")]), None).expect_err("not a number");
        assert!(err.contains(PRICE_TAG) && err.contains("ninety"), "{err}");
        let taint = format!("{NODE_TEMPLATE_TAG}taint/nvidia.com/gpu");
        let err = settings(&asg(&[(taint.as_str(), "present:NoScheduel")]), None)
            .expect_err("bad effect");
        assert!(
            err.contains("NoScheduel") && err.contains("nvidia.com/gpu"),
            "{err}"
        );
    }

    #[test]
    fn a_reserved_launch_template_must_not_fall_back() {
        let reservation = ReservationInfo {
            id: "cr-1".into(),
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            total: 4,
            available: 4,
            end: None,
            capacity_block: true,
            state: "active".into(),
        };
        let mut lt = LaunchTemplateInfo::default();
        assert!(check_reserved(&lt, &reservation).is_err());
        lt.reservation_preference = Some("capacity-reservations-only".into());
        lt.reservation_target = Some("cr-1".into());
        let err = check_reserved(&lt, &reservation).expect_err("market type missing");
        assert!(err.contains("capacity-block"), "{err}");
        lt.market_type = Some("capacity-block".into());
        assert!(check_reserved(&lt, &reservation).is_ok());
    }
}
