//! One cell of a streamed grid ([`ChunkRun`]): a replacement policy and a sieve fed chunk
//! after chunk ([`PolicyRun`], monomorphized by [`policy_run`]), with its totals and, if asked,
//! its timeline, cut by the [`Piece`]s of a [`super::cutter::Cutter`] (the accesses of the
//! uncounted warm-up period run but are not counted). Chunks of oracleGeneral records can
//! also be read in place ([`ChunkRun::run_records`]).

use super::cutter::{IntervalStart, Piece};
use super::distinct::DistinctCounter;
use super::simulate::{run_records, run_slices, Slices};
use super::tally::Tally;
use super::warmup_period::CountStart;
use crate::SimResult;
use ember_policy::{Admission, Replacement};
use ember_trace::formats::oracle_general::{record_key, RECORD_SIZE};
use ember_trace::{BlockChunk, FLAG_FIRST};

/// One cell of a streamed grid: a policy (and sieve) fed chunk after chunk.
pub trait ChunkRun: Send {
    /// Simulate the accesses of `pieces` of `chunk`, in order; `next` holds the chunk's
    /// next-access vtimes, one per access, or is empty when none were computed. With `wss`,
    /// the keys of the run's misses are counted into it: a run that started empty misses
    /// every block's first access, so that counts the trace's distinct blocks exactly.
    fn run(
        &mut self,
        chunk: &BlockChunk,
        next: &[u64],
        pieces: &[Piece],
        wss: Option<&mut DistinctCounter>,
    );
    /// Simulate oracleGeneral `records` read in place (whole records, each one read
    /// access; see [`ember_trace::BlockReader::next_records`]), the first at `vtime`, as
    /// one stretch of the only timeline interval (no interval cut); `counted` is false for
    /// records of the uncounted warm-up period, and `count_start` is set on the stretch
    /// counting starts with. With `wss`, the keys of the run's misses are counted into it: a
    /// run that started empty misses every block's first access, so that counts the trace's
    /// distinct blocks exactly.
    fn run_records(
        &mut self,
        records: &[u8],
        vtime: u64,
        counted: bool,
        count_start: Option<CountStart>,
        wss: Option<&mut DistinctCounter>,
    );
    /// The result so far (the open interval included).
    fn result(&self) -> SimResult;
}

/// A [`ChunkRun`] of replacement policy `R` with sieve `A`, monomorphized.
#[derive(Debug)]
pub struct PolicyRun<R, A> {
    policy: R,
    admission: A,
    tally: Tally,
    /// Scratch of [`ChunkRun::run_records`]: the records as a chunk, for a sieve.
    scratch: BlockChunk,
}

/// A boxed [`PolicyRun`]; with `timeline`, it records per-interval counters.
pub fn policy_run<R, A>(policy: R, admission: A, timeline: bool) -> Box<dyn ChunkRun>
where
    R: Replacement + 'static,
    A: Admission + 'static,
{
    Box::new(PolicyRun {
        policy,
        admission,
        tally: Tally::new(timeline),
        scratch: BlockChunk::default(),
    })
}

impl<R: Replacement, A: Admission> ChunkRun for PolicyRun<R, A> {
    fn run(
        &mut self,
        chunk: &BlockChunk,
        next: &[u64],
        pieces: &[Piece],
        mut wss: Option<&mut DistinctCounter>,
    ) {
        for p in pieces {
            self.tally.begin(p);
            let r = p.range.clone();
            let c = run_slices(
                &mut self.policy,
                &mut self.admission,
                Slices {
                    keys: &chunk.keys[r.clone()],
                    flags: &chunk.flags[r.clone()],
                    times: chunk.times.get(r.clone()).unwrap_or(&[]),
                    next: next.get(r),
                    vtime: p.vtime,
                },
                wss.as_deref_mut(),
            );
            self.tally.add(p.counted, c);
        }
    }

    fn run_records(
        &mut self,
        records: &[u8],
        vtime: u64,
        counted: bool,
        count_start: Option<CountStart>,
        wss: Option<&mut DistinctCounter>,
    ) {
        let n = records.len() / RECORD_SIZE;
        if n == 0 {
            return;
        }
        // The one interval of a run without cuts opens with its first access (as Cutter).
        let open = IntervalStart { index: 0, start_ns: 0, start_request: 0, warmup: !counted };
        let opens = (vtime == 0).then_some(open);
        let piece = Piece { range: 0..n, vtime, opens, counted, count_start };
        if !self.admission.admits_every_miss() {
            // A sieve decides each miss: the general loop, over the records as a chunk.
            let mut c = std::mem::take(&mut self.scratch);
            c.clear();
            c.keys.extend((0..n).filter_map(|j| record_key(records, j)));
            c.flags.resize(n, FLAG_FIRST);
            self.run(&c, &[], &[piece], wss);
            self.scratch = c;
            return;
        }
        self.tally.begin(&piece);
        let c = run_records(&mut self.policy, records, vtime, wss);
        self.tally.add(counted, c);
    }

    fn result(&self) -> SimResult {
        SimResult {
            policy: self.policy.name().to_owned(),
            admission: self.admission.name().to_owned(),
            capacity_blocks: self.policy.capacity() as u64,
            totals: self.tally.totals(),
            timeline: self.tally.timeline(),
            counted_from: self.tally.count_start(),
            seq_cutoff_bypasses: None,
        }
    }
}
