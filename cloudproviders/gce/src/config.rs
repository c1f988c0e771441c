//! The provider's YAML: the project, which managed instance groups are node groups (listed, or
//! discovered by name prefix as cluster-autoscaler's `--node-group-auto-discovery=mig:…` does,
//! optionally narrowed by the labels of their instance template), and per group what the MIG
//! cannot say (price, priority, the reservation behind it, how a gang starts, template
//! overrides).
//!
//! ```yaml
//! project: my-project
//! discovery:                          # cluster-autoscaler's specs
//!   - "mig:namePrefix=gke-prod-gpu,min=0,max=16"
//! templateLabels: {goog-k8s-cluster-name: prod}   # discovered MIGs' templates must carry these
//! nodeGroups:
//!   - mig: us-central1-a/gke-prod-a3  # <zone or region>/<name>
//!     maxSize: 8
//!     pricePerHour: 88.49
//!     atomic: auto                    # auto | resizeRequest | bulkInsert | none
//!     runDurationSeconds: 86400       # requestedRunDuration of resize requests (flex-start)
//!     template: {...}                 # dra_provider_machines::TemplateOptions
//! ```

use std::path::Path;

use dra_provider::config_file::{ConfigFileError, load, parse_yaml};
use dra_provider_machines::GroupSettings;
use serde::{Deserialize, Serialize};

/// How a group starts a gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum AtomicMode {
    /// A resize request when the template's provisioning model allows one (flex-start or
    /// reservation-bound), else bulkInsert.
    #[default]
    Auto,
    /// Always a MIG resize request.
    ResizeRequest,
    /// Always `instances.bulkInsert` from the group's template.
    BulkInsert,
    /// No atomic increase (the planner falls back to plain increases).
    None,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Project id.
    pub project: String,
    /// Discovery specs in cluster-autoscaler's syntax: `mig:namePrefix=<p>,min=<n>,max=<n>`.
    #[serde(default)]
    pub discovery: Vec<String>,
    /// Labels a discovered MIG's instance template must carry (all of them).
    #[serde(default)]
    pub template_labels: std::collections::BTreeMap<String, String>,
    /// Listed groups.
    #[serde(default)]
    pub node_groups: Vec<GroupConfig>,
    /// Groups, templates and reservations are re-read at most this often.
    #[serde(default = "default_refresh")]
    pub refresh_seconds: u64,
    /// How long an atomic increase waits for a resize request to be fulfilled before answering
    /// with its (still creating) instances and watching it in the background.
    #[serde(default = "default_wait")]
    pub resize_request_wait_seconds: u64,
    /// How long a queued resize request may stay ACCEPTED before it is cancelled.
    #[serde(default = "default_queue")]
    pub resize_request_timeout_seconds: u64,
    /// First delay between polls of a resize request.
    #[serde(default = "default_poll_ms")]
    pub resize_request_poll_millis: u64,
}

fn default_refresh() -> u64 {
    60
}
fn default_wait() -> u64 {
    30
}
fn default_queue() -> u64 {
    3600
}
fn default_poll_ms() -> u64 {
    2000
}

/// Settings of one group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupConfig {
    /// `<zone or region>/<MIG name>`, also the node group id.
    pub mig: String,
    /// The reservation the group consumes; from the template's `reservationAffinity` when
    /// absent. A future reservation's name works too.
    #[serde(default)]
    pub reservation: Option<String>,
    /// How gangs start.
    #[serde(default)]
    pub atomic: AtomicMode,
    /// `requestedRunDuration` of resize requests; flex-start needs one (10 min to 7 days).
    #[serde(default)]
    pub run_duration_seconds: Option<i64>,
    /// What every provider's group entry says (bounds, capacity type, price, priority,
    /// topology domain, template overrides, scale-down policy). `maxSize` is required for
    /// listed groups (discovery specs give theirs); `minSize` is 0 unless set.
    #[serde(flatten)]
    pub settings: GroupSettings,
}

/// One parsed discovery spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// MIG names must start with it (cluster-autoscaler's `^<prefix>.+`).
    pub name_prefix: String,
    /// minSize of every group found.
    pub min: i32,
    /// maxSize of every group found.
    pub max: i32,
}

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read, or is not the expected YAML shape.
    #[error(transparent)]
    File(#[from] ConfigFileError),
    /// A field is wrong.
    #[error("config file {path}: {field}: {message}")]
    Invalid {
        /// The path.
        path: String,
        /// The field, e.g. `nodeGroups[1].mig`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Parses `mig:namePrefix=<p>,min=<n>,max=<n>` as cluster-autoscaler does.
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_discovery(spec: &str) -> Result<Discovery, String> {
    let Some(("mig", rest)) = spec.split_once(':') else {
        return Err(format!("{spec:?} should be mig:key=value,key=value"));
    };
    let mut found = Discovery {
        name_prefix: String::new(),
        min: 0,
        max: 0,
    };
    for pair in rest.split(',') {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("invalid key=value pair {pair:?}"));
        };
        let number = || {
            value
                .parse::<i32>()
                .map_err(|_| format!("{key}={value:?} is not a number"))
        };
        match key {
            "namePrefix" => found.name_prefix = value.to_owned(),
            "min" => found.min = number()?,
            "max" => found.max = number()?,
            _ => {
                return Err(format!(
                    "unsupported key {key:?}; supported keys are namePrefix, min, max"
                ));
            }
        }
    }
    if found.name_prefix.is_empty() {
        return Err("empty instance group name prefix".to_owned());
    }
    if found.min > found.max {
        return Err(format!(
            "minimum size {} is greater than maximum size {}",
            found.min, found.max
        ));
    }
    if found.max < 1 {
        return Err(format!("maximum size {} must be at least 1", found.max));
    }
    Ok(found)
}

impl Config {
    /// Parses and checks YAML text; `origin` names it in errors.
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Self = parse_yaml(text, origin)?;
        let invalid = |field: String, message: String| ConfigError::Invalid {
            path: origin.to_owned(),
            field,
            message,
        };
        if config.project.is_empty() {
            return Err(invalid("project".into(), "must name the project".into()));
        }
        for (i, spec) in config.discovery.iter().enumerate() {
            parse_discovery(spec).map_err(|m| invalid(format!("discovery[{i}]"), m))?;
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, group) in config.node_groups.iter().enumerate() {
            let field = |f: &str| format!("nodeGroups[{i}].{f}");
            if group.mig.split('/').count() != 2 || group.mig.split('/').any(str::is_empty) {
                return Err(invalid(
                    field("mig"),
                    format!("{:?} is not <zone or region>/<name>", group.mig),
                ));
            }
            if !seen.insert(group.mig.as_str()) {
                return Err(invalid(
                    field("mig"),
                    format!("{:?} listed twice", group.mig),
                ));
            }
            group
                .settings
                .check()
                .map_err(|err| invalid(format!("nodeGroups[{i}]"), err.to_string()))?;
            if let Some(seconds) = group.run_duration_seconds
                && !(600..=7 * 24 * 3600).contains(&seconds)
            {
                return Err(invalid(
                    field("runDurationSeconds"),
                    format!("{seconds} is outside 600..=604800 (10 minutes to 7 days)"),
                ));
            }
        }
        Ok(config)
    }

    /// Reads and checks a file.
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        load(path, Self::parse)
    }

    /// The parsed discovery specs (checked by [`Config::parse`]).
    #[must_use]
    pub fn discovery_specs(&self) -> Vec<Discovery> {
        self.discovery
            .iter()
            .filter_map(|s| parse_discovery(s).ok())
            .collect()
    }

    /// The settings of group `id`, if listed.
    #[must_use]
    pub fn group(&self, id: &str) -> Option<&GroupConfig> {
        self.node_groups.iter().find(|g| g.mig == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_specs_follow_cluster_autoscaler() {
        assert_eq!(
            parse_discovery("mig:namePrefix=gke-gpu,min=0,max=16"),
            Ok(Discovery {
                name_prefix: "gke-gpu".into(),
                min: 0,
                max: 16
            })
        );
        assert!(parse_discovery("asg:tag=x").is_err());
        assert!(parse_discovery("mig:namePrefix=,min=0,max=1").is_err());
        assert!(parse_discovery("mig:namePrefix=a,min=3,max=2").is_err());
        assert!(parse_discovery("mig:namePrefix=a,min=0,max=0").is_err());
        assert!(parse_discovery("mig:prefix=a,max=2").is_err());
    }

    #[test]
    fn a_bad_group_is_named_with_its_field() {
        let err = Config::parse(
            "project: p\nnodeGroups: [{mig: gpu-a3, maxSize: 4}]",
            "test.yaml",
        )
        .expect_err("no location");
        assert!(err.to_string().contains("nodeGroups[0].mig"), "{err}");
        let err = Config::parse(
            "project: p\nnodeGroups: [{mig: us-central1-a/gpu, runDurationSeconds: 60}]",
            "test.yaml",
        )
        .expect_err("too short");
        assert!(err.to_string().contains("runDurationSeconds"), "{err}");
        assert!(
            Config::parse("nodeGroups: []", "t").is_err(),
            "project is required"
        );
    }

    #[test]
    fn a_group_entry_reads_the_shared_settings_and_refuses_unknown_keys() {
        let config = Config::parse(
            "project: p\nnodeGroups:\n- mig: us-central1-a/gpu\n  maxSize: 8\n  pricePerHour: 88.49\n  atomic: bulkInsert\n",
            "test.yaml",
        )
        .expect("valid");
        let group = &config.node_groups[0];
        assert_eq!(group.settings.max_size, Some(8));
        assert_eq!(group.settings.price_per_hour, Some(88.49));
        assert_eq!(group.atomic, AtomicMode::BulkInsert);

        // AWS's field is not GCE's: refused, not silently ignored.
        let err = Config::parse(
            "project: p\nnodeGroups:\n- mig: us-central1-a/gpu\n  capacityReservationId: cr-1\n",
            "test.yaml",
        )
        .expect_err("unknown key");
        assert!(
            err.to_string()
                .contains("unknown field `capacityReservationId`"),
            "{err}"
        );

        let err = Config::parse(
            "project: p\nnodeGroups:\n- mig: us-central1-a/gpu\n  minSize: 5\n  maxSize: 2\n",
            "test.yaml",
        )
        .expect_err("min above max");
        assert_eq!(
            err.to_string(),
            "config file test.yaml: nodeGroups[0]: minSize 5 is above maxSize 2"
        );
    }
}
