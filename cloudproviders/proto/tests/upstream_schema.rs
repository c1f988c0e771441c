//! Our `externalgrpc.proto` against upstream's (`upstream/externalgrpc.proto`, vendored
//! verbatim): every upstream service method and field is ours with the same number, name and
//! type; every field of ours upstream lacks is a `legacy*` field on a number upstream does not
//! use, or a field of an open upstream pull request (README: "The legacy fields: risk and
//! plan").

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};

/// Fields we carry ahead of upstream: (message, field, number) of open pull requests
/// kubernetes/autoscaler#10303 and #10266.
const AHEAD: [(&str, &str, i32); 3] = [
    ("NodeGroupTemplateNodeInfoResponse", "resourceSliceBytes", 3),
    ("NodeGroupAutoscalingOptions", "maxNodeStartupDuration", 11),
    (
        "NodeGroupAutoscalingOptions",
        "allowNonAtomicScaleUpToMax",
        12,
    ),
];

fn compile(dir: &str) -> FileDescriptorProto {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let set = protox::compile(["externalgrpc.proto"], [root]).unwrap();
    set.file
        .into_iter()
        .find(|f| f.name() == "externalgrpc.proto")
        .unwrap()
}

fn messages(file: &FileDescriptorProto) -> BTreeMap<String, &DescriptorProto> {
    file.message_type
        .iter()
        .map(|m| (m.name().to_owned(), m))
        .collect()
}

/// What must agree for two peers to read a field the same way.
fn shape(field: &FieldDescriptorProto) -> (String, i32, i32, i32, String) {
    (
        field.name().to_owned(),
        field.number(),
        field.r#type() as i32,
        field.label() as i32,
        field.type_name().to_owned(),
    )
}

#[test]
fn our_proto_is_upstreams_plus_legacy_and_pending_fields() {
    let ours = compile("proto");
    let upstream = compile("upstream");
    assert_eq!(ours.package(), upstream.package());

    let our_service = &ours.service[0];
    let upstream_service = &upstream.service[0];
    assert_eq!(our_service.name(), upstream_service.name());
    for method in &upstream_service.method {
        let same = our_service
            .method
            .iter()
            .find(|m| m.name() == method.name())
            .unwrap_or_else(|| panic!("rpc {} missing", method.name()));
        assert_eq!(
            (same.input_type(), same.output_type()),
            (method.input_type(), method.output_type()),
            "rpc {}",
            method.name()
        );
    }

    let our_messages = messages(&ours);
    let upstream_messages = messages(&upstream);
    for (name, theirs) in &upstream_messages {
        let mine = our_messages
            .get(name)
            .unwrap_or_else(|| panic!("message {name} missing"));
        for field in &theirs.field {
            let same = mine
                .field
                .iter()
                .find(|f| f.number() == field.number())
                .unwrap_or_else(|| panic!("{name}.{} missing", field.name()));
            assert_eq!(shape(same), shape(field), "{name}.{}", field.name());
        }
        for field in &mine.field {
            if theirs.field.iter().any(|f| f.number() == field.number()) {
                continue;
            }
            let ahead = AHEAD.contains(&(name.as_str(), field.name(), field.number()));
            assert!(
                ahead || field.name().starts_with("legacy"),
                "{name}.{} ({}) is neither upstream's, a legacy field nor a pending one",
                field.name(),
                field.number()
            );
        }
        // Nested types (InstanceStatus.InstanceState) must agree too.
        for (theirs, mine) in theirs.enum_type.iter().zip(&mine.enum_type) {
            assert_eq!(theirs, mine, "{name} enum");
        }
    }
    // Our extra messages are the legacy wire types.
    for name in our_messages.keys() {
        assert!(
            upstream_messages.contains_key(name) || name.starts_with("Legacy"),
            "message {name} is not upstream's"
        );
    }
}
