//! A fixed allocation: only the blocks of a given set are ever allocated (SieveStore section
//! 3.1's "fixed allocation for the address", the counterpart of Belady's selective
//! allocation in the 1-entry-cache example).

use super::key_hash::{key_map, KeyMap};
use super::Admission;
use crate::Access;

/// Admit exactly the blocks of a set chosen in advance.
#[derive(Clone, Debug, Default)]
pub struct FixedSet {
    keys: KeyMap<()>,
}

impl FixedSet {
    /// A sieve that admits only `keys`.
    pub fn new(keys: impl IntoIterator<Item = u64>) -> Self {
        let mut m = key_map();
        for k in keys {
            m.insert(k, ());
        }
        Self { keys: m }
    }
}

impl Admission for FixedSet {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn observe(&mut self, _access: &Access, _hit: bool) {}

    fn admit(&mut self, access: &Access) -> bool {
        self.keys.contains_key(&access.key)
    }

    fn memory_bytes(&self) -> usize {
        self.keys.capacity() * (std::mem::size_of::<u64>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_only_the_set() {
        let mut f = FixedSet::new([3, 9]);
        assert!(f.admit(&Access::read(3, 0)));
        assert!(f.admit(&Access::read(9, 1)));
        assert!(!f.admit(&Access::read(4, 2)));
    }
}
