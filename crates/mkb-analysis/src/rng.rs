//! A small, fast, seedable random number generator (xoshiro256++ seeded through SplitMix64)
//! and the few draws the bootstrap and the simulator need. Written here rather than taken from
//! `rand` so that results are bit-for-bit reproducible across dependency upgrades and the
//! bootstrap's inner loop stays cheap in debug builds.

/// xoshiro256++ (Blackman and Vigna). Not cryptographic; statistically strong and fast.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        Rng { s }
    }

    /// A generator for a named sub-stream: the same (seed, key) always gives the same stream,
    /// whatever order the streams are used in (so parallel work stays deterministic).
    pub fn derived(seed: u64, key: &str) -> Rng {
        Rng::new(seed ^ fnv1a(key.as_bytes()).rotate_left(17))
    }

    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[0]
            .wrapping_add(self.s[3])
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform index in `0..n` (Lemire's multiply-shift; the bias is below 2^-40 for the small
    /// `n` used here). `n` must be positive.
    #[inline(always)]
    pub fn index(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    #[inline(always)]
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Standard normal draw (Box-Muller; one of the pair is discarded for simplicity).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// FNV-1a hash of bytes: stable across platforms and releases (unlike `DefaultHasher`).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_seed_sensitive() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let c = Rng::new(8).next_u64();
        assert_eq!(a, b);
        assert_ne!(a[0], c);
        assert_ne!(
            Rng::derived(1, "x").next_u64(),
            Rng::derived(1, "y").next_u64()
        );
    }

    #[test]
    fn moments_of_draws() {
        let mut r = Rng::new(42);
        let n = 200_000;
        let (mut s, mut s2, mut u) = (0.0, 0.0, 0.0);
        let mut counts = [0usize; 7];
        for _ in 0..n {
            let z = r.normal();
            s += z;
            s2 += z * z;
            u += r.uniform();
            counts[r.index(7)] += 1;
        }
        let mean = s / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(mean.abs() < 0.01, "normal mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "normal var {var}");
        assert!((u / n as f64 - 0.5).abs() < 0.005);
        for c in counts {
            let share = c as f64 / n as f64;
            assert!((share - 1.0 / 7.0).abs() < 0.005, "index share {share}");
        }
    }
}
