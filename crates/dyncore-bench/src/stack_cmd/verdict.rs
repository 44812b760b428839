//! What `dyncore stack` promises and checks at the end: every connection's
//! bytes (what each side put through its calls), what a reset lost and
//! why, the frame audit of a campaign (nothing lost, duplicated or
//! leaked), and the exit status that says whether the promises held.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Result, bail, ensure};
use dyncore_core::placement::ComponentKind;
use dyncore_net::app::{App, Connection, Outcome, check_pair};
use dyncore_net::audit::Audit;
use dyncore_net::component::Component;
use dyncore_net::host::Supervised;
use dyncore_net::stream::Digest;
use dyncore_net::tcp::TcpFacts;
use dyncore_run::Interrupted;

use super::drive::{Flags, Outcome as Run};
use super::report::percentiles_us;
use dyncore_report::table::Table;

/// What the receiving end got, or why it failed.
pub(super) type Received = std::result::Result<Digest, String>;

/// The other end of the streams.
pub(super) enum Peer {
    /// A split stack: the applications are `streams` senders, then as many
    /// receivers; the peer's components are the threads' components.
    /// `tcp`: what the sending stack's TCP counted across its restarts
    /// (connections reset and recovered, per stream).
    Split { streams: usize, tcp: Arc<TcpFacts> },
    /// A monolithic stack: the sender, then the monolithic peer.
    Mono,
    /// The Linux kernel over TUN, and what it received.
    Linux(Received),
}

/// Bytes the senders moved, all connections.
pub(super) fn bytes_sent(apps: &[Box<dyn App>], senders: usize) -> u64 {
    apps[..senders]
        .iter()
        .map(|a| {
            let done: u64 = a.connections().iter().map(|c| c.digest.bytes).sum();
            done + if a.is_done() { 0 } else { a.report().digest.bytes }
        })
        .sum()
}

/// Prints what happened to the streams and checks the promises.
/// A signal's checks that fail are reported on stderr, and the exit status
/// stays the signal's.
pub(super) fn verdict(run: &Run, peer: Peer, flags: &Flags) -> Result<()> {
    let checked = checks(run, peer);
    let signal = flags.signal.load(Ordering::Acquire);
    if signal != 0 {
        if let Err(e) = checked {
            eprintln!("error: {e:#}");
        }
        say!("interrupted: the stream was cut short and the connection closed");
        let after = "the streams were closed cleanly, what the run created was removed, and the report above \
                     covers what ran";
        return Err(Interrupted { signal, after }.into());
    }
    checked
}

fn checks(run: &Run, peer: Peer) -> Result<()> {
    let apps = &run.threads.apps;
    match peer {
        Peer::Linux(got) => single(&*apps[0], got.map_err(|e| format!("Linux: {e}"))),
        Peer::Mono => single(&*apps[0], received_by(&*apps[1])),
        Peer::Split { streams, tcp } => {
            let bad = connections(apps, streams, &tcp)?;
            let audit = campaign(run, &tcp, streams)?;
            for (i, a) in apps.iter().enumerate() {
                if let Some(e) = a.error() {
                    bail!("{} {}: {e}", if i < streams { "sender" } else { "receiver" }, i % streams);
                }
            }
            ensure!(bad == 0, "{bad} connections delivered other bytes than were sent");
            if let Some(a) = audit {
                ensure!(
                    a.lost() == 0 && a.duplicated() == 0,
                    "frames were lost or duplicated: {}",
                    a.describe()
                );
            }
            ensure!(
                apps[..streams].iter().all(|a| a.is_done()),
                "the streams did not finish within the time limit"
            );
            Ok(())
        }
    }
}

fn received_by(app: &dyn App) -> Received {
    match app.error() {
        Some(e) => Err(e.to_string()),
        None => Ok(app.report().digest),
    }
}

/// One stream to a peer that is not a split stack.
fn single(sender: &dyn App, received: Received) -> Result<()> {
    let sent = sender.report();
    if let Some(e) = sender.error() {
        bail!("the sender failed: {e}");
    }
    let got = received.map_err(|e| anyhow::anyhow!("the receiver failed: {e}"))?;
    say!(
        "sent {}, received {}: {}",
        sent.digest,
        got,
        if got == sent.digest { "the stream checksums match" } else { "MISMATCH" }
    );
    if let Some(bps) = sent.bits_per_s() {
        say!("throughput: {:.2} Gbps (connection established to closed)", bps / 1e9);
    }
    ensure!(got == sent.digest, "the receiver's stream differs from the sender's");
    ensure!(sender.is_done(), "the stream did not finish within the time limit");
    Ok(())
}

/// The per-connection table of a split peer; returns the connections whose
/// check failed.
fn connections(apps: &[Box<dyn App>], streams: usize, tcp: &TcpFacts) -> Result<usize> {
    let mut t = Table::new(
        "Connections (sent: bytes the application's send calls completed; lost: what a reset took with it)",
        &[
            "stream",
            "connection",
            "outcome",
            "TCP crashes survived",
            "sent MB",
            "received MB",
            "lost KB",
            "check",
            "Gbps",
            "next up after",
        ],
    );
    let (mut bad, mut reset, mut completed, mut lost) = (0, 0, 0, 0u64);
    for i in 0..streams {
        let (s, r) = (apps[i].connections(), apps[streams + i].connections());
        let survived = survived(tcp, i, s.len());
        if s.len() != r.len() {
            say!("stream {i}: the sender ended {} connections, the receiver {}", s.len(), r.len());
            bad += 1;
        }
        for (k, (a, b)) in s.iter().zip(r).enumerate() {
            let gone = (a.digest.bytes + a.interrupted).saturating_sub(b.digest.bytes);
            let c = check_pair(a, b);
            bad += usize::from(c.is_err());
            match a.outcome {
                Outcome::Completed => completed += 1,
                Outcome::Reset => {
                    reset += 1;
                    lost += gone;
                }
            }
            let secs = a.started_ns.map(|s0| a.ended_ns.saturating_sub(s0) as f64 / 1e9).unwrap_or(0.0);
            // From the reset to the next connection established.
            let next = s.get(k + 1).and_then(|n| n.started_ns).map(|t| t.saturating_sub(a.ended_ns));
            t.row(vec![
                i.to_string(),
                k.to_string(),
                format!("{:?}", a.outcome).to_lowercase(),
                survived.clone(),
                format!("{:.2}", a.digest.bytes as f64 / 1e6),
                format!("{:.2}", b.digest.bytes as f64 / 1e6),
                if a.outcome == Outcome::Reset { format!("{:.1}", gone as f64 / 1e3) } else { "–".into() },
                c.map_or_else(|e| format!("WRONG: {e}"), str::to_string),
                if secs > 0.0 {
                    format!("{:.2}", a.digest.bytes as f64 * 8.0 / secs / 1e9)
                } else {
                    "–".into()
                },
                next.map_or("–".into(), |n| format!("{:.1} ms", n as f64 / 1e6)),
            ]);
        }
    }
    // A campaign makes thousands: the table shows at most 40 rows.
    if t.rows.len() > 40 {
        let n = t.rows.len();
        t.rows.drain(20..n - 20);
        say!("\n(connections 20 to {} of {n} left out)", n - 21);
    }
    say!("\n{}", t.to_terminal());
    if reset > 0 {
        say!(
            "connections: {completed} completed, {reset} reset by TCP restarts ({:.1} KB that TCP held were \
             lost with them: the applications' calls got an error and the next connection carried the rest)",
            lost as f64 / 1e3
        );
    }
    let recovered: u64 = (0..streams).map(|i| tcp.recovered(i)).sum();
    if recovered > 0 {
        say!(
            "connections recovered by TCP restarts: {recovered} (resumed from TCP's checkpoints; the \
             applications and the peer saw only a delay)"
        );
    }
    if bad == 0 {
        let n = completed + reset;
        say!("{n} connection{} checked: the stream checksums match", if n == 1 { "" } else { "s" });
    }
    // All connections' bytes over the time from the first one's start to
    // the last one's end.
    let all: Vec<&Connection> = apps[..streams].iter().flat_map(|a| a.connections()).collect();
    let first = all.iter().filter_map(|c| c.started_ns).min();
    let last = all.iter().map(|c| c.ended_ns).max();
    if let (Some(f), Some(l)) = (first, last)
        && l > f
    {
        let bytes: u64 = all.iter().map(|c| c.digest.bytes).sum();
        say!(
            "throughput: {:.2} Gbps ({} connection{}, the first established to the last closed)",
            bytes as f64 * 8.0 / (l - f) as f64,
            all.len(),
            if all.len() == 1 { "" } else { "s" }
        );
    }
    Ok(bad)
}

/// How many TCP crashes stream `i`'s connection survived (resumed from
/// checkpoints, `--tcp-crash recover`): TCP counts them per client, so for
/// a stream of several connections (one reset) the count is the stream's.
fn survived(tcp: &TcpFacts, i: usize, connections: usize) -> String {
    match (tcp.recovered(i), connections) {
        (0, _) => "–".into(),
        (n, 1) => format!("{n} (recovered)"),
        (n, _) => format!("{n} (recovered, over the stream)"),
    }
}

/// The campaign's summary and the frame audit (at rest); `None` when the
/// stacks did not come to rest (then frames in flight are not lost).
fn campaign(run: &Run, facts: &TcpFacts, streams: usize) -> Result<Option<Audit>> {
    let ours: Vec<&dyn Component> = run.stack.iter().map(Supervised::component).collect();
    let theirs: Vec<&dyn Component> = run.threads.components.iter().map(Supervised::component).collect();
    let leaked: usize = run.stack.iter().chain(&run.threads.components).map(Supervised::buffers_out).sum();
    if let Some(c) = &run.campaign {
        let fired: u64 = run.stack.iter().map(|s| s.load.restarts).sum();
        let per: Vec<String> =
            run.stack.iter().map(|s| format!("{} {}", s.kind(), s.load.restarts)).collect();
        say!(
            "\nfault campaign (seed {}): {fired} crashes ({}), {} live updates, {} moves; {} still armed at the \
             end were disarmed",
            c.plan().seed,
            per.join(", "),
            c.updates.len(),
            c.moves.len(),
            c.disarmed
        );
        let ready: Vec<u64> = run.stack.iter().flat_map(|s| s.restarts.ready_ns.clone()).collect();
        let first: Vec<u64> = run.stack.iter().flat_map(|s| s.restarts.first_message_ns.clone()).collect();
        say!(
            "restart times over all components: crash → ready {}, crash → first message {} (p50 / p99 / max)",
            percentiles_us(&ready),
            percentiles_us(&first)
        );
        let pauses: Vec<u64> = c.updates.iter().map(|u| u.pause_ns).collect();
        say!("live updates: pause {} (p50 / p99 / max)", percentiles_us(&pauses));
        let tcp = run.stack.iter().find(|s| s.kind() == ComponentKind::Tcp).map_or(0, |s| s.load.restarts);
        let recovered: u64 = (0..streams).map(|i| facts.recovered(i)).sum();
        let reset: u64 = (0..streams).map(|i| facts.resets(i)).sum();
        say!("TCP restarts: {tcp}; connections recovered: {recovered}, reset: {reset}");
    }
    if !run.at_rest {
        say!("frame audit: none (the stacks did not come to rest within 5 s of the end)");
        return Ok(None);
    }
    let audit = Audit::of(&ours, &theirs);
    say!(
        "frame audit at rest: {} frames sent by the two TCPs; lost {}, duplicated {} (every hop: TCP, IP, \
         filter, driver, wire, and back); buffers out: {leaked}",
        audit.frames(),
        audit.lost(),
        audit.duplicated()
    );
    ensure!(leaked == 0, "{leaked} pool buffers leaked");
    Ok(Some(audit))
}
