//! Give the allocator's free memory back to the system after a burst of large requests.
//!
//! A client that writes in large requests makes the server allocate payload buffers of up to
//! `--max-payload` bytes, several in flight at once. glibc's malloc keeps freed chunks in its
//! arenas for reuse, and by default it *adapts*: once a large buffer that it had mapped on
//! its own is freed, it raises its mapping threshold to that size and its trim threshold to
//! twice that, so later buffers of that size come from the arenas and up to twice the largest
//! request stays resident at the top of each thread's arena, where `malloc_trim` does not
//! reach (it trims only the main arena's top). Measured: three 256 MiB write bursts of 8 MiB,
//! 2 MiB and 512 KiB requests left the server's anonymous RSS 5 to 18 MiB higher for good
//! (`crates/cli/tests/serve_memory_return.rs`). That memory is not the cache's state:
//! `bench/serve-scale` counts RSS per cached block, and a long-running server should not
//! carry the peak of its busiest client.
//!
//! So `ember serve` fixes both thresholds at start ([`bound_allocator`]): buffers up to
//! [`ARENA_MAX`] (1 MiB requests, the common largest size, with alignment slack) are reused
//! from the arenas as before; larger ones are mapped and unmapped per request (page faults
//! on a request that moves megabytes anyway); an arena's free top above [`TRIM_AT`] is
//! returned when it is freed. And [`ReturnOnClose`] calls `malloc_trim(0)` when a connection
//! has closed, returning the free chunks inside the arenas, before the close is counted, so a
//! reader of `ember_nbd_connections_open` that sees the connection gone also sees the memory
//! returned. The cost is one walk of the free lists per closed connection; the hit path
//! allocates nothing, so it does not meet it.

use std::sync::Arc;

use ember_nbd::{CommandObservation, ServerObserver, ServerStats};

/// A [`ServerObserver`] that forwards to [`ServerStats`] and returns free heap memory to the
/// system when a connection closes.
pub struct ReturnOnClose {
    stats: Arc<ServerStats>,
}

impl ReturnOnClose {
    /// Wrap `stats`, which keeps receiving every observation.
    pub fn new(stats: Arc<ServerStats>) -> ReturnOnClose {
        ReturnOnClose { stats }
    }
}

impl ServerObserver for ReturnOnClose {
    fn on_command(&self, observation: &CommandObservation) {
        self.stats.on_command(observation);
    }

    fn on_connection_opened(&self) {
        self.stats.on_connection_opened();
    }

    fn on_connection_closed(&self) {
        trim();
        self.stats.on_connection_closed();
    }
}

/// Largest allocation served from malloc's arenas; larger ones are mapped on their own.
pub const ARENA_MAX: usize = (1 << 20) + (64 << 10);

/// Free memory at the top of an arena above this is returned when it is freed.
pub const TRIM_AT: usize = 2 << 20;

/// Fix glibc's mapping and trim thresholds (see the module's text); a no-op elsewhere.
pub fn bound_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two plain integers; called before the server's threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, ARENA_MAX as libc::c_int);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_AT as libc::c_int);
    }
}

/// Release the free memory of every malloc arena (glibc); a no-op elsewhere.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a plain integer and only walks glibc's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}
