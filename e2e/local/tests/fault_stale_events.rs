//! Fault: the reason a pod waits changes while it waits. The old text must never be shown
//! as current: the new message is a new Event (upstream `events.k8s.io` series semantics,
//! which our own aggregation follows instead of kube-runtime's count bump on the old one),
//! in `events.k8s.io/v1` and in the core/v1 mirror `kubectl describe` reads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{cpu_group, pod, wait_for};
use dra_local_stack::{Stack, StackOptions};
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

const REASON: &str = "NotTriggerScaleUp";

/// `(note, last time it was observed)` of the pod's `NotTriggerScaleUp` Events.
async fn notes(stack: &Stack, pod: &str) -> Vec<(String, Timestamp)> {
    let events: Api<Event> = Api::namespaced(stack.client(), "default");
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(REASON)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
        })
        .map(|e| {
            let last = e
                .series
                .as_ref()
                .map(|s| s.last_observed_time.0)
                .or(e.event_time.as_ref().map(|t| t.0))
                .unwrap_or_default();
            (e.note.unwrap_or_default(), last)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_reason_is_a_new_event_and_the_old_text_is_never_current() {
    let mut stack = Stack::start(StackOptions::default()).await.unwrap();
    // Two cores per machine: the pod's three never fit.
    stack.apply_yaml(&cpu_group("small", 4, 2)).await.unwrap();
    stack
        .start_controller(&["--scan-interval", "1s", "--leader-elect=false"])
        .await
        .unwrap();
    stack.apply_yaml(&pod("big", "3")).await.unwrap();
    let first = wait_for(
        "the first NotTriggerScaleUp",
        Duration::from_secs(30),
        async || match notes(&stack, "big").await.as_slice() {
            [(note, _)] => Ok(note.clone()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert!(first.contains("Insufficient cpu"), "{first}");

    // Now big enough, but tainted: a different reason for the same pod.
    let changed_at = Timestamp::now();
    let tainted = cpu_group("small", 4, 8).replace(
        "    capacity:",
        "    taints:\n      - key: dedicated\n        value: batch\n        effect: NoSchedule\n    capacity:",
    );
    stack.apply_yaml(&tainted).await.unwrap();
    let all = wait_for(
        "a second NotTriggerScaleUp",
        Duration::from_secs(30),
        async || {
            let all = notes(&stack, "big").await;
            if all.len() == 2 {
                Ok(all)
            } else {
                Err(format!("{all:?}"))
            }
        },
    )
    .await;
    let (latest, latest_at) = all.iter().max_by_key(|(_, at)| *at).cloned().unwrap();
    assert_ne!(latest, first, "{all:?}");
    assert!(
        latest.contains("taint"),
        "the current text is the new reason: {latest}"
    );
    let (_, first_at) = all.iter().find(|(n, _)| *n == first).cloned().unwrap();
    assert!(
        first_at <= changed_at && first_at < latest_at,
        "the old text was not observed again after the change: {all:?}"
    );

    // The core/v1 mirror shows the same two texts, each as its own Event.
    let core: Api<CoreEvent> = Api::namespaced(stack.client(), "default");
    let mut mirrored: Vec<String> = core
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(REASON) && e.involved_object.name.as_deref() == Some("big")
        })
        .filter_map(|e| e.message)
        .collect();
    mirrored.sort();
    let mut expected = vec![first, latest];
    expected.sort();
    assert_eq!(mirrored, expected);
    stack.shutdown().await;
}
