//! `dyncore policies`: every registered policy — its name, what it does, its
//! parameters with their limits and defaults, the events it reads, the
//! actions it may emit, and the backends that can run it (those that
//! execute every action it may emit).

use dyncore_core::policies::{ParamKind, PolicyInfo, Registry};
use dyncore_core::policy::ActionKind;

/// The backends a policy may run on, and what each executes.
const BACKENDS: &[(&str, &[ActionKind])] = &[
    ("sim", dyncore_scenario::policy::THREAD_ACTIONS),
    ("live", dyncore_scenario::policy::THREAD_ACTIONS),
    ("stack", &[ActionKind::Place]),
    // The sched_ext backend (dyncore-scx; `dyncore exec --backend scx`):
    // every thread action, as the kernel's scheduler.
    ("scx", dyncore_scenario::policy::THREAD_ACTIONS),
];

/// The backends that can run `info`.
pub fn backends(info: &PolicyInfo) -> Vec<&'static str> {
    BACKENDS
        .iter()
        .filter(|(_, executes)| info.actions.iter().all(|a| executes.contains(a)))
        .map(|(name, _)| *name)
        .collect()
}

/// Where the scx backend can run: this machine's kernel and binary.
fn scx_here() -> String {
    let kernel = std::path::Path::new("/sys/kernel/sched_ext").is_dir();
    let binary = dyncore_run::exec::scx_binary();
    match (kernel, binary) {
        (true, Some(b)) => format!("runs here (this kernel has sched_ext; {})", b.display()),
        (true, None) => {
            "this kernel has sched_ext, but dyncore-scx is not built (README, \"The sched_ext backend\")"
                .into()
        }
        (false, b) => format!(
            "not on this kernel (no sched_ext): in the VM rig's guest (`dyncore vm run`), whose kernel has it{}",
            if b.is_some() { "" } else { "; dyncore-scx is not built (README, \"The sched_ext backend\")" }
        ),
    }
}

fn default_of(kind: &ParamKind) -> String {
    kind.default_value().to_string()
}

/// The listing, as the terminal shows it: one block per policy.
pub fn listing(registry: &Registry) -> String {
    let mut out = format!(
        "{} policies. A scenario's run names one: policy = \"name\", or policy = {{ name = \"name\", <parameter> = <value> }}.\n",
        registry.entries().len()
    );
    for e in registry.entries() {
        let i = &e.info;
        out += &format!("\n{}: {}\n", i.name, i.summary);
        if i.params.is_empty() {
            out += "  parameters: none\n";
        } else {
            out += "  parameters:\n";
            for p in i.params {
                out +=
                    &format!("    {} = {}  {}; {}\n", p.name, default_of(&p.kind), p.doc, p.kind.accepts());
            }
        }
        let list = |v: Vec<&str>| v.join(", ");
        out += &format!("  backends:   {}\n", list(backends(i)));
        out += &format!("  reads:      {}\n", list(i.events.iter().map(|k| k.name()).collect()));
        out += &format!("  may emit:   {}\n", list(i.actions.iter().map(|k| k.name()).collect()));
    }
    out += &format!("\nscx: {}\n", scx_here());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_is_listed_with_its_backends() {
        let r = Registry::builtin();
        let text = listing(&r);
        for e in r.entries() {
            assert!(text.contains(e.info.name), "{text}");
            assert!(!backends(&e.info).is_empty(), "{} runs nowhere", e.info.name);
        }
        let chameleon = r.get("chameleon").unwrap();
        assert_eq!(backends(&chameleon.info), ["sim", "live", "scx"]);
    }
}
