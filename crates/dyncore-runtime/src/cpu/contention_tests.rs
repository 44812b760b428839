//! A busy thread competing with a worker on its real CPU: the throttle
//! charges the worker's own CPU time, so the competitor's time is counted
//! as stolen, not as work; and a CPU that could not get its duty in CPU
//! time is labelled contended. What is asserted is the accounting, which
//! holds whatever the machine's load; the CPU time a contended worker gets
//! is the scheduler's affair and is only printed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::tests::config;
use super::*;

/// A task whose steps spin for about 20 µs of wall time, adding the CPU
/// time its thread used inside each step to `cpu_in_steps`.
fn spinner(cpu_in_steps: Arc<AtomicU64>, stop: Arc<AtomicBool>) -> impl Task {
    move |_: &mut Ctx<'_>| {
        let (c0, w0) = (thread_cpu_ns(), Instant::now());
        while w0.elapsed() < Duration::from_micros(20) {
            std::hint::spin_loop();
        }
        cpu_in_steps.fetch_add(thread_cpu_ns() - c0, Ordering::Relaxed);
        if stop.load(Ordering::Relaxed) { TaskPoll::Ready } else { TaskPoll::Pending }
    }
}

/// A thread pinned to `real` that spins until `stop`, publishing its own
/// CPU time.
fn competitor(real: CpuId, cpu: Arc<AtomicU64>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        crate::affinity::pin_current_thread(real).expect("pin the competitor");
        while !stop.load(Ordering::Relaxed) {
            let w0 = Instant::now();
            while w0.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop();
            }
            cpu.store(thread_cpu_ns(), Ordering::Relaxed);
        }
    })
}

/// The duty report of runtime CPU 0 and the competitor's CPU time over a
/// window of at least 300 loaded throttle periods.
fn window(rt: &Runtime, comp: &AtomicU64) -> (DutyReport, u64) {
    let report = || rt.duty_report()[0].clone();
    while report().loaded_periods < 5 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (r0, c0) = (report(), comp.load(Ordering::Relaxed));
    while report().loaded_ns - r0.loaded_ns < 300 * r0.period_ns {
        std::thread::sleep(Duration::from_millis(5));
    }
    (report().since(&r0), comp.load(Ordering::Relaxed) - c0)
}

#[test]
fn a_competing_thread_on_the_real_cpu_is_stolen_time_and_labels_the_cpu() {
    let _cpus = crate::testing::real_cpus();
    let real = config(1).real_cpus[0];
    // Normal priority, as the competitor: they share the real CPU.
    let rt = Runtime::new(config(1)).expect("a runtime on one real CPU");
    for duty in [Duty::FULL, Duty::BASELINE] {
        rt.set_duty(0, duty).unwrap();
        let (in_steps, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        rt.spawn_on(0, spinner(in_steps.clone(), stop.clone())).unwrap();
        let comp_cpu = Arc::new(AtomicU64::new(0));
        let comp = competitor(real, comp_cpu.clone(), stop.clone());
        let steps_before = in_steps.load(Ordering::Relaxed);
        let (r, comp_ns) = window(&rt, &comp_cpu);
        let task_ns = in_steps.load(Ordering::Relaxed) - steps_before;
        stop.store(true, Ordering::Relaxed);
        comp.join().unwrap();
        let p = r.period_ns;
        eprintln!(
            "{duty}: stepping {} ms, busy (CPU) {} ms, stolen {:.1}%, shortfall {:+.1}%, competitor {} ms, \
             contended {}",
            r.stepping_ns / 1_000_000,
            r.busy_ns / 1_000_000,
            r.stolen_share() * 100.0,
            r.shortfall().unwrap_or(0.0) * 100.0,
            comp_ns / 1_000_000,
            r.contended()
        );
        // The accounting: the worker was charged its CPU time — at least
        // what its task measured inside the steps (the windows' edges
        // differ by up to a period and a step), and the runs' wall time
        // minus what was stolen.
        assert!(
            r.busy_ns + 2 * p >= task_ns,
            "charged {} < the task's own CPU time {task_ns}: {r:?}",
            r.busy_ns
        );
        // A run's CPU time can pass its wall time only by the clock read
        // between the two (a few per period).
        let accounted = r.busy_ns + r.stolen_ns;
        assert!(
            accounted >= r.stepping_ns && accounted <= r.stepping_ns + 10_000 * r.loaded_periods,
            "{r:?}"
        );
        if duty == Duty::FULL {
            // Always runnable: whenever the competitor ran on the real
            // CPU, the worker was in a run and did not; that time is
            // stolen, not charged.
            assert!(
                r.stolen_ns + 3 * p >= comp_ns * 8 / 10,
                "stolen {} ns, the competitor ran {comp_ns} ns: {r:?}",
                r.stolen_ns
            );
            if comp_ns * 10 >= r.loaded_ns {
                assert!(r.contended(), "a competitor took {comp_ns} ns of {} ns: {r:?}", r.loaded_ns);
            }
        }
        // The guarantee a report relies on: the CPU time charged is duty ×
        // elapsed within the tolerance, or the CPU is labelled contended.
        let shortfall = r.shortfall().expect("loaded periods");
        assert!(
            shortfall.abs() <= DELIVERY_TOLERANCE || r.contended(),
            "{duty}: CPU time {shortfall:+.3} off its duty and not labelled: {r:?}"
        );
        assert!(shortfall >= -DELIVERY_TOLERANCE, "more CPU time than the duty: {r:?}");
    }
}
