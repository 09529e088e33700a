//! What the handshake learned about the export: [`ExportInfo`]. Imports nothing of the
//! client.

use crate::proto;

/// What the handshake learned about the export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    /// Canonical name (NBD_INFO_NAME) or the name asked for.
    pub name: String,
    /// NBD_INFO_DESCRIPTION, if sent.
    pub description: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// Transmission flags (`proto::TX_*`).
    pub flags: u16,
    /// Minimum block size (1 unless the server advertised one).
    pub min_block: u32,
    /// Preferred block size.
    pub preferred_block: u32,
    /// Maximum payload of one READ or WRITE.
    pub max_payload: u32,
    /// Whether structured replies were negotiated.
    pub structured: bool,
    /// Whether ember's DEMOTE extension was negotiated (asked for with
    /// [`ClientBuilder::demote`](super::ClientBuilder::demote) and acknowledged by the server
    /// for this export).
    pub demote: bool,
}

impl ExportInfo {
    fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
    /// NBD_FLAG_READ_ONLY.
    pub fn read_only(&self) -> bool {
        self.has(proto::TX_READ_ONLY)
    }
    /// NBD_FLAG_SEND_FLUSH.
    pub fn can_flush(&self) -> bool {
        self.has(proto::TX_SEND_FLUSH)
    }
    /// NBD_FLAG_SEND_FUA.
    pub fn can_fua(&self) -> bool {
        self.has(proto::TX_SEND_FUA)
    }
    /// NBD_FLAG_SEND_TRIM.
    pub fn can_trim(&self) -> bool {
        self.has(proto::TX_SEND_TRIM)
    }
    /// NBD_FLAG_SEND_WRITE_ZEROES.
    pub fn can_write_zeroes(&self) -> bool {
        self.has(proto::TX_SEND_WRITE_ZEROES)
    }
    /// NBD_FLAG_CAN_MULTI_CONN.
    pub fn can_multi_conn(&self) -> bool {
        self.has(proto::TX_CAN_MULTI_CONN)
    }
}
