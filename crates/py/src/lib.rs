//! `emberlab._native`: the Rust side of ember's Python package. An adapter only: every
//! function parses the same flags as its `ember` subcommand and calls the code the CLI calls
//! (`ember_cli::lab`, `ember_trace`), with the GIL released while Rust runs. Errors become
//! `emberlab.EmberError` carrying ember's message (with `file:line` for a bad trace record).

mod plugin;
mod plugin_run;

use ember_cli::lab;
use ember_trace::{Op, Request, Trace, VolumeTable};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;

create_exception!(
    _native,
    EmberError,
    PyException,
    "An error reported by ember: a bad argument, an unreadable file, or a malformed trace \
     record (the message names the file and line)."
);

/// An ember error as `EmberError`, with its chain of context.
fn err(e: anyhow::Error) -> PyErr {
    EmberError::new_err(format!("{e:#}"))
}

/// `ember sim ARGV...`: (the CSV `--csv` writes, the timeline CSV or None).
#[pyfunction]
fn sim(py: Python<'_>, argv: Vec<String>) -> PyResult<(String, Option<String>)> {
    py.allow_threads(|| lab::sim(&argv)).map_err(err)
}

/// `ember analyze ARGV...`: the JSON document `--json` writes.
#[pyfunction]
fn analyze(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    py.allow_threads(|| lab::analyze(&argv)).map_err(err)
}

/// `ember warmup run ARGV...`: the JSON document `--json` writes.
#[pyfunction]
fn warmup(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    py.allow_threads(|| lab::warmup(&argv)).map_err(err)
}

/// `ember demote ARGV...`: the JSON document `--json` writes.
#[pyfunction]
fn demote(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    py.allow_threads(|| lab::demote(&argv)).map_err(err)
}

/// `ember sievestore ARGV...`: ("experiment" or "runs", the JSON document).
#[pyfunction]
fn sievestore(py: Python<'_>, argv: Vec<String>) -> PyResult<(&'static str, String)> {
    py.allow_threads(|| lab::sievestore(&argv)).map_err(err)
}

fn le_bytes<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * N);
    for x in v {
        out.extend_from_slice(&f(*x));
    }
    out
}

/// Read a trace with the trace flags of `ember trace info` (`[PATH, "--format", ...]`) into
/// little-endian column buffers: `time_ns` (u64), `volume` (u32 codes into `volumes`), `op`
/// (u8: 0 read, 1 write), `offset` (u64), `length` (u32); plus `volumes` and `skipped`.
#[pyfunction]
fn read_trace<'py>(py: Python<'py>, argv: Vec<String>) -> PyResult<Bound<'py, PyDict>> {
    let input = lab::trace_input(&argv).map_err(err)?;
    let (trace, stats) = py.allow_threads(|| input.read()).map_err(err)?;
    let r = &trace.requests;
    let cols = py.allow_threads(|| {
        let time: Vec<u64> = r.iter().map(|q| q.time_ns).collect();
        let vol: Vec<u32> = r.iter().map(|q| q.volume).collect();
        let op: Vec<u8> = r.iter().map(|q| u8::from(q.op == Op::Write)).collect();
        let off: Vec<u64> = r.iter().map(|q| q.offset).collect();
        let len: Vec<u32> = r.iter().map(|q| q.length).collect();
        (
            le_bytes(&time, u64::to_le_bytes),
            le_bytes(&vol, u32::to_le_bytes),
            op,
            le_bytes(&off, u64::to_le_bytes),
            le_bytes(&len, u32::to_le_bytes),
        )
    });
    let d = PyDict::new(py);
    d.set_item("time_ns", PyBytes::new(py, &cols.0))?;
    d.set_item("volume", PyBytes::new(py, &cols.1))?;
    d.set_item("op", PyBytes::new(py, &cols.2))?;
    d.set_item("offset", PyBytes::new(py, &cols.3))?;
    d.set_item("length", PyBytes::new(py, &cols.4))?;
    d.set_item("volumes", trace.volumes.names().to_vec())?;
    d.set_item("skipped", stats.skipped)?;
    Ok(d)
}

fn column<T: Copy, const N: usize>(
    name: &str,
    buf: &[u8],
    n: usize,
    f: impl Fn([u8; N]) -> T,
) -> PyResult<Vec<T>> {
    if buf.len() != n * N {
        return Err(EmberError::new_err(format!(
            "column {name}: {} bytes for {n} rows of {N} bytes",
            buf.len()
        )));
    }
    Ok(buf
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect())
}

/// Write a trace from little-endian column buffers (the layout [`read_trace`] returns) to
/// `path` in `format` (None: from the file name, as `ember trace convert` does).
#[pyfunction]
#[pyo3(signature = (path, format, block_size, n, time_ns, volume, op, offset, length, volumes))]
#[allow(clippy::too_many_arguments)]
fn write_trace(
    py: Python<'_>,
    path: PathBuf,
    format: Option<String>,
    block_size: u64,
    n: usize,
    time_ns: &[u8],
    volume: &[u8],
    op: &[u8],
    offset: &[u8],
    length: &[u8],
    volumes: Vec<String>,
) -> PyResult<()> {
    let time = column("time_ns", time_ns, n, u64::from_le_bytes)?;
    let vol = column("volume", volume, n, u32::from_le_bytes)?;
    let ops = column("op", op, n, |[b]: [u8; 1]| b)?;
    let off = column("offset", offset, n, u64::from_le_bytes)?;
    let len = column("length", length, n, u32::from_le_bytes)?;
    let mut table = VolumeTable::new();
    for v in &volumes {
        table.intern(v);
    }
    let mut requests = Vec::with_capacity(n);
    for i in 0..n {
        if vol[i] as usize >= volumes.len().max(1) {
            return Err(EmberError::new_err(format!(
                "row {i}: volume code {} but {} volume names",
                vol[i],
                volumes.len()
            )));
        }
        let op = match ops[i] {
            0 => Op::Read,
            1 => Op::Write,
            x => return Err(EmberError::new_err(format!("row {i}: op {x} is neither 0 nor 1"))),
        };
        requests.push(Request {
            time_ns: time[i],
            volume: vol[i],
            op,
            offset: off[i],
            length: len[i],
        });
    }
    let fmt = match format {
        Some(f) => Some(f.parse().map_err(|e: ember_trace::TraceError| err(e.into()))?),
        None => None,
    };
    let fmt = ember_cli::cmd_trace::output_format(fmt, &path);
    if !fmt.is_writable() {
        return Err(EmberError::new_err(format!("ember cannot write the {} format", fmt.name())));
    }
    let trace = Trace::new(requests, table);
    py.allow_threads(|| ember_trace::write_trace(&path, fmt, &trace, block_size))
        .map_err(|e| err(anyhow::Error::new(e).context(format!("writing {}", path.display()))))
}

/// The native module: `emberlab._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("EmberError", m.py().get_type::<EmberError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_run::sim_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(warmup, m)?)?;
    m.add_function(wrap_pyfunction!(demote, m)?)?;
    m.add_function(wrap_pyfunction!(sievestore, m)?)?;
    m.add_function(wrap_pyfunction!(read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(write_trace, m)?)?;
    Ok(())
}
