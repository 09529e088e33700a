//! Who is connected to which export: each connection's export (from
//! [`crate::EngineExports`]) holds a [`ClientToken`] for as long as the connection keeps it,
//! so `ember ctl remove` can refuse to pull a volume from under its clients unless forced.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Connections by export name.
#[derive(Debug, Default)]
pub struct Clients(Mutex<HashMap<String, usize>>);

impl Clients {
    /// Count one more connection to `name` until the token is dropped.
    pub fn join(self: &Arc<Self>, name: &str) -> ClientToken {
        *self.0.lock().entry(name.to_string()).or_insert(0) += 1;
        ClientToken { clients: self.clone(), name: name.to_string() }
    }

    /// Connections to `name` now.
    pub fn count(&self, name: &str) -> usize {
        self.0.lock().get(name).copied().unwrap_or(0)
    }
}

/// One connection's hold on an export name.
#[derive(Debug)]
pub struct ClientToken {
    clients: Arc<Clients>,
    name: String,
}

impl Drop for ClientToken {
    fn drop(&mut self) {
        let mut map = self.clients.0.lock();
        if let Some(n) = map.get_mut(&self.name) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_count_until_dropped() {
        let c = Arc::new(Clients::default());
        let a = c.join("a");
        let b = c.join("a");
        let x = c.join("x");
        assert_eq!((c.count("a"), c.count("x"), c.count("z")), (2, 1, 0));
        drop((a, x));
        assert_eq!((c.count("a"), c.count("x")), (1, 0));
        drop(b);
        assert_eq!(c.count("a"), 0);
    }
}
