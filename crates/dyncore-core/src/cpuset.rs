//! `CpuSet`: a growable bitset of CPU numbers.
//!
//! Linux's `cpumask_t` is a fixed bitmap sized by `NR_CPUS`; dyncore's set grows
//! on demand so that the same type serves a 2-CPU laptop and a 4096-CPU
//! simulated machine. The text form is Linux's *cpulist* format
//! (`0-3,8,10-11`), the same one `/sys/devices/system/cpu/online` and cgroup
//! `cpuset.cpus` use, so sets round-trip through sysfs unchanged.
//!
//! Invariants: `words` never ends in a zero word, so two sets with the same
//! members are equal (`==`, `Hash`) whatever their history; and every member
//! is below [`CpuSet::MAX_CPUS`], so a set never holds more than 8 KiB of
//! words, whatever a cpulist asks for (asserted on insert; parsing refuses
//! larger numbers with an error instead).

use std::fmt;
use std::str::FromStr;

/// A CPU number: a runtime or simulated CPU, or a real Linux CPU, as context says.
pub type CpuId = usize;

const WORD_BITS: usize = 64;

/// A set of CPUs. Cheap to clone for small machines (one word per 64 CPUs).
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// CPU numbers are below this (65 536, 1024 words). Linux's own limit
    /// (`NR_CPUS`) is at most 8192, and the simulator's largest machine is
    /// smaller still; the bound exists so that a typo such as
    /// `"100000000000000"` is refused instead of allocating terabytes.
    pub const MAX_CPUS: usize = 1 << 16;

    /// The empty set.
    pub const fn new() -> Self {
        CpuSet { words: Vec::new() }
    }

    /// The set `{lo, lo+1, …, hi-1}` (empty if `hi <= lo`), filled a word at
    /// a time rather than CPU by CPU.
    pub fn range(lo: CpuId, hi: CpuId) -> Self {
        let mut s = CpuSet::new();
        s.insert_range(lo, hi);
        s
    }

    /// Adds `{lo, …, hi-1}`, a word at a time.
    pub fn insert_range(&mut self, lo: CpuId, hi: CpuId) {
        if hi <= lo {
            return;
        }
        assert!(hi <= Self::MAX_CPUS, "CPU {} is not below CpuSet::MAX_CPUS", hi - 1);
        let last_word = (hi - 1) / WORD_BITS;
        if self.words.len() <= last_word {
            self.words.resize(last_word + 1, 0);
        }
        for w in lo / WORD_BITS..=last_word {
            // Bits [from, to) of word w.
            let from = lo.saturating_sub(w * WORD_BITS).min(WORD_BITS);
            let to = (hi - w * WORD_BITS).min(WORD_BITS);
            let upto = |n: usize| if n == WORD_BITS { u64::MAX } else { (1u64 << n) - 1 };
            self.words[w] |= upto(to) & !upto(from);
        }
    }

    /// The set with exactly one CPU.
    pub fn single(cpu: CpuId) -> Self {
        let mut s = CpuSet::new();
        s.insert(cpu);
        s
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Adds `cpu`; returns whether it was absent.
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        assert!(cpu < Self::MAX_CPUS, "CPU {cpu} is not below CpuSet::MAX_CPUS");
        let (w, b) = (cpu / WORD_BITS, cpu % WORD_BITS);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        let was = self.words[w] & (1 << b) != 0;
        self.words[w] |= 1 << b;
        !was
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&mut self, cpu: CpuId) -> bool {
        let (w, b) = (cpu / WORD_BITS, cpu % WORD_BITS);
        if w >= self.words.len() {
            return false;
        }
        let was = self.words[w] & (1 << b) != 0;
        self.words[w] &= !(1 << b);
        self.trim();
        was
    }

    pub fn contains(&self, cpu: CpuId) -> bool {
        let (w, b) = (cpu / WORD_BITS, cpu % WORD_BITS);
        self.words.get(w).is_some_and(|x| x & (1 << b) != 0)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Lowest CPU in the set (Chameleon's representative CPU of an object).
    pub fn first(&self) -> Option<CpuId> {
        self.words
            .iter()
            .enumerate()
            .find(|(_, w)| **w != 0)
            .map(|(i, w)| i * WORD_BITS + w.trailing_zeros() as usize)
    }

    /// Highest CPU in the set.
    pub fn last(&self) -> Option<CpuId> {
        let i = self.words.len().checked_sub(1)?;
        Some(i * WORD_BITS + (WORD_BITS - 1 - self.words[i].leading_zeros() as usize))
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(i * WORD_BITS + b)
            })
        })
    }

    fn zip_with(&self, other: &CpuSet, f: impl Fn(u64, u64) -> u64) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let mut s = CpuSet {
            words: (0..n)
                .map(|i| f(self.words.get(i).copied().unwrap_or(0), other.words.get(i).copied().unwrap_or(0)))
                .collect(),
        };
        s.trim();
        s
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        self.zip_with(other, |a, b| a | b)
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        self.zip_with(other, |a, b| a & b)
    }

    /// Members of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        self.zip_with(other, |a, b| a & !b)
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words.iter().enumerate().all(|(i, &a)| a & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    pub fn is_disjoint(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).all(|(a, b)| a & b == 0)
    }

    /// Removes every CPU.
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// Removes every member of `other`.
    pub fn remove_all(&mut self, other: &CpuSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
        self.trim();
    }

    /// The lowest member that is also in `within` (if given), not in `not`
    /// and not `except`, found a word at a time.
    pub fn first_where(&self, within: Option<&CpuSet>, not: &CpuSet, except: Option<CpuId>) -> Option<CpuId> {
        self.words.iter().enumerate().find_map(|(i, &w)| {
            let mut w = w & !not.words.get(i).copied().unwrap_or(0);
            if let Some(within) = within {
                w &= within.words.get(i).copied().unwrap_or(0);
            }
            if let Some(e) = except.filter(|e| e / WORD_BITS == i) {
                w &= !(1u64 << (e % WORD_BITS));
            }
            (w != 0).then(|| i * WORD_BITS + w.trailing_zeros() as usize)
        })
    }

    /// Adds every member of `other`.
    pub fn extend_from(&mut self, other: &CpuSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> Self {
        let mut s = CpuSet::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

/// Linux cpulist format: `0-3,8`. The empty set prints as the empty string.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi = it.next().unwrap_or(hi);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet{{{self}}}")
    }
}

/// Error from parsing a cpulist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseCpuSetError(pub String);

impl fmt::Display for ParseCpuSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad CPU list: {}", self.0)
    }
}

impl std::error::Error for ParseCpuSetError {}

/// Parses Linux cpulist format (`0-3,8`, whitespace ignored, empty = empty
/// set). CPU numbers must be below [`CpuSet::MAX_CPUS`]; ranges are filled a
/// word at a time, so even `0-65535` costs 1024 word writes.
impl FromStr for CpuSet {
    type Err = ParseCpuSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut set = CpuSet::new();
        for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let num = |t: &str| {
                let t = t.trim();
                if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
                    // All digits: only the size can be wrong.
                    match t.parse::<CpuId>() {
                        Ok(n) if n < CpuSet::MAX_CPUS => return Ok(n),
                        _ => {
                            return Err(ParseCpuSetError(format!(
                                "CPU {t} is too large: CPU numbers are below {}",
                                CpuSet::MAX_CPUS
                            )));
                        }
                    }
                }
                Err(ParseCpuSetError(format!("`{t}` in `{s}` is not a CPU number")))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(ParseCpuSetError(format!("range `{part}` runs backwards")));
                    }
                    set.insert_range(a, b + 1);
                }
                None => {
                    set.insert(num(part)?);
                }
            }
        }
        Ok(set)
    }
}

impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_1024_and_more_cpus() {
        let mut s = CpuSet::new();
        assert!(s.insert(1023));
        assert!(s.insert(4095));
        assert!(!s.insert(4095));
        assert_eq!(s.len(), 2);
        assert_eq!(s.first(), Some(1023));
        assert_eq!(s.last(), Some(4095));
        assert!(s.remove(4095));
        assert_eq!(s.last(), Some(1023));
        assert!(s.remove(1023));
        assert!(s.is_empty());
        assert_eq!(s, CpuSet::new(), "trailing zero words are trimmed");
    }

    #[test]
    fn cpulist_round_trip() {
        let s: CpuSet = "0-3, 8,10-11".parse().unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert_eq!("".parse::<CpuSet>().unwrap(), CpuSet::new());
        assert!("3-1".parse::<CpuSet>().is_err());
        assert!("x".parse::<CpuSet>().is_err());
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::range(0, 4); // {0,1,2,3}
        let b = CpuSet::range(2, 70); // {2..69}
        assert_eq!(a.intersection(&b), CpuSet::range(2, 4));
        assert_eq!(a.difference(&b), CpuSet::range(0, 2));
        assert_eq!(a.union(&b), CpuSet::range(0, 70));
        assert!(CpuSet::range(2, 4).is_subset(&a));
        assert!(a.is_disjoint(&CpuSet::range(4, 8)));
        let mut c = b.clone();
        c.remove_all(&CpuSet::range(60, 80));
        assert_eq!(c, CpuSet::range(2, 60));
        // {2..69} minus {0..3}, except 4, within {0..100}: 5.
        assert_eq!(b.first_where(Some(&CpuSet::range(0, 100)), &a, Some(4)), Some(5));
        assert_eq!(b.first_where(None, &CpuSet::range(0, 69), None), Some(69));
        assert_eq!(b.first_where(Some(&a), &a, None), None);
    }

    #[test]
    fn cpu_numbers_are_bounded_and_ranges_are_cheap() {
        let e = "100000000000000".parse::<CpuSet>().unwrap_err();
        assert!(e.to_string().contains("too large") && e.to_string().contains("65536"), "{e}");
        assert!("0-100000000000000".parse::<CpuSet>().is_err());
        assert!("65536".parse::<CpuSet>().is_err());
        assert!("99999999999999999999999".parse::<CpuSet>().unwrap_err().to_string().contains("too large"));
        assert!("-1".parse::<CpuSet>().is_err());
        let all: CpuSet = "0-65535".parse().unwrap();
        assert_eq!((all.len(), all.first(), all.last()), (65536, Some(0), Some(65535)));
        assert_eq!(CpuSet::range(5, 5), CpuSet::new());
        assert_eq!(CpuSet::range(7, 3), CpuSet::new());
    }

    proptest::proptest! {
        #[test]
        fn insert_range_matches_inserting_one_by_one(lo in 0usize..300, len in 0usize..300) {
            let hi = lo + len;
            let mut one_by_one = CpuSet::new();
            for c in lo..hi {
                one_by_one.insert(c);
            }
            proptest::prop_assert_eq!(CpuSet::range(lo, hi), one_by_one);
        }

        #[test]
        fn iter_matches_contains(cpus in proptest::collection::btree_set(0usize..2048, 0..64)) {
            let s: CpuSet = cpus.iter().copied().collect();
            proptest::prop_assert_eq!(s.iter().collect::<Vec<_>>(), cpus.iter().copied().collect::<Vec<_>>());
            proptest::prop_assert_eq!(s.len(), cpus.len());
            let back: CpuSet = s.to_string().parse().unwrap();
            proptest::prop_assert_eq!(back, s);
        }

        #[test]
        fn first_where_is_the_lowest_match(
            a in proptest::collection::btree_set(0usize..300, 0..40),
            within in proptest::collection::btree_set(0usize..300, 0..200),
            not in proptest::collection::btree_set(0usize..300, 0..40),
            except in 0usize..300,
        ) {
            let set = |x: &std::collections::BTreeSet<usize>| x.iter().copied().collect::<CpuSet>();
            let (sa, sw, sn) = (set(&a), set(&within), set(&not));
            let want = a.iter().copied().find(|c| within.contains(c) && !not.contains(c) && *c != except);
            proptest::prop_assert_eq!(sa.first_where(Some(&sw), &sn, Some(except)), want);
            let mut diff = sa.clone();
            diff.remove_all(&sn);
            proptest::prop_assert_eq!(diff, sa.difference(&sn));
        }
    }
}
