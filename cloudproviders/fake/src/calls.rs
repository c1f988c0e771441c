//! The gRPC calls of the fake cloud ([`CloudProvider`] for [`FakeProvider`]).
//!
//! Calls that change the cloud (increase, atomic increase with its request id, delete,
//! decrease) are logged at `info` with their arguments and outcome; the read-only calls a
//! cluster-autoscaler makes for every node and loop are logged at `debug`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dra_api::NODE_GROUP_LABEL;
use dra_provider::skeleton::{GangStarts, RequestBook, atomic_increase};
use dra_provider::{
    AtomicIncrease, AutoscalingOptions, CloudProvider, Instance, InstanceDetails, InstanceState,
    NodeGroupDetails, NodeGroupRef, NodeRef, ProviderError, ReservationStatus, TemplateNode, gpu,
    group_options,
};

use crate::cloud::{CloudState, InstanceRecord, Limit};
use crate::config::GroupConfig;
use crate::provider::{FakeProvider, group_ref, kube_err};

/// The label GPU feature discovery puts on NVIDIA GPU nodes, the fake's usual `GPULabel`.
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// Logs the outcome of a call that changes the cloud.
fn log_outcome<T>(call: &str, group: &str, args: &str, result: &Result<T, ProviderError>) {
    match result {
        Ok(_) => tracing::info!(call, group, args, "provider call succeeded"),
        Err(err) => tracing::warn!(call, group, args, %err, "provider call failed"),
    }
}

fn instance_name(node: &NodeRef) -> String {
    node.provider_id
        .strip_prefix("fake://")
        .unwrap_or(&node.name)
        .to_owned()
}

impl FakeProvider {
    async fn increase(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        let group = self.group(id)?;
        let mut state = self.state.lock().await;
        if state.target(id) + delta > group.spec.max_size {
            return Err(Self::refuse(
                Limit::MaxSize,
                id,
                delta,
                group.spec.max_size - state.target(id),
                0,
            ));
        }
        let (headroom, limit) = state.headroom(&group);
        let startable = delta.min(headroom);
        if startable > 0 {
            self.start(&mut state, &group, startable).await?;
        }
        // Not atomic, like an ASG: what fits is started, the rest is reported.
        if startable < delta {
            Err(Self::refuse(limit, id, delta, headroom, 0))
        } else {
            Ok(())
        }
    }

    async fn delete(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        let group = self.group(id)?;
        let mut state = self.state.lock().await;
        let mut names = Vec::new();
        let mut gone = Vec::new();
        for node in nodes {
            let name = instance_name(node);
            if state
                .groups
                .get(id)
                .is_some_and(|g| g.instances.contains_key(&name))
            {
                names.push(name);
            } else {
                // Deleted before (or never started): nothing to do for it.
                gone.push(name);
            }
        }
        if names.is_empty() {
            return Err(ProviderError::NotFound {
                what: format!("nodes {gone:?} in node group {id:?}"),
            });
        }
        let remaining = state.target(id) - i32::try_from(names.len()).unwrap_or(i32::MAX);
        if remaining < group.spec.min_size {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "deleting {} nodes would take node group {id:?} below spec.minSize",
                    names.len()
                ),
            });
        }
        for name in &names {
            self.delete_instance(name)
                .await
                .map_err(kube_err("delete the Node", name))?;
        }
        state.remove_instances(id, &names);
        self.save(&state)
    }

    async fn decrease(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        self.group(id)?;
        let mut state = self.state.lock().await;
        let pending = state.group_mut(id).pending;
        if -delta > pending {
            return Err(ProviderError::InvalidArgument {
                message: format!(
                    "node group {id:?} has {pending} unstarted instances, cannot drop {}",
                    -delta
                ),
            });
        }
        state.group_mut(id).pending += delta;
        self.save(&state)
    }

    fn details(&self, group: &GroupConfig, in_use: i32) -> NodeGroupDetails {
        let reservation = group.spec.reservation.as_ref().map(|r| ReservationStatus {
            id: r.id.clone(),
            total: r.total,
            in_use,
            end_time: r.end_time.as_ref().map(|t| {
                UNIX_EPOCH + Duration::from_secs(u64::try_from(t.0.as_second()).unwrap_or(0))
            }),
        });
        NodeGroupDetails::from_spec(
            group.name.clone(),
            &group.spec,
            Self::template_of(group),
            reservation,
        )
    }
}

/// The request ids of atomic starts are kept in the state file, per group, so a restarted
/// fake replays them too.
impl RequestBook for CloudState {
    fn answered(&self, group: &str, request_id: &str) -> Option<Vec<String>> {
        self.groups.get(group)?.requests.get(request_id).cloned()
    }

    fn remember(&mut self, group: &str, request_id: &str, ids: Vec<String>) {
        self.group_mut(group)
            .requests
            .insert(request_id.to_owned(), ids);
    }
}

/// The fake's part of `AtomicIncreaseSize`: the state lock is its scaling lock.
#[tonic::async_trait]
impl GangStarts for FakeProvider {
    type Book = CloudState;

    fn scaling(&self) -> &tokio::sync::Mutex<CloudState> {
        &self.state
    }

    async fn before_lock(&self, request: &AtomicIncrease) -> Result<(), ProviderError> {
        self.group(&request.id).map(drop)
    }

    async fn start(
        &self,
        state: &mut CloudState,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        let group = self.group(&request.id)?;
        let (headroom, limit) = state.headroom(&group);
        if let Some(partial) = group.faults.partial_fulfilment
            && partial < request.min_count
        {
            // The cloud starts some, then cannot reach minCount: roll back what started.
            let started = FakeProvider::start(self, state, &group, partial.min(headroom)).await?;
            let names: Vec<String> = started.iter().map(|r| r.name.clone()).collect();
            self.roll_back(state, &group.name, &names).await;
            let rolled_back = i32::try_from(names.len()).unwrap_or(0);
            return Err(Self::refuse(
                Limit::Capacity,
                &group.name,
                request.min_count,
                partial,
                rolled_back,
            ));
        }
        if headroom < request.min_count {
            return Err(Self::refuse(
                limit,
                &group.name,
                request.min_count,
                headroom,
                0,
            ));
        }
        let started = FakeProvider::start(self, state, &group, request.count.min(headroom)).await?;
        Ok(started.iter().map(InstanceRecord::provider_id).collect())
    }

    fn keep(&self, state: &CloudState) -> Result<(), ProviderError> {
        self.save(state)
    }

    fn log_replay(&self, request: &AtomicIncrease) {
        tracing::info!(
            group = %request.id,
            request_id = %request.request_id,
            "request already answered; returning its instances"
        );
    }
}

#[tonic::async_trait]
impl CloudProvider for FakeProvider {
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError> {
        let groups: Vec<NodeGroupRef> = self.all_groups().iter().map(|g| group_ref(g)).collect();
        tracing::debug!(call = "NodeGroups", groups = groups.len(), "provider call");
        Ok(groups)
    }

    async fn node_group_for_node(
        &self,
        node: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError> {
        let state = self.state.lock().await;
        let name = instance_name(node);
        let owner = self
            .all_groups()
            .into_iter()
            .find(|g| {
                state
                    .groups
                    .get(&g.name)
                    .is_some_and(|s| s.instances.contains_key(&name))
            })
            .or_else(|| {
                node.labels
                    .get(NODE_GROUP_LABEL)
                    .and_then(|g| self.group_labelled(g))
            });
        tracing::debug!(
            call = "NodeGroupForNode",
            node = %node.name,
            group = ?owner.as_ref().map(|g| &g.name),
            "provider call"
        );
        Ok(owner.as_deref().map(group_ref))
    }

    async fn node_price(
        &self,
        node: &NodeRef,
        start: SystemTime,
        end: SystemTime,
    ) -> Result<f64, ProviderError> {
        let group =
            self.node_group_for_node(node)
                .await?
                .ok_or_else(|| ProviderError::NotFound {
                    what: format!("node {:?}", node.name),
                })?;
        let hours = end.duration_since(start).unwrap_or_default().as_secs_f64() / 3600.0;
        Ok(self.group(&group.id)?.spec.price_per_hour * hours)
    }

    /// GPU feature discovery's product label, unless a group with DRA-only GPUs carries it
    /// ([`gpu`] says why).
    async fn gpu_label(&self) -> Result<String, ProviderError> {
        let groups = self.all_groups();
        Ok(gpu::gpu_label(
            GPU_PRODUCT_LABEL,
            groups.iter().map(|g| &g.spec.template),
        ))
    }

    async fn available_gpu_types(&self) -> Result<Vec<String>, ProviderError> {
        let label = self.gpu_label().await?;
        let groups = self.all_groups();
        Ok(gpu::gpu_types(
            &label,
            groups.iter().map(|g| &g.spec.template),
        ))
    }

    async fn target_size(&self, id: &str) -> Result<i32, ProviderError> {
        self.group(id)?;
        let size = self.state.lock().await.target(id);
        tracing::debug!(
            call = "NodeGroupTargetSize",
            group = id,
            size,
            "provider call"
        );
        Ok(size)
    }

    async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        let result = self.increase(id, delta).await;
        log_outcome(
            "NodeGroupIncreaseSize",
            id,
            &format!("delta={delta}"),
            &result,
        );
        result
    }

    async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ProviderError> {
        let result = self.delete(id, nodes).await;
        let names: Vec<String> = nodes.iter().map(instance_name).collect();
        log_outcome(
            "NodeGroupDeleteNodes",
            id,
            &format!("nodes={names:?}"),
            &result,
        );
        result
    }

    async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ProviderError> {
        let result = self.decrease(id, delta).await;
        log_outcome(
            "NodeGroupDecreaseTargetSize",
            id,
            &format!("delta={delta}"),
            &result,
        );
        result
    }

    async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ProviderError> {
        self.group(id)?;
        let state = self.state.lock().await;
        tracing::debug!(call = "NodeGroupNodes", group = id, "provider call");
        Ok(state
            .groups
            .get(id)
            .into_iter()
            .flat_map(|g| g.instances.values())
            .map(|r| Instance {
                id: r.provider_id(),
                state: InstanceState::Running,
                error: None,
            })
            .collect())
    }

    async fn template_node(&self, id: &str) -> Result<TemplateNode, ProviderError> {
        tracing::debug!(
            call = "NodeGroupTemplateNodeInfo",
            group = id,
            "provider call"
        );
        let group = self.group(id)?;
        Ok(Self::template_of(&group))
    }

    async fn options(
        &self,
        id: &str,
        defaults: &AutoscalingOptions,
    ) -> Result<Option<AutoscalingOptions>, ProviderError> {
        tracing::debug!(call = "NodeGroupGetOptions", group = id, "provider call");
        group_options::options_for(id, &self.group(id)?.spec, defaults)
    }

    async fn node_group_details(
        &self,
        ids: &[String],
    ) -> Result<Vec<NodeGroupDetails>, ProviderError> {
        tracing::debug!(call = "NodeGroupInfos", ids = ?ids, "provider call");
        let state = self.state.lock().await;
        let selected = if ids.is_empty() {
            self.all_groups()
        } else {
            ids.iter()
                .map(|id| self.group(id))
                .collect::<Result<_, _>>()?
        };
        Ok(selected
            .iter()
            .map(|group| {
                let in_use = state.groups.get(&group.name).map_or(0, |g| {
                    i32::try_from(
                        g.instances
                            .values()
                            .filter(|r| r.reservation_id.is_some())
                            .count(),
                    )
                    .unwrap_or(0)
                });
                self.details(group, in_use)
            })
            .collect())
    }

    async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError> {
        let result = atomic_increase(self, request).await;
        let args = format!("count={} minCount={}", request.count, request.min_count);
        match &result {
            Ok(ids) => tracing::info!(
                call = "AtomicIncreaseSize",
                group = %request.id,
                args,
                request_id = %request.request_id,
                instances = ?ids,
                "provider call succeeded"
            ),
            Err(err) => tracing::warn!(
                call = "AtomicIncreaseSize",
                group = %request.id,
                args,
                request_id = %request.request_id,
                %err,
                "provider call failed"
            ),
        }
        result
    }

    async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ProviderError> {
        self.group(id)?;
        tracing::debug!(call = "InstanceStatuses", group = id, "provider call");
        let state = self.state.lock().await;
        Ok(state
            .groups
            .get(id)
            .into_iter()
            .flat_map(|g| g.instances.values())
            .map(|r| InstanceDetails {
                id: r.provider_id(),
                node_name: r.name.clone(),
                state: InstanceState::Running,
                error: None,
                reservation_id: r.reservation_id.clone(),
                requested_at: u64::try_from(r.requested_at)
                    .ok()
                    .map(|s| UNIX_EPOCH + Duration::from_secs(s)),
            })
            .collect())
    }
}
