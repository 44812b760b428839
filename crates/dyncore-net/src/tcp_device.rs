//! The device smoltcp sees in the TCP component ([`crate::tcp`]): it
//! receives from the channel from IP and transmits into the channel to IP,
//! one pool buffer per packet.

use smoltcp::phy::{self, Device, DeviceCapabilities};
use smoltcp::time::Instant as SmolInstant;

use crate::chan::{Frame, Inbox, Outbox};
use crate::pool::{Alloc, Freer};
use crate::tcp::capabilities;

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
}

pub(crate) struct RxTok<'a> {
    frame: Frame,
    free: &'a mut Freer,
    count: &'a mut u64,
}

pub(crate) struct TxTok<'a> {
    tx: &'a mut Outbox<Frame>,
    alloc: &'a mut Alloc,
    count: &'a mut u64,
}

impl phy::RxToken for RxTok<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let Frame { buf, len } = self.frame;
        let r = self.free.pool().with(buf, |b| f(&b[..len as usize]));
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
            f(b)
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
            RxTok { frame, free: self.rx_free, count: &mut self.frames_in },
            TxTok { tx: self.tx, alloc: self.tx_alloc, count: &mut self.frames_out },
        ))
    }

    fn transmit(&mut self, _t: SmolInstant) -> Option<TxTok<'_>> {
        if !self.tx_alloc.has_free() {
            self.no_tx_buffer += 1;
            return None;
        }
        Some(TxTok { tx: self.tx, alloc: self.tx_alloc, count: &mut self.frames_out })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(self.mtu, true)
    }
}
