//! Fault: the controller crashes after writing a scale-up's intent and before the provider's
//! answer, at each step of a gang that needs both of two groups (each can add one machine,
//! the gang needs two). The intent (an unconfirmed request with its id) survives in the
//! NodeGroup status; the restarted controller sends it again with the same request id, the
//! provider answers with the instances it started for that id, and the gang completes: long
//! before the 15 minute provision timeout, and with no machine started twice.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{all_nodes, cpu_group, gang, node_groups, nodes_of, running_on, wait_for};
use dra_local_stack::{Stack, StackOptions};
use serde_json::Value;

/// Starts take this long at the provider, so a crash lands while one is in flight.
const PROVIDER_LATENCY_MS: u64 = 2500;

/// Groups whose status holds an unconfirmed (intent written, answer not recorded) request.
async fn with_unconfirmed_request(stack: &Stack) -> Vec<String> {
    let groups = node_groups(stack).list(&Default::default()).await.unwrap();
    groups
        .items
        .into_iter()
        .filter(|g| {
            g.data
                .pointer("/status/unconfirmedRequests")
                .and_then(Value::as_array)
                .is_some_and(|r| !r.is_empty())
        })
        .filter_map(|g| g.metadata.name)
        .collect()
}

/// Crashes the controller once `step` scale-ups have had their intent written (the last
/// one's provider call in flight), restarts it, and checks the gang lands on exactly two
/// machines, one per group.
async fn crash_at_step(step: usize) {
    let provider_config = format!(
        "nodeGroups:\n  - name: cpu-a\n    faults: {{startLatencyMs: {PROVIDER_LATENCY_MS}}}\n  - name: cpu-b\n    faults: {{startLatencyMs: {PROVIDER_LATENCY_MS}}}\n"
    );
    let mut stack = Stack::start(StackOptions {
        provider_config,
        ..StackOptions::default()
    })
    .await
    .unwrap();
    stack.apply_yaml(&cpu_group("cpu-a", 1, 8)).await.unwrap();
    stack.apply_yaml(&cpu_group("cpu-b", 1, 8)).await.unwrap();
    // Leader election off: a crashed replica's elector would keep the Lease renewed.
    let flags = ["--scan-interval", "1s", "--leader-elect=false"];
    stack.start_controller(&flags).await.unwrap();
    stack.apply_yaml(&gang("train", 2, "6")).await.unwrap();

    // Step 1: the first group's intent is written; step 2: the first group was answered
    // and the second one's intent is written.
    let crashed_during = wait_for(
        &format!("the intent of scale-up {step} written"),
        Duration::from_secs(60),
        async || {
            let pending = with_unconfirmed_request(&stack).await;
            let answered: Vec<String> = {
                let mut out = Vec::new();
                for group in ["cpu-a", "cpu-b"] {
                    if !nodes_of(&stack, group).await.is_empty() {
                        out.push(group.to_owned());
                    }
                }
                out
            };
            let ready = match step {
                1 => !pending.is_empty(),
                _ => answered.len() == 1 && pending.iter().any(|p| !answered.contains(p)),
            };
            if ready {
                Ok(pending)
            } else {
                Err(format!("unconfirmed {pending:?}, with nodes {answered:?}"))
            }
        },
    )
    .await;
    stack.kill_controller().await;

    stack.start_controller(&flags).await.unwrap();
    let started = std::time::Instant::now();
    let mut nodes = Vec::new();
    for member in ["train-0", "train-1"] {
        nodes.push(
            wait_for(
                &format!("{member} Running"),
                Duration::from_secs(60),
                async || running_on(&stack, member).await,
            )
            .await,
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "completed without waiting for the provision timeout (crashed during {crashed_during:?})"
    );
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 2, "one member per machine: {nodes:?}");
    assert_eq!(nodes_of(&stack, "cpu-a").await.len(), 1);
    assert_eq!(nodes_of(&stack, "cpu-b").await.len(), 1);
    assert_eq!(all_nodes(&stack).await.len(), 2, "no machine started twice");
    // Every request is confirmed.
    wait_for(
        "no unconfirmed request left",
        Duration::from_secs(10),
        async || {
            let left = with_unconfirmed_request(&stack).await;
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        },
    )
    .await;
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_the_first_groups_call_still_lands_the_gang_once() {
    crash_at_step(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_the_second_groups_call_still_lands_the_gang_once() {
    crash_at_step(2).await;
}
