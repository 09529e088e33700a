use super::*;
use crate::demote::topology::{simulate_demote, ArrayAddressing, ClientOf, DemoteConfig};

fn req(volume: u32, block: u64, op: Op, i: u64) -> Request {
    Request { time_ns: i * 1000, volume, op, offset: block * 4096, length: 4096 }
}

/// Two clients, partly shared blocks, reads only.
fn reads(n: u64) -> Vec<Request> {
    let mut x = 11u64;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (i % 2) as u32;
            let block =
                if x.is_multiple_of(3) { x % 300 } else { 1000 + v as u64 * 1000 + x % 400 };
            req(v, block, Op::Read, i)
        })
        .collect()
}

fn model(scheme: Scheme, array_sieve: SieveSpec, rule: DemoteAdmission) -> DeploymentModel {
    let client = |k: usize| ClientTierModel {
        name: format!("client{k}"),
        policy: Spec::from(ember_policy::Kind::Lru),
        sieve: SieveSpec::Aod,
        capacity: 64,
        writes: ClientWrites::Through,
        demotes: true,
        array_volumes: vec![0],
        latency_ms: 0.0,
    };
    DeploymentModel {
        clients: vec![client(0), client(1)],
        array: ArrayTierModel {
            name: "array".into(),
            scheme,
            sieve: array_sieve,
            demote_admission: rule,
            capacity: 128,
            latency_ms: 0.2,
            backing_latency_ms: 10.0,
            aborted_demote_ms: 0.16,
        },
        block_size: 4096,
        routes: vec![Some(Route { client: 0, volume: 0 }), Some(Route { client: 1, volume: 0 })],
        crash: None,
    }
}

/// LRU clients admitting every miss over an unsieved array, both reading one shared array
/// volume: exactly `ember demote`'s counters (shared addressing), for every scheme.
#[test]
fn a_plain_deployment_is_wong_and_wilkes_hierarchy() {
    let trace = reads(20_000);
    for scheme in Scheme::ALL {
        let d = simulate_deployment(
            trace.iter().copied(),
            &model(scheme, SieveSpec::Aod, DemoteAdmission::All),
            0,
        )
        .unwrap();
        let config = DemoteConfig {
            clients: 2,
            client_blocks: 64,
            array: ArrayConfig::new(128, scheme),
            block_size: 4096,
            client_of: ClientOf::Volume,
            addressing: ArrayAddressing::Shared,
        };
        let w = simulate_demote(&trace, 0, &config).unwrap();
        for (c, want) in d.clients.iter().zip(&w.clients) {
            assert_eq!(&c.paths, want, "{scheme}");
            assert_eq!(c.demotes_sent, want.demotions() + want.aborted_demotions(), "{scheme}");
        }
        let t = w.total();
        assert_eq!(d.array.read_hits, t.array_hit_count(), "{scheme}");
        assert_eq!(d.array.demotes_stored, t.demotions(), "{scheme}");
        assert_eq!(d.array.demotes_aborted, t.aborted_demotions(), "{scheme}");
        assert_eq!(d.array.backing_reads, t.miss_count(), "{scheme}");
        assert_eq!(d.array.demotes_refused, 0);
        assert!(d.mean_latency_ms > 0.0);
    }
}

/// A sieved array refuses DEMOTEs of blocks it has not seen missed often enough under
/// `sieve`, takes them all under `all`; the same sieve under AOD changes nothing.
#[test]
fn a_sieved_array_refuses_demotes_under_the_sieve_rule() {
    let trace = reads(20_000);
    let c = ember_policy::admission::SieveStoreCConfig {
        t1: 2,
        t2: 2,
        ..ember_policy::admission::SieveStoreCConfig::default()
    };
    let run = |sieve: SieveSpec, rule| {
        simulate_deployment(trace.iter().copied(), &model(Scheme::Demote, sieve, rule), 0).unwrap()
    };
    let sieved = run(SieveSpec::SieveStoreC(c), DemoteAdmission::Sieve);
    let all = run(SieveSpec::SieveStoreC(c), DemoteAdmission::All);
    assert!(sieved.array.demotes_refused > 0, "{:?}", sieved.array);
    assert_eq!(all.array.demotes_refused, 0);
    assert!(sieved.array.demotes_stored < all.array.demotes_stored);
    assert!(sieved.array.allocations_refused > 0);
    let aod_sieve = run(SieveSpec::Aod, DemoteAdmission::Sieve);
    let aod_all = run(SieveSpec::Aod, DemoteAdmission::All);
    assert_eq!(aod_sieve.array.read_hits, aod_all.array.read_hits);
    assert_eq!(aod_sieve.array.demotes_stored, aod_all.array.demotes_stored);
}

/// Writes: a write-through client sends every write to the array, which allocates its
/// misses; a write-back client counts them dirty; an unmapped trace volume is an error.
#[test]
fn writes_reach_the_array_and_unmapped_volumes_are_errors() {
    let trace: Vec<Request> = (0..10)
        .map(|i| req(0, (i / 2) % 3, if i % 2 == 0 { Op::Write } else { Op::Read }, i))
        .collect();
    let m = model(Scheme::Demote, SieveSpec::Aod, DemoteAdmission::Sieve);
    let d = simulate_deployment(trace.iter().copied(), &m, 0).unwrap();
    assert_eq!(d.clients[0].writes, 5);
    assert_eq!(d.array.writes, 5);
    assert_eq!(d.clients[0].dirty_writes, 0);
    assert_eq!(d.clients[0].read_hits, 5, "every read follows a write of its block");
    let mut back = m.clone();
    back.clients[0].writes = ClientWrites::Back;
    let d = simulate_deployment(trace.iter().copied(), &back, 0).unwrap();
    assert_eq!(d.clients[0].dirty_writes, 5);
    let bad = simulate_deployment([req(2, 0, Op::Read, 0)], &m, 0);
    assert!(matches!(bad, Err(SimError::Invalid(e)) if e.contains("trace volume 2")));
}

/// A warm-up period runs but is not counted: the counts after it are the whole run's minus
/// the warm-up's own, for every client and the array.
#[test]
fn the_warm_up_is_run_but_not_counted() {
    let trace = reads(10_000);
    let m = model(Scheme::Demote, SieveSpec::Aod, DemoteAdmission::Sieve);
    let whole = simulate_deployment(trace.iter().copied(), &m, 0).unwrap();
    let head = simulate_deployment(trace[..4_000].iter().copied(), &m, 0).unwrap();
    let tail = simulate_deployment(trace.iter().copied(), &m, 4_000).unwrap();
    assert_eq!(tail.requests, 6_000);
    for k in 0..2 {
        let (w, h, t) = (&whole.clients[k], &head.clients[k], &tail.clients[k]);
        assert_eq!(t.paths.reads, w.paths.reads - h.paths.reads);
        assert_eq!(t.read_hits, w.read_hits - h.read_hits);
        assert_eq!(t.demotes_sent, w.demotes_sent - h.demotes_sent);
    }
    assert_eq!(tail.array.read_hits, whole.array.read_hits - head.array.read_hits);
    assert_eq!(tail.array.demotes_stored, whole.array.demotes_stored - head.array.demotes_stored);
}

/// The array crashes halfway: it restarts empty, its clients' DEMOTEs of blocks they got
/// from the old array are refused as stale, and a warmup log preloads it so that more of its
/// READS hit after the restart than after a cold one. A crash past the trace's end is an
/// error.
#[test]
fn an_array_crash_restarts_it_cold_or_warm_from_its_log() {
    use crate::demote::array_restart::{ArrayCrash, ArrayWarmup};
    use ember_policy::warmup::SelectorKind;
    let trace = reads(20_000);
    let mut m = model(Scheme::DemoteLru, SieveSpec::Aod, DemoteAdmission::Sieve);
    let whole = simulate_deployment(trace.iter().copied(), &m, 0).unwrap();
    assert!(whole.restart.is_none());
    assert_eq!(whole.array.demotes_refused_stale, 0, "reads only: every copy is fresh");
    let warmup = ArrayWarmup {
        selector: SelectorKind::LastK,
        seed: 1,
        budget_blocks: 128,
        region_blocks: 1,
        log_records: 1 << 20,
    };
    m.crash = Some(ArrayCrash { after_requests: 10_000, warmup: None });
    let cold = simulate_deployment(trace.iter().copied(), &m, 0).unwrap();
    m.crash = Some(ArrayCrash { after_requests: 10_000, warmup: Some(warmup) });
    let warm = simulate_deployment(trace.iter().copied(), &m, 0).unwrap();
    let (c, w) = (cold.restart.as_ref().unwrap(), warm.restart.as_ref().unwrap());
    assert_eq!((c.planned_blocks, c.preloaded_blocks), (0, 0));
    assert_eq!((w.planned_blocks, w.preloaded_blocks), (128, 128), "a full array's worth");
    assert!(c.array.demotes_refused_stale > 0, "{:?}", c.array);
    assert_eq!(c.array.demotes_refused_stale, cold.array.demotes_refused_stale);
    assert!(c.array.reads > 0 && c.array.reads < cold.array.reads);
    assert!(w.array.hit_ratio > c.array.hit_ratio, "warm {:?} cold {:?}", w.array, c.array);
    // Before the crash both runs are the uncrashed one: the counts up to the crash agree.
    assert_eq!(cold.array.reads - c.array.reads, warm.array.reads - w.array.reads);
    // The clients' counts since the restart: what the restarted array received from them.
    let sent: u64 = c.clients.iter().map(|x| x.demotes_sent).sum();
    assert!(sent > 0 && sent == c.array.demotes_received, "{:?}", c.clients);
    let reads: u64 = c.clients.iter().map(|x| x.paths.reads - x.paths.client_hits).sum();
    assert_eq!(reads, c.array.reads);
    for (since, all) in c.clients.iter().zip(&cold.clients) {
        assert!(since.demotes_sent < all.demotes_sent && since.hit_ratio > 0.0, "{since:?}");
    }
    m.crash = Some(ArrayCrash { after_requests: 30_000, warmup: None });
    let late = simulate_deployment(trace.iter().copied(), &m, 0);
    assert!(matches!(late, Err(SimError::Invalid(e)) if e.contains("after request 30000")));
}
