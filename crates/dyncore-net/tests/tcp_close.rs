//! smoltcp's close under the conditions of a loaded machine, in virtual
//! time: two sockets configured as dyncore's stacks configure them
//! (`tcp::new_socket`), linked by an in-order, lossless wire, where either
//! side may stop polling for a while (a descheduled thread) and the
//! receiving application reads in bursts. The sender writes its stream and
//! closes. Each seed must end with every byte delivered, EOF, and the
//! sender's close acknowledged. The sockets' own timeout is off here, so
//! that a connection left with something outstanding and no timer running
//! shows as what it is, a stall (until the run's 600 s limit), and not as
//! an abort that a long retransmission backoff could also cause.
//! `third_party/README.md` has the smoltcp fault this found.

use std::collections::VecDeque;

use dyncore_net::tcp::{SocketConfig, capabilities, nanos_of, new_interface, new_socket, smol_now};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use smoltcp::iface::{Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmolInstant;

const MTU: usize = 1500;

/// One direction of the wire: frames with their arrival times, in order.
#[derive(Default)]
struct Link {
    q: VecDeque<(u64, Vec<u8>)>,
}

/// A side's device: receives what arrived on `rx` by `now`, sends on `tx`
/// to arrive `delay_ns` later (after everything already on it).
struct Dev<'a> {
    rx: &'a mut Link,
    tx: &'a mut Link,
    now_ns: u64,
    delay_ns: u64,
}

struct Rx(Vec<u8>);
struct Tx<'a>(&'a mut Link, u64);

impl phy::RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut b = vec![0; len];
        let r = f(&mut b);
        if std::env::var("DYNCORE_TCP_CLOSE_TRACE").is_ok() {
            let ip = smoltcp::wire::Ipv4Packet::new_unchecked(&b[..]);
            let t = smoltcp::wire::TcpPacket::new_unchecked(ip.payload());
            if t.fin() || t.payload().len() <= 1 {
                println!(
                    "{:.6} {} -> seq {} ack {} win {} len {}{}",
                    self.1 as f64 / 1e9,
                    ip.src_addr(),
                    t.seq_number(),
                    t.ack_number(),
                    t.window_len(),
                    t.payload().len(),
                    if t.fin() { " FIN" } else { "" }
                );
            }
        }
        let at = self.0.q.back().map_or(self.1, |(t, _)| (*t).max(self.1));
        self.0.q.push_back((at, b));
        r
    }
}

impl Device for Dev<'_> {
    type RxToken<'b>
        = Rx
    where
        Self: 'b;
    type TxToken<'b>
        = Tx<'b>
    where
        Self: 'b;

    fn receive(&mut self, _t: SmolInstant) -> Option<(Rx, Tx<'_>)> {
        if self.rx.q.front().is_some_and(|(t, _)| *t <= self.now_ns) {
            let (_, f) = self.rx.q.pop_front().unwrap();
            Some((Rx(f), Tx(self.tx, self.now_ns + self.delay_ns)))
        } else {
            None
        }
    }

    fn transmit(&mut self, _t: SmolInstant) -> Option<Tx<'_>> {
        Some(Tx(self.tx, self.now_ns + self.delay_ns))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(MTU, false)
    }
}

struct Side {
    iface: Interface,
    sockets: SocketSet<'static>,
    h: SocketHandle,
    /// Does not poll before this (descheduled).
    paused_until: u64,
}

impl Side {
    fn new(addr: [u8; 4], seed: u64) -> Side {
        let (mut a, mut b) = (Link::default(), Link::default());
        let mut dev = Dev { rx: &mut a, tx: &mut b, now_ns: 0, delay_ns: 0 };
        let iface = new_interface(addr.into(), seed, &mut dev, 0);
        let mut sockets = SocketSet::new(Vec::new());
        // No user timeout: what is checked is that a connection never
        // waits without a timer while something is outstanding. With the
        // stacks' 10 s timeout, a retransmission timer backed off past 10 s
        // by long pauses ends in the timeout, which is TCP doing what it was
        // told, not a stall.
        let mut sock = new_socket(SocketConfig::default());
        sock.set_timeout(None);
        let h = sockets.add(sock);
        Side { iface, sockets, h, paused_until: 0 }
    }

    fn sock(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.h)
    }

    fn poll(&mut self, now_ns: u64, rx: &mut Link, tx: &mut Link, delay_ns: u64) {
        let mut dev = Dev { rx, tx, now_ns, delay_ns };
        self.iface.poll(smol_now(now_ns), &mut dev, &mut self.sockets);
    }

    fn poll_at(&mut self, now_ns: u64) -> Option<u64> {
        self.iface.poll_at(smol_now(now_ns), &self.sockets).map(nanos_of)
    }
}

/// What one seed's run ended with.
#[derive(Debug)]
struct End {
    sent: u64,
    received: u64,
    eof: bool,
    sender: tcp::State,
    now_ns: u64,
    trace: Vec<String>,
}

fn run(seed: u64) -> End {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let total: u64 = rng.random_range(200_000..3_000_000);
    // How often a side is descheduled, and how often for long.
    let (p_pause, p_long) = (rng.random_range(0.001..0.02), rng.random_range(0.05..0.5));
    let (mut s, mut r) = (Side::new([10, 0, 0, 1], seed), Side::new([10, 0, 0, 2], seed + 1));
    let (mut ab, mut ba) = (Link::default(), Link::default());
    r.sock().listen(5001).unwrap();
    let to = (smoltcp::wire::Ipv4Address::new(10, 0, 0, 2), 5001);
    s.sockets.get_mut::<tcp::Socket>(s.h).connect(s.iface.context(), to, 40000).unwrap();
    let (mut sent, mut received, mut eof, mut closed) = (0u64, 0u64, false, false);
    let mut now: u64 = 0;
    let mut trace = Vec::new();
    // The receiving application: reads at most this many bytes per turn.
    let mut read_burst: usize = 1 << 20;
    // Far beyond smoltcp's largest retransmission timeout (60 s).
    let limit_ns = 600_000_000_000;
    while now < limit_ns {
        // A side may be descheduled for up to 2.5 s (rarely), or briefly.
        for (side, name) in [(&mut s, "sender"), (&mut r, "receiver")] {
            if side.paused_until <= now && rng.random_bool(p_pause) {
                let long = rng.random_bool(p_long);
                let d =
                    if long { rng.random_range(0..2_500_000_000) } else { rng.random_range(0..2_000_000) };
                side.paused_until = now + d;
                if long {
                    trace.push(format!("{:.3} s: {name} paused {:.3} s", now as f64 / 1e9, d as f64 / 1e9));
                }
            }
        }
        if rng.random_bool(0.01) {
            read_burst = [0, 1, 7, 1500, 65536, 1 << 20][rng.random_range(0..6)];
        }
        if s.paused_until <= now {
            s.poll(now, &mut ba, &mut ab, 20_000);
            let sock = s.sock();
            if sock.may_send() && sent < total {
                let mut buf = vec![0u8; 65536.min((total - sent) as usize)];
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = ((sent + i as u64) % 251) as u8;
                }
                sent += sock.send_slice(&buf).unwrap() as u64;
            }
            if sent == total && !closed {
                sock.close();
                closed = true;
                trace.push(format!("{:.3} s: sender closes", now as f64 / 1e9));
            }
            s.poll(now, &mut ba, &mut ab, 20_000);
        }
        if r.paused_until <= now {
            r.poll(now, &mut ab, &mut ba, 20_000);
            let sock = r.sock();
            let mut room = read_burst;
            while room > 0 && sock.can_recv() {
                let n = sock
                    .recv(|d| {
                        let n = d.len().min(room);
                        for (i, b) in d[..n].iter().enumerate() {
                            assert_eq!(
                                *b,
                                ((received + i as u64) % 251) as u8,
                                "byte {} differs",
                                received + i as u64
                            );
                        }
                        (n, n)
                    })
                    .unwrap();
                received += n as u64;
                room -= n;
            }
            if !eof && matches!(sock.recv(|_| (0, ())), Err(tcp::RecvError::Finished)) {
                eof = true;
                sock.close();
            }
            r.poll(now, &mut ab, &mut ba, 20_000);
        }
        if std::env::var("DYNCORE_TCP_CLOSE_TRACE").is_ok() {
            let (ss, rs) = (s.sock().state(), r.sock().state());
            let pa = s.poll_at(now).map(|t| t as f64 / 1e9);
            let line = format!(
                "{ss:?} tx {} poll_at {pa:?} | {rs:?} rx {} | q {} {} | recvd {received}",
                s.sock().send_queue(),
                r.sock().recv_queue(),
                ab.q.len(),
                ba.q.len()
            );
            if trace.last().is_none_or(|l: &String| !l.ends_with(&line)) {
                trace.push(format!("{:.6} s: {line}", now as f64 / 1e9));
            }
        }
        let sender_done =
            matches!(s.sock().state(), tcp::State::FinWait2 | tcp::State::TimeWait | tcp::State::Closed);
        if (eof && sender_done) || (closed && s.sock().state() == tcp::State::Closed) {
            break;
        }
        // Next event: a poll deadline, an arrival, a pause's end, or the
        // reader's next turn (1 ms).
        // A paused side's events wait for its pause to end.
        let mut next = now + 1_000_000;
        for (side, inbound) in [(&mut s, &ba), (&mut r, &ab)] {
            let mut t = side.poll_at(now).into_iter().chain(inbound.q.front().map(|(t, _)| *t)).min();
            if side.paused_until > now {
                t = t.map(|t| t.max(side.paused_until));
            }
            if let Some(t) = t {
                next = next.min(t.max(now + 1));
            }
        }
        now = next;
    }
    let sender = s.sock().state();
    End { sent, received, eof, sender, now_ns: now, trace }
}

/// Runs `seeds` and lists those that did not deliver everything and close.
fn failures(seeds: impl Iterator<Item = u64>) -> Vec<String> {
    seeds
        .filter_map(|seed| {
            let e = run(seed);
            let clean = e.eof && e.received == e.sent && e.sender != tcp::State::Closed;
            (!clean).then(|| format!("seed {seed}: {e:?}"))
        })
        .collect()
}

/// The seeds where smoltcp 0.14.0 as published never closed (found by a
/// sweep of 5000 seeds; none of the 20 000 fails with the patch): a fast
/// retransmit with only the FIN outstanding left no timer running, and the
/// sender sat in FIN-WAIT-1 for good (third_party/README.md).
#[test]
fn the_closes_that_stalled_before_the_smoltcp_patch_complete() {
    let bad = failures([1487, 1508, 1948, 3278, 3775].into_iter());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A sweep of seeds: `DYNCORE_TCP_CLOSE_SEEDS` of them (50 by default;
/// docs/results.md has a sweep of 20 000).
#[test]
fn a_close_on_a_loaded_machine_delivers_every_byte() {
    let n = std::env::var("DYNCORE_TCP_CLOSE_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let bad = failures(0..n);
    assert!(bad.is_empty(), "{} of {n} seeds did not close cleanly:\n{}", bad.len(), bad.join("\n"));
}

/// One seed with its trace (`DYNCORE_TCP_CLOSE_SEED=K`, and
/// `DYNCORE_TCP_CLOSE_TRACE=1` for every state change and control segment).
#[test]
#[ignore = "a debugging aid: run by hand with DYNCORE_TCP_CLOSE_SEED"]
fn one_seed() {
    let seed = std::env::var("DYNCORE_TCP_CLOSE_SEED").expect("DYNCORE_TCP_CLOSE_SEED").parse().unwrap();
    let e = run(seed);
    for l in &e.trace {
        println!("{l}");
    }
    println!(
        "{:?} sent {} received {} eof {} at {:.3} s",
        e.sender,
        e.sent,
        e.received,
        e.eof,
        e.now_ns as f64 / 1e9
    );
}
