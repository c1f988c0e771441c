//! The store's resourceVersion, history, finalizer and precondition rules.

use super::*;
use crate::resource::Registry;

fn cms() -> ResourceDef {
    Registry::builtins()
        .get("", "v1", "configmaps")
        .cloned()
        .expect("configmaps")
}

fn cm(name: &str) -> Value {
    json!({"metadata": {"name": name}, "data": {"k": "v"}})
}

#[test]
fn every_write_bumps_the_global_resource_version() {
    let mut store = Store::new(10);
    let def = cms();
    let a = store
        .create(&def, Some("ns"), cm("a"), false)
        .expect("create a");
    let b = store
        .create(&def, Some("ns"), cm("b"), false)
        .expect("create b");
    assert_eq!(a["metadata"]["resourceVersion"], "1");
    assert_eq!(b["metadata"]["resourceVersion"], "2");
    assert_eq!(store.current_rv(), 2);
    let err = store
        .create(&def, Some("ns"), cm("a"), false)
        .expect_err("duplicate");
    assert_eq!(err.reason(), "AlreadyExists");
}

#[test]
fn noop_patch_keeps_resource_version_and_history() {
    let mut store = Store::new(10);
    let def = cms();
    store
        .create(&def, Some("ns"), cm("a"), false)
        .expect("create");
    let same = json!({"data": {"k": "v"}});
    let out = store
        .patch(
            &def,
            Target::Main,
            Some("ns"),
            "a",
            PatchType::Merge,
            &same,
            false,
        )
        .expect("patch");
    assert_eq!(out.object["metadata"]["resourceVersion"], "1");
    assert_eq!(store.current_rv(), 1);
    let start = store
        .open_watch(&def, None, WatchFrom::After(0))
        .expect("watch");
    assert_eq!(start.backlog.len(), 1);
}

#[test]
fn history_eviction_expires_old_resource_versions() {
    let mut store = Store::new(2);
    let def = cms();
    for name in ["a", "b", "c"] {
        store
            .create(&def, Some("ns"), cm(name), false)
            .expect("create");
    }
    let err = store
        .open_watch(&def, None, WatchFrom::After(0))
        .err()
        .expect("expired");
    assert_eq!(err.code(), 410);
    let ok = store
        .open_watch(&def, None, WatchFrom::After(1))
        .expect("still in history");
    assert_eq!(
        ok.backlog.iter().map(|c| c.rv).collect::<Vec<_>>(),
        vec![2, 3]
    );
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let mut store = Store::new(10);
    let def = cms();
    let mut body = cm("a");
    body["metadata"]["finalizers"] = json!(["example.com/x"]);
    store.create(&def, Some("ns"), body, false).expect("create");
    let (obj, gone) = store
        .delete(&def, Some("ns"), "a", &DeleteOptions::default())
        .expect("delete");
    assert!(!gone);
    assert!(is_terminating(&obj));
    assert!(store.get(&def, Some("ns"), "a").is_ok());
    let clear = json!({"metadata": {"finalizers": null}});
    store
        .patch(
            &def,
            Target::Main,
            Some("ns"),
            "a",
            PatchType::Merge,
            &clear,
            false,
        )
        .expect("remove finalizer");
    assert_eq!(
        store.get(&def, Some("ns"), "a").err().map(|e| e.code()),
        Some(404)
    );
}

#[test]
fn delete_preconditions_are_checked() {
    let mut store = Store::new(10);
    let def = cms();
    store
        .create(&def, Some("ns"), cm("a"), false)
        .expect("create");
    let stale = DeleteOptions {
        resource_version: Some("0".into()),
        ..DeleteOptions::default()
    };
    let err = store
        .delete(&def, Some("ns"), "a", &stale)
        .expect_err("stale");
    assert_eq!(err.code(), 409);
}

#[test]
fn generated_suffixes_use_the_upstream_alphabet() {
    let s = random_suffix();
    assert_eq!(s.len(), 5);
    assert!(
        s.bytes()
            .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
    );
}
