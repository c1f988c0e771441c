//! The stand-in's state: MIGs, templates, machine types, VMs, reservations, operations, and the
//! scripted outcomes of the next calls.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// What the next bulkInsert does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BulkScript {
    /// Start what fits in the zone's capacity when that is at least minCount, else fail with
    /// `ZONE_RESOURCE_POOL_EXHAUSTED` and start nothing (the documented minCount rule).
    #[default]
    Capacity,
    /// Fail the operation with `code`, starting nothing.
    Fail(String),
    /// Start `created` VMs and still fail the operation with `code` (leftovers to roll back).
    Partial(usize, String),
}

/// What the next resize request does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ResizeScript {
    /// SUCCEEDED at once: its VMs run.
    #[default]
    Succeed,
    /// ACCEPTED for `polls` reads, then FAILED with `code` (its VMs removed).
    AcceptThenFail(u32, String),
    /// ACCEPTED for `polls` reads, then SUCCEEDED.
    AcceptThenSucceed(u32),
}

/// A managed instance of a MIG.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Managed {
    /// Instance name.
    pub name: String,
    /// Its zone.
    pub zone: String,
    /// `currentAction` (`NONE`, `CREATING`, ...).
    pub action: String,
    /// `instanceStatus`; empty while it has no VM.
    pub status: String,
    /// `lastAttempt.errors`: (code, message).
    pub errors: Vec<(String, String)>,
}

impl Managed {
    /// A managed instance with the given action and status and no errors.
    #[must_use]
    pub fn new(name: &str, zone: &str, action: &str, status: &str) -> Self {
        Self {
            name: name.to_owned(),
            zone: zone.to_owned(),
            action: action.to_owned(),
            status: status.to_owned(),
            errors: Vec::new(),
        }
    }
}

/// A resize request of a MIG.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// `resizeBy`.
    pub count: i64,
    /// Current state.
    pub state: String,
    /// Reads left before it leaves ACCEPTED.
    pub polls_left: u32,
    /// The state it ends in.
    pub end_state: String,
    /// Error code when it ends FAILED.
    pub code: String,
    /// Its instances' names.
    pub instances: Vec<String>,
}

/// A managed instance group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Mig {
    /// Name.
    pub name: String,
    /// `zones` or `regions`.
    pub kind: String,
    /// Zone or region.
    pub location: String,
    /// Instance template URL.
    pub template: String,
    /// Target size.
    pub target_size: i64,
    /// Instance name prefix.
    pub base: String,
    /// Zones of its instances.
    pub zones: Vec<String>,
    /// Managed instances.
    pub managed: Vec<Managed>,
    /// Resize requests by name.
    pub requests: BTreeMap<String, Request>,
    /// An autoscaler owns it.
    pub autoscaled: bool,
}

/// A VM outside any MIG.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vm {
    /// Name.
    pub name: String,
    /// Zone.
    pub zone: String,
    /// Status.
    pub status: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// The whole state.
#[derive(Debug, Clone, Default)]
pub struct World {
    /// Project id.
    pub project: String,
    /// MIGs.
    pub migs: Vec<Mig>,
    /// Instance templates by name: the template resource.
    pub templates: BTreeMap<String, Value>,
    /// Machine types by name.
    pub machine_types: BTreeMap<String, Value>,
    /// VMs started by bulkInsert.
    pub vms: Vec<Vm>,
    /// Reservations (resources as the API returns them).
    pub reservations: Vec<Value>,
    /// Future reservations.
    pub future_reservations: Vec<Value>,
    /// Operations by name.
    pub operations: BTreeMap<String, Value>,
    /// VMs each zone can still start (no entry: unlimited).
    pub capacity: BTreeMap<String, usize>,
    /// Next bulkInsert.
    pub bulk: BulkScript,
    /// Next resize request.
    pub resize_request: ResizeScript,
    /// Error code the next MIG resize operation finishes with.
    pub resize_error: Option<String>,
    /// Requests still to answer with HTTP 429 `rateLimitExceeded`.
    pub rate_limited: u32,
    /// Every request: `METHOD path`.
    pub log: Vec<String>,
    /// Bodies of bulkInsert requests.
    pub bulk_bodies: Vec<Value>,
    /// Bodies of resize-request inserts.
    pub resize_bodies: Vec<Value>,
    pub(crate) next_op: u64,
}

/// `https://www.googleapis.com/compute/v1/projects/<p>/<rest>`.
#[must_use]
pub fn url(project: &str, rest: &str) -> String {
    format!("https://www.googleapis.com/compute/v1/projects/{project}/{rest}")
}

impl World {
    /// An empty project.
    #[must_use]
    pub fn new(project: &str) -> Self {
        Self {
            project: project.to_owned(),
            ..Self::default()
        }
    }

    /// Adds a global instance template with `properties`.
    pub fn add_template(&mut self, name: &str, properties: Value) -> String {
        let link = url(&self.project, &format!("global/instanceTemplates/{name}"));
        self.templates.insert(
            name.to_owned(),
            json!({"kind": "compute#instanceTemplate", "name": name, "selfLink": link, "properties": properties}),
        );
        link
    }

    /// Adds a machine type as `machineTypes.get` returns it.
    pub fn add_machine_type(
        &mut self,
        name: &str,
        cpus: i64,
        memory_mb: i64,
        accelerators: &[(&str, i64)],
    ) {
        self.machine_types.insert(
            name.to_owned(),
            json!({
                "kind": "compute#machineType", "name": name, "guestCpus": cpus, "memoryMb": memory_mb,
                "architecture": "X86_64",
                "accelerators": accelerators.iter().map(|(t, n)| json!({"guestAcceleratorType": t, "guestAcceleratorCount": n})).collect::<Vec<_>>(),
            }),
        );
    }

    /// Adds a zonal MIG of `size` running instances.
    pub fn add_zonal_mig(&mut self, name: &str, zone: &str, template: &str, size: i64) {
        let mut mig = Mig {
            name: name.to_owned(),
            kind: "zones".into(),
            location: zone.to_owned(),
            template: template.to_owned(),
            base: name.to_owned(),
            zones: vec![zone.to_owned()],
            ..Mig::default()
        };
        for i in 0..size {
            mig.managed.push(Managed::new(
                &format!("{name}-{i:04}"),
                zone,
                "NONE",
                "RUNNING",
            ));
        }
        mig.target_size = size;
        self.migs.push(mig);
    }

    /// Adds a specific reservation.
    pub fn add_reservation(
        &mut self,
        name: &str,
        zone: &str,
        machine_type: &str,
        count: i64,
        in_use: i64,
    ) {
        self.reservations.push(json!({
            "kind": "compute#reservation", "name": name, "zone": url(&self.project, &format!("zones/{zone}")),
            "status": "READY", "specificReservationRequired": true,
            "specificReservation": {"count": count.to_string(), "inUseCount": in_use.to_string(),
                "instanceProperties": {"machineType": machine_type}},
        }));
    }

    pub(crate) fn operation(
        &mut self,
        scope: &str,
        kind: &str,
        error: Option<(&str, &str, i64)>,
    ) -> Value {
        self.next_op += 1;
        let name = format!("operation-{}", self.next_op);
        let location_key = if scope.starts_with("regions/") {
            "region"
        } else {
            "zone"
        };
        let mut done = json!({
            "kind": "compute#operation", "name": name, "operationType": kind, "status": "DONE",
            location_key: url(&self.project, scope),
            "selfLink": url(&self.project, &format!("{scope}/operations/{name}")),
        });
        if let Some((code, message, http)) = error {
            done["error"] = json!({"errors": [{"code": code, "message": message}]});
            done["httpErrorStatusCode"] = json!(http);
            done["httpErrorMessage"] = json!("SERVICE UNAVAILABLE");
        }
        self.operations.insert(name, done.clone());
        // The first answer is RUNNING: the client has to poll the operation to learn its end.
        let mut running = done;
        running["status"] = json!("RUNNING");
        if let Some(obj) = running.as_object_mut() {
            obj.remove("error");
            obj.remove("httpErrorStatusCode");
            obj.remove("httpErrorMessage");
        }
        running
    }

    /// The MIG named `name` in `location`.
    pub fn mig(&mut self, location: &str, name: &str) -> Option<&mut Mig> {
        self.migs
            .iter_mut()
            .find(|m| m.location == location && m.name == name)
    }
}
