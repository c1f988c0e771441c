//! The printers against upstream's output for the same objects.

use super::*;

fn now() -> Timestamp {
    "2026-01-01T00:10:00Z".parse().expect("time")
}

#[test]
fn pods_show_ready_containers_status_and_node() {
    let pod = json!({
        "metadata": {"name": "train-0", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}},
            {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}}]}
    });
    let (columns, cells) = print("", "Pod", &pod, now()).expect("printed");
    assert_eq!(columns.len(), cells.len());
    assert_eq!(
        cells,
        vec![
            json!("train-0"),
            json!("2/2"),
            json!("Running"),
            json!("1"),
            json!("10m"),
            json!("10.0.0.7"),
            json!("gpu-1"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    let pending = json!({"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
    let (_, cells) = print("", "Pod", &pending, now()).expect("printed");
    assert_eq!(cells[2], "Terminating");
    assert_eq!(cells[4], "<unknown>");
    let gated = json!({"metadata": {"name": "g"}, "spec": {"containers": []},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
    assert_eq!(
        print("", "Pod", &gated, now()).expect("printed").1[2],
        "SchedulingGated"
    );
}

#[test]
fn nodes_show_readiness_roles_and_version() {
    let node = json!({
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/role": "gpu"}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}], "nodeInfo": {"kubeletVersion": "v1.37.0"}}
    });
    let (_, cells) = print("", "Node", &node, now()).expect("printed");
    assert_eq!(cells[1], "NotReady,SchedulingDisabled");
    assert_eq!(cells[2], "gpu,worker");
    assert_eq!(cells[4], "v1.37.0");
    assert_eq!(cells[5], "<none>");
}

#[test]
fn events_of_both_apis_print_the_same_row() {
    let core = json!({
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "train-0"},
        "reason": "TriggeredScaleUp", "type": "Normal", "message": "pod triggered scale-up ",
        "eventTime": "2026-01-01T00:08:00.000000Z",
        "series": {"count": 3, "lastObservedTime": "2026-01-01T00:09:00.000000Z"},
        "reportingComponent": "dra-autoscaler", "reportingInstance": "a-1"
    });
    let (columns, cells) = print("", "Event", &core, now()).expect("printed");
    assert_eq!(columns[0].name, "Last Seen");
    assert_eq!(
        cells,
        vec![
            json!("60s"),
            json!("Normal"),
            json!("TriggeredScaleUp"),
            json!("pod/train-0"),
            json!(""),
            json!("dra-autoscaler, a-1"),
            json!("pod triggered scale-up"),
            json!("2m"),
            json!(3),
            json!("e1")
        ]
    );
    let v1 = convert::to_view(Conversion::EventsV1, core);
    assert_eq!(
        print("events.k8s.io", "Event", &v1, now())
            .expect("printed")
            .1,
        cells
    );
}

#[test]
fn claims_summarise_their_state() {
    assert_eq!(claim_state(&json!({})), "pending");
    assert_eq!(
        claim_state(&json!({"status": {"allocation": {}}})),
        "allocated"
    );
    assert_eq!(
        claim_state(&json!({"status": {"allocation": {}, "reservedFor": [{"name": "p"}]}})),
        "allocated,reserved"
    );
    assert_eq!(
        claim_state(&json!({"metadata": {"deletionTimestamp": "x"}, "status": {"allocation": {}}})),
        "deleted,allocated,deallocating"
    );
}
