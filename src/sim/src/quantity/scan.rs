//! Reading a quantity string the way apimachinery does: the scanner
//! (`parseQuantityString`) and the suffix table (`suffix.go`), both ways.

use super::{ErrorKind, Format};

/// The pieces of a quantity string, as upstream's scanner splits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned<'a> {
    /// No leading `-`.
    pub positive: bool,
    /// Integer digits without leading zeros; `"0"` when there are none.
    pub num: &'a str,
    /// Fraction digits, possibly empty.
    pub denom: &'a str,
    /// Everything after the number: suffix letters, then an optional signed
    /// integer (an exponent's digits).
    pub suffix: &'a str,
}

/// Upstream's `parseQuantityString`: sign, integer digits (leading zeros
/// dropped), optional fraction, then a suffix made of suffix letters with an
/// optional signed integer tail.
///
/// Like upstream it accepts an empty number (`"."`, `"-"`, `"Mi"` all read
/// as zero) and `"1."`; white space anywhere is an error.
///
/// # Errors
/// [`ErrorKind::FormatWrong`] when something follows the suffix's digits.
pub fn scan(s: &str) -> Result<Scanned<'_>, ErrorKind> {
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
        return Err(ErrorKind::FormatWrong);
    }
    Ok(Scanned {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// What a suffix means: the value is multiplied by `base^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suffix {
    /// 10 or 2.
    pub base: u32,
    /// The power of `base`.
    pub exponent: i32,
    /// The format a quantity written with it keeps.
    pub format: Format,
}

/// The decimal SI suffixes by exponent of ten.
const DECIMAL: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// The binary SI suffixes by exponent of two.
const BINARY: [(&str, i32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// Upstream's `quantitySuffixer.interpret`: a decimal SI suffix, a binary SI
/// suffix, or `e`/`E` followed by a (signed) integer exponent.
#[must_use]
pub fn interpret_suffix(suffix: &str) -> Option<Suffix> {
    if let Some((_, exponent)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        return Some(Suffix {
            base: 10,
            exponent: *exponent,
            format: Format::DecimalSi,
        });
    }
    if let Some((_, exponent)) = BINARY.iter().find(|(s, _)| *s == suffix) {
        return Some(Suffix {
            base: 2,
            exponent: *exponent,
            format: Format::BinarySi,
        });
    }
    let rest = suffix.strip_prefix(['e', 'E'])?;
    // Go's ParseInt accepts a leading sign; upstream then truncates to int32.
    let parsed: i64 = rest.parse().ok()?;
    #[allow(clippy::cast_possible_truncation)] // mirrors upstream's int32(parsed)
    let exponent = parsed as i32;
    Some(Suffix {
        base: 10,
        exponent,
        format: Format::DecimalExponent,
    })
}

/// The decimal SI suffix for `10^exponent`, when there is one.
#[must_use]
pub fn decimal_suffix(exponent: i32) -> Option<&'static str> {
    DECIMAL
        .iter()
        .find(|(_, e)| *e == exponent)
        .map(|(s, _)| *s)
}

/// The binary SI suffix for `2^exponent` (`""` for 0), when there is one.
#[must_use]
pub fn binary_suffix(exponent: i32) -> Option<&'static str> {
    if exponent == 0 {
        return Some("");
    }
    BINARY.iter().find(|(_, e)| *e == exponent).map(|(s, _)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_upstream_scanner_does() {
        let split = |s| {
            let got = scan(s).unwrap_or_else(|e| panic!("{s}: {e:?}"));
            (got.positive, got.num, got.denom, got.suffix)
        };
        // apimachinery's TestParseQuantityString table.
        assert_eq!(split("0.025Ti"), (true, "0", "025", "Ti"));
        assert_eq!(split("1.025Ti"), (true, "1", "025", "Ti"));
        assert_eq!(split("-1.025Ti"), (false, "1", "025", "Ti"));
        assert_eq!(split("."), (true, "0", "", ""));
        assert_eq!(split("-."), (false, "0", "", ""));
        assert_eq!(split("1E-3"), (true, "1", "", "E-3"));
        // More of the scanner's rules.
        assert_eq!(split("0.1"), (true, "0", "1", ""));
        assert_eq!(split("0.1M"), (true, "0", "1", "M"));
        assert_eq!(split("-1"), (false, "1", "", ""));
        assert_eq!(split("+1.50E3"), (true, "1", "50", "E3"));
        assert_eq!(split("0010.0010Mi"), (true, "10", "0010", "Mi"));
        assert_eq!(split("1.G"), (true, "1", "", "G"));
        assert_eq!(split("000"), (true, "0", "", ""));
        assert_eq!(split("-"), (false, "0", "", ""));
        assert_eq!(split("1e-3"), (true, "1", "", "e-3"));
        assert_eq!(scan("1 "), Err(ErrorKind::FormatWrong));
        assert_eq!(scan(" 1"), Err(ErrorKind::FormatWrong));
        assert_eq!(scan("1Qi"), Err(ErrorKind::FormatWrong));
        assert_eq!(scan("1.1.M"), Err(ErrorKind::FormatWrong));
    }

    #[test]
    fn suffix_table_reads_and_writes_the_same_suffixes() {
        for (s, e) in DECIMAL {
            let got = interpret_suffix(s).expect("decimal");
            assert_eq!(
                (got.base, got.exponent, got.format),
                (10, e, Format::DecimalSi)
            );
            assert_eq!(decimal_suffix(e), Some(s));
        }
        for (s, e) in BINARY {
            let got = interpret_suffix(s).expect("binary");
            assert_eq!(
                (got.base, got.exponent, got.format),
                (2, e, Format::BinarySi)
            );
            assert_eq!(binary_suffix(e), Some(s));
        }
        let exp = interpret_suffix("E+6").expect("exponent");
        assert_eq!((exp.exponent, exp.format), (6, Format::DecimalExponent));
        assert_eq!(interpret_suffix("e-3").map(|s| s.exponent), Some(-3));
        // Only the exact spelling: no case fixing, no lone `e`.
        for bad in ["K", "ki", "mi", "KI", "e", "e+", "i", "am", "e3.5"] {
            assert_eq!(interpret_suffix(bad), None, "{bad}");
        }
        // int32(parsed) wraps, as upstream's conversion does.
        assert_eq!(interpret_suffix("e4294967297").map(|s| s.exponent), Some(1));
        assert_eq!(decimal_suffix(21), None);
        assert_eq!(binary_suffix(70), None);
    }
}
