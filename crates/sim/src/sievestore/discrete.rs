//! SieveStore's manager for a discrete (epoch) sieve, fed one request at a time so a run can
//! read its trace from memory ([`super::run::run_discrete`]) or stream it from a file
//! ([`super::stream`]) with the same code deciding.
//!
//! A batch allocator: requests are grouped by epoch (a request earlier than its predecessor's
//! epoch stays in the current one). A non-oracle sieve observes the epoch as it goes and its
//! choice becomes the contents of the next epoch ([`ember_policy::admission::install()`]); the
//! ideal sieve (an oracle) first observes the whole epoch, then its choice is installed and
//! the epoch is replayed against it, so the epoch's requests are kept in an [`EpochStore`]
//! until its end: in memory for a trace held in memory, or in a spool that spills to a
//! temporary file ([`super::epoch_spool::EpochSpool`]) when the trace streams.

use super::accesses::access;
use super::metrics::{Recorder, SieveRun};
use ember_policy::admission::key_hash::{key_map, KeyMap};
use ember_policy::admission::{install, EpochSieve};
use ember_trace::Request;

/// Where the ideal sieve's current epoch waits for its end: it is read twice (to choose,
/// then to replay against the choice).
pub trait EpochStore {
    /// What storing or reading can fail with.
    type Error;
    /// Keep `r` for the current epoch.
    fn push(&mut self, r: &Request) -> Result<(), Self::Error>;
    /// Call `f` on the epoch's requests in order.
    fn for_each(&mut self, f: &mut dyn FnMut(&Request)) -> Result<(), Self::Error>;
    /// Forget the epoch.
    fn clear(&mut self) -> Result<(), Self::Error>;
}

/// A trace held in memory: the epoch is kept in memory too.
impl EpochStore for Vec<Request> {
    type Error = std::convert::Infallible;

    fn push(&mut self, r: &Request) -> Result<(), Self::Error> {
        Vec::push(self, *r);
        Ok(())
    }

    fn for_each(&mut self, f: &mut dyn FnMut(&Request)) -> Result<(), Self::Error> {
        self.iter().for_each(f);
        Ok(())
    }

    fn clear(&mut self) -> Result<(), Self::Error> {
        Vec::clear(self);
        Ok(())
    }
}

/// A discrete sieve's run over requests given one at a time.
pub struct DiscreteState<S: EpochStore> {
    rec: Recorder,
    resident: KeyMap<()>,
    origin: u64,
    capacity: usize,
    epoch_ns: u64,
    /// The epoch in progress; None before the first request.
    current: Option<u64>,
    /// The sieve is an oracle (the ideal sieve): its epoch waits in `store`.
    oracle: bool,
    store: S,
    peak_mem: usize,
    /// Virtual time within the epoch (it restarts at every epoch, as each epoch's accesses
    /// did when a run went over the trace's slices).
    vtime: u64,
    /// Whether the coming requests are counted (off in the uncounted warm-up period).
    counting: bool,
    /// The oracle's epoch: how many of its first requests are uncounted (the warm-up period
    /// is a prefix of the trace, so they come first).
    epoch_uncounted: u64,
    /// The oracle's epoch: whether its first request is counted (and its moves with it).
    epoch_counted: bool,
}

impl<S: EpochStore> DiscreteState<S> {
    /// A run of `sieve` with room for `capacity` blocks; epochs of `epoch_ns` and days count
    /// from `origin`; an oracle's epochs wait in `store`.
    pub fn new(
        origin: u64,
        capacity: usize,
        epoch_ns: u64,
        sieve: &dyn EpochSieve,
        store: S,
    ) -> Self {
        Self {
            rec: Recorder::new(origin),
            resident: key_map(),
            origin,
            capacity,
            epoch_ns,
            current: None,
            oracle: sieve.oracle(),
            store,
            peak_mem: 0,
            vtime: 0,
            counting: true,
            epoch_uncounted: 0,
            epoch_counted: true,
        }
    }

    /// Count the coming requests (`on`), or let them run uncounted (the warm-up period). An
    /// epoch's moves are counted if its first request is.
    pub fn set_counting(&mut self, on: bool) {
        self.counting = on;
    }

    fn epoch_of(&self, t: u64) -> u64 {
        t.saturating_sub(self.origin) / self.epoch_ns
    }

    /// Install `chosen` as the contents for epoch `e` ([`install`]), counting moves and
    /// cancellations.
    fn install(&mut self, chosen: Vec<(u64, u64)>, e: u64) {
        let resident = &self.resident;
        let next = install(chosen, self.capacity, |k| resident.contains_key(&k));
        let s = self.origin + e * self.epoch_ns;
        self.rec.batch(s, s + self.epoch_ns, next.moves.len() as u64, next.cancelled.len() as u64);
        self.resident = next.chosen;
    }

    /// The oracle's epoch is complete: choose from it, install the choice, replay it.
    fn close_oracle_epoch(
        &mut self,
        block_size: u64,
        sieve: &mut dyn EpochSieve,
    ) -> Result<(), S::Error> {
        let Some(current) = self.current else { return Ok(()) };
        let mut vtime = 0u64;
        self.store.for_each(&mut |r| {
            for key in r.block_keys(block_size) {
                sieve.observe(&access(r, key, &mut vtime));
            }
        })?;
        self.peak_mem = self.peak_mem.max(sieve.memory_bytes());
        let chosen = sieve.end_epoch();
        self.rec.counting = self.epoch_counted;
        self.install(chosen, current);
        let (store, rec, resident) = (&mut self.store, &mut self.rec, &self.resident);
        let (mut vtime, mut k, uncounted) = (0u64, 0u64, self.epoch_uncounted);
        store.for_each(&mut |r| {
            rec.counting = k >= uncounted;
            k += u64::from(r.length > 0);
            for key in r.block_keys(block_size) {
                let a = access(r, key, &mut vtime);
                rec.access(&a, resident.contains_key(&a.key), false);
            }
        })?;
        self.epoch_uncounted = 0;
        store.clear()
    }

    /// One request.
    pub fn request(
        &mut self,
        r: &Request,
        block_size: u64,
        sieve: &mut dyn EpochSieve,
    ) -> Result<(), S::Error> {
        let e = self.epoch_of(r.time_ns);
        let new_epoch = self.current.is_none_or(|c| e > c);
        match self.current {
            None => self.current = Some(e),
            Some(current) if e > current => {
                // The moves into the new epoch count if its first request does.
                self.rec.counting = self.counting;
                if self.oracle {
                    self.close_oracle_epoch(block_size, sieve)?;
                } else {
                    self.peak_mem = self.peak_mem.max(sieve.memory_bytes());
                    let chosen = sieve.end_epoch();
                    self.install(chosen, current + 1);
                    // Epochs without requests in between keep nothing chosen from them.
                    for skipped in current + 2..=e {
                        let chosen = sieve.end_epoch();
                        self.install(chosen, skipped);
                    }
                }
                self.current = Some(e);
                self.vtime = 0;
            }
            Some(_) => {}
        }
        if self.oracle {
            if new_epoch {
                self.epoch_counted = self.counting;
            }
            self.epoch_uncounted += u64::from(!self.counting && r.length > 0);
            self.store.push(r)
        } else {
            self.rec.counting = self.counting;
            for key in r.block_keys(block_size) {
                let a = access(r, key, &mut self.vtime);
                sieve.observe(&a);
                self.rec.access(&a, self.resident.contains_key(&a.key), false);
            }
            Ok(())
        }
    }

    /// The run's result (the last epoch's choice of a non-oracle sieve is never used).
    pub fn finish(
        mut self,
        block_size: u64,
        sieve: &mut dyn EpochSieve,
    ) -> Result<SieveRun, S::Error> {
        if self.oracle {
            self.close_oracle_epoch(block_size, sieve)?;
        } else if self.current.is_some() {
            self.peak_mem = self.peak_mem.max(sieve.memory_bytes());
        }
        Ok(SieveRun {
            name: sieve.name().to_string(),
            capacity_blocks: self.capacity as u64,
            days: self.rec.days,
            minutes: self.rec.minutes,
            sieve_memory_bytes: self.peak_mem as u64,
            warmup_minutes: 0,
        })
    }
}
