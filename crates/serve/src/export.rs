//! Engine volumes as NBD exports: [`VolumeExport`] implements [`ember_nbd::Export`] over an
//! [`ember_engine::Volume`], [`EngineExports`] implements [`ember_nbd::ExportSet`] over an
//! engine (its volumes by name; the empty name is the first volume).

use ember_engine::{Engine, EngineError, Volume};
use ember_nbd::{Export, ExportError, ExportFlags, ExportSet};
use std::sync::Arc;

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

/// One engine volume as an NBD export.
pub struct VolumeExport(pub Volume);

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
        self.0.read(offset, buf).map_err(to_export_error)
    }

    fn read_is_fast(&self, offset: u64, len: u64) -> bool {
        self.0.resident(offset, len)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), ExportError> {
        self.0.write(offset, data, fua).map_err(to_export_error)
    }

    fn flush(&self) -> Result<(), ExportError> {
        self.0.flush().map_err(to_export_error)
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), ExportError> {
        self.0.trim(offset, len, fua).map_err(to_export_error)
    }

    fn write_zeroes(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        may_trim: bool,
    ) -> Result<(), ExportError> {
        self.0.write_zeroes(offset, len, fua, may_trim).map_err(to_export_error)
    }
}

/// The volumes of an engine as the export set of an NBD server.
pub struct EngineExports(pub Arc<Engine>);

impl EngineExports {
    /// The export set of `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self(engine)
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
        Some(Arc::new(VolumeExport(volume)))
    }

    fn list(&self) -> Vec<(String, String)> {
        self.0
            .volume_names()
            .into_iter()
            .filter_map(|n| self.0.volume(&n).map(|v| (n, v.describe())))
            .collect()
    }
}
