//! Properties of the replay buffer: n-step windows equal `rlgrad-returns`' n-step returns
//! (episodes never mixed, the ring's write position never crossed), sampling follows its
//! documented algorithm, the sum tree depends on the priorities alone.

use proptest::prelude::*;
use rlgrad_core::Rng;
use rlgrad_replay::{Config, ReplayBuffer, Transitions};
use rlgrad_returns::{Episodes, TimeMajor, n_step_returns};
use rlgrad_testkit::strategies::config;

/// `steps` rows of `envs` environments of random data, time-major.
#[derive(Debug, Clone)]
struct Stream {
    envs: usize,
    obs: Vec<f64>,
    actions: Vec<f64>,
    rewards: Vec<f64>,
    next_obs: Vec<f64>,
    values: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
}

const OBS: usize = 2;

impl Stream {
    fn new(steps: usize, envs: usize, end_rate: f64, seed: u64) -> Self {
        let mut rng = Rng::new(seed, "stream");
        let len = steps * envs;
        let mut normal = |n: usize| (0..n).map(|_| rng.normal(0.0, 1.0)).collect::<Vec<f64>>();
        let (obs, actions, rewards) = (normal(len * OBS), normal(len), normal(len));
        let (next_obs, values) = (normal(len * OBS), normal(len));
        let mut flags = Rng::new(seed, "flags");
        let mut flag = |_| flags.uniform_f64() < end_rate;
        let terminated = (0..len).map(&mut flag).collect();
        let truncated = (0..len).map(&mut flag).collect();
        Self {
            envs,
            obs,
            actions,
            rewards,
            next_obs,
            values,
            terminated,
            truncated,
        }
    }

    fn push_row(&self, buffer: &mut ReplayBuffer<f64>, row: usize) {
        let (b, r) = (self.envs, row * self.envs..(row + 1) * self.envs);
        let o = row * b * OBS..(row + 1) * b * OBS;
        buffer
            .push(Transitions {
                obs: &self.obs[o.clone()],
                actions: &self.actions[r.clone()],
                rewards: &self.rewards[r.clone()],
                next_obs: &self.next_obs[o],
                terminated: &self.terminated[r.clone()],
                truncated: &self.truncated[r],
            })
            .unwrap();
    }

    /// Rows `first..first + len` of a per-transition field.
    fn rows<T: Copy>(&self, field: &[T], first: usize, len: usize) -> Vec<T> {
        field[first * self.envs..(first + len) * self.envs].to_vec()
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// After pushing `steps` rows into a ring of `rows` rows, the buffer holds the last
    /// `min(steps, rows)` rows; the n-step rewards of every stored transition are, bit for
    /// bit, `n_step_returns` of those rows with zero values (Gymnasium's flags), and the
    /// target `rewards + discounts * V(next_obs)` is its n-step return with values.
    #[test]
    fn n_step_windows_are_the_returns_crates(
        steps in 1usize..40,
        rows in 1usize..20,
        envs in 1usize..4,
        n in 1usize..6,
        gamma in 0.0f64..=1.0,
        end_rate in prop::sample::select(vec![0.0, 0.1, 0.4]),
        seed in any::<u64>(),
    ) {
        let stream = Stream::new(steps, envs, end_rate, seed);
        let cfg = Config::new(rows * envs, OBS, 1).num_envs(envs).n_step(n, gamma);
        let mut buffer = ReplayBuffer::<f64>::new(cfg).unwrap();
        for row in 0..steps {
            stream.push_row(&mut buffer, row);
        }
        let held = steps.min(rows);
        let first = steps - held;
        prop_assert_eq!(buffer.len(), held * envs);

        let layout = TimeMajor::new(held, envs);
        let rewards = stream.rows(&stream.rewards, first, held);
        let terminated = stream.rows(&stream.terminated, first, held);
        let truncated = stream.rows(&stream.truncated, first, held);
        let values = stream.rows(&stream.values, first, held);
        let zeros = vec![0.0; held * envs];
        let plain = n_step_returns(
            layout, &rewards, &zeros,
            Episodes::gymnasium(gamma, &terminated, &truncated, &zeros), n,
        ).unwrap();
        let with_values = n_step_returns(
            layout, &rewards, &values,
            Episodes::gymnasium(gamma, &terminated, &truncated, &values), n,
        ).unwrap();

        // Stored row of logical row `l` (0 = oldest held).
        let oldest = if steps > rows { steps % rows } else { 0 };
        let indices: Vec<usize> = (0..held * envs)
            .map(|i| ((oldest + i / envs) % rows) * envs + i % envs)
            .collect();
        let batch = buffer.gather(&indices).unwrap();
        for (i, &index) in indices.iter().enumerate() {
            let global = first * envs + i;
            prop_assert_eq!(&batch.obs[i * OBS..(i + 1) * OBS],
                            &stream.obs[global * OBS..(global + 1) * OBS]);
            prop_assert_eq!(batch.actions[i], stream.actions[global]);
            // -0.0 + 0.0 = +0.0 in the returns crate's `r + d * 0`: compare as values.
            prop_assert!(batch.rewards[i] == plain[i],
                "index {}: {} vs {}", index, batch.rewards[i], plain[i]);
            if batch.rewards[i] != 0.0 {
                prop_assert_eq!(batch.rewards[i].to_bits(), plain[i].to_bits());
            }
            // The window's last step k: found independently from the flags.
            let t = i / envs;
            let mut k = t;
            while k + 1 < held && k + 1 < t + n && !terminated[k * envs + i % envs]
                && !truncated[k * envs + i % envs] {
                k += 1;
            }
            let last = k * envs + i % envs;
            let m = k - t + 1;
            let expected_discount = if terminated[last] {
                0.0
            } else {
                (1..m).fold(gamma, |d, _| d * gamma)
            };
            prop_assert_eq!(batch.discounts[i].to_bits(), expected_discount.to_bits());
            prop_assert_eq!(batch.not_dones[i], if terminated[last] { 0.0 } else { 1.0 });
            let global_last = first * envs + last;
            prop_assert_eq!(&batch.next_obs[i * OBS..(i + 1) * OBS],
                            &stream.next_obs[global_last * OBS..(global_last + 1) * OBS]);
            let target = batch.rewards[i] + batch.discounts[i] * values[last];
            let scale = 1.0 + with_values[i].abs();
            prop_assert!((target - with_values[i]).abs() <= 1e-12 * scale * n as f64,
                "target {} vs n_step_returns {}", target, with_values[i]);
        }
    }

    /// Uniform sampling is `rng.below(len)` per transition, then a gather.
    #[test]
    fn uniform_sampling_follows_its_algorithm(
        steps in 1usize..30,
        batch_size in 1usize..30,
        seed in any::<u64>(),
    ) {
        let stream = Stream::new(steps, 1, 0.2, seed);
        let mut buffer = ReplayBuffer::<f64>::new(Config::new(16, OBS, 1).n_step(3, 0.9)).unwrap();
        for row in 0..steps {
            stream.push_row(&mut buffer, row);
        }
        let mut rng = Rng::new(seed, "replay");
        let mut expected_rng = rng.clone();
        match buffer.sample(batch_size, &mut rng) {
            Ok(batch) => {
                let len = buffer.len() as u64;
                let indices: Vec<usize> =
                    (0..batch_size).map(|_| expected_rng.below(len) as usize).collect();
                prop_assert_eq!(&batch.indices, &indices);
                prop_assert_eq!(batch.clone(), buffer.gather(&indices).unwrap());
                prop_assert_eq!(rng.state(), expected_rng.state());
            }
            Err(_) => {
                prop_assert!(batch_size > buffer.len());
                prop_assert_eq!(rng.state(), expected_rng.state()); // nothing drawn
            }
        }
    }

    /// The sum tree is a function of the priorities alone: updates in another order,
    /// through other intermediate values, give the same prioritized batches bit for bit.
    #[test]
    fn prioritized_batches_depend_on_the_priorities_alone(
        priorities in prop::collection::vec(1e-3f64..1e3, 1..40),
        alpha in 0.0f64..1.5,
        beta in 0.0f64..=1.0,
        seed in any::<u64>(),
    ) {
        let len = priorities.len();
        let stream = Stream::new(len, 1, 0.1, seed);
        let cfg = Config::new(64, OBS, 1).prioritized(alpha);
        let mut a = ReplayBuffer::<f64>::new(cfg).unwrap();
        let mut b = ReplayBuffer::<f64>::new(cfg).unwrap();
        for row in 0..len {
            stream.push_row(&mut a, row);
            stream.push_row(&mut b, row);
        }
        let indices: Vec<usize> = (0..len).collect();
        a.update_priorities(&indices, &priorities).unwrap();
        let reversed: Vec<usize> = indices.iter().rev().copied().collect();
        let noise: Vec<f64> = priorities.iter().map(|p| p * 3.0 + 1.0).collect();
        b.update_priorities(&indices, &noise).unwrap();
        let rev_priorities: Vec<f64> = reversed.iter().map(|&i| priorities[i]).collect();
        b.update_priorities(&reversed, &rev_priorities).unwrap();
        for i in 0..len {
            prop_assert_eq!(a.priority(i).unwrap().to_bits(), b.priority(i).unwrap().to_bits());
        }
        let batch_size = len.min(8);
        let batch_a = a.sample_prioritized(batch_size, beta, &mut Rng::new(seed, "per")).unwrap();
        let batch_b = b.sample_prioritized(batch_size, beta, &mut Rng::new(seed, "per")).unwrap();
        prop_assert_eq!(&batch_a.indices, &batch_b.indices);
        let bits = |w: &[f64]| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&batch_a.weights), bits(&batch_b.weights));
        prop_assert!(batch_a.weights.iter().all(|&w| w > 0.0 && w <= 1.0));
    }
}

#[test]
fn prioritized_sampling_is_proportional_with_the_papers_weights() {
    let mut buffer = ReplayBuffer::<f64>::new(Config::new(8, 1, 1).prioritized(0.5)).unwrap();
    for i in 0..4 {
        let x = f64::from(i);
        buffer
            .push(Transitions {
                obs: &[x],
                actions: &[x],
                rewards: &[x],
                next_obs: &[x],
                terminated: &[false],
                truncated: &[false],
            })
            .unwrap();
    }
    // p^alpha = 1, 2, 3, 4 with alpha = 0.5.
    buffer
        .update_priorities(&[0, 1, 2, 3], &[1.0, 4.0, 9.0, 16.0])
        .unwrap();
    let mut counts = [0usize; 4];
    let mut rng = Rng::new(3, "per");
    for _ in 0..5000 {
        let batch = buffer.sample_prioritized(4, 1.0, &mut rng).unwrap();
        for &i in &batch.indices {
            counts[i] += 1;
        }
    }
    for (i, &count) in counts.iter().enumerate() {
        let expected = (i + 1) as f64 / 10.0;
        let got = count as f64 / 20000.0;
        assert!((got - expected).abs() < 0.01, "{i}: {got} vs {expected}");
    }
    // Weights: (N P(i))^-beta / max; with beta = 1 that is p_min / p_i.
    let batch = buffer.gather(&[0]).unwrap();
    assert_eq!(batch.weights, [1.0]);
    let batch = buffer.sample_prioritized(4, 1.0, &mut rng).unwrap();
    for (&i, &w) in batch.indices.iter().zip(&batch.weights) {
        let expected = 1.0 / (i + 1) as f64;
        assert!((w - expected).abs() < 1e-15, "{i}: {w} vs {expected}");
    }
    // New transitions get the largest priority seen: 16^0.5 = 4.
    buffer
        .push(Transitions {
            obs: &[9.0],
            actions: &[9.0],
            rewards: &[9.0],
            next_obs: &[9.0],
            terminated: &[false],
            truncated: &[false],
        })
        .unwrap();
    assert_eq!(buffer.priority(4), Some(4.0));
}

#[test]
fn bad_input_is_an_error_that_changes_nothing() {
    let err = |r: Result<ReplayBuffer<f32>, rlgrad_core::Error>| r.unwrap_err().to_string();
    assert_eq!(
        err(ReplayBuffer::new(Config::new(0, 3, 1))),
        "ReplayBuffer::new: argument `capacity` is invalid: expected at least 1, got 0"
    );
    assert!(err(ReplayBuffer::new(Config::new(10, 3, 1).num_envs(4))).contains("multiple"));
    assert!(err(ReplayBuffer::new(Config::new(10, 3, 1).n_step(0, 0.9))).contains("n_step"));
    assert!(err(ReplayBuffer::new(Config::new(10, 3, 1).n_step(2, 1.5))).contains("gamma"));
    assert!(
        err(ReplayBuffer::new(
            Config::new(10, 3, 1).prioritized(f64::NAN)
        ))
        .contains("alpha")
    );
    assert!(err(ReplayBuffer::new(Config::new(usize::MAX, 3, 1))).contains("fits in usize"));

    let mut buffer = ReplayBuffer::<f32>::new(Config::new(10, 3, 1).prioritized(0.6)).unwrap();
    let mut rng = Rng::new(0, "replay");
    assert!(buffer.sample(1, &mut rng).is_err());
    let step = Transitions {
        obs: &[0.0, 1.0],
        actions: &[0.5],
        rewards: &[1.0],
        next_obs: &[1.0, 2.0, 3.0],
        terminated: &[false],
        truncated: &[false],
    };
    assert_eq!(
        buffer.push(step).unwrap_err().to_string(),
        "ReplayBuffer::push: argument `obs` has the wrong shape: expected 3 elements, got 2"
    );
    assert!(buffer.is_empty());
    buffer
        .push(Transitions {
            obs: &[0.0, 1.0, 2.0],
            ..step
        })
        .unwrap();
    let before = (buffer.clone(), rng.state());
    assert_eq!(
        buffer.sample(2, &mut rng).unwrap_err().to_string(),
        "ReplayBuffer::sample: argument `batch_size` is out of range: expected at most the 1 \
         transitions stored, got 2"
    );
    assert!(buffer.sample(0, &mut rng).is_err());
    assert!(buffer.sample_prioritized(1, 1.5, &mut rng).is_err());
    assert!(buffer.gather(&[1]).is_err());
    assert_eq!(
        buffer
            .update_priorities(&[0], &[f32::NAN])
            .unwrap_err()
            .to_string(),
        "ReplayBuffer::update_priorities: argument `priorities` holds a non-finite value at \
         index 0: NaN"
    );
    assert!(buffer.update_priorities(&[0], &[0.0]).is_err());
    assert!(buffer.update_priorities(&[0], &[-1.0]).is_err());
    assert!(buffer.update_priorities(&[1], &[1.0]).is_err());
    assert!(buffer.update_priorities(&[0, 0], &[1.0]).is_err());
    assert_eq!((buffer.clone(), rng.state()), before);

    let uniform = ReplayBuffer::<f32>::new(Config::new(10, 3, 1)).unwrap();
    assert!(
        uniform
            .sample_prioritized(1, 0.4, &mut rng)
            .unwrap_err()
            .to_string()
            .contains("Config::prioritized")
    );
}
