//! A replacement policy with its parameters, as written on the command line:
//! `NAME[:PARAM=VALUE]...` (`lruk:k=3`, `lfuda:variant=lcs`, `s3fifo:small=20%`).
//!
//! Parameters follow the name after colons, since `--policy` lists policies separated by
//! commas. A bare word without `=` sets the first parameter that takes it: a number the first
//! numeric parameter not yet set, a name the choice parameter it belongs to. So `slru:4:lcs`
//! is `slru:segments=4:insert=lcs`, and `lfuda:lcs` is `lfuda:variant=lcs`. Every parameter is
//! checked against the policy's table ([`Kind::params`]), and an error names the policy, the
//! parameter and what it accepts.
//!
//! A [`Spec`] prints back as it parses, with only the parameters that differ from their
//! defaults (`lfuda` for the defaults), so the name of a run is the spec that reproduces it.

use super::params::Param;
use super::Kind;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// The most parameters a policy takes.
pub const MAX_PARAMS: usize = 5;

/// A replacement policy and the values of its parameters.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    kind: Kind,
    values: [f64; MAX_PARAMS],
}

/// Why a policy spec does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The name is not a policy's.
    #[error(
        "unknown replacement policy `{0}` (expected one of: {names}; `--policy help` lists them \
         with their parameters)",
        names = Kind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    )]
    UnknownPolicy(String),
    /// The policy has no parameter of that name.
    #[error("{policy}: unknown parameter `{param}` ({takes})")]
    UnknownParam {
        /// The policy's name.
        policy: &'static str,
        /// The parameter as written.
        param: String,
        /// What the policy takes.
        takes: String,
    },
    /// A bare word that no parameter takes.
    #[error("{policy}: `{word}` sets no parameter ({takes})")]
    BareWord {
        /// The policy's name.
        policy: &'static str,
        /// The word as written.
        word: String,
        /// What the policy takes.
        takes: String,
    },
    /// A value outside the parameter's domain.
    #[error("{policy}: parameter `{param}`: {why} (accepted: {accepted})")]
    BadValue {
        /// The policy's name.
        policy: &'static str,
        /// The parameter's name.
        param: &'static str,
        /// What is wrong with the value.
        why: String,
        /// What the parameter accepts.
        accepted: String,
    },
}

/// A policy's parameters in words, for errors: `takes hir (0%..=50%), variant (paper|lcs)`.
fn takes(kind: Kind) -> String {
    let p = kind.params();
    if p.is_empty() {
        return format!("{} takes no parameters", kind.name());
    }
    let list: Vec<String> = p.iter().map(|p| format!("{} ({})", p.name, p.accepted())).collect();
    format!("{} takes {}", kind.name(), list.join(", "))
}

impl Spec {
    /// `kind` with its default parameters.
    pub fn new(kind: Kind) -> Self {
        let mut values = [0.0; MAX_PARAMS];
        for (v, p) in values.iter_mut().zip(kind.params()) {
            *v = p.default;
        }
        Self { kind, values }
    }

    /// The policy.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The policy's parameter table.
    pub fn params(&self) -> &'static [Param] {
        self.kind.params()
    }

    /// The value of parameter `name`, if the policy has one.
    pub fn get(&self, name: &str) -> Option<f64> {
        let i = self.params().iter().position(|p| p.name == name)?;
        Some(self.values[i])
    }

    /// The value of parameter `name`, or `default` if the policy has none of that name.
    pub fn value(&self, name: &str, default: f64) -> f64 {
        self.get(name).unwrap_or(default)
    }

    /// The spec with parameter `name` set from `text` (checked as the command line is).
    pub fn with(mut self, name: &str, text: &str) -> Result<Self, SpecError> {
        let policy = self.kind.name();
        let params = self.params();
        let Some(i) = params.iter().position(|p| p.name.eq_ignore_ascii_case(name.trim())) else {
            return Err(SpecError::UnknownParam {
                policy,
                param: name.trim().to_string(),
                takes: takes(self.kind),
            });
        };
        let p = &params[i];
        self.values[i] = p.parse(text).map_err(|why| SpecError::BadValue {
            policy,
            param: p.name,
            why,
            accepted: p.accepted(),
        })?;
        Ok(self)
    }

    /// True if every parameter has its default value.
    pub fn is_default(&self) -> bool {
        self.params().iter().zip(&self.values).all(|(p, v)| p.default.to_bits() == v.to_bits())
    }

    /// True if the policy reads [`crate::Access::next_vtime`] (the caller must fill it in).
    pub fn needs_oracle(&self) -> bool {
        self.kind.needs_oracle()
    }

    /// True if the policy with these parameters can evict a block during a hit, which the
    /// [`Replacement`](super::Replacement) interface does not report: it runs in simulation
    /// only (libCacheSim's LIRS, `lirs:variant=lcs`).
    pub fn evicts_on_hits(&self) -> bool {
        matches!(self.kind, Kind::Lirs) && self.value("variant", 0.0) == 1.0
    }
}

impl From<Kind> for Spec {
    fn from(kind: Kind) -> Self {
        Spec::new(kind)
    }
}

impl From<&Spec> for Spec {
    fn from(spec: &Spec) -> Self {
        *spec
    }
}

impl PartialEq for Spec {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.values.iter().zip(&other.values).all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl Eq for Spec {}

impl Hash for Spec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        for v in &self.values {
            v.to_bits().hash(state);
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.name())?;
        for (p, v) in self.params().iter().zip(&self.values) {
            if p.default.to_bits() != v.to_bits() {
                write!(f, ":{}={}", p.name, p.format(*v))?;
            }
        }
        Ok(())
    }
}

impl FromStr for Spec {
    type Err = SpecError;

    /// Parses `NAME[:PARAM=VALUE]...` (see the module documentation).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.trim().split(':');
        let name = parts.next().unwrap_or_default();
        let kind: Kind = name.parse().map_err(|_| SpecError::UnknownPolicy(name.to_string()))?;
        let mut spec = Spec::new(kind);
        let mut set = [false; MAX_PARAMS];
        for item in parts.filter(|i| !i.trim().is_empty()) {
            let i = match item.split_once('=') {
                Some((name, value)) => {
                    spec = spec.with(name, value)?;
                    kind.params().iter().position(|p| p.name.eq_ignore_ascii_case(name.trim()))
                }
                None => {
                    let free = kind
                        .params()
                        .iter()
                        .enumerate()
                        .position(|(j, p)| !set[j] && p.takes_bare(item));
                    let Some(j) = free else {
                        return Err(SpecError::BareWord {
                            policy: kind.name(),
                            word: item.trim().to_string(),
                            takes: takes(kind),
                        });
                    };
                    spec = spec.with(kind.params()[j].name, item)?;
                    Some(j)
                }
            };
            if let Some(i) = i {
                set[i] = true;
            }
        }
        Ok(spec)
    }
}

/// A policy built from a [`Spec`]: how [`build`](super::build) and
/// [`with_replacement!`](crate::with_replacement) make each one.
pub trait FromSpec: Sized {
    /// A policy of `capacity` blocks with the parameters of `spec` (whose kind is this
    /// policy's; parameters it does not have take their defaults).
    fn from_spec(capacity: usize, spec: &Spec) -> Self;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_words_and_named_values_and_round_trips() {
        let s: Spec = "slru:4:lcs".parse().unwrap();
        assert_eq!(s.get("segments"), Some(4.0));
        assert_eq!(s.get("insert"), Some(1.0));
        assert_eq!(s.to_string(), "slru:segments=4:insert=lcs");
        assert_eq!(s.to_string().parse::<Spec>(), Ok(s));
        let d: Spec = "SLRU".parse().unwrap();
        assert!(d.is_default());
        assert_eq!(d.to_string(), "slru");
        assert_eq!(d, Spec::from(Kind::Slru));
        assert_ne!(d, s);
    }

    #[test]
    fn errors_name_the_policy_the_parameter_and_what_is_accepted() {
        let e = "nope:x=1".parse::<Spec>().unwrap_err().to_string();
        assert!(e.contains("`nope`") && e.contains("lru") && e.contains("help"), "{e}");
        let e = "slru:colour=red".parse::<Spec>().unwrap_err().to_string();
        assert!(e.contains("slru") && e.contains("`colour`") && e.contains("segments"), "{e}");
        let e = "slru:segments=0".parse::<Spec>().unwrap_err().to_string();
        assert!(e.contains("slru") && e.contains("`segments`") && e.contains("1..="), "{e}");
        let e = "slru:4:5".parse::<Spec>().unwrap_err().to_string();
        assert!(e.contains("`5` sets no parameter"), "{e}");
        let e = "lru:1".parse::<Spec>().unwrap_err().to_string();
        assert!(e.contains("lru takes no parameters"), "{e}");
    }
}
