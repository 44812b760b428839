//! Interrupt virtualisation (the Sidecore paper's §III, Figure 4), live.
//!
//! `guests` guest threads each own a receive ring; a device thread delivers
//! packets to them (a seeded random guest per packet, paced). A guest sleeps
//! until signalled, then drains its ring and records each packet's latency
//! (delivery to dequeue). Two ways to signal:
//!
//! * [`IrqMode::SharedRegister`] (the baseline): the device sets bit
//!   `guest % 8` of an 8-bit identifier register and raises the master
//!   interrupt (wakes a handler thread). The handler takes the register and
//!   signals *every* guest that shares each set bit.
//! * [`IrqMode::SharedRegisterPolled`]: the same, but the handler polls the
//!   register instead of sleeping until woken (isolates redundant
//!   signalling from the cost of delivering the master interrupt).
//! * [`IrqMode::Sidecore`]: a core polls every receive ring and signals
//!   exactly the owner of a ring that received something.
//!
//! A signal is *redundant* when the signalled guest's ring is empty at that
//! moment; an *empty wake-up* is a guest that woke and found nothing. Up to
//! 8 guests the register identifies the guest uniquely, so the two modes
//! should not differ; past 8 the baseline's redundant signals grow.
//!
//! Protocol: the device publishes a packet to the ring (release), then
//! signals; a signaller bumps the guest's `irq` counter (release) and
//! notifies its waiter; a guest waits until `irq` changes (or the run ends),
//! then drains. The device ends the run only after every packet was
//! consumed, so every packet is delivered by a signal.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use dyncore_core::CpuId;
use dyncore_ring::{Consumer, Probe, Producer, SpinPolicy, Waiter, ring};

/// How the device's arrivals reach the guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IrqMode {
    /// 8-bit identifier register + master interrupt + handler (baseline):
    /// the handler sleeps until the device wakes it.
    SharedRegister,
    /// The same register, but the handler polls it (a dedicated interrupt
    /// core): the control that isolates redundant signalling from the cost
    /// of delivering the master interrupt.
    SharedRegisterPolled,
    /// A polling sidecore that wakes exactly the owner.
    Sidecore,
}

/// One run of the experiment.
#[derive(Debug, Clone)]
pub struct IrqConfig {
    pub guests: usize,
    pub packets: usize,
    /// Gap between packets sent by the device.
    pub interval: Duration,
    pub mode: IrqMode,
    /// CPU for the handler / sidecore thread (`None`: unpinned).
    pub service_cpu: Option<CpuId>,
    pub seed: u64,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct IrqReport {
    /// Per-packet latency, device delivery to guest dequeue, nanoseconds.
    pub latencies_ns: Vec<u64>,
    /// Signals sent to guests.
    pub signals: u64,
    /// Signals sent to a guest whose ring was empty.
    pub redundant_signals: u64,
    /// Guest wake-ups that found no packet.
    pub empty_wakeups: u64,
}

#[derive(Debug, Clone, Copy)]
struct Packet {
    sent_ns: u64,
}

struct Port {
    waiter: Waiter,
    irq: CachePadded<AtomicU32>,
    probe: Probe<Packet>,
}

struct World {
    ports: Vec<Port>,
    epoch: Instant,
    done: AtomicBool,
    /// Threads (guests and the service thread) that have started.
    started: AtomicUsize,
    consumed: CachePadded<AtomicU64>,
    register: CachePadded<AtomicU8>,
    handler: Waiter,
    signals: AtomicU64,
    redundant: AtomicU64,
}

impl World {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn signal(&self, g: usize) {
        let p = &self.ports[g];
        self.signals.fetch_add(1, Ordering::Relaxed);
        if p.probe.pending() == 0 {
            self.redundant.fetch_add(1, Ordering::Relaxed);
        }
        p.irq.fetch_add(1, Ordering::Release);
        p.waiter.notify();
    }
}

/// Longest any thread of the experiment waits before declaring it stuck.
const STUCK: Duration = Duration::from_secs(30);

/// Runs one configuration and returns its measurements.
pub fn run(cfg: &IrqConfig) -> io::Result<IrqReport> {
    assert!(cfg.guests > 0, "at least one guest");
    let mut producers: Vec<Producer<Packet>> = Vec::new();
    let mut consumers: Vec<Consumer<Packet>> = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..cfg.guests {
        let (p, c) = ring::<Packet>(cfg.packets.clamp(1, 4096));
        ports.push(Port {
            waiter: Waiter::new(),
            irq: CachePadded::new(AtomicU32::new(0)),
            probe: c.probe(),
        });
        producers.push(p);
        consumers.push(c);
    }
    let w = Arc::new(World {
        ports,
        epoch: Instant::now(),
        done: AtomicBool::new(false),
        started: AtomicUsize::new(0),
        consumed: CachePadded::new(AtomicU64::new(0)),
        register: CachePadded::new(AtomicU8::new(0)),
        handler: Waiter::new(),
        signals: AtomicU64::new(0),
        redundant: AtomicU64::new(0),
    });

    let guests: Vec<_> = consumers
        .into_iter()
        .enumerate()
        .map(|(g, rx)| {
            let w = w.clone();
            thread::spawn(move || guest(&w, g, rx))
        })
        .collect();
    let service = {
        let w = w.clone();
        let (mode, cpu) = (cfg.mode, cfg.service_cpu);
        thread::spawn(move || -> io::Result<()> {
            let pinned = cpu.map_or(Ok(()), crate::affinity::pin_current_thread);
            w.started.fetch_add(1, Ordering::Release);
            pinned?;
            match mode {
                IrqMode::SharedRegister => handler(&w, &SpinPolicy::PARK),
                IrqMode::SharedRegisterPolled => handler(&w, &POLL),
                IrqMode::Sidecore => poller(&w),
            }
            Ok(())
        })
    };

    // The device (this thread) starts once every other thread runs, so no
    // packet's latency includes thread start-up.
    let give_up = Instant::now() + STUCK;
    while w.started.load(Ordering::Acquire) < cfg.guests + 1 && Instant::now() < give_up {
        thread::sleep(Duration::from_micros(200));
    }
    let mut rng = cfg.seed | 1;
    let mut result = Ok(());
    for _ in 0..cfg.packets {
        // xorshift64: a seeded, reproducible choice of destination.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let g = (rng % cfg.guests as u64) as usize;
        let pkt = Packet { sent_ns: w.now_ns() };
        if producers[g].send(pkt).is_err() {
            result = Err(io::Error::other(format!("receive ring of guest {g} overflowed")));
            break;
        }
        if cfg.mode != IrqMode::Sidecore {
            w.register.fetch_or(1 << (g % 8), Ordering::AcqRel);
            w.handler.notify();
        }
        thread::sleep(cfg.interval);
    }
    let give_up = Instant::now() + STUCK;
    while result.is_ok() && w.consumed.load(Ordering::Acquire) < cfg.packets as u64 {
        if Instant::now() > give_up {
            result = Err(io::Error::other("guests did not consume every packet within 30 s"));
        }
        thread::sleep(Duration::from_millis(1));
    }
    w.done.store(true, Ordering::Release);
    w.handler.notify();
    for p in &w.ports {
        p.waiter.notify();
    }
    let svc = service.join().map_err(|_| io::Error::other("service thread panicked"))?;
    let mut latencies_ns = Vec::with_capacity(cfg.packets);
    let mut empty_wakeups = 0;
    for g in guests {
        let (lat, empty) = g.join().map_err(|_| io::Error::other("guest thread panicked"))?;
        latencies_ns.extend(lat);
        empty_wakeups += empty;
    }
    result?;
    svc?;
    Ok(IrqReport {
        latencies_ns,
        signals: w.signals.load(Ordering::Relaxed),
        redundant_signals: w.redundant.load(Ordering::Relaxed),
        empty_wakeups,
    })
}

/// A guest: sleeps until signalled, drains its ring.
fn guest(w: &World, g: usize, mut rx: Consumer<Packet>) -> (Vec<u64>, u64) {
    let port = &w.ports[g];
    let mut seen = 0;
    let mut lat = Vec::new();
    let mut empty = 0;
    w.started.fetch_add(1, Ordering::Release);
    loop {
        let woke = port.waiter.wait_for(&SpinPolicy::PARK, STUCK, || {
            let v = port.irq.load(Ordering::Acquire);
            if v != seen {
                Some(Some(v))
            } else if w.done.load(Ordering::Acquire) {
                Some(None)
            } else {
                None
            }
        });
        let Some(Some(v)) = woke else { return (lat, empty) };
        seen = v;
        let mut got = 0;
        while let Some(p) = rx.pop() {
            lat.push(w.now_ns().saturating_sub(p.sent_ns));
            got += 1;
        }
        rx.release();
        if got == 0 {
            empty += 1;
        }
        w.consumed.fetch_add(got, Ordering::Release);
    }
}

/// A polling handler: spins ~ms on the register, then parks (bounded, so an
/// oversubscribed test run still progresses).
const POLL: SpinPolicy = SpinPolicy { spin_iters: 200_000, yield_iters: 0, umwait: false };

/// The baseline's interrupt handler: wakes every guest sharing a set bit.
fn handler(w: &World, policy: &SpinPolicy) {
    loop {
        let bits = w.handler.wait_for(policy, STUCK, || {
            // Read before swapping: polling must not bounce the line.
            let b = if w.register.load(Ordering::Relaxed) != 0 {
                w.register.swap(0, Ordering::AcqRel)
            } else {
                0
            };
            if b != 0 {
                Some(b)
            } else if w.done.load(Ordering::Acquire) {
                Some(0)
            } else {
                None
            }
        });
        match bits {
            None | Some(0) => return,
            Some(b) => {
                for bit in 0..8 {
                    if b & (1 << bit) != 0 {
                        for g in (bit..w.ports.len()).step_by(8) {
                            w.signal(g);
                        }
                    }
                }
            }
        }
    }
}

/// The sidecore: polls every ring's head, signals exactly the owner.
fn poller(w: &World) {
    // Rings start empty (head 0); anything published since must be signalled.
    let mut last = vec![0usize; w.ports.len()];
    let mut idle_sweeps = 0u32;
    while !w.done.load(Ordering::Acquire) {
        let mut any = false;
        for (g, p) in w.ports.iter().enumerate() {
            let head = p.probe.published();
            if head != last[g] {
                last[g] = head;
                w.signal(g);
                any = true;
            }
        }
        if any {
            idle_sweeps = 0;
        } else {
            idle_sweeps += 1;
            // A dedicated core would spin forever; on a shared machine give
            // the CPU away now and then so oversubscribed runs make progress.
            if idle_sweeps.is_multiple_of(256) {
                thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}
