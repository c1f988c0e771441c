//! The reference pages under `docs/reference/` are what the code says now: each generated
//! page equals the checked-in file. With `DRA_AUTOSCALER_UPDATE_DOCS=1` the test writes the
//! pages instead (the one command is in the failure message and in docs/contributing/docs.md).
#![cfg(feature = "controller")]

use std::path::Path;

/// The command that regenerates every reference page.
const REGENERATE: &str =
    "DRA_AUTOSCALER_UPDATE_DOCS=1 cargo test -p dra-autoscaler --test reference_docs";

#[test]
fn the_reference_pages_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let update = std::env::var_os("DRA_AUTOSCALER_UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for page in dra_autoscaler::reference::pages() {
        let path = root.join(page.path);
        if update {
            std::fs::write(&path, &page.text).unwrap_or_else(|e| panic!("{}: {e}", page.path));
            continue;
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current != page.text {
            stale.push(page.path);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated docs: {stale:?}; regenerate them with:\n    {REGENERATE}"
    );
}

#[test]
fn the_pages_name_what_the_code_has() {
    let pages = dra_autoscaler::reference::pages();
    let page = |path: &str| {
        pages
            .iter()
            .find(|p| p.path == path)
            .map(|p| p.text.as_str())
            .unwrap_or_else(|| panic!("no page {path}"))
    };
    let cli = page("docs/reference/cli.md");
    for expected in [
        "## `dra-autoscaler simulate`",
        "## `dra-autoscaler run`",
        "### `--expander <EXPANDER>`",
        "- env: `DRA_AUTOSCALER_EXPANDER`",
        "`least-cost`",
    ] {
        assert!(cli.contains(expected), "cli.md lacks {expected:?}");
    }
    let crd = page("docs/reference/nodegroup-crd.md");
    // Fields of testdata/nodegroups/h200-reserved.yaml, which marks a reservation.
    for field in [
        "`spec.capacityType`",
        "`spec.reservation.total`",
        "`spec.reservation.endTime`",
        "`spec.template.resourceSlices[]",
        "`status.conditions[]",
    ] {
        assert!(crd.contains(field), "nodegroup-crd.md lacks {field}");
    }
    assert!(
        crd.contains("One of `reserved`, `on-demand`, `spot`"),
        "{crd}"
    );
    let metrics = page("docs/reference/metrics.md");
    for metric in [
        "| `dra_autoscaler_scale_ups_total` | counter | `node_group`, `capacity_type` |",
        "| `dra_autoscaler_loop_duration_seconds` | histogram |  |",
        "| `dra_autoscaler_unneeded_nodes` | gauge | `node_group` |",
    ] {
        assert!(metrics.contains(metric), "metrics.md lacks {metric}");
    }
}

/// Every metric `metrics.rs` registers is on the page: the exposition leaves out a labelled
/// family until it has a series, and `reference.rs` gives each known family one.
#[test]
fn every_registered_metric_is_on_the_page() {
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../controller/src/metrics.rs"),
    )
    .expect("metrics.rs");
    // Registrations outside the tests module.
    let code = source.split("#[cfg(test)]").next().unwrap_or(&source);
    let registered =
        code.matches(".register(").count() + code.matches(".register_with_unit(").count();
    let page = dra_autoscaler::reference::metrics_page();
    let rows = page
        .lines()
        .filter(|l| l.starts_with("| `dra_autoscaler_"))
        .count();
    assert!(
        registered > 10,
        "the count of registrations in metrics.rs is broken"
    );
    assert_eq!(
        rows, registered,
        "metrics.rs registers {registered} metrics, docs/reference/metrics.md would list {rows}: \
         give the new family a series in sample_series (src/cli/src/reference.rs), then \
         {REGENERATE}"
    );
}

#[test]
fn the_exposition_parser_reads_names_types_and_labels() {
    let text = "# HELP x_total Things.\n# TYPE x counter\nx_total{a=\"1\",b=\"2\"} 0\n\
                # HELP h Time.\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 0\n";
    let docs = dra_autoscaler::reference::parse_exposition(text);
    assert_eq!(docs.len(), 2);
    assert_eq!(
        (docs[0].exposed.as_str(), docs[0].kind.as_str()),
        ("h", "histogram")
    );
    assert!(docs[0].labels.is_empty(), "le is not a label of the metric");
    assert_eq!(docs[1].labels, ["a", "b"]);
    assert_eq!(docs[1].help, "Things");
}
