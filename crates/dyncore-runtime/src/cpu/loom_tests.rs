//! loom models of the proxy install/teardown ordering of `mailbox.rs` and of
//! the worker/controller handshake of `gate.rs`. Run
//! with `RUSTFLAGS="--cfg dyncore_loom" cargo test --release -p
//! dyncore-runtime --lib -- loom`.
//!
//! Model: runtime CPU 1 with a mailbox; CPU 0 is its proxy. Each serving
//! CPU has a wake epoch (`wakes[h]`), bumped with an RMW by whoever is told
//! to wake it (a post returns the handler to wake; a redirect that sees
//! pending messages wakes the new handler), and read by the CPU before it
//! drains, as the real waiter does (read the epoch, then check for work).
//! A CPU serves one pass; after all threads
//! finished, the property "never lost" is: every posted message was handled,
//! or is still queued *and* its current handler is serving and has a wake
//! outstanding (so it will drain it). The models also check that a message
//! is handled at most once per drain (counts add up exactly).

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use super::mailbox::Mailbox;

struct Model {
    mailbox: Mailbox<u32>,
    /// Wake-ups sent to CPU 0 (the proxy) and CPU 1 (an epoch, as the real
    /// waiter's: bumped with an RMW by whoever wakes the CPU).
    wakes: [AtomicUsize; 2],
    /// The wake epoch each CPU read when it last started serving.
    served: [AtomicUsize; 2],
    /// CPU 1 dispatches (its state is Online).
    online: AtomicBool,
    /// CPU 0 lists CPU 1 among its charges.
    charged: AtomicBool,
    handled: AtomicUsize,
}

impl Model {
    fn new(online: bool, handler: usize) -> Arc<Model> {
        let m = Model {
            mailbox: Mailbox::new(1),
            wakes: [AtomicUsize::new(0), AtomicUsize::new(0)],
            served: [AtomicUsize::new(0), AtomicUsize::new(0)],
            online: AtomicBool::new(online),
            charged: AtomicBool::new(!online),
            handled: AtomicUsize::new(0),
        };
        if handler != 1 {
            m.mailbox.redirect(handler);
        }
        Arc::new(m)
    }

    fn post(&self, v: u32) {
        let h = self.mailbox.post(v);
        self.wakes[h].fetch_add(1, Ordering::SeqCst);
    }

    /// One serving pass of CPU `me` (clear the wake, then drain).
    fn serve(&self, me: usize) {
        let serving =
            if me == 1 { self.online.load(Ordering::SeqCst) } else { self.charged.load(Ordering::SeqCst) };
        if serving {
            // Read the epoch, then look (the real wait loop's order).
            let e = self.wakes[me].fetch_add(0, Ordering::SeqCst);
            self.served[me].store(e, Ordering::SeqCst);
            let n = self.mailbox.drain().len();
            self.handled.fetch_add(n, Ordering::SeqCst);
        }
    }

    /// After every thread finished: the message is handled, or queued with
    /// a serving handler that has a wake outstanding.
    fn assert_not_lost(&self, posted: usize) {
        let handled = self.handled.load(Ordering::SeqCst);
        let queued = self.mailbox.drain().len();
        assert_eq!(handled + queued, posted, "a message was duplicated or dropped");
        if queued > 0 {
            let h = self.mailbox.handler();
            let serving =
                if h == 1 { self.online.load(Ordering::SeqCst) } else { self.charged.load(Ordering::SeqCst) };
            assert!(serving, "{queued} message(s) stranded with CPU {h}, which no longer serves");
            assert!(
                self.wakes[h].load(Ordering::SeqCst) > self.served[h].load(Ordering::SeqCst),
                "{queued} message(s) queued for CPU {h} without a wake-up"
            );
        }
    }
}

/// Offline: charge the proxy, redirect, wake it if pending, then stop the
/// CPU — while a message is posted and both CPUs serve concurrently.
#[test]
fn loom_proxy_install_never_strands_a_message() {
    loom::model(|| {
        let m = Model::new(true, 1);
        let poster = {
            let m = m.clone();
            thread::spawn(move || m.post(7))
        };
        let cpu1 = {
            let m = m.clone();
            thread::spawn(move || m.serve(1))
        };
        // The controller (InstallProxy, then StopDispatch).
        m.charged.store(true, Ordering::SeqCst);
        if m.mailbox.redirect(0) {
            m.wakes[0].fetch_add(1, Ordering::SeqCst);
        }
        m.online.store(false, Ordering::SeqCst);
        // The proxy serves one pass.
        m.serve(0);
        poster.join().unwrap();
        cpu1.join().unwrap();
        m.assert_not_lost(1);
    });
}

/// Online: redirect back, drop the charge, then start the CPU — pending
/// messages are replayed on the returning CPU, or handled by the proxy
/// still draining.
#[test]
fn loom_proxy_teardown_replays_pending_messages() {
    loom::model(|| {
        let m = Model::new(false, 0);
        let poster = {
            let m = m.clone();
            thread::spawn(move || m.post(7))
        };
        let proxy = {
            let m = m.clone();
            thread::spawn(move || m.serve(0))
        };
        // The controller (RemoveProxy, then StartDispatch).
        if m.mailbox.redirect(1) {
            m.wakes[1].fetch_add(1, Ordering::SeqCst);
        }
        m.charged.store(false, Ordering::SeqCst);
        m.online.store(true, Ordering::SeqCst);
        // The returning CPU's first dispatch section.
        m.serve(1);
        poster.join().unwrap();
        proxy.join().unwrap();
        m.assert_not_lost(1);
    });
}

/// The checker is not vacuous: a CPU that stops before any proxy took its
/// mailbox, with a message posted meanwhile, is reported as stranding it.
#[test]
#[should_panic(expected = "stranded")]
fn loom_checker_detects_a_stranded_message() {
    loom::model(|| {
        let m = Model::new(true, 1);
        m.online.store(false, Ordering::SeqCst);
        let poster = {
            let m = m.clone();
            thread::spawn(move || m.post(7))
        };
        // The proxy takes over only after the post (joined first).
        poster.join().unwrap();
        m.assert_not_lost(1);
        m.charged.store(true, Ordering::SeqCst);
        m.mailbox.redirect(0);
    });
}

// The worker/controller handshake of `gate.rs`, with the real `Gate`: the
// worker's dispatch sections and the controller's calls are the ones the
// runtime makes (`worker.rs`, `exec.rs`, `waits.rs`); only the loops around
// them are the model's. A step and the controller's use of the run queue
// touch a loom `UnsafeCell`, so loom reports any execution in which they
// are not ordered by happens-before.

mod gate_models {
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::thread;

    use super::super::gate::Gate;

    /// The run queue a step touches and `MigrateRunQueue` empties.
    struct Cpu {
        gate: Gate,
        queue: UnsafeCell<u32>,
    }

    /// Two dispatch attempts, each a step on the queue when admitted.
    fn worker(cpu: &Cpu) {
        for _ in 0..2 {
            if cpu.gate.enter() {
                // SAFETY: loom checks the access (this is the model's claim).
                cpu.queue.with_mut(|q| unsafe { *q += 1 });
                cpu.gate.leave();
            }
        }
    }

    /// StopDispatch, then AwaitStopped if `wait`, then MigrateRunQueue,
    /// while a worker makes two dispatch attempts.
    fn stop_and_migrate(wait: bool) {
        loom::model(move || {
            let cpu = Arc::new(Cpu { gate: Gate::new(), queue: UnsafeCell::new(0) });
            let w = {
                let cpu = cpu.clone();
                thread::spawn(move || worker(&cpu))
            };
            cpu.gate.stop();
            while wait && !cpu.gate.stopped() {
                thread::yield_now();
            }
            // SAFETY: checked by loom (unsound without the wait, which the
            // checker must then report).
            cpu.queue.with_mut(|q| unsafe { *q = 0 });
            w.join().unwrap();
        });
    }

    /// No step runs concurrently with the migration.
    #[test]
    fn loom_no_step_runs_after_the_controller_saw_the_worker_stopped() {
        stop_and_migrate(true);
    }

    /// The checker is not vacuous: a controller that migrates without
    /// waiting for the worker to stop races with a step.
    #[test]
    #[should_panic]
    fn loom_checker_detects_a_migration_that_does_not_wait() {
        stop_and_migrate(false);
    }

    /// A grace period (`synchronize`): after unpublishing an object, a
    /// snapshot and a wait for `passed`, no dispatch section that could
    /// have seen it published still reads it, so it may be freed.
    #[test]
    fn loom_grace_period_orders_readers_before_the_free() {
        loom::model(|| {
            let cpu = Arc::new(Cpu { gate: Gate::new(), queue: UnsafeCell::new(7) });
            let published = Arc::new(AtomicBool::new(true));
            let reader = {
                let (cpu, published) = (cpu.clone(), published.clone());
                thread::spawn(move || {
                    for _ in 0..2 {
                        if cpu.gate.enter() {
                            if published.load(Ordering::Acquire) {
                                // SAFETY: checked by loom.
                                let v = cpu.queue.with(|q| unsafe { *q });
                                assert_eq!(v, 7, "read a freed object");
                            }
                            cpu.gate.leave();
                        }
                    }
                })
            };
            published.store(false, Ordering::Release);
            let snap = cpu.gate.snapshot();
            while !cpu.gate.passed(snap) {
                thread::yield_now();
            }
            // SAFETY: checked by loom ("free" the object).
            cpu.queue.with_mut(|q| unsafe { *q = 0 });
            reader.join().unwrap();
        });
    }
}
