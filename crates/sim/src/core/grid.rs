//! Many runs over one shared stream, in parallel across cores.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// How far a grid has come, reported to the progress callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridProgress {
    /// Accesses simulated so far, over all runs.
    pub done_accesses: u64,
    /// Accesses the whole grid will simulate.
    pub total_accesses: u64,
    /// Runs finished.
    pub done_runs: usize,
    /// Runs in the grid.
    pub total_runs: usize,
}

/// The number of worker threads to use by default: the machine's available parallelism.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Run `run` on every cell, on up to `threads` threads, and return the results in cell order.
///
/// `run(cell, tick)` must call `tick(n)` after simulating `n` accesses (as
/// [`crate::simulate_with_progress`] does); `accesses_per_run` is the number each run will
/// report, for the progress total. `progress` is called (from worker threads) after every tick
/// and after every finished run.
pub fn run_grid<C, T, F>(
    cells: &[C],
    accesses_per_run: u64,
    threads: usize,
    run: F,
    progress: &(dyn Fn(GridProgress) + Sync),
) -> Vec<T>
where
    C: Sync,
    T: Send,
    F: Fn(&C, &mut dyn FnMut(u64)) -> T + Sync,
{
    let total_runs = cells.len();
    let total_accesses = accesses_per_run.saturating_mul(total_runs as u64);
    let next = AtomicUsize::new(0);
    let done_accesses = AtomicU64::new(0);
    let done_runs = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..total_runs).map(|_| None).collect());
    let report = |d: u64, r: usize| {
        progress(GridProgress { done_accesses: d, total_accesses, done_runs: r, total_runs });
    };
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= total_runs {
            break;
        }
        let mut tick = |n: u64| {
            let d = done_accesses.fetch_add(n, Ordering::Relaxed) + n;
            report(d, done_runs.load(Ordering::Relaxed));
        };
        let out = run(&cells[i], &mut tick);
        // A poisoned lock means another worker panicked; the scope re-raises that panic.
        if let Ok(mut r) = results.lock() {
            r[i] = Some(out);
        }
        let r = done_runs.fetch_add(1, Ordering::Relaxed) + 1;
        report(done_accesses.load(Ordering::Relaxed), r);
    };
    let threads = threads.clamp(1, total_runs.max(1));
    if threads == 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(worker);
            }
        });
    }
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testing::{trace_of, TinyLru};
    use crate::{simulate, simulate_with_progress, AccessStream, Interval, RunConfig, SimResult};
    use ember_policy::admission::Aod;

    #[test]
    fn parallel_grid_equals_sequential_runs() {
        let pattern: Vec<(u64, char)> = (0..3000u64)
            .map(|i| ((i * 31) % 211 + (i % 7) * 3, if i % 4 == 0 { 'W' } else { 'R' }))
            .collect();
        let s = AccessStream::from_trace(&trace_of(&pattern), 4096, false).unwrap();
        let cfg = RunConfig { interval: Some(Interval::Requests(500)), ..RunConfig::default() };
        let cells: Vec<usize> = vec![1, 5, 20, 50, 100, 150, 200, 300];
        let seen = Mutex::new(Vec::new());
        let par: Vec<SimResult> = run_grid(
            &cells,
            s.len() as u64,
            4,
            |&cap, tick| simulate_with_progress(&mut TinyLru::new(cap), &mut Aod, &s, &cfg, tick),
            &|p| seen.lock().unwrap().push(p),
        );
        let seq: Vec<SimResult> =
            cells.iter().map(|&cap| simulate(&mut TinyLru::new(cap), &mut Aod, &s, &cfg)).collect();
        assert_eq!(par, seq);
        assert_eq!(
            par.iter().map(|r| r.capacity_blocks).collect::<Vec<_>>(),
            vec![1, 5, 20, 50, 100, 150, 200, 300]
        );
        // Hit ratio grows with capacity under LRU (inclusion property).
        assert!(par.windows(2).all(|w| w[0].totals.hit_ratio() <= w[1].totals.hit_ratio()));
        let seen = seen.into_inner().unwrap();
        let last = seen.iter().max_by_key(|p| (p.done_runs, p.done_accesses)).unwrap();
        assert_eq!(last.done_runs, 8);
        assert_eq!(last.done_accesses, 8 * 3000);
        assert_eq!(last.total_accesses, 8 * 3000);
    }

    #[test]
    fn empty_grid_returns_nothing() {
        let out: Vec<u32> = run_grid(&Vec::<u32>::new(), 10, 4, |&c, _| c, &|_| {});
        assert!(out.is_empty());
    }
}
