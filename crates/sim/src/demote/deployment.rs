//! A deployment in the laboratory (`ember sim --deployment`): client tiers over one array
//! tier, each described by what its `ember serve` config file sets (replacement policy,
//! admission sieve, write policy, DEMOTE, array scheme, DEMOTE admission, capacity), run
//! through the [`DemoteTopology`] of Wong and Wilkes with the client caches of
//! [`SievedClient`] and the array's [`ArraySieve`]: the same `ember_policy` code the servers
//! build from the same files.
//!
//! Every block of a request is one client access, in trace order. A READ follows
//! [`DemoteTopology::read_at`] (client lookup; on a miss the DEMOTE of the ejected block, then
//! the array's READ); a write follows [`DemoteTopology::write_at`] (the client allocates as
//! its write policy says, DEMOTEs what it ejects, and the array receives the write). Per tier
//! the report gives hits, allocation-writes admitted and refused by its sieve, DEMOTEs sent,
//! stored, aborted and refused, dirty blocks, backing reads and, per client, the mean READ
//! latency of Wong and Wilkes' model ([`LatencyModel`]) with the tiers' latencies.
//!
//! The array applies the stale rule to DEMOTEs ([`super::stale_copies`]), and may crash after
//! a given request and restart, cold or warm from its warmup log ([`super::array_restart`]):
//! the report then has the array's counters from the restart on, beside the whole run's.
//!
//! What only a clock decides is modelled at its limit: a write-back client's write reaches
//! the array at once (the flusher writes it later, live), every dirty block is flushed once
//! (live, a rewrite before the flush coalesces), and a DEMOTE is never dropped (live, one is
//! dropped when the client's DEMOTE queue is full, which queue depth 1 never fills).

use crate::demote::array_restart::{ArrayCrash, WarmupLog};
use crate::demote::client_cache::{ClientStep, ClientWrites, SievedClient};
use crate::demote::latency_model::LatencyModel;
use crate::demote::topology::{
    ArrayCounters, ArraySieve, ClientCounters, DemoteKind, DemoteTopology, ReadPath,
};
use crate::SimError;
use ember_policy::admission::{Sieve, SieveSpec};
use ember_policy::demote::{ArrayConfig, DemoteAdmission, Scheme};
use ember_policy::replacement::Spec;
use ember_policy::{Access, Admission, NEVER};
use ember_trace::{block_key, key_block, key_volume, Op, Request};

/// One client tier, as its config file sets it.
#[derive(Clone, Debug)]
pub struct ClientTierModel {
    /// The tier's name in the topology.
    pub name: String,
    /// Replacement policy (`--policy`).
    pub policy: Spec,
    /// Admission sieve (`--admission` with the sieve's parameters).
    pub sieve: SieveSpec,
    /// Cache blocks.
    pub capacity: usize,
    /// Write policy.
    pub writes: ClientWrites,
    /// It demotes its clean victims (`--demote`).
    pub demotes: bool,
    /// The array volume each of its volumes reads from (indexed by the tier's volume).
    pub array_volumes: Vec<u32>,
    /// T_c: a hit in this tier, ms.
    pub latency_ms: f64,
}

/// The array tier, as its config file sets it.
#[derive(Clone, Debug)]
pub struct ArrayTierModel {
    /// The tier's name in the topology.
    pub name: String,
    /// Its scheme (`--array-scheme`; NONE-LRU without one).
    pub scheme: Scheme,
    /// Admission sieve.
    pub sieve: SieveSpec,
    /// Whether the sieve decides on DEMOTEs.
    pub demote_admission: DemoteAdmission,
    /// Cache blocks.
    pub capacity: usize,
    /// T_a: a hit in the array (and a stored DEMOTE), ms.
    pub latency_ms: f64,
    /// T_d: a read of the array's backing, ms.
    pub backing_latency_ms: f64,
    /// An aborted (or refused) DEMOTE, ms.
    pub aborted_demote_ms: f64,
}

/// Where a trace volume's requests go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The client tier (index into [`DeploymentModel::clients`]).
    pub client: usize,
    /// The volume of that tier.
    pub volume: u32,
}

/// A deployment to simulate.
#[derive(Clone, Debug)]
pub struct DeploymentModel {
    /// The client tiers.
    pub clients: Vec<ClientTierModel>,
    /// The array tier.
    pub array: ArrayTierModel,
    /// Block size in bytes (every tier's).
    pub block_size: u64,
    /// Per trace volume id, where its requests go (`None`: the trace volume is not served).
    pub routes: Vec<Option<Route>>,
    /// The array crashes and restarts during the run (none: it runs throughout).
    pub crash: Option<ArrayCrash>,
}

/// One client tier's counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ClientTierReport {
    /// The tier.
    pub name: String,
    /// Block READS and where they were served (Wong & Wilkes' paths).
    pub paths: ClientCounters,
    /// READ hits.
    pub read_hits: u64,
    /// Block writes.
    pub writes: u64,
    /// Write hits.
    pub write_hits: u64,
    /// Missed blocks allocated (allocation-writes).
    pub allocation_writes: u64,
    /// Missed blocks the sieve refused.
    pub allocations_refused: u64,
    /// DEMOTEs sent to the array.
    pub demotes_sent: u64,
    /// DEMOTEs dropped (a full DEMOTE queue; never in the model).
    pub demotes_dropped: u64,
    /// Blocks written dirty (write-back): each is flushed once in the model.
    pub dirty_writes: u64,
    /// Blocks read from the tier's backing (the array): its READ misses.
    pub backing_reads: u64,
    /// READ hit ratio.
    pub hit_ratio: f64,
    /// Mean READ latency of Wong & Wilkes' model, ms.
    pub mean_latency_ms: f64,
}

/// The array tier's counters.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ArrayTierReport {
    /// The tier.
    pub name: String,
    /// Block READS received (the clients' READ misses).
    pub reads: u64,
    /// READ hits.
    pub read_hits: u64,
    /// Block writes received.
    pub writes: u64,
    /// Write hits.
    pub write_hits: u64,
    /// Missed blocks allocated (allocation-writes).
    pub allocation_writes: u64,
    /// Missed blocks the sieve refused.
    pub allocations_refused: u64,
    /// DEMOTEs received.
    pub demotes_received: u64,
    /// DEMOTEs stored.
    pub demotes_stored: u64,
    /// DEMOTEs aborted by the scheme (held already, no room).
    pub demotes_aborted: u64,
    /// DEMOTEs refused by the sieve.
    pub demotes_refused: u64,
    /// DEMOTEs refused as stale (the client's copy is older than a write, or than the
    /// array's restart).
    pub demotes_refused_stale: u64,
    /// Blocks read from backing: its READ misses.
    pub backing_reads: u64,
    /// READ hit ratio.
    pub hit_ratio: f64,
}

/// What `ember sim --deployment` predicts.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeploymentReport {
    /// Per client tier.
    pub clients: Vec<ClientTierReport>,
    /// The array tier.
    pub array: ArrayTierReport,
    /// The array's scheme.
    pub scheme: String,
    /// Mean READ latency over every client's READS, ms.
    pub mean_latency_ms: f64,
    /// Requests simulated.
    pub requests: u64,
    /// The array's crash and what followed it, if it crashed.
    pub restart: Option<RestartReport>,
}

/// The array from its restart to the end of the trace.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RestartReport {
    /// The crash, as configured.
    pub crash: ArrayCrash,
    /// Blocks the warmup plan named.
    pub planned_blocks: u64,
    /// Blocks preloaded (at most the array's room).
    pub preloaded_blocks: u64,
    /// The array's counters from the restart on (every request after the crash).
    pub array: ArrayTierReport,
    /// Each client tier's counters from the restart on (its DEMOTEs sent to the new array
    /// among them); READ hit ratios, no latencies.
    pub clients: Vec<ClientTierReport>,
}

impl ClientTierReport {
    /// Take the counts of `before` (the uncounted warm-up) off.
    fn take_off(&mut self, before: &ClientTierReport) {
        let p = &mut self.paths;
        let b = &before.paths;
        p.reads -= b.reads;
        p.client_hits -= b.client_hits;
        p.writes -= b.writes;
        for k in 0..3 {
            p.array_hits[k] -= b.array_hits[k];
            p.misses[k] -= b.misses[k];
        }
        self.read_hits -= before.read_hits;
        self.writes -= before.writes;
        self.write_hits -= before.write_hits;
        self.allocation_writes -= before.allocation_writes;
        self.allocations_refused -= before.allocations_refused;
        self.demotes_sent -= before.demotes_sent;
        self.dirty_writes -= before.dirty_writes;
        self.backing_reads -= before.backing_reads;
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// A fresh per-miss sieve from `spec`; a batch sieve is refused (its epochs move blocks at
/// the epoch's end, outside the hierarchy's request order).
fn sieve(spec: &SieveSpec, tier: &str) -> Result<Box<dyn Admission>, SimError> {
    match spec.build() {
        Ok(Sieve::Continuous(s)) => Ok(s),
        Ok(Sieve::Discrete(..)) => Err(SimError::Invalid(format!(
            "tier {tier}: a batch sieve is not simulated in a deployment; use a per-miss sieve"
        ))),
        Err(e) => Err(SimError::Invalid(format!("tier {tier}: {e}"))),
    }
}

/// Run `requests` through `model`; the first `warmup_requests` run but are not counted.
pub fn simulate_deployment(
    requests: impl IntoIterator<Item = Request>,
    model: &DeploymentModel,
    warmup_requests: u64,
) -> Result<DeploymentReport, SimError> {
    if model.block_size == 0 {
        return Err(SimError::Invalid("the block size must be positive".into()));
    }
    let a = &model.array;
    let mut clients = Vec::with_capacity(model.clients.len());
    for c in &model.clients {
        let policy = ember_policy::replacement::build(c.policy, c.capacity);
        let s = sieve(&c.sieve, &c.name)?;
        clients.push(SievedClient::new(policy, s, c.writes).demoting(c.demotes));
    }
    let array_sieve = || -> Result<ArraySieve, SimError> {
        Ok(ArraySieve { sieve: sieve(&a.sieve, &a.name)?, demotes: a.demote_admission })
    };
    let array_config = ArrayConfig::new(a.capacity, a.scheme);
    let mut h = DemoteTopology::with_clients(clients, array_config)?
        .with_array_sieve(array_sieve()?)
        .with_stale_rule();
    let mut log = model.crash.and_then(|c| c.warmup).map(|w| WarmupLog::new(w.log_records));
    // At the crash: the clients' and the array's counts, and the preload.
    let mut at_crash: Option<(Vec<ClientTierReport>, ArrayCounters, u64, u64)> = None;
    let mut reports: Vec<ClientTierReport> = model
        .clients
        .iter()
        .map(|c| ClientTierReport { name: c.name.clone(), ..ClientTierReport::default() })
        .collect();
    let mut vtime = 0u64;
    let mut count = 0u64;
    let mut uncounted: Vec<ClientTierReport> = Vec::new();
    let mut array_before = ArrayCounters::default();
    for (i, r) in requests.into_iter().enumerate() {
        if count == warmup_requests && warmup_requests > 0 {
            // Counting starts here: what the warm-up counted is taken off at the end.
            uncounted = reports.clone();
            array_before = h.array_counters();
        }
        if let Some(c) = model.crash.filter(|c| c.after_requests == count && at_crash.is_none()) {
            h.restart_array(array_config, Some(array_sieve()?))?;
            let plan = match (c.warmup, &log) {
                (Some(w), Some(l)) => l.plan(&w),
                _ => Vec::new(),
            };
            let preloaded = h.preload(&plan);
            at_crash = Some((reports.clone(), h.array_counters(), plan.len() as u64, preloaded));
        }
        count += 1;
        let Some(Some(route)) = model.routes.get(r.volume as usize).copied() else {
            return Err(SimError::Invalid(format!(
                "request {i} is from trace volume {}, which the topology maps to no client tier",
                r.volume
            )));
        };
        let tier = &model.clients[route.client];
        let Some(&array_volume) = tier.array_volumes.get(route.volume as usize) else {
            return Err(SimError::Invalid(format!(
                "tier {} has no volume {}",
                tier.name, route.volume
            )));
        };
        let to_array = |k: u64| {
            let v = tier.array_volumes.get(key_volume(k) as usize).copied().unwrap_or(0);
            block_key(v, key_block(k))
        };
        let report = &mut reports[route.client];
        for b in r.blocks(model.block_size) {
            let access = Access {
                key: block_key(route.volume, b),
                time_ns: r.time_ns,
                op: r.op,
                vtime,
                next_vtime: NEVER,
            };
            vtime += 1;
            let array_key = block_key(array_volume, b);
            if r.op == Op::Write {
                let (step, demote) = h.write_at(route.client, &access, array_key, to_array);
                if let Some(l) = &mut log {
                    l.record(array_key, r.time_ns);
                }
                report.writes += 1;
                report.write_hits += step.hit as u64;
                count_allocation(report, step, demote);
                report.paths.writes += 1;
                if tier.writes == ClientWrites::Back {
                    report.dirty_writes += 1;
                }
                continue;
            }
            let path = h.read_at(route.client, &access, array_key, to_array);
            report.paths.record(path);
            match path {
                ReadPath::ClientHit => report.read_hits += 1,
                ReadPath::ArrayHit(d) | ReadPath::Miss(d) => {
                    if let Some(l) = &mut log {
                        l.record(array_key, r.time_ns);
                    }
                    report.backing_reads += 1;
                    let step = h.last_step();
                    count_allocation(report, step, d);
                }
            }
        }
    }
    if warmup_requests > 0 && count <= warmup_requests {
        // The trace ended within the warm-up: nothing is counted.
        uncounted = reports.clone();
        array_before = h.array_counters();
    }
    let restart = match (model.crash, at_crash) {
        (None, _) => None,
        (Some(c), None) => {
            return Err(SimError::Invalid(format!(
                "the array crashes after request {}, but the trace has {count} requests: \
                 none follows the crash",
                c.after_requests
            )))
        }
        (Some(crash), Some((clients_then, array_then, planned, preloaded))) => {
            let mut since = reports.clone();
            for (r, u) in since.iter_mut().zip(&clients_then) {
                r.take_off(u);
            }
            let ac = h.array_counters().since(&array_then);
            let array = array_report(&a.name, &since, &ac);
            for c in &mut since {
                c.hit_ratio = ratio(c.read_hits, c.paths.reads);
            }
            Some(RestartReport {
                crash,
                planned_blocks: planned,
                preloaded_blocks: preloaded,
                array,
                clients: since,
            })
        }
    };
    for (r, u) in reports.iter_mut().zip(&uncounted) {
        r.take_off(u);
    }
    let ac = h.array_counters().since(&array_before);
    let array = array_report(&a.name, &reports, &ac);
    let mut latency_sum = 0.0;
    let mut reads = 0u64;
    for (c, m) in reports.iter_mut().zip(&model.clients) {
        let p = c.paths;
        let lat = LatencyModel {
            t_c: m.latency_ms,
            t_a: a.latency_ms,
            t_d: a.backing_latency_ms,
            t_abort: a.aborted_demote_ms,
        };
        c.hit_ratio = ratio(c.read_hits, p.reads);
        c.mean_latency_ms = lat.mean_latency(&p);
        latency_sum += c.mean_latency_ms * p.reads as f64;
        reads += p.reads;
    }
    Ok(DeploymentReport {
        clients: reports,
        array,
        scheme: a.scheme.to_string(),
        mean_latency_ms: if reads == 0 { 0.0 } else { latency_sum / reads as f64 },
        requests: count.saturating_sub(warmup_requests),
        restart,
    })
}

/// The array tier's report from its clients' counts (their READ misses are its READS, their
/// DEMOTEs sent what it received) and its own counters `ac`, over the same requests.
fn array_report(name: &str, clients: &[ClientTierReport], ac: &ArrayCounters) -> ArrayTierReport {
    let mut array = ArrayTierReport { name: name.to_string(), ..ArrayTierReport::default() };
    for c in clients {
        let p = c.paths;
        array.reads += p.reads - p.client_hits;
        array.read_hits += p.array_hit_count();
        array.demotes_received += c.demotes_sent;
    }
    array.writes = ac.writes;
    array.write_hits = ac.write_hits;
    array.allocation_writes = ac.read_allocations + ac.write_allocations;
    array.allocations_refused = ac.refused;
    array.demotes_refused = ac.demotes_refused;
    array.demotes_refused_stale = ac.demotes_refused_stale;
    array.demotes_stored = ac.demotes_stored;
    array.demotes_aborted = ac.demotes_aborted;
    array.backing_reads = array.reads - array.read_hits;
    array.hit_ratio = ratio(array.read_hits, array.reads);
    array
}

/// Count what a client access allocated and what its DEMOTE did.
fn count_allocation(report: &mut ClientTierReport, step: ClientStep, demote: DemoteKind) {
    report.allocation_writes += step.allocated as u64;
    report.allocations_refused += step.refused as u64;
    report.demotes_sent += (demote != DemoteKind::None) as u64;
}

#[cfg(test)]
#[path = "deployment_tests.rs"]
mod tests;
