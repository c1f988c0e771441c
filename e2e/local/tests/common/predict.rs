//! The real scheduler's device allocations against `dra-autoscaler simulate`'s, on a dump of
//! the same cluster (`kubectl get … -o json`) with every binding undone: each pod's node and
//! its claims' allocations removed, as they were just before the scheduler bound the pods.
//! Each pod is pinned to the node the scheduler chose (a required node affinity on
//! `metadata.name`), because which of several feasible nodes the scheduler picks is its
//! scoring's choice, which simulate does not claim to make; the devices chosen on that node
//! are the allocator's, and those must be the same.

#![allow(dead_code)] // each test file uses a different part
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use dra_local_stack::RealCluster;
use serde_json::{Value, json};

/// One allocated device: `driver/pool/device`.
pub type DeviceName = String;

/// Per pod (`namespace/name`): its node and the devices of all its claims.
pub type Placements = BTreeMap<String, (String, BTreeSet<DeviceName>)>;

/// The kinds `simulate` reads, as `kubectl get` names them.
pub const DUMP_KINDS: &str = "nodes,pods,namespaces,deviceclasses,resourceslices,resourceclaims,\
resourceclaimtemplates,devicetaintrules,nodegroups.dra-autoscaler.io,podgroups.scheduling.k8s.io";

fn device_name(result: &Value) -> DeviceName {
    let field = |k: &str| result.get(k).and_then(Value::as_str).unwrap_or_default();
    format!("{}/{}/{}", field("driver"), field("pool"), field("device"))
}

/// The `dra-autoscaler` binary: `$DRA_AUTOSCALER_BIN`, or the one cargo built beside this test
/// (tests run from `target/<profile>/deps/`).
pub fn dra_autoscaler_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("DRA_AUTOSCALER_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("dra-autoscaler");
    assert!(
        bin.exists(),
        "{} not built: run `cargo build -p dra-autoscaler` (e2e/cluster/test.sh does)",
        bin.display()
    );
    bin
}

/// What the real scheduler did: each bound pod's node and its claims' allocated devices.
pub fn real_placements(dump: &Value) -> Placements {
    let items = dump["items"].as_array().unwrap();
    let claims: BTreeMap<String, &Value> = items
        .iter()
        .filter(|o| o["kind"] == "ResourceClaim")
        .map(|o| {
            (
                format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                ),
                o,
            )
        })
        .collect();
    let mut placements = Placements::new();
    for pod in items.iter().filter(|o| o["kind"] == "Pod") {
        let Some(node) = pod["spec"]["nodeName"].as_str() else {
            continue;
        };
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = format!("{namespace}/{}", pod["metadata"]["name"].as_str().unwrap());
        let mut devices = BTreeSet::new();
        for status in pod["status"]["resourceClaimStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(claim) = status["resourceClaimName"].as_str() else {
                continue;
            };
            let claim = claims
                .get(&format!("{namespace}/{claim}"))
                .unwrap_or_else(|| panic!("{name}'s claim {claim} is not in the dump"));
            for result in claim["status"]["allocation"]["devices"]["results"]
                .as_array()
                .into_iter()
                .flatten()
            {
                devices.insert(device_name(result));
            }
        }
        placements.insert(name, (node.to_owned(), devices));
    }
    placements
}

/// The dump as it was just before binding, each pod pinned to its node (see the module
/// documentation).
pub fn unbound(dump: &Value, placements: &Placements) -> Value {
    let mut dump = dump.clone();
    for object in dump["items"].as_array_mut().unwrap() {
        if object["kind"] == "Pod" {
            let name = format!(
                "{}/{}",
                object["metadata"]["namespace"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default()
            );
            let Some((node, _)) = placements.get(&name) else {
                continue;
            };
            let spec = object["spec"].as_object_mut().unwrap();
            spec.remove("nodeName");
            let pin = json!({"key": "metadata.name", "operator": "In", "values": [node]});
            let terms = &mut spec.entry("affinity").or_insert_with(|| json!({}))["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"];
            if terms.as_array().is_none_or(Vec::is_empty) {
                *terms = json!([{"matchFields": [pin]}]);
            } else {
                for term in terms.as_array_mut().unwrap() {
                    let fields = term["matchFields"].take();
                    let mut fields = fields.as_array().cloned().unwrap_or_default();
                    fields.push(pin.clone());
                    term["matchFields"] = Value::Array(fields);
                }
            }
            let claims = object["status"]["resourceClaimStatuses"].clone();
            object["status"] = json!({"phase": "Pending"});
            if !claims.is_null() {
                object["status"]["resourceClaimStatuses"] = claims;
            }
        } else if object["kind"] == "ResourceClaim" {
            object.as_object_mut().unwrap().remove("status");
        }
    }
    dump
}

/// `dra-autoscaler simulate -o json` on `dump`: each placed pod's node and devices.
pub fn simulate(dump: &Value) -> (Placements, Value) {
    let dir = std::env::temp_dir().join(format!("dra-e2e-simulate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("unbound.json");
    std::fs::write(&path, serde_json::to_vec_pretty(dump).unwrap()).unwrap();
    let output = Command::new(dra_autoscaler_bin())
        .args(["simulate", "-o", "json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "simulate failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut placements = Placements::new();
    for pod in report["pods"].as_array().into_iter().flatten() {
        let Some(node) = pod["node"].as_str() else {
            continue;
        };
        let devices = pod["allocations"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|a| a["results"].as_array().cloned().unwrap_or_default())
            .map(|r| device_name(&r))
            .collect();
        placements.insert(
            pod["pod"].as_str().unwrap().to_owned(),
            (node.to_owned(), devices),
        );
    }
    (placements, report)
}

/// Per node, the sets of devices its pods hold (one set per pod), sorted: equal for two
/// placements that differ only in which of two identical pods got which devices.
fn partition(placements: &Placements) -> BTreeMap<String, Vec<BTreeSet<DeviceName>>> {
    let mut per_node: BTreeMap<String, Vec<BTreeSet<DeviceName>>> = BTreeMap::new();
    for (node, devices) in placements.values() {
        per_node
            .entry(node.clone())
            .or_default()
            .push(devices.clone());
    }
    for sets in per_node.values_mut() {
        sets.sort();
    }
    per_node
}

/// Dumps the cluster, undoes the bindings of the pods whose name starts with `prefix`,
/// simulates, and asserts that the devices simulate allocates on each pod's node are the ones
/// the real scheduler allocated (the same sets on every node; which of two identical pods
/// holds which set may differ, as they may be placed in either order). Prints both sides.
/// Returns how many pods got exactly the same devices.
pub fn assert_devices_match_simulate(real: &RealCluster, namespace: &str, prefix: &str) -> usize {
    assert_devices_match_simulate_as(real, namespace, prefix, |device| device.to_owned())
}

/// [`assert_devices_match_simulate`] up to which of a node's identical GPUs a pod got: a
/// device `…/gpu-1-partition-0` compares as `…/gpu-N-partition-0`. When pods of different
/// shapes share a node (quarters and a whole GPU), the GPU each takes depends on the order
/// the scheduler took them in (the first of them takes `gpu-0`), which the nodes' arrival
/// decides and simulate cannot know; which devices go together on one GPU still compares.
pub fn assert_devices_match_simulate_any_gpu(
    real: &RealCluster,
    namespace: &str,
    prefix: &str,
) -> usize {
    assert_devices_match_simulate_as(real, namespace, prefix, any_gpu)
}

/// `driver/pool/gpu-<n>-rest` as `driver/pool/gpu-N-rest`.
fn any_gpu(device: &str) -> DeviceName {
    let (path, name) = device.rsplit_once('/').unwrap_or(("", device));
    let name = match name
        .strip_prefix("gpu-")
        .and_then(|rest| rest.split_once('-'))
    {
        Some((index, rest)) if index.chars().all(|c| c.is_ascii_digit()) => {
            format!("gpu-N-{rest}")
        }
        _ => name.to_owned(),
    };
    format!("{path}/{name}")
}

fn assert_devices_match_simulate_as(
    real: &RealCluster,
    namespace: &str,
    prefix: &str,
    canonical: fn(&str) -> DeviceName,
) -> usize {
    let dump: Value = serde_json::from_str(
        &real
            .kubectl(&["get", DUMP_KINDS, "-A", "-o", "json"])
            .unwrap(),
    )
    .unwrap();
    let mut placements = real_placements(&dump);
    placements.retain(|pod, _| {
        pod.strip_prefix(&format!("{namespace}/"))
            .is_some_and(|name| name.starts_with(prefix))
    });
    assert!(!placements.is_empty(), "no bound pod {namespace}/{prefix}*");
    let (predicted, report) = simulate(&unbound(&dump, &placements));
    let predicted: Placements = predicted
        .into_iter()
        .filter(|(pod, _)| placements.contains_key(pod))
        .collect();
    println!("real scheduler: {placements:#?}");
    println!("simulate:       {predicted:#?}");
    assert_eq!(
        predicted.keys().collect::<Vec<_>>(),
        placements.keys().collect::<Vec<_>>(),
        "simulate placed other pods than the scheduler bound; its report: {report:#}"
    );
    for (pod, (node, _)) in &predicted {
        assert_eq!(
            &placements[pod].0, node,
            "{pod}: simulate chose another node"
        );
    }
    let as_compared = |placements: &Placements| -> Placements {
        placements
            .iter()
            .map(|(pod, (node, devices))| {
                let devices = devices.iter().map(|d| canonical(d)).collect();
                (pod.clone(), (node.clone(), devices))
            })
            .collect()
    };
    assert_eq!(
        partition(&as_compared(&predicted)),
        partition(&as_compared(&placements)),
        "per node, the devices simulate allocates differ from the real scheduler's"
    );
    placements
        .iter()
        .filter(|(pod, placed)| predicted.get(*pod) == Some(placed))
        .count()
}

#[test]
fn any_gpu_drops_the_index_of_the_gpu_only() {
    assert_eq!(
        any_gpu("gpu.example.com/partitionable-gpu-1/gpu-1-partition-3"),
        "gpu.example.com/partitionable-gpu-1/gpu-N-partition-3"
    );
    assert_eq!(any_gpu("d/p/gpu-0-full"), "d/p/gpu-N-full");
    assert_eq!(any_gpu("d/p/nic-0"), "d/p/nic-0");
    assert_eq!(any_gpu("d/p/gpu-a-full"), "d/p/gpu-a-full");
}
