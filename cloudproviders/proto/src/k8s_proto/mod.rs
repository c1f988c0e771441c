//! Kubernetes protobuf bytes for `v1.Node` and `resource.k8s.io/v1` `ResourceSlice`, as
//! externalgrpc carries them (`nodeBytes`, `resourceSliceBytes`).
//!
//! k8s-openapi has no protobuf support, so this is a small hand-written codec for the Node fields
//! a template node uses (see [`node`] for the list) and an encoder for whole ResourceSlices
//! (`resource_slice`). The `k8s-pb` crate was considered and not taken: its 0.9 types predate
//! the 1.37 ResourceSlice fields and it would still need a field-by-field copy from
//! k8s-openapi's types. Encoding follows Go's `Node.Marshal()`: the
//! bare message, **without** the `k8s\0` magic and `runtime.Unknown` envelope that the API
//! server puts around stored objects (externalgrpc-protocol.md: "no runtime.Unknown envelope").
//! Decoding also accepts an enveloped object, because a provider that copied bytes from etcd or
//! from an API server response would send one; the envelope is unwrapped and its kind checked.

mod node;
mod resource_slice;
mod wire;

pub use node::{decode_node, encode_node};
pub use resource_slice::encode_resource_slice;

/// Magic prefix of the API server's protobuf serialization (`k8s` followed by a zero byte).
pub const K8S_PROTOBUF_MAGIC: &[u8; 4] = b"k8s\x00";

/// Failure to decode Kubernetes protobuf bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeCodecError {
    /// The bytes end inside a field.
    #[error("Kubernetes protobuf bytes end in the middle of a field")]
    Truncated,
    /// A field has a wire type the schema does not allow.
    #[error("field {field} has the wrong protobuf wire type")]
    WireType {
        /// Field path.
        field: &'static str,
    },
    /// A string field is not UTF-8.
    #[error("field {field} is not valid UTF-8")]
    Utf8 {
        /// Field path.
        field: &'static str,
    },
    /// Start/end-group wire types, which Kubernetes never writes.
    #[error("protobuf wire type {wire_type} is not used by Kubernetes objects")]
    UnsupportedWireType {
        /// The wire type found.
        wire_type: u8,
    },
    /// An enveloped object is not a Node.
    #[error("runtime.Unknown envelope holds a {kind}, expected Node")]
    WrongKind {
        /// The kind in the envelope's TypeMeta.
        kind: String,
    },
    /// A timestamp is out of range.
    #[error("field {field} holds a timestamp out of range")]
    Time {
        /// Field path.
        field: &'static str,
    },
}

/// Strips the `k8s\0` + `runtime.Unknown` envelope if present and returns the raw object bytes
/// together with the envelope's kind (empty when there was no envelope).
fn unwrap_envelope(bytes: &[u8]) -> Result<(&[u8], String), NodeCodecError> {
    let Some(unknown) = bytes.strip_prefix(K8S_PROTOBUF_MAGIC.as_slice()) else {
        return Ok((bytes, String::new()));
    };
    // runtime.Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2,
    // contentEncoding = 3, contentType = 4.
    let mut reader = wire::Reader::new(unknown);
    let mut raw: &[u8] = &[];
    let mut kind = String::new();
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => {
                let mut type_meta = wire::Reader::new(value.bytes("runtime.Unknown.typeMeta")?);
                while let Some((field, value)) = type_meta.next_field()? {
                    if field == 2 {
                        kind = value.string("runtime.Unknown.typeMeta.kind")?;
                    }
                }
            }
            2 => raw = value.bytes("runtime.Unknown.raw")?,
            _ => {}
        }
    }
    Ok((raw, kind))
}
