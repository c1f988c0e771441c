//! Objects the loader's tests put in their lists.

/// A node, with managedFields (dropped when trimming).
pub(super) const NODE: &str = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"a":"b"},"managedFields":[{"manager":"m"}]},
    "status":{"allocatable":{"cpu":"4"}}}"#;
/// A pod asking for one CPU.
pub(super) const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ml"},
    "spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}"#;
/// A node group (kept when the loader keeps that kind).
pub(super) const GROUP: &str = r#"{"apiVersion":"dra-autoscaler.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"g"},"spec":{}}"#;
/// An object of a kind the loader skips.
pub(super) const DEPLOYMENT: &str =
    r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"x"}}"#;
/// A ResourceSlice with one device on node `n1`.
pub(super) const SLICE: &str = r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},"nodeName":"n1","devices":[{"name":"g0"}]}}"#;
