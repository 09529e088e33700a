//! What a connection's reader hands to the worker pool: a validated request ([`Job`]) and the
//! connection context the worker answers through ([`ConnShared`]). Both sides import this
//! file; neither imports the other.

use std::sync::Arc;
use std::time::Instant;

use super::replies::{Outgoing, Replies};
use crate::errno::Errno;
use crate::export::Export;
use crate::reply;
use crate::request::Request;

/// What workers need to answer a request of one connection.
pub(crate) struct ConnShared {
    pub export: Arc<dyn Export>,
    pub structured: bool,
    pub replies: Arc<Replies>,
}

impl ConnShared {
    /// Send a reply (dropped if the client has gone).
    pub(crate) fn send(&self, outgoing: Outgoing) {
        self.replies.send(outgoing);
    }
}

/// One validated request for a worker.
pub(crate) struct Job {
    pub conn: Arc<ConnShared>,
    pub request: Request,
    /// The WRITE payload (empty otherwise).
    pub payload: Vec<u8>,
    pub received: Instant,
    pub charge: u64,
}

/// The bytes of an error reply to `request`: a structured error chunk when structured
/// replies were negotiated (with the offset, if given), else a simple reply.
pub(crate) fn error_reply(
    structured: bool,
    request: &Request,
    error: Errno,
    message: &str,
    offset: Option<u64>,
) -> Vec<u8> {
    if structured {
        reply::error_chunk(request.cookie, error.code(), message, offset, true)
    } else {
        reply::simple_header(error.code(), request.cookie).to_vec()
    }
}
