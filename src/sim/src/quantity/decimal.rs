//! An exact decimal, `(-1)^neg × digits × 10^exp`: what upstream's
//! `inf.Dec` holds for a quantity that does not fit its int64 form. Enough
//! arithmetic for parsing (nano rounding, binary suffixes, the binary cap)
//! and for CEL's quantity library (compare, add, subtract).

use std::cmp::Ordering;

/// Aligning two values whose exponents are further apart than this would
/// allocate that many digits; upstream's big decimals would too, but here a
/// pathological input must not take the process down.
const MAX_ALIGNED_DIGITS: i64 = 4096;

/// An exact decimal: `(-1)^neg × digits × 10^exp`, where `digits` has no
/// leading or trailing zeros (empty means zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decimal {
    pub(crate) neg: bool,
    pub(crate) digits: Vec<u8>,
    pub(crate) exp: i64,
}

impl Decimal {
    pub(crate) fn zero() -> Self {
        Self {
            neg: false,
            digits: Vec::new(),
            exp: 0,
        }
    }

    pub(crate) fn from_i64(value: i64, scale: i64) -> Self {
        let digits = value
            .unsigned_abs()
            .to_string()
            .bytes()
            .map(|b| b - b'0')
            .collect();
        Self::normalized(value < 0, digits, scale)
    }

    /// Strips leading and trailing zeros; a zero value is never negative.
    pub(crate) fn normalized(neg: bool, mut digits: Vec<u8>, mut exp: i64) -> Self {
        let leading = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exp = exp.saturating_add(1);
        }
        if digits.is_empty() {
            return Self::zero();
        }
        Self { neg, digits, exp }
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    pub(crate) fn sign(&self) -> i64 {
        match (self.is_zero(), self.neg) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// Position of the most significant digit; larger means a larger magnitude.
    fn order(&self) -> i64 {
        i64::try_from(self.digits.len())
            .unwrap_or(i64::MAX)
            .saturating_add(self.exp)
    }

    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            (false, false) => {}
        }
        self.order()
            .cmp(&other.order())
            .then_with(|| self.digits.cmp(&other.digits))
    }

    /// Both non-zero operands as little-endian digit vectors at a common
    /// exponent, or `None` when that would need more than
    /// [`MAX_ALIGNED_DIGITS`] digits.
    fn aligned(&self, other: &Self) -> Option<(Vec<u8>, Vec<u8>, i64)> {
        let min_exp = self.exp.min(other.exp);
        let widen = |d: &Decimal| -> Option<Vec<u8>> {
            let shift = d.exp.checked_sub(min_exp)?;
            let len = i64::try_from(d.digits.len()).ok()?.checked_add(shift)?;
            if len > MAX_ALIGNED_DIGITS {
                return None;
            }
            let mut out = vec![0u8; usize::try_from(shift).ok()?];
            out.extend(d.digits.iter().rev());
            Some(out)
        };
        Some((widen(self)?, widen(other)?, min_exp))
    }

    pub(crate) fn checked_add(&self, other: &Self) -> Option<Self> {
        if self.is_zero() {
            return Some(other.clone());
        }
        if other.is_zero() {
            return Some(self.clone());
        }
        let (a, b, exp) = self.aligned(other)?;
        if self.neg == other.neg {
            return Some(Self::from_le(self.neg, add_le(&a, &b), exp));
        }
        match self.cmp_magnitude(other) {
            Ordering::Equal => Some(Self::zero()),
            Ordering::Greater => Some(Self::from_le(self.neg, sub_le(&a, &b), exp)),
            Ordering::Less => Some(Self::from_le(other.neg, sub_le(&b, &a), exp)),
        }
    }

    pub(crate) fn negated(&self) -> Self {
        if self.is_zero() {
            return self.clone();
        }
        Self {
            neg: !self.neg,
            ..self.clone()
        }
    }

    fn from_le(neg: bool, mut le: Vec<u8>, exp: i64) -> Self {
        le.reverse();
        Self::normalized(neg, le, exp)
    }

    /// Multiplies the magnitude by `2^power`.
    pub(crate) fn mul_pow2(&self, power: u32) -> Self {
        let mut le: Vec<u8> = self.digits.iter().rev().copied().collect();
        for _ in 0..power {
            let mut carry = 0u8;
            for d in &mut le {
                let v = *d * 2 + carry;
                *d = v % 10;
                carry = v / 10;
            }
            if carry > 0 {
                le.push(carry);
            }
        }
        Self::from_le(self.neg, le, self.exp)
    }

    /// Rounds away from zero to a multiple of 10^-9, as upstream does for
    /// every non-zero parsed quantity.
    pub(crate) fn round_up_to_nano(&self) -> Self {
        const NANO: i64 = -9;
        if self.is_zero() || self.exp >= NANO {
            return self.clone();
        }
        let keep = self.order().saturating_sub(NANO);
        if keep <= 0 {
            return Self {
                neg: self.neg,
                digits: vec![1],
                exp: NANO,
            };
        }
        let keep = usize::try_from(keep).unwrap_or(usize::MAX);
        let dropped_nonzero = self.digits.iter().skip(keep).any(|d| *d != 0);
        let kept: Vec<u8> = self.digits.iter().take(keep).rev().copied().collect();
        let kept = if dropped_nonzero {
            add_le(&kept, &[1])
        } else {
            kept
        };
        Self::from_le(self.neg, kept, NANO)
    }

    /// The value in nano units, when it is a whole number of them and fits
    /// an `i128`.
    pub(crate) fn to_nanos(&self) -> Option<i128> {
        const NANO: i64 = -9;
        if self.is_zero() {
            return Some(0);
        }
        let shift = self.exp.checked_sub(NANO)?;
        if shift < 0 {
            return None;
        }
        let mut nanos: i128 = 0;
        for d in &self.digits {
            nanos = nanos.checked_mul(10)?.checked_add(i128::from(*d))?;
        }
        for _ in 0..shift {
            nanos = nanos.checked_mul(10)?;
        }
        Some(if self.neg { -nanos } else { nanos })
    }

    pub(crate) fn to_f64(&self) -> f64 {
        if self.is_zero() {
            return 0.0;
        }
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if self.neg { "-" } else { "" };
        // Rust's float parser handles any exponent, returning ±inf when out of range.
        format!("{sign}{digits}e{}", self.exp)
            .parse()
            .unwrap_or(f64::NAN)
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.sign().cmp(&other.sign()) {
            Ordering::Equal if self.neg => other.cmp_magnitude(self),
            Ordering::Equal => self.cmp_magnitude(other),
            unequal => unequal,
        }
    }
}

fn add_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0u8;
    for i in 0..a.len().max(b.len()) {
        let v = a.get(i).copied().unwrap_or(0) + b.get(i).copied().unwrap_or(0) + carry;
        out.push(v % 10);
        carry = v / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out
}

/// `a - b` for magnitudes with `a >= b`.
fn sub_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i8;
    for (i, &ad) in a.iter().enumerate() {
        let mut v = i8::try_from(ad).unwrap_or(0)
            - borrow
            - i8::try_from(b.get(i).copied().unwrap_or(0)).unwrap_or(0);
        borrow = 0;
        if v < 0 {
            v += 10;
            borrow = 1;
        }
        out.push(u8::try_from(v).unwrap_or(0));
    }
    out
}
