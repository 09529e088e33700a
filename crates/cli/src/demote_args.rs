//! `ember serve`'s flags for Wong & Wilkes' two tiers (docs/guide/demote.md "Two real
//! tiers"): `--demote` makes a client tier, `--array-scheme` an array tier.

use clap::Args;
use ember_serve::config::{NbdBackingSettings, TierSettings};

/// The client tier's and the array tier's flags.
#[derive(Args, Debug)]
pub struct DemoteArgs {
    /// Client tier: hand every clean block the replacement policy evicts to the NBD backing
    /// as a DEMOTE (ember's `x-ember:demote` extension, docs/reference/nbd.md), asynchronously. A
    /// backing that refuses the extension gets none: the tier then runs as NONE-LRU and says
    /// so at start.
    #[arg(long)]
    pub demote: bool,

    /// Client tier: at most this many DEMOTEs awaiting the array's reply per backing; a
    /// DEMOTE beyond them is dropped and counted (`demotes_dropped`).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub demote_queue: usize,

    /// Array tier: manage the cache as this scheme of Wong & Wilkes (none-lru, demote-lru,
    /// demote, demote-slru, demote-adapt-uni, demote-adapt-exp), with the code `ember demote`
    /// simulates, and take DEMOTEs from client tiers (every scheme but none-lru). Replaces
    /// --policy.
    #[arg(long, value_name = "SCHEME")]
    pub array_scheme: Option<String>,

    /// Array tier: `sieve` offers a DEMOTE of a block the cache does not hold to the
    /// admission sieve (--admission) as an allocation-write, and drops it if refused
    /// (`demotes_refused_sieve`); `all` lets the scheme place every DEMOTE. Under aod both
    /// decide alike.
    #[arg(long, value_name = "RULE", default_value = "sieve", value_parser = ["sieve", "all"])]
    pub demote_admission: String,

    /// An NBD backing whose connection breaks (the array tier restarts) is reconnected and
    /// the request sent again, for at most this many seconds before it fails (0: never).
    /// FLUSH is not sent again: it fails, as the writes it covered went to the server that
    /// is gone.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub nbd_reconnect: f64,

    /// An NBD backing over TCP whose server host has been silent this many seconds (at
    /// least 3; 0: never) fails its connection, and with it the requests in flight (I/O
    /// errors; --nbd-reconnect then starts): TCP keepalive probes, which a live host answers
    /// however busy its server is, and TCP_USER_TIMEOUT, which also fails it if the server
    /// takes nothing from the socket that long while there is more to send. Without it, a
    /// host that vanishes without closing the connection leaves the requests it
    /// acknowledged waiting for good.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub nbd_dead_after: f64,
}

impl DemoteArgs {
    /// The tiers these flags ask for.
    pub fn tiers(&self) -> TierSettings {
        TierSettings {
            demote: self.demote,
            demote_queue: self.demote_queue,
            array_scheme: self.array_scheme.clone(),
            demote_admission: self.demote_admission.clone(),
        }
    }

    /// The NBD backings' reconnection and dead-peer times, trusting them if `trust_unchanged`.
    pub fn nbd_backing(&self, trust_unchanged: bool) -> NbdBackingSettings {
        NbdBackingSettings {
            trust_unchanged,
            reconnect_secs: self.nbd_reconnect,
            dead_after_secs: self.nbd_dead_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        d: DemoteArgs,
    }

    #[test]
    fn flags_parse_and_check() {
        use ember_policy::demote::Scheme;
        use ember_serve::array_replacement;
        let c = Cli::try_parse_from(["serve", "--array-scheme", "demote-adapt-exp"]).unwrap();
        assert_eq!(c.d.tiers().scheme("lru").unwrap(), Some(Scheme::DemoteAdaptExp));
        assert_eq!(c.d.tiers().queue(), None);
        let e = c.d.tiers().scheme("arc").unwrap_err().to_string();
        assert!(e.contains("drop --policy arc"), "{e}");
        let c = Cli::try_parse_from(["serve", "--array-scheme", "mru"]).unwrap();
        assert!(c.d.tiers().scheme("lru").unwrap_err().to_string().contains("unknown scheme"));
        let c = Cli::try_parse_from(["serve", "--demote", "--demote-queue", "0"]).unwrap();
        assert_eq!(c.d.tiers().queue(), Some(1));
        assert_eq!(c.d.nbd_backing(false).reconnect().unwrap(), None);
        let c = Cli::try_parse_from(["serve", "--nbd-reconnect", "2.5"]).unwrap();
        assert_eq!(
            c.d.nbd_backing(false).reconnect().unwrap(),
            Some(std::time::Duration::from_millis(2500))
        );
        let c = Cli::try_parse_from(["serve", "--nbd-reconnect=-1"]).unwrap();
        assert!(c.d.nbd_backing(false).reconnect().is_err());
        let secs = |s: u64| Some(std::time::Duration::from_secs(s));
        assert_eq!(c.d.nbd_backing(false).dead_after().unwrap(), secs(30), "the default");
        let c = Cli::try_parse_from(["serve", "--nbd-dead-after", "1"]).unwrap();
        assert_eq!(c.d.nbd_backing(false).dead_after().unwrap(), secs(3), "at least 3 s");
        let c = Cli::try_parse_from(["serve", "--nbd-dead-after", "0"]).unwrap();
        assert_eq!(c.d.nbd_backing(false).dead_after().unwrap(), None);
        let c = Cli::try_parse_from(["serve", "--nbd-dead-after=-2"]).unwrap();
        assert!(c.d.nbd_backing(false).dead_after().is_err());
        let r = array_replacement(Scheme::Demote, 8);
        assert!(r.takes_demotes() && r.capacity() == 8 && r.name() == "demote");
        assert!(!array_replacement(Scheme::NoneLru, 8).takes_demotes());
        // The defaults are the server's.
        let c = Cli::try_parse_from(["serve"]).unwrap();
        assert_eq!(c.d.tiers(), TierSettings::default());
        assert_eq!(c.d.nbd_backing(false), NbdBackingSettings::default());
    }
}
