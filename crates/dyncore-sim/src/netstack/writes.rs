//! The applications' synchronous writes through the syscall server
//! (NewtOS §3.1: "the syscall (SC) server translates synchronous system
//! calls from user processes to asynchronous messages within the stack";
//! it "is the only process of the stack which frequently uses traditional
//! rendez-vous based communication provided by the kernel"; §4.2:
//! "traditional IPC would slow down the *sending* core too").
//!
//! With `[net] clients = K` (and no offered load), K application threads
//! (iperf's client streams) each have one blocking `write` of
//! `write_bytes` outstanding. A write goes
//!
//! 1. from the client to the syscall server (a job of the server's cost on
//!    its CPU, which may have to wake first),
//! 2. from the server to TCP over a channel; TCP copies the bytes into its
//!    send buffer (its per-byte cycles and the copy's memory time,
//!    `bytes / copy_gb_per_s`) once the buffer (`streams × window_bytes`,
//!    lwIP's send buffer the size of its window) has room — a write that
//!    does not fit waits in TCP until ACKs free the room,
//! 3. back to the server (a channel message) and from it to the client (a
//!    job of the server's cost),
//! 4. and the client, whose thread slept while it was blocked, wakes from
//!    the idle state its governor picked for that sleep, spends
//!    `client_cycles` at the chip's frequency, and writes again.
//!
//! TCP then sends segments of the buffered bytes (its per-packet cycles
//! only: the copy is done) as the window allows. So the bitrate is at most
//! `K × write_bytes` per write's round trip, and that round trip holds the
//! wake-ups of the server's, TCP's and the client's cores and the work of
//! the server and the client at the chip's frequency.
//!
//! **The system's core.** The paper's configurations put the syscall server
//! beside the system on the chip's first core, unthrottled: at the chip's
//! frequency. A run that places no syscall server gets one there: a CPU of
//! its own at the chip frequency of the run's speeds, which hosts only the
//! server and is left out of the run's power, resources and normalised
//! utilisation (the paper's bars count the three stack cores). Runs driven
//! by a placement policy, and runs with an offered load, have no clients:
//! their application hands data straight to the stack, as without clients.
//!
//! Invariants (asserted): a client has at most one write outstanding; the
//! bytes buffered (copied and not yet acknowledged) never exceed the send
//! buffer.

use dyncore_core::Nanos;
use dyncore_core::placement::ComponentKind;

use super::idle::IdleTrack;

use dyncore_core::power::SpeedTable;

use super::RunInput;
use super::sim::{Comp, Cpu, Ev, Msg, Sim};

/// One client thread.
#[derive(Debug, Clone, Default)]
pub(super) struct Client {
    /// Its sleeps while a write is outstanding.
    idle: IdleTrack,
    outstanding: bool,
}

/// The clients of this run and the chip's frequency (MHz); adds the
/// system core hosting the syscall server (module docs) when the run has
/// clients and places no server: a CPU of its own at the chip frequency of
/// the run's first speed step.
pub(super) fn add_system_core(
    input: &RunInput<'_>,
    table: &SpeedTable,
    cpus: &mut Vec<Cpu>,
    comps: &mut Vec<Comp>,
) -> (usize, u32) {
    let first = table.get(table.by_mhz(input.cpus[0].mhz).expect("validated speed"));
    let chip = table.get(table.by_mhz(first.chip_mhz).expect("a chip frequency is a step"));
    let clients = if input.load.is_empty() { input.net.clients as usize } else { 0 };
    if clients > 0 && !comps.iter().any(|c| c.kind == ComponentKind::Syscall) {
        comps.push(Comp::new(ComponentKind::Syscall, cpus.len()));
        // A core of its own: never a sibling (`Sim::new`).
        cpus.push(Cpu::new(chip, vec![comps.len() - 1], u32::MAX, true));
    }
    (clients, chip.mhz)
}

impl Sim<'_> {
    /// Whether this run's application writes through the syscall server.
    pub(super) fn writes_on(&self) -> bool {
        !self.clients.is_empty()
    }

    /// The clients' first writes (at time 0).
    pub(super) fn start_clients(&mut self) {
        for i in 0..self.clients.len() {
            self.push(0, Ev::Client(i as u32));
        }
    }

    /// Client `i` writes: the request reaches the syscall server; the
    /// client sleeps until the reply.
    pub(super) fn client_writes(&mut self, i: u32) {
        let gov = self.governor.as_deref();
        let c = &mut self.clients[i as usize];
        assert!(!c.outstanding, "a client has one write outstanding");
        c.outstanding = true;
        c.idle.enter(self.now, gov);
        let sc = self.syscall.expect("writes need the syscall server");
        self.enqueue(sc, Msg::Write(i));
    }

    /// The server replied to client `i`: it wakes and, after its own work
    /// at the chip's frequency, writes again.
    fn client_replied(&mut self, i: u32) {
        let fixed = self.governor.is_none().then_some(self.costs.wakeup_ns);
        let (now, from) = (self.now, (self.measure_from, self.sample_from));
        let c = &mut self.clients[i as usize];
        c.outstanding = false;
        let wake = c.idle.leave(now, from, false, fixed);
        let work = (self.net.client_cycles * 1000.0 / f64::from(self.chip_mhz)).round() as Nanos;
        self.push_after(wake.saturating_add(work), Ev::Client(i));
    }

    /// Bytes TCP holds: copied and not yet acknowledged.
    fn buffered(&self) -> u64 {
        self.unsent + self.inflight
    }

    /// Whether a write of `write_bytes` fits TCP's send buffer now.
    pub(super) fn write_fits(&self) -> bool {
        self.buffered() + u64::from(self.net.write_bytes) <= self.window
    }

    /// TCP's work besides its queue: a waiting write that fits now, or a
    /// segment of buffered bytes the window has room for.
    pub(super) fn tcp_has_write_work(&self) -> bool {
        let mss = u64::from(self.net.mss);
        (!self.waiting_writes.is_empty() && self.write_fits())
            || (self.unsent >= mss && self.inflight + mss <= self.window)
    }

    /// Takes TCP's next job besides its queue: a waiting write that fits
    /// (`Some`), else a segment (`None`; the bytes leave the buffer).
    pub(super) fn tcp_next_write(&mut self) -> Option<Msg> {
        if !self.waiting_writes.is_empty() && self.write_fits() {
            return self.waiting_writes.pop_front().map(Msg::Write);
        }
        self.unsent -= u64::from(self.net.mss);
        None
    }

    /// A job on a write message ended on component `c`: the server passes a
    /// request to TCP or a reply to its client; TCP buffers the bytes (or
    /// holds the write until they fit) and replies.
    pub(super) fn write_job_done(&mut self, c: usize, msg: Msg) {
        let tcp = self.tcp;
        let sc = self.syscall.expect("writes need the syscall server");
        match msg {
            Msg::Write(i) if c == tcp => {
                if self.write_fits() {
                    self.unsent += u64::from(self.net.write_bytes);
                    assert!(self.buffered() <= self.window, "buffered bytes exceed the send buffer");
                    self.enqueue(sc, Msg::Written(i));
                } else {
                    self.waiting_writes.push_back(i);
                }
            }
            Msg::Write(i) => self.enqueue(tcp, Msg::Write(i)),
            Msg::Written(i) => self.client_replied(i),
            _ => unreachable!("only write messages"),
        }
    }

    /// The cycles and the memory time (ns) of component `c`'s job on a
    /// write message: the server's cost per message; TCP's copy when the
    /// write fits (its per-byte cycles and the copy's memory time), or only
    /// the message when it does not.
    pub(super) fn write_job_cost(&self, c: usize, msg: Msg) -> (f64, f64) {
        let chan = self.costs.channel_cycles_per_msg;
        if c != self.tcp {
            return (self.costs.component(ComponentKind::Syscall).cycles_per_packet + chan, 0.0);
        }
        match msg {
            Msg::Write(_) if self.write_fits() => {
                let b = f64::from(self.net.write_bytes);
                (self.costs.tcp.cycles_per_byte * b + chan, self.copy_ns(b))
            }
            _ => (chan, 0.0),
        }
    }

    /// The copy's memory time for `bytes`, ns (0 without a copy bandwidth).
    pub(super) fn copy_ns(&self, bytes: f64) -> f64 {
        if self.net.copy_gb_per_s > 0.0 { bytes / self.net.copy_gb_per_s } else { 0.0 }
    }
}
