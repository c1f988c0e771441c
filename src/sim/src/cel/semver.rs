//! `kubernetes.Semver` for CEL: blang/semver v4's strict parser, the CEL
//! semver library's normalisation, and SemVer 2.0.0 precedence.
//!
//! kube-cel's semver type compares build metadata (the `semver` crate breaks
//! ties on it) while upstream ignores it, and its type cannot be named from
//! outside the crate, so `version` attributes could not be built without
//! evaluating CEL. This small parser keeps upstream's rules and messages.

use std::cmp::Ordering;
use std::fmt;

/// One dot-separated pre-release identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PreRelease {
    Numeric(u64),
    Alphanumeric(String),
}

impl PreRelease {
    /// Numeric identifiers sort before alphanumeric ones (SemVer 2.0.0 §11).
    fn compare(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Numeric(a), Self::Numeric(b)) => a.cmp(b),
            (Self::Numeric(_), Self::Alphanumeric(_)) => Ordering::Less,
            (Self::Alphanumeric(_), Self::Numeric(_)) => Ordering::Greater,
            (Self::Alphanumeric(a), Self::Alphanumeric(b)) => a.cmp(b),
        }
    }
}

/// A parsed semantic version.
#[derive(Debug, Clone)]
pub(crate) struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<PreRelease>,
    build: Vec<String>,
}

fn only(s: &str, allowed: impl Fn(u8) -> bool) -> bool {
    s.bytes().all(allowed)
}

fn is_alphanumeric_or_hyphen(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn has_leading_zero(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

/// Why a version string is not a semantic version, in blang/semver v4's
/// words (and Go's `strconv.ParseUint`'s), which CEL programs can see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SemverError {
    /// The string is empty.
    #[error("Version string empty")]
    Empty,
    /// Fewer than three dot-separated parts.
    #[error("No Major.Minor.Patch elements found")]
    NoMajorMinorPatch,
    /// A short version (normalized parse) with pre-release or build data.
    #[error("short version cannot contain PreRelease/Build meta data")]
    ShortWithMeta,
    /// A major, minor or patch part with a non-digit.
    #[error("Invalid character(s) found in {part} number {value:?}")]
    ComponentCharacters {
        /// `major`, `minor` or `patch`.
        part: &'static str,
        /// The part as written.
        value: String,
    },
    /// A major, minor or patch part with a leading zero.
    #[error("{} number must not contain leading zeroes {value:?}", capitalise(.part))]
    ComponentLeadingZero {
        /// `major`, `minor` or `patch`.
        part: &'static str,
        /// The part as written.
        value: String,
    },
    /// A number that `strconv.ParseUint` refuses.
    #[error("strconv.ParseUint: parsing {value:?}: {}", if *.overflow { "value out of range" } else { "invalid syntax" })]
    ParseUint {
        /// The number as written.
        value: String,
        /// Out of range rather than bad syntax.
        overflow: bool,
    },
    /// An empty pre-release identifier.
    #[error("Prerelease is empty")]
    PreReleaseEmpty,
    /// A numeric pre-release identifier with a leading zero.
    #[error("Numeric PreRelease version must not contain leading zeroes {0:?}")]
    PreReleaseLeadingZero(String),
    /// A pre-release identifier with a character outside `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in prerelease {0:?}")]
    PreReleaseCharacters(String),
    /// An empty build identifier.
    #[error("Build meta data is empty")]
    BuildEmpty,
    /// A build identifier with a character outside `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in build meta data {0:?}")]
    BuildCharacters(String),
}

/// Go's `strconv.ParseUint` for a decimal string.
fn parse_u64(s: &str) -> Result<u64, SemverError> {
    s.parse()
        .map_err(|e: std::num::ParseIntError| SemverError::ParseUint {
            value: s.to_string(),
            overflow: matches!(e.kind(), std::num::IntErrorKind::PosOverflow),
        })
}

fn parse_component(s: &str, part: &'static str) -> Result<u64, SemverError> {
    if !only(s, |b| b.is_ascii_digit()) {
        return Err(SemverError::ComponentCharacters {
            part,
            value: s.to_string(),
        });
    }
    if has_leading_zero(s) {
        return Err(SemverError::ComponentLeadingZero {
            part,
            value: s.to_string(),
        });
    }
    parse_u64(s)
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

impl Semver {
    /// blang/semver v4 `Parse`: exactly `MAJOR.MINOR.PATCH[-PRE][+BUILD]`,
    /// no `v` prefix, no leading zeros. Errors carry blang's wording.
    pub(crate) fn parse(s: &str) -> Result<Self, SemverError> {
        if s.is_empty() {
            return Err(SemverError::Empty);
        }
        let mut parts = s.splitn(3, '.');
        let (Some(major), Some(minor), Some(rest)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(SemverError::NoMajorMinorPatch);
        };
        let major = parse_component(major, "major")?;
        let minor = parse_component(minor, "minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((head, build)) => (head, Some(build)),
            None => (rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((patch, pre)) => (patch, Some(pre)),
            None => (rest, None),
        };
        let patch = parse_component(patch, "patch")?;
        let pre = match pre {
            None => Vec::new(),
            Some(pre) => pre
                .split('.')
                .map(parse_pre_release)
                .collect::<Result<_, _>>()?,
        };
        let build = match build {
            None => Vec::new(),
            Some(build) => build
                .split('.')
                .map(|part| {
                    if part.is_empty() {
                        Err(SemverError::BuildEmpty)
                    } else if !only(part, is_alphanumeric_or_hyphen) {
                        Err(SemverError::BuildCharacters(part.to_string()))
                    } else {
                        Ok(part.to_string())
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Self {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// The CEL library's `normalizeAndParse`: drops one leading `v`, strips
    /// leading zeros from each of the first three dot-separated parts and
    /// pads a missing minor or patch with `0`.
    pub(crate) fn parse_normalized(s: &str) -> Result<Self, SemverError> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s
            .splitn(3, '.')
            .map(|p| {
                if p.len() <= 1 {
                    return p.to_string();
                }
                let trimmed = p.trim_start_matches('0');
                if trimmed.is_empty() || !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("0{trimmed}")
                } else {
                    trimmed.to_string()
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err(SemverError::ShortWithMeta);
            }
            parts.resize(3, "0".to_string());
        }
        Self::parse(&parts.join("."))
    }

    /// `major()`: Go converts the uint64 to int64 with wrap-around.
    #[allow(clippy::cast_possible_wrap)]
    pub(crate) fn major(&self) -> i64 {
        self.major as i64
    }

    /// `minor()`.
    #[allow(clippy::cast_possible_wrap)]
    pub(crate) fn minor(&self) -> i64 {
        self.minor as i64
    }

    /// `patch()`.
    #[allow(clippy::cast_possible_wrap)]
    pub(crate) fn patch(&self) -> i64 {
        self.patch as i64
    }
}

fn parse_pre_release(s: &str) -> Result<PreRelease, SemverError> {
    if s.is_empty() {
        return Err(SemverError::PreReleaseEmpty);
    }
    if only(s, |b| b.is_ascii_digit()) {
        if has_leading_zero(s) {
            return Err(SemverError::PreReleaseLeadingZero(s.to_string()));
        }
        return parse_u64(s).map(PreRelease::Numeric);
    }
    if only(s, is_alphanumeric_or_hyphen) {
        return Ok(PreRelease::Alphanumeric(s.to_string()));
    }
    Err(SemverError::PreReleaseCharacters(s.to_string()))
}

/// SemVer precedence; build metadata is ignored, as in blang's `Compare`.
impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self
                    .pre
                    .iter()
                    .zip(&other.pre)
                    .map(|(a, b)| a.compare(b))
                    .find(|o| o.is_ne())
                    .unwrap_or_else(|| self.pre.len().cmp(&other.pre.len())),
            })
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Semver {}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, p) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match p {
                PreRelease::Numeric(n) => write!(f, "{n}")?,
                PreRelease::Alphanumeric(s) => f.write_str(s)?,
            }
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build.join("."))?;
        }
        Ok(())
    }
}

impl kube_cel::cel::objects::Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn strict_parsing_follows_blang() {
        for ok in [
            "1.0.0",
            "0.1.0-alpha.1",
            "1.2.3-beta.1+build.1",
            "570.86.15",
            "1.0.0-0a",
            "1.0.0+001",
        ] {
            assert!(Semver::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "v1.0.0",
            "1",
            "1.1",
            "01.01.01",
            " 1.0.0",
            "1.0.0 ",
            "1.0.0-",
            "1.0.0+",
            "1.0.0-01",
            "1.0.0-a..b",
            "1.0.x",
            "200K",
            "1.0.0-é",
        ] {
            assert!(Semver::parse(bad).is_err(), "{bad} should be rejected");
        }
        assert_eq!(
            Semver::parse("v1.0.0")
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("Invalid character(s) found in major number \"v1\"")
        );
        assert_eq!(
            Semver::parse("1.02.0").err(),
            Some(SemverError::ComponentLeadingZero {
                part: "minor",
                value: "02".into()
            })
        );
        assert_eq!(
            Semver::parse("1.02.0")
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("Minor number must not contain leading zeroes \"02\"")
        );
        // Go's strconv.ParseUint wording for a number past uint64.
        assert_eq!(
            Semver::parse("18446744073709551616.0.0")
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("strconv.ParseUint: parsing \"18446744073709551616\": value out of range")
        );
    }

    #[test]
    fn normalisation_follows_the_cel_library() {
        assert_eq!(v("1.0.0"), Semver::parse_normalized("v1.0.0").unwrap());
        assert_eq!(v("1.0.0"), Semver::parse_normalized("1.0").unwrap());
        assert_eq!(v("1.0.0"), Semver::parse_normalized("1").unwrap());
        assert_eq!(v("1.1.1"), Semver::parse_normalized("01.01.01").unwrap());
        assert_eq!(v("0.0.1"), Semver::parse_normalized("v0.0.1").unwrap());
        assert!(Semver::parse_normalized("1.0-alpha").is_err());
        assert!(Semver::parse_normalized("hello").is_err());
    }

    #[test]
    fn precedence_follows_semver_2() {
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.2.3",
            "2.0.0",
        ];
        for pair in ordered.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(v("1.0.0+a"), v("1.0.0+b"), "build metadata is ignored");
        assert!(v("570.86.15") > v("550.0.0"));
        assert!(v("535.0.0") < v("550.0.0"));
    }

    #[test]
    fn accessors() {
        let s = v("1.2.3");
        assert_eq!((s.major(), s.minor(), s.patch()), (1, 2, 3));
        assert_eq!(
            v("18446744073709551615.0.0").major(),
            -1,
            "Go's int64(uint64) wraps"
        );
    }
}
