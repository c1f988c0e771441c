//! Just enough of the protobuf wire format to write and read Kubernetes objects the way Go's
//! gogo-generated `Marshal()` does: fields in ascending number order, every non-pointer field
//! written even when empty, map entries with both key and value.

use super::NodeCodecError;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

pub(super) fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        // Truncation is the point: seven payload bits per byte.
        buf.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

fn put_tag(buf: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(buf, (u64::from(field) << 3) | u64::from(wire_type));
}

pub(super) fn put_bytes(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_tag(buf, field, LEN);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

pub(super) fn put_str(buf: &mut Vec<u8>, field: u32, value: &str) {
    put_bytes(buf, field, value.as_bytes());
}

pub(super) fn put_uint(buf: &mut Vec<u8>, field: u32, value: u64) {
    put_tag(buf, field, VARINT);
    put_varint(buf, value);
}

/// Go encodes int32/int64 as the two's complement of the 64-bit value.
pub(super) fn put_int(buf: &mut Vec<u8>, field: u32, value: i64) {
    put_uint(buf, field, value as u64);
}

pub(super) fn put_bool(buf: &mut Vec<u8>, field: u32, value: bool) {
    put_uint(buf, field, u64::from(value));
}

/// A nested message: encoded into a scratch buffer, then length-prefixed.
pub(super) fn put_message(buf: &mut Vec<u8>, field: u32, encode: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    encode(&mut inner);
    put_bytes(buf, field, &inner);
}

/// One field value as read from the wire.
pub(super) enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// Fixed-width values; no field we read uses them, they are skipped.
    Fixed,
}

impl<'a> Value<'a> {
    pub(super) fn bytes(&self, what: &'static str) -> Result<&'a [u8], NodeCodecError> {
        match self {
            Self::Bytes(bytes) => Ok(bytes),
            _ => Err(NodeCodecError::WireType { field: what }),
        }
    }

    pub(super) fn string(&self, what: &'static str) -> Result<String, NodeCodecError> {
        String::from_utf8(self.bytes(what)?.to_vec())
            .map_err(|_| NodeCodecError::Utf8 { field: what })
    }

    pub(super) fn varint(&self, what: &'static str) -> Result<u64, NodeCodecError> {
        match self {
            Self::Varint(value) => Ok(*value),
            _ => Err(NodeCodecError::WireType { field: what }),
        }
    }
}

/// Iterates over the fields of one message.
pub(super) struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    fn varint(&mut self) -> Result<u64, NodeCodecError> {
        let mut value = 0u64;
        for (index, byte) in self.data.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                self.data = &self.data[index + 1..];
                return Ok(value);
            }
        }
        Err(NodeCodecError::Truncated)
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], NodeCodecError> {
        if self.data.len() < len {
            return Err(NodeCodecError::Truncated);
        }
        let (head, tail) = self.data.split_at(len);
        self.data = tail;
        Ok(head)
    }

    /// The next `(field number, value)`, or `None` at the end of the message.
    pub(super) fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, NodeCodecError> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = u32::try_from(key >> 3).map_err(|_| NodeCodecError::Truncated)?;
        let value = match (key & 7) as u8 {
            VARINT => Value::Varint(self.varint()?),
            FIXED64 => {
                self.take(8)?;
                Value::Fixed
            }
            LEN => {
                let len = usize::try_from(self.varint()?).map_err(|_| NodeCodecError::Truncated)?;
                Value::Bytes(self.take(len)?)
            }
            FIXED32 => {
                self.take(4)?;
                Value::Fixed
            }
            other => return Err(NodeCodecError::UnsupportedWireType { wire_type: other }),
        };
        Ok(Some((field, value)))
    }
}
