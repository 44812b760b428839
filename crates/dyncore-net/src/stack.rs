//! Builds a split stack: creates every channel, pool and bell, and attaches
//! the components and the application sockets to them.
//!
//! ```text
//!  app ──calls──► syscall ──► TCP ──► IP ──► filter ──► driver ──► wire
//!  app ◄─replies─ syscall ◄── TCP ◄── IP ◄── filter ◄── driver ◄── wire
//! ```
//!
//! Pools (buffers named by index in ring items, see [`crate::pool`]):
//!
//! | pool | allocated by | freed by |
//! |---|---|---|
//! | transmit (`frames` × MTU) | TCP | IP (malformed), filter (denied), driver (sent) |
//! | receive (`frames` × MTU) | driver | filter (denied), IP (bad), TCP (consumed) |
//! | send, per client (2 × `data_buf_bytes`) | the client | TCP (copied into the socket) |
//! | receive data, per client (2 × `data_buf_bytes`) | TCP | the client |
//!
//! Every frame channel is sized for its pool and every control channel for
//! one message per client, so no push can fail (see [`crate::chan`]).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use dyncore_core::Nanos;

use crate::chan::{Bell, Frame, channel};
use crate::component::{Common, Component};
use crate::driver::{Driver, DriverPorts};
use crate::filter::{Filter, FilterPorts, Rule};
use crate::ip::{Ip, IpPorts};
use crate::pool::Pool;
use crate::proto::{Call, Reply, Tagged};
use crate::syscall::{ClientLink, Socket, SyscallPorts, SyscallServer};
use crate::tcp::{ClientPools, SocketConfig, Tcp, TcpConfig, TcpPorts};
use crate::wire::WirePort;

/// How to build a stack.
#[derive(Debug, Clone)]
pub struct StackConfig {
    pub addr: Ipv4Addr,
    /// Buffers in each of the transmit and receive pools (packets in
    /// flight inside the stack, per direction).
    pub frames: usize,
    /// Application sockets (clients of the syscall server).
    pub sockets: usize,
    pub socket: SocketConfig,
    /// Bytes per application send/receive buffer (the most one call moves).
    pub data_buf_bytes: usize,
    pub rules: Vec<Rule>,
    /// smoltcp's seed (initial sequence numbers, ports).
    pub seed: u64,
}

impl StackConfig {
    pub fn new(addr: Ipv4Addr) -> Self {
        StackConfig {
            addr,
            frames: 256,
            sockets: 1,
            socket: SocketConfig::default(),
            data_buf_bytes: 64 * 1024,
            rules: Vec::new(),
            seed: 1,
        }
    }
}

/// A built stack: its components in pipeline order (syscall, TCP, IP,
/// filter, driver) and the applications' sockets.
pub struct Stack {
    pub components: Vec<Box<dyn Component>>,
    pub sockets: Vec<Socket>,
    /// The filter's rules and hits per rule.
    pub rules: Arc<[Rule]>,
    pub rule_hits: Arc<[AtomicU64]>,
}

impl Stack {
    /// Builds a stack on `wire`, at time `now_ns`.
    pub fn build(cfg: &StackConfig, wire: Box<dyn WirePort>, now_ns: Nanos) -> Stack {
        assert!(cfg.frames > 0 && cfg.sockets > 0 && cfg.data_buf_bytes > 0, "empty stack configuration");
        let mtu = wire.mtu();
        let sc_bell = Bell::new();
        let tcp_bell = Bell::new();
        let ip_bell = Bell::new();
        let filter_bell = Bell::new();
        let driver_bell = wire.bell().clone();
        let n = cfg.frames;

        // Transmit pool: TCP allocates; IP, filter and driver free.
        let (tx_alloc, tx_freers) = Pool::create("tx", n, mtu, 3, tcp_bell.clone());
        let [ip_tx_free, filter_tx_free, driver_tx_free] = freers3(tx_freers);
        // Receive pool: the driver allocates; filter, IP and TCP free.
        let (rx_alloc, rx_freers) = Pool::create("rx", n, mtu, 3, driver_bell.clone());
        let [filter_rx_free, ip_rx_free, tcp_rx_free] = freers3(rx_freers);

        let (tcp_to_ip, ip_from_tcp) = channel::<Frame>("tcp→ip", n, ip_bell.clone());
        let (ip_to_filter, filter_from_ip) = channel::<Frame>("ip→filter", n, filter_bell.clone());
        let (filter_to_driver, driver_from_filter) =
            channel::<Frame>("filter→driver", n, driver_bell.clone());
        let (driver_to_filter, filter_from_driver) =
            channel::<Frame>("driver→filter", n, filter_bell.clone());
        let (filter_to_ip, ip_from_filter) = channel::<Frame>("filter→ip", n, ip_bell.clone());
        let (ip_to_tcp, tcp_from_ip) = channel::<Frame>("ip→tcp", n, tcp_bell.clone());
        let (sc_to_tcp, tcp_from_sc) = channel::<Tagged<Call>>("syscall→tcp", cfg.sockets, tcp_bell.clone());
        let (tcp_to_sc, sc_from_tcp) = channel::<Tagged<Reply>>("tcp→syscall", cfg.sockets, sc_bell.clone());

        let mut links = Vec::new();
        let mut pools = Vec::new();
        let mut sockets = Vec::new();
        for _ in 0..cfg.sockets {
            let bell = Bell::new();
            let (calls_tx, calls_rx) = channel::<Call>("client→syscall", 1, sc_bell.clone());
            let (replies_tx, replies_rx) = channel::<Reply>("syscall→client", 1, bell.clone());
            let (send_alloc, mut send_free) = Pool::create("send", 2, cfg.data_buf_bytes, 1, bell.clone());
            let (recv_alloc, mut recv_free) =
                Pool::create("recv", 2, cfg.data_buf_bytes, 1, tcp_bell.clone());
            links.push(ClientLink { calls: calls_rx, replies: replies_tx });
            pools.push(ClientPools { send_free: one(&mut send_free), recv_alloc });
            sockets.push(Socket::new(calls_tx, replies_rx, bell, send_alloc, one(&mut recv_free)));
        }

        let rules: Arc<[Rule]> = cfg.rules.clone().into();
        let rule_hits = Filter::hit_counters(&rules);
        let components: Vec<Box<dyn Component>> = vec![
            Box::new(SyscallServer::new(SyscallPorts {
                clients: links,
                to_tcp: sc_to_tcp,
                from_tcp: sc_from_tcp,
                common: Common::new(sc_bell, crate::syscall::COUNTERS),
            })),
            Box::new(Tcp::new(
                TcpPorts {
                    from_ip: tcp_from_ip,
                    rx_free: tcp_rx_free,
                    to_ip: tcp_to_ip,
                    tx_alloc,
                    from_sc: tcp_from_sc,
                    to_sc: tcp_to_sc,
                    clients: pools,
                    common: Common::new(tcp_bell, crate::tcp::COUNTERS),
                },
                TcpConfig { addr: cfg.addr, mtu, socket: cfg.socket, seed: cfg.seed },
                now_ns,
            )),
            Box::new(Ip::new(
                IpPorts {
                    from_tcp: ip_from_tcp,
                    to_filter: ip_to_filter,
                    from_filter: ip_from_filter,
                    to_tcp: ip_to_tcp,
                    tx_free: ip_tx_free,
                    rx_free: ip_rx_free,
                    common: Common::new(ip_bell, crate::ip::COUNTERS),
                },
                cfg.addr,
            )),
            Box::new(Filter::new(
                FilterPorts {
                    from_ip: filter_from_ip,
                    to_driver: filter_to_driver,
                    from_driver: filter_from_driver,
                    to_ip: filter_to_ip,
                    tx_free: filter_tx_free,
                    rx_free: filter_rx_free,
                    common: Common::new(filter_bell, crate::filter::COUNTERS),
                    hits: rule_hits.clone(),
                },
                rules.clone(),
            )),
            Box::new(Driver::new(DriverPorts {
                from_filter: driver_from_filter,
                tx_free: driver_tx_free,
                to_filter: driver_to_filter,
                rx_alloc,
                common: Common::new(driver_bell, crate::driver::COUNTERS),
                wire,
            })),
        ];
        Stack { components, sockets, rules, rule_hits }
    }
}

fn freers3(v: Vec<crate::pool::Freer>) -> [crate::pool::Freer; 3] {
    v.try_into().unwrap_or_else(|_| unreachable!("pools are created with three freers"))
}

fn one(v: &mut Vec<crate::pool::Freer>) -> crate::pool::Freer {
    v.pop().expect("pools are created with one freer")
}
