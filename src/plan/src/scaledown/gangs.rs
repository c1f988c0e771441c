//! Running gangs: moving one member of a gang kills the job, and restarting the whole gang
//! loses its progress, so a node hosting a member is kept — unless the gang opts in to being
//! moved whole, with annotation `dra-autoscaler.io/gang-disruption: whole` on its gang object
//! (for a Kueue pod group, which has none, on a member pod) or, for an upstream
//! `scheduling.k8s.io` PodGroup, its own disruption mode saying its pods are disrupted only
//! together (`PodGroup` in 1.36, `all` from 1.37). Its nodes may then go only if every member fits elsewhere at once.
//!
//! Membership is the planner's gang detection ([`crate::gang::detect_gangs`]) run over bound
//! pods, so every gang API the planner knows is protected.

use std::collections::BTreeMap;

use dra_sim::FeatureGates;
use dra_sim::objects::ExtraObject;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::keys::{GANG_DISRUPTION, GANG_DISRUPTION_WHOLE};
use crate::gang::{GangApi, GangRef, detect_gangs};

/// A gang with members bound to nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningGang {
    /// `namespace/name` of the gang.
    pub name: String,
    /// Bound members (pod indices).
    pub members: Vec<usize>,
    /// Whether it may be moved whole.
    pub whole: bool,
    /// A topology key all members must share a value of, if any.
    pub topology_key: Option<String>,
}

/// Every running gang, and for each bound member the gang's index.
#[derive(Debug, Clone, Default)]
pub struct RunningGangs {
    /// The gangs.
    pub gangs: Vec<RunningGang>,
    /// Pod index -> gang index.
    pub of_pod: BTreeMap<usize, usize>,
}

fn annotated_whole(value: &Value) -> bool {
    value
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(GANG_DISRUPTION))
        .and_then(Value::as_str)
        == Some(GANG_DISRUPTION_WHOLE)
}

fn key_of(value: &Value) -> (String, String) {
    let get = |k: &str| {
        value
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let namespace = get("namespace");
    (
        if namespace.is_empty() {
            "default".into()
        } else {
            namespace
        },
        get("name"),
    )
}

/// Whether an upstream `scheduling.k8s.io` PodGroup says its pods are disrupted only
/// together: `spec.disruptionMode: PodGroup` in 1.36 (`v1alpha2`, default `Pod`), or
/// `spec.disruptionMode: {all: {}}` from 1.37 (`v1alpha3`, default `single`).
fn disrupted_together(pod_group: &Value) -> bool {
    match pod_group.pointer("/spec/disruptionMode") {
        Some(Value::String(mode)) => mode == "PodGroup",
        Some(mode) => mode.get("all").is_some(),
        None => false,
    }
}

/// The gang object behind a gang of `api`, among `extra`.
fn gang_object<'a>(extra: &'a [ExtraObject], api: GangApi, gang: &GangRef) -> Option<&'a Value> {
    let (groups, kind): (&[&str], &str) = match api {
        GangApi::PodGroup => (&["scheduling.k8s.io"], "PodGroup"),
        GangApi::Coscheduling => (
            &["scheduling.x-k8s.io", "scheduling.sigs.k8s.io"],
            "PodGroup",
        ),
        GangApi::Volcano => (&["scheduling.volcano.sh"], "PodGroup"),
        // A 1.35 pod group lives in its Workload.
        GangApi::Workload => (&["scheduling.k8s.io"], "Workload"),
        // Stand-ins are never bound pods: they have no gang object here.
        GangApi::Kueue
        | GangApi::Single
        | GangApi::ProvisioningRequest
        | GangApi::CapacityBuffer => return None,
    };
    let wanted = (gang.object.namespace.as_str(), gang.object.name.as_str());
    extra
        .iter()
        .filter(|o| o.kind == kind)
        .filter(|o| {
            let group = dra_sim::api_version::ApiGroupVersion::parse(&o.api_version).group();
            groups.contains(&group)
        })
        .map(|o| &o.value)
        .find(|v| {
            let (ns, n) = key_of(v);
            (ns.as_str(), n.as_str()) == wanted
        })
}

/// Finds the gangs of the bound pods `bound` (indices into `pods`).
#[must_use]
pub fn running_gangs(
    pods: &[Pod],
    bound: &[usize],
    extra: &[ExtraObject],
    workload_refs: &BTreeMap<(String, String), Value>,
    gates: &FeatureGates,
) -> RunningGangs {
    let mut out = RunningGangs::default();
    for gang in detect_gangs(pods, bound, extra, workload_refs, gates) {
        if gang.api == GangApi::Single {
            continue;
        }
        let whole = match gang.api {
            GangApi::Kueue => gang.pending.iter().any(|&i| {
                pods[i]
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(GANG_DISRUPTION))
                    .is_some_and(|v| v == GANG_DISRUPTION_WHOLE)
            }),
            api => gang_object(extra, api, &gang.name).is_some_and(|object| {
                annotated_whole(object) || (api == GangApi::PodGroup && disrupted_together(object))
            }),
        };
        let index = out.gangs.len();
        for &member in &gang.pending {
            out.of_pod.insert(member, index);
        }
        out.gangs.push(RunningGang {
            name: gang.name.to_string(),
            members: gang.pending,
            whole,
            topology_key: gang.topology_key,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dra_sim::objects::Origin;

    fn member(name: &str, group: &str, annotations: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ml",
                "labels": {crate::gang::COSCHEDULING_LABEL: group},
                "annotations": annotations},
            "spec": {"nodeName": "node-a", "containers": []},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    fn pod_group(name: &str, annotations: serde_json::Value) -> ExtraObject {
        ExtraObject {
            api_version: "scheduling.x-k8s.io/v1alpha1".into(),
            kind: "PodGroup".into(),
            origin: Origin::default(),
            value: serde_json::json!({
                "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
                "spec": {"minMember": 2}
            }),
        }
    }

    #[test]
    fn bound_members_form_gangs_and_the_annotation_opts_in() {
        let pods = vec![
            member("a-0", "a", serde_json::json!({})),
            member("a-1", "a", serde_json::json!({})),
            member("b-0", "b", serde_json::json!({})),
            member("b-1", "b", serde_json::json!({})),
        ];
        let extra = vec![
            pod_group("a", serde_json::json!({})),
            pod_group(
                "b",
                serde_json::json!({GANG_DISRUPTION: GANG_DISRUPTION_WHOLE}),
            ),
        ];
        let gangs = running_gangs(
            &pods,
            &[0, 1, 2, 3],
            &extra,
            &BTreeMap::new(),
            &FeatureGates::default(),
        );
        assert_eq!(gangs.gangs.len(), 2);
        assert_eq!(gangs.gangs[0].name, "ml/a");
        assert!(!gangs.gangs[0].whole);
        assert_eq!(gangs.gangs[1].members, vec![2, 3]);
        assert!(gangs.gangs[1].whole);
        assert_eq!(gangs.of_pod[&3], 1);
    }

    #[test]
    fn an_upstream_pod_group_disrupted_together_opts_in_in_both_api_versions() {
        let spec = |mode: serde_json::Value| serde_json::json!({"spec": {"disruptionMode": mode}});
        // 1.36 (v1alpha2): a string, "Pod" by default.
        assert!(disrupted_together(&spec(serde_json::json!("PodGroup"))));
        assert!(!disrupted_together(&spec(serde_json::json!("Pod"))));
        // 1.37 (v1alpha3): a one-of, `single` by default.
        assert!(disrupted_together(&spec(serde_json::json!({"all": {}}))));
        assert!(!disrupted_together(&spec(
            serde_json::json!({"single": {}})
        )));
        assert!(!disrupted_together(&serde_json::json!({"spec": {}})));
    }
}
