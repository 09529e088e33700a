//! The cache device as the engine uses it: every I/O's failure is reported to the cache's
//! [`Health`] (which counts it and decides whether the device is gone), every I/O runs
//! within the configured timeout (`deadline.rs`), and once the cache is no longer healthy
//! no new I/O reaches the device at all: a dying device is not asked again, and a hung one
//! cannot hold a request that arrives after the decision.
//!
//! The device behind it is a slot: a replacement of the failed device (`live/replace.rs`)
//! puts a new one in while the cache is degraded, when no I/O reaches the slot. Each I/O
//! takes its own reference to the device in the slot (no lock is held across an I/O), so a
//! thread stuck in the failed device never holds the replacement up.

use super::{deadline, Device, Identity, ReadBuf, ReadPart, ReadsDone};
use crate::health::Health;
use parking_lot::RwLock;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// The watched cache device.
pub(crate) struct Watched {
    slot: RwLock<Arc<dyn Device>>,
    health: Arc<Health>,
}

impl Watched {
    /// Watch `inner` for `health`.
    pub fn new(inner: Arc<dyn Device>, health: Arc<Health>) -> Watched {
        Watched { slot: RwLock::new(inner), health }
    }

    /// The device in the slot now.
    fn dev(&self) -> Arc<dyn Device> {
        self.slot.read().clone()
    }

    /// Put `device` in the slot in place of the one there, which is returned. Only while
    /// the cache is not healthy (no new I/O reaches the slot then).
    pub fn replace(&self, device: Arc<dyn Device>) -> Arc<dyn Device> {
        std::mem::replace(&mut *self.slot.write(), device)
    }

    /// The error of an I/O asked after the cache was given up.
    fn given_up(&self) -> io::Error {
        io::Error::other(format!(
            "{}: the cache device was given up (degraded mode)",
            self.dev().describe()
        ))
    }

    /// Report a failure of `r` (`sync`: a sync) and pass it on.
    fn note<T>(&self, sync: bool, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            self.health.io_failed(sync, e);
        }
        r
    }
}

impl Device for Watched {
    fn size(&self) -> u64 {
        self.dev().size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if !self.health.is_healthy() {
            return Err(self.given_up());
        }
        let r = match self.health.io_timeout() {
            None => self.dev().read_at(offset, buf),
            Some(t) => deadline::read_at(&self.dev(), t, offset, buf),
        };
        self.note(false, r)
    }

    fn read_many(
        &self,
        reads: &mut [(u64, &mut [u8])],
        done: &mut dyn FnMut(usize, io::Result<()>),
    ) {
        if !self.health.is_healthy() || self.health.io_timeout().is_some() {
            for (i, (offset, buf)) in reads.iter_mut().enumerate() {
                done(i, self.read_at(*offset, buf));
            }
            return;
        }
        let health = &self.health;
        self.dev().read_many(reads, &mut |i, r| {
            if let Err(e) = &r {
                health.io_failed(false, e);
            }
            done(i, r)
        });
    }

    fn start_read(
        &self,
        buf: ReadBuf,
        parts: &[ReadPart],
        tag: u64,
        now: bool,
    ) -> Result<(), ReadBuf> {
        // Reads that complete later cannot be given a deadline here: with a timeout they are
        // declined and the caller reads with `read_at`.
        if !self.health.is_healthy() || self.health.io_timeout().is_some() {
            return Err(buf);
        }
        self.dev().start_read(buf, parts, tag, now)
    }

    fn read_room(&self) -> usize {
        if !self.health.is_healthy() || self.health.io_timeout().is_some() {
            return 0;
        }
        self.dev().read_room()
    }

    fn reap_reads(&self, wait: usize, wake: Option<RawFd>, done: &mut ReadsDone<'_>) -> usize {
        let health = &self.health;
        self.dev().reap_reads(wait, wake, &mut |tag, buf, outcomes| {
            for o in outcomes {
                if let Err(e) = o {
                    health.io_failed(false, e);
                }
            }
            done(tag, buf, outcomes)
        })
    }

    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        if self.health.io_timeout().is_some() {
            return false;
        }
        self.dev().register_read_buffer(buf)
    }

    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.dev().unregister_read_buffer(buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if !self.health.is_healthy() {
            return Err(self.given_up());
        }
        let r = match self.health.io_timeout() {
            None => self.dev().write_at(offset, data),
            Some(t) => deadline::write_at(&self.dev(), t, offset, data),
        };
        self.note(false, r)
    }

    fn sync(&self) -> io::Result<()> {
        if !self.health.is_healthy() {
            return Err(self.given_up());
        }
        let r = match self.health.io_timeout() {
            None => self.dev().sync(),
            Some(t) => deadline::sync(&self.dev(), t),
        };
        self.note(true, r)
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        if !self.health.is_healthy() {
            return Err(self.given_up());
        }
        let r = match self.health.io_timeout() {
            None => self.dev().trim(offset, len),
            Some(t) => deadline::discard(&self.dev(), t, offset, len, false),
        };
        self.note(false, r)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        if !self.health.is_healthy() {
            return Err(self.given_up());
        }
        let r = match self.health.io_timeout() {
            None => self.dev().write_zeroes(offset, len),
            Some(t) => deadline::discard(&self.dev(), t, offset, len, true),
        };
        self.note(false, r)
    }

    fn describe(&self) -> String {
        self.dev().describe()
    }

    fn reads_from_memory(&self) -> bool {
        self.dev().reads_from_memory()
    }

    fn volatile(&self) -> bool {
        self.dev().volatile()
    }

    fn takes_demotes(&self) -> bool {
        self.dev().takes_demotes()
    }

    fn demote(&self, offset: u64, data: &[u8]) -> bool {
        self.dev().demote(offset, data)
    }

    fn identity(&self) -> io::Result<Identity> {
        self.dev().identity()
    }
}
