//! Every driver a plan picks gives what [`crate::simulate`] gives on the whole stream, cell by
//! cell; the plan picks the driver the request calls for; a bad request is an error.

use super::*;
use crate::{simulate, AccessStream, RunConfig};
use ember_policy::admission::Aod;
use ember_policy::replacement::Kind;
use ember_policy::with_replacement;
use ember_trace::{read_trace, write_trace, Format, Op, Request, Trace, VolumeTable};
use std::path::Path;
use std::sync::Mutex;

/// A trace with multi-block requests, writes and time gaps.
fn trace(n: u64) -> Trace {
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut t = 0u64;
    let requests = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t += (x % 7) * 300_000_000;
            let block = if !x.is_multiple_of(4) { (x >> 9) % 300 } else { (x >> 9) % 20_000 };
            Request {
                time_ns: t,
                volume: 0,
                op: if x.is_multiple_of(5) { Op::Write } else { Op::Read },
                offset: block * 4096,
                length: [4096u32, 8192, 30_000][((x >> 30) % 3) as usize],
            }
        })
        .collect();
    let mut volumes = VolumeTable::new();
    volumes.intern("v");
    Trace::new(requests, volumes)
}

fn source(path: &Path) -> TraceSource {
    TraceSource { path: path.to_path_buf(), read: ReadOptions::default(), per_request: false }
}

fn sizes(texts: &[&str]) -> Vec<(String, Capacity)> {
    texts.iter().map(|t| (t.to_string(), t.parse().expect("size"))).collect()
}

/// What [`crate::simulate`] gives for every cell over the trace at `path` held whole.
fn reference(path: &Path, cells: &[Cell], interval: Option<Interval>) -> Vec<SimResult> {
    reference_after(path, cells, interval, WarmupPeriod::None)
}

/// [`reference`] after an uncounted warm-up period.
fn reference_after(
    path: &Path,
    cells: &[Cell],
    interval: Option<Interval>,
    warmup: WarmupPeriod,
) -> Vec<SimResult> {
    let (t, _) = read_trace(path, &ReadOptions::default()).expect("read");
    let stream = AccessStream::from_trace(&t, 4096, true).expect("stream");
    let cfg = RunConfig { interval, warmup };
    cells
        .iter()
        .map(|c| {
            let cap = usize_capacity(c.capacity);
            with_replacement!(c.policy, cap, |p| simulate(&mut p, &mut Aod, &stream, &cfg))
        })
        .collect()
}

/// Run `plan`, checking its progress reports: one start, then advances that never go back.
fn run(plan: &Plan) -> Outcome {
    let seen: Mutex<(usize, u64)> = Mutex::new((0, 0));
    let out = plan
        .run(&|p| {
            let mut s = seen.lock().expect("lock");
            match p {
                Progress::Start { runs, .. } => {
                    s.0 += 1;
                    assert!(runs > 0);
                }
                Progress::Advance { done, .. } => {
                    assert_eq!(s.0, 1, "an advance before the start");
                    assert!(done >= s.1 || plan.options().threads > 1, "{done} < {}", s.1);
                    s.1 = s.1.max(done);
                }
            }
        })
        .expect("run");
    assert_eq!(seen.lock().expect("lock").0, 1);
    out
}

/// A request: the trace, the policies, the timeline, whether the whole trace may be held,
/// and the driver the plan must pick.
type Case<'a> = (&'a Path, Vec<Kind>, Option<Interval>, bool, Driver);

#[test]
fn every_driver_gives_the_whole_stream_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(20_000);
    let og = dir.path().join("t.oracleGeneral.bin");
    let ember = dir.path().join("t.ember");
    write_trace(&og, Format::OracleGeneral, &t, 4096).expect("write");
    write_trace(&ember, Format::Ember, &t, 4096).expect("write");
    let minute = Some(Interval::Time(60_000_000_000));
    let cases: Vec<Case> = vec![
        (
            &ember,
            vec![Kind::Lru, Kind::Fifo, Kind::Clock, Kind::S3Fifo],
            None,
            false,
            Driver::Shared,
        ),
        (&og, vec![Kind::Lru, Kind::S3Fifo], None, false, Driver::Shared),
        (&og, vec![Kind::Arc, Kind::Lru], None, false, Driver::Records),
        (&og, vec![Kind::Lru, Kind::Fifo], minute, false, Driver::Chunks),
        (&ember, vec![Kind::Arc, Kind::TwoQ], None, false, Driver::Chunks),
        (&ember, vec![Kind::Opt, Kind::Lru], None, false, Driver::NextAccess),
        (&og, vec![Kind::Opt, Kind::Lru], minute, false, Driver::NextAccess),
        (&ember, vec![Kind::Opt, Kind::Lru], minute, true, Driver::Whole),
    ];
    let warmups =
        [WarmupPeriod::None, WarmupPeriod::Requests(5000), WarmupPeriod::Time(4e12 as u64)];
    for (path, policies, interval, whole_trace, driver) in cases {
        for (threads, warmup) in
            [(1usize, warmups[0]), (3, warmups[0]), (1, warmups[1]), (3, warmups[2])]
        {
            let options =
                PlanOptions { interval, threads, whole_trace, warmup, ..PlanOptions::default() };
            let plan =
                Plan::new(source(path), policies.clone(), sizes(&["1%", "50", "2000"]), options)
                    .expect("plan");
            let out = run(&plan);
            let what =
                format!("{policies:?} {interval:?} {warmup} over {} on {threads}", path.display());
            assert_eq!(out.driver, driver, "{what}");
            let cells: Vec<Cell> = out.runs.iter().map(|(c, _)| c.clone()).collect();
            assert_eq!(cells, plan.cells(out.totals.wss), "{what}");
            let got: Vec<SimResult> = out.runs.into_iter().map(|(_, r)| r).collect();
            assert_eq!(got, reference_after(path, &cells, interval, warmup), "{what}");
            assert_eq!(out.totals.counted_from, got[0].counted_from, "{what}");
            assert_eq!(warmup.is_none(), got[0].counted_from.is_none(), "{what}");
            let want_pass = match driver {
                Driver::NextAccess => Some(FirstPass::NextAccess),
                Driver::Whole => None,
                _ => Some(FirstPass::WorkingSet),
            };
            assert_eq!(out.first_pass, want_pass, "{what}");
            assert!(out.totals.accesses > 20_000 && out.totals.wss > 300, "{what}");
            assert!(out.threads >= 1 && out.threads <= threads, "{what}");
        }
    }
}

/// Sizes in blocks and bytes need no first pass; one cell never takes the shared index.
#[test]
fn sizes_without_percent_read_the_trace_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.ember");
    write_trace(&path, Format::Ember, &trace(3_000), 4096).expect("write");
    let options = PlanOptions { threads: 1, ..PlanOptions::default() };
    let plan = Plan::new(source(&path), vec![Kind::Lru], sizes(&["64KiB"]), options).expect("plan");
    let out = run(&plan);
    assert_eq!((out.driver, out.first_pass), (Driver::Chunks, None));
    assert_eq!(out.runs[0].0.capacity, 16);
    assert_eq!(
        out.runs.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
        reference(&path, &plan.cells(0), None)
    );
}

#[test]
fn a_bad_request_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("missing.ember");
    let o = PlanOptions::default();
    let none = Plan::new(source(&path), Vec::<Kind>::new(), sizes(&["10"]), o);
    assert!(matches!(none, Err(PlanError::Invalid(_))));
    let none = Plan::new(source(&path), vec![Kind::Lru], Vec::new(), o);
    assert!(matches!(none, Err(PlanError::Invalid(_))));
    let mut zero = source(&path);
    zero.read.block_size = 0;
    assert!(matches!(
        Plan::new(zero, vec![Kind::Lru], sizes(&["10"]), o),
        Err(PlanError::Invalid(_))
    ));
    let plan = Plan::new(source(&path), vec![Kind::Lru], sizes(&["10"]), o).expect("plan");
    let err = plan.run(&|_| {}).expect_err("no such file");
    assert!(matches!(err, PlanError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("missing.ember"), "{err}");
}
