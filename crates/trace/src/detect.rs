//! Telling a trace's format: by its name (`.msr`, `x.oracleGeneral.bin`, looking through
//! `.gz` / `.zst`), else by sniffing its first bytes after decompression.

use std::io::Read;
use std::path::Path;

use crate::compression::open_decompressed;
use crate::error::io_err;
use crate::formats::blkparse::looks_like_event;
use crate::formats::ember as ember_fmt;
use crate::formats::vscsi;
use crate::formats::Format;
use crate::TraceError;

/// True if `path` is a regular file (not a pipe, FIFO or character device), which can be
/// read twice and sniffed without consuming it.
pub fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// True if `path` can be read twice, so sniffing its first bytes does not consume them: a
/// regular file or a block device (a warmup log on Bonfire's logging volume).
fn rereadable(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() || m.file_type().is_block_device())
}

/// The file name without a trailing `.gz`, `.zst` or `.zstd`.
fn uncompressed_name(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for suffix in [".gz", ".zst", ".zstd"] {
        if let Some(stem) = name.strip_suffix(suffix) {
            return stem.to_owned();
        }
    }
    name
}

/// The format a file name names, if any: `.msr`, `.spc`, `.blkparse`, `.vscsi`, `.ember`,
/// `*.oracleGeneral*` (libCacheSim's `x.oracleGeneral.bin` naming), each possibly followed by
/// `.gz` / `.zst`. `.csv` and `.txt` name no format: content decides.
pub fn format_from_name(path: &Path) -> Option<Format> {
    let name = uncompressed_name(path);
    if name.to_ascii_lowercase().contains("oraclegeneral") {
        return Some(Format::OracleGeneral);
    }
    let ext = name.rsplit_once('.')?.1;
    Format::from_extension(ext)
}

/// Read up to `n` bytes from the start of the (decompressed) file.
fn head(path: &Path, n: usize) -> Result<Vec<u8>, TraceError> {
    let r = open_decompressed(path)?;
    let mut buf = Vec::with_capacity(n);
    r.take(n as u64).read_to_end(&mut buf).map_err(|e| io_err(path, e))?;
    Ok(buf)
}

/// Decide a format from content.
fn sniff(path: &Path, head: &[u8]) -> Result<Format, TraceError> {
    if head.starts_with(&ember_fmt::MAGIC) {
        return Ok(Format::Ember);
    }
    if head.starts_with(&crate::formats::warmup_log::MAGIC)
        || crate::formats::warmup_log::cache_region(head).is_some()
    {
        // A warmup log, or an ember cache device whose layout holds one.
        return Ok(Format::WarmupLog);
    }
    let texty = !head.is_empty()
        && head.iter().all(|&b| {
            b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80
        });
    if texty {
        // The last line may be cut by the sniff window; look at complete lines only.
        let text = String::from_utf8_lossy(head);
        let mut lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(8).collect();
        if lines.len() > 1 && !text.ends_with('\n') {
            lines.pop();
        }
        if let Some(first) = lines.first() {
            if lines.iter().take(4).any(|l| looks_like_event(l)) {
                return Ok(Format::Blkparse);
            }
            let data = lines
                .iter()
                .find(|l| !l.to_ascii_lowercase().starts_with("timestamp"))
                .unwrap_or(first);
            let f: Vec<&str> = data.split(',').map(str::trim).collect();
            if f.len() >= 6
                && f[0].parse::<u64>().is_ok_and(|t| t >= crate::formats::msr::FILETIME_UNIX_EPOCH)
                && (f[3].eq_ignore_ascii_case("read") || f[3].eq_ignore_ascii_case("write"))
            {
                return Ok(Format::MsrCsv);
            }
            if f.len() >= 5
                && f[0].parse::<u64>().is_ok()
                && f[1].parse::<u64>().is_ok()
                && matches!(f[3], "r" | "R" | "w" | "W")
                && f[4].parse::<f64>().is_ok()
            {
                return Ok(Format::SpcCsv);
            }
            if first.contains([',', '\t', '|']) {
                return Ok(Format::Csv);
            }
        }
        return Err(TraceError::Format {
            path: path.to_owned(),
            message: "cannot tell the trace format from its text; pass --format".into(),
        });
    }
    if vscsi::detect_version(head).is_some() {
        return Ok(Format::Vscsi);
    }
    Err(TraceError::Format {
        path: path.to_owned(),
        message: "cannot tell the format of this binary file; pass --format (oracleGeneral \
                  files are recognised by an .oracleGeneral.bin name)"
            .into(),
    })
}

/// The format of `path`: by name first ([`format_from_name`]), then by sniffing the first
/// bytes (after decompression): ember's magic, blkparse event lines, MSR-Cambridge and SPC
/// field shapes, any other delimited text as CSV, vscsi's version fields.
pub fn detect_format(path: &Path) -> Result<Format, TraceError> {
    if let Some(f) = format_from_name(path) {
        return Ok(f);
    }
    if !rereadable(path) && path.exists() {
        return Err(TraceError::Format {
            path: path.to_owned(),
            message: "cannot tell the format of a pipe without consuming it; pass --format".into(),
        });
    }
    let h = head(path, 8192)?;
    sniff(path, &h)
}
