//! What a placement policy sees of a running stack and does to it: load
//! samples, layout changes, the power of the CPUs now.

use std::collections::BTreeMap;

use dyncore_core::Nanos;
use dyncore_core::placement::{BEHIND_FILL, ComponentSample, Layout, LoadSample};
use dyncore_core::power::PowerModel;

use super::sim::{CpuState, Sim};

impl Sim<'_> {
    /// The load since the previous call, over `period_ns`, as a placement
    /// policy sees it, and each CPU's busy and power-gated fractions.
    /// `channel_slots` is the capacity a channel's fill is measured against.
    ///
    /// A component is *behind* (NewtOS §5's "the recipient of its messages
    /// cannot keep up") when its inbound channel is at least
    /// [`BEHIND_FILL`] full as the sample is taken — what the live stack's
    /// senders report of their outbound channels (`dyncore_net::control`).
    pub fn take_sample(&mut self, period_ns: Nanos, channel_slots: usize) -> (LoadSample, Vec<(f64, f64)>) {
        let p = period_ns.max(1) as f64;
        let mut s =
            LoadSample { components: BTreeMap::new(), bits_per_s: self.sample_acked as f64 * 8.0 / p * 1e9 };
        let slots = channel_slots.max(1) as f64;
        for (i, c) in self.comps.iter_mut().enumerate() {
            let busy = (self.sample_busy[i] as f64 / p).min(1.0);
            let fill = (c.peak_queue as f64 / slots).min(1.0);
            let behind = c.queue.len() as f64 / slots >= BEHIND_FILL;
            s.components.insert(c.kind, ComponentSample { busy, fill, behind });
            c.peak_queue = c.queue.len();
            self.sample_busy[i] = 0;
        }
        let (now, measure_from, sample_from) = (self.now, self.measure_from, self.sample_from);
        let mut cpus = Vec::with_capacity(self.cpus.len());
        for (i, cpu) in self.cpus.iter_mut().enumerate() {
            if cpu.state == CpuState::Asleep {
                cpu.idle.account(now, measure_from, sample_from);
            }
            let busy = (self.sample_cpu_busy[i] as f64 / p).min(1.0);
            let gated = (cpu.idle.sample_gated_ns as f64 / p).min(1.0 - busy);
            cpu.idle.sample_gated_ns = 0;
            cpus.push((busy, gated));
        }
        self.sample_cpu_busy.iter_mut().for_each(|b| *b = 0);
        self.sample_acked = 0;
        self.sample_from = now;
        (s, cpus)
    }

    /// Moves components and sets speeds as `layout` says (CPU ids index
    /// this run's CPUs). A job in progress ends where it started; a CPU's
    /// new speed applies from its next job.
    pub fn apply_layout(&mut self, layout: &Layout) {
        for cpu in &mut self.cpus {
            cpu.comps.clear();
        }
        for (i, c) in self.comps.iter_mut().enumerate() {
            if let Some(&cpu) = layout.cpu_of.get(&c.kind) {
                c.cpu = cpu;
            }
            self.cpus[c.cpu].comps.push(i);
        }
        for (&cpu, &step) in &layout.step_of {
            self.cpus[cpu].step = self.table.get(step);
        }
        for cpu in 0..self.cpus.len() {
            let n = self.cpus[cpu].comps.len().max(1);
            self.cpus[cpu].turn %= n;
            self.kick(cpu);
        }
    }

    /// Modelled power of the CPUs now, given each one's busy and
    /// power-gated fractions.
    pub fn power_w(&self, busy_gated: &[(f64, f64)]) -> f64 {
        let power = PowerModel::newtos();
        self.cpus
            .iter()
            .zip(busy_gated)
            .filter(|(c, _)| !c.comps.is_empty() && !c.system)
            .map(|(c, &(b, g))| power.core_w_gated(c.step, b, g))
            .sum()
    }

    /// Payload bytes acknowledged since the warm-up ended.
    pub fn acked_bytes(&self) -> u64 {
        self.acked_bytes
    }
}
