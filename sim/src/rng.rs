//! A tiny deterministic PRNG (SplitMix64) and hashing helpers, so runs repeat for a seed.

/// SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

/// Mixes a 64-bit value (SplitMix64 finaliser).
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a list of words into one seed.
pub fn hash(parts: &[u64]) -> u64 {
    parts
        .iter()
        .fold(0x1234_5678_9ABC_DEF0, |acc, &p| mix(acc ^ mix(p)))
}

/// A uniform value in [0, 1) derived from a list of words.
pub fn unit(parts: &[u64]) -> f64 {
    (hash(parts) >> 11) as f64 / (1u64 << 53) as f64
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(mix(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}
