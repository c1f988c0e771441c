//! Exact Kubernetes quantity arithmetic for the hot paths (resource fit,
//! waste): parse once into integers, never into floats.
//!
//! Upstream's `Value()` and `MilliValue()` round up to the next integer; so do
//! [`value`] and [`milli_value`].

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {message}")]
pub struct QuantityError {
    /// The string.
    pub input: String,
    /// What was wrong.
    pub message: String,
}

/// The quantity in nano-units (10⁻⁹), exactly.
///
/// # Errors
/// Not a Kubernetes quantity, or too large.
pub fn nano_value(input: &str) -> Result<i128, QuantityError> {
    let error = |message: &str| QuantityError {
        input: input.to_string(),
        message: message.to_string(),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(error("empty"));
    }
    let (sign, rest) = match s.as_bytes()[0] {
        b'-' => (-1i128, &s[1..]),
        b'+' => (1, &s[1..]),
        _ => (1, s),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(error("expected a number"));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // Scale: value × 10^9 with the fraction's digits (beyond 9 digits are
    // rounded up, as upstream rounds to its internal precision).
    let mut nanos: i128 = 0;
    for c in int_part.bytes() {
        nanos = nanos
            .checked_mul(10)
            .and_then(|n| n.checked_add(i128::from(c - b'0')))
            .ok_or_else(|| error("too large"))?;
    }
    nanos = nanos
        .checked_mul(1_000_000_000)
        .ok_or_else(|| error("too large"))?;
    let mut scale = 100_000_000i128;
    let mut truncated = false;
    for c in frac_part.bytes() {
        if scale == 0 {
            truncated |= c != b'0';
            continue;
        }
        nanos += i128::from(c - b'0') * scale;
        scale /= 10;
    }
    if truncated {
        nanos += 1;
    }
    let multiply = |n: i128, m: i128| n.checked_mul(m).ok_or_else(|| error("too large"));
    let divide_up = |n: i128, d: i128| (n + d - 1) / d;
    let nanos = match suffix {
        "" => nanos,
        "n" => divide_up(nanos, 1_000_000_000),
        "u" => divide_up(nanos, 1_000_000),
        "m" => divide_up(nanos, 1_000),
        "k" => multiply(nanos, 1_000)?,
        "M" => multiply(nanos, 1_000_000)?,
        "G" => multiply(nanos, 1_000_000_000)?,
        "T" => multiply(nanos, 1_000_000_000_000)?,
        "P" => multiply(nanos, 1_000_000_000_000_000)?,
        "E" => multiply(nanos, 1_000_000_000_000_000_000)?,
        "Ki" => multiply(nanos, 1 << 10)?,
        "Mi" => multiply(nanos, 1 << 20)?,
        "Gi" => multiply(nanos, 1 << 30)?,
        "Ti" => multiply(nanos, 1 << 40)?,
        "Pi" => multiply(nanos, 1 << 50)?,
        "Ei" => multiply(nanos, 1 << 60)?,
        exp if exp.starts_with(['e', 'E']) => {
            let power: i32 = exp[1..].parse().map_err(|_| error("bad exponent"))?;
            if power >= 0 {
                let factor = 10i128
                    .checked_pow(power.unsigned_abs())
                    .ok_or_else(|| error("too large"))?;
                multiply(nanos, factor)?
            } else {
                let factor = 10i128
                    .checked_pow(power.unsigned_abs())
                    .ok_or_else(|| error("too small"))?;
                divide_up(nanos, factor)
            }
        }
        other => return Err(error(&format!("unknown suffix {other:?}"))),
    };
    Ok(sign * nanos)
}

fn round_up(nanos: i128, unit: i128) -> i128 {
    if nanos >= 0 {
        (nanos + unit - 1) / unit
    } else {
        nanos / unit
    }
}

/// The quantity in whole units, rounded up (upstream `Value()`), saturating.
///
/// # Errors
/// As [`nano_value`].
pub fn value(input: &str) -> Result<i64, QuantityError> {
    let v = round_up(nano_value(input)?, 1_000_000_000);
    Ok(i64::try_from(v).unwrap_or(if v > 0 { i64::MAX } else { i64::MIN }))
}

/// The quantity in milli-units, rounded up (upstream `MilliValue()`), saturating.
///
/// # Errors
/// As [`nano_value`].
pub fn milli_value(input: &str) -> Result<i64, QuantityError> {
    let v = round_up(nano_value(input)?, 1_000_000);
    Ok(i64::try_from(v).unwrap_or(if v > 0 { i64::MAX } else { i64::MIN }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_and_rounding_follow_upstream() {
        assert_eq!(milli_value("500m"), Ok(500));
        assert_eq!(milli_value("1.5"), Ok(1500));
        assert_eq!(milli_value("2"), Ok(2000));
        assert_eq!(value("1Gi"), Ok(1 << 30));
        assert_eq!(value("1.5Gi"), Ok(3 << 29));
        assert_eq!(value("1k"), Ok(1000));
        assert_eq!(value("1e3"), Ok(1000));
        assert_eq!(value("100m"), Ok(1), "Value() rounds up");
        assert_eq!(milli_value("1n"), Ok(1), "MilliValue() rounds up");
        assert_eq!(value("-1"), Ok(-1));
        assert_eq!(value("128974848"), Ok(128_974_848));
        assert_eq!(value("129M"), Ok(129_000_000));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            "",
            "abc",
            "1.2.3",
            "1Qi",
            ".",
            "1e",
            "-",
            "99999999999999999999999999999999999999Ei",
        ] {
            assert!(nano_value(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = nano_value(&s);
        }

        #[test]
        fn integers_round_trip(n in 0i64..1_000_000_000_000) {
            proptest::prop_assert_eq!(value(&n.to_string()), Ok(n));
            proptest::prop_assert_eq!(milli_value(&format!("{n}m")), Ok(n));
        }
    }
}
