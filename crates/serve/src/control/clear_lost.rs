//! `ember ctl clear-lost VOLUME`: the operator accepts backing's version of every block of
//! VOLUME lost with a failed cache device (docs/reference/degraded.md). Backing's bytes of
//! those blocks are older than what clients last wrote (the newer copies were dirty on the
//! device that failed); from this command on they are current: reads return them, and a
//! volume refused at start is served again. The state file is written again before the
//! reply.

use ember_engine::Engine;
use serde_json::{json, Value};

/// Clear `volume`'s lost list; the result names how many blocks it held.
pub(super) fn clear_lost(engine: &Engine, volume: &str) -> Result<Value, String> {
    if !engine.volume_names().iter().any(|v| v == volume) {
        return Err(format!("no volume {volume:?} is served here"));
    }
    let was_refused = engine.is_refused(volume);
    let n = engine.clear_lost(volume).map_err(|e| e.to_string())?;
    Ok(json!({ "volume": volume, "cleared_blocks": n, "was_refused": was_refused }))
}
