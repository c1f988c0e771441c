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

use super::{Loader, scan};
use crate::defaults::{self, FieldError};
use crate::objects::ClusterObjects;

impl Loader {
    /// Adds the item `text` when it is of a typed kind and types cleanly; `false` (with
    /// nothing recorded) when it must take the general path.
    pub(super) fn add_typed_text(&mut self, text: &str) -> bool {
        let Some([Some(api_version), Some(kind)]) =
            scan::top_level_strs(text, ["apiVersion", "kind"])
        else {
            return false;
        };
        let trim = self.trim;
        match (api_version, kind) {
            ("v1", "Node") => self.add_parsed(text, "", kind, defaults::node, |o, mut node| {
                if trim {
                    crate::trim::node(&mut node);
                }
                o.nodes.push(node);
            }),
            // `spec.workloadRef` (kept aside from the typed Pod) is read by the general
            // path; `\u` escapes could spell that key.
            ("v1", "Pod") if !text.contains("workloadRef") && !text.contains("\\u") => self
                .add_parsed(text, "", kind, defaults::pod, |o, mut pod| {
                    if trim {
                        crate::trim::pod(&mut pod);
                    }
                    o.pods.push(pod);
                }),
            ("v1", "Namespace") => {
                self.add_parsed(text, "", kind, defaults::namespace, |o, mut ns| {
                    trim_meta(trim, &mut ns.metadata);
                    o.namespaces.push(ns);
                })
            }
            ("resource.k8s.io/v1", "ResourceSlice") => {
                let group = "resource.k8s.io";
                self.add_parsed(text, group, kind, defaults::resource_slice, |o, mut s| {
                    trim_meta(trim, &mut s.metadata);
                    o.resource_slices.push(s);
                })
            }
            ("resource.k8s.io/v1", "ResourceClaim") => {
                let group = "resource.k8s.io";
                self.add_parsed(text, group, kind, defaults::resource_claim, |o, mut c| {
                    trim_meta(trim, &mut c.metadata);
                    o.resource_claims.push(c);
                })
            }
            ("resource.k8s.io/v1", "DeviceClass") => {
                let group = "resource.k8s.io";
                self.add_parsed(text, group, kind, defaults::device_class, |o, mut c| {
                    trim_meta(trim, &mut c.metadata);
                    o.device_classes.push(c);
                })
            }
            // Templates and taint rules are few; the general path reads them.
            _ => false,
        }
    }

    /// Makes room, before the items `spans` of `text` are added, for the nodes, pods,
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
    pub(super) fn reserve_for(&mut self, text: &str, spans: &[(usize, usize)]) {
        let (mut nodes, mut pods, mut slices, mut claims) = (0, 0, 0, 0);
        for &(start, end) in spans {
            let item = text.get(start..end).unwrap_or_default();
            match scan::top_level_strs(item, ["apiVersion", "kind"]) {
                Some([Some("v1"), Some("Node")]) => nodes += 1,
                Some([Some("v1"), Some("Pod")]) => pods += 1,
                Some([Some("resource.k8s.io/v1"), Some("ResourceSlice")]) => slices += 1,
                Some([Some("resource.k8s.io/v1"), Some("ResourceClaim")]) => claims += 1,
                _ => {}
            }
        }
        let objects = &mut self.loaded.objects;
        objects.nodes.reserve(nodes + nodes / 8);
        objects.pods.reserve(pods + pods / 8);
        objects.resource_slices.reserve(slices);
        objects.resource_claims.reserve(claims);
    }

    /// Types `text` as a `T`, applies its defaults and, unless an object of the same
    /// identity was read before (then noted as a duplicate, as the general path notes
    /// it), hands it to `push`. `false`, with nothing recorded, when typing or the
    /// defaults fail.
    fn add_parsed<T>(
        &mut self,
        text: &str,
        group: &str,
        kind: &str,
        apply_defaults: fn(&mut T) -> Result<(), FieldError>,
        push: impl FnOnce(&mut ClusterObjects, T),
    ) -> bool
    where
        T: DeserializeOwned + Metadata<Ty = ObjectMeta>,
    {
        let Ok(mut object) = serde_json::from_str::<T>(text) else {
            return false;
        };
        // The identity as written, before defaults (as the general path reads it).
        let meta = object.metadata();
        let identity = meta.name.clone().map(|name| (meta.namespace.clone(), name));
        if apply_defaults(&mut object).is_err() {
            return false;
        }
        if let Some((namespace, name)) = identity
            && let Some(duplicate) = self.seen_name(group, kind, namespace.as_deref(), &name)
        {
            self.loaded.duplicates.insert(duplicate);
            return true;
        }
        push(&mut self.loaded.objects, object);
        true
    }
}

fn trim_meta(trim: bool, meta: &mut ObjectMeta) {
    if trim {
        crate::trim::meta(meta);
    }
}
