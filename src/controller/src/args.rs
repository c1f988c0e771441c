//! Flags of `dra-autoscaler run`. Every flag has a `DRA_AUTOSCALER_…`
//! environment twin, which is how the Helm chart sets them.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
pub use dra_plan::args::PlanArgs;
use dra_sim::selectors::is_dns1123_subdomain;
use k8s_openapi::jiff::SignedDuration;

/// A provider endpoint: `NAME=URL`, where NAME is what NodeGroups put in
/// `spec.provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderEndpoint {
    /// The provider's name.
    pub name: String,
    /// `http://host:port` or `https://host:port`.
    pub url: String,
}

impl std::str::FromStr for ProviderEndpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, url) = s.split_once('=').ok_or_else(|| {
            format!("expected NAME=URL (e.g. fake=http://127.0.0.1:8086), got {s:?}")
        })?;
        if name.is_empty() {
            return Err(format!("provider name missing in {s:?}"));
        }
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "provider {name:?}: URL must start with http:// or https://, got {url:?}"
            ));
        }
        Ok(Self {
            name: name.to_string(),
            url: url.to_string(),
        })
    }
}

/// Flags of `run`.
#[derive(Debug, Clone, Args)]
#[allow(clippy::struct_excessive_bools)]
pub struct RunArgs {
    /// The scheduler modelled and the planner's choices.
    #[command(flatten)]
    pub plan: PlanArgs,

    /// How often to plan even when no pod became unschedulable. Shorter reacts
    /// faster to capacity freed elsewhere at the cost of CPU.
    #[arg(long, env = "DRA_AUTOSCALER_SCAN_INTERVAL", default_value = "10s")]
    pub scan_interval: SignedDuration,

    /// Pods younger than this are left to the scheduler (which may still place
    /// them); longer batches bursts of pods into fewer scale-ups.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_NEW_POD_SCALE_UP_DELAY",
        default_value = "0s"
    )]
    pub new_pod_scale_up_delay: SignedDuration,

    /// Pods with a priority below this never trigger a scale-up.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_EXPENDABLE_PODS_PRIORITY_CUTOFF",
        default_value_t = -10,
        allow_hyphen_values = true
    )]
    pub expendable_pods_priority_cutoff: i32,

    /// Requested nodes that have not registered (or become Ready) after this
    /// are given up on: the provider is asked to delete them and the group
    /// backs off. GPU nodes can take long to boot; too short wastes them.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_MAX_NODE_PROVISION_TIME",
        default_value = "15m"
    )]
    pub max_node_provision_time: SignedDuration,

    /// First backoff of a node group after a failed or timed-out scale-up;
    /// it doubles with every further failure.
    #[arg(long, env = "DRA_AUTOSCALER_INITIAL_BACKOFF", default_value = "5m")]
    pub initial_backoff: SignedDuration,

    /// Longest backoff of a node group.
    #[arg(long, env = "DRA_AUTOSCALER_MAX_BACKOFF", default_value = "30m")]
    pub max_backoff: SignedDuration,

    /// An identical Event (same object, reason and message) is published at
    /// most once per this window.
    #[arg(long, env = "DRA_AUTOSCALER_EVENT_DEDUP_WINDOW", default_value = "10m")]
    pub event_dedup_window: SignedDuration,

    /// Elect a leader with a Lease so several replicas can run with one active.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_LEADER_ELECT",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub leader_elect: bool,

    /// Name of the leader-election Lease.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_LEASE_NAME",
        default_value = "dra-autoscaler"
    )]
    pub lease_name: String,

    /// Namespace of the Lease (the chart sets the pod's namespace).
    #[arg(
        long,
        env = "DRA_AUTOSCALER_LEASE_NAMESPACE",
        default_value = "kube-system"
    )]
    pub lease_namespace: String,

    /// How long a lease stays valid after its last renewal; a standby takes
    /// over this long after the leader dies.
    #[arg(long, env = "DRA_AUTOSCALER_LEASE_DURATION", default_value = "15s")]
    pub lease_duration: SignedDuration,

    /// The leader steps down when it could not renew for this long; must be
    /// shorter than the lease duration.
    #[arg(long, env = "DRA_AUTOSCALER_RENEW_DEADLINE", default_value = "10s")]
    pub renew_deadline: SignedDuration,

    /// How often to try to acquire or renew the lease.
    #[arg(long, env = "DRA_AUTOSCALER_RETRY_PERIOD", default_value = "2s")]
    pub retry_period: SignedDuration,

    /// This replica's identity in the Lease and in Events. Default: the host
    /// name (the pod name in a cluster).
    #[arg(long, env = "DRA_AUTOSCALER_IDENTITY")]
    pub identity: Option<String>,

    /// Address of the `/metrics`, `/healthz` and `/readyz` listener.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_LISTEN_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    pub listen_address: SocketAddr,

    /// Provider endpoints, `NAME=URL`, comma-separated or repeated; NAME is a
    /// NodeGroup's `spec.provider`.
    #[arg(
        long = "provider",
        env = "DRA_AUTOSCALER_PROVIDERS",
        value_delimiter = ','
    )]
    pub providers: Vec<ProviderEndpoint>,

    /// CA bundle provider certificates must chain to; enables TLS.
    #[arg(long, env = "DRA_AUTOSCALER_PROVIDER_CA_CERT")]
    pub provider_ca_cert: Option<PathBuf>,

    /// Client certificate for mutual TLS with providers.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_PROVIDER_CLIENT_CERT",
        requires = "provider_client_key"
    )]
    pub provider_client_cert: Option<PathBuf>,

    /// Client key for mutual TLS with providers.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_PROVIDER_CLIENT_KEY",
        requires = "provider_client_cert"
    )]
    pub provider_client_key: Option<PathBuf>,

    /// Name to verify provider certificates against, when it differs from the
    /// endpoint host.
    #[arg(long, env = "DRA_AUTOSCALER_PROVIDER_TLS_SERVER_NAME")]
    pub provider_tls_server_name: Option<String>,

    /// Deadline of one provider call.
    #[arg(long, env = "DRA_AUTOSCALER_PROVIDER_TIMEOUT", default_value = "30s")]
    pub provider_timeout: SignedDuration,

    /// Plan, write status and publish Events, but send scale-ups to an
    /// in-memory provider instead of a real one (and remove no node).
    #[arg(long, env = "DRA_AUTOSCALER_DRY_RUN")]
    pub dry_run: bool,

    /// Remove nodes that stay underused and whose pods can all move elsewhere.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_SCALE_DOWN_ENABLED",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub scale_down_enabled: bool,

    /// How long a node must be unneeded before it is removed (a NodeGroup's
    /// `spec.scaleDown.unneededTime` overrides it).
    #[arg(
        long,
        env = "DRA_AUTOSCALER_SCALE_DOWN_UNNEEDED_TIME",
        default_value = "10m"
    )]
    pub scale_down_unneeded_time: SignedDuration,

    /// The same for a node with no pod to move (`spec.scaleDown.emptyUnneededTime`).
    #[arg(
        long,
        env = "DRA_AUTOSCALER_SCALE_DOWN_EMPTY_UNNEEDED_TIME",
        default_value = "1m"
    )]
    pub scale_down_empty_unneeded_time: SignedDuration,

    /// A node whose highest utilisation (CPU, memory, each DRA pool's devices
    /// and shared counters) is below this fraction is underused
    /// (`spec.scaleDown.utilizationThreshold` overrides it).
    #[arg(
        long,
        env = "DRA_AUTOSCALER_SCALE_DOWN_UTILIZATION_THRESHOLD",
        default_value_t = 0.5
    )]
    pub scale_down_utilization_threshold: f64,

    /// No node is removed for this long after a scale-up.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_SCALE_DOWN_DELAY_AFTER_ADD",
        default_value = "10m"
    )]
    pub scale_down_delay_after_add: SignedDuration,

    /// At most this many nodes are being removed at once.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_MAX_SCALE_DOWN_PARALLELISM",
        default_value_t = 10
    )]
    pub max_scale_down_parallelism: usize,

    /// How long evicting a node's pods (respecting PodDisruptionBudgets) and
    /// waiting for them to terminate may take; past it the removal is given
    /// up and the node untainted.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_MAX_GRACEFUL_TERMINATION",
        default_value = "10m"
    )]
    pub max_graceful_termination: SignedDuration,
}

/// A flag value that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid --{flag}: {message}")]
pub struct InvalidArg {
    /// The flag.
    pub flag: &'static str,
    /// What is wrong.
    pub message: String,
}

impl RunArgs {
    /// Checks relations between flags that clap cannot, and that the files
    /// the flags name can be read.
    ///
    /// # Errors
    /// The first inconsistent flag, or one naming a file that cannot be read.
    pub fn validate(&self) -> Result<(), InvalidArg> {
        self.validate_flags()?;
        self.check_files()
    }

    /// The checks of [`Self::validate`] that read nothing but the flags (the
    /// chart's rendering is checked with these: its files are mounted in the
    /// pod, not present where the chart is rendered).
    ///
    /// # Errors
    /// The first inconsistent flag.
    pub fn validate_flags(&self) -> Result<(), InvalidArg> {
        self.validate_cluster_and_provider_flags()?;
        let positive = [
            ("scan-interval", self.scan_interval),
            ("max-node-provision-time", self.max_node_provision_time),
            ("initial-backoff", self.initial_backoff),
            ("lease-duration", self.lease_duration),
            ("renew-deadline", self.renew_deadline),
            ("retry-period", self.retry_period),
            ("provider-timeout", self.provider_timeout),
            ("max-graceful-termination", self.max_graceful_termination),
        ];
        for (flag, value) in positive {
            if !value.is_positive() {
                return Err(InvalidArg {
                    flag,
                    message: format!("must be positive, got {value:#}"),
                });
            }
        }
        for (flag, value) in [
            ("scale-down-unneeded-time", self.scale_down_unneeded_time),
            (
                "scale-down-empty-unneeded-time",
                self.scale_down_empty_unneeded_time,
            ),
            (
                "scale-down-delay-after-add",
                self.scale_down_delay_after_add,
            ),
        ] {
            if value.is_negative() {
                return Err(InvalidArg {
                    flag,
                    message: "must not be negative".into(),
                });
            }
        }
        if !(0.0..=1.0).contains(&self.scale_down_utilization_threshold) {
            return Err(InvalidArg {
                flag: "scale-down-utilization-threshold",
                message: format!(
                    "must be a fraction between 0 and 1, got {}",
                    self.scale_down_utilization_threshold
                ),
            });
        }
        if self.new_pod_scale_up_delay.is_negative() {
            return Err(InvalidArg {
                flag: "new-pod-scale-up-delay",
                message: "must not be negative".into(),
            });
        }
        if self.max_backoff < self.initial_backoff {
            return Err(InvalidArg {
                flag: "max-backoff",
                message: format!(
                    "{:#} is shorter than --initial-backoff {:#}",
                    self.max_backoff, self.initial_backoff
                ),
            });
        }
        if self.leader_elect && self.renew_deadline >= self.lease_duration {
            return Err(InvalidArg {
                flag: "renew-deadline",
                message: format!(
                    "{:#} must be shorter than --lease-duration {:#}, or two replicas could lead at once",
                    self.renew_deadline, self.lease_duration
                ),
            });
        }
        if self.leader_elect && self.retry_period >= self.renew_deadline {
            return Err(InvalidArg {
                flag: "retry-period",
                message: format!(
                    "{:#} must be shorter than --renew-deadline {:#}",
                    self.retry_period, self.renew_deadline
                ),
            });
        }
        if !self.dry_run && self.providers.is_empty() {
            return Err(InvalidArg {
                flag: "provider",
                message: "no provider endpoint given (NAME=URL); use --dry-run to run without one"
                    .into(),
            });
        }
        Ok(())
    }

    /// The flags about leader election, Events and providers, checked as their users would
    /// check them later (after watches had started), once up front.
    fn validate_cluster_and_provider_flags(&self) -> Result<(), InvalidArg> {
        let invalid = |flag: &'static str, message: String| InvalidArg { flag, message };
        // The scheduler flags (`--kubernetes-version`, `--feature-gates`,
        // `--dra-filter-timeout`, `--min-reservation-left`) are checked by their clap parsers
        // in `PlanArgs`.
        if self.event_dedup_window.is_negative() {
            return Err(invalid(
                "event-dedup-window",
                format!("must not be negative, got {:#}", self.event_dedup_window),
            ));
        }
        if !is_dns1123_subdomain(&self.lease_name) {
            return Err(invalid(
                "lease-name",
                format!(
                    "{:?} is not a valid object name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.')",
                    self.lease_name
                ),
            ));
        }
        if !is_dns1123_subdomain(&self.lease_namespace)
            || self.lease_namespace.contains('.')
            || self.lease_namespace.len() > 63
        {
            return Err(invalid(
                "lease-namespace",
                format!(
                    "{:?} is not a valid namespace (a DNS-1123 label: lowercase letters, digits and '-', at most 63)",
                    self.lease_namespace
                ),
            ));
        }
        if self
            .identity
            .as_deref()
            .is_some_and(|i| i.trim().is_empty())
        {
            return Err(invalid("identity", "must not be empty".into()));
        }
        let mut names = std::collections::BTreeSet::new();
        for endpoint in &self.providers {
            if !names.insert(endpoint.name.as_str()) {
                return Err(invalid(
                    "provider",
                    format!("provider {:?} is given twice", endpoint.name),
                ));
            }
        }
        if self.provider_ca_cert.is_none() {
            // TLS is turned on by the CA bundle; without it these would be silently unused.
            for (flag, given) in [
                ("provider-client-cert", self.provider_client_cert.is_some()),
                (
                    "provider-tls-server-name",
                    self.provider_tls_server_name.is_some(),
                ),
            ] {
                if given {
                    return Err(invalid(
                        flag,
                        "needs --provider-ca-cert (TLS with providers is on only with a CA bundle)"
                            .into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The provider TLS files the flags name can be read.
    ///
    /// # Errors
    /// The first flag whose file cannot be read.
    pub fn check_files(&self) -> Result<(), InvalidArg> {
        let invalid = |flag: &'static str, message: String| InvalidArg { flag, message };
        for (flag, path) in [
            ("provider-ca-cert", &self.provider_ca_cert),
            ("provider-client-cert", &self.provider_client_cert),
            ("provider-client-key", &self.provider_client_key),
        ] {
            if let Some(path) = path
                && let Err(error) = std::fs::metadata(path)
            {
                return Err(invalid(
                    flag,
                    format!("cannot read {}: {error}", path.display()),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use dra_plan::Expander;
    use dra_plan::gang_apis::GangApisFound;
    use dra_sim::KubeVersion;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.run)
    }

    #[test]
    fn planning_gates_follow_the_gang_api_then_the_flag_with_the_filter_timeout() {
        let served = GangApisFound::served([("scheduling.k8s.io/v1beta1", "PodGroup")]);
        let version: KubeVersion = "1.35".parse().unwrap();
        let args = parse(&["--dry-run", "--dra-filter-timeout", "250ms"]).unwrap();
        let resolved = args.plan.planning_gates(version, &served).unwrap();
        assert!(resolved.gates.generic_workload && resolved.gates.gang_scheduling);
        assert_eq!(resolved.gates.dra_filter_timeout_ms, 250);
        assert!(resolved.summary.is_some());
        // The flag wins over what the cluster serves.
        let off = parse(&["--dry-run", "--feature-gates", "GenericWorkload=false"]).unwrap();
        let resolved = off.plan.planning_gates(version, &served).unwrap();
        assert!(!resolved.gates.generic_workload);
        assert_eq!(resolved.gates.dra_filter_timeout_ms, 10_000);
        // Nothing served: the version's defaults, as `gates` gives them.
        let none = GangApisFound::served([]);
        assert_eq!(
            off.plan.planning_gates(version, &none).unwrap().gates,
            off.plan.gates(version).unwrap()
        );
        let negative = parse(&["--dry-run", "--dra-filter-timeout", "-1s"]).unwrap_err();
        assert!(negative.to_string().contains("negative"), "{negative}");
    }

    #[test]
    fn defaults_match_cluster_autoscaler_where_it_has_one() {
        let args = parse(&["--provider", "fake=http://127.0.0.1:8086"]).unwrap();
        assert_eq!(args.max_node_provision_time, SignedDuration::from_mins(15));
        assert_eq!(args.expendable_pods_priority_cutoff, -10);
        assert_eq!(args.scan_interval, SignedDuration::from_secs(10));
        assert!(args.leader_elect);
        assert_eq!(args.plan.expander, Expander::LeastCost);
        assert_eq!(args.plan.kubernetes_version, None);
        assert_eq!(
            args.plan.min_reservation_left,
            SignedDuration::from_hours(1)
        );
        assert_eq!(
            args.providers,
            vec![ProviderEndpoint {
                name: "fake".into(),
                url: "http://127.0.0.1:8086".into()
            }]
        );
        assert_eq!(args.validate(), Ok(()));
    }

    #[test]
    fn providers_split_on_commas_and_negative_cutoff_parses() {
        let args = parse(&[
            "--provider",
            "a=http://a:1,b=https://b:2",
            "--expendable-pods-priority-cutoff",
            "-100",
            "--leader-elect",
            "false",
        ])
        .unwrap();
        assert_eq!(args.providers.len(), 2);
        assert_eq!(args.expendable_pods_priority_cutoff, -100);
        assert!(!args.leader_elect);
    }

    #[test]
    fn inconsistent_flags_are_refused_by_name() {
        let bad_url = parse(&["--provider", "fake=127.0.0.1:8086"]).unwrap_err();
        assert!(bad_url.to_string().contains("http://"), "{bad_url}");
        let args = parse(&["--dry-run", "--renew-deadline", "20s"]).unwrap();
        assert_eq!(args.validate().unwrap_err().flag, "renew-deadline");
        // clap refuses an unknown expander or gate before anything runs,
        // listing what it takes.
        let expander = parse(&["--dry-run", "--expander", "cheapest"]).unwrap_err();
        assert!(expander.to_string().contains("least-waste"), "{expander}");
        let gates = parse(&["--dry-run", "--feature-gates", "DRAMagic=true"]).unwrap_err();
        assert!(
            gates.to_string().contains("unknown feature gate"),
            "{gates}"
        );
        let version = parse(&["--dry-run", "--kubernetes-version", "1.20"]).unwrap_err();
        assert!(version.to_string().contains("1.34 to 1.37"), "{version}");
        let args = parse(&[]).unwrap();
        assert_eq!(args.validate().unwrap_err().flag, "provider");
        let args = parse(&["--dry-run", "--scale-down-utilization-threshold", "1.5"]).unwrap();
        assert_eq!(
            args.validate().unwrap_err().flag,
            "scale-down-utilization-threshold"
        );
    }

    #[test]
    fn cluster_and_provider_flags_are_checked_before_anything_starts() {
        let refused = |extra: &[&str]| {
            let mut argv = vec!["--dry-run"];
            argv.extend_from_slice(extra);
            parse(&argv).unwrap().validate().unwrap_err()
        };
        // The scheduler flags are refused by clap itself (PlanArgs' value parsers).
        assert!(parse(&["--dry-run", "--kubernetes-version", "1.29"]).is_err());
        assert!(parse(&["--dry-run", "--feature-gates", "DRAAdminAccess=yes"]).is_err());
        assert_eq!(
            refused(&["--event-dedup-window=-1m"]).flag,
            "event-dedup-window"
        );
        // Object names as the API server validates them.
        assert_eq!(refused(&["--lease-name", "Not_A_Name"]).flag, "lease-name");
        assert_eq!(
            refused(&["--lease-namespace", "kube.system"]).flag,
            "lease-namespace"
        );
        assert_eq!(refused(&["--identity", " "]).flag, "identity");
        let e = refused(&["--provider", "fake=http://a:1,fake=http://b:2"]);
        assert_eq!(
            (e.flag, e.message.as_str()),
            ("provider", "provider \"fake\" is given twice")
        );
        // TLS settings that would be silently unused, and files that are not there.
        assert_eq!(
            refused(&["--provider-tls-server-name", "provider.example"]).flag,
            "provider-tls-server-name"
        );
        let e = refused(&["--provider-ca-cert", "/nonexistent/ca.pem"]);
        assert_eq!(e.flag, "provider-ca-cert");
        assert!(e.message.contains("/nonexistent/ca.pem"), "{e}");

        let fine = parse(&[
            "--dry-run",
            "--kubernetes-version",
            "1.35",
            "--feature-gates",
            "DRAPartitionableDevices=false, DRAListTypeAttributes=true",
            "--dra-filter-timeout",
            "0s",
            "--lease-namespace",
            "autoscaling",
        ])
        .unwrap();
        assert_eq!(fine.validate(), Ok(()));
    }

    #[test]
    fn scale_down_defaults_follow_cluster_autoscaler() {
        let args = parse(&["--dry-run"]).unwrap();
        assert!(args.scale_down_enabled);
        assert_eq!(args.scale_down_unneeded_time, SignedDuration::from_mins(10));
        assert_eq!(
            args.scale_down_delay_after_add,
            SignedDuration::from_mins(10)
        );
        assert_eq!(args.scale_down_utilization_threshold, 0.5);
        assert_eq!(args.max_scale_down_parallelism, 10);
        assert_eq!(args.max_graceful_termination, SignedDuration::from_mins(10));
        let off = parse(&["--dry-run", "--scale-down-enabled", "false"]).unwrap();
        assert!(!off.scale_down_enabled);
    }
}
