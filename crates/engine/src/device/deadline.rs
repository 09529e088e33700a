//! I/O with a deadline: the call runs on a helper thread and the caller waits at most the
//! timeout for it. A device that hangs then fails the call with `ETIMEDOUT` instead of
//! holding the request (and its block locks) forever; the helper stays stuck in the device
//! and never touches the caller's buffer (it reads into and writes from its own copy).
//!
//! The helpers are a small pool shared by every device with a timeout, started at the first
//! such I/O. Once all of them hang, later calls wait in the queue and time out too. The hop
//! costs a copy and two thread switches per I/O, which is why the timeout is off unless
//! configured (`--io-timeout`).

use super::{AlignedBuf, Device};
use crossbeam::channel::{bounded, unbounded, RecvTimeoutError, Sender};
use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Helper threads in the pool.
const HELPERS: usize = 8;

type Job = Box<dyn FnOnce() + Send>;

/// The pool's queue, started at first use; `None` if no helper could start.
fn queue() -> Option<&'static Sender<Job>> {
    static QUEUE: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = unbounded::<Job>();
            let mut started = 0;
            for i in 0..HELPERS {
                let rx = rx.clone();
                let spawned =
                    std::thread::Builder::new().name(format!("ember-io-{i}")).spawn(move || {
                        for job in rx.iter() {
                            job();
                        }
                    });
                if spawned.is_ok() {
                    started += 1;
                }
            }
            (started > 0).then_some(tx)
        })
        .as_ref()
}

/// Run `f` on a helper and wait at most `timeout` for its outcome.
fn run<T: Send + 'static>(
    timeout: Duration,
    what: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let Some(q) = queue() else {
        return Err(io::Error::other("no I/O helper thread could start"));
    };
    let (tx, rx) = bounded(1);
    q.send(Box::new(move || {
        let _ = tx.send(f());
    }))
    .map_err(|_| io::Error::other("the I/O helper threads are gone"))?;
    match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} did not complete within {} ms", timeout.as_millis()),
        )),
        Err(RecvTimeoutError::Disconnected) => Err(io::Error::other(format!("{what}: lost"))),
    }
}

/// [`Device::read_at`] within `timeout`.
pub(crate) fn read_at(
    dev: &Arc<dyn Device>,
    timeout: Duration,
    offset: u64,
    buf: &mut [u8],
) -> io::Result<()> {
    let d = dev.clone();
    let len = buf.len();
    let got = run(timeout, "read", move || {
        let mut b = AlignedBuf::new(len);
        d.read_at(offset, b.as_mut_slice()).map(|()| b)
    })?;
    buf.copy_from_slice(got.as_slice());
    Ok(())
}

/// [`Device::write_at`] within `timeout`.
pub(crate) fn write_at(
    dev: &Arc<dyn Device>,
    timeout: Duration,
    offset: u64,
    data: &[u8],
) -> io::Result<()> {
    let d = dev.clone();
    let mut b = AlignedBuf::new(data.len());
    b.as_mut_slice().copy_from_slice(data);
    run(timeout, "write", move || d.write_at(offset, b.as_slice()))
}

/// [`Device::sync`] within `timeout`.
pub(crate) fn sync(dev: &Arc<dyn Device>, timeout: Duration) -> io::Result<()> {
    let d = dev.clone();
    run(timeout, "sync", move || d.sync())
}

/// [`Device::trim`] (or, with `zero`, [`Device::write_zeroes`]) within `timeout`.
pub(crate) fn discard(
    dev: &Arc<dyn Device>,
    timeout: Duration,
    offset: u64,
    len: u64,
    zero: bool,
) -> io::Result<()> {
    let d = dev.clone();
    run(timeout, if zero { "write-zeroes" } else { "trim" }, move || {
        if zero {
            d.write_zeroes(offset, len)
        } else {
            d.trim(offset, len)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    /// A device whose reads never return.
    struct Hung;

    impl Device for Hung {
        fn size(&self) -> u64 {
            1 << 20
        }
        fn read_at(&self, _: u64, _: &mut [u8]) -> io::Result<()> {
            std::thread::sleep(Duration::from_secs(3600));
            Ok(())
        }
        fn write_at(&self, _: u64, _: &[u8]) -> io::Result<()> {
            Ok(())
        }
        fn sync(&self) -> io::Result<()> {
            Ok(())
        }
        fn trim(&self, _: u64, _: u64) -> io::Result<()> {
            Ok(())
        }
        fn describe(&self) -> String {
            "hung".into()
        }
    }

    #[test]
    fn a_hung_read_times_out_and_a_working_device_answers() {
        let hung: Arc<dyn Device> = Arc::new(Hung);
        let mut buf = [0u8; 512];
        let t = std::time::Instant::now();
        let e = read_at(&hung, Duration::from_millis(50), 0, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(5));
        let mem: Arc<dyn Device> = Arc::new(MemDevice::new(1 << 20));
        write_at(&mem, Duration::from_secs(5), 4096, &[7u8; 512]).unwrap();
        read_at(&mem, Duration::from_secs(5), 4096, &mut buf).unwrap();
        assert_eq!(buf, [7u8; 512]);
        sync(&mem, Duration::from_secs(5)).unwrap();
        discard(&mem, Duration::from_secs(5), 4096, 512, true).unwrap();
        read_at(&mem, Duration::from_secs(5), 4096, &mut buf).unwrap();
        assert_eq!(buf, [0u8; 512]);
    }
}
