//! The started reads in flight on a ring, by flight number: each holds its buffer, lent to
//! the kernel ([`Lent`]), until the completions of all its parts (one device read each) are
//! in; then the buffer is reclaimed and waits, with every part's outcome, for the running
//! [`reap`](super::reap) to hand it back. Dropping the table (the thread's ring, when the
//! thread ends) drops the loans of the reads still in flight, which leaks their buffers.

use std::io;

use ember_readbuf::{Lent, ReadBuf};
use smallvec::SmallVec;

use super::super::registered::Registered;
use super::{FLIGHT_SHIFT, LATER, PART_MASK};

/// Each part's outcome, in the order of the parts: the bytes read, or the error.
pub(super) type Outcomes = SmallVec<[io::Result<usize>; 4]>;

/// One started read in flight.
pub(super) struct Flight {
    /// The buffer its parts read into.
    pub(super) buf: Lent,
    /// The caller's name for it.
    pub(super) tag: u64,
    /// Parts whose completion is not in yet.
    pub(super) left: usize,
    /// Each part's outcome (those not in yet: a placeholder).
    pub(super) outcomes: Outcomes,
    /// The registered buffer its parts read into with `IORING_OP_READ_FIXED`.
    pub(super) fixed: Option<u16>,
}

/// A started read whose parts all completed: its buffer, back from the kernel.
pub(super) struct Finished {
    pub(super) tag: u64,
    pub(super) buf: ReadBuf,
    pub(super) outcomes: Outcomes,
}

/// The started reads of one ring.
pub(super) struct Flights {
    /// By flight number.
    table: Vec<Option<Flight>>,
    /// Flight numbers not in use.
    free: Vec<u16>,
    /// Reads finished, for the running reap to hand back (kept to reuse its memory).
    pub(super) finished: Vec<Finished>,
}

impl Flights {
    /// Room for `n` reads in flight (a ring's entries: each read has at least one part).
    pub(super) fn new(n: usize) -> Flights {
        let n = n.min(usize::from(u16::MAX));
        Flights {
            table: (0..n).map(|_| None).collect(),
            free: (0..n as u16).rev().collect(),
            finished: Vec::with_capacity(n),
        }
    }

    /// A free flight number, taken: [`Flights::open`] it, or [`Flights::give_back`] it.
    pub(super) fn take_number(&mut self) -> Option<u16> {
        self.free.pop()
    }

    /// Return a number [`Flights::take_number`] gave, unused.
    pub(super) fn give_back(&mut self, at: u16) {
        self.free.push(at);
    }

    /// The user data of part `k` of flight `at`.
    pub(super) fn user_data(at: u16, k: usize) -> u64 {
        LATER | u64::from(at) << FLIGHT_SHIFT | k as u64
    }

    /// Record `flight` under the number `at` (taken with [`Flights::take_number`]).
    pub(super) fn open(&mut self, at: u16, flight: Flight) {
        if let Some(place) = self.table.get_mut(usize::from(at)) {
            *place = Some(flight);
        }
    }

    /// The completion of a part (its user data `ud`, its result `res`): recorded, and its
    /// flight finished if it was the last. `Some(fixed)` (a fixed read or not) if it was a
    /// part of a read in flight; `None`: not one (nothing recorded).
    pub(super) fn complete(
        &mut self,
        ud: u64,
        res: i32,
        registered: &mut Registered,
    ) -> Option<bool> {
        let at = ((ud & !LATER) >> FLIGHT_SHIFT) as usize;
        let k = (ud & PART_MASK) as usize;
        let place = self.table.get_mut(at)?;
        let f = place.as_mut()?;
        if f.left == 0 {
            return None;
        }
        let outcome = f.outcomes.get_mut(k)?;
        *outcome = if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(res as usize) };
        if let Some(index) = f.fixed {
            registered.read_ended(index);
        }
        f.left -= 1;
        let fixed = f.fixed.is_some();
        if f.left == 0 {
            if let Some(f) = place.take() {
                self.free.push(at as u16);
                // SAFETY: the completion of every part handed to the kernel is in (`left`
                // counted them; the parts never pushed were never seen by it): nothing writes
                // into the buffer any more.
                let buf = unsafe { f.buf.reclaim() };
                self.finished.push(Finished { tag: f.tag, buf, outcomes: f.outcomes });
            }
        }
        Some(fixed)
    }
}
