//! From a trace to the I/O the replayer sends: each trace volume goes to an export, offsets
//! and lengths are aligned to 512-byte sectors (the verification unit), and a request beyond
//! the export's end is wrapped modulo the export size (and clipped if longer than the export).

use ember_trace::{Op, Trace};
use serde::Serialize;

use crate::pattern::SECTOR;

/// One export the trace is replayed onto.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExportTarget {
    /// Export name on the server.
    pub name: String,
    /// Export size in bytes.
    pub size: u64,
}

/// One request as it will be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedIo {
    /// Index of the request in the trace.
    pub index: u64,
    /// The trace's timestamp.
    pub time_ns: u64,
    /// Export index (into [`Plan::exports`]).
    pub export: u32,
    /// A write (else a read).
    pub write: bool,
    /// First sector.
    pub sector: u64,
    /// Number of sectors (at least 1).
    pub sectors: u32,
}

impl PlannedIo {
    /// Byte offset.
    pub fn offset(&self) -> u64 {
        self.sector * SECTOR as u64
    }

    /// Length in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.sectors) * SECTOR as u64
    }

    /// One past the last sector.
    pub fn end(&self) -> u64 {
        self.sector + u64::from(self.sectors)
    }
}

/// What planning changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PlanStats {
    /// Requests in the trace.
    pub requests: u64,
    /// Requests planned.
    pub planned: u64,
    /// Requests moved because they reached past the export's end (offset modulo size).
    pub wrapped: u64,
    /// Requests not aligned to 512 bytes, widened to whole sectors.
    pub realigned: u64,
    /// Requests longer than the export, cut to its size.
    pub clipped: u64,
    /// Requests of volumes mapped to no export, left out.
    pub skipped_unmapped: u64,
    /// Zero-length requests, left out.
    pub skipped_empty: u64,
}

/// The replay plan.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Requests to send, in trace order.
    pub ios: Vec<PlannedIo>,
    /// The exports, by index.
    pub exports: Vec<ExportTarget>,
    /// Per export, the merged sector ranges `[start, end)` the plan touches (what `--prefill`
    /// writes).
    pub footprint: Vec<Vec<(u64, u64)>>,
    /// What planning changed.
    pub stats: PlanStats,
}

/// Plan `trace` onto `exports`; `volume_to_export[v]` is the export of trace volume `v`
/// (`None`: leave that volume out). Fails if an export is smaller than one sector.
pub fn plan(
    trace: &Trace,
    volume_to_export: &[Option<usize>],
    exports: Vec<ExportTarget>,
) -> Result<Plan, String> {
    let sector = SECTOR as u64;
    for e in &exports {
        if e.size < sector {
            return Err(format!("export {:?} has {} bytes, less than one sector", e.name, e.size));
        }
    }
    let mut stats = PlanStats { requests: trace.requests.len() as u64, ..PlanStats::default() };
    let mut ios = Vec::with_capacity(trace.requests.len());
    let mut touched: Vec<Vec<(u64, u64)>> = vec![Vec::new(); exports.len()];
    for (index, r) in trace.requests.iter().enumerate() {
        let Some(&Some(export)) = volume_to_export.get(r.volume as usize) else {
            stats.skipped_unmapped += 1;
            continue;
        };
        let Some(target) = exports.get(export) else {
            return Err(format!(
                "volume {} is mapped to export #{export}, which does not exist",
                r.volume
            ));
        };
        if r.length == 0 {
            stats.skipped_empty += 1;
            continue;
        }
        let end_byte = r.offset.saturating_add(u64::from(r.length));
        if r.offset % sector != 0 || u64::from(r.length) % sector != 0 {
            stats.realigned += 1;
        }
        let mut start = r.offset / sector;
        let mut count = end_byte.div_ceil(sector) - start;
        let capacity = target.size / sector;
        if count > capacity {
            count = capacity;
            stats.clipped += 1;
        }
        if start + count > capacity {
            stats.wrapped += 1;
            start %= capacity;
            if start + count > capacity {
                start = capacity - count;
            }
        }
        let io = PlannedIo {
            index: index as u64,
            time_ns: r.time_ns,
            export: export as u32,
            write: r.op == Op::Write,
            sector: start,
            sectors: u32::try_from(count).unwrap_or(u32::MAX),
        };
        touched[export].push((io.sector, io.end()));
        ios.push(io);
    }
    stats.planned = ios.len() as u64;
    let footprint = touched.into_iter().map(merge).collect();
    Ok(Plan { ios, exports, footprint, stats })
}

/// Sort and merge ranges (touching ranges merge too).
fn merge(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::{Request, VolumeTable};

    fn trace(reqs: &[(u32, Op, u64, u32)]) -> Trace {
        let mut volumes = VolumeTable::new();
        volumes.intern("a");
        volumes.intern("b");
        let requests = reqs
            .iter()
            .enumerate()
            .map(|(i, &(volume, op, offset, length))| Request {
                time_ns: i as u64 * 1000,
                volume,
                op,
                offset,
                length,
            })
            .collect();
        Trace::new(requests, volumes)
    }

    fn target(name: &str, size: u64) -> ExportTarget {
        ExportTarget { name: name.into(), size }
    }

    #[test]
    fn wraps_aligns_clips_and_maps() {
        let t = trace(&[
            (0, Op::Read, 0, 4096),
            (0, Op::Write, 1 << 20, 4096), // past a 64 KiB export: wrapped to 0
            (0, Op::Read, 65536 - 1024, 4096), // straddles the end: moved back
            (0, Op::Read, 100, 10),        // unaligned: widened to sector 0
            (1, Op::Read, 0, 4096),        // unmapped volume
            (0, Op::Read, 0, 0),           // empty
            (0, Op::Read, 0, 1 << 20),     // longer than the export
        ]);
        let p = match plan(&t, &[Some(0), None], vec![target("x", 65536)]) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let got: Vec<(bool, u64, u32)> =
            p.ios.iter().map(|i| (i.write, i.sector, i.sectors)).collect();
        assert_eq!(
            got,
            vec![(false, 0, 8), (true, 0, 8), (false, 120, 8), (false, 0, 1), (false, 0, 128)]
        );
        assert_eq!(p.ios[2].index, 2);
        assert_eq!(
            p.stats,
            PlanStats {
                requests: 7,
                planned: 5,
                wrapped: 2,
                realigned: 1,
                clipped: 1,
                skipped_unmapped: 1,
                skipped_empty: 1
            }
        );
        assert_eq!(p.footprint, vec![vec![(0, 128)]]);
    }

    #[test]
    fn footprint_merges_per_export() {
        let t = trace(&[
            (0, Op::Read, 0, 4096),
            (1, Op::Read, 8192, 4096),
            (0, Op::Write, 4096, 512),
            (0, Op::Read, 65536, 512),
        ]);
        let p = plan(&t, &[Some(0), Some(1)], vec![target("x", 1 << 20), target("y", 1 << 20)]);
        let p = p.map_err(|e| e.to_string());
        assert_eq!(p.map(|p| p.footprint), Ok(vec![vec![(0, 9), (128, 129)], vec![(16, 24)]]));
    }

    #[test]
    fn tiny_exports_are_refused() {
        let t = trace(&[]);
        assert!(plan(&t, &[], vec![target("x", 100)]).is_err());
    }
}
