//! The worker pool: carries out export calls for requests of every connection and queues
//! the replies on the connection's writer.

use std::panic::{catch_unwind, AssertUnwindSafe};

use std::time::Instant;

use super::hit_batch::HitBatch;
use super::job::{error_reply, ConnShared, Job};
use super::queue::Receiver;
use super::replies::Outgoing;
use super::reply_buf::{self, ReplyBuf};
use crate::errno::Errno;
use crate::export::{Export, ExportError};
use crate::proto;
use crate::reply;
use crate::request::{Command, Request};

/// Serve jobs until every sender is gone.
pub(crate) fn run(queue: Receiver<Job>) {
    while let Some(job) = queue.recv() {
        execute(job);
    }
}

/// Call into the export; a panicking export becomes an I/O error instead of a dead worker.
pub(crate) fn guarded<T>(call: impl FnOnce() -> Result<T, ExportError>) -> Result<T, ExportError> {
    catch_unwind(AssertUnwindSafe(call))
        .unwrap_or_else(|_| Err(ExportError::Io(std::io::Error::other("export panicked"))))
}

/// Carry out one request and send its reply (on a worker, or inline on the connection's
/// reader at queue depth 1).
pub(crate) fn execute(job: Job) {
    let Job { conn, request, payload, received, charge } = job;
    let export = conn.export.as_ref();
    let fua = request.flags & proto::CMD_FLAG_FUA != 0;
    let length = u64::from(request.length);
    let (bytes, error) = match request.command {
        Command::Read => {
            read(&conn, &request, received, charge);
            return;
        }
        command => {
            let result = match command {
                Command::Write => guarded(|| export.write(request.offset, &payload, fua)),
                Command::Demote => guarded(|| export.demote(request.offset, &payload)),
                Command::Flush => guarded(|| export.flush()),
                Command::Trim if length == 0 => Ok(()),
                Command::Trim => guarded(|| export.trim(request.offset, length, fua)),
                Command::Cache if length == 0 => Ok(()),
                Command::Cache => guarded(|| export.cache(request.offset, length)),
                Command::WriteZeroes if length == 0 => Ok(()),
                Command::WriteZeroes => {
                    let may_trim = request.flags & proto::CMD_FLAG_NO_HOLE == 0;
                    guarded(|| export.write_zeroes(request.offset, length, fua, may_trim))
                }
                // validate() lets nothing else through.
                other => Err(ExportError::Invalid(format!("unexpected command {}", other.label()))),
            };
            match result {
                Ok(()) => (reply::simple_header(0, request.cookie).to_vec(), None),
                Err(e) => {
                    let errno = Errno::from(&e);
                    (
                        error_reply(conn.structured, &request, errno, &e.to_string(), None),
                        Some(errno),
                    )
                }
            }
        }
    };
    drop(payload);
    let moved = match (request.command, error) {
        (Command::Flush | Command::Cache, _) | (_, Some(_)) => 0,
        _ => length,
    };
    conn.send(Outgoing {
        bytes,
        command: request.command,
        moved,
        error,
        received,
        charge,
        counted: false,
    });
}

/// Bytes in front of a READ's data: the simple reply header, or the structured chunk header
/// and the chunk's offset.
pub(crate) fn read_head(structured: bool) -> usize {
    if structured {
        proto::STRUCTURED_REPLY_HEADER_LEN + 8
    } else {
        proto::SIMPLE_REPLY_HEADER_LEN
    }
}

/// Write the header of a successful READ reply carrying `len` data bytes into `h`
/// ([`read_head`] bytes): simple, or one OFFSET_DATA chunk (with `flags`).
pub(crate) fn read_header(
    h: &mut [u8],
    structured: bool,
    request: &Request,
    flags: u16,
    len: usize,
) {
    if !structured {
        h.copy_from_slice(&reply::simple_header(0, request.cookie));
        return;
    }
    // len <= max_payload < 2^32 - 8.
    h[..proto::STRUCTURED_REPLY_HEADER_LEN].copy_from_slice(&reply::structured_header(
        flags,
        proto::REPLY_TYPE_OFFSET_DATA,
        request.cookie,
        (8 + len) as u32,
    ));
    h[proto::STRUCTURED_REPLY_HEADER_LEN..].copy_from_slice(&request.offset.to_be_bytes());
}

/// The reply's bookkeeping (its bytes travel separately).
fn outgoing(request: &Request, error: Option<Errno>, received: Instant, charge: u64) -> Outgoing {
    let moved = if error.is_some() { 0 } else { u64::from(request.length) };
    Outgoing {
        bytes: Vec::new(),
        command: Command::Read,
        moved,
        error,
        received,
        charge,
        counted: false,
    }
}

/// Largest READ whose reply joins a [`HitBatch`] (larger ones are sent on their own).
const BATCHED: usize = 64 << 10;

/// Ask the export for a READ at once into `data`; true if it served it.
fn read_if_fast(export: &dyn Export, request: &Request, data: &mut [u8], idle: bool) -> bool {
    matches!(
        guarded(|| match export.read_if_fast(request.offset, data, idle) {
            Some(r) => r.map(|()| true),
            None => Ok(false),
        }),
        Ok(true)
    )
}

/// The hit path, on the connection's reader: serve a READ at once if the export can
/// ([`Export::read_if_fast`]). `more`: the reader already holds the next request, so the
/// reply joins `batch` (read straight into it) to leave with the replies that follow; the
/// last of such a run sends the batch. Otherwise the data is read into this thread's reply
/// buffer and the reply sent from it. `false`: the export declined (or the read failed),
/// nothing was added or sent, and the request goes the ordinary way (admitted, then
/// executed, where a failure gets its proper reply); the caller sends the batch first. The
/// request was validated and is not admitted; the connection has nothing in flight.
pub(crate) fn read_at_once(
    conn: &ConnShared,
    request: &Request,
    received: Instant,
    batch: &mut HitBatch,
    more: bool,
) -> bool {
    let len = request.length as usize;
    if len == 0 || len > reply_buf::KEEP {
        return false;
    }
    let export = conn.export.as_ref();
    let head = read_head(conn.structured);
    if len <= BATCHED && (more || !batch.is_empty()) {
        let (_, data) = batch.tail(head, len);
        if !read_if_fast(export, request, data, false) {
            return false;
        }
        let (h, _) = batch.tail(head, len);
        read_header(h, conn.structured, request, proto::REPLY_FLAG_DONE, len);
        batch.commit(head, len, received);
        if !more || batch.full() {
            batch.flush(&conn.replies);
        }
        return true;
    }
    // `idle`: nothing in flight and, as `more` is false here, no further request either.
    let idle = !more;
    reply_buf::with(|b: &mut ReplyBuf| {
        let (_, data) = b.parts(head, len);
        if !read_if_fast(export, request, data, idle) {
            return false;
        }
        let (h, _) = b.parts(head, len);
        read_header(h, conn.structured, request, proto::REPLY_FLAG_DONE, len);
        let out = outgoing(request, None, received, u64::from(request.length));
        batch.flush(&conn.replies);
        conn.replies.send_borrowed(b.reply(head, len), out, false);
        true
    })
}

/// Carry out an admitted READ and send its reply from this thread's reply buffer.
/// Structured: one OFFSET_DATA chunk with DONE on success; on failure the range is re-read
/// block by block to find the first failing offset, then the good prefix goes out as
/// OFFSET_DATA followed by ERROR_OFFSET with DONE. Simple: header and data, or an error
/// header alone.
fn read(conn: &ConnShared, request: &Request, received: Instant, charge: u64) {
    let export = conn.export.as_ref();
    let structured = conn.structured;
    let len = request.length as usize;
    let cookie = request.cookie;
    if len == 0 {
        let bytes = if structured {
            reply::structured_header(proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_NONE, cookie, 0)
                .to_vec()
        } else {
            reply::simple_header(0, cookie).to_vec()
        };
        conn.send(Outgoing { bytes, ..outgoing(request, None, received, charge) });
        return;
    }
    let head = read_head(structured);
    reply_buf::with(|b: &mut ReplyBuf| {
        let (_, data) = b.parts(head, len);
        let failure = match guarded(|| export.read(request.offset, data)) {
            Ok(()) => None,
            Err(e) if !structured => Some((0, e)),
            Err(_) => locate_failure(export, request.offset, data),
        };
        let Some((good, error)) = failure else {
            let (h, _) = b.parts(head, len);
            read_header(h, structured, request, proto::REPLY_FLAG_DONE, len);
            let out = outgoing(request, None, received, charge);
            conn.replies.send_borrowed(b.reply(head, len), out, true);
            return;
        };
        let errno = Errno::from(&error);
        let out = outgoing(request, Some(errno), received, charge);
        if !structured {
            let bytes = reply::simple_header(errno.code(), cookie).to_vec();
            conn.send(Outgoing { bytes, ..out });
            return;
        }
        let failed_at = request.offset + good as u64;
        let chunk =
            reply::error_chunk(cookie, errno.code(), &error.to_string(), Some(failed_at), true);
        if good == 0 {
            conn.send(Outgoing { bytes: chunk, ..out });
            return;
        }
        let (h, _) = b.parts(head, len);
        read_header(h, structured, request, 0, good);
        let mut bytes = b.reply(head, good).to_vec();
        bytes.extend_from_slice(&chunk);
        conn.send(Outgoing { bytes, ..out });
    });
}

/// Re-read `buf` (the range at `offset`) in preferred-block-size pieces; `None` if every
/// piece now succeeds, else how many bytes at the start are good and the error.
fn locate_failure(
    export: &dyn Export,
    offset: u64,
    buf: &mut [u8],
) -> Option<(usize, ExportError)> {
    let block = u64::from(export.preferred_block_size().max(512));
    let mut done = 0usize;
    while done < buf.len() {
        let pos = offset + done as u64;
        let take = ((block - pos % block) as usize).min(buf.len() - done);
        if let Err(e) = guarded(|| export.read(pos, &mut buf[done..done + take])) {
            return Some((done, e));
        }
        done += take;
    }
    None
}
