//! The packet filter (the paper's PF), between IP and the driver: every
//! packet in either direction is matched against a list of rules; the first
//! rule that matches decides, and a packet no rule matches passes.
//!
//! A rule, in the syntax [`Rule::parse`] reads:
//!
//! ```text
//! allow|deny [in|out] [tcp|any] [from CIDR] [to CIDR] [sport P[-Q]] [dport P[-Q]]
//! ```
//!
//! for example `deny in tcp dport 23`, `allow out to 10.0.0.0/8`. Omitted
//! fields match anything; ports match only TCP packets.
//!
//! Its state is its rule list, rebuilt from configuration on restart; the
//! per-rule hit counts are kept outside the instance and survive.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dyncore_core::Nanos;
use smoltcp::wire::{IpProtocol, Ipv4Packet, TcpPacket};

use crate::chan::{Frame, Inbox, Outbox};
use crate::component::{Common, Component, ComponentKind, NotRestartable, Progress};
use crate::pool::Freer;

/// Which way a packet goes, seen from the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the wire towards TCP.
    In,
    /// From TCP towards the wire.
    Out,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
}

/// An address prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Cidr {
    fn contains(&self, a: Ipv4Addr) -> bool {
        let mask = if self.len == 0 { 0 } else { u32::MAX << (32 - u32::from(self.len)) };
        u32::from(a) & mask == u32::from(self.addr) & mask
    }
}

/// One filter rule (see the module docs for the syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub verdict: Verdict,
    pub direction: Option<Direction>,
    /// Only TCP packets (ports imply it).
    pub tcp_only: bool,
    pub from: Option<Cidr>,
    pub to: Option<Cidr>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    /// The text it was parsed from (for reports).
    pub text: String,
}

/// The fields of a packet that rules look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// Source and destination ports, for TCP.
    pub ports: Option<(u16, u16)>,
}

impl Header {
    /// Reads the header of an IPv4 packet; `None` if it is not one.
    pub fn parse(pkt: &[u8]) -> Option<Header> {
        let ip = Ipv4Packet::new_checked(pkt).ok()?;
        let ports = (ip.next_header() == IpProtocol::Tcp)
            .then(|| TcpPacket::new_checked(ip.payload()).ok().map(|t| (t.src_port(), t.dst_port())))
            .flatten();
        Some(Header { src: ip.src_addr(), dst: ip.dst_addr(), ports })
    }
}

fn parse_ports(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let p = |x: &str| x.parse::<u16>().map_err(|_| format!("`{x}` is not a port (0-65535)"));
    let (a, b) = (p(a)?, p(b)?);
    if a > b {
        return Err(format!("port range {a}-{b} is empty"));
    }
    Ok((a, b))
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let (a, len) = s.split_once('/').unwrap_or((s, "32"));
    let addr = a.parse::<Ipv4Addr>().map_err(|_| format!("`{a}` is not an IPv4 address"))?;
    let len = len
        .parse::<u8>()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("`/{len}` is not a prefix length"))?;
    Ok(Cidr { addr, len })
}

impl Rule {
    /// Parses one rule; the error names the word that is wrong.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let mut words = text.split_whitespace();
        let verdict = match words.next() {
            Some("allow") => Verdict::Allow,
            Some("deny") => Verdict::Deny,
            Some(w) => return Err(format!("rule `{text}`: starts with `{w}`, expected `allow` or `deny`")),
            None => return Err("empty filter rule".into()),
        };
        let mut r = Rule {
            verdict,
            direction: None,
            tcp_only: false,
            from: None,
            to: None,
            sport: None,
            dport: None,
            text: text.trim().to_string(),
        };
        let err = |e: String| format!("rule `{text}`: {e}");
        while let Some(w) = words.next() {
            let mut arg = |what: &str| words.next().ok_or_else(|| err(format!("`{what}` needs a value")));
            match w {
                "in" => r.direction = Some(Direction::In),
                "out" => r.direction = Some(Direction::Out),
                "tcp" => r.tcp_only = true,
                "any" => r.tcp_only = false,
                "from" => r.from = Some(parse_cidr(arg("from")?).map_err(err)?),
                "to" => r.to = Some(parse_cidr(arg("to")?).map_err(err)?),
                "sport" => r.sport = Some(parse_ports(arg("sport")?).map_err(err)?),
                "dport" => r.dport = Some(parse_ports(arg("dport")?).map_err(err)?),
                other => {
                    return Err(err(format!(
                        "unknown word `{other}`; expected in, out, tcp, any, from, to, sport or dport"
                    )));
                }
            }
        }
        if r.sport.is_some() || r.dport.is_some() {
            r.tcp_only = true;
        }
        Ok(r)
    }

    /// Whether the rule matches a packet going `dir`.
    pub fn matches(&self, dir: Direction, h: &Header) -> bool {
        let within = |p: u16, (lo, hi): (u16, u16)| (lo..=hi).contains(&p);
        self.direction.is_none_or(|d| d == dir)
            && (!self.tcp_only || h.ports.is_some())
            && self.from.is_none_or(|c| c.contains(h.src))
            && self.to.is_none_or(|c| c.contains(h.dst))
            && self.sport.is_none_or(|r| h.ports.is_some_and(|(s, _)| within(s, r)))
            && self.dport.is_none_or(|r| h.ports.is_some_and(|(_, d)| within(d, r)))
    }
}

/// The first matching rule's index and verdict; packets that are not IPv4
/// are denied (the filter cannot say what they are).
pub fn decide(rules: &[Rule], dir: Direction, pkt: &[u8]) -> (Option<usize>, Verdict) {
    let Some(h) = Header::parse(pkt) else { return (None, Verdict::Deny) };
    match rules.iter().position(|r| r.matches(dir, &h)) {
        Some(i) => (Some(i), rules[i].verdict),
        None => (None, Verdict::Allow),
    }
}

/// The filter's channels and pools.
pub struct FilterPorts {
    /// Outbound, from IP (transmit pool).
    pub from_ip: Inbox<Frame>,
    pub to_driver: Outbox<Frame>,
    /// Inbound, from the driver (receive pool).
    pub from_driver: Inbox<Frame>,
    pub to_ip: Outbox<Frame>,
    pub tx_free: Freer,
    pub rx_free: Freer,
    pub common: Common,
    /// Hits per rule, in rule order.
    pub hits: Arc<[AtomicU64]>,
}

pub const COUNTERS: &[&str] = &["passed_in", "passed_out", "denied_in", "denied_out"];

/// The packet filter component.
pub struct Filter {
    ports: FilterPorts,
    config: Arc<[Rule]>,
    /// The instance's rule list: rebuilt from `config` on restart.
    rules: Vec<Rule>,
}

impl Filter {
    pub fn new(ports: FilterPorts, rules: Arc<[Rule]>) -> Self {
        assert_eq!(ports.hits.len(), rules.len(), "one hit counter per rule");
        Filter { ports, rules: rules.to_vec(), config: rules }
    }

    /// Creates the per-rule hit counters for a rule list.
    pub fn hit_counters(rules: &[Rule]) -> Arc<[AtomicU64]> {
        rules.iter().map(|_| AtomicU64::new(0)).collect()
    }

    /// One packet going `dir`, if any.
    fn step(&mut self, dir: Direction) -> Option<()> {
        let p = &mut self.ports;
        let (inbox, outbox, freer) = match dir {
            Direction::Out => (&mut p.from_ip, &mut p.to_driver, &mut p.tx_free),
            Direction::In => (&mut p.from_driver, &mut p.to_ip, &mut p.rx_free),
        };
        let f = inbox.peek()?;
        let (rule, verdict) = freer.pool().with(f.buf, |b| {
            p.common.crash.check(ComponentKind::Filter);
            decide(&self.rules, dir, &b[..f.len as usize])
        });
        if let Some(i) = rule {
            p.hits[i].fetch_add(1, Ordering::Relaxed);
        }
        let counter = match (verdict, dir) {
            (Verdict::Allow, Direction::In) => 0,
            (Verdict::Allow, Direction::Out) => 1,
            (Verdict::Deny, Direction::In) => 2,
            (Verdict::Deny, Direction::Out) => 3,
        };
        p.common.counters.add(counter, 1);
        match verdict {
            Verdict::Allow => outbox.push(f),
            Verdict::Deny => freer.free(f.buf),
        }
        inbox.commit();
        Some(())
    }
}

impl Component for Filter {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Filter
    }

    fn poll(&mut self, _now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        while self.step(Direction::Out).is_some() {
            p.add(1, 0);
        }
        while self.step(Direction::In).is_some() {
            p.add(1, 0);
        }
        let ports = &mut self.ports;
        ports.from_ip.release();
        ports.from_driver.release();
        ports.to_driver.publish();
        ports.to_ip.publish();
        ports.tx_free.flush();
        ports.rx_free.flush();
        p
    }

    fn has_work(&self) -> bool {
        self.ports.from_ip.has_work() || self.ports.from_driver.has_work()
    }

    fn inbound_fill(&self) -> f64 {
        self.ports.from_ip.fill().max(self.ports.from_driver.fill())
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![
            (ComponentKind::Driver, self.ports.to_driver.fill()),
            (ComponentKind::Ip, self.ports.to_ip.fill()),
        ]
    }

    fn restart(&mut self) -> Result<(), NotRestartable> {
        self.rules = self.config.to_vec();
        Ok(())
    }

    fn common(&self) -> &Common {
        &self.ports.common
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> Header {
        Header { src: src.into(), dst: dst.into(), ports }
    }

    #[test]
    fn rules_parse_and_match() {
        let r = Rule::parse("deny in tcp from 10.0.0.0/8 dport 20-23").unwrap();
        assert_eq!(r.verdict, Verdict::Deny);
        assert_eq!(r.direction, Some(Direction::In));
        let telnet = h([10, 1, 2, 3], [10, 0, 0, 2], Some((5000, 23)));
        assert!(r.matches(Direction::In, &telnet));
        assert!(!r.matches(Direction::Out, &telnet), "direction");
        assert!(
            !r.matches(Direction::In, &h([11, 1, 2, 3], [10, 0, 0, 2], Some((5000, 23)))),
            "source prefix"
        );
        assert!(!r.matches(Direction::In, &h([10, 1, 2, 3], [10, 0, 0, 2], Some((5000, 24)))), "port range");
        assert!(!r.matches(Direction::In, &h([10, 1, 2, 3], [10, 0, 0, 2], None)), "ports imply tcp");
        let all = Rule::parse("allow").unwrap();
        assert!(all.matches(Direction::Out, &h([1, 1, 1, 1], [2, 2, 2, 2], None)));
        assert!(Rule::parse("allow to 0.0.0.0/0").unwrap().matches(Direction::In, &telnet));
    }

    #[test]
    fn the_first_matching_rule_decides_and_unmatched_packets_pass() {
        let rules = [Rule::parse("allow in dport 80").unwrap(), Rule::parse("deny in").unwrap()];
        let pick = |hd: &Header| rules.iter().position(|r| r.matches(Direction::In, hd));
        assert_eq!(pick(&h([1, 0, 0, 1], [1, 0, 0, 2], Some((9, 80)))), Some(0));
        assert_eq!(pick(&h([1, 0, 0, 1], [1, 0, 0, 2], Some((9, 81)))), Some(1));
        assert_eq!(decide(&rules, Direction::Out, &[0u8; 3]), (None, Verdict::Deny), "not IPv4");
    }

    #[test]
    fn bad_rules_are_refused_with_the_word() {
        for (text, needle) in [
            ("", "empty"),
            ("permit in", "`permit`"),
            ("deny in tcp dport", "`dport` needs a value"),
            ("deny dport 70000", "`70000` is not a port"),
            ("deny dport 30-20", "empty"),
            ("deny from 10.0.0/8", "`10.0.0` is not an IPv4 address"),
            ("deny from 10.0.0.0/33", "prefix length"),
            ("deny sideways", "unknown word `sideways`"),
        ] {
            let e = Rule::parse(text).unwrap_err();
            assert!(e.contains(needle), "`{text}`: {e}");
        }
    }
}
