//! `v1.Node` <-> Kubernetes protobuf bytes.
//!
//! Field numbers are those of k8s.io/api `core/v1/generated.proto` and k8s.io/apimachinery
//! `meta/v1/generated.proto`. Covered: `metadata` (name, generateName, namespace, selfLink, uid,
//! resourceVersion, generation, creationTimestamp, deletionTimestamp,
//! deletionGracePeriodSeconds, labels, annotations, finalizers), `spec` (podCIDR, externalID,
//! providerID, unschedulable, taints, podCIDRs), `status` (capacity, allocatable, phase,
//! conditions, addresses, daemonEndpoints, nodeInfo without swap). Other fields (owner
//! references, managed fields, images, volumes, config, features, ...) are skipped when
//! decoding and not written when encoding: a template node has none of them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::wire::{Reader, Value, put_bool, put_int, put_message, put_str};
use super::{NodeCodecError, unwrap_envelope};

/// Encodes a Node as Go's `(*v1.Node).Marshal()` would (no envelope).
///
/// Quantities are written as given; Go writes the canonical form (`1Gi`, not `1024Mi`), so
/// byte-identical output needs canonical quantities in the input.
#[must_use]
pub fn encode_node(node: &Node) -> Vec<u8> {
    let mut buf = Vec::new();
    put_message(&mut buf, 1, |b| encode_meta(b, &node.metadata));
    put_message(&mut buf, 2, |b| {
        encode_spec(b, node.spec.as_ref().unwrap_or(&NodeSpec::default()))
    });
    put_message(&mut buf, 3, |b| {
        encode_status(b, node.status.as_ref().unwrap_or(&NodeStatus::default()))
    });
    buf
}

pub(super) fn opt(value: Option<&String>) -> &str {
    value.map_or("", String::as_str)
}

pub(super) fn encode_time(buf: &mut Vec<u8>, field: u32, time: Option<&Time>) {
    // Go writes a non-pointer Time always, and a zero Time as an empty message.
    put_message(buf, field, |b| {
        if let Some(Time(ts)) = time {
            put_int(b, 1, ts.as_second());
            put_int(b, 2, i64::from(ts.subsec_nanosecond()));
        }
    });
}

pub(super) fn encode_string_map(
    buf: &mut Vec<u8>,
    field: u32,
    map: Option<&BTreeMap<String, String>>,
) {
    for (key, value) in map.into_iter().flatten() {
        put_message(buf, field, |b| {
            put_str(b, 1, key);
            put_str(b, 2, value);
        });
    }
}

fn encode_quantity_map(buf: &mut Vec<u8>, field: u32, map: Option<&BTreeMap<String, Quantity>>) {
    for (key, value) in map.into_iter().flatten() {
        put_message(buf, field, |b| {
            put_str(b, 1, key);
            put_message(b, 2, |q| put_str(q, 1, &value.0));
        });
    }
}

pub(super) fn encode_meta(buf: &mut Vec<u8>, meta: &ObjectMeta) {
    put_str(buf, 1, opt(meta.name.as_ref()));
    put_str(buf, 2, opt(meta.generate_name.as_ref()));
    put_str(buf, 3, opt(meta.namespace.as_ref()));
    put_str(buf, 4, opt(meta.self_link.as_ref()));
    put_str(buf, 5, opt(meta.uid.as_ref()));
    put_str(buf, 6, opt(meta.resource_version.as_ref()));
    put_int(buf, 7, meta.generation.unwrap_or(0));
    encode_time(buf, 8, meta.creation_timestamp.as_ref());
    if let Some(time) = &meta.deletion_timestamp {
        encode_time(buf, 9, Some(time));
    }
    if let Some(seconds) = meta.deletion_grace_period_seconds {
        put_int(buf, 10, seconds);
    }
    encode_string_map(buf, 11, meta.labels.as_ref());
    encode_string_map(buf, 12, meta.annotations.as_ref());
    for finalizer in meta.finalizers.iter().flatten() {
        put_str(buf, 14, finalizer);
    }
}

fn encode_spec(buf: &mut Vec<u8>, spec: &NodeSpec) {
    put_str(buf, 1, opt(spec.pod_cidr.as_ref()));
    put_str(buf, 2, opt(spec.external_id.as_ref()));
    put_str(buf, 3, opt(spec.provider_id.as_ref()));
    put_bool(buf, 4, spec.unschedulable.unwrap_or(false));
    for taint in spec.taints.iter().flatten() {
        put_message(buf, 5, |b| {
            put_str(b, 1, &taint.key);
            put_str(b, 2, opt(taint.value.as_ref()));
            put_str(b, 3, &taint.effect);
            if let Some(time) = &taint.time_added {
                encode_time(b, 4, Some(time));
            }
        });
    }
    for cidr in spec.pod_cidrs.iter().flatten() {
        put_str(buf, 7, cidr);
    }
}

fn encode_status(buf: &mut Vec<u8>, status: &NodeStatus) {
    encode_quantity_map(buf, 1, status.capacity.as_ref());
    encode_quantity_map(buf, 2, status.allocatable.as_ref());
    put_str(buf, 3, opt(status.phase.as_ref()));
    for condition in status.conditions.iter().flatten() {
        put_message(buf, 4, |b| {
            put_str(b, 1, &condition.type_);
            put_str(b, 2, &condition.status);
            encode_time(b, 3, condition.last_heartbeat_time.as_ref());
            encode_time(b, 4, condition.last_transition_time.as_ref());
            put_str(b, 5, opt(condition.reason.as_ref()));
            put_str(b, 6, opt(condition.message.as_ref()));
        });
    }
    for address in status.addresses.iter().flatten() {
        put_message(buf, 5, |b| {
            put_str(b, 1, &address.type_);
            put_str(b, 2, &address.address);
        });
    }
    let port = status
        .daemon_endpoints
        .as_ref()
        .and_then(|e| e.kubelet_endpoint.as_ref())
        .map_or(0, |e| e.port);
    put_message(buf, 6, |b| {
        put_message(b, 1, |e| put_int(e, 1, i64::from(port)))
    });
    let info = status.node_info.clone().unwrap_or_default();
    put_message(buf, 7, |b| {
        for (field, value) in [
            (1, &info.machine_id),
            (2, &info.system_uuid),
            (3, &info.boot_id),
            (4, &info.kernel_version),
            (5, &info.os_image),
            (6, &info.container_runtime_version),
            (7, &info.kubelet_version),
            (8, &info.kube_proxy_version),
            (9, &info.operating_system),
            (10, &info.architecture),
        ] {
            put_str(b, field, value);
        }
    });
}

/// Decodes a Node from Go `Marshal()` bytes, or from an API-server `k8s\0` envelope.
///
/// Empty strings become `None`, and spec/status parts that are all defaults are dropped, so the
/// result serializes to the same JSON the API server would return.
///
/// # Errors
/// [`NodeCodecError`] for malformed bytes or an envelope holding another kind.
pub fn decode_node(bytes: &[u8]) -> Result<Node, NodeCodecError> {
    let (raw, kind) = unwrap_envelope(bytes)?;
    if !kind.is_empty() && kind != "Node" {
        return Err(NodeCodecError::WrongKind { kind });
    }
    let mut node = Node::default();
    let mut reader = Reader::new(raw);
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => node.metadata = decode_meta(value.bytes("metadata")?)?,
            2 => {
                node.spec =
                    Some(decode_spec(value.bytes("spec")?)?).filter(|s| *s != NodeSpec::default())
            }
            3 => {
                node.status = Some(decode_status(value.bytes("status")?)?)
                    .filter(|s| *s != NodeStatus::default());
            }
            _ => {}
        }
    }
    Ok(node)
}

fn non_empty(value: &Value<'_>, what: &'static str) -> Result<Option<String>, NodeCodecError> {
    Ok(Some(value.string(what)?).filter(|s| !s.is_empty()))
}

fn decode_time(value: &Value<'_>, what: &'static str) -> Result<Option<Time>, NodeCodecError> {
    let mut reader = Reader::new(value.bytes(what)?);
    let (mut seconds, mut nanos, mut any) = (0i64, 0i32, false);
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => {
                seconds = value.varint(what)? as i64;
                any = true;
            }
            2 => {
                nanos = value.varint(what)? as i32;
                any = true;
            }
            _ => {}
        }
    }
    if !any {
        return Ok(None);
    }
    jiff::Timestamp::new(seconds, nanos)
        .map(|ts| Some(Time(ts)))
        .map_err(|_| NodeCodecError::Time { field: what })
}

fn decode_entry(
    value: &Value<'_>,
    what: &'static str,
) -> Result<(String, Vec<u8>), NodeCodecError> {
    let mut reader = Reader::new(value.bytes(what)?);
    let (mut key, mut val) = (String::new(), Vec::new());
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => key = value.string(what)?,
            2 => val = value.bytes(what)?.to_vec(),
            _ => {}
        }
    }
    Ok((key, val))
}

fn decode_string_entry(
    value: &Value<'_>,
    what: &'static str,
) -> Result<(String, String), NodeCodecError> {
    let (key, val) = decode_entry(value, what)?;
    Ok((
        key,
        String::from_utf8(val).map_err(|_| NodeCodecError::Utf8 { field: what })?,
    ))
}

fn decode_quantity_entry(
    value: &Value<'_>,
    what: &'static str,
) -> Result<(String, Quantity), NodeCodecError> {
    let (key, val) = decode_entry(value, what)?;
    let mut reader = Reader::new(&val);
    let mut quantity = String::new();
    while let Some((field, value)) = reader.next_field()? {
        if field == 1 {
            quantity = value.string(what)?;
        }
    }
    Ok((key, Quantity(quantity)))
}

fn decode_meta(bytes: &[u8]) -> Result<ObjectMeta, NodeCodecError> {
    let mut meta = ObjectMeta::default();
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => meta.name = non_empty(&value, "metadata.name")?,
            2 => meta.generate_name = non_empty(&value, "metadata.generateName")?,
            3 => meta.namespace = non_empty(&value, "metadata.namespace")?,
            4 => meta.self_link = non_empty(&value, "metadata.selfLink")?,
            5 => meta.uid = non_empty(&value, "metadata.uid")?,
            6 => meta.resource_version = non_empty(&value, "metadata.resourceVersion")?,
            7 => {
                meta.generation =
                    Some(value.varint("metadata.generation")? as i64).filter(|g| *g != 0)
            }
            8 => meta.creation_timestamp = decode_time(&value, "metadata.creationTimestamp")?,
            9 => meta.deletion_timestamp = decode_time(&value, "metadata.deletionTimestamp")?,
            10 => {
                meta.deletion_grace_period_seconds =
                    Some(value.varint("metadata.deletionGracePeriodSeconds")? as i64)
            }
            11 => {
                let (key, val) = decode_string_entry(&value, "metadata.labels")?;
                meta.labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, val);
            }
            12 => {
                let (key, val) = decode_string_entry(&value, "metadata.annotations")?;
                meta.annotations
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, val);
            }
            14 => meta
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(value.string("metadata.finalizers")?),
            _ => {}
        }
    }
    Ok(meta)
}

fn decode_spec(bytes: &[u8]) -> Result<NodeSpec, NodeCodecError> {
    let mut spec = NodeSpec::default();
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => spec.pod_cidr = non_empty(&value, "spec.podCIDR")?,
            2 => spec.external_id = non_empty(&value, "spec.externalID")?,
            3 => spec.provider_id = non_empty(&value, "spec.providerID")?,
            4 => spec.unschedulable = Some(value.varint("spec.unschedulable")? != 0).filter(|u| *u),
            5 => spec
                .taints
                .get_or_insert_with(Vec::new)
                .push(decode_taint(value.bytes("spec.taints")?)?),
            7 => spec
                .pod_cidrs
                .get_or_insert_with(Vec::new)
                .push(value.string("spec.podCIDRs")?),
            _ => {}
        }
    }
    Ok(spec)
}

fn decode_taint(bytes: &[u8]) -> Result<Taint, NodeCodecError> {
    let mut taint = Taint::default();
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => taint.key = value.string("spec.taints.key")?,
            2 => taint.value = non_empty(&value, "spec.taints.value")?,
            3 => taint.effect = value.string("spec.taints.effect")?,
            4 => taint.time_added = decode_time(&value, "spec.taints.timeAdded")?,
            _ => {}
        }
    }
    Ok(taint)
}

fn decode_status(bytes: &[u8]) -> Result<NodeStatus, NodeCodecError> {
    let mut status = NodeStatus::default();
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => {
                let (key, quantity) = decode_quantity_entry(&value, "status.capacity")?;
                status
                    .capacity
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, quantity);
            }
            2 => {
                let (key, quantity) = decode_quantity_entry(&value, "status.allocatable")?;
                status
                    .allocatable
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, quantity);
            }
            3 => status.phase = non_empty(&value, "status.phase")?,
            4 => status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(decode_condition(value.bytes("status.conditions")?)?),
            5 => {
                let mut address = NodeAddress::default();
                let mut inner = Reader::new(value.bytes("status.addresses")?);
                while let Some((field, value)) = inner.next_field()? {
                    match field {
                        1 => address.type_ = value.string("status.addresses.type")?,
                        2 => address.address = value.string("status.addresses.address")?,
                        _ => {}
                    }
                }
                status.addresses.get_or_insert_with(Vec::new).push(address);
            }
            6 => {
                status.daemon_endpoints =
                    decode_daemon_endpoints(value.bytes("status.daemonEndpoints")?)?
            }
            7 => status.node_info = decode_node_info(value.bytes("status.nodeInfo")?)?,
            _ => {}
        }
    }
    Ok(status)
}

fn decode_condition(bytes: &[u8]) -> Result<NodeCondition, NodeCodecError> {
    let mut condition = NodeCondition::default();
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => condition.type_ = value.string("status.conditions.type")?,
            2 => condition.status = value.string("status.conditions.status")?,
            3 => {
                condition.last_heartbeat_time =
                    decode_time(&value, "status.conditions.lastHeartbeatTime")?
            }
            4 => {
                condition.last_transition_time =
                    decode_time(&value, "status.conditions.lastTransitionTime")?
            }
            5 => condition.reason = non_empty(&value, "status.conditions.reason")?,
            6 => condition.message = non_empty(&value, "status.conditions.message")?,
            _ => {}
        }
    }
    Ok(condition)
}

fn decode_daemon_endpoints(bytes: &[u8]) -> Result<Option<NodeDaemonEndpoints>, NodeCodecError> {
    let mut port = 0i32;
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        if field == 1 {
            let mut inner = Reader::new(value.bytes("status.daemonEndpoints.kubeletEndpoint")?);
            while let Some((field, value)) = inner.next_field()? {
                if field == 1 {
                    port = value.varint("status.daemonEndpoints.kubeletEndpoint.Port")? as i32;
                }
            }
        }
    }
    // Go always writes the endpoint; port 0 means "not set".
    Ok((port != 0).then_some(NodeDaemonEndpoints {
        kubelet_endpoint: Some(DaemonEndpoint { port }),
    }))
}

fn decode_node_info(bytes: &[u8]) -> Result<Option<NodeSystemInfo>, NodeCodecError> {
    let mut info = NodeSystemInfo::default();
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        let slot = match field {
            1 => &mut info.machine_id,
            2 => &mut info.system_uuid,
            3 => &mut info.boot_id,
            4 => &mut info.kernel_version,
            5 => &mut info.os_image,
            6 => &mut info.container_runtime_version,
            7 => &mut info.kubelet_version,
            8 => &mut info.kube_proxy_version,
            9 => &mut info.operating_system,
            10 => &mut info.architecture,
            _ => continue,
        };
        *slot = value.string("status.nodeInfo")?;
    }
    Ok(Some(info).filter(|i| *i != NodeSystemInfo::default()))
}
