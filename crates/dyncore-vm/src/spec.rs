//! What a guest is asked to be: its topology, memory, cgroup hierarchy and
//! accelerator, checked before anything boots.
//!
//! Invariants (asserted in [`Topology::new`] and tested):
//! * `cpus == sockets * cores * threads`, every factor at least 1;
//! * `1 <= cpus <= MAX_CPUS`;
//! * each socket is one NUMA node with an equal share of the memory, so
//!   `dyncore topology` in the guest shows as many nodes as sockets.

use std::fmt;

use crate::VmError;

/// The guest's CPUs: sockets (NUMA nodes) × cores × SMT threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    /// Logical CPUs in all.
    pub cpus: u32,
    /// Hardware threads per core (SMT siblings).
    pub threads: u32,
    /// Sockets, each its own NUMA node.
    pub sockets: u32,
}

impl Topology {
    /// The most CPUs a guest may have. TCG runs every vCPU as a host
    /// thread: past 64 on a small host the guest crawls, and nothing the
    /// suites check needs more.
    pub const MAX_CPUS: u32 = 64;
    /// The most SMT threads per core a guest may have (x86 topologies
    /// QEMU builds; real parts have 2, some 4 or 8).
    pub const MAX_THREADS: u32 = 8;

    /// A topology, or a [`VmError::BadArgs`] that says which number is wrong
    /// and why.
    pub fn new(cpus: u32, threads: u32, sockets: u32) -> Result<Topology, VmError> {
        if cpus == 0 || cpus > Self::MAX_CPUS {
            return Err(VmError::BadArgs(format!("--cpus {cpus}: a guest has 1 to {} CPUs", Self::MAX_CPUS)));
        }
        if threads == 0 || threads > Self::MAX_THREADS {
            return Err(VmError::BadArgs(format!(
                "--smt {threads}: a core has 1 to {} threads",
                Self::MAX_THREADS
            )));
        }
        if sockets == 0 || sockets > cpus {
            return Err(VmError::BadArgs(format!(
                "--sockets {sockets}: a guest of {cpus} CPUs has 1 to {cpus} sockets"
            )));
        }
        if !cpus.is_multiple_of(threads * sockets) {
            return Err(VmError::BadArgs(format!(
                "--cpus {cpus} --smt {threads} --sockets {sockets}: this topology cannot be built: \
                 {cpus} CPUs do not split into {sockets} socket(s) of whole cores with {threads} \
                 threads each (CPUs must be a multiple of {})",
                threads * sockets
            )));
        }
        let t = Topology { cpus, threads, sockets };
        assert_eq!(t.sockets * t.cores_per_socket() * t.threads, t.cpus);
        Ok(t)
    }

    /// Cores in each socket.
    pub fn cores_per_socket(&self) -> u32 {
        self.cpus / (self.threads * self.sockets)
    }

    /// QEMU's `-smp`, `-object` and `-numa` arguments for this topology,
    /// with `mem_mib` of guest memory split evenly over the nodes. The
    /// memory is a shared memfd: virtiofs needs the guest's memory shared
    /// with its daemon.
    pub fn qemu_args(&self, mem_mib: u32) -> Vec<String> {
        let per_node = node_mib(mem_mib, self.sockets);
        let mut a = vec![
            "-m".to_string(),
            format!("{}M", per_node * self.sockets),
            "-smp".to_string(),
            format!(
                "cpus={},sockets={},cores={},threads={}",
                self.cpus,
                self.sockets,
                self.cores_per_socket(),
                self.threads
            ),
        ];
        for node in 0..self.sockets {
            a.push("-object".into());
            a.push(format!("memory-backend-memfd,id=mem{node},size={per_node}M,share=on"));
            a.push("-numa".into());
            a.push(format!("node,nodeid={node},memdev=mem{node}"));
        }
        if self.sockets > 1 {
            for node in 0..self.sockets {
                a.push("-numa".into());
                a.push(format!("cpu,node-id={node},socket-id={node}"));
            }
        }
        a
    }
}

/// Each node's memory: an equal share, rounded down to 2 MiB (a huge page),
/// at least 256 MiB.
fn node_mib(mem_mib: u32, nodes: u32) -> u32 {
    (mem_mib / nodes / 2 * 2).max(256)
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} CPUs ({} socket(s) × {} core(s) × {} thread(s))",
            self.cpus,
            self.sockets,
            self.cores_per_socket(),
            self.threads
        )
    }
}

/// The cgroup hierarchy the guest mounts at `/sys/fs/cgroup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cgroup {
    /// cgroup v1: `cpu,cpuacct` and `freezer` hierarchies, and `cpuset`
    /// where the kernel has it (the pinned kernel does not:
    /// `CONFIG_CPUSETS_V1` is off).
    V1,
    /// cgroup v2 only, with `cpuset cpu memory pids` enabled in the root's
    /// `cgroup.subtree_control`.
    V2,
}

impl Cgroup {
    /// The name the guest's init takes (`v1`, `v2`).
    pub fn name(self) -> &'static str {
        match self {
            Cgroup::V1 => "v1",
            Cgroup::V2 => "v2",
        }
    }
}

/// How the guest's CPUs are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM where a guest boots with it on this machine (probed once and
    /// remembered), TCG otherwise.
    Auto,
    /// Hardware virtualisation; an error if a guest does not boot with it.
    Kvm,
    /// QEMU's software emulation: functional results only, not timings.
    Tcg,
}

impl Accel {
    /// `kvm` or `tcg` (`auto` is resolved before a boot).
    pub fn name(self) -> &'static str {
        match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_factors_multiply_to_the_cpus() {
        let t = Topology::new(8, 2, 2).unwrap();
        assert_eq!(t.cores_per_socket(), 2);
        let a = t.qemu_args(1024).join(" ");
        assert!(a.contains("cpus=8,sockets=2,cores=2,threads=2"), "{a}");
        assert!(a.contains("node,nodeid=1,memdev=mem1"), "{a}");
        assert!(a.contains("cpu,node-id=1,socket-id=1"), "{a}");
        assert!(a.contains("size=512M"), "{a}");
    }

    #[test]
    fn impossible_topologies_are_refused_with_the_reason() {
        for (c, t, s, want) in [
            (0, 1, 1, "1 to 64 CPUs"),
            (65, 1, 1, "1 to 64 CPUs"),
            (8, 3, 1, "cannot be built"),
            (4, 0, 1, "1 to 8 threads"),
            (4, 1, 0, "sockets"),
            (6, 2, 2, "multiple of 4"),
        ] {
            let e = Topology::new(c, t, s).unwrap_err().to_string();
            assert!(e.contains(want), "{c}/{t}/{s}: {e}");
        }
        assert!(Topology::new(6, 3, 1).is_ok(), "6 CPUs are 2 cores of 3 threads");
    }

    #[test]
    fn one_socket_is_one_node_without_cpu_bindings() {
        let a = Topology::new(2, 1, 1).unwrap().qemu_args(1000).join(" ");
        assert!(a.contains("-m 1000M"), "{a}");
        assert!(!a.contains("socket-id"), "{a}");
    }
}
