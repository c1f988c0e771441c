//! `dra-controller`: the part of dra-autoscaler that talks to a live cluster.
