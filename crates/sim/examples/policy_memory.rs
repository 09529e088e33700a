//! Peak heap bytes per cached block of a replacement policy, measured by a counting global
//! allocator around one simulation (used by `bench/sim-throughput`).
//!
//! Usage: `policy_memory TRACE POLICY CAPACITY_BLOCKS`
//!
//! The trace is loaded first; the allocator's peak is then reset to the current heap size, the
//! policy is built and driven over the whole trace, and the peak growth is divided by the
//! number of blocks resident at the end. Everything the policy allocates (hash index, list
//! links, ghost lists) is counted; the trace is not.

use ember_policy::admission::Aod;
use ember_policy::replacement::Spec;
use ember_policy::with_replacement;
use ember_sim::{simulate, AccessStreamBuilder, RunConfig, Split};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting live and peak bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grow(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            // Count the new block before the old one is released: a copying realloc holds both.
            grow(new_size);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        return Err("usage: policy_memory TRACE POLICY CAPACITY_BLOCKS".into());
    }
    let kind: Spec = args[2].parse()?;
    let capacity: usize = args[3].parse()?;
    let opts = ember_trace::ReadOptions::default();
    let mut builder = AccessStreamBuilder::new(opts.block_size, Split::Blocks)?;
    for r in ember_trace::open(std::path::Path::new(&args[1]), &opts)? {
        builder.push(&r?);
    }
    let stream = builder.finish(kind.needs_oracle());
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let (result, resident) = with_replacement!(kind, capacity, |p| {
        let r = simulate(&mut p, &mut Aod, &stream, &RunConfig::default());
        let n = ember_policy::Replacement::len(&p);
        (r, n)
    });
    let peak = PEAK.load(Ordering::Relaxed) - base;
    println!(
        "{}: capacity {} blocks, {} resident, {} misses, peak heap {} bytes, {:.1} bytes per cached block",
        kind,
        capacity,
        resident,
        result.totals.misses(),
        peak,
        peak as f64 / resident.max(1) as f64
    );
    Ok(())
}
