//! Compiling selectors once per snapshot and evaluating them per device.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use kube_cel::cel::Value;
use kube_cel::cel::common::ast::IdedExpr;
use kube_cel::cel::parser::{ParseError, Parser};

use super::checker::{self, Declarations};
use super::device::CelDevice;
use super::error::{CelError, runtime_message};
use super::library::reset_budget;
use super::shape::{self, ShapeError};
use crate::gates::{FeatureGates, KubeVersion};

/// Message part of a compile error raised because the generated parser
/// panicked. None is known since [`shape`] bounds what reaches it.
pub(crate) const PARSER_PANIC: &str = "the CEL parser panicked";

/// Stack that compiling the deepest expression [`shape`] and the checker
/// accept may take: cel-rust's generated parser needs up to 4 MiB for 249
/// nested parentheses in an unoptimized build, half that optimized. Twice
/// that is kept free; with less left on the calling thread, compilation runs
/// on a fresh stack segment (`stacker`).
const COMPILE_STACK: usize = 8 << 20;

/// Stack an evaluation may take: the checker bounds trees at
/// [`super::checker::MAX_DEPTH`] levels, which evaluate in under 4 MiB
/// unoptimized. Threads with [`crate::STACK_BUDGET`] never need a new segment.
const EVAL_STACK: usize = 8 << 20;

/// Upstream's `CELSelectorExpressionMaxLength` (`k8s.io/api/resource/v1`):
/// the API server refuses a longer selector before compiling it.
pub const CEL_SELECTOR_EXPRESSION_MAX_LENGTH: usize = 10 * 1024;

/// When [`shape`] found a syntax error, cel-rust's parser words it only for an
/// expression of at most this many bytes whose brackets nest at most
/// [`MAX_DEPTH_FOR_PARSER_MESSAGE`] deep; anything else gets our own line at
/// the position where the grammar broke (divergence C11). Both bounds come
/// from the `cel` fuzz target: on malformed text cel-rust's error recovery
/// grows faster than the text. 1,855 bytes ending an `r"""` literal that our
/// lexer accepts and cel-rust's does not made 3.9 million errors in 36 s
/// (every prefix of it took milliseconds); and time and memory grow
/// exponentially with nesting: `- (- - (` twenty times took 2 s in the fuzz
/// build, thirty times more than 2 GiB. Within both bounds such input costs
/// milliseconds, and no chain or nesting gets near the recursion limits.
const MAX_BYTES_FOR_PARSER_MESSAGE: usize = 256;

/// See [`MAX_BYTES_FOR_PARSER_MESSAGE`]; measured by [`shape`]'s tokens and
/// by the raw text, since the two lexers can disagree on malformed input.
const MAX_DEPTH_FOR_PARSER_MESSAGE: usize = 12;

/// Parses `expression` the way kube-scheduler's compiler would see it:
/// length limit, grammar shape and recursion limits first (see [`shape`]),
/// then cel-rust's parser on the normalized text.
pub(crate) fn parse(expression: &str) -> Result<IdedExpr, CelError> {
    if expression.len() > CEL_SELECTOR_EXPRESSION_MAX_LENGTH {
        // What the API server answers for such an object (`field.TooLong`).
        return Err(CelError::compile(
            expression,
            format!("Too long: must have at most {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} bytes"),
        ));
    }
    let shape = match shape::check(expression) {
        Ok(found) => found,
        Err(ShapeError::TooDeep(message)) => {
            return Err(CelError::compile(
                expression,
                format!("compilation failed: ERROR: <input>:-1:0: {message}"),
            ));
        }
        Err(ShapeError::Lex(e)) => {
            return Err(syntax_error(expression, e.offset, &e.message));
        }
        Err(ShapeError::Literal(e)) => {
            return Err(located_error(expression, e.offset, e.message));
        }
        Err(ShapeError::Syntax { offset, depth })
            if expression.len() > MAX_BYTES_FOR_PARSER_MESSAGE
                || depth.max(raw_bracket_depth(expression)) > MAX_DEPTH_FOR_PARSER_MESSAGE =>
        {
            return Err(syntax_error(expression, offset, "unexpected input"));
        }
        // A small expression: cel-rust's parser says what is wrong.
        Err(ShapeError::Syntax { offset, .. }) => {
            return Err(parser_syntax_error(expression, offset));
        }
    };
    let source = shape.normalized(expression);
    match cel_rust_parse(source.as_ref()) {
        Ok(Ok(mut ast)) => {
            shape.restore_literals(&mut ast);
            Ok(ast)
        }
        Ok(Err(errors)) => Err(CelError::compile(
            expression,
            format!("compilation failed: {}", parse_errors(&errors.errors)),
        )),
        Err(_) => Err(CelError::compile(
            expression,
            format!("compilation failed: {PARSER_PANIC}"),
        )),
    }
}

/// cel-rust's parser on `source`; `Err` when it panicked. Its own guard
/// counts only nested `expr` rules (at 96); `shape` already holds every rule
/// to cel-go's 250, so it is set out of reach.
fn cel_rust_parse(
    source: &str,
) -> std::thread::Result<Result<IdedExpr, kube_cel::cel::parser::ParseErrors>> {
    catch_unwind(|| {
        Parser::new()
            .enable_optional_syntax(true)
            .max_recursion_depth(1000)
            .parse(source)
    })
}

/// cel-rust's words for the syntax error [`shape`] found at `offset`, from
/// the text up to one token past it (ANTLR's recovery looks one token
/// ahead). The rest of a malformed text would only feed cel-rust's error
/// recovery, which the `cel` fuzz target found growing faster than the text:
/// 254 bytes of `--------(-%---)-)…` took more than 4 GiB. Errors at the end
/// of the cut text are artifacts of the cut and dropped; with none left, our
/// own line at `offset`.
fn parser_syntax_error(expression: &str, offset: usize) -> CelError {
    let cut = shape::malformed_prefix(expression, offset);
    let source = shape::Shape::for_malformed(cut)
        .normalized(cut)
        .into_owned();
    let errors = match cel_rust_parse(&source) {
        Ok(Err(errors)) if cut.len() < expression.len() => errors
            .errors
            .into_iter()
            .filter(|e| !e.msg.contains("<EOF>"))
            .collect(),
        Ok(Err(errors)) => errors.errors,
        Ok(Ok(_)) | Err(_) => Vec::new(),
    };
    if errors.is_empty() {
        return syntax_error(expression, offset, "unexpected input");
    }
    CelError::compile(
        expression,
        format!("compilation failed: {}", parse_errors(&errors)),
    )
}

/// How deep `(`, `[` and `{` nest in the text, quotes ignored. [`shape`]'s
/// tokens can differ from cel-rust's on malformed input (a literal one lexer
/// ends early and the other late), so both depths must be within bounds.
fn raw_bracket_depth(expression: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for byte in expression.bytes() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// cel-go's syntax error line, `ERROR: <input>:LINE:COL: Syntax error: …`.
fn syntax_error(expression: &str, offset: usize, what: &str) -> CelError {
    located_error(expression, offset, &format!("Syntax error: {what}"))
}

/// A cel-go error line, `ERROR: <input>:LINE:COL: …`, for `offset`: lines
/// count from 1, columns are code points from 1 (cel-go adds one to its
/// 0-based column for display).
fn located_error(expression: &str, offset: usize, what: &str) -> CelError {
    let mut at = offset.min(expression.len());
    while !expression.is_char_boundary(at) {
        at -= 1;
    }
    let before = &expression[..at];
    let line = 1 + before.matches('\n').count();
    let column = 1 + before
        .rsplit('\n')
        .next()
        .unwrap_or_default()
        .chars()
        .count();
    CelError::compile(
        expression,
        format!("compilation failed: ERROR: <input>:{line}:{column}: {what}"),
    )
}

/// The first few of cel-rust's parse errors, each on its own line without the
/// source excerpt cel-rust adds (one per error, the whole line each time).
fn parse_errors(errors: &[ParseError]) -> String {
    const SHOWN: usize = 5;
    let mut text = errors
        .iter()
        .take(SHOWN)
        .map(|e| format!("ERROR: <input>:{}:{}: {}", e.pos.0, e.pos.1, e.msg))
        .collect::<Vec<_>>()
        .join("\n");
    if errors.len() > SHOWN {
        text.push_str(&format!("\n… and {} more errors", errors.len() - SHOWN));
    }
    text
}

/// Which of upstream's two CEL environments to model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CelEnvironment {
    /// What kube-scheduler uses for every selector: the newest declarations
    /// regardless of feature gates, so that an expression the API server once
    /// stored keeps compiling.
    #[default]
    StoredExpressions,
    /// What the API server uses to validate a new or changed expression:
    /// gated declarations only exist while their gate is on.
    NewExpressions,
}

/// Compiles selectors for one snapshot and caches them by source text.
#[derive(Debug)]
pub struct SelectorCompiler {
    decls: Declarations,
    /// Schedulers before 1.37 fail devices that carry list attributes when
    /// DRAListTypeAttributes is off.
    refuse_list_attributes: bool,
    cache: HashMap<String, Result<Arc<CompiledSelector>, CelError>>,
}

impl SelectorCompiler {
    /// A compiler that behaves like the newest modelled kube-scheduler
    /// ([`KubeVersion::NEWEST`], [`CelEnvironment::StoredExpressions`]).
    ///
    /// In that environment the gates change nothing at compile time:
    /// upstream's StoredExpressions environment ignores feature gates, so
    /// `device.allowMultipleAllocations` and `includes()` always compile.
    #[must_use]
    pub fn new(gates: &FeatureGates) -> Self {
        Self::with_environment(
            gates,
            KubeVersion::NEWEST,
            CelEnvironment::StoredExpressions,
        )
    }

    /// A compiler for a given Kubernetes minor and environment.
    ///
    /// - `device.allowMultipleAllocations` is declared in StoredExpressions,
    ///   and in NewExpressions only with DRAConsumableCapacity on;
    /// - `includes()` is declared in StoredExpressions from 1.36, and in
    ///   NewExpressions only with DRAListTypeAttributes on;
    /// - before 1.37, with DRAListTypeAttributes off, a device carrying a
    ///   list attribute fails every selector ("unsupported attribute value").
    #[must_use]
    pub fn with_environment(
        gates: &FeatureGates,
        version: KubeVersion,
        environment: CelEnvironment,
    ) -> Self {
        let decls = match environment {
            CelEnvironment::StoredExpressions => Declarations {
                allow_multiple_allocations: true,
                includes: version.minor >= 36,
            },
            CelEnvironment::NewExpressions => Declarations {
                allow_multiple_allocations: gates.consumable_capacity,
                includes: gates.list_type_attributes,
            },
        };
        Self {
            decls,
            refuse_list_attributes: version.minor < 37 && !gates.list_type_attributes,
            cache: HashMap::new(),
        }
    }

    /// Compiles `expression`, or returns the cached result of an earlier
    /// call with the same text (errors are cached too).
    ///
    /// # Errors
    /// A [`CelError`] of kind [`super::CelErrorKind::Compile`] for a syntax
    /// error, an undeclared variable, field or function, a wrong argument
    /// count, or an expression whose type is known not to be bool.
    pub fn compile(&mut self, expression: &str) -> Result<Arc<CompiledSelector>, CelError> {
        if let Some(hit) = self.cache.get(expression) {
            return hit.clone();
        }
        let result = self.compile_uncached(expression).map(Arc::new);
        self.cache.insert(expression.to_string(), result.clone());
        result
    }

    fn compile_uncached(&self, expression: &str) -> Result<CompiledSelector, CelError> {
        stacker::maybe_grow(COMPILE_STACK, 2 * COMPILE_STACK, || {
            self.compile_on_enough_stack(expression)
        })
    }

    fn compile_on_enough_stack(&self, expression: &str) -> Result<CompiledSelector, CelError> {
        let mut program = parse(expression)?;
        let uses_device = checker::check(&mut program, self.decls)
            .map_err(|m| CelError::compile(expression, m.to_string()))?;
        Ok(CompiledSelector {
            expression: expression.to_string(),
            program,
            refuse_list_attributes: self.refuse_list_attributes,
            constant: (!uses_device).then(OnceLock::new),
        })
    }
}

/// A checked selector, ready to evaluate on any number of devices.
#[derive(Debug)]
pub struct CompiledSelector {
    expression: String,
    program: IdedExpr,
    refuse_list_attributes: bool,
    /// For an expression that never reads `device`: its one verdict,
    /// computed on first use (every device would get the same).
    constant: Option<OnceLock<Result<bool, CelError>>>,
}

impl CompiledSelector {
    /// The source text.
    #[must_use]
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Evaluates the selector on `device`.
    ///
    /// # Errors
    /// Every evaluation failure is an error of kind
    /// [`super::CelErrorKind::Runtime`], never a silent `false`: a missing
    /// key, a type error, a non-bool result, a device value that could not
    /// be converted (bad semver), the cost limit. Upstream aborts the
    /// allocation attempt on any of them.
    pub fn matches(&self, device: &CelDevice) -> Result<bool, CelError> {
        if let Some(e) = device.conversion_error() {
            return Err(CelError::runtime(&self.expression, e));
        }
        if self.refuse_list_attributes
            && let Some(name) = device.list_attribute()
        {
            return Err(CelError::runtime(
                &self.expression,
                format!("attribute {name}: unsupported attribute value"),
            ));
        }
        if let Some(verdict) = &self.constant {
            return verdict.get_or_init(|| self.evaluate(device)).clone();
        }
        self.evaluate(device)
    }

    fn evaluate(&self, device: &CelDevice) -> Result<bool, CelError> {
        reset_budget();
        let outcome = stacker::maybe_grow(EVAL_STACK, 2 * EVAL_STACK, || {
            catch_unwind(AssertUnwindSafe(|| {
                Value::resolve(&self.program, device.scope())
            }))
        });
        match outcome {
            Ok(Ok(Value::Bool(b))) => Ok(b),
            Ok(Ok(other)) => Err(CelError::runtime(
                &self.expression,
                format!(
                    "CEL result of type {} could not be converted to bool",
                    cel_type_name(&other)
                ),
            )),
            Ok(Err(e)) => Err(CelError::runtime(&self.expression, runtime_message(&e))),
            Err(_) => Err(CelError::runtime(
                &self.expression,
                "the CEL interpreter panicked",
            )),
        }
    }
}

/// cel-go's name for a value's type.
fn cel_type_name(v: &Value) -> String {
    match v {
        Value::Float(_) => "double".to_string(),
        Value::Null => "null_type".to_string(),
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        other => other.type_of().to_string(),
    }
}
