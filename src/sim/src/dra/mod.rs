//! kube-scheduler's structured DRA allocator (the "incubating" variant of
//! 1.36+), re-implemented over a snapshot.
