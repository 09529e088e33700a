//! Volume names: MSR-Cambridge `host_disk`, SPC ASU numbers, device names.

use std::collections::HashMap;

/// Maps volume names to the dense `u32` ids stored in [`crate::Request::volume`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeTable {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl VolumeTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `name`, adding it if it is new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }

    /// The id of `name`, if known.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The name of volume `id`, or its number as text if the table does not know it.
    pub fn name(&self, id: u32) -> String {
        self.names.get(id as usize).cloned().unwrap_or_else(|| id.to_string())
    }

    /// All names, in id order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Number of volumes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if no volume is known.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_is_stable() {
        let mut t = VolumeTable::new();
        assert_eq!(t.intern("web_0"), 0);
        assert_eq!(t.intern("prxy_1"), 1);
        assert_eq!(t.intern("web_0"), 0);
        assert_eq!(t.name(1), "prxy_1");
        assert_eq!(t.name(9), "9");
        assert_eq!(t.len(), 2);
    }
}
