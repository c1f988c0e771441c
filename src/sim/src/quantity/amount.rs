//! Quantities as exact fixed-point numbers: an `i128` count of nano units,
//! the format they keep, and the canonical string the API server writes.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::scan::{Scanned, Suffix, binary_suffix, decimal_suffix};
use super::{Format, MAX_BINARY_NANOS, NANO, QuantityError};

/// A quantity in nano units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(i128);

/// A parsed quantity with the format it was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Value {
    /// The exact amount.
    pub amount: Amount,
    /// The format used when it is written out.
    pub format: Format,
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
        self.ceil_scaled(NANO)
    }

    /// The value in units of `unit` nanos (`1_000_000` for milli), rounded
    /// away from zero as upstream's `ScaledValue` does.
    #[must_use]
    pub fn ceil_scaled(self, unit: i128) -> i128 {
        let whole = self.0 / unit;
        if self.0 % unit == 0 {
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
    /// Parses a quantity string strictly, as `ParseQuantity` does.
    ///
    /// # Errors
    /// What upstream refuses, and values beyond [`Amount`]'s range.
    pub fn parse(text: &str) -> Result<Value, QuantityError> {
        super::parse(text)
    }

    /// Parses the string inside a `Quantity` as `UnmarshalJSON` does
    /// (surrounding white space trimmed).
    ///
    /// # Errors
    /// As [`Value::parse`].
    pub fn from_quantity(q: &Quantity) -> Result<Value, QuantityError> {
        super::parse(q.0.trim()).map_err(|e| QuantityError {
            input: q.0.clone(),
            kind: e.kind,
        })
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

fn pow10(exp: i64) -> Option<i128> {
    10i128.checked_pow(u32::try_from(exp).ok()?)
}

/// The common case without allocating: the digits fit an `i128` and so does
/// every intermediate product, so the nano value is computed exactly with
/// integers. `None` sends the caller to the exact decimal path (same rules).
pub(super) fn fast_value(scanned: &Scanned<'_>, suffix: Suffix) -> Option<Value> {
    let digits = scanned.num.bytes().chain(scanned.denom.bytes());
    let significant = digits.clone().skip_while(|d| *d == b'0');
    if significant.clone().count() > 36 {
        return None;
    }
    let mantissa = significant.fold(0i128, |acc, d| acc * 10 + i128::from(d - b'0'));
    let denom_len = i64::try_from(scanned.denom.len()).ok()?;
    // value = mantissa × base^exponent / 10^denom_len; in nano units that is
    // numerator / denominator, rounded away from zero.
    let (mut numerator, mut denominator) = (mantissa, 1i128);
    let mut shift = 9 - denom_len; // the power of ten still to apply
    if suffix.base == 2 {
        numerator =
            numerator.checked_mul(1i128.checked_shl(u32::try_from(suffix.exponent).ok()?)?)?;
    } else {
        shift = shift.checked_add(i64::from(suffix.exponent))?;
    }
    if shift >= 0 {
        numerator = numerator.checked_mul(pow10(shift)?)?;
    } else if shift < -38 {
        // The divisor exceeds any 36-digit mantissa: a non-zero value is
        // below one nano unit and rounds up to it.
        numerator = i128::from(numerator != 0);
    } else {
        denominator = pow10(-shift)?;
    }
    let mut nanos = numerator / denominator;
    if numerator % denominator != 0 {
        nanos += 1;
    }
    let mut format = suffix.format;
    if format == Format::BinarySi {
        nanos = nanos.min(MAX_BINARY_NANOS);
        if nanos > 0 && nanos < NANO {
            format = Format::DecimalSi;
        }
    }
    if !scanned.positive {
        nanos = -nanos;
    }
    Some(Value {
        amount: Amount(nanos),
        format,
    })
}

/// Upstream's `CanonicalizeBytes`: binary values that are whole and at least
/// 1024 in magnitude keep a binary suffix; everything else becomes decimal
/// (or exponent form) with the exponent, a multiple of three, as large as
/// keeps the mantissa whole.
fn canonical(amount: Amount, format: Format) -> String {
    let nanos = amount.0;
    if nanos == 0 {
        return "0".to_string();
    }
    if format == Format::BinarySi {
        let units = nanos / NANO;
        if nanos % NANO == 0 && !(-1024 < units && units < 1024) {
            let mut mantissa = units;
            let mut exponent = 0;
            while exponent < 60 && mantissa % 1024 == 0 {
                mantissa /= 1024;
                exponent += 10;
            }
            let suffix = binary_suffix(exponent).unwrap_or_default();
            return format!("{mantissa}{suffix}");
        }
        return decimal(nanos, Format::DecimalSi);
    }
    decimal(nanos, format)
}

/// `mantissa` and suffix with the exponent of ten a multiple of three, as
/// large as keeps the mantissa whole.
fn decimal(nanos: i128, format: Format) -> String {
    let mut mantissa = nanos;
    let mut exponent: i32 = -9;
    while mantissa % 1000 == 0 {
        mantissa /= 1000;
        exponent += 3;
    }
    if format == Format::DecimalExponent {
        return if exponent == 0 {
            format!("{mantissa}")
        } else {
            format!("{mantissa}e{exponent}")
        };
    }
    match decimal_suffix(exponent) {
        Some(suffix) => format!("{mantissa}{suffix}"),
        // Beyond `E` (10^18) there is no SI suffix: the exponent form keeps
        // the value, as upstream writes it since kubernetes#140459 (before,
        // the suffix was dropped and 10^21 was written `1`).
        None => format!("{mantissa}e{exponent}"),
    }
}
