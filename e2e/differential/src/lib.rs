//! `dra-differential`: dra-sim's DRA decisions against kube-scheduler's own.
//!
//! Every cluster — seeded random ones ([`generate`]) and the fixed cases
//! under `testdata/` ([`fixed`]) — goes through our `simulate` ([`ours`]) and
//! through kube-scheduler v1.37.2's scheduling framework (the Go program in
//! `e2e/oracle`, driven by [`oracle`]); [`compare`] holds the two answers
//! side by side pod by pod, and a disagreement is shrunk ([`shrink`]) and
//! written down ([`run::record`]). docs/testing.md ("The upstream oracle")
//! says how to run it and what CI runs.

pub mod compare;
pub mod fixed;
pub mod generate;
pub mod oracle;
pub mod ours;
pub mod run;
pub mod shrink;
