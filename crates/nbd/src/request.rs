//! A transmission-phase request header (`doc/proto.md`, "Request message") and the command
//! it carries.

use crate::proto;

/// The command of a request (the 16-bit type field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `NBD_CMD_READ`.
    Read,
    /// `NBD_CMD_WRITE`.
    Write,
    /// `NBD_CMD_DISC`.
    Disc,
    /// `NBD_CMD_FLUSH`.
    Flush,
    /// `NBD_CMD_TRIM`.
    Trim,
    /// `NBD_CMD_CACHE` (a prefetch; `NBD_EINVAL` unless the export takes it).
    Cache,
    /// `NBD_CMD_WRITE_ZEROES`.
    WriteZeroes,
    /// `NBD_CMD_BLOCK_STATUS` (not served by ember: answered `NBD_EINVAL`).
    BlockStatus,
    /// ember's DEMOTE extension ([`proto::CMD_EMBER_DEMOTE`]): a client cache hands down a
    /// clean block it evicts; carries a payload like `NBD_CMD_WRITE`.
    Demote,
    /// Any other type value.
    Unknown(u16),
}

impl Command {
    /// Every command ember's statistics keep apart (unknown values are pooled as
    /// `Unknown(0xffff)`).
    pub const TRACKED: [Command; 10] = [
        Command::Read,
        Command::Write,
        Command::Disc,
        Command::Flush,
        Command::Trim,
        Command::Cache,
        Command::WriteZeroes,
        Command::BlockStatus,
        Command::Demote,
        Command::Unknown(0xffff),
    ];

    /// The command for a type value.
    pub fn from_type(value: u16) -> Command {
        match value {
            proto::CMD_READ => Command::Read,
            proto::CMD_WRITE => Command::Write,
            proto::CMD_DISC => Command::Disc,
            proto::CMD_FLUSH => Command::Flush,
            proto::CMD_TRIM => Command::Trim,
            proto::CMD_CACHE => Command::Cache,
            proto::CMD_WRITE_ZEROES => Command::WriteZeroes,
            proto::CMD_BLOCK_STATUS => Command::BlockStatus,
            proto::CMD_EMBER_DEMOTE => Command::Demote,
            other => Command::Unknown(other),
        }
    }

    /// The type value on the wire.
    pub fn to_type(self) -> u16 {
        match self {
            Command::Read => proto::CMD_READ,
            Command::Write => proto::CMD_WRITE,
            Command::Disc => proto::CMD_DISC,
            Command::Flush => proto::CMD_FLUSH,
            Command::Trim => proto::CMD_TRIM,
            Command::Cache => proto::CMD_CACHE,
            Command::WriteZeroes => proto::CMD_WRITE_ZEROES,
            Command::BlockStatus => proto::CMD_BLOCK_STATUS,
            Command::Demote => proto::CMD_EMBER_DEMOTE,
            Command::Unknown(other) => other,
        }
    }

    /// Position in [`Command::TRACKED`].
    pub fn index(self) -> usize {
        match self {
            Command::Read => 0,
            Command::Write => 1,
            Command::Disc => 2,
            Command::Flush => 3,
            Command::Trim => 4,
            Command::Cache => 5,
            Command::WriteZeroes => 6,
            Command::BlockStatus => 7,
            Command::Demote => 8,
            Command::Unknown(_) => 9,
        }
    }

    /// A lower-case label (for metrics): `read`, `write`, `write_zeroes`, ….
    pub fn label(self) -> &'static str {
        match self {
            Command::Read => "read",
            Command::Write => "write",
            Command::Disc => "disc",
            Command::Flush => "flush",
            Command::Trim => "trim",
            Command::Cache => "cache",
            Command::WriteZeroes => "write_zeroes",
            Command::BlockStatus => "block_status",
            Command::Demote => "demote",
            Command::Unknown(_) => "unknown",
        }
    }
}

/// One request header as sent by the client (the payload of a WRITE follows it on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`NBD_CMD_FLAG_*`).
    pub flags: u16,
    /// The command.
    pub command: Command,
    /// The client's opaque cookie, echoed in the reply.
    pub cookie: u64,
    /// Byte offset into the export.
    pub offset: u64,
    /// Length in bytes.
    pub length: u32,
}

/// Why 28 bytes are not a request header.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("bad request magic {0:#010x} (expected 0x25609513)")]
pub struct BadMagic(pub u32);

impl Request {
    /// Parse a header; only the magic can be wrong at this level.
    pub fn parse(bytes: &[u8; proto::REQUEST_HEADER_LEN]) -> Result<Request, BadMagic> {
        let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if magic != proto::REQUEST_MAGIC {
            return Err(BadMagic(magic));
        }
        let mut cookie = [0u8; 8];
        cookie.copy_from_slice(&bytes[8..16]);
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&bytes[16..24]);
        Ok(Request {
            flags: u16::from_be_bytes([bytes[4], bytes[5]]),
            command: Command::from_type(u16::from_be_bytes([bytes[6], bytes[7]])),
            cookie: u64::from_be_bytes(cookie),
            offset: u64::from_be_bytes(offset),
            length: u32::from_be_bytes([bytes[24], bytes[25], bytes[26], bytes[27]]),
        })
    }

    /// The header's bytes on the wire.
    pub fn encode(&self) -> [u8; proto::REQUEST_HEADER_LEN] {
        let mut out = [0u8; proto::REQUEST_HEADER_LEN];
        out[0..4].copy_from_slice(&proto::REQUEST_MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.flags.to_be_bytes());
        out[6..8].copy_from_slice(&self.command.to_type().to_be_bytes());
        out[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        out[16..24].copy_from_slice(&self.offset.to_be_bytes());
        out[24..28].copy_from_slice(&self.length.to_be_bytes());
        out
    }

    /// Whether `offset + length` stays within an export of `size` bytes (no overflow).
    pub fn within(&self, size: u64) -> bool {
        self.offset.checked_add(u64::from(self.length)).is_some_and(|end| end <= size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let request = Request {
            flags: proto::CMD_FLAG_FUA,
            command: Command::Write,
            cookie: 0xdead_beef_0102_0304,
            offset: 1 << 40,
            length: 4096,
        };
        let bytes = request.encode();
        assert_eq!(&bytes[0..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(Request::parse(&bytes), Ok(request));
    }

    #[test]
    fn bad_magic_is_reported() {
        let mut bytes = [0u8; proto::REQUEST_HEADER_LEN];
        bytes[0] = 0x12;
        assert_eq!(Request::parse(&bytes), Err(BadMagic(0x1200_0000)));
    }

    #[test]
    fn range_check_handles_overflow() {
        let mut request = Request {
            flags: 0,
            command: Command::Read,
            cookie: 1,
            offset: u64::MAX - 10,
            length: 100,
        };
        assert!(!request.within(u64::MAX));
        request.offset = 100;
        assert!(request.within(200));
        assert!(!request.within(199));
    }

    #[test]
    fn command_numbers_match_the_spec() {
        for (value, command) in [
            (0, Command::Read),
            (1, Command::Write),
            (2, Command::Disc),
            (3, Command::Flush),
            (4, Command::Trim),
            (5, Command::Cache),
            (6, Command::WriteZeroes),
            (7, Command::BlockStatus),
            (99, Command::Unknown(99)),
        ] {
            assert_eq!(Command::from_type(value), command);
            assert_eq!(command.to_type(), value);
        }
    }
}
