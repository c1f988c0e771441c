//! Label selectors (`metav1.LabelSelector`) compiled once into a canonical,
//! hashable form, as `metav1.LabelSelectorAsSelector` parses them.
//!
//! The filters need more than evaluating an API object: a selector that can
//! key a cache (so every replica of a workload shares one set of topology
//! counts), and the distinction between a nil selector (matches nothing) and
//! an empty one (matches everything).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::requirement::{Labels, Op, Requirement};

/// A label selector that cannot be compiled, as upstream's
/// `LabelSelectorAsSelector` refuses it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector requirement on key {key:?}: {message}")]
pub struct SelectorParseError {
    /// The requirement's key.
    pub key: String,
    /// What was wrong.
    pub message: String,
}

/// A compiled label selector. `Nothing` is what a nil API selector compiles
/// to; `Requirements(vec![])` is the empty selector, which matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selector {
    /// Matches nothing (a nil selector).
    Nothing,
    /// Matches label sets that satisfy every requirement (sorted, deduplicated).
    Requirements(Vec<Requirement>),
}

impl Selector {
    /// Compiles an API selector. `None` compiles to [`Selector::Nothing`].
    ///
    /// # Errors
    /// The first requirement `LabelSelectorAsSelector` refuses.
    pub fn compile(selector: Option<&LabelSelector>) -> Result<Self, SelectorParseError> {
        let Some(selector) = selector else {
            return Ok(Selector::Nothing);
        };
        let fail = |key: &str, errors: Vec<String>| SelectorParseError {
            key: key.to_string(),
            message: errors.join("; "),
        };
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            let requirement = Requirement::parse(key, "In", std::slice::from_ref(value), false)
                .map_err(|e| fail(key, e))?;
            requirements.push(requirement);
        }
        for expression in selector.match_expressions.iter().flatten() {
            let key = &expression.key;
            if !matches!(
                expression.operator.as_str(),
                "In" | "NotIn" | "Exists" | "DoesNotExist"
            ) {
                return Err(fail(
                    key,
                    vec![format!(
                        "{:?} is not a valid label selector operator",
                        expression.operator
                    )],
                ));
            }
            let values = expression.values.as_deref().unwrap_or_default();
            let requirement = Requirement::parse(key, &expression.operator, values, false)
                .map_err(|e| fail(key, e))?;
            requirements.push(requirement);
        }
        requirements.sort();
        requirements.dedup();
        Ok(Selector::Requirements(requirements))
    }

    /// Does the label set match? A missing label set is an empty one.
    #[must_use]
    pub fn matches(&self, labels: Option<&Labels>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Requirements(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// Upstream's `Selector.Empty()`: true only for the match-everything selector.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        matches!(self, Selector::Requirements(r) if r.is_empty())
    }

    /// ANDs `key In (value)` / `key NotIn (value)` requirements onto the
    /// selector; a `Nothing` selector stays `Nothing`, as upstream's merge
    /// leaves it.
    #[must_use]
    pub fn with_requirements(self, extra: impl IntoIterator<Item = (String, Op, String)>) -> Self {
        match self {
            Selector::Nothing => Selector::Nothing,
            Selector::Requirements(mut requirements) => {
                for (key, op, value) in extra {
                    requirements.push(Requirement::single(key, op, value));
                }
                requirements.sort();
                requirements.dedup();
                Selector::Requirements(requirements)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selectors::requirement::labels;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn nil_matches_nothing_and_empty_matches_everything() {
        let nothing = Selector::compile(None).unwrap();
        assert!(!nothing.matches(Some(&labels(&[("a", "b")]))));
        assert!(!nothing.is_empty());
        let everything = Selector::compile(Some(&LabelSelector::default())).unwrap();
        assert!(everything.matches(None));
        assert!(everything.is_empty());
    }

    #[test]
    fn upstream_parse_errors_are_refused() {
        let bad = |op: &str, values: Option<Vec<String>>| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: op.into(),
                values,
            }]),
            ..Default::default()
        };
        assert!(Selector::compile(Some(&bad("In", Some(vec![])))).is_err());
        assert!(Selector::compile(Some(&bad("Exists", Some(vec!["x".into()])))).is_err());
        assert!(Selector::compile(Some(&bad("Like", None))).is_err());
        assert!(
            Selector::compile(Some(&bad("Gt", Some(vec!["1".into()])))).is_err(),
            "label selectors have no Gt"
        );
        assert!(Selector::compile(Some(&bad("DoesNotExist", None))).is_ok());
        let bad_label = LabelSelector {
            match_labels: Some([("k".to_string(), "bad value".to_string())].into()),
            ..Default::default()
        };
        assert!(Selector::compile(Some(&bad_label)).is_err());
    }

    #[test]
    fn equal_selectors_compile_equal_whatever_the_order() {
        let a = LabelSelector {
            match_labels: Some(
                [
                    ("x".to_string(), "1".to_string()),
                    ("y".to_string(), "2".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let b = LabelSelector {
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "y".into(),
                    operator: "In".into(),
                    values: Some(vec!["2".into()]),
                },
                LabelSelectorRequirement {
                    key: "x".into(),
                    operator: "In".into(),
                    values: Some(vec!["1".into()]),
                },
            ]),
            ..Default::default()
        };
        assert_eq!(
            Selector::compile(Some(&a)).unwrap(),
            Selector::compile(Some(&b)).unwrap()
        );
    }
}
