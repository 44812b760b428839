//! Ctrl-C, SIGTERM and SIGHUP for work that has nothing to pass them on to
//! (a simulator run, a bench): the process ends at once with 128 + the
//! signal, as it would without a handler, but first removes what it was
//! writing (staged report folders, `.tmp` files, report folders made and
//! still empty: `dyncore_report::outdir::InProgress`). Without this, a
//! Ctrl-C during a report's writing left `.NAME.tmp-PID/` or `index.md.tmp`
//! beside the reports (until the next run into the folder removed them),
//! and one during a bench an empty `bench-*/`.
//!
//! A watcher thread waits on the handler's flag; the work itself is not
//! interrupted, so no half-written state is visible to it. Dropping the
//! guard stops the watcher and restores the previous handlers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dyncore_runtime::arbiter::{Signals, interrupt_name, signal_status};

/// While it lives, a signal removes the work in progress and ends the
/// process.
pub struct CleanExit {
    _signals: Option<Signals>,
    done: Arc<AtomicBool>,
}

impl CleanExit {
    /// Installs the handlers and the watcher. Where handlers are installed
    /// already (a run that handles signals itself), does nothing.
    pub fn install() -> CleanExit {
        let done = Arc::new(AtomicBool::new(false));
        let Ok(signals) = Signals::install() else { return CleanExit { _signals: None, done } };
        let (stop, signal) = (signals.stop_flag(), signals.signal_flag());
        let watching = done.clone();
        std::thread::spawn(move || {
            while !watching.load(Ordering::Acquire) {
                if stop.load(Ordering::Acquire) {
                    let sig = signal.load(Ordering::Acquire);
                    let removed = dyncore_report::outdir::abandon_in_progress();
                    let what = if removed > 0 {
                        format!("; removed {removed} unfinished report file(s) or folder(s)")
                    } else {
                        String::new()
                    };
                    eprintln!("\ninterrupted by {}{what}", interrupt_name(sig));
                    std::process::exit(i32::from(signal_status(sig)));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        CleanExit { _signals: Some(signals), done }
    }
}

impl Drop for CleanExit {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
    }
}
