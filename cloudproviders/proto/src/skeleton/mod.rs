//! What every provider does the same way around its cloud calls, written once.
//!
//! ```text
//!  AtomicIncreaseSize ─► atomic::atomic_increase ── bounds ─► scaling lock ─► request id answered?
//!                                                   │                           ├ yes: the same ids
//!                                                   │                           └ no: GangStarts::start
//!                                                   └─ the ids remembered under the request id
//!  every call ─────────► state::GroupCache (groups as last read, by id) · state::Failures
//!  size changes ───────► sizes (delta signs, maxSize/minSize bounds, headroom)
//!  group answers ──────► served::ServedGroup (NodeGroups, GPULabel, NodeGroupInfos, specs)
//! ```
//!
//! A provider keeps its cloud calls (reading groups, starting and deleting machines) and plugs
//! them in: [`Cloud`] (which makes it a [`crate::CloudProvider`]), [`GangStarts`] for the
//! atomic start, a read function for [`GroupCache`]. The
//! error texts are the providers' answers, so every provider answers a size it cannot take the
//! same way.

pub mod atomic;
pub mod cloud;
pub mod served;
pub mod sizes;
pub mod state;

pub use atomic::{GangStarts, RequestBook, Requests, atomic_increase, atomic_increase_with};
pub use cloud::Cloud;
pub use served::ServedGroup;
pub use state::{Failures, GroupCache};
