//! Replacement policies written in Python, run by ember's simulator: the shape of
//! libCacheSim's `PluginCache` (a hit hook, a miss hook, an eviction hook that names the
//! victim, a remove hook) as the methods of one Python object.
//!
//! The object's class is called with the capacity in blocks, once per cache size; then,
//! for each block access of the trace, the simulator calls
//!
//! - `on_hit(key)` when the block is cached;
//! - on a miss with the cache full, `evict(key)` first, which returns the cached block to
//!   eject (the block missed is `key`, as libCacheSim's eviction hook sees the request);
//! - `on_miss(key)`, the block now inserted;
//! - `remove(key)` when a cached block is invalidated (a trace never does this; the hook is
//!   part of the shape so that the same class runs wherever ember removes blocks).
//!
//! Which blocks are cached is ember's record, not the policy's: a hit is a key ember holds,
//! and `evict` must name one (otherwise the run fails with the key it named). The whole run
//! holds the GIL once and looks each method up once; a call passes one integer.

use ember_policy::{Access, Replacement};
use pyo3::prelude::*;
use pyo3::types::PyAny;
use std::collections::HashSet;

/// A Python object behind the [`Replacement`] interface.
pub struct PyPolicy {
    on_hit: Py<PyAny>,
    on_miss: Py<PyAny>,
    evict: Py<PyAny>,
    remove: Py<PyAny>,
    capacity: usize,
    resident: HashSet<u64>,
    /// The first error a method raised or an `evict` that named no cached block; once set,
    /// no method is called again and the run reports it.
    error: Option<PyErr>,
}

impl PyPolicy {
    /// Wrap `object` (an instance of the policy class) for a cache of `capacity` blocks;
    /// fails if one of the four methods is missing.
    pub fn new(object: &Bound<'_, PyAny>, capacity: usize) -> PyResult<Self> {
        let method = |name: &str| -> PyResult<Py<PyAny>> {
            let m = object.getattr(name).map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "a Python policy needs the methods on_hit, on_miss, evict and remove; \
                     {} has no {name}",
                    object.get_type().name().map_or_else(|_| "it".into(), |n| n.to_string())
                ))
            })?;
            Ok(m.unbind())
        };
        Ok(Self {
            on_hit: method("on_hit")?,
            on_miss: method("on_miss")?,
            evict: method("evict")?,
            remove: method("remove")?,
            capacity,
            resident: HashSet::with_capacity(capacity.min(1 << 24)),
            error: None,
        })
    }

    /// The error that stopped the run, if any.
    pub fn take_error(&mut self) -> Option<PyErr> {
        self.error.take()
    }

    /// Call `f` with `key` unless an earlier call failed; keep the first error.
    fn call(&mut self, which: Hook, key: u64) -> Option<Py<PyAny>> {
        if self.error.is_some() {
            return None;
        }
        let f = match which {
            Hook::Hit => &self.on_hit,
            Hook::Miss => &self.on_miss,
            Hook::Evict => &self.evict,
            Hook::Remove => &self.remove,
        };
        match Python::with_gil(|py| f.call1(py, (key,))) {
            Ok(v) => Some(v),
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Hook {
    Hit,
    Miss,
    Evict,
    Remove,
}

impl Replacement for PyPolicy {
    fn name(&self) -> &'static str {
        "python"
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn len(&self) -> usize {
        self.resident.len()
    }

    fn contains(&self, key: u64) -> bool {
        self.resident.contains(&key)
    }

    fn lookup(&mut self, access: &Access) -> bool {
        if !self.resident.contains(&access.key) {
            return false;
        }
        self.call(Hook::Hit, access.key);
        true
    }

    fn insert(&mut self, access: &Access) -> Option<u64> {
        if self.capacity == 0 {
            return Some(access.key);
        }
        let mut ejected = None;
        if self.resident.len() >= self.capacity {
            let victim = self.call(Hook::Evict, access.key)?;
            let key = Python::with_gil(|py| victim.extract::<u64>(py));
            match key {
                Ok(k) if self.resident.remove(&k) => ejected = Some(k),
                Ok(k) => {
                    self.error = Some(pyo3::exceptions::PyValueError::new_err(format!(
                        "evict({}) returned {k}, which is not cached",
                        access.key
                    )));
                    return None;
                }
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            }
        }
        self.resident.insert(access.key);
        self.call(Hook::Miss, access.key);
        ejected
    }

    fn remove(&mut self, key: u64) -> bool {
        if !self.resident.remove(&key) {
            return false;
        }
        self.call(Hook::Remove, key);
        true
    }
}
