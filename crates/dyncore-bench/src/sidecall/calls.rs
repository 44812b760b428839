//! Measurements through the sidecore's own client: `Client::call` with the
//! sidecore on (sidecalls) or off (the trap path, the same client code), the
//! caller's lock under contention, and the sidecore's throughput.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::affinity::{pin_current_thread, set_current_thread_affinity};
use dyncore_runtime::sidecore::{
    NullService, PteUpdate, RadixMap, Service, Sidecore, SidecoreConfig, StateService, StateTrap,
};

use super::measure::{Clock, Sample, measure, pinned};

/// The client's and the server's CPU.
#[derive(Debug, Clone, Copy)]
pub struct Cpus {
    pub client: CpuId,
    pub server: CpuId,
}

fn bench_cfg(server_cpu: CpuId, enabled: bool) -> SidecoreConfig {
    SidecoreConfig {
        enabled,
        max_clients: 8,
        call_timeout: Duration::from_secs(5),
        ..SidecoreConfig::on_cpu(server_cpu)
    }
}

/// Measures `Client::call` round trips with the sidecore on (sidecalls) or
/// off (the trap path, same client code); `next(i)` makes the i-th request.
/// Returns the samples and the number of calls made (warm-up included).
fn calls<S: Service>(
    clock: &Clock,
    iters: u64,
    svc: Arc<S>,
    on: bool,
    cpus: Cpus,
    mut next: impl FnMut(u64) -> S::Request + Send,
) -> Result<(Sample, u64)> {
    let core = Sidecore::start(svc, bench_cfg(cpus.server, on))?;
    let mut c = core.client()?;
    let mut i = 0u64;
    let mut err = None;
    let sample = pinned(cpus.client, || {
        measure(clock, iters, || {
            i += 1;
            if let Err(e) = c.call(next(i)) {
                err.get_or_insert(e);
            }
        })
    })?;
    if let Some(e) = err {
        return Err(e.into());
    }
    let expect = if on { i } else { 0 };
    anyhow::ensure!(core.served() == expect, "sidecore served {} calls, expected {expect}", core.served());
    Ok((sample, i))
}

/// Runs [`calls`] with the same request every time.
pub fn same_calls<S: Service>(
    clock: &Clock,
    iters: u64,
    svc: Arc<S>,
    on: bool,
    cpus: Cpus,
    req: S::Request,
) -> Result<Sample> {
    Ok(calls(clock, iters, svc, on, cpus, move |_| req)?.0)
}

/// Runs [`calls`] with page-table updates and checks the correctness rule:
/// the map afterwards equals the one built by applying the same updates in
/// order.
pub fn state_calls(clock: &Clock, iters: u64, trap: StateTrap, on: bool, cpus: Cpus) -> Result<Sample> {
    let svc = Arc::new(StateService::new(trap)?);
    let (sample, n) = calls(clock, iters, svc.clone(), on, cpus, pte)?;
    let mut expect = RadixMap::new();
    for i in 1..=n {
        let u = pte(i);
        expect.set(u.vaddr, u.pte);
    }
    anyhow::ensure!(
        svc.snapshot() == expect,
        "the radix map differs from in-order application of the updates"
    );
    Ok(sample)
}

/// The trap path of the State update, while a second thread on the server's
/// CPU updates the same map under the same lock without pause (the worst
/// case of a lock shared by two cores). The two threads write disjoint
/// address windows, so the check is that every one of the client's updates
/// landed, and that the contender really ran alongside: the measurement
/// starts only once it has made its first update, however late a loaded
/// machine schedules it.
pub fn contended_lock_calls(clock: &Clock, iters: u64, cpus: Cpus) -> Result<Sample> {
    let svc = Arc::new(StateService::new(StateTrap::Lock)?);
    let stop = AtomicBool::new(false);
    let contended = AtomicU64::new(0);
    let (sample, n) = std::thread::scope(|s| -> Result<(Sample, u64)> {
        let contender = s.spawn(|| -> std::io::Result<()> {
            let pinned = pin_current_thread(cpus.server);
            let mut j = 0u64;
            while pinned.is_ok() && !stop.load(Ordering::Relaxed) {
                j += 1;
                svc.trap(&PteUpdate { vaddr: CONTENDER_WINDOW | pte(j).vaddr, pte: pte(j).pte });
                contended.store(j, Ordering::Release);
            }
            // Stops the wait below at once if it could not start.
            contended.store(j.max(u64::from(pinned.is_err())), Ordering::Release);
            pinned
        });
        while contended.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        let r = calls(clock, iters, svc.clone(), false, cpus, pte);
        stop.store(true, Ordering::Relaxed);
        contender.join().map_err(|_| anyhow::anyhow!("contender thread panicked"))??;
        r
    })?;
    let map = svc.snapshot();
    let mut last = RadixMap::new();
    for i in 1..=n {
        let u = pte(i);
        last.set(u.vaddr, u.pte);
    }
    for page in 0..PAGES {
        let v = page << 12;
        anyhow::ensure!(map.get(v) == last.get(v), "the client's update of {v:#x} was lost under contention");
    }
    anyhow::ensure!(contended.load(Ordering::Relaxed) > 0, "the contender made no update");
    Ok(sample)
}

/// Where the contender of [`contended_lock_calls`] writes: above the
/// client's 64 MiB window.
const CONTENDER_WINDOW: u64 = 1 << 30;

/// Pages in the window the updates walk (64 MiB of 4 KiB pages).
const PAGES: u64 = 16_384;

/// Updates walking a 64 MiB window of the simulated address space.
fn pte(i: u64) -> PteUpdate {
    PteUpdate { vaddr: (i % PAGES) << 12, pte: (i << 12) | 0b1 | ((i & 1) << 1) }
}

/// Null requests per second served by one sidecore with `clients` client
/// threads (on `client_cpus`), one call at a time or in batches of
/// `BATCH_MAX`.
pub fn throughput(
    clients: usize,
    batched: bool,
    dur: Duration,
    client_cpus: &CpuSet,
    server_cpu: CpuId,
) -> Result<f64> {
    let core = Sidecore::start(Arc::new(NullService), bench_cfg(server_cpu, true))?;
    let handles: Vec<_> = (0..clients).map(|_| core.client()).collect::<Result<_, _>>()?;
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| -> Result<u64> {
        let threads: Vec<_> = handles
            .into_iter()
            .map(|mut c| {
                s.spawn(move || -> Result<u64> {
                    set_current_thread_affinity(client_cpus)?;
                    let reqs = [(); dyncore_ring::BATCH_MAX];
                    let mut out = Vec::with_capacity(reqs.len());
                    let mut n = 0u64;
                    while start.elapsed() < dur {
                        for _ in 0..64 {
                            if batched {
                                c.call_batch(&reqs, &mut out)?;
                                n += reqs.len() as u64;
                            } else {
                                c.call(())?;
                                n += 1;
                            }
                        }
                    }
                    Ok(n)
                })
            })
            .collect();
        let mut sum = 0;
        for t in threads {
            sum += t.join().map_err(|_| anyhow::anyhow!("client thread panicked"))??;
        }
        Ok(sum)
    })?;
    let secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(core.served() == total, "served {} != requested {total}", core.served());
    Ok(total as f64 / secs)
}
