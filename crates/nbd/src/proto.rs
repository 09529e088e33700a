//! Numbers of the NBD protocol (NetworkBlockDevice/nbd `doc/proto.md`, section "Values"):
//! magics, handshake and transmission flags, options, option replies, information types,
//! commands, command flags, structured reply types and flags.

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`, the newstyle magic, also the prefix of every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// Magic of every fixed-newstyle option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// `NBD_REQUEST_MAGIC`.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// `NBD_SIMPLE_REPLY_MAGIC`.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// `NBD_STRUCTURED_REPLY_MAGIC`.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flag `NBD_FLAG_FIXED_NEWSTYLE`.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag `NBD_FLAG_NO_ZEROES`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag `NBD_FLAG_C_FIXED_NEWSTYLE`.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag `NBD_FLAG_C_NO_ZEROES`.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flag `NBD_FLAG_HAS_FLAGS` (always set).
pub const TX_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag `NBD_FLAG_READ_ONLY`.
pub const TX_READ_ONLY: u16 = 1 << 1;
/// Transmission flag `NBD_FLAG_SEND_FLUSH`.
pub const TX_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag `NBD_FLAG_SEND_FUA`.
pub const TX_SEND_FUA: u16 = 1 << 3;
/// Transmission flag `NBD_FLAG_ROTATIONAL`.
pub const TX_ROTATIONAL: u16 = 1 << 4;
/// Transmission flag `NBD_FLAG_SEND_TRIM`.
pub const TX_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag `NBD_FLAG_SEND_WRITE_ZEROES`.
pub const TX_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag `NBD_FLAG_SEND_DF`.
pub const TX_SEND_DF: u16 = 1 << 7;
/// Transmission flag `NBD_FLAG_CAN_MULTI_CONN`.
pub const TX_CAN_MULTI_CONN: u16 = 1 << 8;
/// Transmission flag `NBD_FLAG_SEND_CACHE`.
pub const TX_SEND_CACHE: u16 = 1 << 10;

/// `NBD_OPT_EXPORT_NAME`.
pub const OPT_EXPORT_NAME: u32 = 1;
/// `NBD_OPT_ABORT`.
pub const OPT_ABORT: u32 = 2;
/// `NBD_OPT_LIST`.
pub const OPT_LIST: u32 = 3;
/// `NBD_OPT_STARTTLS`.
pub const OPT_STARTTLS: u32 = 5;
/// `NBD_OPT_INFO`.
pub const OPT_INFO: u32 = 6;
/// `NBD_OPT_GO`.
pub const OPT_GO: u32 = 7;
/// `NBD_OPT_STRUCTURED_REPLY`.
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// `NBD_OPT_LIST_META_CONTEXT`.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// `NBD_OPT_SET_META_CONTEXT`.
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// ember's DEMOTE extension: the option a client sends before `NBD_OPT_GO` to ask that the
/// export take DEMOTEs (data: export name as in `NBD_OPT_GO`, then one query string, which
/// must be [`EMBER_DEMOTE_QUERY`]). A server without the extension answers
/// `NBD_REP_ERR_UNSUP`, as the spec requires for any unknown option.
pub const OPT_EMBER_DEMOTE: u32 = 0x4542_4d01;
/// The name of ember's DEMOTE extension, in the spec's `x-` namespace for experiments.
pub const EMBER_DEMOTE_QUERY: &str = "x-ember:demote";

/// Option reply `NBD_REP_ACK`.
pub const REP_ACK: u32 = 1;
/// Option reply `NBD_REP_SERVER`.
pub const REP_SERVER: u32 = 2;
/// Option reply `NBD_REP_INFO`.
pub const REP_INFO: u32 = 3;
/// Bit 31: the option reply is an error.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// `NBD_REP_ERR_UNSUP`.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// `NBD_REP_ERR_POLICY`.
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// `NBD_REP_ERR_INVALID`.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// `NBD_REP_ERR_PLATFORM`.
pub const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
/// `NBD_REP_ERR_TLS_REQD`.
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
/// `NBD_REP_ERR_UNKNOWN`.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// `NBD_REP_ERR_SHUTDOWN`.
pub const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
/// `NBD_REP_ERR_BLOCK_SIZE_REQD`.
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
/// `NBD_REP_ERR_TOO_BIG`.
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

/// `NBD_INFO_EXPORT`.
pub const INFO_EXPORT: u16 = 0;
/// `NBD_INFO_NAME`.
pub const INFO_NAME: u16 = 1;
/// `NBD_INFO_DESCRIPTION`.
pub const INFO_DESCRIPTION: u16 = 2;
/// `NBD_INFO_BLOCK_SIZE`.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// `NBD_CMD_READ`.
pub const CMD_READ: u16 = 0;
/// `NBD_CMD_WRITE`.
pub const CMD_WRITE: u16 = 1;
/// `NBD_CMD_DISC`.
pub const CMD_DISC: u16 = 2;
/// `NBD_CMD_FLUSH`.
pub const CMD_FLUSH: u16 = 3;
/// `NBD_CMD_TRIM`.
pub const CMD_TRIM: u16 = 4;
/// `NBD_CMD_CACHE`.
pub const CMD_CACHE: u16 = 5;
/// `NBD_CMD_WRITE_ZEROES`.
pub const CMD_WRITE_ZEROES: u16 = 6;
/// `NBD_CMD_BLOCK_STATUS`.
pub const CMD_BLOCK_STATUS: u16 = 7;

/// ember's DEMOTE extension (docs/reference/nbd.md, "Extension: x-ember:demote"): the request type
/// of
/// a DEMOTE, sent only on a connection where [`OPT_EMBER_DEMOTE`] was acknowledged.
pub const CMD_EMBER_DEMOTE: u16 = 0x4544;

/// Command flag `NBD_CMD_FLAG_FUA`.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag `NBD_CMD_FLAG_NO_HOLE`.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag `NBD_CMD_FLAG_DF`.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// Command flag `NBD_CMD_FLAG_REQ_ONE`.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// Command flag `NBD_CMD_FLAG_FAST_ZERO`.
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

/// Structured reply flag `NBD_REPLY_FLAG_DONE`.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// `NBD_REPLY_TYPE_NONE`.
pub const REPLY_TYPE_NONE: u16 = 0;
/// `NBD_REPLY_TYPE_OFFSET_DATA`.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// `NBD_REPLY_TYPE_OFFSET_HOLE`.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// `NBD_REPLY_TYPE_BLOCK_STATUS`.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Bit 15: the structured reply chunk is an error chunk.
pub const REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
/// `NBD_REPLY_TYPE_ERROR`.
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_FLAG_ERROR | 1;
/// `NBD_REPLY_TYPE_ERROR_OFFSET`.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_FLAG_ERROR | 2;

/// Size of a request header on the wire.
pub const REQUEST_HEADER_LEN: usize = 28;
/// Size of a simple reply header on the wire.
pub const SIMPLE_REPLY_HEADER_LEN: usize = 16;
/// Size of a structured reply chunk header on the wire.
pub const STRUCTURED_REPLY_HEADER_LEN: usize = 20;

/// Longest string (export name, description, error message) the protocol allows.
pub const MAX_STRING_LEN: usize = 4096;
/// The payload size every server should accept (2^25, "Size constraints").
pub const DEFAULT_MAX_PAYLOAD: u32 = 1 << 25;
