//! The worker pool: carries out export calls for requests of every connection and queues
//! the replies on the connection's writer.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::job::{error_reply, Job};
use super::queue::Receiver;
use super::replies::Outgoing;
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
fn guarded<T>(call: impl FnOnce() -> Result<T, ExportError>) -> Result<T, ExportError> {
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
        Command::Read => read(export, conn.structured, &request),
        command => {
            let result = match command {
                Command::Write => guarded(|| export.write(request.offset, &payload, fua)),
                Command::Demote => guarded(|| export.demote(request.offset, &payload)),
                Command::Flush => guarded(|| export.flush()),
                Command::Trim if length == 0 => Ok(()),
                Command::Trim => guarded(|| export.trim(request.offset, length, fua)),
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
        (Command::Flush, _) | (_, Some(_)) => 0,
        _ => length,
    };
    conn.send(Outgoing { bytes, command: request.command, moved, error, received, charge });
}

/// A READ's reply. Structured: one OFFSET_DATA chunk with DONE on success; on failure the
/// range is re-read block by block to find the first failing offset, then the good prefix
/// goes out as OFFSET_DATA followed by ERROR_OFFSET with DONE. Simple: header and data, or
/// an error header alone.
fn read(export: &dyn Export, structured: bool, request: &Request) -> (Vec<u8>, Option<Errno>) {
    let len = request.length as usize;
    let cookie = request.cookie;
    if !structured {
        let head = proto::SIMPLE_REPLY_HEADER_LEN;
        let mut out = vec![0u8; head + len];
        let result = if len == 0 {
            Ok(())
        } else {
            guarded(|| export.read(request.offset, &mut out[head..]))
        };
        return match result {
            Ok(()) => {
                out[..head].copy_from_slice(&reply::simple_header(0, cookie));
                (out, None)
            }
            Err(e) => {
                let errno = Errno::from(&e);
                (reply::simple_header(errno.code(), cookie).to_vec(), Some(errno))
            }
        };
    }
    if len == 0 {
        let done =
            reply::structured_header(proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_NONE, cookie, 0);
        return (done.to_vec(), None);
    }
    let head = proto::STRUCTURED_REPLY_HEADER_LEN + 8;
    let mut out = vec![0u8; head + len];
    let data_chunk_header = |flags: u16, data_len: usize| {
        let mut h = [0u8; proto::STRUCTURED_REPLY_HEADER_LEN + 8];
        // data_len <= max_payload < 2^32 - 8.
        h[..proto::STRUCTURED_REPLY_HEADER_LEN].copy_from_slice(&reply::structured_header(
            flags,
            proto::REPLY_TYPE_OFFSET_DATA,
            cookie,
            (8 + data_len) as u32,
        ));
        h[proto::STRUCTURED_REPLY_HEADER_LEN..].copy_from_slice(&request.offset.to_be_bytes());
        h
    };
    let failure = match guarded(|| export.read(request.offset, &mut out[head..])) {
        Ok(()) => None,
        Err(_) => locate_failure(export, request.offset, &mut out[head..]),
    };
    match failure {
        None => {
            out[..head].copy_from_slice(&data_chunk_header(proto::REPLY_FLAG_DONE, len));
            (out, None)
        }
        Some((good, error)) => {
            let errno = Errno::from(&error);
            let failed_at = request.offset + good as u64;
            let chunk =
                reply::error_chunk(cookie, errno.code(), &error.to_string(), Some(failed_at), true);
            if good == 0 {
                return (chunk, Some(errno));
            }
            out[..head].copy_from_slice(&data_chunk_header(0, good));
            out.truncate(head + good);
            out.extend_from_slice(&chunk);
            (out, Some(errno))
        }
    }
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
