//! Prometheus metrics of a running server (`--metrics ADDR`): the NBD server's commands and
//! connections, the engine's counters per volume, its dirty blocks and its warmup, rendered
//! on each request ([`render`]) and served over HTTP ([`endpoint`]).

pub mod endpoint;
pub mod health;
pub mod render;

use std::sync::Arc;

use ember_engine::Engine;
use ember_nbd::ServerStats;

pub use endpoint::{MetricsServer, Render};
pub use render::{render_engine, render_server};

/// Everything a server reports: `stats` of its NBD server and `engine`'s counters, dirty
/// blocks and warmup.
pub fn server_render(stats: Arc<ServerStats>, engine: Arc<Engine>) -> Render {
    Arc::new(move || {
        let mut out = String::new();
        render_server(&stats, &mut out);
        render_engine(&engine.stats(), &mut out);
        health::render_health(&engine, &mut out);
        out.push_str(&engine.dirty_stats().prometheus());
        out.push_str(&engine.warmup_stats().prometheus());
        out
    })
}
