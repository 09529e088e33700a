//! `--experiment demote`: every Wong and Wilkes scheme side by side on one trace (*My cache or
//! yours?*, USENIX ATC 2002), with per-client hit rates, DEMOTEs, mean READ latency (equations
//! 1–3, [`LatencyModel`]), speedup over NONE-LRU and the geometric mean of the speedups (the
//! layout of tables 7, 9 and 10), the READ latency distribution (Figure 4) and, over a sweep
//! of array sizes, total hit rate against aggregate cache size (Figures 2 and 7), with the
//! hit rate of one unified LRU cache of the same aggregate size for reference.

use crate::demote::latency_model::{geometric_mean, speedup, LatencyModel};
use crate::demote::topology::{
    simulate_demote, simulate_demote_stream, ArrayAddressing, ClientCounters, ClientOf,
    DemoteConfig, DemoteResult,
};
use crate::SimError;
use ember_policy::demote::{ArrayConfig, Scheme};
use ember_trace::Request;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Opens one pass over the trace, from any thread.
pub type PassOpener<'a, E> =
    dyn Fn() -> Result<Box<dyn Iterator<Item = Result<Request, E>> + Send + 'a>, E> + Sync + 'a;

/// What to run.
#[derive(Clone, Debug)]
pub struct DemoteExperiment {
    /// The clients and array; the array scheme is replaced by each of `schemes` in turn.
    pub base: DemoteConfig,
    /// The schemes, compared with NONE-LRU (added first if missing).
    pub schemes: Vec<Scheme>,
    /// The latency model.
    pub model: LatencyModel,
    /// Array sizes (blocks) of the hit-rate-against-aggregate-size sweep; empty for none.
    pub sweep_array_blocks: Vec<usize>,
    /// Worker threads.
    pub threads: usize,
}

/// One scheme's results.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SchemeReport {
    /// The scheme.
    pub scheme: Scheme,
    /// Counters per client.
    pub result: DemoteResult,
    /// Mean READ latency per client, ms.
    pub latency_ms: Vec<f64>,
    /// Speedup per client over NONE-LRU.
    pub speedup: Vec<f64>,
    /// Geometric mean of the per-client speedups.
    pub mean_speedup: f64,
    /// Mean READ latency over all clients' READS, ms.
    pub total_latency_ms: f64,
    /// READ latency distribution over all clients: (ms, cumulative fraction).
    pub cdf: Vec<(f64, f64)>,
    /// Wall-clock seconds the simulation took (for bench/hierarchy; never asserted).
    pub run_seconds: f64,
    /// CPU seconds the simulating thread used (Linux `/proc/thread-self/schedstat`; `None`
    /// elsewhere): unlike wall-clock time, not inflated when other processes take the CPU.
    pub run_cpu_seconds: Option<f64>,
}

/// One point of the sweep.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepPoint {
    /// The scheme.
    pub scheme: Scheme,
    /// Array size in blocks.
    pub array_blocks: usize,
    /// Client blocks summed over clients plus array blocks.
    pub aggregate_blocks: usize,
    /// Client hit rate.
    pub client_hit_rate: f64,
    /// Array hit rate.
    pub array_hit_rate: f64,
    /// Mean READ latency over all READS, ms.
    pub latency_ms: f64,
}

/// One unified LRU cache of an aggregate size (the cumulative hit-rate curve of Figures 2, 7).
#[derive(Clone, Debug, serde::Serialize)]
pub struct UnifiedPoint {
    /// Cache size in blocks.
    pub blocks: usize,
    /// Its hit rate.
    pub hit_rate: f64,
}

/// Everything `--experiment demote` produces.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoteReport {
    /// The clients and array (scheme field: the baseline's).
    pub base: DemoteConfig,
    /// The latency model.
    pub model: LatencyModel,
    /// Per-scheme results, NONE-LRU first.
    pub schemes: Vec<SchemeReport>,
    /// The sweep, by scheme then array size.
    pub sweep: Vec<SweepPoint>,
    /// The unified LRU at each sweep point's aggregate size.
    pub unified: Vec<UnifiedPoint>,
}

enum Job {
    Scheme(Scheme, usize),
    Unified(usize),
}

impl DemoteExperiment {
    fn config(&self, scheme: Scheme, array_blocks: usize) -> DemoteConfig {
        DemoteConfig {
            array: ArrayConfig { capacity: array_blocks, scheme, ..self.base.array },
            ..self.base
        }
    }

    /// Run every scheme (and the sweep) over `requests`, the first `warmup` uncounted.
    pub fn run(&self, requests: &[Request], warmup: usize) -> Result<DemoteReport, SimError> {
        self.run_each(&|config| simulate_demote(requests, warmup, config))
    }

    /// As [`DemoteExperiment::run`], each run reading its own pass of the trace from `open`
    /// (a regular file read once per run): memory is the caches' state, not the trace. A
    /// pass that fails to read ends its run with the reader's error.
    pub fn run_streamed<E: std::fmt::Display>(
        &self,
        open: &PassOpener<'_, E>,
        warmup: usize,
    ) -> Result<DemoteReport, SimError> {
        self.run_each(&|config| {
            let failed: RefCell<Option<E>> = RefCell::new(None);
            let pass = open().map_err(|e| SimError::Invalid(format!("reading the trace: {e}")))?;
            let requests = pass.map_while(|r| match r {
                Ok(r) => Some(r),
                Err(e) => {
                    *failed.borrow_mut() = Some(e);
                    None
                }
            });
            let result = simulate_demote_stream(requests, warmup, config, |_, _| {});
            match failed.into_inner() {
                Some(e) => Err(SimError::Invalid(format!("reading the trace: {e}"))),
                None => result,
            }
        })
    }

    /// Every scheme (and the sweep), each run by `simulate` on the worker threads.
    fn run_each(
        &self,
        simulate: &(dyn Fn(&DemoteConfig) -> Result<DemoteResult, SimError> + Sync),
    ) -> Result<DemoteReport, SimError> {
        let mut schemes = self.schemes.clone();
        if !schemes.contains(&Scheme::NoneLru) {
            schemes.insert(0, Scheme::NoneLru);
        }
        schemes.sort_by_key(|s| *s != Scheme::NoneLru);
        schemes.dedup();
        let main_array = self.base.array.capacity;
        let mut jobs: Vec<Job> = schemes.iter().map(|&s| Job::Scheme(s, main_array)).collect();
        let client_total = self.base.clients * self.base.client_blocks;
        for &a in &self.sweep_array_blocks {
            for &s in &schemes {
                jobs.push(Job::Scheme(s, a));
            }
            jobs.push(Job::Unified(client_total + a));
        }
        let next = AtomicUsize::new(0);
        type Timed = (usize, Result<DemoteResult, SimError>, f64, Option<f64>);
        let results: Mutex<Vec<Timed>> = Mutex::new(Vec::new());
        let work = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = jobs.get(i) else { break };
            let config = match *job {
                Job::Scheme(s, a) => self.config(s, a),
                Job::Unified(blocks) => DemoteConfig {
                    clients: 1,
                    client_blocks: blocks,
                    array: ArrayConfig::new(0, Scheme::NoneLru),
                    client_of: ClientOf::Single,
                    ..self.base
                },
            };
            let started = std::time::Instant::now();
            let cpu0 = thread_cpu_seconds();
            let r = simulate(&config);
            let cpu = thread_cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
            let secs = started.elapsed().as_secs_f64();
            if let Ok(mut v) = results.lock() {
                v.push((i, r, secs, cpu));
            }
        };
        let threads = self.threads.max(1).min(jobs.len());
        if threads <= 1 {
            // On the calling thread: no thread (nor a new malloc arena) for a serial run.
            work();
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(work);
                }
            });
        }
        let mut results =
            results.into_inner().map_err(|_| SimError::Invalid("a worker panicked".into()))?;
        results.sort_by_key(|r| r.0);
        if results.len() != jobs.len() {
            return Err(SimError::Invalid("a worker panicked".into()));
        }
        let mut out: Vec<DemoteResult> = Vec::with_capacity(results.len());
        let mut seconds: Vec<(f64, Option<f64>)> = Vec::with_capacity(results.len());
        for (_, r, secs, cpu) in results {
            out.push(r?);
            seconds.push((secs, cpu));
        }
        let model = self.model;
        let baseline: Vec<f64> = out[0].clients.iter().map(|c| model.mean_latency(c)).collect();
        let mut reports = Vec::new();
        for (r, &(run_seconds, run_cpu_seconds)) in out.iter().zip(&seconds).take(schemes.len()) {
            let latency_ms: Vec<f64> = r.clients.iter().map(|c| model.mean_latency(c)).collect();
            // Clients without READS have no latency to compare.
            let sp: Vec<f64> = latency_ms
                .iter()
                .zip(&baseline)
                .zip(&r.clients)
                .map(|((&l, &b), c)| if c.reads == 0 { 1.0 } else { speedup(b, l) })
                .collect();
            let active: Vec<f64> =
                sp.iter().zip(&r.clients).filter(|(_, c)| c.reads > 0).map(|(s, _)| *s).collect();
            let total = r.total();
            let total_latency_ms = model.mean_latency(&total);
            reports.push(SchemeReport {
                scheme: r.scheme(),
                result: r.clone(),
                mean_speedup: geometric_mean(&active),
                latency_ms,
                speedup: sp,
                total_latency_ms,
                cdf: model.cdf(&total),
                run_seconds,
                run_cpu_seconds,
            });
        }
        let mut sweep = Vec::new();
        let mut unified = Vec::new();
        for (job, r) in jobs.iter().zip(&out).skip(schemes.len()) {
            let t = r.total();
            match *job {
                Job::Scheme(s, a) => sweep.push(SweepPoint {
                    scheme: s,
                    array_blocks: a,
                    aggregate_blocks: client_total + a,
                    client_hit_rate: t.client_hit_rate(),
                    array_hit_rate: t.array_hit_rate(),
                    latency_ms: model.mean_latency(&t),
                }),
                Job::Unified(b) => {
                    unified.push(UnifiedPoint { blocks: b, hit_rate: t.client_hit_rate() })
                }
            }
        }
        sweep.sort_by_key(|p| (Scheme::ALL.iter().position(|s| *s == p.scheme), p.array_blocks));
        Ok(DemoteReport { base: self.base, model, schemes: reports, sweep, unified })
    }
}

/// CPU time of the calling thread, from `/proc/thread-self/schedstat` (nanoseconds on CPU,
/// its first field); `None` where that file does not exist.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

impl DemoteReport {
    /// The report of `scheme`, if run.
    pub fn scheme(&self, scheme: Scheme) -> Option<&SchemeReport> {
        self.schemes.iter().find(|s| s.scheme == scheme)
    }

    /// The text tables: per scheme, one row per client (hit rates, DEMOTEs, latency,
    /// speedup), then a summary.
    pub fn tables(&self) -> String {
        let mut s = String::new();
        let b = &self.base;
        let _ = writeln!(
            s,
            "hierarchy: {} client(s) x {} blocks, array {} blocks, block size {} B, {} addressing; \
             T_c {} ms, T_a {} ms, T_d {} ms, aborted DEMOTE {} ms",
            b.clients,
            b.client_blocks,
            b.array.capacity,
            b.block_size,
            match b.addressing {
                ArrayAddressing::Shared => "shared",
                ArrayAddressing::PerVolume => "per-volume",
            },
            self.model.t_c,
            self.model.t_a,
            self.model.t_d,
            self.model.t_abort
        );
        for r in &self.schemes {
            let _ = writeln!(
                s,
                "\n{} (mean speedup {:.2}x)\n{:>6} {:>10} {:>8} {:>8} {:>8} {:>10} {:>10} {:>9} {:>8}",
                r.scheme,
                r.mean_speedup,
                "client",
                "reads",
                "client%",
                "array%",
                "miss%",
                "demotes",
                "aborted",
                "lat_ms",
                "speedup"
            );
            let mut row = |name: &str, c: &ClientCounters, lat: f64, sp: f64| {
                let _ = writeln!(
                    s,
                    "{:>6} {:>10} {:>8.2} {:>8.2} {:>8.2} {:>10} {:>10} {:>9.3} {:>7.2}x",
                    name,
                    c.reads,
                    100.0 * c.client_hit_rate(),
                    100.0 * c.array_hit_rate(),
                    100.0 * c.miss_rate(),
                    c.demotions(),
                    c.aborted_demotions(),
                    lat,
                    sp
                );
            };
            for (k, c) in r.result.clients.iter().enumerate() {
                if c.reads > 0 {
                    row(&k.to_string(), c, r.latency_ms[k], r.speedup[k]);
                }
            }
            let base_total =
                self.schemes.first().map_or(r.total_latency_ms, |b| b.total_latency_ms);
            row(
                "all",
                &r.result.total(),
                r.total_latency_ms,
                speedup(base_total, r.total_latency_ms),
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::Op;

    #[test]
    fn runs_every_scheme_with_baseline_first_and_sweeps() {
        // A loop of 7 blocks, 1 client of 4 and an array of 4 (section 3.3 in miniature).
        let reqs: Vec<Request> = (0..77u64)
            .map(|i| Request {
                time_ns: i,
                volume: 0,
                op: Op::Read,
                offset: (i % 7) * 4096,
                length: 4096,
            })
            .collect();
        let exp = DemoteExperiment {
            base: DemoteConfig {
                clients: 1,
                client_blocks: 4,
                array: ArrayConfig::new(4, Scheme::NoneLru),
                block_size: 4096,
                client_of: ClientOf::Volume,
                addressing: ArrayAddressing::Shared,
            },
            schemes: vec![Scheme::Demote, Scheme::DemoteAdaptExp],
            model: crate::demote::latency_model::PAPER_SYNTHETIC,
            sweep_array_blocks: vec![2, 4],
            threads: 2,
        };
        let r = exp.run(&reqs, 7).unwrap();
        let names: Vec<Scheme> = r.schemes.iter().map(|s| s.scheme).collect();
        assert_eq!(names, vec![Scheme::NoneLru, Scheme::Demote, Scheme::DemoteAdaptExp]);
        let demote = r.scheme(Scheme::Demote).unwrap();
        // NONE-LRU: every READ misses (10.2 ms); DEMOTE: every READ hits the array after a
        // stored DEMOTE (0.4 ms): 25.5x.
        assert!((r.schemes[0].latency_ms[0] - 10.2).abs() < 1e-9);
        assert!((demote.latency_ms[0] - 0.4).abs() < 1e-9);
        assert!((demote.mean_speedup - 25.5).abs() < 1e-9);
        assert_eq!(demote.cdf, vec![(0.4, 1.0)]);
        assert_eq!(r.sweep.len(), 6);
        assert_eq!(r.unified.len(), 2);
        // A unified LRU of 8 blocks holds the 7-block loop: every timed READ hits.
        assert_eq!(r.unified[1].hit_rate, 1.0);
        assert!(r.tables().contains("DEMOTE (mean speedup 25.50x)"));
    }

    /// Streamed runs (each job its own pass) give exactly the in-memory runs' counters, for
    /// every scheme and sweep point, two clients over a skewed trace; a pass that fails to
    /// read ends the experiment with the reader's error.
    #[test]
    fn streamed_runs_equal_in_memory_runs_and_report_read_errors() {
        let mut x = 7u64;
        let reqs: Vec<Request> = (0..40_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let block = (x % 1000) * (x % 7) / 6;
                Request {
                    time_ns: i,
                    volume: (i % 2) as u32,
                    op: if x.is_multiple_of(10) { Op::Write } else { Op::Read },
                    offset: block * 4096,
                    length: 4096 * (1 + (x % 3) as u32),
                }
            })
            .collect();
        let exp = DemoteExperiment {
            base: DemoteConfig {
                clients: 2,
                client_blocks: 60,
                array: ArrayConfig::new(150, Scheme::NoneLru),
                block_size: 4096,
                client_of: ClientOf::Volume,
                addressing: ArrayAddressing::PerVolume,
            },
            schemes: Scheme::ALL.to_vec(),
            model: crate::demote::latency_model::PAPER_SYNTHETIC,
            sweep_array_blocks: vec![50, 300],
            threads: 2,
        };
        let whole = exp.run(&reqs, 5_000).unwrap();
        let open =
            || -> Result<Box<dyn Iterator<Item = Result<Request, String>> + Send>, String> {
                Ok(Box::new(reqs.clone().into_iter().map(Ok)))
            };
        let streamed = exp.run_streamed(&open, 5_000).unwrap();
        assert_eq!(whole.schemes.len(), Scheme::ALL.len());
        for (a, b) in whole.schemes.iter().zip(&streamed.schemes) {
            assert_eq!(a.scheme, b.scheme);
            assert_eq!(a.result.clients, b.result.clients, "{}", a.scheme);
            assert!(a.result.total().client_hits > 0 && a.result.total().reads > 0);
        }
        assert_eq!(whole.sweep.len(), streamed.sweep.len());
        for (a, b) in whole.sweep.iter().zip(&streamed.sweep) {
            assert_eq!((a.scheme, a.array_blocks), (b.scheme, b.array_blocks));
            assert_eq!(a.array_hit_rate.to_bits(), b.array_hit_rate.to_bits());
        }
        let first: Vec<Request> = reqs[..100].to_vec();
        let broken =
            || -> Result<Box<dyn Iterator<Item = Result<Request, String>> + Send>, String> {
                let head = first.clone().into_iter().map(Ok);
                Ok(Box::new(head.chain([Err("trace.csv line 101: bad offset".to_string())])))
            };
        match exp.run_streamed(&broken, 0) {
            Err(SimError::Invalid(m)) => assert!(m.contains("trace.csv line 101"), "{m}"),
            other => panic!("expected the read error, got {:?}", other.map(|r| r.schemes.len())),
        }
    }
}
