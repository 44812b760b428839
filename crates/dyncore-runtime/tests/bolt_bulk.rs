//! Bolt's bulk interface across more than two CPUs, with traffic running:
//! 6 of 8 runtime CPUs offline and online in one call each, and the same
//! 6 real CPUs through the kernel's own sysfs hotplug. These need 8 CPUs
//! (and root for sysfs hotplug): the host has 2, so CI runs them in an
//! 8-CPU `dyncore vm` guest (`.ci/vm-bolt`).
//!
//! What is checked, never how long it took (a TCG guest's times are not
//! timings):
//! * each CPU's state after each call (online, offline with one online
//!   proxy; the kernel's `online` files);
//! * the split: the call's critical steps are the ones that ran before it
//!   returned, every later step is deferred, one `deactivate` / `activate`
//!   for the whole set (bulk), none per CPU;
//! * nothing lost: every task spawned finishes, every remote call posted is
//!   handled (by its CPU or its proxy), every message sent between threads
//!   while the kernel's CPUs came and went is received.
//!
//! Skips print one line naming what is missing; with `DYNCORE_TEST_STRICT=1`
//! (set by CI's guest runs) a skip is a failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dyncore_core::CpuSet;
use dyncore_core::reconfig::{Kind, Mode};
use dyncore_runtime::cpu::{CpuLiveness, Ctx, Runtime, RuntimeConfig, Task, TaskPoll};

const EVENTUALLY: Duration = Duration::from_secs(120);

use dyncore_runtime::testing::{Need, skip};

fn set(s: &str) -> CpuSet {
    s.parse().expect("a CPU list")
}

/// The first 8 CPUs this process may use, or a skip.
fn eight_cpus() -> Option<CpuSet> {
    let allowed = dyncore_runtime::affinity::allowed_cpus().expect("the affinity mask is readable");
    if allowed.len() < 8 {
        skip(
            Need::Cpus(8),
            &format!("needs 8 CPUs, this process may use {allowed} (run it in `dyncore vm run --cpus 8`)"),
        );
        return None;
    }
    Some(allowed.iter().take(8).collect())
}

fn eventually(what: &str, dump: impl Fn() -> String, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < EVENTUALLY, "never happened: {what}\n{}", dump());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A task of `steps` steps that counts into `done` when it finishes.
fn counting(steps: u32, done: Arc<AtomicU64>) -> impl Task {
    let mut left = steps;
    move |_: &mut Ctx<'_>| {
        left -= 1;
        if left == 0 {
            done.fetch_add(1, Ordering::SeqCst);
            TaskPoll::Ready
        } else {
            TaskPoll::Pending
        }
    }
}

/// Traffic against a runtime: tasks spawned where queues are open and
/// remote calls posted to every CPU, online or not, until stopped.
struct Traffic {
    spawned: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
    posted: Arc<AtomicU64>,
    handled: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(rt: Arc<Runtime>) -> Traffic {
        let t = Traffic {
            spawned: Arc::default(),
            done: Arc::default(),
            posted: Arc::default(),
            handled: Arc::default(),
            stop: Arc::default(),
            thread: None,
        };
        let (spawned, done, posted, handled, stop) =
            (t.spawned.clone(), t.done.clone(), t.posted.clone(), t.handled.clone(), t.stop.clone());
        let thread = std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                rt.spawn(counting(5, done.clone()));
                spawned.fetch_add(1, Ordering::SeqCst);
                let cpu = (i % rt.cpus() as u64) as usize;
                // A handler may run more than once (it is idempotent by
                // contract): count each call once, by its number.
                let seen = Arc::new(AtomicBool::new(false));
                let h = handled.clone();
                rt.call_on(cpu, move |_| {
                    if !seen.swap(true, Ordering::SeqCst) {
                        h.fetch_add(1, Ordering::SeqCst);
                    }
                })
                .expect("every CPU of the runtime takes calls, online or proxied");
                posted.fetch_add(1, Ordering::SeqCst);
                i += 1;
                if i.is_multiple_of(64) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        Traffic { thread: Some(thread), ..t }
    }

    /// Stops the traffic and checks that nothing was lost.
    fn finish(mut self, rt: &Runtime) -> (u64, u64) {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap();
        let (spawned, posted) = (self.spawned.load(Ordering::SeqCst), self.posted.load(Ordering::SeqCst));
        eventually(
            "every task spawned finished",
            || rt.dump(),
            || self.done.load(Ordering::SeqCst) == spawned,
        );
        eventually(
            "every call posted was handled",
            || rt.dump(),
            || self.handled.load(Ordering::SeqCst) == posted,
        );
        (spawned, posted)
    }
}

/// Checks a bulk call's plan: critical steps first, deferred after, one
/// global mask update (`global`) for the whole set, and the report's timed
/// steps are exactly the critical ones.
fn check_split(r: &dyncore_runtime::cpu::ReconfigReport, global: &str, cpus: &CpuSet) {
    let plan = &r.plan;
    let crit = plan.critical_len();
    assert!(crit > 0, "{plan:?}");
    assert!(
        plan.steps[crit..].iter().all(|s| s.kind != Kind::Critical),
        "a critical step after a deferred one: {plan:?}"
    );
    let globals = plan.steps.iter().filter(|s| s.step.name() == global).count();
    assert_eq!(globals, 1, "bulk: one {global} for {cpus}: {plan:?}");
    assert_eq!(r.step_ns.len(), crit, "the report times exactly the critical steps");
    assert!(r.step_ns.iter().all(|(s, _)| plan.steps[..crit].iter().any(|p| p.step == *s)));
    assert_eq!(r.changed(), cpus);
}

#[test]
fn bulk_bolt_offline_and_online_of_six_of_eight_runtime_cpus_loses_nothing() {
    let Some(real) = eight_cpus() else { return };
    let _cpus = dyncore_runtime::testing::real_cpus();
    let mut cfg = RuntimeConfig::over(&real, 8);
    cfg.stall_after = Duration::from_secs(60);
    cfg.wait_deadline = Duration::from_secs(120);
    let rt = Arc::new(Runtime::new(cfg).expect("a runtime over 8 CPUs"));
    let six = set("2-7");
    for round in 0..3 {
        let traffic = Traffic::start(rt.clone());
        eventually("traffic flows", || rt.dump(), || traffic.posted.load(Ordering::SeqCst) > 200);

        let r =
            rt.offline(&six, Mode::Bolt).unwrap_or_else(|e| panic!("round {round}: bulk offline 2-7: {e}"));
        check_split(&r, "deactivate", &six);
        assert!(r.plan.steps.iter().any(|s| s.kind != Kind::Critical), "Bolt defers work: {:?}", r.plan);
        assert_eq!(rt.online_cpus(), set("0-1"));
        for cpu in 0..8 {
            let info = rt.cpu_info(cpu).unwrap();
            if six.contains(cpu) {
                assert_eq!(info.state, CpuLiveness::Offline, "round {round}: CPU {cpu}");
                let proxy = info.proxied_by.unwrap_or_else(|| panic!("offline CPU {cpu} has no proxy"));
                assert!(!six.contains(proxy), "CPU {cpu}'s proxy {proxy} is offline");
            } else {
                assert_eq!(info.state, CpuLiveness::Online, "round {round}: CPU {cpu}");
                assert_eq!(info.proxied_by, None);
            }
        }
        assert_eq!(rt.check(), Ok(()));
        // Traffic goes on through the two CPUs left and the proxies.
        let before = traffic.posted.load(Ordering::SeqCst);
        eventually(
            "traffic flows while 6 CPUs are offline",
            || rt.dump(),
            || traffic.posted.load(Ordering::SeqCst) > before + 200,
        );

        let r = rt.online(&six, Mode::Bolt).unwrap_or_else(|e| panic!("round {round}: bulk online 2-7: {e}"));
        check_split(&r, "activate", &six);
        assert_eq!(rt.online_cpus(), set("0-7"));
        for cpu in 0..8 {
            let info = rt.cpu_info(cpu).unwrap();
            assert_eq!(info.state, CpuLiveness::Online, "round {round}: CPU {cpu} back");
            assert_eq!(info.proxied_by, None, "round {round}: CPU {cpu} back");
        }
        let (spawned, posted) = traffic.finish(&rt);
        assert_eq!(rt.check(), Ok(()));
        eprintln!(
            "round {round}: {spawned} tasks and {posted} calls across bulk offline/online of 2-7, none lost"
        );
    }
    let stats = rt.stats();
    assert_eq!(stats.tasks_failed, 0);
    assert_eq!(stats.calls_failed, 0);
}

/// The kernel's CPU `cpu`'s `online` file.
fn online_file(cpu: usize) -> std::path::PathBuf {
    format!("/sys/devices/system/cpu/cpu{cpu}/online").into()
}

/// Puts every CPU it took offline back online, whatever happens.
struct Restore(Vec<usize>);

impl Drop for Restore {
    fn drop(&mut self) {
        for &cpu in &self.0 {
            let _ = std::fs::write(online_file(cpu), "1");
        }
    }
}

#[test]
fn kernel_hotplug_of_six_of_eight_cpus_under_traffic_loses_nothing() {
    let Some(real) = eight_cpus() else { return };
    let cpus: Vec<usize> = real.iter().skip(2).collect();
    let writable = cpus.iter().all(|&c| std::fs::OpenOptions::new().write(true).open(online_file(c)).is_ok());
    if !writable {
        skip(Need::Hotplug, "sysfs CPU hotplug is not writable here (needs root and hot-pluggable CPUs)");
        return;
    }
    let _cpus = dyncore_runtime::testing::real_cpus();
    // Traffic: producers on every CPU's worth of threads, one consumer,
    // counted at both ends; the kernel moves them as CPUs leave.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(1024);
    let producers: Vec<_> = (0..8)
        .map(|_| {
            let (tx, stop, sent) = (tx.clone(), stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) {
                    tx.send(n).unwrap();
                    sent.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                    if n.is_multiple_of(256) {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let consumer = std::thread::spawn(move || rx.iter().count() as u64);

    let restore = Restore(cpus.clone());
    for round in 0..2 {
        for &c in &cpus {
            std::fs::write(online_file(c), "0")
                .unwrap_or_else(|e| panic!("round {round}: offline CPU {c}: {e}"));
        }
        for &c in &cpus {
            let s = std::fs::read_to_string(online_file(c)).unwrap();
            assert_eq!(s.trim(), "0", "round {round}: CPU {c} reads online after offline");
        }
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
        let online: CpuSet = online.trim().parse().unwrap();
        assert!(cpus.iter().all(|&c| !online.contains(c)), "round {round}: online mask {online}");
        let before = sent.load(Ordering::SeqCst);
        eventually("traffic flows on the 2 CPUs left", String::new, || {
            sent.load(Ordering::SeqCst) > before + 1000
        });
        for &c in &cpus {
            std::fs::write(online_file(c), "1")
                .unwrap_or_else(|e| panic!("round {round}: online CPU {c}: {e}"));
        }
        for &c in &cpus {
            assert_eq!(
                std::fs::read_to_string(online_file(c)).unwrap().trim(),
                "1",
                "round {round}: CPU {c}"
            );
        }
    }
    drop(restore);
    stop.store(true, Ordering::Release);
    for p in producers {
        p.join().unwrap();
    }
    let received = consumer.join().unwrap();
    assert_eq!(received, sent.load(Ordering::SeqCst), "messages lost across kernel hotplug");
    eprintln!("{received} messages across 2 rounds of kernel hotplug of {} CPUs, none lost", cpus.len());
}
