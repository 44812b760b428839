//! The one guard that tests on real CPUs hold, so that no two of them ever
//! run at once.
//!
//! A test that starts a [`Runtime`](crate::cpu::Runtime), pins a thread,
//! gives a thread real-time priority, or measures the work done on real
//! CPUs competes for this machine's few CPUs with every other such test.
//! Two of them at once on a 2-CPU machine share each real CPU: a duty cycle
//! then measures the other test as much as its own, and a real-time worker
//! of one test starves the other's. So each such test starts with
//!
//! ```ignore
//! let _cpus = dyncore_runtime::testing::real_cpus();
//! ```
//!
//! and holds the guard to its end. The guard is
//!
//! 1. a process-wide lock, so that no two tests of one test binary overlap
//!    (cargo runs the binaries themselves one after another), and
//! 2. an exclusive `flock` on `$TMPDIR/dyncore-real-cpus.lock`, so that no
//!    two test *processes* overlap either: `cargo nextest` runs each test in
//!    a process of its own, and two checkouts may test on one machine.
//! 3. a wait while a dyncore run that is no test's holds CPUs (a user's
//!    `dyncore exec` beside `cargo test`): the product's own claim, which
//!    a test's arbiter would find taken. It waits up to 15 minutes
//!    (`DYNCORE_TEST_CLAIM_WAIT_S`), saying so once, then fails naming the
//!    run: a test never fails at once on another user's run.
//!
//! **Invariant, asserted:** inside a cargo test binary, nothing starts a
//! runtime (or a stack host) unless the thread that starts it holds a guard
//! ([`assert_held_here`]), and nothing pins a thread or sets real-time
//! priority unless the process holds one ([`assert_held`]; the runtime's
//! workers pin themselves on threads of their own). A test that forgets the
//! guard fails at once, every time, with a message naming this module,
//! instead of failing at random when it happens to overlap another. A test that runs
//! the test binary itself as a child (to send it a signal, say) while it
//! holds the guard marks the child's command with [`held_by_parent`]; the
//! child then takes the process-wide lock but not the file lock, which its
//! parent holds.
//!
//! What such a test may assert is in docs/architecture.md, "Tests on real
//! CPUs": behaviour and invariants, work ratios from what each thread
//! really received, never wall-clock time.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufReader, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The environment variable by which a parent test that holds the guard
/// tells a child test process that the file lock is already held for it.
pub const HELD_BY_PARENT: &str = "DYNCORE_REAL_CPUS_HELD_BY_PARENT";

/// Within this process.
static LOCAL: Mutex<()> = Mutex::new(());
/// How many guards this process holds (0 or 1, by the lock).
static HELD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// How many guards this thread holds (a guard cannot leave its thread:
    /// it holds a `MutexGuard`, which is not `Send`).
    static HELD_HERE: Cell<usize> = const { Cell::new(0) };
}

/// Held by a test while it uses real CPUs; see the module doc.
#[must_use = "the guard protects only while it is held: bind it (`let _cpus = ...`)"]
pub struct RealCpus {
    // Dropped in this order: the count first, then the file lock, then
    // the process's lock.
    _file: Option<File>,
    _local: MutexGuard<'static, ()>,
}

impl Drop for RealCpus {
    fn drop(&mut self) {
        HELD_HERE.with(|h| h.set(h.get() - 1));
        HELD.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Takes the real-CPU guard, waiting (and saying so on stderr) while
/// another test or test process holds it.
pub fn real_cpus() -> RealCpus {
    // A test that failed while holding the lock poisons it; the next test
    // is not thereby wrong, so the poison is ignored.
    let local = LOCAL.lock().unwrap_or_else(|e| e.into_inner());
    let file = if std::env::var_os(HELD_BY_PARENT).is_some() { None } else { Some(lock_file()) };
    if file.is_some() {
        wait_for_other_runs();
    }
    HELD.fetch_add(1, Ordering::SeqCst);
    HELD_HERE.with(|h| h.set(h.get() + 1));
    RealCpus { _file: file, _local: local }
}

/// Marks `cmd`, a child test process started while this process holds the
/// guard, as covered by it (see the module doc).
pub fn held_by_parent(cmd: &mut std::process::Command) -> &mut std::process::Command {
    assert!(
        HELD.load(Ordering::SeqCst) > 0,
        "held_by_parent without holding dyncore_runtime::testing::real_cpus()"
    );
    cmd.env(HELD_BY_PARENT, "1")
}

/// A child test process started by [`start_child_test`].
pub struct ChildTest {
    pub child: std::process::Child,
    /// Its standard output after the line it printed when ready.
    pub lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    /// The words it printed after `READY ` on that line.
    pub ready: Vec<String>,
}

/// Starts `cmd` (this test binary, [`held_by_parent`]) running the ignored
/// test `name` alone, its standard output piped and its standard error
/// dropped, and waits for the line the child prints when it is ready:
/// `READY ` and words. Panics if the child ends before.
pub fn start_child_test(cmd: &mut std::process::Command, name: &str) -> ChildTest {
    use std::io::BufRead as _;
    let mut child = cmd
        .args(["--ignored", "--exact", name, "--nocapture", "--test-threads=1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting the child test {name}: {e}"));
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    // The test harness prints "test NAME ... " before the child's output.
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("READY "))
        .expect("the child never got ready");
    let ready =
        ready.split("READY ").nth(1).unwrap_or_default().split_whitespace().map(String::from).collect();
    ChildTest { child, lines, ready }
}

/// What a test needed that this machine lacks, for [`skip`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// At least this many CPUs this process may use.
    Cpus(usize),
    /// Writable cgroups (root, and a v1 or v2 layout with the controllers).
    Cgroups,
    /// Root.
    Root,
    /// Writable sysfs CPU hotplug.
    Hotplug,
    /// A program in `PATH`.
    Tool,
    /// A headless browser that starts (Chromium, installed by CI where it
    /// can be: never required).
    Browser,
}

impl Need {
    /// Whether `DYNCORE_TEST_REQUIRE` (a comma-separated list: `cgroups`,
    /// `root`, `hotplug`, `tool`, `cpus:N`) says this machine has it.
    fn required(self, list: &str) -> bool {
        list.split(',').map(str::trim).any(|want| match (self, want) {
            (Need::Cpus(n), w) => {
                w.strip_prefix("cpus:").and_then(|v| v.parse::<usize>().ok()).is_some_and(|m| n <= m)
            }
            (Need::Cgroups, "cgroups")
            | (Need::Root, "root")
            | (Need::Hotplug, "hotplug")
            | (Need::Tool, "tool") => true,
            _ => false,
        })
    }
}

/// Says, in one line on stderr (`skipped: ...`), what this machine lacks
/// for (part of) a test, which then skips it; appends the line to the file
/// `DYNCORE_TEST_SKIPS` names, if set (CI prints them all at the end). A
/// skip is a failure (it panics with the same line) where the machine is
/// known to have what is missing: everywhere under `DYNCORE_TEST_STRICT=1`
/// (the VM rig's guests), and for the needs `DYNCORE_TEST_REQUIRE` lists
/// (`.ci/run` on its host: root, cgroups, 2 CPUs, the tools it installs).
pub fn skip(need: Need, missing: &str) {
    let line = format!("skipped: {missing}");
    if std::env::var_os("DYNCORE_TEST_STRICT").is_some_and(|v| v == "1") {
        panic!("{line} (DYNCORE_TEST_STRICT=1: a skip fails)");
    }
    if let Ok(list) = std::env::var("DYNCORE_TEST_REQUIRE")
        && need.required(&list)
    {
        panic!("{line} (DYNCORE_TEST_REQUIRE={list}: this machine is known to have it, so a skip fails)");
    }
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("DYNCORE_TEST_SKIPS")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        // One write of the whole line: tests skip from threads at once, and
        // an append of one write is not interleaved with another's.
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let _ = f.write_all(format!("{test}: {line}\n").as_bytes());
    }
}

/// Waits for `child` to exit (polling every 10 ms); panics after `limit`.
pub fn wait_exit(child: &mut std::process::Child, limit: std::time::Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().expect("waiting for the child") {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "the child did not exit");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// How long a test waits for a dyncore run outside the tests to end
/// (`DYNCORE_TEST_CLAIM_WAIT_S`, default 900 s).
fn claim_wait() -> std::time::Duration {
    let s = std::env::var("DYNCORE_TEST_CLAIM_WAIT_S").ok().and_then(|v| v.parse().ok()).unwrap_or(900);
    std::time::Duration::from_secs(s)
}

/// Waits while a dyncore run that is not a test's (a user's `dyncore exec`
/// on this machine) holds CPUs, saying so once on stderr: a test on real
/// CPUs would find them taken (`Overlap`) and fail on another user's run.
/// Tests hold the lock above, so a claim alive now is not another test's.
/// After [`claim_wait`], panics naming the run: the test cannot run here.
fn wait_for_other_runs() {
    let state = crate::arbiter::SystemPaths::default().state_dir;
    let start = std::time::Instant::now();
    let mut said = false;
    loop {
        let me = std::process::id();
        let others: Vec<String> = crate::arbiter::registry::claims_now(&state)
            .into_iter()
            .filter(|(_, _, pid)| *pid != Some(me))
            .map(|(name, cpus, pid)| {
                format!("run {name}{} on CPUs {cpus}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())
            })
            .collect();
        if others.is_empty() {
            return;
        }
        let runs = others.join(", ");
        assert!(
            start.elapsed() < claim_wait(),
            "another dyncore run holds this machine's CPUs ({runs}) for more than {} s: this test needs them; \
             run the tests when it has ended (DYNCORE_TEST_CLAIM_WAIT_S sets the wait)",
            claim_wait().as_secs()
        );
        if !said {
            let _ = writeln!(
                std::io::stderr(),
                "waiting for {runs} to end: a dyncore run outside the tests holds CPUs (up to {} s)",
                claim_wait().as_secs()
            );
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn lock_path() -> PathBuf {
    std::env::temp_dir().join("dyncore-real-cpus.lock")
}

fn lock_file() -> File {
    let path = lock_path();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open the real-CPU test lock {}: {e}", path.display()));
    if flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_err() {
        let _ = writeln!(
            std::io::stderr(),
            "waiting for the real-CPU test lock {} (another test process holds it)",
            path.display()
        );
        flock(&file, libc::LOCK_EX)
            .unwrap_or_else(|e| panic!("cannot lock the real-CPU test lock {}: {e}", path.display()));
    }
    file
}

fn flock(file: &File, op: i32) -> std::io::Result<()> {
    loop {
        // SAFETY: the descriptor is open for the duration of the call;
        // flock takes no pointers.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether this process is a cargo test binary: an executable named
/// `<crate>-<16 hex digits>` in a profile's `deps` folder
/// (`target/debug/deps/dyncore_runtime-0123456789abcdef`). The `dyncore`
/// command itself, even when a test runs it, lives in the profile folder,
/// not in `deps`.
fn under_cargo_test() -> bool {
    static UNDER: OnceLock<bool> = OnceLock::new();
    *UNDER.get_or_init(|| std::env::current_exe().map(|p| is_test_binary(&p)).unwrap_or(false))
}

/// Whether this process is a cargo test binary (see `under_cargo_test`):
/// checks that must fail a test, and only report elsewhere, ask it.
pub fn in_test_binary() -> bool {
    under_cargo_test()
}

fn is_test_binary(exe: &std::path::Path) -> bool {
    let in_deps = exe.parent().and_then(|d| d.file_name()).is_some_and(|d| d == "deps");
    let hashed = exe
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.rsplit_once('-'))
        .is_some_and(|(_, hash)| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()));
    in_deps && hashed
}

/// Panics when this process is a cargo test binary and holds no guard:
/// `what` (pinning a thread, real-time priority) would then run beside
/// other tests on the same real CPUs. Free outside tests.
pub fn assert_held(what: &str) {
    if HELD.load(Ordering::SeqCst) == 0 && under_cargo_test() {
        missing(what);
    }
}

/// Panics when this process is a cargo test binary and the calling thread
/// holds no guard: `what` (starting a runtime or a stack host) would then
/// run beside other tests on the same real CPUs, whether or not another
/// test holds the guard at this moment. Free outside tests.
pub fn assert_held_here(what: &str) {
    if HELD_HERE.with(Cell::get) == 0 && under_cargo_test() {
        missing(what);
    }
}

fn missing(what: &str) -> ! {
    panic!(
        "{what} inside a test that does not hold the real-CPU guard: start the test with \
         `let _cpus = dyncore_runtime::testing::real_cpus();` (see dyncore_runtime::testing)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_need_is_named_by_its_class() {
        let list = "root, cgroups,cpus:2";
        assert!(Need::Cpus(2).required(list) && Need::Cpus(1).required(list));
        assert!(!Need::Cpus(8).required(list));
        assert!(Need::Cgroups.required(list) && Need::Root.required(list));
        assert!(!Need::Hotplug.required(list) && !Need::Tool.required(""));
    }

    #[test]
    fn test_binaries_are_told_from_the_command() {
        use std::path::Path;
        assert!(is_test_binary(Path::new("/w/target/debug/deps/dyncore_runtime-0123456789abcdef")));
        assert!(is_test_binary(Path::new("target/release/deps/hosting-a976a4ff0982b01b")));
        assert!(!is_test_binary(Path::new("/w/target/debug/dyncore")));
        assert!(!is_test_binary(Path::new("/opt/deps/dyncore")));
        assert!(!is_test_binary(Path::new("/opt/deps/my-tool-1.2")));
        assert!(under_cargo_test(), "this very test runs in a test binary");
    }

    #[test]
    fn the_guard_is_counted_while_held_and_taken_again_after_a_panic() {
        {
            let _g = real_cpus();
            assert!(HELD.load(Ordering::SeqCst) >= 1);
            assert_held("a check");
            assert_held_here("a check");
            // Another thread of the process is covered for pinning, not
            // for starting a runtime of its own.
            std::thread::spawn(|| {
                assert_held("pinning");
                assert!(std::panic::catch_unwind(|| assert_held_here("a runtime")).is_err());
            })
            .join()
            .unwrap();
        }
        // A test that panics with the guard does not block the next one.
        let r = std::thread::spawn(|| {
            let _g = real_cpus();
            panic!("a failing test");
        })
        .join();
        assert!(r.is_err());
        let _g = real_cpus();
        assert_held_here("a check after a panic");
    }
}
