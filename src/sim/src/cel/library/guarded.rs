//! Functions wrapped or replaced so that an evaluation stays within the
//! cost budget and fails as cel-go does (sizes charged before allocating,
//! overflow and wrong types as errors).

use super::*;

/// kube-cel functions that can build values far larger than their inputs;
/// each one charges the output size before kube-cel allocates it.
pub(super) fn register_guarded(ctx: &mut Context<'_>) {
    ctx.add_function("replace", |ftx: &FunctionContext| -> ResolveResult {
        let (this, args) = call_parts(ftx)?;
        let (Some(Value::String(s)), [Value::String(from), Value::String(to), rest @ ..]) =
            (this.clone(), args.as_slice())
        else {
            return Err(no_overload());
        };
        let limit = match rest {
            [] => None,
            // A negative count means "all", as in Go's strings.Replace.
            [Value::Int(n)] => usize::try_from(*n).ok(),
            _ => return Err(no_overload()),
        };
        let occurrences = if from.is_empty() {
            s.chars().count() + 1
        } else {
            s.matches(from.as_str()).count()
        };
        let replaced = limit.map_or(occurrences, |n| n.min(occurrences));
        let grown = s
            .len()
            .saturating_add(replaced.saturating_mul(to.len().saturating_sub(from.len())));
        charge(u64::try_from(grown).unwrap_or(u64::MAX))?;
        let mut vars = vec![
            ("t", Value::String(s)),
            ("a", Value::String(from.clone())),
            ("b", Value::String(to.clone())),
        ];
        match limit {
            Some(n) => {
                vars.push(("n", Value::Int(i64::try_from(n).unwrap_or(i64::MAX))));
                delegate(PROGRAMS.replace_n.as_ref(), vars)
            }
            None => delegate(PROGRAMS.replace.as_ref(), vars),
        }
    });
    ctx.add_function("join", |ftx: &FunctionContext| -> ResolveResult {
        let (this, args) = call_parts(ftx)?;
        let Some(Value::List(items)) = this else {
            return Err(no_overload());
        };
        let sep_len = match args.as_slice() {
            [] => 0,
            [Value::String(sep)] => sep.len(),
            _ => return Err(no_overload()),
        };
        let total = items
            .iter()
            .map(size_of)
            .fold(0u64, u64::saturating_add)
            .saturating_add(u64::try_from(sep_len.saturating_mul(items.len())).unwrap_or(u64::MAX));
        charge(total)?;
        match args.into_iter().next() {
            Some(sep) => delegate(
                PROGRAMS.join_sep.as_ref(),
                vec![("t", Value::List(items)), ("a", sep)],
            ),
            None => delegate(PROGRAMS.join.as_ref(), vec![("t", Value::List(items))]),
        }
    });
    ctx.add_function("lists.range", |ftx: &FunctionContext| -> ResolveResult {
        let (_, args) = call_parts(ftx)?;
        let [Value::Int(n)] = args.as_slice() else {
            return Err(no_overload());
        };
        charge(u64::try_from(*n).unwrap_or(0))?;
        delegate(PROGRAMS.range.as_ref(), vec![("n", Value::Int(*n))])
    });
    ctx.add_function("format", |ftx: &FunctionContext| -> ResolveResult {
        let (this, args) = call_parts(ftx)?;
        let (Some(Value::String(template)), [list]) = (this, args.as_slice()) else {
            return Err(no_overload());
        };
        // kube-cel honours `%.<n>f`; a huge precision would allocate that many digits.
        if let Some(precision) = largest_precision(&template) {
            charge(precision)?;
        }
        charge(
            u64::try_from(template.len())
                .unwrap_or(u64::MAX)
                .saturating_add(size_of(list)),
        )?;
        delegate(
            PROGRAMS.format.as_ref(),
            vec![("t", Value::String(template)), ("a", list.clone())],
        )
    });
}

/// The largest `%.<n>` precision in a format string, saturating.
pub(super) fn largest_precision(template: &str) -> Option<u64> {
    template
        .split("%.")
        .skip(1)
        .map(|rest| {
            rest.bytes()
                .take_while(u8::is_ascii_digit)
                .fold(0u64, |acc, d| {
                    acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                })
        })
        .max()
}

/// DRA's `<target>.includes(<arg>)`: list membership, or equality for a
/// scalar. Lists longer than upstream's per-device limit are an error once
/// the scan reaches that length, exactly as upstream's loop does.
pub(super) fn includes(ftx: &FunctionContext) -> ResolveResult {
    let (this, args) = call_parts(ftx)?;
    let (Some(target), [arg]) = (this, args.as_slice()) else {
        return Err(no_overload());
    };
    if let Value::List(items) = &target {
        for (i, item) in items.iter().enumerate() {
            if i >= INCLUDES_MAX_LIST {
                return Err(fail(
                    INCLUDES,
                    format!(
                        "'includes' function cannot be applied to lists longer than {INCLUDES_MAX_LIST} values"
                    ),
                ));
            }
            if item == arg {
                return Ok(Value::Bool(true));
            }
        }
        return Ok(Value::Bool(false));
    }
    Ok(Value::Bool(&target == arg))
}

pub(super) fn field_name(args: &[Value]) -> Result<&Arc<String>, ExecutionError> {
    match args {
        [Value::String(f)] => Ok(f),
        _ => Err(no_overload()),
    }
}

pub(super) fn type_name(v: &Value) -> String {
    match v {
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        other => other.type_of().to_string(),
    }
}

pub(super) fn select(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [target, rest @ ..] = args.as_slice() else {
        return Err(no_overload());
    };
    let field = field_name(rest)?;
    match target {
        Value::Map(map) => map
            .map
            .get(&Key::String(field.clone()))
            .cloned()
            .ok_or_else(|| ExecutionError::NoSuchKey(field.clone())),
        other => Err(fail(
            hidden::SELECT,
            format!(
                "type '{}' does not support field selection",
                type_name(other)
            ),
        )),
    }
}

pub(super) fn has(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [target, rest @ ..] = args.as_slice() else {
        return Err(no_overload());
    };
    let field = field_name(rest)?;
    match target {
        Value::Map(map) => Ok(Value::Bool(
            map.map.contains_key(&Key::String(field.clone())),
        )),
        other => Err(fail(
            hidden::HAS,
            format!("invalid type for field selection: '{}'", type_name(other)),
        )),
    }
}

pub(super) fn optional(value: Option<Value>) -> Value {
    Value::Opaque(Arc::new(match value {
        Some(v) => OptionalValue::of(v),
        None => OptionalValue::none(),
    }))
}

pub(super) fn opt_select(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [target, rest @ ..] = args.as_slice() else {
        return Err(no_overload());
    };
    let field = field_name(rest)?;
    let inner = match target {
        Value::Opaque(o) => match o.downcast_ref::<OptionalValue>() {
            Some(opt) => match opt.value() {
                Some(v) => v.clone(),
                None => return Ok(optional(None)),
            },
            None => return Err(no_overload()),
        },
        other => other.clone(),
    };
    match inner {
        Value::Map(map) => Ok(optional(map.map.get(&Key::String(field.clone())).cloned())),
        other => Err(fail(
            hidden::OPT_SELECT,
            format!(
                "type '{}' does not support field selection",
                type_name(&other)
            ),
        )),
    }
}

pub(super) fn tick(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [step] = args.as_slice() else {
        return Err(no_overload());
    };
    charge(size_of(step).saturating_add(1))?;
    Ok(step.clone())
}

pub(super) fn charge_value(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [value] = args.as_slice() else {
        return Err(no_overload());
    };
    charge(size_of(value))?;
    Ok(value.clone())
}

/// `+`, charging growth of strings, bytes and lists before allocating it.
pub(super) fn add(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [a, b] = args.as_slice() else {
        return Err(no_overload());
    };
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x
            .checked_add(*y)
            .map(Value::Int)
            .ok_or_else(|| fail(hidden::ADD, "integer overflow")),
        (Value::UInt(x), Value::UInt(y)) => x
            .checked_add(*y)
            .map(Value::UInt)
            .ok_or_else(|| fail(hidden::ADD, "unsigned integer overflow")),
        (Value::Float(x), Value::Float(y)) => Ok(Value::Float(x + y)),
        (Value::String(x), Value::String(y)) => {
            charge(size_of(a) + size_of(b))?;
            Ok(Value::String(Arc::new(format!("{x}{y}"))))
        }
        (Value::Bytes(x), Value::Bytes(y)) => {
            charge(size_of(a) + size_of(b))?;
            Ok(Value::Bytes(Arc::new(
                [x.as_slice(), y.as_slice()].concat(),
            )))
        }
        (Value::List(x), Value::List(y)) => {
            charge(size_of(a) + size_of(b))?;
            Ok(Value::List(Arc::new(
                x.iter().chain(y.iter()).cloned().collect(),
            )))
        }
        // Timestamps, durations and type mismatches keep cel-rust's semantics.
        _ => delegate(
            PROGRAMS.plus.as_ref(),
            vec![("a", a.clone()), ("b", b.clone())],
        ),
    }
}

/// `size()`: strings count code points as in cel-go (cel-rust counts bytes).
pub(super) fn size(ftx: &FunctionContext) -> ResolveResult {
    let (this, args) = call_parts(ftx)?;
    let value = match (this.as_ref(), args.as_slice()) {
        (Some(v), []) | (None, [v]) => v.clone(),
        _ => return Err(no_overload()),
    };
    let n = match &value {
        Value::String(s) => s.chars().count(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        Value::Bytes(b) => b.len(),
        _ => return Err(no_overload()),
    };
    Ok(Value::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// The one argument of a conversion, as a member or global call.
pub(super) fn conversion_arg(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let (this, args) = call_parts(ftx)?;
    match (this, args.as_slice()) {
        (Some(v), []) => Ok(v),
        (None, [v]) => Ok(v.clone()),
        _ => Err(no_overload()),
    }
}

/// `int()` with cel-go's range checks: a double converts only strictly
/// between -2^63 and 2^63 (cel-rust lets ±2^63 and NaN through).
pub(super) fn to_int(ftx: &FunctionContext) -> ResolveResult {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    match conversion_arg(ftx)? {
        Value::Int(v) => Ok(Value::Int(v)),
        Value::UInt(v) => i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| fail("int", "integer overflow")),
        #[allow(clippy::cast_possible_truncation)]
        Value::Float(v) if v > -TWO_63 && v < TWO_63 => Ok(Value::Int(v as i64)),
        Value::Float(_) => Err(fail("int", "integer overflow")),
        Value::String(s) => s
            .parse::<i64>()
            .map(Value::Int)
            .map_err(|e| fail("int", format!("string parse error: {e}"))),
        _ => Err(no_overload()),
    }
}

/// `uint()` with cel-go's range checks: a double converts only from 0 up to
/// (not including) 2^64.
pub(super) fn to_uint(ftx: &FunctionContext) -> ResolveResult {
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    match conversion_arg(ftx)? {
        Value::UInt(v) => Ok(Value::UInt(v)),
        Value::Int(v) => u64::try_from(v)
            .map(Value::UInt)
            .map_err(|_| fail("uint", "unsigned integer overflow")),
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Value::Float(v) if (0.0..TWO_64).contains(&v) => Ok(Value::UInt(v as u64)),
        Value::Float(_) => Err(fail("uint", "unsigned integer overflow")),
        Value::String(s) => s
            .parse::<u64>()
            .map(Value::UInt)
            .map_err(|e| fail("uint", format!("string parse error: {e}"))),
        _ => Err(no_overload()),
    }
}

/// Unary `-`: ints overflow as in cel-go, doubles negate, the rest has no overload.
pub(super) fn negate(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    match args.as_slice() {
        [Value::Int(x)] => x
            .checked_neg()
            .map(Value::Int)
            .ok_or_else(|| fail(hidden::NEG, "integer overflow")),
        [Value::Float(x)] => Ok(Value::Float(-x)),
        _ => Err(no_overload()),
    }
}
