//! Allocator tests ported from upstream's shared allocator test table
//! (`structured/internal/allocatortesting/allocator_testing.go`). Each test
//! is named after the upstream case it ports; inputs and expectations are
//! upstream's. The helpers mirror upstream's generators so that cases read
//! the same. `catalog_behaviour` and `compat_groups` hold our own cases for
//! behaviour the table does not cover.

mod catalog_behaviour;
mod compat_groups;
mod handing_back;
mod harness;
mod upstream_basic;
mod upstream_capacity;
mod upstream_constraints;
mod upstream_partitionable;
mod upstream_pools;
mod upstream_prioritized;
mod upstream_taints_binding;
mod variants;
