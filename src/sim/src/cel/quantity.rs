//! `kubernetes.Quantity` for CEL: apimachinery's `resource.ParseQuantity`
//! and the arithmetic the CEL quantity library exposes.
//!
//! kube-cel ships a quantity type, but it keeps values in an `i128` with a
//! power-of-ten scale and overflows (a panic in debug builds, a wrong answer in
//! release builds) once two exponents are far apart, and its type cannot be
//! named from outside the crate. Capacities come from ResourceSlices we do not
//! control, so this module keeps an exact decimal instead: comparisons never
//! overflow, and arithmetic that would need absurd amounts of memory is an
//! error rather than an allocation.
//!
//! Upstream keeps two representations (an `int64` fast form and an `inf.Dec`)
//! and `isInteger()`/`asInteger()` only succeed on the fast form. That is
//! observable (`quantity("1.0").isInteger()` is false upstream), so the fast
//! form is tracked next to the exact value.

use std::cmp::Ordering;
use std::fmt;

/// The error texts are upstream's, so messages read the same as the scheduler's.
pub(crate) const ERR_FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const ERR_NUMERIC: &str = "unable to parse numeric part of quantity";
const ERR_SUFFIX: &str = "unable to parse quantity's suffix";

/// Aligning two values whose exponents are further apart than this would
/// allocate that many digits; upstream's big decimals would too, but here a
/// pathological input must not take the process down.
const MAX_ALIGNED_DIGITS: i64 = 4096;

/// Upstream caps binary-suffixed quantities at 2^63-1.
const MAX_ALLOWED: i64 = i64::MAX;

/// How the value was written; upstream only caps `BinarySI` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

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

/// An exact decimal: `(-1)^neg × digits × 10^exp`, where `digits` has no
/// leading or trailing zeros (empty means zero).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decimal {
    neg: bool,
    digits: Vec<u8>,
    exp: i64,
}

impl Decimal {
    fn zero() -> Self {
        Self {
            neg: false,
            digits: Vec::new(),
            exp: 0,
        }
    }

    fn from_i64(value: i64, scale: i64) -> Self {
        let digits = value
            .unsigned_abs()
            .to_string()
            .bytes()
            .map(|b| b - b'0')
            .collect();
        Self::normalized(value < 0, digits, scale)
    }

    /// Strips leading and trailing zeros; a zero value is never negative.
    fn normalized(neg: bool, mut digits: Vec<u8>, mut exp: i64) -> Self {
        let leading = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exp = exp.saturating_add(1);
        }
        if digits.is_empty() {
            return Self::zero();
        }
        Self { neg, digits, exp }
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    fn sign(&self) -> i64 {
        match (self.is_zero(), self.neg) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// Position of the most significant digit; larger means a larger magnitude.
    fn order(&self) -> i64 {
        i64::try_from(self.digits.len())
            .unwrap_or(i64::MAX)
            .saturating_add(self.exp)
    }

    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            (false, false) => {}
        }
        self.order()
            .cmp(&other.order())
            .then_with(|| self.digits.cmp(&other.digits))
    }

    /// Both non-zero operands as little-endian digit vectors at a common
    /// exponent, or `None` when that would need more than
    /// [`MAX_ALIGNED_DIGITS`] digits.
    fn aligned(&self, other: &Self) -> Option<(Vec<u8>, Vec<u8>, i64)> {
        let min_exp = self.exp.min(other.exp);
        let widen = |d: &Decimal| -> Option<Vec<u8>> {
            let shift = d.exp.checked_sub(min_exp)?;
            let len = i64::try_from(d.digits.len()).ok()?.checked_add(shift)?;
            if len > MAX_ALIGNED_DIGITS {
                return None;
            }
            let mut out = vec![0u8; usize::try_from(shift).ok()?];
            out.extend(d.digits.iter().rev());
            Some(out)
        };
        Some((widen(self)?, widen(other)?, min_exp))
    }

    fn checked_add(&self, other: &Self) -> Option<Self> {
        if self.is_zero() {
            return Some(other.clone());
        }
        if other.is_zero() {
            return Some(self.clone());
        }
        let (a, b, exp) = self.aligned(other)?;
        if self.neg == other.neg {
            return Some(Self::from_le(self.neg, add_le(&a, &b), exp));
        }
        match self.cmp_magnitude(other) {
            Ordering::Equal => Some(Self::zero()),
            Ordering::Greater => Some(Self::from_le(self.neg, sub_le(&a, &b), exp)),
            Ordering::Less => Some(Self::from_le(other.neg, sub_le(&b, &a), exp)),
        }
    }

    fn negated(&self) -> Self {
        if self.is_zero() {
            return self.clone();
        }
        Self {
            neg: !self.neg,
            ..self.clone()
        }
    }

    fn from_le(neg: bool, mut le: Vec<u8>, exp: i64) -> Self {
        le.reverse();
        Self::normalized(neg, le, exp)
    }

    /// Multiplies the magnitude by `2^power`.
    fn mul_pow2(&self, power: u32) -> Self {
        let mut le: Vec<u8> = self.digits.iter().rev().copied().collect();
        for _ in 0..power {
            let mut carry = 0u8;
            for d in &mut le {
                let v = *d * 2 + carry;
                *d = v % 10;
                carry = v / 10;
            }
            if carry > 0 {
                le.push(carry);
            }
        }
        Self::from_le(self.neg, le, self.exp)
    }

    /// Rounds away from zero to a multiple of 10^-9, as upstream does for
    /// every non-zero parsed quantity.
    fn round_up_to_nano(&self) -> Self {
        const NANO: i64 = -9;
        if self.is_zero() || self.exp >= NANO {
            return self.clone();
        }
        let keep = self.order().saturating_sub(NANO);
        if keep <= 0 {
            return Self {
                neg: self.neg,
                digits: vec![1],
                exp: NANO,
            };
        }
        let keep = usize::try_from(keep).unwrap_or(usize::MAX);
        let dropped_nonzero = self.digits.iter().skip(keep).any(|d| *d != 0);
        let kept: Vec<u8> = self.digits.iter().take(keep).rev().copied().collect();
        let kept = if dropped_nonzero {
            add_le(&kept, &[1])
        } else {
            kept
        };
        Self::from_le(self.neg, kept, NANO)
    }

    fn to_f64(&self) -> f64 {
        if self.is_zero() {
            return 0.0;
        }
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if self.neg { "-" } else { "" };
        // Rust's float parser handles any exponent, returning ±inf when out of range.
        format!("{sign}{digits}e{}", self.exp)
            .parse()
            .unwrap_or(f64::NAN)
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.sign().cmp(&other.sign()) {
            Ordering::Equal if self.neg => other.cmp_magnitude(self),
            Ordering::Equal => self.cmp_magnitude(other),
            unequal => unequal,
        }
    }
}

fn add_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0u8;
    for i in 0..a.len().max(b.len()) {
        let v = a.get(i).copied().unwrap_or(0) + b.get(i).copied().unwrap_or(0) + carry;
        out.push(v % 10);
        carry = v / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out
}

/// `a - b` for magnitudes with `a >= b`.
fn sub_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i8;
    for (i, &ad) in a.iter().enumerate() {
        let mut v = i8::try_from(ad).unwrap_or(0)
            - borrow
            - i8::try_from(b.get(i).copied().unwrap_or(0)).unwrap_or(0);
        borrow = 0;
        if v < 0 {
            v += 10;
            borrow = 1;
        }
        out.push(u8::try_from(v).unwrap_or(0));
    }
    out
}

/// The pieces of a quantity string, as upstream's scanner splits it.
struct Scanned<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Upstream's `parseQuantityString`: sign, integer digits (leading zeros
/// dropped), optional fraction, then a suffix made of suffix letters with an
/// optional signed integer tail.
fn scan(s: &str) -> Result<Scanned<'_>, &'static str> {
    let bytes = s.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut positive = true;
    match bytes.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Scanned {
            positive,
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let num_start = pos;
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &s[num_start..pos];
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if pos < end && bytes[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(ERR_FORMAT_WRONG);
    }
    Ok(Scanned {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// Upstream's suffix table: `(base, exponent, format)`.
fn interpret_suffix(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            // Go's ParseInt accepts a leading sign; upstream then truncates to int32.
            let parsed: i64 = rest.parse().ok()?;
            #[allow(clippy::cast_possible_truncation)] // mirrors upstream's int32(parsed)
            Some((10, parsed as i32, Format::DecimalExponent))
        }
    }
}

impl Quantity {
    /// Parses like `resource.ParseQuantity`; the error is upstream's message.
    pub(crate) fn parse(s: &str) -> Result<Self, &'static str> {
        if s.is_empty() {
            return Err(ERR_FORMAT_WRONG);
        }
        if s == "0" {
            return Ok(Self::from_i64(0));
        }
        let scanned = scan(s)?;
        let (base, exponent, format) = interpret_suffix(scanned.suffix).ok_or(ERR_SUFFIX)?;
        if let Some(q) = Self::fast_path(&scanned, base, exponent)? {
            return Ok(q);
        }
        Self::slow_path(&scanned, base, exponent, format)
    }

    /// Upstream's int64 path, taken when the digits surely fit.
    fn fast_path(
        scanned: &Scanned<'_>,
        base: u32,
        exponent: i32,
    ) -> Result<Option<Self>, &'static str> {
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
            .ok_or(ERR_NUMERIC)?;
        let Some(mut result) = value.checked_mul(mantissa) else {
            return Ok(None);
        };
        if !scanned.positive {
            result = -result;
        }
        let scale = i32::try_from(scale).map_err(|_| ERR_NUMERIC)?;
        Ok(Some(Self {
            fast: Some((result, scale)),
            exact: None,
        }))
    }

    /// Upstream's big-decimal path: exact digits, then nano rounding and the
    /// binary cap.
    fn slow_path(
        scanned: &Scanned<'_>,
        base: u32,
        exponent: i32,
        format: Format,
    ) -> Result<Self, &'static str> {
        let digits: Vec<u8> = scanned
            .num
            .bytes()
            .chain(scanned.denom.bytes())
            .map(|b| b - b'0')
            .collect();
        let denom_len = i64::try_from(scanned.denom.len()).map_err(|_| ERR_NUMERIC)?;
        let mut amount = if base == 10 {
            Decimal::normalized(false, digits, i64::from(exponent) - denom_len)
        } else {
            let exponent = u32::try_from(exponent).map_err(|_| ERR_SUFFIX)?;
            Decimal::normalized(false, digits, -denom_len).mul_pow2(exponent)
        };
        amount = amount.round_up_to_nano();
        let max = Decimal::from_i64(MAX_ALLOWED, 0);
        if format == Format::BinarySI && amount > max {
            amount = max;
        }
        if !scanned.positive {
            amount = amount.negated();
        }
        Ok(Self {
            fast: None,
            exact: Some(amount),
        })
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
        assert_eq!(Quantity::parse("200K").err(), Some(ERR_SUFFIX));
        assert_eq!(Quantity::parse("1,3G").err(), Some(ERR_FORMAT_WRONG));
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
