//! Compiling selectors once per snapshot and evaluating them per device.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use kube_cel::cel::Value;
use kube_cel::cel::common::ast::IdedExpr;
use kube_cel::cel::parser::Parser;

use super::checker::{self, Declarations};
use super::device::CelDevice;
use super::error::{CelError, runtime_message};
use super::library::reset_budget;
use crate::gates::{FeatureGates, KubeVersion};

/// Message part of a compile error raised because the generated parser
/// panicked. Known cause: cel-rust's recursion guard underflows in debug
/// builds once an expression trips its nesting limit.
pub(crate) const PARSER_PANIC: &str = "the CEL parser panicked";

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
        let deepening = checker::deepening_tokens(expression);
        if deepening > checker::MAX_DEEPENING_TOKENS {
            return Err(CelError::compile(
                expression,
                format!(
                    "compilation failed: expression has {deepening} operators, more than the {} supported",
                    checker::MAX_DEEPENING_TOKENS
                ),
            ));
        }
        // The parser is generated code; a panic in it must not take the
        // autoscaler down with it.
        let parsed = catch_unwind(|| Parser::new().enable_optional_syntax(true).parse(expression));
        let mut program = match parsed {
            Ok(Ok(ast)) => ast,
            Ok(Err(errors)) => {
                return Err(CelError::compile(
                    expression,
                    format!("compilation failed: {errors}"),
                ));
            }
            Err(_) => {
                return Err(CelError::compile(
                    expression,
                    format!("compilation failed: {PARSER_PANIC}"),
                ));
            }
        };
        checker::check(&mut program, self.decls).map_err(|m| CelError::compile(expression, m))?;
        Ok(CompiledSelector {
            expression: expression.to_string(),
            program,
            refuse_list_attributes: self.refuse_list_attributes,
        })
    }
}

/// A checked selector, ready to evaluate on any number of devices.
#[derive(Debug)]
pub struct CompiledSelector {
    expression: String,
    program: IdedExpr,
    refuse_list_attributes: bool,
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
        reset_budget();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            Value::resolve(&self.program, device.scope())
        }));
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
