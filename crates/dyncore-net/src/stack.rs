//! Builds a split stack: creates every channel, pool and bell, the
//! components' blueprints (what outlives their instances, see
//! [`crate::component::Blueprint`]), and the application sockets.
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

use dyncore_ring::journal;

use crate::chan::{Bell, Channel, Frame, Log};
use crate::component::{Blueprint, Common};
use crate::driver::{DriverBlueprint, DriverPorts};
use crate::filter::{FilterBlueprint, FilterPorts, Rule};
use crate::ip::{IpBlueprint, IpPorts};
use crate::pool::PoolRef;
use crate::proto::{Call, Reply, Tagged};
use crate::syscall::{ClientLink, Socket, SyscallBlueprint, SyscallPorts};
use crate::tcp::{ClientPools, SocketConfig, TcpBlueprint, TcpConfig, TcpFacts, TcpPorts};
use crate::tcp_recover::TcpCrash;
use crate::wire::Wire;

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
    /// What a TCP crash does to the connections TCP held.
    pub tcp_crash: TcpCrash,
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
            tcp_crash: TcpCrash::Reset,
        }
    }
}

/// A built stack: its components' blueprints in pipeline order (syscall,
/// TCP, IP, filter, driver) and the applications' sockets. A host builds
/// the instances ([`crate::host::Supervised::new`]).
pub struct Stack {
    pub blueprints: Vec<Arc<dyn Blueprint>>,
    pub sockets: Vec<Socket>,
    /// The filter's rules and hits per rule.
    pub rules: Arc<[Rule]>,
    pub rule_hits: Arc<[Arc<journal::Counter>]>,
    /// What TCP checkpoints (connections reset by its restarts).
    pub tcp_facts: Arc<TcpFacts>,
}

impl Stack {
    /// Builds a stack on `wire`.
    pub fn build(cfg: &StackConfig, wire: Arc<dyn Wire>) -> Stack {
        assert!(cfg.frames > 0 && cfg.sockets > 0 && cfg.data_buf_bytes > 0, "empty stack configuration");
        let mtu = wire.mtu();
        let sc_bell = Bell::new();
        let tcp_bell = Bell::new();
        let ip_bell = Bell::new();
        let filter_bell = Bell::new();
        let driver_bell = wire.bell().clone();
        let n = cfg.frames;

        // Transmit pool: TCP allocates; IP (0), filter (1) and driver (2) free.
        let tx = PoolRef::create("tx", n, mtu, 3, tcp_bell.clone());
        // Receive pool: the driver allocates; filter (0), IP (1) and TCP (2) free.
        let rx = PoolRef::create("rx", n, mtu, 3, driver_bell.clone());

        let tcp_to_ip = Channel::<Frame>::new("tcp→ip", n, ip_bell.clone());
        let ip_to_filter = Channel::<Frame>::new("ip→filter", n, filter_bell.clone());
        let filter_to_driver = Channel::<Frame>::new("filter→driver", n, driver_bell.clone());
        let driver_to_filter = Channel::<Frame>::new("driver→filter", n, filter_bell.clone());
        let filter_to_ip = Channel::<Frame>::new("filter→ip", n, ip_bell.clone());
        let ip_to_tcp = Channel::<Frame>::new("ip→tcp", n, tcp_bell.clone());
        let sc_to_tcp = Channel::<Tagged<Call>>::new("syscall→tcp", cfg.sockets, tcp_bell.clone());
        let tcp_to_sc = Channel::<Tagged<Reply>>::new("tcp→syscall", cfg.sockets, sc_bell.clone());

        let mut links = Vec::new();
        let mut pools = Vec::new();
        let mut sockets = Vec::new();
        let direct = Log::Direct;
        for _ in 0..cfg.sockets {
            let bell = Bell::new();
            let calls = Channel::<Call>::new("client→syscall", 1, sc_bell.clone());
            let replies = Channel::<Reply>::new("syscall→client", 1, bell.clone());
            let send = PoolRef::create("send", 2, cfg.data_buf_bytes, 1, bell.clone());
            let recv = PoolRef::create("recv", 2, cfg.data_buf_bytes, 1, tcp_bell.clone());
            sockets.push(Socket::new(
                calls.outbox(&direct),
                replies.inbox(&direct),
                bell,
                send.alloc(&direct),
                recv.freer(0, &direct),
            ));
            links.push(ClientLink { calls, replies });
            pools.push(ClientPools { send: (send, 0), recv });
        }

        let rules: Arc<[Rule]> = cfg.rules.clone().into();
        let rule_hits = FilterBlueprint::hit_counters(&rules);
        let tcp = TcpBlueprint::new(
            TcpPorts {
                from_ip: ip_to_tcp.clone(),
                rx: (rx.clone(), 2),
                to_ip: tcp_to_ip.clone(),
                tx: tx.clone(),
                from_sc: sc_to_tcp.clone(),
                to_sc: tcp_to_sc.clone(),
                clients: pools,
                common: Common::new(tcp_bell, crate::tcp::COUNTERS),
            },
            TcpConfig { addr: cfg.addr, mtu, socket: cfg.socket, seed: cfg.seed, crash: cfg.tcp_crash },
        );
        let tcp_facts = tcp.facts().clone();
        let blueprints: Vec<Arc<dyn Blueprint>> = vec![
            Arc::new(SyscallBlueprint::new(SyscallPorts {
                clients: links,
                to_tcp: sc_to_tcp,
                from_tcp: tcp_to_sc,
                common: Common::new(sc_bell, crate::syscall::COUNTERS),
            })),
            Arc::new(tcp),
            Arc::new(IpBlueprint::new(
                IpPorts {
                    from_tcp: tcp_to_ip,
                    to_filter: ip_to_filter.clone(),
                    from_filter: filter_to_ip.clone(),
                    to_tcp: ip_to_tcp,
                    tx: (tx.clone(), 0),
                    rx: (rx.clone(), 1),
                    common: Common::new(ip_bell, crate::ip::COUNTERS),
                },
                cfg.addr,
            )),
            Arc::new(FilterBlueprint::new(
                FilterPorts {
                    from_ip: ip_to_filter,
                    to_driver: filter_to_driver.clone(),
                    from_driver: driver_to_filter.clone(),
                    to_ip: filter_to_ip,
                    tx: (tx.clone(), 1),
                    rx: (rx.clone(), 0),
                    common: Common::new(filter_bell, crate::filter::COUNTERS),
                    hits: rule_hits.clone(),
                },
                rules.clone(),
            )),
            Arc::new(DriverBlueprint::new(DriverPorts {
                from_filter: filter_to_driver,
                tx: (tx, 2),
                to_filter: driver_to_filter,
                rx,
                common: Common::new(driver_bell, crate::driver::COUNTERS),
                wire,
            })),
        ];
        Stack { blueprints, sockets, rules, rule_hits, tcp_facts }
    }
}
