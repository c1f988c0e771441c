//! The Helm chart is tested like code: its CRD is the generated one, `helm
//! lint --strict` passes, and every value set in `ci/` renders manifests that
//! are well-formed Kubernetes objects, grant least privilege (no wildcards,
//! every watched resource covered), run the controller non-root on a
//! read-only root filesystem, and set only flags `dra-autoscaler run` accepts.
//!
//! helm comes from `$HELM`, `PATH`, or `charts/dra-autoscaler/ci/install-helm.sh`
//! (an npm package that ships the binary). Regenerate the CRD file with
//! `UPDATE_GOLDEN=1 cargo test -p dra-controller --test chart`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, CommandFactory, FromArgMatches, Parser};
use dra_controller::RunArgs;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/dra-autoscaler")
}

#[test]
fn chart_crd_is_the_generated_one() {
    let path = chart_dir().join("crds/nodegroups.dra-autoscaler.io.yaml");
    let generated = dra_api::crd_yaml().expect("CRD generates");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &generated).expect("CRD written");
    }
    let in_chart = std::fs::read_to_string(&path).expect("chart has the CRD file");
    assert!(
        in_chart == generated,
        "{} differs from dra_api::crd_yaml(); regenerate with UPDATE_GOLDEN=1",
        path.display()
    );
}

fn helm() -> PathBuf {
    if let Some(helm) = std::env::var_os("HELM") {
        return PathBuf::from(helm);
    }
    if Command::new("helm")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return PathBuf::from("helm");
    }
    let out = Command::new("bash")
        .arg(chart_dir().join("ci/install-helm.sh"))
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "helm is not installed and ci/install-helm.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    PathBuf::from(path)
}

fn run(helm: &Path, args: &[&str]) -> String {
    let out = Command::new(helm).args(args).output().expect("helm runs");
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `(API group, resource)` of everything the controller lists and watches
/// (see `watch::start`); the ClusterRole must cover each.
const WATCHED: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "nodes"),
    ("", "namespaces"),
    ("apps", "daemonsets"),
    ("scheduling.k8s.io", "priorityclasses"),
    ("policy", "poddisruptionbudgets"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceslices"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceclaimtemplates"),
    ("resource.k8s.io", "devicetaintrules"),
    ("dra-autoscaler.io", "nodegroups"),
    ("scheduling.k8s.io", "workloads"),
    ("scheduling.k8s.io", "podgroups"),
    ("scheduling.x-k8s.io", "podgroups"),
    ("scheduling.sigs.k8s.io", "podgroups"),
    ("scheduling.volcano.sh", "podgroups"),
    ("autoscaling.x-k8s.io", "provisioningrequests"),
    ("autoscaling.x-k8s.io", "capacitybuffers"),
    ("", "podtemplates"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("batch", "jobs"),
];

fn allows(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        r.api_groups
            .as_ref()
            .is_some_and(|g| g.iter().any(|g| g == group))
            && r.resources
                .as_ref()
                .is_some_and(|rs| rs.iter().any(|rs| rs == resource))
            && r.verbs.iter().any(|v| v == verb)
    })
}

fn assert_no_wildcards(name: &str, rules: &[PolicyRule]) {
    for rule in rules {
        let all = rule
            .verbs
            .iter()
            .chain(rule.api_groups.iter().flatten())
            .chain(rule.resources.iter().flatten())
            .chain(rule.resource_names.iter().flatten());
        for item in all {
            assert!(!item.contains('*'), "{name}: wildcard {item:?} in {rule:?}");
        }
        assert!(
            rule.non_resource_urls.is_none(),
            "{name}: non-resource URLs in {rule:?}"
        );
    }
}

fn typed<T: serde::de::DeserializeOwned>(doc: &Value) -> T {
    serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("not a valid object: {e}\n{doc:#}"))
}

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// The controller's env as `run` flags, parsed and validated like the binary.
fn parse_env_as_flags(env: &BTreeMap<String, String>) -> RunArgs {
    let command = RunArgs::augment_args(clap::Command::new("run"));
    let mut by_env = BTreeMap::new();
    for arg in command.get_arguments() {
        if let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) {
            by_env.insert(
                env.to_string_lossy().into_owned(),
                (long.to_string(), arg.get_action().takes_values()),
            );
        }
    }
    let mut argv = vec!["run".to_string()];
    for (name, value) in env {
        if name == "RUST_LOG" {
            continue;
        }
        // The binary's global `--log-format`, not a flag of `run`.
        if name == "DRA_AUTOSCALER_LOG_FORMAT" {
            value
                .parse::<dra_logging::LogFormat>()
                .unwrap_or_else(|e| panic!("the chart sets {name}={value}: {e}"));
            continue;
        }
        let (long, takes_value) = by_env.get(name).unwrap_or_else(|| {
            panic!("the chart sets {name}, which is no flag of `dra-autoscaler run`")
        });
        if *takes_value {
            argv.push(format!("--{long}={value}"));
        } else if value == "true" {
            argv.push(format!("--{long}"));
        }
    }
    let matches = Cli::command()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| panic!("the chart's settings are refused: {e}\n{argv:?}"));
    let args = Cli::from_arg_matches(&matches).expect("flags convert").run;
    // The TLS files the chart names are mounted from a Secret in the pod.
    args.validate_flags()
        .unwrap_or_else(|e| panic!("{e}: {argv:?}"));
    args
}

struct Rendered {
    kinds: BTreeMap<String, usize>,
    controller_env: BTreeMap<String, String>,
    args: RunArgs,
}

fn check(values: &str, text: &str) -> Rendered {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).expect("rendered YAML parses");
    let mut kinds = BTreeMap::new();
    let mut controller_env = BTreeMap::new();
    let mut roles: Vec<(String, Vec<PolicyRule>)> = Vec::new();
    for doc in docs.iter().filter(|d| !d.is_null()) {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(!name.is_empty(), "{values}: object without a name: {doc:#}");
        *kinds.entry(kind.clone()).or_default() += 1;
        match kind.as_str() {
            "Deployment" => {
                let d: Deployment = typed(doc);
                let pod = d.spec.template.spec.expect("pod spec");
                assert_eq!(
                    pod.security_context
                        .as_ref()
                        .and_then(|s| s.run_as_non_root),
                    Some(true),
                    "{values}/{name}: must run as non-root"
                );
                for c in &pod.containers {
                    let sc = c.security_context.clone().unwrap_or_default();
                    assert_eq!(
                        sc.read_only_root_filesystem,
                        Some(true),
                        "{values}/{name}/{}",
                        c.name
                    );
                    assert_eq!(
                        sc.allow_privilege_escalation,
                        Some(false),
                        "{values}/{name}/{}",
                        c.name
                    );
                    if c.name == "controller" {
                        let timeout: k8s_openapi::jiff::SignedDuration = c
                            .env
                            .iter()
                            .flatten()
                            .find(|e| e.name == "DRA_AUTOSCALER_PROVIDER_TIMEOUT")
                            .and_then(|e| e.value.as_deref())
                            .unwrap_or("30s")
                            .parse()
                            .expect("a duration");
                        let grace = pod.termination_grace_period_seconds.unwrap_or(30);
                        assert!(
                            grace > timeout.as_secs() + 5,
                            "{values}/{name}: terminationGracePeriodSeconds {grace} must outlast the provider timeout ({timeout:#}) and a status write"
                        );
                        for e in c.env.iter().flatten() {
                            let value = match (&e.value, &e.value_from) {
                                (Some(v), _) => v.clone(),
                                // A stand-in for the value the kubelet fills in (the pod's
                                // name or namespace), shaped as one so `run` accepts it.
                                (None, Some(_)) => {
                                    format!("from-{}", e.name.to_lowercase().replace('_', "-"))
                                }
                                (None, None) => String::new(),
                            };
                            controller_env.insert(e.name.clone(), value);
                        }
                    }
                }
            }
            "ClusterRole" => roles.push((
                name.clone(),
                typed::<ClusterRole>(doc).rules.unwrap_or_default(),
            )),
            "Role" => roles.push((name.clone(), typed::<Role>(doc).rules.unwrap_or_default())),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(doc)),
            "RoleBinding" => drop(typed::<RoleBinding>(doc)),
            "Service" => drop(typed::<Service>(doc)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(doc)),
            "ConfigMap" => drop(typed::<ConfigMap>(doc)),
            "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(doc)),
            "CustomResourceDefinition" => drop(typed::<CustomResourceDefinition>(doc)),
            "ServiceMonitor" => assert_eq!(doc["apiVersion"], "monitoring.coreos.com/v1"),
            other => panic!("{values}: unexpected kind {other}"),
        }
    }
    for (name, rules) in &roles {
        assert_no_wildcards(name, rules);
    }
    if let Some((name, rules)) = roles.iter().find(|(n, _)| n == "rel-dra-autoscaler") {
        for (group, resource) in WATCHED {
            for verb in ["list", "watch"] {
                assert!(
                    allows(rules, group, resource, verb),
                    "{values}/{name}: cannot {verb} {resource}.{group}"
                );
            }
        }
        assert!(allows(
            rules,
            "dra-autoscaler.io",
            "nodegroups/status",
            "update"
        ));
        assert!(allows(rules, "events.k8s.io", "events", "create"));
        for status in ["provisioningrequests/status", "capacitybuffers/status"] {
            assert!(allows(rules, "autoscaling.x-k8s.io", status, "patch"));
        }
        assert!(
            !allows(rules, "", "pods/status", "patch"),
            "status.nominatedNodeName is the scheduler's (KEP-5278)"
        );
        // Scale-down: taint nodes, evict pods; nothing more on either.
        assert!(allows(rules, "", "nodes", "patch"));
        assert!(allows(rules, "", "pods/eviction", "create"));
        assert!(
            !allows(rules, "", "pods", "delete"),
            "pods go through evictions"
        );
        assert!(
            !allows(rules, "", "nodes", "delete"),
            "machines go through the provider"
        );
        assert!(allows(rules, "events.k8s.io", "events", "patch"));
        // A node's NotRemovable Event is deleted once its cause is gone.
        assert!(allows(rules, "events.k8s.io", "events", "delete"));
        assert!(
            !allows(rules, "", "nodes", "create"),
            "the controller never creates Nodes"
        );
    }
    let args = parse_env_as_flags(&controller_env);
    Rendered {
        kinds,
        controller_env,
        args,
    }
}

#[test]
fn chart_readme_documents_every_flag() {
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("chart README");
    let command = RunArgs::augment_args(clap::Command::new("run"));
    for arg in command.get_arguments() {
        let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let env = env.to_string_lossy();
        assert!(readme.contains(&format!("`{env}`")), "README lacks {env}");
        assert!(
            readme.contains(&format!("`--{long}")),
            "README lacks --{long}"
        );
    }
}

#[test]
fn chart_refuses_a_log_format_the_binaries_refuse() {
    let out = Command::new(helm())
        .args(["template", "rel"])
        .arg(chart_dir())
        .args(["--set", "controller.logFormat=yaml"])
        .output()
        .expect("helm runs");
    assert!(!out.status.success(), "rendered with logFormat=yaml");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"controller.logFormat must be text or json, not "yaml""#),
        "{stderr}"
    );
}

#[test]
fn chart_lints_and_renders_every_value_set() {
    let helm = helm();
    let chart = chart_dir();
    let chart = chart.to_str().expect("UTF-8 path");
    let mut seen = BTreeSet::new();
    let mut sets: Vec<PathBuf> = std::fs::read_dir(chart_dir().join("ci"))
        .expect("ci/ exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("-values.yaml"))
        .collect();
    sets.sort();
    assert!(sets.len() >= 4, "value sets: {sets:?}");
    for set in sets {
        let values = set
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let file = set.to_str().expect("UTF-8 path");
        run(
            &helm,
            &[
                "lint",
                "--strict",
                "--kube-version",
                "1.35.0",
                chart,
                "-f",
                file,
            ],
        );
        let text = run(
            &helm,
            &[
                "template",
                "rel",
                chart,
                "-n",
                "dra-system",
                "--kube-version",
                "1.35.0",
                "--include-crds",
                "-f",
                file,
            ],
        );
        let rendered = check(&values, &text);
        // The NodeGroup CRD, plus cluster-autoscaler's two when asked for.
        let crds = if values == "upstream-crds-values.yaml" {
            3
        } else {
            1
        };
        assert_eq!(
            rendered.kinds.get("CustomResourceDefinition"),
            Some(&crds),
            "{values}"
        );
        match values.as_str() {
            "default-values.yaml" => {
                assert_eq!(rendered.kinds.get("PodDisruptionBudget"), Some(&1));
                assert_eq!(rendered.kinds.get("Role"), Some(&1), "leader-election Role");
                assert!(rendered.args.leader_elect);
                assert_eq!(
                    rendered.args.lease_namespace,
                    "from-dra-autoscaler-lease-namespace"
                );
                assert_eq!(rendered.args.providers.len(), 1);
            }
            "tls-ha-monitoring-values.yaml" => {
                assert_eq!(rendered.kinds.get("ServiceMonitor"), Some(&1));
                assert!(rendered.args.provider_client_key.is_some());
                assert_eq!(rendered.args.providers.len(), 2);
            }
            "fake-provider-values.yaml" => {
                assert_eq!(
                    rendered.kinds.get("Deployment"),
                    Some(&2),
                    "controller and fake provider"
                );
                assert_eq!(
                    rendered.kinds.get("PodDisruptionBudget"),
                    None,
                    "one replica: no PDB"
                );
                assert!(!rendered.args.leader_elect);
                assert_eq!(
                    rendered
                        .controller_env
                        .get("DRA_AUTOSCALER_PROVIDERS")
                        .map(String::as_str),
                    Some("fake=http://rel-dra-autoscaler-fake-provider.dra-system.svc:8086")
                );
            }
            "aws-provider-values.yaml" => {
                assert_eq!(
                    rendered.kinds.get("Deployment"),
                    Some(&2),
                    "controller and AWS provider"
                );
                assert_eq!(
                    rendered
                        .controller_env
                        .get("DRA_AUTOSCALER_PROVIDERS")
                        .map(String::as_str),
                    Some("aws=http://rel-dra-autoscaler-aws-provider.dra-system.svc:8086")
                );
                // logFormat reaches the controller and the provider alike.
                assert_eq!(
                    rendered
                        .controller_env
                        .get("DRA_AUTOSCALER_LOG_FORMAT")
                        .map(String::as_str),
                    Some("json")
                );
                assert!(
                    text.contains("- name: DRA_AWS_LOG_FORMAT\n              value: \"json\""),
                    "the AWS provider logs JSON too"
                );
                assert!(
                    text.contains(
                        "eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/dra-provider-aws"
                    ),
                    "the provider's ServiceAccount carries the IRSA annotation"
                );
                assert!(text.contains("/usr/local/bin/dra-provider-aws"));
            }
            "gce-provider-values.yaml" => {
                assert_eq!(
                    rendered.kinds.get("Deployment"),
                    Some(&2),
                    "controller and GCE provider"
                );
                assert_eq!(
                    rendered
                        .controller_env
                        .get("DRA_AUTOSCALER_PROVIDERS")
                        .map(String::as_str),
                    Some("gce=http://rel-dra-autoscaler-gce-provider.dra-system.svc:8086")
                );
                assert!(
                    text.contains("iam.gke.io/gcp-service-account"),
                    "the provider's ServiceAccount carries the Workload Identity annotation"
                );
            }
            "dry-run-values.yaml" => {
                assert!(rendered.args.dry_run);
                assert_eq!(rendered.kinds.get("ClusterRole"), None, "rbac.create=false");
                assert_eq!(rendered.kinds.get("ServiceAccount"), None);
            }
            "upstream-crds-values.yaml" => {
                for crd in [
                    "provisioningrequests.autoscaling.x-k8s.io",
                    "capacitybuffers.autoscaling.x-k8s.io",
                ] {
                    assert!(text.contains(&format!("name: {crd}")), "{values}: {crd}");
                }
                assert_eq!(
                    text.matches("helm.sh/resource-policy: keep").count(),
                    2,
                    "{values}: uninstalling keeps the upstream CRDs"
                );
            }
            other => panic!("add expectations for {other}"),
        }
        seen.insert(values);
    }
    assert_eq!(seen.len(), 7);
}
