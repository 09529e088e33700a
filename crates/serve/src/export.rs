//! Engine volumes as NBD exports: [`VolumeExport`] implements [`ember_nbd::Export`] over an
//! [`ember_engine::Volume`], [`EngineExports`] implements [`ember_nbd::ExportSet`] over an
//! engine (its volumes by name; the empty name is the first volume).

use crate::clients::{ClientToken, Clients};
use crate::prefetch::{load_in_pieces, Loads};
use crate::stale::{Session, StaleGuard};
use ember_engine::{Engine, EngineError, HitRead, HitStart, Volume};
use ember_nbd::{Export, ExportError, ExportFlags, ExportSet, FastRead, ReadBuf, ReadStart};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::{Arc, OnceLock};

/// The NBD error of an engine error: I/O errors are EIO, invalid requests EINVAL, a request
/// during shutdown ESHUTDOWN; anything else (layout, configuration) is reported as EIO.
pub fn to_export_error(e: EngineError) -> ExportError {
    match e {
        EngineError::Io(e) => ExportError::Io(e),
        EngineError::Invalid(m) => ExportError::Invalid(m),
        EngineError::ShutDown => ExportError::Shutdown,
        other => ExportError::Io(std::io::Error::other(other.to_string())),
    }
}

/// One engine volume as an NBD export. Each connection gets its own (from
/// [`EngineExports::get`]), with the connection's [`Session`] for the stale rule of DEMOTE.
/// The third field says whether the volume takes DEMOTEs: only then are reads and writes
/// tracked for the stale rule. The fourth is the connection's hold on the export name
/// ([`Clients`]), when the export set counts its clients. The fifth is the server's loader of
/// NBD_CMD_CACHE ranges (`prefetch.rs`); without one a CACHE is loaded before its reply.
pub struct VolumeExport(pub Volume, Session, bool, Option<ClientToken>, Option<Arc<Loads>>);

impl VolumeExport {
    /// The volume as an export, with a session under `guard`.
    pub fn new(volume: Volume, guard: Arc<StaleGuard>) -> Self {
        let tracked = volume.accepts_demote();
        Self(volume, Session::new(guard), tracked, None, None)
    }

    /// The volume's blocks `offset..offset + len` touches.
    fn blocks(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        let bs = u64::from(self.0.block_size());
        offset / bs..(offset + len).div_ceil(bs)
    }

    /// A write-type command, tracked by the stale rule; `copy` if the client now holds the
    /// written data.
    fn tracked(
        &self,
        offset: u64,
        len: u64,
        copy: bool,
        f: impl FnOnce() -> Result<(), EngineError>,
    ) -> Result<(), ExportError> {
        if !self.2 {
            return f().map_err(to_export_error);
        }
        let blocks = self.blocks(offset, len);
        self.1.guard().write_started(blocks.clone());
        let r = f();
        let s = self.1.guard().write_done(blocks.clone());
        if copy && r.is_ok() {
            self.1.copied(blocks, s);
        } else {
            self.1.forget(blocks);
        }
        r.map_err(to_export_error)
    }
}

impl Export for VolumeExport {
    fn size(&self) -> u64 {
        self.0.size()
    }

    fn preferred_block_size(&self) -> u32 {
        self.0.block_size()
    }

    fn flags(&self) -> ExportFlags {
        ExportFlags {
            read_only: false,
            can_flush: true,
            can_fua: true,
            can_trim: true,
            can_write_zeroes: true,
            can_multi_conn: true,
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        if !self.2 {
            return self.0.read(offset, buf).map_err(to_export_error);
        }
        let seq = self.1.guard().now();
        self.0.read(offset, buf).map_err(to_export_error)?;
        self.1.copied(self.blocks(offset, buf.len() as u64), seq);
        Ok(())
    }

    fn accepts_demote(&self) -> bool {
        self.2
    }

    fn demote(&self, offset: u64, data: &[u8]) -> Result<(), ExportError> {
        self.0.demote(offset, data, &|b| self.1.demote_fresh(b)).map_err(to_export_error)
    }

    fn read_is_fast(&self, offset: u64, len: u64) -> bool {
        self.0.resident(offset, len)
    }

    /// A hit, served in one state-lock section ([`Volume::read_if_resident`]). A cache device
    /// read with O_DIRECT waits on its medium, so there only an `idle` connection's hit is
    /// served at once (nothing else of it waits behind the device read). A degraded cache
    /// reads no device: its READs are answered at once when backing has the bytes in memory.
    fn read_if_fast(
        &self,
        offset: u64,
        buf: &mut [u8],
        idle: bool,
    ) -> Option<Result<(), ExportError>> {
        if !idle && !self.0.hits_from_memory() && !self.0.passes_through() {
            return None;
        }
        if !self.2 {
            return self.0.read_if_resident(offset, buf).map(|r| r.map_err(to_export_error));
        }
        let seq = self.1.guard().now();
        match self.0.read_if_resident(offset, buf)? {
            Ok(()) => {
                self.1.copied(self.blocks(offset, buf.len() as u64), seq);
                Some(Ok(()))
            }
            Err(e) => Some(Err(to_export_error(e))),
        }
    }

    /// Hits of an O_DIRECT cache wait on the device: a connection's run of READs is read
    /// together ([`Volume::read_hits`], its reads in flight at once). Not with the client
    /// tier's stale tracking (`--demote`), whose reads go one by one.
    fn batches_reads(&self) -> bool {
        !self.2 && !self.0.hits_from_memory()
    }

    fn read_many_if_fast(&self, reads: &mut [FastRead<'_>]) {
        if !self.batches_reads() {
            for r in reads.iter_mut() {
                r.outcome = self.read_if_fast(r.offset, r.buf, false);
            }
            return;
        }
        let mut hits: Vec<HitRead<'_>> = reads
            .iter_mut()
            .map(|r| HitRead { offset: r.offset, buf: &mut *r.buf, outcome: None })
            .collect();
        self.0.read_hits(&mut hits);
        let outcomes: Vec<_> = hits.into_iter().map(|h| h.outcome).collect();
        for (r, o) in reads.iter_mut().zip(outcomes) {
            r.outcome = o.map(|x| x.map_err(to_export_error));
        }
    }

    /// Where hits are read as runs ([`Export::batches_reads`]) and this thread's cache device
    /// starts reads that complete later ([`Volume::start_hit`]: io_uring on the O_DIRECT
    /// cache), the reader starts each hit as it parses it.
    fn starts_reads(&self) -> bool {
        self.batches_reads() && self.0.starts_hits()
    }

    /// The buffer goes to [`Volume::start_hit`] and back as it is: the engine and the NBD
    /// server name the one [`ReadBuf`] type.
    fn start_read(&self, offset: u64, buf: ReadBuf, tag: u64) -> ReadStart {
        if self.2 {
            return ReadStart::Declined(buf);
        }
        match self.0.start_hit(offset, buf, tag) {
            HitStart::Declined(buf) => ReadStart::Declined(buf),
            HitStart::Busy(buf) => ReadStart::Busy(buf),
            HitStart::Started => ReadStart::Started,
            HitStart::Done(buf, r) => ReadStart::Done(buf, r.map_err(to_export_error)),
        }
    }

    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.0.register_hit_buffer(buf)
    }

    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.0.unregister_hit_buffer(buf)
    }

    fn reap_reads(
        &self,
        wait: usize,
        wake: Option<RawFd>,
        done: &mut dyn FnMut(u64, ReadBuf, Result<(), ExportError>),
    ) -> usize {
        self.0.reap_hits(wait, wake, &mut |tag, buf, r| done(tag, buf, r.map_err(to_export_error)))
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ExportError> {
        self.tracked(offset, data.len() as u64, true, || self.0.write(offset, data, fua))
    }

    fn flush(&self) -> Result<(), ExportError> {
        self.0.flush().map_err(to_export_error)
    }

    /// NBD_CMD_CACHE is taken: the range is queued for the server's loader and the reply
    /// sent at once; with the queue full (or no loader) it is loaded chunk by chunk before
    /// the reply ([`Volume::load`], `prefetch.rs`).
    fn can_cache(&self) -> bool {
        true
    }

    fn cache(&self, offset: u64, len: u64) -> Result<(), ExportError> {
        if self.4.as_ref().is_some_and(|l| l.queue(&self.0, offset, len)) {
            return Ok(());
        }
        load_in_pieces(&self.0, offset, len).map(|_| ()).map_err(to_export_error)
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError> {
        self.tracked(offset, len, false, || self.0.trim(offset, len, fua))
    }

    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        may_trim: bool,
    ) -> Result<(), ExportError> {
        self.tracked(offset, len, false, || self.0.write_zeroes(offset, len, fua, may_trim))
    }
}

/// The volumes of an engine as the export set of an NBD server, with each volume's
/// [`StaleGuard`] and the connections to each ([`Clients`]), and the loader of NBD_CMD_CACHE
/// ranges, started at the first connection. The set follows the engine's: a volume attached
/// while serving is exported at once, a removed one is no longer found.
pub struct EngineExports(
    pub Arc<Engine>,
    Mutex<HashMap<String, Arc<StaleGuard>>>,
    Arc<Clients>,
    OnceLock<Option<Arc<Loads>>>,
);

impl EngineExports {
    /// The export set of `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self(engine, Mutex::new(HashMap::new()), Arc::new(Clients::default()), OnceLock::new())
    }

    /// The connections to each export.
    pub fn clients(&self) -> Arc<Clients> {
        self.2.clone()
    }
}

impl ExportSet for EngineExports {
    fn get(&self, name: &str) -> Option<Arc<dyn Export>> {
        let volume = if name.is_empty() {
            let first = self.0.volume_names().into_iter().next()?;
            self.0.volume(&first)?
        } else {
            self.0.volume(name)?
        };
        // A volume whose blocks were lost with a failed cache device, restored at start:
        // refused until `ember ctl clear-lost`.
        if self.0.is_refused(volume.name()) {
            return None;
        }
        let guard =
            self.1.lock().entry(volume.name().to_string()).or_insert_with(StaleGuard::new).clone();
        let token = self.2.join(volume.name());
        let mut export = VolumeExport::new(volume, guard);
        export.3 = Some(token);
        export.4 = self.3.get_or_init(|| Loads::start().map(Arc::new)).clone();
        Some(Arc::new(export))
    }

    fn list(&self) -> Vec<(String, String)> {
        self.0
            .volume_names()
            .into_iter()
            .filter_map(|n| self.0.volume(&n).map(|v| (n, v.describe())))
            .collect()
    }
}
