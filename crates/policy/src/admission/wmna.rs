//! WMNA, write-miss-no-allocate: allocate on read misses only (SieveStore section 1 and
//! Table 3, the second conventional allocation policy).

use super::Admission;
use crate::Access;

/// Allocate on a read miss; a write miss goes to backing storage without allocation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wmna;

impl Admission for Wmna {
    fn name(&self) -> &'static str {
        "wmna"
    }

    #[inline]
    fn observe(&mut self, _access: &Access, _hit: bool) {}

    #[inline]
    fn admit(&mut self, access: &Access) -> bool {
        !access.op.is_write()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_read_misses_only() {
        let mut a = Wmna;
        let mut w = Access::read(1, 0);
        w.op = ember_trace::Op::Write;
        assert!(a.admit(&Access::read(1, 0)));
        assert!(!a.admit(&w));
    }
}
