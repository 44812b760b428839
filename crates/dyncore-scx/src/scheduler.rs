// SPDX-License-Identifier: GPL-2.0-only
//! The scheduler process: loads the BPF half, runs the policy on the
//! kernel's events, writes where each thread runs into the `assign` map,
//! kicks the CPUs it changed, and records what the kernel did.
//!
//! ## From the kernel to the policy's events
//! | kernel callback (BPF) | policy event |
//! |---|---|
//! | `ops.enable` (the task joined sched_ext: forked by the command, or the command itself) | `Spawn` (thread ids dense, in that order), with the spec of the task's command: named on the control pipe, or its parent's |
//! | `ops.runnable` of a task the policy has as blocked | `Wake` |
//! | `ops.quiescent` (no longer runnable: it sleeps, or it is dying) | `Block` |
//! | `ops.exit_task` | `Exit` |
//! | `ops.running` / `ops.stopping` | none: the record the checker judges |
//! | the scheduler's clock, every tick (4 ms) while the command runs | `Tick`, every CPU |
//!
//! ## From the policy's actions to the kernel
//! | action | carried out |
//! |---|---|
//! | `Dispatch { c, Running T }` | `assign[T] = (c's real CPU, slice)`; T's old CPU and c kicked (`SCX_KICK_PREEMPT`): T is inserted into c's local DSQ at its next enqueue, or moved there from the held DSQ by c's dispatch |
//! | a thread no `Dispatch` runs | `assign[T] = none`: at its next enqueue it waits in the held DSQ; running, it is preempted by the kick (and, as a backstop, at its next tick) |
//! | `SetSpeed { c, duty }` | c's slice = duty × tick (duties scaled as the arbiter scales its quotas); below 100%, no refill: the task waits, throttled, for the next tick |
//! | `Offline { cpus }` (a fuse's borrowed CPUs, or parked ones) | kept empty: the policy dispatches nothing there, so no task is assigned to them; a task running there is kicked off. Answered at once by `ReconfigDone` (what it took: the map writes and kicks). No sysfs hotplug: the CPUs stay online to the kernel |
//! | `Online { cpus }` | usable again at once |
//! | `Fuse` / `Split` | the object owns its CPUs: its thread runs on the representative, the borrowed ones are kept empty (the `Offline`/`Online` that follow) |
//! | `Migrate`, `Object` | recorded |
//! | `Place` | refused before the run (network-stack components) |
//!
//! Invariants (asserted): the map holds, for every thread the policy runs,
//! exactly its CPU, and none for any other, once a call's actions are
//! applied; a thread runs on at most one CPU in the policy's mirror; the
//! policy's `now` never decreases.

use std::cell::RefCell;
use std::ffi::OsString;
use std::io::Write;
use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use libbpf_rs::{MapCore, MapFlags, OpenObject, ProgramInput};
use scx_utils::{compat, scx_ops_attach, scx_ops_load, scx_ops_open};

use dyncore_core::policies::Registry;
use dyncore_core::policy::{Action, Event, Policy};
use dyncore_core::{CpuId, Nanos};

use crate::bpf_intf::{dync_assign, dync_event, dync_kick_arg};
use crate::bpf_skel::{BpfSkel, BpfSkelBuilder};
use crate::mirror::State;
use crate::plan::Plan;
use crate::record::{Counters, ExitInfo, Record};

static STOP: AtomicBool = AtomicBool::new(false);
/// When the policy call in progress started (CLOCK_MONOTONIC ns; 0: none
/// in progress), for the stall watchdog.
pub(crate) static IN_CALL: AtomicU64 = AtomicU64::new(0);
/// What the loop is doing since when (CLOCK_MONOTONIC ns), for the stall
/// watchdog's message: see `PHASES`.
static PHASE: AtomicU64 = AtomicU64::new(0);
static PHASE_SINCE: AtomicU64 = AtomicU64::new(0);
const PHASES: [&str; 6] = [
    "waiting for events",
    "in a policy call",
    "writing the map",
    "kicking a CPU",
    "reading events",
    "settling",
];

fn phase(p: u64) {
    PHASE_SINCE.store(monotonic_ns(), Ordering::SeqCst);
    PHASE.store(p, Ordering::SeqCst);
}

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// CLOCK_MONOTONIC in ns (what `bpf_ktime_get_ns` reads).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `dyncore-scx scheduler --record FILE exec|run ARGS...`: the process
/// `exec` and `run` start (it builds the same plan from the same
/// arguments); its stdin is the control pipe (`control`). Prints `ready` on stdout once the scheduler is
/// attached; stops on SIGTERM; writes the record; exits 0, or 2 when the
/// scheduler could not be loaded, or 3 when the policy stalled.
pub fn main(args: &[OsString]) -> ExitCode {
    let (record_path, mode, rest) = match args {
        [flag, path, mode, rest @ ..] if flag == "--record" => {
            (std::path::PathBuf::from(path), mode.to_string_lossy().into_owned(), rest)
        }
        _ => {
            eprintln!(
                "dyncore-scx scheduler: --record FILE MODE ARGS... (this is the process `exec` and `run` start)"
            );
            return ExitCode::from(2);
        }
    };
    let plan = match Plan::from_args(&mode, rest, &Registry::builtin()) {
        Ok(p) => p,
        Err(m) => {
            eprintln!("dyncore-scx: {m}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: installing async-signal-safe handlers (an atomic store) and ignoring SIGINT:
    // the supervisor decides when the scheduler stops.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    start_stall_watchdog();
    let mut open_object = MaybeUninit::uninit();
    let mut sched = match Loaded::load(&plan, &mut open_object) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dyncore-scx: the scheduler could not be loaded: {e:#}");
            return ExitCode::from(2);
        }
    };
    // No page fault from here on (as scx_rustland_core does): a fault that
    // waits on something a task this scheduler holds would stall both.
    // SAFETY: mlockall has no memory-safety preconditions.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        eprintln!("dyncore-scx: warning: mlockall: {}", std::io::Error::last_os_error());
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    let record = match sched.run(&plan) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dyncore-scx: the scheduler failed: {e:#}");
            return ExitCode::from(125);
        }
    };
    match serde_json::to_vec(&record).map_err(anyhow::Error::from).and_then(|b| {
        std::fs::write(&record_path, b).with_context(|| format!("writing {}", record_path.display()))
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dyncore-scx: {e:#}");
            ExitCode::from(125)
        }
    }
}

/// A policy call that has not returned for this long unloads the
/// scheduler (`DYNCORE_SCX_STALL_MS`, default 5000): the kernel's own
/// watchdog would eject it later, with every held task waiting until then.
fn start_stall_watchdog() {
    let limit_ms: u64 =
        std::env::var("DYNCORE_SCX_STALL_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(5000);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let since = IN_CALL.load(Ordering::SeqCst);
            let idle_ms = if since == 0 { 0 } else { monotonic_ns().saturating_sub(since) / 1_000_000 };
            let p = PHASE.load(Ordering::SeqCst) as usize;
            let stuck_ms = monotonic_ns().saturating_sub(PHASE_SINCE.load(Ordering::SeqCst)) / 1_000_000;
            if p != 0 && p != 1 && stuck_ms > limit_ms {
                let main = std::process::id();
                let stat =
                    std::fs::read_to_string(format!("/proc/self/task/{main}/stat")).unwrap_or_default();
                let wchan =
                    std::fs::read_to_string(format!("/proc/self/task/{main}/wchan")).unwrap_or_default();
                let stack =
                    std::fs::read_to_string(format!("/proc/self/task/{main}/stack")).unwrap_or_default();
                if stuck_ms < limit_ms + 60 {
                    eprintln!("dyncore-scx: main thread's kernel stack:\n{stack}");
                }
                let f: Vec<&str> =
                    stat.rsplit_once(") ").map(|(_, r)| r.split(' ').collect()).unwrap_or_default();
                eprintln!(
                    "dyncore-scx: the scheduler has been {} for {stuck_ms} ms (main thread: state {}, utime {}, stime {}, cpu {}, wchan {wchan})",
                    PHASES[p.min(5)],
                    f.first().unwrap_or(&"?"),
                    f.get(11).unwrap_or(&"?"),
                    f.get(12).unwrap_or(&"?"),
                    f.get(36).unwrap_or(&"?"),
                );
            }
            if idle_ms > limit_ms {
                eprintln!(
                    "dyncore-scx: the policy has not returned for {idle_ms} ms (limit {limit_ms} ms): \
                     unloading the scheduler; the command's tasks go back to the fair class"
                );
                // Exiting closes the struct_ops link: the kernel unloads the scheduler.
                std::process::exit(3);
            }
        }
    });
}

/// A test hook (`DYNCORE_SCX_FAULT=panic:N` or `stall:N`): the policy
/// panics, or stops returning, at its N-th event. For the safety tests.
struct Faulty {
    inner: Box<dyn Policy + Send>,
    fault: Option<(String, u64)>,
    calls: u64,
}

impl Policy for Faulty {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        self.calls += 1;
        if let Some((kind, at)) = &self.fault
            && self.calls >= *at
        {
            match kind.as_str() {
                "panic" => panic!("injected fault: the policy panics at event {}", self.calls),
                _ => loop {
                    std::thread::sleep(Duration::from_secs(1));
                },
            }
        }
        self.inner.handle(now, event, out)
    }

    fn check(&self) -> Result<(), String> {
        self.inner.check()
    }
}

fn fault_from_env() -> Option<(String, u64)> {
    let v = std::env::var("DYNCORE_SCX_FAULT").ok()?;
    let (k, n) = v.split_once(':')?;
    Some((k.to_string(), n.parse().ok()?))
}

/// The loaded scheduler.
struct Loaded<'obj> {
    skel: BpfSkel<'obj>,
    link: Option<libbpf_rs::Link>,
    preempt: u64,
}

impl<'obj> Loaded<'obj> {
    fn load(plan: &Plan, open_object: &'obj mut MaybeUninit<OpenObject>) -> Result<Loaded<'obj>> {
        quiet_libbpf();
        let builder = BpfSkelBuilder::default();
        let mut skel = scx_ops_open!(builder, open_object, dyncore, None)?;
        let ops = skel.struct_ops.dyncore_mut();
        ops.flags =
            *compat::SCX_OPS_SWITCH_PARTIAL | *compat::SCX_OPS_ENQ_LAST | *compat::SCX_OPS_ENQ_EXITING;
        // The kernel's watchdog: a runnable task not run for this long ejects the scheduler.
        ops.timeout_ms = 30_000;
        skel.maps.rodata_data.as_mut().context("no .rodata")?.default_slice_ns = plan.ctx.tick_ns;
        let mut skel = scx_ops_load!(skel, dyncore, uei)?;
        let link = scx_ops_attach!(skel, dyncore)?;
        let preempt = compat::read_enum("scx_kick_flags", "SCX_KICK_PREEMPT").unwrap_or(2);
        Ok(Loaded { skel, link: Some(link), preempt })
    }

    fn run(&mut self, plan: &Plan) -> Result<Record> {
        let registry = Registry::builtin();
        let inner = registry.build(&plan.policy, &plan.ctx, &plan.params)?;
        let policy: Box<dyn Policy + Send> = Box::new(Faulty { inner, fault: fault_from_env(), calls: 0 });
        let t0 = monotonic_ns();
        let batch: Rc<RefCell<Vec<dync_event>>> = Rc::default();
        let sink = batch.clone();
        let mut rb = libbpf_rs::RingBufferBuilder::new();
        rb.add(&self.skel.maps.events, move |data: &[u8]| {
            if data.len() >= std::mem::size_of::<dync_event>() {
                // SAFETY: the BPF half writes a whole dync_event per record; read unaligned.
                let e = unsafe { std::ptr::read_unaligned(data.as_ptr() as *const dync_event) };
                sink.borrow_mut().push(e);
            }
            0
        })?;
        let rb = rb.build()?;
        let mut st = State::new(plan, policy, t0);
        let mut io = Io {
            assign: &self.skel.maps.assign,
            cpu_curr: &self.skel.maps.cpu_curr,
            inflight: &self.skel.maps.inflight,
            kick: &self.skel.progs.dync_kick,
            preempt: self.preempt,
            counters: Counters::default(),
        };
        let tick = plan.ctx.tick_ns;
        let mut next_tick = tick;
        loop {
            let now = st.now();
            let wait = next_tick.saturating_sub(now).clamp(100_000, tick);
            phase(0);
            // Sleep until events or the next tick; then read at most
            // BATCH events, so that a flood cannot keep the loop from its
            // ticks and actions (libbpf's own poll reads while any come).
            let mut ev = libc::epoll_event { events: 0, u64: 0 };
            let timeout_ms = wait.div_ceil(1_000_000).min(tick / 1_000_000) as i32;
            // SAFETY: a valid epoll fd (the ring buffer's) and one event slot.
            let r = unsafe { libc::epoll_wait(rb.epoll_fd(), &mut ev, 1, timeout_ms) };
            if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                bail!("waiting for events: {}", std::io::Error::last_os_error());
            }
            phase(4);
            let pass = monotonic_ns();
            let n = rb.consume_raw_n(BATCH);
            if n < 0 {
                bail!("reading the events ring buffer: {}", std::io::Error::from_raw_os_error(-n));
            }
            if n as usize >= BATCH {
                st.full_batches += 1;
            }
            let events: Vec<dync_event> = std::mem::take(&mut *batch.borrow_mut());
            for e in &events {
                st.kernel_event(e, &mut io)?;
            }
            let now = st.now();
            if now >= next_tick {
                st.ticks(&mut io)?;
                next_tick += tick;
                if next_tick <= now {
                    st.late_ticks += (now - next_tick) / tick + 1;
                    next_tick = now + tick;
                }
            }
            st.settle_and_feed(&mut io)?;
            st.max_pass_ns = st.max_pass_ns.max(monotonic_ns() - pass);
            if STOP.load(Ordering::SeqCst) {
                break;
            }
            if scx_utils::uei_exited!(self.skel, uei) {
                break;
            }
        }
        // Whatever the ring buffer still holds, the reconfigurations that
        // are done (the command has ended: its CPUs are empty), then the
        // kernel's own word on why it ended.
        rb.consume()?;
        let events: Vec<dync_event> = std::mem::take(&mut *batch.borrow_mut());
        for e in &events {
            st.kernel_event(e, &mut io)?;
        }
        st.settle_and_feed(&mut io)?;
        let counters = io.counters;
        drop(rb);
        let counters = self.counters(counters);
        let exit = self.exit_info();
        self.link.take();
        Ok(st.finish(plan, counters, exit))
    }

    fn counters(&self, mut c: Counters) -> Counters {
        if let Some(b) = self.skel.maps.bss_data.as_ref() {
            c.dropped = b.nr_dropped;
            c.held = b.nr_held;
            c.direct = b.nr_direct;
            c.moved = b.nr_moved;
            c.refills = b.nr_refills;
            c.tick_preempts = b.nr_tick_preempts;
            c.bad_cpu = b.nr_bad_cpu;
            c.throttles = b.nr_throttles;
            c.misplaced = b.nr_misplaced;
            c.released = b.nr_released;
        }
        c
    }

    fn exit_info(&self) -> Option<ExitInfo> {
        let uei = &self.skel.maps.data_data.as_ref()?.uei;
        // SAFETY: the BPF half writes kind before the strings, and is detached or exited.
        let kind = unsafe { std::ptr::read_volatile(&uei.kind) };
        if kind == 0 {
            return None;
        }
        let text = |b: &[i8]| {
            let bytes: Vec<u8> = b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        Some(ExitInfo { kind, reason: text(&uei.reason), message: text(&uei.msg) })
    }
}

/// libbpf's warnings only, less the ones every load on a kernel older or
/// newer than scx's headers prints (optional `sched_ext_ops` members).
fn quiet_libbpf() {
    fn print(level: libbpf_rs::PrintLevel, msg: String) {
        let benign = msg.contains("skipping it as it's set to zero") || msg.contains("link is uninitialized");
        if level == libbpf_rs::PrintLevel::Warn && !benign {
            eprint!("libbpf: {msg}");
        }
    }
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, print)));
}

/// The most events one pass of the loop reads.
const BATCH: usize = 8192;

/// The scheduler's side of the BPF half: the map, the kicks, the counters.
pub(crate) struct Io<'a, 'obj> {
    assign: &'a libbpf_rs::MapMut<'obj>,
    cpu_curr: &'a libbpf_rs::MapMut<'obj>,
    inflight: &'a libbpf_rs::MapMut<'obj>,
    kick: &'a libbpf_rs::ProgramMut<'obj>,
    preempt: u64,
    pub(crate) counters: Counters,
}

impl Io<'_, '_> {
    /// The command task running on real CPU `cpu` now, from the kernel (0: none).
    pub(crate) fn running_on(&self, cpu: CpuId) -> i32 {
        let v = self.cpu_curr.lookup(&(cpu as u32).to_ne_bytes(), MapFlags::ANY).ok().flatten();
        v.and_then(|b| b.get(..4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))).unwrap_or(0)
    }

    /// The tasks the kernel has moved into a CPU's local DSQ that have not
    /// started yet: (pid, real CPU).
    pub(crate) fn inflight(&self) -> Vec<(i32, CpuId)> {
        let mut out = Vec::new();
        for k in self.inflight.keys() {
            if let Ok(Some(v)) = self.inflight.lookup(&k, MapFlags::ANY)
                && k.len() >= 4
                && v.len() >= 4
            {
                let pid = i32::from_ne_bytes([k[0], k[1], k[2], k[3]]);
                out.push((pid, i32::from_ne_bytes([v[0], v[1], v[2], v[3]]) as CpuId));
            }
        }
        out
    }

    pub(crate) fn write(&mut self, tid: i32, a: &dync_assign) -> Result<()> {
        // SAFETY: dync_assign is plain old data of the map's value size.
        let value = unsafe {
            std::slice::from_raw_parts(
                a as *const dync_assign as *const u8,
                std::mem::size_of::<dync_assign>(),
            )
        };
        phase(2);
        self.assign.update(&tid.to_ne_bytes(), value, MapFlags::ANY)?;
        phase(4);
        self.counters.map_writes += 1;
        Ok(())
    }

    /// Removes a task's assignment (it exited).
    pub(crate) fn forget(&mut self, tid: i32) -> Result<()> {
        phase(2);
        // Absent already (the kernel's exit_task deleted it): nothing to do.
        let _ = self.assign.delete(&tid.to_ne_bytes());
        phase(4);
        Ok(())
    }

    pub(crate) fn kick(&mut self, cpu: CpuId) -> Result<()> {
        let mut arg = dync_kick_arg { cpu: cpu as i32, pad: 0, flags: self.preempt };
        // SAFETY: the program reads a dync_kick_arg as its context.
        let ctx = unsafe {
            std::slice::from_raw_parts_mut(
                &mut arg as *mut dync_kick_arg as *mut u8,
                std::mem::size_of::<dync_kick_arg>(),
            )
        };
        let input = ProgramInput { context_in: Some(ctx), ..Default::default() };
        phase(3);
        self.kick.test_run(input)?;
        phase(4);
        self.counters.kicks += 1;
        Ok(())
    }
}
