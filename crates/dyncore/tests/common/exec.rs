//! Helpers of the `dyncore exec` tests: what a run left behind, whether a
//! process lives, the test program `dyncore-burn`, and the kernel's own
//! record of where a process tree's threads ran.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[allow(unused_imports)]
pub use dyncore_runtime::testing::{Need, skip};

/// The CPUs this process may use.
pub fn allowed() -> Vec<usize> {
    dyncore_runtime::affinity::allowed_cpus().unwrap().iter().collect()
}

/// Every cgroup mount point of this machine.
pub fn hierarchies() -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .collect()
}

/// What a run of dyncore process `pid` left: its groups in every
/// hierarchy and its claim files.
pub fn left_by(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("dyncore.exec.{pid}.");
    let mut dirs: Vec<PathBuf> = hierarchies();
    dirs.push(PathBuf::from("/run/dyncore"));
    dirs.push(std::env::temp_dir().join(format!("dyncore-{}", rustix::process::geteuid().as_raw())));
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Whether process `pid` is alive (a zombie is not).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| !r.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// The test program `dyncore-burn` (package dyncore-runtime), beside the
/// `dyncore` binary; built there (offline) when this package's tests run
/// alone and it is not yet.
pub fn burn() -> String {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_dyncore"));
    let burn = exe.with_file_name("dyncore-burn");
    if !burn.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.args(["build", "--offline", "--locked", "-q", "-p", "dyncore-runtime", "--bin", "dyncore-burn"]);
        if exe.parent().is_some_and(|d| d.ends_with("release")) {
            c.arg("--release");
        }
        assert!(c.status().expect("cargo runs").success(), "building dyncore-burn failed");
    }
    burn.to_str().unwrap().to_string()
}

/// (state, parent pid, last CPU) of a process or thread, from its `stat`.
/// `num_threads` (field 20) of a `/proc/<pid>/stat`.
fn threads(path: &str) -> Option<u64> {
    let s = std::fs::read_to_string(path).ok()?;
    s.rsplit_once(')')?.1.split_whitespace().nth(17)?.parse().ok()
}

fn stat(path: &str) -> Option<(char, i32, usize)> {
    let s = std::fs::read_to_string(path).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields from the state (field 3): the parent is field 4, the last
    // CPU field 39.
    Some((f.first()?.chars().next()?, f.get(1)?.parse().ok()?, f.get(36)?.parse().ok()?))
}

/// Every process below `root` (not itself), from each process's parent.
pub fn descendants(root: i32) -> Vec<i32> {
    descendants_but(root, &mut std::collections::HashSet::new())
}

/// [`descendants`], never reading below `/proc/<pid>` of a process in
/// `zombies`, and adding the zombies it finds to it.
///
/// A sampler that reads a zombie's `/proc` files every few milliseconds can
/// keep its reaper from finishing: the reaper's `wait4` invalidates the
/// zombie's `/proc` entries (`d_invalidate`, `shrink_dcache_parent`), and
/// each read makes them anew. A soak at `c25e493` saw a `sh -c '… & …;
/// wait'` spin 15 minutes in the kernel that way. It finished the moment the
/// sampler was paused.
pub fn descendants_but(root: i32, zombies: &mut std::collections::HashSet<i32>) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if zombies.contains(&pid) {
            continue;
        }
        // dyncore's own helper (its run's warden) is not of the tree.
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "dyncore-warden") {
            continue;
        }
        let path = format!("/proc/{pid}/stat");
        if let Some((state, ppid, _)) = stat(&path) {
            // A leader that exited before its other threads shows `Z` too;
            // only a process with no thread left is a zombie.
            if state == 'Z' && threads(&path).is_some_and(|n| n <= 1) {
                zombies.insert(pid);
            }
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut next = vec![root];
    while let Some(p) = next.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            out.push(c);
            next.push(c);
        }
    }
    out
}

/// One look at a thread: its last CPU and its time on a CPU so far.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    pub cpu: usize,
    pub run_ns: u64,
}

/// Looks at every thread of the process tree below `root` every `gap`
/// until `stop`: each thread's looks, in order.
pub fn sample_tree(root: i32, gap: Duration, stop: Arc<AtomicBool>) -> HashMap<(i32, i32), Vec<Look>> {
    let mut seen: HashMap<(i32, i32), Vec<Look>> = HashMap::new();
    let mut zombies = std::collections::HashSet::new();
    while !stop.load(Ordering::Relaxed) {
        for pid in descendants_but(root, &mut zombies) {
            if zombies.contains(&pid) {
                continue;
            }
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
            for t in tasks.filter_map(Result::ok) {
                let Ok(tid) = t.file_name().to_string_lossy().parse::<i32>() else { continue };
                let base = format!("/proc/{pid}/task/{tid}");
                let Some((state, _, cpu)) = stat(&format!("{base}/stat")) else { continue };
                let run_ns = std::fs::read_to_string(format!("{base}/schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse().ok());
                if let (Some(run_ns), false) = (run_ns, state == 'Z') {
                    seen.entry((pid, tid)).or_default().push(Look { cpu, run_ns });
                }
            }
        }
        std::thread::sleep(gap);
    }
    seen
}

/// What the looks say of where the tree ran: (checks where a thread ran
/// between two looks and was last on one of `cpus`, the thread and CPU of
/// every pair of looks that shows a thread running outside `cpus`: it ran
/// between them and was last outside at both).
pub fn where_it_ran(looks: &HashMap<(i32, i32), Vec<Look>>, cpus: &[usize]) -> (usize, Vec<(i32, usize)>) {
    let mut inside = 0;
    let mut outside = Vec::new();
    for (&(_, tid), l) in looks {
        for w in l.windows(2) {
            if w[1].run_ns <= w[0].run_ns {
                continue;
            }
            if cpus.contains(&w[1].cpu) {
                inside += 1;
            } else if !cpus.contains(&w[0].cpu) {
                outside.push((tid, w[1].cpu));
            }
        }
    }
    (inside, outside)
}

/// Starts a sampler of the tree below `root`; the handle's result is its
/// looks once `stop` is set.
pub fn start_sampler(
    root: u32,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<HashMap<(i32, i32), Vec<Look>>> {
    let stop = stop.clone();
    std::thread::spawn(move || sample_tree(root as i32, Duration::from_millis(3), stop))
}
