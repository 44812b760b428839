//! `dyncore sweep`: the same bytes whatever `--jobs`, a killed or
//! interrupted sweep resumed without re-running what it finished, and bad
//! sweep files refused with `file:line:col: field` (exit 2).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use dyncore::Registry;
use dyncore::sweep::{Sweep, SweepArgs, cmd};
use parquet::file::reader::FileReader;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A small sweep of the network-stack model (fast: 20 ms of virtual time a run).
fn small_sweep(dir: &Path, seeds: u32) -> PathBuf {
    let base = root().join("scenarios/newtos/governors.toml");
    let text = format!(
        "base = \"{}\"\nruns = [\"menu 1600/600\"]\nseeds = {seeds}\n[grid]\n\"run.*.governor\" = [\"always-c1\", \"always-c6\"]\n\
         \"run.*.cpu.0.mhz\" = [1600, 800, 400]\n",
        base.display()
    );
    let path = dir.join("small.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn args(file: &Path, jobs: usize) -> SweepArgs {
    SweepArgs { file: file.to_path_buf(), jobs: Some(jobs), fresh: false, quiet: true, show_point: None }
}

fn read(out: &Path, name: &str) -> Vec<u8> {
    std::fs::read(out.join("sweep-small").join(name)).unwrap()
}

#[test]
fn the_same_sweep_gives_the_same_bytes_whatever_jobs() {
    let d = tempfile::tempdir().unwrap();
    let file = small_sweep(d.path(), 2);
    let stop = AtomicBool::new(false);
    let (one, two) = (d.path().join("one"), d.path().join("two"));
    cmd::run(&Registry::builtin(), &one, &args(&file, 1), &stop).unwrap();
    cmd::run(&Registry::builtin(), &two, &args(&file, 2), &stop).unwrap();
    for f in ["results.parquet", "results.csv", "by-0.png", "by-1.png", "by-0.svg"] {
        assert!(read(&one, f) == read(&two, f), "{f} differs between --jobs 1 and --jobs 2");
    }
    // The report differs only in the command it quotes (its --out).
    let text = |out: &Path| {
        String::from_utf8(read(out, "report.md")).unwrap().replace(&out.display().to_string(), "OUT")
    };
    assert_eq!(text(&one), text(&two));
    // The Parquet file reads back as the table: 6 points × 2 seeds × 1 run × 1 series.
    let file_in = std::fs::File::open(one.join("sweep-small/results.parquet")).unwrap();
    let reader = parquet::file::serialized_reader::SerializedFileReader::new(file_in).unwrap();
    let meta = reader.metadata().file_metadata();
    assert_eq!(meta.num_rows(), 12);
    assert_eq!(reader.get_row_iter(None).unwrap().count(), 12);
    let names: Vec<&str> = meta.schema_descr().columns().iter().map(|c| c.name()).collect();
    assert_eq!(&names[..6], ["point", "seed", "run", "series", "run.*.governor", "run.*.cpu.0.mhz"]);
    assert!(names.contains(&"mbps") && names.contains(&"nj_per_bit"));
    // The CSV has the same rows, and the slower TCP core delivers less under C1.
    let csv = String::from_utf8(read(&one, "results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13);
    let sweep = Sweep::load(&file, &Registry::builtin()).unwrap();
    assert_eq!(sweep.units().len(), 12);
}

#[test]
fn a_finished_sweep_reruns_nothing_and_a_changed_point_reruns() {
    let d = tempfile::tempdir().unwrap();
    let file = small_sweep(d.path(), 1);
    let out = d.path().join("out");
    let stop = AtomicBool::new(false);
    cmd::run(&Registry::builtin(), &out, &args(&file, 2), &stop).unwrap();
    let first = read(&out, "results.parquet");
    let parts = cmd::parts_dir(&out, "sweep-small");
    let stamp = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let part0 = parts.join("p000000-s1.json");
    let before = stamp(&part0);
    std::thread::sleep(Duration::from_millis(20));
    cmd::run(&Registry::builtin(), &out, &args(&file, 2), &stop).unwrap();
    assert_eq!(stamp(&part0), before, "a finished unit is not run again");
    assert_eq!(read(&out, "results.parquet"), first);
    // A part of another sweep (a changed value) does not count as done.
    let text = std::fs::read_to_string(&file).unwrap().replace("[1600, 800, 400]", "[1400, 800, 400]");
    std::fs::write(&file, text).unwrap();
    cmd::run(&Registry::builtin(), &out, &args(&file, 2), &stop).unwrap();
    assert_ne!(stamp(&part0), before, "point 0 changed, so it ran again");
    // A stop before any unit: nothing runs, the error says how to resume.
    let stopped = AtomicBool::new(true);
    let e = cmd::run(&Registry::builtin(), &d.path().join("other"), &args(&file, 1), &stopped).unwrap_err();
    assert!(e.to_string().contains("run the same command again to resume"), "{e}");
}

fn dyncore() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dyncore"))
}

fn parts_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().ends_with(".json")).count()
        })
        .unwrap_or(0)
}

/// Starts the sweep, waits for its first finished unit, and stops it with `signal`.
fn start_and_stop(file: &Path, out: &Path, signal: i32) -> std::process::ExitStatus {
    let mut child = dyncore()
        .args(["sweep", "--quiet", "--jobs", "1", "--out"])
        .arg(out)
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let parts = cmd::parts_dir(out, "sweep-small");
    let t = Instant::now();
    while parts_in(&parts) == 0 {
        assert!(t.elapsed() < Duration::from_secs(120), "no unit finished in 2 minutes");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(child.id() as i32, signal) };
    child.wait().unwrap()
}

#[test]
fn a_killed_sweep_resumes_where_it_stopped_with_the_same_bytes() {
    let d = tempfile::tempdir().unwrap();
    let file = small_sweep(d.path(), 8);
    let out = d.path().join("killed");
    let status = start_and_stop(&file, &out, libc::SIGKILL);
    assert!(!status.success());
    let parts = cmd::parts_dir(&out, "sweep-small");
    let kept = parts_in(&parts);
    assert!((1..48).contains(&kept), "the kill came mid-sweep ({kept} of 48 units done)");
    assert!(!out.join("sweep-small").exists(), "no report folder from a killed sweep");
    // No half-written part: every file there is a whole part of this sweep.
    let sweep = Sweep::load(&file, &Registry::builtin()).unwrap();
    let whole = sweep
        .units()
        .iter()
        .filter(|&&(p, s)| dyncore::sweep::exec::read_part(&parts, &sweep, p, s).is_some())
        .count();
    assert_eq!(whole, kept, "every part on disk is whole");
    let resumed = dyncore().args(["sweep", "--jobs", "2", "--out"]).arg(&out).arg(&file).output().unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let said = String::from_utf8_lossy(&resumed.stderr);
    assert!(said.contains(&format!("({kept} done by an earlier run, kept)")), "{said}");
    let fresh = d.path().join("fresh");
    let ran = dyncore().args(["sweep", "--quiet", "--out"]).arg(&fresh).arg(&file).output().unwrap();
    assert!(ran.status.success());
    assert!(
        read(&out, "results.parquet") == read(&fresh, "results.parquet"),
        "resumed = fresh, byte for byte"
    );
    assert!(read(&out, "results.csv") == read(&fresh, "results.csv"));
}

#[test]
fn ctrl_c_stops_with_130_and_keeps_what_finished() {
    let d = tempfile::tempdir().unwrap();
    let file = small_sweep(d.path(), 8);
    let out = d.path().join("out");
    let status = start_and_stop(&file, &out, libc::SIGINT);
    assert_eq!(status.code(), Some(130));
    let kept = parts_in(&cmd::parts_dir(&out, "sweep-small"));
    assert!(kept >= 1);
    let resumed = dyncore().args(["sweep", "--out"]).arg(&out).arg(&file).output().unwrap();
    assert!(resumed.status.success());
    assert!(String::from_utf8_lossy(&resumed.stderr).contains("done by an earlier run, kept"));
}

/// The error a sweep text gets, as the command prints it.
fn error_of(dir: &Path, text: &str) -> String {
    let path = dir.join("bad.toml");
    std::fs::write(&path, text).unwrap();
    Sweep::load(&path, &Registry::builtin()).unwrap_err().to_string()
}

#[test]
fn bad_sweep_files_are_refused_at_the_place_with_what_is_accepted() {
    let d = tempfile::tempdir().unwrap();
    let base = root().join("scenarios/newtos/governors.toml").display().to_string();
    let head = format!("base = \"{base}\"\nruns = [\"menu 1600/600\"]\n");
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{head}sedes = 3\n[grid]\n\"run.*.governor\" = [\"menu\"]\n"),
            "bad.toml:3:1: sedes: unknown field",
        ),
        (
            format!("{head}[grid]\n\"run.*.cpus.0.mhz\" = [1600]\n"),
            "bad.toml:4:23: grid.\"run.*.cpus.0.mhz\": not a field of the base",
        ),
        (
            format!("{head}[grid]\n\"run.*.cpu.0.mhz\" = [1600, 1700]\n"),
            "bad.toml:4:28: grid.\"run.*.cpu.0.mhz\"[1]: point 1 (run.*.cpu.0.mhz = 1700) is not a valid scenario: \
             run[0].cpu[0].mhz: no speed step of 1700 MHz",
        ),
        (
            format!(
                "{head}[zip]\n\"run.*.governor\" = [\"menu\", \"always-c1\"]\n\"run.*.cpu.0.mhz\" = [1600]\n"
            ),
            "bad.toml:5:22: zip.\"run.*.cpu.0.mhz\": the lists of [zip] are paired",
        ),
        (
            format!(
                "base = \"{base}\"\nruns = [\"menu 1600/60\"]\n[grid]\n\"run.*.governor\" = [\"menu\"]\n"
            ),
            "bad.toml:2:9: runs[0]: the base has no run labelled \"menu 1600/60\"",
        ),
        (
            format!("{head}[grid]\n\"run.*.governor\" = [\"menu\", 3]\n"),
            "the values of one field must be of one kind",
        ),
        (format!("{head}[grid]\n\"run.*.governor\" = []\n"), "expected a list of at least one value"),
        (
            format!("{head}seeds = 0\n[grid]\n\"run.*.governor\" = [\"menu\"]\n"),
            "bad.toml:3:9: seeds: expected a whole number from 1",
        ),
        ("[grid]\n\"x\" = [1]\n".to_string(), "`base` is missing"),
        (format!("{head}[grid]\n\"run.*\" = [1]\n"), "a field path ends with a field's name"),
        // A misspelt figure to plot would be dropped from the summary.
        (
            format!("{head}plot = [\"speedp\"]\n[grid]\n\"run.*.governor\" = [\"menu\"]\n"),
            "bad.toml:3:9: plot: unknown figure `speedp`; the table's figures: ",
        ),
    ];
    for (text, want) in cases {
        let e = error_of(d.path(), &text);
        assert!(e.contains(want), "wanted `{want}` in:\n{e}\nfor:\n{text}");
    }
    // The command: exit 2, the message on stderr, nothing created.
    let path = d.path().join("bad.toml");
    std::fs::write(&path, format!("{head}[grid]\n\"run.*.cpus.0.mhz\" = [1600]\n")).unwrap();
    let out = d.path().join("out");
    let o = dyncore().args(["sweep", "--out"]).arg(&out).arg(&path).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.toml:4:23:"));
    assert!(!out.exists(), "bad input creates nothing");
}

/// A sweep runs on the simulator: a base whose command workload gives no
/// `model` is refused at that command, as `dyncore run` refuses it.
#[test]
fn a_command_with_no_model_is_refused_as_run_refuses_it() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("base.toml");
    std::fs::write(
        &base,
        "name = \"cmd\"\ntitle = \"a command\"\n[[run]]\nlabel = \"a\"\nmachine = \"uniform\"\n\
         cpus_per_node = 2\nmax_fuse = 2\npolicy = \"linux\"\n[[run.workload]]\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let e = error_of(d.path(), "base = \"base.toml\"\n[grid]\n\"run.0.label\" = [\"a\", \"b\"]\n");
    assert!(e.contains("run[0].workload[0].command: the simulator cannot run a command"), "{e}");
    let o = dyncore().arg("run").arg(&base).arg("--out").arg(d.path().join("o")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the simulator cannot run a command"));
}

#[test]
fn the_shipped_sweeps_validate() {
    for f in ["sweeps/tax-vs-node.toml", "sweeps/newtos-tcp-speed.toml"] {
        let s = Sweep::load(&root().join(f), &Registry::builtin()).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(s.points.len() >= 20, "{f}");
    }
}

#[test]
fn the_report_page_shows_a_sweeps_summary_and_plots() {
    let d = tempfile::tempdir().unwrap();
    let file = small_sweep(d.path(), 1);
    let out = d.path().join("out");
    cmd::run(&Registry::builtin(), &out, &args(&file, 2), &AtomicBool::new(false)).unwrap();
    let report = String::from_utf8(read(&out, "report.md")).unwrap();
    assert!(report.contains("![run.*.governor](by-0.png)") && report.contains("| always-c6 |"), "{report}");
    let scenario = root().join("scenarios/newtos/single.toml");
    let ran = dyncore()
        .args(["run", "--quiet", "--seeds", "1", "--out"])
        .arg(&out)
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(page.contains("<section id=\"sweep-small\">"), "the sweep is a section of the page");
    assert!(page.contains("sweep-small/by-0.png"), "its plots are linked from the page");
}

/// A grid whose point count does not fit a number (8 fields × 256 values
/// once wrapped to 0 points and panicked) is refused in one line, exit 2.
#[test]
fn a_grid_too_large_to_count_is_refused_not_wrapped() {
    let d = tempfile::tempdir().unwrap();
    let base = root().join("scenarios/fig3-taxation.toml").display().to_string();
    let fields = [
        "seed",
        "run.*.cpus_per_node",
        "run.*.max_fuse",
        "run.*.workload.*.seq_level",
        "run.*.workload.*.tax",
        "run.*.workload.*.work_ms",
        "run.*.workload.*.start_ms",
        "run.*.workload.*.count",
    ];
    // `fields` each swept over 1..=n.
    let grid = |fields: &[&str], n: usize| {
        let vals: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        let mut text = format!("base = \"{base}\"\nseeds = 1\n[grid]\n");
        for f in fields {
            text += &format!("\"{f}\" = [{}]\n", vals.join(", "));
        }
        error_of(d.path(), &text)
    };
    let e = grid(&fields, 256);
    assert!(e.contains("make more points than a number holds") && e.contains("256 × 256"), "{e}");
    // 7 × 1000 values (10^21 points) once printed a wrapped count.
    let e = grid(&fields[..7], 1000);
    assert!(e.contains("1000 × 1000 × 1000") && e.contains("more points than a number holds"), "{e}");
    // 4 × 100 values: counted exactly.
    let e = grid(&fields[..4], 100);
    assert!(e.contains("100000000 points × 1 seeds is 100000000 runs"), "{e}");
}

/// SIGTERM and SIGHUP stop a sweep as Ctrl-C does, with the exit status a
/// shell gives (143, 129), as `run` and `exec` do (it once said 130 for all).
#[test]
fn sigterm_and_sighup_stop_with_their_own_status() {
    for (signal, want) in [(libc::SIGTERM, 143), (libc::SIGHUP, 129)] {
        let d = tempfile::tempdir().unwrap();
        let file = small_sweep(d.path(), 8);
        let out = d.path().join("out");
        let status = start_and_stop(&file, &out, signal);
        assert_eq!(status.code(), Some(want), "signal {signal}");
        assert!(
            parts_in(&cmd::parts_dir(&out, "sweep-small")) >= 1,
            "signal {signal}: what finished is kept"
        );
    }
}

/// A resume runs again every part that is not this unit's any more, and
/// says how many and why: the scenario changed (an edit of the base),
/// another build made it, or it does not read back whole (no rows, a NaN
/// figure, a row twice); the table is then byte for byte a fresh sweep's.
#[test]
fn a_resume_reruns_stale_parts_and_says_why() {
    let d = tempfile::tempdir().unwrap();
    // The base copied here, so that the test can edit it.
    let base = d.path().join("governors.toml");
    std::fs::copy(root().join("scenarios/newtos/governors.toml"), &base).unwrap();
    let text = std::fs::read_to_string(small_sweep(d.path(), 1)).unwrap();
    let text = text.replace(
        &root().join("scenarios/newtos/governors.toml").display().to_string(),
        &base.display().to_string(),
    );
    let file = d.path().join("small.toml");
    std::fs::write(&file, text).unwrap();
    let out = d.path().join("out");
    let sweep = || dyncore().args(["sweep", "--jobs", "2", "--out"]).arg(&out).arg(&file).output().unwrap();
    assert!(sweep().status.success());
    let parts = cmd::parts_dir(&out, "sweep-small");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&parts).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), 6);
    // Another build; no rows; a NaN figure; a row twice.
    let edit = |f: &Path, how: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
        how(&mut v);
        std::fs::write(f, serde_json::to_vec(&v).unwrap()).unwrap();
    };
    edit(&files[0], &|v| {
        v["parts"]["build"] = "another".into();
        v["key"] = v["key"].as_str().unwrap().replace(dyncore::sweep::exec::BUILD_ID, "another").into();
    });
    edit(&files[1], &|v| v["rows"] = serde_json::json!([]));
    edit(&files[2], &|v| v["rows"][0]["bits"][0] = f64::NAN.to_bits().into());
    edit(&files[3], &|v| {
        let row = v["rows"][0].clone();
        v["rows"].as_array_mut().unwrap().push(row);
    });
    let o = sweep();
    assert!(o.status.success());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("4 part(s) of an earlier run are not this sweep's any more and run again"),
        "{said}"
    );
    assert!(said.contains("1 because another build of dyncore made it"), "{said}");
    assert!(said.contains("3 because it does not read back whole"), "{said}");
    assert!(said.contains("(2 done by an earlier run, kept)"), "{said}");
    // An edit of the base (a value no point sets): every part runs again.
    let edited = std::fs::read_to_string(&base).unwrap().replacen("title = \"", "title = \"Edited: ", 1);
    std::fs::write(&base, edited).unwrap();
    let o = sweep();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("6 because its point's scenario changed"), "{said}");
    let fresh = d.path().join("fresh");
    let ran = dyncore().args(["sweep", "--quiet", "--out"]).arg(&fresh).arg(&file).output().unwrap();
    assert!(ran.status.success());
    assert!(read(&out, "results.csv") == read(&fresh, "results.csv"), "resumed = fresh, byte for byte");
}

/// A part replaced by a FIFO or by a link to /dev/zero neither hangs a
/// resume nor makes it read without bound: it is run again, and said.
#[test]
fn a_part_that_is_a_fifo_or_a_device_is_run_again_not_read() {
    let d = tempfile::tempdir().unwrap();
    let file = small_sweep(d.path(), 1);
    let out = d.path().join("out");
    let sweep = || dyncore().args(["sweep", "--jobs", "2", "--out"]).arg(&out).arg(&file).output().unwrap();
    assert!(sweep().status.success());
    let parts = cmd::parts_dir(&out, "sweep-small");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&parts).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    std::fs::remove_file(&files[0]).unwrap();
    let c = std::ffi::CString::new(files[0].to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::remove_file(&files[1]).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &files[1]).unwrap();
    let o = sweep();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("2 because it does not read back whole"), "{said}");
    assert!(std::fs::symlink_metadata(&files[0]).unwrap().is_file(), "the FIFO was replaced by the part");
}
