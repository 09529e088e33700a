//! The reader thread: replies matched to their requests by cookie, simple replies and
//! structured reply chunks applied to their request (a READ's data, holes and errors), until
//! the connection ends or the server breaks the protocol. Takes the pending table's lock only
//! to look a request up and to complete it, never across a socket read.

use std::io::{self, BufReader, Read};

use super::error::ClientError;
use super::pending::{Shared, Slot};
use crate::errno::Errno;
use crate::proto;
use crate::reply::{ChunkHeader, SimpleHeader};
use crate::request::Command;
use crate::stream::Stream;

fn read_array<const N: usize>(r: &mut impl Read) -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)?;
    Ok(b)
}

/// Largest structured chunk payload accepted beyond the request's own data.
const MAX_CHUNK_OVERHEAD: u64 = 64 * 1024;

/// The reader thread: read replies until the connection ends or the server breaks the
/// protocol.
pub(super) fn read_replies(mut r: BufReader<Stream>, shared: &Shared) -> Result<(), ClientError> {
    loop {
        let mut magic = [0u8; 4];
        if !crate::stream::read_exact_or_eof(&mut r, &mut magic)? {
            return Ok(());
        }
        match u32::from_be_bytes(magic) {
            proto::SIMPLE_REPLY_MAGIC => {
                let SimpleHeader { error, cookie } = SimpleHeader::parse(&read_array(&mut r)?);
                let slot = shared.lock().slots.remove(&cookie);
                let Some(mut slot) = slot else {
                    return Err(ClientError::Protocol(format!(
                        "simple reply for unknown cookie {cookie}"
                    )));
                };
                let result = if error != 0 {
                    Err(ClientError::Server {
                        errno: Errno::from_code(error),
                        message: String::new(),
                        offset: None,
                    })
                } else {
                    if slot.command == Command::Read {
                        r.read_exact(&mut slot.data)?;
                    }
                    Ok(std::mem::take(&mut slot.data))
                };
                shared.complete(slot, result);
            }
            proto::STRUCTURED_REPLY_MAGIC => {
                let ChunkHeader { flags, kind, cookie, length } =
                    ChunkHeader::parse(&read_array(&mut r)?);
                let slot = shared.lock().slots.remove(&cookie);
                let Some(mut slot) = slot else {
                    return Err(ClientError::Protocol(format!(
                        "structured reply for unknown cookie {cookie}"
                    )));
                };
                let applied =
                    if kind == proto::REPLY_TYPE_NONE && flags & proto::REPLY_FLAG_DONE == 0 {
                        Err(ClientError::Protocol(
                            "NBD_REPLY_TYPE_NONE without NBD_REPLY_FLAG_DONE".into(),
                        ))
                    } else {
                        chunk(&mut r, &mut slot, kind, length)
                    };
                if let Err(e) = applied {
                    let reason = e.to_string();
                    // Refuse new requests before the waiter wakes, so a caller that sees
                    // this error never finds the connection still open.
                    shared.mark_dead(&reason);
                    shared.complete(slot, Err(e));
                    return Err(ClientError::Protocol(reason));
                }
                if flags & proto::REPLY_FLAG_DONE != 0 {
                    let result = match slot.error.take() {
                        Some(e) => Err(e),
                        None if slot.command == Command::Read && !slot.coverage.complete() => {
                            Err(ClientError::Protocol(format!(
                                "read reply covered {} of {} bytes",
                                slot.coverage.covered(),
                                slot.length
                            )))
                        }
                        None => Ok(std::mem::take(&mut slot.data)),
                    };
                    shared.complete(slot, result);
                } else {
                    shared.lock().slots.insert(cookie, slot);
                }
            }
            other => return Err(ClientError::Protocol(format!("bad reply magic {other:#010x}"))),
        }
    }
}

fn request_len_limit(slot: &Slot) -> u64 {
    u64::from(slot.length) + MAX_CHUNK_OVERHEAD
}

/// Record that a content chunk described `n` bytes at `at` in the request's buffer; a chunk
/// overlapping an earlier one fails the request (the stream stays in step, so the
/// connection goes on).
fn claim(slot: &mut Slot, at: usize, n: u64, offset: u64) {
    if slot.coverage.claim(at as u64, n).is_err() && slot.error.is_none() {
        slot.error = Some(ClientError::Protocol(format!(
            "content chunk {offset}+{n} overlaps an earlier chunk of the same reply"
        )));
    }
}

/// Apply one structured chunk to its request.
fn chunk(r: &mut impl Read, slot: &mut Slot, kind: u16, length: u32) -> Result<(), ClientError> {
    let length = u64::from(length);
    if length > request_len_limit(slot) {
        return Err(ClientError::Protocol(format!("chunk of {length} bytes is too long")));
    }
    let start = slot.offset;
    let request_len = u64::from(slot.length);
    // Where `n` bytes at `offset` fall in the request's buffer, if wholly inside it.
    let place = |offset: u64, n: u64| -> Option<usize> {
        let at = offset.checked_sub(start)?;
        (at.checked_add(n)? <= request_len).then_some(at as usize)
    };
    match kind {
        proto::REPLY_TYPE_NONE => {
            if length != 0 {
                return Err(ClientError::Protocol("NBD_REPLY_TYPE_NONE with a payload".into()));
            }
        }
        proto::REPLY_TYPE_OFFSET_DATA if slot.command == Command::Read && length > 8 => {
            let offset = u64::from_be_bytes(read_array(r)?);
            let n = length - 8;
            let Some(at) = place(offset, n) else {
                return Err(ClientError::Protocol(format!(
                    "data chunk {offset}+{n} outside the request"
                )));
            };
            r.read_exact(&mut slot.data[at..at + n as usize])?;
            claim(slot, at, n, offset);
        }
        proto::REPLY_TYPE_OFFSET_HOLE if slot.command == Command::Read && length == 12 => {
            let offset = u64::from_be_bytes(read_array(r)?);
            let n = u64::from(u32::from_be_bytes(read_array(r)?));
            let at = match place(offset, n) {
                Some(at) if n > 0 => at,
                _ => {
                    return Err(ClientError::Protocol(format!(
                        "hole chunk {offset}+{n} outside the request"
                    )))
                }
            };
            claim(slot, at, n, offset);
            if slot.error.is_none() {
                slot.data[at..at + n as usize].fill(0);
            }
        }
        kind if kind & proto::REPLY_TYPE_FLAG_ERROR != 0 => {
            if length < 6 {
                return Err(ClientError::Protocol("error chunk shorter than 6 bytes".into()));
            }
            let mut payload = vec![0u8; length as usize];
            r.read_exact(&mut payload)?;
            let errno = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            let message_len = u16::from_be_bytes([payload[4], payload[5]]) as usize;
            if message_len > payload.len() - 6 {
                return Err(ClientError::Protocol("error message overruns its chunk".into()));
            }
            let message = String::from_utf8_lossy(&payload[6..6 + message_len]).into_owned();
            let rest = &payload[6 + message_len..];
            let offset = (kind == proto::REPLY_TYPE_ERROR_OFFSET && rest.len() >= 8).then(|| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&rest[..8]);
                u64::from_be_bytes(b)
            });
            if slot.error.is_none() {
                slot.error = Some(ClientError::Server {
                    errno: Errno::from_code(if errno == 0 { 22 } else { errno }),
                    message,
                    offset,
                });
            }
        }
        other => {
            return Err(ClientError::Protocol(format!(
                "unexpected chunk type {other} ({length} bytes) for {}",
                slot.command.label()
            )))
        }
    }
    Ok(())
}
