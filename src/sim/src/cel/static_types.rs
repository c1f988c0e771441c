//! The static types the CEL checker infers (`Ty`) and what the environment
//! declares (`Declarations`): the checker's vocabulary, apart from its passes.

use super::library::Returns;

/// What the environment declares beyond the common library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Declarations {
    /// `device.allowMultipleAllocations` exists.
    pub(crate) allow_multiple_allocations: bool,
    /// `includes()` exists.
    pub(crate) includes: bool,
}

/// The static types the checker distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// The `device` object; `global` when it is the variable itself.
    Device {
        global: bool,
    },
    /// `device.attributes`; `canonical` when it is the hidden variable itself.
    AttrOuter {
        canonical: bool,
    },
    /// `device.capacity`; `canonical` as above.
    CapOuter {
        canonical: bool,
    },
    /// One attribute domain: id → attribute value.
    AttrInner,
    /// One capacity domain: id → quantity.
    CapInner,
    Bool,
    Int,
    UInt,
    Double,
    String,
    Bytes,
    Null,
    List,
    Map,
    Quantity,
    Semver,
    Optional,
    Dyn,
}

impl Ty {
    /// cel-go's spelling, for error messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            Ty::Device { .. } => "kubernetes.DRADevice",
            Ty::AttrOuter { .. } => "map(string, map(string, dyn))",
            Ty::CapOuter { .. } => "map(string, map(string, kubernetes.Quantity))",
            Ty::AttrInner => "map(string, dyn)",
            Ty::CapInner => "map(string, kubernetes.Quantity)",
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::UInt => "uint",
            Ty::Double => "double",
            Ty::String => "string",
            Ty::Bytes => "bytes",
            Ty::Null => "null_type",
            Ty::List => "list(dyn)",
            Ty::Map => "map(dyn, dyn)",
            Ty::Quantity => "kubernetes.Quantity",
            Ty::Semver => "kubernetes.Semver",
            Ty::Optional => "optional_type(dyn)",
            Ty::Dyn => "dyn",
        }
    }

    /// The same type once the value has been copied out of its hidden variable.
    pub(super) fn decanonical(self) -> Self {
        match self {
            Ty::Device { .. } => Ty::Device { global: false },
            Ty::AttrOuter { .. } => Ty::AttrOuter { canonical: false },
            Ty::CapOuter { .. } => Ty::CapOuter { canonical: false },
            other => other,
        }
    }

    /// Types that never support field selection or indexing.
    pub(super) fn is_scalar(self) -> bool {
        matches!(
            self,
            Ty::Bool
                | Ty::Int
                | Ty::UInt
                | Ty::Double
                | Ty::String
                | Ty::Bytes
                | Ty::Null
                | Ty::Quantity
                | Ty::Semver
        )
    }

    pub(super) fn from_returns(r: Returns) -> Self {
        match r {
            Returns::Bool => Ty::Bool,
            Returns::Int => Ty::Int,
            Returns::Double => Ty::Double,
            Returns::String => Ty::String,
            Returns::List => Ty::List,
            Returns::Quantity => Ty::Quantity,
            Returns::Semver => Ty::Semver,
            Returns::Optional => Ty::Optional,
            Returns::Dyn => Ty::Dyn,
        }
    }
}
