//! Upstream-shaped bytes, written out by hand from the field facts in externalgrpc-protocol.md
//! and Go's gogo `Marshal()` rules (ascending field order, non-pointer fields always written,
//! sorted map keys), decode to the right values and re-encode to the same bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dra_provider::convert::{either_time, options_from_pb};
use dra_provider::k8s_proto::{NodeCodecError, decode_node, encode_node};
use dra_provider::pb::externalgrpc as ca;
use prost::Message;

/// `tag` byte, then a length-prefixed payload.
fn len(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![tag, u8::try_from(payload.len()).unwrap()];
    out.extend_from_slice(payload);
    out
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn s(tag: u8, value: &str) -> Vec<u8> {
    len(tag, value.as_bytes())
}

/// A v1.Node as Go marshals it: name "n1", labels {a: "1", b: ""}, providerID "fake://n1",
/// one NoSchedule taint "gpu", capacity {cpu: 4, pods: 110}.
fn go_node_bytes() -> Vec<u8> {
    let meta = cat(&[
        s(0x0a, "n1"),
        s(0x12, ""),
        s(0x1a, ""),
        s(0x22, ""),
        s(0x2a, ""),
        s(0x32, ""),
        vec![0x38, 0x00], // generation 0
        len(0x42, &[]),   // zero creationTimestamp
        len(0x5a, &cat(&[s(0x0a, "a"), s(0x12, "1")])),
        len(0x5a, &cat(&[s(0x0a, "b"), s(0x12, "")])),
    ]);
    let taint = cat(&[s(0x0a, "gpu"), s(0x12, ""), s(0x1a, "NoSchedule")]);
    let spec = cat(&[
        s(0x0a, ""),
        s(0x12, ""),
        s(0x1a, "fake://n1"),
        vec![0x20, 0x00],
        len(0x2a, &taint),
    ]);
    let node_info: Vec<u8> = (1..=10u8).flat_map(|field| s(field << 3 | 2, "")).collect();
    let status = cat(&[
        len(0x0a, &cat(&[s(0x0a, "cpu"), len(0x12, &s(0x0a, "4"))])),
        len(0x0a, &cat(&[s(0x0a, "pods"), len(0x12, &s(0x0a, "110"))])),
        s(0x1a, ""),                          // phase
        len(0x32, &len(0x0a, &[0x08, 0x00])), // daemonEndpoints.kubeletEndpoint.Port = 0
        len(0x3a, &node_info),
    ]);
    cat(&[len(0x0a, &meta), len(0x12, &spec), len(0x1a, &status)])
}

#[test]
fn go_shaped_node_bytes_decode_and_reencode_identically() {
    let bytes = go_node_bytes();
    let node = decode_node(&bytes).unwrap();
    assert_eq!(node.metadata.name.as_deref(), Some("n1"));
    let labels = node.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["a"], "1");
    assert_eq!(labels["b"], "", "empty label values survive");
    let spec = node.spec.as_ref().unwrap();
    assert_eq!(spec.provider_id.as_deref(), Some("fake://n1"));
    assert_eq!(spec.taints.as_ref().unwrap()[0].effect, "NoSchedule");
    let capacity = node.status.as_ref().unwrap().capacity.as_ref().unwrap();
    assert_eq!(capacity["pods"].0, "110");
    assert!(
        node.status.as_ref().unwrap().node_info.is_none(),
        "all-empty nodeInfo reads as absent"
    );
    assert_eq!(
        encode_node(&node),
        bytes,
        "re-encoding gives Go's bytes back"
    );
}

#[test]
fn enveloped_node_is_unwrapped_and_other_kinds_refused() {
    let raw = go_node_bytes();
    let envelope = |kind: &str| {
        let type_meta = cat(&[s(0x0a, "v1"), s(0x12, kind)]);
        let unknown = cat(&[
            len(0x0a, &type_meta),
            len_long(0x12, &raw),
            s(0x1a, ""),
            s(0x22, ""),
        ]);
        cat(&[b"k8s\x00".to_vec(), unknown])
    };
    assert_eq!(
        decode_node(&envelope("Node")).unwrap(),
        decode_node(&raw).unwrap()
    );
    assert_eq!(
        decode_node(&envelope("Pod")).unwrap_err(),
        NodeCodecError::WrongKind { kind: "Pod".into() }
    );
    assert_eq!(
        decode_node(&raw[..raw.len() - 3]).unwrap_err(),
        NodeCodecError::Truncated
    );
}

/// Length prefix as a varint, for payloads of 128 bytes or more.
fn len_long(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let mut n = payload.len();
    while n >= 0x80 {
        out.push(u8::try_from(n & 0x7f).unwrap() | 0x80);
        n >>= 7;
    }
    out.push(u8::try_from(n).unwrap());
    out.extend_from_slice(payload);
    out
}

#[test]
fn template_node_info_135_uses_field_2_and_134_field_1() {
    let node = go_node_bytes();
    // >= 1.35: nodeBytes = 2.
    let new = len_long(0x12, &node);
    let decoded = ca::NodeGroupTemplateNodeInfoResponse::decode(new.as_slice()).unwrap();
    assert_eq!(decoded.node_bytes, node);
    assert!(decoded.legacy_node_info.is_empty());
    assert_eq!(decoded.encode_to_vec(), new, "byte for byte");
    // <= 1.34: nodeInfo (embedded v1.Node message) = 1, same bytes on the wire.
    let old = len_long(0x0a, &node);
    let decoded = ca::NodeGroupTemplateNodeInfoResponse::decode(old.as_slice()).unwrap();
    assert!(decoded.node_bytes.is_empty());
    assert_eq!(
        decode_node(&decoded.legacy_node_info).unwrap(),
        decode_node(&node).unwrap()
    );
    assert_eq!(decoded.encode_to_vec(), old);
}

fn timestamp(tag: u8, seconds: u8, nanos: u8) -> Vec<u8> {
    len(tag, &[0x08, seconds, 0x10, nanos])
}

#[test]
fn pricing_node_price_times_135_fields_4_5_and_134_fields_2_3() {
    let node = cat(&[s(0x0a, "fake://n1"), s(0x12, "n1")]);
    let new = cat(&[
        len(0x0a, &node),
        timestamp(0x22, 100, 7),
        timestamp(0x2a, 120, 0),
    ]);
    let decoded = ca::PricingNodePriceRequest::decode(new.as_slice()).unwrap();
    assert_eq!(decoded.node.as_ref().unwrap().name, "n1");
    let start = either_time(
        decoded.start_timestamp.as_ref(),
        decoded.legacy_start_time.as_ref(),
    )
    .unwrap();
    assert_eq!(start, std::time::UNIX_EPOCH + Duration::new(100, 7));
    // prost omits nanos = 0 just as Go's protobuf-go does for proto3 Timestamp; compare the
    // re-encoding against the bytes a proto3 writer produces.
    let expected = cat(&[
        len(0x0a, &node),
        timestamp(0x22, 100, 7),
        len(0x2a, &[0x08, 120]),
    ]);
    assert_eq!(decoded.encode_to_vec(), expected);

    let old = cat(&[
        len(0x0a, &node),
        timestamp(0x12, 50, 1),
        timestamp(0x1a, 60, 2),
    ]);
    let decoded = ca::PricingNodePriceRequest::decode(old.as_slice()).unwrap();
    assert!(decoded.start_timestamp.is_none());
    let end = either_time(
        decoded.end_timestamp.as_ref(),
        decoded.legacy_end_time.as_ref(),
    )
    .unwrap();
    assert_eq!(end, std::time::UNIX_EPOCH + Duration::new(60, 2));
}

#[test]
fn pricing_pod_price_135_pod_bytes_4_and_134_pod_1() {
    let pod = cat(&[len(0x0a, &s(0x0a, "p1"))]);
    let new = cat(&[
        len(0x22, &pod),
        timestamp(0x2a, 1, 1),
        timestamp(0x32, 2, 2),
    ]);
    let decoded = ca::PricingPodPriceRequest::decode(new.as_slice()).unwrap();
    assert_eq!(decoded.pod_bytes, pod);
    assert_eq!(decoded.encode_to_vec(), new);
    let old = cat(&[
        len(0x0a, &pod),
        timestamp(0x12, 1, 1),
        timestamp(0x1a, 2, 2),
    ]);
    let decoded = ca::PricingPodPriceRequest::decode(old.as_slice()).unwrap();
    assert_eq!(decoded.legacy_pod, pod);
    assert_eq!(decoded.legacy_end_time.unwrap().seconds, 2);
}

#[test]
fn options_135_google_durations_and_134_meta_durations() {
    // >= 1.35: scaleDownUnneededDuration = 8 {seconds 600}, MaxNodeProvisionDuration = 10 {seconds 900}.
    let new = cat(&[
        vec![0x09],
        0.5f64.to_le_bytes().to_vec(), // scaleDownUtilizationThreshold = 1 (double)
        vec![0x30, 0x01],              // zeroOrMaxNodeScaling = 6
        len(0x42, &[0x08, 0xd8, 0x04]),
        len(0x52, &[0x08, 0x84, 0x07]),
    ]);
    let decoded = ca::NodeGroupAutoscalingOptions::decode(new.as_slice()).unwrap();
    assert_eq!(decoded.encode_to_vec(), new, "byte for byte");
    let options = options_from_pb(&decoded);
    assert!((options.scale_down_utilization_threshold - 0.5).abs() < f64::EPSILON);
    assert!(options.zero_or_max_node_scaling);
    assert_eq!(options.scale_down_unneeded, Some(Duration::from_secs(600)));
    assert_eq!(options.max_node_provision, Some(Duration::from_secs(900)));
    assert_eq!(options.scale_down_unready, None);

    // <= 1.34: scaleDownUnneededTime = 3 {duration = 1: int64 nanoseconds}; 600 s = 600e9 ns.
    let mut nanos = Vec::new();
    let mut n: u64 = 600_000_000_000;
    while n >= 0x80 {
        nanos.push(u8::try_from(n & 0x7f).unwrap() | 0x80);
        n >>= 7;
    }
    nanos.push(u8::try_from(n).unwrap());
    let old = len(0x1a, &cat(&[vec![0x08], nanos]));
    let options =
        options_from_pb(&ca::NodeGroupAutoscalingOptions::decode(old.as_slice()).unwrap());
    assert_eq!(options.scale_down_unneeded, Some(Duration::from_secs(600)));
}

#[test]
fn legacy_fields_are_only_written_when_asked() {
    use dra_provider::convert::options_to_pb;
    let options = dra_provider::AutoscalingOptions {
        scale_down_unneeded: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let plain = options_to_pb(&options, false).encode_to_vec();
    assert_eq!(
        plain,
        len(0x42, &[0x08, 0x01]),
        "only field 8 for >= 1.35 peers"
    );
    let both = options_to_pb(&options, true).encode_to_vec();
    let legacy = len(0x1a, &[0x08, 0x80, 0x94, 0xeb, 0xdc, 0x03]); // 1e9 ns
    assert_eq!(both, cat(&[legacy, len(0x42, &[0x08, 0x01])]));
}
