//! What the checker knows of each function: argument counts and result
//! types, and the hidden helpers it rewrites expressions into.

use super::*;

/// One declared function: how it may be called and what it returns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Declared {
    /// Argument counts accepted as a global call `f(a, …)`.
    pub(crate) global: &'static [usize],
    /// Argument counts accepted as a member call `x.f(a, …)`.
    pub(crate) member: &'static [usize],
    /// Static result type, for the checker's output-type rule.
    pub(crate) returns: Returns,
}

/// The result types the checker cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Returns {
    Bool,
    Int,
    Double,
    String,
    List,
    Quantity,
    Semver,
    Optional,
    Dyn,
}

const fn g(global: &'static [usize], returns: Returns) -> Declared {
    Declared {
        global,
        member: &[],
        returns,
    }
}

const fn m(member: &'static [usize], returns: Returns) -> Declared {
    Declared {
        global: &[],
        member,
        returns,
    }
}

const fn gm(global: &'static [usize], member: &'static [usize], returns: Returns) -> Declared {
    Declared {
        global,
        member,
        returns,
    }
}

/// Name of DRA's list-membership function, declared only where upstream declares it.
pub(crate) const INCLUDES: &str = "includes";

/// The functions of upstream's StoredExpressions environment that exist here.
///
/// cel-rust resolves functions by name at run time only, so this table is
/// what turns an unknown function or a wrong argument count into a compile
/// error, as cel-go's type checker does. Functions kube-cel registers but the
/// Kubernetes base environment lacks (`math.*`, `base64.*`,
/// `jsonpatch.escapeKey`, `isIPv4`, …) are deliberately absent.
pub(crate) static DECLARED: LazyLock<HashMap<&'static str, Declared>> = LazyLock::new(|| {
    use Returns::{Bool, Double, Dyn, Int, List, Optional, Semver as Sv, String as Str};
    let q = Returns::Quantity;
    HashMap::from([
        // CEL standard library.
        ("size", gm(&[1], &[0], Int)),
        ("contains", m(&[1], Bool)),
        ("startsWith", m(&[1], Bool)),
        ("endsWith", m(&[1], Bool)),
        ("matches", gm(&[2], &[1], Bool)),
        ("string", g(&[1], Str)),
        ("bytes", g(&[1], Dyn)),
        ("double", g(&[1], Double)),
        ("int", g(&[1], Int)),
        ("uint", g(&[1], Dyn)),
        ("duration", g(&[1], Dyn)),
        ("timestamp", g(&[1], Dyn)),
        ("getFullYear", m(&[0, 1], Int)),
        ("getMonth", m(&[0, 1], Int)),
        ("getDayOfYear", m(&[0, 1], Int)),
        ("getDayOfMonth", m(&[0, 1], Int)),
        ("getDate", m(&[0, 1], Int)),
        ("getDayOfWeek", m(&[0, 1], Int)),
        ("getHours", m(&[0, 1], Int)),
        ("getMinutes", m(&[0, 1], Int)),
        ("getSeconds", m(&[0, 1], Int)),
        ("getMilliseconds", m(&[0, 1], Int)),
        // Optional types.
        ("optional.none", g(&[0], Optional)),
        ("optional.of", g(&[1], Optional)),
        ("optional.ofNonZeroValue", g(&[1], Optional)),
        ("value", m(&[0], Dyn)),
        ("hasValue", m(&[0], Bool)),
        ("or", m(&[1], Optional)),
        ("orValue", m(&[1], Dyn)),
        // cel-go ext.Strings v2.
        ("charAt", m(&[1], Str)),
        ("indexOf", m(&[1, 2], Int)),
        ("lastIndexOf", m(&[1, 2], Int)),
        ("lowerAscii", m(&[0], Str)),
        ("upperAscii", m(&[0], Str)),
        ("replace", m(&[2, 3], Str)),
        ("split", m(&[1, 2], List)),
        ("substring", m(&[1, 2], Str)),
        ("trim", m(&[0], Str)),
        ("join", m(&[0, 1], Str)),
        ("strings.quote", g(&[1], Str)),
        ("format", m(&[1], Str)),
        // Kubernetes lists library and cel-go ext.Lists v3.
        ("isSorted", m(&[0], Bool)),
        ("sum", m(&[0], Dyn)),
        ("min", m(&[0], Dyn)),
        ("max", m(&[0], Dyn)),
        ("slice", m(&[2], List)),
        ("sort", m(&[0], List)),
        ("flatten", m(&[0, 1], List)),
        ("distinct", m(&[0], List)),
        ("reverse", m(&[0], List)),
        ("first", m(&[0], Dyn)),
        ("last", m(&[0], Dyn)),
        ("lists.range", g(&[1], List)),
        // cel-go ext.Sets.
        ("sets.contains", g(&[2], Bool)),
        ("sets.equivalent", g(&[2], Bool)),
        ("sets.intersects", g(&[2], Bool)),
        // Kubernetes regex, URL, IP and CIDR libraries.
        ("find", m(&[1], Str)),
        ("findAll", m(&[1, 2], List)),
        ("url", g(&[1], Dyn)),
        ("isURL", g(&[1], Bool)),
        ("getScheme", m(&[0], Str)),
        ("getHost", m(&[0], Str)),
        ("getHostname", m(&[0], Str)),
        ("getPort", m(&[0], Str)),
        ("getEscapedPath", m(&[0], Str)),
        ("getQuery", m(&[0], Dyn)),
        ("ip", gm(&[1], &[0], Dyn)),
        ("isIP", g(&[1], Bool)),
        ("ip.isCanonical", g(&[1], Bool)),
        ("family", m(&[0], Int)),
        ("isUnspecified", m(&[0], Bool)),
        ("isLoopback", m(&[0], Bool)),
        ("isLinkLocalMulticast", m(&[0], Bool)),
        ("isLinkLocalUnicast", m(&[0], Bool)),
        ("isGlobalUnicast", m(&[0], Bool)),
        ("cidr", g(&[1], Dyn)),
        ("isCIDR", g(&[1], Bool)),
        ("containsIP", m(&[1], Bool)),
        ("containsCIDR", m(&[1], Bool)),
        ("prefixLength", m(&[0], Int)),
        ("masked", m(&[0], Dyn)),
        // Kubernetes format library.
        ("format.named", g(&[1], Optional)),
        ("format.dns1123Label", g(&[0], Dyn)),
        ("format.dns1123Subdomain", g(&[0], Dyn)),
        ("format.dns1035Label", g(&[0], Dyn)),
        ("format.dns1035LabelPrefix", g(&[0], Dyn)),
        ("format.dns1123LabelPrefix", g(&[0], Dyn)),
        ("format.dns1123SubdomainPrefix", g(&[0], Dyn)),
        ("format.qualifiedName", g(&[0], Dyn)),
        ("format.labelValue", g(&[0], Dyn)),
        ("format.uri", g(&[0], Dyn)),
        ("format.uuid", g(&[0], Dyn)),
        ("format.byte", g(&[0], Dyn)),
        ("format.date", g(&[0], Dyn)),
        ("format.datetime", g(&[0], Dyn)),
        ("validate", m(&[1], Optional)),
        // Kubernetes quantity and semver libraries (ours, see quantity.rs/semver.rs).
        ("quantity", g(&[1], q)),
        ("isQuantity", g(&[1], Bool)),
        ("isInteger", m(&[0], Bool)),
        ("asInteger", m(&[0], Int)),
        ("asApproximateFloat", m(&[0], Double)),
        ("sign", m(&[0], Int)),
        ("add", m(&[1], q)),
        ("sub", m(&[1], q)),
        ("semver", g(&[1, 2], Sv)),
        ("isSemver", g(&[1, 2], Bool)),
        ("major", m(&[0], Int)),
        ("minor", m(&[0], Int)),
        ("patch", m(&[0], Int)),
        ("isGreaterThan", m(&[1], Bool)),
        ("isLessThan", m(&[1], Bool)),
        ("compareTo", m(&[1], Int)),
        // DRA.
        (INCLUDES, m(&[1], Bool)),
    ])
});

/// Hidden helpers the checker rewrites expressions into. Users cannot name
/// them: CEL identifiers never start with `@`.
pub(crate) mod hidden {
    /// `@select(x, "f")`: field selection that fails on non-maps instead of
    /// cel-rust's silent `false`.
    pub(crate) const SELECT: &str = "@select";
    /// `@has(x, "f")`: `has()` that fails on non-maps.
    pub(crate) const HAS: &str = "@has";
    /// `@optSelect(x, "f")`: `x.?f` with cel-spec semantics (a missing key is
    /// `optional.none()`, not an error).
    pub(crate) const OPT_SELECT: &str = "@optSelect";
    /// `@tick(step)`: charges one comprehension iteration.
    pub(crate) const TICK: &str = "@tick";
    /// `@charge(v)`: charges the size of a value bound by `cel.bind`.
    pub(crate) const CHARGE: &str = "@charge";
    /// `@add(a, b)`: `+` that charges list and string growth first.
    pub(crate) const ADD: &str = "@add";
    /// `@neg(x)`: unary `-` with cel-go's overflow error for the least
    /// int (cel-rust negates with `-`, which panics in debug builds and wraps
    /// in release builds).
    pub(crate) const NEG: &str = "@neg";
}
