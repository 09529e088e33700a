//! The server's side of negotiating ember's DEMOTE extension (docs/reference/nbd.md, "Extension:
//! x-ember:demote"): the option's data is laid out as NBD_OPT_SET_META_CONTEXT's (export
//! name, then a count of query strings and the strings), with exactly one query,
//! `x-ember:demote`. The grant holds for the export named, and only if the client then
//! enters transmission with that same export.

use crate::errno::Errno;
use crate::export::ExportSet;
use crate::proto;
use crate::request::Request;

/// The canonical name of the export whose DEMOTEs the option asks for, or the option
/// reply's error type and message.
pub(crate) fn grant(data: &[u8], exports: &dyn ExportSet) -> Result<String, (u32, String)> {
    let invalid = |m: &str| (proto::REP_ERR_INVALID, m.to_string());
    let name = export_name(data).ok_or_else(|| invalid("malformed export name"))?;
    let rest = &data[4 + name.len()..];
    if rest.len() < 4 {
        return Err(invalid("no query count"));
    }
    let count = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    if count != 1 {
        return Err(invalid("exactly one query string, x-ember:demote, is expected"));
    }
    let rest = &rest[4..];
    if rest.len() < 4 {
        return Err(invalid("no query length"));
    }
    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    if rest.len() - 4 != len {
        return Err(invalid("query length does not match the option length"));
    }
    if &rest[4..] != proto::EMBER_DEMOTE_QUERY.as_bytes() {
        return Err(invalid("unknown query (expected x-ember:demote)"));
    }
    let Some(export) = exports.get(name) else {
        return Err((proto::REP_ERR_UNKNOWN, format!("no export named {name:?}")));
    };
    if !export.accepts_demote() {
        return Err((proto::REP_ERR_UNSUP, "this export takes no DEMOTE".to_string()));
    }
    Ok(canonical(name, exports))
}

/// The export name at the start of NBD_OPT_GO / NBD_OPT_INFO / DEMOTE option data (a 32-bit
/// length, then UTF-8 without NUL), if well formed.
pub(crate) fn export_name(data: &[u8]) -> Option<&str> {
    let len = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let name = std::str::from_utf8(data.get(4..4usize.checked_add(len)?)?).ok()?;
    (!name.contains('\0') && name.len() <= proto::MAX_STRING_LEN).then_some(name)
}

/// The name `name` selects, as the export set lists it (the empty name selects the default).
pub(crate) fn canonical(name: &str, exports: &dyn ExportSet) -> String {
    exports.describe(name).map_or_else(|| name.to_string(), |(n, _)| n)
}

/// Whether a DEMOTE request may go to the export: negotiated on this connection, no flags
/// (none are defined), a non-empty range inside the export. Otherwise `NBD_EINVAL` with a
/// message; the caller has read the payload, so the connection carries on.
pub(crate) fn check(request: &Request, negotiated: bool, size: u64) -> Result<(), (Errno, String)> {
    if !negotiated {
        return Err((Errno::Inval, "DEMOTE was not negotiated on this connection".into()));
    }
    if request.flags != 0 {
        return Err((Errno::Inval, format!("DEMOTE takes no flags (got {:#06x})", request.flags)));
    }
    if request.length == 0 {
        return Err((Errno::Inval, "DEMOTE of zero bytes".into()));
    }
    if !request.within(size) {
        return Err((
            Errno::Inval,
            format!("DEMOTE {}+{} beyond export size {size}", request.offset, request.length),
        ));
    }
    Ok(())
}
