//! The drain gate: requests enter and leave; shutdown closes the gate and waits until every
//! request in flight has left.

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
struct GateState {
    closed: bool,
    active: u64,
}

/// Counts requests in flight and refuses new ones once closed.
#[derive(Default)]
pub(crate) struct Gate {
    st: Mutex<GateState>,
    cv: Condvar,
}

/// One request inside the gate (leaves on drop).
pub(crate) struct Pass<'a>(&'a Gate);

impl Gate {
    /// Enter, or None if closed.
    pub fn enter(&self) -> Option<Pass<'_>> {
        let mut st = self.st.lock();
        if st.closed {
            return None;
        }
        st.active += 1;
        Some(Pass(self))
    }

    /// Requests in the gate now (the preloader yields while there are any).
    pub fn active(&self) -> u64 {
        self.st.lock().active
    }

    /// Close and wait for every request in flight to leave. Returns false if it was already
    /// closed.
    pub fn close_and_drain(&self) -> bool {
        let mut st = self.st.lock();
        let was_open = !st.closed;
        st.closed = true;
        while st.active > 0 {
            self.cv.wait(&mut st);
        }
        was_open
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut st = self.0.st.lock();
        st.active -= 1;
        if st.active == 0 {
            self.0.cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
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
        assert!(!g.close_and_drain());
        t.join().unwrap();
    }
}
