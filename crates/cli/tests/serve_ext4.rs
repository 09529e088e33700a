//! A real ext4 on `ember serve`: nbdfuse exposes the export as a file, a loop device
//! (O_DIRECT) turns it into a block device, then mkfs.ext4, mount, write + fsync files,
//! umount, remount, verify, `fsck -fn`. Teardown (umount, losetup -d, fusermount3 -u, the
//! nbdfuse and ember processes) always runs, by a guard, whatever failed.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serve_support::*;

const T: Duration = Duration::from_secs(120);

/// Undoes whatever was set up, in reverse order, on drop.
#[derive(Default)]
struct Teardown {
    mounted: Option<PathBuf>,
    loop_dev: Option<String>,
    fuse_dir: Option<PathBuf>,
    nbdfuse: Option<Child>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        let quiet = |c: &mut Command| {
            let _ = run_status(c, Duration::from_secs(30));
        };
        if let Some(m) = self.mounted.take() {
            quiet(Command::new("umount").arg(&m));
        }
        if let Some(l) = self.loop_dev.take() {
            quiet(Command::new("losetup").arg("-d").arg(&l));
        }
        if let Some(d) = self.fuse_dir.take() {
            quiet(Command::new("fusermount3").arg("-u").arg(&d));
        }
        if let Some(mut c) = self.nbdfuse.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn file_content(i: usize) -> Vec<u8> {
    let mut rng = Rng::new(1000 + i as u64);
    (0..(64 << 10) * (i + 1)).map(|_| rng.next_u64() as u8).collect()
}

fn write_files(dir: &Path) {
    for i in 0..12 {
        let mut f = std::fs::File::create(dir.join(format!("f{i}"))).unwrap();
        f.write_all(&file_content(i)).unwrap();
        f.sync_all().unwrap();
    }
}

fn verify_files(dir: &Path) {
    for i in 0..12 {
        let got = std::fs::read(dir.join(format!("f{i}"))).unwrap();
        assert!(got == file_content(i), "file f{i} differs after remount");
    }
}

#[test]
fn ext4_on_nbdfuse_and_a_loop_device() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("fs.img"));
    sparse_file(&backing, 128 << 20);
    let serve = ServeArgs::file_cache(&cache, "48M").backing("fs", backing.display()).start();
    let fuse_dir = dir.path().join("fuse");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&fuse_dir).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    {
        let mut td = Teardown::default();
        let child = Command::new("nbdfuse")
            .arg(&fuse_dir)
            .arg(serve.uri("fs"))
            .stdin(Stdio::null())
            .spawn()
            .expect("nbdfuse");
        td.nbdfuse = Some(child);
        td.fuse_dir = Some(fuse_dir.clone());
        let image = fuse_dir.join("nbd");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&image).map(|m| m.len()).unwrap_or(0) != 128 << 20 {
            assert!(Instant::now() < deadline, "nbdfuse did not expose {}", image.display());
            std::thread::sleep(Duration::from_millis(50));
        }
        let dev =
            run(Command::new("losetup").args(["--direct-io=on", "-f", "--show"]).arg(&image), T)
                .trim()
                .to_string();
        assert!(dev.starts_with("/dev/loop"), "{dev}");
        td.loop_dev = Some(dev.clone());
        run(Command::new("mkfs.ext4").args(["-q", "-F", &dev]), T);
        run(Command::new("mount").arg(&dev).arg(&mnt), T);
        td.mounted = Some(mnt.clone());
        write_files(&mnt);
        run(Command::new("umount").arg(&mnt), T);
        td.mounted = None;
        run(Command::new("mount").arg(&dev).arg(&mnt), T);
        td.mounted = Some(mnt.clone());
        verify_files(&mnt);
        run(Command::new("umount").arg(&mnt), T);
        td.mounted = None;
        let fsck = run(Command::new("fsck.ext4").args(["-fn", &dev]), T);
        assert!(fsck.contains("clean") || fsck.contains("files"), "{fsck}");
        // `td` drops here: losetup -d, fusermount3 -u, nbdfuse exits.
    }
    let samples = scrape(&serve.metrics);
    assert!(
        metric(&samples, "ember_cache_read_hits_total") > 0.0,
        "remount read through the cache"
    );
    assert_eq!(metric(&samples, "ember_nbd_errors_total"), 0.0);
    serve.stop();
    // Write-through: the backing file alone is a clean ext4 with the files.
    let fsck = run_status(Command::new("fsck.ext4").args(["-fn"]).arg(&backing), T);
    assert_eq!(fsck.status.code(), Some(0), "{}\n{}", fsck.stdout, fsck.stderr);
}
