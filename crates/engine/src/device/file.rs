//! A regular file or a block device, read and written with pread/pwrite, optionally with
//! O_DIRECT (bypassing the page cache, as a cache device on a real SSD should).

use super::identity::{digest, Identity};
use super::{check_range, write_zeroes_by_writes, Device, ReadBuf, ReadPart, ReadsDone};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// Alignment O_DIRECT I/O is done at (offsets, lengths and buffer addresses).
pub const DIRECT_ALIGN: usize = 4096;

/// `BLKZEROOUT` (`_IO(0x12, 127)`, linux/fs.h): zero a byte range of a block device, with
/// the device's own zeroing command (WRITE ZEROES / WRITE SAME) when it has one.
const BLKZEROOUT: libc::c_ulong = 0x127f;
/// `BLKSSZGET` (`_IO(0x12, 104)`): the logical sector size.
const BLKSSZGET: libc::c_ulong = 0x1268;

/// How to open a [`FileDevice`].
#[derive(Clone, Copy, Debug, Default)]
pub struct FileOptions {
    /// Open with O_DIRECT. Unaligned requests go through an aligned bounce buffer
    /// (read-modify-write for writes; the engine serializes writes on a block, so this is safe
    /// under it).
    pub direct: bool,
    /// Create a regular file of this size if the path does not exist (or extend a shorter one).
    pub create_size: Option<u64>,
    /// Hold an exclusive lock (`flock`) on the file for as long as the device is open, and
    /// fail at once if another open file holds one: two ember processes on one cache device
    /// would allocate the same blocks and overwrite each other's superblocks.
    pub exclusive: bool,
}

/// Take `file`'s exclusive `flock` without waiting (released when the file closes).
fn lock_exclusive(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this File owns; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            "in use by another process (another ember holds its lock); stop it first",
        ));
    }
    Err(e)
}

/// A file or block device.
pub struct FileDevice {
    file: File,
    path: PathBuf,
    size: u64,
    direct: bool,
    block_device: bool,
}

impl FileDevice {
    /// Open `path` for reading and writing.
    pub fn open(path: &Path, opts: FileOptions) -> io::Result<Self> {
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let mut oo = OpenOptions::new();
        oo.read(true).write(true);
        if opts.create_size.is_some() {
            oo.create(true);
        }
        if opts.direct {
            oo.custom_flags(libc::O_DIRECT);
        }
        let mut file = oo.open(path).map_err(ctx)?;
        if opts.exclusive {
            lock_exclusive(&file).map_err(ctx)?;
        }
        let meta = file.metadata().map_err(ctx)?;
        let block_device = meta.file_type().is_block_device();
        if let Some(want) = opts.create_size {
            if !block_device && meta.len() < want {
                file.set_len(want).map_err(ctx)?;
            }
        }
        let size = file.seek(SeekFrom::End(0)).map_err(ctx)?;
        Ok(Self { file, path: path.to_path_buf(), size, direct: opts.direct, block_device })
    }

    /// True if opened with O_DIRECT.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    fn aligned(offset: u64, len: usize, ptr: *const u8) -> bool {
        offset.is_multiple_of(DIRECT_ALIGN as u64)
            && len.is_multiple_of(DIRECT_ALIGN)
            && (ptr as usize).is_multiple_of(DIRECT_ALIGN)
    }

    /// The aligned span covering `[offset, offset + len)`, clipped to nothing: O_DIRECT needs
    /// the span inside the file, which holds when the device size is a multiple of the
    /// alignment (block devices and files ember formats always are).
    fn span(offset: u64, len: usize) -> (u64, usize) {
        let a = DIRECT_ALIGN as u64;
        let start = offset / a * a;
        let end = (offset + len as u64).div_ceil(a) * a;
        (start, (end - start) as usize)
    }

    fn read_direct(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let (start, n) = Self::span(offset, buf.len());
        let mut bounce = AlignedBuf::new(n);
        self.file.read_exact_at(bounce.as_mut_slice(), start)?;
        let skip = (offset - start) as usize;
        buf.copy_from_slice(&bounce.as_mut_slice()[skip..skip + buf.len()]);
        Ok(())
    }

    fn write_direct(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let (start, n) = Self::span(offset, data.len());
        let mut bounce = AlignedBuf::new(n);
        let skip = (offset - start) as usize;
        if skip != 0 || n != data.len() {
            self.file.read_exact_at(bounce.as_mut_slice(), start)?;
        }
        bounce.as_mut_slice()[skip..skip + data.len()].copy_from_slice(data);
        self.file.write_all_at(bounce.as_mut_slice(), start)
    }

    /// Zero `[offset, offset + len)` of a block device with the kernel's zero-out
    /// (`BLKZEROOUT`); the parts not aligned to the logical sector size are written with
    /// zero buffers.
    fn blk_zero_out(&self, offset: u64, len: u64) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        let mut sector: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int through the pointer, which points at `sector`.
        if unsafe { libc::ioctl(fd, BLKSSZGET as _, &mut sector as *mut libc::c_int) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let sector = u64::try_from(sector).ok().filter(|&s| s > 0).unwrap_or(512);
        let end = offset + len;
        let lo = offset.next_multiple_of(sector).min(end);
        let hi = (end / sector * sector).max(lo);
        if lo > offset {
            write_zeroes_by_writes(self, offset, lo - offset)?;
        }
        if hi > lo {
            let range: [u64; 2] = [lo, hi - lo];
            // SAFETY: BLKZEROOUT reads two u64 (start, length) through the pointer.
            if unsafe { libc::ioctl(fd, BLKZEROOUT as _, range.as_ptr()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if end > hi {
            write_zeroes_by_writes(self, hi, end - hi)?;
        }
        Ok(())
    }

    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
        // SAFETY: fallocate on an open descriptor owned by self.file, with plain integers.
        let r = unsafe {
            libc::fallocate(self.file.as_raw_fd(), mode, offset as libc::off_t, len as libc::off_t)
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// A zeroed heap buffer whose start is aligned to [`DIRECT_ALIGN`], built from a plain `Vec`:
/// I/O into it on an O_DIRECT device needs no bounce copy.
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes, aligned.
    pub fn new(len: usize) -> Self {
        let raw = vec![0u8; len + DIRECT_ALIGN];
        let start = raw.as_ptr().align_offset(DIRECT_ALIGN);
        Self { raw, start, len }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

impl Device for FileDevice {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size, offset, buf.len() as u64, "read")?;
        if self.direct && !Self::aligned(offset, buf.len(), buf.as_ptr()) {
            return self.read_direct(offset, buf);
        }
        self.file.read_exact_at(buf, offset)
    }

    /// Through the page cache only: `preadv2` with `RWF_NOWAIT`, which fails with EAGAIN
    /// (or reads short) rather than wait for the medium. Never with O_DIRECT.
    fn read_if_cached(&self, offset: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        if self.direct || check_range(self.size, offset, buf.len() as u64, "read").is_err() {
            return None;
        }
        let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // SAFETY: one iovec over `buf`, which outlives the call and is written by the kernel
        // only within its length; the descriptor is owned by self.file.
        let n = unsafe {
            libc::preadv2(self.file.as_raw_fd(), &iov, 1, offset as libc::off_t, libc::RWF_NOWAIT)
        };
        // EAGAIN (not in the page cache), EOPNOTSUPP (a kernel or file system without
        // RWF_NOWAIT), a short read (in part cached): the caller reads the ordinary way.
        (n >= 0 && n as usize == buf.len()).then_some(Ok(()))
    }

    /// With O_DIRECT and every range aligned, the reads go out together through this
    /// thread's io_uring (`uring.rs`); otherwise, or without io_uring, one after another.
    fn read_many(
        &self,
        reads: &mut [(u64, &mut [u8])],
        done: &mut dyn FnMut(usize, io::Result<()>),
    ) {
        let checked = reads.iter().all(|(o, b)| {
            check_range(self.size, *o, b.len() as u64, "read").is_ok()
                && Self::aligned(*o, b.len(), b.as_ptr())
        });
        if self.direct && checked && reads.len() > 1 {
            super::uring::read_many(&self.file, reads, done);
            return;
        }
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            done(i, self.read_at(*offset, buf));
        }
    }

    /// With O_DIRECT and every part aligned and inside the device, on this thread's io_uring
    /// (`uring/`).
    fn start_read(
        &self,
        buf: ReadBuf,
        parts: &[ReadPart],
        tag: u64,
        now: bool,
    ) -> Result<(), ReadBuf> {
        let base = buf.as_ptr();
        let fits = |p: &ReadPart| {
            check_range(self.size, p.offset, p.len as u64, "read").is_ok()
                && Self::aligned(p.offset, p.len, base.wrapping_add(p.at))
        };
        if !self.direct || !parts.iter().all(fits) {
            return Err(buf);
        }
        super::uring::start(&self.file, buf, parts, tag, now)
    }

    /// With O_DIRECT, with this thread's io_uring (`uring/`, `registered.rs`).
    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.direct && super::uring::register(buf)
    }

    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        super::uring::unregister(buf)
    }

    fn read_room(&self) -> usize {
        if self.direct {
            super::uring::room()
        } else {
            0
        }
    }

    fn reap_reads(&self, wait: usize, wake: Option<RawFd>, done: &mut ReadsDone<'_>) -> usize {
        super::uring::reap(wait, wake, done)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.size, offset, data.len() as u64, "write")?;
        if self.direct && !Self::aligned(offset, data.len(), data.as_ptr()) {
            return self.write_direct(offset, data);
        }
        self.file.write_all_at(data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size, offset, len, "trim")?;
        if self.block_device || len == 0 {
            // Advisory: a block device keeps its data, which TRIM allows.
            return Ok(());
        }
        match self.fallocate(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                write_zeroes_by_writes(self, offset, len)
            }
            Err(e) => Err(e),
        }
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size, offset, len, "write-zeroes")?;
        if len == 0 {
            return Ok(());
        }
        if self.block_device {
            // The kernel's zero-out; a device or kernel without it gets zero buffers.
            if self.blk_zero_out(offset, len).is_ok() {
                return Ok(());
            }
        } else {
            let mode = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
            if self.fallocate(mode, offset, len).is_ok() {
                return Ok(());
            }
        }
        write_zeroes_by_writes(self, offset, len)
    }

    fn describe(&self) -> String {
        format!("{}{}", self.path.display(), if self.direct { " (O_DIRECT)" } else { "" })
    }

    fn reads_from_memory(&self) -> bool {
        !self.direct
    }

    /// From `fstat` of the open file: the medium is its device, inode, type and (for a
    /// block device) device number; the state adds the size and the modification and change
    /// times (nanoseconds). File timestamps come from a coarse clock, so a write within the
    /// same tick as the last one would not change them: if the file changed less than
    /// [`SETTLE`] ago, this waits until that much time has passed, so any later write shows.
    /// A block device's node times are those of its /dev entry: they change when it is
    /// written through that node and are reset at boot (a reboot then starts cold).
    fn identity(&self) -> io::Result<Identity> {
        let ctx =
            |e: io::Error| io::Error::new(e.kind(), format!("{}: stat: {e}", self.path.display()));
        let m = self.file.metadata().map_err(ctx)?;
        let changed_ns = (m.mtime() as i128 * 1_000_000_000 + i128::from(m.mtime_nsec()))
            .max(m.ctime() as i128 * 1_000_000_000 + i128::from(m.ctime_nsec()));
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let wait = changed_ns + SETTLE.as_nanos() as i128 - now_ns;
        if wait > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(wait.min(1_000_000_000) as u64));
        }
        let kind = if self.block_device { 2 } else { 1 };
        let medium = digest(&[kind, m.dev(), m.ino(), m.rdev()]);
        let state = digest(&[
            medium,
            self.size,
            m.size(),
            m.mtime() as u64,
            m.mtime_nsec() as u64,
            m.ctime() as u64,
            m.ctime_nsec() as u64,
        ]);
        Ok(Identity::Known { medium, state })
    }
}

/// How long after its last change a file's identity is taken (longer than the kernel's
/// timestamp tick, 10 ms at HZ=100).
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(25);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_changes_with_a_write_behind_its_back_and_with_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let dev = FileDevice::open(&path, FileOptions::default()).unwrap();
        let (a, b) = (dev.identity().unwrap(), dev.identity().unwrap());
        assert_eq!(a, b, "unchanged file, same identity");
        let Identity::Known { medium, state } = a else { panic!("{a:?}") };
        // Another writer, at once (within the timestamp tick of the identity just taken).
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[2u8; 16], 4096).unwrap();
        let c = dev.identity().unwrap();
        assert_eq!(c, Identity::Known { medium, state: c.state_digest() }, "same medium");
        assert_ne!(c.state_digest(), state, "modified: another state");
        // Replaced by another file at the same path.
        let other = dir.path().join("g");
        std::fs::write(&other, vec![1u8; 8192]).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let d = FileDevice::open(&path, FileOptions::default()).unwrap().identity().unwrap();
        assert_ne!(d.medium_digest(), medium, "replaced: another medium");
    }

    fn roundtrip(direct: bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev");
        let opts = FileOptions { direct, create_size: Some(64 * 1024), exclusive: false };
        let d = match FileDevice::open(&path, opts) {
            Ok(d) => d,
            // tmpfs refuses O_DIRECT; the buffered path is still tested.
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => return,
            Err(e) => panic!("open: {e}"),
        };
        assert_eq!(d.size(), 64 * 1024);
        let block: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        d.write_at(8192, &block).unwrap();
        // Unaligned write and read (read-modify-write under O_DIRECT).
        d.write_at(8190, b"abcd").unwrap();
        let mut got = vec![0u8; 4096];
        d.read_at(8192, &mut got).unwrap();
        assert_eq!(&got[..2], b"cd");
        assert_eq!(&got[2..], &block[2..]);
        let mut two = [0u8; 2];
        d.read_at(8190, &mut two).unwrap();
        assert_eq!(&two, b"ab");
        d.sync().unwrap();
        d.trim(8192, 4096).unwrap();
        d.read_at(8192, &mut got).unwrap();
        assert!(got.iter().all(|&b| b == 0), "trimmed range reads zeros");
        d.write_at(0, &block).unwrap();
        d.write_zeroes(100, 10).unwrap();
        let mut z = vec![0u8; 120];
        d.read_at(0, &mut z).unwrap();
        assert_eq!(&z[..100], &block[..100]);
        assert!(z[100..110].iter().all(|&b| b == 0));
        assert_eq!(&z[110..], &block[110..120]);
        assert!(d.read_at(64 * 1024 - 1, &mut two).is_err());
    }

    #[test]
    fn buffered_file_round_trip() {
        roundtrip(false);
    }

    #[test]
    fn direct_file_round_trip() {
        roundtrip(true);
    }

    /// Bytes just written are in the page cache: read at once. Past the end, or with
    /// O_DIRECT: `None`, never an answer that skipped the medium.
    #[test]
    fn a_read_from_the_page_cache_is_answered_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dev");
        let opts = FileOptions { direct: false, create_size: Some(64 * 1024), exclusive: false };
        let d = FileDevice::open(&path, opts).unwrap();
        let block: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
        d.write_at(4096, &block).unwrap();
        let mut got = vec![0u8; 4096];
        match d.read_if_cached(4096, &mut got) {
            Some(r) => {
                r.unwrap();
                assert_eq!(got, block);
            }
            // A kernel or file system without RWF_NOWAIT for buffered reads.
            None => eprintln!("RWF_NOWAIT not supported here"),
        }
        assert!(d.read_if_cached(64 * 1024 - 1, &mut got).is_none(), "past the end");
        let direct = FileOptions { direct: true, create_size: None, exclusive: false };
        if let Ok(d) = FileDevice::open(&path, direct) {
            assert!(d.read_if_cached(4096, &mut got).is_none(), "O_DIRECT reads the medium");
        }
    }

    #[test]
    fn aligned_buffers_are_aligned() {
        for len in [1, 4096, 10_000] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_mut_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
            assert_eq!(b.as_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn missing_file_error_names_the_path() {
        let e = FileDevice::open(Path::new("/nonexistent/ember-dev"), FileOptions::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent/ember-dev"), "{e}");
    }

    /// A loop device over a temporary image, detached on drop.
    struct Loop {
        dev: String,
    }

    impl Drop for Loop {
        fn drop(&mut self) {
            let _ = std::process::Command::new("losetup").arg("-d").arg(&self.dev).status();
        }
    }

    /// WRITE_ZEROES on a block device uses the kernel's zero-out (`BLKZEROOUT`, called
    /// directly here so a silent fallback to zero buffers cannot pass), with unaligned head
    /// and tail written by hand. Needs root and `losetup` (like the ext4 trial).
    #[test]
    fn block_device_zero_out() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("img");
        std::fs::write(&image, vec![0xAAu8; 8 << 20]).unwrap();
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&image)
            .output()
            .expect("losetup (util-linux) must be installed");
        assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
        let lp = Loop { dev: String::from_utf8_lossy(&out.stdout).trim().to_string() };
        for direct in [false, true] {
            let dev = FileDevice::open(
                Path::new(&lp.dev),
                FileOptions { direct, create_size: None, exclusive: false },
            )
            .unwrap();
            assert!(dev.block_device);
            dev.write_at(0, &vec![0xAAu8; 8 << 20]).unwrap();
            let (off, len) = (1000u64, (3 << 20) + 5);
            dev.blk_zero_out(off, len).unwrap();
            let mut back = vec![0u8; 8 << 20];
            dev.read_at(0, &mut back).unwrap();
            let want = |i: usize| if (off..off + len).contains(&(i as u64)) { 0 } else { 0xAA };
            let bad = (0..back.len()).find(|&i| back[i] != want(i));
            assert_eq!(bad, None, "direct={direct}: first wrong byte");
            // Through the trait too (the same path), and a range that is all unaligned.
            dev.write_zeroes(5 << 20, 4096 * 3 + 17).unwrap();
            dev.write_zeroes(7 << 20 | 3, 100).unwrap();
            dev.read_at(0, &mut back).unwrap();
            let want2 = |i: usize| {
                let i = i as u64;
                let z = (5 << 20..(5 << 20) + 4096 * 3 + 17).contains(&i)
                    || (7 << 20 | 3..(7 << 20 | 3) + 100).contains(&i);
                if z {
                    0
                } else {
                    want(i as usize)
                }
            };
            let bad = (0..back.len()).find(|&i| back[i] != want2(i));
            assert_eq!(bad, None, "direct={direct}: first wrong byte after write_zeroes");
        }
    }
}
