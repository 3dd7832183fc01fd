//! NumPy's `np.random.default_rng(seed)`, which Gymnasium's `reset(seed=...)` uses, bit for
//! bit: `SeedSequence(seed)` hashed into a PCG64 state, and `Generator.uniform`.

use rand_core::Rng as _;
use rand_pcg::Lcg128Xsl64;
use rlgrad_core::{Error, Result};

/// NumPy's `np.random.default_rng(seed)` for an integer seed: the generator Gymnasium
/// builds in `reset(seed=seed)` (`gymnasium.utils.seeding.np_random`).
///
/// `SeedSequence(seed)` splits the seed into little-endian 32-bit words, mixes them into
/// a pool of four words and draws 256 bits from the pool; PCG64 (128-bit LCG, XSL-RR
/// output) takes the first 128 as its state and the last 128 as its stream. Outputs are
/// NumPy's `bit_generator.random_raw()`; [`NumpyRng::next_f64`] is NumPy's
/// `next_double` and [`NumpyRng::uniform`] its `Generator.uniform`. The tests compare
/// them with outputs recorded from NumPy for one- and two-word seeds.
///
/// ```
/// use rlgrad_envs::NumpyRng;
/// // np.random.default_rng(42).uniform(-0.05, 0.05)
/// let mut rng = NumpyRng::new(42);
/// let x = rng.uniform(-0.05, 0.05);
/// assert!((-0.05..0.05).contains(&x));
/// ```
#[derive(Debug, Clone)]
pub struct NumpyRng {
    pcg: Lcg128Xsl64,
    seed: u64,
    draws: u64,
}

/// Where a [`NumpyRng`] stands: the seed it was built from and the number of 64-bit
/// outputs drawn since, which [`NumpyRng::from_state`] replays with PCG's O(log n) jump
/// ahead (the PCG state itself is private to `rand_pcg`). Both are exact integers, so a
/// state survives any lossless serialization.
///
/// ```
/// use rlgrad_envs::NumpyRng;
/// let mut rng = NumpyRng::new(42);
/// rng.next_u64();
/// let mut resumed = NumpyRng::from_state(rng.state());
/// assert_eq!(resumed.next_u64(), rng.next_u64());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NumpyRngState {
    /// The seed given to [`NumpyRng::new`].
    pub seed: u64,
    /// Outputs drawn since (each [`NumpyRng::next_u64`] is one).
    pub draws: u64,
}

/// The words of NumPy's `SeedSequence` pool.
const POOL_SIZE: usize = 4;
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;

/// `SeedSequence`'s hash of one word; `hash_const` advances with every call.
fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut value = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    value = value.wrapping_mul(*hash_const);
    value ^ (value >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let result = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    result ^ (result >> XSHIFT)
}

/// `SeedSequence(seed).pool`: the seed's 32-bit words (`[0]` for zero) mixed into four.
fn seed_sequence_pool(seed: u64) -> [u32; POOL_SIZE] {
    let entropy: &[u32] = &[seed as u32, (seed >> 32) as u32];
    let entropy = if seed >> 32 == 0 {
        &entropy[..1]
    } else {
        entropy
    };
    let mut hash_const = INIT_A;
    let mut pool = [0u32; POOL_SIZE];
    for (i, word) in pool.iter_mut().enumerate() {
        *word = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const);
    }
    for src in 0..POOL_SIZE {
        for dst in 0..POOL_SIZE {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src], &mut hash_const));
            }
        }
    }
    // Entropy beyond the pool size would be mixed in here; a u64 has at most two words.
    pool
}

/// `SeedSequence.generate_state(4, np.uint64)`: eight words drawn by cycling the pool,
/// paired little-endian into four u64.
fn generate_state(pool: &[u32; POOL_SIZE]) -> [u64; 4] {
    let mut hash_const = INIT_B;
    let mut words = [0u32; 8];
    for (word, &source) in words.iter_mut().zip(pool.iter().cycle()) {
        let mut value = source ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        value = value.wrapping_mul(hash_const);
        *word = value ^ (value >> XSHIFT);
    }
    std::array::from_fn(|i| u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32))
}

impl NumpyRng {
    /// `np.random.default_rng(seed)`.
    pub fn new(seed: u64) -> Self {
        let state = generate_state(&seed_sequence_pool(seed));
        let join = |high: u64, low: u64| (u128::from(high) << 64) | u128::from(low);
        // NumPy's pcg64_set_seed: state (s0 << 64) + s1, stream (s2 << 64) + s3; PCG's
        // srandom, as rand_pcg's `new` implements it.
        Self {
            pcg: Lcg128Xsl64::new(join(state[0], state[1]), join(state[2], state[3])),
            seed,
            draws: 0,
        }
    }

    /// This generator's position, for [`NumpyRng::from_state`].
    pub fn state(&self) -> NumpyRngState {
        NumpyRngState {
            seed: self.seed,
            draws: self.draws,
        }
    }

    /// The generator at `state`: it continues exactly as the one that gave `state`
    /// would. Any state is valid (a made-up one is some position of some seed's stream).
    pub fn from_state(state: NumpyRngState) -> Self {
        let mut rng = Self::new(state.seed);
        rng.pcg.advance(u128::from(state.draws));
        rng.draws = state.draws;
        rng
    }

    /// 64 random bits: NumPy's `bit_generator.random_raw()`.
    pub fn next_u64(&mut self) -> u64 {
        self.draws = self.draws.wrapping_add(1);
        self.pcg.next_u64()
    }

    /// Uniform in `[0, 1)`: `(next_u64() >> 11) * 2^-53`, NumPy's `next_double`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// NumPy's `Generator.uniform(low, high)`: `low + (high - low) * next_f64()`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }
}

/// The generator for a `reset(seed)`: a new one from `Some(seed)`, the running one for
/// `None` (Gymnasium's behaviour), and an error for `None` before any seed.
pub(crate) fn reseed<'a>(
    rng: &'a mut Option<NumpyRng>,
    function: &'static str,
    seed: Option<u64>,
) -> Result<&'a mut NumpyRng> {
    if let Some(seed) = seed {
        *rng = Some(NumpyRng::new(seed));
    }
    rng.as_mut().ok_or_else(|| {
        Error::value(
            function,
            "seed",
            "a seed at the first reset (later resets without one continue its stream)",
            "None",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_without_a_seed_needs_one_first() {
        let mut rng = None;
        let err = reseed(&mut rng, "CartPole::reset", None).unwrap_err();
        assert_eq!(err.argument(), Some("seed"));
        let first = reseed(&mut rng, "CartPole::reset", Some(3))
            .unwrap()
            .next_u64();
        let second = reseed(&mut rng, "CartPole::reset", None)
            .unwrap()
            .next_u64();
        let mut fresh = NumpyRng::new(3);
        assert_eq!([first, second], [fresh.next_u64(), fresh.next_u64()]);
    }

    #[test]
    fn a_state_resumes_the_stream() {
        let mut rng = NumpyRng::new(u64::MAX);
        for _ in 0..1000 {
            rng.next_u64();
        }
        let state = rng.state();
        assert_eq!(
            state,
            NumpyRngState {
                seed: u64::MAX,
                draws: 1000
            }
        );
        let mut resumed = NumpyRng::from_state(state);
        for _ in 0..10 {
            assert_eq!(resumed.next_u64(), rng.next_u64());
        }
        assert_eq!(resumed.state(), rng.state());
    }
}
