//! The reader's socket with a brief, adaptive busy-poll before it blocks: right after a
//! reply, when the connection has nothing in flight, the client's next request usually
//! arrives within microseconds (iodepth 1: the client only turns the reply around). Polling
//! the socket (`recv` with `MSG_DONTWAIT`) for that long saves the reader going to sleep and
//! being woken again, which on a 2-core virtual machine is most of a request's cost
//! (docs/design/nbd-internals.md; bench/serve measures it).
//!
//! Bounded: a poll happens only when the caller [`SpinRead::arm`]s it (the connection had
//! nothing in flight, so nothing else of this connection needs the core), and lasts at most
//! the current budget, itself at most [`ServerConfig::spin`](super::ServerConfig::spin).
//! Adaptive, like KVM's halt polling: a wait (poll and block together) that ended within the
//! maximum doubles the budget (from [`STEP`]); a longer one (the client paused) halves it,
//! down to zero. An idle connection therefore polls once, for at most the budget, then
//! blocks; a connection whose client pauses between requests stops polling.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use crate::stream::{self, Stream};

/// The smallest budget a growing one starts from.
pub(crate) const STEP: Duration = Duration::from_micros(5);

/// The adaptive budget of one connection's reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Upper bound (zero: never poll).
    max: Duration,
    /// How long the next poll may last.
    now: Duration,
}

impl Budget {
    /// A budget of at most `max`, starting at `max`.
    pub(crate) fn new(max: Duration) -> Budget {
        Budget { max, now: max }
    }

    /// How long the next poll may last.
    pub(crate) fn current(&self) -> Duration {
        self.now
    }

    /// Learn from a wait for data that lasted `waited` (poll and block together).
    pub(crate) fn learn(&mut self, waited: Duration) {
        if self.max.is_zero() {
            return;
        }
        if waited <= self.max {
            // The data came soon after the poll gave up (or during it): poll longer.
            self.now = (self.now * 2).clamp(STEP, self.max);
        } else {
            // A pause longer than any budget: polling was (and would be) wasted.
            self.now /= 2;
            if self.now < STEP {
                self.now = Duration::ZERO;
            }
        }
    }
}

/// A socket read that polls briefly before blocking when armed.
pub(crate) struct SpinRead {
    stream: Stream,
    budget: Budget,
    armed: bool,
    /// Reads never block: `WouldBlock` when the socket holds nothing.
    nonblocking: bool,
    /// Polls that found data, and polls that gave up (for tests and docs).
    pub(crate) polls_served: u64,
    pub(crate) polls_given_up: u64,
}

impl SpinRead {
    /// Wrap `stream`; `max` is the largest poll (zero: a plain blocking socket).
    pub(crate) fn new(stream: Stream, max: Duration) -> SpinRead {
        SpinRead {
            stream,
            budget: Budget::new(max),
            armed: false,
            nonblocking: false,
            polls_served: 0,
            polls_given_up: 0,
        }
    }

    /// The socket.
    pub(crate) fn get_ref(&self) -> &Stream {
        &self.stream
    }

    /// Whether the next reads that find no data may poll first (the connection has nothing
    /// in flight: this thread is the only one with work for it).
    pub(crate) fn arm(&mut self, armed: bool) {
        self.armed = armed;
    }

    /// Whether reads return `WouldBlock` instead of blocking when the socket holds nothing
    /// (the reader has READs in flight to reap meanwhile, `started_reads.rs`).
    pub(crate) fn set_nonblocking(&mut self, on: bool) {
        self.nonblocking = on;
    }

    /// Poll for up to the budget; `None` if nothing came.
    fn poll(&mut self, buf: &mut [u8], start: Instant) -> Option<io::Result<usize>> {
        let budget = self.budget.current();
        loop {
            match stream::recv_nonblocking(&self.stream, buf) {
                Ok(n) => return Some(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Err(e)),
            }
            if start.elapsed() >= budget {
                return None;
            }
            // Give the core to any other runnable thread (the client itself, on a small
            // machine) instead of holding it; with nothing else runnable this returns at once
            // and the thread never sleeps.
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
}

impl Read for SpinRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.nonblocking && !buf.is_empty() {
            return stream::recv_nonblocking(&self.stream, buf);
        }
        if !self.armed || buf.is_empty() {
            return self.stream.read(buf);
        }
        let start = Instant::now();
        if !self.budget.current().is_zero() {
            if let Some(got) = self.poll(buf, start) {
                self.polls_served += 1;
                self.budget.learn(start.elapsed());
                return got;
            }
            self.polls_given_up += 1;
        }
        let got = self.stream.read(buf);
        self.budget.learn(start.elapsed());
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    const US: fn(u64) -> Duration = Duration::from_micros;

    #[test]
    fn budget_grows_on_short_waits_and_shrinks_to_zero_on_long_ones() {
        let mut b = Budget::new(US(40));
        assert_eq!(b.current(), US(40));
        b.learn(US(10));
        assert_eq!(b.current(), US(40), "never above the maximum");
        b.learn(Duration::from_millis(5));
        assert_eq!(b.current(), US(20));
        b.learn(Duration::from_millis(5));
        assert_eq!(b.current(), US(10));
        b.learn(Duration::from_millis(5));
        assert_eq!(b.current(), US(5));
        b.learn(Duration::from_millis(5));
        assert_eq!(b.current(), Duration::ZERO, "a paused client stops the polling");
        // A short wait again (the client is back in a tight loop): polling resumes.
        b.learn(US(30));
        assert_eq!(b.current(), STEP);
        b.learn(US(30));
        b.learn(US(30));
        b.learn(US(30));
        assert_eq!(b.current(), US(40));
        let mut off = Budget::new(Duration::ZERO);
        off.learn(US(1));
        assert_eq!(off.current(), Duration::ZERO, "a zero maximum never polls");
    }

    #[test]
    fn data_arriving_during_the_poll_is_read_without_blocking() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut r = SpinRead::new(Stream::Unix(a), Duration::from_secs(2));
        r.arm(true);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b.write_all(b"ping").unwrap();
            b
        });
        let mut buf = [0u8; 4];
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        assert_eq!((r.polls_served, r.polls_given_up), (1, 0));
        drop(writer.join().unwrap());
    }

    #[test]
    fn data_arriving_after_the_budget_is_still_read() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut r = SpinRead::new(Stream::Unix(a), US(50));
        r.arm(true);
        // Ten thousand times the budget: the reader has polled and given up by then even on
        // a loaded machine.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            b.write_all(b"late").unwrap();
            b
        });
        let mut buf = [0u8; 4];
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"late");
        assert_eq!((r.polls_served, r.polls_given_up), (0, 1));
        assert_eq!(r.budget.current(), US(25), "a long wait halves the budget");
        // Disarmed: no poll at all.
        r.arm(false);
        let b = writer.join().unwrap();
        (&b).write_all(b"next").unwrap();
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"next");
        assert_eq!((r.polls_served, r.polls_given_up), (0, 1));
    }

    #[test]
    fn end_of_stream_during_the_poll_is_reported() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut r = SpinRead::new(Stream::Unix(a), Duration::from_secs(2));
        r.arm(true);
        drop(b);
        let mut buf = [0u8; 4];
        assert_eq!(r.read(&mut buf).unwrap(), 0);
    }
}
