//! `ember trace gen ensemble` and `ember sim --experiment sievestore / --admission /
//! --partition` end to end (SieveStore, ISCA 2010).

use std::process::Command;

fn ember() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ember"))
}

#[test]
fn gen_ensemble_then_sievestore_experiment_and_admission_runs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("ens.csv");
    let st = ember()
        .args(["trace", "gen", "ensemble", "--volumes", "6", "--days", "2"])
        .args(["--accesses-per-day", "20000", "--output"])
        .arg(&trace)
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&trace).unwrap();
    let first = text.lines().next().unwrap();
    // MSR-Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime.
    assert_eq!(first.split(',').count(), 7, "{first}");
    assert!(first.contains(",prxy,0,") || text.contains(",src1,2,"));

    let out = dir.path().join("exp");
    let o = ember()
        .arg("sim")
        .arg(&trace)
        .args(["--experiment", "sievestore", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tables = std::fs::read_to_string(out.join("sievestore.txt")).unwrap();
    for needle in
        ["Accesses captured", "Allocation-writes", "Drives needed", "sievestore-c/proportional"]
    {
        assert!(tables.contains(needle), "missing {needle}");
    }
    for png in
        ["fig5_accesses_captured.png", "fig6_allocation_writes.png", "fig8_drive_occupancy.png"]
    {
        let bytes = std::fs::read(out.join(png)).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{png}");
    }

    let o = ember()
        .arg("sim")
        .arg(&trace)
        .args(["--admission", "aod,wmna,sievestore-c,sievestore-d", "--partition", "equal"])
        .args(["--size", "500", "--device", "slow:1000:100"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains(" equal ")).collect();
    assert_eq!(rows.len(), 4, "{stdout}");

    let o = ember().arg("sim").arg(&trace).args(["--admission", "bogus"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown admission policy"));
}
