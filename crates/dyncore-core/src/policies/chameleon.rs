//! `chameleon`: Chameleon's cluster scheduler (Chameleon §3.3, §4.3) —
//! processor proxies, execution objects from node managers, CFS run queues
//! with per-CPU `vruntimes[]` and taxation on borrowed CPUs. The mechanism
//! is [`crate::sched`]; this file registers it.

use super::{Params, PolicyEntry, PolicyInfo, RunContext};
use crate::policy::{ActionKind, EventKind, Policy};
use crate::sched::{ClusterScheduler, Config};

pub static POLICY: PolicyEntry = PolicyEntry {
    info: PolicyInfo {
        name: "chameleon",
        summary: "Chameleon's cluster scheduler: execution objects from node managers, CFS with vruntimes[] and \
                  taxation on borrowed CPUs",
        params: &[],
        events: &[EventKind::Spawn, EventKind::Exit, EventKind::Tick, EventKind::ReconfigDone],
        actions: &[
            ActionKind::Dispatch,
            ActionKind::SetSpeed,
            ActionKind::Fuse,
            ActionKind::Split,
            ActionKind::Offline,
            ActionKind::Online,
            ActionKind::Migrate,
            ActionKind::Object,
        ],
    },
    build,
};

fn build(ctx: &RunContext, _: &Params) -> Box<dyn Policy + Send> {
    Box::new(ClusterScheduler::new(ctx.topology.clone(), config(ctx, true)))
}

/// The scheduler's configuration for a run; `chameleon` switches execution
/// objects on (off: the Linux-like baseline).
pub(super) fn config(ctx: &RunContext, chameleon: bool) -> Config {
    Config {
        min_granularity_ns: ctx.min_granularity_ns,
        chameleon,
        notify_on_exit: ctx.notify_on_exit,
        max_fuse: ctx.max_fuse,
        speed: ctx.speed,
        reconfig_mode: ctx.reconfig_mode,
    }
}
