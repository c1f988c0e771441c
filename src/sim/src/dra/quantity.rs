//! Kubernetes resource quantities as exact fixed-point numbers.
//!
//! The allocator adds, subtracts and compares counters and capacities. The
//! API server stores every quantity rounded up to nano units (and caps the
//! magnitude near 2^63 units), so an `i128` count of nano units holds every
//! value a cluster can contain exactly, sums of many included.
//!
//! Results that carry quantities (`consumedCapacity`) are written in the
//! canonical form the API server would serialise, keeping the input's format
//! (binary suffixes, decimal suffixes or `e` exponents).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Nano units in one unit.
const NANO: i128 = 1_000_000_000;

/// A quantity in nano units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(i128);

/// How a quantity is written; decides its canonical serialisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// Powers of 1024: `Ki`, `Mi`, … `Ei`.
    BinarySi,
    /// Powers of 1000: `n`, `u`, `m`, ``, `k`, `M`, … `E`.
    #[default]
    DecimalSi,
    /// `e`/`E` exponents: `1e3`.
    DecimalExponent,
}

/// A parsed quantity with the format it was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Value {
    /// The exact amount.
    pub amount: Amount,
    /// The format used when it is written out.
    pub format: Format,
}

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {reason}")]
pub struct QuantityError {
    /// The text as given.
    pub text: String,
    /// What was wrong.
    pub reason: &'static str,
}

impl Amount {
    /// Zero.
    pub const ZERO: Amount = Amount(0);

    /// An amount of whole units.
    #[must_use]
    pub fn from_units(units: i128) -> Self {
        Amount(units.saturating_mul(NANO))
    }

    /// An amount of nano units.
    #[must_use]
    pub fn from_nanos(nanos: i128) -> Self {
        Amount(nanos)
    }

    /// The raw nano-unit count.
    #[must_use]
    pub fn nanos(self) -> i128 {
        self.0
    }

    /// The value in whole units, rounded away from zero as upstream's
    /// `Quantity.Value()` does.
    #[must_use]
    pub fn ceil_units(self) -> i128 {
        let whole = self.0 / NANO;
        if self.0 % NANO == 0 {
            whole
        } else if self.0 > 0 {
            whole + 1
        } else {
            whole - 1
        }
    }

    /// Saturating sum.
    #[must_use]
    pub fn plus(self, other: Amount) -> Amount {
        Amount(self.0.saturating_add(other.0))
    }

    /// Saturating difference.
    #[must_use]
    pub fn minus(self, other: Amount) -> Amount {
        Amount(self.0.saturating_sub(other.0))
    }

    /// Whether this is zero.
    #[must_use]
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Value {
    /// Parses a Kubernetes quantity string.
    ///
    /// # Errors
    /// A string that is not `<sign><digits>[.<digits>]<suffix>`.
    pub fn parse(text: &str) -> Result<Value, QuantityError> {
        parse(text)
    }

    /// Parses the string inside a `Quantity`.
    ///
    /// # Errors
    /// As [`Value::parse`].
    pub fn from_quantity(q: &Quantity) -> Result<Value, QuantityError> {
        parse(&q.0)
    }

    /// A whole-unit value in binary format, as upstream's
    /// `resource.NewQuantity(v, BinarySI)`.
    #[must_use]
    pub fn binary_units(units: i128) -> Value {
        Value {
            amount: Amount::from_units(units),
            format: Format::BinarySi,
        }
    }

    /// The canonical string, as the API server would serialise it.
    #[must_use]
    pub fn canonical(self) -> String {
        canonical(self.amount, self.format)
    }

    /// As a `Quantity` object in canonical form.
    #[must_use]
    pub fn to_quantity(self) -> Quantity {
        Quantity(self.canonical())
    }
}

fn err(text: &str, reason: &'static str) -> QuantityError {
    QuantityError {
        text: text.to_string(),
        reason,
    }
}

/// Splits `text` into sign, mantissa digits, fraction digits and suffix, and
/// computes the exact nano-unit value, rounding up to the next nano unit.
fn parse(text: &str) -> Result<Value, QuantityError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(err(text, "empty"));
    }
    let bytes = s.as_bytes();
    let mut pos = 0;
    let mut negative = false;
    if matches!(bytes[0], b'+' | b'-') {
        negative = bytes[0] == b'-';
        pos = 1;
    }
    let int_start = pos;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let int_digits = &s[int_start..pos];
    let mut frac_digits = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        pos += 1;
        let frac_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        frac_digits = &s[frac_start..pos];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(err(text, "no digits"));
    }
    let suffix = &s[pos..];
    // (base, exponent, format): value = number * base^exponent.
    let (base, exponent, format): (i128, i32, Format) = match suffix {
        "" => (10, 0, Format::DecimalSi),
        "n" => (10, -9, Format::DecimalSi),
        "u" => (10, -6, Format::DecimalSi),
        "m" => (10, -3, Format::DecimalSi),
        "k" => (10, 3, Format::DecimalSi),
        "M" => (10, 6, Format::DecimalSi),
        "G" => (10, 9, Format::DecimalSi),
        "T" => (10, 12, Format::DecimalSi),
        "P" => (10, 15, Format::DecimalSi),
        "E" => (10, 18, Format::DecimalSi),
        "Ki" => (2, 10, Format::BinarySi),
        "Mi" => (2, 20, Format::BinarySi),
        "Gi" => (2, 30, Format::BinarySi),
        "Ti" => (2, 40, Format::BinarySi),
        "Pi" => (2, 50, Format::BinarySi),
        "Ei" => (2, 60, Format::BinarySi),
        other => {
            let rest = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .ok_or_else(|| err(text, "unknown suffix"))?;
            let exp: i32 = rest.parse().map_err(|_| err(text, "invalid exponent"))?;
            if !(-100..=100).contains(&exp) {
                return Err(err(text, "exponent out of range"));
            }
            (10, exp, Format::DecimalExponent)
        }
    };
    // Drop leading zeros so long zero-padded strings still fit.
    let digits: String = format!("{int_digits}{frac_digits}");
    let trimmed = digits.trim_start_matches('0');
    if trimmed.len() > 36 {
        return Err(err(text, "too many digits"));
    }
    let mantissa: i128 = if trimmed.is_empty() {
        0
    } else {
        trimmed.parse().map_err(|_| err(text, "too many digits"))?
    };
    let frac_len = i32::try_from(frac_digits.len()).map_err(|_| err(text, "too many digits"))?;
    // value = mantissa / 10^frac_len * base^exponent, in nano units:
    // mantissa * base^exponent * 10^9 / 10^frac_len.
    let (mut numerator, mut denominator) = (mantissa, 1i128);
    let overflow = || err(text, "value out of range");
    let mul = |v: i128, factor: i128| v.checked_mul(factor).ok_or_else(overflow);
    if base == 2 {
        numerator = mul(numerator, 1i128 << exponent)?;
    } else if exponent >= 0 {
        numerator = mul(numerator, pow10(exponent).ok_or_else(overflow)?)?;
    } else {
        denominator = mul(denominator, pow10(-exponent).ok_or_else(overflow)?)?;
    }
    numerator = mul(numerator, NANO)?;
    denominator = mul(denominator, pow10(frac_len).ok_or_else(overflow)?)?;
    let mut nanos = numerator / denominator;
    if numerator % denominator != 0 {
        // Upstream rounds any non-zero remainder up to the next nano unit.
        nanos += 1;
    }
    if negative {
        nanos = -nanos;
    }
    Ok(Value {
        amount: Amount(nanos),
        format,
    })
}

fn pow10(exp: i32) -> Option<i128> {
    let exp = u32::try_from(exp).ok()?;
    10i128.checked_pow(exp)
}

/// Upstream's `CanonicalizeBytes`: binary values that are whole multiples of
/// 1024 keep a binary suffix; everything else becomes decimal with the largest
/// suffix (a power of 1000) that keeps the mantissa whole.
fn canonical(amount: Amount, format: Format) -> String {
    let nanos = amount.0;
    if format == Format::BinarySi {
        let whole = nanos % NANO == 0;
        let units = nanos / NANO;
        if whole && !(-1024 < units && units < 1024) {
            let mut mantissa = units;
            let mut exponent = 0;
            while exponent < 6 && mantissa % 1024 == 0 {
                mantissa /= 1024;
                exponent += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exponent];
            return format!("{mantissa}{suffix}");
        }
        return decimal(nanos, false);
    }
    decimal(nanos, format == Format::DecimalExponent)
}

fn decimal(nanos: i128, exponent_form: bool) -> String {
    if nanos == 0 {
        return "0".to_string();
    }
    // Exponents of 10, in steps of 3, from nano (-9) to exa (18).
    let mut best = -9;
    for exp in (-6..=18).step_by(3) {
        let Some(divisor) = pow10(exp + 9) else { break };
        if nanos % divisor == 0 {
            best = exp;
        } else {
            break;
        }
    }
    let divisor = pow10(best + 9).unwrap_or(1);
    let mantissa = nanos / divisor;
    if exponent_form {
        if best == 0 {
            return format!("{mantissa}");
        }
        return format!("{mantissa}e{best}");
    }
    let suffix = match best {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    };
    format!("{mantissa}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(s: &str) -> i128 {
        Value::parse(s).unwrap().amount.nanos()
    }

    #[test]
    fn parses_every_suffix_family() {
        assert_eq!(units("1"), NANO);
        assert_eq!(units("1Gi"), (1 << 30) * NANO);
        assert_eq!(units("1.5Ki"), 1536 * NANO);
        assert_eq!(units("500m"), NANO / 2);
        assert_eq!(units("2k"), 2000 * NANO);
        assert_eq!(units("1e3"), 1000 * NANO);
        assert_eq!(units("1E-3"), NANO / 1000);
        assert_eq!(units("-2"), -2 * NANO);
        assert_eq!(units("+.5"), NANO / 2);
        assert_eq!(units("7."), 7 * NANO);
        assert_eq!(units("1n"), 1);
        assert_eq!(units("80Gi"), 80 * (1 << 30) * NANO);
    }

    #[test]
    fn rounds_below_nano_up() {
        // Upstream: non-zero values round up to the smallest representable value.
        assert_eq!(units("0.1n"), 1);
        assert_eq!(units("1.0000000001"), NANO + 1);
        assert_eq!(units("-0.1n"), -1);
    }

    #[test]
    fn rejects_malformed_strings() {
        for bad in ["", "Gi", "1.2.3", "1Xi", "1e", "abc", "1 Gi", "."] {
            assert!(Value::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn value_rounds_away_from_zero() {
        assert_eq!(Value::parse("500m").unwrap().amount.ceil_units(), 1);
        assert_eq!(Value::parse("2").unwrap().amount.ceil_units(), 2);
        assert_eq!(Value::parse("-500m").unwrap().amount.ceil_units(), -1);
    }

    #[test]
    fn canonical_forms_match_the_api_server() {
        let c = |s: &str| Value::parse(s).unwrap().canonical();
        assert_eq!(c("1Gi"), "1Gi");
        assert_eq!(c("1024Mi"), "1Gi");
        assert_eq!(c("0.5Gi"), "512Mi");
        assert_eq!(c("1536"), "1536");
        assert_eq!(c("1000"), "1k");
        assert_eq!(c("1500"), "1500");
        assert_eq!(c("0.5"), "500m");
        assert_eq!(c("0"), "0");
        assert_eq!(c("1e3"), "1e3");
        assert_eq!(c("100Ki"), "100Ki");
        // Binary values below 1024 are written in decimal.
        assert_eq!(Value::binary_units(2).canonical(), "2");
        assert_eq!(Value::binary_units(1000).canonical(), "1k");
        assert_eq!(Value::binary_units(3072).canonical(), "3Ki");
    }
}
