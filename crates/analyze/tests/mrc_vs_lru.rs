//! The exact miss-ratio curve equals ember's own LRU simulation (`ember_policy::Lru` through
//! `ember_sim::simulate`, allocate-on-demand) at every cache size, on a 100k-request trace.

use ember_analyze::{mrc, ReuseHistogram};
use ember_policy::admission::Aod;
use ember_policy::Lru;
use ember_sim::{simulate, AccessStream, RunConfig};
use ember_trace::{Op, Request, Trace, VolumeTable};

fn trace() -> Trace {
    // Skewed (square of a uniform) over 400 blocks, 20 % writes, some 2-block requests.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let requests = (0..100_000u64)
        .map(|i| {
            let u = (next() % 1_000_000) as f64 / 1e6;
            let block = (u * u * 400.0) as u64;
            let op = if next() % 5 == 0 { Op::Write } else { Op::Read };
            let length = if next() % 10 == 0 { 8192 } else { 4096 };
            Request { time_ns: i * 1000, volume: 0, op, offset: block * 4096, length }
        })
        .collect();
    let mut v = VolumeTable::new();
    v.intern("t");
    Trace::new(requests, v)
}

#[test]
fn exact_mrc_equals_lru_simulation_at_every_size() {
    let t = trace();
    let stream = AccessStream::from_trace(&t, 4096, false).unwrap();
    let a = ember_analyze::Accesses::from_trace(&t, 4096);
    assert_eq!(a.keys, stream.keys());
    let h = ReuseHistogram::of(&a.keys, &a.writes, 4096);
    let cum = mrc::cumulative_hits(&h);
    let wss = stream.wss();
    assert!(wss > 300, "wss {wss}");
    for size in 1..=wss + 1 {
        let r = simulate(&mut Lru::new(size as usize), &mut Aod, &stream, &RunConfig::default());
        assert_eq!(mrc::hits_from(&cum, size), r.totals.hits(), "size {size}");
    }
}
