//! The programs of a run as every backend starts them: which instances,
//! when, with how much work, how many threads and which [`ThreadSpec`]; and
//! how a parallel program's work is dealt to its threads. The simulator
//! (`engine.rs`) and the live backend (the `dyncore` command's `live`
//! module) both call these, so the policy is handed the same spawns by
//! both, and a live program's work has the same shape as the simulated one.

use dyncore_core::CpuSet;
use dyncore_core::policy::ThreadSpec;
use dyncore_core::sched::auto_tax;
use dyncore_core::topology::CoreKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::machine::MachineSpec;
use crate::scenario::{RunSpec, TaxSpec, WorkloadSpec};
use crate::workload::{Binding, Program, Shape};

/// One program instance of a run.
#[derive(Debug, Clone)]
pub struct ProgramPlan {
    /// Report label (instances of one label are averaged).
    pub label: String,
    /// Name in traces and timelines: the label, with `#k` when several
    /// programs of the run share it (numbered across the whole run).
    pub name: String,
    /// Instance number within its workload entry (`count`).
    pub instance: u32,
    pub program: &'static Program,
    pub start_ns: u64,
    /// Total work, ns of one baseline CPU.
    pub work_ns: u64,
    /// Threads it spawns (1 for a sequential program).
    pub threads: u32,
    pub smt_factor: f64,
    /// The spec every one of its threads is spawned with: what the thread
    /// is and wants, whatever the policy. Whether it gets an execution
    /// object is the policy's decision alone.
    pub template: ThreadSpec,
    /// A real program's argv (a `command` workload; `program` is then its
    /// model or the stand-in).
    pub command: Option<Vec<String>>,
}

/// The program instances of run `spec` on `machine`, in workload order (the
/// order in which the engine queues their arrivals).
pub fn plan_programs(spec: &RunSpec, machine: &MachineSpec) -> Vec<ProgramPlan> {
    let mut out = Vec::new();
    for w in &spec.workloads {
        let plan = plan_workload(w, machine);
        for instance in 0..w.count {
            let start_ms = w.start_ms + f64::from(instance) * w.every_ms.unwrap_or(0.0);
            out.push(ProgramPlan { instance, start_ns: (start_ms * 1e6) as u64, ..plan.clone() });
        }
    }
    let names = instance_names(out.iter().map(|p| p.label.as_str()));
    for (p, name) in out.iter_mut().zip(names) {
        p.name = name;
    }
    out
}

/// One workload entry's plan (instance 0, not yet named).
fn plan_workload(w: &WorkloadSpec, machine: &MachineSpec) -> ProgramPlan {
    let ncpus = machine.topology.ncpus();
    let prog = w.program_def().expect("validated");
    let threads = if prog.is_sequential() { 1 } else { w.threads.unwrap_or(ncpus as u32) };
    let smt_factor = w.smt_factor.unwrap_or(prog.smt_factor);
    // The object it asks for: `seq_level`'s, else the machine's largest for
    // a sequential program and none for a parallel one; never more than
    // the machine can fuse.
    let want_cpus = match w.seq_level {
        Some(l) => 1usize << l,
        None if prog.is_sequential() => machine.max_fuse,
        None => 1,
    }
    .min(machine.max_fuse);
    // The benefit of the object: its speed over a native CPU; on SMT, the
    // gain of a core alone over a shared one.
    let speedup = if machine.smt {
        1.0 / smt_factor
    } else {
        machine.speed.duty(CoreKind::Little, want_cpus, prog.class).speedup()
    };
    let weight = w.weight.unwrap_or(speedup);
    let tax = match w.tax {
        TaxSpec::Rate(r) => r,
        TaxSpec::Auto(_) => auto_tax(want_cpus, speedup),
    };
    let affinity = w.pin.as_ref().map(|p| {
        if p == "fast" {
            let f = machine.topology.cpus_of_kind(CoreKind::Big);
            if f.is_empty() { machine.topology.node_cpus(0) } else { f }
        } else {
            let s: CpuSet = p.parse().expect("validated cpulist");
            assert!(s.last().is_some_and(|l| l < ncpus), "validated: pin `{p}` names CPUs of the machine");
            s
        }
    });
    ProgramPlan {
        label: w.label.clone().unwrap_or_else(|| match &w.command {
            Some(argv) => argv.join(" "),
            None => prog.name.to_string(),
        }),
        name: String::new(),
        instance: 0,
        program: prog,
        start_ns: (w.start_ms * 1e6) as u64,
        work_ns: (w.work_ms.unwrap_or(prog.work_ms) * 1e6) as u64,
        threads,
        smt_factor,
        template: ThreadSpec { nice: w.nice, tax, want_cpus, weight, affinity, class: prog.class },
        command: w.command.clone(),
    }
}

/// Names in traces: each label, with `#k` (the k-th program of that label,
/// counted across the whole run) when several share it.
pub fn instance_names<'a>(labels: impl Iterator<Item = &'a str> + Clone) -> Vec<String> {
    let mut per_label: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for l in labels.clone() {
        *per_label.entry(l).or_default() += 1;
    }
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    labels
        .map(|l| {
            if per_label[l] > 1 {
                let k = seen.entry(l).or_default();
                *k += 1;
                format!("{l}#{k}")
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// The generator that deals the work of the `program`-th program of a run
/// (in [`plan_programs`] order) of a scenario with `seed`. One of its own,
/// so that what a program is given depends on the seed alone: not on what
/// else drew numbers before it started (the simulator's IPIs), nor on the
/// run — the same program in two runs of a scenario (the same workload on
/// two machines or under two policies) gets the same tasks, so the runs
/// differ by the machine and the policy, not by the draw — and a live run
/// deals the same tasks as the simulator.
pub fn work_rng(seed: u64, program: usize) -> ChaCha8Rng {
    // One splitmix64 step over the two, as the engine seeds its own generator.
    let mut z = seed ^ (program as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ChaCha8Rng::seed_from_u64(z ^ (z >> 31))
}

/// A program's work dealt to its threads when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DealtWork {
    /// Each thread's first piece of work (baseline ns), one per thread
    /// that gets any.
    pub initial: Vec<u64>,
    /// The shared pool of the remaining tasks (dynamic and process
    /// bindings), last element first: `pop()` takes them in creation order.
    pub pool: Vec<u64>,
}

/// Deals `work_ns` of a program of `shape` to `threads` threads, drawing
/// from `rng`: a sequential program gets it all; static binding gives each
/// thread an equal share (± the shape's imbalance, scaled so the shares sum
/// to the work); dynamic and process bindings cut it into tasks of the
/// shape's length (± its imbalance), one to each thread to start with and
/// the rest in a pool that a thread takes from when its task is done.
pub fn deal_work(shape: Shape, work_ns: u64, threads: u32, rng: &mut impl Rng) -> DealtWork {
    let mut initial: Vec<u64> = Vec::with_capacity(threads as usize);
    let mut pool = Vec::new();
    match shape {
        Shape::Sequential => initial.push(work_ns),
        Shape::Parallel { binding: Binding::Static, imbalance, .. } => {
            let share = work_ns as f64 / f64::from(threads);
            let mut shares: Vec<f64> = (0..threads)
                .map(|_| {
                    if imbalance > 0.0 {
                        share * (1.0 + rng.random_range(-imbalance..imbalance))
                    } else {
                        share
                    }
                })
                .collect();
            // Keep the total exact: scale so the shares sum to `work`.
            let sum: f64 = shares.iter().sum();
            for s in &mut shares {
                *s *= work_ns as f64 / sum;
            }
            initial.extend(shares.into_iter().map(|s| s.max(1.0) as u64));
        }
        Shape::Parallel { binding: Binding::Dynamic | Binding::Processes, task_ns, imbalance } => {
            let mut left = work_ns;
            while left > 0 {
                let f = if imbalance > 0.0 { 1.0 + rng.random_range(-imbalance..imbalance) } else { 1.0 };
                let len = ((task_ns as f64 * f) as u64).clamp(1, left);
                pool.push(len);
                left -= len;
            }
            pool.reverse(); // pop() takes tasks in creation order
            for _ in 0..threads {
                match pool.pop() {
                    Some(t) => initial.push(t),
                    None => break,
                }
            }
        }
    }
    DealtWork { initial, pool }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    #[test]
    fn dealt_work_adds_up_to_the_program_and_keeps_the_shape() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for p in crate::workload::PROGRAMS {
            let work = 4_800_000_000;
            let d = deal_work(p.shape, work, 4, &mut rng);
            let total: u64 = d.initial.iter().chain(&d.pool).sum();
            match p.shape {
                Shape::Sequential => assert_eq!((d.initial.clone(), d.pool.len()), (vec![work], 0)),
                Shape::Parallel { binding: Binding::Static, .. } => {
                    assert_eq!((d.initial.len(), d.pool.len()), (4, 0), "{}", p.name);
                    // Float shares are truncated: at most 1 ns each.
                    assert!(work - total <= 4, "{}: {total}", p.name);
                }
                Shape::Parallel { task_ns, imbalance, .. } => {
                    assert_eq!(total, work, "{}", p.name);
                    assert_eq!(d.initial.len(), 4, "{}", p.name);
                    let longest = (task_ns as f64 * (1.0 + imbalance)) as u64;
                    assert!(d.initial.iter().chain(&d.pool).all(|&t| t <= longest), "{}", p.name);
                }
            }
        }
    }

    #[test]
    fn each_program_draws_from_its_own_stream() {
        let draw = |seed, p| {
            let shape = crate::workload::program("pmake").unwrap().shape;
            deal_work(shape, 4_800_000_000, 4, &mut work_rng(seed, p))
        };
        assert_eq!(draw(1, 0), draw(1, 0), "the same seed and program: the same tasks");
        assert_ne!(draw(1, 0), draw(1, 1));
        assert_ne!(draw(1, 0), draw(2, 0));
    }

    #[test]
    fn plans_carry_the_spawn_spec_and_number_shared_labels() {
        let s = Scenario::from_toml(
            r#"
name = "t"
title = "t"
[[run]]
label = "a"
machine = "uniform"
policy = "chameleon"
[[run.workload]]
program = "nqueen"
count = 2
tax = "auto"
[[run.workload]]
program = "fibonacci"
threads = 3
start_ms = 5
[[run.workload]]
program = "gcc"
count = 3
start_ms = 1
every_ms = 2.5
"#,
        )
        .unwrap();
        s.validate().unwrap();
        let machine = MachineSpec::build(&s.runs[0]).unwrap();
        let plans = plan_programs(&s.runs[0], &machine);
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["nqueen#1", "nqueen#2", "fibonacci", "gcc#1", "gcc#2", "gcc#3"]);
        // Instances `every_ms` apart: 1, 3.5 and 6 ms.
        let starts: Vec<u64> = plans[3..].iter().map(|p| p.start_ns).collect();
        assert_eq!(starts, [1_000_000, 3_500_000, 6_000_000]);
        // N-Queen asks for the machine's largest object (a quad at 2x: the
        // auto tax is 3 borrowed CPUs per unit of extra speed).
        assert_eq!((plans[0].template.want_cpus, plans[0].template.tax), (4, 3.0));
        assert_eq!((plans[2].threads, plans[2].start_ns, plans[2].template.want_cpus), (3, 5_000_000, 1));
    }
}
