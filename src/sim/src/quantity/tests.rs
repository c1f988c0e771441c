//! Expectations from apimachinery's `quantity_test.go` tables and from the
//! rules in `quantity.go` (see the module documentation), never from our
//! own output.

use super::*;

fn nanos(s: &str) -> i128 {
    parse(s)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .amount
        .nanos()
}

fn format(s: &str) -> Format {
    parse(s).unwrap_or_else(|e| panic!("{s}: {e}")).format
}

fn canonical(s: &str) -> String {
    parse(s).unwrap_or_else(|e| panic!("{s}: {e}")).canonical()
}

const KI: i128 = 1024;

/// `decQuantity(mantissa, scale, _)` of upstream's tables, in nano units.
fn dec(mantissa: i128, scale: i32) -> i128 {
    let shift = scale + 9;
    assert!(shift >= 0, "test helper takes scales from -9 up");
    mantissa * 10i128.pow(shift.unsigned_abs())
}

#[test]
fn the_quantity_the_three_old_parsers_disagreed_on() {
    // 0.0000000001k: scanned as num "0", denom "0000000001", suffix k;
    // upstream's int64 path holds 1 at scale 3-10 = -7, i.e. 10^-7 exactly
    // = 100n (the filters' parser rounded the fraction to 1n before
    // multiplying and said 1000n).
    assert_eq!(nanos("0.0000000001k"), 100);
    assert_eq!(canonical("0.0000000001k"), "100n");
    assert_eq!(nano_value("0.0000000001k"), Ok(100));
}

// apimachinery TestQuantityParse: value and format of each entry.
#[test]
fn upstream_parse_table() {
    let table: &[(&str, i128, Format)] = &[
        ("0", 0, Format::DecimalSi),
        ("0n", 0, Format::DecimalSi),
        ("0u", 0, Format::DecimalSi),
        ("0m", 0, Format::DecimalSi),
        ("0Ki", 0, Format::BinarySi),
        ("0k", 0, Format::DecimalSi),
        ("0Mi", 0, Format::BinarySi),
        ("0M", 0, Format::DecimalSi),
        ("0Gi", 0, Format::BinarySi),
        ("0G", 0, Format::DecimalSi),
        ("0Ti", 0, Format::BinarySi),
        ("0T", 0, Format::DecimalSi),
        ("1", dec(1, 0), Format::DecimalSi),
        ("1Ki", dec(KI, 0), Format::BinarySi),
        ("8Ki", dec(8 * KI, 0), Format::BinarySi),
        ("7Mi", dec(7 * KI.pow(2), 0), Format::BinarySi),
        ("6Gi", dec(6 * KI.pow(3), 0), Format::BinarySi),
        ("5Ti", dec(5 * KI.pow(4), 0), Format::BinarySi),
        ("4Pi", dec(4 * KI.pow(5), 0), Format::BinarySi),
        ("3Ei", dec(3 * KI.pow(6), 0), Format::BinarySi),
        ("10Ti", dec(10 * KI.pow(4), 0), Format::BinarySi),
        ("100Ti", dec(100 * KI.pow(4), 0), Format::BinarySi),
        ("5n", dec(5, -9), Format::DecimalSi),
        ("4u", dec(4, -6), Format::DecimalSi),
        ("3m", dec(3, -3), Format::DecimalSi),
        ("9", dec(9, 0), Format::DecimalSi),
        ("8k", dec(8, 3), Format::DecimalSi),
        ("50k", dec(5, 4), Format::DecimalSi),
        ("7M", dec(7, 6), Format::DecimalSi),
        ("6G", dec(6, 9), Format::DecimalSi),
        ("5T", dec(5, 12), Format::DecimalSi),
        ("40T", dec(4, 13), Format::DecimalSi),
        ("300T", dec(3, 14), Format::DecimalSi),
        ("2P", dec(2, 15), Format::DecimalSi),
        ("1E", dec(1, 18), Format::DecimalSi),
        ("1E-3", dec(1, -3), Format::DecimalExponent),
        ("1e3", dec(1, 3), Format::DecimalExponent),
        ("1E6", dec(1, 6), Format::DecimalExponent),
        ("1e9", dec(1, 9), Format::DecimalExponent),
        ("1E12", dec(1, 12), Format::DecimalExponent),
        ("1e15", dec(1, 15), Format::DecimalExponent),
        ("1E18", dec(1, 18), Format::DecimalExponent),
        ("1e14", dec(1, 14), Format::DecimalExponent),
        ("1e13", dec(1, 13), Format::DecimalExponent),
        ("100.035k", dec(100_035, 0), Format::DecimalSi),
        ("0.001", dec(1, -3), Format::DecimalSi),
        ("0.0005k", dec(5, -1), Format::DecimalSi),
        ("0.005", dec(5, -3), Format::DecimalSi),
        ("0.05", dec(5, -2), Format::DecimalSi),
        ("0.5", dec(5, -1), Format::DecimalSi),
        ("0.00050k", dec(5, -1), Format::DecimalSi),
        ("0.00500", dec(5, -3), Format::DecimalSi),
        ("0.05000", dec(5, -2), Format::DecimalSi),
        ("0.50000", dec(5, -1), Format::DecimalSi),
        ("0.5e0", dec(5, -1), Format::DecimalExponent),
        ("0.5e-1", dec(5, -2), Format::DecimalExponent),
        ("0.5e-2", dec(5, -3), Format::DecimalExponent),
        ("10.035M", dec(10_035, 3), Format::DecimalSi),
        ("1.2e3", dec(12, 2), Format::DecimalExponent),
        ("1.3E+6", dec(13, 5), Format::DecimalExponent),
        ("1.40e9", dec(14, 8), Format::DecimalExponent),
        ("1.53E12", dec(153, 10), Format::DecimalExponent),
        ("1.6e15", dec(16, 14), Format::DecimalExponent),
        ("1.7E18", dec(17, 17), Format::DecimalExponent),
        ("9.01", dec(901, -2), Format::DecimalSi),
        ("8.1k", dec(81, 2), Format::DecimalSi),
        ("7.123456M", dec(7_123_456, 0), Format::DecimalSi),
        ("6.987654321G", dec(6_987_654_321, 0), Format::DecimalSi),
        ("5.444T", dec(5444, 9), Format::DecimalSi),
        ("40.1T", dec(401, 11), Format::DecimalSi),
        ("300.2T", dec(3002, 11), Format::DecimalSi),
        ("2.5P", dec(25, 14), Format::DecimalSi),
        ("1.01E", dec(101, 16), Format::DecimalSi),
        // Things that saturate/round.
        ("3.001n", dec(4, -9), Format::DecimalSi),
        ("1.1E-9", dec(2, -9), Format::DecimalExponent),
        ("0.0000000001", dec(1, -9), Format::DecimalSi),
        ("0.0000000005", dec(1, -9), Format::DecimalSi),
        ("0.00000000050", dec(1, -9), Format::DecimalSi),
        ("0.5e-9", dec(1, -9), Format::DecimalExponent),
        ("0.9n", dec(1, -9), Format::DecimalSi),
        ("0.00000012345", dec(124, -9), Format::DecimalSi),
        ("0.00000012354", dec(124, -9), Format::DecimalSi),
        ("9Ei", dec(i128::from(i64::MAX), 0), Format::BinarySi),
        (
            "9223372036854775807Ki",
            dec(i128::from(i64::MAX), 0),
            Format::BinarySi,
        ),
        ("12E", dec(12, 18), Format::DecimalSi),
        // Fractional binary values.
        ("100.035Ki", dec(10_243_584, -2), Format::BinarySi),
        ("0.5Mi", dec(512 * KI, 0), Format::BinarySi),
        ("0.05Gi", dec(536_870_912, -1), Format::BinarySi),
        ("0.025Ti", dec(274_877_906_944, -1), Format::BinarySi),
        // Things written by trolls.
        ("0.000000000001Ki", dec(2, -9), Format::DecimalSi),
        (".001", dec(1, -3), Format::DecimalSi),
        (".0001k", dec(100, -3), Format::DecimalSi),
        ("1.", dec(1, 0), Format::DecimalSi),
        ("1.G", dec(1, 9), Format::DecimalSi),
    ];
    for &(input, expect, fmt) in table {
        assert_eq!(nanos(input), expect, "{input}");
        assert_eq!(format(input), fmt, "{input} format");
        // Upstream also runs every entry negated and with an explicit +.
        assert_eq!(nanos(&format!("-{input}")), -expect, "-{input}");
        assert_eq!(format(&format!("-{input}")), fmt, "-{input} format");
        assert_eq!(nanos(&format!("+{input}")), expect, "+{input}");
    }
}

// apimachinery TestQuantityParse's invalid list, and its "" check.
#[test]
fn upstream_invalid_table() {
    for bad in [
        "", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1",
        "1 ",
    ] {
        assert!(parse(bad).is_err(), "{bad:?} parsed");
    }
    assert_eq!(
        parse("1,3G").map_err(|e| e.kind),
        Err(ErrorKind::FormatWrong)
    );
    assert_eq!(parse("200K").map_err(|e| e.kind), Err(ErrorKind::Suffix));
    assert_eq!(parse("1e").map_err(|e| e.kind), Err(ErrorKind::Suffix));
}

#[test]
fn an_empty_number_reads_as_zero_as_upstream_scans_it() {
    for zero in [".", "-", "+", "-.", "Mi", "000", "-0"] {
        assert_eq!(nanos(zero), 0, "{zero}");
    }
}

// apimachinery TestQuantityParseEmit.
#[test]
fn upstream_parse_emit_table() {
    for (input, expect) in [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ] {
        assert_eq!(canonical(input), expect, "{input}");
        assert_eq!(canonical(&format!("-{input}")), format!("-{expect}"));
    }
}

#[test]
fn canonical_forms_match_the_api_server() {
    assert_eq!(canonical("0.5Gi"), "512Mi");
    assert_eq!(canonical("1536"), "1536");
    assert_eq!(canonical("1000"), "1k");
    assert_eq!(canonical("1500"), "1500");
    assert_eq!(canonical("1.5"), "1500m");
    assert_eq!(canonical("1.5Gi"), "1536Mi");
    assert_eq!(canonical("0"), "0");
    assert_eq!(canonical("0Gi"), "0");
    assert_eq!(canonical("1e3"), "1e3");
    assert_eq!(canonical("100Ki"), "100Ki");
    assert_eq!(canonical("1.5Ki"), "1536");
    // A binary value that is not whole is written in decimal.
    assert_eq!(canonical("1.0005Ki"), "1024512m");
    assert_eq!(Value::binary_units(2).canonical(), "2");
    assert_eq!(Value::binary_units(1000).canonical(), "1k");
    assert_eq!(Value::binary_units(3072).canonical(), "3Ki");
    // No SI suffix beyond E: the exponent form (kubernetes#140459).
    assert_eq!(canonical("100E"), "100E");
    assert_eq!(canonical("1000000000000000000000"), "1e21");
    assert_eq!(canonical("5000E"), "5e21");
}

#[test]
fn objects_are_trimmed_as_unmarshal_json_does() {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let q = Quantity(" 1Gi ".into());
    assert_eq!(
        Value::from_quantity(&q).map(|v| v.amount.nanos()),
        Ok(dec(KI.pow(3), 0))
    );
    assert_eq!(nano_value(" 2 "), Ok(dec(2, 0)));
    assert!(parse(" 2").is_err(), "ParseQuantity itself does not trim");
}

// Value() and MilliValue() round away from zero (apimachinery
// TestQuantityRoundUp / negativeScaleInt64).
#[test]
fn value_and_milli_value_round_away_from_zero() {
    assert_eq!(milli_value("500m"), Ok(500));
    assert_eq!(milli_value("1.5"), Ok(1500));
    assert_eq!(value("1Gi"), Ok(1 << 30));
    assert_eq!(value("1.5Gi"), Ok(3 << 29));
    assert_eq!(value("100m"), Ok(1));
    assert_eq!(value("-100m"), Ok(-1));
    assert_eq!(milli_value("1n"), Ok(1));
    assert_eq!(milli_value("-1n"), Ok(-1));
    assert_eq!(value("-1.5"), Ok(-2));
    assert_eq!(value("128974848"), Ok(128_974_848));
    assert_eq!(value("129M"), Ok(129_000_000));
    assert_eq!(value("1e25"), Ok(i64::MAX), "saturates");
    assert_eq!(milli_value("-1e20"), Ok(i64::MIN), "saturates");
}

#[test]
fn huge_values_are_refused_not_wrapped() {
    assert_eq!(
        parse("1e40").map_err(|e| e.kind),
        Err(ErrorKind::OutOfRange)
    );
    assert_eq!(
        parse("99999999999999999999999999999999999999E").map_err(|e| e.kind),
        Err(ErrorKind::OutOfRange)
    );
    // Binary values are capped before they could overflow.
    assert_eq!(
        nanos("99999999999999999999999999999999999999Ei"),
        dec(i128::from(i64::MAX), 0)
    );
    // Tiny values round up to one nano unit whatever their exponent.
    assert_eq!(nanos("1e-2000000000"), 1);
    assert_eq!(nanos("-1e-40"), -1);
}

/// An independent oracle for decimal-suffixed strings: the exact rational
/// `digits × 10^exp / 10^frac` in nano units, rounded away from zero.
fn oracle_nanos(negative: bool, int: u64, frac: &str, exp: i32) -> i128 {
    let frac_len = i32::try_from(frac.len()).unwrap_or(0);
    let digits: i128 = format!("{int}{frac}").parse().unwrap_or(0);
    let shift = exp + 9 - frac_len;
    let magnitude = if shift >= 0 {
        digits * 10i128.pow(shift.unsigned_abs())
    } else {
        let d = 10i128.pow(shift.unsigned_abs());
        digits / d + i128::from(digits % d != 0)
    };
    if negative { -magnitude } else { magnitude }
}

proptest::proptest! {
    #[test]
    fn never_panics(s in "\\PC{0,24}") {
        let _ = parse(&s);
        let _ = nano_value(&s);
    }

    #[test]
    fn decimal_strings_round_up_to_the_nano_exactly(
        negative in proptest::bool::ANY,
        int in 0u64..1_000_000_000_000,
        frac in "[0-9]{0,14}",
        suffix in proptest::sample::select(vec![
            ("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9),
            ("e-12", -12), ("e-1", -1), ("E2", 2), ("e+5", 5),
        ]),
    ) {
        let text = format!(
            "{}{int}{}{}{}",
            if negative { "-" } else { "" },
            if frac.is_empty() { "" } else { "." },
            frac,
            suffix.0
        );
        let expect = oracle_nanos(negative, int, &frac, suffix.1);
        proptest::prop_assert_eq!(nanos(&text), expect, "{}", text);
        // Value() / MilliValue(): ceil away from zero of the same amount.
        // Saturating at the i64 range, as our accessors document.
        let ceil = |unit: i128| {
            let whole = expect / unit;
            let rounded = if expect % unit == 0 { whole } else if expect > 0 { whole + 1 } else { whole - 1 };
            rounded.clamp(i128::from(i64::MIN), i128::from(i64::MAX))
        };
        proptest::prop_assert_eq!(i128::from(value(&text).unwrap_or(0)), ceil(NANO));
        proptest::prop_assert_eq!(i128::from(milli_value(&text).unwrap_or(0)), ceil(1_000_000));
    }

    #[test]
    fn the_integer_path_agrees_with_the_exact_decimal_path(
        negative in proptest::bool::ANY,
        int in "[0-9]{1,20}",
        frac in "[0-9]{0,20}",
        suffix in proptest::sample::select(vec![
            "n", "u", "m", "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "e-15", "e7", "E-3",
        ]),
    ) {
        let text = format!(
            "{}{int}{}{frac}{suffix}",
            if negative { "-" } else { "" },
            if frac.is_empty() { "" } else { "." },
        );
        let Ok((scanned, sfx)) = scan_with_suffix(&text) else {
            return Err(proptest::test_runner::TestCaseError::fail(format!("{text} scans")));
        };
        let (exact, exact_format) = exact_value(&scanned, sfx);
        if let Some(fast) = amount::fast_value(&scanned, sfx) {
            proptest::prop_assert_eq!(Some(fast.amount.nanos()), exact.to_nanos(), "{}", text);
            proptest::prop_assert_eq!(fast.format, exact_format, "{}", text);
        }
    }

    #[test]
    fn canonical_strings_read_back_to_the_same_value(
        n in -1_000_000_000_000_000i128..1_000_000_000_000_000,
        fmt in proptest::sample::select(vec![
            Format::BinarySi, Format::DecimalSi, Format::DecimalExponent,
        ]),
    ) {
        let v = Value { amount: Amount::from_nanos(n), format: fmt };
        let text = v.canonical();
        proptest::prop_assert_eq!(nanos(&text), n, "{}", text);
    }

    #[test]
    fn integers_round_trip(n in 0i64..1_000_000_000_000) {
        proptest::prop_assert_eq!(value(&n.to_string()), Ok(n));
        proptest::prop_assert_eq!(milli_value(&format!("{n}m")), Ok(n));
    }
}
