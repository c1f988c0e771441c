//! The book's reference pages, rendered from the code so they cannot drift: the flags of
//! `simulate` and `run` from clap, the NodeGroup fields from the CRD schema the code builds,
//! and (with the controller) the metrics from the controller's registry and the Events and
//! NodeGroup conditions from its catalog (`dra_controller::catalog`).
//!
//! The pages are checked in under `docs/reference/`; `tests/reference_docs.rs` fails when one
//! is stale and says how to regenerate them (`docs/contributing/docs.md`).

use std::fmt::Write as _;

use clap::CommandFactory;
use serde_json::Value;

use crate::Cli;

/// One generated page: its path under the repository root and its text.
#[derive(Debug)]
pub struct Page {
    /// Path from the repository root, e.g. `docs/reference/cli.md`.
    pub path: &'static str,
    /// The whole Markdown text.
    pub text: String,
}

/// The first line of every generated page, so nobody edits one by hand.
const GENERATED: &str = "<!-- Generated from the code by src/cli/src/reference.rs: do not edit; see docs/contributing/docs.md -->\n\n";

/// Every generated page of this build.
#[must_use]
pub fn pages() -> Vec<Page> {
    let pages = vec![
        Page {
            path: "docs/reference/cli.md",
            text: cli_page(),
        },
        Page {
            path: "docs/reference/nodegroup-crd.md",
            text: crd_page(),
        },
    ];
    #[cfg(feature = "controller")]
    let pages = {
        let mut pages = pages;
        pages.push(Page {
            path: "docs/reference/metrics.md",
            text: metrics_page(),
        });
        pages.push(Page {
            path: "docs/reference/events.md",
            text: events_page(),
        });
        pages.push(Page {
            path: "docs/reference/conditions.md",
            text: conditions_page(),
        });
        pages
    };
    pages
}

/// Keeps a help text on one Markdown line and out of table syntax.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The command-line reference: every subcommand, every flag with its help, env twin,
/// default and possible values, as clap has them.
#[must_use]
pub fn cli_page() -> String {
    let mut cli = Cli::command();
    // Propagates global flags (`--log-format`) into the subcommands.
    cli.build();
    let mut out = String::from(GENERATED);
    out.push_str("# Command line\n\n");
    let _ = writeln!(
        out,
        "{}\n\nEvery flag has an environment twin (`DRA_AUTOSCALER_*`); a flag given on the \
         command line wins over its twin. `dra-autoscaler <command> --help` prints the same.\n",
        one_line(&cli.get_about().map(ToString::to_string).unwrap_or_default())
    );
    for sub in cli.get_subcommands() {
        let name = sub.get_name();
        if name == "help" {
            continue;
        }
        let _ = writeln!(out, "## `dra-autoscaler {name}`\n");
        let about = sub
            .get_long_about()
            .or_else(|| sub.get_about())
            .map(ToString::to_string)
            .unwrap_or_default();
        let _ = writeln!(out, "{}\n", one_line(&about));
        let mut positional = Vec::new();
        let mut flags = Vec::new();
        for arg in sub.get_arguments() {
            if arg.is_hide_set() || arg.get_id() == "help" || arg.get_id() == "version" {
                continue;
            }
            if arg.is_positional() {
                positional.push(arg);
            } else {
                flags.push(arg);
            }
        }
        for arg in positional {
            let value = arg
                .get_value_names()
                .and_then(|names| names.first())
                .map_or_else(|| arg.get_id().to_string(), ToString::to_string);
            let help = arg.get_long_help().or_else(|| arg.get_help());
            let _ = writeln!(
                out,
                "- `<{value}>`: {}",
                one_line(&help.map(ToString::to_string).unwrap_or_default())
            );
        }
        if !flags.is_empty() {
            out.push('\n');
        }
        for arg in flags {
            render_flag(&mut out, arg);
        }
    }
    out
}

fn render_flag(out: &mut String, arg: &clap::Arg) {
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    let value = if takes_value {
        arg.get_value_names()
            .and_then(|names| names.first())
            .map_or_else(
                || format!(" <{}>", arg.get_id().as_str().to_uppercase()),
                |v| format!(" <{v}>"),
            )
    } else {
        String::new()
    };
    let _ = writeln!(out, "### `{}{value}`\n", names.join(", "));
    let help = arg.get_long_help().or_else(|| arg.get_help());
    let _ = writeln!(
        out,
        "{}\n",
        one_line(&help.map(ToString::to_string).unwrap_or_default())
    );
    if let Some(env) = arg.get_env() {
        let _ = writeln!(out, "- env: `{}`", env.to_string_lossy());
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if takes_value && !defaults.is_empty() {
        let default = defaults.join(",");
        if default.is_empty() {
            out.push_str("- default: empty\n");
        } else {
            let _ = writeln!(out, "- default: `{default}`");
        }
    }
    let possible = arg.get_possible_values();
    if takes_value && !possible.is_empty() {
        let values: Vec<String> = possible
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| match v.get_help() {
                Some(help) => format!("`{}` ({})", v.get_name(), one_line(&help.to_string())),
                None => format!("`{}`", v.get_name()),
            })
            .collect();
        let _ = writeln!(out, "- values: {}", values.join(", "));
    }
    if arg.is_global_set() {
        let _ = writeln!(out, "- global: given before or after the command");
    }
    out.push('\n');
}

/// The NodeGroup reference: every field of every served version's schema, as the CRD that
/// `dra-autoscaler crd` prints declares it.
#[must_use]
pub fn crd_page() -> String {
    let crd = serde_json::to_value(dra_api::crd()).unwrap_or(Value::Null);
    let mut out = String::from(GENERATED);
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
    let scope = crd["spec"]["scope"].as_str().unwrap_or_default();
    let _ = writeln!(out, "# NodeGroup CRD\n");
    let _ = writeln!(
        out,
        "`{kind}` (`{}`, {scope}-scoped), from the schema `dra-autoscaler crd` prints. Examples: \
         [`testdata/nodegroups/`](../../testdata/nodegroups/h200-reserved.yaml), \
         [`testdata/examples/gpu-gang-scale-up.yaml`](../../testdata/examples/gpu-gang-scale-up.yaml).\n",
        crd["spec"]["names"]["plural"]
            .as_str()
            .map(|plural| format!("{plural}.{group}"))
            .unwrap_or_default()
    );
    for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
        let name = version["name"].as_str().unwrap_or_default();
        let _ = writeln!(out, "## `{group}/{name}`\n");
        let schema = &version["schema"]["openAPIV3Schema"];
        for part in ["spec", "status"] {
            let props = &schema["properties"][part];
            if props.is_null() {
                continue;
            }
            let _ = writeln!(out, "### `{part}`\n");
            let _ = writeln!(
                out,
                "{}\n",
                one_line(props["description"].as_str().unwrap_or(""))
            );
            out.push_str("| field | type | required | description |\n|---|---|---|---|\n");
            render_properties(&mut out, part, props);
            out.push('\n');
        }
    }
    out
}

fn schema_type(schema: &Value) -> String {
    if schema["x-kubernetes-int-or-string"] == Value::Bool(true) {
        return "int or string".into();
    }
    match schema["type"].as_str() {
        Some("array") => format!("[]{}", schema_type(&schema["items"])),
        Some("object")
            if schema["properties"].is_null() && schema["additionalProperties"].is_object() =>
        {
            format!(
                "map[string]{}",
                schema_type(&schema["additionalProperties"])
            )
        }
        Some(t) => schema["format"]
            .as_str()
            .map_or_else(|| t.to_string(), |f| format!("{t} ({f})")),
        None => "any".into(),
    }
}

fn render_properties(out: &mut String, path: &str, schema: &Value) {
    // Arrays and maps document their elements' fields under `path[]` and `path.*`.
    let (path, schema) = match schema["type"].as_str() {
        Some("array") => (format!("{path}[]"), &schema["items"]),
        Some("object")
            if schema["properties"].is_null() && schema["additionalProperties"].is_object() =>
        {
            (format!("{path}.*"), &schema["additionalProperties"])
        }
        _ => (path.to_string(), schema),
    };
    let Some(properties) = schema["properties"].as_object() else {
        return;
    };
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for (name, field) in properties {
        let field_path = format!("{path}.{name}");
        let mut description = one_line(field["description"].as_str().unwrap_or(""));
        if let Some(values) = field["enum"].as_array() {
            let values: Vec<String> = values
                .iter()
                .map(|v| format!("`{}`", v.as_str().unwrap_or_default()))
                .collect();
            let _ = write!(description, " One of {}.", values.join(", "));
        }
        if !field["default"].is_null() {
            let _ = write!(description, " Default `{}`.", field["default"]);
        }
        if let Some(list_type) = field["x-kubernetes-list-type"].as_str() {
            let _ = write!(description, " List type `{list_type}`.");
        }
        let _ = writeln!(
            out,
            "| `{field_path}` | {} | {} | {} |",
            schema_type(field),
            if required.contains(&name.as_str()) {
                "yes"
            } else {
                ""
            },
            description.replace('|', "\\|").trim()
        );
        render_properties(out, &field_path, field);
    }
}

/// The metrics reference: name, type, labels and help of every metric the controller
/// registers, read from its registry's exposition. The exposition leaves out a family until it
/// has a series, so [`sample_series`] gives each family one; `tests/reference_docs.rs` checks
/// that the page lists as many metrics as `metrics.rs` registers, so a new family without a
/// sample fails there rather than going missing here.
#[cfg(feature = "controller")]
#[must_use]
pub fn metrics_page() -> String {
    let metrics = dra_controller::metrics::Metrics::new();
    sample_series(&metrics);
    let exposition = metrics.encode();
    let mut out = String::from(GENERATED);
    out.push_str(
        "# Metrics\n\nServed on `/metrics` (OpenMetrics text), all under the prefix \
         `dra_autoscaler_`; counters carry the suffix `_total`. Labels are bounded: node \
         group names, capacity types and reason categories. \
         [Operating](../operations.md#metrics-metrics-prefix-dra_autoscaler_) says how to read \
         them.\n\n| metric | type | labels | help |\n|---|---|---|---|\n",
    );
    for metric in parse_exposition(&exposition) {
        let labels: Vec<String> = metric.labels.iter().map(|l| format!("`{l}`")).collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            metric.exposed,
            metric.kind,
            labels.join(", "),
            metric.help.replace('|', "\\|")
        );
    }
    let codes: Vec<String> = dra_plan::scaledown::UnremovableReason::ALL
        .iter()
        .map(|c| format!("`{}`", c.as_str()))
        .collect();
    let _ = write!(
        out,
        "\n## Reason labels\n\n\
         `reason` of `dra_autoscaler_unremovable_nodes` is the `code` of each `scaleDownBlocked` \
         entry of `simulate` (cluster-autoscaler's `UnremovableReason` names where the meaning is \
         the same); every code has a series, 0 when no node was kept for it: {}.\n\n\
         `reason` of `dra_autoscaler_unschedulable_gangs` is, per pending gang of more than one \
         pod, the fit engine's code (`reasonCodes` of `simulate`) most of its members' refusals \
         carry; without one, `{}` (it lands with a member on a new node), `{}` (it lands on nodes \
         that exist or are coming) or `{}` (it waits). A reason seen once keeps its series, at 0 \
         when no gang has it. The total of pending gangs, the gauge's value before it had a \
         label, is `sum(dra_autoscaler_unschedulable_gangs)`.\n",
        codes.join(", "),
        dra_controller::metrics::GANG_SCALE_UP_PLANNED,
        dra_controller::metrics::GANG_FITS_EXISTING_NODES,
        dra_controller::metrics::GANG_UNCLASSIFIED,
    );
    out
}

/// The Events reference, from the controller's catalog.
#[cfg(feature = "controller")]
#[must_use]
pub fn events_page() -> String {
    let mut out = String::from(GENERATED);
    out.push_str(
        "# Events\n\nThe Events the controller writes (`events.k8s.io/v1`), by reason. How they \
         are aggregated and how to list them is in [Operating: Events](../operations.md#events); \
         ProvisioningRequest Events carry cluster-autoscaler's condition reasons and are listed \
         with [ProvisioningRequest conditions](../operations.md#provisioningrequest-conditions).\n\n\
         | reason | type | on | when | message |\n|---|---|---|---|---|\n",
    );
    for e in dra_controller::catalog::EVENTS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            e.reason,
            e.type_.as_str(),
            e.on,
            one_line(e.when).replace('|', "\\|"),
            one_line(e.message).replace('|', "\\|")
        );
    }
    out
}

/// The conditions reference, from the controller's catalog.
#[cfg(feature = "controller")]
#[must_use]
pub fn conditions_page() -> String {
    let mut out = String::from(GENERATED);
    out.push_str(
        "# Conditions\n\nThe condition types the controller sets on NodeGroups, each with its \
         statuses and reasons; the fields of the condition list are in the \
         [NodeGroup CRD reference](nodegroup-crd.md#status). Conditions of other objects:\n\n\
         - ProvisioningRequest (`Accepted`, `Provisioned`, `Failed`, `BookingExpired`), with \
         cluster-autoscaler's reasons: [Operating: ProvisioningRequest conditions](../operations.md#provisioningrequest-conditions);\n\
         - CapacityBuffer (`ReadyForProvisioning`, `Provisioning`): \
         [Operating: CapacityBuffer status](../operations.md#capacitybuffer-status).\n",
    );
    for c in dra_controller::catalog::NODE_GROUP_CONDITIONS {
        let _ = write!(
            out,
            "\n## {}\n\n{}\n\n| status | reason | when |\n|---|---|---|\n",
            c.type_,
            one_line(c.meaning)
        );
        for r in c.reasons {
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} |",
                r.status,
                r.reason,
                one_line(r.when).replace('|', "\\|")
            );
        }
    }
    out
}

/// One metric as the exposition describes it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetricDoc {
    /// The name a scrape sees (counters with `_total`).
    pub exposed: String,
    /// `counter`, `gauge`, `histogram`, ...
    pub kind: String,
    /// Label names of its series (not `le`, which histograms add).
    pub labels: Vec<String>,
    /// The help text.
    pub help: String,
}

/// The metrics of an OpenMetrics text exposition, sorted by name.
#[must_use]
pub fn parse_exposition(exposition: &str) -> Vec<MetricDoc> {
    let mut docs: Vec<MetricDoc> = Vec::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            docs.push(MetricDoc {
                exposed: name.to_string(),
                kind: String::new(),
                labels: Vec::new(),
                help: help.trim_end_matches('.').to_string(),
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let kind = rest.split_once(' ').map_or("", |(_, k)| k);
            if let Some(doc) = docs.last_mut() {
                doc.kind = kind.to_string();
                if kind == "counter" {
                    doc.exposed.push_str("_total");
                }
            }
        } else if let (Some(doc), Some((_, labels))) = (docs.last_mut(), line.split_once('{')) {
            for pair in labels.split(',') {
                if let Some((name, _)) = pair.split_once('=')
                    && name != "le"
                    && !doc.labels.iter().any(|l| l == name)
                {
                    doc.labels.push(name.to_string());
                }
            }
        }
    }
    docs.sort();
    docs
}

/// One series in every labelled family, so the exposition shows the family and its labels.
/// A family added to `Metrics` needs a line here (the page test says so).
#[cfg(feature = "controller")]
fn sample_series(m: &dra_controller::metrics::Metrics) {
    use dra_controller::metrics::{
        FailureLabels, GroupLabels, ReasonLabels, ScaleDownLabels, ScaleUpLabels,
        StatusWriteFailureLabels, StatusWriteLabels,
    };
    let reason = || ReasonLabels {
        reason: String::new(),
    };
    let _ = m.unschedulable_gangs.get_or_create(&reason());
    let _ = m.unremovable_nodes.get_or_create(&reason());
    let group = || GroupLabels {
        node_group: String::new(),
    };
    let scale_up = ScaleUpLabels {
        node_group: String::new(),
        capacity_type: String::new(),
    };
    let _ = m.scale_ups.get_or_create(&scale_up);
    let _ = m.nodes_added.get_or_create(&scale_up);
    let _ = m.failed_scale_ups.get_or_create(&FailureLabels {
        node_group: String::new(),
        reason: String::new(),
    });
    let _ = m.upcoming_nodes.get_or_create(&group());
    let _ = m.reservation_used.get_or_create(&group());
    let _ = m.reservation_left.get_or_create(&group());
    let _ = m.unneeded_nodes.get_or_create(&group());
    let _ = m.scaled_down_nodes.get_or_create(&ScaleDownLabels {
        node_group: String::new(),
        reason: String::new(),
    });
    let _ = m.status_write_duration.get_or_create(&StatusWriteLabels {
        write: String::new(),
    });
    let _ = m
        .status_write_failures
        .get_or_create(&StatusWriteFailureLabels {
            write: String::new(),
            reason: String::new(),
        });
}
