//! An in-memory trace: every request plus the volume names.

use crate::{Request, VolumeTable};

/// A whole trace held in memory, in file order.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The requests, in the order the file lists them.
    pub requests: Vec<Request>,
    /// Names of the volumes that [`Request::volume`] indexes.
    pub volumes: VolumeTable,
}

impl Trace {
    /// A trace from requests and volume names.
    pub fn new(requests: Vec<Request>, volumes: VolumeTable) -> Self {
        Self { requests, volumes }
    }

    /// Every block access of the trace in order, as cache keys (see [`crate::block_key`]),
    /// with the request index each came from.
    pub fn block_accesses(&self, block_size: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.requests
            .iter()
            .enumerate()
            .flat_map(move |(i, r)| r.block_keys(block_size).map(move |k| (i, k)))
    }
}
