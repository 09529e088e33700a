//! Transmission-phase replies (`doc/proto.md`, "Simple reply message" and "Structured reply
//! chunk message"): how the server encodes them and how the client tells them apart.

use crate::proto;

/// The bytes of a simple reply header (the data of a successful READ follows it).
pub fn simple_header(error: u32, cookie: u64) -> [u8; proto::SIMPLE_REPLY_HEADER_LEN] {
    let mut out = [0u8; proto::SIMPLE_REPLY_HEADER_LEN];
    out[0..4].copy_from_slice(&proto::SIMPLE_REPLY_MAGIC.to_be_bytes());
    out[4..8].copy_from_slice(&error.to_be_bytes());
    out[8..16].copy_from_slice(&cookie.to_be_bytes());
    out
}

/// The bytes of a structured reply chunk header.
pub fn structured_header(
    flags: u16,
    kind: u16,
    cookie: u64,
    length: u32,
) -> [u8; proto::STRUCTURED_REPLY_HEADER_LEN] {
    let mut out = [0u8; proto::STRUCTURED_REPLY_HEADER_LEN];
    out[0..4].copy_from_slice(&proto::STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out[4..6].copy_from_slice(&flags.to_be_bytes());
    out[6..8].copy_from_slice(&kind.to_be_bytes());
    out[8..16].copy_from_slice(&cookie.to_be_bytes());
    out[16..20].copy_from_slice(&length.to_be_bytes());
    out
}

/// Cut `message` to at most `max` bytes on a character boundary.
pub fn truncate_message(message: &str, max: usize) -> &str {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// A whole error chunk (`NBD_REPLY_TYPE_ERROR`, or `NBD_REPLY_TYPE_ERROR_OFFSET` when
/// `offset` is given) carrying `error` and a human-readable `message` (cut to 4096 bytes).
pub fn error_chunk(
    cookie: u64,
    error: u32,
    message: &str,
    offset: Option<u64>,
    done: bool,
) -> Vec<u8> {
    let message = truncate_message(message, proto::MAX_STRING_LEN);
    let extra = if offset.is_some() { 8 } else { 0 };
    let length = 6 + message.len() + extra;
    let kind =
        if offset.is_some() { proto::REPLY_TYPE_ERROR_OFFSET } else { proto::REPLY_TYPE_ERROR };
    let flags = if done { proto::REPLY_FLAG_DONE } else { 0 };
    let mut out = Vec::with_capacity(proto::STRUCTURED_REPLY_HEADER_LEN + length);
    // `length` is at most 6 + 4096 + 8, so it fits in u32.
    out.extend_from_slice(&structured_header(flags, kind, cookie, length as u32));
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message.as_bytes());
    if let Some(offset) = offset {
        out.extend_from_slice(&offset.to_be_bytes());
    }
    out
}

/// A simple reply header as the client reads it (after its 4-byte magic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimpleHeader {
    /// Error field (0 on success).
    pub error: u32,
    /// The request's cookie.
    pub cookie: u64,
}

impl SimpleHeader {
    /// Decode the 12 bytes after a simple reply magic.
    pub fn parse(rest: &[u8; 12]) -> SimpleHeader {
        let mut cookie = [0u8; 8];
        cookie.copy_from_slice(&rest[4..12]);
        SimpleHeader {
            error: u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]),
            cookie: u64::from_be_bytes(cookie),
        }
    }
}

/// A structured reply chunk header as the client reads it (after its 4-byte magic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Reply flags (`NBD_REPLY_FLAG_DONE`).
    pub flags: u16,
    /// Chunk type (`NBD_REPLY_TYPE_*`).
    pub kind: u16,
    /// The request's cookie.
    pub cookie: u64,
    /// Payload length.
    pub length: u32,
}

impl ChunkHeader {
    /// Decode the 16 bytes after a structured reply magic.
    pub fn parse(rest: &[u8; 16]) -> ChunkHeader {
        let mut cookie = [0u8; 8];
        cookie.copy_from_slice(&rest[4..12]);
        ChunkHeader {
            flags: u16::from_be_bytes([rest[0], rest[1]]),
            kind: u16::from_be_bytes([rest[2], rest[3]]),
            cookie: u64::from_be_bytes(cookie),
            length: u32::from_be_bytes([rest[12], rest[13], rest[14], rest[15]]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_header_layout() {
        let bytes = simple_header(22, 7);
        assert_eq!(&bytes[0..4], &[0x67, 0x44, 0x66, 0x98]);
        let mut rest = [0u8; 12];
        rest.copy_from_slice(&bytes[4..]);
        assert_eq!(SimpleHeader::parse(&rest), SimpleHeader { error: 22, cookie: 7 });
    }

    #[test]
    fn error_offset_chunk_layout() {
        let bytes = error_chunk(9, 5, "bad", Some(4096), true);
        assert_eq!(bytes.len(), 20 + 6 + 3 + 8);
        let mut rest = [0u8; 16];
        rest.copy_from_slice(&bytes[4..20]);
        assert_eq!(
            ChunkHeader::parse(&rest),
            ChunkHeader {
                flags: proto::REPLY_FLAG_DONE,
                kind: proto::REPLY_TYPE_ERROR_OFFSET,
                cookie: 9,
                length: 17
            }
        );
        assert_eq!(&bytes[20..24], &5u32.to_be_bytes());
        assert_eq!(&bytes[24..26], &3u16.to_be_bytes());
        assert_eq!(&bytes[26..29], b"bad");
        assert_eq!(&bytes[29..37], &4096u64.to_be_bytes());
    }

    #[test]
    fn messages_are_cut_on_char_boundaries() {
        let long = "é".repeat(3000); // 6000 bytes
        let cut = truncate_message(&long, proto::MAX_STRING_LEN);
        assert_eq!(cut.len(), 4096);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(truncate_message("abc", 2), "ab");
    }
}
