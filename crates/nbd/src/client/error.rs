//! What goes wrong on the client side: [`ClientError`]. Imports nothing of the client.

use std::io;

use crate::errno::Errno;

/// What went wrong on the client side.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A socket error.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The server broke the handshake protocol.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The server refused an option (`reply` is the NBD_REP_ERR_* value).
    #[error("server refused option {option} with reply {reply:#x}: {message}")]
    OptionRefused {
        /// The option sent.
        option: u32,
        /// The error reply type.
        reply: u32,
        /// The server's message, if any.
        message: String,
    },
    /// The server answered the request with an error.
    #[error("server error {errno}{}{}", offset.map(|o| format!(" at offset {o}")).unwrap_or_default(), if message.is_empty() { String::new() } else { format!(": {message}") })]
    Server {
        /// The NBD error value.
        errno: Errno,
        /// The message of a structured error chunk (empty for simple replies).
        message: String,
        /// The offset of an NBD_REPLY_TYPE_ERROR_OFFSET chunk.
        offset: Option<u64>,
    },
    /// The server sent a reply that breaks the protocol; the connection is closed.
    #[error("protocol violation by the server: {0}")]
    Protocol(String),
    /// The connection is closed (the request's reply will never come).
    #[error("connection closed: {0}")]
    Disconnected(String),
    /// The request was not sent: it is invalid for this export.
    #[error("invalid request: {0}")]
    Invalid(String),
}
