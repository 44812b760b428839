//! The run's groups in cgroup v1 or v2, and the moves between them.
//!
//! ## Layout (one parent per run, named after it)
//!
//! ```text
//! <hierarchy>/dyncore.<run>.<pid>/      cpuset.cpus = the run's real CPUs
//!     cpu0/ .. cpu<n-1>/                 runtime CPU i: cpuset.cpus = its real CPU,
//!                                        CPU quota = the duty the policy set, thawed
//!                                        (frozen while the CPU is offline)
//!     held/                              threads the policy does not run now: frozen
//! ```
//!
//! In v1 the same tree is made in each hierarchy that carries `cpuset`,
//! `cpu` and `freezer` (one to three), and a thread is moved by writing its
//! id to `tasks` in each. In v2 it is one threaded subtree: the run's group
//! is the threaded domain (the command's processes join its
//! `cgroup.procs`), its children are `threaded`, and a thread moves with
//! one write to a child's `cgroup.threads`.
//!
//! ## Order of a move (v1)
//! * Into a CPU's group: `cpuset` first (the kernel migrates the thread to
//!   the CPU while it is still frozen), then `cpu` (its quota), then
//!   `freezer` last (it thaws on that CPU).
//! * Into `held`: `freezer` first (it stops), then the others.
//!
//! So a thread never runs on a CPU other than the one it is moved to, nor
//! outside a quota.
//!
//! ## Order of a move (v2)
//! One write moves a thread in all three at once, and the kernel changes
//! its freezer state *before* it applies the new group's cpuset
//! (`cgroup_migrate_execute`: the thread's css_set and its freezer state
//! first, then each controller's `attach`). A thread placed from `held`
//! is woken while it still has `held`'s CPUs (all the run's), so it may
//! run a moment on any of them — a borrowed CPU, or one running another
//! thread — until cpuset's `attach` moves it; one that goes back to sleep
//! there stays there until it wakes. (In a guest, `dyncore exec --policy
//! chameleon` saw it: 3 execution-check violations in 1413 slices.) So a
//! v2 move first narrows the thread's own affinity to the CPU
//! (`sched_setaffinity`, which the kernel keeps as the thread's requested
//! mask and intersects with every cpuset it joins after), and only then
//! writes it to the CPU's group: it wakes on that CPU. The requested mask
//! also keeps a thread moved into `held` on its CPU until it freezes,
//! instead of letting it spread to `held`'s CPUs on its way.
//!
//! ## Invariants
//! 1. Every group this run creates is under its parent, and the parent is
//!    removed last: the groups are removed children first, in every
//!    hierarchy, whatever step failed ([`Cgroups::remove`]).
//! 2. `held` is frozen from its creation to the teardown.
//! 3. A thread the arbiter placed is in the same group (a CPU's, or
//!    `held`) in every hierarchy ([`Cgroups::check_consistent`]).

use std::io;
use std::path::{Path, PathBuf};

use dyncore_core::speed::Duty;
use dyncore_core::{CpuId, CpuSet};

use super::cgfs::{self, Control};
use super::probe::{Flavor, Hierarchy};
use super::{Loc, Tid};

/// The CFS bandwidth period of a throttled CPU, by default: as short as
/// the kernel keeps it accurately. The kernel accounts a group's runtime
/// at its ticks, so a period of less than two ticks is kept badly: on this
/// machine (HZ=250, a 4 ms tick) a 5 ms period gave a 50% quota 43% of the
/// CPU, while 8, 10, 16, 20 and 40 ms periods gave 50.2-50.6% (62.5%:
/// 62.5-63.2%; 75%: 74.9-76.9%), measured from the thread's `schedstat`
/// over 1.5 s each. 20 ms is two ticks even at HZ=100, and close to the
/// policy's slice (16 ms): over a slice, a thread gets its duty give or
/// take part of one period.
pub const PERIOD_US: u64 = 20_000;
/// The kernel refuses a quota (or period) below 1 ms.
const MIN_QUOTA_US: u64 = 1_000;

/// The CFS bandwidth `(period, quota)` in µs that gives `duty` of one CPU:
/// the period is `period_us`, lengthened where the quota would fall below
/// the kernel's 1 ms minimum; quota `None` = unlimited (a 100% duty is not
/// throttled at all).
pub fn bandwidth(duty: Duty, period_us: u64) -> (u64, Option<u64>) {
    if duty == Duty::FULL {
        return (period_us, None);
    }
    let pm = u64::from(duty.per_mille());
    // With 20 ms: 50% -> 10 ms of 20 ms; 1% -> 1 ms of 100 ms; 0.1% -> 1 ms of 1 s.
    let period = period_us.max((MIN_QUOTA_US * 1000).div_ceil(pm));
    (period, Some(pm * period / 1000))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// One group of the run in one hierarchy.
#[derive(Debug)]
struct Group {
    dir: PathBuf,
    /// `tasks` (v1) or `cgroup.threads` (v2).
    tasks: Control,
    /// `cpu.cfs_period_us` and `cpu.cfs_quota_us` (v1), or `cpu.max` in
    /// `quota` (v2); where the hierarchy has the cpu controller.
    period: Option<Control>,
    quota: Option<Control>,
    /// `freezer.state` (v1) or `cgroup.freeze` (v2), and what says whether
    /// it is frozen: `freezer.state` again or `cgroup.events`.
    freeze: Option<Control>,
    frozen: Option<Control>,
    /// The bandwidth last written (period, quota).
    bandwidth: (u64, Option<u64>),
}

/// The run's tree in one hierarchy.
#[derive(Debug)]
struct Tree {
    run: PathBuf,
    cpu: bool,
    freezer: bool,
    /// The hierarchy has `cpuacct` (v1, mounted with `cpu` or not).
    cpuacct: bool,
    cpus: Vec<Group>,
    held: Group,
}

/// The run's groups. The arbiter's teardown empties them, then calls
/// [`Cgroups::remove`]; dropping it removes whatever is still there (a run
/// that failed to start after creating them), which only empty groups
/// allow.
#[derive(Debug)]
pub(crate) struct Cgroups {
    version: Version,
    /// Runtime CPU i's real CPU.
    real: Vec<CpuId>,
    /// The bandwidth period (µs) before [`bandwidth`] lengthens it.
    period_us: u64,
    trees: Vec<Tree>,
    /// Every directory created, in creation order.
    created: Vec<PathBuf>,
    buf: Vec<u8>,
}

impl Cgroups {
    /// Creates the run's groups named `name` for runtime CPUs on `real`
    /// (runtime CPU i on real CPU `real[i]`). On an error, whatever was
    /// created is removed again before it is returned.
    pub(crate) fn create(flavor: &Flavor, name: &str, real: &[CpuId], period_us: u64) -> io::Result<Cgroups> {
        let (version, hiers) = match flavor {
            Flavor::V1 { hierarchies } => (Version::V1, hierarchies.clone()),
            Flavor::V2 { root } => (
                Version::V2,
                vec![Hierarchy {
                    root: root.clone(),
                    controllers: ["cpuset", "cpu", "freezer"].map(String::from).to_vec(),
                }],
            ),
            Flavor::Affinity => unreachable!("no groups in affinity mode"),
        };
        let mut cg = Cgroups {
            version,
            real: real.to_vec(),
            period_us,
            trees: Vec::new(),
            created: Vec::new(),
            buf: Vec::new(),
        };
        for h in &hiers {
            match cg.create_tree(h, name, real) {
                Ok(tree) => cg.trees.push(tree),
                Err(e) => {
                    let errors = cg.remove();
                    let also = errors.iter().map(|e| format!("; then {e}")).collect::<String>();
                    return Err(io::Error::new(e.kind(), format!("{e}{also}")));
                }
            }
        }
        Ok(cg)
    }

    fn create_tree(&mut self, h: &Hierarchy, name: &str, real: &[CpuId]) -> io::Result<Tree> {
        let v2 = self.version == Version::V2;
        let (cpuset, cpu, freezer) = (h.has("cpuset"), h.has("cpu"), h.has("freezer"));
        let all: CpuSet = real.iter().copied().collect();
        let mems = if cpuset && !v2 { root_mems(&h.root) } else { String::new() };
        if v2 {
            enable_controllers(&h.root)?;
        }
        let run = h.root.join(name);
        cgfs::create_group(&run)?;
        self.created.push(run.clone());
        if v2 {
            enable_controllers(&run)?;
        }
        let set_cpus = |dir: &Path, cpus: &str| -> io::Result<()> {
            if cpuset {
                cgfs::write(&dir.join("cpuset.cpus"), cpus)?;
                if !v2 {
                    cgfs::write(&dir.join("cpuset.mems"), &mems)?;
                }
            }
            Ok(())
        };
        set_cpus(&run, &all.to_string())?;
        let mut cpus = Vec::with_capacity(real.len());
        for (i, &r) in real.iter().enumerate() {
            let dir = self.child(&run, &format!("cpu{i}"))?;
            set_cpus(&dir, &r.to_string())?;
            cpus.push(self.group(dir, cpu, freezer)?);
        }
        let dir = self.child(&run, "held")?;
        set_cpus(&dir, &all.to_string())?;
        let held = self.group(dir, false, freezer)?;
        if let Some(f) = &held.freeze {
            f.write(self.freeze_value(true))?;
        }
        Ok(Tree { run, cpu, freezer, cpuacct: h.has("cpuacct"), cpus, held })
    }

    /// Makes the child group `name` of `run` (threaded in v2).
    fn child(&mut self, run: &Path, name: &str) -> io::Result<PathBuf> {
        let dir = run.join(name);
        cgfs::create_group(&dir)?;
        self.created.push(dir.clone());
        if self.version == Version::V2 {
            cgfs::write(&dir.join("cgroup.type"), "threaded")?;
        }
        Ok(dir)
    }

    fn group(&self, dir: PathBuf, cpu: bool, freezer: bool) -> io::Result<Group> {
        let v1 = self.version == Version::V1;
        let tasks = Control::open(dir.join(if v1 { "tasks" } else { "cgroup.threads" }))?;
        let (period, quota) = match (cpu, v1) {
            (false, _) => (None, None),
            (true, true) => (
                Some(Control::open(dir.join("cpu.cfs_period_us"))?),
                Some(Control::open(dir.join("cpu.cfs_quota_us"))?),
            ),
            (true, false) => (None, Some(Control::open(dir.join("cpu.max"))?)),
        };
        let (freeze, frozen) = match (freezer, v1) {
            (false, _) => (None, None),
            (true, true) => (
                Some(Control::open(dir.join("freezer.state"))?),
                Some(Control::open(dir.join("freezer.state"))?),
            ),
            (true, false) => (
                Some(Control::open(dir.join("cgroup.freeze"))?),
                Some(Control::open_ro(dir.join("cgroup.events"))?),
            ),
        };
        Ok(Group { dir, tasks, period, quota, freeze, frozen, bandwidth: (0, None) })
    }

    fn freeze_value(&self, frozen: bool) -> &'static str {
        match (self.version, frozen) {
            (Version::V1, true) => "FROZEN",
            (Version::V1, false) => "THAWED",
            (Version::V2, true) => "1",
            (Version::V2, false) => "0",
        }
    }

    /// Gives the run's parent group the CFS weight `weight` (1024 = one
    /// nice-0 process; v1 `cpu.shares`, clamped to 2..=262144; v2
    /// `cpu.weight`, scaled to 1..=10000): how much of a CPU its threads
    /// get against the machine's other processes, below their quota.
    /// Returns what was written.
    pub(crate) fn set_weight(&self, weight: u32) -> io::Result<String> {
        let Some(t) = self.trees.iter().find(|t| t.cpu) else { return Ok(String::new()) };
        let (file, value) = match self.version {
            Version::V1 => ("cpu.shares", weight.clamp(2, 262_144)),
            Version::V2 => ("cpu.weight", (u64::from(weight) * 100 / 1024).clamp(1, 10_000) as u32),
        };
        let path = t.run.join(file);
        cgfs::write(&path, &value.to_string())?;
        Ok(format!("{} = {value}", path.display()))
    }

    /// The files a new process writes `0` (itself) to, in order, before it
    /// runs its command: into `held`, so it starts frozen (v2: into the
    /// run's domain first).
    pub(crate) fn join_files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        if self.version == Version::V2 {
            files.push(self.trees[0].run.join("cgroup.procs"));
        }
        // The freezer's hierarchy last: the process freezes as it joins it.
        let mut trees: Vec<&Tree> = self.trees.iter().collect();
        trees.sort_by_key(|t| t.freezer);
        files.extend(trees.iter().map(|t| t.held.tasks.path().to_path_buf()));
        files
    }

    /// Moves thread `tid` into runtime CPU `cpu`'s group (v1: cpuset, cpu,
    /// then the freezer, which thaws it; v2: its affinity first, module
    /// doc).
    pub(crate) fn place(&self, tid: Tid, cpu: CpuId) -> io::Result<()> {
        let id = tid.to_string();
        if self.version == Version::V2 {
            let group = &self.trees[0].cpus[cpu].tasks;
            if group.is_fixture() {
                return group.write(&id).map(drop);
            }
            let only = CpuSet::single(self.real[cpu]);
            return match super::affinity_only::set_affinity(tid, &only) {
                Ok(()) => group.write(&id).map(drop),
                // The thread's group (another CPU's: an asleep thread
                // moving directly) does not allow the CPU. It is asleep:
                // it takes the new group's CPU before it runs; its
                // requested mask follows, except for a thread that is
                // exiting, which the kernel does not move (it keeps its
                // group's CPU until it is gone).
                Err(e) if cgfs::errno_of(&e) == Some(libc::EINVAL) => {
                    group.write(&id)?;
                    match super::affinity_only::set_affinity(tid, &only) {
                        Err(e) if cgfs::errno_of(&e) == Some(libc::EINVAL) => Ok(()),
                        r => r,
                    }
                }
                Err(e) => Err(e),
            };
        }
        for t in self.ordered(false) {
            t.cpus[cpu].tasks.write(&id)?;
        }
        Ok(())
    }

    /// Moves thread `tid` into `held` (the freezer first: it stops there).
    pub(crate) fn hold(&self, tid: Tid) -> io::Result<()> {
        let id = tid.to_string();
        for t in self.ordered(true) {
            t.held.tasks.write(&id)?;
        }
        Ok(())
    }

    /// The trees in the order of a move: the freezer's last when placing,
    /// first when holding.
    fn ordered(&self, freezer_first: bool) -> impl Iterator<Item = &Tree> {
        let mut v: Vec<&Tree> = self.trees.iter().collect();
        v.sort_by_key(|t| t.freezer != freezer_first);
        v.into_iter()
    }

    /// Whether every thread in `held` is frozen by now.
    pub(crate) fn held_frozen(&mut self) -> io::Result<bool> {
        let version = self.version;
        let Some(t) = self.trees.iter().find(|t| t.freezer) else { return Ok(true) };
        is_frozen(version, t.held.frozen.as_ref(), &mut self.buf)
    }

    /// Whether runtime CPU `cpu`'s group is frozen by now.
    pub(crate) fn cpu_frozen(&mut self, cpu: CpuId) -> io::Result<bool> {
        let version = self.version;
        let Some(t) = self.trees.iter().find(|t| t.freezer) else { return Ok(true) };
        is_frozen(version, t.cpus[cpu].frozen.as_ref(), &mut self.buf)
    }

    /// Freezes (an offline CPU) or thaws runtime CPU `cpu`'s group.
    pub(crate) fn set_frozen(&self, cpu: CpuId, frozen: bool) -> io::Result<()> {
        let value = self.freeze_value(frozen);
        for t in self.trees.iter().filter(|t| t.freezer) {
            if let Some(f) = &t.cpus[cpu].freeze {
                f.write(value)?;
            }
        }
        Ok(())
    }

    /// Sets runtime CPU `cpu`'s quota to `duty` ([`bandwidth`]); writes only
    /// what changed. Returns the number of writes.
    pub(crate) fn set_duty(&mut self, cpu: CpuId, duty: Duty) -> io::Result<usize> {
        let (period, quota) = bandwidth(duty, self.period_us);
        let version = self.version;
        let mut writes = 0;
        for t in self.trees.iter_mut().filter(|t| t.cpu) {
            let g = &mut t.cpus[cpu];
            if g.bandwidth == (period, quota) {
                continue;
            }
            let q = quota.map_or_else(
                || if version == Version::V1 { "-1".into() } else { "max".into() },
                |q| q.to_string(),
            );
            match (version, &g.period, &g.quota) {
                (Version::V1, Some(p), Some(qf)) => {
                    if g.bandwidth.0 != period {
                        p.write(&period.to_string())?;
                        writes += 1;
                    }
                    qf.write(&q)?;
                }
                (Version::V2, _, Some(qf)) => {
                    qf.write(&format!("{q} {period}"))?;
                }
                _ => unreachable!("a tree with the cpu controller has its quota files"),
            }
            writes += 1;
            g.bandwidth = (period, quota);
        }
        Ok(writes)
    }

    /// Appends every thread in the run's CPU groups and `held`, and where
    /// it is, as the tree a new process joins last lists them (the
    /// freezer's in v1): a process that is still joining the run's groups
    /// is not found before it is done (found half-way, it would be placed,
    /// and then move itself into `held` behind the arbiter's back). A
    /// thread is in one group per tree, so any complete tree is a full
    /// list. Each file is opened afresh: an open v1 `tasks` file keeps
    /// serving the list it first read for as long as it is read again
    /// within a second (the kernel's pidlist cache), so a descriptor kept
    /// open would never see a new thread.
    pub(crate) fn scan(&mut self, out: &mut Vec<(Tid, Option<Loc>)>) -> io::Result<()> {
        let t = last_joined(&self.trees);
        let buf = &mut self.buf;
        let mut list = |path: &Path, loc: Option<Loc>| -> io::Result<()> {
            read_fresh(path, buf)?;
            out.extend(cgfs::parse_ids(&String::from_utf8_lossy(buf)).map(|tid| (tid, loc)));
            Ok(())
        };
        for (i, g) in t.cpus.iter().enumerate() {
            list(g.tasks.path(), Some(Loc::Cpu(i)))?;
        }
        list(t.held.tasks.path(), Some(Loc::Held))
    }

    /// Checks invariant 3: every thread listed in the freezer's tree is in
    /// the same group in every tree, and no other thread is in a CPU's
    /// group or `held` there. An error names the thread and the groups.
    pub(crate) fn check_consistent(&mut self) -> Result<(), String> {
        let mut first: Vec<(Tid, Option<Loc>)> = Vec::new();
        self.scan(&mut first).map_err(|e| e.to_string())?;
        first.sort_unstable_by_key(|&(t, _)| t);
        let reference = last_joined(&self.trees).run.clone();
        for t in self.trees.iter().filter(|t| t.run != reference) {
            for (i, g) in t
                .cpus
                .iter()
                .enumerate()
                .map(|(i, g)| (Some(Loc::Cpu(i)), g))
                .chain([(Some(Loc::Held), &t.held)])
            {
                let text = cgfs::read(g.tasks.path()).map_err(|e| e.to_string())?;
                for tid in cgfs::parse_ids(&text) {
                    let there = first.binary_search_by_key(&tid, |&(t, _)| t).ok().map(|k| first[k].1);
                    if there != Some(i) {
                        return Err(format!(
                            "thread {tid} is in {} but in {:?} of the freezer's hierarchy",
                            g.dir.display(),
                            there
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Thaws every group of the run (`held` too): the teardown's first
    /// step, so that signalled threads can run their handlers and die
    /// (a v1-frozen thread does not die of `SIGKILL` until thawed).
    pub(crate) fn thaw_all(&self) -> Vec<io::Error> {
        let value = self.freeze_value(false);
        let mut errors = Vec::new();
        for t in &self.trees {
            for g in t.cpus.iter().chain([&t.held]) {
                if let Some(f) = &g.freeze
                    && let Err(e) = f.write(value)
                {
                    errors.push(e);
                }
            }
        }
        errors
    }

    /// Removes every group created, children before parents, in every
    /// hierarchy; goes on after an error and returns them all. Groups
    /// that still hold threads cannot be removed (`EBUSY`).
    pub(crate) fn remove(&mut self) -> Vec<io::Error> {
        let mut errors = Vec::new();
        self.trees.clear(); // close the control files first
        while let Some(dir) = self.created.pop() {
            if let Err(e) = cgfs::remove_group(&dir) {
                errors.push(e);
            }
        }
        errors
    }

    /// The CPU time the threads in runtime CPU `cpu`'s group have used,
    /// ns, as the kernel accounts it (v2 `cpu.stat` `usage_usec`; v1
    /// `cpuacct.usage`, where a hierarchy of the run has `cpuacct`);
    /// `None` where no hierarchy of the run accounts it.
    pub(crate) fn usage_ns(&mut self, cpu: CpuId) -> Option<u64> {
        match self.version {
            Version::V2 => {
                let dir = &self.trees.first()?.cpus.get(cpu)?.dir;
                read_fresh(&dir.join("cpu.stat"), &mut self.buf).ok()?;
                let text = std::str::from_utf8(&self.buf).ok()?;
                let us: u64 =
                    text.lines().find_map(|l| l.strip_prefix("usage_usec "))?.trim().parse().ok()?;
                Some(us * 1000)
            }
            Version::V1 => {
                let dir = &self.trees.iter().find(|t| t.cpuacct)?.cpus.get(cpu)?.dir;
                read_fresh(&dir.join("cpuacct.usage"), &mut self.buf).ok()?;
                std::str::from_utf8(&self.buf).ok()?.trim().parse().ok()
            }
        }
    }

    /// The run's groups, for its warden: whether v2, and each hierarchy's.
    pub(crate) fn for_warden(&self) -> (bool, Vec<super::warden::Hierarchy>) {
        let trees = self.trees.iter().map(|t| super::warden::Hierarchy {
            run: t.run.clone(),
            groups: t.cpus.iter().chain([&t.held]).map(|g| g.dir.clone()).collect(),
            freezer: t.freezer,
        });
        (self.version == Version::V2, trees.collect())
    }

    /// The run's parent group in each hierarchy.
    pub(crate) fn parents(&self) -> Vec<PathBuf> {
        self.trees.iter().map(|t| t.run.clone()).collect()
    }

    /// Where the cpuset of runtime CPU `cpu` is (tests read it back).
    pub(crate) fn cpu_dir(&self, cpu: CpuId) -> Vec<PathBuf> {
        self.trees.iter().map(|t| t.cpus[cpu].dir.clone()).collect()
    }

    pub(crate) fn held_dir(&self) -> Vec<PathBuf> {
        self.trees.iter().map(|t| t.held.dir.clone()).collect()
    }
}

/// The tree a new process joins last ([`Cgroups::join_files`]).
fn last_joined(trees: &[Tree]) -> &Tree {
    trees.iter().find(|t| t.freezer).unwrap_or(&trees[0])
}

/// Reads `path` into `buf` through a descriptor of its own.
fn read_fresh(path: &Path, buf: &mut Vec<u8>) -> io::Result<()> {
    use std::io::Read as _;
    buf.clear();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(buf))
        .map(drop)
        .map_err(|e| cgfs::context(e, "cannot read", path))
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for e in self.remove() {
            eprintln!("dyncore arbiter: {e}");
        }
    }
}

fn is_frozen(version: Version, file: Option<&Control>, buf: &mut Vec<u8>) -> io::Result<bool> {
    let Some(f) = file else { return Ok(true) };
    f.read_into(buf)?;
    let text = String::from_utf8_lossy(buf);
    Ok(match version {
        Version::V1 => text.trim() == "FROZEN",
        Version::V2 => text.lines().any(|l| l.trim() == "frozen 1"),
    })
}

/// The memory nodes of a v1 cpuset hierarchy's root (a child cpuset must
/// name some before it takes tasks); `0` on a fixture without the file.
fn root_mems(root: &Path) -> String {
    cgfs::read(&root.join("cpuset.mems")).map(|s| s.trim().to_string()).unwrap_or_else(|_| "0".into())
}

/// Enables `cpu` and `cpuset` for the children of v2 group `dir`, where
/// they are not already.
fn enable_controllers(dir: &Path) -> io::Result<()> {
    let file = dir.join("cgroup.subtree_control");
    let on = cgfs::read(&file).unwrap_or_default();
    for c in ["cpuset", "cpu"] {
        if !on.split_whitespace().any(|w| w == c) {
            cgfs::write(&file, &format!("+{c}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cgroups_tests.rs"]
mod tests;
