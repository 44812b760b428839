//! The two ends of the modelled stack (module docs of `netstack`): the
//! application's offered load (a Poisson process of one-segment writes)
//! and the wire (the NIC's FIFO onto the link, the receiver's ACKs and
//! delayed ACKs, back after `remote_ns` and a seeded jitter).

use dyncore_core::Nanos;
use rand::Rng;

use super::round_ns;
use super::sim::{Ev, Sim};

impl Sim<'_> {
    /// Credits the application's data up to now under an offered load.
    /// Under an offered load the application writes one segment at a time,
    /// the writes a Poisson process at the offered rate (seeded: each seed
    /// draws its own arrivals). Credits the writes up to now; keeps at most
    /// one window of backlog (the application blocks).
    #[inline]
    pub(super) fn refill_app(&mut self) {
        if self.app_next <= self.now {
            self.credit_writes();
        }
    }

    /// [`Self::refill_app`]'s writes, at least one due.
    fn credit_writes(&mut self) {
        let mss = u64::from(self.net.mss);
        while self.app_next <= self.now {
            self.app_bytes = (self.app_bytes + mss).min(self.window);
            self.app_next = self.app_next.saturating_add(self.write_gap());
        }
    }

    /// The time to the application's next write: exponential with the mean
    /// of one segment at the offered rate (`Nanos::MAX` without a load).
    pub(super) fn write_gap(&mut self) -> Nanos {
        match self.app_rate_gbps {
            Some(g) if g > 0.0 => {
                let mean = self.app_mean_ns;
                let u: f64 = self.rng.random::<f64>();
                round_ns(-(1.0 - u).ln() * mean).max(1)
            }
            _ => Nanos::MAX,
        }
    }

    /// Whether the application has a segment's worth of data now; if not,
    /// arms the event at which it will.
    #[inline]
    pub(super) fn app_has(&mut self) -> bool {
        let mss = u64::from(self.net.mss);
        if self.app_rate_gbps.is_none() {
            return !self.app_modelled() || self.app_ready_for_segment();
        }
        self.refill_app();
        if self.app_bytes >= mss {
            return true;
        }
        if self.app_next != Nanos::MAX && !self.app_pending {
            self.app_pending = true;
            self.push(self.app_next, Ev::App);
        }
        false
    }

    pub(super) fn nic_next(&mut self) {
        if self.nic_busy {
            return;
        }
        if let Some(&b) = self.nic.front() {
            // Frames are nearly all of one size: its time is remembered
            // (exactly the computed one, for the same bytes).
            let ns = match self.nic_frame {
                Some((size, ns)) if size == b => ns,
                _ => {
                    let bits = f64::from(b + self.net.frame_overhead) * 8.0;
                    let ns = round_ns(bits / self.net.link_gbps).max(1);
                    self.nic_frame = Some((b, ns));
                    ns
                }
            };
            self.nic_busy = true;
            self.push_after(ns, Ev::NicDone);
        }
    }

    pub(super) fn remote(&mut self, bytes: u32) {
        self.unacked_segs += 1;
        self.unacked_bytes += bytes;
        if self.unacked_segs >= self.net.ack_every.max(1) {
            self.send_ack();
        } else {
            self.delack_gen += 1;
            let g = self.delack_gen;
            self.push_after(self.net.delack_ns, Ev::DelAck(g));
        }
    }

    pub(super) fn send_ack(&mut self) {
        let b = self.unacked_bytes;
        self.unacked_segs = 0;
        self.unacked_bytes = 0;
        self.delack_gen += 1;
        let jitter = if self.net.remote_jitter_ns > 0 {
            let u: f64 = self.rng.random::<f64>();
            (-(1.0 - u).ln() * self.net.remote_jitter_ns as f64) as Nanos
        } else {
            0
        };
        self.push_after(self.net.remote_ns.saturating_add(jitter), Ev::AckIn(b));
    }
}
