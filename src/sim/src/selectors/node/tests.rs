//! Expectations from upstream's `nodeaffinity` package (its code and
//! `nodeaffinity_test.go` cases), never from our own output.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: (!name.is_empty()).then(|| name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: Some(values.iter().map(|v| (*v).into()).collect()),
    }
}

fn selector(
    terms: Vec<(Vec<NodeSelectorRequirement>, Vec<NodeSelectorRequirement>)>,
) -> NodeSelector {
    NodeSelector {
        node_selector_terms: terms
            .into_iter()
            .map(|(e, f)| NodeSelectorTerm {
                match_expressions: Some(e),
                match_fields: Some(f),
            })
            .collect(),
    }
}

fn strict(s: &NodeSelector) -> ParsedNodeSelector {
    ParsedNodeSelector::parse(s).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn terms_are_ored_and_requirements_anded() {
    let n = node("n1", &[("region", "r1"), ("zone", "z1")]);
    let s = selector(vec![
        (vec![req("region", "In", &["r2"])], vec![]),
        (
            vec![req("region", "In", &["r1"]), req("zone", "NotIn", &["z2"])],
            vec![],
        ),
    ]);
    assert!(strict(&s).matches(&n));
    let s = selector(vec![(
        vec![req("region", "In", &["r1"]), req("zone", "In", &["z2"])],
        vec![],
    )]);
    assert!(!strict(&s).matches(&n));
}

#[test]
fn every_label_operator() {
    let n = node("n1", &[("gpus", "8"), ("a", "x")]);
    let one = |r: NodeSelectorRequirement| strict(&selector(vec![(vec![r], vec![])])).matches(&n);
    assert!(one(req("a", "Exists", &[])));
    assert!(!one(req("b", "Exists", &[])));
    assert!(one(req("b", "DoesNotExist", &[])));
    assert!(
        one(req("b", "NotIn", &["x"])),
        "missing label satisfies NotIn"
    );
    assert!(!one(req("b", "In", &["x"])));
    assert!(one(req("gpus", "Gt", &["4"])));
    assert!(!one(req("gpus", "Gt", &["8"])));
    assert!(one(req("gpus", "Lt", &["9"])));
    assert!(
        !one(req("a", "Gt", &["1"])),
        "non-integer label never satisfies Gt"
    );
}

#[test]
fn match_fields_on_the_node_name() {
    let n = node("n1", &[]);
    let s = selector(vec![(vec![], vec![req("metadata.name", "In", &["n1"])])]);
    assert!(strict(&s).matches(&n));
    let s = selector(vec![(vec![], vec![req("metadata.name", "NotIn", &["n1"])])]);
    assert!(!strict(&s).matches(&n));
    let s = selector(vec![(
        vec![],
        vec![req("metadata.name", "In", &["n1", "n2"])],
    )]);
    assert!(
        ParsedNodeSelector::parse(&s).is_err(),
        "field In takes exactly one value"
    );
    let s = selector(vec![(vec![], vec![req("metadata.name", "Exists", &[])])]);
    assert!(ParsedNodeSelector::parse(&s).is_err(), "fields: In, NotIn");
}

/// The two old matchers disagreed here: one refused the selector, the other
/// compared the key's value as "". Upstream's field selector accepts any key
/// (`fields.OneTermEqualSelector`) and a node only has `metadata.name`, so
/// another key reads as "".
#[test]
fn an_unsupported_match_fields_key_reads_as_empty() {
    let n = node("n1", &[]);
    let s = selector(vec![(vec![], vec![req("metadata.uid", "In", &["x"])])]);
    assert!(!strict(&s).matches(&n), "'' In (x) does not match");
    let s = selector(vec![(vec![], vec![req("metadata.uid", "NotIn", &["x"])])]);
    assert!(strict(&s).matches(&n), "'' NotIn (x) matches");
    let s = selector(vec![(vec![], vec![req("spec.unschedulable", "In", &[""])])]);
    assert!(strict(&s).matches(&n), "'' In ('') matches");
}

#[test]
fn fields_are_not_checked_against_a_node_without_a_name() {
    let nameless = node("", &[]);
    let s = selector(vec![(vec![], vec![req("metadata.name", "In", &["n1"])])]);
    assert!(strict(&s).matches(&nameless));
}

#[test]
fn empty_terms_match_nothing() {
    let s = selector(vec![(vec![], vec![])]);
    assert!(!strict(&s).matches(&node("n1", &[])));
    assert!(!strict(&NodeSelector::default()).matches(&node("n1", &[])));
}

#[test]
fn parse_errors() {
    for bad in [
        req("a", "In", &[]),
        req("a", "Exists", &["x"]),
        req("a", "Gt", &["x"]),
        req("a", "Gt", &["1", "2"]),
        req("a", "Foo", &["x"]),
        req("-bad", "In", &["x"]),
        req("a", "In", &["bad value"]),
    ] {
        assert!(
            ParsedNodeSelector::parse(&selector(vec![(vec![bad.clone()], vec![])])).is_err(),
            "{bad:?}"
        );
    }
    let err = ParsedNodeSelector::parse(&selector(vec![
        (vec![req("a", "In", &["x"])], vec![]),
        (vec![req("a", "Foo", &["x"])], vec![]),
    ]))
    .expect_err("second term is bad");
    assert!(
        err.to_string()
            .starts_with("nodeSelectorTerms[1].matchExpressions[0].operator: Unsupported value"),
        "{err}"
    );
    assert_eq!(err.problems.len(), 1, "{err:?}");
    assert_eq!(
        err.problems[0].path,
        "nodeSelectorTerms[1].matchExpressions[0]"
    );
}

/// `matchFields` problems carry the operator or values, and print as
/// upstream's field errors do.
#[test]
fn field_errors_are_values() {
    let mut bad_op = req("metadata.name", "Exists", &[]);
    bad_op.values = None;
    let err = ParsedNodeSelector::parse(&selector(vec![(vec![], vec![bad_op])]))
        .expect_err("Exists is not a field operator");
    assert_eq!(
        err.problems[0].problem,
        RequirementProblem::FieldOperator {
            operator: "Exists".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "nodeSelectorTerms[0].matchFields[0].operator: Unsupported value: \"Exists\": supported values: \"In\", \"NotIn\""
    );
    let err = ParsedNodeSelector::parse(&selector(vec![(
        vec![],
        vec![req("metadata.name", "In", &["a", "b"])],
    )]))
    .expect_err("two values");
    assert_eq!(
        err.problems[0].problem,
        RequirementProblem::FieldValues {
            values: vec!["a".into(), "b".into()]
        }
    );
    assert!(
        err.to_string()
            .starts_with("nodeSelectorTerms[0].matchFields[0].values: Invalid value: "),
        "{err}"
    );
}

/// Upstream's lazy selector (NodeAffinity): a bad term never matches, good
/// terms still do, and errors are reported only when nothing matched.
#[test]
fn lazy_selectors_skip_bad_terms() {
    let n = node("n1", &[("zone", "a")]);
    let s = selector(vec![
        (vec![req("zone", "Like", &["a"])], vec![]),
        (vec![req("zone", "In", &["a"])], vec![]),
    ]);
    assert!(ParsedNodeSelector::parse(&s).is_err());
    let lazy = ParsedNodeSelector::parse_lazy(&s);
    assert!(lazy.matches(&n));
    assert_eq!(lazy.matches_or_errors(&n), Ok(true));
    let other = node("n2", &[("zone", "b")]);
    assert!(!lazy.matches(&other));
    assert!(lazy.matches_or_errors(&other).is_err());
}

#[test]
fn node_matches_precedence() {
    let n = node("n1", &[]);
    assert!(node_matches(&n, Some("n1"), false, None).unwrap());
    assert!(
        !node_matches(&n, Some("n2"), true, None).unwrap(),
        "name wins over allNodes"
    );
    assert!(
        node_matches(&n, Some(""), true, None).unwrap(),
        "empty name is unset"
    );
    assert!(!node_matches(&n, None, false, None).unwrap());
    let bad = NodeSelectorError {
        problems: vec![FieldError {
            path: "nodeSelectorTerms[0].matchFields[0]".into(),
            problem: RequirementProblem::FieldValues { values: vec![] },
        }],
    };
    let err = node_matches(&n, None, false, Some(&Err(bad))).expect_err("unparsable");
    assert_eq!(
        err.to_string(),
        "failed to parse node selector: nodeSelectorTerms[0].matchFields[0].values: Invalid value: []: must have one element"
    );
}
