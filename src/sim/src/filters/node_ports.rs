//! NodePorts: host ports a pod asks for must be free on the node
//! (`framework.HostPortInfo.CheckConflict`).
//!
//! Ports with `hostPort > 0` of regular containers and of restartable
//! (sidecar) init containers count, on both sides; a plain init container has
//! exited before the pod runs, so its ports do not (upstream's
//! "non-sidecar initContainer using hostPort" case). An empty host IP means `0.0.0.0`, which
//! conflicts with the same protocol and port on any IP; an empty protocol
//! means TCP.

use k8s_openapi::api::core::v1::Pod;

/// Upstream plugin name.
pub const NAME: &str = "NodePorts";
/// Upstream's `ErrReason`.
pub const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

const ANY_IP: &str = "0.0.0.0";

/// One host port, sanitised as `HostPortInfo.Add` stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostPort {
    ip: String,
    protocol: String,
    port: i32,
}

/// The host ports the pod's containers ask for.
pub(crate) fn pod_host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|port| *port > 0)?;
            let ip = p
                .host_ip
                .as_deref()
                .filter(|ip| !ip.is_empty())
                .unwrap_or(ANY_IP);
            let protocol = p
                .protocol
                .as_deref()
                .filter(|pr| !pr.is_empty())
                .unwrap_or("TCP");
            Some(HostPort {
                ip: ip.to_string(),
                protocol: protocol.to_string(),
                port,
            })
        })
        .collect()
}

/// `HostPortInfo.CheckConflict`.
fn conflicts(used: &[HostPort], want: &HostPort) -> bool {
    used.iter().any(|u| {
        u.port == want.port
            && u.protocol == want.protocol
            && (want.ip == ANY_IP || u.ip == ANY_IP || u.ip == want.ip)
    })
}

/// Are all wanted ports free?
pub(crate) fn passes(used: &[HostPort], wanted: &[HostPort]) -> bool {
    wanted.iter().all(|w| !conflicts(used, w))
}
