//! `multi-client`: N clients reading one disk array, after Wong and Wilkes, *My cache or
//! yours?*, USENIX ATC 2002, section 5 (and 5.1):
//!
//! - *disjoint* ([`Sharing::Disjoint`]): "the clients each issue READS for non-overlapped parts
//!   of the aggregate working set";
//! - *conjoint* ([`Sharing::Conjoint`]): "the clients issue exactly the same READ requests in
//!   the same order at the exact same time" (client 0 is listed first: the leader);
//! - *partially shared* ([`Sharing::Partial`]): a fraction of each client's working set is
//!   common to all clients, and each client draws its own READ stream, so "a READ for block X
//!   by one client may be followed by several READS for other blocks before a second READ for
//!   X by another client" (section 5.1). `Partial { shared_fraction: 1.0 }` is fully shared but
//!   not conjoint; `Partial { shared_fraction: 0.0 }` is disjoint.
//!
//! Section 5.1's simulated system is the section 3 one "with the single client ... simply
//! replaced by N clients, each with 1/N of the cache memory of the single client": the cache
//! sizes belong to the simulator; this generator only shapes the READ streams.
//!
//! # Representation: volume = client, offset = array address
//!
//! A [`Request`] has no client field. In a multi-client trace the **volume is the client**
//! (volume `clientK` has id K) and the **offset is an address in the array's one shared
//! logical unit**. Two clients reading the same offset read the same array block. So:
//!
//! - a client cache keys a block by [`crate::block_key`]`(volume, block)` (its own copy);
//! - the array cache keys it by the block index alone (`offset / block_size`), which is the
//!   same for every client;
//! - [`ClientLayout`] tells which array blocks are shared and which client owns each private
//!   block.
//!
//! The array address space is laid out as the shared region `[0, S)` followed by each
//! client's private region of `W - S` blocks: client K's private blocks are
//! `[S + K (W - S), S + (K + 1)(W - S))`, where `W` is the working set of one client and `S`
//! the number of shared blocks (0 for disjoint, `W` for conjoint, `round(f W)` for partial).
//! A simulator that treats each volume as an independent device (the ordinary flat cache)
//! sees each client's copy as distinct; that is right for client caches and wrong for the
//! array, which is why the array must drop the volume.
//!
//! # Access pattern and time
//!
//! Each client addresses its working set `0..W` (index `j`), mapped to the array by
//! [`ClientLayout::block`] (`j < S` are the shared blocks), with one of the [`Pattern`]s:
//! uniform random, a sequential loop, or Zipf (ranks scattered over `0..W` by one seeded
//! permutation common to all clients, so a shared block is equally popular everywhere). With a
//! sequential loop, client K starts at `K W / N` so that clients reach a shared block at
//! different times (conjoint clients all start at 0).
//!
//! Every client issues `rate` requests per second (`N x rate` must not exceed 1e9). Request
//! `i` of client K is stamped `floor(1e9 (i + K / N) / rate)` nanoseconds (conjoint:
//! `floor(1e9 i / rate)`, the same instant for all clients); the trace lists them by time,
//! ties by client. As in section 3, each client first
//! issues `warmup_per_client` warm-up READS (default W) and then `timed_per_client` timed
//! READS (default 10 W); [`MultiClientConfig::warmed_stream`] gives the requests one at a
//! time with the boundary (constant memory: one random stream per client), and
//! [`MultiClientTrace::warmed`] holds them.

use super::zipf::ZipfRanks;
use super::{Common, GenRng, OpMix, Scramble, WarmedStream, WarmedTrace};
use crate::{Op, Request, TraceError, VolumeTable};
use rand::Rng;
use rand_xoshiro::rand_core::SeedableRng;
use std::ops::Range;

/// The largest number of clients: the volume of a [`crate::block_key`] has 16 bits.
pub const MAX_CLIENTS: u32 = 1 << 16;

/// How clients' working sets overlap (Wong and Wilkes section 5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sharing {
    /// Each client reads its own blocks; no block is read by two clients.
    Disjoint,
    /// All clients issue exactly the same READS in the same order at the same time.
    Conjoint,
    /// A fraction in [0, 1] of each client's working set is shared by all clients; each
    /// client draws its own independent READ stream.
    Partial {
        /// Fraction of the working set that is shared.
        shared_fraction: f64,
    },
}

/// The access pattern of each client over its working set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Uniform random over the working set (Wong and Wilkes RANDOM, section 3.2).
    Random,
    /// A sequential loop over the working set (SEQ, section 3.3).
    Seq,
    /// Zipf-like with this exponent (ZIPF, section 3.4, uses 1).
    Zipf {
        /// The Zipf exponent.
        alpha: f64,
    },
}

/// Where each client's blocks live in the array address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLayout {
    /// Number of clients N.
    pub clients: u32,
    /// Working-set size of each client W, in blocks.
    pub blocks_per_client: u64,
    /// Number of shared blocks S (the array blocks `0..S`).
    pub shared_blocks: u64,
}

impl ClientLayout {
    fn private_len(&self) -> u64 {
        self.blocks_per_client - self.shared_blocks
    }

    /// Size of the array address space, `S + N (W - S)` blocks.
    pub fn array_blocks(&self) -> u64 {
        self.shared_blocks + self.clients as u64 * self.private_len()
    }

    /// The shared array blocks, `0..S`.
    pub fn shared(&self) -> Range<u64> {
        0..self.shared_blocks
    }

    /// The private array blocks of `client`.
    pub fn private(&self, client: u32) -> Range<u64> {
        let start = self.shared_blocks + client as u64 * self.private_len();
        start..start + self.private_len()
    }

    /// The array block of index `j` (in `0..W`) of `client`'s working set.
    #[inline]
    pub fn block(&self, client: u32, j: u64) -> u64 {
        if j < self.shared_blocks {
            j
        } else {
            self.shared_blocks + client as u64 * self.private_len() + (j - self.shared_blocks)
        }
    }

    /// The client whose private region holds array block `block`; `None` for a shared block
    /// or one beyond the address space.
    pub fn owner(&self, block: u64) -> Option<u32> {
        if block < self.shared_blocks || block >= self.array_blocks() {
            return None;
        }
        Some(((block - self.shared_blocks) / self.private_len()) as u32)
    }

    /// True if `block` is read by every client.
    pub fn is_shared(&self, block: u64) -> bool {
        block < self.shared_blocks
    }
}

/// Configuration of the [`multi_client`](self) generator.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiClientConfig {
    /// Number of clients N, in `1..=MAX_CLIENTS`; client K is volume `clientK`.
    pub clients: u32,
    /// Working-set size of each client W, in blocks.
    pub blocks_per_client: u64,
    /// The access pattern of each client.
    pub pattern: Pattern,
    /// How working sets overlap.
    pub sharing: Sharing,
    /// Warm-up requests per client (default W, as in Wong and Wilkes section 3).
    pub warmup_per_client: u64,
    /// Timed requests per client (default 10 W).
    pub timed_per_client: u64,
    /// Seed, block size, per-client rate and write ratio.
    pub common: Common,
}

impl MultiClientConfig {
    /// N clients with working sets of W blocks, W warm-up and 10 W timed requests each.
    pub fn new(
        clients: u32,
        blocks_per_client: u64,
        pattern: Pattern,
        sharing: Sharing,
        common: Common,
    ) -> Self {
        Self {
            clients,
            blocks_per_client,
            pattern,
            sharing,
            warmup_per_client: blocks_per_client,
            timed_per_client: blocks_per_client.saturating_mul(10),
            common,
        }
    }

    /// The array layout this configuration produces.
    pub fn layout(&self) -> Result<ClientLayout, TraceError> {
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return Err(TraceError::Invalid(format!(
                "clients must be in 1..={MAX_CLIENTS}, got {}",
                self.clients
            )));
        }
        if self.blocks_per_client == 0 {
            return Err(TraceError::Invalid("blocks per client must be at least 1".into()));
        }
        let w = self.blocks_per_client;
        let shared_blocks = match self.sharing {
            Sharing::Disjoint => 0,
            Sharing::Conjoint => w,
            Sharing::Partial { shared_fraction: f } => {
                if !(0.0..=1.0).contains(&f) {
                    return Err(TraceError::Invalid(format!(
                        "shared fraction must be in [0, 1], got {f}"
                    )));
                }
                ((f * w as f64).round() as u64).min(w)
            }
        };
        (w - shared_blocks)
            .checked_mul(self.clients as u64)
            .and_then(|p| p.checked_add(shared_blocks))
            .ok_or_else(|| TraceError::Invalid("the array address space overflows".into()))?;
        Ok(ClientLayout { clients: self.clients, blocks_per_client: w, shared_blocks })
    }

    /// The requests as a stream, in time order.
    pub fn stream(&self) -> Result<MultiClientStream, TraceError> {
        let layout = self.layout()?;
        self.common.validate(layout.array_blocks())?;
        if self.common.rate * self.clients as f64 > super::MAX_RATE {
            return Err(TraceError::Invalid(format!(
                "{} clients at {} requests per second exceed one request per nanosecond",
                self.clients, self.common.rate
            )));
        }
        let per_client = self
            .warmup_per_client
            .checked_add(self.timed_per_client)
            .ok_or_else(|| TraceError::Invalid("request count overflows".into()))?;
        per_client
            .checked_mul(self.clients as u64)
            .ok_or_else(|| TraceError::Invalid("request count overflows".into()))?;
        let zipf = match self.pattern {
            Pattern::Zipf { alpha } => Some(ZipfRanks::new(layout.blocks_per_client, alpha)?),
            _ => None,
        };
        let conjoint = self.sharing == Sharing::Conjoint;
        // Client K's block stream starts K long jumps (K * 2^192 steps) into the seed's
        // sequence, its op stream one jump (2^128 steps) after that.
        let mut base = GenRng::seed_from_u64(self.common.seed);
        let mut streams = Vec::with_capacity(self.clients as usize);
        for _ in 0..self.clients {
            let blocks = base.clone();
            let mut ops = base.clone();
            ops.jump();
            streams.push((blocks, OpMix::new(self.common.write_ratio, ops)));
            base.long_jump();
        }
        let n = self.clients as u64;
        let w = layout.blocks_per_client;
        let phases = (0..n).map(|k| if conjoint { 0 } else { k * w / n }).collect();
        Ok(MultiClientStream {
            layout,
            pattern: self.pattern,
            conjoint,
            zipf,
            scramble: Scramble::new(w, self.common.seed ^ 0x5a1f_5eed_0000_0002),
            streams,
            phases,
            step: 0,
            client: 0,
            per_client,
            interval_ns: 1e9 / self.common.rate,
            block_size: self.common.block_size,
            leader: (0, Op::Read),
        })
    }

    /// The requests as a stream with the warm-up boundary; `working_set_blocks` is the size
    /// of the array address space and [`MultiClientStream::layout`] the layout.
    pub fn warmed_stream(&self) -> Result<WarmedStream<MultiClientStream>, TraceError> {
        let s = self.stream()?;
        Ok(WarmedStream {
            volumes: s.volumes(),
            warmup_requests: self.warmup_per_client * self.clients as u64,
            timed_start_ns: s.time_of(self.warmup_per_client, 0),
            working_set_blocks: s.layout.array_blocks(),
            requests: s,
        })
    }

    /// The whole trace in memory, with the warm-up boundary and the layout.
    pub fn trace(&self) -> Result<MultiClientTrace, TraceError> {
        let s = self.warmed_stream()?;
        let layout = s.requests.layout();
        Ok(MultiClientTrace { warmed: s.collect(), layout })
    }
}

/// A multi-client trace with its warm-up boundary and array layout.
#[derive(Clone, Debug)]
pub struct MultiClientTrace {
    /// The requests (volume = client), warm-up first; `working_set_blocks` is the size of the
    /// array address space.
    pub warmed: WarmedTrace,
    /// Which array blocks are shared and which client owns the rest.
    pub layout: ClientLayout,
}

/// The requests of a [`MultiClientConfig`], in time order, generated one at a time.
#[derive(Clone, Debug)]
pub struct MultiClientStream {
    layout: ClientLayout,
    pattern: Pattern,
    conjoint: bool,
    zipf: Option<ZipfRanks>,
    scramble: Scramble,
    streams: Vec<(GenRng, OpMix)>,
    phases: Vec<u64>,
    step: u64,
    client: u32,
    per_client: u64,
    interval_ns: f64,
    block_size: u64,
    leader: (u64, Op),
}

impl MultiClientStream {
    /// The volume table: `client0`, `client1`, ... with ids 0, 1, ...
    pub fn volumes(&self) -> VolumeTable {
        let mut v = VolumeTable::new();
        for k in 0..self.layout.clients {
            v.intern(&format!("client{k}"));
        }
        v
    }

    /// The array layout.
    pub fn layout(&self) -> ClientLayout {
        self.layout
    }

    /// The time stamp of request `step` of client `k`.
    #[inline]
    fn time_of(&self, step: u64, k: u32) -> u64 {
        if self.conjoint {
            (step as f64 * self.interval_ns) as u64
        } else {
            let n = self.layout.clients as u64;
            ((step * n + k as u64) as f64 * (self.interval_ns / n as f64)) as u64
        }
    }

    /// The next working-set index and op of client `k`.
    fn draw(&mut self, k: usize) -> (u64, Op) {
        let w = self.layout.blocks_per_client;
        let (rng, ops) = &mut self.streams[k];
        let j = match self.pattern {
            Pattern::Random => rng.gen_range(0..w),
            Pattern::Seq => (self.phases[k] + self.step % w) % w,
            Pattern::Zipf { .. } => match &self.zipf {
                Some(z) => self.scramble.apply(z.sample(rng) - 1),
                None => 0,
            },
        };
        (j, ops.next_op())
    }
}

impl Iterator for MultiClientStream {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        if self.step >= self.per_client {
            return None;
        }
        let k = self.client;
        let (j, op) = if self.conjoint {
            if k == 0 {
                self.leader = self.draw(0);
            }
            self.leader
        } else {
            self.draw(k as usize)
        };
        let time_ns = self.time_of(self.step, k);
        let block = self.layout.block(k, j);
        self.client += 1;
        if self.client == self.layout.clients {
            self.client = 0;
            self.step += 1;
        }
        Some(super::one_block(time_ns, k, op, block, self.block_size))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.layout.clients as u64;
        let left = (self.per_client - self.step) * n - self.client as u64;
        (left as usize, Some(left as usize))
    }
}

impl ExactSizeIterator for MultiClientStream {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::test_util::write_fraction;
    use std::collections::HashSet;

    fn cfg(pattern: Pattern, sharing: Sharing) -> MultiClientConfig {
        let mut c = MultiClientConfig::new(4, 1000, pattern, sharing, Common::with_seed(9));
        c.timed_per_client = 5000;
        c
    }

    /// The set of array blocks each client read.
    fn per_client_blocks(t: &MultiClientTrace) -> Vec<HashSet<u64>> {
        let mut sets = vec![HashSet::new(); t.layout.clients as usize];
        for r in &t.warmed.trace.requests {
            sets[r.volume as usize].insert(r.offset / 4096);
        }
        sets
    }

    #[test]
    fn disjoint_clients_share_no_block() {
        for pattern in [Pattern::Random, Pattern::Seq, Pattern::Zipf { alpha: 1.0 }] {
            let t = cfg(pattern, Sharing::Disjoint).trace().unwrap();
            assert_eq!(t.layout.array_blocks(), 4000);
            let sets = per_client_blocks(&t);
            for a in 0..4 {
                for b in a + 1..4 {
                    assert!(sets[a].is_disjoint(&sets[b]), "{pattern:?}: {a} and {b} overlap");
                }
                let own = t.layout.private(a as u32);
                assert!(sets[a].iter().all(|x| own.contains(x)));
                assert!(sets[a].iter().all(|&x| t.layout.owner(x) == Some(a as u32)));
            }
            if pattern == Pattern::Seq {
                assert!(sets.iter().all(|s| s.len() == 1000));
            }
        }
    }

    #[test]
    fn conjoint_clients_issue_identical_requests_at_the_same_time() {
        let mut c = cfg(Pattern::Zipf { alpha: 0.8 }, Sharing::Conjoint);
        c.common.write_ratio = 0.3;
        let t = c.trace().unwrap();
        let reqs = &t.warmed.trace.requests;
        assert_eq!(reqs.len(), 4 * 6000);
        for group in reqs.chunks(4) {
            for (k, r) in group.iter().enumerate() {
                assert_eq!(r.volume, k as u32);
                assert_eq!(
                    (r.time_ns, r.offset, r.op),
                    (group[0].time_ns, group[0].offset, group[0].op)
                );
            }
        }
        let sets = per_client_blocks(&t);
        assert!(sets.iter().all(|s| *s == sets[0]));
        assert_eq!(t.layout.shared_blocks, 1000);
        assert_eq!(t.layout.array_blocks(), 1000);
    }

    #[test]
    fn fully_shared_clients_use_the_same_blocks_in_different_orders() {
        let t = cfg(Pattern::Random, Sharing::Partial { shared_fraction: 1.0 }).trace().unwrap();
        let sets = per_client_blocks(&t);
        // 6000 uniform draws over 1000 blocks cover all of them (miss probability e^-6 each,
        // but the seed is fixed; check the shared region is the same 0..1000 for all).
        assert!(sets.iter().all(|s| s.iter().all(|&b| b < 1000)));
        let reqs = &t.warmed.trace.requests;
        let seq = |k: u32| -> Vec<u64> {
            reqs.iter().filter(|r| r.volume == k).map(|r| r.offset).collect()
        };
        assert_ne!(seq(0), seq(1));
    }

    #[test]
    fn partially_shared_fraction_and_timing() {
        let t = cfg(Pattern::Seq, Sharing::Partial { shared_fraction: 0.25 }).trace().unwrap();
        assert_eq!(t.layout.shared_blocks, 250);
        assert_eq!(t.layout.array_blocks(), 250 + 4 * 750);
        let sets = per_client_blocks(&t);
        let shared: HashSet<u64> = (0..250).collect();
        for (k, s) in sets.iter().enumerate() {
            assert_eq!(s.len(), 1000);
            assert_eq!(s.intersection(&shared).count(), 250);
            for (k2, s2) in sets.iter().enumerate().skip(k + 1) {
                assert_eq!(s.intersection(s2).count(), 250, "{k} and {k2}");
            }
        }
        // Shared block 0 is read by different clients at different times.
        let reqs = &t.warmed.trace.requests;
        let first_read =
            |k: u32| reqs.iter().find(|r| r.volume == k && r.offset == 0).map(|r| r.time_ns);
        let times: HashSet<Option<u64>> = (0..4).map(first_read).collect();
        assert_eq!(times.len(), 4);
    }

    #[test]
    fn warmup_boundary_time_order_and_names() {
        let t = cfg(Pattern::Random, Sharing::Disjoint).trace().unwrap();
        let w = &t.warmed;
        assert_eq!(w.warmup_requests, 4000);
        assert_eq!(w.timed().len(), 20_000);
        assert!(w.warmup().iter().all(|r| r.time_ns < w.timed_start_ns));
        assert!(w.timed().iter().all(|r| r.time_ns >= w.timed_start_ns));
        assert!(w.trace.requests.windows(2).all(|p| p[0].time_ns < p[1].time_ns));
        assert_eq!(w.trace.volumes.names(), &["client0", "client1", "client2", "client3"]);
        // 1000 requests per second per client: step 1 of client 2 at 1 ms + 2/4 ms.
        assert_eq!(w.trace.requests[6].time_ns, 1_500_000);
    }

    #[test]
    fn timed_start_is_the_first_timed_stamp_at_awkward_rates() {
        for (clients, rate, sharing) in [
            (3, 7.0, Sharing::Disjoint),
            (7, 3000.0, Sharing::Partial { shared_fraction: 0.3 }),
            (3, 1e8 / 3.0, Sharing::Conjoint),
        ] {
            let common = Common { rate, ..Common::with_seed(1) };
            let mut c = MultiClientConfig::new(clients, 50, Pattern::Seq, sharing, common);
            c.timed_per_client = 20;
            let t = c.trace().unwrap();
            let w = &t.warmed;
            assert_eq!(w.timed()[0].time_ns, w.timed_start_ns, "{clients} clients at {rate}/s");
            assert!(w.warmup().iter().all(|r| r.time_ns < w.timed_start_ns));
            assert!(w.trace.requests.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
        }
        let too_fast = Common { rate: 5e8, ..Common::with_seed(1) };
        let c = MultiClientConfig::new(4, 10, Pattern::Random, Sharing::Disjoint, too_fast);
        assert!(c.stream().is_err());
    }

    #[test]
    fn deterministic_and_write_mix() {
        let mut c = cfg(Pattern::Zipf { alpha: 1.0 }, Sharing::Partial { shared_fraction: 0.5 });
        c.common.write_ratio = 0.1;
        let a = c.trace().unwrap().warmed.trace.requests;
        let b = c.trace().unwrap().warmed.trace.requests;
        c.common.seed = 10;
        let d = c.trace().unwrap().warmed.trace.requests;
        assert_eq!(a, b);
        assert_ne!(a, d);
        let w = write_fraction(&a);
        // 24000 requests, sd = sqrt(0.09 / 24000) = 0.0019.
        assert!((w - 0.1).abs() < 0.01, "write fraction {w}");
    }

    #[test]
    fn stream_len_is_exact() {
        let mut s = cfg(Pattern::Seq, Sharing::Disjoint).stream().unwrap();
        assert_eq!(s.len(), 24_000);
        s.next();
        s.next();
        assert_eq!(s.len(), 23_998);
        assert_eq!(s.count(), 23_998);
    }

    #[test]
    fn rejects_bad_configs() {
        let ok = cfg(Pattern::Random, Sharing::Disjoint);
        assert!(MultiClientConfig { clients: 0, ..ok.clone() }.stream().is_err());
        assert!(MultiClientConfig { blocks_per_client: 0, ..ok.clone() }.stream().is_err());
        let bad_share = Sharing::Partial { shared_fraction: 1.5 };
        assert!(MultiClientConfig { sharing: bad_share, ..ok.clone() }.stream().is_err());
        let bad_alpha = Pattern::Zipf { alpha: -1.0 };
        assert!(MultiClientConfig { pattern: bad_alpha, ..ok }.stream().is_err());
    }

    /// The requests of a fixed configuration per sharing mode and pattern (awkward rate,
    /// writes, warm-up shorter than the working set), pinned by their digest as the
    /// generator that held the whole trace made them: the streamed generator must give the
    /// same trace.
    #[test]
    fn the_trace_of_each_sharing_mode_is_pinned() {
        let sharings =
            [Sharing::Disjoint, Sharing::Conjoint, Sharing::Partial { shared_fraction: 0.3 }];
        let patterns = [Pattern::Random, Pattern::Seq, Pattern::Zipf { alpha: 0.9 }];
        let common = Common { seed: 21, rate: 777.0, write_ratio: 0.2, block_size: 4096 };
        let mut got = Vec::new();
        for sharing in sharings {
            for pattern in patterns {
                let mut c = MultiClientConfig::new(3, 400, pattern, sharing, common.clone());
                c.warmup_per_client = 350;
                c.timed_per_client = 1500;
                let t = c.trace().unwrap();
                let w = &t.warmed;
                let d = crate::gen::test_util::digest(w.trace.requests.iter());
                got.push((w.warmup_requests, w.timed_start_ns, w.working_set_blocks, d));
            }
        }
        // Rows: disjoint, conjoint, partial 0.3; each random, seq, Zipf 0.9.
        let want: Vec<(usize, u64, u64, (u64, u64))> = vec![
            (1050, 450_450_450, 1200, (16_247_293_143_434_217_277, 5550)),
            (1050, 450_450_450, 1200, (2_567_045_810_851_800_381, 5550)),
            (1050, 450_450_450, 1200, (1_854_971_965_560_200_926, 5550)),
            (1050, 450_450_450, 400, (6_635_090_148_670_009_114, 5550)),
            (1050, 450_450_450, 400, (18_304_835_466_358_371_217, 5550)),
            (1050, 450_450_450, 400, (10_708_691_367_568_388_474, 5550)),
            (1050, 450_450_450, 960, (11_903_700_572_372_084_068, 5550)),
            (1050, 450_450_450, 960, (217_074_724_721_874_044, 5550)),
            (1050, 450_450_450, 960, (12_125_459_134_214_265_842, 5550)),
        ];
        assert_eq!(got, want);
    }
}
