//! `kubernetes.Quantity` for CEL: apimachinery's `resource.ParseQuantity`
//! and the arithmetic the CEL quantity library exposes. The scanner, the
//! suffix table, nano rounding and the binary cap are the shared ones of
//! [`crate::quantity`]; this module adds upstream's two representations.
//!
//! kube-cel ships a quantity type, but it keeps values in an `i128` with a
//! power-of-ten scale and overflows (a panic in debug builds, a wrong answer in
//! release builds) once two exponents are far apart, and its type cannot be
//! named from outside the crate. Capacities come from ResourceSlices we do not
//! control, so this module keeps an exact decimal ([`Decimal`]) instead: comparisons never
//! overflow, and arithmetic that would need absurd amounts of memory is an
//! error rather than an allocation.
//!
//! Upstream keeps two representations (an `int64` fast form and an `inf.Dec`)
//! and `isInteger()`/`asInteger()` only succeed on the fast form. That is
//! observable (`quantity("1.0").isInteger()` is false upstream), so the fast
//! form is tracked next to the exact value.

use std::cmp::Ordering;
use std::fmt;

use crate::quantity::decimal::Decimal;
use crate::quantity::{ErrorKind, Scanned, Suffix, exact_value, scan_with_suffix};

/// An exact Kubernetes quantity.
#[derive(Debug, Clone)]
pub(crate) struct Quantity {
    /// Upstream's `int64Amount` form (`value × 10^scale`), present only when
    /// upstream would hold the value that way. Most quantities live here and
    /// never allocate.
    fast: Option<(i64, i32)>,
    /// The exact value when there is no fast form.
    exact: Option<Decimal>,
}

impl Quantity {
    /// Parses like `resource.ParseQuantity`; the error is upstream's message.
    pub(crate) fn parse(s: &str) -> Result<Self, &'static str> {
        if s == "0" {
            return Ok(Self::from_i64(0));
        }
        let (scanned, suffix) = scan_with_suffix(s).map_err(ErrorKind::message)?;
        if let Some(q) = Self::fast_path(&scanned, suffix)? {
            return Ok(q);
        }
        // Upstream's big-decimal path: exact digits, then nano rounding and
        // the binary cap.
        let (exact, _) = exact_value(&scanned, suffix);
        Ok(Self {
            fast: None,
            exact: Some(exact),
        })
    }

    /// Upstream's int64 path, taken when the digits surely fit.
    fn fast_path(scanned: &Scanned<'_>, suffix: Suffix) -> Result<Option<Self>, &'static str> {
        let Suffix { base, exponent, .. } = suffix;
        const MAX_INT64_FACTORS: i64 = 18;
        let digit_count =
            i64::try_from(scanned.num.len() + scanned.denom.len()).unwrap_or(i64::MAX);
        let (mut scale, precision, mantissa) = if base == 10 {
            (i64::from(exponent), MAX_INT64_FACTORS - digit_count, 1i64)
        } else if exponent >= 0 && scanned.denom.is_empty() {
            let num_len = i64::try_from(scanned.num.len()).unwrap_or(i64::MAX);
            // Upstream estimates the decimal digits of 2^exponent as exponent*3/10.
            #[allow(clippy::cast_possible_truncation)]
            let binary_digits = (f64::from(exponent) * 3.0 / 10.0) as i64;
            (0, 15 - num_len - binary_digits - 1, 1i64 << exponent)
        } else {
            (0, -1, 1)
        };
        if precision < 0 {
            return Ok(None);
        }
        scale -= i64::try_from(scanned.denom.len()).unwrap_or(i64::MAX);
        if scale < -9 {
            return Ok(None);
        }
        let value = scanned
            .num
            .bytes()
            .chain(scanned.denom.bytes())
            .try_fold(0i64, |acc, d| {
                acc.checked_mul(10)?.checked_add(i64::from(d - b'0'))
            })
            .ok_or(ErrorKind::Numeric.message())?;
        let Some(mut result) = value.checked_mul(mantissa) else {
            return Ok(None);
        };
        if !scanned.positive {
            result = -result;
        }
        let scale = i32::try_from(scale).map_err(|_| ErrorKind::Numeric.message())?;
        Ok(Some(Self {
            fast: Some((result, scale)),
            exact: None,
        }))
    }

    fn from_i64(value: i64) -> Self {
        Self {
            fast: Some((value, 0)),
            exact: None,
        }
    }

    /// The exact value, built from the fast form when that is all there is.
    fn decimal(&self) -> std::borrow::Cow<'_, Decimal> {
        match (&self.exact, self.fast) {
            (Some(d), _) => std::borrow::Cow::Borrowed(d),
            (None, Some((v, s))) => std::borrow::Cow::Owned(Decimal::from_i64(v, i64::from(s))),
            (None, None) => std::borrow::Cow::Owned(Decimal::zero()),
        }
    }

    /// `sign()`: -1, 0 or 1.
    pub(crate) fn sign(&self) -> i64 {
        match self.fast {
            Some((v, _)) => v.signum(),
            None => self.decimal().sign(),
        }
    }

    /// `asInteger()`: upstream's `AsInt64`, which only succeeds on the int64
    /// form at a non-negative scale.
    pub(crate) fn as_integer(&self) -> Option<i64> {
        let (value, scale) = self.fast?;
        match scale.cmp(&0) {
            Ordering::Equal => Some(value),
            Ordering::Less => None,
            Ordering::Greater => (0..scale).try_fold(value, |acc, _| acc.checked_mul(10)),
        }
    }

    /// `asApproximateFloat()`.
    pub(crate) fn as_approximate_float(&self) -> f64 {
        match self.fast {
            // Upstream's formula for the int64 form.
            #[allow(clippy::cast_precision_loss)]
            Some((v, s)) => v as f64 * 10f64.powi(s),
            None => self.decimal().to_f64(),
        }
    }

    /// `add()` and, with `negate`, `sub()`; `None` when the exact result would
    /// need an unreasonable number of digits.
    pub(crate) fn add(&self, other: &Self, negate: bool) -> Option<Self> {
        let rhs_fast = other.fast.map(|(v, s)| {
            if negate {
                // Go negates int64 with wrap-around; so does upstream's Sub.
                (v.wrapping_neg(), s)
            } else {
                (v, s)
            }
        });
        let fast = match (self.fast, rhs_fast) {
            (Some(a), Some(b)) => int64_amount_add(a, b),
            _ => None,
        };
        if fast.is_some() {
            return Some(Self { fast, exact: None });
        }
        let rhs = if negate {
            other.decimal().negated()
        } else {
            other.decimal().into_owned()
        };
        Some(Self {
            fast: None,
            exact: Some(self.decimal().checked_add(&rhs)?),
        })
    }
}

/// Upstream's `int64Amount.Add`: succeeds only when the result fits in int64
/// at the smaller of the two scales.
fn int64_amount_add(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    let scale_up = |v: i64, by: i32| (0..by).try_fold(v, |acc, _| acc.checked_mul(10));
    if b.0 == 0 {
        return Some(a);
    }
    if a.0 == 0 {
        return Some(b);
    }
    match a.1.cmp(&b.1) {
        Ordering::Equal => Some((a.0.checked_add(b.0)?, a.1)),
        Ordering::Greater => Some((scale_up(a.0, a.1 - b.1)?.checked_add(b.0)?, b.1)),
        Ordering::Less => Some((a.0.checked_add(scale_up(b.0, b.1 - a.1)?)?, a.1)),
    }
}

/// Compares two int64 forms by scaling the one with the larger scale down
/// to the other's; `None` when that overflows.
fn int64_amount_cmp(a: (i64, i32), b: (i64, i32)) -> Option<Ordering> {
    let scale_up = |v: i64, by: i32| (0..by).try_fold(v, |acc, _| acc.checked_mul(10));
    Some(match a.1.cmp(&b.1) {
        Ordering::Equal => a.0.cmp(&b.0),
        Ordering::Greater => scale_up(a.0, a.1 - b.1)?.cmp(&b.0),
        Ordering::Less => a.0.cmp(&scale_up(b.0, b.1 - a.1)?),
    })
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        if let (Some(a), Some(b)) = (self.fast, other.fast)
            && let Some(order) = int64_amount_cmp(a, b)
        {
            return order;
        }
        self.decimal().cmp(&other.decimal())
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.decimal();
        if value.is_zero() {
            return f.write_str("0");
        }
        let digits: String = value.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if value.neg { "-" } else { "" };
        write!(f, "{sign}{digits}e{}", value.exp)
    }
}

impl kube_cel::cel::objects::Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    // Examples from apiserver's quantity library documentation and
    // apimachinery's quantity tests.
    #[test]
    fn comparisons_follow_upstream_examples() {
        assert_eq!(q("200M").cmp(&q("0.2G")), Ordering::Equal);
        assert_eq!(q("50M").cmp(&q("50Mi")), Ordering::Less);
        assert_eq!(q("50Mi").cmp(&q("50M")), Ordering::Greater);
        assert!(q("150Mi") > q("100Mi"));
        assert!(q("141Gi") == q("151397597184"));
        assert!(q("1Mi") > q("1Ki"));
        assert!(q("1") == q("1000m"));
        assert!(q("-1") < q("0"));
        assert!(q("-2") < q("-1"));
        assert!(q("1e3") == q("1k"));
        assert!(q("1E3") == q("1k"));
        assert!(q("1e-3") == q("1m"));
    }

    #[test]
    fn accepted_and_rejected_forms() {
        for ok in [
            "1.3G", "1.3Gi", "10000k", "0", "+5", "-5", ".5", "1.", "5.Gi", "1e+3", "1E-3",
            "00012", ".", "-.",
        ] {
            assert!(Quantity::parse(ok).is_ok(), "{ok} should parse");
        }
        // apimachinery's TestQuantityParse invalid list, plus the library docs' examples.
        for bad in [
            "1.1.M",
            "1+1.0M",
            "0.1mi",
            "0.1am",
            "aoeu",
            ".5i",
            "1i",
            "-3.01i",
            "-3.01e-",
            " 1",
            "1 ",
            "",
            "200K",
            "Three",
            "1,3G",
            "1ki",
            "1.2.3",
            "1e",
            "1Mi3",
            "1e3.5",
            "Non-Numeric",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad} should be rejected");
        }
        assert_eq!(
            Quantity::parse("200K").err(),
            Some(ErrorKind::Suffix.message())
        );
        assert_eq!(
            Quantity::parse("1,3G").err(),
            Some(ErrorKind::FormatWrong.message())
        );
        // The library docs call quantity('Mi') an error, but upstream's scanner
        // reads an empty number as 0, so it is 0 (and so is ".").
        assert!(q("Mi") == q("0"));
        assert!(q(".") == q("0"));
    }

    #[test]
    fn huge_exponents_compare_exactly_without_overflow() {
        assert!(q("1e40") > q("40Gi"));
        assert!(q("1e-40") > q("0"), "non-zero values round up to 1n");
        assert!(q("1e-40") == q("1n"));
        assert!(q("1e2000000000") > q("9e1999999999"));
        assert!(q("-1e2000000000") < q("1n"));
    }

    #[test]
    fn nano_rounding_and_binary_cap() {
        assert!(q("1.5n") == q("2n"));
        assert!(q("-1.5n") == q("-2n"));
        assert!(
            q("100Ei") == q("9223372036854775807"),
            "binary values cap at 2^63-1"
        );
        assert!(
            q("100E") > q("9223372036854775807"),
            "decimal values are not capped"
        );
    }

    #[test]
    fn integer_conversion_follows_the_int64_form() {
        assert_eq!(q("50k").as_integer(), Some(50_000));
        assert_eq!(q("50000000G").as_integer(), Some(50_000_000_000_000_000));
        assert_eq!(
            q("9999999999999999999999999999999999999G").as_integer(),
            None
        );
        assert_eq!(q("1.0").as_integer(), None, "upstream keeps 10 at scale -1");
        assert_eq!(q("1Ki").as_integer(), Some(1024));
        assert_eq!(
            q("1.5Gi").as_integer(),
            None,
            "fractional binary values take the slow path"
        );
    }

    #[test]
    fn arithmetic_matches_upstream_examples() {
        let add = |a: &str, b: &str| q(a).add(&q(b), false).unwrap_or_else(|| panic!("{a}+{b}"));
        let sub = |a: &str, b: &str| q(a).add(&q(b), true).unwrap_or_else(|| panic!("{a}-{b}"));
        assert!(add("50k", "20k") == q("70k"));
        assert!(add("50k", "20") == q("50020"));
        assert!(sub("50k", "20k") == q("30k"));
        assert!(sub("50k", "20000") == q("30k"));
        assert_eq!(sub("50k", "20000").as_approximate_float(), 30000.0);
        let chained = add("50k", "20")
            .add(&q("100k"), true)
            .and_then(|r| r.add(&q("-50000"), true));
        assert!(chained == Some(q("20")));
        assert!(add("1e-9", "1e20") == q("100000000000000000000000000001n"));
        assert!(
            q("1e2000000000").add(&q("1"), false).is_none(),
            "absurd alignment is refused"
        );
    }

    #[test]
    fn sign_and_float() {
        assert_eq!(q("-3m").sign(), -1);
        assert_eq!(q("0").sign(), 0);
        assert_eq!(q("-0").sign(), 0);
        assert_eq!(q("3Ki").sign(), 1);
        assert_eq!(q("1.5").as_approximate_float(), 1.5);
        assert!(q("1e400").as_approximate_float().is_infinite());
    }
}
