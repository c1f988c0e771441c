//! Table columns of the built-in kinds, as upstream's `pkg/printers/internalversion` prints
//! them (the server always sends the wide columns; kubectl hides priority 1 unless `-o wide`).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::cells::{Column, age, created, items, name, or_none, s};
use crate::convert;
use crate::resource::Conversion;

const AGE: Column = Column::new(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

/// Columns and cells of `object`, for the built-in kinds that have a printer.
pub fn print(
    group: &str,
    kind: &str,
    object: &Value,
    now: Timestamp,
) -> Option<(Vec<Column>, Vec<Value>)> {
    let printed = match (group, kind) {
        ("", "Pod") => pod(object, now),
        ("", "Node") => node(object, now),
        ("", "Event") => event(object, now),
        ("events.k8s.io", "Event") => event(
            &convert::to_stored(Conversion::EventsV1, object.clone()),
            now,
        ),
        ("", "Namespace") => (
            vec![
                Column::name(),
                Column::new("Status", "string", "The status of the namespace"),
                AGE,
            ],
            vec![
                name(object),
                Value::from(s(object, "/status/phase")),
                created(object, now),
            ],
        ),
        ("", "ConfigMap") => (
            vec![
                Column::name(),
                Column::new("Data", "string", "Data contains the configuration data."),
                AGE,
            ],
            vec![
                name(object),
                Value::from(
                    object
                        .get("data")
                        .and_then(Value::as_object)
                        .map_or(0, |d| d.len())
                        + object
                            .get("binaryData")
                            .and_then(Value::as_object)
                            .map_or(0, |d| d.len()),
                ),
                created(object, now),
            ],
        ),
        ("coordination.k8s.io", "Lease") => (
            vec![
                Column::name(),
                Column::new(
                    "Holder",
                    "string",
                    "HolderIdentity contains the identity of the holder of a current lease.",
                ),
                AGE,
            ],
            vec![
                name(object),
                Value::from(s(object, "/spec/holderIdentity")),
                created(object, now),
            ],
        ),
        ("scheduling.k8s.io", "PriorityClass") => (
            vec![
                Column::name(),
                Column::new("Value", "integer", "The value of this priority class."),
                Column::new(
                    "Global-Default",
                    "boolean",
                    "globalDefault specifies whether this PriorityClass should be considered as the default priority.",
                ),
                AGE,
                Column::new(
                    "Preemption-Policy",
                    "string",
                    "PreemptionPolicy is the Policy for preempting pods with lower priority.",
                ),
            ],
            vec![
                name(object),
                object.get("value").cloned().unwrap_or(Value::from(0)),
                Value::from(
                    object
                        .get("globalDefault")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                ),
                created(object, now),
                Value::from(
                    object
                        .get("preemptionPolicy")
                        .and_then(Value::as_str)
                        .unwrap_or("PreemptLowerPriority"),
                ),
            ],
        ),
        ("resource.k8s.io", "ResourceSlice") => (
            vec![
                Column::name(),
                Column::new(
                    "Node",
                    "string",
                    "NodeName identifies the node which provides the resources in this pool.",
                ),
                Column::new(
                    "Driver",
                    "string",
                    "Driver identifies the DRA driver providing the capacity information.",
                ),
                Column::new(
                    "Pool",
                    "string",
                    "Pool describes the pool that this ResourceSlice belongs to.",
                ),
                AGE,
            ],
            vec![
                name(object),
                or_none(s(object, "/spec/nodeName")),
                Value::from(s(object, "/spec/driver")),
                Value::from(s(object, "/spec/pool/name")),
                created(object, now),
            ],
        ),
        ("resource.k8s.io", "ResourceClaim") => (
            vec![
                Column::name(),
                Column::new(
                    "State",
                    "string",
                    "A summary of the current state (allocated, pending, reserved, etc.).",
                ),
                AGE,
            ],
            vec![
                name(object),
                Value::from(claim_state(object)),
                created(object, now),
            ],
        ),
        ("resource.k8s.io", "DeviceClass" | "ResourceClaimTemplate" | "DeviceTaintRule") => (
            vec![Column::name(), AGE],
            vec![name(object), created(object, now)],
        ),
        ("apps", "DaemonSet") => daemon_set(object, now),
        ("policy", "PodDisruptionBudget") => pdb(object, now),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            vec![
                Column::name(),
                Column::new(
                    "Created At",
                    "date",
                    "CreationTimestamp is a timestamp representing the server time when this object was created.",
                ),
            ],
            vec![
                name(object),
                object
                    .pointer("/metadata/creationTimestamp")
                    .cloned()
                    .unwrap_or(Value::Null),
            ],
        ),
        _ => return None,
    };
    Some(printed)
}

/// Upstream's `printPod`, without init containers' restart details.
fn pod(object: &Value, now: Timestamp) -> (Vec<Column>, Vec<Value>) {
    let columns = vec![
        Column::name(),
        Column::new("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
        Column::new("Status", "string", "The aggregate status of the containers in this pod."),
        Column::new("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
        AGE,
        Column::new("IP", "string", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.").wide(),
        Column::new("Node", "string", "NodeName is a request to schedule this pod onto a specific node.").wide(),
        Column::new("Nominated Node", "string", "nominatedNodeName is set when this pod preempts other pods on the node.").wide(),
        Column::new("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness.").wide(),
    ];
    let total = items(object, "/spec/containers").len();
    let mut reason = s(object, "/status/phase").to_owned();
    if !s(object, "/status/reason").is_empty() {
        reason = s(object, "/status/reason").to_owned();
    }
    for condition in items(object, "/status/conditions") {
        if condition["type"] == "PodScheduled" && condition["reason"] == "SchedulingGated" {
            reason = "SchedulingGated".into();
        }
    }
    let mut ready = 0;
    let mut restarts = 0;
    let mut running = false;
    for status in items(object, "/status/containerStatuses").iter().rev() {
        restarts += status
            .get("restartCount")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let waiting = s(status, "/state/waiting/reason");
        let terminated = status.pointer("/state/terminated");
        if !waiting.is_empty() {
            reason = waiting.to_owned();
        } else if let Some(terminated) = terminated {
            let why = s(terminated, "/reason");
            reason = if !why.is_empty() {
                why.to_owned()
            } else if let Some(signal) = terminated
                .get("signal")
                .and_then(Value::as_i64)
                .filter(|s| *s != 0)
            {
                format!("Signal:{signal}")
            } else {
                format!(
                    "ExitCode:{}",
                    terminated
                        .get("exitCode")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                )
            };
        } else if status.get("ready").and_then(Value::as_bool) == Some(true)
            && status.pointer("/state/running").is_some()
        {
            running = true;
            ready += 1;
        }
    }
    if reason == "Completed" && running {
        let pod_ready = items(object, "/status/conditions")
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        reason = if pod_ready { "Running" } else { "NotReady" }.into();
    }
    let terminal = matches!(s(object, "/status/phase"), "Succeeded" | "Failed");
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        if s(object, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if !terminal {
            reason = "Terminating".into();
        }
    }
    let ip = items(object, "/status/podIPs")
        .first()
        .and_then(|ip| ip.get("ip"))
        .and_then(Value::as_str)
        .or_else(|| object.pointer("/status/podIP").and_then(Value::as_str))
        .unwrap_or_default();
    let gates = items(object, "/spec/readinessGates");
    let gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let passed = gates
            .iter()
            .filter(|g| {
                items(object, "/status/conditions")
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{passed}/{}", gates.len())
    };
    let cells = vec![
        name(object),
        Value::from(format!("{ready}/{total}")),
        Value::from(reason),
        Value::from(restarts.to_string()),
        created(object, now),
        or_none(ip),
        or_none(s(object, "/spec/nodeName")),
        or_none(s(object, "/status/nominatedNodeName")),
        Value::from(gates),
    ];
    (columns, cells)
}

/// Upstream's `printNode`.
fn node(object: &Value, now: Timestamp) -> (Vec<Column>, Vec<Value>) {
    let columns = vec![
        Column::name(),
        Column::new("Status", "string", "The status of the node"),
        Column::new("Roles", "string", "The roles of the node"),
        AGE,
        Column::new("Version", "string", "Kubelet Version reported by the node."),
        Column::new("Internal-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if available.").wide(),
        Column::new("External-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if available.").wide(),
        Column::new("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).").wide(),
        Column::new("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).").wide(),
        Column::new("Container-Runtime", "string", "Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2).").wide(),
    ];
    let mut status: Vec<String> = items(object, "/status/conditions")
        .iter()
        .filter(|c| c["type"] == "Ready")
        .map(|c| {
            if c["status"] == "True" {
                "Ready".to_owned()
            } else {
                "NotReady".to_owned()
            }
        })
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if object
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        == Some(true)
    {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!role.is_empty()).then(|| role.to_owned())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().filter(|v| !v.is_empty()).map(str::to_owned)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let address = |kind: &str| {
        items(object, "/status/addresses")
            .iter()
            .find(|a| a["type"] == kind)
            .and_then(|a| a.get("address"))
            .and_then(Value::as_str)
            .unwrap_or("<none>")
            .to_owned()
    };
    let info = |field: &str| {
        let value = s(object, &format!("/status/nodeInfo/{field}"));
        if value.is_empty() {
            "<unknown>".to_owned()
        } else {
            value.to_owned()
        }
    };
    let cells = vec![
        name(object),
        Value::from(status.join(",")),
        or_none(&roles.join(",")),
        created(object, now),
        Value::from(s(object, "/status/nodeInfo/kubeletVersion")),
        Value::from(address("InternalIP")),
        Value::from(address("ExternalIP")),
        Value::from(info("osImage")),
        Value::from(info("kernelVersion")),
        Value::from(info("containerRuntimeVersion")),
    ];
    (columns, cells)
}

/// Upstream's `printEvent` (core v1 field names).
fn event(object: &Value, now: Timestamp) -> (Vec<Column>, Vec<Value>) {
    let columns = vec![
        Column::new(
            "Last Seen",
            "string",
            "The time at which the most recent occurrence of this event was recorded.",
        ),
        Column::new(
            "Type",
            "string",
            "Type of this event (Normal, Warning), new types could be added in the future",
        ),
        Column::new(
            "Reason",
            "string",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        Column::new("Object", "string", "The object that this event is about."),
        Column::new(
            "Subobject",
            "string",
            "If the reference is to an object part (e.g. a container), the path to it.",
        )
        .wide(),
        Column::new("Source", "string", "The component reporting this event.").wide(),
        Column::new(
            "Message",
            "string",
            "A human-readable description of the status of this operation.",
        ),
        Column::new(
            "First Seen",
            "string",
            "The time at which the event was first recorded.",
        )
        .wide(),
        Column::new(
            "Count",
            "integer",
            "The number of times this event has occurred.",
        )
        .wide(),
        Column {
            priority: 1,
            ..Column::name()
        },
    ];
    let time = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
    };
    let first = time("/firstTimestamp").or_else(|| time("/eventTime"));
    let first_seen = age(first, now);
    let mut last_seen =
        time("/lastTimestamp").map_or_else(|| first_seen.clone(), |t| age(Some(t), now));
    let mut count = object.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = object.get("series").filter(|s| s.is_object()) {
        last_seen = age(series.get("lastObservedTime").and_then(Value::as_str), now);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(object, "/involvedObject/kind").to_lowercase();
    let target = match s(object, "/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let source = {
        let component = s(object, "/source/component");
        let component = if component.is_empty() {
            s(object, "/reportingComponent")
        } else {
            component
        };
        let host = s(object, "/source/host");
        let host = if host.is_empty() {
            s(object, "/reportingInstance")
        } else {
            host
        };
        if host.is_empty() {
            component.to_owned()
        } else {
            format!("{component}, {host}")
        }
    };
    let cells = vec![
        Value::from(last_seen),
        Value::from(s(object, "/type")),
        Value::from(s(object, "/reason")),
        Value::from(target),
        Value::from(s(object, "/involvedObject/fieldPath")),
        Value::from(source),
        Value::from(s(object, "/message").trim()),
        Value::from(first_seen),
        Value::from(count),
        name(object),
    ];
    (columns, cells)
}

/// Upstream's `resourceClaimState`.
fn claim_state(object: &Value) -> String {
    let deleted = object.pointer("/metadata/deletionTimestamp").is_some();
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if object.pointer("/status/allocation").is_some() {
        states.push("allocated");
        if !items(object, "/status/reservedFor").is_empty() {
            states.push("reserved");
        } else if deleted {
            states.push("deallocating");
        }
    } else if !deleted {
        states.push("pending");
    }
    states.join(",")
}

fn daemon_set(object: &Value, now: Timestamp) -> (Vec<Column>, Vec<Value>) {
    let columns = vec![
        Column::name(),
        Column::new(
            "Desired",
            "integer",
            "The total number of nodes that should be running the daemon pod.",
        ),
        Column::new(
            "Current",
            "integer",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        Column::new(
            "Ready",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
        ),
        Column::new(
            "Up-to-date",
            "integer",
            "The total number of nodes that are running updated daemon pod",
        ),
        Column::new(
            "Available",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
        ),
        Column::new(
            "Node Selector",
            "string",
            "NodeSelector is a selector which must be true for the pod to fit on a node.",
        ),
        AGE,
    ];
    let n = |field: &str| {
        object
            .pointer(&format!("/status/{field}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let selector = object
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let cells = vec![
        name(object),
        json!(n("desiredNumberScheduled")),
        json!(n("currentNumberScheduled")),
        json!(n("numberReady")),
        json!(n("updatedNumberScheduled")),
        json!(n("numberAvailable")),
        or_none(&selector),
        created(object, now),
    ];
    (columns, cells)
}

fn pdb(object: &Value, now: Timestamp) -> (Vec<Column>, Vec<Value>) {
    let columns = vec![
        Column::name(),
        Column::new(
            "Min Available",
            "string",
            "The minimum number of pods that must be available simultaneously.",
        ),
        Column::new(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable simultaneously.",
        ),
        Column::new(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ];
    let either = |field: &str| match object.pointer(&format!("/spec/{field}")) {
        Some(Value::String(v)) => Value::from(v.clone()),
        Some(Value::Number(v)) => Value::from(v.to_string()),
        _ => Value::from("N/A"),
    };
    let cells = vec![
        name(object),
        either("minAvailable"),
        either("maxUnavailable"),
        json!(
            object
                .pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
        created(object, now),
    ];
    (columns, cells)
}

#[cfg(test)]
mod tests;
