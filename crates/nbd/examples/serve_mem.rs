//! Serve a RAM disk over NBD until stdin closes: `cargo run -p ember-nbd --example serve_mem
//! -- 127.0.0.1:10809 disk 1073741824 [workers]`, then e.g. `nbdinfo nbd://127.0.0.1:10809/disk`.

use std::io::Read;
use std::sync::Arc;

use ember_nbd::{ExportMap, MemExport, Server, ServerStats};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let address = args.get(1).map(String::as_str).unwrap_or("127.0.0.1:10809");
    let name = args.get(2).map(String::as_str).unwrap_or("disk");
    let size: u64 = match args.get(3) {
        Some(s) => s.parse().map_err(|e| format!("size {s:?}: {e}"))?,
        None => 1 << 30,
    };
    let workers: usize = match args.get(4) {
        Some(s) => s.parse().map_err(|e| format!("workers {s:?}: {e}"))?,
        None => 8,
    };
    let stats = Arc::new(ServerStats::new());
    let exports =
        ExportMap::new().with(name, "ember-nbd MemExport demo", Arc::new(MemExport::new(size)));
    let server = Server::builder(Arc::new(exports))
        .observer(stats.clone())
        .workers(workers)
        .listen_tcp(address)?
        .build()?;
    eprintln!("serving {name} ({size} bytes) on {:?}; close stdin to stop", server.addrs());
    let running = server.spawn()?;
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    running.shutdown()?;
    for command in ember_nbd::Command::TRACKED {
        let s = stats.command(command);
        if s.count() > 0 {
            eprintln!(
                "{:>13}: {} requests, {} errors, {} bytes, p99 <= {:?}",
                command.label(),
                s.count(),
                s.errors(),
                s.bytes(),
                s.latency().quantile_upper_bound(0.99)
            );
        }
    }
    Ok(())
}
