//! The drain gate: requests enter and leave; shutdown closes the gate and waits until every
//! request in flight has left. Entering and leaving are one atomic add each (a hit takes the
//! gate on every request, so it must not be a lock); only the drain waits, on a condvar.
//!
//! A replacement of the cache device pauses the gate instead ([`Gate::pause_and_drain`]):
//! requests that arrive wait at the gate, holding nothing, until [`Gate::resume`], so the
//! ones in flight finish and nothing runs while the device is swapped.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// The closed bit of [`Gate::word`]; the bits below [`PAUSED`] count requests inside.
const CLOSED: u64 = 1 << 63;
/// The paused bit of [`Gate::word`]: new requests wait for [`Gate::resume`].
const PAUSED: u64 = 1 << 62;
/// The count of requests inside.
const COUNT: u64 = PAUSED - 1;

/// Counts requests in flight and refuses new ones once closed.
#[derive(Default)]
pub(crate) struct Gate {
    /// Requests inside, plus [`CLOSED`] once closed.
    word: AtomicU64,
    /// Taken only by the drain and by the last request leaving a closed gate, so the
    /// drain's check-then-wait cannot miss that wake-up.
    st: Mutex<()>,
    cv: Condvar,
}

/// One request inside the gate (leaves on drop).
pub(crate) struct Pass<'a>(&'a Gate);

impl Gate {
    /// Enter, or None if closed. While the gate is paused, waits for it to resume (or
    /// close).
    pub fn enter(&self) -> Option<Pass<'_>> {
        loop {
            let before = self.word.fetch_add(1, SeqCst);
            if before & (CLOSED | PAUSED) == 0 {
                return Some(Pass(self));
            }
            // Closed or paused: undo the count (and wake the drain if this was the last one).
            self.leave();
            if before & CLOSED != 0 {
                return None;
            }
            self.wait_resumed();
        }
    }

    /// Wait while the gate is paused and not closed.
    fn wait_resumed(&self) {
        let mut st = self.st.lock();
        while self.word.load(SeqCst) & (PAUSED | CLOSED) == PAUSED {
            self.cv.wait(&mut st);
        }
    }

    /// Pause: requests that arrive from now on wait at the gate until [`Gate::resume`];
    /// then wait, at most `timeout`, for the ones inside to leave. True if none is inside.
    /// The caller MUST call [`Gate::resume`] afterwards, whatever this returned.
    pub fn pause_and_drain(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.st.lock();
        self.word.fetch_or(PAUSED, SeqCst);
        while self.word.load(SeqCst) & COUNT > 0 {
            if self.cv.wait_until(&mut st, deadline).timed_out() {
                return self.word.load(SeqCst) & COUNT == 0;
            }
        }
        true
    }

    /// End a pause: the requests waiting at the gate enter.
    pub fn resume(&self) {
        let _st = self.st.lock();
        self.word.fetch_and(!PAUSED, SeqCst);
        self.cv.notify_all();
    }

    /// Enter for a request that outlives this call's borrow (a hit read in flight across the
    /// reader's loop, `io/read_hits.rs`): true if entered, and then [`Gate::leave_raw`] must
    /// be called once.
    pub fn enter_raw(&self) -> bool {
        match self.enter() {
            Some(pass) => {
                std::mem::forget(pass);
                true
            }
            None => false,
        }
    }

    /// Leave after [`Gate::enter_raw`] returned true.
    pub fn leave_raw(&self) {
        self.leave();
    }

    /// Requests in the gate now (the preloader yields while there are any). An enter that
    /// is being refused counts for a moment too, so after a close this can read above zero
    /// until the threads still trying to enter have given up.
    pub fn active(&self) -> u64 {
        self.word.load(SeqCst) & COUNT
    }

    /// Close and wait for every request in flight to leave. Returns false if it was already
    /// closed.
    pub fn close_and_drain(&self) -> bool {
        let mut st = self.st.lock();
        let was_open = self.word.fetch_or(CLOSED, SeqCst) & CLOSED == 0;
        // Requests waiting on a pause are refused now.
        self.cv.notify_all();
        while self.word.load(SeqCst) & COUNT > 0 {
            self.cv.wait(&mut st);
        }
        was_open
    }

    fn leave(&self) {
        let before = self.word.fetch_sub(1, SeqCst);
        if before & COUNT == 1 && before & (CLOSED | PAUSED) != 0 {
            // The last request left a closed or paused gate: wake the drain. Taking the lock
            // orders this wake-up after the drain's check (it holds the lock until it waits).
            drop(self.st.lock());
            self.cv.notify_all();
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn drain_waits_for_requests_in_flight() {
        let g = Arc::new(Gate::default());
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let t = {
            let (g, done) = (g.clone(), done.clone());
            std::thread::spawn(move || {
                let _p = g.enter().unwrap();
                tx.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(50));
                done.store(true, Ordering::SeqCst);
            })
        };
        rx.recv().unwrap();
        assert!(g.close_and_drain());
        assert!(done.load(Ordering::SeqCst), "drain returned only after the request left");
        assert!(g.enter().is_none());
        assert_eq!(g.active(), 0, "a refused enter leaves no count behind");
        assert!(!g.close_and_drain());
        t.join().unwrap();
    }

    #[test]
    fn a_pause_drains_holds_new_requests_and_resumes() {
        let g = Arc::new(Gate::default());
        let inside = g.enter().unwrap();
        assert!(!g.pause_and_drain(std::time::Duration::from_millis(20)), "one is inside");
        drop(inside);
        assert!(g.pause_and_drain(std::time::Duration::from_secs(5)));
        let entered = Arc::new(AtomicBool::new(false));
        let t = {
            let (g, entered) = (g.clone(), entered.clone());
            std::thread::spawn(move || {
                let p = g.enter();
                entered.store(true, Ordering::SeqCst);
                p.is_some()
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!entered.load(Ordering::SeqCst), "a request waits while paused");
        // A waiting request is not counted (its enter counts itself for a moment first).
        let t0 = std::time::Instant::now();
        while g.active() != 0 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(5), "a waiting request counted");
            std::thread::yield_now();
        }
        g.resume();
        assert!(t.join().unwrap(), "it enters once resumed");
        assert_eq!(g.active(), 0);

        // A close refuses the requests waiting on a pause.
        assert!(g.pause_and_drain(std::time::Duration::from_secs(5)));
        let t = {
            let g = g.clone();
            std::thread::spawn(move || g.enter().is_none())
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(g.close_and_drain());
        assert!(t.join().unwrap(), "refused by the close");
        g.resume();
        assert!(g.enter().is_none(), "still closed");
    }

    /// Many threads entering and leaving while the gate closes: the drain returns only when
    /// none is inside, and no enter succeeds after it returned.
    #[test]
    fn drain_under_contention_never_misses_a_request() {
        for _ in 0..50 {
            let g = Arc::new(Gate::default());
            let inside = Arc::new(AtomicU64::new(0));
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let (g, inside) = (g.clone(), inside.clone());
                    std::thread::spawn(move || {
                        while let Some(p) = g.enter() {
                            inside.fetch_add(1, Ordering::SeqCst);
                            std::hint::spin_loop();
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(p);
                        }
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert!(g.close_and_drain());
            assert_eq!(inside.load(Ordering::SeqCst), 0, "drained while a request was inside");
            // A refused enter counts itself for a moment before it undoes the count, so
            // `active` is exact only once no thread is still trying to enter.
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(g.active(), 0, "a refused enter leaves no count behind");
        }
    }
}
