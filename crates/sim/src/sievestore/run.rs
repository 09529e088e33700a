//! SieveStore's cache managers (SieveStore sections 3 and 4) over a trace held in memory.
//!
//! - *Continuous* sieves ([`ember_policy::Admission`]: AOD, WMNA, SieveStore-C, RandSieve-C,
//!   OCF nhit) run under a fully-associative LRU cache ([`ember_policy::Lru`]), as in
//!   the paper's simulator: every block access is a hit or a miss; a miss is allocated (an
//!   *allocation-write*) if the sieve admits it ([`super::continuous`]).
//! - *Discrete* sieves ([`ember_policy::admission::EpochSieve`]: SieveStore-D, RandSieve-BlkD,
//!   the ideal sieve) are batch allocators: at each epoch's end the chosen blocks become the
//!   cache's contents for the next epoch ([`ember_policy::admission::install()`]), with no
//!   replacement and no allocation inside an epoch. The ideal sieve, an oracle, is applied to
//!   the epoch it was chosen from. Moves are staggered evenly over the epoch's minutes for the
//!   cost model (the paper schedules them in slack periods, section 3.2;
//!   [`super::discrete`]).
//!
//! The results are SieveStore's metrics ([`super::metrics`]).

use super::continuous::ContinuousState;
use super::discrete::DiscreteState;
use super::metrics::SieveRun;
use ember_policy::admission::{EpochSieve, Sieve, SieveConfigError, SieveSpec};
use ember_policy::Lru;
use ember_policy::{Admission, Replacement};
use ember_trace::Request;

/// Run a continuous sieve over `requests` with `cache` as replacement (its current contents
/// count as resident). `origin` numbers days and minutes.
pub fn run_continuous(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    cache: &mut dyn Replacement,
    sieve: &mut dyn Admission,
) -> SieveRun {
    let mut run = ContinuousState::new(origin, cache, sieve);
    for r in requests {
        run.request(r, block_size, cache, sieve);
    }
    run.finish(sieve)
}

/// Run a discrete (epoch) sieve over `requests` with room for `capacity` blocks; epochs of
/// `epoch_ns` start at `origin`.
pub fn run_discrete(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    capacity: usize,
    epoch_ns: u64,
    sieve: &mut dyn EpochSieve,
) -> SieveRun {
    let mut run = DiscreteState::new(origin, capacity, epoch_ns, sieve, Vec::new());
    for r in requests {
        match run.request(r, block_size, sieve) {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }
    match run.finish(block_size, sieve) {
        Ok(result) => result,
        Err(never) => match never {},
    }
}

/// Run `spec` over `requests` with a cache of `capacity` blocks (LRU under continuous
/// sieves, as in the paper's simulator).
pub fn run_sieve(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    capacity: usize,
    spec: &SieveSpec,
) -> Result<SieveRun, SieveConfigError> {
    run_sieve_with(requests, block_size, origin, capacity, spec, &|c| Box::new(Lru::new(c)))
}

/// Makes an empty replacement policy of a given capacity (for continuous sieves).
pub type CacheFactory<'a> = &'a (dyn Fn(usize) -> Box<dyn Replacement> + Sync);

/// [`run_sieve`] with the replacement policy under continuous sieves made by `make_cache`
/// (discrete sieves have no replacement inside an epoch).
pub fn run_sieve_with(
    requests: &[Request],
    block_size: u64,
    origin: u64,
    capacity: usize,
    spec: &SieveSpec,
    make_cache: CacheFactory<'_>,
) -> Result<SieveRun, SieveConfigError> {
    Ok(match spec.build()? {
        Sieve::Continuous(mut s) => {
            let mut cache = make_cache(capacity);
            run_continuous(requests, block_size, origin, cache.as_mut(), s.as_mut())
        }
        Sieve::Discrete(mut s, epoch_ns) => {
            run_discrete(requests, block_size, origin, capacity, epoch_ns, s.as_mut())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sievestore::metrics::{DAY_NS, MINUTE_NS};
    use ember_trace::Op;

    const H: u64 = 3_600_000_000_000;

    fn req(time_ns: u64, block: u64, op: Op) -> Request {
        Request { time_ns, volume: 0, op, offset: block * 4096, length: 4096 }
    }

    /// SieveStore section 3.2: no replacement inside an epoch, batch allocation at its end,
    /// and a block chosen again is not moved.
    #[test]
    fn sievestore_d_holds_contents_for_an_epoch_and_cancels_repeat_moves() {
        let mut reqs = Vec::new();
        // Day 0: block 1 x10, block 2 x10, block 3 x9.
        for i in 0..10 {
            reqs.push(req(i * H, 1, Op::Read));
            reqs.push(req(i * H + 1, 2, Op::Read));
            if i < 9 {
                reqs.push(req(i * H + 2, 3, Op::Write));
            }
        }
        // Day 1: block 1 x10 (chosen again), block 4 x12 (new), block 3 x1.
        for i in 0..12 {
            if i < 10 {
                reqs.push(req(DAY_NS + i * H, 1, Op::Read));
            }
            reqs.push(req(DAY_NS + i * H + 1, 4, Op::Write));
        }
        reqs.push(req(DAY_NS + 20 * H, 3, Op::Read));
        // Day 2: one access each to 1, 2 and 4.
        for b in [1, 2, 4] {
            reqs.push(req(2 * DAY_NS + b * H, b, Op::Read));
        }
        reqs.sort_by_key(|r| r.time_ns);
        let spec = SieveSpec::SieveStoreD { t: 10, epoch_ns: DAY_NS };
        let r = run_sieve(&reqs, 4096, 0, 100, &spec).unwrap();
        // Day 0: nothing resident (bootstrap). Block 4 is new on day 1 and not resident
        // before day 2 even though it passed the threshold during day 1.
        assert_eq!(r.days[0].hits(), 0);
        // Day 1: blocks 1 and 2 resident: 10 hits on 1; 4 and 3 miss.
        assert_eq!(r.days[1].hits(), 10);
        assert_eq!(r.days[1].allocation_writes, 2, "blocks 1 and 2 moved in at day 0's end");
        assert_eq!(r.days[1].cancelled_moves, 0);
        // Day 2: blocks 1 and 4 resident; 1 was chosen again, so only 4 moves.
        assert_eq!(r.days[2].allocation_writes, 1);
        assert_eq!(r.days[2].cancelled_moves, 1);
        assert_eq!(r.days[2].hits(), 2, "1 and 4 hit, 2 was replaced");
        assert_eq!(r.days[2].write_hits, 0);
        // Moves are spread over the epoch's 1440 minutes: day 1's two moves land in its
        // first two minutes.
        let day1_minutes = &r.minutes[1440..2880];
        assert_eq!(day1_minutes.iter().map(|m| m.allocation_writes).sum::<u64>(), 2);
    }

    /// A capacity smaller than the chosen set keeps the most-accessed blocks.
    #[test]
    fn sievestore_d_keeps_the_most_wanted_when_full() {
        let mut reqs = Vec::new();
        for i in 0..20 {
            reqs.push(req(i * H / 2, 1, Op::Read));
            if i < 12 {
                reqs.push(req(i * H / 2 + 1, 2, Op::Read));
            }
        }
        reqs.push(req(DAY_NS, 1, Op::Read));
        reqs.push(req(DAY_NS + 1, 2, Op::Read));
        let spec = SieveSpec::SieveStoreD { t: 10, epoch_ns: DAY_NS };
        let r = run_sieve(&reqs, 4096, 0, 1, &spec).unwrap();
        assert_eq!(r.days[1].hits(), 1);
        assert_eq!(r.days[1].read_hits, 1);
        assert_eq!(r.days[1].allocation_writes, 1);
    }

    /// The ideal sieve is an oracle: the day's top blocks are resident during that day.
    #[test]
    fn ideal_applies_its_choice_to_the_same_day() {
        let mut reqs = Vec::new();
        for i in 0..50 {
            reqs.push(req(i * 1000, 7, Op::Read));
        }
        for b in 100..199 {
            reqs.push(req(60_000 + b, b, Op::Read));
        }
        let spec = SieveSpec::Ideal { fraction: 0.01, epoch_ns: DAY_NS };
        let r = run_sieve(&reqs, 4096, 0, 10, &spec).unwrap();
        assert_eq!(r.days[0].hits(), 50);
        assert_eq!(r.days[0].allocation_writes, 1);
    }

    #[test]
    fn continuous_runs_count_hits_and_allocation_writes() {
        let reqs = vec![
            req(0, 1, Op::Read),
            req(1, 1, Op::Write),
            req(2, 2, Op::Write),
            req(3, 2, Op::Read),
            req(MINUTE_NS, 1, Op::Read),
        ];
        let r = run_sieve(&reqs, 4096, 0, 10, &SieveSpec::Wmna).unwrap();
        let t = r.total();
        assert_eq!((t.accesses, t.reads, t.writes), (5, 3, 2));
        assert_eq!(t.allocation_writes, 2, "read misses of 1 and 2");
        assert_eq!((t.read_hits, t.write_hits), (1, 1));
        assert_eq!(r.minutes[1].read_hits, 1);
        let r = run_sieve(&reqs, 4096, 0, 10, &SieveSpec::Aod).unwrap();
        assert_eq!(r.total().allocation_writes, 2);
        assert_eq!(r.total().hits(), 3);
    }
}
