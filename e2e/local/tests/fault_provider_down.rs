//! Fault: the provider is down for 10 s while a pod waits. Its calls never reach it
//! (connection refused: "not sent"), so nothing is held for the provision timeout and the
//! group does not back off; once the provider is back, the pod's node is asked for within one
//! scan interval (the retry after a call never sent comes in 1-3 s, never later than the scan
//! interval).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{condition, cpu_group, node_groups, nodes_of, pod, running_on, wait_for};
use dra_local_stack::{Stack, StackOptions};

const SCAN: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_nodes_within_one_scan_interval_of_the_providers_return() {
    let mut stack = Stack::start(StackOptions::default()).await.unwrap();
    stack.apply_yaml(&cpu_group("cpu", 4, 4)).await.unwrap();
    stack
        .start_controller(&["--scan-interval", "3s", "--leader-elect=false"])
        .await
        .unwrap();
    stack.stop_provider().await;
    stack.apply_yaml(&pod("web-0", "2")).await.unwrap();

    // The pod is seen and the provider tried (and not reached) while it is down.
    wait_for(
        "a scale-up attempt that never reached the provider",
        Duration::from_secs(30),
        async || {
            let object = node_groups(&stack)
                .get("cpu")
                .await
                .map_err(|e| e.to_string())?;
            let last = object.data.pointer("/status/lastScaleUp/message").cloned();
            match last.as_ref().and_then(|m| m.as_str()) {
                Some(m) if m.contains("nothing was started") => Ok(()),
                _ => Err(format!("status {}", object.data["status"])),
            }
        },
    )
    .await;
    // The rest of the 10 s outage: the fault itself, not an assertion.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(
        nodes_of(&stack, "cpu").await.is_empty(),
        "no node while the provider is down"
    );
    let backoff = condition(&stack, "cpu", "Backoff").await;
    assert!(
        backoff
            .as_ref()
            .is_none_or(|(status, _, _)| status != "True"),
        "a call that never reached the provider does not back the group off: {backoff:?}"
    );
    let status = node_groups(&stack).get("cpu").await.unwrap().data["status"].clone();
    assert_eq!(
        status.get("upcomingNodes"),
        None,
        "nothing held for the provision timeout: {status}"
    );

    stack.start_provider().await.unwrap();
    let back = Instant::now();
    let node = wait_for(
        "the pod's node after the provider's return",
        SCAN + Duration::from_secs(5),
        async || {
            nodes_of(&stack, "cpu")
                .await
                .pop()
                .ok_or_else(|| "no node yet".to_owned())
        },
    )
    .await;
    let waited = back.elapsed();
    // One scan interval, plus the call and the Node's creation (well under a second when
    // the machine is idle; the margin keeps a busy CI machine from failing the test).
    assert!(
        waited <= SCAN + Duration::from_secs(2),
        "node {node} {waited:?} after the provider came back (scan interval {SCAN:?})"
    );
    let on = wait_for("web-0 Running", Duration::from_secs(30), async || {
        running_on(&stack, "web-0").await
    })
    .await;
    assert_eq!(on, node);
    assert_eq!(
        nodes_of(&stack, "cpu").await.len(),
        1,
        "one node, asked for once"
    );
    stack.shutdown().await;
}
