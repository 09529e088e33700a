//! The array's stale rule for DEMOTEs, as the simulator runs it (the real rule:
//! `ember_serve::stale`, docs/design/architecture.md "The stale rule"). A DEMOTE carries a
//! client's clean copy of a block; the array keeps it only if that client's connection holds
//! a copy of the block and no write of the block completed after the copy was taken.
//!
//! In request order, as the simulator runs a deployment:
//!
//! - an array READ by client C gives C a copy of the block as of now;
//! - a write of the block through client C completes a write (the sequence number advances)
//!   and gives C a copy as of that write: C's cache holds what it wrote;
//! - a DEMOTE of the block by C consumes C's copy; it is fresh if the copy is no older than
//!   the block's last write;
//! - the array's restart ([`StaleCopies::restart`]) forgets every copy and every write: the
//!   clients reconnect, their old connections' copies are unknown to the new process, and
//!   unknown means refused. A client's DEMOTEs of blocks it got from the old array are
//!   refused as stale until it reads or writes them again.
//!
//! Without concurrency there is no write in progress, so the live rule's third case (a write
//! still running) never arises here.

use std::collections::HashMap;

/// Copies per client and last writes per block: the array's state for the stale rule.
#[derive(Clone, Debug, Default)]
pub struct StaleCopies {
    seq: u64,
    /// Array key → sequence number of its last completed write.
    last_write: HashMap<u64, u64>,
    /// Per client: array key → the sequence number its copy was taken at.
    copies: Vec<HashMap<u64, u64>>,
}

impl StaleCopies {
    /// The state of an array with `clients` connections, no copy and no write yet.
    pub fn new(clients: usize) -> Self {
        Self { seq: 0, last_write: HashMap::new(), copies: vec![HashMap::new(); clients] }
    }

    /// Client `client` READ `key` from the array.
    pub fn read(&mut self, client: usize, key: u64) {
        if let Some(c) = self.copies.get_mut(client) {
            c.insert(key, self.seq);
        }
    }

    /// A write of `key` through client `client` completed.
    pub fn write(&mut self, client: usize, key: u64) {
        self.seq += 1;
        self.last_write.insert(key, self.seq);
        if let Some(c) = self.copies.get_mut(client) {
            c.insert(key, self.seq);
        }
    }

    /// Client `client` DEMOTEs `key`: whether its copy may be kept. Consumes the copy.
    pub fn demote_fresh(&mut self, client: usize, key: u64) -> bool {
        let copy = self.copies.get_mut(client).and_then(|c| c.remove(&key));
        copy.is_some_and(|s| self.last_write.get(&key).is_none_or(|&w| w <= s))
    }

    /// The array restarted: every connection is new, every copy unknown.
    pub fn restart(&mut self) {
        let clients = self.copies.len();
        *self = Self::new(clients);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_older_than_a_write_or_the_restart_are_refused() {
        let mut s = StaleCopies::new(2);
        s.read(0, 5);
        s.read(0, 6);
        s.read(1, 5);
        s.write(1, 5);
        assert!(!s.demote_fresh(0, 5), "client 0's copy predates client 1's write");
        assert!(s.demote_fresh(1, 5), "client 1 holds what it wrote");
        assert!(s.demote_fresh(0, 6), "block 6 was never written");
        assert!(!s.demote_fresh(0, 6), "a DEMOTE consumes the copy");
        s.read(0, 7);
        s.restart();
        assert!(!s.demote_fresh(0, 7), "a copy from before the restart is unknown");
        s.read(0, 7);
        assert!(s.demote_fresh(0, 7), "read again from the new array");
    }
}
