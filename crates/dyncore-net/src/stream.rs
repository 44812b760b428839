//! The end-to-end check: a seeded pseudo-random byte stream, and a running,
//! position-aware hash of it computed at both ends.
//!
//! Byte `i` of the stream for `seed` is byte `i % 8` (little-endian) of
//! `splitmix64(seed + i / 8)`, so any position can be generated on its own
//! and the receiver can say where a stream first went wrong.
//!
//! The hash chains 8-byte words in stream order, `h = mix(h ^ word_k)`, and
//! finishes with the length, so it depends on every byte *and* its position:
//! a dropped or duplicated byte shifts every later word and the length, and
//! two swapped bytes change the words they sit in. Both ends hash what went
//! through their socket calls; equal [`Digest`]s mean the receiver got
//! exactly the bytes the sender sent, in order (up to a 2^-64 collision).
//! The tests at the bottom show each kind of damage changes the digest.

/// What one end saw: how many bytes, and their hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Digest {
    pub bytes: u64,
    pub hash: u64,
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, hash {:016x}", self.bytes, self.hash)
    }
}

/// SplitMix64's output function: a bijection on u64 with good avalanche.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Generates the stream for a seed, from position 0 on.
#[derive(Debug, Clone)]
pub struct StreamGen {
    seed: u64,
    pos: u64,
}

impl StreamGen {
    pub fn new(seed: u64) -> Self {
        StreamGen { seed, pos: 0 }
    }

    /// Byte `pos` of the stream for `seed`.
    pub fn byte_at(seed: u64, pos: u64) -> u8 {
        splitmix64(seed.wrapping_add(pos / 8)).to_le_bytes()[(pos % 8) as usize]
    }

    /// Bytes generated so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Fills `buf` with the next `buf.len()` bytes of the stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut rest = buf;
        // Up to the next word boundary, byte by byte.
        while !self.pos.is_multiple_of(8) && !rest.is_empty() {
            rest[0] = Self::byte_at(self.seed, self.pos);
            rest = &mut rest[1..];
            self.pos += 1;
        }
        let mut words = rest.chunks_exact_mut(8);
        for w in &mut words {
            w.copy_from_slice(&splitmix64(self.seed.wrapping_add(self.pos / 8)).to_le_bytes());
            self.pos += 8;
        }
        for b in words.into_remainder() {
            *b = Self::byte_at(self.seed, self.pos);
            self.pos += 1;
        }
    }
}

/// The running hash (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct StreamHash {
    h: u64,
    bytes: u64,
    /// The current, incomplete word (bytes `bytes & !7 ..`), little-endian.
    partial: u64,
}

impl StreamHash {
    pub fn new() -> Self {
        StreamHash::default()
    }

    fn absorb(&mut self, word: u64) {
        self.h = splitmix64(self.h ^ word);
    }

    pub fn update(&mut self, data: &[u8]) {
        let mut rest = data;
        while !self.bytes.is_multiple_of(8) && !rest.is_empty() {
            self.partial |= u64::from(rest[0]) << (8 * (self.bytes % 8));
            self.bytes += 1;
            rest = &rest[1..];
            if self.bytes.is_multiple_of(8) {
                let w = std::mem::take(&mut self.partial);
                self.absorb(w);
            }
        }
        let mut words = rest.chunks_exact(8);
        for w in &mut words {
            self.absorb(u64::from_le_bytes(w.try_into().expect("chunks of 8")));
            self.bytes += 8;
        }
        for &b in words.remainder() {
            self.partial |= u64::from(b) << (8 * (self.bytes % 8));
            self.bytes += 1;
        }
    }

    /// The digest of everything so far (the hash can go on afterwards).
    pub fn digest(&self) -> Digest {
        let mut h = self.h;
        if !self.bytes.is_multiple_of(8) {
            h = splitmix64(h ^ self.partial);
        }
        Digest { bytes: self.bytes, hash: splitmix64(h ^ self.bytes) }
    }
}

/// Compares received bytes with the stream, byte by byte, and remembers
/// where they first differ (a diagnosis the digests cannot give).
#[derive(Debug, Clone)]
pub struct StreamVerifier {
    expected: StreamGen,
    scratch: Vec<u8>,
    first_mismatch: Option<u64>,
}

impl StreamVerifier {
    pub fn new(seed: u64) -> Self {
        StreamVerifier { expected: StreamGen::new(seed), scratch: Vec::new(), first_mismatch: None }
    }

    pub fn update(&mut self, data: &[u8]) {
        let at = self.expected.position();
        self.scratch.resize(data.len(), 0);
        self.expected.fill(&mut self.scratch);
        if self.first_mismatch.is_none()
            && let Some(i) = data.iter().zip(&self.scratch).position(|(a, b)| a != b)
        {
            self.first_mismatch = Some(at + i as u64);
        }
    }

    /// Offset of the first byte that differs from the stream, if any.
    pub fn first_mismatch(&self) -> Option<u64> {
        self.first_mismatch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(seed: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        StreamGen::new(seed).fill(&mut v);
        v
    }

    fn digest(data: &[u8]) -> Digest {
        let mut h = StreamHash::new();
        h.update(data);
        h.digest()
    }

    #[test]
    fn generation_does_not_depend_on_chunking() {
        let whole = stream(5, 1000);
        let mut g = StreamGen::new(5);
        let mut pieces = Vec::new();
        for n in [1, 3, 8, 13, 64, 911] {
            let mut b = vec![0; n];
            g.fill(&mut b);
            pieces.extend(b);
        }
        assert_eq!(pieces, whole);
        assert!((0..1000).all(|i| StreamGen::byte_at(5, i as u64) == whole[i]));
        assert_ne!(stream(6, 1000), whole, "another seed, another stream");
    }

    #[test]
    fn the_hash_does_not_depend_on_chunking() {
        let data = stream(1, 4099);
        let whole = digest(&data);
        let mut h = StreamHash::new();
        let mut at = 0;
        for n in [1, 2, 5, 8, 9, 100, 3000, 974] {
            h.update(&data[at..at + n]);
            at += n;
        }
        assert_eq!(at, data.len());
        assert_eq!(h.digest(), whole);
        assert_eq!(whole.bytes, 4099);
    }

    #[test]
    fn the_check_fails_when_a_byte_is_dropped_duplicated_or_swapped() {
        let good = stream(42, 10_000);
        let reference = digest(&good);
        let verify = |data: &[u8]| {
            let mut v = StreamVerifier::new(42);
            v.update(data);
            v.first_mismatch()
        };
        assert_eq!(verify(&good), None);
        // At several positions, including word boundaries and the ends.
        for at in [0, 1, 7, 8, 4096, 9_998] {
            let mut dropped = good.clone();
            dropped.remove(at);
            let mut duplicated = good.clone();
            duplicated.insert(at, good[at]);
            let mut swapped = good.clone();
            swapped.swap(at, at + 1);
            // Swapping equal bytes would change nothing: pick a pair that differs.
            assert_ne!(good[at], good[at + 1], "test data: bytes {at} and {} are equal", at + 1);
            for (what, bad) in [("dropped", &dropped), ("duplicated", &duplicated), ("swapped", &swapped)] {
                assert_ne!(digest(bad), reference, "a {what} byte at {at} went unnoticed");
                let m = verify(bad).unwrap_or_else(|| panic!("verifier missed a {what} byte at {at}"));
                assert!(m >= at as u64, "{what} at {at}: mismatch reported at {m}");
            }
            // A duplicated byte equal to its neighbour is caught by the length.
            assert_ne!(digest(&duplicated).bytes, reference.bytes);
        }
        // Reordering whole 8-byte words (what a segment reorder would do).
        let mut words = good.clone();
        let (a, b) = words.split_at_mut(8);
        a.swap_with_slice(&mut b[..8]);
        assert_ne!(digest(&words), reference);
    }
}
