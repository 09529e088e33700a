//! The preload's progress while it runs: a line every second, and one when it ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::warmup::WarmupState;
use ember_engine::Engine;

use crate::console::Console;

/// Report the preload of `engine` on `console` from a thread of its own, a line every second
/// while it preloads and one when it ends.
pub fn spawn(engine: Arc<Engine>, console: Arc<dyn Console>) -> std::io::Result<()> {
    std::thread::Builder::new().name("preload-progress".into()).spawn(move || {
        let mut last = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let s = engine.warmup_stats();
            if s.state != WarmupState::Preloading {
                console.say(&format!("warmup: {}", s.reason));
                return;
            }
            if last.elapsed() >= Duration::from_secs(1) {
                last = Instant::now();
                console.say(&format!(
                    "warmup: preloading, {} of {} blocks ({} already cached)",
                    s.preloaded_blocks, s.preload_planned_blocks, s.preload_skipped_blocks
                ));
            }
        }
    })?;
    Ok(())
}
