//! `linux`: the Linux-like baseline — the same CFS run queues as
//! [`chameleon`](super::chameleon) with execution objects switched off:
//! every thread runs natively, pinned where its affinity says, load
//! balanced by migration.

use super::{Params, PolicyEntry, PolicyInfo, RunContext};
use crate::policy::{ActionKind, EventKind, Policy};
use crate::sched::ClusterScheduler;

pub static POLICY: PolicyEntry = PolicyEntry {
    info: PolicyInfo {
        name: "linux",
        summary: "CFS without execution objects: every thread native, pinned where its affinity says (the paper's \
                  baseline)",
        params: &[],
        events: &[EventKind::Spawn, EventKind::Exit, EventKind::Tick],
        actions: &[ActionKind::Dispatch, ActionKind::SetSpeed, ActionKind::Migrate],
    },
    build,
};

fn build(ctx: &RunContext, _: &Params) -> Box<dyn Policy + Send> {
    Box::new(ClusterScheduler::new(ctx.topology.clone(), super::chameleon::config(ctx, false)))
}
