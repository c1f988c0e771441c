//! `dra-plan`: the pure, gang-aware scale-up planner.
//!
//! Given a snapshot and node-group templates it decides *what* to scale so
//! that the scheduler can place every pending gang whole: a value with reasons,
//! never an action. No I/O, no clock, no threads.

#[cfg(feature = "clap")]
pub mod args;
pub mod buffers;
pub mod gang;
pub mod gang_apis;
pub mod gang_kinds;
pub mod groups;
pub mod handback;
pub mod planner;
pub mod provreq;
pub mod report;
pub mod scaledown;
pub mod simulate;
pub mod templates;
#[cfg(feature = "testing")]
pub mod testing;

pub use planner::{
    Expander, PlanOptions, Planned, Prepared, plan, prepare, prepare_for, prepare_with,
};
pub use report::PlanReport;
