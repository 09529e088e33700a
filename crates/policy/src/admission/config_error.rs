//! Invalid sieve parameters, reported as values rather than panics.

/// A sieve was configured with parameters it cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SieveConfigError {
    /// The sieve's name is not in the registry (the message lists the known ones).
    #[error("{0}")]
    Unknown(String),
    /// A parameter is outside its allowed range.
    #[error("{sieve}: {parameter} = {value} is out of range ({allowed})")]
    OutOfRange {
        /// The sieve (`sievestore-c`, ...).
        sieve: &'static str,
        /// The parameter's name (`t1`, `k`, ...).
        parameter: &'static str,
        /// The rejected value, as text.
        value: String,
        /// What would have been accepted.
        allowed: &'static str,
    },
}

impl SieveConfigError {
    /// A [`SieveConfigError::OutOfRange`].
    pub fn out_of_range(
        sieve: &'static str,
        parameter: &'static str,
        value: impl std::fmt::Display,
        allowed: &'static str,
    ) -> Self {
        Self::OutOfRange { sieve, parameter, value: value.to_string(), allowed }
    }
}
