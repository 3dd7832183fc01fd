//! The examples on a GPU (`Cuda::new(0)`, what `--device cuda` trains on): short runs of
//! TD3, DDPG, SAC, the actor-critic, recurrent PPO (LSTM and MLP policies) and DD-PPO
//! (`ppo_dist`, two workers sharing the GPU against one on the Cpu) end with
//! the Cpu's bits, the whole final state compared entry by entry (every parameter and
//! target parameter, every optimizer slot and step counter, the random streams, the
//! environments, the replay buffer, PPO's recurrent states and observation statistics,
//! the episode log); and a SAC run paused on one device resumes on the other with the
//! bits of a run that never stopped. The GPU bundle runs this test binary (`cargo xtask
//! gpu-build`).
//!
//! Without a GPU each test prints that it was skipped (or fails, with
//! `RLGRAD_REQUIRE_GPU=1`); with one, each prints the elements it compared
//! ([`rlgrad_cuda::bits_line`]) for the GPU runner's report.

use std::cell::Cell;
use std::path::Path;

use rlgrad_checkpoint::{Checkpoint, CheckpointManager, Dtype, Scalar};
use rlgrad_core::Cpu;
use rlgrad_cuda::Cuda;
use rlgrad_dist::Local;
use rlgrad_examples::cli::{Build, train_on_device};
use rlgrad_examples::device::{DeviceKind, TrainDevice};
use rlgrad_examples::ppo_dist::DdPpo;
use rlgrad_examples::run::{Options, Outcome};
use rlgrad_examples::{actor_critic, ppo, ppo_dist, sac, td3};

thread_local! {
    /// Elements compared and elements differing on this test's thread (libtest runs each
    /// test on a thread of its own).
    static BITS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Prints this test's counts when dropped, also when the test panics.
struct BitCount;

impl Drop for BitCount {
    fn drop(&mut self) {
        let (compared, differing) = BITS.with(Cell::get);
        println!("{}", rlgrad_cuda::bits_line(compared, differing));
    }
}

/// Whether there is a GPU to train on; without one the skip line is printed (or the
/// test fails, with `RLGRAD_REQUIRE_GPU=1`).
fn gpu_present() -> bool {
    match Cuda::new(0) {
        Ok(_) => true,
        Err(why) => {
            rlgrad_cuda::skip("GPU", &why);
            false
        }
    }
}

/// Random steps before the learning starts (at least a batch, 256), and the steps of an
/// off-policy run: 300 training iterations, three of them logged (every 100 steps).
const LEARNING_STARTS: u64 = 300;
const BUDGET: u64 = 600;

/// The run of `config`'s agent for `budget` units on `device` in `dir` (`pause`: stop
/// there with a checkpoint; `resume`: continue from the one in `dir`).
fn run<B: Build>(
    config: &B,
    budget: u64,
    device: DeviceKind,
    dir: &Path,
    pause: Option<u64>,
    resume: bool,
) -> Outcome {
    let options = Options {
        threads: Some(2),
        run_dir: Some(dir.to_path_buf()),
        budget,
        pause_at: pause,
        checkpoint_every: budget,
        stop_at_target: false,
        progress: false,
        resume,
        device,
        ..Options::new::<B::Agent<rlgrad_core::Cpu>>(11)
    };
    train_on_device(&options, config).unwrap()
}

/// The elements of entry `name`, each as its bits.
fn element_bits(state: &Checkpoint, name: &str) -> Vec<u64> {
    fn read<T: Scalar>(state: &Checkpoint, name: &str, bits: fn(T) -> u64) -> Vec<u64> {
        let shape = &state.tensor_info(name).unwrap().shape;
        state
            .read::<T>(name, shape)
            .unwrap()
            .into_iter()
            .map(bits)
            .collect()
    }
    match state.tensor_info(name).unwrap().dtype {
        Dtype::F32 => read(state, name, |v: f32| u64::from(v.to_bits())),
        Dtype::F64 => read(state, name, f64::to_bits),
        Dtype::U64 => read(state, name, |v: u64| v),
        Dtype::I64 => read(state, name, |v: i64| v as u64),
        Dtype::U32 => read(state, name, |v: u32| u64::from(v)),
        Dtype::U8 => read(state, name, |v: u8| u64::from(v)),
        other => panic!("`{name}`: an entry of {other}, which this test does not read"),
    }
}

/// The two runs' final states hold the same entries with the same bits, element by
/// element (counted), and encode to the same bytes.
fn same_state(what: &str, cpu: &Checkpoint, gpu: &Checkpoint) {
    let names: Vec<&str> = cpu.names().collect();
    assert_eq!(
        names,
        gpu.names().collect::<Vec<_>>(),
        "{what}: the entries"
    );
    let mut differing = Vec::new();
    for name in names {
        let info = cpu.tensor_info(name);
        assert_eq!(
            info,
            gpu.tensor_info(name),
            "{what}: `{name}`'s type and shape"
        );
        let (c, g) = (element_bits(cpu, name), element_bits(gpu, name));
        let different = c.iter().zip(&g).filter(|(a, b)| a != b).count();
        BITS.with(|bits| {
            let (compared, differ) = bits.get();
            bits.set((compared + c.len() as u64, differ + different as u64));
        });
        if different > 0 {
            differing.push(format!("`{name}` ({different} of {})", c.len()));
        }
    }
    assert!(
        differing.is_empty(),
        "{what}: the entries that differ: {}",
        differing.join(", ")
    );
    assert_eq!(cpu.to_bytes().unwrap(), gpu.to_bytes().unwrap(), "{what}");
}

/// `config`'s agent trained for `budget` units on the Cpu and on the GPU: the same final
/// state.
fn check<B: Build>(what: &str, config: &B, budget: u64) {
    if !gpu_present() {
        return;
    }
    let _count = BitCount;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let cpu = run(config, budget, DeviceKind::Cpu, dirs[0].path(), None, false);
    let gpu = run(
        config,
        budget,
        DeviceKind::Cuda,
        dirs[1].path(),
        None,
        false,
    );
    assert_eq!(cpu.summary.units, budget);
    same_state(what, &cpu.state, &gpu.state);
}

fn td3_config(mut config: td3::Config) -> td3::Config {
    config.common.learning_starts = LEARNING_STARTS;
    config.common.hidden = [64, 64];
    config
}

fn sac_config() -> sac::Config {
    let mut config = sac::Config::default();
    config.common.learning_starts = LEARNING_STARTS;
    config.common.hidden = [64, 64];
    config
}

#[test]
fn td3_on_the_gpu_ends_with_the_cpus_bits() {
    check("td3", &td3_config(td3::Config::td3()), BUDGET);
}

#[test]
fn ddpg_on_the_gpu_ends_with_the_cpus_bits() {
    check("ddpg", &td3_config(td3::Config::ddpg()), BUDGET);
}

#[test]
fn sac_on_the_gpu_ends_with_the_cpus_bits() {
    check("sac", &sac_config(), BUDGET);
}

#[test]
fn the_actor_critic_on_the_gpu_ends_with_the_cpus_bits() {
    // 40 episodes, an Adam step after each.
    check("actor_critic", &actor_critic::Config::default(), 40);
}

/// Two rollouts of `8 x 32` steps and their updates (20 epochs of one minibatch each):
/// 40 steps of Adam through the padded sequences, with the linear schedules' decay.
const PPO_BUDGET: u64 = 512;

#[test]
fn recurrent_ppo_with_the_lstm_policy_on_the_gpu_ends_with_the_cpus_bits() {
    check("recurrent_ppo", &ppo::Config::recurrent(), PPO_BUDGET);
}

#[test]
fn ppo_with_the_mlp_policy_on_the_gpu_ends_with_the_cpus_bits() {
    check("ppo_mlp", &ppo::Config::memoryless(), PPO_BUDGET);
}

#[test]
fn a_checkpoint_resumes_on_the_other_device_with_the_same_bits() {
    if !gpu_present() {
        return;
    }
    let _count = BitCount;
    let config = sac_config();
    let whole = tempfile::tempdir().unwrap();
    let whole = run(&config, BUDGET, DeviceKind::Cpu, whole.path(), None, false);
    // Pauses on an odd step, between the two actor updates of a pair of steps.
    let pause = Some(LEARNING_STARTS + 151);
    for (first, then) in [
        (DeviceKind::Cuda, DeviceKind::Cpu),
        (DeviceKind::Cpu, DeviceKind::Cuda),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let paused = run(&config, BUDGET, first, dir.path(), pause, false);
        assert!(paused.summary.units < BUDGET, "the pause came first");
        let resumed = run(&config, BUDGET, then, dir.path(), None, true);
        same_state(
            &format!("sac paused on {first}, resumed on {then}"),
            &whole.state,
            &resumed.state,
        );
    }
}

/// ppo_dist's run on `device` for `updates` updates on `workers` worker threads (sharing
/// the device), saved in `dir`: the checkpoint and the fingerprint.
fn ppo_dist_run<D: TrainDevice>(
    device: &D,
    workers: usize,
    updates: u64,
    dir: &Path,
) -> (Checkpoint, u64) {
    let config = ppo_dist::Config::default();
    let fingerprints = Local::run(workers, Local::DEFAULT_TIMEOUT, |comm| {
        let mut agent = DdPpo::new_on(device, config.clone(), comm)?;
        while agent.updates() < updates {
            agent.update(comm)?;
        }
        agent.save(comm, dir)?;
        agent.fingerprint()
    })
    .unwrap();
    assert!(
        fingerprints.iter().all(|&f| f == fingerprints[0]),
        "{fingerprints:x?}"
    );
    let (_, saved) = CheckpointManager::new(dir, None)
        .unwrap()
        .load_latest()
        .unwrap()
        .unwrap();
    (saved, fingerprints[0])
}

#[test]
fn ppo_dist_on_the_gpu_ends_with_the_cpus_bits() {
    if !gpu_present() {
        return;
    }
    let _count = BitCount;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    // One worker on the Cpu, two sharing the GPU: the same bits for any number of workers.
    let (cpu, cpu_print) = ppo_dist_run(&Cpu::default(), 1, 2, dirs[0].path());
    let gpu = DeviceKind::open_cuda().unwrap();
    let (gpu, gpu_print) = ppo_dist_run(&gpu, 2, 2, dirs[1].path());
    same_state("ppo_dist", &cpu, &gpu);
    assert_eq!(cpu_print, gpu_print);
}
