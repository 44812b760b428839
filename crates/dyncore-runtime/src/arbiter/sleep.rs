//! Threads that sleep: a process thread waits for a child, a pipe, a lock
//! or a timer, where the runtime's kernels never do. Each tick round, the
//! arbiter looks at the kernel's record of every thread the policy runs
//! and of every thread it has said is asleep:
//!
//! * a thread the policy runs that is asleep (`S` in its `stat`) and has
//!   had no CPU time since the last round (a whole tick asleep) is handed
//!   to the policy as [`Event::Block`]: a policy that reads it runs
//!   another thread there (Chameleon's scheduler; a fused thread splits);
//! * an asleep thread that is runnable again (`R`), or has run since the
//!   last round, is handed over as [`Event::Wake`].
//!
//! Where a sleeping thread waits: in the group (or, with affinity only, on
//! the CPU) it was last placed on, or the first online CPU's if that one
//! went offline; not in the frozen `held` group, where it could not be
//! seen to wake. When it wakes it runs there beside that CPU's thread,
//! under that CPU's quota, until the next round hands it to the policy
//! (at most one tick, 4 ms by default): the one window in which a thread
//! runs where the policy did not dispatch it, bounded and counted
//! ([`ArbiterLog::wakes`](super::ArbiterLog)).

use dyncore_core::CpuId;
use dyncore_core::policy::{CpuState, Event, Policy, ThreadId};

use super::discover::{cpu_time_ns, last_cpu_and_state};
use super::{Arbiter, ArbiterError, Loc};

impl<P: Policy + ?Sized> Arbiter<P> {
    /// One look at every running and every asleep thread (module doc).
    pub(super) fn sleep_round(&mut self) -> Result<(), ArbiterError> {
        if !self.cfg.follow_sleep {
            return Ok(());
        }
        let mut events = Vec::new();
        for t in 0..self.threads.len() {
            let l = &self.threads[t];
            if !l.alive {
                continue;
            }
            let running = self.running_on(t).is_some_and(|c| l.actual == Some(Loc::Cpu(c)));
            if !running && !l.asleep {
                continue;
            }
            let (Some((_, state)), Some(ran)) = (last_cpu_and_state(l.pid, l.tid), cpu_time_ns(l.tid)) else {
                continue;
            };
            let moved = ran != l.sleep_seen_ns;
            let l = &mut self.threads[t];
            l.sleep_seen_ns = ran;
            if l.asleep && (state == 'R' || moved) {
                l.asleep = false;
                self.log.wakes += 1;
                events.push(Event::Wake { thread: t });
            } else if !l.asleep && running && state == 'S' && !moved {
                l.asleep = true;
                self.log.blocks += 1;
                events.push(Event::Block { thread: t });
            }
        }
        if !events.is_empty() {
            self.dirty = true;
        }
        for e in events {
            self.feed(e)?;
        }
        Ok(())
    }

    /// The runtime CPU the policy runs thread `t` on now.
    pub(super) fn running_on(&self, t: ThreadId) -> Option<CpuId> {
        self.cpus.iter().position(|m| matches!(m.state, CpuState::Running { thread, .. } if thread == t))
    }

    /// Where thread `t` belongs: its CPU's group if the policy runs it;
    /// if it is asleep, where it waits (module doc); else `held`.
    pub(super) fn wanted(&self, t: ThreadId) -> Loc {
        if let Some(c) = self.running_on(t) {
            return Loc::Cpu(c);
        }
        let l = &self.threads[t];
        if !l.asleep {
            return Loc::Held;
        }
        match l.actual {
            Some(Loc::Cpu(c)) if !self.offline[c] => Loc::Cpu(c),
            _ => (0..self.cpus.len()).find(|&c| !self.offline[c]).map_or(Loc::Held, Loc::Cpu),
        }
    }
}
