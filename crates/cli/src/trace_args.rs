//! The trace path and every reading option, shared by the subcommands that read a trace
//! (`ember trace info`, `ember trace convert`, `ember sim`, …) through `#[command(flatten)]`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use ember_trace::{
    BlkAction, CsvColumns, Format, OffsetUnit, ReadOptions, ReadStats, TimeUnit, Trace,
    TraceReader, DEFAULT_BLOCK_SIZE,
};
use ember_units::parse_size;

/// A trace to read and how to read it.
#[derive(Args, Clone, Debug)]
pub struct TraceInput {
    /// The trace file (`.gz` / `.zst` are decompressed transparently).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Trace format: msr, spc, blkparse, vscsi, oracle-general, csv, ember (default: detect
    /// from the file name, then from its content).
    #[arg(long, value_parser = parse_format)]
    pub format: Option<Format>,

    /// Skip and count malformed lines or records instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,

    /// blkparse: which events are requests: Q (queued), D (issued) or C (completed).
    #[arg(long, value_parser = parse_action, default_value = "D")]
    pub blkparse_action: BlkAction,

    /// Cache block size in bytes (also the request length of oracleGeneral records and of
    /// CSV rows without a size column). K/M/G = KiB/MiB/GiB; KB/MB/GB = 10^3/10^6/10^9.
    #[arg(long, default_value_t = DEFAULT_BLOCK_SIZE, value_parser = parse_size)]
    pub block_size: u64,

    /// CSV: 1-based column of the time (0 = no time column).
    #[arg(long, default_value_t = 1, help_heading = "CSV columns")]
    pub csv_time_col: usize,

    /// CSV: 1-based column of the offset (or sector / block number, see --csv-offset-unit).
    #[arg(long, default_value_t = 4, help_heading = "CSV columns")]
    pub csv_offset_col: usize,

    /// CSV: 1-based column of the size in bytes (0 = none: each row is one block).
    #[arg(long, default_value_t = 5, help_heading = "CSV columns")]
    pub csv_size_col: usize,

    /// CSV: 1-based column of the op (0 = none: all reads).
    #[arg(long, default_value_t = 3, help_heading = "CSV columns")]
    pub csv_op_col: usize,

    /// CSV: 1-based column of the volume name (0 = none: one volume "0").
    #[arg(long, default_value_t = 2, help_heading = "CSV columns")]
    pub csv_volume_col: usize,

    /// CSV: whether the first line is a header (default: detect).
    #[arg(long, help_heading = "CSV columns")]
    pub csv_header: Option<bool>,

    /// CSV: field delimiter, one character or `tab` (default: detect from the first line).
    #[arg(long, value_parser = parse_delimiter, help_heading = "CSV columns")]
    pub csv_delimiter: Option<u8>,

    /// CSV: unit of the time column: s, ms, us, ns.
    #[arg(long, value_parser = parse_time_unit, default_value = "ns", help_heading = "CSV columns")]
    pub csv_time_unit: TimeUnit,

    /// CSV: unit of the offset column: bytes, sectors (512 B), blocks (--block-size).
    #[arg(long, value_parser = parse_offset_unit, default_value = "bytes", help_heading = "CSV columns")]
    pub csv_offset_unit: OffsetUnit,

    /// CSV: comma-separated op values meaning read (case-insensitive).
    #[arg(long, value_delimiter = ',', default_value = "r,read,get", help_heading = "CSV columns")]
    pub csv_read_values: Vec<String>,

    /// CSV: comma-separated op values meaning write (case-insensitive).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "w,write,set",
        help_heading = "CSV columns"
    )]
    pub csv_write_values: Vec<String>,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse().map_err(|e: ember_trace::TraceError| e.to_string())
}

fn parse_action(s: &str) -> Result<BlkAction, String> {
    s.parse().map_err(|e: ember_trace::TraceError| e.to_string())
}

fn parse_time_unit(s: &str) -> Result<TimeUnit, String> {
    s.parse().map_err(|e: ember_trace::TraceError| e.to_string())
}

fn parse_offset_unit(s: &str) -> Result<OffsetUnit, String> {
    s.parse().map_err(|e: ember_trace::TraceError| e.to_string())
}

fn parse_delimiter(s: &str) -> Result<u8, String> {
    match s {
        "tab" | "\\t" | "\t" => Ok(b'\t'),
        _ if s.len() == 1 && s.is_ascii() => Ok(s.as_bytes()[0]),
        _ => Err(format!("delimiter {s:?} must be one ASCII character or `tab`")),
    }
}

fn col(c: usize) -> Option<usize> {
    (c != 0).then_some(c)
}

impl TraceInput {
    /// The trace path.
    pub fn path(&self) -> &Path {
        &self.trace
    }

    /// The reading options these flags select.
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions {
            format: self.format,
            skip_bad: self.skip_bad,
            blkparse_action: self.blkparse_action,
            csv: CsvColumns {
                time: col(self.csv_time_col),
                offset: self.csv_offset_col,
                size: col(self.csv_size_col),
                op: col(self.csv_op_col),
                volume: col(self.csv_volume_col),
                has_header: self.csv_header,
                delimiter: self.csv_delimiter,
                time_unit: self.csv_time_unit,
                offset_unit: self.csv_offset_unit,
                read_values: self.csv_read_values.clone(),
                write_values: self.csv_write_values.clone(),
            },
            block_size: self.block_size,
        }
    }

    /// Open the trace for streaming.
    pub fn open(&self) -> anyhow::Result<TraceReader> {
        ember_trace::open(&self.trace, &self.read_options())
            .with_context(|| format!("opening trace {}", self.trace.display()))
    }

    /// Read the whole trace into memory.
    pub fn read(&self) -> anyhow::Result<(Trace, ReadStats)> {
        ember_trace::read_trace(&self.trace, &self.read_options())
            .with_context(|| format!("reading trace {}", self.trace.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        input: TraceInput,
    }

    #[test]
    fn flags_map_to_read_options() {
        let cli = Cli::try_parse_from([
            "x",
            "t.csv",
            "--format",
            "csv",
            "--skip-bad",
            "--csv-time-col",
            "2",
            "--csv-volume-col",
            "0",
            "--csv-offset-col",
            "5",
            "--csv-size-col",
            "4",
            "--csv-offset-unit",
            "sectors",
            "--csv-time-unit",
            "s",
            "--csv-read-values",
            "28,8",
            "--csv-delimiter",
            "tab",
            "--block-size",
            "512",
        ]);
        let cli = match cli {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let o = cli.input.read_options();
        assert_eq!(o.format, Some(Format::Csv));
        assert!(o.skip_bad);
        assert_eq!(o.block_size, 512);
        assert_eq!(o.csv.time, Some(2));
        assert_eq!(o.csv.volume, None);
        assert_eq!(o.csv.offset, 5);
        assert_eq!(o.csv.size, Some(4));
        assert_eq!(o.csv.op, Some(3));
        assert_eq!(o.csv.offset_unit, OffsetUnit::Sectors);
        assert_eq!(o.csv.time_unit, TimeUnit::S);
        assert_eq!(o.csv.read_values, vec!["28".to_string(), "8".to_string()]);
        assert_eq!(o.csv.delimiter, Some(b'\t'));
        assert_eq!(o.blkparse_action, BlkAction::D);
    }

    #[test]
    fn defaults_match_the_library() {
        let cli = Cli::try_parse_from(["x", "t.ember"]).map_err(|e| e.to_string());
        let o = cli.map(|c| c.input.read_options());
        assert_eq!(o, Ok(ReadOptions::default()));
        assert!(Cli::try_parse_from(["x", "t", "--format", "parquet"]).is_err());
        assert!(Cli::try_parse_from(["x", "t", "--blkparse-action", "X"]).is_err());
    }
}
