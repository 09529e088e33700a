//! A loaded deployment (`ember_serve::deployment`) as the laboratory's model
//! (`ember_sim::demote::deployment`): each tier's settings parsed by the functions `ember
//! serve` parses them with, the trace's volumes mapped to client tiers by the routes.

use anyhow::{anyhow, bail};
use ember_engine::WriteMode;
use ember_policy::demote::Scheme;
use ember_serve::deployment::{Deployment, Tier};
use ember_serve::{parse_policy, parse_write_mode};
use ember_sim::demote::array_restart::{ArrayCrash, ArrayWarmup};
use ember_sim::demote::client_cache::ClientWrites;
use ember_sim::demote::deployment::{ArrayTierModel, ClientTierModel, DeploymentModel, Route};
use ember_trace::formats::warmup_log::RECORD_SIZE;
use ember_trace::VolumeTable;

/// The sieve a tier runs, with its parameters.
fn sieve(t: &Tier) -> anyhow::Result<ember_policy::admission::SieveSpec> {
    let live = &t.config.live;
    live.sieve.spec(&live.admission).map_err(|e| anyhow!("tier {}: --admission: {e}", t.name))
}

/// The array's crash (`crash-after-requests` in the topology) and its warmup from its config
/// file's `[warmup]`: a log with a selector preloads; without one the array restarts cold.
fn crash(a: &Tier, block_size: u64) -> anyhow::Result<Option<ArrayCrash>> {
    let Some(after_requests) = a.crash_after_requests else { return Ok(None) };
    let w = &a.config.warmup;
    if w.selector == ember_serve::warmup::AUTO {
        bail!(
            "tier {}: `--warmup auto` is chosen at the restart from the logged history; name a \
             selector (last-k, first-k, top-k, random-k) to predict its restart",
            a.name
        );
    }
    let options = w.options(&a.config.cache.device)?;
    let warmup = match options {
        Some(o) => o.selector.map(|selector| ArrayWarmup {
            selector,
            seed: o.seed,
            budget_blocks: o.size.blocks(a.capacity_blocks, block_size),
            region_blocks: (o.region_bytes / block_size).max(1),
            log_records: usize::try_from(o.log_bytes / RECORD_SIZE as u64).unwrap_or(usize::MAX),
        }),
        None => None,
    };
    Ok(Some(ArrayCrash { after_requests, warmup }))
}

fn capacity(t: &Tier) -> anyhow::Result<usize> {
    usize::try_from(t.capacity_blocks).map_err(|_| anyhow!("tier {}: too many blocks", t.name))
}

/// The model of `d` for a trace whose volumes are `volumes`, at `block_size`.
pub fn model(
    d: &Deployment,
    volumes: &VolumeTable,
    block_size: u64,
) -> anyhow::Result<DeploymentModel> {
    let a = d.array();
    if let Some(t) = d.tiers.iter().find(|t| u64::from(t.config.cache.block_size) != block_size) {
        bail!(
            "tier {} has blocks of {} bytes: every tier's block size must be the trace's \
             --block-size {block_size}",
            t.name,
            t.config.cache.block_size
        );
    }
    let scheme = a.config.tiers.scheme(&a.config.live.policy)?.unwrap_or(Scheme::NoneLru);
    let array = ArrayTierModel {
        name: a.name.clone(),
        scheme,
        sieve: sieve(a)?,
        demote_admission: a.config.tiers.demote_admission()?,
        capacity: capacity(a)?,
        latency_ms: a.latency_ms,
        backing_latency_ms: a.backing_latency_ms,
        aborted_demote_ms: a.aborted_demote_ms,
    };
    let mut clients = Vec::new();
    for t in d.clients() {
        let writes = match parse_write_mode(&t.config.live.write_policy)? {
            WriteMode::WriteThrough => ClientWrites::Through,
            WriteMode::WriteAround => ClientWrites::Around,
            _ => ClientWrites::Back,
        };
        clients.push(ClientTierModel {
            name: t.name.clone(),
            policy: parse_policy(&t.config.live.policy)?,
            sieve: sieve(t)?,
            capacity: capacity(t)?,
            writes,
            demotes: t.config.tiers.demote,
            array_volumes: t.array_volumes.clone(),
            latency_ms: t.latency_ms,
        });
    }
    let mut routes = vec![None; volumes.len()];
    for r in &d.routes {
        if let Some(id) = volumes.id(&r.trace_volume) {
            routes[id as usize] = Some(Route { client: r.tier - 1, volume: r.volume });
        }
    }
    if let Some(id) = routes.iter().position(Option::is_none) {
        bail!(
            "the trace's volume {} has no route in {}: add a [[route]] naming its client tier",
            volumes.name(id as u32),
            d.path.display()
        );
    }
    Ok(DeploymentModel { clients, array, block_size, routes, crash: crash(a, block_size)? })
}
