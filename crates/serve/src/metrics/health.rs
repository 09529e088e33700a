//! The cache device's health as Prometheus gauges: degraded or not, its errors, the lost
//! blocks (per volume) and refused volumes.

use std::fmt::Write as _;

use ember_engine::Engine;

/// `engine`'s health as Prometheus text.
pub fn render_health(engine: &Engine, out: &mut String) {
    let h = engine.health();
    let gauges = [
        (
            "ember_cache_degraded",
            "1 while the cache device is given up (degraded mode: every request goes to backing).",
            if h.state == "healthy" { 0.0 } else { 1.0 },
        ),
        (
            "ember_cache_device_io_errors",
            "Cache-device I/O errors since the start.",
            h.errors_total as f64,
        ),
        (
            "ember_cache_device_io_errors_decayed",
            "The cache-device error count decayed by its half-life (degraded at the limit).",
            h.errors_decayed,
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {value}");
    }
    let name = "ember_cache_lost_blocks";
    let _ = writeln!(
        out,
        "# HELP {name} Blocks lost with a failed cache device (reads fail until clear-lost)."
    );
    let _ = writeln!(out, "# TYPE {name} gauge");
    for v in engine.volume_names() {
        let escaped = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        let _ = writeln!(out, "{name}{{volume=\"{escaped}\"}} {}", engine.lost_blocks(&v));
    }
}
