use rand_core::Rng as _;
use rand_pcg::Pcg64;

use crate::Float;

/// Seeded, named random-number streams whose output is fixed forever.
///
/// A [`Rng`] is PCG-64 (`Lcg128Xsl64`, from `rand_pcg`), keyed by a seed *and* a stream
/// name, so that "init", "shuffle" and "exploration" draw independent numbers from one
/// seed. Every conversion from random bits to values (uniform floats, normal samples,
/// bounded integers, shuffles) is written here rather than taken from `rand`, whose
/// algorithms may change between versions: a seed gives the same values on every
/// platform, thread count and dependency upgrade. `tests::stream_is_stable` pins the first
/// outputs.
///
/// A stream's position can be saved and resumed: [`Rng::state`] returns an [`RngState`]
/// (seed, stream key, number of draws, pending normal sample) and [`Rng::from_state`]
/// rebuilds a generator that continues with the same bits (checkpoints store it).
///
/// ```
/// use rlgrad_core::Rng;
/// let mut a = Rng::new(7, "init");
/// let mut b = Rng::new(7, "init");
/// assert_eq!(a.normal_f64().to_bits(), b.normal_f64().to_bits());
/// let mut other = Rng::new(7, "shuffle");
/// assert_ne!(Rng::new(7, "init").next_u64(), other.next_u64());
/// ```
#[derive(Debug, Clone)]
pub struct Rng {
    pcg: Pcg64,
    seed: u64,
    stream_key: u64,
    draws: u64,
    spare_normal: Option<f64>,
}

/// Where a [`Rng`] stands in its stream: enough to resume it bit for bit.
///
/// The PCG state itself is not exposed by `rand_pcg`; a position is instead the stream's
/// origin (`seed`, `stream_key`) and the number of 64-bit steps taken since, which
/// [`Rng::from_state`] replays with PCG's O(log n) jump-ahead. Every value is an exact
/// integer (the pending normal sample as its bit pattern in `spare_normal`), so a state
/// survives any lossless serialization.
///
/// ```
/// use rlgrad_core::Rng;
/// let mut rng = Rng::new(7, "explore");
/// rng.normal_f64(); // leaves a pending sample
/// let saved = rng.state();
/// let mut resumed = Rng::from_state(saved);
/// assert_eq!(resumed.normal_f64().to_bits(), rng.normal_f64().to_bits());
/// assert_eq!(resumed.next_u64(), rng.next_u64());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RngState {
    /// The seed given to [`Rng::new`].
    pub seed: u64,
    /// The stream name's key: its 64-bit FNV-1a hash.
    pub stream_key: u64,
    /// 64-bit steps taken since the stream was created (each `next_u32`/`next_u64` is one).
    pub draws: u64,
    /// The second Box-Muller sample waiting for the next [`Rng::normal_f64`], as bits.
    pub spare_normal: Option<u64>,
}

/// Where a [`Rng`]'s PCG-64 generator stands: its 128-bit LCG `state` and `increment`.
/// The next 64-bit draw steps the state, `state = state * PCG_MULTIPLIER + increment`
/// (wrapping), and returns the XSL RR output of the new state:
/// `((state >> 64) as u64 ^ state as u64).rotate_right((state >> 122) as u32)`.
///
/// For devices that draw a stream's numbers themselves (rlgrad-cuda's random kernels):
/// with [`Rng::pcg_position`] and a jump of `i` steps, draw `i` of a batch is computed
/// independently of the others, and the host then moves its `Rng` past the batch
/// ([`Rng::skip`], [`Rng::skip_normals`]).
///
/// ```
/// use rlgrad_core::Rng;
/// let mut rng = Rng::new(7, "noise");
/// rng.next_u64();
/// let at = rng.pcg_position();
/// assert_eq!(at.jumped(2).next_u64(), { rng.next_u64(); rng.next_u64(); rng.next_u64() });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PcgPosition {
    /// The LCG state before the next draw.
    pub state: u128,
    /// The LCG increment (odd).
    pub increment: u128,
}

/// PCG-64's LCG multiplier (`rand_pcg`'s, the PCG paper's 128-bit default).
pub const PCG_MULTIPLIER: u128 = 0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645;

impl PcgPosition {
    /// The position `steps` draws later (Brown's jump: the LCG's affine map raised to
    /// `steps` by squaring).
    pub fn jumped(self, steps: u64) -> Self {
        let (mut acc_mult, mut acc_plus) = (1u128, 0u128);
        let (mut mult, mut plus) = (PCG_MULTIPLIER, self.increment);
        let mut left = steps;
        while left > 0 {
            if left & 1 == 1 {
                acc_mult = acc_mult.wrapping_mul(mult);
                acc_plus = acc_plus.wrapping_mul(mult).wrapping_add(plus);
            }
            plus = mult.wrapping_add(1).wrapping_mul(plus);
            mult = mult.wrapping_mul(mult);
            left >>= 1;
        }
        Self {
            state: acc_mult.wrapping_mul(self.state).wrapping_add(acc_plus),
            increment: self.increment,
        }
    }

    /// The next draw, and the position after it.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self
            .state
            .wrapping_mul(PCG_MULTIPLIER)
            .wrapping_add(self.increment);
        let rotation = (self.state >> 122) as u32;
        (((self.state >> 64) as u64) ^ (self.state as u64)).rotate_right(rotation)
    }
}

/// 64-bit FNV-1a: a fixed, portable hash of the stream name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// SplitMix64 finalizer: spreads a seed over all 64 bits.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// The stream `stream` of seed `seed`.
    pub fn new(seed: u64, stream: &str) -> Self {
        Self::at_origin(seed, fnv1a(stream.as_bytes()))
    }

    /// The state and stream `Pcg64::new` starts the stream `stream_key` of `seed` from.
    fn origin(seed: u64, stream_key: u64) -> (u128, u128) {
        let state = (u128::from(splitmix(seed)) << 64) | u128::from(splitmix(seed ^ stream_key));
        let stream = (u128::from(stream_key) << 64) | u128::from(splitmix(stream_key));
        (state, stream)
    }

    fn at_origin(seed: u64, stream_key: u64) -> Self {
        let (state, increment) = Self::origin(seed, stream_key);
        Self {
            pcg: Pcg64::new(state, increment),
            seed,
            stream_key,
            draws: 0,
            spare_normal: None,
        }
    }

    /// The generator's state at this position ([`PcgPosition`]); a pending normal sample
    /// is not part of it (see [`RngState::spare_normal`]).
    pub fn pcg_position(&self) -> PcgPosition {
        let (state, stream) = Self::origin(self.seed, self.stream_key);
        // `rand_pcg`'s construction: an odd increment from the stream, the state moved by
        // the increment and one step.
        let increment = (stream << 1) | 1;
        let origin = PcgPosition {
            state: state.wrapping_add(increment),
            increment,
        };
        origin.jumped(1).jumped(self.draws)
    }

    /// Moves past `draws` 64-bit draws (as many `next_u64` calls), keeping a pending normal
    /// sample.
    pub fn skip(&mut self, draws: u64) {
        self.pcg.advance(u128::from(draws));
        self.draws = self.draws.wrapping_add(draws);
    }

    /// Moves past `count` calls of [`Rng::normal_f64`]: the same position and pending sample
    /// as making them, in O(log count) (the last pair is drawn again when `count` leaves
    /// its second sample pending).
    pub fn skip_normals(&mut self, count: u64) {
        let mut left = count;
        if left > 0 && self.spare_normal.take().is_some() {
            left -= 1;
        }
        if left == 0 {
            return;
        }
        // Two draws per pair wholly used, then (for an odd count) one more pair whose sine
        // stays pending.
        self.skip(left / 2 * 2);
        if left % 2 == 1 {
            self.normal_f64();
        }
    }

    /// This stream's position, for [`Rng::from_state`].
    pub fn state(&self) -> RngState {
        RngState {
            seed: self.seed,
            stream_key: self.stream_key,
            draws: self.draws,
            spare_normal: self.spare_normal.map(f64::to_bits),
        }
    }

    /// The generator at position `state`: it continues exactly as the one that gave
    /// `state` would. Any `RngState` is valid (a made-up one is some position of some
    /// stream).
    pub fn from_state(state: RngState) -> Self {
        let mut rng = Self::at_origin(state.seed, state.stream_key);
        rng.pcg.advance(u128::from(state.draws));
        rng.draws = state.draws;
        rng.spare_normal = state.spare_normal.map(f64::from_bits);
        rng
    }

    /// 32 random bits (the low half of one 64-bit step, as `rand_pcg` gives them).
    pub fn next_u32(&mut self) -> u32 {
        self.draws = self.draws.wrapping_add(1);
        self.pcg.next_u32()
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.draws = self.draws.wrapping_add(1);
        self.pcg.next_u64()
    }

    /// Uniform in `[0, 1)` with 24 random bits: `(u32 >> 8) * 2^-24`.
    pub fn uniform_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Uniform in `[0, 1)` with 53 random bits: `(u64 >> 11) * 2^-53`.
    pub fn uniform_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, 1)` of type `T` (`uniform_f32` or `uniform_f64`).
    pub fn uniform<T: Float>(&mut self) -> T {
        match T::DTYPE {
            crate::DType::F32 => T::from_f64(f64::from(self.uniform_f32())),
            _ => T::from_f64(self.uniform_f64()),
        }
    }

    /// A standard normal sample by the Box-Muller transform, computed in f64 with the
    /// portable `libm` functions: `u1 = 1 - uniform_f64()` (in `(0, 1]`), `u2 = uniform_f64()`,
    /// `r = sqrt(-2 ln u1)`, returning `r cos(2 pi u2)` and, at the next call,
    /// `r sin(2 pi u2)`.
    pub fn normal_f64(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let u1 = 1.0 - self.uniform_f64();
        let u2 = self.uniform_f64();
        let r = (-2.0 * libm::log(u1)).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        self.spare_normal = Some(r * libm::sin(theta));
        r * libm::cos(theta)
    }

    /// A normal sample `mean + std * z` rounded to `T`, with `z` from [`Rng::normal_f64`].
    pub fn normal<T: Float>(&mut self, mean: f64, std: f64) -> T {
        T::from_f64(mean + std * self.normal_f64())
    }

    /// A uniform integer in `0..bound` without modulo bias (Lemire's multiply-and-reject).
    /// Returns 0 when `bound` is 0.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(bound);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// Shuffles `items` in place: Fisher-Yates from the back, swapping `i` with
    /// `below(i + 1)` for `i = len-1, ..., 1`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_stable() {
        // These values are part of the reproducibility contract: a change here breaks
        // every user's seeded run and needs a major version.
        let mut rng = Rng::new(0, "test");
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        let mut again = Rng::new(0, "test");
        assert_eq!(first, (0..3).map(|_| again.next_u64()).collect::<Vec<_>>());
        assert_eq!(first, PINNED);
    }

    const PINNED: [u64; 3] = [
        2526008208795017172,
        16732158850913352005,
        4255476516962781929,
    ];

    #[test]
    fn a_restored_stream_continues_bit_identically() {
        for draws_before in [0usize, 1, 2, 7, 1000] {
            let mut rng = Rng::new(11, "resume");
            for i in 0..draws_before {
                match i % 4 {
                    0 => {
                        rng.next_u32();
                    }
                    1 => {
                        rng.normal_f64();
                    }
                    2 => {
                        rng.below(17);
                    }
                    _ => {
                        rng.uniform_f64();
                    }
                }
            }
            let mut resumed = Rng::from_state(rng.state());
            assert_eq!(resumed.state(), rng.state());
            for _ in 0..100 {
                assert_eq!(resumed.normal_f64().to_bits(), rng.normal_f64().to_bits());
                assert_eq!(resumed.next_u64(), rng.next_u64());
                assert_eq!(resumed.uniform_f32().to_bits(), rng.uniform_f32().to_bits());
            }
        }
    }

    /// The position a device starts from gives the stream's draws, at any distance;
    /// skipping moves a stream as drawing would, normals included (with a pending sample
    /// before and after).
    #[test]
    fn positions_and_skips_follow_the_stream() {
        let rng = Rng::new(9, "device");
        for before in [0u64, 1, 5, 1000] {
            let mut probe = rng.clone();
            probe.skip(before);
            let at = probe.pcg_position();
            for ahead in [0u64, 1, 2, 63, 64, 1 << 20] {
                let mut drawn = probe.clone();
                drawn.skip(ahead);
                assert_eq!(
                    at.jumped(ahead).next_u64(),
                    drawn.next_u64(),
                    "{before} + {ahead}"
                );
            }
        }
        for spare_first in [false, true] {
            for count in [0u64, 1, 2, 3, 10, 11] {
                let mut drawn = Rng::new(4, "normals");
                if spare_first {
                    drawn.normal_f64();
                }
                let mut skipped = drawn.clone();
                for _ in 0..count {
                    drawn.normal_f64();
                }
                skipped.skip_normals(count);
                assert_eq!(skipped.state(), drawn.state(), "{spare_first} {count}");
                assert_eq!(skipped.next_u64(), drawn.next_u64());
            }
        }
    }

    #[test]
    fn state_names_the_stream_origin() {
        let rng = Rng::new(5, "init");
        let state = rng.state();
        assert_eq!((state.seed, state.draws, state.spare_normal), (5, 0, None));
        assert_eq!(state.stream_key, fnv1a(b"init"));
        let mut fresh = Rng::new(5, "init");
        assert_eq!(Rng::from_state(state).next_u64(), fresh.next_u64());
    }

    #[test]
    fn conversions_are_stable() {
        let mut rng = Rng::new(0, "test");
        let probe = [
            u64::from(rng.uniform_f32().to_bits()),
            rng.uniform_f64().to_bits(),
            rng.normal_f64().to_bits(),
            rng.normal_f64().to_bits(),
            rng.below(1000),
        ];
        assert_eq!(
            probe,
            [
                1040435836,
                4606345218984198951,
                4604515416254629169,
                4595307983556143866,
                902
            ]
        );
    }

    #[test]
    fn uniform_is_in_range_and_normal_has_unit_moments() {
        let mut rng = Rng::new(42, "moments");
        let n = 200_000;
        let mut sum = 0.0;
        let mut sum_sq = 0.0;
        for _ in 0..n {
            let u = rng.uniform_f32();
            assert!((0.0..1.0).contains(&u));
            let z = rng.normal_f64();
            sum += z;
            sum_sq += z * z;
        }
        let mean = sum / n as f64;
        let var = sum_sq / n as f64 - mean * mean;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "var {var}");
    }

    #[test]
    fn below_is_unbiased_enough_and_in_range() {
        let mut rng = Rng::new(1, "below");
        let mut counts = [0usize; 3];
        for _ in 0..30_000 {
            counts[rng.below(3) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(rng.below(0), 0);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut rng = Rng::new(3, "shuffle");
        let mut v: Vec<usize> = (0..100).collect();
        rng.shuffle(&mut v);
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }
}
