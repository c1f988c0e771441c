//! The object store: objects per resource, one global resourceVersion counter, and a
//! bounded per-resource event history that watches replay from.
//!
//! The store is synchronous and lives behind one mutex; every write stamps the next
//! resourceVersion and publishes its event while holding it, so the order of events
//! on every watch is the order of writes, and a watch that subscribes under the same
//! lock sees no gap and no duplicate between its backlog and its live feed.

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use crate::{
    apply::Applier,
    convert,
    error::ApiError,
    object::{self, Target, finalizers, is_terminating, meta_str, with_meta},
    patch::PatchType,
    resource::{Conversion, ResourceDef, ResourceKey},
    selector::{FieldSelector, Selectors},
};

mod objects;
mod watches;

use objects::{ObjectKey, Objects};

pub use watches::{Change, ChangeKind, WatchControl, WatchFrom, WatchStart};

/// Checks (and may change) a write's candidate object before it is stored: schema defaults,
/// pruning and validation, and the per-request field validation. Gets the stored object for
/// updates.
pub type Admit<'a> = &'a mut dyn FnMut(&mut Value, Option<&Value>) -> Result<(), ApiError>;

/// Admits everything unchanged.
pub fn admit_all(_: &mut Value, _: Option<&Value>) -> Result<(), ApiError> {
    Ok(())
}

/// Preconditions and options of a DELETE.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `dryRun=All`: validate only.
    pub dry_run: bool,
}

/// Result of a write.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// The object as stored (or as it would be, for a dry run).
    pub object: Value,
    /// Whether the write created the object (apply on a missing object).
    pub created: bool,
}

struct Collection {
    objects: Objects,
    history: VecDeque<Arc<Change>>,
    /// Events at or below this resourceVersion may be missing from `history`.
    compacted_rv: u64,
    events: broadcast::Sender<Arc<Change>>,
}

/// All objects of all resources.
pub struct Store {
    rv: u64,
    /// Every resourceVersion at or below this is compacted: the store started here (a restart,
    /// or etcd's `--bump-revision --mark-compacted`) and has no history before it.
    floor: u64,
    history_limit: usize,
    collections: HashMap<ResourceKey, Collection>,
    control: watch::Sender<WatchControl>,
    /// The latest resourceVersion, for requests that wait until the store reaches one.
    latest: watch::Sender<u64>,
}

/// Every object of a store and its resourceVersion: what a state file keeps.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// The latest resourceVersion handed out.
    pub resource_version: u64,
    /// Objects by collection (`group/version/plural`, core `v1/plural`).
    pub collections: std::collections::BTreeMap<String, Vec<Value>>,
}

fn collection_name(key: &ResourceKey) -> String {
    if key.group.is_empty() {
        format!("{}/{}", key.version, key.plural)
    } else {
        format!("{}/{}/{}", key.group, key.version, key.plural)
    }
}

fn parse_collection_name(name: &str) -> Option<ResourceKey> {
    let parts: Vec<&str> = name.split('/').collect();
    let (group, version, plural) = match parts.as_slice() {
        [v, p] => ("", *v, *p),
        [g, v, p] => (*g, *v, *p),
        _ => return None,
    };
    Some(ResourceKey {
        group: group.to_owned(),
        version: version.to_owned(),
        plural: plural.to_owned(),
    })
}

/// Now, as the RFC 3339 seconds-precision string Kubernetes uses for `metav1.Time`.
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

/// Five characters from the alphabet upstream's `SimpleNameGenerator` uses.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4().as_bytes()[..5]
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

fn object_key(def: &ResourceDef, namespace: Option<&str>, name: &str) -> ObjectKey {
    let ns = if def.namespaced {
        namespace.unwrap_or_default()
    } else {
        ""
    };
    (ns.to_owned(), name.to_owned())
}

fn not_found(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::NotFound {
        resource: def.group_resource(),
        name: name.to_owned(),
    }
}

fn set_rv(object: &mut Value, rv: u64) {
    with_meta(object, |meta| {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()))
    });
}

impl Store {
    /// An empty store whose per-resource histories keep `history_limit` events.
    #[cfg(test)]
    pub fn new(history_limit: usize) -> Self {
        Self::starting_at(history_limit, 0)
    }

    /// An empty store whose first write gets resourceVersion `floor + 1`; everything at or
    /// below `floor` counts as compacted.
    pub fn starting_at(history_limit: usize, floor: u64) -> Self {
        Self {
            rv: floor,
            floor,
            history_limit: history_limit.max(1),
            collections: HashMap::new(),
            control: watch::Sender::new(WatchControl::default()),
            latest: watch::Sender::new(floor),
        }
    }

    /// A store holding `snapshot`'s objects, as a server restarted on its data: no history,
    /// so every resourceVersion before the snapshot's counts as compacted. `bump` is added to
    /// the resourceVersion first (a snapshot that may miss the last writes must not hand out
    /// resourceVersions clients have already seen).
    pub fn restore(history_limit: usize, snapshot: Snapshot, bump: u64) -> Self {
        let rv = snapshot.resource_version.saturating_add(bump);
        let mut store = Self::starting_at(history_limit, rv);
        for (name, objects) in snapshot.collections {
            let Some(key) = parse_collection_name(&name) else {
                continue;
            };
            let col = store.collection_for(key);
            for object in objects {
                let ns = meta_str(&object, "namespace")
                    .unwrap_or_default()
                    .to_owned();
                let name = meta_str(&object, "name").unwrap_or_default().to_owned();
                col.objects.insert((ns, name), object);
            }
        }
        store
    }

    /// Every object and the resourceVersion, for a state file.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            resource_version: self.rv,
            collections: self
                .collections
                .iter()
                .filter(|(_, c)| !c.objects.is_empty())
                .map(|(key, c)| (collection_name(key), c.objects.values().cloned().collect()))
                .collect(),
        }
    }

    /// The latest resourceVersion handed out.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// Follows the latest resourceVersion (for reads that wait until the store reaches one).
    pub fn latest(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    fn collection_for(&mut self, key: ResourceKey) -> &mut Collection {
        let capacity = self.history_limit.max(16);
        let floor = self.floor;
        self.collections.entry(key).or_insert_with(|| Collection {
            objects: Objects::default(),
            history: VecDeque::new(),
            compacted_rv: floor,
            events: broadcast::channel(capacity).0,
        })
    }

    fn collection(&mut self, def: &ResourceDef) -> &mut Collection {
        self.collection_for(def.storage_key())
    }

    /// Records a committed change and sends it to live watches.
    fn publish(&mut self, def: &ResourceDef, change: Change) {
        let limit = self.history_limit;
        let col = self.collection(def);
        let change = Arc::new(change);
        col.history.push_back(Arc::clone(&change));
        while col.history.len() > limit {
            if let Some(evicted) = col.history.pop_front() {
                col.compacted_rv = evicted.rv;
            }
        }
        // No receivers is fine: nobody is watching this resource.
        let _ = col.events.send(change);
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.latest.send_replace(self.rv);
        self.rv
    }

    /// GET of one object.
    pub fn get(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.collections
            .get(&def.storage_key())
            .and_then(|c| c.objects.get(&object_key(def, namespace, name)))
            .cloned()
            .ok_or_else(|| not_found(def, name))
    }

    /// LIST: matching objects in key order (as `def` serves them: selectors apply to that
    /// form), and the resourceVersion of the list.
    pub fn list(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        selectors: &Selectors,
    ) -> (Vec<Value>, u64) {
        let items = self
            .collections
            .get(&def.storage_key())
            .map(|c| {
                let candidates = match def.conversion {
                    Conversion::None => c.objects.candidates(namespace, &selectors.fields),
                    // Selectors apply to the served form, which the index does not hold.
                    Conversion::CoreEvent | Conversion::EventsV1 => {
                        c.objects.candidates(namespace, &FieldSelector::default())
                    }
                };
                candidates
                    .map(|obj| convert::view(def.conversion, obj))
                    .filter(|obj| selectors.matches(obj))
                    .map(std::borrow::Cow::into_owned)
                    .collect()
            })
            .unwrap_or_default();
        (items, self.rv)
    }

    /// POST: creates an object.
    pub fn create(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        body: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.create_admitted(def, namespace, body, dry_run, &mut admit_all)
    }

    /// POST with an admission check on the candidate object.
    pub fn create_admitted(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        body: Value,
        dry_run: bool,
        admit: Admit<'_>,
    ) -> Result<Value, ApiError> {
        let mut obj = object::prepare_create(def, namespace, body, random_suffix)?;
        admit(&mut obj, None)?;
        let name = meta_str(&obj, "name").unwrap_or_default().to_owned();
        let key = object_key(def, namespace, &name);
        if self.collection(def).objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists {
                resource: def.group_resource(),
                name,
            });
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let now = now_rfc3339();
        with_meta(&mut obj, |meta| {
            meta.insert("uid".into(), Value::String(uid));
            meta.insert("creationTimestamp".into(), Value::String(now));
            meta.insert("generation".into(), Value::from(1));
        });
        if dry_run {
            return Ok(obj);
        }
        let rv = self.next_rv();
        set_rv(&mut obj, rv);
        self.collection(def).objects.insert(key, obj.clone());
        self.publish(
            def,
            Change {
                rv,
                kind: ChangeKind::Added,
                object: obj.clone(),
                previous: None,
            },
        );
        Ok(obj)
    }

    /// Stores an update candidate built by [`object::prepare_update`]: suppresses
    /// no-ops, finishes a pending delete once the last finalizer is gone, else
    /// stamps a new resourceVersion and emits MODIFIED.
    fn commit_update(
        &mut self,
        def: &ResourceDef,
        key: ObjectKey,
        old: Value,
        mut candidate: Value,
        dry_run: bool,
    ) -> Value {
        if candidate == old || dry_run {
            return candidate;
        }
        let rv = self.next_rv();
        set_rv(&mut candidate, rv);
        if is_terminating(&candidate) && finalizers(&candidate).is_empty() {
            self.collection(def).objects.remove(&key);
            self.publish(
                def,
                Change {
                    rv,
                    kind: ChangeKind::Deleted,
                    object: candidate.clone(),
                    previous: None,
                },
            );
            return candidate;
        }
        self.collection(def).objects.insert(key, candidate.clone());
        self.publish(
            def,
            Change {
                rv,
                kind: ChangeKind::Modified,
                object: candidate.clone(),
                previous: Some(old),
            },
        );
        candidate
    }

    /// PUT of an object or of its `/status`.
    pub fn update(
        &mut self,
        def: &ResourceDef,
        target: Target,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.update_admitted(def, target, namespace, name, body, dry_run, &mut admit_all)
    }

    /// PUT with an admission check on the candidate object.
    #[allow(clippy::too_many_arguments)]
    pub fn update_admitted(
        &mut self,
        def: &ResourceDef,
        target: Target,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        dry_run: bool,
        admit: Admit<'_>,
    ) -> Result<Value, ApiError> {
        let old = self.get(def, namespace, name)?;
        let mut candidate = object::prepare_update(def, target, &old, body)?;
        admit(&mut candidate, Some(&old))?;
        let key = object_key(def, namespace, name);
        Ok(self.commit_update(def, key, old, candidate, dry_run))
    }

    /// PATCH of an object or of its `/status`; an apply patch creates a missing object.
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        target: Target,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> Result<Written, ApiError> {
        self.patch_admitted(
            def,
            target,
            namespace,
            name,
            (patch_type, patch, None),
            dry_run,
            Conversion::None,
            &mut admit_all,
        )
    }

    /// PATCH with an admission check on the candidate; the patch applies to the object as
    /// served through `view` (its storage form is `def`'s).
    #[allow(clippy::too_many_arguments)]
    pub fn patch_admitted(
        &mut self,
        def: &ResourceDef,
        target: Target,
        namespace: Option<&str>,
        name: &str,
        (patch_type, patch, manager): (PatchType, &Value, Option<&str>),
        dry_run: bool,
        view: Conversion,
        admit: Admit<'_>,
    ) -> Result<Written, ApiError> {
        // Server-side apply keeps a record of the fields each manager applied.
        let applier = manager
            .filter(|_| patch_type == PatchType::Apply)
            .map(|manager| Applier {
                manager,
                target,
                status_subresource: def.status_subresource,
            });
        let old = match self.get(def, namespace, name) {
            Ok(old) => old,
            Err(ApiError::NotFound { .. })
                if patch_type == PatchType::Apply && target == Target::Main =>
            {
                let body = patch_type.apply(&json!({}), patch)?;
                let mut body = convert::to_stored(view, body);
                match meta_str(&body, "name") {
                    Some(n) if !n.is_empty() && n != name => {
                        return Err(ApiError::BadRequest(format!(
                            "the name of the object ({n}) does not match the name on the URL ({name})"
                        )));
                    }
                    _ => with_meta(&mut body, |meta| {
                        meta.insert("name".into(), Value::String(name.to_owned()))
                    }),
                };
                let mut admit_and_record =
                    |object: &mut Value, old: Option<&Value>| -> Result<(), ApiError> {
                        admit(object, old)?;
                        if let Some(applier) = &applier {
                            applier.record(object, patch, &now_rfc3339());
                        }
                        Ok(())
                    };
                let object =
                    self.create_admitted(def, namespace, body, dry_run, &mut admit_and_record)?;
                return Ok(Written {
                    object,
                    created: true,
                });
            }
            Err(e) => return Err(e),
        };
        let mut old_view = convert::to_view(view, old.clone());
        if let Some(applier) = &applier {
            applier.release(&mut old_view, patch);
        }
        let patched = patch_type.apply(&old_view, patch).map_err(|e| match e {
            ApiError::Invalid { field, detail, .. } => ApiError::Invalid {
                kind: def.kind.clone(),
                name: name.to_owned(),
                field,
                detail,
            },
            other => other,
        })?;
        let patched = convert::to_stored(view, patched);
        let mut candidate = object::prepare_update(def, target, &old, patched)?;
        if let Some(applier) = &applier {
            applier.record(&mut candidate, patch, &now_rfc3339());
        }
        admit(&mut candidate, Some(&old))?;
        let key = object_key(def, namespace, name);
        Ok(Written {
            object: self.commit_update(def, key, old, candidate, dry_run),
            created: false,
        })
    }

    /// DELETE of one object. Returns the object and whether it is gone (false: it
    /// waits on finalizers with a deletionTimestamp).
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(Value, bool), ApiError> {
        let old = self.get(def, namespace, name)?;
        let conflict = |what: &str, wanted: &str, actual: &str| ApiError::Conflict {
            resource: def.group_resource(),
            name: name.to_owned(),
            detail: format!(
                "Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"
            ),
        };
        let actual_rv = meta_str(&old, "resourceVersion").unwrap_or_default();
        if let Some(rv) = options.resource_version.as_deref()
            && rv != actual_rv
        {
            return Err(conflict("ResourceVersion", rv, actual_rv));
        }
        let actual_uid = meta_str(&old, "uid").unwrap_or_default();
        if let Some(uid) = options.uid.as_deref()
            && uid != actual_uid
        {
            return Err(conflict("UID", uid, actual_uid));
        }
        let key = object_key(def, namespace, name);
        if !finalizers(&old).is_empty() {
            if is_terminating(&old) {
                return Ok((old, false));
            }
            let mut candidate = old.clone();
            with_meta(&mut candidate, |meta| {
                meta.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
                meta.insert("deletionGracePeriodSeconds".into(), Value::from(0));
            });
            return Ok((
                self.commit_update(def, key, old, candidate, options.dry_run),
                false,
            ));
        }
        if options.dry_run {
            return Ok((old, true));
        }
        let rv = self.next_rv();
        let mut gone = old;
        set_rv(&mut gone, rv);
        self.collection(def).objects.remove(&key);
        self.publish(
            def,
            Change {
                rv,
                kind: ChangeKind::Deleted,
                object: gone.clone(),
                previous: None,
            },
        );
        Ok((gone, true))
    }

    /// DELETE of a collection: deletes every selected object, one event each.
    pub fn delete_collection(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        selectors: &Selectors,
        dry_run: bool,
    ) -> Result<Vec<Value>, ApiError> {
        let (items, _) = self.list(def, namespace, selectors);
        let options = DeleteOptions {
            dry_run,
            ..DeleteOptions::default()
        };
        items
            .iter()
            .map(|obj| {
                let ns = meta_str(obj, "namespace");
                let name = meta_str(obj, "name").unwrap_or_default();
                self.delete(def, ns, name, &options).map(|(o, _)| o)
            })
            .collect()
    }

    /// POST `pods/<name>/binding`: what the scheduler does to place a Pod.
    pub fn bind(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        binding: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::Invalid {
                kind: "Binding".into(),
                name: name.to_owned(),
                field: "target.name".into(),
                detail: "Required value".into(),
            })?
            .to_owned();
        let old = self.get(def, namespace, name)?;
        if let Some(current) = old.pointer("/spec/nodeName").and_then(Value::as_str)
            && !current.is_empty()
        {
            return Err(ApiError::Conflict {
                resource: def.group_resource(),
                name: name.to_owned(),
                detail: format!("pod {name} is already assigned to node {current:?}"),
            });
        }
        let mut candidate = old.clone();
        if let Some(root) = candidate.as_object_mut() {
            let spec = root.entry("spec").or_insert_with(|| json!({}));
            if let Some(spec) = spec.as_object_mut() {
                spec.insert("nodeName".into(), Value::String(node));
            }
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = status.as_object_mut() {
                let conditions = status.entry("conditions").or_insert_with(|| json!([]));
                if let Some(list) = conditions.as_array_mut() {
                    list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                    list.push(json!({
                        "type": "PodScheduled",
                        "status": "True",
                        "lastTransitionTime": now_rfc3339(),
                    }));
                }
            }
        }
        if let Some(annotations) = binding
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        {
            with_meta(&mut candidate, |meta| {
                let target = meta.entry("annotations").or_insert_with(|| json!({}));
                if let Some(target) = target.as_object_mut() {
                    target.extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            });
        }
        let key = object_key(def, namespace, name);
        self.commit_update(def, key, old, candidate, dry_run);
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }
}

#[cfg(test)]
mod tests;
