//! The parameters a replacement policy takes on the command line (`lruk:k=3`): each
//! policy file declares its own as a table of [`Param`]s, and [`Spec`](super::Spec) parses,
//! validates and prints values against that table.

use std::fmt::Write as _;

/// What values a parameter takes, and how they are written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    /// A whole number in `min..=max`.
    Int {
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// A share of the cache, written as a percentage (`1%`) or a fraction (`0.01`), in
    /// `min..=max` (fractions).
    Share {
        /// Smallest accepted fraction.
        min: f64,
        /// Largest accepted fraction.
        max: f64,
    },
    /// A real number in `min..=max`.
    Real {
        /// Smallest accepted value.
        min: f64,
        /// Largest accepted value.
        max: f64,
    },
    /// One of a few names; the value is the name's index.
    Choice(&'static [&'static str]),
}

/// One parameter of a policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Param {
    /// The name written before `=`.
    pub name: &'static str,
    /// The values it takes.
    pub domain: Domain,
    /// Its default (for a [`Domain::Choice`], the index of the default name).
    pub default: f64,
    /// One line: what it sets, in the paper's terms.
    pub help: &'static str,
}

impl Param {
    /// Parse `text` as a value of this parameter; the error says what is accepted.
    pub fn parse(&self, text: &str) -> Result<f64, String> {
        let t = text.trim();
        match self.domain {
            Domain::Int { min, max } => {
                let v: u64 = t
                    .replace('_', "")
                    .parse()
                    .map_err(|_| format!("`{t}` is not a whole number"))?;
                if v < min || v > max {
                    return Err(format!("{v} is outside {min}..={max}"));
                }
                Ok(v as f64)
            }
            Domain::Share { min, max } => {
                let v = match t.strip_suffix('%') {
                    Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                    None => t.parse::<f64>(),
                }
                .map_err(|_| format!("`{t}` is not a percentage (1%) or a fraction (0.01)"))?;
                if !v.is_finite() || v < min || v > max {
                    return Err(format!(
                        "`{t}` is outside {}..={}",
                        fmt_share(min),
                        fmt_share(max)
                    ));
                }
                Ok(v)
            }
            Domain::Real { min, max } => {
                let v: f64 = t.parse().map_err(|_| format!("`{t}` is not a number"))?;
                if !v.is_finite() || v < min || v > max {
                    return Err(format!("`{t}` is outside {min}..={max}"));
                }
                Ok(v)
            }
            Domain::Choice(names) => names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(t))
                .map(|i| i as f64)
                .ok_or_else(|| format!("`{t}` is not one of {}", names.join(", "))),
        }
    }

    /// `value` written as [`Param::parse`] reads it back.
    pub fn format(&self, value: f64) -> String {
        match self.domain {
            Domain::Int { .. } => format!("{}", value as u64),
            Domain::Share { .. } => fmt_share(value),
            Domain::Real { .. } => fmt_real(value),
            Domain::Choice(names) => names.get(value as usize).copied().unwrap_or("?").to_string(),
        }
    }

    /// What the parameter accepts, for help texts (`0%..=100%`, `1..=64`, `paper|lcs`).
    pub fn accepted(&self) -> String {
        match self.domain {
            Domain::Int { min, max } => format!("{min}..={max}"),
            Domain::Share { min, max } => format!("{}..={}", fmt_share(min), fmt_share(max)),
            Domain::Real { min, max } => format!("{}..={}", fmt_real(min), fmt_real(max)),
            Domain::Choice(names) => names.join("|"),
        }
    }

    /// True if a bare word (no `=`) names this parameter's value: a choice's name, or a
    /// number for a numeric parameter.
    pub fn takes_bare(&self, word: &str) -> bool {
        match self.domain {
            Domain::Choice(names) => names.iter().any(|n| n.eq_ignore_ascii_case(word.trim())),
            _ => word.trim().starts_with(|c: char| c.is_ascii_digit() || c == '.'),
        }
    }
}

/// A fraction as a percentage with at most six decimals (`0.01` → `1%`).
fn fmt_share(v: f64) -> String {
    format!("{}%", fmt_real(v * 100.0))
}

/// A real with at most six decimals, trailing zeros dropped.
fn fmt_real(v: f64) -> String {
    let mut s = String::new();
    let _ = write!(s, "{:.6}", v);
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    s
}

/// The `seed=` parameter of the randomized policies.
pub const SEED: Param = Param {
    name: "seed",
    domain: Domain::Int { min: 0, max: u32::MAX as u64 },
    default: 1.0,
    help: "seed of the policy's random numbers (runs with the same seed are identical)",
};

/// The `variant=` parameter of a policy that also offers libCacheSim's reading of the paper.
pub const VARIANT: Param = Param {
    name: "variant",
    domain: Domain::Choice(&["paper", "lcs"]),
    default: 0.0,
    help: "`paper` as published, or `lcs` to reproduce libCacheSim's implementation",
};

#[cfg(test)]
mod tests {
    use super::*;

    const SHARE: Param = Param {
        name: "hir",
        domain: Domain::Share { min: 0.0, max: 0.5 },
        default: 0.01,
        help: "",
    };

    #[test]
    fn shares_read_percentages_and_fractions() {
        assert_eq!(SHARE.parse("1%"), Ok(0.01));
        assert_eq!(SHARE.parse("0.25"), Ok(0.25));
        assert_eq!(SHARE.format(0.01), "1%");
        assert_eq!(SHARE.format(0.005), "0.5%");
        assert!(SHARE.parse("60%").unwrap_err().contains("0%..=50%"));
        assert!(SHARE.parse("x").is_err());
    }

    #[test]
    fn ints_choices_and_bare_words() {
        let k = Param { name: "k", domain: Domain::Int { min: 1, max: 8 }, default: 2.0, help: "" };
        assert_eq!(k.parse("3"), Ok(3.0));
        assert!(k.parse("9").unwrap_err().contains("1..=8"));
        assert!(k.parse("2.5").is_err());
        assert!(k.takes_bare("3") && !k.takes_bare("lcs"));
        assert_eq!(VARIANT.parse("LCS"), Ok(1.0));
        assert_eq!(VARIANT.format(1.0), "lcs");
        assert!(VARIANT.takes_bare("lcs") && !VARIANT.takes_bare("4"));
        assert!(VARIANT.parse("other").unwrap_err().contains("paper, lcs"));
    }
}
