//! Fault injection and the request log: the two test hooks on the HTTP path.

use std::fmt;

/// A Kubernetes API verb, as RBAC and audit logs name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object (or of its `/status`).
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST of a collection (or of `/binding`).
    Create,
    /// PUT.
    Update,
    /// PATCH, including server-side apply.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// Lower-case name, as in discovery documents.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request the server answered (discovery requests included, with no verb).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Raw query string, empty when absent.
    pub query: String,
    /// The API verb, for resource requests.
    pub verb: Option<Verb>,
    /// Plural resource name, with `/subresource` appended when there is one
    /// (`nodegroups/status`), for resource requests.
    pub resource: Option<String>,
    /// Namespace from the path, if any.
    pub namespace: Option<String>,
    /// Object name from the path, if any.
    pub name: Option<String>,
    /// HTTP status code sent (200 for a watch that started streaming).
    pub status: u16,
    /// `Content-Type` of the request, if sent (tells patch flavours apart).
    pub content_type: Option<String>,
}

/// A pending injected failure.
#[derive(Clone, Debug)]
pub(crate) struct FaultRule {
    pub verb: Verb,
    pub resource: String,
    pub remaining: usize,
    pub code: u16,
}

/// Pending failures, consumed in the order they were added.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: Vec<FaultRule>,
}

impl Faults {
    pub fn add(&mut self, verb: Verb, resource: &str, n: usize, code: u16) {
        if n > 0 {
            self.rules.push(FaultRule {
                verb,
                resource: resource.to_owned(),
                remaining: n,
                code,
            });
        }
    }

    /// If a rule matches, consumes one use of it and returns its status code.
    ///
    /// `plural` without a subresource matches rules for `plural`; with one it matches
    /// rules for `plural/sub` only, so failing `nodegroups/status` leaves spec writes alone.
    pub fn take(&mut self, verb: Verb, resource: &str) -> Option<u16> {
        let idx = self
            .rules
            .iter()
            .position(|r| r.verb == verb && r.resource == resource)?;
        let rule = &mut self.rules[idx];
        rule.remaining -= 1;
        let code = rule.code;
        if rule.remaining == 0 {
            self.rules.remove(idx);
        }
        Some(code)
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_consumed_n_times() {
        let mut faults = Faults::default();
        faults.add(Verb::Create, "nodes", 2, 500);
        assert_eq!(faults.take(Verb::Get, "nodes"), None);
        assert_eq!(faults.take(Verb::Create, "pods"), None);
        assert_eq!(faults.take(Verb::Create, "nodes"), Some(500));
        assert_eq!(faults.take(Verb::Create, "nodes"), Some(500));
        assert_eq!(faults.take(Verb::Create, "nodes"), None);
    }

    #[test]
    fn subresource_rules_do_not_hit_the_main_resource() {
        let mut faults = Faults::default();
        faults.add(Verb::Patch, "nodegroups/status", 1, 409);
        assert_eq!(faults.take(Verb::Patch, "nodegroups"), None);
        assert_eq!(faults.take(Verb::Patch, "nodegroups/status"), Some(409));
    }
}
