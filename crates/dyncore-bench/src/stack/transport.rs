//! Two ways to move a packet larger than a ring item between two pinned
//! threads, both over dyncore-ring SPSC rings, measured in one run:
//!
//! * **pool indices** (what the split stack does): the producer copies the
//!   frame into a buffer of a pool and sends its index; the consumer copies
//!   it out and returns the buffer through the pool's return ring;
//! * **chunked items**: the frame is cut into cache-line items of 60 bytes
//!   of payload each, which the consumer reassembles.
//!
//! Both copy the frame in and out once, so the difference is the transport.

use std::time::Instant;

use anyhow::Result;
use dyncore_core::CpuId;
use dyncore_net::chan::{Bell, Frame, channel};
use dyncore_net::pool::Pool;
use dyncore_ring::ring;

use super::baselines::{join, pinned};

/// One transport's rate.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Transport {
    pub what: &'static str,
    pub frames_per_s: f64,
    pub bytes_per_s: f64,
    pub items_per_frame: usize,
}

/// Buffers in the pool (packets in flight), as a stack's default.
const FRAMES_IN_FLIGHT: usize = 256;
/// Frames between two publications.
const BATCH: usize = 32;

/// One cache-line item of a chunked frame.
#[derive(Clone, Copy)]
#[repr(C)]
struct Chunk {
    /// Payload bytes in this chunk.
    len: u16,
    /// The frame's last chunk.
    last: bool,
    data: [u8; CHUNK_BYTES],
}

const CHUNK_BYTES: usize = 60;

pub fn measure(cpus: (CpuId, CpuId), mtu: usize, frames: usize) -> Result<Vec<Transport>> {
    let rate = |what, secs: f64, items| Transport {
        what,
        frames_per_s: frames as f64 / secs,
        bytes_per_s: (frames * mtu) as f64 / secs,
        items_per_frame: items,
    };
    Ok(vec![
        rate("pool indices (the split stack's)", pool_indices(cpus, mtu, frames)?, 1),
        rate("chunked cache-line items", chunked(cpus, mtu, frames)?, mtu.div_ceil(CHUNK_BYTES)),
    ])
}

/// Runs a producer and a consumer on two pinned threads; returns the
/// seconds until both are done (the consumer returns a checksum of what it
/// read, so its copies are not optimised away).
fn timed_pair(
    cpus: (CpuId, CpuId),
    producer: impl FnOnce() -> Result<()> + Send,
    consumer: impl FnOnce() -> Result<u64> + Send,
) -> Result<f64> {
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let p = pinned(s, cpus.0, producer);
        let c = pinned(s, cpus.1, consumer);
        join(p)?;
        std::hint::black_box(join(c)?);
        Ok(())
    })?;
    Ok(t0.elapsed().as_secs_f64())
}

/// A frame's worth of bytes that differ from frame to frame.
fn source(mtu: usize) -> Vec<u8> {
    (0..mtu).map(|i| i as u8).collect()
}

fn pool_indices(cpus: (CpuId, CpuId), mtu: usize, frames: usize) -> Result<f64> {
    let bell = Bell::new();
    let (mut alloc, mut freers) = Pool::create("bench", FRAMES_IN_FLIGHT, mtu, 1, bell.clone());
    let mut free = freers.pop().expect("one freer");
    let (mut tx, mut rx) = channel::<Frame>("bench", FRAMES_IN_FLIGHT, bell);
    let src = source(mtu);
    timed_pair(
        cpus,
        || {
            for i in 0..frames {
                let buf = loop {
                    if let Some(b) = alloc.alloc() {
                        break b;
                    }
                    tx.publish();
                    std::hint::spin_loop();
                };
                alloc.pool().with(buf, |b| b.extend_from_slice(&src));
                tx.push(Frame { buf, len: mtu as u32 });
                if i % BATCH == BATCH - 1 {
                    tx.publish();
                }
            }
            tx.publish();
            Ok(())
        },
        || {
            let mut dst = vec![0u8; mtu];
            let mut got = 0;
            let mut check = 0u64;
            while got < frames {
                match rx.peek() {
                    Some(f) => {
                        free.pool().with(f.buf, |b| dst.copy_from_slice(b));
                        check += u64::from(dst[got % mtu]);
                        free.free(f.buf);
                        rx.commit();
                        got += 1;
                    }
                    None => {
                        rx.release();
                        free.flush();
                        std::hint::spin_loop();
                    }
                }
            }
            Ok(check)
        },
    )
}

fn chunked(cpus: (CpuId, CpuId), mtu: usize, frames: usize) -> Result<f64> {
    let (mut tx, mut rx) = ring::<Chunk>(FRAMES_IN_FLIGHT * mtu.div_ceil(CHUNK_BYTES));
    let src = source(mtu);
    timed_pair(
        cpus,
        || {
            for i in 0..frames {
                let mut pieces = src.chunks(CHUNK_BYTES).peekable();
                while let Some(piece) = pieces.next() {
                    let mut c = Chunk {
                        len: piece.len() as u16,
                        last: pieces.peek().is_none(),
                        data: [0; CHUNK_BYTES],
                    };
                    c.data[..piece.len()].copy_from_slice(piece);
                    while tx.push(c).is_err() {
                        tx.publish();
                        std::hint::spin_loop();
                    }
                }
                if i % BATCH == BATCH - 1 {
                    tx.publish();
                }
            }
            tx.publish();
            Ok(())
        },
        || {
            let mut dst = Vec::with_capacity(mtu);
            let mut got = 0;
            let mut check = 0u64;
            let mut taken = 0;
            while got < frames {
                match rx.pop() {
                    Some(c) => {
                        // Hand cells back in batches, as an inbox does.
                        taken += 1;
                        if taken % 64 == 0 {
                            rx.release();
                        }
                        dst.extend_from_slice(&c.data[..usize::from(c.len)]);
                        if c.last {
                            check += u64::from(dst[got % mtu]);
                            dst.clear();
                            got += 1;
                        }
                    }
                    None => {
                        rx.release();
                        std::hint::spin_loop();
                    }
                }
            }
            Ok(check)
        },
    )
}
