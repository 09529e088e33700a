//! The server side of the fixed-newstyle handshake (`doc/proto.md`, "Handshake").

use std::io::{self, Read, Write};
use std::sync::Arc;

use super::demote;
use super::ServerConfig;
use crate::export::{Export, ExportSet};
use crate::proto;

/// Option data longer than this ends the connection (nothing the server understands comes
/// close: the longest is NBD_OPT_GO with a 4096-byte name and its information requests).
pub(crate) const MAX_OPTION_DATA: u32 = 64 * 1024;

/// The outcome of a successful handshake.
pub(crate) struct Negotiated {
    pub export: Arc<dyn Export>,
    pub structured: bool,
    pub tx_flags: u16,
    /// The client negotiated ember's DEMOTE extension for this export.
    pub demote: bool,
}

/// The transmission flags for `export` (`structured`: structured replies were negotiated, so
/// NBD_FLAG_SEND_DF can be offered: every read is answered with one content chunk).
pub(crate) fn transmission_flags(export: &dyn Export, structured: bool) -> u16 {
    let flags = export.flags();
    let mut tx = proto::TX_HAS_FLAGS;
    if flags.read_only {
        tx |= proto::TX_READ_ONLY;
    }
    if flags.can_flush {
        tx |= proto::TX_SEND_FLUSH;
    }
    if flags.can_fua {
        tx |= proto::TX_SEND_FUA;
    }
    if flags.can_trim {
        tx |= proto::TX_SEND_TRIM;
    }
    if flags.can_write_zeroes {
        tx |= proto::TX_SEND_WRITE_ZEROES;
    }
    if flags.can_multi_conn {
        tx |= proto::TX_CAN_MULTI_CONN;
    }
    if export.can_cache() {
        tx |= proto::TX_SEND_CACHE;
    }
    if structured {
        tx |= proto::TX_SEND_DF;
    }
    tx
}

/// The preferred block size advertised for `export`: its own if a power of two between 512
/// and `max_payload`, else 4096.
pub(crate) fn preferred_block_size(export: &dyn Export, max_payload: u32) -> u32 {
    let preferred = export.preferred_block_size();
    if preferred.is_power_of_two() && preferred >= 512 && preferred <= max_payload {
        preferred
    } else {
        4096
    }
}

fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + data.len());
    out.extend_from_slice(&proto::OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out
}

fn error_reply(stream: &mut impl Write, option: u32, kind: u32, message: &str) -> io::Result<()> {
    let message = crate::reply::truncate_message(message, proto::MAX_STRING_LEN);
    stream.write_all(&option_reply(option, kind, message.as_bytes()))
}

fn read_u32(stream: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    stream.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

/// Whether and how a connection may upgrade to TLS during the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlsPolicy {
    /// No TLS: NBD_OPT_STARTTLS gets NBD_REP_ERR_POLICY (the spec's NOTLS mode).
    Off,
    /// STARTTLS is offered; plaintext clients are served too (SELECTIVETLS with no
    /// TLS-only export).
    On,
    /// Every option but STARTTLS and ABORT gets NBD_REP_ERR_TLS_REQD until TLS is up
    /// (FORCEDTLS).
    Require,
}

/// Upgrades the handshake's stream to TLS after the server acknowledged NBD_OPT_STARTTLS.
pub(crate) trait StartTls<S> {
    /// The policy of this server.
    fn policy(&self) -> TlsPolicy;
    /// Run the TLS handshake on `stream` and make it the plaintext side of the session;
    /// an error ends the connection.
    fn start(&mut self, stream: &mut S) -> io::Result<()>;
}

/// A server without TLS.
pub(crate) struct NoTls;

impl<S> StartTls<S> for NoTls {
    fn policy(&self) -> TlsPolicy {
        TlsPolicy::Off
    }
    fn start(&mut self, _stream: &mut S) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "TLS is not enabled"))
    }
}

/// Run the handshake without TLS (and without a deadline: the caller's stream may impose
/// one). Used by tests and the fuzz entry points; the server runs [`negotiate_tls`].
/// `Ok(None)`: the client aborted, or sent something that
/// ends the session (garbage, an unknown export with NBD_OPT_EXPORT_NAME); the caller closes.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn negotiate(
    stream: &mut (impl Read + Write),
    exports: &dyn ExportSet,
    config: &ServerConfig,
    shutting_down: &dyn Fn() -> bool,
) -> io::Result<Option<Negotiated>> {
    negotiate_tls(stream, exports, config, shutting_down, &mut NoTls)
}

/// Run the handshake with `tls` deciding on NBD_OPT_STARTTLS. `Ok(None)`: the session ends
/// (the client aborted, broke the protocol, sent more than `config.max_handshake_options`
/// options, or asked for an export it may not have).
pub(crate) fn negotiate_tls<S: Read + Write>(
    stream: &mut S,
    exports: &dyn ExportSet,
    config: &ServerConfig,
    shutting_down: &dyn Fn() -> bool,
    tls: &mut dyn StartTls<S>,
) -> io::Result<Option<Negotiated>> {
    let mut greeting = Vec::with_capacity(18);
    greeting.extend_from_slice(&proto::NBDMAGIC.to_be_bytes());
    greeting.extend_from_slice(&proto::IHAVEOPT.to_be_bytes());
    greeting.extend_from_slice(&(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES).to_be_bytes());
    stream.write_all(&greeting)?;

    let client_flags = read_u32(stream)?;
    if client_flags & !(proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES) != 0 {
        // "the server MUST drop the TCP connection if the client sets an unknown flag".
        return Ok(None);
    }
    let no_zeroes = client_flags & proto::FLAG_C_NO_ZEROES != 0;
    let fixed = client_flags & proto::FLAG_C_FIXED_NEWSTYLE != 0;
    // "The server MUST operate in NOTLS mode unless ... the client replied with
    // NBD_FLAG_C_FIXED_NEWSTYLE": a server requiring TLS cannot serve such a client.
    let policy = match tls.policy() {
        TlsPolicy::Require if !fixed => return Ok(None),
        TlsPolicy::On if !fixed => TlsPolicy::Off,
        policy => policy,
    };
    let mut tls_up = false;
    let mut structured = false;
    // The export (canonical name) for which DEMOTE was granted, if any.
    let mut demote_for: Option<String> = None;
    let mut options = 0usize;

    loop {
        let mut header = [0u8; 16];
        stream.read_exact(&mut header)?;
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&header[0..8]);
        if u64::from_be_bytes(magic) != proto::IHAVEOPT {
            return Ok(None);
        }
        options += 1;
        if options > config.max_handshake_options {
            // A client haggling forever is a denial of service: hard disconnect (nbdkit
            // does the same past 32 options).
            return Ok(None);
        }
        let option = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
        let length = u32::from_be_bytes([header[12], header[13], header[14], header[15]]);
        if length > MAX_OPTION_DATA {
            return Ok(None);
        }
        let mut data = vec![0u8; length as usize];
        stream.read_exact(&mut data)?;

        if shutting_down() && option != proto::OPT_ABORT {
            error_reply(stream, option, proto::REP_ERR_SHUTDOWN, "server is shutting down")?;
            continue;
        }

        if option == proto::OPT_STARTTLS {
            if policy == TlsPolicy::Off {
                let kind =
                    if data.is_empty() { proto::REP_ERR_POLICY } else { proto::REP_ERR_INVALID };
                error_reply(stream, option, kind, "TLS is not enabled on this server")?;
                continue;
            }
            if tls_up {
                error_reply(stream, option, proto::REP_ERR_INVALID, "TLS is already active")?;
                continue;
            }
            if !data.is_empty() {
                error_reply(
                    stream,
                    option,
                    proto::REP_ERR_INVALID,
                    "NBD_OPT_STARTTLS takes no data",
                )?;
                continue;
            }
            stream.write_all(&option_reply(option, proto::REP_ACK, &[]))?;
            stream.flush()?;
            tls.start(stream)?;
            tls_up = true;
            // "the server MUST NOT preserve any negotiation state ... issued before this
            // command".
            structured = false;
            demote_for = None;
            continue;
        }
        if policy == TlsPolicy::Require && !tls_up && option != proto::OPT_ABORT {
            if option == proto::OPT_EXPORT_NAME {
                // Cannot be answered with an error: "it MUST terminate the session".
                return Ok(None);
            }
            error_reply(stream, option, proto::REP_ERR_TLS_REQD, "this server requires TLS")?;
            continue;
        }

        match option {
            proto::OPT_EXPORT_NAME => {
                let Ok(name) = std::str::from_utf8(&data) else {
                    return Ok(None);
                };
                if name.contains('\0') {
                    return Ok(None);
                }
                let Some(export) = exports.get(name) else {
                    return Ok(None);
                };
                let tx_flags = transmission_flags(export.as_ref(), structured);
                let mut out = Vec::with_capacity(10 + 124);
                out.extend_from_slice(&export.size().to_be_bytes());
                out.extend_from_slice(&tx_flags.to_be_bytes());
                if !no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                stream.write_all(&out)?;
                let demote = demote_for.as_deref() == Some(&demote::canonical(name, exports));
                return Ok(Some(Negotiated { export, structured, tx_flags, demote }));
            }
            proto::OPT_ABORT => {
                // The client may already have closed; a failed ACK does not matter.
                let _ = stream.write_all(&option_reply(option, proto::REP_ACK, &[]));
                return Ok(None);
            }
            proto::OPT_LIST => {
                if !data.is_empty() {
                    error_reply(
                        stream,
                        option,
                        proto::REP_ERR_INVALID,
                        "NBD_OPT_LIST takes no data",
                    )?;
                    continue;
                }
                let mut out = Vec::new();
                for (name, description) in exports.list() {
                    let mut entry = Vec::with_capacity(4 + name.len() + description.len());
                    entry.extend_from_slice(&(name.len() as u32).to_be_bytes());
                    entry.extend_from_slice(name.as_bytes());
                    entry.extend_from_slice(description.as_bytes());
                    out.extend_from_slice(&option_reply(option, proto::REP_SERVER, &entry));
                }
                out.extend_from_slice(&option_reply(option, proto::REP_ACK, &[]));
                stream.write_all(&out)?;
            }
            proto::OPT_INFO | proto::OPT_GO => {
                match info(option, &data, exports, config, structured) {
                    Err((kind, message)) => error_reply(stream, option, kind, &message)?,
                    Ok((replies, export)) => {
                        stream.write_all(&replies)?;
                        if option == proto::OPT_GO {
                            let tx_flags = transmission_flags(export.as_ref(), structured);
                            let name = demote::export_name(&data).unwrap_or_default();
                            let demote =
                                demote_for.as_deref() == Some(&demote::canonical(name, exports));
                            return Ok(Some(Negotiated { export, structured, tx_flags, demote }));
                        }
                    }
                }
            }
            proto::OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    error_reply(
                        stream,
                        option,
                        proto::REP_ERR_INVALID,
                        "NBD_OPT_STRUCTURED_REPLY takes no data",
                    )?;
                    continue;
                }
                structured = true;
                stream.write_all(&option_reply(option, proto::REP_ACK, &[]))?;
            }
            proto::OPT_EMBER_DEMOTE => match demote::grant(&data, exports) {
                Ok(name) => {
                    demote_for = Some(name);
                    stream.write_all(&option_reply(option, proto::REP_ACK, &[]))?;
                }
                Err((kind, message)) => error_reply(stream, option, kind, &message)?,
            },
            other => {
                error_reply(
                    stream,
                    other,
                    proto::REP_ERR_UNSUP,
                    &format!("option {other} is not supported by this server"),
                )?;
            }
        }
    }
}

/// The bytes of every reply to a successful NBD_OPT_INFO / NBD_OPT_GO, and the export.
type InfoReplies = (Vec<u8>, Arc<dyn Export>);

/// An option error: the NBD_REP_ERR_* type and its message.
type OptionError = (u32, String);

/// The replies to NBD_OPT_INFO / NBD_OPT_GO (every NBD_REP_INFO then NBD_REP_ACK), or the
/// error reply type and message.
fn info(
    option: u32,
    data: &[u8],
    exports: &dyn ExportSet,
    config: &ServerConfig,
    structured: bool,
) -> Result<InfoReplies, OptionError> {
    let invalid = |m: &str| (proto::REP_ERR_INVALID, m.to_string());
    if data.len() < 6 {
        return Err(invalid("option data shorter than 6 bytes"));
    }
    let name_len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    if name_len > data.len() - 6 {
        return Err(invalid("export name length exceeds the option data"));
    }
    if name_len > proto::MAX_STRING_LEN {
        return Err((proto::REP_ERR_TOO_BIG, "export name longer than 4096 bytes".into()));
    }
    let name = std::str::from_utf8(&data[4..4 + name_len])
        .map_err(|_| invalid("export name is not UTF-8"))?;
    if name.contains('\0') {
        return Err(invalid("export name contains a NUL byte"));
    }
    let rest = &data[4 + name_len..];
    let count = u16::from_be_bytes([rest[0], rest[1]]) as usize;
    if rest.len() != 2 + 2 * count {
        return Err(invalid("information request count does not match the option length"));
    }
    let requests: Vec<u16> =
        rest[2..].chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
    let Some(export) = exports.get(name) else {
        return Err((proto::REP_ERR_UNKNOWN, format!("no export named {name:?}")));
    };
    let (canonical, description) =
        exports.describe(name).unwrap_or_else(|| (name.to_string(), String::new()));

    let mut out = Vec::new();
    let mut export_info = Vec::with_capacity(12);
    export_info.extend_from_slice(&proto::INFO_EXPORT.to_be_bytes());
    export_info.extend_from_slice(&export.size().to_be_bytes());
    export_info.extend_from_slice(&transmission_flags(export.as_ref(), structured).to_be_bytes());
    out.extend_from_slice(&option_reply(option, proto::REP_INFO, &export_info));

    // Block size constraints are always sent: the maximum payload is a real limit.
    let mut sizes = Vec::with_capacity(14);
    sizes.extend_from_slice(&proto::INFO_BLOCK_SIZE.to_be_bytes());
    sizes.extend_from_slice(&1u32.to_be_bytes());
    sizes.extend_from_slice(
        &preferred_block_size(export.as_ref(), config.max_payload).to_be_bytes(),
    );
    sizes.extend_from_slice(&config.max_payload.to_be_bytes());
    out.extend_from_slice(&option_reply(option, proto::REP_INFO, &sizes));

    if requests.contains(&proto::INFO_NAME) {
        let canonical = crate::reply::truncate_message(&canonical, proto::MAX_STRING_LEN);
        let mut item = Vec::with_capacity(2 + canonical.len());
        item.extend_from_slice(&proto::INFO_NAME.to_be_bytes());
        item.extend_from_slice(canonical.as_bytes());
        out.extend_from_slice(&option_reply(option, proto::REP_INFO, &item));
    }
    if requests.contains(&proto::INFO_DESCRIPTION) {
        let description = crate::reply::truncate_message(&description, proto::MAX_STRING_LEN);
        let mut item = Vec::with_capacity(2 + description.len());
        item.extend_from_slice(&proto::INFO_DESCRIPTION.to_be_bytes());
        item.extend_from_slice(description.as_bytes());
        out.extend_from_slice(&option_reply(option, proto::REP_INFO, &item));
    }
    out.extend_from_slice(&option_reply(option, proto::REP_ACK, &[]));
    Ok((out, export))
}
