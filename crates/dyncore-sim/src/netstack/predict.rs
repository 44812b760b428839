//! Sim against live: predicts what `dyncore bench stack` measures on this
//! machine for its 2-core configurations, from the split stack's costs
//! ([`StackCosts`], as `dyncore bench stack --write-profile` writes them)
//! and the costs of the threads beside it ([`LiveThreads`]), measured in
//! the same run.
//!
//! The model runs the layout that really runs on a 2-CPU machine: two model
//! CPUs for the two real ones, the stack's components on them as the
//! placement policy put them, and beside them (see [`super::Beside`]) the
//! threads that share those real CPUs — the sending application (it makes
//! each 64 KiB chunk from the stream generator and hashes it before the
//! stack can take it) and the receiving monolithic stack (its receive path
//! and its application's copy and hash for each segment). The monolithic
//! stack's costs (B1's two ends, and the receiver of every configuration)
//! are its own, measured in its own cost runs ([`LiveThreads::mono_send`],
//! [`LiveThreads::mono_receive`]): its layers pass no messages to each
//! other, so the split components' costs, which hold their channel
//! operations and polls, would overstate it. The receiver's
//! acknowledgments go back over the in-memory wire (1000 Gbit/s, no frame
//! overhead, no propagation delay). The profile's cycles are counted at
//! `cpu_mhz`; the model runs its CPUs at the paper machine's 2267 MHz step
//! with the cycles scaled by `2267 / cpu_mhz`, so every job takes the time
//! it takes on this machine.
//!
//! Layouts ([`LiveLayout`]):
//!
//! | | CPU 0 | CPU 1 |
//! |---|---|---|
//! | `Mono` (B1) | the sending thread: TCP, IP and the driver (smoltcp) and the application's chunks, polling | the receiving thread, polling |
//! | `Spread` (B2) | TCP and the filter; the application beside | the syscall server, IP and the driver; the receiver beside |
//! | `Consolidated` (B3) | the five components; the application beside | the receiver |
//!
//! (B2 is the placement policy's spread of five components on two CPUs.
//! The bench pins the application to the sender's CPU and the receiver to
//! the receiver's, as B1's two threads are.) B4 (`dynamic` under a
//! load step) and B5 (`efficient` at a target) run the placement policy;
//! use [`super::policy::simulate_policy`].
//!
//! A component's turn drains every message waiting for it ([`LIVE_BATCH`]),
//! as a live component's poll does, before its CPU turns to the next. A
//! component's measured cost per message is its poll's time, its channel
//! operations included, so the model adds no channel cost per message
//! (`channel_cycles_per_msg` is the paper-side model's, whose costs
//! exclude it). Through the syscall server the application's chunk is one
//! send call, and the receiver acknowledges after it drained its segments
//! (see [`super::Beside`]), as the live stack counts its messages.
//!
//! A CPU with nothing to do polls for [`LiveThreads::spin_ns`] before it
//! sleeps, as the live hosts' CPUs poll a few hundred times before they
//! park (measured in the same run): a message in that time costs no
//! wake-up.
//!
//! CPU-seconds are predicted for what the bench measures: for B1 both
//! polling threads all the time (their thread clocks); for B2 and B3 the
//! stack CPUs' running time: their components' jobs and their polling (the
//! work beside them is not counted, as the bench does not count it).

use dyncore_core::placement::ComponentKind;
use dyncore_core::profile::{ComponentCost, StackCosts};
use serde::Serialize;

use super::idle::GovernorName;
use super::{Beside, CpuSpec, NetParams, RunInput};

/// A 2-core configuration of `dyncore bench stack` (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LiveLayout {
    Mono,
    Spread,
    Consolidated,
}

/// The threads beside the stack, as measured on the machine (cycles at the
/// costs' `cpu_mhz`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct LiveThreads {
    /// The sending application, per byte: making the stream and hashing it.
    pub app_cycles_per_byte: f64,
    /// Sending through the split stack, per byte: its send call's copy of
    /// the chunk into a buffer of the send pool, on the application's
    /// thread (B1's application hands its chunk to smoltcp, whose copy is
    /// TCP's).
    pub app_call_copy_cycles_per_byte: f64,
    /// The receiving application, per byte: its copy and its hash.
    pub receiver_cycles_per_byte: f64,
    /// Bytes the application makes at a time (its send call's buffer).
    pub app_chunk: u64,
    /// How long a CPU polls with nothing to do before it sleeps, ns (the
    /// live hosts' empty polls before they park).
    pub spin_ns: u64,
    /// The monolithic smoltcp stack's sending end per segment, its
    /// application's work excluded: the copy into its socket, TCP, IP, the
    /// device and its share of the ACKs (B1's sending thread). Measured in
    /// the monolithic stack's own cost runs: its layers pass no messages to
    /// each other, so the split components' costs (which hold their
    /// channel operations and polls) overstate it.
    pub mono_send: ComponentCost,
    /// The monolithic stack's receiving end per segment, its application's
    /// copy and hash excluded: the receiver of every configuration.
    pub mono_receive: ComponentCost,
}

/// What the model predicts for one configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchPrediction {
    pub gbps: f64,
    /// CPU time per GB of payload, s, of what the bench measures (module
    /// docs).
    pub cpu_s_per_gb: f64,
    /// Wake-ups of the stack's CPUs per MB of payload (B2, B3; 0 for B1,
    /// whose threads poll).
    pub wakeups_per_mb: f64,
    /// Each component's busy time per payload byte, in cycles at the
    /// costs' clock (`cpu_mhz`), as the bench measures the live
    /// components' (their time in polls that did work).
    pub component_cycles_per_byte: Vec<(ComponentKind, f64)>,
    /// Each model CPU's busy time (its components' jobs and the work beside
    /// them) per payload byte, cycles at the costs' clock: for B1 the
    /// sending and the receiving thread's work.
    pub cpu_cycles_per_byte: Vec<f64>,
    /// The work beside the stack (the application and the receiver) per
    /// payload byte, cycles at the costs' clock: the CPUs' busy time beyond
    /// their components'.
    pub beside_cycles_per_byte: f64,
    /// ACKs reaching the sender's TCP per MB of payload.
    pub acks_per_mb: f64,
}

/// Messages a component handles in one turn, live: all that wait (the
/// largest bound a scenario may give).
pub const LIVE_BATCH: u32 = 1_000_000;

/// smoltcp's delayed-ACK timer (its `ACK_DELAY_DEFAULT`; dyncore's sockets
/// keep it).
pub const SMOLTCP_ACK_DELAY_NS: u64 = 10_000_000;

/// The model's clock for predictions: the paper machine's fastest step.
const MODEL_MHZ: f64 = 2267.0;

/// `costs` with cycles rescaled to [`MODEL_MHZ`] (module docs).
fn at_model_clock(costs: &StackCosts) -> StackCosts {
    StackCosts { cpu_mhz: MODEL_MHZ, ..costs.with_cycles_times(MODEL_MHZ / costs.cpu_mhz) }
}

/// Predicts `layout` on the machine `costs` and `threads` describe, for one
/// stream of `window_bytes` and segments of `mss` bytes. `costs` must have
/// passed [`StackCosts::validate`].
pub fn predict_bench(
    costs: &StackCosts,
    layout: LiveLayout,
    mss: u32,
    window_bytes: u64,
    threads: &LiveThreads,
) -> BenchPrediction {
    predict_bench_turns(costs, layout, mss, window_bytes, threads, NetParams::default().turn_cycles)
}

/// [`predict_bench`] with a turn cost of `turn_cycles` (at the model's
/// clock) for the split layouts instead of the paper-side assumption
/// ([`NetParams::turn_cycles`]): the live runtime CPUs' cost of switching
/// between components is not measured, so the bench shows what the
/// prediction is without it, to put a number on that assumption.
pub fn predict_bench_turns(
    costs: &StackCosts,
    layout: LiveLayout,
    mss: u32,
    window_bytes: u64,
    threads: &LiveThreads,
    turn_cycles: f64,
) -> BenchPrediction {
    let scale = MODEL_MHZ / costs.cpu_mhz;
    let c = at_model_clock(costs);
    // The receiver is a monolithic stack: its cost per segment, measured
    // as such.
    let recv_cycles = threads.mono_receive.cycles(u64::from(mss)) * scale;
    let mono = layout == LiveLayout::Mono;
    let net = NetParams {
        link_gbps: 1000.0,
        frame_overhead: 0,
        mss,
        streams: 1,
        window_bytes,
        remote_ns: 0,
        remote_jitter_ns: 0,
        spin_ns: threads.spin_ns,
        // A live component's poll drains every message waiting in its
        // inboxes (and those that come meanwhile) before the runtime CPU
        // turns to the next component: no bound per turn.
        batch: LIVE_BATCH,
        turn_cycles: if mono { 0.0 } else { turn_cycles },
        // The live runtime parks a thread; its wake-up is what the bench
        // measured (`wakeup_ns`), not a C-state's.
        governor: GovernorName::Fixed,
        // The live receiver is smoltcp: an ACK at once for more than one
        // MSS unacknowledged (`ack_every` 2, after it drained its segments,
        // see `super::beside`), else after its 10 ms ACK delay.
        ack_every: 2,
        delack_ns: SMOLTCP_ACK_DELAY_NS,
        // Bytes count when acknowledged, and a slow receiver acknowledges
        // a whole window at a time: 90 ms measured (not the paper-side
        // 16) keeps that granularity to a few per cent.
        duration_ms: 100.0,
        warmup_ms: 10.0,
        ..NetParams::default()
    };
    // A live component's cost is its whole poll's time per message, its
    // channel operations (peek, commit, push, publish) included: the model
    // adds no channel cost on top (the paper-side costs exclude it).
    let c = StackCosts { wakeup_ns: if mono { 0.0 } else { c.wakeup_ns }, channel_cycles_per_msg: 0.0, ..c };
    // B1's sending thread is the monolithic stack: its measured cost per
    // segment stands for TCP, IP and the device together.
    let scaled = |k: ComponentCost| ComponentCost {
        cycles_per_packet: k.cycles_per_packet * scale,
        cycles_per_byte: k.cycles_per_byte * scale,
    };
    let c = if mono {
        let none = ComponentCost::default();
        StackCosts { tcp: scaled(threads.mono_send), ip: none, driver: none, ..c }
    } else {
        c
    };
    use ComponentKind::{Driver, Filter, Ip, Syscall, Tcp};
    let cpu = |components: Vec<ComponentKind>| CpuSpec { mhz: 2267, components, core: None };
    let (cpus, app_cpu, receiver_cpu) = match layout {
        LiveLayout::Mono => (vec![cpu(vec![Tcp, Ip, Driver]), cpu(vec![])], 0, 1),
        LiveLayout::Spread => (vec![cpu(vec![Tcp, Filter]), cpu(vec![Syscall, Ip, Driver])], 0, 1),
        LiveLayout::Consolidated => (vec![cpu(vec![Syscall, Tcp, Ip, Filter, Driver]), cpu(vec![])], 0, 1),
    };
    let app_cycles_per_byte =
        threads.app_cycles_per_byte + if mono { 0.0 } else { threads.app_call_copy_cycles_per_byte };
    let beside = Beside {
        app: Some((app_cpu, app_cycles_per_byte * scale)),
        app_chunk: threads.app_chunk,
        receiver: Some((receiver_cpu, recv_cycles, threads.receiver_cycles_per_byte * scale)),
    };
    let (o, segments) =
        run_counting_segments(&RunInput { costs: &c, net: &net, cpus: &cpus, load: &[], seed: 1, beside });
    let gbps = o.mbps / 1000.0;
    // Per GB: (1e9 · 8 / bits per second) seconds of wall.
    let wall_per_gb = 8.0 / gbps.max(1e-9);
    // What the bench counts: B1's two polling threads all the time; B2's and
    // B3's stack CPUs' running time: their components' jobs and their
    // polling (not the work beside them).
    let busy: f64 = if mono {
        2.0
    } else {
        let polled: f64 = o.cpus.iter().filter(|c| !c.components.is_empty()).map(|c| c.polled).sum();
        o.components.values().map(|v| v.busy).sum::<f64>() + polled
    };
    let measured_s = (net.duration_ms - net.warmup_ms) / 1e3;
    let mb = gbps * 1e9 / 8.0 * measured_s / 1e6;
    let wakeups: u64 = o.cpus.iter().filter(|c| !c.components.is_empty()).map(|c| c.wakeups).sum();
    let wakeups_per_mb = if mono { 0.0 } else { wakeups as f64 / mb.max(1e-12) };
    // Busy fraction × the live clock's cycles per second / bytes per second.
    let bytes_per_s = (gbps * 1e9 / 8.0).max(1e-9);
    let component_cycles_per_byte =
        o.components.iter().map(|(&k, v)| (k, v.busy * costs.cpu_mhz * 1e6 / bytes_per_s)).collect();
    let cpu_cycles_per_byte: Vec<f64> =
        o.cpus.iter().map(|c| c.busy * costs.cpu_mhz * 1e6 / bytes_per_s).collect();
    let comps_cycles: f64 = o.components.values().map(|v| v.busy * costs.cpu_mhz * 1e6 / bytes_per_s).sum();
    let beside_cycles_per_byte = (cpu_cycles_per_byte.iter().sum::<f64>() - comps_cycles).max(0.0);
    // TCP's jobs are the segments it sent and the ACKs it took.
    let tcp_msgs = o.components.get(&Tcp).map_or(0, |t| t.msgs);
    let acks_per_mb = tcp_msgs.saturating_sub(segments) as f64 / mb.max(1e-12);
    BenchPrediction {
        gbps,
        cpu_s_per_gb: busy * wall_per_gb,
        wakeups_per_mb,
        component_cycles_per_byte,
        cpu_cycles_per_byte,
        beside_cycles_per_byte,
        acks_per_mb,
    }
}

/// [`simulate`], and the segments TCP sent while measuring.
fn run_counting_segments(input: &RunInput<'_>) -> (super::Outcome, u64) {
    let mut sim = super::sim::Sim::new(input);
    sim.run_until(sim.measure_from);
    let before = sim.packets;
    let end = sim.end_ns();
    sim.run_until(end);
    let segments = sim.packets - before;
    (sim.outcome(), segments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyncore_core::profile::ComponentCost;

    /// `PROFILE=path cargo test --release -p dyncore-sim predict_from_profile -- --ignored --nocapture`
    #[test]
    #[ignore = "needs a machine profile with [stack] (PROFILE=path)"]
    fn predict_from_profile() {
        let path = std::env::var("PROFILE").expect("PROFILE=path of a machine profile");
        let p: dyncore_core::profile::MachineProfile =
            toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let costs = p.stack.expect("the profile has a [stack] section");
        costs.validate().unwrap();
        // The application's and receiver's costs are not in a profile:
        // measured by `bench stack`; here, none.
        let threads = LiveThreads {
            app_cycles_per_byte: 0.0,
            app_call_copy_cycles_per_byte: 0.0,
            receiver_cycles_per_byte: 0.0,
            app_chunk: 65536,
            spin_ns: 0,
            mono_send: sum_of(&costs),
            mono_receive: sum_of(&costs),
        };
        for l in [LiveLayout::Mono, LiveLayout::Spread, LiveLayout::Consolidated] {
            let r = predict_bench(&costs, l, 1460, 65535, &threads);
            eprintln!("{l:?}: {:.2} Gbps, {:.2} CPU-s/GB", r.gbps, r.cpu_s_per_gb);
        }
    }

    /// A `bench stack` run's costs through the model again, beside what it
    /// measured (for a model change, before a live run):
    /// `RESULTS=out/bench-stack/results.json cargo test --release -p dyncore-sim predict_from_bench_results -- --ignored --nocapture`
    #[test]
    #[ignore = "needs a bench stack results.json (RESULTS=path)"]
    fn predict_from_bench_results() {
        let path = std::env::var("RESULTS").expect("RESULTS=path of a bench stack results.json");
        let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let costs: StackCosts = serde_json::from_value(j["stack_costs"]["costs"].clone()).unwrap();
        let threads: LiveThreads = serde_json::from_value(j["threads_beside_the_stack"].clone()).unwrap();
        let mss = j["mtu"].as_u64().unwrap() as u32 - 40;
        let was = j["sim_against_live"].as_array().unwrap();
        for (l, w) in [LiveLayout::Mono, LiveLayout::Spread, LiveLayout::Consolidated].into_iter().zip(was) {
            let r = predict_bench(&costs, l, mss, 256 << 10, &threads);
            eprintln!(
                "{l:?}: {:.2} Gbps ({:+.0}% against the measured {:.2}; the run predicted {:.2}), {:.1} wake-ups per MB (live {})",
                r.gbps,
                100.0 * (r.gbps / w["measured_gbps"].as_f64().unwrap() - 1.0),
                w["measured_gbps"].as_f64().unwrap(),
                w["predicted_gbps"].as_f64().unwrap(),
                r.wakeups_per_mb,
                w["wakeups_per_mb"].get(1).map_or("-".into(), |v| format!("{:.1}", v.as_f64().unwrap()))
            );
            eprintln!(
                "  cycles per byte: per CPU {:?}, per component {:?}; ACKs per MB {:.1}",
                r.cpu_cycles_per_byte, r.component_cycles_per_byte, r.acks_per_mb
            );
        }
    }

    /// A profile as `bench stack --write-profile` would write it.
    fn fixture() -> StackCosts {
        let c = |p, b| ComponentCost { cycles_per_packet: p, cycles_per_byte: b };
        StackCosts {
            cpu_mhz: 2100.0,
            channel_cycles_per_msg: 150.0,
            wakeup_ns: 5000.0,
            syscall: c(400.0, 0.0),
            tcp: c(1500.0, 0.5),
            ip: c(600.0, 0.0),
            filter: c(200.0, 0.0),
            driver: c(500.0, 0.1),
        }
    }

    /// TCP, IP and the driver together: a stand-in for the monolithic
    /// stack's costs where a test has no measured ones.
    fn sum_of(p: &StackCosts) -> ComponentCost {
        ComponentCost {
            cycles_per_packet: p.tcp.cycles_per_packet + p.ip.cycles_per_packet + p.driver.cycles_per_packet,
            cycles_per_byte: p.tcp.cycles_per_byte + p.ip.cycles_per_byte + p.driver.cycles_per_byte,
        }
    }

    fn threads(app: f64, receiver: f64) -> LiveThreads {
        LiveThreads {
            app_cycles_per_byte: app,
            app_call_copy_cycles_per_byte: 0.0,
            receiver_cycles_per_byte: receiver,
            app_chunk: 65536,
            spin_ns: 0,
            mono_send: ComponentCost { cycles_per_packet: 1800.0, cycles_per_byte: 0.4 },
            mono_receive: ComponentCost { cycles_per_packet: 1200.0, cycles_per_byte: 0.2 },
        }
    }

    #[test]
    fn a_polling_monolithic_stack_goes_as_fast_as_its_cycles_allow() {
        let p = fixture();
        let t = threads(0.0, 0.0);
        let r = predict_bench(&p, LiveLayout::Mono, 1448, 1 << 20, &t);
        // One busy CPU: per segment the monolithic stack's sending cost
        // (not the split components': it passes no messages between its
        // layers), plus its share of an ACK's trip back up (the receiver
        // ACKs after it drained the segments waiting for it); at 2100 MHz.
        let seg = t.mono_send.cycles(1448);
        let acks_per_segment = r.acks_per_mb * 1448.0 / 1e6;
        assert!(acks_per_segment > 0.0 && acks_per_segment <= 0.5 + 1e-3, "{r:?}");
        let ack = acks_per_segment * t.mono_send.cycles_per_packet;
        let want = 2100e6 / (seg + ack) * 1448.0 * 8.0 / 1e9;
        assert!((r.gbps / want - 1.0).abs() < 0.03, "{r:?} vs {want}");
        // The split components' costs do not enter it.
        let dear = StackCosts {
            tcp: ComponentCost { cycles_per_packet: 9000.0, cycles_per_byte: 3.0 },
            ..fixture()
        };
        assert_eq!(predict_bench(&dear, LiveLayout::Mono, 1448, 1 << 20, &t).gbps, r.gbps);
        // Two polling threads, all the time: 2 CPU-seconds per second.
        assert!((r.cpu_s_per_gb - 2.0 * 8.0 / r.gbps).abs() < 1e-9);
        // The application's work runs in the same thread: its cycles per
        // byte add to every segment's.
        let app = 3.0;
        let slow = predict_bench(&p, LiveLayout::Mono, 1448, 1 << 20, &threads(app, 0.0));
        let ack = slow.acks_per_mb * 1448.0 / 1e6 / acks_per_segment * ack;
        let want = 2100e6 / (seg + ack + app * 1448.0) * 1448.0 * 8.0 / 1e9;
        assert!((slow.gbps / want - 1.0).abs() < 0.03, "{slow:?} vs {want}");
    }

    /// The receiver is a monolithic stack: a dearer receiving end slows a
    /// configuration whose receiver limits it.
    #[test]
    fn the_receiver_runs_the_monolithic_stacks_receive_cost() {
        let p = fixture();
        let t = threads(0.0, 0.0);
        let dear = LiveThreads {
            mono_receive: ComponentCost { cycles_per_packet: 20_000.0, cycles_per_byte: 4.0 },
            ..t
        };
        let a = predict_bench(&p, LiveLayout::Mono, 1448, 256 << 10, &t);
        let b = predict_bench(&p, LiveLayout::Mono, 1448, 256 << 10, &dear);
        // 20 000 + 4 × 1448 cycles a segment at 2100 MHz: at most 0.94 Gbps.
        let bound = 2100e6 / (20_000.0 + 4.0 * 1448.0) * 1448.0 * 8.0 / 1e9;
        assert!(b.gbps < a.gbps && b.gbps <= bound * 1.01, "{a:?} {b:?} {bound}");
    }

    /// Spread, the application and the receiver share the stack's two
    /// CPUs: their work takes turns with the components'.
    #[test]
    fn work_beside_the_stack_on_its_cpus_slows_it() {
        let p = fixture();
        let alone = predict_bench(&p, LiveLayout::Spread, 1448, 1 << 20, &threads(0.0, 0.0));
        let shared = predict_bench(&p, LiveLayout::Spread, 1448, 1 << 20, &threads(2.0, 2.0));
        assert!(shared.gbps < 0.95 * alone.gbps, "{alone:?} against {shared:?}");
    }

    /// With turns that drain every waiting message (the live hosts'), the
    /// consolidated CPU stays busy through a stream and never pays a
    /// wake-up (the fixture's 5 µs), while the spread ones sleep between
    /// messages: consolidating wins, as `bench stack` measures live (B3
    /// above B2 in every quiet run of 2026-11-26).
    #[test]
    fn consolidating_avoids_the_wake_ups_that_spreading_pays() {
        let t = threads(0.0, 0.0);
        let p = fixture();
        let spread = predict_bench(&p, LiveLayout::Spread, 1448, 1 << 20, &t);
        let cons = predict_bench(&p, LiveLayout::Consolidated, 1448, 1 << 20, &t);
        assert!(cons.gbps > spread.gbps, "{spread:?} {cons:?}");
        assert!(spread.wakeups_per_mb > 10.0 * cons.wakeups_per_mb, "{spread:?} {cons:?}");
        // A faster clock in the profile (same cycles) predicts more.
        let fast = StackCosts { cpu_mhz: 4200.0, ..fixture() };
        assert!(predict_bench(&fast, LiveLayout::Spread, 1448, 1 << 20, &t).gbps > spread.gbps);
    }

    /// The application's chunk reaches the syscall server as one send
    /// call: the server pays its call and its reply per chunk (as the live
    /// server counts its messages), not a message per segment.
    #[test]
    fn the_syscall_server_pays_per_send_call_not_per_segment() {
        let p = fixture();
        let r = predict_bench(&p, LiveLayout::Consolidated, 1448, 1 << 20, &threads(1.0, 1.0));
        let syscall = r.component_cycles_per_byte.iter().find(|c| c.0 == ComponentKind::Syscall).unwrap().1;
        // Two messages per 64 KiB chunk, and one turn cost at most each
        // (1000 cycles at the model's 2267 MHz, 926 at the fixture's 2100).
        let per_call = 2.0 * p.syscall.cycles_per_packet / 65536.0;
        let with_turns = per_call + 2.0 * 1000.0 * 2100.0 / 2267.0 / 65536.0;
        assert!(syscall >= 0.97 * per_call && syscall <= 1.03 * with_turns, "{syscall} against {per_call}");
        // A message per segment costs ten times more.
        let per_segment = p.syscall.cycles_per_packet / 1448.0;
        assert!(syscall < per_segment / 10.0, "{r:?}");
    }

    /// The receiver acknowledges once it has drained its segments (and at
    /// least two are unacknowledged): with a window of four segments it
    /// takes two to four at a time and ACKs each such batch; with a 1 MiB
    /// window, sharing a CPU with the application, it takes the segments
    /// that queued during the application's chunk together and ACKs once
    /// for them.
    #[test]
    fn the_receiver_acknowledges_after_it_drained_its_segments() {
        let p = fixture();
        let per_mb = 1e6 / 1448.0;
        let t = threads(1.0, 1.0);
        let small = predict_bench(&p, LiveLayout::Consolidated, 1448, 4 * 1448, &t);
        assert!(
            small.acks_per_mb >= per_mb / 4.0 * 0.95 && small.acks_per_mb <= per_mb / 2.0 * 1.05,
            "{small:?}"
        );
        let large = predict_bench(&p, LiveLayout::Consolidated, 1448, 1 << 20, &t);
        assert!(large.acks_per_mb < per_mb / 8.0 && large.acks_per_mb > 0.0, "{large:?}");
    }

    /// The live costs hold the components' channel operations: a
    /// component's busy cycles per byte in the model are its measured cost
    /// per message times its messages, whatever the channel cost.
    #[test]
    fn a_measured_cost_is_not_charged_a_channel_on_top() {
        let t = threads(1.0, 1.0);
        let cheap = StackCosts { channel_cycles_per_msg: 0.0, ..fixture() };
        let dear = StackCosts { channel_cycles_per_msg: 5000.0, ..fixture() };
        let a = predict_bench(&cheap, LiveLayout::Consolidated, 1448, 1 << 20, &t);
        let b = predict_bench(&dear, LiveLayout::Consolidated, 1448, 1 << 20, &t);
        assert_eq!(a, b);
        // IP: one message per segment and per ACK, 600 cycles each, and at
        // most a turn cost (926 cycles at 2100 MHz) per message.
        let ip = a.component_cycles_per_byte.iter().find(|c| c.0 == ComponentKind::Ip).unwrap().1;
        let msgs_per_byte = 1.0 / 1448.0 + a.acks_per_mb / 1e6;
        assert!(ip >= 0.97 * 600.0 * msgs_per_byte && ip <= 1.03 * (600.0 + 926.0) * msgs_per_byte, "{a:?}");
    }

    /// The syscall server takes a send call once its chunk fits in TCP's
    /// send buffer, as the live TCP replies when it has copied the whole
    /// chunk: with a buffer of one chunk the application's making of the
    /// next chunk waits for the last to be sent and acknowledged, with four
    /// it overlaps the stack's sending.
    #[test]
    fn a_send_call_waits_for_room_in_the_send_buffer() {
        let p = fixture();
        let t = threads(3.0, 0.0);
        let one = predict_bench(&p, LiveLayout::Consolidated, 1448, 65536, &t);
        let four = predict_bench(&p, LiveLayout::Consolidated, 1448, 4 * 65536, &t);
        assert!(one.gbps < 0.8 * four.gbps, "{one:?} {four:?}");
    }
}
