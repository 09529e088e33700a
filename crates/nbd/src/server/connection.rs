//! One client connection: the handshake, then the transmission phase with a reader (this
//! thread) parsing requests; export calls run on the shared worker pool (cache hits on the
//! reader itself) and replies leave through [`Replies`].

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::deadline::Deadline;
use super::demote;
use super::handshake::{self, Negotiated, NoTls};
use super::hit_batch::HitBatch;
use super::job::{error_reply, ConnShared, Job};
use super::queue::Sender;
use super::read_run::{self, ReadRun};
use super::replies::{observe, Outgoing, Replies};
use super::spin::SpinRead;
use super::started_reads::{self, Started, StartedReads};
use super::tls::ConnTls;
use super::worker;
use super::Shared;
use crate::errno::Errno;
use crate::proto;
use crate::request::{Command, Request};
use crate::stream::{self, Stream};

/// Serve one accepted connection until it ends.
pub(crate) fn serve(shared: &Arc<Shared>, stream: Stream, jobs: Sender<Job>) {
    if let Some(observer) = &shared.observer {
        observer.on_connection_opened();
    }
    let config = &shared.config;
    let mut guarded = Deadline::new(stream, config.handshake_deadline);
    let shutting_down = || shared.shutting_down();
    let negotiated = match &config.tls {
        Some(settings) => {
            let mut tls = ConnTls { settings, write_timeout: config.write_timeout };
            handshake::negotiate_tls(
                &mut guarded,
                shared.exports.as_ref(),
                config,
                &shutting_down,
                &mut tls,
            )
        }
        None => handshake::negotiate_tls(
            &mut guarded,
            shared.exports.as_ref(),
            config,
            &shutting_down,
            &mut NoTls,
        ),
    };
    match negotiated {
        Ok(Some(negotiated)) => {
            // A socket whose timeouts cannot be reset is dropped (closed) here.
            if let Ok(stream) = guarded.into_stream(config.write_timeout) {
                transmission(shared, stream, negotiated, jobs);
            }
        }
        _ => guarded.stream.shutdown(Shutdown::Both),
    }
    if let Some(observer) = &shared.observer {
        observer.on_connection_closed();
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
        Command::Cache => tx_flags & proto::TX_SEND_CACHE != 0,
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
    if command == Command::Flush && (request.offset != 0 || request.length != 0) {
        // "For a flush request, *length* and *offset* are reserved, and MUST be set to
        // all-zero"; nbdkit refuses such a FLUSH with EINVAL, and so does ember.
        return Err((
            Errno::Inval,
            format!(
                "flush with offset {} and length {}: both must be zero",
                request.offset, request.length
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
    let Ok(direct) = socket.try_clone() else {
        socket.shutdown(Shutdown::Both);
        return;
    };
    let replies = Arc::new(Replies::new(
        direct,
        Arc::clone(shared),
        shared.observer.clone(),
        config.max_in_flight,
        config.max_in_flight_bytes,
    ));
    let writer = {
        let replies = Arc::clone(&replies);
        std::thread::Builder::new()
            .name("nbd-writer".into())
            .spawn(move || replies.writer_loop(writer_stream))
    };
    let Ok(writer) = writer else {
        socket.shutdown(Shutdown::Both);
        return;
    };
    let Negotiated { export, structured, tx_flags, demote } = negotiated;
    let size = export.size();
    let conn = Arc::new(ConnShared { export, structured, replies: Arc::clone(&replies) });

    let mut header = [0u8; proto::REQUEST_HEADER_LEN];
    // Buffered from here on only: the handshake read exactly what it needed, unbuffered.
    let mut reader = BufReader::with_capacity(64 * 1024, SpinRead::new(socket, config.spin));
    let mut batch = HitBatch::new();
    let batching = conn.export.batches_reads();
    let mut run = ReadRun::new();
    // Hits started as they are parsed, reaped as they complete (started_reads.rs), where the
    // export can: its hits wait on a device that takes many reads at once.
    let starts = batching && conn.export.starts_reads();
    let mut started = StartedReads::new(Arc::clone(&conn.export));
    let mut failed: Vec<(Request, Instant)> = Vec::new();
    // Requests taken from the buffer since the reader last read the socket.
    let mut burst = 0usize;
    loop {
        // READs in flight and no request buffered: reap and answer them while waiting for
        // the socket, so the client's next requests are started as soon as they come.
        if !started.is_empty() && reader.buffer().is_empty() {
            wait_socket_or_reads(shared, &conn, &jobs, &mut reader, &mut started, &mut batch);
        }
        // A client sending one request at a time (iodepth 1), with nothing in flight: the
        // next request is this thread's only work for the connection, so poll the socket
        // briefly before sleeping (spin.rs). Not after a burst (a deeper client, busy
        // turning replies around, needs the cores more than this thread does).
        if reader.buffer().is_empty() {
            reader.get_mut().arm(burst <= 1 && replies.idle());
            burst = 0;
        }
        let Ok(true) = stream::read_exact_or_eof(&mut reader, &mut header) else {
            break;
        };
        burst += 1;
        // Bad magic: the stream cannot be resynchronized; hard disconnect.
        let Ok(request) = Request::parse(&header) else {
            break;
        };
        let idle = replies.idle();
        // The hit path: a valid READ on a connection with nothing in flight is offered to
        // the export at once, read into a reusable buffer (this thread's, or the batch of
        // replies when the next request is already here) and answered from it, with no
        // admission: nothing is held once the reply is sent, and a reply the socket does
        // not take at once is admitted then (`Replies::send_borrowed`, `send_batch`).
        if request.command == Command::Read
            && request.length <= config.max_payload
            && u64::from(request.length) <= super::GUARANTEED_BYTES
            && (idle || (starts && replies.in_flight() <= started_reads::QUEUED))
            && !shared.shutting_down()
            && validate(&request, tx_flags, size, structured, config.max_payload).is_ok()
        {
            let more = reader.buffer().len() >= proto::REQUEST_HEADER_LEN;
            // Hits that wait on a device, started at once and answered as they complete.
            // A lone READ (nothing else buffered or in flight, from a client that has been
            // sending one at a time: iodepth 1) is read at once on this thread below, with no
            // ring round trip. From a client that kept several in flight it is the first of
            // its next burst: started, so the rest are parsed and started as they come
            // instead of waiting in the socket while this thread waits for the device.
            if starts
                && request.length as usize <= started_reads::MAX_ONE
                && (more || !started.is_empty() || started.deep())
            {
                let len = request.length as usize;
                while !started.has_room(len) {
                    started.reap(&conn, true, None, &mut batch, &mut failed);
                    batch.flush(&replies);
                    give_back(shared, &conn, &jobs, &mut started, &mut batch, &mut failed);
                }
                let mut o = started.start(&conn, &request, Instant::now(), &mut batch);
                // Busy: the READ needs a stripe one of the READs in flight holds (or room on
                // the device): wait for some to complete and try again.
                while matches!(o, Started::Busy) {
                    started.reap(&conn, true, None, &mut batch, &mut failed);
                    batch.flush(&replies);
                    give_back(shared, &conn, &jobs, &mut started, &mut batch, &mut failed);
                    o = started.start(&conn, &request, Instant::now(), &mut batch);
                }
                match o {
                    Started::InFlight => {
                        // Hand the started READs to the device every few READs while more
                        // requests are buffered (the device starts on them while the rest
                        // are parsed); with none buffered, the wait for the socket does.
                        if more && started.unsubmitted() >= started_reads::SUBMIT_EVERY {
                            started.reap(&conn, false, None, &mut batch, &mut failed);
                            batch.flush(&replies);
                            give_back(shared, &conn, &jobs, &mut started, &mut batch, &mut failed);
                        }
                        continue;
                    }
                    Started::Served => {
                        if !more || batch.full() {
                            batch.flush(&replies);
                        }
                        continue;
                    }
                    // The ordinary path (below) waits for the READs in flight first: this
                    // READ may need a stripe one of them holds.
                    Started::Ordinary | Started::Busy => {}
                }
            } else if !idle || (starts && !started.is_empty()) {
                // A larger READ while READs are in flight, or requests in flight elsewhere
                // (the paths below assume none): the ordinary path, after them.
            } else if batching
                && request.length as usize <= read_run::MAX_ONE
                && (more || !run.is_empty())
            {
                // Hits that wait on a device (an O_DIRECT cache) without READs started
                // to complete later: while more requests are buffered, READs gather into a
                // run read in one call (read_run.rs).
                run.push(request, Instant::now());
                if !more || run.full() {
                    read_run(shared, &conn, &jobs, &mut run, &mut batch);
                }
                continue;
            } else if worker::read_at_once(&conn, &request, Instant::now(), &mut batch, more) {
                continue;
            }
        }
        // Anything else may wait (for room, a payload, a worker): the READs in flight, the
        // gathered READs and the batched replies go first.
        started.drain(&conn, &mut batch, &mut failed);
        read_run(shared, &conn, &jobs, &mut run, &mut batch);
        batch.flush(&replies);
        ordinary(shared, &conn, &jobs, &mut failed);
        if request.command == Command::Disc {
            observe(&shared.observer, Command::Disc, 0, None, Duration::ZERO);
            break;
        }
        let length = u64::from(request.length);
        let mut payload = Vec::new();
        let mut charge = 0;
        // A DEMOTE carries a payload like a WRITE; it is read even when the DEMOTE is then
        // refused, so the stream stays in step and the connection lives.
        if matches!(request.command, Command::Write | Command::Demote) {
            if request.length > config.max_payload {
                if length > config.discard_limit || stream::discard(&mut reader, length).is_err() {
                    break;
                }
                replies.acquire(0);
                let message = format!(
                    "{} length {length} exceeds the maximum payload {}",
                    request.command.label(),
                    config.max_payload
                );
                conn.send(Outgoing {
                    bytes: error_reply(structured, &request, Errno::Inval, &message, None),
                    command: request.command,
                    moved: 0,
                    error: Some(Errno::Inval),
                    received: Instant::now(),
                    charge: 0,
                    counted: false,
                });
                continue;
            }
            charge = length;
            if !replies.acquire(charge) {
                // Shutting down: no buffer for the payload, so no reading it either.
                replies.release(0);
                break;
            }
            payload = vec![0u8; request.length as usize];
            if reader.read_exact(&mut payload).is_err() {
                replies.release(charge);
                break;
            }
        } else {
            if request.command == Command::Read && request.length <= config.max_payload {
                charge = length;
            }
            if !replies.acquire(charge) {
                // Shutting down: admitted without a buffer, answered NBD_ESHUTDOWN below.
                charge = 0;
            }
        }
        let received = Instant::now();
        let verdict = if shared.shutting_down() {
            // Read after shutdown began: refused, as the spec suggests, with NBD_ESHUTDOWN.
            Err((Errno::Shutdown, "server is shutting down".to_string()))
        } else if request.command == Command::Demote {
            demote::check(&request, demote, size)
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
                counted: false,
            });
            continue;
        }
        let job = Job { conn: Arc::clone(&conn), request, payload, received, charge };
        // A READ the export will serve at once (a cache hit) runs on the reader itself: no
        // hand-off to a worker, no wake-up back. Everything else goes to the worker pool, so
        // a slow request never holds up the reading of later ones. The price: one
        // connection's hits are served one at a time (several connections run in parallel;
        // the export advertises NBD_FLAG_CAN_MULTI_CONN where it is safe).
        // A DEMOTE runs on the reader too, so it is placed before any request the client
        // sent after it (Wong & Wilkes' client demotes, then reads: the array sees the two
        // in that order, as the simulator does). It costs a cache-device write at most.
        if job.request.command == Command::Demote
            || (job.request.command == Command::Read
                && conn.export.read_is_fast(job.request.offset, length))
        {
            worker::execute(job);
            continue;
        }
        if let Err(job) = jobs.send(job) {
            // No workers left (cannot happen while the server runs); answer ESHUTDOWN.
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
                counted: false,
            });
        }
    }
    // Answer every request already read (the READs in flight waited for: their buffers are
    // the device's until then), then let the writer go.
    started.drain(&conn, &mut batch, &mut failed);
    read_run(shared, &conn, &jobs, &mut run, &mut batch);
    batch.flush(&replies);
    ordinary(shared, &conn, &jobs, &mut failed);
    drop(started);
    drop(jobs);
    drop(conn);
    replies.close();
    let _ = writer.join();
    reader.get_ref().get_ref().shutdown(Shutdown::Both);
}

/// Wait until the socket holds data (or ends) while READs are in flight: answer each READ
/// as it completes (failed ones go the ordinary way); return when a request may be read, or
/// when nothing is in flight any more (the caller then blocks on the socket as usual).
fn wait_socket_or_reads(
    shared: &Arc<Shared>,
    conn: &Arc<ConnShared>,
    jobs: &Sender<Job>,
    reader: &mut BufReader<SpinRead>,
    started: &mut StartedReads,
    batch: &mut HitBatch,
) {
    let mut failed = Vec::new();
    loop {
        reader.get_mut().set_nonblocking(true);
        let polled = reader.fill_buf().map(|b| b.len());
        reader.get_mut().set_nonblocking(false);
        match polled {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            // Data, the end of the stream or an error: for the caller's read to see, once the
            // READs started are with the device (and those done answered).
            _ => {
                if started.unsubmitted() > 0 {
                    started.reap(conn, false, None, batch, &mut failed);
                    batch.flush(&conn.replies);
                    give_back(shared, conn, jobs, started, batch, &mut failed);
                }
                return;
            }
        }
        // Nothing to read: hand the READs started to the device and wait for some to
        // complete or for the client's next requests, whichever comes first (one system
        // call: the socket's poll rides on the ring), then answer those that completed.
        started.reap(conn, true, Some(reader.get_ref().get_ref().as_raw_fd()), batch, &mut failed);
        batch.flush(&conn.replies);
        give_back(shared, conn, jobs, started, batch, &mut failed);
        if started.is_empty() {
            return;
        }
    }
}

/// Send READs that failed after they were started the ordinary way, once no READ is in
/// flight any more: the ordinary path may wait for room (`Replies::acquire`), and a worker
/// holding that room may itself wait for a stripe a READ in flight holds.
fn give_back(
    shared: &Arc<Shared>,
    conn: &Arc<ConnShared>,
    jobs: &Sender<Job>,
    started: &mut StartedReads,
    batch: &mut HitBatch,
    failed: &mut Vec<(Request, Instant)>,
) {
    if failed.is_empty() {
        return;
    }
    started.drain(conn, batch, failed);
    batch.flush(&conn.replies);
    ordinary(shared, conn, jobs, failed);
}

/// Send READs the hit paths gave back (declined after all, or failed) the ordinary way:
/// admitted, then a worker (which reports a failure properly), or answered `NBD_ESHUTDOWN`
/// once shutdown began.
fn ordinary(
    shared: &Arc<Shared>,
    conn: &Arc<ConnShared>,
    jobs: &Sender<Job>,
    reads: &mut Vec<(Request, Instant)>,
) {
    for (request, received) in reads.drain(..) {
        let mut charge = u64::from(request.length);
        if !conn.replies.acquire(charge) {
            charge = 0;
        }
        let refuse = |request: &Request, charge| {
            conn.send(Outgoing {
                bytes: error_reply(
                    conn.structured,
                    request,
                    Errno::Shutdown,
                    "server is shutting down",
                    None,
                ),
                command: request.command,
                moved: 0,
                error: Some(Errno::Shutdown),
                received,
                charge,
                counted: false,
            })
        };
        if shared.shutting_down() {
            refuse(&request, charge);
            continue;
        }
        let job = Job { conn: Arc::clone(conn), request, payload: Vec::new(), received, charge };
        if let Err(job) = jobs.send(job) {
            refuse(&job.request, charge);
        }
    }
}

/// Read a gathered run of READs (read_run.rs): the hits join `batch` and are sent; the READs
/// the export declined are admitted and go to the worker pool (or are answered
/// `NBD_ESHUTDOWN` once shutdown began), as the ordinary path does.
fn read_run(
    shared: &Arc<Shared>,
    conn: &Arc<ConnShared>,
    jobs: &Sender<Job>,
    run: &mut ReadRun,
    batch: &mut HitBatch,
) {
    if run.is_empty() {
        return;
    }
    let mut declined = run.read(conn, batch);
    batch.flush(&conn.replies);
    ordinary(shared, conn, jobs, &mut declined);
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
        let cache = |tx, offset, length, size| {
            errno(validate(&request(Command::Cache, 0, offset, length), tx, size, false, max))
        };
        assert_eq!(cache(ALL, 0, 512, 1024), Some(Errno::Inval), "CACHE not advertised");
        // Advertised: any length in the export (not capped by max_payload), read-only too.
        let tx = ALL | proto::TX_SEND_CACHE;
        assert_eq!(cache(tx, 0, 1 << 30, 1 << 31), None);
        assert_eq!(cache(tx | proto::TX_READ_ONLY, 0, 512, 1024), None);
        assert_eq!(cache(tx, 512, 1024, 1024), Some(Errno::Inval));
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
    fn flush_needs_zero_offset_and_length() {
        let max = proto::DEFAULT_MAX_PAYLOAD;
        for (offset, length, expected) in
            [(0, 0, None), (512, 0, Some(Errno::Inval)), (0, 1, Some(Errno::Inval))]
        {
            let r = request(Command::Flush, 0, offset, length);
            assert_eq!(errno(validate(&r, ALL, 1024, false, max)), expected, "{offset}+{length}");
        }
    }

    #[test]
    fn oversized_reads() {
        let size = 1 << 40;
        let r = request(Command::Read, 0, 0, 4096 + 1);
        assert_eq!(errno(validate(&r, ALL, size, false, 4096)), Some(Errno::Inval));
        assert_eq!(errno(validate(&r, ALL, size, true, 4096)), Some(Errno::Overflow));
    }
}
