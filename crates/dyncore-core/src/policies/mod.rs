//! The registry of policies: every policy dyncore can run, by name.
//!
//! A policy is one file here — a [`PolicyEntry`]: its [`PolicyInfo`]
//! (name, one line on what it does, its typed parameters with defaults and
//! limits, the events it reads and the actions it may emit) and a `build`
//! function that makes a fresh [`Policy`] for one run from the run's
//! [`RunContext`] and its validated [`Params`] — plus one name in the
//! `builtin![...]` line below. No backend changes: a backend gets a
//! `Box<dyn Policy + Send>` from [`Registry::build`], executes its actions,
//! and builds every output from the event and action streams.
//!
//! A scenario names its policy and configures it (`policy = "chameleon"`,
//! or `policy = { name = "greedy-fuse", idle_ms = 2 }`);
//! [`Registry::validate`] checks the parameters against the entry's
//! [`Param`]s and fills in the defaults, with errors that name the
//! parameter and say what it accepts. A program of its own registers its
//! policies beside the built-in ones with [`Registry::with`] (see
//! `examples/custom-policy/`).
//!
//! Before a run starts, [`Registry::refuse_unsupported`] holds the entry's
//! declared actions against what the backend executes, so that a policy
//! that emits an action the backend cannot carry out is refused with a
//! message, not stopped halfway.

mod params;

pub use params::{Param, ParamError, ParamKind, ParamValue, Params, parse_param};

use crate::Nanos;
use crate::policy::{ActionKind, EventKind, Policy};
use crate::reconfig::Mode;
use crate::speed::SpeedModel;
use crate::topology::Topology;

/// What a policy is and takes, as `dyncore policies` lists it.
#[derive(Debug)]
pub struct PolicyInfo {
    /// The name a scenario gives (`policy = "greedy-fuse"`).
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Its parameters, with their limits and defaults.
    pub params: &'static [Param],
    /// The events it reads (a backend sends every event; the rest are
    /// ignored).
    pub events: &'static [EventKind],
    /// The actions it may emit: a backend that cannot execute one of them
    /// refuses the policy before the run starts.
    pub actions: &'static [ActionKind],
}

impl PolicyInfo {
    /// Whether it may emit `kind`.
    pub fn emits(&self, kind: ActionKind) -> bool {
        self.actions.contains(&kind)
    }
}

/// What a run gives a policy to be built from: the machine and the run's
/// scheduling parameters. Time and randomness come in as values, never
/// from a clock or a generator of the policy's own.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub topology: Topology,
    /// Duties by CPU kind, object size and speed class (Table 2).
    pub speed: SpeedModel,
    /// Largest fused object the machine can form, in CPUs (1: none).
    pub max_fuse: usize,
    /// The period of every CPU's `Tick`.
    pub tick_ns: Nanos,
    /// CFS minimum granularity: how long a thread runs before a tick may
    /// preempt it.
    pub min_granularity_ns: Nanos,
    /// Whether node managers hear of exits (Chameleon; Figure 6's `3*`).
    pub notify_on_exit: bool,
    /// How CPUs go offline and online (Bolt's critical path, or naive).
    pub reconfig_mode: Mode,
    /// A seed, for a policy that draws (from a generator it seeds with it).
    pub seed: u64,
}

/// One policy: what it is, and how to build one for a run.
pub struct PolicyEntry {
    pub info: PolicyInfo,
    /// A fresh policy for one run; `params` have passed
    /// [`Registry::validate`] against `info.params`.
    pub build: fn(&RunContext, &Params) -> Box<dyn Policy + Send>,
}

impl std::fmt::Debug for PolicyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEntry").field("info", &self.info).finish_non_exhaustive()
    }
}

/// Declares the built-in policies: one module per policy (one file), each
/// with a `pub static POLICY: PolicyEntry`. Adding a policy is its file and
/// its name in this one line.
macro_rules! builtin {
    ($($m:ident),* $(,)?) => {
        $(mod $m;)*
        /// The built-in policies, in the order `dyncore policies` lists them.
        pub static BUILTIN: &[&PolicyEntry] = &[$(&$m::POLICY),*];
    };
}

builtin![chameleon, linux, pinned, greedy_fuse, park_idle];

/// An unknown policy name, with the names that exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy {
    pub name: String,
    pub known: Vec<&'static str>,
}

impl std::fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown policy `{}`; known policies: {}", self.name, self.known.join(", "))
    }
}

impl std::error::Error for UnknownPolicy {}

/// The policies a program can run: the built-in ones and its own.
#[derive(Debug, Clone)]
pub struct Registry {
    entries: Vec<&'static PolicyEntry>,
}

/// Two registries are equal when they hold the same policies.
impl PartialEq for Registry {
    fn eq(&self, other: &Registry) -> bool {
        self.entries.len() == other.entries.len()
            && self.entries.iter().zip(&other.entries).all(|(a, b)| std::ptr::eq(*a, *b))
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

impl Registry {
    /// Every policy dyncore ships.
    pub fn builtin() -> Registry {
        Registry { entries: BUILTIN.to_vec() }
    }

    /// This registry and `entry`. Panics if its name is taken: two policies
    /// of one name would make a scenario ambiguous.
    #[must_use]
    pub fn with(mut self, entry: &'static PolicyEntry) -> Registry {
        assert!(
            self.get(entry.info.name).is_err(),
            "a policy named `{}` is already registered",
            entry.info.name
        );
        self.entries.push(entry);
        self
    }

    /// Every registered policy, in registration order.
    pub fn entries(&self) -> &[&'static PolicyEntry] {
        &self.entries
    }

    /// The names, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.info.name).collect()
    }

    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Result<&'static PolicyEntry, UnknownPolicy> {
        self.entries
            .iter()
            .copied()
            .find(|e| e.info.name == name)
            .ok_or_else(|| UnknownPolicy { name: name.to_string(), known: self.names() })
    }

    /// `given` checked against the parameters of policy `name`: every one
    /// known and within its limits, the defaults filled in.
    pub fn validate(&self, name: &str, given: &[(String, ParamValue)]) -> Result<Params, ParamError> {
        let entry = self.get(name).map_err(|e| ParamError { param: None, message: e.to_string() })?;
        Params::validate(&entry.info, given)
    }

    /// A fresh policy `name` for one run (`params` from [`Registry::validate`]).
    pub fn build(
        &self,
        name: &str,
        ctx: &RunContext,
        params: &Params,
    ) -> Result<Box<dyn Policy + Send>, UnknownPolicy> {
        Ok((self.get(name)?.build)(ctx, params))
    }

    /// Refuses policy `name` on a backend that executes only `executes`,
    /// naming the first action it may emit that the backend cannot carry out.
    pub fn refuse_unsupported(
        name: &PolicyInfo,
        backend: &str,
        executes: &[ActionKind],
    ) -> Result<(), String> {
        match name.actions.iter().find(|a| !executes.contains(a)) {
            None => Ok(()),
            Some(a) => Err(format!(
                "policy `{}` may emit `{a}` actions, which the {backend} cannot execute (it executes: {})",
                name.name,
                executes.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests;
