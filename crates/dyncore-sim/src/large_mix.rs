//! The large dynamic machine's Chameleon workload mix, as scenario text:
//! the one builder behind `bench sim`'s large machine (dyncore-bench) and
//! the memory probe ([`crate::memory::probe_scenario`]).
//!
//! The machine is the dynamic one of [`LargeMix::nodes`] nodes of 16 CPUs
//! under Chameleon. Of its [`LargeMix::threads`] threads, `threads / 2`
//! are in one dynamic-binding parallel program (mandelbrot-db),
//! `threads / 4` in a task-parallel one (fibonacci), and the rest, `seq`,
//! are sequential programs asking for fused objects: `seq / 2` of sjeng,
//! then `seq - seq / 2` of gcc.
//!
//! ## Invariants
//! 1. The text is a function of the fields alone, workloads in the order
//!    above, one `key = value` a line, no trailing blank line.
//! 2. Work is computed as `(threads as f64 × work_per_thread_ms) ×
//!    work_scale` for a parallel program and `sequential_work_ms ×
//!    work_scale` for a sequential one, in that order of operations, and
//!    printed with `f64`'s `Display`: the callers' scenarios (and so the
//!    simulator's output, compared byte for byte elsewhere) depend on the
//!    exact figures. A `work_scale` of 1.0 leaves the product unchanged.
//! 3. `name`, `title` and `label` are written between double quotes as
//!    they are (no escaping): they hold no `"` and no `\`.

/// What differs between the users of the large mix; [`LargeMix::toml`]
/// writes the scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LargeMix<'a> {
    /// The scenario's `name`, `title`, and its one run's `label`.
    pub name: &'a str,
    pub title: &'a str,
    pub label: &'a str,
    /// Nodes of 16 CPUs.
    pub nodes: usize,
    /// Threads in all (every sequential program has one).
    pub threads: usize,
    /// A parallel program's work is its threads × this × `work_scale`.
    pub work_per_thread_ms: f64,
    /// Each sequential program's work is this × `work_scale`.
    pub sequential_work_ms: f64,
    pub work_scale: f64,
    /// When the gcc programs start (`None`: no `start_ms`, i.e. at 0).
    pub gcc_start_ms: Option<u64>,
}

impl LargeMix<'_> {
    /// The scenario text (invariants 1 to 3 of the module doc).
    pub fn toml(&self) -> String {
        debug_assert!(
            [self.name, self.title, self.label].iter().all(|s| !s.contains(['"', '\\'])),
            "names are written unescaped"
        );
        let (mandel, fib) = (self.threads / 2, self.threads / 4);
        let seq = self.threads - mandel - fib;
        let parallel_ms = |threads: usize| threads as f64 * self.work_per_thread_ms * self.work_scale;
        let seq_ms = self.sequential_work_ms * self.work_scale;
        let gcc_start = self.gcc_start_ms.map_or(String::new(), |ms| format!("start_ms = {ms}\n"));
        format!(
            r#"name = "{name}"
title = "{title}"
[[run]]
label = "{label}"
machine = "dynamic"
policy = "chameleon"
nodes = {nodes}
cpus_per_node = 16
[[run.workload]]
program = "mandelbrot-db"
threads = {mandel}
work_ms = {mandel_ms}
[[run.workload]]
program = "fibonacci"
threads = {fib}
work_ms = {fib_ms}
[[run.workload]]
program = "sjeng"
count = {sjeng}
work_ms = {seq_ms}
[[run.workload]]
program = "gcc"
count = {gcc}
work_ms = {seq_ms}
{gcc_start}"#,
            name = self.name,
            title = self.title,
            label = self.label,
            nodes = self.nodes,
            mandel_ms = parallel_ms(mandel),
            fib_ms = parallel_ms(fib),
            sjeng = seq / 2,
            gcc = seq - seq / 2,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_splits_threads_half_quarter_and_the_rest_sequential() {
        let m = LargeMix {
            name: "n",
            title: "t",
            label: "l",
            nodes: 2,
            threads: 44,
            work_per_thread_ms: 10.0,
            sequential_work_ms: 30.0,
            work_scale: 0.5,
            gcc_start_ms: Some(7),
        };
        let s = crate::Scenario::from_toml(&m.toml()).unwrap();
        s.validate().unwrap();
        let w = &s.runs[0].workloads;
        let counts: Vec<(u32, Option<u32>)> = w.iter().map(|w| (w.count, w.threads)).collect();
        // 22 + 11 threads parallel, 11 sequential: 5 sjeng, 6 gcc.
        assert_eq!(counts, [(1, Some(22)), (1, Some(11)), (5, None), (6, None)]);
        assert_eq!(s.runs[0].nodes, Some(2));
        assert!(m.toml().ends_with("work_ms = 15\nstart_ms = 7\n"), "{}", m.toml());
        let none = LargeMix { gcc_start_ms: None, ..m };
        assert!(none.toml().ends_with("count = 6\nwork_ms = 15\n"), "{}", none.toml());
    }
}
