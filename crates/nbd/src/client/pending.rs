//! The requests waiting for their replies: the table the reader thread completes
//! ([`Shared`]), each request's [`Slot`] in it, and the caller's ticket ([`InFlight`]).
//! Lock: `pending` alone (never held across socket I/O); `idle` waits on it.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

use crossbeam::channel::{Receiver, Sender};

use super::coverage::Coverage;
use super::error::ClientError;
use crate::request::Command;

pub(super) type Completion = Result<Vec<u8>, ClientError>;

/// A request whose reply has not been consumed yet.
#[derive(Debug)]
pub struct InFlight {
    pub(super) cookie: u64,
    pub(super) done: Receiver<Completion>,
}

impl InFlight {
    /// The request's cookie.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// Wait for the reply: the data of a READ, an empty vector otherwise.
    pub fn wait(self) -> Result<Vec<u8>, ClientError> {
        self.done.recv().unwrap_or_else(|_| Err(ClientError::Disconnected("reply lost".into())))
    }
}

/// A request waiting for its reply, owned by the reader thread's table.
pub(super) struct Slot {
    pub(super) command: Command,
    pub(super) offset: u64,
    pub(super) length: u32,
    pub(super) data: Vec<u8>,
    /// The bytes of a READ described so far by structured reply chunks.
    pub(super) coverage: Coverage,
    pub(super) error: Option<ClientError>,
    pub(super) done: Sender<Completion>,
}

#[derive(Default)]
pub(super) struct Pending {
    pub(super) slots: HashMap<u64, Slot>,
    pub(super) outstanding: usize,
    pub(super) dead: Option<String>,
}

pub(super) struct Shared {
    pub(super) pending: Mutex<Pending>,
    pub(super) idle: Condvar,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn complete(&self, slot: Slot, result: Completion) {
        let _ = slot.done.send(result);
        let mut pending = self.lock();
        pending.outstanding = pending.outstanding.saturating_sub(1);
        drop(pending);
        self.idle.notify_all();
    }

    /// Refuse new requests from now on (the first reason is kept).
    pub(super) fn mark_dead(&self, reason: &str) {
        let mut pending = self.lock();
        if pending.dead.is_none() {
            pending.dead = Some(reason.to_string());
        }
    }

    /// Fail every pending request and refuse new ones.
    pub(super) fn kill(&self, reason: String) {
        let mut pending = self.lock();
        if pending.dead.is_none() {
            pending.dead = Some(reason.clone());
        }
        let slots: Vec<Slot> = pending.slots.drain().map(|(_, s)| s).collect();
        pending.outstanding = pending.outstanding.saturating_sub(slots.len());
        drop(pending);
        for slot in slots {
            let _ = slot.done.send(Err(ClientError::Disconnected(reason.clone())));
        }
        self.idle.notify_all();
    }
}
