//! [`ExportMap`]: a fixed set of named exports, the plain [`ExportSet`].

use std::sync::Arc;

use crate::export::{Export, ExportSet};

/// Named exports with descriptions, in insertion order. The empty name selects the default
/// export: the one marked with [`ExportMap::default_export`], else the first added.
#[derive(Default, Clone)]
pub struct ExportMap {
    entries: Vec<(String, String, Arc<dyn Export>)>,
    default: Option<String>,
}

impl std::fmt::Debug for ExportMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportMap")
            .field("names", &self.entries.iter().map(|e| &e.0).collect::<Vec<_>>())
            .field("default", &self.default)
            .finish()
    }
}

impl ExportMap {
    /// No exports.
    pub fn new() -> ExportMap {
        ExportMap::default()
    }

    /// Add (or replace) the export `name`.
    pub fn with(mut self, name: &str, description: &str, export: Arc<dyn Export>) -> ExportMap {
        self.entries.retain(|e| e.0 != name);
        self.entries.push((name.to_string(), description.to_string(), export));
        self
    }

    /// Make `name` the export chosen by the empty name.
    pub fn default_export(mut self, name: &str) -> ExportMap {
        self.default = Some(name.to_string());
        self
    }

    fn resolve(&self, name: &str) -> Option<&(String, String, Arc<dyn Export>)> {
        if name.is_empty() {
            match &self.default {
                Some(default) => self.entries.iter().find(|e| &e.0 == default),
                None => self.entries.first(),
            }
        } else {
            self.entries.iter().find(|e| e.0 == name)
        }
    }
}

impl ExportSet for ExportMap {
    fn get(&self, name: &str) -> Option<Arc<dyn Export>> {
        self.resolve(name).map(|e| Arc::clone(&e.2))
    }

    fn list(&self) -> Vec<(String, String)> {
        self.entries.iter().map(|e| (e.0.clone(), e.1.clone())).collect()
    }

    fn describe(&self, name: &str) -> Option<(String, String)> {
        self.resolve(name).map(|e| (e.0.clone(), e.1.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemExport;

    #[test]
    fn empty_name_selects_the_default() {
        let map = ExportMap::new().with("a", "first", Arc::new(MemExport::new(10))).with(
            "b",
            "second",
            Arc::new(MemExport::new(20)),
        );
        assert_eq!(map.get("").map(|e| e.size()), Some(10));
        assert_eq!(map.describe(""), Some(("a".to_string(), "first".to_string())));
        let map = map.default_export("b");
        assert_eq!(map.get("").map(|e| e.size()), Some(20));
        assert_eq!(map.get("b").map(|e| e.size()), Some(20));
        assert!(map.get("c").is_none());
        assert_eq!(map.list().len(), 2);
    }
}
