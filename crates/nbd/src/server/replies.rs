//! The reply path of one connection: replies leave as whole messages, one at a time. A
//! worker finishing a request sends its reply straight to the socket when nothing else is
//! queued and the socket takes it without blocking; otherwise the reply is queued for the
//! connection's writer thread, the only one that ever blocks on the socket. So a client
//! that stops reading stalls only its own writer, never a worker. Also bounds what one
//! connection may have in flight.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Shared;
use crate::errno::Errno;
use crate::request::Command;
use crate::stats::{CommandObservation, ServerObserver};
use crate::stream::{self, Stream};

/// A reply ready to go.
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
    /// Already reported to the observer (the rest of a batch of replies, each reported when
    /// the batch left the reader).
    pub counted: bool,
}

/// Report an answered request.
pub(crate) fn observe(
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

/// A reply partly or not yet written.
struct Queued {
    out: Outgoing,
    sent: usize,
}

/// How far [`Replies::send_now`] got.
enum SendNow {
    /// Every byte went out.
    All,
    /// These many bytes went out (maybe 0: something was queued ahead, or the socket was
    /// full); the rest must be queued.
    Part(usize),
    /// The send failed; the connection is dead.
    Failed,
}

#[derive(Default)]
struct State {
    /// Replies for the writer thread, oldest first; the first may be partly sent.
    backlog: VecDeque<Queued>,
    /// The writer thread is writing a reply with the lock released.
    writer_busy: bool,
    /// The socket failed: every further reply is dropped.
    dead: bool,
    /// No more replies will come: the writer thread may exit.
    closed: bool,
    /// Requests in flight (admitted, reply not yet written or dropped) and their buffers.
    in_flight: usize,
    in_flight_bytes: u64,
    /// The writer thread waits for backlog (signal `to_writer` only then).
    writer_waiting: bool,
    /// The reader waits for in-flight requests to end (signal `to_reader` only then).
    reader_waiting: bool,
}

/// The reply path and in-flight accounting of one connection.
pub(crate) struct Replies {
    socket: Stream,
    /// The server, for its shared byte budget.
    server: Arc<Shared>,
    state: Mutex<State>,
    /// `State::in_flight`, mirrored after every change (under the lock), so the reader can
    /// ask whether the connection is idle without taking the lock. Only the reader admits
    /// requests, so a 0 it reads stays 0 until it admits one itself.
    in_flight: AtomicUsize,
    /// Signals the writer thread: new backlog, or closed.
    to_writer: Condvar,
    /// Signals the reader (and `close`): an in-flight request ended, or the socket died.
    to_reader: Condvar,
    observer: Option<Arc<dyn ServerObserver>>,
    max_requests: usize,
    max_bytes: u64,
}

impl Replies {
    /// The reply path for `socket`.
    pub(crate) fn new(
        socket: Stream,
        server: Arc<Shared>,
        observer: Option<Arc<dyn ServerObserver>>,
        max_requests: usize,
        max_bytes: u64,
    ) -> Replies {
        Replies {
            socket,
            server,
            state: Mutex::new(State::default()),
            in_flight: AtomicUsize::new(0),
            to_writer: Condvar::new(),
            to_reader: Condvar::new(),
            observer,
            max_requests,
            max_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait on `to_reader` (the reader admitting a request, or `close`).
    fn wait_for_room<'a>(&self, mut guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        guard.reader_waiting = true;
        let mut guard = self.to_reader.wait(guard).unwrap_or_else(|p| p.into_inner());
        guard.reader_waiting = false;
        guard
    }

    /// Wait on `to_writer` (the writer thread, for backlog).
    fn wait_for_backlog<'a>(&self, mut guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        guard.writer_waiting = true;
        let mut guard = self.to_writer.wait(guard).unwrap_or_else(|p| p.into_inner());
        guard.writer_waiting = false;
        guard
    }

    /// Release the lock, then wake the writer thread if it waits.
    fn wake_writer(&self, state: MutexGuard<'_, State>) {
        let waiting = state.writer_waiting;
        drop(state);
        if waiting {
            self.to_writer.notify_all();
        }
    }

    /// Admit one request holding `charge` buffer bytes, waiting while the connection is at
    /// its limits (one request is always admitted) and then while the server's shared budget
    /// is spent. `false`: the server began shutting down while waiting; the request is
    /// admitted without any buffer (charge 0), to be answered NBD_ESHUTDOWN or released.
    pub(crate) fn acquire(&self, charge: u64) -> bool {
        let mut state = self.lock();
        while state.in_flight > 0
            && (state.in_flight >= self.max_requests
                || state.in_flight_bytes + charge > self.max_bytes)
        {
            state = self.wait_for_room(state);
        }
        drop(state);
        // Asked again at every wake-up: only this reader admits requests, but the requests in
        // flight may end while it waits, and then the guarantee applies.
        let charged = self.server.budget.acquire(charge, || self.lock().in_flight == 0);
        let mut state = self.lock();
        state.in_flight += 1;
        self.in_flight.store(state.in_flight, Ordering::Release);
        if charged {
            state.in_flight_bytes += charge;
        }
        charged
    }

    /// Whether no request of this connection is in flight (admitted and not yet answered),
    /// so none is queued for the writer either. Lock-free; exact when the reader asks.
    pub(crate) fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Requests of this connection in flight (admitted and not yet answered, or replies
    /// queued for the writer). Lock-free.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Give back an admission whose request will never be answered.
    pub(crate) fn release(&self, charge: u64) {
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        self.in_flight.store(state.in_flight, Ordering::Release);
        state.in_flight_bytes = state.in_flight_bytes.saturating_sub(charge);
        let reader_waiting = state.reader_waiting;
        drop(state);
        self.server.budget.release(charge);
        if reader_waiting {
            self.to_reader.notify_all();
        }
    }

    /// A reply has been written or dropped: report it and end its admission.
    fn finish(&self, out: &Outgoing) {
        if !out.counted {
            observe(&self.observer, out.command, out.moved, out.error, out.received.elapsed());
        }
        self.release(out.charge);
    }

    fn kill(&self, state: &mut State) {
        state.dead = true;
        // Make the reader stop too.
        self.socket.shutdown(Shutdown::Both);
    }

    /// Send a reply: directly if possible, else through the writer thread.
    pub(crate) fn send(&self, out: Outgoing) {
        let mut state = self.lock();
        if state.dead {
            drop(state);
            self.finish(&out);
            return;
        }
        if !state.writer_busy && state.backlog.is_empty() {
            match stream::send_nonblocking(&self.socket, &out.bytes) {
                Ok(n) if n == out.bytes.len() => {
                    drop(state);
                    self.finish(&out);
                    return;
                }
                Ok(n) => state.backlog.push_back(Queued { out, sent: n }),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    state.backlog.push_back(Queued { out, sent: 0 })
                }
                Err(_) => {
                    self.kill(&mut state);
                    drop(state);
                    self.finish(&out);
                    return;
                }
            }
        } else {
            state.backlog.push_back(Queued { out, sent: 0 });
        }
        self.wake_writer(state);
    }

    /// Send `bytes` straight to the socket without blocking, if nothing is queued ahead of
    /// them (the writer is idle and the backlog empty). A failed send kills the connection.
    fn send_now(&self, state: &mut State, bytes: &[u8]) -> SendNow {
        if state.writer_busy || !state.backlog.is_empty() {
            return SendNow::Part(0);
        }
        match stream::send_nonblocking(&self.socket, bytes) {
            Ok(n) if n == bytes.len() => SendNow::All,
            Ok(n) => SendNow::Part(n),
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) =>
            {
                SendNow::Part(0)
            }
            Err(_) => {
                self.kill(state);
                SendNow::Failed
            }
        }
    }

    /// Send a reply whose bytes the caller keeps (a thread's reusable reply buffer): straight
    /// to the socket when nothing is queued and it takes the whole reply without blocking
    /// (nothing copied), else a copy is queued for the writer thread. `out` carries the
    /// bookkeeping (its `bytes` are ignored). `admitted`: the request went through
    /// [`Replies::acquire`]; if not (a read served at once on an idle connection), a reply
    /// that has to be queued is admitted here, charged without waiting: the connection had
    /// nothing in flight, where `acquire` never waits for a charge of at most the
    /// guaranteed bytes either.
    pub(crate) fn send_borrowed(&self, bytes: &[u8], mut out: Outgoing, admitted: bool) {
        let end = |out: &Outgoing| {
            if admitted {
                self.finish(out);
            } else {
                observe(&self.observer, out.command, out.moved, out.error, out.received.elapsed());
            }
        };
        let mut state = self.lock();
        if state.dead {
            drop(state);
            end(&out);
            return;
        }
        let sent = match self.send_now(&mut state, bytes) {
            SendNow::Part(n) => n,
            SendNow::All | SendNow::Failed => {
                drop(state);
                end(&out);
                return;
            }
        };
        if !admitted {
            state.in_flight += 1;
            self.in_flight.store(state.in_flight, Ordering::Release);
            state.in_flight_bytes += out.charge;
            self.server.budget.force(out.charge);
        }
        out.bytes = bytes.to_vec();
        state.backlog.push_back(Queued { out, sent });
        self.wake_writer(state);
    }

    /// Send a batch of READ replies of a connection with nothing in flight
    /// ([`super::hit_batch::HitBatch`]): `batch` holds when each request was received and its
    /// data bytes. Like [`Replies::send_borrowed`] for a request that was not admitted: straight
    /// to the socket if it takes everything at once, else what is left is queued (one item,
    /// admitted and charged here without waiting). Every reply is reported now.
    pub(crate) fn send_batch(&self, bytes: &[u8], batch: &[(Instant, u64)]) {
        let mut state = self.lock();
        let (queue, sent) = match state.dead {
            true => (false, 0),
            false => match self.send_now(&mut state, bytes) {
                SendNow::Part(n) => (true, n),
                SendNow::All | SendNow::Failed => (false, 0),
            },
        };
        if queue {
            let charge = bytes.len() as u64;
            state.in_flight += 1;
            self.in_flight.store(state.in_flight, Ordering::Release);
            state.in_flight_bytes += charge;
            self.server.budget.force(charge);
            let out = Outgoing {
                bytes: bytes.to_vec(),
                command: Command::Read,
                moved: 0,
                error: None,
                received: Instant::now(),
                charge,
                counted: true,
            };
            state.backlog.push_back(Queued { out, sent });
            self.wake_writer(state);
        } else {
            drop(state);
        }
        for &(received, moved) in batch {
            observe(&self.observer, Command::Read, moved, None, received.elapsed());
        }
    }

    /// The writer thread: write queued replies (blocking) until [`Replies::close`].
    pub(crate) fn writer_loop(&self, mut writer: Stream) {
        loop {
            let mut state = self.lock();
            let item = loop {
                if let Some(item) = state.backlog.pop_front() {
                    break item;
                }
                if state.closed {
                    return;
                }
                state = self.wait_for_backlog(state);
            };
            let dead = state.dead;
            state.writer_busy = true;
            drop(state);
            let failed = !dead && writer.write_all(&item.out.bytes[item.sent..]).is_err();
            self.finish(&item.out);
            let mut state = self.lock();
            state.writer_busy = false;
            if failed {
                // Gone, or stopped reading past the write timeout: drop everything else.
                self.kill(&mut state);
            }
        }
    }

    /// Wait until every admitted request is answered, then let the writer thread exit.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        while state.in_flight > 0 {
            state = self.wait_for_room(state);
        }
        state.closed = true;
        self.wake_writer(state);
    }
}
