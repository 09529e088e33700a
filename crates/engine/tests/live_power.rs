//! Power-cut trials of the changes made while serving: a flush on demand
//! (`Engine::flush_all`), a switch of the write policy (`Engine::set_write_mode`) and a
//! settings change (write-back tuning, replacement policy, admission sieve), each under the
//! load of the power-cut harness's client (`ember_testkit::power`: random writes, partial
//! writes, FUA, TRIM, WRITE_ZEROES, reads checked against the model, FLUSHes).
//!
//! The power fails on the cache device and backing together at a random I/O, so it lands
//! before, inside and after the operation; then the cache restarts on the same devices
//! (recovery follows the superblock: a persisted dirty map when it says write-back persist)
//! and every byte must hold its value at the last durable point, or the value of a write
//! issued after it. A durable point is:
//!
//! - a FLUSH (or a FUA write) acknowledged while every policy that may have been in force
//!   during it promises durability at a FLUSH (write-through, write-around, write-back
//!   flush, write-back persist): a FLUSH that overlaps a switch counts only when both sides
//!   of the switch promise it;
//! - a `flush_all` that returned, under every policy (ordered and unsafe write-back too).
//!
//! When no write-back persist was involved, backing alone must hold it as well (the cache
//! device lost). The client also checks every read while the operation runs, and any
//! error before the power cut fails the trial.
//!
//! `EMBER_POWER_TRIALS=N` sets the trials per operation (default 20): the flush on demand
//! and the settings change cycle through the six policies, the switches start from a random
//! policy and switch to random targets back to back.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::fault::PowerCut;
use ember_engine::{DirtyLimit, Engine, EngineError, WriteMode, WritebackConfig};
use ember_policy::admission::{Aod, Sieve, Wmna};
use ember_policy::replacement::Kind;
use ember_testkit::engine::{rng, BS};
use ember_testkit::power::{self, Bench, Model, Power, Rules, VOL};
use parking_lot::Mutex;
use rand::Rng;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Duration;

/// The operation a trial runs while the client runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Live {
    /// The client calls `flush_all` between its requests.
    FlushAll,
    /// An operator thread switches the write policy to random targets, back to back.
    Switch,
    /// An operator thread changes the write-back tuning, the replacement policy and the
    /// admission sieve, back to back.
    Settings,
}

/// Does a FLUSH acknowledged under `mode` promise every acknowledged write on a device?
fn flush_durable(mode: WriteMode) -> bool {
    !matches!(mode, WriteMode::OrderedWriteBack | WriteMode::UnsafeWriteBack)
}

/// The policies that may be in force: the one the last switch left, and the target of a
/// switch under way (or one that failed: then either may be).
struct Track {
    policies: Mutex<(WriteMode, Option<WriteMode>)>,
    /// Write-back persist was in force at some point.
    persist_seen: AtomicBool,
    /// The negative control: count every FLUSH as durable, whatever the policy.
    blind: bool,
}

impl Track {
    fn new(mode: WriteMode, blind: bool) -> Self {
        Track {
            blind,
            policies: Mutex::new((mode, None)),
            persist_seen: AtomicBool::new(mode == WriteMode::WriteBackPersist),
        }
    }
    /// Every policy that may be in force promises durability at a FLUSH.
    fn durable(&self) -> bool {
        let (now, to) = *self.policies.lock();
        self.blind || (flush_durable(now) && to.is_none_or(flush_durable))
    }
    fn begin(&self, to: WriteMode) {
        self.policies.lock().1 = Some(to);
        if to == WriteMode::WriteBackPersist {
            self.persist_seen.store(true, SeqCst);
        }
    }
    fn done(&self, to: WriteMode) {
        *self.policies.lock() = (to, None);
    }
    /// The policy to restart with: the last one a switch completed to, or its target.
    fn last(&self) -> WriteMode {
        let (now, to) = *self.policies.lock();
        to.unwrap_or(now)
    }
}

/// The trial's rules for the client of `ember_testkit::power`: the durability rule above
/// and, for [`Live::FlushAll`], a `flush_all` at random between requests, counting how many
/// completed and how many the power cut ended.
struct LiveRules<'a> {
    e: &'a Engine,
    live: Live,
    power: &'a Power,
    track: &'a Track,
    made: u64,
    cut_inside: u64,
}

impl Rules for LiveRules<'_> {
    fn durable(&self) -> bool {
        self.track.durable()
    }
    fn request(&mut self, x: u32, m: &mut Model) -> Option<Result<(), String>> {
        if self.live != Live::FlushAll || x >= 92 {
            return None;
        }
        let res = self.e.flush_all(&mut |_| {}).map_err(|e| format!("flush_all: {e}"));
        match res {
            Ok(_) => {
                m.flushed();
                self.made += 1;
            }
            Err(_) if self.power.fired() => self.cut_inside += 1,
            Err(_) => {}
        }
        Some(res.map(|_| ()))
    }
}

/// The client with the trial's rules. Returns the model, how many `flush_all` calls
/// completed and how many the power cut ended.
fn client(
    e: &Engine,
    live: Live,
    seed: u64,
    init: Vec<u8>,
    power: &Power,
    track: &Track,
) -> Result<(Model, u64, u64), String> {
    let mut rules = LiveRules { e, live, power, track, made: 0, cut_inside: 0 };
    let (m, _) = power::client(e, seed, init, power, &mut rules)?;
    Ok((m, rules.made, rules.cut_inside))
}

/// The operator of [`Live::Switch`] and [`Live::Settings`]: changes back to back, a short
/// random pause between them, until `stop`. Returns how many changes it made, how many the
/// power cut ended, and an error it saw before the cut.
fn operator(
    e: &Engine,
    live: Live,
    seed: u64,
    power: &Power,
    track: &Track,
    stop: &AtomicBool,
) -> (u64, u64, Option<String>) {
    let mut r = rng(seed ^ 0x09E);
    let (mut made, mut cut_inside) = (0, 0);
    while !stop.load(SeqCst) && !power.fired() {
        std::thread::sleep(Duration::from_micros(r.gen_range(0..1500)));
        let res: Result<(), EngineError> = match live {
            Live::FlushAll => return (0, 0, None),
            Live::Switch => {
                let now = track.last();
                let others: Vec<WriteMode> =
                    WriteMode::ALL.into_iter().filter(|&m| m != now).collect();
                let to = others[r.gen_range(0..others.len())];
                track.begin(to);
                let res = e.set_write_mode(to, &mut |_| {});
                if res.is_ok() {
                    track.done(to);
                }
                res.map(|_| ())
            }
            Live::Settings => match r.gen_range(0..3) {
                0 => {
                    // At least a few dirty blocks: ordered write-back waits for room, never writes
                    // through.
                    let max = r.gen_range(4..=40u64);
                    let wb = WritebackConfig {
                        max_dirty: Some(DirtyLimit::Blocks(max)),
                        min_dirty: Some(DirtyLimit::Blocks(r.gen_range(0..=max))),
                        max_epochs: r.gen_range(2..=6),
                        batch_blocks: r.gen_range(1..=8),
                        lru_flush_order: r.gen_bool(0.5),
                    };
                    e.set_writeback(&wb).map(|_| ())
                }
                1 => {
                    let kinds = [Kind::Lru, Kind::Fifo, Kind::Clock, Kind::Sieve];
                    e.set_replacement(kinds[r.gen_range(0..kinds.len())])
                }
                _ => {
                    let sieve = if r.gen_bool(0.5) {
                        Sieve::Continuous(Box::new(Aod))
                    } else {
                        Sieve::Continuous(Box::new(Wmna))
                    };
                    e.set_admission(sieve)
                }
            },
        };
        match res {
            Ok(()) => made += 1,
            Err(_) if power.fired() => cut_inside += 1,
            Err(err) => return (made, cut_inside, Some(format!("{live:?}: {err}"))),
        }
    }
    (made, cut_inside, None)
}

/// What a trial saw.
#[derive(Default)]
struct Seen {
    /// Trials whose power cut came mid-run.
    cuts: u64,
    /// Operations completed, and operations the power cut ended (it came inside them).
    made: u64,
    cut_inside: u64,
    /// Trials with a byte that holds none of its allowed values, with a sample.
    bad: u64,
    sample: Vec<String>,
}

/// One trial: `mode` to start with, the power cut after `cut_after` I/Os (0: none, the
/// calibration run, which must see no error). Returns the I/Os of the run up to the crash.
fn trial(
    live: Live,
    mode: WriteMode,
    seed: u64,
    cut_after: u64,
    pc: PowerCut,
    blind: bool,
    seen: &mut Seen,
) -> u64 {
    let bench = Bench::new(seed);
    let init = bench.backing_mem.snapshot();
    if cut_after > 0 {
        bench.power.arm(cut_after, pc);
    }
    let track = Track::new(mode, blind);
    let model = match bench.open(mode) {
        Ok(e) => {
            let stop = AtomicBool::new(false);
            let (client, (made, cut_inside, err)) = std::thread::scope(|s| {
                let op = s.spawn(|| operator(&e, live, seed, &bench.power, &track, &stop));
                let c = client(&e, live, seed, init.clone(), &bench.power, &track);
                stop.store(true, SeqCst);
                (c, op.join().unwrap())
            });
            let (model, flushes, inside) =
                client.unwrap_or_else(|err| panic!("seed {seed} ({live:?}, {mode}): {err}"));
            if let Some(err) = err {
                panic!("seed {seed} ({live:?}, {mode}): before the power cut: {err}");
            }
            seen.made += made + flushes;
            seen.cut_inside += cut_inside + inside;
            // Drop = crash: nothing more is written.
            drop(e);
            model
        }
        Err(err) => {
            assert!(bench.power.fired(), "seed {seed}: open failed before the power cut: {err}");
            Model::new(init)
        }
    };
    let ios = bench.power.ios.load(SeqCst);
    if cut_after == 0 {
        return ios;
    }
    let cut = bench.power.fired() && bench.cache.is_dead();
    seen.cuts += u64::from(cut);
    bench.power.revive();
    let backing_alone = bench.backing_mem.snapshot();
    // Restart on the same cache device (recovery follows its superblock), read everything,
    // then a clean stop and a write-through start, which writes any recovered dirty block
    // to backing: backing must end with what the restarted cache served.
    let e = bench.open(track.last()).expect("restart after the power cut");
    let mut got = vec![0u8; VOL as usize];
    e.volume("v").unwrap().read(0, &mut got).unwrap();
    e.shutdown().expect("clean stop after the restart");
    drop(e);
    drop(bench.open(WriteMode::WriteThrough).expect("write-through start"));
    assert!(
        bench.backing_mem.snapshot() == got,
        "seed {seed}: the restarted cache's data did not reach backing intact"
    );
    let mut wrong = model.violations(&got);
    if wrong.is_none() && !track.persist_seen.load(SeqCst) {
        // No write-back persist: backing alone (the cache device lost) holds it too.
        wrong = model.violations(&backing_alone);
    }
    if let Some((off, count)) = wrong {
        seen.bad += 1;
        if seen.sample.len() < 3 {
            seen.sample.push(format!(
                "seed {seed} ({live:?} from {mode}, cut at I/O {cut_after}): {count} bytes wrong \
                 from byte {off} (block {})",
                off as u64 / BS
            ));
        }
    }
    ios
}

fn trials() -> u64 {
    std::env::var("EMBER_POWER_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(20)
}

/// Runs `n` trials of `live`, the starting policy of each drawn by `mode_of(trial)`, and
/// checks them: no violation, every trial cut mid-run.
fn run(live: Live, n: u64, mode_of: impl Fn(u64) -> WriteMode) -> Seen {
    let seen = run_trials(live, n, mode_of, false);
    assert_eq!(seen.bad, 0, "{:?}", seen.sample);
    assert_eq!(seen.cuts, n, "only {} of {n} trials were cut mid-run", seen.cuts);
    seen
}

/// Runs `n` trials (see [`run`]); `blind`: count every FLUSH as durable.
fn run_trials(live: Live, n: u64, mode_of: impl Fn(u64) -> WriteMode, blind: bool) -> Seen {
    let mut seen = Seen::default();
    // Calibrate on an uncut run of each policy in use (no error, every request run): the
    // largest I/O count bounds the cut points.
    let mut total = 10;
    for t in 0..n.min(6) {
        total = total.max(trial(live, mode_of(t), 1 + t, 0, PowerCut::DROP_ALL, blind, &mut seen));
    }
    for t in 0..n {
        let seed = 5000 + t;
        let mut r = rng(seed ^ 0xC07);
        let at = r.gen_range(1..=total);
        let pc = if t % 3 == 2 { PowerCut { survive: 0.5, seed } } else { PowerCut::DROP_ALL };
        trial(live, mode_of(t), seed, at, pc, blind, &mut seen);
    }
    println!(
        "{live:?}: {n} power-cut trials ({} cut mid-run), {} with violations; {} operations \
         completed, {} ended by the cut inside them",
        seen.cuts, seen.bad, seen.made, seen.cut_inside
    );
    seen
}

#[test]
fn a_flush_on_demand_survives_power_cuts_under_every_policy() {
    let n = trials();
    let seen = run(Live::FlushAll, n, |t| WriteMode::ALL[(t % 6) as usize]);
    assert!(seen.made > 0 || n == 0, "no flush on demand completed");
}

#[test]
fn a_switch_of_write_policy_survives_power_cuts_between_random_pairs() {
    let n = trials();
    let seen = run(Live::Switch, n, |t| {
        WriteMode::ALL[rng(t ^ 0x5717).gen_range(0..WriteMode::ALL.len())]
    });
    assert!(seen.made > 0 || n == 0, "no switch completed");
}

#[test]
fn a_settings_change_survives_power_cuts_under_every_policy() {
    let n = trials();
    let seen = run(Live::Settings, n, |t| WriteMode::ALL[(t % 6) as usize]);
    assert!(seen.made > 0 || n == 0, "no settings change completed");
}

/// The negative control: the same trials, counting unsafe write-back's FLUSHes as durable,
/// must find lost writes (so the check can fail).
#[test]
fn the_check_catches_flushes_that_promise_nothing() {
    let seen = run_trials(Live::Settings, 40, |_| WriteMode::UnsafeWriteBack, true);
    assert!(seen.bad > 0, "unsafe write-back lost nothing in 40 power cuts: the check is blind");
}
