//! The device smoltcp sees in the TCP component ([`crate::tcp`]): it
//! receives frames from IP's channel and transmits to it, counting frames,
//! RST segments each way, and the times no transmit buffer was free (a
//! received frame then waits in its channel, since its reply may need one).
//!
//! Invariant: a token is made only while a transmit buffer is free, and
//! nothing else allocates between the check and the token's use.

use smoltcp::phy::{self, Device, DeviceCapabilities};
use smoltcp::time::Instant as SmolInstant;

use crate::chan::{Frame, Inbox, Outbox};
use crate::pool::{Alloc, Freer};

/// Whether an IPv4 frame carries a TCP segment with RST set.
pub(crate) fn is_rst(ip: &[u8]) -> bool {
    let ihl = usize::from(ip.first().map_or(0, |b| b & 0x0f)) * 4;
    ip.len() > ihl + 13 && ip[9] == 6 && ip[ihl + 13] & 0x04 != 0
}

/// The device smoltcp sees: receive from IP, transmit to IP.
pub(crate) struct ChannelDevice<'a> {
    pub(crate) rx: &'a mut Inbox<Frame>,
    pub(crate) rx_free: &'a mut Freer,
    pub(crate) tx: &'a mut Outbox<Frame>,
    pub(crate) tx_alloc: &'a mut Alloc,
    pub(crate) mtu: usize,
    pub(crate) frames_in: u64,
    pub(crate) frames_out: u64,
    pub(crate) no_tx_buffer: u64,
    /// RST segments received and sent.
    pub(crate) rst_in: u64,
    pub(crate) rst_out: u64,
}

pub(crate) struct RxTok<'a> {
    frame: Frame,
    free: &'a mut Freer,
    count: &'a mut u64,
    rst: &'a mut u64,
}

pub(crate) struct TxTok<'a> {
    tx: &'a mut Outbox<Frame>,
    alloc: &'a mut Alloc,
    count: &'a mut u64,
    rst: &'a mut u64,
}

impl phy::RxToken for RxTok<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let Frame { buf, len } = self.frame;
        let r = self.free.pool().with(buf, |b| {
            *self.rst += u64::from(is_rst(&b[..len as usize]));
            f(&b[..len as usize])
        });
        self.free.free(buf);
        *self.count += 1;
        r
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // `transmit`/`receive` checked a buffer was free, and nothing else
        // allocates between the check and the token's use.
        let buf = self.alloc.alloc().expect("a transmit buffer was free when the token was made");
        let r = self.alloc.pool().with(buf, |b| {
            b.resize(len, 0);
            let r = f(b);
            *self.rst += u64::from(is_rst(b));
            r
        });
        self.tx.push(Frame { buf, len: len as u32 });
        *self.count += 1;
        r
    }
}

impl Device for ChannelDevice<'_> {
    type RxToken<'a>
        = RxTok<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxTok<'a>
    where
        Self: 'a;

    fn receive(&mut self, _t: SmolInstant) -> Option<(RxTok<'_>, TxTok<'_>)> {
        // A received packet may need a reply at once: take it only if a
        // transmit buffer is free (otherwise it waits in the channel).
        if !self.tx_alloc.has_free() {
            self.no_tx_buffer += 1;
            return None;
        }
        let frame = self.rx.peek()?;
        self.rx.commit();
        Some((
            RxTok { frame, free: self.rx_free, count: &mut self.frames_in, rst: &mut self.rst_in },
            TxTok { tx: self.tx, alloc: self.tx_alloc, count: &mut self.frames_out, rst: &mut self.rst_out },
        ))
    }

    fn transmit(&mut self, _t: SmolInstant) -> Option<TxTok<'_>> {
        if !self.tx_alloc.has_free() {
            self.no_tx_buffer += 1;
            return None;
        }
        Some(TxTok { tx: self.tx, alloc: self.tx_alloc, count: &mut self.frames_out, rst: &mut self.rst_out })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        crate::tcp::capabilities(self.mtu, true)
    }
}

#[cfg(test)]
mod tests {
    use super::is_rst;

    /// An IPv4 header of 20 bytes, then a TCP header with `flags`.
    fn segment(proto: u8, flags: u8) -> Vec<u8> {
        let mut b = vec![0u8; 40];
        b[0] = 0x45;
        b[9] = proto;
        b[20 + 13] = flags;
        b
    }

    #[test]
    fn only_a_tcp_segment_with_rst_set_counts() {
        assert!(is_rst(&segment(6, 0x04)));
        assert!(is_rst(&segment(6, 0x14)), "RST|ACK");
        assert!(!is_rst(&segment(6, 0x10)), "ACK");
        assert!(!is_rst(&segment(6, 0x11)), "FIN|ACK");
        assert!(!is_rst(&segment(17, 0x04)), "UDP");
        assert!(!is_rst(&segment(6, 0x04)[..30]), "truncated");
        assert!(!is_rst(&[]));
    }
}
