//! Prometheus text: the NBD server's per-command counts, bytes, errors and latency
//! histograms ([`render_server`]), and the engine's counters per volume and its gauges
//! ([`render_engine`]).

use std::fmt::Write as _;

use ember_engine::Stats;
use ember_nbd::{Command, ServerStats};

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The NBD server's statistics as Prometheus text.
pub fn render_server(stats: &ServerStats, out: &mut String) {
    let commands = Command::TRACKED;
    type Getter = fn(&ember_nbd::CommandStats) -> u64;
    let per_command: [(&str, &str, Getter); 3] = [
        ("ember_nbd_requests_total", "NBD requests answered, by command.", |c| c.count()),
        ("ember_nbd_errors_total", "NBD requests answered with an error, by command.", |c| {
            c.errors()
        }),
        ("ember_nbd_bytes_total", "Bytes moved by successful NBD requests, by command.", |c| {
            c.bytes()
        }),
    ];
    for (name, help, get) in per_command {
        family(out, name, "counter", help);
        for c in commands {
            let _ = writeln!(out, "{name}{{command=\"{}\"}} {}", c.label(), get(&stats.command(c)));
        }
    }
    let name = "ember_nbd_request_duration_seconds";
    family(out, name, "histogram", "From a request fully received to its reply written.");
    for c in commands {
        let s = stats.command(c);
        let h = s.latency();
        for (bound, count) in h.cumulative() {
            let le = if bound.is_infinite() { "+Inf".to_string() } else { format!("{bound}") };
            let _ = writeln!(out, "{name}_bucket{{command=\"{}\",le=\"{le}\"}} {count}", c.label());
        }
        let _ =
            writeln!(out, "{name}_sum{{command=\"{}\"}} {}", c.label(), h.sum_ns() as f64 / 1e9);
        let _ = writeln!(out, "{name}_count{{command=\"{}\"}} {}", c.label(), h.count());
    }
    family(out, "ember_nbd_connections_opened_total", "counter", "NBD connections accepted.");
    let _ = writeln!(out, "ember_nbd_connections_opened_total {}", stats.connections_opened());
    family(out, "ember_nbd_connections_open", "gauge", "NBD connections open now.");
    let _ = writeln!(out, "ember_nbd_connections_open {}", stats.connections_open());
}

/// The engine's statistics as Prometheus text: every counter of
/// [`ember_engine::VolumeStats`] as `ember_cache_<counter>_total{volume="…"}`, plus gauges.
pub fn render_engine(stats: &Stats, out: &mut String) {
    let gauges = [
        ("ember_cache_block_size_bytes", "Cache block size.", stats.block_size as f64),
        (
            "ember_cache_capacity_blocks",
            "Cache blocks in the data region.",
            stats.capacity_blocks as f64,
        ),
        ("ember_cache_resident_blocks", "Cache blocks holding data.", stats.resident_blocks as f64),
        (
            "ember_cache_read_hit_ratio",
            "Read hits / block reads since start, all volumes.",
            stats.read_hit_ratio(),
        ),
    ];
    for (name, help, value) in gauges {
        family(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {value}");
    }
    let ring = [
        (
            "ember_cache_device_ring_reads_total",
            "Cache-device reads done through io_uring (--direct), all volumes.",
            ember_engine::device::reads_through_io_uring(),
        ),
        (
            "ember_cache_device_ring_fixed_reads_total",
            "Of those, reads into a buffer registered with the ring (its pages not pinned per read).",
            ember_engine::device::fixed_reads_through_io_uring(),
        ),
        (
            "ember_cache_device_ring_handoffs_total",
            "io_uring_enter calls that handed cache-device reads to the kernel (reads / handoffs: \
             the reads each carried; more than two are plugged together).",
            ember_engine::device::read_handoffs_through_io_uring(),
        ),
    ];
    for (name, help, value) in ring {
        family(out, name, "counter", help);
        let _ = writeln!(out, "{name} {value}");
    }
    let fields = ember_engine::VolumeStats::default().fields();
    for (i, (field, _)) in fields.iter().enumerate() {
        let name = format!("ember_cache_{field}_total");
        family(out, &name, "counter", &format!("Engine counter {field}, per volume."));
        for (volume, v) in &stats.volumes {
            let value = v.fields().get(i).map(|f| f.1).unwrap_or(0);
            let _ = writeln!(out, "{name}{{volume=\"{}\"}} {value}", escape(volume));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_nbd::{CommandObservation, ServerObserver};
    use ember_replay::scrape::{parse, sum};
    use std::time::Duration;

    #[test]
    fn server_stats_render_as_parseable_histograms() {
        let stats = ServerStats::new();
        for us in [3u64, 3, 700] {
            stats.on_command(&CommandObservation {
                command: Command::Read,
                bytes: 4096,
                latency: Duration::from_micros(us),
                error: None,
            });
        }
        let mut text = String::new();
        render_server(&stats, &mut text);
        let samples = match parse(&text) {
            Ok(s) => s,
            Err(e) => panic!("{e}\n{text}"),
        };
        let read = |name: &str, le: Option<&str>| {
            samples
                .iter()
                .find(|s| {
                    s.name == name && s.label("command") == Some("read") && s.label("le") == le
                })
                .map(|s| s.value)
        };
        assert_eq!(read("ember_nbd_requests_total", None), Some(3.0));
        assert_eq!(read("ember_nbd_bytes_total", None), Some(12288.0));
        assert_eq!(read("ember_nbd_request_duration_seconds_bucket", Some("0.000004")), Some(2.0));
        assert_eq!(read("ember_nbd_request_duration_seconds_bucket", Some("+Inf")), Some(3.0));
        assert_eq!(read("ember_nbd_request_duration_seconds_count", None), Some(3.0));
    }

    #[test]
    fn engine_counters_per_volume() {
        let a = ember_engine::VolumeStats { read_hits: 5, read_misses: 3, ..Default::default() };
        let b = ember_engine::VolumeStats { read_hits: 2, ..Default::default() };
        let mut total = a;
        total.add(&b);
        let stats = Stats {
            block_size: 4096,
            capacity_blocks: 100,
            resident_blocks: 10,
            volumes: vec![("a".into(), a), ("b\"q".into(), b)],
            total,
        };
        let mut text = String::new();
        render_engine(&stats, &mut text);
        let samples = parse(&text).map_err(|e| e.to_string());
        let samples = match samples {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(sum(&samples, ember_replay::scrape::READ_HITS), 7.0);
        assert_eq!(sum(&samples, ember_replay::scrape::READ_MISSES), 3.0);
        let quoted = samples
            .iter()
            .find(|s| s.name == "ember_cache_read_hits_total" && s.label("volume") == Some("b\"q"));
        assert_eq!(quoted.map(|s| s.value), Some(2.0));
        assert_eq!(sum(&samples, "ember_cache_read_hit_ratio"), 7.0 / 10.0);
    }
}
