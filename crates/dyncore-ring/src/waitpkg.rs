//! UMONITOR/UMWAIT (`waitpkg`): energy-efficient polling of one cache line
//! from user mode, the user-level cousin of the MONITOR/MWAIT that the
//! Sidecore and NewtOS papers ask for.
//!
//! Detected at run time with CPUID leaf 7, sub-leaf 0, ECX bit 5 (stable
//! `is_x86_feature_detected!` has no `waitpkg` name). The instructions are
//! emitted with inline assembly so no `target_feature` is needed at build
//! time; they only ever run after detection. Elsewhere (other
//! architectures, loom) [`available`] is `false` and callers spin instead.

/// Whether this CPU offers UMONITOR/UMWAIT.
#[cfg(all(target_arch = "x86_64", not(dyncore_loom)))]
pub fn available() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        // CPUID is always present on x86_64; leaf 7 exists if leaf 0 says so.
        let max_leaf = core::arch::x86_64::__cpuid(0).eax;
        max_leaf >= 7 && (core::arch::x86_64::__cpuid_count(7, 0).ecx & (1 << 5)) != 0
    })
}

/// Whether this CPU offers UMONITOR/UMWAIT (never, off x86_64 or under loom).
#[cfg(not(all(target_arch = "x86_64", not(dyncore_loom))))]
pub fn available() -> bool {
    false
}

/// Cycles an UMWAIT may sleep before the caller re-checks (about a
/// microsecond at 3 GHz). Short, because a write that lands between the
/// caller's check and UMONITOR is only noticed at the deadline.
#[cfg(all(target_arch = "x86_64", not(dyncore_loom)))]
const UMWAIT_CYCLES: u64 = 3_000;

/// Sleeps in the light C0.1 state until `word`'s cache line is written or a
/// short deadline passes. Only call when [`available`] is `true`.
#[cfg(all(target_arch = "x86_64", not(dyncore_loom)))]
pub(crate) fn wait_for_write(word: &std::sync::atomic::AtomicU32) {
    debug_assert!(available(), "UMWAIT used without waitpkg");
    // SAFETY: `available()` established that the CPU implements UMONITOR and
    // UMWAIT (callers check it first). UMONITOR only arms address monitoring
    // of a valid, live address (a reference); UMWAIT reads EDX:EAX as a TSC
    // deadline and ECX bit 0 = 1 (C0.1), writes only CF (declared by not
    // passing `preserves_flags`), and touches no memory.
    unsafe {
        let deadline = core::arch::x86_64::_rdtsc().wrapping_add(UMWAIT_CYCLES);
        core::arch::asm!("umonitor {addr}", addr = in(reg) word.as_ptr(), options(nostack));
        core::arch::asm!(
            "umwait {ctrl:e}",
            ctrl = in(reg) 1u32,
            in("eax") deadline as u32,
            in("edx") (deadline >> 32) as u32,
            options(nostack),
        );
    }
}

/// Never called where [`available`] is `false`.
#[cfg(not(all(target_arch = "x86_64", not(dyncore_loom))))]
pub(crate) fn wait_for_write(_word: &crate::sync::AtomicU32) {
    crate::sync::spin_loop();
}
