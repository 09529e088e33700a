//! Writing a stream of requests to a trace file in bounded memory (`ember trace gen`,
//! `ember trace convert`): one request at a time for the streamable formats; for
//! oracleGeneral, whose next-access times look ahead, through temporary files
//! ([`ember_trace::Spool`]), memory then growing with the distinct blocks only.

use anyhow::Context;
use ember_trace::{
    BlockChunk, Format, Op, Request, Spool, TraceWriter, VolumeTable, FLAG_FIRST, FLAG_WRITE,
};
use indicatif::ProgressBar;
use std::path::Path;

/// Block accesses handed to the oracleGeneral spool at a time.
const SPOOL_CHUNK: usize = 1 << 18;

/// Counts of what was written.
#[derive(Default)]
pub struct Tally {
    /// Requests written.
    pub requests: u64,
    /// Of which writes.
    pub writes: u64,
}

impl Tally {
    /// Count `r`.
    pub fn add(&mut self, r: &Request) {
        self.requests += 1;
        if r.op == Op::Write {
            self.writes += 1;
        }
    }
}

/// Write `stream` to `output` as `format` (`volumes` names the volumes; `block_size` splits
/// requests into oracleGeneral's block accesses; `count`, if known, goes in ember's header),
/// advancing `bar` every 64 Ki requests.
pub fn write_stream(
    output: &Path,
    format: Format,
    block_size: u64,
    volumes: &VolumeTable,
    count: Option<u64>,
    stream: impl Iterator<Item = Request>,
    bar: &ProgressBar,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    if format == Format::OracleGeneral {
        // The block accesses go to temporary files, a backward pass over them computes the
        // next-access times (its map holds one entry per distinct block), and the records are
        // written from the files chunk by chunk.
        ember_trace::check_oracle_general_block_size(block_size)?;
        let mut spool = Spool::new(true).context("creating temporary files")?;
        let mut chunk = BlockChunk::default();
        for (i, r) in stream.enumerate() {
            tally.add(&r);
            if r.time_ns / 1_000_000_000 > u64::from(u32::MAX) {
                anyhow::bail!(
                    "request {}: time {} s does not fit oracleGeneral's 32-bit clock_time",
                    i + 1,
                    r.time_ns / 1_000_000_000
                );
            }
            for (j, k) in r.block_keys(block_size).enumerate() {
                chunk.keys.push(k);
                let w = if r.op.is_write() { FLAG_WRITE } else { 0 };
                chunk.flags.push(if j == 0 { w | FLAG_FIRST } else { w });
                chunk.times.push(r.time_ns);
            }
            if chunk.len() >= SPOOL_CHUNK {
                spool.push(&chunk).context("writing temporary files")?;
                chunk.clear();
            }
            if i & 0xffff == 0xffff {
                bar.inc(0x10000);
            }
        }
        spool.push(&chunk).context("writing temporary files")?;
        bar.finish_and_clear();
        let future = spool.finish().context("computing next-access times")?;
        ember_trace::write_oracle_general(output, &future, block_size)
            .with_context(|| format!("writing {}", output.display()))?;
    } else {
        let mut w = TraceWriter::create_counted(output, format, volumes, count)?;
        for (i, r) in stream.enumerate() {
            tally.add(&r);
            w.write(&r)?;
            if i & 0xffff == 0xffff {
                bar.inc(0x10000);
            }
        }
        w.finish()?;
        bar.finish_and_clear();
    }
    Ok(tally)
}
