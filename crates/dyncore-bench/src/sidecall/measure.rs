//! Timing and the ping-pong transports of `dyncore bench sidecall`.
//!
//! Each round trip is timed with one timestamp per iteration (the TSC on
//! x86_64, calibrated against the monotonic clock; `Instant` elsewhere), so
//! the timer's own cost is counted once per round trip, identically for
//! every transport, and the sum of the deltas is the run's wall time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use dyncore_core::CpuId;
use dyncore_ring::CachePadded;
use dyncore_runtime::affinity::pin_current_thread;

/// One measurement: every round trip's time, and their total (the run's
/// wall time, not quantised by the timer's resolution as each sample is).
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub samples_ns: Vec<u64>,
    pub total_ns: f64,
}

/// A cycle counter converted to nanoseconds.
pub struct Clock {
    ns_per_tick: f64,
}

impl Clock {
    /// Calibrates the counter against `Instant` over ~40 ms.
    pub fn calibrate() -> Clock {
        let (t0, c0) = (Instant::now(), ticks());
        std::thread::sleep(Duration::from_millis(40));
        let (t1, c1) = (Instant::now(), ticks());
        let ns = (t1 - t0).as_nanos() as f64;
        Clock { ns_per_tick: ns / (c1.wrapping_sub(c0)).max(1) as f64 }
    }

    /// The step the counter takes most often, in nanoseconds (about 10 ns
    /// on AMD Zen, whose TSC advances in coarse increments). Not the
    /// smallest step: such a counter also steps by one tick between two
    /// reads within one increment (a few percent of steps), which would
    /// report a resolution of under a nanosecond.
    pub fn resolution_ns(&self) -> f64 {
        let mut steps = Vec::with_capacity(10_000);
        let mut last = ticks();
        for _ in 0..10_000 {
            let t = ticks();
            if t != last {
                steps.push(t.wrapping_sub(last));
                last = t;
            }
        }
        steps.sort_unstable();
        let most_common = steps.chunk_by(|a, b| a == b).max_by_key(|run| run.len()).map_or(1, |run| run[0]);
        self.ticks_to_ns(most_common)
    }

    pub fn ticks_to_ns(&self, t: u64) -> f64 {
        t as f64 * self.ns_per_tick
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn ticks() -> u64 {
    // SAFETY: RDTSC is unprivileged on every x86_64 Linux system (the kernel
    // leaves CR4.TSD clear) and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn ticks() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<Instant> = OnceLock::new();
    T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Runs `op` `iters` times (after `iters / 10` warm-up runs), timing each.
pub fn measure(clock: &Clock, iters: u64, mut op: impl FnMut()) -> Sample {
    for _ in 0..iters / 10 {
        op();
    }
    let mut deltas = Vec::with_capacity(iters as usize);
    let start = ticks();
    let mut last = start;
    for _ in 0..iters {
        op();
        let now = ticks();
        deltas.push(now.wrapping_sub(last));
        last = now;
    }
    Sample {
        samples_ns: deltas.iter().map(|&t| clock.ticks_to_ns(t).round() as u64).collect(),
        total_ns: clock.ticks_to_ns(last.wrapping_sub(start)),
    }
}

/// How the benchmark's threads wait for each other: 4095 spins between
/// yields, so a round trip that comes within microseconds pays no system
/// call, and a descheduled partner (or an oversubscribed test run) still
/// gets the CPU now and then.
const SPIN: dyncore_runtime::Spin = dyncore_runtime::Spin { before_yield: 4095, between_yields: 4095 };

/// Spins until `done()` (the runtime's wait, with the benchmark's spinning).
#[inline(always)]
pub fn spin_until(done: impl FnMut() -> bool) {
    dyncore_runtime::spin_until_with(SPIN, None, done).expect("no deadline to pass");
}

/// Runs `client` on a thread pinned to `client_cpu` while `server` runs on
/// a thread pinned to `server_cpu`; `stop` is set when the client is done.
pub fn ping_pong<R: Send>(
    client_cpu: CpuId,
    server_cpu: CpuId,
    server: impl FnOnce(&AtomicBool) + Send,
    client: impl FnOnce() -> R + Send,
    stop_server: impl FnOnce() + Send,
) -> anyhow::Result<R> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let srv = s.spawn(|| -> std::io::Result<()> {
            pin_current_thread(server_cpu)?;
            server(&stop);
            Ok(())
        });
        let cli = s.spawn(|| -> std::io::Result<R> {
            pin_current_thread(client_cpu)?;
            Ok(client())
        });
        let r = cli.join().map_err(|_| anyhow::anyhow!("client thread panicked"));
        stop.store(true, Ordering::Release);
        stop_server();
        let s = srv.join().map_err(|_| anyhow::anyhow!("server thread panicked"))?;
        s?;
        Ok(r??)
    })
}

/// The server side of [`raw_spin`] and [`futex`]: echoes each new value of
/// `ping` into `pong` (then calls `notify`) until `ping` stops changing
/// after `stop` is set. `wait(last)` returns once `ping` differs from `last`
/// or `stop` is set.
fn echo(ping: &AtomicU32, pong: &AtomicU32, mut wait: impl FnMut(u32), mut notify: impl FnMut()) {
    let mut last = 0;
    loop {
        wait(last);
        let v = ping.load(Ordering::Acquire);
        if v == last {
            return;
        }
        last = v;
        pong.store(v, Ordering::Release);
        notify();
    }
}

/// Runs `op` on a thread pinned to `cpu`.
pub fn pinned<R: Send>(cpu: CpuId, op: impl FnOnce() -> R + Send) -> anyhow::Result<R> {
    std::thread::scope(|s| {
        s.spawn(|| -> std::io::Result<R> {
            pin_current_thread(cpu)?;
            Ok(op())
        })
        .join()
        .map_err(|_| anyhow::anyhow!("measurement thread panicked"))?
        .map_err(Into::into)
    })
}

/// The physical floor: two pinned threads bouncing a counter through two
/// cache lines.
pub fn raw_spin(clock: &Clock, iters: u64, cc: CpuId, sc: CpuId) -> anyhow::Result<Sample> {
    let ping = CachePadded::new(AtomicU32::new(0));
    let pong = CachePadded::new(AtomicU32::new(0));
    ping_pong(
        cc,
        sc,
        |stop| {
            echo(
                &ping,
                &pong,
                |last| spin_until(|| ping.load(Ordering::Acquire) != last || stop.load(Ordering::Relaxed)),
                || {},
            )
        },
        || {
            let mut i = 0u32;
            measure(clock, iters, || {
                i = i.wrapping_add(1);
                ping.store(i, Ordering::Release);
                spin_until(|| pong.load(Ordering::Acquire) == i);
            })
        },
        || {},
    )
}

/// Futex wake/wait across cores: each side sleeps in the kernel until woken.
pub fn futex(clock: &Clock, iters: u64, cc: CpuId, sc: CpuId) -> anyhow::Result<Sample> {
    use rustix::thread::futex::{Flags, wait, wake};
    let a = Arc::new(CachePadded::new(AtomicU32::new(0)));
    let b = Arc::new(CachePadded::new(AtomicU32::new(0)));
    let a2 = a.clone();
    ping_pong(
        cc,
        sc,
        |stop| {
            echo(
                &a,
                &b,
                |last| {
                    while a.load(Ordering::Acquire) == last && !stop.load(Ordering::Acquire) {
                        let _ = wait(&a, Flags::PRIVATE, last, None);
                    }
                },
                || {
                    let _ = wake(&b, Flags::PRIVATE, 1);
                },
            )
        },
        || {
            let mut i = 0u32;
            measure(clock, iters, || {
                i = i.wrapping_add(1);
                a.store(i, Ordering::Release);
                let _ = wake(&a, Flags::PRIVATE, 1);
                while b.load(Ordering::Acquire) != i {
                    let _ = wait(&b, Flags::PRIVATE, i.wrapping_sub(1), None);
                }
            })
        },
        move || {
            // Change the word (so a server about to sleep on the old value
            // does not) and wake it: it then sees `stop`.
            a2.fetch_add(1, Ordering::Release);
            let _ = wake(&a2, Flags::PRIVATE, 1);
        },
    )
}

/// One byte each way through two pipes.
pub fn pipe(clock: &Clock, iters: u64, cc: CpuId, sc: CpuId) -> anyhow::Result<Sample> {
    use rustix::io::{read, write};
    let (r1, w1) = rustix::pipe::pipe()?;
    let (r2, w2) = rustix::pipe::pipe()?;
    let w1 = std::sync::Mutex::new(Some(w1));
    ping_pong(
        cc,
        sc,
        |_| {
            let mut b = [0u8; 1];
            // Ends when the client side's write end closes (read returns 0).
            while matches!(read(&r1, &mut b), Ok(1)) {
                let _ = write(&w2, &b);
            }
        },
        || {
            let mut b = [0u8; 1];
            let guard = w1.lock().unwrap();
            let w = guard.as_ref().expect("write end open");
            measure(clock, iters, || {
                let _ = write(w, &[1]);
                let _ = read(&r2, &mut b);
            })
        },
        || drop(w1.lock().unwrap().take()),
    )
}

/// A ping-pong over two SPSC queues of one kind, spinning on empty.
macro_rules! queue_ping_pong {
    ($name:ident, $doc:literal, |$cap:ident| $make:expr, |$tx:ident, $v:ident| $push:expr, |$rx:ident| $pop:expr) => {
        #[doc = $doc]
        pub fn $name(clock: &Clock, iters: u64, cc: CpuId, sc: CpuId) -> anyhow::Result<Sample> {
            let $cap = 8;
            let (mut to_srv_tx, mut to_srv_rx) = $make;
            let (mut to_cli_tx, mut to_cli_rx) = $make;
            ping_pong(
                cc,
                sc,
                move |stop| {
                    loop {
                        let mut got = None;
                        spin_until(|| {
                            let $rx = &mut to_srv_rx;
                            got = $pop;
                            got.is_some() || stop.load(Ordering::Relaxed)
                        });
                        let Some($v) = got else { return };
                        let $tx = &mut to_cli_tx;
                        let _ = $push;
                    }
                },
                move || {
                    let mut i = 0u64;
                    measure(clock, iters, || {
                        i += 1;
                        let ($tx, $v) = (&mut to_srv_tx, i);
                        let _ = $push;
                        spin_until(|| {
                            let $rx = &mut to_cli_rx;
                            $pop.is_some()
                        });
                    })
                },
                || {},
            )
        }
    };
}

queue_ping_pong!(
    rtrb_queue,
    "The rtrb crate's SPSC ring buffer.",
    |cap| rtrb::RingBuffer::<u64>::new(cap),
    |tx, v| tx.push(v),
    |rx| rx.pop().ok()
);
queue_ping_pong!(
    array_queue,
    "crossbeam's bounded MPMC ArrayQueue.",
    |cap| {
        let q = Arc::new(crossbeam_queue::ArrayQueue::<u64>::new(cap));
        (q.clone(), q)
    },
    |tx, v| tx.push(v),
    |rx| rx.pop()
);
queue_ping_pong!(
    dyncore_ring,
    "dyncore-ring's SPSC ring (publish per item).",
    |cap| dyncore_ring::ring::<u64>(cap),
    |tx, v| tx.send(v),
    |rx| rx.recv()
);
