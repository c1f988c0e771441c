//! Managed instance groups: listing, templates, sizes, managed instances, resize requests.

use std::collections::BTreeMap;

use dra_provider::ProviderError;
use google_cloud_compute_v1::model::{
    self, InstanceGroupManager, InstanceGroupManagerResizeRequest,
    InstanceGroupManagersDeleteInstancesRequest, InstanceProperties, ManagedInstance,
};
use google_cloud_gax::paginator::Paginator;
use google_cloud_lro::Poller;

use super::{Gce, Scope, finished, last_segment};

/// What the provider needs of a managed instance group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigInfo {
    /// Name.
    pub name: String,
    /// Zone (zonal MIG) or region (regional MIG); `None` only for a malformed answer.
    pub scope: Option<Scope>,
    /// URL of its instance template.
    pub template: String,
    /// Target size (running or not).
    pub target_size: i32,
    /// Prefix of its instances' names.
    pub base_instance_name: String,
    /// Zones its instances land in (the zone itself for a zonal MIG).
    pub zones: Vec<String>,
    /// An autoscaler owns its size (then resize requests are refused).
    pub autoscaled: bool,
}

fn mig_info(m: &InstanceGroupManager, scope: Option<Scope>) -> MigInfo {
    let scope = scope.or_else(|| {
        m.zone
            .as_deref()
            .map(|z| Scope::Zone(last_segment(z).to_owned()))
            .or_else(|| {
                m.region
                    .as_deref()
                    .map(|r| Scope::Region(last_segment(r).to_owned()))
            })
    });
    let mut zones: Vec<String> = m
        .distribution_policy
        .as_ref()
        .map(|d| {
            d.zones
                .iter()
                .filter_map(|z| z.zone.as_deref().map(|z| last_segment(z).to_owned()))
                .collect()
        })
        .unwrap_or_default();
    if let Some(Scope::Zone(z)) = &scope
        && zones.is_empty()
    {
        zones.push(z.clone());
    }
    MigInfo {
        name: m.name.clone().unwrap_or_default(),
        scope,
        template: m.instance_template.clone().unwrap_or_default(),
        target_size: m.target_size.unwrap_or(0),
        base_instance_name: m.base_instance_name.clone().unwrap_or_default(),
        zones,
        autoscaled: m
            .status
            .as_ref()
            .and_then(|s| s.autoscaler.as_deref())
            .is_some_and(|a| !a.is_empty()),
    }
}

/// The parts of an instance template the provider reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TemplateInfo {
    /// Name.
    pub name: String,
    /// URL (global or regional), as MIGs and bulkInsert name it.
    pub url: String,
    /// The template's instance properties.
    pub properties: InstanceProperties,
}

/// One managed instance of a MIG.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManagedInstanceInfo {
    /// Instance name.
    pub name: String,
    /// Its zone.
    pub zone: String,
    /// What the MIG is doing with it (`CREATING`, `DELETING`, `NONE`, ...).
    pub current_action: String,
    /// The VM's status (`RUNNING`, `PROVISIONING`, ...; empty while it has no VM).
    pub status: String,
    /// Errors of the last attempt to create it: (code, message).
    pub errors: Vec<(String, String)>,
}

fn managed(m: &ManagedInstance) -> ManagedInstanceInfo {
    let url = m.instance.clone().unwrap_or_default();
    let zone = url
        .split('/')
        .skip_while(|s| *s != "zones")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    ManagedInstanceInfo {
        name: m
            .name
            .clone()
            .unwrap_or_else(|| last_segment(&url).to_owned()),
        zone,
        current_action: m
            .current_action
            .as_ref()
            .and_then(|a| a.name())
            .unwrap_or_default()
            .to_owned(),
        status: m
            .instance_status
            .as_ref()
            .and_then(|s| s.name())
            .unwrap_or_default()
            .to_owned(),
        errors: m
            .last_attempt
            .as_ref()
            .and_then(|l| l.errors.as_ref())
            .map(|e| {
                e.errors
                    .iter()
                    .map(|e| {
                        (
                            e.code.clone().unwrap_or_default(),
                            e.message.clone().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// State of a resize request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResizeRequestState {
    /// Being created.
    Creating,
    /// Queued until capacity and quota exist.
    Accepted,
    /// All its VMs were created.
    Succeeded,
    /// Gave up; the VMs it had created were deleted.
    Failed,
    /// Cancelled.
    Cancelled,
    /// A state this build does not know.
    Unknown,
}

/// A resize request as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeRequestInfo {
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: ResizeRequestState,
    /// Final errors (`status.error`), else the latest attempt's (`status.lastAttempt.error`):
    /// (code, message).
    pub errors: Vec<(String, String)>,
}

fn resize_request(r: &InstanceGroupManagerResizeRequest) -> ResizeRequestInfo {
    use model::instance_group_manager_resize_request::State;
    let state = match &r.state {
        Some(State::Creating) => ResizeRequestState::Creating,
        Some(State::Accepted) => ResizeRequestState::Accepted,
        Some(State::Succeeded) => ResizeRequestState::Succeeded,
        Some(State::Failed) => ResizeRequestState::Failed,
        Some(State::Cancelled) => ResizeRequestState::Cancelled,
        _ => ResizeRequestState::Unknown,
    };
    let status = r.status.as_ref();
    let mut errors: Vec<(String, String)> = status
        .and_then(|s| s.error.as_ref())
        .map(|e| {
            e.errors
                .iter()
                .map(|e| {
                    (
                        e.code.clone().unwrap_or_default(),
                        e.message.clone().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if errors.is_empty() {
        errors = status
            .and_then(|s| s.last_attempt.as_ref())
            .and_then(|l| l.error.as_ref())
            .map(|e| {
                e.errors
                    .iter()
                    .map(|e| {
                        (
                            e.code.clone().unwrap_or_default(),
                            e.message.clone().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
    }
    ResizeRequestInfo {
        name: r.name.clone().unwrap_or_default(),
        state,
        errors,
    }
}

impl Gce {
    /// Every MIG of the project, zonal and regional (one aggregated list).
    ///
    /// # Errors
    /// The API's error.
    pub async fn list_migs(&self) -> Result<Vec<MigInfo>, ProviderError> {
        self.call("instanceGroupManagers.aggregatedList", || async move {
            let mut pages = self
                .migs
                .aggregated_list()
                .set_project(&self.project)
                .by_page();
            let mut out = Vec::new();
            while let Some(page) = pages.next().await {
                let items: BTreeMap<_, _> = page?.items.into_iter().collect();
                for (key, scoped) in items {
                    let scope = Scope::from_key(&key);
                    out.extend(
                        scoped
                            .instance_group_managers
                            .iter()
                            .map(|m| mig_info(m, scope.clone())),
                    );
                }
            }
            Ok(out)
        })
        .await
    }

    /// One MIG.
    ///
    /// # Errors
    /// [`ProviderError::NotFound`] when it does not exist; the API's error otherwise.
    pub async fn get_mig(&self, scope: &Scope, name: &str) -> Result<MigInfo, ProviderError> {
        let m = match scope {
            Scope::Zone(zone) => {
                self.call("instanceGroupManagers.get", || {
                    self.migs
                        .get()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_instance_group_manager(name)
                        .send()
                })
                .await?
            }
            Scope::Region(region) => {
                self.call("regionInstanceGroupManagers.get", || {
                    self.region_migs
                        .get()
                        .set_project(&self.project)
                        .set_region(region)
                        .set_instance_group_manager(name)
                        .send()
                })
                .await?
            }
        };
        Ok(mig_info(&m, Some(scope.clone())))
    }

    /// The instance template at `url` (global `…/global/instanceTemplates/<n>` or regional
    /// `…/regions/<r>/instanceTemplates/<n>`).
    ///
    /// # Errors
    /// The API's error.
    pub async fn template(&self, url: &str) -> Result<TemplateInfo, ProviderError> {
        let name = last_segment(url).to_owned();
        let template = match Scope::from_key(url.rsplitn(3, '/').nth(2).unwrap_or_default()) {
            Some(Scope::Region(region)) => {
                self.call("regionInstanceTemplates.get", || {
                    self.region_templates
                        .get()
                        .set_project(&self.project)
                        .set_region(&region)
                        .set_instance_template(&name)
                        .send()
                })
                .await?
            }
            _ => {
                self.call("instanceTemplates.get", || {
                    self.templates
                        .get()
                        .set_project(&self.project)
                        .set_instance_template(&name)
                        .send()
                })
                .await?
            }
        };
        Ok(TemplateInfo {
            url: template.self_link.clone().unwrap_or_else(|| url.to_owned()),
            name,
            properties: template.properties.unwrap_or_default(),
        })
    }

    /// The managed instances of a MIG.
    ///
    /// # Errors
    /// The API's error.
    pub async fn managed_instances(
        &self,
        scope: &Scope,
        name: &str,
    ) -> Result<Vec<ManagedInstanceInfo>, ProviderError> {
        match scope {
            Scope::Zone(zone) => {
                self.call(
                    "instanceGroupManagers.listManagedInstances",
                    || async move {
                        let mut pages = self
                            .migs
                            .list_managed_instances()
                            .set_project(&self.project)
                            .set_zone(zone)
                            .set_instance_group_manager(name)
                            .by_page();
                        let mut out = Vec::new();
                        while let Some(page) = pages.next().await {
                            out.extend(page?.managed_instances.iter().map(managed));
                        }
                        Ok(out)
                    },
                )
                .await
            }
            Scope::Region(region) => {
                self.call(
                    "regionInstanceGroupManagers.listManagedInstances",
                    || async move {
                        let mut pages = self
                            .region_migs
                            .list_managed_instances()
                            .set_project(&self.project)
                            .set_region(region)
                            .set_instance_group_manager(name)
                            .by_page();
                        let mut out = Vec::new();
                        while let Some(page) = pages.next().await {
                            out.extend(page?.managed_instances.iter().map(managed));
                        }
                        Ok(out)
                    },
                )
                .await
            }
        }
    }

    /// Sets a MIG's target size and waits for the operation; a failed operation is an error.
    ///
    /// # Errors
    /// The API's or the operation's error.
    pub async fn resize(
        &self,
        scope: &Scope,
        name: &str,
        size: i32,
        request_id: &str,
    ) -> Result<(), ProviderError> {
        let op = match scope {
            Scope::Zone(zone) => {
                self.call("instanceGroupManagers.resize", || {
                    self.migs
                        .resize()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_instance_group_manager(name)
                        .set_size(size)
                        .set_request_id(request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
            Scope::Region(region) => {
                self.call("regionInstanceGroupManagers.resize", || {
                    self.region_migs
                        .resize()
                        .set_project(&self.project)
                        .set_region(region)
                        .set_instance_group_manager(name)
                        .set_size(size)
                        .set_request_id(request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
        };
        finished("resize", op).map(drop)
    }

    /// Deletes instances of a MIG (shrinking its target with them).
    ///
    /// # Errors
    /// The API's or the operation's error.
    pub async fn delete_managed(
        &self,
        scope: &Scope,
        name: &str,
        instance_urls: &[String],
        request_id: &str,
    ) -> Result<(), ProviderError> {
        let body = InstanceGroupManagersDeleteInstancesRequest::new()
            .set_instances(instance_urls.to_vec())
            .set_skip_instances_on_validation_error(true);
        let op = match scope {
            Scope::Zone(zone) => {
                self.call("instanceGroupManagers.deleteInstances", || {
                    self.migs
                        .delete_instances()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_instance_group_manager(name)
                        .set_body(body.clone())
                        .set_request_id(request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
            Scope::Region(region) => {
                let body = model::RegionInstanceGroupManagersDeleteInstancesRequest::new()
                    .set_instances(instance_urls.to_vec())
                    .set_skip_instances_on_validation_error(true);
                self.call("regionInstanceGroupManagers.deleteInstances", || {
                    self.region_migs
                        .delete_instances()
                        .set_project(&self.project)
                        .set_region(region)
                        .set_instance_group_manager(name)
                        .set_body(body.clone())
                        .set_request_id(request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
        };
        finished("deleteInstances", op).map(drop)
    }

    /// Creates a resize request of `count` VMs (all or nothing, queued); waits until the request
    /// exists, not until it is fulfilled.
    ///
    /// # Errors
    /// The API's or the operation's error (a refused request, e.g. an autoscaled MIG).
    pub async fn insert_resize_request(
        &self,
        scope: &Scope,
        mig: &str,
        request: &str,
        count: i32,
        run_seconds: Option<i64>,
        request_id: &str,
    ) -> Result<(), ProviderError> {
        let mut body = InstanceGroupManagerResizeRequest::new()
            .set_name(request)
            .set_resize_by(count)
            .set_description("dra-autoscaler gang");
        if let Some(seconds) = run_seconds {
            body = body.set_requested_run_duration(model::Duration::new().set_seconds(seconds));
        }
        let op = match scope {
            Scope::Zone(zone) => {
                self.call("instanceGroupManagerResizeRequests.insert", || {
                    self.resize_requests
                        .insert()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_instance_group_manager(mig)
                        .set_body(body.clone())
                        .set_request_id(request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
            Scope::Region(region) => {
                self.call("regionInstanceGroupManagerResizeRequests.insert", || {
                    self.region_resize_requests
                        .insert()
                        .set_project(&self.project)
                        .set_region(region)
                        .set_instance_group_manager(mig)
                        .set_body(body.clone())
                        .set_request_id(request_id)
                        .poller()
                        .until_done()
                })
                .await?
            }
        };
        finished("resizeRequests.insert", op).map(drop)
    }

    /// A resize request's state and errors.
    ///
    /// # Errors
    /// The API's error.
    pub async fn get_resize_request(
        &self,
        scope: &Scope,
        mig: &str,
        request: &str,
    ) -> Result<ResizeRequestInfo, ProviderError> {
        let r = match scope {
            Scope::Zone(zone) => {
                self.call("instanceGroupManagerResizeRequests.get", || {
                    self.resize_requests
                        .get()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_instance_group_manager(mig)
                        .set_resize_request(request)
                        .send()
                })
                .await?
            }
            Scope::Region(region) => {
                self.call("regionInstanceGroupManagerResizeRequests.get", || {
                    self.region_resize_requests
                        .get()
                        .set_project(&self.project)
                        .set_region(region)
                        .set_instance_group_manager(mig)
                        .set_resize_request(request)
                        .send()
                })
                .await?
            }
        };
        Ok(resize_request(&r))
    }

    /// Cancels a queued (ACCEPTED) resize request; the MIG drops its placeholder instances.
    ///
    /// # Errors
    /// The API's or the operation's error.
    pub async fn cancel_resize_request(
        &self,
        scope: &Scope,
        mig: &str,
        request: &str,
    ) -> Result<(), ProviderError> {
        let op = match scope {
            Scope::Zone(zone) => {
                self.call("instanceGroupManagerResizeRequests.cancel", || {
                    self.resize_requests
                        .cancel()
                        .set_project(&self.project)
                        .set_zone(zone)
                        .set_instance_group_manager(mig)
                        .set_resize_request(request)
                        .poller()
                        .until_done()
                })
                .await?
            }
            Scope::Region(region) => {
                self.call("regionInstanceGroupManagerResizeRequests.cancel", || {
                    self.region_resize_requests
                        .cancel()
                        .set_project(&self.project)
                        .set_region(region)
                        .set_instance_group_manager(mig)
                        .set_resize_request(request)
                        .poller()
                        .until_done()
                })
                .await?
            }
        };
        finished("resizeRequests.cancel", op).map(drop)
    }
}
