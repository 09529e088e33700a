//! The client side of the fixed-newstyle handshake: greeting, NBD_OPT_STRUCTURED_REPLY,
//! NBD_OPT_GO (falling back to NBD_OPT_EXPORT_NAME), NBD_OPT_LIST and NBD_OPT_ABORT.

use std::io::{Read, Write};

use super::error::ClientError;
use super::info::ExportInfo;
use crate::proto;

/// Option reply data longer than this is refused as a protocol violation.
const MAX_REPLY_DATA: u32 = 64 * 1024;

fn read_u16(s: &mut impl Read) -> Result<u16, ClientError> {
    let mut b = [0u8; 2];
    s.read_exact(&mut b)?;
    Ok(u16::from_be_bytes(b))
}

fn read_u32(s: &mut impl Read) -> Result<u32, ClientError> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u64(s: &mut impl Read) -> Result<u64, ClientError> {
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

/// Read the server greeting and send the client flags. Returns whether NO_ZEROES is in
/// effect.
pub(crate) fn greet(stream: &mut (impl Read + Write)) -> Result<bool, ClientError> {
    if read_u64(stream)? != proto::NBDMAGIC {
        return Err(ClientError::Handshake("server did not send NBDMAGIC".into()));
    }
    let magic = read_u64(stream)?;
    if magic != proto::IHAVEOPT {
        return Err(ClientError::Handshake(format!(
            "server magic {magic:#x} is not IHAVEOPT (oldstyle servers are not supported)"
        )));
    }
    let flags = read_u16(stream)?;
    if flags & proto::FLAG_FIXED_NEWSTYLE == 0 {
        return Err(ClientError::Handshake("server does not support fixed newstyle".into()));
    }
    let no_zeroes = flags & proto::FLAG_NO_ZEROES != 0;
    let mut client_flags = proto::FLAG_C_FIXED_NEWSTYLE;
    if no_zeroes {
        client_flags |= proto::FLAG_C_NO_ZEROES;
    }
    stream.write_all(&client_flags.to_be_bytes())?;
    Ok(no_zeroes)
}

/// Send one option.
pub(crate) fn send_option(
    stream: &mut impl Write,
    option: u32,
    data: &[u8],
) -> Result<(), ClientError> {
    let mut out = Vec::with_capacity(16 + data.len());
    out.extend_from_slice(&proto::IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    stream.write_all(&out)?;
    Ok(())
}

/// One option reply: (reply type, data).
pub(crate) fn read_option_reply(
    stream: &mut impl Read,
    option: u32,
) -> Result<(u32, Vec<u8>), ClientError> {
    if read_u64(stream)? != proto::OPTION_REPLY_MAGIC {
        return Err(ClientError::Handshake("bad option reply magic".into()));
    }
    let echoed = read_u32(stream)?;
    if echoed != option {
        return Err(ClientError::Handshake(format!(
            "option reply for {echoed} while waiting for {option}"
        )));
    }
    let kind = read_u32(stream)?;
    let length = read_u32(stream)?;
    if length > MAX_REPLY_DATA {
        return Err(ClientError::Handshake(format!("option reply of {length} bytes is too long")));
    }
    let mut data = vec![0u8; length as usize];
    stream.read_exact(&mut data)?;
    Ok((kind, data))
}

fn refused(option: u32, kind: u32, data: &[u8]) -> ClientError {
    ClientError::OptionRefused {
        option,
        reply: kind,
        message: String::from_utf8_lossy(data).into_owned(),
    }
}

/// Ask for structured replies; `Ok(false)` when the server declines.
pub(crate) fn structured_replies(stream: &mut (impl Read + Write)) -> Result<bool, ClientError> {
    send_option(stream, proto::OPT_STRUCTURED_REPLY, &[])?;
    let (kind, _) = read_option_reply(stream, proto::OPT_STRUCTURED_REPLY)?;
    Ok(kind == proto::REP_ACK)
}

/// Ask for ember's DEMOTE extension on `export` (docs/reference/nbd.md); `Ok(false)` when the
/// server
/// refuses the option (any server without the extension answers NBD_REP_ERR_UNSUP).
pub(crate) fn demote(stream: &mut (impl Read + Write), export: &str) -> Result<bool, ClientError> {
    if export.len() > proto::MAX_STRING_LEN {
        return Err(ClientError::Invalid("export name longer than 4096 bytes".into()));
    }
    let query = proto::EMBER_DEMOTE_QUERY.as_bytes();
    let mut data = Vec::with_capacity(12 + export.len() + query.len());
    data.extend_from_slice(&(export.len() as u32).to_be_bytes());
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&1u32.to_be_bytes());
    data.extend_from_slice(&(query.len() as u32).to_be_bytes());
    data.extend_from_slice(query);
    send_option(stream, proto::OPT_EMBER_DEMOTE, &data)?;
    let (kind, _) = read_option_reply(stream, proto::OPT_EMBER_DEMOTE)?;
    Ok(kind == proto::REP_ACK)
}

/// Enter transmission with `export`: NBD_OPT_GO asking for the name, description and block
/// sizes, or NBD_OPT_EXPORT_NAME if the server does not know NBD_OPT_GO.
pub(crate) fn go(
    stream: &mut (impl Read + Write),
    export: &str,
    no_zeroes: bool,
    structured: bool,
) -> Result<ExportInfo, ClientError> {
    if export.len() > proto::MAX_STRING_LEN {
        return Err(ClientError::Invalid("export name longer than 4096 bytes".into()));
    }
    let wanted = [proto::INFO_BLOCK_SIZE, proto::INFO_NAME, proto::INFO_DESCRIPTION];
    let mut data = Vec::with_capacity(4 + export.len() + 2 + 2 * wanted.len());
    data.extend_from_slice(&(export.len() as u32).to_be_bytes());
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&(wanted.len() as u16).to_be_bytes());
    for w in wanted {
        data.extend_from_slice(&w.to_be_bytes());
    }
    send_option(stream, proto::OPT_GO, &data)?;
    let mut info = ExportInfo {
        name: export.to_string(),
        description: None,
        size: 0,
        flags: 0,
        min_block: 1,
        preferred_block: 4096,
        max_payload: proto::DEFAULT_MAX_PAYLOAD,
        structured,
        demote: false,
    };
    let mut got_export = false;
    loop {
        let (kind, data) = read_option_reply(stream, proto::OPT_GO)?;
        match kind {
            proto::REP_INFO => {
                if data.len() < 2 {
                    return Err(ClientError::Handshake("NBD_REP_INFO shorter than 2 bytes".into()));
                }
                let item = u16::from_be_bytes([data[0], data[1]]);
                let body = &data[2..];
                match item {
                    proto::INFO_EXPORT if body.len() == 10 => {
                        let mut size = [0u8; 8];
                        size.copy_from_slice(&body[..8]);
                        info.size = u64::from_be_bytes(size);
                        info.flags = u16::from_be_bytes([body[8], body[9]]);
                        got_export = true;
                    }
                    proto::INFO_NAME => info.name = String::from_utf8_lossy(body).into_owned(),
                    proto::INFO_DESCRIPTION => {
                        info.description = Some(String::from_utf8_lossy(body).into_owned())
                    }
                    proto::INFO_BLOCK_SIZE if body.len() == 12 => {
                        info.min_block =
                            u32::from_be_bytes([body[0], body[1], body[2], body[3]]).max(1);
                        info.preferred_block =
                            u32::from_be_bytes([body[4], body[5], body[6], body[7]]);
                        info.max_payload =
                            u32::from_be_bytes([body[8], body[9], body[10], body[11]]);
                    }
                    proto::INFO_EXPORT | proto::INFO_BLOCK_SIZE => {
                        return Err(ClientError::Handshake(format!(
                            "NBD_REP_INFO type {item} with a malformed length {}",
                            data.len()
                        )))
                    }
                    // "The client MUST ignore information replies it does not understand."
                    _ => {}
                }
            }
            proto::REP_ACK => {
                if !got_export {
                    return Err(ClientError::Handshake(
                        "NBD_OPT_GO acknowledged without NBD_INFO_EXPORT".into(),
                    ));
                }
                return Ok(info);
            }
            proto::REP_ERR_UNSUP => return export_name(stream, export, no_zeroes, info),
            other if other & proto::REP_FLAG_ERROR != 0 => {
                return Err(refused(proto::OPT_GO, other, &data))
            }
            other => {
                return Err(ClientError::Handshake(format!(
                    "unexpected reply {other} to NBD_OPT_GO"
                )));
            }
        }
    }
}

fn export_name(
    stream: &mut (impl Read + Write),
    export: &str,
    no_zeroes: bool,
    mut info: ExportInfo,
) -> Result<ExportInfo, ClientError> {
    send_option(stream, proto::OPT_EXPORT_NAME, export.as_bytes())?;
    info.size = read_u64(stream)?;
    info.flags = read_u16(stream)?;
    if !no_zeroes {
        let mut zeroes = [0u8; 124];
        stream.read_exact(&mut zeroes)?;
    }
    Ok(info)
}

/// NBD_OPT_LIST: every export's name and description.
pub(crate) fn list(stream: &mut (impl Read + Write)) -> Result<Vec<(String, String)>, ClientError> {
    send_option(stream, proto::OPT_LIST, &[])?;
    let mut exports = Vec::new();
    loop {
        let (kind, data) = read_option_reply(stream, proto::OPT_LIST)?;
        match kind {
            proto::REP_SERVER => {
                if data.len() < 4 {
                    return Err(ClientError::Handshake(
                        "NBD_REP_SERVER shorter than 4 bytes".into(),
                    ));
                }
                let len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
                if len > data.len() - 4 {
                    return Err(ClientError::Handshake(
                        "NBD_REP_SERVER name overruns the reply".into(),
                    ));
                }
                let name = String::from_utf8_lossy(&data[4..4 + len]).into_owned();
                let description = String::from_utf8_lossy(&data[4 + len..]).into_owned();
                exports.push((name, description));
            }
            proto::REP_ACK => return Ok(exports),
            other => return Err(refused(proto::OPT_LIST, other, &data)),
        }
    }
}

/// NBD_OPT_ABORT; the server's ACK is optional (older servers just close).
pub(crate) fn abort(stream: &mut (impl Read + Write)) -> Result<(), ClientError> {
    send_option(stream, proto::OPT_ABORT, &[])?;
    let _ = read_option_reply(stream, proto::OPT_ABORT);
    Ok(())
}
