//! The watch caches survive watch restarts and `410 Gone` without losing
//! state, and keep up with changes after them.

mod common;

use std::sync::Arc;

use common::{Controller, cluster, create_node_group, create_unschedulable_pod};
use dra_controller::executor::memory::InMemoryProvider;

#[tokio::test]
async fn stores_keep_their_state_through_expired_and_closed_watches() {
    let server = cluster().await;
    let client = server.client();
    create_node_group(&client, "cpu", 4).await;
    create_unschedulable_pod(&client, "web-0", "1", None).await;
    let controller = Controller::start(&client, Arc::new(InMemoryProvider::new())).await;
    let counts = |c: &Controller| {
        let i = c.watches.stores.inputs();
        (i.node_groups.len(), i.pods.len())
    };
    assert_eq!(counts(&controller), (1, 1));

    // An etcd compaction: every watch gets 410 and must relist.
    server.expire_watches();
    assert_eq!(counts(&controller), (1, 1), "state is kept while relisting");
    create_unschedulable_pod(&client, "web-1", "1", None).await;
    controller
        .wait_for("the pod created after the 410", |i| i.pods.len() == 2)
        .await;

    // An API server restart: watches end cleanly and resume.
    server.close_watches();
    create_unschedulable_pod(&client, "web-2", "1", None).await;
    controller
        .wait_for("the pod created after the watch closed", |i| {
            i.pods.len() == 3
        })
        .await;
    assert_eq!(counts(&controller), (1, 3));
    assert!(controller.watches.stores.is_ready());

    // And the loop still plans from it: three 1-CPU pods fit one 4-CPU node.
    let summary = controller.run_once().await;
    assert_eq!(summary.planned_for, 3);
    assert_eq!(summary.scaled_up.get("cpu"), Some(&1), "{summary:?}");
}
