//! Reads every node group from Compute Engine: the MIGs (listed in the config and found by the
//! discovery specs), their instance templates, machine types and reservations, with one
//! aggregated list for MIGs and one each for reservations and future reservations per refresh.
//! A group that cannot be used is set aside with the reason; it never stops the others.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use dra_provider::ProviderError;

use crate::api::{FutureReservationInfo, Gce, MigInfo, ReservationInfo, Scope};
use crate::config::{Config, GroupConfig};
use crate::groups::{self, Group, GroupReservation, Parts, affinity_reservation, group_id};
use dra_provider_machines::GroupSettings;

/// Groups as one read found them.
type Groups = dra_provider::GroupCatalog<Group>;

fn parse_time(text: Option<&str>) -> Option<SystemTime> {
    text.and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(SystemTime::from)
}

/// The reservation named `name`: a current one, else the future reservation that will create
/// it (its window reported like a Capacity Block: the count it will hold, none free before it
/// starts, its end).
#[must_use]
pub fn find_reservation(
    name: &str,
    reservations: &[ReservationInfo],
    futures: &[FutureReservationInfo],
) -> Option<GroupReservation> {
    let future = futures
        .iter()
        .find(|f| f.reservation_name == name || f.name == name);
    if let Some(r) = reservations.iter().find(|r| r.name == name) {
        return Some(GroupReservation {
            name: r.name.clone(),
            zone: r.zone.clone(),
            total: r.count,
            in_use: r.in_use,
            start: future.and_then(|f| parse_time(f.start_time.as_deref())),
            end: parse_time(r.delete_at.as_deref())
                .or_else(|| future.and_then(|f| parse_time(f.end_time.as_deref()))),
            status: r.status.clone(),
        });
    }
    let f = future?;
    Some(GroupReservation {
        name: f.reservation_name.clone(),
        zone: f.zone.clone(),
        total: f.total_count,
        in_use: f.total_count,
        start: parse_time(f.start_time.as_deref()),
        end: parse_time(f.end_time.as_deref()),
        status: format!("FUTURE_{}", f.procurement_status),
    })
}

/// All groups, read now.
///
/// # Errors
/// Errors of the calls every group needs (listing MIGs and reservations); per-group problems end
/// up in [`Groups::bad`].
pub(crate) async fn read_groups(gce: &Gce, config: &Config) -> Result<Groups, ProviderError> {
    let migs = gce.list_migs().await?;
    let mut bad = BTreeMap::new();
    let mut chosen: Vec<(MigInfo, Scope, GroupConfig)> = Vec::new();
    for listed in &config.node_groups {
        match migs.iter().find(|m| {
            m.scope
                .as_ref()
                .is_some_and(|s| group_id(s, &m.name) == listed.mig)
        }) {
            Some(m) => chosen.push((
                m.clone(),
                m.scope.clone().unwrap_or(Scope::Zone(String::new())),
                listed.clone(),
            )),
            None => {
                bad.insert(
                    listed.mig.clone(),
                    "no managed instance group of that name in that zone or region".to_owned(),
                );
            }
        }
    }
    for spec in config.discovery_specs() {
        for m in &migs {
            let Some(scope) = &m.scope else { continue };
            let id = group_id(scope, &m.name);
            // cluster-autoscaler's `^<prefix>.+`; listed groups keep their own settings.
            if m.name.len() <= spec.name_prefix.len()
                || !m.name.starts_with(&spec.name_prefix)
                || config.group(&id).is_some()
                || chosen.iter().any(|(c, s, _)| group_id(s, &c.name) == id)
            {
                continue;
            }
            let settings = GroupConfig {
                mig: id,
                settings: GroupSettings {
                    min_size: Some(spec.min),
                    max_size: Some(spec.max),
                    ..GroupSettings::default()
                },
                ..GroupConfig::default()
            };
            chosen.push((m.clone(), scope.clone(), settings));
        }
    }

    let mut staged = Vec::new();
    let mut types: BTreeMap<(String, String), crate::api::MachineTypeInfo> = BTreeMap::new();
    for (mig, scope, settings) in chosen {
        let id = group_id(&scope, &mig.name);
        let template = match gce.template(&mig.template).await {
            Ok(t) => t,
            Err(err) => {
                bad.insert(id, format!("instance template {}: {err}", mig.template));
                continue;
            }
        };
        if config.node_groups.iter().all(|g| g.mig != id)
            && config
                .template_labels
                .iter()
                .any(|(k, v)| template.properties.labels.get(k) != Some(v))
        {
            continue;
        }
        let Some(machine_type) = template
            .properties
            .machine_type
            .as_deref()
            .map(|m| crate::api::last_segment(m).to_owned())
        else {
            bad.insert(
                id,
                format!("instance template {} names no machine type", template.name),
            );
            continue;
        };
        let Some(zone) = mig.zones.first().cloned() else {
            bad.insert(id, "the MIG has no zone".to_owned());
            continue;
        };
        let key = (zone.clone(), machine_type.clone());
        if !types.contains_key(&key) {
            match gce.machine_type(&zone, &machine_type).await {
                Ok(info) => {
                    types.insert(key.clone(), info);
                }
                Err(err) => {
                    bad.insert(id, format!("machine type {machine_type} in {zone}: {err}"));
                    continue;
                }
            }
        }
        staged.push((mig, scope, settings, template, key));
    }

    let wanted: BTreeSet<String> = staged
        .iter()
        .filter_map(|(_, _, s, t, _)| {
            s.reservation
                .clone()
                .or_else(|| affinity_reservation(&t.properties))
        })
        .collect();
    let (reservations, futures) = if wanted.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        (gce.reservations().await?, gce.future_reservations().await?)
    };

    let mut good = BTreeMap::new();
    for (mig, scope, settings, template, key) in staged {
        let id = group_id(&scope, &mig.name);
        let name = settings
            .reservation
            .clone()
            .or_else(|| affinity_reservation(&template.properties));
        let reservation = match &name {
            Some(n) => match find_reservation(n, &reservations, &futures) {
                Some(r) => Some(r),
                None => {
                    bad.insert(id, format!("reservation {n} not found by reservations.aggregatedList or futureReservations.aggregatedList"));
                    continue;
                }
            },
            None => None,
        };
        let Some(machine) = types.get(&key).cloned() else {
            continue;
        };
        match groups::build(Parts {
            mig,
            scope,
            config: settings,
            template,
            machine,
            reservation,
        }) {
            Ok(group) => {
                good.insert(id, group);
            }
            Err(reason) => {
                bad.insert(id, reason);
            }
        }
    }
    Ok(Groups::read_now(good, bad))
}
