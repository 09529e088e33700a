//! Put an ember cache in front of an upstream disk and serve it over NBD until stdin closes:
//!
//! ```text
//! cargo run --release -p ember-engine --bin ember-front -- CACHE_FILE CACHE_SIZE UPSTREAM LISTEN [POLICY]
//! e.g. ember-front /tmp/cache.img 256M 'nbd+unix:///?socket=/tmp/hdd.sock' /tmp/ember.sock write-back-persist
//! ```
//!
//! UPSTREAM is a path or an NBD URI; LISTEN a Unix socket path or host:port; POLICY one of
//! `write-through` (default), `write-around`, `write-back-flush`, `write-back-persist`,
//! `unsafe-write-back`. The cache file is formatted on first use (one volume called `disk`).
//! On exit (stdin closed) it shuts down cleanly and prints the engine's counters; killed, it
//! recovers as its policy allows at the next start. This is the small server the crash
//! trials (`tests/writeback_kill.rs`) and `bench/writeback` run; `ember serve` is the full one.

use ember_engine::device::{open_spec, FileOptions};
use ember_engine::{Engine, EngineConfig, FormatSpec, VolumeConfig, VolumeSpec, WriteMode};
use ember_policy::admission::Aod;
use ember_policy::replacement::{build, Kind};
use std::io::Read;
use std::sync::Arc;

fn size(s: &str) -> Result<u64, String> {
    let (n, m) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1 << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    n.parse::<u64>().map(|n| n * m).map_err(|e| format!("size {s:?}: {e}"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        return Err("usage: ember-front CACHE_FILE CACHE_SIZE UPSTREAM LISTEN [POLICY]".into());
    }
    let cache = open_spec(&a[1], FileOptions { direct: false, create_size: Some(size(&a[2])?) })?;
    let backing = open_spec(&a[3], FileOptions::default())?;
    if Engine::inspect(cache.as_ref()).is_err() {
        let spec = FormatSpec::new(vec![VolumeSpec { name: "disk".into(), size: backing.size() }]);
        Engine::format(cache.as_ref(), &spec)?;
    }
    let write_mode: WriteMode = match a.get(5) {
        Some(p) => p.parse()?,
        None => WriteMode::WriteThrough,
    };
    let engine = Arc::new(Engine::open(EngineConfig {
        cache,
        volumes: vec![VolumeConfig { name: "disk".into(), backing }],
        write_mode,
        replacement: Box::new(|cap| build(Kind::Lru, cap)),
        admission: Box::new(Aod),
    })?);
    eprintln!("ember front: {} {:?}", write_mode, engine.open_report());
    let builder = ember_nbd::Server::builder(engine.clone());
    let builder = if a[4].contains(':') {
        builder.listen_tcp(a[4].as_str())?
    } else {
        builder.listen_unix(&a[4])?
    };
    let running = builder.build()?.spawn()?;
    eprintln!("ember front: serving export \"disk\" on {}; close stdin to stop", a[4]);
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    running.shutdown()?;
    let report = engine.shutdown()?;
    let s = engine.stats();
    eprintln!("ember front: {report:?}");
    eprintln!("ember front: read hit ratio {:.3}", s.read_hit_ratio());
    for (k, v) in s.total.fields() {
        eprintln!("  {k:<22} {v}");
    }
    Ok(())
}
