//! NBD error values (`doc/proto.md`, "Error values") and how an [`ExportError`] maps onto
//! them.

use crate::export::ExportError;

/// An error value carried in a reply's error field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Errno {
    /// `NBD_EPERM` (1): operation not permitted (a write or trim on a read-only export).
    Perm,
    /// `NBD_EIO` (5): input/output error.
    Io,
    /// `NBD_ENOMEM` (12): cannot allocate memory (never sent by ember's server).
    NoMem,
    /// `NBD_EINVAL` (22): invalid argument.
    Inval,
    /// `NBD_ENOSPC` (28): no space left on device (a write past the end).
    NoSpc,
    /// `NBD_EOVERFLOW` (75): value too large (a structured read above the maximum payload).
    Overflow,
    /// `NBD_ENOTSUP` (95): operation not supported.
    NotSup,
    /// `NBD_ESHUTDOWN` (108): server is shutting down.
    Shutdown,
    /// A value the protocol does not define; clients treat it as `NBD_EINVAL`.
    Other(u32),
}

impl Errno {
    /// The value on the wire.
    pub fn code(self) -> u32 {
        match self {
            Errno::Perm => 1,
            Errno::Io => 5,
            Errno::NoMem => 12,
            Errno::Inval => 22,
            Errno::NoSpc => 28,
            Errno::Overflow => 75,
            Errno::NotSup => 95,
            Errno::Shutdown => 108,
            Errno::Other(code) => code,
        }
    }

    /// The error for a value read off the wire.
    pub fn from_code(code: u32) -> Errno {
        match code {
            1 => Errno::Perm,
            5 => Errno::Io,
            12 => Errno::NoMem,
            22 => Errno::Inval,
            28 => Errno::NoSpc,
            75 => Errno::Overflow,
            95 => Errno::NotSup,
            108 => Errno::Shutdown,
            other => Errno::Other(other),
        }
    }

    /// The protocol's name for this value.
    pub fn name(self) -> &'static str {
        match self {
            Errno::Perm => "NBD_EPERM",
            Errno::Io => "NBD_EIO",
            Errno::NoMem => "NBD_ENOMEM",
            Errno::Inval => "NBD_EINVAL",
            Errno::NoSpc => "NBD_ENOSPC",
            Errno::Overflow => "NBD_EOVERFLOW",
            Errno::NotSup => "NBD_ENOTSUP",
            Errno::Shutdown => "NBD_ESHUTDOWN",
            Errno::Other(_) => "unknown NBD error",
        }
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl From<&ExportError> for Errno {
    /// `Io` → `NBD_EIO`, except the OS errors the spec names: `ENOSPC`, `EDQUOT` and `EFBIG`
    /// → `NBD_ENOSPC`, `EROFS` and `EPERM` → `NBD_EPERM`; `NoSpace` → `NBD_ENOSPC`;
    /// `Invalid` → `NBD_EINVAL`; `ReadOnly` → `NBD_EPERM`; `NotSupported` → `NBD_ENOTSUP`;
    /// `Shutdown` → `NBD_ESHUTDOWN`.
    fn from(error: &ExportError) -> Errno {
        match error {
            ExportError::Io(io) => match io.raw_os_error() {
                // ENOSPC, EDQUOT, EFBIG (Linux numbering).
                Some(28) | Some(122) | Some(27) => Errno::NoSpc,
                // EPERM, EROFS.
                Some(1) | Some(30) => Errno::Perm,
                _ => match io.kind() {
                    std::io::ErrorKind::PermissionDenied => Errno::Perm,
                    _ => Errno::Io,
                },
            },
            ExportError::NoSpace => Errno::NoSpc,
            ExportError::Invalid(_) => Errno::Inval,
            ExportError::ReadOnly => Errno::Perm,
            ExportError::NotSupported(_) => Errno::NotSup,
            ExportError::Shutdown => Errno::Shutdown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_the_spec() {
        let all = [
            (Errno::Perm, 1),
            (Errno::Io, 5),
            (Errno::NoMem, 12),
            (Errno::Inval, 22),
            (Errno::NoSpc, 28),
            (Errno::Overflow, 75),
            (Errno::NotSup, 95),
            (Errno::Shutdown, 108),
        ];
        for (errno, code) in all {
            assert_eq!(errno.code(), code);
            assert_eq!(Errno::from_code(code), errno);
        }
        assert_eq!(Errno::from_code(4242), Errno::Other(4242));
    }

    #[test]
    fn export_errors_map_as_documented() {
        let enospc = ExportError::Io(std::io::Error::from_raw_os_error(28));
        assert_eq!(Errno::from(&enospc), Errno::NoSpc);
        let efbig = ExportError::Io(std::io::Error::from_raw_os_error(27));
        assert_eq!(Errno::from(&efbig), Errno::NoSpc);
        let eio = ExportError::Io(std::io::Error::from_raw_os_error(5));
        assert_eq!(Errno::from(&eio), Errno::Io);
        assert_eq!(Errno::from(&ExportError::NoSpace), Errno::NoSpc);
        assert_eq!(Errno::from(&ExportError::Invalid("x".into())), Errno::Inval);
        assert_eq!(Errno::from(&ExportError::ReadOnly), Errno::Perm);
        assert_eq!(Errno::from(&ExportError::NotSupported("x")), Errno::NotSup);
        assert_eq!(Errno::from(&ExportError::Shutdown), Errno::Shutdown);
    }
}
