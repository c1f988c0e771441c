//! The names and ids the provider gives GCE: random `requestId`s for plain calls, and for an
//! atomic request everything derived from its request id (GCE `requestId`s, VM names, the
//! request label), so a retried request asks for the same operation and the same VMs.

use std::collections::BTreeSet;

use uuid::Uuid;

/// A GCE `requestId`: a UUID (the API requires that form), random per call.
#[must_use]
pub fn new_request_id() -> String {
    Uuid::new_v4().to_string()
}

/// FNV-1a, stable across restarts and builds (names derived from a request id must be).
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A stable, label- and name-safe key of a request id (`r` + 12 hex digits).
#[must_use]
pub fn request_key(request_id: &str) -> String {
    format!("r{:012x}", fnv(request_id) & 0xffff_ffff_ffff)
}

/// The `requestId` GCE gets for `step` of an atomic request: derived from ours, so a retried
/// request is the same operation. The version and variant digits are set to `4` and `8`, as
/// every id this provider ever sent for a request had them.
pub(crate) fn gce_request_id(request_id: &str, step: &str) -> String {
    const VERSION: u128 = 0xf << 76;
    const VARIANT: u128 = 0xf << 60;
    let high = u128::from(fnv(&format!("{step}/{request_id}")));
    let low = u128::from(fnv(&format!("{request_id}/{step}")));
    let bits = (high << 64 | low) & !VERSION & !VARIANT | 0x4 << 76 | 0x8 << 60;
    Uuid::from_u128(bits).to_string()
}

/// Names of the VMs of a bulkInsert: `<base>-<4 chars>`, like the MIG's own, derived from the
/// request so a retry asks for the same VMs.
#[must_use]
pub fn instance_names(base: &str, request_id: &str, count: usize) -> Vec<String> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(count);
    let mut salt = 0u64;
    while out.len() < count {
        let mut h = fnv(&format!("{request_id}/{salt}"));
        salt += 1;
        let suffix: String = (0..4)
            .map(|_| {
                let c = ALPHABET[usize::try_from(h % 36).unwrap_or(0)];
                h /= 36;
                char::from(c)
            })
            .collect();
        let name = format!("{base}-{suffix}");
        if seen.insert(name.clone()) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_are_stable_per_request() {
        let a = instance_names("gke-pool-abc", "req-1", 3);
        assert_eq!(a, instance_names("gke-pool-abc", "req-1", 3));
        assert_ne!(a, instance_names("gke-pool-abc", "req-2", 3));
        assert_eq!(a.iter().collect::<BTreeSet<_>>().len(), 3);
        assert!(
            a.iter()
                .all(|n| n.starts_with("gke-pool-abc-") && n.len() == "gke-pool-abc-".len() + 4)
        );
        assert_eq!(request_key("x"), request_key("x"));
        assert_eq!(request_key("x").len(), 13);
        let uuid = gce_request_id("x", "bulkInsert");
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid, gce_request_id("x", "bulkInsert"));
        assert_ne!(uuid, gce_request_id("x", "resizeRequest"));
        assert_ne!(new_request_id(), new_request_id());
    }

    #[test]
    fn request_ids_are_uuids_of_version_4() {
        // GCE takes a `requestId` only in the UUID form (RFC 4122), version digit 4 and
        // variant digit 8..b.
        for id in [new_request_id(), gce_request_id("req-1", "bulkInsert")] {
            let parsed = Uuid::parse_str(&id).expect("a UUID");
            assert_eq!(parsed.get_version_num(), 4, "{id}");
            assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122, "{id}");
            assert_eq!(parsed.to_string(), id);
        }
    }

    #[test]
    fn derived_ids_keep_the_form_of_the_hand_written_ones() {
        // What the provider sent before it used `uuid`: the hash's hex digits with digit 12
        // replaced by 4 and digit 16 by 8, so a request retried across an upgrade is the
        // same GCE operation.
        let value = u128::from(fnv("bulkInsert/req-1")) << 64 | u128::from(fnv("req-1/bulkInsert"));
        let hex = format!("{value:032x}");
        let before = format!(
            "{}-{}-4{}-8{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[13..16],
            &hex[17..20],
            &hex[20..32]
        );
        assert_eq!(gce_request_id("req-1", "bulkInsert"), before);
    }
}
