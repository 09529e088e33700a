//! An epoch of requests kept until the epoch ends, in bounded memory: the first `limit`
//! requests in memory, the rest in an unnamed temporary file (25 bytes a request). The ideal
//! sieve reads its epoch twice ([`super::discrete::DiscreteState`]), so a streamed
//! SieveStore run holds at most `limit` requests whatever the epoch's length.

use super::discrete::EpochStore;
use ember_trace::{Op, Request};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// Bytes of one spilled request: time, volume, op, offset, length.
const RECORD: usize = 8 + 4 + 1 + 8 + 4;

/// Requests held in memory before the spool spills to a file (8 MiB of requests).
pub const DEFAULT_LIMIT: usize = 1 << 18;

/// The current epoch's requests.
pub struct EpochSpool {
    limit: usize,
    memory: Vec<Request>,
    /// The spill file, opened at the first spill and reused.
    file: Option<BufWriter<File>>,
    spilled: u64,
}

impl EpochSpool {
    /// A spool holding up to `limit` requests in memory.
    pub fn new(limit: usize) -> Self {
        Self { limit, memory: Vec::new(), file: None, spilled: 0 }
    }

    /// Requests spilled to the file so far in this epoch.
    pub fn spilled(&self) -> u64 {
        self.spilled
    }
}

fn encode(r: &Request) -> [u8; RECORD] {
    let mut b = [0u8; RECORD];
    b[0..8].copy_from_slice(&r.time_ns.to_le_bytes());
    b[8..12].copy_from_slice(&r.volume.to_le_bytes());
    b[12] = r.op.is_write() as u8;
    b[13..21].copy_from_slice(&r.offset.to_le_bytes());
    b[21..25].copy_from_slice(&r.length.to_le_bytes());
    b
}

fn decode(b: &[u8; RECORD]) -> Request {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
    Request {
        time_ns: u64_at(0),
        volume: u32_at(8),
        op: if b[12] == 1 { Op::Write } else { Op::Read },
        offset: u64_at(13),
        length: u32_at(21),
    }
}

impl EpochStore for EpochSpool {
    type Error = io::Error;

    fn push(&mut self, r: &Request) -> io::Result<()> {
        if self.memory.len() < self.limit {
            self.memory.push(*r);
            return Ok(());
        }
        if self.file.is_none() {
            self.file = Some(BufWriter::with_capacity(1 << 20, tempfile::tempfile()?));
        }
        if let Some(w) = self.file.as_mut() {
            w.write_all(&encode(r))?;
        }
        self.spilled += 1;
        Ok(())
    }

    fn for_each(&mut self, f: &mut dyn FnMut(&Request)) -> io::Result<()> {
        self.memory.iter().for_each(&mut *f);
        let Some(w) = self.file.as_mut() else { return Ok(()) };
        w.flush()?;
        let file = w.get_mut();
        file.seek(SeekFrom::Start(0))?;
        let mut reader = BufReader::with_capacity(1 << 20, &*file);
        let mut rec = [0u8; RECORD];
        for _ in 0..self.spilled {
            reader.read_exact(&mut rec)?;
            f(&decode(&rec));
        }
        drop(reader);
        // Appends go on at the end.
        file.seek(SeekFrom::End(0))?;
        Ok(())
    }

    fn clear(&mut self) -> io::Result<()> {
        self.memory.clear();
        if let Some(w) = self.file.as_mut() {
            w.flush()?;
            let file = w.get_mut();
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
        }
        self.spilled = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(i: u64) -> Request {
        Request {
            time_ns: i * 1_000,
            volume: (i % 3) as u32,
            op: if i.is_multiple_of(2) { Op::Read } else { Op::Write },
            offset: i * 4096 + 7,
            length: 4096 + i as u32,
        }
    }

    fn collect(s: &mut EpochSpool) -> Vec<Request> {
        let mut out = Vec::new();
        s.for_each(&mut |r| out.push(*r)).expect("read the spool");
        out
    }

    #[test]
    fn spilled_requests_come_back_in_order_twice_and_after_a_clear() {
        let mut s = EpochSpool::new(3);
        let first: Vec<Request> = (0..10).map(req).collect();
        for r in &first {
            s.push(r).expect("push");
        }
        assert_eq!(s.spilled(), 7, "all but the first 3 went to the file");
        assert_eq!(collect(&mut s), first);
        assert_eq!(collect(&mut s), first, "a second read gives the same epoch");
        s.clear().expect("clear");
        assert!(collect(&mut s).is_empty());
        // The next epoch reuses the file and does not see the old records.
        let second: Vec<Request> = (100..105).map(req).collect();
        for r in &second {
            s.push(r).expect("push");
        }
        assert_eq!(collect(&mut s), second);
        s.push(&req(200)).expect("push after a read appends");
        assert_eq!(collect(&mut s).last(), Some(&req(200)));
        assert_eq!(collect(&mut s).len(), 6);
    }
}
