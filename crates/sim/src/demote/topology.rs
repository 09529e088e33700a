//! The DEMOTE topology of Wong and Wilkes, *My cache or yours? Making storage more
//! exclusive*, USENIX ATC 2002: N clients, each with a private LRU cache, over one shared
//! array cache managed by a [`Scheme`] (sections 1.2, 3 and 5; Figures 1 and 3).
//!
//! Every block a READ request touches is one client READ, in trace order:
//!
//! 1. the client looks the block up in its own LRU cache: a hit costs T_c;
//! 2. on a client miss the client makes room: if full it ejects its least recently used block
//!    and, under a demoting scheme, first DEMOTEs it to the array, which stores it or aborts
//!    ("when a client is about to eject a clean block from its cache (e.g., to make space for
//!    a READ), it first tries to return the block to the array using a DEMOTE", section 1.1);
//! 3. the client then READs the block from the array: an array hit, or an array miss that
//!    reads the disk. The array places the block as its scheme says.
//!
//! Each client READ is recorded by *path*: client hit, or array hit / miss together with what
//! the DEMOTE before it did (none, stored, aborted); the [`super::latency_model`] turns
//! paths into latencies. WRITES are outside the paper's model (it reports READ latency, and a block
//! a client writes is dirty, never demoted): they are counted per client and otherwise
//! skipped. READS of the warm-up requests run but are not counted ("the performance of these
//! READS is not included in the results", section 3.1).
//!
//! # Clients and addresses
//!
//! [`ClientOf::Volume`] makes each trace volume a client (the `multi-client` generator's
//! convention: volume `clientK` is client K); [`ClientOf::Single`] puts every request in one
//! client. The array keys a block by [`ArrayAddressing::Shared`] (the block index alone: one
//! shared address space, so two clients reading the same offset read the same array block)
//! or [`ArrayAddressing::PerVolume`] (volume and block: a real trace's volumes are distinct
//! disks behind the array).

use crate::demote::client_cache::{ClientCache, ClientStep};
use crate::demote::stale_copies::StaleCopies;
use crate::SimError;
use ember_policy::demote::{ArrayCache, ArrayConfig, DemoteAdmission, DemoteOutcome, Scheme};
use ember_policy::replacement::Lru;
use ember_policy::{Access, Admission};
use ember_trace::{block_key, Op, Request};

/// Which client issues a request. With [`ClientOf::Single`] and
/// [`ArrayAddressing::Shared`] the client, too, keys blocks by block index alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ClientOf {
    /// Client = volume id (client K is volume K).
    Volume,
    /// One client issues everything.
    Single,
}

/// How the array keys a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ArrayAddressing {
    /// The block index alone: every client addresses one shared logical unit.
    Shared,
    /// Volume and block index ([`block_key`]).
    PerVolume,
}

/// Configuration of a DEMOTE run: the clients, their caches and the array.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DemoteConfig {
    /// Number of clients N (each with a private cache).
    pub clients: usize,
    /// Blocks per client cache (N_c).
    pub client_blocks: usize,
    /// The array cache: size N_a, scheme, N_segs.
    pub array: ArrayConfig,
    /// Block size in bytes (the paper: 4096).
    pub block_size: u64,
    /// Which client issues each request.
    pub client_of: ClientOf,
    /// How the array keys blocks.
    pub addressing: ArrayAddressing,
}

/// What the DEMOTE before a client's array READ did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoteKind {
    /// No DEMOTE: the client had room, or the scheme does not demote.
    None = 0,
    /// The array stored the demoted block.
    Stored = 1,
    /// The DEMOTE was aborted (the array held the block, or had no room).
    Aborted = 2,
}

/// Where one client READ was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPath {
    /// Hit in the client's own cache.
    ClientHit,
    /// Missed in the client, hit in the array, after this DEMOTE.
    ArrayHit(DemoteKind),
    /// Missed in both caches and read the disk, after this DEMOTE.
    Miss(DemoteKind),
}

/// Counted READS of one client, by path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClientCounters {
    /// Block READS counted.
    pub reads: u64,
    /// READS that hit in the client cache.
    pub client_hits: u64,
    /// Array hits by the DEMOTE before them: none, stored, aborted.
    pub array_hits: [u64; 3],
    /// Array misses (disk reads) by the DEMOTE before them: none, stored, aborted.
    pub misses: [u64; 3],
    /// Block WRITES seen (not simulated).
    pub writes: u64,
}

impl ClientCounters {
    /// Count one READ.
    #[inline]
    pub fn record(&mut self, path: ReadPath) {
        self.reads += 1;
        match path {
            ReadPath::ClientHit => self.client_hits += 1,
            ReadPath::ArrayHit(d) => self.array_hits[d as usize] += 1,
            ReadPath::Miss(d) => self.misses[d as usize] += 1,
        }
    }

    /// Array hits.
    pub fn array_hit_count(&self) -> u64 {
        self.array_hits.iter().sum()
    }

    /// Disk reads.
    pub fn miss_count(&self) -> u64 {
        self.misses.iter().sum()
    }

    /// DEMOTEs the array stored.
    pub fn demotions(&self) -> u64 {
        self.array_hits[1] + self.misses[1]
    }

    /// DEMOTEs aborted.
    pub fn aborted_demotions(&self) -> u64 {
        self.array_hits[2] + self.misses[2]
    }

    fn frac(&self, n: u64) -> f64 {
        if self.reads == 0 {
            0.0
        } else {
            n as f64 / self.reads as f64
        }
    }

    /// Client hit rate h_c (fraction of READS).
    pub fn client_hit_rate(&self) -> f64 {
        self.frac(self.client_hits)
    }

    /// Array hit rate h_a (fraction of all client READS, as the paper reports it).
    pub fn array_hit_rate(&self) -> f64 {
        self.frac(self.array_hit_count())
    }

    /// Miss rate `1 - (h_c + h_a)`.
    pub fn miss_rate(&self) -> f64 {
        self.frac(self.miss_count())
    }

    /// Stored DEMOTEs per READ.
    pub fn demotion_rate(&self) -> f64 {
        self.frac(self.demotions())
    }

    /// Aborted DEMOTEs per READ.
    pub fn aborted_demotion_rate(&self) -> f64 {
        self.frac(self.aborted_demotions())
    }

    /// Add `other`'s counts.
    pub fn add(&mut self, other: &ClientCounters) {
        self.reads += other.reads;
        self.client_hits += other.client_hits;
        self.writes += other.writes;
        for k in 0..3 {
            self.array_hits[k] += other.array_hits[k];
            self.misses[k] += other.misses[k];
        }
    }
}

/// The result of one DEMOTE run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoteResult {
    /// The configuration.
    pub config: DemoteConfig,
    /// Counters per client, indexed by client.
    pub clients: Vec<ClientCounters>,
}

impl DemoteResult {
    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.config.array.scheme
    }

    /// All clients' counters summed.
    pub fn total(&self) -> ClientCounters {
        let mut t = ClientCounters::default();
        for c in &self.clients {
            t.add(c);
        }
        t
    }
}

/// The array's admission sieve and whether it decides on DEMOTEs (a sieved array tier,
/// `ember serve --array-scheme S --admission A --demote-admission D`).
pub struct ArraySieve {
    /// The sieve, asked on the array's READ and write misses.
    pub sieve: Box<dyn Admission>,
    /// Whether it decides on DEMOTEs too.
    pub demotes: DemoteAdmission,
}

/// What the array did with the blocks it was sent, beside the clients' READ paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArrayCounters {
    /// READ misses the array allocated (allocation-writes).
    pub read_allocations: u64,
    /// Writes the array received.
    pub writes: u64,
    /// Writes that hit.
    pub write_hits: u64,
    /// Write misses the array allocated (allocation-writes).
    pub write_allocations: u64,
    /// READ and write misses the sieve refused.
    pub refused: u64,
    /// DEMOTEs of absent blocks the sieve refused.
    pub demotes_refused: u64,
    /// DEMOTEs refused as stale ([`DemoteTopology::with_stale_rule`]).
    pub demotes_refused_stale: u64,
    /// DEMOTEs the scheme stored.
    pub demotes_stored: u64,
    /// DEMOTEs the scheme aborted (held already, or no room).
    pub demotes_aborted: u64,
}

impl ArrayCounters {
    /// The counts since `before` (an earlier snapshot of the same run).
    pub fn since(&self, before: &ArrayCounters) -> ArrayCounters {
        ArrayCounters {
            read_allocations: self.read_allocations - before.read_allocations,
            writes: self.writes - before.writes,
            write_hits: self.write_hits - before.write_hits,
            write_allocations: self.write_allocations - before.write_allocations,
            refused: self.refused - before.refused,
            demotes_refused: self.demotes_refused - before.demotes_refused,
            demotes_refused_stale: self.demotes_refused_stale - before.demotes_refused_stale,
            demotes_stored: self.demotes_stored - before.demotes_stored,
            demotes_aborted: self.demotes_aborted - before.demotes_aborted,
        }
    }
}

/// N clients over one array: the state of a DEMOTE run. The clients are Wong & Wilkes' LRU
/// caches unless the topology is built with others ([`DemoteTopology::with_clients`]); the
/// array has no sieve unless given one ([`DemoteTopology::with_array_sieve`]) and stores
/// every DEMOTE its scheme places unless it applies the stale rule
/// ([`DemoteTopology::with_stale_rule`]).
pub struct DemoteTopology<C: ClientCache = Lru> {
    clients: Vec<C>,
    array: ArrayCache,
    demotes: bool,
    sieve: Option<ArraySieve>,
    stale: Option<StaleCopies>,
    counters: ArrayCounters,
    last: ClientStep,
}

impl DemoteTopology<Lru> {
    /// Empty caches for `config`.
    pub fn new(config: &DemoteConfig) -> Result<Self, SimError> {
        let clients = (0..config.clients).map(|_| Lru::new(config.client_blocks)).collect();
        Self::with_clients(clients, config.array)
    }
}

impl<C: ClientCache> DemoteTopology<C> {
    /// `clients` over an empty array of `array`.
    pub fn with_clients(clients: Vec<C>, array: ArrayConfig) -> Result<Self, SimError> {
        if clients.is_empty() {
            return Err(SimError::Invalid("a DEMOTE topology needs at least one client".into()));
        }
        let demotes = array.scheme.demotes();
        let array = ArrayCache::new(array).map_err(SimError::Invalid)?;
        Ok(Self {
            clients,
            array,
            demotes,
            sieve: None,
            stale: None,
            counters: ArrayCounters::default(),
            last: ClientStep::default(),
        })
    }

    /// The array sieves its misses (and DEMOTEs, as `sieve.demotes` says) with `sieve`.
    pub fn with_array_sieve(mut self, sieve: ArraySieve) -> Self {
        self.sieve = Some(sieve);
        self
    }

    /// The array refuses a DEMOTE whose client holds no copy of the block newer than its
    /// last write, as the real array does ([`StaleCopies`]).
    pub fn with_stale_rule(mut self) -> Self {
        self.stale = Some(StaleCopies::new(self.clients.len()));
        self
    }

    /// The array crashes and starts again with an empty cache of `array`, a fresh sieve (if
    /// it has one) and new connections: every copy its clients got before is unknown.
    pub fn restart_array(
        &mut self,
        array: ArrayConfig,
        sieve: Option<ArraySieve>,
    ) -> Result<(), SimError> {
        self.array = ArrayCache::new(array).map_err(SimError::Invalid)?;
        self.sieve = sieve;
        if let Some(s) = &mut self.stale {
            s.restart();
        }
        Ok(())
    }

    /// Preload the array with `keys`, in that order, each a READ of an absent block; blocks
    /// cached already are skipped, and the preload stops when the array is full (it evicts
    /// nothing). Returns the blocks preloaded.
    pub fn preload(&mut self, keys: &[u64]) -> u64 {
        let mut n = 0;
        for &k in keys {
            if self.array.len() >= self.array.config().capacity {
                break;
            }
            if !self.array.contains(k) {
                self.array.read(k);
                n += 1;
            }
        }
        n
    }

    /// The array cache.
    pub fn array(&self) -> &ArrayCache {
        &self.array
    }

    /// What the array did besides serving READS.
    pub fn array_counters(&self) -> ArrayCounters {
        self.counters
    }

    /// Client `client` READs the block it keys `client_key`, which the array keys
    /// `array_key`. Ejected client blocks are mapped to array keys by `to_array`.
    #[inline]
    pub fn read(
        &mut self,
        client: usize,
        client_key: u64,
        array_key: u64,
        to_array: impl Fn(u64) -> u64,
    ) -> ReadPath {
        self.read_at(client, &Access::read(client_key, 0), array_key, to_array)
    }

    /// [`DemoteTopology::read`] of the client access `access` (its key, time and virtual
    /// time: a sieve reads them).
    #[inline]
    pub fn read_at(
        &mut self,
        client: usize,
        access: &Access,
        array_key: u64,
        to_array: impl Fn(u64) -> u64,
    ) -> ReadPath {
        let step = self.clients[client].access(access);
        self.last = step;
        if step.hit {
            return ReadPath::ClientHit;
        }
        let demote = match step.ejected {
            Some(victim) if self.demotes => {
                // The READ follows the DEMOTE: overlap its index lookup with the DEMOTE's.
                self.array.prefetch(array_key);
                self.demote(client, &Access { key: to_array(victim), ..*access })
            }
            _ => DemoteKind::None,
        };
        if let Some(s) = &mut self.stale {
            s.read(client, array_key);
        }
        if self.array_access(&Access { key: array_key, ..*access }) {
            ReadPath::ArrayHit(demote)
        } else {
            ReadPath::Miss(demote)
        }
    }

    /// Client `client` writes the block of `access`, which the array keys `array_key`: the
    /// client allocates (or not) as its write policy says and DEMOTEs what it ejects, then
    /// the array receives the write. Returns the client's step and what its DEMOTE did.
    pub fn write_at(
        &mut self,
        client: usize,
        access: &Access,
        array_key: u64,
        to_array: impl Fn(u64) -> u64,
    ) -> (ClientStep, DemoteKind) {
        let step = self.clients[client].access(access);
        let demote = match step.ejected {
            Some(victim) if self.demotes => {
                self.demote(client, &Access { key: to_array(victim), ..*access })
            }
            _ => DemoteKind::None,
        };
        self.array_access(&Access { key: array_key, ..*access });
        if let Some(s) = &mut self.stale {
            s.write(client, array_key);
        }
        (step, demote)
    }

    /// The clients.
    pub fn clients(&self) -> &[C] {
        &self.clients
    }

    /// What the client did at the last [`DemoteTopology::read_at`].
    pub fn last_step(&self) -> ClientStep {
        self.last
    }

    /// A DEMOTE by `client` of `access.key` (the ejected block's array key) to the array:
    /// the stale rule first, then the sieve, then the scheme.
    fn demote(&mut self, client: usize, access: &Access) -> DemoteKind {
        if let Some(s) = &mut self.stale {
            if !s.demote_fresh(client, access.key) {
                self.counters.demotes_refused_stale += 1;
                return DemoteKind::Aborted;
            }
        }
        if let Some(s) = &mut self.sieve {
            let key = access.key;
            let (len, cap) = (self.array.len(), self.array.config().capacity);
            let demoted = Access { op: Op::Read, ..*access };
            if !self.array.contains(key) && !s.demotes.admits(s.sieve.as_mut(), &demoted, len, cap)
            {
                self.counters.demotes_refused += 1;
                return DemoteKind::Aborted;
            }
        }
        match self.array.demote(access.key) {
            DemoteOutcome::Stored => {
                self.counters.demotes_stored += 1;
                DemoteKind::Stored
            }
            DemoteOutcome::Aborted => {
                self.counters.demotes_aborted += 1;
                DemoteKind::Aborted
            }
        }
    }

    /// A READ or write of `access.key` at the array: a hit moves the block as the scheme
    /// says; a miss is placed unless the array's sieve refuses it. Returns whether it hit.
    #[inline]
    fn array_access(&mut self, access: &Access) -> bool {
        let write = access.op == Op::Write;
        self.counters.writes += write as u64;
        let Some(s) = &mut self.sieve else {
            let hit = self.array.read(access.key);
            self.counters.write_hits += (hit & write) as u64;
            self.counters.write_allocations += (!hit & write) as u64;
            self.counters.read_allocations += (!hit & !write) as u64;
            return hit;
        };
        let hit = self.array.contains(access.key);
        if hit {
            self.array.read(access.key);
        }
        s.sieve.observe(access, hit);
        if hit {
            self.counters.write_hits += write as u64;
            return true;
        }
        s.sieve.set_occupancy(self.array.len(), self.array.config().capacity);
        if s.sieve.admit(access) {
            self.array.read(access.key);
            self.counters.write_allocations += write as u64;
            self.counters.read_allocations += !write as u64;
        } else {
            self.counters.refused += 1;
        }
        false
    }
}

/// The array key of client key `key` under `addressing`.
#[inline(always)]
fn array_key_of(addressing: ArrayAddressing, key: u64) -> u64 {
    match addressing {
        ArrayAddressing::PerVolume => key,
        ArrayAddressing::Shared => ember_trace::key_block(key),
    }
}

/// Run `requests` through the clients and array of `config`; the first `warmup_requests`
/// requests warm the caches up and are not counted.
pub fn simulate_demote(
    requests: &[Request],
    warmup_requests: usize,
    config: &DemoteConfig,
) -> Result<DemoteResult, SimError> {
    simulate_demote_with(requests, warmup_requests, config, |_, _| {})
}

/// As [`simulate_demote`], calling `observe(client, path)` for every counted READ (for
/// latency distributions and timelines).
pub fn simulate_demote_with(
    requests: &[Request],
    warmup_requests: usize,
    config: &DemoteConfig,
    observe: impl FnMut(usize, ReadPath),
) -> Result<DemoteResult, SimError> {
    simulate_demote_stream(requests.iter().copied(), warmup_requests, config, observe)
}

/// As [`simulate_demote_with`] over requests in trace order from any source (a trace
/// streamed from a file: memory is the caches' state, not the trace).
pub fn simulate_demote_stream(
    requests: impl IntoIterator<Item = Request>,
    warmup_requests: usize,
    config: &DemoteConfig,
    mut observe: impl FnMut(usize, ReadPath),
) -> Result<DemoteResult, SimError> {
    if config.block_size == 0 {
        return Err(SimError::Invalid("the block size must be positive".into()));
    }
    let mut h = DemoteTopology::new(config)?;
    let mut counters = vec![ClientCounters::default(); config.clients];
    let addressing = config.addressing;
    for (i, r) in requests.into_iter().enumerate() {
        let client = match config.client_of {
            ClientOf::Single => 0,
            ClientOf::Volume => r.volume as usize,
        };
        if client >= config.clients {
            return Err(SimError::Invalid(format!(
                "request {i} is from volume {} but the DEMOTE topology has {} clients",
                r.volume, config.clients
            )));
        }
        let counted = i >= warmup_requests;
        if r.op == Op::Write {
            if counted {
                counters[client].writes += r.blocks(config.block_size).count() as u64;
            }
            continue;
        }
        for b in r.blocks(config.block_size) {
            // One client over a shared address space sees one logical unit.
            let key = match (config.client_of, addressing) {
                (ClientOf::Single, ArrayAddressing::Shared) => b,
                _ => block_key(r.volume, b),
            };
            let path =
                h.read(client, key, array_key_of(addressing, key), |k| array_key_of(addressing, k));
            if counted {
                counters[client].record(path);
                observe(client, path);
            }
        }
    }
    Ok(DemoteResult { config: *config, clients: counters })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(volume: u32, block: u64) -> Request {
        Request { time_ns: 0, volume, op: Op::Read, offset: block * 4096, length: 4096 }
    }

    fn config(clients: usize, cb: usize, ab: usize, scheme: Scheme) -> DemoteConfig {
        DemoteConfig {
            clients,
            client_blocks: cb,
            array: ArrayConfig::new(ab, scheme),
            block_size: 4096,
            client_of: ClientOf::Volume,
            addressing: ArrayAddressing::Shared,
        }
    }

    #[test]
    fn seq_loop_of_n_c_plus_n_a_minus_1_hits_the_array_only_under_demote() {
        // Section 3.3 in miniature: N_c = N_a = 4, a loop of 7 blocks.
        let reqs: Vec<Request> = (0..7 * 11).map(|i| read(0, i % 7)).collect();
        let demote = simulate_demote(&reqs, 7, &config(1, 4, 4, Scheme::Demote)).unwrap();
        let t = demote.total();
        assert_eq!(t.reads, 70);
        assert_eq!((t.client_hits, t.array_hit_count(), t.miss_count()), (0, 70, 0));
        assert_eq!(t.demotions(), 70);
        let none = simulate_demote(&reqs, 7, &config(1, 4, 4, Scheme::NoneLru)).unwrap();
        assert_eq!(none.total().miss_count(), 70);
        assert_eq!(none.total().demotions() + none.total().aborted_demotions(), 0);
    }

    #[test]
    fn paths_record_the_demote_before_the_read() {
        let mut h = DemoteTopology::new(&config(1, 1, 2, Scheme::DemoteLru)).unwrap();
        let id = |k: u64| k;
        assert_eq!(h.read(0, 1, 1, id), ReadPath::Miss(DemoteKind::None));
        // Client full: ejects 1, demote aborted (array read 1 in), 2 read from disk.
        assert_eq!(h.read(0, 2, 2, id), ReadPath::Miss(DemoteKind::Aborted));
        assert_eq!(h.read(0, 2, 2, id), ReadPath::ClientHit);
        // Ejects 2 (aborted again), 1 hits in the array.
        assert_eq!(h.read(0, 1, 1, id), ReadPath::ArrayHit(DemoteKind::Aborted));
        // Ejects 1, aborted; 3 misses and ejects the LRU array block 2; 1 ejects 3, which the
        // array also holds (DEMOTE-LRU caches what it reads: inclusive), and hits.
        assert_eq!(h.read(0, 3, 3, id), ReadPath::Miss(DemoteKind::Aborted));
        assert_eq!(h.read(0, 1, 1, id), ReadPath::ArrayHit(DemoteKind::Aborted));
        assert_eq!(h.array().keys(), vec![1, 3]);
    }

    #[test]
    fn shared_addressing_lets_clients_share_array_blocks() {
        // Two clients read block 5 of their own volumes: one shared array block.
        let reqs = vec![read(0, 5), read(1, 5)];
        let shared = simulate_demote(&reqs, 0, &config(2, 2, 2, Scheme::NoneLru)).unwrap();
        assert_eq!(shared.clients[1].array_hit_count(), 1);
        let mut cfg = config(2, 2, 2, Scheme::NoneLru);
        cfg.addressing = ArrayAddressing::PerVolume;
        let per = simulate_demote(&reqs, 0, &cfg).unwrap();
        assert_eq!(per.clients[1].miss_count(), 1);
    }

    #[test]
    fn warmup_and_writes_are_not_counted_and_bad_volumes_are_errors() {
        let mut reqs = vec![read(0, 1), read(0, 1)];
        reqs.push(Request { op: Op::Write, ..read(0, 2) });
        let r = simulate_demote(&reqs, 1, &config(1, 2, 2, Scheme::Demote)).unwrap();
        assert_eq!(r.clients[0].reads, 1);
        assert_eq!(r.clients[0].client_hits, 1);
        assert_eq!(r.clients[0].writes, 1);
        let bad = simulate_demote(&[read(3, 0)], 0, &config(2, 2, 2, Scheme::Demote));
        assert!(matches!(bad, Err(SimError::Invalid(m)) if m.contains("volume 3")));
    }
}
