//! The oracle replacement of SieveStore section 3.1 / Table 2: "an oracle-replacement
//! algorithm that magically evicts only those blocks that are not in the top 1% frequently
//! accessed blocks", with the hot blocks "always cache-resident". The hot set is resident
//! from the start and never evicted; any other allocated block occupies one spare slot until
//! the next allocation replaces it.

use ember_policy::admission::key_hash::{key_map, KeyMap};
use ember_policy::{Access, Replacement};

/// Replacement that pins a hot set and evicts only non-hot blocks.
#[derive(Clone, Debug)]
pub struct OracleResident {
    hot: KeyMap<()>,
    spare: Option<u64>,
}

impl OracleResident {
    /// A cache holding `hot` (already resident) plus one slot for other blocks.
    pub fn new(hot: impl IntoIterator<Item = u64>) -> Self {
        let mut m = key_map();
        for k in hot {
            m.insert(k, ());
        }
        Self { hot: m, spare: None }
    }
}

impl Replacement for OracleResident {
    fn name(&self) -> &'static str {
        "oracle-resident"
    }

    fn capacity(&self) -> usize {
        self.hot.len() + 1
    }

    fn len(&self) -> usize {
        self.hot.len() + self.spare.is_some() as usize
    }

    fn contains(&self, key: u64) -> bool {
        self.hot.contains_key(&key) || self.spare == Some(key)
    }

    fn lookup(&mut self, access: &Access) -> bool {
        self.contains(access.key)
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.hot.contains_key(&access.key) {
            return None;
        }
        self.spare.replace(access.key)
    }

    fn remove(&mut self, key: u64) -> bool {
        if self.spare == Some(key) {
            self.spare = None;
            return true;
        }
        self.hot.remove(&key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_hot_blocks_and_cycles_the_spare_slot() {
        let mut c = OracleResident::new([1, 2]);
        assert!(c.lookup(&Access::read(1, 0)));
        assert_eq!(c.insert(&Access::read(7, 1)), None);
        assert_eq!(c.insert(&Access::read(8, 2)), Some(7));
        assert!(c.contains(2) && c.contains(8) && !c.contains(7));
        assert_eq!(c.len(), 3);
    }
}
