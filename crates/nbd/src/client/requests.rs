//! The requests of a [`Client`]: each `start_*` checks the request against the export, sends
//! it and returns its [`InFlight`] ticket; the blocking forms wait for it (`read` and `write`
//! in pipelined pieces of at most the maximum payload). [`Client::submit`] sends any request
//! as is. The pending table and `writer` are never held together (the table first).

use std::io::Write;
use std::sync::atomic::Ordering;

use super::connection::Client;
use super::coverage::Coverage;
use super::error::ClientError;
use super::pending::{InFlight, Slot};
use crate::proto;
use crate::request::{Command, Request};

impl Client {
    /// Send any request as is, without checking it against the export (for tests of server
    /// behaviour and for replaying traces faithfully). `payload` is sent after the header
    /// (it must be `length` bytes for a WRITE).
    pub fn submit(
        &self,
        command: Command,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> Result<InFlight, ClientError> {
        let cookie = self.next_cookie.fetch_add(1, Ordering::Relaxed);
        let (done, receiver) = crossbeam::channel::bounded(1);
        let data = if command == Command::Read { vec![0u8; length as usize] } else { Vec::new() };
        {
            let mut pending = self.shared.lock();
            if let Some(reason) = &pending.dead {
                return Err(ClientError::Disconnected(reason.clone()));
            }
            pending.slots.insert(
                cookie,
                Slot {
                    command,
                    offset,
                    length,
                    data,
                    coverage: Coverage::new(u64::from(length)),
                    error: None,
                    done,
                },
            );
            pending.outstanding += 1;
        }
        let header = Request { flags, command, cookie, offset, length }.encode();
        let sent = {
            let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            if payload.len() <= 64 * 1024 {
                let mut buf = Vec::with_capacity(header.len() + payload.len());
                buf.extend_from_slice(&header);
                buf.extend_from_slice(payload);
                writer.write_all(&buf)
            } else {
                writer.write_all(&header).and_then(|_| writer.write_all(payload))
            }
        };
        if let Err(e) = sent {
            let mut pending = self.shared.lock();
            if pending.slots.remove(&cookie).is_some() {
                pending.outstanding = pending.outstanding.saturating_sub(1);
            }
            drop(pending);
            self.shared.idle.notify_all();
            return Err(ClientError::Io(e));
        }
        Ok(InFlight { cookie, done: receiver })
    }

    fn check_range(&self, offset: u64, length: u64) -> Result<(), ClientError> {
        let min = u64::from(self.info.min_block);
        if !offset.is_multiple_of(min) || !length.is_multiple_of(min) {
            return Err(ClientError::Invalid(format!(
                "{offset}+{length} is not aligned to the minimum block size {min}"
            )));
        }
        Ok(())
    }

    fn fua_flag(&self, fua: bool) -> Result<u16, ClientError> {
        match (fua, self.info.can_fua()) {
            (false, _) => Ok(0),
            (true, true) => Ok(proto::CMD_FLAG_FUA),
            (true, false) => Err(ClientError::Invalid("the server does not support FUA".into())),
        }
    }

    /// Send a READ of `length` bytes (at most the maximum payload).
    pub fn start_read(&self, offset: u64, length: u32) -> Result<InFlight, ClientError> {
        self.check_range(offset, u64::from(length))?;
        if length > self.info.max_payload {
            return Err(ClientError::Invalid(format!(
                "read of {length} bytes exceeds the maximum payload {}",
                self.info.max_payload
            )));
        }
        self.submit(Command::Read, 0, offset, length, &[])
    }

    /// Send a WRITE of `data` (at most the maximum payload).
    pub fn start_write(
        &self,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<InFlight, ClientError> {
        if self.info.read_only() {
            return Err(ClientError::Invalid("the export is read-only".into()));
        }
        let length = u32::try_from(data.len())
            .ok()
            .filter(|&l| l <= self.info.max_payload)
            .ok_or_else(|| {
                ClientError::Invalid(format!(
                    "write of {} bytes exceeds the maximum payload {}",
                    data.len(),
                    self.info.max_payload
                ))
            })?;
        self.check_range(offset, u64::from(length))?;
        let flags = self.fua_flag(fua)?;
        self.submit(Command::Write, flags, offset, length, data)
    }

    /// Send a FLUSH.
    pub fn start_flush(&self) -> Result<InFlight, ClientError> {
        if !self.info.can_flush() {
            return Err(ClientError::Invalid("the server does not support FLUSH".into()));
        }
        self.submit(Command::Flush, 0, 0, 0, &[])
    }

    /// Send a TRIM.
    pub fn start_trim(&self, offset: u64, length: u32, fua: bool) -> Result<InFlight, ClientError> {
        if !self.info.can_trim() {
            return Err(ClientError::Invalid("the server does not support TRIM".into()));
        }
        self.check_range(offset, u64::from(length))?;
        let flags = self.fua_flag(fua)?;
        self.submit(Command::Trim, flags, offset, length, &[])
    }

    /// Send a DEMOTE of `data`, this client's clean copy of the bytes at `offset` (ember's
    /// extension, docs/reference/nbd.md; only on a connection that negotiated it).
    pub fn start_demote(&self, offset: u64, data: &[u8]) -> Result<InFlight, ClientError> {
        if !self.info.demote {
            return Err(ClientError::Invalid("DEMOTE was not negotiated".into()));
        }
        let length = u32::try_from(data.len())
            .ok()
            .filter(|&l| l > 0 && l <= self.info.max_payload)
            .ok_or_else(|| {
                ClientError::Invalid(format!(
                    "a DEMOTE of {} bytes (1 to {} allowed)",
                    data.len(),
                    self.info.max_payload
                ))
            })?;
        self.check_range(offset, u64::from(length))?;
        self.submit(Command::Demote, 0, offset, length, data)
    }

    /// DEMOTE and wait for the server's answer.
    pub fn demote(&self, offset: u64, data: &[u8]) -> Result<(), ClientError> {
        self.start_demote(offset, data)?.wait().map(drop)
    }

    /// Send a WRITE_ZEROES (`no_hole`: NBD_CMD_FLAG_NO_HOLE).
    pub fn start_write_zeroes(
        &self,
        offset: u64,
        length: u32,
        fua: bool,
        no_hole: bool,
    ) -> Result<InFlight, ClientError> {
        if !self.info.can_write_zeroes() {
            return Err(ClientError::Invalid("the server does not support WRITE_ZEROES".into()));
        }
        self.check_range(offset, u64::from(length))?;
        let mut flags = self.fua_flag(fua)?;
        if no_hole {
            flags |= proto::CMD_FLAG_NO_HOLE;
        }
        self.submit(Command::WriteZeroes, flags, offset, length, &[])
    }

    /// Read `buf.len()` bytes at `offset`, in pipelined pieces of at most the maximum
    /// payload.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ClientError> {
        let piece = self.info.max_payload as usize;
        let mut tickets = Vec::new();
        for (i, chunk) in buf.chunks(piece.max(1)).enumerate() {
            tickets.push(self.start_read(offset + (i * piece) as u64, chunk.len() as u32)?);
        }
        for (ticket, chunk) in tickets.into_iter().zip(buf.chunks_mut(piece.max(1))) {
            let data = ticket.wait()?;
            chunk.copy_from_slice(&data);
        }
        Ok(())
    }

    /// Write `data` at `offset`, in pipelined pieces of at most the maximum payload; with
    /// `fua`, durable on return.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ClientError> {
        let piece = (self.info.max_payload as usize).max(1);
        let mut tickets = Vec::new();
        for (i, chunk) in data.chunks(piece).enumerate() {
            tickets.push(self.start_write(offset + (i * piece) as u64, chunk, fua)?);
        }
        for ticket in tickets {
            ticket.wait()?;
        }
        Ok(())
    }

    /// Make every acknowledged write durable.
    pub fn flush(&self) -> Result<(), ClientError> {
        self.start_flush()?.wait().map(|_| ())
    }

    /// Discard `length` bytes at `offset`.
    pub fn trim(&self, offset: u64, length: u32, fua: bool) -> Result<(), ClientError> {
        self.start_trim(offset, length, fua)?.wait().map(|_| ())
    }

    /// Write `length` zero bytes at `offset`.
    pub fn write_zeroes(
        &self,
        offset: u64,
        length: u32,
        fua: bool,
        no_hole: bool,
    ) -> Result<(), ClientError> {
        self.start_write_zeroes(offset, length, fua, no_hole)?.wait().map(|_| ())
    }
}
