//! An object's `apiVersion` split into its API group and version, as apimachinery's
//! `schema.ParseGroupVersion` does: `"group/version"`, or a bare version (`"v1"`) for the
//! core group, whose name is empty.

/// The API group and version of an `apiVersion`, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApiGroupVersion<'a> {
    group: &'a str,
    version: &'a str,
}

impl<'a> ApiGroupVersion<'a> {
    /// Splits `api_version` at its last `/`; one without a `/` is a version of the core
    /// group (`""`). (Upstream refuses more than one `/`; no valid object has one.)
    #[must_use]
    pub fn parse(api_version: &'a str) -> Self {
        match api_version.rsplit_once('/') {
            Some((group, version)) => Self { group, version },
            None => Self {
                group: "",
                version: api_version,
            },
        }
    }

    /// The API group, empty for the core group.
    #[must_use]
    pub fn group(&self) -> &'a str {
        self.group
    }

    /// The version.
    #[must_use]
    pub fn version(&self) -> &'a str {
        self.version
    }
}

#[cfg(test)]
mod tests {
    use super::ApiGroupVersion;

    #[test]
    fn named_groups_and_the_core_group() {
        let gv = ApiGroupVersion::parse("resource.k8s.io/v1");
        assert_eq!((gv.group(), gv.version()), ("resource.k8s.io", "v1"));
        let gv = ApiGroupVersion::parse("v1");
        assert_eq!((gv.group(), gv.version()), ("", "v1"));
        let gv = ApiGroupVersion::parse("");
        assert_eq!((gv.group(), gv.version()), ("", ""));
    }
}
