//! A decimal number followed by a unit, and its exact value in the unit's smallest part.

use crate::error::Problem;

/// The most significant digits after the decimal point that are read (10^38 fits in u128).
const MAX_FRACTION_DIGITS: usize = 38;

/// A non-negative decimal number as written: the digits before and after the point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decimal<'a> {
    int: &'a str,
    frac: &'a str,
}

/// Split trimmed `text` into a number (`12`, `1.5`) and the unit after it (whitespace
/// between them allowed; the unit may be empty).
pub(crate) fn split(text: &str) -> Result<(Decimal<'_>, &str), Problem> {
    let t = text.trim();
    if t.is_empty() {
        return Err(Problem::Empty);
    }
    let int_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if int_end == 0 {
        return Err(Problem::NotANumber);
    }
    let (int, rest) = t.split_at(int_end);
    let (frac, rest) = match rest.strip_prefix('.') {
        Some(after) => {
            let frac_end = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
            if frac_end == 0 {
                return Err(Problem::NotANumber);
            }
            after.split_at(frac_end)
        }
        None => ("", rest),
    };
    Ok((Decimal { int, frac }, rest.trim_start()))
}

/// `digits` (ASCII digits only) as a number, `None` if it does not fit.
fn digits_value(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |v, d| v.checked_mul(10)?.checked_add(u128::from(d - b'0')))
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Decimal<'_> {
    /// The number times `unit`, exactly: an error if the fraction leaves a part of one.
    pub(crate) fn times(&self, unit: u64) -> Result<u128, Problem> {
        let unit = u128::from(unit);
        let int =
            digits_value(self.int).and_then(|i| i.checked_mul(unit)).ok_or(Problem::TooLarge)?;
        let frac = self.frac.trim_end_matches('0');
        if frac.is_empty() {
            return Ok(int);
        }
        if frac.len() > MAX_FRACTION_DIGITS {
            return Err(Problem::TooPrecise);
        }
        // frac / 10^n in lowest terms is p / q; p / q * unit is whole iff q divides unit.
        let (f, ten_n) =
            (digits_value(frac).ok_or(Problem::TooPrecise)?, 10u128.pow(frac.len() as u32));
        let g = gcd(f, ten_n);
        let (p, q) = (f / g, ten_n / g);
        if !unit.is_multiple_of(q) {
            return Err(Problem::NotWhole);
        }
        // p < q, so the fraction's part is below `unit` and cannot overflow.
        int.checked_add(p * (unit / q)).ok_or(Problem::TooLarge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, unit: u64) -> Result<u128, Problem> {
        let (d, rest) = split(text)?;
        assert_eq!(rest, "", "{text}");
        d.times(unit)
    }

    #[test]
    fn splits_number_and_unit() {
        assert_eq!(split(" 12 KiB ").map(|(_, u)| u), Ok("KiB"));
        assert_eq!(split("1.5M").map(|(_, u)| u), Ok("M"));
        assert_eq!(split("7").map(|(_, u)| u), Ok(""));
        assert_eq!(split("").map(|(_, u)| u), Err(Problem::Empty));
        assert_eq!(split("  ").map(|(_, u)| u), Err(Problem::Empty));
        for bad in ["K", "-1", "+1", ".5", "1.", "1.K", "x1"] {
            assert_eq!(split(bad).map(|(_, u)| u), Err(Problem::NotANumber), "{bad}");
        }
    }

    #[test]
    fn fractions_are_exact_or_refused() {
        assert_eq!(value("1.5", 1024), Ok(1536));
        assert_eq!(value("2.000", 1), Ok(2));
        assert_eq!(value("0.3", 1024), Err(Problem::NotWhole));
        assert_eq!(value("1.5", 1), Err(Problem::NotWhole));
        // 2^-20 of a MiB is one byte: 20 digits after the point.
        assert_eq!(value("0.00000095367431640625", 1 << 20), Ok(1));
        assert_eq!(value("0.000000953674316406251", 1 << 20), Err(Problem::NotWhole));
        let long = format!("1.{}1", "0".repeat(40));
        assert_eq!(value(&long, 1 << 20), Err(Problem::TooPrecise));
        // Trailing zeros are not significant.
        let zeros = format!("3.{}", "0".repeat(60));
        assert_eq!(value(&zeros, 1), Ok(3));
    }

    #[test]
    fn large_values_are_exact_or_too_large() {
        assert_eq!(value("18446744073709551615", 1), Ok(u128::from(u64::MAX)));
        assert_eq!(value(&"9".repeat(39), 1), Err(Problem::TooLarge));
        assert_eq!(value(&"9".repeat(38), 1 << 60), Err(Problem::TooLarge));
    }
}
