//! One label requirement, checked once as apimachinery's
//! `labels.NewRequirement` checks it and matched as `Requirement.Matches`
//! does. Label selectors and node selectors are both made of these.

use std::collections::BTreeMap;

use super::syntax::{label_key_error, label_value_error};

/// Labels of one object.
pub type Labels = BTreeMap<String, String>;

/// A requirement's operator. `Gt`/`Lt` carry their bound, parsed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// The label is one of the values.
    In,
    /// The label is absent or none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is an integer greater than the bound.
    Gt(i64),
    /// The label is an integer less than the bound.
    Lt(i64),
}

/// One requirement, with its values sorted and deduplicated so that equal
/// requirements compare (and hash) equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub op: Op,
    /// The values (`In`/`NotIn`), sorted.
    pub values: Vec<String>,
}

impl Requirement {
    /// Checks a requirement as `labels.NewRequirement` does: a valid key, the
    /// number of values the operator takes, integer `Gt`/`Lt` bounds, valid
    /// label values. `operator` is the API spelling (`In`, `NotIn`, `Exists`,
    /// `DoesNotExist`, `Gt`, `Lt`); `allow_numeric` is false for label
    /// selectors, which have no `Gt`/`Lt`.
    ///
    /// # Errors
    /// Every problem found, in apimachinery's words.
    pub fn parse(
        key: &str,
        operator: &str,
        values: &[String],
        allow_numeric: bool,
    ) -> Result<Self, Vec<String>> {
        let mut errors: Vec<String> = label_key_error(key).into_iter().collect();
        let op = match operator {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errors.push(
                        "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
                            .into(),
                    );
                }
                if operator == "In" { Op::In } else { Op::NotIn }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errors.push(format!(
                        "values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
                    ));
                }
                if operator == "Exists" {
                    Op::Exists
                } else {
                    Op::DoesNotExist
                }
            }
            "Gt" | "Lt" if allow_numeric => {
                if values.len() != 1 {
                    errors.push(format!(
                        "values: Invalid value: {values:?}: for 'Gt', 'Lt' operators, exactly one value is required"
                    ));
                }
                let mut bound = 0;
                for (i, value) in values.iter().enumerate() {
                    match value.parse::<i64>() {
                        Ok(v) => bound = v,
                        Err(_) => errors.push(format!(
                            "values[{i}]: Invalid value: {value:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                        )),
                    }
                }
                if operator == "Gt" {
                    Op::Gt(bound)
                } else {
                    Op::Lt(bound)
                }
            }
            other => {
                let supported = if allow_numeric {
                    "\"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\""
                } else {
                    "\"In\", \"NotIn\", \"Exists\", \"DoesNotExist\""
                };
                errors.push(format!(
                    "operator: Unsupported value: {other:?}: supported values: {supported}"
                ));
                Op::In
            }
        };
        errors.extend(values.iter().filter_map(|v| label_value_error(v)));
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut values = match op {
            Op::In | Op::NotIn => values.to_vec(),
            _ => Vec::new(),
        };
        values.sort();
        values.dedup();
        Ok(Requirement {
            key: key.to_string(),
            op,
            values,
        })
    }

    /// `key In (value)` or `key NotIn (value)`, for values already known to
    /// be valid (the labels of an existing object).
    #[must_use]
    pub fn single(key: String, op: Op, value: String) -> Self {
        Requirement {
            key,
            op,
            values: vec![value],
        }
    }

    /// Does the label set (`None`: no labels) satisfy the requirement?
    #[must_use]
    pub fn matches(&self, labels: Option<&Labels>) -> bool {
        self.matches_value(labels.and_then(|l| l.get(&self.key)).map(String::as_str))
    }

    /// Does a label with this value (`None`: absent) satisfy it? A label
    /// that is not an integer never satisfies `Gt`/`Lt`.
    #[must_use]
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            Op::In => value.is_some_and(has),
            Op::NotIn => value.is_none_or(|v| !has(v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::Gt(bound) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > bound),
            Op::Lt(bound) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < bound),
        }
    }
}

/// A label set from pairs, for tests.
#[cfg(test)]
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_string()).collect()
    }

    #[test]
    fn every_operator_matches_as_upstream() {
        let l = labels(&[("zone", "a"), ("gpus", "8")]);
        let cases = [
            ("zone", "In", vec!["a", "b"], true),
            ("zone", "In", vec!["b"], false),
            ("zone", "NotIn", vec!["b"], true),
            ("missing", "NotIn", vec!["b"], true),
            ("missing", "In", vec!["b"], false),
            ("zone", "Exists", vec![], true),
            ("missing", "DoesNotExist", vec![], true),
            ("gpus", "Gt", vec!["4"], true),
            ("gpus", "Gt", vec!["8"], false),
            ("gpus", "Lt", vec!["9"], true),
            ("zone", "Gt", vec!["4"], false),
            ("missing", "Lt", vec!["4"], false),
        ];
        for (key, op, values, expect) in cases {
            let r = Requirement::parse(key, op, &strings(&values), true)
                .unwrap_or_else(|e| panic!("{key} {op}: {e:?}"));
            assert_eq!(r.matches(Some(&l)), expect, "{key} {op} {values:?}");
        }
    }

    #[test]
    fn new_requirement_refuses_what_upstream_refuses() {
        for (key, op, values) in [
            ("a", "In", vec![]),
            ("a", "NotIn", vec![]),
            ("a", "Exists", vec!["x"]),
            ("a", "Gt", vec!["x"]),
            ("a", "Gt", vec!["1", "2"]),
            ("a", "Lt", vec![]),
            ("a", "Foo", vec!["x"]),
            ("-bad", "In", vec!["x"]),
            ("a", "In", vec!["bad value"]),
            // IsValidLabelValue applies to Gt/Lt bounds too.
            ("a", "Gt", vec!["-1"]),
        ] {
            assert!(
                Requirement::parse(key, op, &strings(&values), true).is_err(),
                "{key} {op} {values:?}"
            );
        }
        assert!(
            Requirement::parse("a", "Gt", &strings(&["1"]), false).is_err(),
            "label selectors have no Gt"
        );
    }

    #[test]
    fn equal_requirements_compare_equal() {
        let a = Requirement::parse("k", "In", &strings(&["b", "a", "b"]), false);
        let b = Requirement::parse("k", "In", &strings(&["a", "b"]), false);
        assert_eq!(a, b);
    }
}
