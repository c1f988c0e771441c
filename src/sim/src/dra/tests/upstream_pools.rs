//! Upstream cases (to be filled).
