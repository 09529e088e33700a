//! How the config file writes the settings that are numbers with a unit: sizes as
//! `ember_units::Size` ("64MiB" or an integer of bytes), durations as `ember_units::Dur`
//! ("10ms", "8h" or an integer of seconds), permission bits in octal, and values kept as
//! their text. Each module is a `#[serde(with = "...")]` adapter, so the settings keep their
//! plain types (`u64`, `f64` seconds, `Duration`).

use std::fmt;
use std::time::Duration;

use ember_units::{Dur, Size};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serializer};

/// A value kept as its text (`Display` and `FromStr`).
pub mod text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::fmt::Display;
    use std::str::FromStr;

    pub fn serialize<T: Display, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An optional text that a file may also write as a number (`max-dirty = 1000` or
/// `"12.5%"`).
pub mod opt_text {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.serialize_str(v),
            None => s.serialize_none(),
        }
    }

    struct TextOrNumber;

    impl Visitor<'_> for TextOrNumber {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number or a string")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(TextOrNumber)
    }
}

/// A byte count (`u64` or `u32`) written as a [`Size`].
pub mod size {
    use super::*;

    pub fn serialize<T: Copy + Into<u64>, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&Size((*v).into()))
    }

    pub fn deserialize<'de, T: TryFrom<u64>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let bytes = Size::deserialize(d)?.bytes();
        T::try_from(bytes).map_err(|_| de::Error::custom(format!("{bytes} bytes is too large")))
    }
}

/// An optional byte count written as a [`Size`].
pub mod opt_size {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(&Size(*v)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(Some(Size::deserialize(d)?.bytes()))
    }
}

/// A [`Duration`] written as a [`Dur`].
pub mod dur {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&Dur(*v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Dur::deserialize(d)?.duration())
    }
}

/// A duration in nanoseconds (`u64`) written as a [`Dur`].
pub mod nanos {
    use super::*;

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&Dur(Duration::from_nanos(*v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let d = Dur::deserialize(d)?.duration();
        u64::try_from(d.as_nanos()).map_err(|_| de::Error::custom("too long a duration"))
    }
}

/// Seconds (`f64`) written as a [`Dur`] or a number of seconds (`2.5`).
pub mod secs {
    use super::*;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() && *v >= 0.0 && v.fract() == 0.0 {
            s.collect_str(&Dur(Duration::from_secs_f64(*v)))
        } else {
            s.serialize_f64(*v)
        }
    }

    struct Seconds;

    impl Visitor<'_> for Seconds {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number of seconds or a duration such as \"10s\"")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            ember_units::parse_duration(v).map(|d| d.as_secs_f64()).map_err(E::custom)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        d.deserialize_any(Seconds)
    }
}

/// Permission bits: an octal string ("600", "0o660") or an integer (TOML's `0o600`).
pub mod mode {
    use super::*;

    pub fn serialize<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{v:o}"))
    }

    struct Mode;

    impl Visitor<'_> for Mode {
        type Value = u32;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("permission bits: an octal string such as \"600\" or 0o600")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v).ok().filter(|&m| m <= 0o777).ok_or_else(|| {
                E::custom(format!("{v:#o}: only permission bits (at most 0o777) are allowed"))
            })
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
            u64::try_from(v)
                .map_err(|_| E::custom("a negative mode"))
                .and_then(|v| self.visit_u64(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u32, E> {
            let m = u32::from_str_radix(v.trim_start_matches("0o"), 8)
                .map_err(|_| E::custom(format!("{v:?} is not an octal mode (e.g. \"600\")")))?;
            self.visit_u64(u64::from(m))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        d.deserialize_any(Mode)
    }
}
