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
use super::semver::{Semver, SemverError};

mod declared;
mod guarded;

pub(crate) use declared::{DECLARED, INCLUDES, Returns, hidden};
use guarded::{
    add, charge_value, has, includes, negate, opt_select, register_guarded, select, size, tick,
    to_int, to_uint,
};

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
    fn parse(args: &[Value]) -> Result<Result<Semver, SemverError>, ExecutionError> {
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
