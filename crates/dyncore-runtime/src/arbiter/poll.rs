//! One discovery pass: threads that appeared are spawned to the policy,
//! threads that are gone exit, threads found elsewhere than the arbiter
//! put them are put back, commands that ended are reaped; and the load
//! samples.

use std::collections::HashSet;
use std::time::Instant;

use dyncore_core::Nanos;
use dyncore_core::policy::{Event, Policy, ThreadId};

use super::discover::{cpu_time_ns, thread_info};
use super::driver::{Arbiter, Live, Mech, monotonic_ns};
use super::record::{Exit, ThreadRecord};
use super::{ArbiterError, Loc, Tid};

impl<P: Policy + ?Sized> Arbiter<P> {
    /// One discovery pass (see the module doc of `discover`).
    pub(super) fn poll(&mut self) -> Result<(), ArbiterError> {
        let start = Instant::now();
        let now = self.now_ns();
        let poll = self.cfg.poll_ns;
        self.next_poll = (now / poll + 1) * poll;
        let mut found = std::mem::take(&mut self.scan_buf);
        found.clear();
        match &mut self.mech {
            Mech::Groups(cg) => cg.scan(&mut found)?,
            Mech::Affinity(_) => {
                let roots: Vec<Tid> =
                    self.commands.iter().filter(|c| !c.reaped).map(|c| c.launched.pid).collect();
                let mut tids = Vec::new();
                self.tree.scan(&roots, &mut tids)?;
                found.extend(tids.into_iter().map(|t| (t, None)));
            }
        }
        found.sort_unstable_by_key(|&(t, _)| t);
        found.dedup_by_key(|&mut (t, _)| t);
        // Exits first, in thread order: their CPUs may go to the new ones.
        let present: HashSet<Tid> = found.iter().map(|&(t, _)| t).collect();
        let mut exited: Vec<ThreadId> =
            self.by_tid.iter().filter(|(tid, _)| !present.contains(tid)).map(|(_, &t)| t).collect();
        exited.sort_unstable();
        for t in exited {
            self.exit(t)?;
        }
        let mut corrected = false;
        for &(tid, loc) in &found {
            match self.by_tid.get(&tid) {
                Some(&t) => {
                    // Found elsewhere than put: believe the kernel.
                    if loc.is_some() && loc != self.threads[t].actual {
                        self.threads[t].actual = loc;
                        self.log.corrections += 1;
                        corrected = true;
                    }
                }
                None => self.discovered(tid, loc)?,
            }
        }
        self.scan_buf = found;
        if corrected {
            self.reconcile()?;
        }
        for i in 0..self.commands.len() {
            self.reap(i);
        }
        self.log.polls += 1;
        self.log.poll_ns.push(start.elapsed().as_nanos() as u64);
        Ok(())
    }

    /// A new thread: to its command (by its process, or its parent's),
    /// numbered, spawned to the policy and placed where it says.
    fn discovered(&mut self, tid: Tid, loc: Option<Loc>) -> Result<(), ArbiterError> {
        let Some(info) = thread_info(tid) else { return Ok(()) }; // gone already
        let command = match (self.pid_command.get(&info.pid), self.pid_command.get(&info.ppid)) {
            (Some(&c), _) => c,
            (None, Some(&c)) => c,
            // Its parent exited before it was seen: the first command.
            (None, None) => 0,
        };
        self.pid_command.entry(info.pid).or_insert(command);
        let thread = self.threads.len();
        let cpu = cpu_time_ns(tid).unwrap_or(0);
        self.threads.push(Live { tid, pid: info.pid, actual: loc, alive: true, cpu_sampled_ns: cpu });
        self.by_tid.insert(tid, thread);
        let spawned_ns = self.now_ns();
        self.log.threads.push(ThreadRecord {
            thread,
            tid,
            pid: info.pid,
            comm: info.comm,
            command,
            spawned_ns,
            spawned_mono_ns: monotonic_ns(),
            exited_ns: None,
            cpu_ns: cpu,
            fused_ns: 0,
            dispatched_ns: 0,
        });
        let mut spec = self.commands[command].spec.clone();
        spec.nice = info.nice;
        self.feed(Event::Spawn { thread, spec })
    }

    fn exit(&mut self, t: ThreadId) -> Result<(), ArbiterError> {
        let tid = self.threads[t].tid;
        self.by_tid.remove(&tid);
        self.threads[t].alive = false;
        self.log.threads[t].exited_ns = Some(self.now_ns());
        if let Mech::Affinity(a) = &mut self.mech {
            a.exited(tid);
        }
        self.feed(Event::Exit { thread: t })
    }

    /// Reaps command `i` if it has ended (without waiting), and reads why
    /// its `exec` failed if it did.
    pub(super) fn reap(&mut self, i: usize) {
        let c = &mut self.commands[i];
        if c.reaped {
            return;
        }
        if let Some(Err(e)) = c.launched.exec_result() {
            self.log.commands[i].exec_error = Some(e);
        }
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 writes it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `status` and `usage` are valid for writing; the pid is
        // this process's child, which nothing else reaps.
        let r = unsafe { libc::wait4(c.launched.pid, &mut status, libc::WNOHANG, &mut usage) };
        if r != c.launched.pid {
            return;
        }
        c.reaped = true;
        let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
        let now = self.now_ns();
        let rec = &mut self.log.commands[i];
        rec.exited_ns = Some(now);
        rec.exit = Some(Exit::from_wait(status));
        rec.cpu_ns = tv(usage.ru_utime) + tv(usage.ru_stime);
    }

    /// Feeds every CPU's load over the last window: the CPU time of the
    /// threads in its group since the last sample, capped at the window.
    pub(super) fn load_round(&mut self, now: Nanos) -> Result<(), ArbiterError> {
        let window_ns = now - self.load_at;
        let mut busy = vec![0u64; self.cpus.len()];
        for t in 0..self.threads.len() {
            if !self.threads[t].alive {
                continue;
            }
            let at = self.threads[t].actual;
            let delta = self.sample(t);
            if let Some(Loc::Cpu(c)) = at {
                busy[c] += delta;
            }
        }
        self.load_at = now;
        for (cpu, b) in busy.into_iter().enumerate() {
            self.load_busy[cpu] += b;
            self.feed(Event::Load { cpu, busy_ns: b.min(window_ns), window_ns })?;
        }
        Ok(())
    }
}
