//! ProvisioningRequests and CapacityBuffers read as upstream defines them:
//! sizes, classes, conditions and the errors a bad object gets. (Placement
//! itself is pinned by the scenario cases 130–149.)

use dra_plan::buffers::{BufferOutcome, CapacityBufferReport};
use dra_plan::provreq::{ProvisioningRequestReport, RequestOutcome, RetryBackoff};
use dra_plan::{PlanOptions, PlanReport, plan};
use dra_sim::{FeatureGates, Loader};

const NODE: &str = "
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  capacity: {cpu: '8', memory: 32Gi, pods: '110'}
  allocatable: {cpu: '8', memory: 32Gi, pods: '110'}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: chunk, namespace: ml}
template:
  spec:
    containers:
    - name: c
      image: x
      resources: {requests: {cpu: '1', memory: 1Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: x, resources: {requests: {cpu: 100m}}}
";

fn run(yaml: &str, now: Option<&str>) -> PlanReport {
    let options = PlanOptions {
        now: now.map(|n| n.parse().expect("timestamp")),
        ..PlanOptions::default()
    };
    run_with(yaml, &options)
}

/// `yaml` after [`NODE`], planned with `options`.
fn run_with(yaml: &str, options: &PlanOptions) -> PlanReport {
    let mut loader = Loader::new();
    loader.keep_kind("dra-autoscaler.io", "NodeGroup");
    for (group, kind) in dra_plan::templates::STAND_IN_KINDS {
        loader.keep_kind(group, kind);
    }
    loader
        .add_yaml("test.yaml", &format!("{NODE}---\n{yaml}"))
        .expect("test YAML loads");
    plan(loader.finish().objects, FeatureGates::default(), options)
}

fn buffer(spec: &str) -> CapacityBufferReport {
    let yaml = format!(
        "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {{name: b, namespace: ml}}\nspec:\n{spec}"
    );
    let report = run(&yaml, None);
    assert_eq!(report.capacity_buffers.len(), 1, "{report:?}");
    report.capacity_buffers[0].clone()
}

#[test]
fn buffer_percentage_rounds_up_and_the_larger_size_wins() {
    // 10 replicas x 15% = 1.5 -> 2 chunks; replicas 1 is smaller.
    let b = buffer(
        "  scalableRef: {apiGroup: apps, kind: Deployment, name: web}\n  percentage: 15\n  replicas: 1\n",
    );
    assert_eq!(b.replicas, 2);
    assert_eq!(b.pod_template.as_deref(), Some("Deployment web"));
    // replicas 3 beats 10 x 15% = 2.
    let b = buffer(
        "  scalableRef: {apiGroup: apps, kind: Deployment, name: web}\n  percentage: 15\n  replicas: 3\n",
    );
    assert_eq!(b.replicas, 3);
}

#[test]
fn buffer_limits_cap_the_size_or_give_it() {
    // 5 replicas of 1 CPU capped by 2500m CPU -> 2.
    let b = buffer("  podTemplateRef: {name: chunk}\n  replicas: 5\n  limits: {cpu: 2500m}\n");
    assert_eq!(b.replicas, 2);
    // No replicas: as many as fit, the tightest resource deciding (3Gi -> 3).
    let b = buffer("  podTemplateRef: {name: chunk}\n  limits: {cpu: '6', memory: 3Gi}\n");
    assert_eq!(b.replicas, 3);
    assert_eq!(b.outcome, BufferOutcome::Ready);
    assert_eq!(b.existing, 3);
}

#[test]
fn bad_buffers_say_which_field_and_stop_nothing_else() {
    let cases = [
        (
            "  podTemplateRef: {name: missing}\n  replicas: 1\n",
            "CapacityBuffer ml/b: PodTemplate ml/missing not found",
        ),
        (
            "  podTemplateRef: {name: chunk}\n  scalableRef: {kind: Deployment, name: web}\n  replicas: 1\n",
            "podTemplateRef and scalableRef are both set",
        ),
        (
            "  podTemplateRef: {name: chunk}\n",
            "replicas, percentage (with scalableRef) or limits must give a size",
        ),
        (
            "  scalableRef: {apiGroup: apps, kind: DaemonSet, name: web}\n  replicas: 1\n",
            "scalableRef kind DaemonSet",
        ),
        (
            "  podTemplateRef: {name: chunk}\n  replicas: many\n",
            "field spec.replicas: expected a non-negative integer",
        ),
    ];
    for (spec, expected) in cases {
        let b = buffer(spec);
        assert_eq!(b.outcome, BufferOutcome::Invalid, "{spec}");
        assert!(
            b.reasons.iter().any(|r| r.contains(expected)),
            "{spec}: {:?} lacks {expected:?}",
            b.reasons
        );
    }
    let b = buffer(
        "  provisioningStrategy: example.com/other\n  podTemplateRef: {name: chunk}\n  replicas: 1\n",
    );
    assert_eq!(b.outcome, BufferOutcome::NotHandled);
    assert_eq!(b.replicas, 0);
}

fn request(class: &str, count: u32, status: &str, now: Option<&str>) -> ProvisioningRequestReport {
    let yaml = format!(
        "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {{name: r, namespace: ml, creationTimestamp: '2026-12-01T00:00:00Z'}}\nspec:\n  provisioningClassName: {class}\n  podSets:\n  - podTemplateRef: {{name: chunk}}\n    count: {count}\n{status}"
    );
    let report = run(&yaml, now);
    assert_eq!(report.provisioning_requests.len(), 1, "{report:?}");
    report.provisioning_requests[0].clone()
}

const ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
const CHECK: &str = "check-capacity.autoscaling.x-k8s.io";

#[test]
fn atomic_request_without_room_is_not_found_and_retried() {
    // 9 pods of 1 CPU, 8 CPU and no node group: none is placed.
    let r = request(ATOMIC, 9, "", None);
    assert_eq!(r.outcome, RequestOutcome::CapacityNotFound);
    let c = r.condition.expect("condition");
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("Provisioned", "False", "CapacityIsNotFound")
    );
    assert_eq!(r.pod_count, 9);
}

#[test]
fn check_capacity_expires_after_seven_days_unprovisioned() {
    let r = request(CHECK, 9, "", Some("2026-12-08T00:00:01Z"));
    assert_eq!(r.outcome, RequestOutcome::Expired);
    let c = r.condition.expect("condition");
    assert_eq!((c.type_.as_str(), c.reason.as_str()), ("Failed", "Expired"));
    let r = request(CHECK, 9, "", Some("2026-12-07T23:59:59Z"));
    assert_eq!(r.outcome, RequestOutcome::CapacityNotFound);
}

#[test]
fn check_capacity_with_no_retry_fails_instead_of_retrying() {
    let yaml = "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: r, namespace: ml}\nspec:\n  provisioningClassName: check-capacity.autoscaling.x-k8s.io\n  parameters: {noRetry: 'true'}\n  podSets:\n  - podTemplateRef: {name: chunk}\n    count: 9\n";
    let r = &run(yaml, None).provisioning_requests[0];
    assert_eq!(r.outcome, RequestOutcome::Failed);
    let c = r.condition.as_ref().expect("condition");
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("Failed", "True", "CapacityIsNotFound")
    );
    // When it fits, noRetry changes nothing.
    let fits = yaml.replace("count: 9", "count: 8");
    assert_eq!(
        run(&fits, None).provisioning_requests[0].outcome,
        RequestOutcome::Provisioned
    );
}

const PROVISIONED_AT_10: &str = "status:\n  conditions:\n  - {type: Provisioned, status: 'True', reason: CapacityIsFound, message: m, lastTransitionTime: '2026-12-01T10:00:00Z'}\n";

#[test]
fn booking_lasts_ten_minutes_after_provisioned() {
    let r = request(CHECK, 2, PROVISIONED_AT_10, Some("2026-12-01T10:10:00Z"));
    assert_eq!((r.outcome, r.booked), (RequestOutcome::Booked, 2));
    let r = request(CHECK, 2, PROVISIONED_AT_10, Some("2026-12-01T10:10:01Z"));
    assert_eq!(r.outcome, RequestOutcome::BookingExpired);
    assert_eq!(
        r.condition.map(|c| c.reason),
        Some("CapacityReservationTimeExpired".to_string())
    );
    // Without a clock, a booking never expires.
    let r = request(ATOMIC, 2, PROVISIONED_AT_10, None);
    assert_eq!(r.outcome, RequestOutcome::Booked);
}

#[test]
fn any_served_request_expires_after_seven_days_unprovisioned() {
    // Upstream's refresh fails every supported class, not only check-capacity.
    let r = request(ATOMIC, 9, "", Some("2026-12-08T00:00:01Z"));
    assert_eq!(r.outcome, RequestOutcome::Expired);
    let c = r.condition.expect("condition");
    assert_eq!((c.type_.as_str(), c.reason.as_str()), ("Failed", "Expired"));
}

#[test]
fn a_request_that_does_not_fit_says_why_in_its_condition() {
    let r = request(ATOMIC, 9, "", None);
    let c = r.condition.expect("condition");
    assert!(
        c.message
            .starts_with("Capacity is not found, CA will try to find it later."),
        "{}",
        c.message
    );
    assert!(c.message.contains("Why: "), "{}", c.message);
    let first = r.reasons.first().expect("a reason");
    assert!(
        c.message.contains(first.as_str()),
        "{} lacks {first}",
        c.message
    );
}

/// A pod consuming request `r`, bound to node-a when `bound`.
fn consumer(name: &str, bound: bool) -> String {
    let node = if bound { "  nodeName: node-a\n" } else { "" };
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\n  annotations: {{autoscaling.x-k8s.io/consume-provisioning-request: r}}\nspec:\n{node}  containers:\n  - {{name: c, image: x, resources: {{requests: {{cpu: '1'}}}}}}\n"
    )
}

#[test]
fn the_booking_ends_once_every_pod_is_scheduled() {
    // As upstream's bookCapacity: scheduled consumers >= the pods asked for
    // set BookingExpired (CapacityBookingConsumed); fewer keep the rest booked.
    let booked = format!("{PROVISIONED_AT_10}{}", consumer("w-0", true));
    let r = request(CHECK, 2, &booked, Some("2026-12-01T10:05:00Z"));
    assert_eq!((r.outcome, r.booked), (RequestOutcome::Booked, 1));
    assert_eq!(r.booked_nodes, ["node-a"]);
    // A pending consumer waits for the booked room: it is booked for, and
    // never planned (no scale-up for it).
    let pending_too = format!("{booked}{}", consumer("w-1", false));
    let report = run(
        &format!(
            "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {{name: r, namespace: ml}}\nspec:\n  provisioningClassName: {CHECK}\n  podSets:\n  - podTemplateRef: {{name: chunk}}\n    count: 2\n{pending_too}"
        ),
        Some("2026-12-01T10:05:00Z"),
    );
    let r = &report.provisioning_requests[0];
    assert_eq!((r.outcome, r.booked), (RequestOutcome::Booked, 1));
    assert!(
        report.scale_ups.is_empty() && report.pod_groups.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.pods.len(), 1, "{report:?}");
    assert_eq!(report.pods[0].pod, "ml/w-1");
    assert!(
        report.pods[0].reasons[0].contains("consumes ProvisioningRequest ml/r"),
        "{:?}",
        report.pods[0].reasons
    );
    let all = format!("{booked}{}", consumer("w-1", true));
    let r = request(CHECK, 2, &all, Some("2026-12-01T10:05:00Z"));
    assert_eq!(r.outcome, RequestOutcome::BookingExpired);
    let c = r.condition.expect("condition");
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("BookingExpired", "True", "CapacityBookingConsumed")
    );
}

#[test]
fn finished_unknown_and_broken_requests() {
    let failed = "status:\n  conditions:\n  - {type: Failed, status: 'True', reason: CapacityIsNotFound, message: m, lastTransitionTime: '2026-12-01T10:00:00Z'}\n";
    assert_eq!(
        request(ATOMIC, 2, failed, None).outcome,
        RequestOutcome::Finished
    );
    let r = request("queued-provisioning.gke.io", 2, "", None);
    assert_eq!(r.outcome, RequestOutcome::NotHandled);
    assert!(r.condition.is_none());

    let yaml = "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: r, namespace: ml}\nspec:\n  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io\n  podSets:\n  - podTemplateRef: {name: chunk}\n    count: 1\n  - podTemplateRef: {name: ppt-gone}\n    count: 2\n";
    let report = run(yaml, None);
    let r = &report.provisioning_requests[0];
    assert_eq!(r.outcome, RequestOutcome::Invalid);
    let c = r.condition.as_ref().expect("condition");
    assert_eq!(
        (c.type_.as_str(), c.reason.as_str()),
        ("Failed", "FailedToCreatePods")
    );
    assert!(
        c.message.contains(
            "ProvisioningRequest ml/r: spec.podSets[1]: PodTemplate ml/ppt-gone not found"
        ),
        "{}",
        c.message
    );
    // Nothing of it is planned.
    assert!(report.pods.is_empty() && report.pod_groups.is_empty());
}

const CPU_GROUP: &str = "
apiVersion: dra-autoscaler.io/v1alpha1
kind: NodeGroup
metadata: {name: cpu-8}
spec:
  provider: fake
  providerID: asg-cpu-8
  minSize: 0
  maxSize: 10
  capacityType: on-demand
  pricePerHour: 1
  template:
    capacity: {cpu: '8', memory: 32Gi, pods: '110'}
";

/// One request of `class` with parameter `processorInstance` set to `requested` (none when
/// empty), 2 pods that fit, planned by an autoscaler with `--check-capacity-processor-instance
/// instance`.
fn for_instance(instance: &str, class: &str, requested: &str) -> ProvisioningRequestReport {
    for_instance_with(instance, class, requested, 2).provisioning_requests[0].clone()
}

/// [`for_instance`] for `count` pods, beside a node group that could add nodes.
fn for_instance_with(instance: &str, class: &str, requested: &str, count: u32) -> PlanReport {
    let parameters = if requested.is_empty() {
        String::new()
    } else {
        format!("  parameters: {{processorInstance: {requested}}}\n")
    };
    let yaml = format!(
        "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {{name: r, namespace: ml}}\nspec:\n  provisioningClassName: {class}\n{parameters}  podSets:\n  - podTemplateRef: {{name: chunk}}\n    count: {count}\n"
    );
    let options = PlanOptions {
        check_capacity_processor_instance: instance.to_string(),
        ..PlanOptions::default()
    };
    run_with(&format!("{CPU_GROUP}---\n{yaml}"), &options)
}

#[test]
fn the_check_capacity_processor_instance_picks_the_requests_served_as_upstream_does() {
    // cluster-autoscaler's SupportedProvisioningClass (provisioningrequest/supported_classes.go).
    fn served(instance: &str, class: &str, requested: &str) -> bool {
        let outcome = for_instance(instance, class, requested).outcome;
        assert!(
            matches!(
                outcome,
                RequestOutcome::Provisioned | RequestOutcome::NotHandled
            ),
            "{instance} {class} {requested}: {outcome:?}"
        );
        outcome == RequestOutcome::Provisioned
    }
    // No instance set: requests that name none are served; the parameter means nothing to
    // best-effort-atomic requests.
    assert!(served("", CHECK, ""));
    assert!(served("", ATOMIC, ""));
    assert!(served("", ATOMIC, "a"));
    assert!(!served("", CHECK, "a"));
    // Instance `a`: check-capacity requests naming it, or (deprecated) whose class is `a`
    // followed by the check-capacity class; never best-effort-atomic ones.
    assert!(served("a", CHECK, "a"));
    assert!(served("a", &format!("a{CHECK}"), ""));
    assert!(!served("a", CHECK, "b"));
    assert!(!served("a", CHECK, ""));
    assert!(!served("a", &format!("a{CHECK}"), "a"));
    assert!(!served("a", &format!("b{CHECK}"), ""));
    assert!(!served("a", ATOMIC, ""));
    assert!(!served("a", ATOMIC, "a"));

    // The prefixed class is served as check-capacity: 9 pods on 8 CPUs are not found
    // although the group could add nodes, where a best-effort-atomic request scales up.
    let prefixed = for_instance_with("a", &format!("a{CHECK}"), "", 9);
    let r = &prefixed.provisioning_requests[0];
    assert_eq!(r.provisioning_class, format!("a{CHECK}"));
    assert_eq!(r.outcome, RequestOutcome::CapacityNotFound);
    assert!(prefixed.scale_ups.is_empty(), "{:?}", prefixed.scale_ups);
    let atomic = for_instance_with("", ATOMIC, "", 9);
    assert_eq!(
        atomic.provisioning_requests[0].outcome,
        RequestOutcome::Provisioned
    );
    assert!(!atomic.scale_ups.is_empty());
    // A request left to another instance gets no condition and says why.
    let other = for_instance("a", CHECK, "b");
    assert_eq!(other.outcome, RequestOutcome::NotHandled);
    assert!(other.condition.is_none());
    assert_eq!(
        other.reasons,
        [r#"parameter processorInstance="b" names another autoscaler instance (this one is "a")"#]
    );
    let atomic = for_instance("a", ATOMIC, "");
    assert_eq!(
        atomic.reasons,
        [format!(
            r#"provisioning class {ATOMIC} is not served by check-capacity processor instance "a""#
        )]
    );
}

/// A best-effort-atomic request for 9 pods (no room: 8 CPUs, no group) whose
/// `Provisioned=False` last changed at `since` (none when empty), planned at
/// `now` with `backoff`.
fn not_found_since(since: &str, now: &str, backoff: &RetryBackoff) -> ProvisioningRequestReport {
    let conditions = if since.is_empty() {
        String::new()
    } else {
        format!(
            "  - {{type: Provisioned, status: 'False', reason: CapacityIsNotFound, message: m, lastTransitionTime: '{since}'}}\n"
        )
    };
    with_conditions(&conditions, UID, now, backoff)
}

const UID: &str = "6a1f0e2c-0000-4000-8000-000000000001";

/// That request (`uid` none when empty) with `Accepted` and `conditions`.
fn with_conditions(
    conditions: &str,
    uid: &str,
    now: &str,
    backoff: &RetryBackoff,
) -> ProvisioningRequestReport {
    let uid = if uid.is_empty() {
        String::new()
    } else {
        format!(", uid: {uid}")
    };
    let yaml = format!(
        "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {{name: r, namespace: ml{uid}, creationTimestamp: '2026-12-01T09:00:00Z'}}\nspec:\n  provisioningClassName: {ATOMIC}\n  podSets:\n  - podTemplateRef: {{name: chunk}}\n    count: 9\nstatus:\n  conditions:\n  - {{type: Accepted, status: 'True', reason: Accepted, message: m, lastTransitionTime: '2026-12-01T09:00:00Z'}}\n{conditions}"
    );
    let options = PlanOptions {
        now: Some(now.parse().expect("timestamp")),
        provisioning_request_backoff: backoff.clone(),
        ..PlanOptions::default()
    };
    let report = run_with(&yaml, &options);
    assert_eq!(report.provisioning_requests.len(), 1, "{report:?}");
    report.provisioning_requests[0].clone()
}

#[test]
fn a_request_not_found_waits_out_its_backoff_before_it_is_tried_again() {
    // cluster-autoscaler's IsAvailableForProvisioning (processors/provreq/injector.go):
    // Provisioned=False is retried once lastTransitionTime + backoff is strictly before now.
    let fresh = RetryBackoff::default();
    let first = not_found_since("", "2026-12-01T10:00:00Z", &fresh);
    assert_eq!(first.outcome, RequestOutcome::CapacityNotFound);
    assert!(!first.retried, "a first try is not a retry");

    let waiting = not_found_since("2026-12-01T10:00:00Z", "2026-12-01T10:01:00Z", &fresh);
    assert_eq!(waiting.outcome, RequestOutcome::RetryLater);
    assert!(
        waiting.condition.is_none(),
        "nothing is written while it waits"
    );
    assert!(waiting.pods.is_empty(), "its pods are not planned");
    assert_eq!(waiting.pod_count, 9);
    assert_eq!(
        waiting.retry_at,
        Some("2026-12-01T10:01:00Z".parse().expect("timestamp"))
    );
    assert_eq!(
        waiting.reasons,
        [
            "Provisioned=False since 2026-12-01T10:00:00Z: tried again after 2026-12-01T10:01:00Z (retry backoff 1m, doubled by each try up to the maximum)"
        ]
    );

    let retried = not_found_since("2026-12-01T10:00:00Z", "2026-12-01T10:01:01Z", &fresh);
    assert_eq!(retried.outcome, RequestOutcome::CapacityNotFound);
    assert!(retried.retried);
    assert_eq!(retried.uid, "6a1f0e2c-0000-4000-8000-000000000001");
    assert_eq!(
        retried.condition.map(|c| (c.type_, c.status, c.reason)),
        Some((
            "Provisioned".to_string(),
            "False".to_string(),
            "CapacityIsNotFound".to_string()
        ))
    );
}

#[test]
fn each_retry_doubles_the_backoff_up_to_the_maximum() {
    // Upstream stamps Provisioned=False anew at every try and doubles the backoff kept
    // for the request's UID: waits of 1m, 2m, 4m, 8m, then 10m (the default maximum).
    let mut backoff = RetryBackoff::default();
    let mut since: k8s_openapi::jiff::Timestamp = "2026-12-01T10:00:00Z".parse().expect("t");
    let mut waits = Vec::new();
    for _ in 0..6 {
        // Find the first whole second at which it is tried again.
        let mut now = since;
        let report = loop {
            now += k8s_openapi::jiff::SignedDuration::from_secs(1);
            let r = not_found_since(&since.to_string(), &now.to_string(), &backoff);
            if r.outcome != RequestOutcome::RetryLater {
                break r;
            }
        };
        assert!(report.retried, "{report:?}");
        waits.push((now - since).get_seconds() - 1);
        backoff.record([&report]);
        since = now;
    }
    assert_eq!(waits, [60, 120, 240, 480, 600, 600]);

    // Seen provisioned or failed, the request's backoff is forgotten.
    for seen in [
        "  - {type: Provisioned, status: 'True', reason: CapacityIsFound, message: m, lastTransitionTime: '2026-12-01T11:00:00Z'}\n",
        "  - {type: Failed, status: 'True', reason: Expired, message: m, lastTransitionTime: '2026-12-01T11:00:00Z'}\n",
    ] {
        let mut remembered = backoff.clone();
        assert_eq!(remembered.len(), 1);
        let r = with_conditions(seen, UID, "2026-12-01T11:00:01Z", &remembered);
        remembered.record([&r]);
        assert!(
            remembered.is_empty(),
            "{:?} keeps {remembered:?}",
            r.outcome
        );
    }
}

#[test]
fn the_backoff_flags_set_the_first_and_longest_wait() {
    let backoff = RetryBackoff::new(
        k8s_openapi::jiff::SignedDuration::from_secs(30),
        k8s_openapi::jiff::SignedDuration::from_secs(45),
        1000,
    );
    let r = not_found_since("2026-12-01T10:00:00Z", "2026-12-01T10:00:30Z", &backoff);
    assert_eq!(r.outcome, RequestOutcome::RetryLater);
    let r = not_found_since("2026-12-01T10:00:00Z", "2026-12-01T10:00:31Z", &backoff);
    assert!(r.retried);
    let mut backoff = backoff;
    backoff.record([&r]);
    assert_eq!(
        backoff.wait(UID),
        k8s_openapi::jiff::SignedDuration::from_secs(45),
        "doubled, capped at the maximum"
    );
}

#[test]
fn without_a_uid_the_backoff_is_kept_by_namespace_and_name() {
    let since = "  - {type: Provisioned, status: 'False', reason: CapacityIsNotFound, message: m, lastTransitionTime: '2026-12-01T10:00:00Z'}\n";
    let mut backoff = RetryBackoff::default();
    let r = with_conditions(since, "", "2026-12-01T10:01:01Z", &backoff);
    assert!(r.retried && r.uid.is_empty(), "{r:?}");
    assert_eq!(r.backoff_key(), "ml/r");
    backoff.record([&r]);
    // Stamped anew at 10:01:01 and now waiting 2m: not due at 10:03:01.
    let stamped = since.replace("10:00:00", "10:01:01");
    let r = with_conditions(&stamped, "", "2026-12-01T10:03:01Z", &backoff);
    assert_eq!(r.outcome, RequestOutcome::RetryLater);
    assert_eq!(r.retry_at, Some("2026-12-01T10:03:01Z".parse().expect("t")));
}

#[test]
fn a_waiting_request_still_expires_and_an_unknown_provisioned_is_never_tried() {
    // Upstream's refresh fails a request unprovisioned 7 days after creation, tried or not.
    let r = not_found_since(
        "2026-12-08T08:59:30Z",
        "2026-12-08T09:00:01Z",
        &RetryBackoff::default(),
    );
    assert_eq!(r.outcome, RequestOutcome::Expired);
    assert_eq!(
        r.condition.map(|c| (c.type_, c.reason)),
        Some(("Failed".to_string(), "Expired".to_string()))
    );
    // IsAvailableForProvisioning: Provisioned neither True nor False is never injected.
    let yaml = format!(
        "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {{name: r, namespace: ml}}\nspec:\n  provisioningClassName: {ATOMIC}\n  podSets:\n  - podTemplateRef: {{name: chunk}}\n    count: 1\nstatus:\n  conditions:\n  - {{type: Provisioned, status: Unknown, reason: Pending, message: m, lastTransitionTime: '2026-12-01T10:00:00Z'}}\n"
    );
    let report = run(&yaml, Some("2026-12-02T00:00:00Z"));
    let r = &report.provisioning_requests[0];
    assert_eq!(r.outcome, RequestOutcome::NotHandled);
    assert!(r.condition.is_none());
    assert_eq!(
        r.reasons,
        [
            r#"condition Provisioned has status "Unknown": only a request without it or with Provisioned=False is tried"#
        ]
    );
    assert!(report.pods.is_empty(), "{:?}", report.pods);
    // Without a clock nothing says wait: the request is tried.
    let yaml = yaml
        .replace(
            "status: Unknown, reason: Pending",
            "status: 'False', reason: CapacityIsNotFound",
        )
        .replace("count: 1", "count: 9");
    let r = &run(&yaml, None).provisioning_requests[0];
    assert!(
        r.retried && r.outcome == RequestOutcome::CapacityNotFound,
        "{r:?}"
    );
}

#[test]
fn a_provisioned_request_says_which_groups_and_how_many_nodes() {
    // Upstream's `Capacity is found in the cluster`, then where: node-a (8 CPU) holds 8 of the
    // 10 one-CPU pods, one new 4-CPU node of group cpu the other 2.
    let group = "apiVersion: dra-autoscaler.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: cpu}\nspec:\n  provider: fake\n  providerID: cpu\n  minSize: 0\n  maxSize: 5\n  capacityType: on-demand\n  pricePerHour: 1\n  template:\n    capacity: {cpu: '4', memory: 16Gi, pods: '110'}\n";
    let request = |class: &str, count: u32| {
        format!(
            "{group}---\napiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {{name: r, namespace: ml}}\nspec:\n  provisioningClassName: {class}\n  podSets:\n  - podTemplateRef: {{name: chunk}}\n    count: {count}\n"
        )
    };
    let report = run(&request(ATOMIC, 10), None);
    let condition = report.provisioning_requests[0]
        .condition
        .clone()
        .expect("condition");
    assert_eq!(condition.reason, "CapacityIsProvisioned");
    assert_eq!(
        condition.message,
        "Capacity is found in the cluster: 1 new node(s) of group cpu, existing node(s) node-a"
    );
    let report = run(&request(CHECK, 2), None);
    let condition = report.provisioning_requests[0]
        .condition
        .clone()
        .expect("condition");
    assert_eq!(condition.reason, "CapacityIsFound");
    assert_eq!(
        condition.message,
        "Capacity is found in the cluster: existing node(s) node-a"
    );
}

#[test]
fn pod_sets_that_make_no_pods_are_named_by_field() {
    let head = "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: r, namespace: ml}\nspec:\n  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io\n";
    for (pod_sets, expected) in [
        (
            "  podSets: []\n",
            "ProvisioningRequest ml/r: field spec.podSets: at least one pod set is required",
        ),
        (
            "  podSets:\n  - podTemplateRef: {name: chunk}\n    count: 1\n  - count: 2\n",
            "ProvisioningRequest ml/r: field spec.podSets[1].podTemplateRef.name is required",
        ),
        (
            "  podSets:\n  - podTemplateRef: {name: chunk}\n    count: 0\n",
            "ProvisioningRequest ml/r: field spec.podSets[0].count: expected an integer ≥ 1",
        ),
    ] {
        let report = run(&format!("{head}{pod_sets}"), None);
        let r = &report.provisioning_requests[0];
        assert_eq!(r.outcome, RequestOutcome::Invalid, "{pod_sets}");
        let c = r.condition.as_ref().expect("condition");
        assert!(c.message.contains(expected), "{}", c.message);
    }
}
