//! The TUN wire: a split stack talking to the Linux kernel's own TCP in a
//! network namespace the code creates and removes. Needs root; where the
//! probe fails, each test says why and skips.

use std::net::SocketAddrV4;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::host::Threads;
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::wire::linux_peer;
use dyncore_net::wire::tun::{self, LINUX_ADDR, STACK_ADDR, TunNet};

const LIMIT: Duration = Duration::from_secs(60);
const PORT: u16 = 5201;
const SEED: u64 = 77;

/// `Some(reason)` when this machine cannot run TUN tests.
fn unavailable() -> Option<String> {
    tun::probe().err().map(|e| e.to_string())
}

macro_rules! require_tun {
    () => {
        if let Some(why) = unavailable() {
            dyncore_runtime::testing::skip(dyncore_runtime::testing::Need::Root, &why);
            return;
        }
    };
}

fn stack_on(net_port: tun::TunEnd) -> Stack {
    Stack::build(&StackConfig::new(STACK_ADDR), std::sync::Arc::new(net_port))
}

fn assert_gone(net_name: &str, dev: &str) {
    assert!(!tun::namespaces().iter().any(|n| n == net_name), "namespace {net_name} left behind");
    assert!(!tun::link_exists(dev), "device {dev} left behind");
}

#[test]
fn the_split_stack_sends_to_linux_tcp() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    require_tun!();
    let total = 4 << 20;
    let (net, port) = TunNet::create(1500).unwrap();
    let (ns, dev) = (net.namespace().to_string(), net.device().to_string());
    let cancel = Arc::new(AtomicBool::new(false));
    let linux = linux_peer::receiver(&net, PORT, LIMIT, cancel.clone()).unwrap();
    let mut stack = stack_on(port);
    let sender: Box<dyn App> =
        Box::new(Sender::new(stack.sockets.remove(0), (LINUX_ADDR, PORT), total, SEED));
    let host = Threads::start(stack.blueprints, vec![sender]);
    let finished = host.wait_apps(LIMIT);
    let run = host.stop();
    cancel.store(true, Ordering::Release);
    let got = linux.join().unwrap();
    assert!(finished, "the stream did not finish: {:?}", run.apps[0].error());
    assert_eq!(run.apps[0].error(), None);
    let sent = run.apps[0].report().digest;
    assert_eq!(sent.bytes, total);
    assert_eq!(got.unwrap(), sent, "Linux received other bytes than the stack sent");
    drop(run);
    drop(net);
    assert_gone(&ns, &dev);
}

#[test]
fn the_split_stack_receives_from_linux_tcp() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    require_tun!();
    let total = 4 << 20;
    let (net, port) = TunNet::create(1500).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let mut stack = stack_on(port);
    let receiver: Box<dyn App> = Box::new(Receiver::new(stack.sockets.remove(0), PORT, Some(SEED)));
    let host = Threads::start(stack.blueprints, vec![receiver]);
    let linux =
        linux_peer::sender(&net, SocketAddrV4::new(STACK_ADDR, PORT), total, SEED, LIMIT, cancel.clone());
    let finished = host.wait_apps(LIMIT);
    let run = host.stop();
    cancel.store(true, Ordering::Release);
    let sent = linux.join().unwrap();
    assert!(finished, "the stream did not finish: {:?}", run.apps[0].error());
    assert_eq!(sent.unwrap(), run.apps[0].report().digest, "the stack received other bytes than Linux sent");
    // The Linux side's checksums passed the IP component's verification.
    let ip = run.components[2].component();
    assert_eq!(ip.counters().get("bad_tcp_checksum"), 0);
    assert!(ip.counters().get("received") > total / 1500);
}

#[test]
fn nothing_is_left_behind_after_a_drop_or_a_panic() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    require_tun!();
    let (net, _port) = TunNet::create(1500).unwrap();
    let (ns, dev) = (net.namespace().to_string(), net.device().to_string());
    assert!(tun::namespaces().contains(&ns));
    drop(net);
    assert_gone(&ns, &dev);
    let (tx, rx) = std::sync::mpsc::channel();
    let r = std::thread::spawn(move || {
        let (net, port) = TunNet::create(1500).unwrap();
        tx.send((net.namespace().to_string(), net.device().to_string())).unwrap();
        let _keep = (net, port);
        panic!("a failure with the namespace up");
    })
    .join();
    assert!(r.is_err());
    let (ns, dev) = rx.recv().unwrap();
    assert_gone(&ns, &dev);
}

/// Run by [`ctrl_c_closes_the_stream_and_removes_the_namespace`] in a child
/// process: a stream to Linux that runs until Ctrl-C.
#[test]
#[ignore = "run by ctrl_c_closes_the_stream_and_removes_the_namespace in a child process"]
fn ctrl_c_child() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cancel = Arc::new(AtomicBool::new(false));
    let c = cancel.clone();
    ctrlc::set_handler(move || c.store(true, Ordering::Release)).unwrap();
    let (net, port) = TunNet::create(1500).unwrap();
    let peer_cancel = Arc::new(AtomicBool::new(false));
    let linux = linux_peer::receiver(&net, PORT, LIMIT, peer_cancel.clone()).unwrap();
    let mut stack = stack_on(port);
    let sender =
        Sender::new(stack.sockets.remove(0), (LINUX_ADDR, PORT), u64::MAX, SEED).cancel_on(cancel.clone());
    let host = Threads::start(stack.blueprints, vec![Box::new(sender)]);
    println!("READY {} {}", net.namespace(), net.device());
    let finished = host.wait_apps(LIMIT);
    let run = host.stop();
    peer_cancel.store(true, Ordering::Release);
    let got = linux.join().unwrap();
    let sent = run.apps[0].report().digest;
    println!(
        "DONE interrupted={} finished={finished} error={:?} sent={} linux={:?} match={}",
        cancel.load(Ordering::Acquire),
        run.apps[0].error(),
        sent,
        got,
        got.as_ref().ok() == Some(&sent)
    );
}

#[test]
fn ctrl_c_closes_the_stream_and_removes_the_namespace() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    require_tun!();
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    dyncore_runtime::testing::held_by_parent(&mut cmd);
    let dyncore_runtime::testing::ChildTest { mut child, lines, ready } =
        dyncore_runtime::testing::start_child_test(&mut cmd, "ctrl_c_child");
    let (ns, dev) = (ready[0].clone(), ready[1].clone());
    assert!(tun::namespaces().contains(&ns));
    // Let the stream run, then interrupt it.
    std::thread::sleep(Duration::from_millis(300));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    // Read to the end: a child writing to a closed pipe would fail.
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let done = rest.iter().find(|l| l.contains("DONE ")).expect("the child did not finish").clone();
    let status = dyncore_runtime::testing::wait_exit(&mut child, LIMIT);
    assert!(status.success(), "{status}: {done}");
    assert!(done.contains("interrupted=true") && done.contains("error=None"), "{done}");
    // The connection was closed cleanly: Linux got EOF after exactly the
    // bytes the stack sent.
    assert!(done.contains("match=true"), "{done}");
    assert_gone(&ns, &dev);
}

#[test]
fn a_namespace_left_by_a_killed_process_is_removed_by_the_next_run() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    require_tun!();
    // A pid no process has (pid_max is at most 2^22).
    let dead =
        (4_000_000..4_194_304).find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()).unwrap();
    let stale = format!("dyncore-{dead}-0");
    let ok = Command::new("ip").args(["netns", "add", &stale]).status().unwrap();
    assert!(ok.success());
    let (net, _port) = TunNet::create(1500).unwrap();
    assert!(!tun::namespaces().contains(&stale), "the stale namespace {stale} is still there");
    assert!(net.swept().contains(&stale), "the run does not say it removed {stale}: {:?}", net.swept());
    drop(net);
}
