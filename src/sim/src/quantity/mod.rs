//! Kubernetes resource quantities, read exactly as apimachinery's
//! `resource.Quantity` reads them: one scanner and suffix table ([`scan`]),
//! one exact value, one canonical form.
//!
//! Upstream's rules, all kept here:
//! - the scanner accepts `[+-]` digits `[.digits]` suffix, where an empty
//!   number reads as zero (`"."`, `"-"`, `"Mi"`); no white space, except that
//!   a quantity read from an object (JSON/YAML) is trimmed first, as
//!   `UnmarshalJSON` trims it ([`Value::from_quantity`], [`nano_value`]);
//! - the value is exact, then any non-zero value is rounded away from zero
//!   to a whole number of nano units (`"0.9n"` is `1n`, `"0.0000000001k"` is
//!   exactly `100n`);
//! - a binary-suffixed value is capped at 2^63-1 in magnitude (decimal ones
//!   are not), and one strictly between 0 and 1 is written in decimal;
//! - `Value()` and `MilliValue()` round away from zero ([`value`],
//!   [`milli_value`], [`Amount::ceil_units`]).
//!
//! Values are held as an `i128` count of nano units ([`Amount`]): every
//! quantity an API server stores below about 10^29 units, sums of many
//! included, is exact. Larger decimal quantities (which upstream keeps in a
//! big decimal) are refused with [`ErrorKind::OutOfRange`]. CEL's quantity
//! library, which must also order and add such values, keeps its own value
//! type over the same scanner and the exact decimal arithmetic (`decimal.rs`).

mod amount;
pub(crate) mod decimal;
pub mod scan;

pub use amount::{Amount, Value};
pub use scan::{Scanned, Suffix, interpret_suffix, scan};

use decimal::Decimal;

/// Nano units in one unit.
pub const NANO: i128 = 1_000_000_000;

/// Nano units in one milli-unit (for [`Amount::ceil_scaled`]).
pub const NANO_PER_MILLI: i128 = 1_000_000;

/// Upstream caps binary-suffixed quantities at 2^63-1 units.
pub(crate) const MAX_BINARY_NANOS: i128 = i64::MAX as i128 * NANO;

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

/// What was wrong with a quantity string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Upstream's `ErrFormatWrong`: not `[+-]number suffix`.
    FormatWrong,
    /// Upstream's `ErrNumeric`.
    Numeric,
    /// Upstream's `ErrSuffix`: an unknown suffix.
    Suffix,
    /// A valid quantity too large to hold exactly in nano units (about
    /// 10^29 units); upstream keeps it in a big decimal.
    OutOfRange,
}

impl ErrorKind {
    /// Upstream's message (the scheduler's and the API server's words).
    #[must_use]
    pub fn message(self) -> &'static str {
        match self {
            ErrorKind::FormatWrong => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            ErrorKind::Numeric => "unable to parse numeric part of quantity",
            ErrorKind::Suffix => "unable to parse quantity's suffix",
            ErrorKind::OutOfRange => "quantity too large to represent exactly",
        }
    }
}

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {}", kind.message())]
pub struct QuantityError {
    /// The string as given.
    pub input: String,
    /// What was wrong.
    pub kind: ErrorKind,
}

impl QuantityError {
    fn new(input: &str, kind: ErrorKind) -> Self {
        QuantityError {
            input: input.to_string(),
            kind,
        }
    }
}

/// Scans `s` and interprets its suffix, as `ParseQuantity` does first.
///
/// # Errors
/// An empty string, a malformed one or an unknown suffix.
pub fn scan_with_suffix(s: &str) -> Result<(Scanned<'_>, Suffix), ErrorKind> {
    if s.is_empty() {
        return Err(ErrorKind::FormatWrong);
    }
    let scanned = scan(s)?;
    let suffix = interpret_suffix(scanned.suffix).ok_or(ErrorKind::Suffix)?;
    Ok((scanned, suffix))
}

/// Upstream's big-decimal path: the exact value of the scanned digits times
/// the suffix, rounded away from zero to nano units, binary values capped at
/// 2^63-1; returns the value and the format it keeps (a binary value
/// strictly between 0 and 1 becomes decimal).
pub(crate) fn exact_value(scanned: &Scanned<'_>, suffix: Suffix) -> (Decimal, Format) {
    let digits: Vec<u8> = scanned
        .num
        .bytes()
        .chain(scanned.denom.bytes())
        .map(|b| b - b'0')
        .collect();
    let denom_len = i64::try_from(scanned.denom.len()).unwrap_or(i64::MAX);
    let mut amount = if suffix.base == 10 {
        Decimal::normalized(
            false,
            digits,
            i64::from(suffix.exponent).saturating_sub(denom_len),
        )
    } else {
        // Binary exponents come from the table: 10 to 60.
        let power = u32::try_from(suffix.exponent).unwrap_or(0);
        Decimal::normalized(false, digits, denom_len.saturating_neg()).mul_pow2(power)
    };
    amount = amount.round_up_to_nano();
    let mut format = suffix.format;
    if format == Format::BinarySi {
        let max = Decimal::from_i64(i64::MAX, 0);
        if amount > max {
            amount = max;
        }
        if !amount.is_zero() && amount < Decimal::from_i64(1, 0) {
            format = Format::DecimalSi;
        }
    }
    if !scanned.positive {
        amount = amount.negated();
    }
    (amount, format)
}

/// Parses `text` strictly as `ParseQuantity` does (no white space).
///
/// # Errors
/// What upstream refuses, and values beyond [`Amount`]'s range.
pub fn parse(text: &str) -> Result<Value, QuantityError> {
    let fail = |kind| QuantityError::new(text, kind);
    let (scanned, suffix) = scan_with_suffix(text).map_err(fail)?;
    if let Some(value) = amount::fast_value(&scanned, suffix) {
        return Ok(value);
    }
    let (exact, format) = exact_value(&scanned, suffix);
    let nanos = exact
        .to_nanos()
        .ok_or_else(|| fail(ErrorKind::OutOfRange))?;
    Ok(Value {
        amount: Amount::from_nanos(nanos),
        format,
    })
}

/// A quantity as an object field holds it (surrounding white space trimmed,
/// as `UnmarshalJSON` does), in nano units, exactly.
///
/// # Errors
/// As [`parse`].
pub fn nano_value(input: &str) -> Result<i128, QuantityError> {
    parse(input.trim())
        .map(|v| v.amount.nanos())
        .map_err(|e| QuantityError::new(input, e.kind))
}

/// Whole units, rounded away from zero (upstream `Value()`), saturating at
/// the `i64` range.
///
/// # Errors
/// As [`nano_value`].
pub fn value(input: &str) -> Result<i64, QuantityError> {
    Ok(saturate(
        Amount::from_nanos(nano_value(input)?).ceil_units(),
    ))
}

/// Milli-units, rounded away from zero (upstream `MilliValue()`),
/// saturating at the `i64` range.
///
/// # Errors
/// As [`nano_value`].
pub fn milli_value(input: &str) -> Result<i64, QuantityError> {
    Ok(saturate(
        Amount::from_nanos(nano_value(input)?).ceil_scaled(NANO_PER_MILLI),
    ))
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v > 0 { i64::MAX } else { i64::MIN })
}

#[cfg(test)]
mod tests;
