//! Bonfire's logging volume as a real block device ("a separate file or
//! device"): `ember serve --warmup-log /dev/loopN` on a loop device. The device's leftovers
//! (bytes an earlier user left in the record area) must not make the new log read as damaged;
//! the trace commands read the log straight off the device, only its own extent; a restarted
//! memory cache preloads from it and every logged block hits (every read verified). A device
//! holding something else is refused, untouched; so are a device too small for the log and
//! the snapshot (a file beside the log) with a log on a device.

mod serve_support;

use serve_support::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

/// A loop device over a file, detached on drop.
struct Loop(String);

impl Loop {
    fn attach(image: &Path) -> Option<Loop> {
        let out = Command::new("losetup").args(["-f", "--show"]).arg(image).output().ok()?;
        out.status.success().then(|| Loop(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

fn usable() -> Result<(), String> {
    let uid = Command::new("id").arg("-u").output().map_err(|e| format!("id: {e}"))?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Err("no /dev/loop-control".into());
    }
    Ok(())
}

#[test]
fn a_loop_device_holds_the_warmup_log() {
    if let Err(why) = usable() {
        if skip_or_fail(&format!("the loop-device log test cannot run here: {why}")) {
            return;
        }
    }
    let (dir, backing, trace) = patterned_disk(41, 300, 7);
    let image = dir.path().join("logdev.img");
    // A used device: a blank first block, 0xab in what becomes the record area.
    let mut bytes = vec![0xabu8; 8 << 20];
    bytes[..4096].fill(0);
    std::fs::write(&image, &bytes).unwrap();
    let dev = Loop::attach(&image).expect("losetup");
    let devpath = dev.0.clone();
    let args = ServeArgs::mem_cache("32M").backing("disk", backing.display()).args([
        "--warmup-log",
        &devpath,
        "--warmup-log-size",
        "1M",
        "--warmup-region",
        "4K",
    ]);
    let serve = Serve::start(&args);
    assert!(serve.output().contains("no warmup log at"), "{}", serve.output());
    assert_eq!(replay_verified(&trace, "csv", &serve, "41"), (0, 300));
    serve.stop();

    // The laboratory reads the device: 300 reads, from the log's 1 MiB + 4 KiB only.
    let info: serde_json::Value = serde_json::from_str(&run(
        Command::new(ember()).args(["trace", "info", "--json", &dev.0]),
        MIN,
    ))
    .unwrap();
    assert_eq!(info["format"], "warmup-log", "{info:#}");
    assert_eq!((info["requests"].as_u64(), info["reads"].as_u64()), (Some(300), Some(300)));
    let after = std::fs::read(&image).unwrap();
    assert!(after[4096 + (1 << 20)..].iter().all(|&b| b == 0xab), "beyond the log: untouched");

    // A restart of the memory cache preloads the 300 blocks from the device; all hit.
    let serve = Serve::start(&args);
    assert!(serve.output().contains("preloading 300 blocks"), "{}", serve.output());
    // The leftovers were zeroed when the log was made: no slot reads as a torn record.
    assert!(!serve.output().contains("torn"), "{}", serve.output());
    wait_warmup_state(&serve, 3.0);
    assert_eq!(
        replay_verified(&trace, "csv", &serve, "41"),
        (300, 0),
        "every preloaded block hits"
    );
    serve.stop();

    // Too small for the log asked for: refused, with the sizes.
    let mut small = args.to_vec();
    small[7] = "64M".into();
    let err = serve_fails(&small);
    assert!(err.contains("too few for a log of"), "{err}");
    // The snapshot is a file beside the log: a device has no beside.
    let mut snap = args.to_vec();
    snap.push("--warmup-snapshot".into());
    let err = serve_fails(&snap);
    assert!(err.contains("--warmup-snapshot with a warmup log on a block device"), "{err}");
    drop(dev);

    // A device holding something else (here: a file system's worth of 0x5a) is refused and
    // left as it was.
    let other = dir.path().join("other.img");
    std::fs::write(&other, vec![0x5au8; 4 << 20]).unwrap();
    let dev = Loop::attach(&other).expect("losetup");
    let mut foreign = args.to_vec();
    foreign[5] = dev.0.clone();
    let err = serve_fails(&foreign);
    assert!(err.contains("holds something other than a warmup log"), "{err}");
    drop(dev);
    assert!(std::fs::read(&other).unwrap().iter().all(|&b| b == 0x5a), "untouched");
}
