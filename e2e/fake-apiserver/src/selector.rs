//! Label and field selectors, parsed and matched like `k8s.io/apimachinery`'s
//! `labels.Parse` and `fields.ParseSelector`.
//!
//! The query syntax (`app in (a,b),!gpu,tier!=x`) is read here; each requirement it names is
//! built, checked and matched by the simulator's [`Requirement`] (as `labels.NewRequirement`
//! and `Requirement.Matches`), the one label-requirement implementation of the workspace.
//!
//! Field selectors are generic here: any dotted path into the object can be used
//! (`spec.nodeName`, `involvedObject.uid`, `status.phase`), and a missing field reads
//! as the empty string, which is what makes `spec.nodeName=` select unscheduled Pods.
//! The real server only accepts a fixed set of fields per resource and rejects
//! others with 400; this stand-in accepts any path.

use dra_sim::selectors::Requirement;
use serde_json::Value;

use crate::error::ApiError;

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    Equals,
    NotEquals,
    Bang,
    Open,
    Close,
    Comma,
    Greater,
    Less,
}

fn is_ident_char(c: char) -> bool {
    !c.is_whitespace() && !matches!(c, ',' | '(' | ')' | '=' | '!' | '<' | '>')
}

fn tokenize(input: &str) -> Vec<Token> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            c if c.is_whitespace() => i += 1,
            ',' => {
                tokens.push(Token::Comma);
                i += 1;
            }
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Token::Close);
                i += 1;
            }
            '>' => {
                tokens.push(Token::Greater);
                i += 1;
            }
            '<' => {
                tokens.push(Token::Less);
                i += 1;
            }
            '=' => {
                tokens.push(Token::Equals);
                i += if next == Some('=') { 2 } else { 1 };
            }
            '!' if next == Some('=') => {
                tokens.push(Token::NotEquals);
                i += 2;
            }
            '!' => {
                tokens.push(Token::Bang);
                i += 1;
            }
            _ => {
                let start = i;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect()));
            }
        }
    }
    tokens
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    fn error(&self, what: &str) -> ApiError {
        ApiError::BadRequest(format!(
            "unable to parse requirement: labelSelector {:?}: {what}",
            self.input
        ))
    }

    fn key(&mut self) -> Result<String, ApiError> {
        match self.next() {
            Some(Token::Ident(key)) => Ok(key),
            _ => Err(self.error("expected a label key")),
        }
    }

    /// A value may be empty (`key=` selects objects whose label is set to "").
    fn value(&mut self) -> String {
        match self.peek() {
            Some(Token::Ident(v)) => {
                let v = v.clone();
                self.pos += 1;
                v
            }
            _ => String::new(),
        }
    }

    fn set(&mut self) -> Result<Vec<String>, ApiError> {
        if self.next() != Some(Token::Open) {
            return Err(self.error("expected '(' after in/notin"));
        }
        let mut values = vec![self.value()];
        loop {
            match self.next() {
                Some(Token::Comma) => values.push(self.value()),
                Some(Token::Close) => return Ok(values),
                _ => return Err(self.error("expected ',' or ')' in value set")),
            }
        }
    }

    fn integer(&mut self) -> Result<String, ApiError> {
        match self.next() {
            Some(Token::Ident(v)) => Ok(v),
            _ => Err(self.error("expected an integer after '>' or '<'")),
        }
    }

    /// The next requirement: its operator and values read from the syntax, then checked
    /// and built by [`Requirement::parse`] (key and value syntax, value counts, integer
    /// bounds), whose words the 400 carries.
    fn requirement(&mut self) -> Result<Requirement, ApiError> {
        let (key, operator, values) = if self.peek() == Some(&Token::Bang) {
            self.pos += 1;
            (self.key()?, "DoesNotExist", Vec::new())
        } else {
            let key = self.key()?;
            match self.peek() {
                None | Some(Token::Comma) => (key, "Exists", Vec::new()),
                Some(Token::Equals) => {
                    self.pos += 1;
                    (key, "In", vec![self.value()])
                }
                Some(Token::NotEquals) => {
                    self.pos += 1;
                    (key, "NotIn", vec![self.value()])
                }
                Some(Token::Greater) => {
                    self.pos += 1;
                    (key, "Gt", vec![self.integer()?])
                }
                Some(Token::Less) => {
                    self.pos += 1;
                    (key, "Lt", vec![self.integer()?])
                }
                Some(Token::Ident(op)) if op == "in" => {
                    self.pos += 1;
                    (key, "In", self.set()?)
                }
                Some(Token::Ident(op)) if op == "notin" => {
                    self.pos += 1;
                    (key, "NotIn", self.set()?)
                }
                Some(_) => return Err(self.error("expected an operator after the key")),
            }
        };
        Requirement::parse(&key, operator, &values, true)
            .map_err(|errors| self.error(&errors.join("; ")))
    }
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut parser = Parser {
            input,
            tokens: tokenize(input),
            pos: 0,
        };
        let mut requirements = Vec::new();
        if parser.tokens.is_empty() {
            return Ok(Self { requirements });
        }
        loop {
            requirements.push(parser.requirement()?);
            match parser.next() {
                None => return Ok(Self { requirements }),
                Some(Token::Comma) => {}
                Some(_) => return Err(parser.error("expected ',' between requirements")),
            }
        }
    }

    /// Whether the labels of `object` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|req| req.matches_value(label(&req.key)))
    }
}

/// One `field=value` or `field!=value` term.
#[derive(Clone, Debug, PartialEq)]
struct FieldTerm {
    path: String,
    value: String,
    negated: bool,
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// Splits on unescaped commas, keeping escapes for the term parser.
fn split_terms(input: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut current = String::new();
    let mut chars = input.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                current.push(c);
                if let Some(escaped) = chars.next() {
                    current.push(escaped);
                }
            }
            ',' => terms.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    terms.push(current);
    terms
}

fn unescape(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(escaped) = chars.next() {
                out.push(escaped);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Finds the first unescaped operator in a term: `!=`, `==` or `=`.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], true, &term[i + 2..]));
            }
            b'=' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], false, &term[i + 2..]));
            }
            b'=' => return Some((&term[..i], false, &term[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self { terms });
        }
        for raw in split_terms(input) {
            let (path, negated, value) = split_term(&raw).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "invalid selector: fieldSelector {input:?}: term {raw:?} has no operator (=, == or !=)"
                ))
            })?;
            terms.push(FieldTerm {
                path: path.trim().to_owned(),
                value: unescape(value.trim()),
                negated,
            });
        }
        Ok(Self { terms })
    }

    /// The value a `path=value` term requires (the first, when there are several).
    pub fn required(&self, path: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| !t.negated && t.path == path)
            .map(|t| t.value.as_str())
    }

    /// Whether the fields of `object` satisfy every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|term| {
            let actual = field_value(object, &term.path);
            (actual == term.value) != term.negated
        })
    }
}

/// The string form of the field at a dotted path; missing fields read as "".
pub fn field_value(object: &Value, path: &str) -> String {
    let mut current = object;
    for segment in path.split('.') {
        match current.get(segment) {
            Some(next) => current = next,
            None => return String::new(),
        }
    }
    match current {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// Both selectors of a list or watch request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selectors {
    /// The `labelSelector` parameter.
    pub labels: LabelSelector,
    /// The `fieldSelector` parameter.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Whether an object is selected by both.
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns1", "labels": labels}, "spec": {"nodeName": "n1", "unschedulable": true}})
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).expect("valid selector")
    }

    #[test]
    fn equality_and_inequality() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        assert!(sel("app=web").matches(&o));
        assert!(sel("app==web").matches(&o));
        assert!(!sel("app=db").matches(&o));
        assert!(sel("app!=db").matches(&o));
        assert!(sel("app=web,tier=front").matches(&o));
        assert!(!sel("app=web,tier=back").matches(&o));
        // != selects objects without the key, as upstream does.
        assert!(sel("missing!=x").matches(&o));
    }

    #[test]
    fn set_based_requirements() {
        let o = obj(json!({"app": "web"}));
        assert!(sel("app in (db, web)").matches(&o));
        assert!(!sel("app notin (db,web)").matches(&o));
        assert!(sel("other notin (x)").matches(&o));
        assert!(!sel("other in (x)").matches(&o));
        assert!(sel("app").matches(&o));
        assert!(!sel("!app").matches(&o));
        assert!(sel("!other, app in (web)").matches(&o));
    }

    #[test]
    fn numeric_comparisons() {
        let o = obj(json!({"gpus": "8"}));
        assert!(sel("gpus>4").matches(&o));
        assert!(!sel("gpus<4").matches(&o));
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(sel("").matches(&obj(json!(null))));
    }

    #[test]
    fn malformed_selectors_are_rejected() {
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("app in (a,b").is_err());
        assert!(LabelSelector::parse("=x").is_err());
        assert!(LabelSelector::parse("a>b").is_err());
        // As labels.Parse, whose requirements NewRequirement checks: an invalid key or
        // value is refused, not matched against nothing.
        assert!(LabelSelector::parse("-app=web").is_err());
        assert!(LabelSelector::parse("app=bad@value").is_err());
        assert!(LabelSelector::parse("app in (ok,-bad)").is_err());
    }

    #[test]
    fn field_selectors_on_dotted_paths() {
        let o = obj(json!({}));
        let f = |s: &str| FieldSelector::parse(s).expect("valid").matches(&o);
        assert!(f("metadata.name=a"));
        assert!(f("metadata.namespace==ns1,spec.nodeName=n1"));
        assert!(!f("spec.nodeName!=n1"));
        assert!(f("spec.unschedulable=true"));
        // A missing field is "": this is how `spec.nodeName=` finds unscheduled Pods.
        assert!(f("status.phase="));
        assert!(!f("status.phase=Running"));
    }

    #[test]
    fn field_selector_escapes() {
        let o = json!({"metadata": {"name": "a,b=c"}});
        assert!(
            FieldSelector::parse(r"metadata.name=a\,b\=c")
                .expect("valid")
                .matches(&o)
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
