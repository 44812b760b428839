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
//! Its state is its rule list and its counts: packets passed and denied each
//! way, hits per rule. A restarted instance gets the rules from its
//! blueprint and the counts from its journal (they are journal words, so a
//! crash never counts a packet twice).
//!
//! **Two versions**, to show a live update that changes the state's shape:
//! version 1 counts hits for the rules it was given; version 2 also counts
//! the hits of the implicit last rule, "allow everything no rule matched"
//! (`default_hits`). An update from 1 to 2 initialises it from version 1's
//! state: every packet passed that no allow rule counted,
//! `passed_in + passed_out - Σ hits of allow rules` ([`FilterState::to_v2`]).

use std::net::Ipv4Addr;
use std::sync::Arc;

use dyncore_core::Nanos;
use dyncore_ring::journal::{self, Journal, Word, WordRef};
use smoltcp::wire::{IpProtocol, Ipv4Packet, TcpPacket};

use crate::chan::{Channel, Frame, Inbox, Log, Outbox};
use crate::component::{
    Blueprint, Common, Component, ComponentKind, Counters, CrashPoint, Progress, State, StateBody, Tally,
    UpdateError, journal_of,
};
use crate::pool::{Freer, PoolRef};

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

/// The filter's ports: what outlives its instances.
#[derive(Clone)]
pub struct FilterPorts {
    /// Outbound, from IP (transmit pool).
    pub from_ip: Channel<Frame>,
    pub to_driver: Channel<Frame>,
    /// Inbound, from the driver (receive pool).
    pub from_driver: Channel<Frame>,
    pub to_ip: Channel<Frame>,
    pub tx: (PoolRef, usize),
    pub rx: (PoolRef, usize),
    /// Bell and crash switch (its counters are per version: see
    /// [`FilterBlueprint`]).
    pub common: Common,
    /// Hits per rule, in rule order.
    pub hits: Arc<[Arc<journal::Counter>]>,
}

impl FilterPorts {
    fn words(&self, counters: &Counters) -> Vec<WordRef> {
        let mut w = vec![
            self.from_ip.tail_word(),
            self.to_driver.head_word(),
            self.from_driver.tail_word(),
            self.to_ip.head_word(),
            self.tx.0.freer_word(self.tx.1),
            self.rx.0.freer_word(self.rx.1),
        ];
        w.extend(counters.words());
        w.extend(self.hits.iter().map(|h| h.clone() as WordRef));
        w
    }
}

/// Version 1's counters, in index order.
pub const COUNTERS: &[&str] = &["passed_in", "passed_out", "denied_in", "denied_out"];
/// Version 2's: version 1's and the implicit last rule's hits.
pub const COUNTERS_V2: &[&str] = &["passed_in", "passed_out", "denied_in", "denied_out", "default_hits"];
const DEFAULT_HITS: usize = 4;

/// The filter's state, for a live update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterState {
    /// Rules, hits per rule, and passed/denied in/out (the order of [`COUNTERS`]).
    V1 { rules: Vec<Rule>, hits: Vec<u64>, counts: [u64; 4] },
    /// Version 1's, and the hits of the implicit last rule.
    V2 { rules: Vec<Rule>, hits: Vec<u64>, counts: [u64; 4], default_hits: u64 },
}

impl FilterState {
    /// The state as version 2 holds it: from version 1, `default_hits` is
    /// every packet passed that no allow rule counted.
    pub fn to_v2(self) -> FilterState {
        match self {
            FilterState::V1 { rules, hits, counts } => {
                let by_rules: u64 = rules
                    .iter()
                    .zip(&hits)
                    .filter(|(r, _)| r.verdict == Verdict::Allow)
                    .map(|(_, h)| h)
                    .sum();
                let default_hits = (counts[0] + counts[1]).saturating_sub(by_rules);
                FilterState::V2 { rules, hits, counts, default_hits }
            }
            v2 => v2,
        }
    }

    /// The state as version 1 holds it (from version 2: without
    /// `default_hits`).
    pub fn to_v1(self) -> FilterState {
        match self {
            FilterState::V2 { rules, hits, counts, .. } => FilterState::V1 { rules, hits, counts },
            v1 => v1,
        }
    }

    fn parts(&self) -> (&[Rule], &[u64], &[u64; 4], Option<u64>) {
        match self {
            FilterState::V1 { rules, hits, counts } => (rules, hits, counts, None),
            FilterState::V2 { rules, hits, counts, default_hits } => {
                (rules, hits, counts, Some(*default_hits))
            }
        }
    }
}

/// The filter's blueprint at one version (see [`crate::component::Blueprint`]).
#[derive(Clone)]
pub struct FilterBlueprint {
    ports: FilterPorts,
    /// Its counters (version 1's or version 2's names) and the common parts
    /// with them.
    common: Common,
    rules: Arc<[Rule]>,
    version: u32,
    journal: Arc<Journal>,
}

impl FilterBlueprint {
    /// Version 1 over `ports`, its counters those of `ports.common`.
    pub fn new(ports: FilterPorts, rules: Arc<[Rule]>) -> Self {
        assert_eq!(ports.hits.len(), rules.len(), "one hit counter per rule");
        assert_eq!(ports.common.counters.names(), COUNTERS, "version 1's counters");
        let common = ports.common.clone();
        let journal = journal_of(ports.words(&common.counters));
        FilterBlueprint { ports, common, rules, version: 1, journal }
    }

    /// Creates the per-rule hit counters for a rule list.
    pub fn hit_counters(rules: &[Rule]) -> Arc<[Arc<journal::Counter>]> {
        rules.iter().map(|_| Arc::new(journal::Counter::new(0))).collect()
    }

    fn attach(&self, rules: Vec<Rule>) -> Box<dyn Component> {
        let p = &self.ports;
        let log = Log::Journal(self.journal.clone());
        Box::new(Filter {
            from_ip: p.from_ip.inbox(&log),
            to_driver: p.to_driver.outbox(&log),
            from_driver: p.from_driver.inbox(&log),
            to_ip: p.to_ip.outbox(&log),
            tx_free: p.tx.0.freer(p.tx.1, &log),
            rx_free: p.rx.0.freer(p.rx.1, &log),
            tally: Tally::attach(&self.common.counters, &log),
            hits: Tally::over(&p.hits, &log),
            hit_values: p.hits.clone(),
            rules,
            version: self.version,
            common: self.common.clone(),
            journal: self.journal.clone(),
        })
    }
}

impl Blueprint for FilterBlueprint {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Filter
    }

    fn version(&self) -> u32 {
        self.version
    }

    fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn build(&self, _now_ns: Nanos) -> Box<dyn Component> {
        self.attach(self.rules.to_vec())
    }

    fn at_version(&self, version: u32) -> Result<Arc<dyn Blueprint>, UpdateError> {
        let names = match version {
            1 => COUNTERS,
            2 => COUNTERS_V2,
            v => return Err(UpdateError(format!("the filter has versions 1 and 2, not {v}"))),
        };
        // New counters (set from the old instance's state in `build_from`)
        // and a journal over them; the ports are the same.
        let mut common = self.ports.common.clone();
        common.counters = Counters::new(names);
        let journal = journal_of(self.ports.words(&common.counters));
        Ok(Arc::new(FilterBlueprint {
            ports: self.ports.clone(),
            common,
            rules: self.rules.clone(),
            version,
            journal,
        }))
    }

    fn accepts(&self, state: &State) -> Result<(), UpdateError> {
        match &state.body {
            StateBody::Filter(f) => {
                let (rules, hits, ..) = f.parts();
                if rules.len() != self.ports.hits.len() || hits.len() != rules.len() {
                    return Err(UpdateError(format!(
                        "the filter's state has {} rules and {} hit counts, its ports {} hit counters",
                        rules.len(),
                        hits.len(),
                        self.ports.hits.len()
                    )));
                }
                Ok(())
            }
            _ => Err(UpdateError(format!("the filter cannot start from {}'s state", state.kind))),
        }
    }

    fn build_from(&self, state: State, _now_ns: Nanos) -> Box<dyn Component> {
        let StateBody::Filter(f) = state.body else { unreachable!("checked by accepts") };
        let f = if self.version == 2 { f.to_v2() } else { f.to_v1() };
        let (rules, hits, counts, default_hits) = f.parts();
        // No instance is attached: set the words, then let the journal
        // read them back as its committed values.
        let c = &self.common.counters;
        for (i, &v) in counts.iter().enumerate() {
            c.set(i, v);
        }
        if let Some(d) = default_hits {
            c.set(DEFAULT_HITS, d);
        }
        for (h, &v) in self.ports.hits.iter().zip(hits) {
            h.store(v);
        }
        self.journal.recover();
        self.attach(rules.to_vec())
    }
}

/// The packet filter component: one instance, attached to its ports.
pub struct Filter {
    from_ip: Inbox<Frame>,
    to_driver: Outbox<Frame>,
    from_driver: Inbox<Frame>,
    to_ip: Outbox<Frame>,
    tx_free: Freer,
    rx_free: Freer,
    tally: Tally,
    hits: Tally,
    hit_values: Arc<[Arc<journal::Counter>]>,
    rules: Vec<Rule>,
    version: u32,
    common: Common,
    journal: Arc<Journal>,
}

impl Filter {
    /// One packet going `dir`, if any.
    fn step(&mut self, dir: Direction) -> Option<()> {
        let (inbox, outbox, freer) = match dir {
            Direction::Out => (&mut self.from_ip, &mut self.to_driver, &mut self.tx_free),
            Direction::In => (&mut self.from_driver, &mut self.to_ip, &mut self.rx_free),
        };
        let f = inbox.peek()?;
        let (rule, verdict) = freer.pool().with(f.buf, |b| {
            self.common.crash.check(ComponentKind::Filter, CrashPoint::Logic);
            decide(&self.rules, dir, &b[..f.len as usize])
        });
        match rule {
            Some(i) => self.hits.add(i, 1),
            None if verdict == Verdict::Allow && self.version >= 2 => self.tally.add(DEFAULT_HITS, 1),
            None => {}
        }
        let counter = match (verdict, dir) {
            (Verdict::Allow, Direction::In) => 0,
            (Verdict::Allow, Direction::Out) => 1,
            (Verdict::Deny, Direction::In) => 2,
            (Verdict::Deny, Direction::Out) => 3,
        };
        self.tally.add(counter, 1);
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

    fn version(&self) -> u32 {
        self.version
    }

    fn poll(&mut self, _now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        while self.step(Direction::Out).is_some() {
            p.add(1, 0);
        }
        while self.step(Direction::In).is_some() {
            p.add(1, 0);
        }
        self.from_ip.release();
        self.from_driver.release();
        self.common.commit(ComponentKind::Filter, &self.journal);
        p
    }

    fn has_work(&self) -> bool {
        self.from_ip.has_work() || self.from_driver.has_work()
    }

    fn inbound_fill(&self) -> f64 {
        self.from_ip.fill().max(self.from_driver.fill())
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![(ComponentKind::Driver, self.to_driver.fill()), (ComponentKind::Ip, self.to_ip.fill())]
    }

    fn export(&self) -> Result<State, UpdateError> {
        let v = self.common.counters.values();
        let counts = [v[0], v[1], v[2], v[3]];
        let rules = self.rules.clone();
        let hits = self.hit_values.iter().map(|h| h.get()).collect();
        let body = match self.version {
            1 => FilterState::V1 { rules, hits, counts },
            _ => FilterState::V2 { rules, hits, counts, default_hits: v[DEFAULT_HITS] },
        };
        Ok(State { kind: ComponentKind::Filter, version: self.version, body: StateBody::Filter(body) })
    }

    fn common(&self) -> &Common {
        &self.common
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
