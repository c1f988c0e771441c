//! Typing a list item straight from its JSON text.
//!
//! The general path parses an item into a `serde_json::Value`, then types the value
//! through `serde_path_to_error`: two full copies of every object and a map per JSON
//! object, which was most of the time `simulate` spent loading a 100,000-node cluster
//! (issue #28). An item of a typed kind at its read version (`apiVersion` and `kind` as
//! plain strings at its top level, as `kubectl` writes them) is deserialized here
//! directly from its text instead. Whenever that does not simply succeed (a field that
//! does not type, a default that refuses the object, a shape this path does not handle)
//! the item takes the general path, which then gives the same outcome as ever: the same
//! object, or the same error naming the object, the field and what was wrong.

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};

use super::{Loader, scan};
use crate::defaults::{self, FieldError};

/// An item typed, defaulted and trimmed, not yet recorded: what [`type_text`] makes of
/// an item's text on any thread, for [`Loader::record`] to add in the list's order.
#[derive(Debug)]
pub(super) struct TypedItem {
    group: &'static str,
    kind: &'static str,
    /// (namespace, name) as written, before defaults (as the general path reads it).
    identity: Option<(Option<String>, String)>,
    object: TypedObject,
}

// Unboxed on purpose: a Box would cost every item an allocation and a copy, and typed
// items only wait in chunks of a few hundred (`super::parallel`).
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum TypedObject {
    Node(Node),
    Pod(Pod),
    Namespace(Namespace),
    Slice(ResourceSlice),
    Claim(ResourceClaim),
    Class(DeviceClass),
}

/// The item `text` typed when it is of a typed kind and types cleanly; `None` when it
/// must take the general path. Reads nothing but `text` (and whether to trim), so items
/// can be typed on several threads ([`super::parallel`]).
pub(super) fn type_text(text: &str, trim: bool) -> Option<TypedItem> {
    let Some([Some(api_version), Some(kind)]) = scan::top_level_strs(text, ["apiVersion", "kind"])
    else {
        return None;
    };
    let dra = "resource.k8s.io";
    match (api_version, kind) {
        ("v1", "Node") => parsed(text, "", "Node", defaults::node, |mut node| {
            if trim {
                crate::trim::node(&mut node);
            }
            TypedObject::Node(node)
        }),
        // `spec.workloadRef` (kept aside from the typed Pod) is read by the general
        // path; `\u` escapes could spell that key.
        ("v1", "Pod") if !text.contains("workloadRef") && !text.contains("\\u") => {
            parsed(text, "", "Pod", defaults::pod, |mut pod| {
                if trim {
                    crate::trim::pod(&mut pod);
                }
                TypedObject::Pod(pod)
            })
        }
        ("v1", "Namespace") => parsed(text, "", "Namespace", defaults::namespace, |mut ns| {
            trim_meta(trim, &mut ns.metadata);
            TypedObject::Namespace(ns)
        }),
        ("resource.k8s.io/v1", "ResourceSlice") => parsed(
            text,
            dra,
            "ResourceSlice",
            defaults::resource_slice,
            |mut s| {
                trim_meta(trim, &mut s.metadata);
                TypedObject::Slice(s)
            },
        ),
        ("resource.k8s.io/v1", "ResourceClaim") => parsed(
            text,
            dra,
            "ResourceClaim",
            defaults::resource_claim,
            |mut c| {
                trim_meta(trim, &mut c.metadata);
                TypedObject::Claim(c)
            },
        ),
        ("resource.k8s.io/v1", "DeviceClass") => {
            parsed(text, dra, "DeviceClass", defaults::device_class, |mut c| {
                trim_meta(trim, &mut c.metadata);
                TypedObject::Class(c)
            })
        }
        // Templates and taint rules are few; the general path reads them.
        _ => None,
    }
}

/// `text` typed as a `T` with its defaults applied, wrapped by `wrap`; `None` when typing
/// or the defaults fail.
fn parsed<T>(
    text: &str,
    group: &'static str,
    kind: &'static str,
    apply_defaults: fn(&mut T) -> Result<(), FieldError>,
    wrap: impl FnOnce(T) -> TypedObject,
) -> Option<TypedItem>
where
    T: DeserializeOwned + Metadata<Ty = ObjectMeta>,
{
    let mut object = serde_json::from_str::<T>(text).ok()?;
    let meta = object.metadata();
    let identity = meta.name.clone().map(|name| (meta.namespace.clone(), name));
    apply_defaults(&mut object).ok()?;
    Some(TypedItem {
        group,
        kind,
        identity,
        object: wrap(object),
    })
}

impl Loader {
    /// Adds a typed item, unless an object of the same identity was read before (then
    /// noted as a duplicate, as the general path notes it).
    pub(super) fn record(&mut self, item: TypedItem) {
        if let Some((namespace, name)) = &item.identity
            && let Some(duplicate) =
                self.seen_name(item.group, item.kind, namespace.as_deref(), name)
        {
            self.loaded.duplicates.insert(duplicate);
            return;
        }
        let objects = &mut self.loaded.objects;
        match item.object {
            TypedObject::Node(node) => objects.nodes.push(node),
            TypedObject::Pod(pod) => objects.pods.push(pod),
            TypedObject::Namespace(ns) => objects.namespaces.push(ns),
            TypedObject::Slice(slice) => objects.resource_slices.push(slice),
            TypedObject::Claim(claim) => objects.resource_claims.push(claim),
            TypedObject::Class(class) => objects.device_classes.push(class),
        }
    }

    /// Makes room, before `items` (their texts) are added, for the nodes, pods,
    /// slices and claims among them. A 100,000-node list holds 150,000 pods of about two
    /// kilobytes each: grown one push at a time, the vector of pods was copied whole at
    /// every doubling, each time into fresh pages the kernel had to zero, a tenth of the
    /// whole run (issue #28). Counting reads only each item's first bytes (`apiVersion`
    /// and `kind`); an item that turns out to be a duplicate leaves one slot unused.
    ///
    /// The nodes and pods get an eighth more room than they fill: a snapshot takes these
    /// vectors over and the planner appends its template nodes (and their DaemonSet
    /// pods) to them, so without room the first node added copied all 100,000 nodes into
    /// a vector twice the size (155 MB copied, issue #28). Room never filled costs
    /// address space only: its pages are never touched.
    pub(super) fn reserve_for(&mut self, items: &[&str]) {
        let mut counts = [0; 4];
        for item in items {
            if let Some(kind) = counted_kind(item) {
                counts[kind] += 1;
            }
        }
        let [nodes, pods, slices, claims] = counts;
        let objects = &mut self.loaded.objects;
        objects.nodes.reserve(nodes + nodes / 8);
        objects.pods.reserve(pods + pods / 8);
        objects.resource_slices.reserve(slices);
        objects.resource_claims.reserve(claims);
    }

    /// Gives the nodes and pods an eighth more room than they fill, for a list whose
    /// items were not counted first ([`super::pieces`] reads its text once, so its
    /// vectors grew as items came): the room [`Self::reserve_for`] leaves for the
    /// planner's template nodes. A vector that has that room already is not touched.
    pub(super) fn keep_room(&mut self) {
        let objects = &mut self.loaded.objects;
        objects.nodes.reserve_exact(objects.nodes.len() / 8);
        objects.pods.reserve_exact(objects.pods.len() / 8);
    }
}

/// Which of nodes, pods, ResourceSlices and ResourceClaims (0 to 3) the item `item` is,
/// by its plain `apiVersion` and `kind` (the first bytes `kubectl` writes).
fn counted_kind(item: &str) -> Option<usize> {
    match scan::top_level_strs(item, ["apiVersion", "kind"]) {
        Some([Some("v1"), Some("Node")]) => Some(0),
        Some([Some("v1"), Some("Pod")]) => Some(1),
        Some([Some("resource.k8s.io/v1"), Some("ResourceSlice")]) => Some(2),
        Some([Some("resource.k8s.io/v1"), Some("ResourceClaim")]) => Some(3),
        _ => None,
    }
}

fn trim_meta(trim: bool, meta: &mut ObjectMeta) {
    if trim {
        crate::trim::meta(meta);
    }
}
