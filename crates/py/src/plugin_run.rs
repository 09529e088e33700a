//! `emberlab.sim` with a policy class written in Python ([`crate::plugin`]): the trace read by
//! ember's readers with the flags of `ember sim`, one run per size through ember's simulator
//! ([`ember_sim::simulate`], admit on demand), and the result as the CSV (and timeline CSV)
//! `ember sim` writes, the policy column holding the given name.

use crate::plugin::PyPolicy;
use anyhow::Context;
use ember_cli::cmd_sim::SimArgs;
use ember_cli::lab;
use ember_cli::output::{Report, Row, WarmupNote};
use ember_policy::admission::Aod;
use ember_sim::{simulate, AccessStreamBuilder, RunConfig, Split};
use ember_trace::{BlockChunk, BlockReader};
use pyo3::prelude::*;

/// Block accesses read per chunk.
const CHUNK: usize = 1 << 18;

/// `ember sim ARGV...` with `factory` (a class, called with the capacity in blocks) as the
/// replacement policy named `name`: (the CSV `--csv` writes, the timeline CSV or None).
#[pyfunction]
pub fn sim_plugin(
    py: Python<'_>,
    argv: Vec<String>,
    factory: Bound<'_, PyAny>,
    name: String,
) -> PyResult<(String, Option<String>)> {
    let args: SimArgs = lab::parse("sim", &argv).map_err(crate::err)?;
    if args.minisim.is_some() {
        return Err(crate::err(anyhow::anyhow!(
            "minisim runs ember's own policies; a policy written in Python runs exactly"
        )));
    }
    let sizes = ember_cli::grid_args::sizes(&args.size).map_err(crate::err)?;
    let warmup = args.uncounted.period().map_err(crate::err)?;
    let block_size = args.input.block_size;
    let path = args.input.path().to_path_buf();
    let read = args.input.read_options();
    let keep_times = args.interval.is_some() || !warmup.is_none();
    let per_request = args.per_request;
    let stream = py
        .allow_threads(|| -> anyhow::Result<_> {
            let split = if per_request { Split::FirstBlock } else { Split::Blocks };
            let mut b = AccessStreamBuilder::new(block_size, split)?;
            if !keep_times {
                b = b.without_times();
            }
            let context = || format!("reading trace {}", path.display());
            let mut reader =
                BlockReader::open(&path, &read, per_request, keep_times).with_context(context)?;
            let mut chunk = BlockChunk::default();
            while reader.next_chunk(&mut chunk, CHUNK).with_context(context)? {
                b.push_chunk(&chunk);
            }
            Ok(b.finish(false))
        })
        .map_err(crate::err)?;
    let wss = stream.wss();
    let config = RunConfig { interval: args.interval, warmup };
    let mut rows = Vec::with_capacity(sizes.len());
    for (label, size) in &sizes {
        let blocks = size.blocks(block_size, wss);
        let capacity = usize::try_from(blocks).unwrap_or(usize::MAX);
        let object = factory.call1((capacity,))?;
        let mut policy = PyPolicy::new(&object, capacity)?;
        let mut result = simulate(&mut policy, &mut Aod, &stream, &config);
        if let Some(e) = policy.take_error() {
            return Err(e);
        }
        result.policy = name.clone();
        rows.push(Row { size: label.clone(), result });
    }
    let counted_from = rows.first().and_then(|r| r.result.counted_from);
    let report = Report {
        trace: path.display().to_string(),
        block_size,
        requests: stream.requests(),
        block_accesses: stream.len() as u64,
        wss_blocks: wss,
        interval: args.interval.map(|i| i.to_string()),
        warmup: WarmupNote::of(warmup, counted_from, stream.requests(), stream.len() as u64),
        minisim: None,
        rows,
    };
    let timeline = match args.interval {
        Some(_) => Some(report.timeline_csv_text().map_err(crate::err)?),
        None => None,
    };
    Ok((report.csv_text().map_err(crate::err)?, timeline))
}
