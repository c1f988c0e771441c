//! Why the static checker refuses a selector, in cel-go's words (the CEL
//! conformance tests and users see these messages).

/// A type error found while checking one expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TypeError {
    /// More than `limit` nested levels (the checker's bound).
    #[error("expression is nested more than {limit} levels deep")]
    TooDeep {
        /// The deepest nesting the checker accepts.
        limit: usize,
    },
    /// A `device` field that is not declared.
    #[error("undefined field '{0}'")]
    UndefinedField(String),
    /// An identifier, function or type name that is not declared.
    #[error("undeclared reference to '{0}'")]
    UndeclaredReference(String),
    /// A field initialiser in a map literal.
    #[error("unexpected field {0:?} in a map literal")]
    MapLiteralField(String),
    /// An expression kind the parser never produces for a selector.
    #[error("unsupported expression")]
    Unsupported,
    /// `.field` on a type without fields.
    #[error("type '{0}' does not support field selection")]
    NoFieldSelection(&'static str),
    /// A function called with an arity it has no overload for.
    #[error("found no matching overload for '{function}' applied to {argc} argument(s)")]
    NoOverloadArity {
        /// The function.
        function: String,
        /// The number of arguments.
        argc: usize,
    },
    /// A function applied to argument types it has no overload for.
    #[error("found no matching overload for '{function}' applied to '({left}, {right})'")]
    NoOverloadTypes {
        /// The function.
        function: String,
        /// The first argument's type.
        left: &'static str,
        /// The second argument's type.
        right: &'static str,
    },
    /// `?.` without a field name.
    #[error("optional field selection needs a field name")]
    OptionalFieldName,
    /// `cel.bind` with a variable that is not an identifier.
    #[error("cel.bind() variable name must be a simple identifier")]
    BindVariable,
    /// A comprehension over a scalar.
    #[error("expression of type '{0}' cannot be range of a comprehension")]
    NotARange(&'static str),
}

/// Why an expression does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CheckError {
    /// A type error somewhere in the expression.
    #[error("compilation failed: {0}")]
    Type(#[from] TypeError),
    /// The whole expression is not a bool (upstream reports this without
    /// the "compilation failed" prefix).
    #[error("must evaluate to bool or the unknown type, not {0}")]
    NotBool(&'static str),
}
