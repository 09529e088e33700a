//! AOD, allocate-on-demand: every miss is allocated (SieveStore section 2, the baseline of
//! conventional caches and the default of `ember sim`).

use super::Admission;
use crate::Access;

/// Allocate on every miss, read or write.
#[derive(Clone, Copy, Debug, Default)]
pub struct Aod;

impl Admission for Aod {
    fn name(&self) -> &'static str {
        "aod"
    }

    #[inline]
    fn observe(&mut self, _access: &Access, _hit: bool) {}

    #[inline]
    fn admit(&mut self, _access: &Access) -> bool {
        true
    }

    #[inline]
    fn admits_every_miss(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_every_miss() {
        let mut a = Aod;
        let mut w = Access::read(1, 0);
        w.op = ember_trace::Op::Write;
        assert!(a.admit(&Access::read(1, 0)));
        assert!(a.admit(&w));
    }
}
