//! Compile-time checks and rewrites that cel-rust lacks.
//!
//! cel-go type-checks a selector against the declared `device` type before it
//! runs; cel-rust only parses. Without this pass an unknown variable, an
//! unknown function, `device.nosuchfield` or a non-bool expression would only
//! fail when evaluated — or, worse, evaluate: cel-rust's field selection on a
//! non-map quietly yields `false`. The pass infers just enough static type to
//! reject what upstream's checker rejects, and rewrites the tree so the
//! interpreter gives upstream's answers:
//!
//! - `device.<field>` becomes a hidden per-device variable (no map clone per
//!   evaluation), `device.attributes["<domain>"]` likewise (about three times
//!   faster than a lookup in the attributes map), and lookups that cannot be
//!   resolved statically become `k in m ? m[k] : {}` — upstream returns an
//!   empty map for an unknown domain; a bare `device` becomes a map literal
//!   of the hidden variables;
//! - field selection or `has()` on a value of unknown type goes through
//!   helpers that fail on non-maps; `x.?f` gets cel-spec semantics;
//! - `cel.bind(v, init, body)` becomes the comprehension cel-go expands it to;
//! - comprehension steps, `cel.bind` values and `+` are charged against the
//!   cost budget (see [`super::library`]).

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, ListExpr, LiteralValue,
    MapEntryExpr, MapExpr, SelectExpr, operators,
};
use kube_cel::cel::common::types::{CelBool, CelString};

pub(crate) use super::check_error::{CheckError, TypeError};
use super::library::{
    ATTR_DOMAIN_PREFIX, CAP_DOMAIN_PREFIX, DECLARED, DEVICE_FIELDS, FIELD_PREFIX, INCLUDES, hidden,
};
pub(crate) use super::static_types::{Declarations, Ty};

/// Deepest expression tree accepted, after macro expansion. cel-go's parser
/// stops at 250 nested rules (enforced before parsing, see `shape`), so
/// anything it accepts without macros fits; the interpreter recurses once
/// per level, so the bound also caps the stack evaluation takes.
pub(crate) const MAX_DEPTH: usize = 250;

/// Checks and rewrites `expr` in place; the error is the complete compile message.
///
/// Returns whether the expression reads `device` at all: one that does not
/// gives the same verdict for every device.
pub(crate) fn check(expr: &mut IdedExpr, decls: Declarations) -> Result<bool, CheckError> {
    let mut checker = Checker {
        decls,
        scope: Vec::new(),
        uses_device: false,
    };
    let ty = checker.visit(expr, 0)?;
    let uses_device = checker.uses_device;
    // Upstream reports this one without the "compilation failed" prefix.
    match ty {
        Ty::Bool | Ty::Dyn => Ok(uses_device),
        other => Err(CheckError::NotBool(other.name())),
    }
}

/// Checks and rewrites `expr` whatever its result type, which it returns
/// (the conformance tests evaluate expressions of every type).
#[cfg(test)]
pub(crate) fn check_any(expr: &mut IdedExpr, decls: Declarations) -> Result<Ty, CheckError> {
    let mut checker = Checker {
        decls,
        scope: Vec::new(),
        uses_device: false,
    };
    Ok(checker.visit(expr, 0)?)
}

struct Checker {
    decls: Declarations,
    scope: Vec<(String, Ty)>,
    /// The global `device` was referenced.
    uses_device: bool,
}

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

fn ident(name: impl Into<String>) -> IdedExpr {
    node(Expr::Ident(name.into()))
}

fn string_lit(s: &str) -> IdedExpr {
    node(Expr::Literal(LiteralValue::String(CelString::from(s))))
}

fn call(func: &str, target: Option<IdedExpr>, args: Vec<IdedExpr>) -> IdedExpr {
    node(Expr::Call(CallExpr {
        func_name: func.to_string(),
        target: target.map(Box::new),
        args,
    }))
}

/// `key in map ? map[key] : {}`: upstream's empty map for an unknown domain.
fn domain_lookup(map: IdedExpr, key: IdedExpr) -> IdedExpr {
    call(
        operators::CONDITIONAL,
        None,
        vec![
            call(operators::IN, None, vec![key.clone(), map.clone()]),
            call(operators::INDEX, None, vec![map, key]),
            node(Expr::Map(MapExpr {
                entries: Vec::new(),
            })),
        ],
    )
}

/// `{"driver": @driver, …}`: a bare `device`, built only where it is used
/// as a whole value (selections of its fields read the hidden variables).
fn device_literal() -> IdedExpr {
    let entries = DEVICE_FIELDS
        .iter()
        .map(|field| IdedEntryExpr {
            id: 0,
            expr: EntryExpr::MapEntry(MapEntryExpr {
                key: string_lit(field),
                value: ident(format!("{FIELD_PREFIX}{field}")),
                optional: false,
            }),
        })
        .collect();
    node(Expr::Map(MapExpr { entries }))
}

fn string_literal(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
        _ => None,
    }
}

fn no_field_selection(ty: Ty) -> TypeError {
    TypeError::NoFieldSelection(ty.name())
}

impl Checker {
    fn lookup(&self, name: &str) -> Option<Ty> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| *t)
    }

    fn device_field(&self, field: &str) -> Result<Ty, TypeError> {
        match field {
            "driver" => Ok(Ty::String),
            "attributes" => Ok(Ty::AttrOuter { canonical: true }),
            "capacity" => Ok(Ty::CapOuter { canonical: true }),
            "allowMultipleAllocations" if self.decls.allow_multiple_allocations => Ok(Ty::Bool),
            _ => Err(TypeError::UndefinedField(field.to_string())),
        }
    }

    fn visit(&mut self, e: &mut IdedExpr, depth: usize) -> Result<Ty, TypeError> {
        if depth > MAX_DEPTH {
            return Err(TypeError::TooDeep { limit: MAX_DEPTH });
        }
        let depth = depth + 1;
        match &mut e.expr {
            Expr::Literal(lit) => Ok(match lit {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::UInt(_) => Ty::UInt,
            }),
            Expr::Ident(name) => match self.lookup(name) {
                Some(ty) => Ok(ty),
                None if name == "device" => {
                    self.uses_device = true;
                    *e = device_literal();
                    Ok(Ty::Device { global: true })
                }
                None => Err(TypeError::UndeclaredReference(name.clone())),
            },
            Expr::Select(select) => {
                let (replacement, ty) = self.visit_select(select, depth)?;
                if let Some(r) = replacement {
                    *e = r;
                }
                Ok(ty)
            }
            Expr::Call(c) => {
                let (replacement, ty) = self.visit_call(c, depth)?;
                if let Some(r) = replacement {
                    *e = r;
                }
                Ok(ty)
            }
            Expr::Comprehension(comp) => self.visit_comprehension(comp, depth),
            Expr::List(list) => {
                for el in &mut list.elements {
                    self.visit(el, depth)?;
                }
                Ok(Ty::List)
            }
            Expr::Map(map) => {
                for entry in &mut map.entries {
                    match &mut entry.expr {
                        EntryExpr::MapEntry(me) => {
                            self.visit(&mut me.key, depth)?;
                            self.visit(&mut me.value, depth)?;
                        }
                        EntryExpr::StructField(f) => {
                            return Err(TypeError::MapLiteralField(f.field.clone()));
                        }
                    }
                }
                Ok(Ty::Map)
            }
            Expr::Struct(s) => Err(TypeError::UndeclaredReference(s.type_name.clone())),
            Expr::Unspecified => Err(TypeError::Unsupported),
        }
    }

    /// Returns the replacement node (if any) and the static type.
    fn visit_select(
        &mut self,
        select: &mut SelectExpr,
        depth: usize,
    ) -> Result<(Option<IdedExpr>, Ty), TypeError> {
        let operand_ty = self.visit(&mut select.operand, depth)?;
        let field = select.field.clone();
        if select.test {
            let replacement = match operand_ty {
                Ty::Device { .. } => {
                    self.device_field(&field)?;
                    None
                }
                Ty::AttrOuter { .. }
                | Ty::CapOuter { .. }
                | Ty::AttrInner
                | Ty::CapInner
                | Ty::Map => None,
                Ty::Dyn | Ty::Optional => Some(call(
                    hidden::HAS,
                    None,
                    vec![std::mem::take(&mut *select.operand), string_lit(&field)],
                )),
                other => return Err(no_field_selection(other)),
            };
            return Ok((replacement, Ty::Bool));
        }
        match operand_ty {
            Ty::Device { global } => {
                let ty = self.device_field(&field)?;
                if global {
                    Ok((Some(ident(format!("{FIELD_PREFIX}{field}"))), ty))
                } else {
                    Ok((None, ty.decanonical()))
                }
            }
            Ty::AttrOuter { canonical } => {
                let operand = std::mem::take(&mut *select.operand);
                Ok((
                    Some(Self::domain(
                        canonical,
                        ATTR_DOMAIN_PREFIX,
                        operand,
                        string_lit(&field),
                    )),
                    Ty::AttrInner,
                ))
            }
            Ty::CapOuter { canonical } => {
                let operand = std::mem::take(&mut *select.operand);
                Ok((
                    Some(Self::domain(
                        canonical,
                        CAP_DOMAIN_PREFIX,
                        operand,
                        string_lit(&field),
                    )),
                    Ty::CapInner,
                ))
            }
            Ty::AttrInner | Ty::Map => Ok((None, Ty::Dyn)),
            Ty::CapInner => Ok((None, Ty::Quantity)),
            Ty::Dyn | Ty::Optional => Ok((
                Some(call(
                    hidden::SELECT,
                    None,
                    vec![std::mem::take(&mut *select.operand), string_lit(&field)],
                )),
                Ty::Dyn,
            )),
            other => Err(no_field_selection(other)),
        }
    }

    /// One domain of `device.attributes` or `device.capacity`: the hidden
    /// per-domain variable when the domain is a literal on the canonical map,
    /// a defaulting lookup otherwise.
    fn domain(canonical: bool, prefix: &str, map: IdedExpr, key: IdedExpr) -> IdedExpr {
        match string_literal(&key) {
            Some(domain) if canonical => ident(format!("{prefix}{domain}")),
            _ => domain_lookup(map, key),
        }
    }

    fn visit_call(
        &mut self,
        c: &mut CallExpr,
        depth: usize,
    ) -> Result<(Option<IdedExpr>, Ty), TypeError> {
        let func = c.func_name.clone();
        match func.as_str() {
            operators::INDEX | operators::OPT_INDEX => return self.visit_index(c, depth),
            operators::OPT_SELECT => return self.visit_opt_select(c, depth),
            _ => {}
        }
        if c.target.is_none()
            && let Some(ty) = self.visit_operator(c, depth)?
        {
            return Ok(ty);
        }
        if let Some(Expr::Ident(prefix)) = c.target.as_deref().map(|t| &t.expr)
            && self.lookup(prefix).is_none()
        {
            if prefix == "cel" && func == "bind" {
                return self.visit_bind(c, depth);
            }
            let qualified = format!("{prefix}.{func}");
            if let Some(decl) = DECLARED.get(qualified.as_str()) {
                if !decl.global.contains(&c.args.len()) {
                    return Err(no_overload(&qualified, c.args.len()));
                }
                for arg in &mut c.args {
                    self.visit(arg, depth)?;
                }
                return Ok((None, Ty::from_returns(decl.returns)));
            }
        }
        let decl = DECLARED
            .get(func.as_str())
            .filter(|_| func != INCLUDES || self.decls.includes)
            .ok_or_else(|| TypeError::UndeclaredReference(func.to_string()))?;
        let arities = if c.target.is_some() {
            decl.member
        } else {
            decl.global
        };
        if !arities.contains(&c.args.len()) {
            return Err(no_overload(&func, c.args.len()));
        }
        if let Some(target) = c.target.as_deref_mut() {
            self.visit(target, depth)?;
        }
        for arg in &mut c.args {
            self.visit(arg, depth)?;
        }
        Ok((None, Ty::from_returns(decl.returns)))
    }

    /// Operators (calls without a target whose names are operator symbols);
    /// `None` when `c` is not an operator.
    fn visit_operator(
        &mut self,
        c: &mut CallExpr,
        depth: usize,
    ) -> Result<Option<(Option<IdedExpr>, Ty)>, TypeError> {
        let func = c.func_name.as_str();
        let is_operator = matches!(
            func,
            operators::LOGICAL_AND
                | operators::LOGICAL_OR
                | operators::LOGICAL_NOT
                | operators::EQUALS
                | operators::NOT_EQUALS
                | operators::LESS
                | operators::LESS_EQUALS
                | operators::GREATER
                | operators::GREATER_EQUALS
                | operators::IN
                | operators::NOT_STRICTLY_FALSE
                | operators::NEGATE
                | operators::ADD
                | operators::SUBSTRACT
                | operators::MULTIPLY
                | operators::DIVIDE
                | operators::MODULO
                | operators::CONDITIONAL
        );
        if !is_operator {
            return Ok(None);
        }
        let mut types = Vec::with_capacity(c.args.len());
        for arg in &mut c.args {
            types.push(self.visit(arg, depth)?);
        }
        let ty = match (func, types.as_slice()) {
            (operators::NEGATE, [Ty::Double]) => Ty::Double,
            (operators::NEGATE, [t]) => {
                // Anything that may be an int goes through the overflow check.
                let args = std::mem::take(&mut c.args);
                let ty = if *t == Ty::Int { Ty::Int } else { Ty::Dyn };
                return Ok(Some((Some(call(hidden::NEG, None, args)), ty)));
            }
            (operators::NEGATE, _) => Ty::Dyn,
            (operators::ADD, [a, b]) if a == b && matches!(a, Ty::Int | Ty::UInt | Ty::Double) => {
                *a
            }
            (operators::ADD, [a, b]) => {
                // Anything that may be a string, bytes or list goes through
                // the charging helper.
                let args = std::mem::take(&mut c.args);
                let ty = match (a, b) {
                    (Ty::String, Ty::String) => Ty::String,
                    (Ty::List, Ty::List) => Ty::List,
                    _ => Ty::Dyn,
                };
                return Ok(Some((Some(call(hidden::ADD, None, args)), ty)));
            }
            (
                operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO,
                [a, b],
            ) if a == b && matches!(a, Ty::Int | Ty::UInt | Ty::Double) => *a,
            (
                operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO,
                _,
            ) => Ty::Dyn,
            (operators::CONDITIONAL, [_, a, b]) if a == b => a.decanonical(),
            (operators::CONDITIONAL, _) => Ty::Dyn,
            _ => Ty::Bool,
        };
        Ok(Some((None, ty)))
    }

    fn visit_index(
        &mut self,
        c: &mut CallExpr,
        depth: usize,
    ) -> Result<(Option<IdedExpr>, Ty), TypeError> {
        let optional = c.func_name == operators::OPT_INDEX;
        let [map, key] = c.args.as_mut_slice() else {
            return Err(no_overload(&c.func_name, c.args.len()));
        };
        let map_ty = self.visit(map, depth)?;
        let key_ty = self.visit(key, depth)?;
        let lookup = |prefix: &str, canonical: bool, args: &mut Vec<IdedExpr>| {
            let key = args.pop().unwrap_or_default();
            let map = args.pop().unwrap_or_default();
            Self::domain(canonical, prefix, map, key)
        };
        let (replacement, ty) = match map_ty {
            Ty::AttrOuter { canonical } => (
                Some(lookup(ATTR_DOMAIN_PREFIX, canonical, &mut c.args)),
                Ty::AttrInner,
            ),
            Ty::CapOuter { canonical } => (
                Some(lookup(CAP_DOMAIN_PREFIX, canonical, &mut c.args)),
                Ty::CapInner,
            ),
            Ty::AttrInner => (None, Ty::Dyn),
            Ty::CapInner => (None, Ty::Quantity),
            t if t.is_scalar() || matches!(t, Ty::Device { .. }) => {
                return Err(TypeError::NoOverloadTypes {
                    function: c.func_name.clone(),
                    left: t.name(),
                    right: key_ty.name(),
                });
            }
            _ => (None, Ty::Dyn),
        };
        if optional {
            // Upstream's defaulting map always "finds" a domain, so the
            // optional is present; other maps keep cel-rust's `[?]`.
            return Ok(match replacement {
                Some(r) => (Some(call("optional.of", None, vec![r])), Ty::Optional),
                None => (None, Ty::Optional),
            });
        }
        Ok((replacement, ty))
    }

    fn visit_opt_select(
        &mut self,
        c: &mut CallExpr,
        depth: usize,
    ) -> Result<(Option<IdedExpr>, Ty), TypeError> {
        let [operand, field] = c.args.as_mut_slice() else {
            return Err(no_overload(&c.func_name, c.args.len()));
        };
        let field = string_literal(field)
            .ok_or(TypeError::OptionalFieldName)?
            .to_string();
        let operand_ty = self.visit(operand, depth)?;
        let operand = std::mem::take(operand);
        let present = match operand_ty {
            Ty::Device { global: true } => {
                self.device_field(&field)?;
                Some(ident(format!("{FIELD_PREFIX}{field}")))
            }
            Ty::Device { global: false } => {
                self.device_field(&field)?;
                None
            }
            Ty::AttrOuter { canonical } => Some(Self::domain(
                canonical,
                ATTR_DOMAIN_PREFIX,
                operand.clone(),
                string_lit(&field),
            )),
            Ty::CapOuter { canonical } => Some(Self::domain(
                canonical,
                CAP_DOMAIN_PREFIX,
                operand.clone(),
                string_lit(&field),
            )),
            t if t.is_scalar() => return Err(no_field_selection(t)),
            _ => None,
        };
        let replacement = match present {
            Some(value) => call("optional.of", None, vec![value]),
            None => call(hidden::OPT_SELECT, None, vec![operand, string_lit(&field)]),
        };
        Ok((Some(replacement), Ty::Optional))
    }

    /// `cel.bind(v, init, body)` as cel-go expands it: a comprehension over
    /// an empty list whose accumulator is `v`.
    fn visit_bind(
        &mut self,
        c: &mut CallExpr,
        depth: usize,
    ) -> Result<(Option<IdedExpr>, Ty), TypeError> {
        let [var, init, body] = c.args.as_mut_slice() else {
            return Err(no_overload("cel.bind", c.args.len()));
        };
        let Expr::Ident(name) = &var.expr else {
            return Err(TypeError::BindVariable);
        };
        let name = name.clone();
        let init_ty = self.visit(init, depth)?;
        let mut init = std::mem::take(init);
        if matches!(
            init_ty,
            Ty::String | Ty::Bytes | Ty::List | Ty::Map | Ty::Dyn | Ty::Optional
        ) {
            init = call(hidden::CHARGE, None, vec![init]);
        }
        self.scope.push((name.clone(), init_ty.decanonical()));
        let body_ty = self.visit(body, depth);
        self.scope.pop();
        let body_ty = body_ty?;
        let comprehension = ComprehensionExpr {
            iter_range: node(Expr::List(ListExpr::new(Vec::new()))),
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: name.clone(),
            accu_init: init,
            loop_cond: node(Expr::Literal(LiteralValue::Boolean(CelBool::from(false)))),
            loop_step: ident(name),
            result: std::mem::take(body),
        };
        Ok((
            Some(node(Expr::Comprehension(Box::new(comprehension)))),
            body_ty,
        ))
    }

    fn visit_comprehension(
        &mut self,
        comp: &mut ComprehensionExpr,
        depth: usize,
    ) -> Result<Ty, TypeError> {
        let range_ty = self.visit(&mut comp.iter_range, depth)?;
        let init_ty = self.visit(&mut comp.accu_init, depth)?;
        let element = match range_ty {
            Ty::AttrOuter { .. } | Ty::CapOuter { .. } | Ty::AttrInner | Ty::CapInner => Ty::String,
            t if t.is_scalar() || matches!(t, Ty::Device { .. }) => {
                return Err(TypeError::NotARange(t.name()));
            }
            _ => Ty::Dyn,
        };
        let outer = self.scope.len();
        self.scope
            .push((comp.accu_var.clone(), init_ty.decanonical()));
        let accu_only = self.scope.len();
        self.scope.push((comp.iter_var.clone(), element));
        if let Some(v2) = &comp.iter_var2 {
            self.scope.push((v2.clone(), Ty::Dyn));
        }
        let body = self
            .visit(&mut comp.loop_cond, depth)
            .and_then(|_| self.visit(&mut comp.loop_step, depth));
        self.scope.truncate(accu_only);
        let result = body.and_then(|_| self.visit(&mut comp.result, depth));
        self.scope.truncate(outer);
        let mut step = std::mem::take(&mut comp.loop_step);
        unwrap_accumulator_append(&mut step, &comp.accu_var);
        comp.loop_step = call(hidden::TICK, None, vec![step]);
        result
    }
}

/// `@add(accu, [x])`, the step `map()` and `filter()` expand to, back to
/// cel-rust's own `+`: the surrounding `@tick` charges the result's size
/// anyway, and each trip through a library function converts the whole
/// accumulator twice (the bulk of the time of nested `map()`s). `filter()`
/// steps are `cond ? accu + [x] : accu`: their branches are looked at too.
fn unwrap_accumulator_append(step: &mut IdedExpr, accu_var: &str) {
    let Expr::Call(c) = &mut step.expr else {
        return;
    };
    if c.func_name == operators::CONDITIONAL {
        for branch in &mut c.args {
            unwrap_accumulator_append(branch, accu_var);
        }
        return;
    }
    let is_append = c.func_name == hidden::ADD
        && matches!(c.args.as_slice(), [a, b]
            if matches!(&a.expr, Expr::Ident(n) if n == accu_var)
                && matches!(b.expr, Expr::List(_)));
    if is_append {
        c.func_name = operators::ADD.to_string();
    }
}

fn no_overload(func: &str, argc: usize) -> TypeError {
    TypeError::NoOverloadArity {
        function: func.to_string(),
        argc,
    }
}
