//! The three calls of the Sidecore paper's Figure 1, each with a sidecall
//! path ([`Service::serve`]) and a trap path ([`Service::trap`]):
//!
//! * [`NullService`]: returns at once; trap = a null system call (`getppid`).
//! * [`QueryService`]: the answer to a CPUID leaf; trap = CPUID in the
//!   caller (a VM exit under a hypervisor); sidecall = a lookup in the leaves
//!   the service read once when it was made.
//! * [`StateService`]: entry updates of a page-table-like [`RadixMap`];
//!   trap = the caller updates the map under its lock ([`StateTrap::Lock`]),
//!   or additionally changes the protection of a real page with `mprotect`
//!   ([`StateTrap::Mprotect`]), a real kernel page-table update.
//!
//! Invariant: both paths of a service compute the same answer (tests check
//! it), so switching the sidecore off changes cost, never results.

use std::sync::Mutex;

use super::Service;

/// Returns immediately.
#[derive(Debug, Default)]
pub struct NullService;

impl Service for NullService {
    type Request = ();
    type Reply = u64;

    fn serve(&self, _req: &()) -> u64 {
        0
    }

    fn trap(&self, _req: &()) -> u64 {
        // A real, uncached system call (rustix issues the raw syscall).
        let _ = rustix::process::getppid();
        0
    }
}

/// A CPUID request: leaf (EAX) and sub-leaf (ECX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuidLeaf {
    pub leaf: u32,
    pub subleaf: u32,
}

/// A CPUID answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuidRegs {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
}

/// Executes CPUID (a VM exit when running under a hypervisor). Off x86_64
/// there is no CPUID and the answer is all zeros.
pub fn cpuid(q: CpuidLeaf) -> CpuidRegs {
    #[cfg(target_arch = "x86_64")]
    {
        let r = core::arch::x86_64::__cpuid_count(q.leaf, q.subleaf);
        CpuidRegs { eax: r.eax, ebx: r.ebx, ecx: r.ecx, edx: r.edx }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = q;
        CpuidRegs::default()
    }
}

/// Answers CPUID queries from leaves read once.
#[derive(Debug)]
pub struct QueryService {
    /// Answers for basic leaves `0..basic` then extended leaves
    /// `0x8000_0000..0x8000_0000 + extended`, `SUBLEAVES` sub-leaves each:
    /// an O(1) index, no search.
    table: Vec<CpuidRegs>,
    basic: u32,
    extended: u32,
}

/// Sub-leaves cached per leaf (enough for leaves 4, 7, 0xb, 0xd).
const SUBLEAVES: u32 = 4;
/// At most this many leaves cached per range.
const MAX_LEAVES: u32 = 0x40;
const EXT_BASE: u32 = 0x8000_0000;

impl QueryService {
    /// Reads every basic and extended leaf (sub-leaves 0..4) once.
    ///
    /// Per-CPU fields (the APIC id in leaf 1 EBX, leaf 0xb EDX) are those of
    /// the CPU this runs on, as a hypervisor's cached answers would be.
    pub fn new() -> Self {
        let count = |base: u32| {
            let max = cpuid(CpuidLeaf { leaf: base, subleaf: 0 }).eax;
            if max < base { 0 } else { (max - base + 1).min(MAX_LEAVES) }
        };
        let (basic, extended) = (count(0), count(EXT_BASE));
        let mut table = Vec::with_capacity(((basic + extended) * SUBLEAVES) as usize);
        for (base, n) in [(0, basic), (EXT_BASE, extended)] {
            for leaf in base..base + n {
                for subleaf in 0..SUBLEAVES {
                    table.push(cpuid(CpuidLeaf { leaf, subleaf }));
                }
            }
        }
        QueryService { table, basic, extended }
    }

    /// Number of cached (leaf, sub-leaf) answers.
    pub fn cached(&self) -> usize {
        self.table.len()
    }

    fn index(&self, q: &CpuidLeaf) -> Option<usize> {
        if q.subleaf >= SUBLEAVES {
            return None;
        }
        let row = if q.leaf < self.basic {
            q.leaf
        } else if q.leaf >= EXT_BASE && q.leaf - EXT_BASE < self.extended {
            self.basic + (q.leaf - EXT_BASE)
        } else {
            return None;
        };
        Some((row * SUBLEAVES + q.subleaf) as usize)
    }
}

impl Default for QueryService {
    fn default() -> Self {
        QueryService::new()
    }
}

impl Service for QueryService {
    type Request = CpuidLeaf;
    type Reply = CpuidRegs;

    /// A lookup; a leaf that was not read at start is executed here, on the
    /// sidecore (the paper's sidecore executes CPUID on the guest's behalf).
    fn serve(&self, q: &CpuidLeaf) -> CpuidRegs {
        match self.index(q) {
            Some(i) => self.table[i],
            None => cpuid(*q),
        }
    }

    fn trap(&self, q: &CpuidLeaf) -> CpuidRegs {
        cpuid(*q)
    }
}

/// One page-table entry update: set the entry for `vaddr` to `pte`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PteUpdate {
    pub vaddr: u64,
    pub pte: u64,
}

const LEVELS: u32 = 4;
const BITS: u32 = 9;
const FANOUT: usize = 1 << BITS;
const PAGE_SHIFT: u32 = 12;

/// A 4-level radix map of a simulated 48-bit address space with 4 KiB
/// pages (x86-64 page-table shape): 9 index bits per level.
///
/// Invariant: inner nodes have `FANOUT` child slots and no entries; leaves
/// have `FANOUT` entries and no children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RadixMap {
    root: Node,
    /// Non-zero entries.
    present: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    children: Vec<Option<Box<Node>>>,
    ptes: Vec<u64>,
}

impl Node {
    fn new(level: u32) -> Node {
        if level == 0 {
            Node { children: Vec::new(), ptes: vec![0; FANOUT] }
        } else {
            Node { children: (0..FANOUT).map(|_| None).collect(), ptes: Vec::new() }
        }
    }
}

fn index(vaddr: u64, level: u32) -> usize {
    ((vaddr >> (PAGE_SHIFT + BITS * level)) as usize) & (FANOUT - 1)
}

impl RadixMap {
    pub fn new() -> Self {
        RadixMap { root: Node::new(LEVELS - 1), present: 0 }
    }

    /// Sets the entry for `vaddr` (bits above 48 ignored); returns the old one.
    pub fn set(&mut self, vaddr: u64, pte: u64) -> u64 {
        let mut node = &mut self.root;
        for level in (1..LEVELS).rev() {
            debug_assert!(node.ptes.is_empty(), "inner node with entries");
            node = node.children[index(vaddr, level)].get_or_insert_with(|| Box::new(Node::new(level - 1)));
        }
        debug_assert!(node.children.is_empty(), "leaf with children");
        let old = std::mem::replace(&mut node.ptes[index(vaddr, 0)], pte);
        self.present = self.present + usize::from(pte != 0) - usize::from(old != 0);
        old
    }

    /// The entry for `vaddr` (0 if none).
    pub fn get(&self, vaddr: u64) -> u64 {
        let mut node = &self.root;
        for level in (1..LEVELS).rev() {
            match &node.children[index(vaddr, level)] {
                Some(n) => node = n,
                None => return 0,
            }
        }
        node.ptes[index(vaddr, 0)]
    }

    /// Number of non-zero entries.
    pub fn present(&self) -> usize {
        self.present
    }
}

impl Default for RadixMap {
    fn default() -> Self {
        RadixMap::new()
    }
}

/// The trap path of [`StateService`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateTrap {
    /// The caller updates the map under its lock.
    Lock,
    /// As `Lock`, plus an `mprotect` of a real page (read-only when the
    /// entry's writable bit 1 is clear): a real kernel page-table update.
    Mprotect,
}

/// One anonymous page whose protection the `Mprotect` trap changes.
struct Page {
    addr: usize,
}

impl Page {
    fn new() -> std::io::Result<Page> {
        use rustix::mm::{MapFlags, ProtFlags, mmap_anonymous};
        // SAFETY: a fresh private anonymous mapping at an address the kernel
        // chooses aliases nothing.
        let p = unsafe {
            mmap_anonymous(std::ptr::null_mut(), PAGE, ProtFlags::READ | ProtFlags::WRITE, MapFlags::PRIVATE)?
        };
        Ok(Page { addr: p as usize })
    }

    fn protect(&self, writable: bool) {
        use rustix::mm::{MprotectFlags, mprotect};
        let flags = if writable { MprotectFlags::READ | MprotectFlags::WRITE } else { MprotectFlags::READ };
        // SAFETY: `addr` is our own page-aligned mapping of `PAGE` bytes,
        // never accessed through references, so changing its protection
        // cannot invalidate any Rust reference.
        let r = unsafe { mprotect(self.addr as *mut _, PAGE, flags) };
        debug_assert!(r.is_ok(), "mprotect of our own page failed: {r:?}");
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping, which nothing references.
        let _ = unsafe { rustix::mm::munmap(self.addr as *mut _, PAGE) };
    }
}

const PAGE: usize = 4096;

/// Owns a [`RadixMap`] and applies [`PteUpdate`]s; replies with the old entry.
///
/// The map sits behind a mutex so both paths can reach it; with the sidecore
/// on, only the sidecore takes it, so the lock never contends.
pub struct StateService {
    map: Mutex<RadixMap>,
    trap: StateTrap,
    page: Page,
}

impl StateService {
    pub fn new(trap: StateTrap) -> std::io::Result<Self> {
        Ok(StateService { map: Mutex::new(RadixMap::new()), trap, page: Page::new()? })
    }

    /// A copy of the map (for checking after a run).
    pub fn snapshot(&self) -> RadixMap {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn apply(&self, u: &PteUpdate) -> u64 {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).set(u.vaddr, u.pte)
    }
}

impl Service for StateService {
    type Request = PteUpdate;
    type Reply = u64;

    fn serve(&self, u: &PteUpdate) -> u64 {
        self.apply(u)
    }

    fn trap(&self, u: &PteUpdate) -> u64 {
        if self.trap == StateTrap::Mprotect {
            self.page.protect(u.pte & 0b10 != 0);
        }
        self.apply(u)
    }
}
