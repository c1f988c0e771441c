//! Request routing and the behaviour of each endpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::world::{BulkScript, Managed, Mig, Request, ResizeScript, Vm, World, url};

type Shared = Arc<Mutex<World>>;

fn reply(status: StatusCode, body: Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The API's error body: `{"error": {code, message, status, errors: [{reason, message}]}}`.
fn error(status: StatusCode, reason: &str, message: &str) -> Response {
    let name = match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        _ => "UNKNOWN",
    };
    reply(
        status,
        json!({"error": {"code": status.as_u16(), "message": message, "status": name,
            "errors": [{"reason": reason, "domain": "global", "message": message}]}}),
    )
}

fn query(uri: &Uri, key: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mig_json(project: &str, m: &Mig) -> Value {
    let scope_key = if m.kind == "zones" { "zone" } else { "region" };
    json!({
        "kind": "compute#instanceGroupManager", "name": m.name,
        scope_key: url(project, &format!("{}/{}", m.kind, m.location)),
        "instanceTemplate": m.template, "targetSize": m.target_size, "baseInstanceName": m.base,
        "distributionPolicy": {"zones": m.zones.iter().map(|z| json!({"zone": url(project, &format!("zones/{z}"))})).collect::<Vec<_>>()},
        "status": if m.autoscaled { json!({"autoscaler": url(project, &format!("{}/{}/autoscalers/{}", m.kind, m.location, m.name))}) } else { json!({"isStable": true}) },
        "selfLink": url(project, &format!("{}/{}/instanceGroupManagers/{}", m.kind, m.location, m.name)),
    })
}

fn managed_json(project: &str, x: &Managed) -> Value {
    let mut v = json!({
        "instance": url(project, &format!("zones/{}/instances/{}", x.zone, x.name)),
        "name": x.name,
        "currentAction": x.action,
    });
    if !x.status.is_empty() {
        v["instanceStatus"] = json!(x.status);
    }
    if !x.errors.is_empty() {
        let errors: Vec<Value> = x
            .errors
            .iter()
            .map(|(c, msg)| json!({"code": c, "message": msg}))
            .collect();
        v["lastAttempt"] = json!({"errors": {"errors": errors}});
    }
    v
}

fn vm_json(project: &str, v: &Vm) -> Value {
    json!({"kind": "compute#instance", "name": v.name, "zone": url(project, &format!("zones/{}", v.zone)),
        "status": v.status, "labels": v.labels, "creationTimestamp": "2026-11-30T10:00:00.000-08:00"})
}

/// Answers every request.
pub(super) async fn handle(
    State(world): State<Shared>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let mut w = world
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = uri.path().to_owned();
    w.log.push(format!("{method} {path}"));
    if w.rate_limited > 0 {
        w.rate_limited -= 1;
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            "rateLimitExceeded",
            "Rate Limit Exceeded",
        );
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(rest) = path.strip_prefix("/compute/v1/projects/") else {
        return error(StatusCode::NOT_FOUND, "notFound", "unknown path");
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let project = w.project.clone();
    match (method.clone(), &parts[1..]) {
        (Method::GET, ["aggregated", "instanceGroupManagers"]) => {
            let mut items: BTreeMap<String, Vec<Value>> = BTreeMap::new();
            for m in &w.migs {
                items
                    .entry(format!("{}/{}", m.kind, m.location))
                    .or_default()
                    .push(mig_json(&project, m));
            }
            let items: BTreeMap<String, Value> = items
                .into_iter()
                .map(|(k, v)| (k, json!({"instanceGroupManagers": v})))
                .collect();
            reply(
                StatusCode::OK,
                json!({"kind": "compute#instanceGroupManagerAggregatedList", "items": items}),
            )
        }
        (Method::GET, [kind, location, "instanceGroupManagers", name]) => {
            match w
                .migs
                .iter()
                .find(|m| m.kind == *kind && m.location == *location && m.name == *name)
            {
                Some(m) => reply(StatusCode::OK, mig_json(&project, m)),
                None => error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    &format!(
                        "The resource 'projects/{project}/{kind}/{location}/instanceGroupManagers/{name}' was not found"
                    ),
                ),
            }
        }
        (
            _,
            [
                kind,
                location,
                "instanceGroupManagers",
                name,
                "resizeRequests",
                rest @ ..,
            ],
        ) => resize_requests(&mut w, &method, kind, location, name, rest, &body),
        (Method::POST, [kind, location, "instanceGroupManagers", name, action]) => {
            mig_action(&mut w, kind, location, name, action, &uri, &body)
        }
        (
            Method::GET,
            ["global", "instanceTemplates", name] | ["regions", _, "instanceTemplates", name],
        ) => match w.templates.get(*name) {
            Some(t) => reply(StatusCode::OK, t.clone()),
            None => error(
                StatusCode::NOT_FOUND,
                "notFound",
                &format!("instance template {name} not found"),
            ),
        },
        (Method::GET, ["zones", _, "machineTypes", name]) => match w.machine_types.get(*name) {
            Some(t) => reply(StatusCode::OK, t.clone()),
            None => error(
                StatusCode::NOT_FOUND,
                "notFound",
                &format!("The resource 'machineTypes/{name}' was not found"),
            ),
        },
        (Method::POST, [kind, location, "instances", "bulkInsert"]) => {
            bulk_insert(&mut w, kind, location, body)
        }
        (Method::GET, ["aggregated", "instances"]) => {
            let filter = query(&uri, "filter").unwrap_or_default();
            let wanted = filter
                .strip_prefix("labels.")
                .and_then(|f| f.split_once('='))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().trim_matches('"').to_owned()));
            let mut items: BTreeMap<String, Vec<Value>> = BTreeMap::new();
            for v in &w.vms {
                if wanted
                    .as_ref()
                    .is_some_and(|(k, val)| v.labels.get(k) != Some(val))
                {
                    continue;
                }
                items
                    .entry(format!("zones/{}", v.zone))
                    .or_default()
                    .push(vm_json(&project, v));
            }
            let items: BTreeMap<String, Value> = items
                .into_iter()
                .map(|(k, v)| (k, json!({"instances": v})))
                .collect();
            reply(
                StatusCode::OK,
                json!({"kind": "compute#instanceAggregatedList", "items": items}),
            )
        }
        (Method::DELETE, ["zones", zone, "instances", name]) => {
            let before = w.vms.len();
            w.vms.retain(|v| !(v.zone == *zone && v.name == *name));
            if w.vms.len() == before {
                return error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    &format!("instance {name} not found"),
                );
            }
            let op = w.operation(&format!("zones/{zone}"), "delete", None);
            reply(StatusCode::OK, op)
        }
        (Method::GET, ["aggregated", "reservations"]) => {
            let items = scoped(&w.reservations, "reservations");
            reply(
                StatusCode::OK,
                json!({"kind": "compute#reservationAggregatedList", "items": items}),
            )
        }
        (Method::GET, ["aggregated", "futureReservations"]) => {
            let items = scoped(&w.future_reservations, "futureReservations");
            reply(
                StatusCode::OK,
                json!({"kind": "compute#futureReservationsAggregatedListResponse", "items": items}),
            )
        }
        (Method::GET, [_, _, "operations", name]) => match w.operations.get(*name) {
            Some(op) => reply(StatusCode::OK, op.clone()),
            None => error(
                StatusCode::NOT_FOUND,
                "notFound",
                &format!("operation {name} not found"),
            ),
        },
        _ => error(
            StatusCode::NOT_FOUND,
            "notFound",
            &format!("the stand-in does not serve {method} {path}"),
        ),
    }
}

/// Groups resources by their `zone` URL into aggregated-list items.
fn scoped(resources: &[Value], field: &str) -> BTreeMap<String, Value> {
    let mut items: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in resources {
        let zone = r["zone"]
            .as_str()
            .unwrap_or_default()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        items
            .entry(format!("zones/{zone}"))
            .or_default()
            .push(r.clone());
    }
    items
        .into_iter()
        .map(|(k, v)| (k, json!({ field: v })))
        .collect()
}

fn next_name(m: &Mig, zone: &str) -> String {
    (0..)
        .map(|i| format!("{}-{i:04}", m.base))
        .find(|n| !m.managed.iter().any(|x| &x.name == n && x.zone == zone))
        .unwrap_or_default()
}

fn mig_action(
    w: &mut World,
    kind: &str,
    location: &str,
    name: &str,
    action: &str,
    uri: &Uri,
    body: &Value,
) -> Response {
    let project = w.project.clone();
    let scope = format!("{kind}/{location}");
    let resize_error = w.resize_error.take();
    let Some(m) = w.mig(location, name) else {
        return error(
            StatusCode::NOT_FOUND,
            "notFound",
            &format!("instance group manager {name} not found"),
        );
    };
    match action {
        "resize" => {
            let Some(size) = query(uri, "size").and_then(|s| s.parse::<i64>().ok()) else {
                return error(StatusCode::BAD_REQUEST, "invalid", "size is required");
            };
            m.target_size = size;
            let zone = m.zones.first().cloned().unwrap_or_default();
            while i64::try_from(m.managed.len()).unwrap_or(0) < size {
                let n = next_name(m, &zone);
                let mut vm = Managed::new(&n, &zone, "NONE", "RUNNING");
                // The MIG keeps the instance and retries; its last attempt carries the error.
                if let Some(code) = &resize_error {
                    vm.action = "CREATING".into();
                    vm.status = String::new();
                    vm.errors = vec![(
                        code.clone(),
                        format!(
                            "The zone '{zone}' does not have enough resources available to fulfill the request."
                        ),
                    )];
                }
                m.managed.push(vm);
            }
            while i64::try_from(m.managed.len()).unwrap_or(0) > size {
                m.managed.pop();
            }
            let op = w.operation(&scope, "compute.instanceGroupManagers.resize", None);
            reply(StatusCode::OK, op)
        }
        "listManagedInstances" => {
            let list: Vec<Value> = m
                .managed
                .iter()
                .map(|x| managed_json(&project, x))
                .collect();
            reply(StatusCode::OK, json!({"managedInstances": list}))
        }
        "deleteInstances" => {
            let names: Vec<String> = body["instances"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| {
                            v.as_str()
                                .map(|s| s.rsplit('/').next().unwrap_or(s).to_owned())
                        })
                        .collect()
                })
                .unwrap_or_default();
            let before = m.managed.len();
            m.managed.retain(|x| !names.contains(&x.name));
            m.target_size -= i64::try_from(before - m.managed.len()).unwrap_or(0);
            let op = w.operation(
                &scope,
                "compute.instanceGroupManagers.deleteInstances",
                None,
            );
            reply(StatusCode::OK, op)
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "notFound",
            &format!("the stand-in does not serve MIG action {action}"),
        ),
    }
}

fn resize_requests(
    w: &mut World,
    method: &Method,
    kind: &str,
    location: &str,
    name: &str,
    rest: &[&str],
    body: &Value,
) -> Response {
    let scope = format!("{kind}/{location}");
    let script = w.resize_request.clone();
    if rest.is_empty() && *method == Method::POST {
        w.resize_bodies.push(body.clone());
    }
    let Some(m) = w.mig(location, name) else {
        return error(
            StatusCode::NOT_FOUND,
            "notFound",
            &format!("instance group manager {name} not found"),
        );
    };
    match (method.clone(), rest) {
        (Method::POST, []) => {
            if m.autoscaled {
                return error(
                    StatusCode::BAD_REQUEST,
                    "conditionNotMet",
                    "Resize requests are not supported for a MIG with an autoscaler",
                );
            }
            let request = body["name"].as_str().unwrap_or_default().to_owned();
            let count = body["resizeBy"].as_i64().unwrap_or(0);
            if m.requests.contains_key(&request) {
                return error(
                    StatusCode::CONFLICT,
                    "alreadyExists",
                    &format!("resize request {request} already exists"),
                );
            }
            let zone = m.zones.first().cloned().unwrap_or_default();
            let (state, polls, end, code) = match &script {
                ResizeScript::Succeed => ("SUCCEEDED", 0, "SUCCEEDED", String::new()),
                ResizeScript::AcceptThenFail(p, c) => ("ACCEPTED", *p, "FAILED", c.clone()),
                ResizeScript::AcceptThenSucceed(p) => ("ACCEPTED", *p, "SUCCEEDED", String::new()),
            };
            let mut names = Vec::new();
            for _ in 0..count {
                let n = next_name(m, &zone);
                let (action, status) = if state == "SUCCEEDED" {
                    ("NONE", "RUNNING")
                } else {
                    ("CREATING", "")
                };
                m.managed.push(Managed::new(&n, &zone, action, status));
                names.push(n);
            }
            m.target_size += count;
            m.requests.insert(
                request,
                Request {
                    count,
                    state: state.into(),
                    polls_left: polls,
                    end_state: end.into(),
                    code,
                    instances: names,
                },
            );
            let op = w.operation(
                &scope,
                "compute.instanceGroupManagerResizeRequests.insert",
                None,
            );
            reply(StatusCode::OK, op)
        }
        (Method::GET, [request]) => {
            let Some(r) = m.requests.get_mut(*request) else {
                return error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    &format!("resize request {request} not found"),
                );
            };
            if r.state == "ACCEPTED" {
                if r.polls_left == 0 {
                    r.state = r.end_state.clone();
                    let names = r.instances.clone();
                    let failed = r.state == "FAILED";
                    let count = r.count;
                    if failed {
                        // GCE removes the VMs a failed request had created.
                        m.managed.retain(|x| !names.contains(&x.name));
                        m.target_size -= count;
                    } else {
                        for x in m.managed.iter_mut().filter(|x| names.contains(&x.name)) {
                            x.action = "NONE".into();
                            x.status = "RUNNING".into();
                        }
                    }
                } else {
                    r.polls_left -= 1;
                }
            }
            let Some(r) = m.requests.get(*request) else {
                return error(StatusCode::NOT_FOUND, "notFound", "gone");
            };
            let mut v = json!({"kind": "compute#instanceGroupManagerResizeRequest", "name": request, "resizeBy": r.count, "state": r.state});
            if r.state == "FAILED" {
                v["status"] = json!({"error": {"errors": [{"code": r.code, "message": "The zone does not have enough resources available to fulfill the request."}]}});
            } else if r.state == "ACCEPTED" {
                v["status"] = json!({"lastAttempt": {"error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "waiting for capacity"}]}}});
            }
            reply(StatusCode::OK, v)
        }
        (Method::POST, [request, "cancel"]) => {
            let Some(r) = m.requests.get_mut(*request) else {
                return error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    &format!("resize request {request} not found"),
                );
            };
            if r.state != "ACCEPTED" {
                return error(
                    StatusCode::BAD_REQUEST,
                    "conditionNotMet",
                    "only an ACCEPTED resize request can be cancelled",
                );
            }
            r.state = "CANCELLED".into();
            let names = r.instances.clone();
            let count = r.count;
            m.managed.retain(|x| !names.contains(&x.name));
            m.target_size -= count;
            let op = w.operation(
                &scope,
                "compute.instanceGroupManagerResizeRequests.cancel",
                None,
            );
            reply(StatusCode::OK, op)
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "notFound",
            "unknown resize request call",
        ),
    }
}

fn bulk_insert(w: &mut World, kind: &str, location: &str, body: Value) -> Response {
    let scope = format!("{kind}/{location}");
    w.bulk_bodies.push(body.clone());
    let names: Vec<String> = body["perInstanceProperties"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    let count = body["count"]
        .as_str()
        .and_then(|c| c.parse::<usize>().ok())
        .or_else(|| body["count"].as_u64().and_then(|c| usize::try_from(c).ok()))
        .unwrap_or(names.len());
    let min = body["minCount"]
        .as_str()
        .and_then(|c| c.parse::<usize>().ok())
        .or_else(|| {
            body["minCount"]
                .as_u64()
                .and_then(|c| usize::try_from(c).ok())
        })
        .unwrap_or(count);
    let template_name = body["sourceInstanceTemplate"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let Some(template) = w.templates.get(&template_name).cloned() else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid",
            &format!("instance template {template_name} not found"),
        );
    };
    let mut labels: BTreeMap<String, String> =
        serde_json::from_value(template["properties"]["labels"].clone()).unwrap_or_default();
    labels.extend(
        serde_json::from_value::<BTreeMap<String, String>>(
            body["instanceProperties"]["labels"].clone(),
        )
        .unwrap_or_default(),
    );
    let zone = if kind == "zones" {
        location.to_owned()
    } else {
        body["locationPolicy"]["locations"]
            .as_object()
            .and_then(|o| o.keys().next().cloned())
            .unwrap_or_default()
            .trim_start_matches("zones/")
            .to_owned()
    };
    let script = std::mem::take(&mut w.bulk);
    let (start, failure) = match script {
        BulkScript::Capacity => {
            let available = w.capacity.get(&zone).copied().unwrap_or(usize::MAX);
            if available >= min {
                (count.min(available), None)
            } else {
                (0, Some("ZONE_RESOURCE_POOL_EXHAUSTED".to_owned()))
            }
        }
        BulkScript::Fail(code) => (0, Some(code)),
        BulkScript::Partial(n, code) => (n.min(count), Some(code)),
    };
    if let Some(left) = w.capacity.get_mut(&zone) {
        *left = left.saturating_sub(start);
    }
    for n in names.iter().take(start) {
        w.vms.push(Vm {
            name: n.clone(),
            zone: zone.clone(),
            status: "RUNNING".into(),
            labels: labels.clone(),
        });
    }
    let message = match failure.as_deref() {
        Some(c) if c.contains("QUOTA") => {
            "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 8.0 in region us-central1.".to_owned()
        }
        Some(_) => format!(
            "The zone 'projects/{}/zones/{zone}' does not have enough resources available to fulfill the request.",
            w.project
        ),
        None => String::new(),
    };
    let http = if failure.as_deref().is_some_and(|c| c.contains("QUOTA")) {
        403
    } else {
        503
    };
    let op = w.operation(
        &scope,
        "bulkInsert",
        failure.as_deref().map(|c| (c, message.as_str(), http)),
    );
    reply(StatusCode::OK, op)
}
