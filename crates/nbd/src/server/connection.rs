//! One client connection: the handshake, then the transmission phase with a reader (this
//! thread) parsing requests and a writer thread serializing replies; export calls run on
//! the shared worker pool.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::Shutdown;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Sender};

use super::handshake::{self, Negotiated};
use super::worker::Job;
use super::Shared;
use crate::errno::Errno;
use crate::export::Export;
use crate::proto;
use crate::reply;
use crate::request::{Command, Request};
use crate::stats::{CommandObservation, ServerObserver};
use crate::stream::{self, Stream};

/// A reply ready for the writer.
pub(crate) struct Outgoing {
    /// The reply's bytes (header, and data for a read).
    pub bytes: Vec<u8>,
    /// The request it answers.
    pub command: Command,
    /// Bytes moved on success.
    pub moved: u64,
    /// The error it carries.
    pub error: Option<Errno>,
    /// When the request was fully received.
    pub received: Instant,
    /// Buffer bytes charged against the connection's in-flight budget.
    pub charge: u64,
}

/// What workers need to answer a request of this connection.
pub(crate) struct ConnShared {
    pub export: Arc<dyn Export>,
    pub structured: bool,
    replies: Sender<Outgoing>,
}

impl ConnShared {
    /// Queue a reply for the writer (dropped if the writer is gone, i.e. the client left).
    pub(crate) fn send(&self, outgoing: Outgoing) {
        let _ = self.replies.send(outgoing);
    }
}

/// The bytes of an error reply to `request`: a structured error chunk when structured
/// replies were negotiated (with the offset, if given), else a simple reply.
pub(crate) fn error_reply(
    structured: bool,
    request: &Request,
    error: Errno,
    message: &str,
    offset: Option<u64>,
) -> Vec<u8> {
    if structured {
        reply::error_chunk(request.cookie, error.code(), message, offset, true)
    } else {
        reply::simple_header(error.code(), request.cookie).to_vec()
    }
}

/// Bounds how much one connection may have in flight.
struct InFlight {
    state: Mutex<(usize, u64)>,
    changed: Condvar,
    max_requests: usize,
    max_bytes: u64,
}

impl InFlight {
    fn acquire(&self, charge: u64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.0 > 0 && (state.0 >= self.max_requests || state.1 + charge > self.max_bytes) {
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.0 += 1;
        state.1 += charge;
    }

    fn release(&self, charge: u64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 = state.0.saturating_sub(1);
        state.1 = state.1.saturating_sub(charge);
        drop(state);
        self.changed.notify_all();
    }
}

/// Serve one accepted connection until it ends.
pub(crate) fn serve(shared: &Arc<Shared>, stream: Stream, jobs: Sender<Job>) {
    if let Some(observer) = &shared.observer {
        observer.on_connection_opened();
    }
    let _ = stream.set_write_timeout(shared.config.write_timeout);
    let mut stream = stream;
    let shutting_down = || shared.shutting_down();
    let negotiated =
        handshake::negotiate(&mut stream, shared.exports.as_ref(), &shared.config, &shutting_down);
    if let Ok(Some(negotiated)) = negotiated {
        transmission(shared, stream, negotiated, jobs);
    } else {
        stream.shutdown(Shutdown::Both);
    }
    if let Some(observer) = &shared.observer {
        observer.on_connection_closed();
    }
}

fn observe(
    observer: &Option<Arc<dyn ServerObserver>>,
    command: Command,
    moved: u64,
    error: Option<Errno>,
    latency: Duration,
) {
    if let Some(observer) = observer {
        observer.on_command(&CommandObservation { command, bytes: moved, latency, error });
    }
}

fn writer_loop(
    stream: Stream,
    replies: Receiver<Outgoing>,
    in_flight: Arc<InFlight>,
    observer: Option<Arc<dyn ServerObserver>>,
) {
    let mut out = BufWriter::with_capacity(64 * 1024, stream);
    let mut dead = false;
    for reply in replies.iter() {
        if !dead {
            let mut ok = out.write_all(&reply.bytes).is_ok();
            if ok && replies.is_empty() {
                ok = out.flush().is_ok();
            }
            if !ok {
                // The client is gone (or stopped reading past the write timeout): drop
                // every further reply and make the reader stop too.
                dead = true;
                out.get_ref().shutdown(Shutdown::Both);
            }
        }
        observe(&observer, reply.command, reply.moved, reply.error, reply.received.elapsed());
        in_flight.release(reply.charge);
    }
    if !dead {
        let _ = out.flush();
    }
}

/// Why a request is refused before reaching the export, per `doc/proto.md`.
pub(crate) fn validate(
    request: &Request,
    tx_flags: u16,
    size: u64,
    structured: bool,
    max_payload: u32,
) -> Result<(), (Errno, String)> {
    let command = request.command;
    let supported = match command {
        Command::Read | Command::Write => true,
        Command::Flush => tx_flags & proto::TX_SEND_FLUSH != 0,
        Command::Trim => tx_flags & proto::TX_SEND_TRIM != 0,
        Command::WriteZeroes => tx_flags & proto::TX_SEND_WRITE_ZEROES != 0,
        _ => false,
    };
    if !supported {
        return Err((
            Errno::Inval,
            format!(
                "command {} ({}) is not supported by this export",
                command.to_type(),
                command.label()
            ),
        ));
    }
    let mut allowed = 0;
    if tx_flags & proto::TX_SEND_FUA != 0 {
        allowed |= proto::CMD_FLAG_FUA;
    }
    match command {
        Command::WriteZeroes => allowed |= proto::CMD_FLAG_NO_HOLE,
        Command::Read if tx_flags & proto::TX_SEND_DF != 0 => allowed |= proto::CMD_FLAG_DF,
        _ => {}
    }
    if request.flags & !allowed != 0 {
        return Err((
            Errno::Inval,
            format!(
                "command flags {:#06x} are not valid for {}",
                request.flags & !allowed,
                command.label()
            ),
        ));
    }
    let writes = matches!(command, Command::Write | Command::Trim | Command::WriteZeroes);
    if writes && tx_flags & proto::TX_READ_ONLY != 0 {
        return Err((Errno::Perm, "export is read-only".to_string()));
    }
    if command != Command::Flush && !request.within(size) {
        let errno = match command {
            Command::Write | Command::WriteZeroes => Errno::NoSpc,
            _ => Errno::Inval,
        };
        return Err((
            errno,
            format!(
                "{} {}+{} beyond export size {size}",
                command.label(),
                request.offset,
                request.length
            ),
        ));
    }
    if command == Command::Read && request.length > max_payload {
        let errno = if structured { Errno::Overflow } else { Errno::Inval };
        return Err((
            errno,
            format!("read length {} exceeds the maximum payload {max_payload}", request.length),
        ));
    }
    Ok(())
}

fn transmission(shared: &Arc<Shared>, socket: Stream, negotiated: Negotiated, jobs: Sender<Job>) {
    let Ok(writer_stream) = socket.try_clone() else {
        socket.shutdown(Shutdown::Both);
        return;
    };
    let config = &shared.config;
    let (replies, reply_queue) = crossbeam::channel::unbounded();
    let in_flight = Arc::new(InFlight {
        state: Mutex::new((0, 0)),
        changed: Condvar::new(),
        max_requests: config.max_in_flight,
        max_bytes: config.max_in_flight_bytes,
    });
    let writer = {
        let in_flight = Arc::clone(&in_flight);
        let observer = shared.observer.clone();
        std::thread::Builder::new()
            .name("nbd-writer".into())
            .spawn(move || writer_loop(writer_stream, reply_queue, in_flight, observer))
    };
    let Ok(writer) = writer else {
        socket.shutdown(Shutdown::Both);
        return;
    };
    let Negotiated { export, structured, tx_flags } = negotiated;
    let size = export.size();
    let conn = Arc::new(ConnShared { export, structured, replies });

    let mut header = [0u8; proto::REQUEST_HEADER_LEN];
    // Buffered from here on only: the handshake read exactly what it needed, unbuffered.
    let mut reader = BufReader::with_capacity(64 * 1024, socket);
    while let Ok(true) = stream::read_exact_or_eof(&mut reader, &mut header) {
        // Bad magic: the stream cannot be resynchronized; hard disconnect.
        let Ok(request) = Request::parse(&header) else {
            break;
        };
        if request.command == Command::Disc {
            observe(&shared.observer, Command::Disc, 0, None, Duration::ZERO);
            break;
        }
        let length = u64::from(request.length);
        let mut payload = Vec::new();
        let mut charge = 0;
        if request.command == Command::Write {
            if request.length > config.max_payload {
                if length > config.discard_limit || stream::discard(&mut reader, length).is_err() {
                    break;
                }
                in_flight.acquire(0);
                let message = format!(
                    "write length {length} exceeds the maximum payload {}",
                    config.max_payload
                );
                conn.send(Outgoing {
                    bytes: error_reply(structured, &request, Errno::Inval, &message, None),
                    command: Command::Write,
                    moved: 0,
                    error: Some(Errno::Inval),
                    received: Instant::now(),
                    charge: 0,
                });
                continue;
            }
            charge = length;
            in_flight.acquire(charge);
            payload = vec![0u8; request.length as usize];
            if reader.read_exact(&mut payload).is_err() {
                in_flight.release(charge);
                break;
            }
        } else {
            if request.command == Command::Read && request.length <= config.max_payload {
                charge = length;
            }
            in_flight.acquire(charge);
        }
        let received = Instant::now();
        let verdict = if shared.shutting_down() {
            // Read after shutdown began: refused, as the spec suggests, with NBD_ESHUTDOWN.
            Err((Errno::Shutdown, "server is shutting down".to_string()))
        } else {
            validate(&request, tx_flags, size, structured, config.max_payload)
        };
        if let Err((errno, message)) = verdict {
            conn.send(Outgoing {
                bytes: error_reply(structured, &request, errno, &message, None),
                command: request.command,
                moved: 0,
                error: Some(errno),
                received,
                charge,
            });
            continue;
        }
        let job = Job { conn: Arc::clone(&conn), request, payload, received, charge };
        if let Err(failed) = jobs.send(job) {
            // No workers left (cannot happen while the server runs); answer ESHUTDOWN.
            let job = failed.into_inner();
            conn.send(Outgoing {
                bytes: error_reply(
                    structured,
                    &job.request,
                    Errno::Shutdown,
                    "server is shutting down",
                    None,
                ),
                command: job.request.command,
                moved: 0,
                error: Some(Errno::Shutdown),
                received,
                charge,
            });
        }
    }
    // Let in-flight requests finish: the writer ends when the last job drops its handle.
    drop(conn);
    drop(jobs);
    let _ = writer.join();
    reader.get_ref().shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(command: Command, flags: u16, offset: u64, length: u32) -> Request {
        Request { flags, command, cookie: 1, offset, length }
    }

    const ALL: u16 = proto::TX_HAS_FLAGS
        | proto::TX_SEND_FLUSH
        | proto::TX_SEND_FUA
        | proto::TX_SEND_TRIM
        | proto::TX_SEND_WRITE_ZEROES;

    fn errno(r: Result<(), (Errno, String)>) -> Option<Errno> {
        r.err().map(|e| e.0)
    }

    #[test]
    fn out_of_range_errors_follow_the_spec() {
        let max = proto::DEFAULT_MAX_PAYLOAD;
        assert_eq!(
            errno(validate(&request(Command::Read, 0, 1000, 100), ALL, 1024, false, max)),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(validate(&request(Command::Trim, 0, 1000, 100), ALL, 1024, false, max)),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(validate(&request(Command::Write, 0, 1000, 100), ALL, 1024, false, max)),
            Some(Errno::NoSpc)
        );
        assert_eq!(
            errno(validate(&request(Command::WriteZeroes, 0, u64::MAX, 1), ALL, 1024, false, max)),
            Some(Errno::NoSpc)
        );
        assert_eq!(
            errno(validate(&request(Command::Read, 0, 0, 1024), ALL, 1024, false, max)),
            None
        );
    }

    #[test]
    fn unknown_commands_flags_and_read_only() {
        let max = proto::DEFAULT_MAX_PAYLOAD;
        assert_eq!(
            errno(validate(&request(Command::Unknown(42), 0, 0, 0), ALL, 1024, false, max)),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(validate(&request(Command::Cache, 0, 0, 512), ALL, 1024, false, max)),
            Some(Errno::Inval)
        );
        // FLUSH not advertised.
        assert_eq!(
            errno(validate(
                &request(Command::Flush, 0, 0, 0),
                proto::TX_HAS_FLAGS,
                1024,
                false,
                max
            )),
            Some(Errno::Inval)
        );
        // FUA without SEND_FUA; NO_HOLE on a write; DF without structured replies.
        assert_eq!(
            errno(validate(
                &request(Command::Write, proto::CMD_FLAG_FUA, 0, 1),
                proto::TX_HAS_FLAGS,
                1024,
                false,
                max
            )),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(validate(
                &request(Command::Write, proto::CMD_FLAG_NO_HOLE, 0, 1),
                ALL,
                1024,
                false,
                max
            )),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(validate(
                &request(Command::Read, proto::CMD_FLAG_DF, 0, 1),
                ALL,
                1024,
                false,
                max
            )),
            Some(Errno::Inval)
        );
        assert_eq!(
            errno(validate(
                &request(Command::Read, proto::CMD_FLAG_DF, 0, 1),
                ALL | proto::TX_SEND_DF,
                1024,
                true,
                max
            )),
            None
        );
        assert_eq!(
            errno(validate(
                &request(Command::WriteZeroes, proto::CMD_FLAG_NO_HOLE | proto::CMD_FLAG_FUA, 0, 1),
                ALL,
                1024,
                false,
                max
            )),
            None
        );
        let ro = ALL | proto::TX_READ_ONLY;
        assert_eq!(
            errno(validate(&request(Command::Write, 0, 0, 1), ro, 1024, false, max)),
            Some(Errno::Perm)
        );
        assert_eq!(
            errno(validate(&request(Command::Trim, 0, 0, 1), ro, 1024, false, max)),
            Some(Errno::Perm)
        );
        assert_eq!(errno(validate(&request(Command::Read, 0, 0, 1), ro, 1024, false, max)), None);
    }

    #[test]
    fn oversized_reads() {
        let size = 1 << 40;
        let r = request(Command::Read, 0, 0, 4096 + 1);
        assert_eq!(errno(validate(&r, ALL, size, false, 4096)), Some(Errno::Inval));
        assert_eq!(errno(validate(&r, ALL, size, true, 4096)), Some(Errno::Overflow));
    }
}
