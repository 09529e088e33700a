//! A device named on a command line.

use crate::NbdDevice;
use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::Device;
use std::io;
use std::sync::Arc;

/// Open a device named on a command line: an NBD URI (`nbd://…`, `nbd+unix://…`) is an
/// upstream export ([`NbdDevice`]); anything else is a path ([`FileDevice`] with `options`).
pub fn open_spec(spec: &str, options: FileOptions) -> io::Result<Arc<dyn Device>> {
    if spec.starts_with("nbd://") || spec.starts_with("nbd+unix://") {
        Ok(Arc::new(NbdDevice::connect(spec)?))
    } else {
        Ok(Arc::new(FileDevice::open(std::path::Path::new(spec), options)?))
    }
}
