//! Which mechanism the arbiter can use on this machine: cgroup v2, cgroup
//! v1, or `sched_setaffinity` alone — found from the mount table, the
//! controllers each hierarchy has, and whether the caller may write them.
//!
//! The probe reads, and never writes:
//!
//! 1. the mount table (`/proc/self/mounts`): every `cgroup2` mount, and
//!    every `cgroup` (v1) mount with the controllers in its options;
//! 2. for a v2 mount, its `cgroup.controllers`: it is usable when it has
//!    `cpu` and `cpuset` (the freezer, `cgroup.freeze`, is part of v2
//!    itself). A cgroup2 mount beside v1 hierarchies (the hybrid layout,
//!    `/sys/fs/cgroup/unified`) usually has none: the controllers are bound
//!    to the v1 hierarchies, and the probe says so;
//! 3. for v1, a hierarchy with each of `cpu`, `cpuset` and `freezer` (two
//!    may share one mount, `cpu,cpuacct` does);
//! 4. whether the caller may create groups there: root, or write access
//!    to the hierarchy's root directory.
//!
//! The choice: v2 if usable, else v1 if usable, else affinity only — with
//! the reason each better one was not taken, which the run reports. A
//! mechanism asked for by name that is not usable is refused with that
//! reason. Every path is read under a prefix (`/` on a real machine, a
//! temporary directory holding a fake tree in the tests).

use std::fmt;
use std::path::{Path, PathBuf};

/// The mechanism asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Want {
    /// The best one this machine has.
    #[default]
    Auto,
    CgroupV2,
    CgroupV1,
    /// `sched_setaffinity` only, even where cgroups would work.
    Affinity,
}

impl std::str::FromStr for Want {
    type Err = String;
    fn from_str(s: &str) -> Result<Want, String> {
        match s {
            "auto" => Ok(Want::Auto),
            "cgroup2" | "v2" => Ok(Want::CgroupV2),
            "cgroup1" | "v1" => Ok(Want::CgroupV1),
            "affinity" => Ok(Want::Affinity),
            _ => Err(format!("unknown mechanism `{s}`: auto, cgroup2, cgroup1 or affinity")),
        }
    }
}

/// A v1 hierarchy and the controllers mounted on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Its mount point (under the probe's prefix).
    pub root: PathBuf,
    pub controllers: Vec<String>,
}

impl Hierarchy {
    pub fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// The mechanism chosen, with where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flavor {
    /// A cgroup2 mount with `cpu` and `cpuset`.
    V2 { root: PathBuf },
    /// The distinct v1 hierarchies that carry `cpuset`, `cpu` and
    /// `freezer` (one to three of them), in that order of first need.
    V1 { hierarchies: Vec<Hierarchy> },
    /// `sched_setaffinity` only.
    Affinity,
}

impl Flavor {
    /// The one-word name used in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Flavor::V2 { .. } => "cgroup2",
            Flavor::V1 { .. } => "cgroup1",
            Flavor::Affinity => "affinity",
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Flavor::V2 { root } => write!(f, "cgroup v2 at {}", root.display()),
            Flavor::V1 { hierarchies } => {
                f.write_str("cgroup v1 (")?;
                for (i, h) in hierarchies.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{} at {}", h.controllers.join(","), h.root.display())?;
                }
                f.write_str(")")
            }
            Flavor::Affinity => f.write_str("sched_setaffinity only"),
        }
    }
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Usable cgroup2 mount, or why there is none.
    pub v2: Result<PathBuf, String>,
    /// Usable v1 hierarchies, or why there are none.
    pub v1: Result<Vec<Hierarchy>, String>,
    /// Every hierarchy root where groups of earlier runs may be (v2 and v1
    /// mounts with the controllers the arbiter uses), usable or not for
    /// this run: the startup sweep looks in all of them.
    pub sweep_roots: Vec<PathBuf>,
}

/// Where the probe reads from.
#[derive(Debug, Clone)]
pub struct ProbeInput<'a> {
    /// The mount table's text (`/proc/self/mounts`).
    pub mounts: &'a str,
    /// Prepended to every mount point (`/` on a real machine).
    pub prefix: &'a Path,
    /// The caller's effective uid.
    pub euid: u32,
}

impl Probe {
    pub fn run(input: &ProbeInput<'_>) -> Probe {
        let mounts = parse_mounts(input.mounts);
        let under = |m: &str| input.prefix.join(m.trim_start_matches('/'));
        let may_write = |dir: &Path| input.euid == 0 || writable_by(dir, input.euid);
        let mut sweep_roots = Vec::new();

        let v2 = match mounts.iter().find(|m| m.fstype == "cgroup2") {
            None => Err("no cgroup2 mount".to_string()),
            Some(m) => {
                let root = under(&m.dir);
                let ctl = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
                let has: Vec<&str> = ctl.split_whitespace().collect();
                let missing: Vec<&str> = ["cpu", "cpuset"].into_iter().filter(|c| !has.contains(c)).collect();
                sweep_roots.push(root.clone());
                if !missing.is_empty() {
                    Err(format!(
                        "the cgroup2 mount at {} has no {} controller{} (bound to v1 hierarchies, or not \
                         enabled)",
                        root.display(),
                        missing.join(", "),
                        if missing.len() > 1 { "s" } else { "" }
                    ))
                } else if !may_write(&root) {
                    Err(format!("{} is not writable by uid {} (needs root)", root.display(), input.euid))
                } else {
                    Ok(root)
                }
            }
        };

        let mut hierarchies: Vec<Hierarchy> = Vec::new();
        let mut missing = Vec::new();
        for want in ["cpuset", "cpu", "freezer"] {
            let found = mounts.iter().find(|m| m.fstype == "cgroup" && m.options.iter().any(|o| o == want));
            match found {
                None => missing.push(want),
                Some(m) => {
                    let root = under(&m.dir);
                    if !hierarchies.iter().any(|h| h.root == root) {
                        let controllers = m
                            .options
                            .iter()
                            .filter(|o| ["cpuset", "cpu", "freezer", "cpuacct"].contains(&o.as_str()))
                            .cloned()
                            .collect();
                        sweep_roots.push(root.clone());
                        hierarchies.push(Hierarchy { root, controllers });
                    }
                }
            }
        }
        let v1 = if !missing.is_empty() {
            Err(format!("no cgroup v1 hierarchy with {}", missing.join(", ")))
        } else if let Some(h) = hierarchies.iter().find(|h| !may_write(&h.root)) {
            Err(format!("{} is not writable by uid {} (needs root)", h.root.display(), input.euid))
        } else {
            Ok(hierarchies)
        };
        Probe { v2, v1, sweep_roots }
    }

    /// The mechanism for `want`, and what the run should say about the
    /// ones not taken; an error (one line) when `want` names one that is
    /// not usable.
    pub fn choose(&self, want: Want) -> Result<(Flavor, Vec<String>), String> {
        let v2 = || self.v2.clone().map(|root| Flavor::V2 { root });
        let v1 = || self.v1.clone().map(|hierarchies| Flavor::V1 { hierarchies });
        match want {
            Want::CgroupV2 => v2().map(|f| (f, vec![])).map_err(|e| format!("cgroup v2 is not usable: {e}")),
            Want::CgroupV1 => v1().map(|f| (f, vec![])).map_err(|e| format!("cgroup v1 is not usable: {e}")),
            Want::Affinity => Ok((Flavor::Affinity, vec!["affinity only, as asked".to_string()])),
            Want::Auto => match (v2(), v1()) {
                (Ok(f), _) => Ok((f, vec![])),
                (Err(e2), Ok(f)) => Ok((f, vec![format!("cgroup v2 not used: {e2}")])),
                (Err(e2), Err(e1)) => Ok((
                    Flavor::Affinity,
                    vec![
                        format!("cgroup v2 not used: {e2}"),
                        format!("cgroup v1 not used: {e1}"),
                        "falling back to sched_setaffinity only: threads are placed, but duty cycles are \
                         not enforced and threads the policy does not run are not frozen"
                            .to_string(),
                    ],
                )),
            },
        }
    }
}

/// One line of the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    dir: String,
    fstype: String,
    options: Vec<String>,
}

/// Parses `/proc/self/mounts` (`source dir fstype options 0 0`; spaces in
/// a path are written `\040`).
fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_src, dir, fstype, opts) = (w.next()?, w.next()?, w.next()?, w.next()?);
            Some(Mount {
                dir: dir.replace("\\040", " "),
                fstype: fstype.to_string(),
                options: opts.split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

/// Whether `uid` (not root) may create directories in `dir`: it owns it
/// and may write it, or anyone may (a delegated cgroup subtree is chowned
/// to its user). Read from the metadata rather than `access(2)`, which
/// answers for the caller, so that a probe for another uid is true to it.
fn writable_by(dir: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(dir).is_ok_and(|m| (m.uid() == uid && m.mode() & 0o200 != 0) || m.mode() & 0o002 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's layout: v1 hierarchies and an empty cgroup2 beside them.
    const HYBRID: &str = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";
    /// The usual layout of a current distribution: cgroup2 only.
    const UNIFIED: &str = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n";

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = d.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    fn probe(mounts: &str, d: &tempfile::TempDir, euid: u32) -> Probe {
        Probe::run(&ProbeInput { mounts, prefix: d.path(), euid })
    }

    #[test]
    fn the_hybrid_layout_gives_v1_and_says_why_not_v2() {
        let d = tree(&[("sys/fs/cgroup/unified/cgroup.controllers", "\n")]);
        let p = probe(HYBRID, &d, 0);
        let (flavor, notes) = p.choose(Want::Auto).unwrap();
        let Flavor::V1 { hierarchies } = &flavor else { panic!("{flavor}") };
        let names: Vec<_> = hierarchies.iter().map(|h| h.controllers.join(",")).collect();
        assert_eq!(names, ["cpuset", "cpu", "freezer"]);
        assert_eq!(hierarchies[0].root, d.path().join("sys/fs/cgroup/cpuset"));
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("no cpu, cpuset controllers"), "{notes:?}");
        // The sweep looks in the v2 mount too (an earlier run may have used it).
        assert_eq!(p.sweep_roots.len(), 4);
        assert!(p.choose(Want::CgroupV2).unwrap_err().contains("cgroup v2 is not usable"));
    }

    #[test]
    fn the_unified_layout_gives_v2_when_it_has_the_controllers() {
        let d = tree(&[("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")]);
        let (flavor, notes) = probe(UNIFIED, &d, 0).choose(Want::Auto).unwrap();
        assert_eq!(flavor, Flavor::V2 { root: d.path().join("sys/fs/cgroup") });
        assert!(notes.is_empty());
        let e = probe(UNIFIED, &d, 0).choose(Want::CgroupV1).unwrap_err();
        assert!(e.contains("no cgroup v1 hierarchy with cpuset, cpu, freezer"), "{e}");
    }

    #[test]
    fn v2_without_cpuset_falls_back_and_names_the_missing_controller() {
        let d = tree(&[("sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n")]);
        let (flavor, notes) = probe(UNIFIED, &d, 0).choose(Want::Auto).unwrap();
        assert_eq!(flavor, Flavor::Affinity);
        assert!(notes[0].contains("no cpuset controller"), "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("falling back to sched_setaffinity only")), "{notes:?}");
    }

    #[test]
    fn co_mounted_controllers_share_one_hierarchy() {
        let mounts = "cgroup /cg/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n\
                      cgroup /cg/cpuset cgroup rw,cpuset 0 0\ncgroup /cg/freezer cgroup rw,freezer 0 0\n";
        let d = tree(&[]);
        let Flavor::V1 { hierarchies } = probe(mounts, &d, 0).choose(Want::CgroupV1).unwrap().0 else {
            panic!()
        };
        assert_eq!(hierarchies.len(), 3);
        assert!(hierarchies[1].has("cpu") && hierarchies[1].has("cpuacct"));
        assert!(hierarchies[1].root.ends_with("cg/cpu,cpuacct"));
    }

    #[test]
    fn a_missing_freezer_rules_out_v1() {
        let mounts = "cgroup /cg/cpu cgroup rw,cpu 0 0\ncgroup /cg/cpuset cgroup rw,cpuset 0 0\n";
        let d = tree(&[]);
        let p = probe(mounts, &d, 0);
        assert_eq!(p.v1, Err("no cgroup v1 hierarchy with freezer".to_string()));
        assert_eq!(p.choose(Want::Auto).unwrap().0, Flavor::Affinity);
    }

    #[test]
    fn no_cgroups_at_all_is_affinity_only() {
        let d = tree(&[]);
        let p = probe("proc /proc proc rw 0 0\n", &d, 0);
        let (flavor, notes) = p.choose(Want::Auto).unwrap();
        assert_eq!(flavor, Flavor::Affinity);
        assert!(notes[0].contains("no cgroup2 mount") && notes[1].contains("no cgroup v1"), "{notes:?}");
        assert!(p.sweep_roots.is_empty());
    }

    #[test]
    fn a_user_who_cannot_write_the_hierarchies_gets_affinity_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tree(&[("sys/fs/cgroup/unified/cgroup.controllers", "\n")]);
        for h in ["cpu", "cpuset", "freezer"] {
            let dir = d.path().join("sys/fs/cgroup").join(h);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // The directories belong to whoever runs the test, not to uid 4242.
        let (flavor, notes) = probe(HYBRID, &d, 4242).choose(Want::Auto).unwrap();
        assert_eq!(flavor, Flavor::Affinity);
        assert!(notes.iter().any(|n| n.contains("not writable by uid 4242 (needs root)")), "{notes:?}");
        // A delegated (world- or owner-writable) hierarchy is usable.
        for h in ["cpu", "cpuset", "freezer"] {
            let dir = d.path().join("sys/fs/cgroup").join(h);
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        assert!(probe(HYBRID, &d, 4242).v1.is_ok());
    }

    #[test]
    fn affinity_can_be_asked_for_and_bad_names_are_refused() {
        let d = tree(&[("sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n")]);
        assert_eq!(probe(UNIFIED, &d, 0).choose(Want::Affinity).unwrap().0, Flavor::Affinity);
        assert_eq!("cgroup2".parse::<Want>(), Ok(Want::CgroupV2));
        let e = "cgroups".parse::<Want>().unwrap_err();
        assert!(e.contains("unknown mechanism `cgroups`"), "{e}");
    }

    #[test]
    fn mount_points_with_spaces_are_unescaped() {
        let m = parse_mounts("cgroup /a\\040b cgroup rw,cpu 0 0\n");
        assert_eq!(m[0].dir, "/a b");
    }
}
