//! The replay itself. `queue_depth` threads each send one request at a time, so up to
//! `queue_depth` requests are in flight, spread over `connections` connections per export.
//! Requests are taken in trace order; one that overlaps a request still in flight (where
//! either is a write) waits for it, so every read has one well-defined expected content.
//! With trace timing, a request is not sent before its timestamp (relative to the first
//! request, divided by the speed factor); requests that could not be sent on time are counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ember_nbd::client::Endpoint;
use ember_nbd::{Client, ClientBuilder, ClientError};

use crate::expected::{ExpectedMap, Segment};
use crate::pattern::{check_sector, fill, Stamp, SECTOR};
use crate::plan::{ExportTarget, Plan, PlannedIo};
use crate::report::{
    Failure, HitSample, LatencySummary, OpReport, PrefillReport, Report, ServerReport, Verification,
};
use crate::scrape::{sum, MetricsUrl, ScrapeError, READ_HITS, READ_MISSES};

/// When requests are sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timing {
    /// As fast as the queue depth allows.
    Fast,
    /// At the trace's timestamps, `speed` times faster (2.0: twice as fast).
    Trace {
        /// Speed factor (> 0).
        speed: f64,
    },
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// Requests in flight at most (1: synchronous).
    pub queue_depth: usize,
    /// Timing.
    pub timing: Timing,
    /// Seed stamped into every written sector.
    pub seed: u64,
    /// Write the pattern (generation 0) over the plan's footprint before the replay.
    pub prefill: bool,
    /// Assume an earlier run with the same seed prefilled the footprint and nothing wrote
    /// over it since (to verify reads of a read-only replay after a server restart).
    pub assume_prefilled: bool,
    /// Scrape the server's metrics for its hit ratio.
    pub metrics: Option<MetricsUrl>,
    /// Scrape interval.
    pub metrics_interval: Duration,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            queue_depth: 1,
            timing: Timing::Fast,
            seed: 1,
            prefill: false,
            assume_prefilled: false,
            metrics: None,
            metrics_interval: Duration::from_secs(1),
        }
    }
}

/// Why a replay could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Connecting to an export failed.
    #[error("connecting to export {export:?}")]
    Connect {
        /// The export.
        export: String,
        /// The error.
        source: ClientError,
    },
    /// The connection broke (not an error reply: those are counted and the replay goes on).
    #[error("request {request} (export {export:?}, offset {offset})")]
    Connection {
        /// Index in the trace (or `prefill`).
        request: String,
        /// The export.
        export: String,
        /// Byte offset.
        offset: u64,
        /// The error.
        source: ClientError,
    },
    /// The server's metrics could not be read.
    #[error(transparent)]
    Metrics(#[from] ScrapeError),
    /// The configuration is not usable.
    #[error("{0}")]
    Config(String),
}

/// Connections to every export the replay uses.
pub struct Session {
    server: String,
    targets: Vec<ExportTarget>,
    clients: Vec<Vec<Client>>,
}

impl Session {
    /// Open `connections` connections to each of `exports` at `endpoint` (more than one only
    /// if the export advertises multi-conn consistency).
    pub fn connect(
        endpoint: &Endpoint,
        exports: &[String],
        connections: usize,
    ) -> Result<Session, ReplayError> {
        if connections == 0 {
            return Err(ReplayError::Config("at least one connection per export".into()));
        }
        let mut targets = Vec::new();
        let mut clients = Vec::new();
        for name in exports {
            let mut conns = Vec::new();
            for _ in 0..connections {
                let c = ClientBuilder::new()
                    .export(name)
                    .connect(endpoint)
                    .map_err(|source| ReplayError::Connect { export: name.clone(), source })?;
                conns.push(c);
            }
            if connections > 1 && !conns[0].info().can_multi_conn() {
                return Err(ReplayError::Config(format!(
                    "export {name:?} does not advertise NBD_FLAG_CAN_MULTI_CONN: a write \
                     acknowledged on one connection may not be visible on another, so reads \
                     could not be verified; use one connection"
                )));
            }
            targets.push(ExportTarget { name: name.clone(), size: conns[0].size() });
            clients.push(conns);
        }
        let server = match endpoint {
            Endpoint::Tcp(a) => format!("nbd://{a}"),
            Endpoint::Unix(p) => format!("nbd+unix:///?socket={}", p.display()),
        };
        Ok(Session { server, targets, clients })
    }

    /// The exports and their sizes, in the order given to [`Session::connect`].
    pub fn targets(&self) -> &[ExportTarget] {
        &self.targets
    }

    /// Disconnect every connection cleanly.
    pub fn close(self) -> Result<(), ReplayError> {
        for (conns, t) in self.clients.into_iter().zip(&self.targets) {
            for c in conns {
                c.disconnect().map_err(|source| ReplayError::Connection {
                    request: "disconnect".into(),
                    export: t.name.clone(),
                    offset: 0,
                    source,
                })?;
            }
        }
        Ok(())
    }
}

/// Largest piece sent as one request: the export's maximum payload, whole sectors, ≤ 32 MiB.
fn piece_bytes(client: &Client) -> usize {
    let max = (client.info().max_payload as usize).min(32 << 20);
    (max / SECTOR * SECTOR).max(SECTOR)
}

fn write_pieces(client: &Client, offset: u64, data: &[u8]) -> Result<(), ClientError> {
    let piece = piece_bytes(client);
    let mut tickets = Vec::new();
    for (i, chunk) in data.chunks(piece).enumerate() {
        tickets.push(client.start_write(offset + (i * piece) as u64, chunk, false)?);
    }
    for t in tickets {
        t.wait()?;
    }
    Ok(())
}

fn read_pieces(client: &Client, offset: u64, buf: &mut [u8]) -> Result<(), ClientError> {
    let piece = piece_bytes(client);
    let mut tickets = Vec::new();
    for (i, chunk) in buf.chunks(piece).enumerate() {
        tickets.push(client.start_read(offset + (i * piece) as u64, chunk.len() as u32)?);
    }
    for (t, chunk) in tickets.into_iter().zip(buf.chunks_mut(piece)) {
        let data = t.wait()?;
        if data.len() != chunk.len() {
            return Err(ClientError::Protocol(format!(
                "read returned {} bytes for {}",
                data.len(),
                chunk.len()
            )));
        }
        chunk.copy_from_slice(&data);
    }
    Ok(())
}

/// Only an error reply lets the replay go on; anything else means the connection is gone.
fn is_reply_error(e: &ClientError) -> bool {
    matches!(e, ClientError::Server { .. })
}

struct State {
    next: usize,
    /// (plan position, export, first sector, end sector, write)
    in_flight: Vec<(usize, u32, u64, u64, bool)>,
    expected: Vec<ExpectedMap>,
    fatal: Option<ReplayError>,
}

#[derive(Default)]
struct Tally {
    latency: [Vec<u64>; 2],
    errors: [u64; 2],
    bytes: [u64; 2],
    verification: Verification,
    behind: u64,
    max_late: Duration,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn generation_of(position: usize) -> u32 {
    u32::try_from(position + 1).unwrap_or(u32::MAX)
}

struct Run<'a> {
    plan: &'a Plan,
    session: &'a Session,
    config: &'a ReplayConfig,
    state: Mutex<State>,
    wake: Condvar,
    start: Instant,
    t0: u64,
}

impl Run<'_> {
    /// Take the next request in trace order once nothing overlapping is in flight.
    fn take(&self) -> Option<(usize, PlannedIo, Vec<Segment>)> {
        let mut st = lock(&self.state);
        loop {
            if st.fatal.is_some() || st.next >= self.plan.ios.len() {
                return None;
            }
            let io = self.plan.ios[st.next];
            let conflict = st.in_flight.iter().any(|&(_, e, s, end, w)| {
                e == io.export && s < io.end() && io.sector < end && (w || io.write)
            });
            if conflict {
                st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let position = st.next;
            st.next += 1;
            st.in_flight.push((position, io.export, io.sector, io.end(), io.write));
            let map = &mut st.expected[io.export as usize];
            let expect = if io.write {
                map.assign(io.sector, io.end(), generation_of(position));
                Vec::new()
            } else {
                map.lookup(io.sector, io.end())
            };
            return Some((position, io, expect));
        }
    }

    fn finish(
        &self,
        position: usize,
        failed_write: Option<&PlannedIo>,
        fatal: Option<ReplayError>,
    ) {
        let mut st = lock(&self.state);
        st.in_flight.retain(|f| f.0 != position);
        if let Some(io) = failed_write {
            st.expected[io.export as usize].forget(io.sector, io.end());
        }
        if let Some(e) = fatal {
            st.fatal.get_or_insert(e);
        }
        drop(st);
        self.wake.notify_all();
    }

    fn wait_until_due(&self, io: &PlannedIo, tally: &mut Tally) {
        let Timing::Trace { speed } = self.config.timing else {
            return;
        };
        let offset_ns = io.time_ns.saturating_sub(self.t0) as f64 / speed;
        let due = self.start + Duration::from_nanos(offset_ns as u64);
        let now = Instant::now();
        if now < due {
            std::thread::sleep(due - now);
        } else {
            let late = now - due;
            if late > Duration::from_millis(1) {
                tally.behind += 1;
            }
            tally.max_late = tally.max_late.max(late);
        }
    }

    fn worker(&self, thread: usize) -> Tally {
        let mut tally = Tally::default();
        let seed = self.config.seed;
        let mut buf = Vec::new();
        while let Some((position, io, expect)) = self.take() {
            self.wait_until_due(&io, &mut tally);
            let conns = &self.session.clients[io.export as usize];
            let client = &conns[thread % conns.len()];
            buf.resize(io.bytes() as usize, 0);
            let op = usize::from(io.write);
            if io.write {
                fill(&mut buf, io.export, io.sector, generation_of(position), seed);
            }
            let sent = Instant::now();
            let result = if io.write {
                write_pieces(client, io.offset(), &buf)
            } else {
                read_pieces(client, io.offset(), &mut buf)
            };
            tally.latency[op].push(sent.elapsed().as_nanos() as u64);
            match result {
                Ok(()) => {
                    tally.bytes[op] += io.bytes();
                    if !io.write {
                        self.verify(&io, &expect, &buf, &mut tally.verification);
                    }
                    self.finish(position, None, None);
                }
                Err(e) if is_reply_error(&e) => {
                    tally.errors[op] += 1;
                    self.finish(position, io.write.then_some(&io), None);
                }
                Err(source) => {
                    let fatal = ReplayError::Connection {
                        request: io.index.to_string(),
                        export: self.plan.exports[io.export as usize].name.clone(),
                        offset: io.offset(),
                        source,
                    };
                    self.finish(position, io.write.then_some(&io), Some(fatal));
                }
            }
        }
        tally
    }

    fn verify(&self, io: &PlannedIo, expect: &[Segment], buf: &[u8], v: &mut Verification) {
        let (mut known, mut unknown, mut bad) = (0u64, 0u64, 0u64);
        for seg in expect {
            let Some(generation) = seg.generation else {
                unknown += seg.end - seg.start;
                continue;
            };
            for sector in seg.start..seg.end {
                let at = ((sector - io.sector) as usize) * SECTOR;
                let stamp = Stamp { sector, generation, export: io.export, seed: self.config.seed };
                known += 1;
                if let Err(found) = check_sector(&buf[at..at + SECTOR], &stamp) {
                    if bad == 0 && v.first_failures.len() < 20 {
                        v.first_failures.push(Failure {
                            request: io.index,
                            export: self.plan.exports[io.export as usize].name.clone(),
                            offset: sector * SECTOR as u64,
                            expected_generation: generation,
                            found: found.to_string(),
                        });
                    }
                    bad += 1;
                }
            }
        }
        v.sectors_checked += known;
        v.sectors_unknown += unknown;
        v.sectors_failed += bad;
        if bad > 0 {
            v.reads_failed += 1;
        } else if known == 0 {
            v.reads_unverifiable += 1;
        } else if unknown > 0 {
            v.reads_partly_verified += 1;
        } else {
            v.reads_verified += 1;
        }
    }
}

/// Write generation 0 over every extent of the footprint, pipelined (16 requests in flight
/// per export), then FLUSH if the export supports it.
fn prefill(plan: &Plan, session: &Session, seed: u64) -> Result<PrefillReport, ReplayError> {
    let start = Instant::now();
    let mut report = PrefillReport::default();
    for (e, extents) in plan.footprint.iter().enumerate() {
        let client = &session.clients[e][0];
        let name = &plan.exports[e].name;
        let piece = piece_bytes(client).min(1 << 20) as u64 / SECTOR as u64;
        let mut tickets = VecDeque::new();
        let conn_err = |offset: u64| {
            let name = name.clone();
            move |source| ReplayError::Connection {
                request: "prefill".into(),
                export: name,
                offset,
                source,
            }
        };
        for &(s, end) in extents {
            report.extents += 1;
            let mut at = s;
            while at < end {
                let n = piece.min(end - at);
                let mut buf = vec![0u8; n as usize * SECTOR];
                fill(&mut buf, e as u32, at, 0, seed);
                let offset = at * SECTOR as u64;
                tickets.push_back((
                    offset,
                    client.start_write(offset, &buf, false).map_err(conn_err(offset))?,
                ));
                report.bytes += buf.len() as u64;
                if tickets.len() >= 16 {
                    if let Some((o, t)) = tickets.pop_front() {
                        t.wait().map_err(conn_err(o))?;
                    }
                }
                at += n;
            }
        }
        for (o, t) in tickets {
            t.wait().map_err(conn_err(o))?;
        }
        if client.info().can_flush() {
            client.flush().map_err(conn_err(0))?;
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

fn hits_misses(url: &MetricsUrl) -> Result<(u64, u64), ScrapeError> {
    let s = url.scrape()?;
    Ok((sum(&s, READ_HITS) as u64, sum(&s, READ_MISSES) as u64))
}

fn ratio(hits: u64, misses: u64) -> f64 {
    if hits + misses == 0 {
        0.0
    } else {
        hits as f64 / (hits + misses) as f64
    }
}

/// Scrapes hits and misses every `interval` until `stop`; returns (seconds, hits, misses).
fn sample_metrics(
    url: &MetricsUrl,
    interval: Duration,
    start: Instant,
    stop: &AtomicBool,
) -> Vec<(f64, u64, u64)> {
    let mut out = Vec::new();
    let mut next = start + interval;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(20).min(next - Instant::now()));
            continue;
        }
        next += interval;
        if let Ok((h, m)) = hits_misses(url) {
            out.push((start.elapsed().as_secs_f64(), h, m));
        }
    }
    out
}

/// Replay `plan` over `session`. Error replies are counted (and make [`Report::failed`]
/// true); a broken connection ends the replay with an error.
pub fn replay(
    plan: &Plan,
    session: &Session,
    config: &ReplayConfig,
) -> Result<Report, ReplayError> {
    if config.queue_depth == 0 {
        return Err(ReplayError::Config("queue depth must be at least 1".into()));
    }
    if let Timing::Trace { speed } = config.timing {
        if !(speed > 0.0 && speed.is_finite()) {
            return Err(ReplayError::Config(format!("speed factor {speed} must be positive")));
        }
    }
    if session.targets != plan.exports {
        return Err(ReplayError::Config("the plan was made for other exports".into()));
    }
    let mut expected = vec![ExpectedMap::new(); plan.exports.len()];
    let prefill_report =
        if config.prefill { Some(prefill(plan, session, config.seed)?) } else { None };
    if config.prefill || config.assume_prefilled {
        for (map, extents) in expected.iter_mut().zip(&plan.footprint) {
            for &(s, e) in extents {
                map.assign(s, e, 0);
            }
        }
    }
    let baseline = match &config.metrics {
        Some(url) => Some(hits_misses(url)?),
        None => None,
    };
    let run = Run {
        plan,
        session,
        config,
        state: Mutex::new(State { next: 0, in_flight: Vec::new(), expected, fatal: None }),
        wake: Condvar::new(),
        start: Instant::now(),
        t0: plan.ios.iter().map(|i| i.time_ns).min().unwrap_or(0),
    };
    let stop = AtomicBool::new(false);
    let (tallies, samples) = std::thread::scope(|scope| {
        let sampler = config.metrics.as_ref().map(|url| {
            let stop = &stop;
            let start = run.start;
            scope.spawn(move || sample_metrics(url, config.metrics_interval, start, stop))
        });
        let workers: Vec<_> = (0..config.queue_depth)
            .map(|t| {
                scope.spawn({
                    let run = &run;
                    move || run.worker(t)
                })
            })
            .collect();
        let tallies: Vec<Tally> = workers.into_iter().filter_map(|w| w.join().ok()).collect();
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.and_then(|s| s.join().ok()).unwrap_or_default();
        (tallies, samples)
    });
    let seconds = run.start.elapsed().as_secs_f64();
    let state = run.state.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = state.fatal {
        return Err(e);
    }
    if tallies.len() != config.queue_depth {
        return Err(ReplayError::Config("a replay thread panicked".into()));
    }
    let mut total = Tally::default();
    for t in tallies {
        for op in 0..2 {
            total.latency[op].extend_from_slice(&t.latency[op]);
            total.errors[op] += t.errors[op];
            total.bytes[op] += t.bytes[op];
        }
        let (v, w) = (&mut total.verification, &t.verification);
        v.reads_verified += w.reads_verified;
        v.reads_partly_verified += w.reads_partly_verified;
        v.reads_unverifiable += w.reads_unverifiable;
        v.reads_failed += w.reads_failed;
        v.sectors_checked += w.sectors_checked;
        v.sectors_unknown += w.sectors_unknown;
        v.sectors_failed += w.sectors_failed;
        v.first_failures.extend(w.first_failures.iter().cloned());
        total.behind += t.behind;
        total.max_late = total.max_late.max(t.max_late);
    }
    total.verification.first_failures.sort_by_key(|f| f.request);
    total.verification.first_failures.truncate(20);
    let secs = seconds.max(1e-9);
    let ops: Vec<OpReport> = ["read", "write"]
        .iter()
        .enumerate()
        .map(|(op, name)| {
            let count = total.latency[op].len() as u64;
            OpReport {
                op: name.to_string(),
                count,
                errors: total.errors[op],
                bytes: total.bytes[op],
                iops: count as f64 / secs,
                mb_per_s: total.bytes[op] as f64 / 1e6 / secs,
                latency: LatencySummary::from_ns(&mut total.latency[op]),
            }
        })
        .collect();
    let server_metrics = match (&config.metrics, baseline) {
        (Some(url), Some((h0, m0))) => {
            let (h1, m1) = hits_misses(url)?;
            let mut timeline = Vec::new();
            let (mut ph, mut pm) = (h0, m0);
            for (t, h, m) in samples.into_iter().chain(std::iter::once((seconds, h1, m1))) {
                let (dh, dm) = (h.saturating_sub(ph), m.saturating_sub(pm));
                timeline.push(HitSample { t_s: t, hits: dh, misses: dm, hit_ratio: ratio(dh, dm) });
                (ph, pm) = (h, m);
            }
            let (hits, misses) = (h1.saturating_sub(h0), m1.saturating_sub(m0));
            Some(ServerReport {
                url: url.to_string(),
                hits,
                misses,
                hit_ratio: ratio(hits, misses),
                timeline,
            })
        }
        _ => None,
    };
    let count: u64 = ops.iter().map(|o| o.count).sum();
    let bytes: u64 = ops.iter().map(|o| o.bytes).sum();
    Ok(Report {
        server: session.server.clone(),
        exports: plan.exports.clone(),
        mapping: Vec::new(),
        plan: plan.stats.clone(),
        timing: match config.timing {
            Timing::Fast => "fast".into(),
            Timing::Trace { speed } => format!("trace x{speed}"),
        },
        queue_depth: config.queue_depth,
        connections: session.clients.first().map(|c| c.len()).unwrap_or(0),
        seed: config.seed,
        behind_schedule: total.behind,
        max_lateness_ms: total.max_late.as_secs_f64() * 1e3,
        seconds,
        iops: count as f64 / secs,
        mb_per_s: bytes as f64 / 1e6 / secs,
        ops,
        verification: total.verification,
        prefill: prefill_report,
        server_metrics,
    })
}
