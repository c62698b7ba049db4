//! Symbolic dimension expressions used in problem shapes (`"T"`, `"2*H"`, `"H/2"`, `4096`).
//! A shape set binds every symbol to an integer; `resolve` turns an expression into a size.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// One dimension of a declared tensor shape: a product/quotient of integers and symbols,
/// evaluated left to right (`2*H`, `N/8`, `B*H`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DimRepr", into = "DimRepr")]
pub struct DimExpr {
    text: String,
    terms: Vec<(Op, Atom)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Mul,
    Div,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Atom {
    Lit(u64),
    Sym(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum DimRepr {
    Int(u64),
    Text(String),
}

impl TryFrom<DimRepr> for DimExpr {
    type Error = String;
    fn try_from(r: DimRepr) -> Result<Self, String> {
        match r {
            DimRepr::Int(n) => DimExpr::parse(&n.to_string()),
            DimRepr::Text(s) => DimExpr::parse(&s),
        }
    }
}

impl From<DimExpr> for DimRepr {
    fn from(d: DimExpr) -> Self {
        match d.terms.as_slice() {
            [(Op::Mul, Atom::Lit(n))] => DimRepr::Int(*n),
            _ => DimRepr::Text(d.text),
        }
    }
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl DimExpr {
    /// Parse `2*H`, `H/2`, `T`, `128`. Symbols are identifiers starting with a letter.
    pub fn parse(s: &str) -> Result<Self, String> {
        let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        if text.is_empty() {
            return Err("empty dimension".into());
        }
        let mut terms = Vec::new();
        let mut op = Op::Mul;
        let mut cur = String::new();
        let push = |cur: &mut String, op: Op, terms: &mut Vec<(Op, Atom)>| -> Result<(), String> {
            if cur.is_empty() {
                return Err(format!("malformed dimension expression {text:?}"));
            }
            let atom = if cur.chars().all(|c| c.is_ascii_digit()) {
                let n: u64 = cur.parse().map_err(|e| format!("{cur:?}: {e}"))?;
                if n == 0 && op == Op::Div {
                    return Err(format!("division by zero in {text:?}"));
                }
                Atom::Lit(n)
            } else if cur.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && cur.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                Atom::Sym(cur.clone())
            } else {
                return Err(format!("bad term {cur:?} in dimension {text:?}"));
            };
            terms.push((op, atom));
            cur.clear();
            Ok(())
        };
        for c in text.chars() {
            match c {
                '*' | '/' => {
                    push(&mut cur, op, &mut terms)?;
                    op = if c == '*' { Op::Mul } else { Op::Div };
                }
                _ => cur.push(c),
            }
        }
        push(&mut cur, op, &mut terms)?;
        Ok(DimExpr { text, terms })
    }

    /// Symbols this expression uses.
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().filter_map(|(_, a)| match a {
            Atom::Sym(s) => Some(s.as_str()),
            Atom::Lit(_) => None,
        })
    }

    /// Evaluate under a binding of symbols; errors name the missing symbol or an inexact division.
    pub fn resolve(&self, dims: &BTreeMap<String, u64>) -> Result<u64, String> {
        let mut v: u64 = 1;
        for (op, atom) in &self.terms {
            let x = match atom {
                Atom::Lit(n) => *n,
                Atom::Sym(s) => *dims
                    .get(s)
                    .ok_or_else(|| format!("dimension {s} is not bound"))?,
            };
            match op {
                Op::Mul => v = v.checked_mul(x).ok_or("dimension overflows u64")?,
                Op::Div => {
                    if x == 0 || !v.is_multiple_of(x) {
                        return Err(format!(
                            "{} is not an exact division ({v} / {x})",
                            self.text
                        ));
                    }
                    v /= x;
                }
            }
        }
        Ok(v)
    }
}

/// A tiny arithmetic expression over shape symbols for FLOP counts: `2*M*N*K` or `M*N*(2*K+1)`
/// is not supported; only products of terms joined by `+` (e.g. `2*M*N*K + M*N`).
pub fn eval_sum_of_products(expr: &str, dims: &BTreeMap<String, u64>) -> Result<f64, String> {
    let mut total = 0f64;
    for part in expr.split('+') {
        let d = DimExpr::parse(part)?;
        total += d.resolve(dims)? as f64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn parses_and_resolves() {
        let d = DimExpr::parse("2*H").unwrap();
        assert_eq!(d.resolve(&dims(&[("H", 7)])).unwrap(), 14);
        let d = DimExpr::parse("H / 2").unwrap();
        assert_eq!(d.resolve(&dims(&[("H", 8)])).unwrap(), 4);
        assert!(
            d.resolve(&dims(&[("H", 7)])).is_err(),
            "inexact division must fail"
        );
        assert!(DimExpr::parse("2**H").is_err());
        assert!(DimExpr::parse("").is_err());
        assert!(DimExpr::parse("H-1").is_err());
        let d = DimExpr::parse("T").unwrap();
        assert!(d
            .resolve(&dims(&[]))
            .unwrap_err()
            .contains("T is not bound"));
    }

    #[test]
    fn serde_roundtrip_int_and_text() {
        #[derive(Serialize, Deserialize)]
        struct S {
            shape: Vec<DimExpr>,
        }
        let s: S = toml::from_str(r#"shape = [4096, "2*H"]"#).unwrap();
        assert_eq!(s.shape[0].resolve(&dims(&[])).unwrap(), 4096);
        let back = toml::to_string(&s).unwrap();
        assert!(back.contains("4096") && back.contains("2*H"), "{back}");
    }

    #[test]
    fn flops_expression() {
        let v =
            eval_sum_of_products("2*M*N*K + M*N", &dims(&[("M", 2), ("N", 3), ("K", 4)])).unwrap();
        assert_eq!(v, 54.0);
    }
}
