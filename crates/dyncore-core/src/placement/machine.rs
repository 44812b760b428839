//! The placement policy's state machine: the modes' decisions (see the
//! module docs of [`crate::placement`]).

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Action, ComponentKind, ComponentSample, Control, Decision, Layout, LoadSample, Mode, PlacementConfig,
    PlacementError,
};
use crate::policy::{self, Event, Policy};
use crate::power::{SpeedTable, StepIdx};
use crate::{CpuId, Nanos};

/// Where `efficient` is in its search (module docs of [`crate::placement`]).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tuning {
    /// Halving over the step of the cores in use. In step indices (0 is the
    /// fastest): `hold` is the largest index (the slowest step) known to
    /// hold the target, `miss` the smallest (the fastest step) known to
    /// miss it; the answer lies between them.
    Search { hold: Option<u8>, miss: Option<u8> },
    /// Every core that can be added is, at full speed, and the target is
    /// still not held.
    Exhausted,
}

impl Tuning {
    const FRESH: Tuning = Tuning::Search { hold: None, miss: None };
}

/// The placement policy (see the module docs).
#[derive(Debug, Clone)]
pub struct PlacementPolicy {
    cfg: PlacementConfig,
    speeds: SpeedTable,
    kinds: Vec<ComponentKind>,
    mode: Mode,
    layout: Layout,
    /// Each component's work in the last sample (full-speed CPUs).
    work: BTreeMap<ComponentKind, f64>,
    last_change_ns: Option<Nanos>,
    /// Samples in a row that called for spreading / consolidating.
    hot: u32,
    cold: u32,
    settle: u32,
    tuning: Tuning,
}

impl PlacementPolicy {
    /// A policy for `kinds` on `cfg.cpus`. Nothing is placed until
    /// [`PlacementPolicy::start`].
    pub fn new(
        cfg: PlacementConfig,
        kinds: &[ComponentKind],
        speeds: SpeedTable,
    ) -> Result<Self, PlacementError> {
        if cfg.cpus.is_empty() {
            return Err(PlacementError("the placement has no CPUs".into()));
        }
        if cfg.cpus.iter().collect::<BTreeSet<_>>().len() != cfg.cpus.len() {
            return Err(PlacementError(format!("CPUs {:?} name a CPU twice", cfg.cpus)));
        }
        if kinds.is_empty() || kinds.iter().collect::<BTreeSet<_>>().len() != kinds.len() {
            return Err(PlacementError(format!("components {kinds:?} are empty or name one twice")));
        }
        if speeds.is_empty() {
            return Err(PlacementError("the speed table has no steps".into()));
        }
        if let Mode::Efficient { target_bits_per_s } = cfg.mode
            && !(target_bits_per_s.is_finite() && target_bits_per_s > 0.0)
        {
            return Err(PlacementError(format!(
                "efficient mode needs a positive target, not {target_bits_per_s}"
            )));
        }
        let work = kinds.iter().map(|&k| (k, k.prior_work())).collect();
        let layout = Layout { cpu_of: BTreeMap::new(), step_of: BTreeMap::new() };
        Ok(PlacementPolicy {
            mode: cfg.mode,
            cfg,
            speeds,
            kinds: kinds.to_vec(),
            layout,
            work,
            last_change_ns: None,
            hot: 0,
            cold: 0,
            settle: 0,
            tuning: Tuning::FRESH,
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn speeds(&self) -> &SpeedTable {
        &self.speeds
    }

    /// Whether `efficient` ran out of steps below its target.
    pub fn target_unreachable(&self) -> bool {
        self.tuning == Tuning::Exhausted
    }

    /// Places everything as the mode starts.
    pub fn start(&mut self, now_ns: Nanos, out: &mut Vec<Decision>) {
        self.enter(now_ns, self.mode, out);
    }

    /// Switches mode; the new mode's layout is decided at once.
    pub fn set_mode(&mut self, now_ns: Nanos, mode: Mode, out: &mut Vec<Decision>) {
        self.enter(now_ns, mode, out);
    }

    fn enter(&mut self, now_ns: Nanos, mode: Mode, out: &mut Vec<Decision>) {
        self.mode = mode;
        self.hot = 0;
        self.cold = 0;
        self.settle = 0;
        self.tuning = Tuning::FRESH;
        let fastest = self.speeds.fastest();
        let (target, reason) = match mode {
            Mode::Spread => {
                (self.spread_layout(fastest), "mode spread: each component its own CPU, full speed".into())
            }
            Mode::Consolidate | Mode::Dynamic => {
                (self.consolidated_layout(), format!("mode {mode}: all components on one CPU, full speed"))
            }
            Mode::Efficient { .. } => {
                let mut l = self.consolidated_layout();
                let can_grow = self.cfg.cpus.len().min(self.kinds.len()) > 1;
                let (fast, slow) = self.search_range(can_grow);
                let mid = StepIdx(((u16::from(fast.0) + u16::from(slow.0)) / 2) as u8);
                l.step_of.insert(self.cfg.cpus[0], mid);
                (
                    l,
                    format!(
                        "mode {mode}: start on one core at {} MHz, halfway through its steps, and halve from there",
                        self.speeds.get(mid).mhz
                    ),
                )
            }
            Mode::Manual if !self.layout.cpu_of.is_empty() => return,
            Mode::Manual => (self.spread_layout(fastest), "mode manual: start spread at full speed".into()),
        };
        self.transition(now_ns, target, &reason, out);
    }

    /// Moves one component by hand; the policy switches to `manual` so it
    /// does not undo the move.
    pub fn migrate(
        &mut self,
        now_ns: Nanos,
        component: ComponentKind,
        to: CpuId,
        out: &mut Vec<Decision>,
    ) -> Result<(), PlacementError> {
        self.check_cpu(to)?;
        let from = *self
            .layout
            .cpu_of
            .get(&component)
            .ok_or_else(|| PlacementError(format!("no component `{component}` in this stack")))?;
        self.mode = Mode::Manual;
        if from != to {
            self.emit(now_ns, Action::Migrate { component, from, to }, "requested by hand".into(), out);
        }
        Ok(())
    }

    /// Sets one CPU's speed by hand (switches to `manual`).
    pub fn set_speed(
        &mut self,
        now_ns: Nanos,
        cpu: CpuId,
        step: StepIdx,
        out: &mut Vec<Decision>,
    ) -> Result<(), PlacementError> {
        self.check_cpu(cpu)?;
        if usize::from(step.0) >= self.speeds.len() {
            return Err(PlacementError(format!("no speed step {}", step.0)));
        }
        self.mode = Mode::Manual;
        if self.layout.step_of.get(&cpu) != Some(&step) {
            self.emit(now_ns, Action::SetSpeed { cpu, step }, "requested by hand".into(), out);
        }
        Ok(())
    }

    fn check_cpu(&self, cpu: CpuId) -> Result<(), PlacementError> {
        if self.cfg.cpus.contains(&cpu) {
            Ok(())
        } else {
            Err(PlacementError(format!("CPU {cpu} is not one of the placement's CPUs {:?}", self.cfg.cpus)))
        }
    }

    /// Whether [`PlacementPolicy::control`] can carry `c` out: a move names
    /// a component of this stack and one of the policy's CPUs, a speed one
    /// of its CPUs and a step of its table, and an `efficient` mode a
    /// positive finite target.
    pub fn validate(&self, c: &Control) -> Result<(), PlacementError> {
        match *c {
            Control::Start => Ok(()),
            Control::SetMode { mode: Mode::Efficient { target_bits_per_s } }
                if !(target_bits_per_s.is_finite() && target_bits_per_s > 0.0) =>
            {
                Err(PlacementError(format!(
                    "efficient mode needs a positive target, not {target_bits_per_s}"
                )))
            }
            Control::SetMode { .. } => Ok(()),
            Control::Migrate { component, to } => {
                self.check_cpu(to)?;
                if self.kinds.contains(&component) {
                    Ok(())
                } else {
                    Err(PlacementError(format!("no component `{component}` in this stack")))
                }
            }
            Control::SetSpeed { cpu, step } => {
                self.check_cpu(cpu)?;
                if usize::from(step.0) < self.speeds.len() {
                    Ok(())
                } else {
                    Err(PlacementError(format!(
                        "no speed step {} (the table has {})",
                        step.0,
                        self.speeds.len()
                    )))
                }
            }
        }
    }

    /// Carries out a control (see [`Control`]). A move or speed asked of a
    /// stack not yet started starts it first.
    pub fn control(
        &mut self,
        now_ns: Nanos,
        c: &Control,
        out: &mut Vec<Decision>,
    ) -> Result<(), PlacementError> {
        self.validate(c)?;
        match *c {
            Control::Start => self.start(now_ns, out),
            Control::SetMode { mode } => self.set_mode(now_ns, mode, out),
            Control::Migrate { component, to } => {
                if self.layout.cpu_of.is_empty() {
                    self.start(now_ns, out);
                }
                self.migrate(now_ns, component, to, out)?;
            }
            Control::SetSpeed { cpu, step } => {
                if self.layout.cpu_of.is_empty() {
                    self.start(now_ns, out);
                }
                self.set_speed(now_ns, cpu, step, out)?;
            }
        }
        Ok(())
    }

    /// Feeds one sample, taken at `now_ns`.
    pub fn on_sample(&mut self, now_ns: Nanos, s: &LoadSample, out: &mut Vec<Decision>) {
        if self.layout.cpu_of.is_empty() {
            self.start(now_ns, out);
        }
        for &k in &self.kinds {
            let busy = sample_of(s, k).busy;
            let cap = self.speeds.capacity(self.layout.step_of[&self.layout.cpu_of[&k]]);
            self.work.insert(k, busy * cap);
        }
        match self.mode {
            Mode::Dynamic => self.dynamic(now_ns, s, out),
            Mode::Efficient { target_bits_per_s } => self.efficient(now_ns, s, target_bits_per_s, out),
            Mode::Spread | Mode::Consolidate | Mode::Manual => {}
        }
    }

    /// `dynamic`: consolidate when light, spread on a burst, with hysteresis.
    fn dynamic(&mut self, now_ns: Nanos, s: &LoadSample, out: &mut Vec<Decision>) {
        let t = self.cfg.dynamic;
        let consolidated = self.layout.cpus_in_use().len() == 1;
        let max_fill = self.kinds.iter().map(|&k| sample_of(s, k).fill).fold(0.0, f64::max);
        let behind: Vec<ComponentKind> =
            self.kinds.iter().copied().filter(|&k| sample_of(s, k).behind).collect();
        let total_work: f64 = self.work.values().sum();
        // On one CPU the components' busy fractions add up to the CPU's.
        let cpu_busy: f64 = self.kinds.iter().map(|&k| sample_of(s, k).busy).sum();
        let dwelt = self.last_change_ns.is_none_or(|t0| now_ns.saturating_sub(t0) >= t.min_dwell_ns);
        if consolidated {
            let why = if cpu_busy >= t.spread_busy {
                Some(format!("burst: the shared CPU is {cpu_busy:.2} busy ≥ {:.2}", t.spread_busy))
            } else if max_fill >= t.spread_fill {
                Some(format!("burst: a channel is {max_fill:.2} full ≥ {:.2}", t.spread_fill))
            } else {
                behind.first().map(|k| format!("burst: a sender reports {k} cannot keep up"))
            };
            self.hot = if why.is_some() { self.hot + 1 } else { 0 };
            if let Some(why) = why
                && self.hot >= t.spread_after
                && dwelt
            {
                let target = self.spread_layout(self.speeds.fastest());
                self.transition(now_ns, target, &format!("dynamic: spread — {why}"), out);
            }
        } else {
            let light = total_work <= t.consolidate_work && max_fill < t.spread_fill && behind.is_empty();
            self.cold = if light { self.cold + 1 } else { 0 };
            if light && self.cold >= t.consolidate_after && dwelt {
                let why = format!(
                    "idle: all components need {total_work:.2} of a CPU ≤ {:.2} for {} samples",
                    t.consolidate_work, self.cold
                );
                let target = self.consolidated_layout();
                self.transition(now_ns, target, &format!("dynamic: consolidate — {why}"), out);
            }
        }
    }

    /// `efficient`: the fewest cores, then a halving search over their
    /// speed (module docs of [`crate::placement`]).
    fn efficient(&mut self, now_ns: Nanos, s: &LoadSample, target: f64, out: &mut Vec<Decision>) {
        let t = self.cfg.efficient;
        if self.settle > 0 {
            self.settle -= 1;
            return;
        }
        let Tuning::Search { mut hold, mut miss } = self.tuning else { return };
        let bits = s.bits_per_s;
        // The step of the cores in use: the slowest of them (a search sets
        // them all to one step; a new core starts there too).
        let level = self.layout.cpus_in_use().iter().map(|c| self.layout.step_of[c].0).max().unwrap_or(0);
        if bits >= target * (1.0 - t.tolerance) {
            hold = Some(hold.map_or(level, |h| h.max(level)));
        } else {
            // Saturated: a CPU is busy (its components' busy fractions add
            // up), a channel is filling or a hint is raised. Otherwise the
            // application offers less than the target: speed would not help.
            let busiest_cpu = self
                .layout
                .groups()
                .values()
                .map(|g| g.iter().map(|&k| sample_of(s, k).busy).sum::<f64>())
                .fold(0.0, f64::max);
            let saturated = busiest_cpu >= t.saturated_busy
                || self.kinds.iter().any(|&k| {
                    let c = sample_of(s, k);
                    c.fill >= self.cfg.dynamic.spread_fill || c.behind
                });
            if !saturated {
                return;
            }
            miss = Some(miss.map_or(level, |m| m.min(level)));
            // A step that held before may miss now (the load grew): it
            // holds no longer.
            if hold.is_some_and(|h| h >= level) {
                hold = None;
            }
        }
        self.tuning = Tuning::Search { hold, miss };
        let can_grow = self.layout.cpus_in_use().len() < self.cfg.cpus.len().min(self.kinds.len());
        let (fast, slow) = self.search_range(can_grow);
        // Untried steps lie strictly between the two bounds (index terms:
        // `hold` below `miss`); the range's ends stand in for missing ones.
        let lo = hold.map_or(i32::from(fast.0) - 1, i32::from);
        let hi = miss.map_or(i32::from(slow.0) + 1, i32::from);
        if hi - lo > 1 {
            let mid = StepIdx(((lo + hi) / 2) as u8);
            let why = format!(
                "efficient: {:.2} Gbps against the target {:.2} at {} MHz; the slowest step that holds lies between \
                 {} and {} MHz: try {} MHz",
                bits / 1e9,
                target / 1e9,
                self.speeds.get(StepIdx(level)).mhz,
                self.mhz_or(hold, "none"),
                self.mhz_or(miss, "none"),
                self.speeds.get(mid).mhz
            );
            return self.set_level(now_ns, mid, &why, out);
        }
        match hold {
            // Found: the slowest step that holds, unless the cores are on it.
            Some(h) if h != level => {
                let why = format!(
                    "efficient: {} MHz is the slowest step that holds the target",
                    self.mhz_or(hold, "")
                );
                self.set_level(now_ns, StepIdx(h), &why, out)
            }
            Some(_) => {}
            None if can_grow => self.grow(now_ns, bits, target, out),
            None => self.tuning = Tuning::Exhausted,
        }
    }

    /// The steps a search runs over (fastest and slowest): while a core can
    /// be added, only the duty steps (module docs); on the last core, all.
    fn search_range(&self, can_grow: bool) -> (StepIdx, StepIdx) {
        (if can_grow { self.duty_floor() } else { self.speeds.fastest() }, self.speeds.slowest())
    }

    fn mhz_or(&self, i: Option<u8>, none: &str) -> String {
        i.map_or(none.to_string(), |i| self.speeds.get(StepIdx(i)).mhz.to_string())
    }

    /// Sets every core in use to `step`, then lets it settle.
    fn set_level(&mut self, now_ns: Nanos, step: StepIdx, reason: &str, out: &mut Vec<Decision>) {
        let mut target = self.layout.clone();
        for cpu in self.layout.cpus_in_use() {
            target.step_of.insert(cpu, step);
        }
        self.settle = self.cfg.efficient.settle_samples;
        self.transition(now_ns, target, reason, out);
    }

    /// The fastest step that only throttles (the chip at its lowest
    /// frequency): 1600 MHz on NewtOS's machine.
    fn duty_floor(&self) -> StepIdx {
        let chip = self.speeds.get(self.speeds.slowest()).chip_mhz;
        (0..self.speeds.len() as u8)
            .map(StepIdx)
            .find(|&i| self.speeds.get(i).chip_mhz == chip)
            .expect("the slowest step is at the lowest chip frequency")
    }

    /// Adds a core: spreads over one more CPU, every core at the middle of
    /// the range a search runs over, and searches afresh from there.
    fn grow(&mut self, now_ns: Nanos, bits: f64, target: f64, out: &mut Vec<Decision>) {
        let n = self.layout.cpus_in_use().len() + 1;
        let mut l = self.spread_over(n);
        let can_grow = n < self.cfg.cpus.len().min(self.kinds.len());
        let (fast, slow) = self.search_range(can_grow);
        let mid = StepIdx(((u16::from(fast.0) + u16::from(slow.0)) / 2) as u8);
        for cpu in l.cpus_in_use() {
            l.step_of.insert(cpu, mid);
        }
        self.tuning = Tuning::FRESH;
        self.settle = self.cfg.efficient.settle_samples;
        let why = format!(
            "efficient: {:.2} Gbps below the target {:.2} and no step of {} core(s) holds it: add a core, \
             every core at {} MHz, and halve from there",
            bits / 1e9,
            target / 1e9,
            n - 1,
            self.speeds.get(mid).mhz
        );
        self.transition(now_ns, l, &why, out);
    }

    /// Every component on the first CPU at full speed.
    fn consolidated_layout(&self) -> Layout {
        let cpu = self.cfg.cpus[0];
        let mut l = self.layout.clone();
        l.cpu_of = self.kinds.iter().map(|&k| (k, cpu)).collect();
        l.step_of.insert(cpu, self.speeds.fastest());
        self.fill_steps(&mut l);
        l
    }

    /// Every CPU (up to one per component) at `step`; see [`Self::spread_over`].
    fn spread_layout(&self, step: StepIdx) -> Layout {
        let mut l = self.spread_over(self.cfg.cpus.len());
        for cpu in l.cpus_in_use() {
            l.step_of.insert(cpu, step);
        }
        l
    }

    /// The components over the first `n` CPUs: one each where there are
    /// enough; otherwise the heaviest first, each onto the least-loaded CPU
    /// (longest processing time first). Steps are left as they are.
    fn spread_over(&self, n: usize) -> Layout {
        let n = n.clamp(1, self.cfg.cpus.len());
        let mut order = self.kinds.clone();
        // Heaviest first; ties in pipeline order (stable sort).
        order.sort_by(|a, b| self.work[b].total_cmp(&self.work[a]));
        let mut load: Vec<f64> = vec![0.0; n];
        let mut cpu_of = BTreeMap::new();
        for (i, k) in order.iter().enumerate() {
            let slot = if i < n {
                i
            } else {
                (0..n).min_by(|&a, &b| load[a].total_cmp(&load[b])).expect("at least one CPU")
            };
            load[slot] += self.work[k];
            cpu_of.insert(*k, self.cfg.cpus[slot]);
        }
        let mut l = Layout { cpu_of, step_of: self.layout.step_of.clone() };
        self.fill_steps(&mut l);
        l
    }

    /// CPUs without a step yet get the fastest (they are unused).
    fn fill_steps(&self, l: &mut Layout) {
        for &cpu in &self.cfg.cpus {
            l.step_of.entry(cpu).or_insert(self.speeds.fastest());
        }
    }

    /// Emits the actions that turn the current layout into `target`: per
    /// CPU whose set of components changed, a Dedicate (one component) or
    /// a Consolidate (several); per CPU whose step changed, a SetSpeed. A
    /// backend applies one call's decisions as a whole.
    fn transition(&mut self, now_ns: Nanos, target: Layout, reason: &str, out: &mut Vec<Decision>) {
        let old = self.layout.groups();
        for (cpu, group) in target.groups() {
            if old.get(&cpu) == Some(&group) {
                continue;
            }
            let action = if group.len() == 1 {
                Action::Dedicate { component: *group.first().expect("non-empty"), cpu }
            } else {
                Action::Consolidate { components: group.into_iter().collect(), cpu }
            };
            self.emit(now_ns, action, reason.to_string(), out);
        }
        for (&cpu, &step) in &target.step_of {
            if self.layout.step_of.get(&cpu) != Some(&step) {
                self.emit(now_ns, Action::SetSpeed { cpu, step }, reason.to_string(), out);
            }
        }
        debug_assert_eq!(self.layout, target, "the emitted actions must give the target layout");
        self.layout = target;
    }

    fn emit(&mut self, now_ns: Nanos, action: Action, reason: String, out: &mut Vec<Decision>) {
        self.layout.apply(&action);
        self.last_change_ns = Some(now_ns);
        out.push(Decision { at_ns: now_ns, action, reason });
        #[cfg(debug_assertions)]
        self.check();
    }

    /// Checks the invariants in the module docs (panics if broken).
    ///
    /// Also: the layout is the previous layout with every emitted decision
    /// applied in order (a backend that applies them mirrors it exactly).
    pub fn check(&self) {
        for (k, cpu) in &self.layout.cpu_of {
            assert!(self.cfg.cpus.contains(cpu), "{k} is on CPU {cpu}, not one of the policy's");
            assert!(self.kinds.contains(k), "{k} is not a component of this stack");
        }
        for (cpu, s) in &self.layout.step_of {
            assert!(self.cfg.cpus.contains(cpu), "CPU {cpu} has a step but is not the policy's");
            assert!(usize::from(s.0) < self.speeds.len(), "CPU {cpu} has no valid step");
        }
    }
}

fn sample_of(s: &LoadSample, k: ComponentKind) -> ComponentSample {
    let c = s.components.get(&k).copied().unwrap_or_default();
    let clean = |x: f64| if x.is_finite() { x.clamp(0.0, 1.0) } else { 0.0 };
    ComponentSample { busy: clean(c.busy), fill: clean(c.fill), behind: c.behind }
}

/// The placement policy behind the policy boundary: [`Event::StackControl`]
/// and [`Event::StackLoad`] in, [`policy::Action::Place`] out. Thread events
/// are not its concern and are ignored; so is a control that
/// [`PlacementPolicy::validate`] refuses (a frontend validates first; in
/// debug builds, an invalid control panics to find the frontend's bug).
impl Policy for PlacementPolicy {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<policy::Action>) {
        let mut decisions = Vec::new();
        match event {
            Event::StackLoad { sample } => self.on_sample(now, sample, &mut decisions),
            Event::StackControl { control } => {
                let r = self.control(now, control, &mut decisions);
                debug_assert!(r.is_ok(), "an unvalidated control reached the policy: {r:?}");
            }
            Event::Spawn { .. }
            | Event::Exit { .. }
            | Event::Tick { .. }
            | Event::ReconfigDone { .. }
            | Event::Load { .. } => {}
        }
        out.extend(decisions.into_iter().map(|decision| policy::Action::Place { decision }));
    }
}
