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
use super::procevents::ProcEvent;
use super::record::{Exit, ThreadRecord};
use super::{ArbiterError, Loc, Tid};

impl<P: Policy + ?Sized> Arbiter<P> {
    /// One discovery pass (see the module doc of `discover`).
    pub(super) fn poll(&mut self) -> Result<(), ArbiterError> {
        let start = Instant::now();
        let now = self.now_ns();
        let poll = self.poll_period_ns;
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
                self.hand_to_warden();
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
        // Only a thread of the run that went can leave a child to reap.
        let any_exited = !exited.is_empty();
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
                        self.dirty = true;
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
        if any_exited {
            self.reap_adopted();
        }
        self.log.polls += 1;
        self.log.poll_ns.push(start.elapsed().as_nanos() as u64);
        Ok(())
    }

    /// Waits up to `ns` for a process event or a command's exit (or just
    /// sleeps, when there is nothing to wait on), and handles what came.
    pub(super) fn wait(&mut self, ns: Nanos) -> Result<(), ArbiterError> {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        if let Some(ev) = &self.events {
            fds.push(libc::pollfd { fd: ev.raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        let first_pidfd = fds.len();
        fds.extend(self.commands.iter().filter(|c| !c.reaped).filter_map(|c| c.pidfd.as_ref()).map(|fd| {
            libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(fd), events: libc::POLLIN, revents: 0 }
        }));
        if fds.is_empty() {
            std::thread::sleep(std::time::Duration::from_nanos(ns));
            return Ok(());
        }
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as _,
        };
        // SAFETY: `fds` is a valid array of its length; `ts` outlives the
        // call; no signal mask is passed.
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
        if n <= 0 {
            return Ok(()); // timeout, or a signal: the loop looks again
        }
        if first_pidfd == 1 && fds[0].revents != 0 {
            self.handle_events()?;
        }
        if fds[first_pidfd..].iter().any(|f| f.revents != 0) {
            // A command ended: reap it and feed its threads' exits now.
            self.poll()?;
        }
        Ok(())
    }

    /// Handles the pending process events: threads created by the run's
    /// processes are discovered, threads of the run that exited exit; a
    /// full pass if events were lost or a process of the run `exec`ed.
    fn handle_events(&mut self) -> Result<(), ArbiterError> {
        let mut buf = std::mem::take(&mut self.event_buf);
        buf.clear();
        let mut full_pass = match &mut self.events {
            Some(ev) => ev.drain(&mut buf)?,
            None => false,
        };
        self.log.proc_events += buf.len() as u64;
        self.log.event_wakeups += 1;
        for &e in &buf {
            match e {
                ProcEvent::Fork { parent_tgid, child, child_tgid, at_ns, .. } => {
                    // A new thread of one of the run's processes, or a new
                    // process forked by one. (A thread's event names its
                    // process's parent as its parent, so both are looked
                    // at.) A command's own first thread is found by the
                    // scan once it has joined the groups (see `start`).
                    let ours = self.pid_command.contains_key(&child_tgid)
                        || self.pid_command.contains_key(&parent_tgid);
                    let root = self.commands.iter().any(|c| c.launched.pid == child);
                    if !ours || root || self.by_tid.contains_key(&child) || !self.in_run(child) {
                        continue;
                    }
                    // It is in its creator's groups, which the event does
                    // not name: the reconcile moves it wherever it must be.
                    self.discovered(child, None)?;
                    if let Some(&t) = self.by_tid.get(&child) {
                        self.log.threads[t].created_mono_ns = Some(at_ns);
                    }
                }
                // An exec from a thread other than the leader gives that
                // thread the leader's id, in the groups it was in: the
                // full pass sees where it is.
                ProcEvent::Exec { tgid } => {
                    if self.pid_command.contains_key(&tgid) {
                        full_pass = true;
                        self.renamed(tgid);
                    }
                }
                ProcEvent::Exit { tid } => {
                    if let Some(&t) = self.by_tid.get(&tid) {
                        self.exit(t)?;
                    }
                }
            }
        }
        self.event_buf = buf;
        if full_pass {
            self.poll()?;
        }
        Ok(())
    }

    /// Process `pid` `exec`ed: its thread takes its new program's name.
    fn renamed(&mut self, pid: Tid) {
        if let (Some(&t), Ok(comm)) =
            (self.by_tid.get(&pid), std::fs::read_to_string(format!("/proc/{pid}/comm")))
        {
            self.log.threads[t].comm = comm.trim_end().to_string();
        }
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
        // A command's first thread is found before it `exec`s (frozen, or
        // at the gate): it is named as the kernel will name it, after the
        // program's file.
        let root = tid == self.commands[command].launched.pid && !self.commands[command].found;
        if root {
            self.commands[command].found = true;
        }
        let comm = if root { self.commands[command].comm.clone() } else { info.comm };
        let thread = self.threads.len();
        let cpu = cpu_time_ns(tid).unwrap_or(0);
        self.threads.push(Live {
            tid,
            pid: info.pid,
            actual: loc,
            alive: true,
            cpu_sampled_ns: cpu,
            asleep: false,
            sleep_seen_ns: cpu,
        });
        self.dirty = true;
        self.by_tid.insert(tid, thread);
        let spawned_ns = self.now_ns();
        self.log.threads.push(ThreadRecord {
            thread,
            tid,
            pid: info.pid,
            comm,
            command,
            spawned_ns,
            spawned_mono_ns: monotonic_ns(),
            created_mono_ns: None,
            exited_ns: None,
            cpu_ns: cpu,
            fused_ns: 0,
            dispatched_ns: 0,
        });
        let mut spec = self.commands[command].spec.clone();
        spec.nice = info.nice;
        self.feed(Event::Spawn { thread, spec })
    }

    /// Whether thread `tid` is in the run's groups (cgroups; with affinity
    /// only, whether its process is one of the run's): so that a process
    /// id reused by a process outside the run is never taken in.
    fn in_run(&self, tid: Tid) -> bool {
        match &self.mech {
            Mech::Groups(_) => std::fs::read_to_string(format!("/proc/{tid}/cgroup"))
                .is_ok_and(|text| text.lines().any(|l| l.contains(&format!("/{}/", self.name())))),
            Mech::Affinity(_) => true,
        }
    }

    fn exit(&mut self, t: ThreadId) -> Result<(), ArbiterError> {
        let tid = self.threads[t].tid;
        self.by_tid.remove(&tid);
        // A process whose leader exited is forgotten (its id may be reused
        // once it is reaped); a command's own process when it is reaped.
        if tid == self.threads[t].pid && !self.commands.iter().any(|c| c.launched.pid == tid) {
            self.pid_command.remove(&tid);
        }
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
        self.pid_command.remove(&c.launched.pid);
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
            self.feed(Event::Load { cpu, busy_ns: b.min(window_ns), window_ns })?;
        }
        Ok(())
    }
}
