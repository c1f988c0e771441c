//! ProvisioningRequests (`autoscaling.x-k8s.io/v1`) on the controller side:
//! the status conditions cluster-autoscaler writes, computed from the plan
//! (`dra_plan::provreq` decides what happens to each request).
//!
//! Not hooked into the loop yet: watching the requests and writing their
//! status is the next step (issue 16).

pub mod conditions;
