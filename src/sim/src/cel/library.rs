//! The function library every selector runs against: kube-cel's Kubernetes
//! functions, our exact quantity and semver types in place of kube-cel's, DRA's
//! `includes()`, and the hidden helpers the checker rewrites expressions into.
//!
//! The root context is built once per process (it costs ~100 µs) and shared
//! read-only; devices hang their variables in a child scope of it, so an
//! evaluation allocates no context at all.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use kube_cel::KubeCelExt;
use kube_cel::cel::context::VariableResolver;
use kube_cel::cel::objects::{Key, OptionalValue};
use kube_cel::cel::{Context, ExecutionError, FunctionContext, Program, ResolveResult, Value};

use super::quantity::Quantity;
use super::semver::Semver;

/// Hidden variable prefix for one attribute domain of the device.
pub(crate) const ATTR_DOMAIN_PREFIX: &str = "@attr:";
/// Hidden variable prefix for one capacity domain of the device.
pub(crate) const CAP_DOMAIN_PREFIX: &str = "@cap:";
/// Hidden variable for a top-level `device` field (`@driver`, `@attributes`, …).
/// CEL identifiers cannot start with `@`, so users cannot name these.
pub(crate) const FIELD_PREFIX: &str = "@";
/// The fields of upstream's `kubernetes.DRADevice` value.
pub(crate) const DEVICE_FIELDS: [&str; 4] = [
    "driver",
    "allowMultipleAllocations",
    "attributes",
    "capacity",
];

/// Upstream's `CELSelectorExpressionMaxCost`.
pub(crate) const COST_LIMIT: u64 = 1_000_000;
/// Upstream's `ResourceSliceMaxAttributeValuesPerDevice`: `includes()` refuses longer lists.
pub(crate) const INCLUDES_MAX_LIST: usize = 48;

/// Upstream's runtime error text when the cost budget runs out.
pub(crate) const COST_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

thread_local! {
    /// Cost units left for the evaluation running on this thread. Functions
    /// have no per-call state, and an evaluation never leaves its thread.
    static BUDGET: Cell<u64> = const { Cell::new(COST_LIMIT) };
}

/// Starts a new evaluation with a full budget.
pub(crate) fn reset_budget() {
    BUDGET.with(|b| b.set(COST_LIMIT));
}

fn charge(units: u64) -> Result<(), ExecutionError> {
    BUDGET.with(|b| {
        let left = b.get();
        if units > left {
            b.set(0);
            Err(ExecutionError::function_error("@cost", COST_EXCEEDED))
        } else {
            b.set(left - units);
            Ok(())
        }
    })
}

fn size_of(v: &Value) -> u64 {
    let n = match v {
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        _ => 0,
    };
    u64::try_from(n).unwrap_or(u64::MAX)
}

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

/// Looks up unknown attribute or capacity domains as an empty map, upstream's
/// `newStringInterfaceMapWithDefault`. It sits on the root, so it only sees
/// names no device scope defined.
struct MissingDomains;

impl VariableResolver for MissingDomains {
    fn resolve(&self, variable: &str) -> Option<Value> {
        (variable.starts_with(ATTR_DOMAIN_PREFIX) || variable.starts_with(CAP_DOMAIN_PREFIX))
            .then(|| Value::from(HashMap::<Key, Value>::new()))
    }
}

static MISSING_DOMAINS: MissingDomains = MissingDomains;

/// The shared root scope: every function, no variables.
pub(crate) static ROOT: LazyLock<Context<'static>> = LazyLock::new(|| {
    let mut ctx = Context::default().with_all();
    register_quantity(&mut ctx);
    register_semver(&mut ctx);
    register_comparisons(&mut ctx);
    register_guarded(&mut ctx);
    ctx.add_function(INCLUDES, includes);
    ctx.add_function(hidden::SELECT, select);
    ctx.add_function(hidden::HAS, has);
    ctx.add_function(hidden::OPT_SELECT, opt_select);
    ctx.add_function(hidden::TICK, tick);
    ctx.add_function(hidden::CHARGE, charge_value);
    ctx.add_function(hidden::ADD, add);
    ctx.add_function(hidden::NEG, negate);
    ctx.add_function("size", size);
    ctx.add_function("int", to_int);
    ctx.add_function("uint", to_uint);
    ctx.set_variable_resolver(&MISSING_DOMAINS);
    ctx
});

/// kube-cel's unmodified functions, for the wrappers that pre-check sizes and
/// then hand over to kube-cel's implementation.
static DELEGATE: LazyLock<Context<'static>> = LazyLock::new(|| Context::default().with_all());

/// Programs run in [`DELEGATE`]; `None` if one failed to parse (a bug caught by tests).
struct DelegatePrograms {
    plus: Option<Program>,
    replace: Option<Program>,
    replace_n: Option<Program>,
    join: Option<Program>,
    join_sep: Option<Program>,
    range: Option<Program>,
    format: Option<Program>,
}

static PROGRAMS: LazyLock<DelegatePrograms> = LazyLock::new(|| DelegatePrograms {
    plus: Program::compile("a + b").ok(),
    replace: Program::compile("t.replace(a, b)").ok(),
    replace_n: Program::compile("t.replace(a, b, n)").ok(),
    join: Program::compile("t.join()").ok(),
    join_sep: Program::compile("t.join(a)").ok(),
    range: Program::compile("lists.range(n)").ok(),
    format: Program::compile("t.format(a)").ok(),
});

fn delegate(program: Option<&Program>, vars: Vec<(&str, Value)>) -> ResolveResult {
    let program = program.ok_or_else(|| {
        ExecutionError::function_error("@delegate", "internal error: helper program missing")
    })?;
    let mut ctx = DELEGATE.new_inner_scope();
    for (name, value) in vars {
        ctx.add_variable_from_value(name, value);
    }
    program.execute(&ctx)
}

/// The receiver and evaluated arguments of a call.
fn call_parts(ftx: &FunctionContext) -> Result<(Option<Value>, Vec<Value>), ExecutionError> {
    let args = ftx
        .args
        .iter()
        .map(|e| Value::resolve(e, ftx.ptx))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((ftx.this.clone(), args))
}

fn as_quantity(v: &Value) -> Option<&Quantity> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Quantity>(),
        _ => None,
    }
}

fn as_semver(v: &Value) -> Option<&Semver> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Semver>(),
        _ => None,
    }
}

/// A quantity value for the device conversion and the library.
pub(crate) fn quantity_value(q: Quantity) -> Value {
    Value::Opaque(Arc::new(q))
}

/// A semver value for the device conversion and the library.
pub(crate) fn semver_value(s: Semver) -> Value {
    Value::Opaque(Arc::new(s))
}

fn no_overload() -> ExecutionError {
    ExecutionError::NoSuchOverload
}

fn fail(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn quantity_receiver(this: Option<&Value>) -> Result<&Quantity, ExecutionError> {
    this.and_then(as_quantity).ok_or_else(no_overload)
}

fn register_quantity(ctx: &mut Context<'_>) {
    ctx.add_function("quantity", |ftx: &FunctionContext| -> ResolveResult {
        match call_parts(ftx)? {
            (None, args) => match args.as_slice() {
                [Value::String(s)] => Quantity::parse(s)
                    .map(quantity_value)
                    .map_err(|e| fail("quantity", e)),
                _ => Err(no_overload()),
            },
            _ => Err(no_overload()),
        }
    });
    ctx.add_function("isQuantity", |ftx: &FunctionContext| -> ResolveResult {
        match call_parts(ftx)? {
            (None, args) => match args.as_slice() {
                [Value::String(s)] => Ok(Value::Bool(Quantity::parse(s).is_ok())),
                _ => Err(no_overload()),
            },
            _ => Err(no_overload()),
        }
    });
    ctx.add_function("isInteger", |ftx: &FunctionContext| -> ResolveResult {
        let (this, _) = call_parts(ftx)?;
        Ok(Value::Bool(
            quantity_receiver(this.as_ref())?.as_integer().is_some(),
        ))
    });
    ctx.add_function("asInteger", |ftx: &FunctionContext| -> ResolveResult {
        let (this, _) = call_parts(ftx)?;
        quantity_receiver(this.as_ref())?
            .as_integer()
            .map(Value::Int)
            .ok_or_else(|| fail("asInteger", "cannot convert value to integer"))
    });
    ctx.add_function(
        "asApproximateFloat",
        |ftx: &FunctionContext| -> ResolveResult {
            let (this, _) = call_parts(ftx)?;
            Ok(Value::Float(
                quantity_receiver(this.as_ref())?.as_approximate_float(),
            ))
        },
    );
    ctx.add_function("sign", |ftx: &FunctionContext| -> ResolveResult {
        let (this, _) = call_parts(ftx)?;
        Ok(Value::Int(quantity_receiver(this.as_ref())?.sign()))
    });
    ctx.add_function("add", |ftx: &FunctionContext| quantity_arith(ftx, false));
    ctx.add_function("sub", |ftx: &FunctionContext| quantity_arith(ftx, true));
}

fn quantity_arith(ftx: &FunctionContext, negate: bool) -> ResolveResult {
    let (this, args) = call_parts(ftx)?;
    let lhs = quantity_receiver(this.as_ref())?;
    let rhs = match args.as_slice() {
        [Value::Int(i)] => Quantity::parse(&i.to_string()).map_err(|e| fail("add", e))?,
        [other] => as_quantity(other).cloned().ok_or_else(no_overload)?,
        _ => return Err(no_overload()),
    };
    lhs.add(&rhs, negate).map(quantity_value).ok_or_else(|| {
        fail(
            if negate { "sub" } else { "add" },
            "quantity arithmetic result needs more precision than supported",
        )
    })
}

fn register_semver(ctx: &mut Context<'_>) {
    fn parse(args: &[Value]) -> Result<Result<Semver, String>, ExecutionError> {
        match args {
            [Value::String(s)] => Ok(Semver::parse(s)),
            [Value::String(s), Value::Bool(normalize)] => Ok(if *normalize {
                Semver::parse_normalized(s)
            } else {
                Semver::parse(s)
            }),
            _ => Err(no_overload()),
        }
    }
    ctx.add_function("semver", |ftx: &FunctionContext| -> ResolveResult {
        match call_parts(ftx)? {
            (None, args) => parse(&args)?
                .map(semver_value)
                .map_err(|e| fail("semver", e)),
            _ => Err(no_overload()),
        }
    });
    ctx.add_function("isSemver", |ftx: &FunctionContext| -> ResolveResult {
        match call_parts(ftx)? {
            (None, args) => Ok(Value::Bool(parse(&args)?.is_ok())),
            _ => Err(no_overload()),
        }
    });
    fn part(ftx: &FunctionContext, get: fn(&Semver) -> i64) -> ResolveResult {
        let (this, _) = call_parts(ftx)?;
        this.as_ref()
            .and_then(as_semver)
            .map(|s| Value::Int(get(s)))
            .ok_or_else(no_overload)
    }
    ctx.add_function("major", |ftx: &FunctionContext| part(ftx, Semver::major));
    ctx.add_function("minor", |ftx: &FunctionContext| part(ftx, Semver::minor));
    ctx.add_function("patch", |ftx: &FunctionContext| part(ftx, Semver::patch));
}

/// Orders two quantities or two semvers; anything else has no overload.
fn compare(ftx: &FunctionContext) -> Result<std::cmp::Ordering, ExecutionError> {
    let (this, args) = call_parts(ftx)?;
    let (Some(lhs), [rhs]) = (this, args.as_slice()) else {
        return Err(no_overload());
    };
    if let (Some(a), Some(b)) = (as_quantity(&lhs), as_quantity(rhs)) {
        return Ok(a.cmp(b));
    }
    if let (Some(a), Some(b)) = (as_semver(&lhs), as_semver(rhs)) {
        return Ok(a.cmp(b));
    }
    Err(no_overload())
}

fn register_comparisons(ctx: &mut Context<'_>) {
    ctx.add_function("isGreaterThan", |ftx: &FunctionContext| -> ResolveResult {
        Ok(Value::Bool(compare(ftx)?.is_gt()))
    });
    ctx.add_function("isLessThan", |ftx: &FunctionContext| -> ResolveResult {
        Ok(Value::Bool(compare(ftx)?.is_lt()))
    });
    ctx.add_function("compareTo", |ftx: &FunctionContext| -> ResolveResult {
        Ok(Value::Int(match compare(ftx)? {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }))
    });
}

/// kube-cel functions that can build values far larger than their inputs;
/// each one charges the output size before kube-cel allocates it.
fn register_guarded(ctx: &mut Context<'_>) {
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
fn largest_precision(template: &str) -> Option<u64> {
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
fn includes(ftx: &FunctionContext) -> ResolveResult {
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

fn field_name(args: &[Value]) -> Result<&Arc<String>, ExecutionError> {
    match args {
        [Value::String(f)] => Ok(f),
        _ => Err(no_overload()),
    }
}

fn type_name(v: &Value) -> String {
    match v {
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        other => other.type_of().to_string(),
    }
}

fn select(ftx: &FunctionContext) -> ResolveResult {
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

fn has(ftx: &FunctionContext) -> ResolveResult {
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

fn optional(value: Option<Value>) -> Value {
    Value::Opaque(Arc::new(match value {
        Some(v) => OptionalValue::of(v),
        None => OptionalValue::none(),
    }))
}

fn opt_select(ftx: &FunctionContext) -> ResolveResult {
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

fn tick(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [step] = args.as_slice() else {
        return Err(no_overload());
    };
    charge(size_of(step).saturating_add(1))?;
    Ok(step.clone())
}

fn charge_value(ftx: &FunctionContext) -> ResolveResult {
    let (_, args) = call_parts(ftx)?;
    let [value] = args.as_slice() else {
        return Err(no_overload());
    };
    charge(size_of(value))?;
    Ok(value.clone())
}

/// `+`, charging growth of strings, bytes and lists before allocating it.
fn add(ftx: &FunctionContext) -> ResolveResult {
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
fn size(ftx: &FunctionContext) -> ResolveResult {
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
fn conversion_arg(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let (this, args) = call_parts(ftx)?;
    match (this, args.as_slice()) {
        (Some(v), []) => Ok(v),
        (None, [v]) => Ok(v.clone()),
        _ => Err(no_overload()),
    }
}

/// `int()` with cel-go's range checks: a double converts only strictly
/// between -2^63 and 2^63 (cel-rust lets ±2^63 and NaN through).
fn to_int(ftx: &FunctionContext) -> ResolveResult {
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
fn to_uint(ftx: &FunctionContext) -> ResolveResult {
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
fn negate(ftx: &FunctionContext) -> ResolveResult {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str) -> ResolveResult {
        reset_budget();
        let program = Program::compile(expr).unwrap();
        program.execute(&ROOT)
    }

    /// Every declared function must resolve in the root; a name the table
    /// declares but nothing registers would pass the checker and then fail
    /// with "undeclared reference" at run time.
    #[test]
    fn every_declared_function_is_registered() {
        for (name, decl) in DECLARED.iter() {
            let call = if let Some(&n) = decl.global.first() {
                format!("{name}({})", vec!["null"; n].join(", "))
            } else {
                let n = decl.member.first().copied().unwrap_or(0);
                format!("null.{name}({})", vec!["null"; n].join(", "))
            };
            let program = Program::compile(&call).unwrap_or_else(|e| panic!("{call}: {e}"));
            reset_budget();
            let outcome = std::panic::catch_unwind(|| program.execute(&ROOT));
            if let Ok(Err(ExecutionError::UndeclaredReference(r))) = outcome {
                panic!("{name} is declared but not registered (undeclared {r})");
            }
        }
    }

    #[test]
    fn helper_programs_parse() {
        let p = &*PROGRAMS;
        for (name, prog) in [
            ("plus", &p.plus),
            ("replace", &p.replace),
            ("replace_n", &p.replace_n),
            ("join", &p.join),
            ("join_sep", &p.join_sep),
            ("range", &p.range),
            ("format", &p.format),
        ] {
            assert!(prog.is_some(), "{name}");
        }
    }

    #[test]
    fn guarded_functions_keep_kube_cel_results() {
        assert_eq!(
            eval("'aXbX'.replace('X', 'yy')"),
            Ok(Value::String(Arc::new("ayybyy".into())))
        );
        assert_eq!(
            eval("'aXbX'.replace('X', 'yy', 1)"),
            Ok(Value::String(Arc::new("ayybX".into())))
        );
        assert_eq!(
            eval("'aXbX'.replace('X', 'y', -1)"),
            Ok(Value::String(Arc::new("ayby".into())))
        );
        assert_eq!(
            eval("['a', 'b'].join('-')"),
            Ok(Value::String(Arc::new("a-b".into())))
        );
        assert_eq!(eval("size(lists.range(3))"), Ok(Value::Int(3)));
        assert_eq!(
            eval("'%d items'.format([5])"),
            Ok(Value::String(Arc::new("5 items".into())))
        );
    }

    #[test]
    fn growth_beyond_the_budget_is_an_error_not_an_allocation() {
        let err = eval("lists.range(1000000000)").unwrap_err();
        assert!(err.to_string().contains(COST_EXCEEDED), "{err}");
        let err = eval("'%.999999999f'.format([1.0])").unwrap_err();
        assert!(err.to_string().contains(COST_EXCEEDED), "{err}");
        let err = eval("'aaaaaaaaaa'.replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa').replace('a', 'aaaaaaaaaa')").unwrap_err();
        assert!(err.to_string().contains(COST_EXCEEDED), "{err}");
    }
}
