//! One guest, from request to exit status (the crate doc has the steps).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::initramfs::{self, Cpio};
use crate::kernel::{self, Kernel};
use crate::spec::{Accel, Cgroup, Topology};
use crate::{VmError, accel};

/// What a run asks for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The guest's CPUs.
    pub topology: Topology,
    /// Guest memory in MiB (`None`: 1 GiB, more for many CPUs).
    pub mem_mib: Option<u32>,
    /// The cgroup hierarchy the guest mounts.
    pub cgroup: Cgroup,
    /// KVM, TCG, or whichever boots here.
    pub accel: Accel,
    /// The longest the guest may run, boot included.
    pub timeout: Duration,
    /// Host folders the guest may write (they must exist).
    pub rw: Vec<PathBuf>,
    /// Variables set for the command, beside the rig's own.
    pub env: Vec<(String, String)>,
    /// The command's working folder (a host path; the guest sees the same).
    pub cwd: PathBuf,
    /// The command and its arguments. `dyncore` means this very binary.
    pub argv: Vec<String>,
    /// A bzImage to boot instead of the one `setup` fetched.
    pub kernel: Option<PathBuf>,
    /// Copy the guest's console to stderr as it runs, not only on failure.
    pub console: bool,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command's exit status in the guest (128 + n: killed by signal n).
    pub status: i32,
    /// The accelerator the guest ran on (`Kvm` or `Tcg`).
    pub accel: Accel,
    /// Why `auto` chose TCG, if it did.
    pub accel_note: Option<String>,
    /// The kernel booted.
    pub kernel: String,
    /// From QEMU's start to the guest's init being ready to run the command.
    pub boot: Option<Duration>,
    /// From QEMU's start to its exit.
    pub wall: Duration,
}

/// The host programs the rig runs.
#[derive(Debug, Clone)]
pub struct HostTools {
    /// `qemu-system-x86_64`.
    pub qemu: PathBuf,
    /// QEMU's virtiofs daemon.
    pub virtiofsd: PathBuf,
    /// A static busybox, the guest's init shell.
    pub busybox: PathBuf,
    /// The folders holding QEMU's firmware (SeaBIOS's `bios-256k.bin`).
    pub firmware: Vec<PathBuf>,
}

/// The Debian packages that hold [`HostTools`] (bookworm names).
pub const HOST_PACKAGES: &[&str] = &["qemu-system-x86", "busybox-static", "seabios"];

impl HostTools {
    /// Finds the tools, or says which are missing and which packages hold
    /// them.
    pub fn find() -> Result<HostTools, VmError> {
        let mut missing = Vec::new();
        let qemu = which("qemu-system-x86_64");
        if qemu.is_none() {
            missing.push("qemu-system-x86_64 (package qemu-system-x86)");
        }
        let virtiofsd = ["/usr/lib/qemu/virtiofsd", "/usr/libexec/virtiofsd", "/usr/lib/virtiofsd"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists());
        if virtiofsd.is_none() {
            missing.push("virtiofsd (package qemu-system-common or virtiofsd)");
        }
        let busybox = ["/bin/busybox", "/usr/bin/busybox"].iter().map(PathBuf::from).find(|p| is_static(p));
        if busybox.is_none() {
            missing.push("a static busybox (package busybox-static)");
        }
        let firmware: Vec<PathBuf> = ["/usr/share/seabios", "/usr/share/qemu"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        if !firmware.iter().any(|d| d.join("bios-256k.bin").exists()) {
            missing.push("SeaBIOS's bios-256k.bin (package seabios)");
        }
        if !missing.is_empty() {
            return Err(VmError::Setup(format!(
                "the rig needs {}: run `dyncore vm setup` (as root it installs {})",
                missing.join(", "),
                HOST_PACKAGES.join(" ")
            )));
        }
        Ok(HostTools {
            qemu: qemu.unwrap(),
            virtiofsd: virtiofsd.unwrap(),
            busybox: busybox.unwrap(),
            firmware,
        })
    }

    /// QEMU's version line.
    pub fn qemu_version(&self) -> String {
        Command::new(&self.qemu)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.lines().next().map(str::to_string))
            .unwrap_or_default()
    }
}

/// A file on `PATH` (or the host's `PATH` when `path` is `None`).
fn which_in(name: &str, path: Option<&str>) -> Option<PathBuf> {
    let path = path.map(str::to_string).or_else(|| std::env::var("PATH").ok())?;
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(name)).find(|p| is_executable(p))
}

fn which(name: &str) -> Option<PathBuf> {
    which_in(name, None)
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// An ELF with no program interpreter (`PT_INTERP`): statically linked.
fn is_static(p: &Path) -> bool {
    let Ok(data) = fs::read(p) else { return false };
    data.starts_with(b"\x7fELF") && !data.windows(b"/ld-linux".len()).any(|w| w == b"/ld-linux")
}

static RUNS: AtomicU64 = AtomicU64::new(0);

/// A process the rig started: killed (its whole group) and reaped when
/// dropped, so every way out of [`run`] stops it.
struct Guarded(Option<Child>);

impl Guarded {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("a guarded child is present until dropped")
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            if let Ok(pid) = i32::try_from(c.id()) {
                // SAFETY: kill(2) with a process group id; no memory involved.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `cmd` as a guarded child: its own process group, and SIGKILL when
/// the rig's thread that started it dies (SIGKILL of the rig included).
fn spawn_guarded(cmd: &mut Command) -> std::io::Result<Guarded> {
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only async-signal-safe functions (setpgid, prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            libc::setpgid(0, 0);
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The rig may have died between fork and prctl.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.spawn().map(|c| Guarded(Some(c)))
}

/// Resolves the command's first word as the guest will: `dyncore` is this
/// binary, a path is taken from the working folder, a name is looked up on
/// `PATH`.
fn resolve_command(argv0: &str, cwd: &Path, path: Option<&str>) -> Result<String, VmError> {
    if argv0 == "dyncore"
        && let Ok(me) = std::env::current_exe()
        && me.file_name().is_some_and(|n| n == "dyncore")
    {
        return Ok(me.display().to_string());
    }
    let found = if argv0.contains('/') {
        let p = cwd.join(argv0);
        is_executable(&p).then_some(p)
    } else {
        which_in(argv0, path)
    };
    match found {
        Some(p) => Ok(if argv0.contains('/') { argv0.to_string() } else { p.display().to_string() }),
        None => Err(VmError::BadArgs(format!(
            "the command `{argv0}` is not there: {} (the guest sees the host's files, read-only)",
            if argv0.contains('/') {
                format!("no executable file {}", cwd.join(argv0).display())
            } else {
                format!(
                    "not found on PATH={}",
                    path.map(str::to_string).or_else(|| std::env::var("PATH").ok()).unwrap_or_default()
                )
            }
        ))),
    }
}

/// The variables the guest's command gets, before `--env`.
fn base_env(accel: Accel, topology: &Topology) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into()),
        ),
        ("HOME".to_string(), "/root".to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("TERM".to_string(), "dumb".to_string()),
        ("DYNCORE_VM".to_string(), "1".to_string()),
        ("DYNCORE_VM_ACCEL".to_string(), accel.name().to_string()),
        ("DYNCORE_VM_TOPOLOGY".to_string(), topology.to_string()),
    ];
    for (k, v) in std::env::vars() {
        let pass = k.starts_with("RUST_") || (k.starts_with("DYNCORE_") && !k.starts_with("DYNCORE_VM"));
        if pass {
            env.push((k, v));
        }
    }
    env
}

/// Boots a guest, runs `opts.argv` in it and returns how it ended.
/// `stop` (set by a signal handler) kills the guest and returns
/// [`VmError::Interrupted`] with `signal()`'s value.
pub fn run(
    rig_dir: &Path,
    opts: &Options,
    stop: &AtomicBool,
    signal: &dyn Fn() -> i32,
) -> Result<Outcome, VmError> {
    let Some(argv0) = opts.argv.first() else {
        return Err(VmError::BadArgs("no command to run: give one after `--`".into()));
    };
    let cwd = fs::canonicalize(&opts.cwd)
        .map_err(|e| VmError::BadArgs(format!("the working folder {}: {e}", opts.cwd.display())))?;
    let guest_path = opts.env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str());
    let mut argv = opts.argv.clone();
    argv[0] = resolve_command(argv0, &cwd, guest_path)?;
    let mut rw = Vec::new();
    for d in &opts.rw {
        let c = fs::canonicalize(cwd.join(d)).map_err(|e| {
            VmError::BadArgs(format!("--rw {}: {e} (a writable folder must exist on the host)", d.display()))
        })?;
        if !c.is_dir() || c == Path::new("/") {
            return Err(VmError::BadArgs(format!("--rw {}: not a folder other than /", d.display())));
        }
        rw.push(c);
    }
    let tools = HostTools::find()?;
    let kernel = match &opts.kernel {
        Some(p) => kernel::from_path(p, Some(format!("kernel {} (given with --kernel)", p.display())))?,
        None => kernel::locate(rig_dir)?,
    };
    let (accel, accel_note) = choose_accel(rig_dir, &tools, &kernel, opts, stop, signal)?;
    boot(&tools, &kernel, opts, accel, accel_note, &cwd, &argv, &rw, stop, signal)
}

/// Resolves `auto`: a remembered probe, else a probe boot.
fn choose_accel(
    rig_dir: &Path,
    tools: &HostTools,
    kernel: &Kernel,
    opts: &Options,
    stop: &AtomicBool,
    signal: &dyn Fn() -> i32,
) -> Result<(Accel, Option<String>), VmError> {
    match opts.accel {
        Accel::Kvm => {
            accel::kvm_device().map_err(|e| VmError::Setup(format!("--accel kvm: {e}")))?;
            Ok((Accel::Kvm, None))
        }
        Accel::Tcg => Ok((Accel::Tcg, None)),
        Accel::Auto => {
            if let Err(e) = accel::kvm_device() {
                return Ok((Accel::Tcg, Some(format!("TCG: {e}"))));
            }
            let key = accel::probe_key(&kernel.release, &tools.qemu_version());
            let answer = match accel::remembered(rig_dir, &key) {
                Some(a) => a,
                None => {
                    let probe = Options {
                        topology: Topology::new(1, 1, 1)?,
                        mem_mib: Some(512),
                        cgroup: Cgroup::V2,
                        accel: Accel::Kvm,
                        timeout: Duration::from_secs(60),
                        rw: Vec::new(),
                        env: Vec::new(),
                        cwd: PathBuf::from("/"),
                        argv: vec!["/bin/true".into()],
                        kernel: Some(kernel.vmlinuz.clone()),
                        console: false,
                    };
                    let a = match boot(
                        tools,
                        kernel,
                        &probe,
                        Accel::Kvm,
                        None,
                        Path::new("/"),
                        &probe.argv,
                        &[],
                        stop,
                        signal,
                    ) {
                        Ok(o) if o.status == 0 => Ok(()),
                        Ok(o) => Err(format!("the probe guest exited {}", o.status)),
                        Err(VmError::Interrupted(s)) => return Err(VmError::Interrupted(s)),
                        Err(e) => Err(e.to_string().lines().next().unwrap_or("").to_string()),
                    };
                    accel::remember(rig_dir, &key, &a);
                    a
                }
            };
            Ok(match answer {
                Ok(()) => (Accel::Kvm, None),
                Err(why) => (Accel::Tcg, Some(format!("TCG: a KVM guest does not boot here ({why})"))),
            })
        }
    }
}

/// The run's scratch folder, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Removes the scratch folders of rigs that died without removing theirs
/// (SIGKILL): `dyncore-vm.<pid>.<n>` whose pid is gone.
fn sweep_stale_scratch() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("dyncore-vm.").and_then(|r| r.split('.').next()) else { continue };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Copies what `path` gains to `to` until `done` is set and nothing more
/// comes.
fn forward(path: PathBuf, mut to: Box<dyn Write + Send>, done: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut f: Option<File> = None;
        loop {
            let finished = done.load(Ordering::Acquire);
            if f.is_none() {
                f = File::open(&path).ok();
            }
            let n = f.as_mut().map_or(0, |f| f.read(&mut buf).unwrap_or(0));
            if n > 0 {
                let _ = to.write_all(&buf[..n]);
                let _ = to.flush();
                continue;
            }
            if finished {
                return;
            }
            thread::sleep(Duration::from_millis(15));
        }
    })
}

/// The last `n` lines of a file.
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    // SeaBIOS clears the screen: drop escape sequences and carriage returns.
    let clean: String = text.replace("\x1bc", "").replace('\r', "");
    let lines: Vec<&str> = clean.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A setup step's I/O error, naming what it was for.
fn io(what: &str, e: std::io::Error) -> VmError {
    VmError::Setup(format!("{what}: {e}"))
}

/// A fresh scratch folder for one run (`dyncore-vm.<pid>.<n>` in the
/// temporary folder), after sweeping the ones dead rigs left.
fn scratch_dir() -> Result<Scratch, VmError> {
    sweep_stale_scratch();
    let dir = std::env::temp_dir().join(format!(
        "dyncore-vm.{}.{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| io("the run's scratch folder", e))?;
    Ok(Scratch(dir))
}

/// The files of a run in its scratch folder.
struct RunFiles {
    dir: PathBuf,
    /// The guest's initial root.
    initrd: PathBuf,
    /// virtiofsd's socket, which QEMU connects to.
    sock: PathBuf,
    /// The guest's serial console.
    console: PathBuf,
    /// The guest's stdout, stderr and status ports.
    ports: [PathBuf; 3],
}

impl RunFiles {
    fn in_dir(dir: &Path) -> RunFiles {
        RunFiles {
            dir: dir.to_path_buf(),
            initrd: dir.join("initrd.cpio"),
            sock: dir.join("fs.sock"),
            console: dir.join("console.log"),
            ports: ["stdout", "stderr", "status"].map(|p| dir.join(format!("{p}.port"))),
        }
    }
}

/// Writes the guest's initial root to `path`: busybox, the init script, the
/// command's script (its variables, working folder and argv) and the list
/// of writable folders.
fn write_initrd(
    path: &Path,
    tools: &HostTools,
    opts: &Options,
    accel: Accel,
    cwd: &Path,
    argv: &[String],
    rw: &[PathBuf],
) -> Result<(), VmError> {
    let mut env = base_env(accel, &opts.topology);
    env.extend(opts.env.iter().cloned());
    let script = initramfs::command_script(&env, &cwd.display().to_string(), argv);
    let rw_list: String = rw.iter().map(|p| format!("{}\n", p.display())).collect();
    let busybox = fs::read(&tools.busybox).map_err(|e| io("busybox", e))?;
    let f = std::io::BufWriter::new(File::create(path).map_err(|e| io("initrd", e))?);
    let mut c = Cpio::new(f);
    let w = (|| -> std::io::Result<()> {
        for d in initramfs::DIRS {
            c.dir(d)?;
        }
        c.char_dev("dev/console", 5, 1)?;
        c.file("bin/busybox", 0o755, &busybox)?;
        c.file("init", 0o755, initramfs::INIT.as_bytes())?;
        c.file("cmd.sh", 0o644, script.as_bytes())?;
        c.file("rw.list", 0o644, rw_list.as_bytes())?;
        Ok(())
    })();
    w.and_then(|()| c.finish().map(drop)).map_err(|e| io("writing the initrd", e))
}

/// Starts virtiofsd serving the host's root on `files.sock`, and waits (10
/// s at most) until it listens.
///
/// The host's root is shared read-only (made so by the guest's init;
/// virtiofsd serves it writable so that the --rw folders are).
/// `cache=always`: the guest keeps a file's pages across opens. With
/// `cache=auto`, every open of a file (a compiler opening libc.so) drops
/// its cached pages, mapped ones too, so the next touch of them faults and
/// reads through FUSE, whose reader holds the page locked until it runs
/// again; a user-space scheduler (the sched_ext backend) that faults on a
/// page a task it holds has locked stalls for good. The host's files do not
/// change under a run.
fn start_virtiofsd(tools: &HostTools, files: &RunFiles) -> Result<Guarded, VmError> {
    let dir = &files.dir;
    let sock = &files.sock;
    let mut fsd = spawn_guarded(
        Command::new(&tools.virtiofsd)
            .arg(format!("--socket-path={}", sock.display()))
            .args(["-o", "source=/", "-o", "cache=always", "-o", "sandbox=chroot", "-o", "no_posix_lock"])
            .stdin(Stdio::null())
            .stdout(File::create(dir.join("virtiofsd.log")).map_err(|e| io("virtiofsd log", e))?)
            .stderr(File::create(dir.join("virtiofsd.err")).map_err(|e| io("virtiofsd log", e))?),
    )
    .map_err(|e| io("starting virtiofsd", e))?;
    let t0 = Instant::now();
    while !sock.exists() {
        if let Ok(Some(st)) = fsd.child().try_wait() {
            return Err(VmError::Setup(format!(
                "virtiofsd exited ({st}) before it served the host's root (it needs root): {}",
                tail(&dir.join("virtiofsd.err"), 5)
            )));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(VmError::Setup("virtiofsd did not open its socket in 10 s".into()));
        }
        thread::sleep(Duration::from_millis(10));
    }
    Ok(fsd)
}

/// QEMU's command line for the guest: its accelerator, CPUs and memory,
/// the kernel and initrd with the kernel's command line (the cgroup
/// hierarchy and the accelerator for the guest's init), the console and
/// the ports to their files, and the host's root through virtiofsd. Its
/// output goes to `qemu.log` and `qemu.err` in the scratch folder.
fn qemu_command(
    tools: &HostTools,
    kernel: &Kernel,
    opts: &Options,
    accel: Accel,
    files: &RunFiles,
) -> Result<Command, VmError> {
    let mem = opts.mem_mib.unwrap_or_else(|| (512 + 64 * opts.topology.cpus).max(1024));
    let mut cmdline = format!(
        "console=ttyS0 quiet loglevel=4 panic=-1 oops=panic mitigations=off dyncore.cgroup={} dyncore.accel={}",
        opts.cgroup.name(),
        accel.name()
    );
    if opts.cgroup == Cgroup::V2 {
        cmdline.push_str(" cgroup_no_v1=all");
    }
    let mut q = Command::new(&tools.qemu);
    for fw in &tools.firmware {
        q.arg("-L").arg(fw);
    }
    q.args(["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]);
    match accel {
        Accel::Kvm => q.args(["-accel", "kvm", "-cpu", "host"]),
        _ => q.args(["-accel", "tcg,thread=single", "-cpu", "max,vendor=GenuineIntel"]),
    };
    q.args(opts.topology.qemu_args(mem));
    q.arg("-kernel").arg(&kernel.vmlinuz).arg("-initrd").arg(&files.initrd).arg("-append").arg(&cmdline);
    q.arg("-chardev")
        .arg(format!("file,id=con,path={}", files.console.display()))
        .args(["-serial", "chardev:con"]);
    q.args(["-device", "virtio-serial-pci,id=vser"]);
    for (i, (p, name)) in
        files.ports.iter().zip(["dyncore.stdout", "dyncore.stderr", "dyncore.status"]).enumerate()
    {
        q.arg("-chardev").arg(format!("file,id=port{i},path={}", p.display()));
        q.arg("-device").arg(format!("virtserialport,bus=vser.0,chardev=port{i},name={name}"));
    }
    q.arg("-chardev").arg(format!("socket,id=fs,path={}", files.sock.display()));
    q.args(["-device", "vhost-user-fs-pci,chardev=fs,tag=hostfs,queue-size=1024"]);
    q.stdin(Stdio::null())
        .stdout(File::create(files.dir.join("qemu.log")).map_err(|e| io("qemu log", e))?)
        .stderr(File::create(files.dir.join("qemu.err")).map_err(|e| io("qemu log", e))?);
    Ok(q)
}

/// The guest's failure `what`, with the last lines of its console and of
/// QEMU's errors; the whole console is kept (`dyncore-vm-console.<pid>.log`
/// in the temporary folder), as the scratch folder is removed.
fn keep_console(files: &RunFiles, what: String) -> VmError {
    let kept = std::env::temp_dir().join(format!("dyncore-vm-console.{}.log", std::process::id()));
    let log = fs::copy(&files.console, &kept).ok().map(|_| kept);
    let mut c = tail(&files.console, 25);
    let qerr = tail(&files.dir.join("qemu.err"), 5);
    if !qerr.is_empty() {
        c.push_str(&format!("\n(QEMU: {qerr})"));
    }
    VmError::Guest { what, console: c, log }
}

/// Why a guest that wrote no exit status stopped: its init's error (the
/// status port's `last` line), a kernel panic on its console, QEMU's
/// failure, or an early stop.
fn why_no_status(last: &str, console: &Path, exit: std::process::ExitStatus) -> String {
    let con = fs::read_to_string(console).unwrap_or_default();
    if let Some(e) = last.strip_prefix("init-error ") {
        format!("the guest's init failed: {e}")
    } else if let Some(at) = con.find("Kernel panic - not syncing") {
        let line = con[at..].lines().next().unwrap_or("").trim_end();
        format!("the guest kernel panicked ({line})")
    } else if !exit.success() {
        format!("QEMU exited with {exit} before the guest ran the command")
    } else {
        "the guest stopped before the command finished".to_string()
    }
}

/// Boots a guest on `accel` and runs `argv` (resolved) in it, in `cwd`,
/// with `rw` writable: the initrd, virtiofsd and QEMU started, the guest's
/// stdout and stderr forwarded as they come, until QEMU exits, the timeout
/// passes, KVM fails or `stop` is raised. Returns how it ended.
#[allow(clippy::too_many_arguments)]
fn boot(
    tools: &HostTools,
    kernel: &Kernel,
    opts: &Options,
    accel: Accel,
    accel_note: Option<String>,
    cwd: &Path,
    argv: &[String],
    rw: &[PathBuf],
    stop: &AtomicBool,
    signal: &dyn Fn() -> i32,
) -> Result<Outcome, VmError> {
    let scratch = scratch_dir()?;
    let files = RunFiles::in_dir(&scratch.0);
    write_initrd(&files.initrd, tools, opts, accel, cwd, argv, rw)?;
    let fsd = start_virtiofsd(tools, &files)?;
    for p in &files.ports {
        File::create(p).map_err(|e| io("a port file", e))?;
    }
    let mut q = qemu_command(tools, kernel, opts, accel, &files)?;
    let start = Instant::now();
    let mut qemu = spawn_guarded(&mut q).map_err(|e| io("starting QEMU", e))?;

    let done = Arc::new(AtomicBool::new(false));
    let mut fwd = vec![
        forward(files.ports[0].clone(), Box::new(std::io::stdout()), done.clone()),
        forward(files.ports[1].clone(), Box::new(std::io::stderr()), done.clone()),
    ];
    if opts.console {
        fwd.push(forward(files.console.clone(), Box::new(std::io::stderr()), done.clone()));
    }
    let finish = |fwd: Vec<thread::JoinHandle<()>>| {
        done.store(true, Ordering::Release);
        for h in fwd {
            let _ = h.join();
        }
    };

    let mut boot_time = None;
    let mut last_check = Instant::now();
    let exit = loop {
        if stop.load(Ordering::Acquire) {
            drop(qemu);
            finish(fwd);
            return Err(VmError::Interrupted(signal()));
        }
        if let Ok(Some(st)) = qemu.child().try_wait() {
            break st;
        }
        if start.elapsed() > opts.timeout {
            drop(qemu);
            finish(fwd);
            return Err(keep_console(
                &files,
                format!(
                    "the guest ran past its limit of {} s and was stopped (raise it with --timeout)",
                    opts.timeout.as_secs()
                ),
            ));
        }
        if last_check.elapsed() > Duration::from_millis(250) {
            last_check = Instant::now();
            if boot_time.is_none()
                && fs::read_to_string(&files.ports[2]).is_ok_and(|s| s.starts_with("ready"))
            {
                boot_time = Some(start.elapsed());
            }
            let qerr = fs::read_to_string(files.dir.join("qemu.err")).unwrap_or_default();
            if qerr.contains("KVM internal error") || qerr.contains("emulation failure") {
                drop(qemu);
                finish(fwd);
                return Err(keep_console(
                    &files,
                    format!("the KVM guest died in boot: {}", qerr.lines().next().unwrap_or("")),
                ));
            }
        }
        thread::sleep(Duration::from_millis(20));
    };
    let wall = start.elapsed();
    drop(qemu);
    drop(fsd);
    finish(fwd);
    let status = fs::read_to_string(&files.ports[2]).unwrap_or_default();
    let last = status.lines().last().unwrap_or("");
    if let Some(code) = last.strip_prefix("exit ").and_then(|c| c.trim().parse::<i32>().ok()) {
        drop(scratch);
        return Ok(Outcome {
            status: code,
            accel,
            accel_note,
            kernel: kernel.release.clone(),
            boot: boot_time,
            wall,
        });
    }
    Err(keep_console(&files, why_no_status(last, &files.console, exit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_command_is_named() {
        let e = resolve_command("no-such-command-here", Path::new("/"), Some("/usr/bin:/bin"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`no-such-command-here` is not there"), "{e}");
        assert!(e.contains("PATH=/usr/bin:/bin"), "{e}");
        let e = resolve_command("./nope", Path::new("/tmp"), None).unwrap_err().to_string();
        assert!(e.contains("no executable file /tmp/./nope"), "{e}");
        assert_eq!(resolve_command("sh", Path::new("/"), Some("/bin")).unwrap(), "/bin/sh");
    }

    #[test]
    fn the_guest_env_says_where_it_runs() {
        let env = base_env(Accel::Tcg, &Topology::new(4, 2, 1).unwrap());
        assert!(env.contains(&("DYNCORE_VM_ACCEL".into(), "tcg".into())));
        assert!(env.iter().any(|(k, v)| k == "DYNCORE_VM_TOPOLOGY" && v.contains("2 thread")));
    }
}
