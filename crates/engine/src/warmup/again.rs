//! The preload of a new cache device put in while serving (`ember ctl replace-cache`): the
//! new cache starts without a map, as a restart with a new device does, so Bonfire's preload
//! runs from the warmup log when the log lives elsewhere than the failed device (its own
//! file). A log in the failed device's region went with it: the new cache starts cold.
//! Blocks come from backing only (the performance snapshot of this run is being written).

use super::host::Host;
use super::log_file::read_existing;
use super::plan::plan;
use super::preload::Source;
use super::start::spawn_preloader;
use super::stats::WarmupState;
use crate::error::EngineError;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Plan a preload from the warmup log as it stands and start it; returns the line that
/// says what is preloaded, or why nothing. `None` if warmup was never started.
pub(crate) fn preload_again<H: Host>(host: &Arc<H>) -> Result<Option<String>, EngineError> {
    let hooks = host.hooks();
    let Some(opts) = hooks.options.lock().clone() else { return Ok(None) };
    let mut running = hooks.running.lock();
    let Some(r) = running.as_mut() else { return Ok(None) };
    let path = opts.log.display().to_string();
    let Some(kind) = opts.selector else {
        return Ok(Some("no preload: no warmup selector (monitoring only)".into()));
    };
    if opts.in_cache {
        return Ok(Some(format!(
            "no preload, starting cold: the warmup log {path} was in the failed device's region"
        )));
    }
    if r.preloading() {
        return Ok(Some("no new preload: the earlier one still runs".into()));
    }
    let bs = host.block_size();
    let served = super::start::served_volumes(host.as_ref());
    let log = match read_existing(&opts.log, None) {
        Err(why) => {
            return Ok(Some(format!(
                "no preload, starting cold: the warmup log {path} is unusable: {why}"
            )))
        }
        Ok(None) => {
            return Ok(Some(format!("no preload, starting cold: no warmup log at {path} yet")))
        }
        Ok(Some(log)) => log,
    };
    let budget = opts.size.blocks(host.geometry().data_blocks, bs);
    let p = match plan(&log, &served, bs, kind, opts.seed, budget, opts.region_bytes) {
        Err(why) => {
            return Ok(Some(format!(
                "no preload, starting cold: the warmup log {path} is unusable: {why}"
            )))
        }
        Ok(p) if p.blocks == 0 => {
            return Ok(Some(format!(
                "no preload: the warmup log {path} holds no access to the served volumes"
            )))
        }
        Ok(p) => p,
    };
    let line = format!(
        "preloading {} blocks ({} runs) in the background from backing, {} of {} logged \
         requests, {} KiB regions",
        p.blocks,
        p.runs.len(),
        kind,
        log.records.len(),
        opts.region_bytes >> 10
    );
    let c = &hooks.counters;
    c.planned_blocks.store(p.blocks, Relaxed);
    c.set_reason(line.clone());
    c.set_state(WarmupState::Preloading);
    let source = Source { snapshot: None, copies: Vec::new() };
    r.set_preloader(spawn_preloader(host, p.runs, source, r.stop_flag())?);
    Ok(Some(line))
}
