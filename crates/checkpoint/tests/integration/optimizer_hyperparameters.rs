//! An optimizer restored from a checkpoint file takes exactly the step the saved one would
//! have taken, or the restore is refused: a state saved with another learning rate,
//! schedule, beta or weight decay names the hyper-parameter and both values, and changes
//! nothing. State exported before the hyper-parameters were recorded still restores.

use rlgrad_checkpoint::{Checkpoint, Restore};
use rlgrad_optim::{
    Adam, Cosine, LinearWarmup, Momentum, MomentumFlavor, Optimizer, OptimizerState, Param,
    Schedule, StepDecay,
};

const GRADS: [[f32; 3]; 6] = [
    [0.3, -0.2, 0.1],
    [-0.5, 0.4, 0.0],
    [0.2, 0.2, -0.7],
    [0.9, -0.1, 0.3],
    [-0.4, -0.6, 0.5],
    [0.1, 0.8, -0.2],
];

fn adam() -> Adam {
    Adam {
        beta1: 0.8,
        weight_decay: 0.01,
        amsgrad: true,
        ..Adam::torch()
    }
}

fn warmup_cosine() -> LinearWarmup<Cosine> {
    LinearWarmup {
        steps: 2,
        then: Cosine {
            base: 3e-4,
            min: 1e-5,
            steps: 10,
        },
    }
}

/// Adam with `schedule` for the actor, Nesterov momentum with a step decay for the critic.
fn optimizer(adam: Adam, schedule: impl Schedule + 'static) -> Optimizer<f32> {
    let mut opt = Optimizer::new(adam, schedule).unwrap();
    let momentum = Momentum {
        nesterov: true,
        ..Momentum::new(MomentumFlavor::Torch)
    };
    let decay = StepDecay {
        base: 0.05,
        step_size: 2,
        gamma: 0.5,
    };
    opt.add_group(&["critic/w"], momentum, decay).unwrap();
    opt
}

struct Run {
    opt: Optimizer<f32>,
    actor: Vec<f32>,
    critic: Vec<f32>,
}

impl Run {
    fn new(opt: Optimizer<f32>) -> Self {
        Self {
            opt,
            actor: vec![1.0, -0.5, 0.25],
            critic: vec![0.5, 2.0],
        }
    }

    fn step(&mut self, k: usize) {
        let g = &GRADS[k % GRADS.len()];
        self.opt
            .step(&mut [
                Param {
                    name: "actor/w",
                    value: &mut self.actor,
                    grad: g,
                },
                Param {
                    name: "critic/w",
                    value: &mut self.critic,
                    grad: &g[1..],
                },
            ])
            .unwrap();
    }

    fn bits(&self) -> Vec<u32> {
        self.actor
            .iter()
            .chain(&self.critic)
            .map(|v| v.to_bits())
            .collect()
    }

    /// A checkpoint of the run, through a file.
    fn saved(&self) -> Checkpoint {
        let mut checkpoint = Checkpoint::new();
        checkpoint.put("actor/w", &[3], &self.actor).unwrap();
        checkpoint.put("critic/w", &[2], &self.critic).unwrap();
        checkpoint.put_optimizer("optim", &self.opt).unwrap();
        through_a_file(&checkpoint)
    }

    /// Restores the parameters and the optimizer from `checkpoint`.
    fn restore(&mut self, checkpoint: &Checkpoint) -> rlgrad_core::Result<()> {
        let mut plan = Restore::new();
        plan.slice("actor/w", &[3], &mut self.actor)
            .slice("critic/w", &[2], &mut self.critic)
            .optimizer("optim", &mut self.opt);
        checkpoint.restore(plan)
    }
}

fn through_a_file(checkpoint: &Checkpoint) -> Checkpoint {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ckpt.safetensors");
    checkpoint.save(&path).unwrap();
    Checkpoint::load(&path).unwrap()
}

fn trained(steps: usize) -> Run {
    let mut run = Run::new(optimizer(adam(), warmup_cosine()));
    for k in 0..steps {
        run.step(k);
    }
    run
}

#[test]
fn a_restored_optimizer_takes_the_step_the_saved_one_would_have_taken() {
    let mut saved = trained(3);
    let checkpoint = saved.saved();
    let mut resumed = Run::new(optimizer(adam(), warmup_cosine()));
    resumed.restore(&checkpoint).unwrap();
    for k in 3..6 {
        saved.step(k);
        resumed.step(k);
        assert_eq!(resumed.bits(), saved.bits(), "step {}", k + 1);
    }
    assert_eq!(resumed.opt.state().unwrap(), saved.opt.state().unwrap());
}

#[test]
fn a_restore_into_other_hyperparameters_is_refused_naming_both_values() {
    let checkpoint = trained(3).saved();
    let cosine = |base| LinearWarmup {
        steps: 2,
        then: Cosine {
            base,
            min: 1e-5,
            steps: 10,
        },
    };
    let cases: Vec<(Optimizer<f32>, &str)> = vec![
        (
            optimizer(adam(), 1e-3),
            "group 0 (adam (torch; amsgrad)): lr 0.001, got lr linear_warmup(steps 2, then \
             cosine(base 0.0003, min 1e-5, steps 10)) saved with the state",
        ),
        (
            optimizer(adam(), cosine(1e-3)),
            "lr linear_warmup(steps 2, then cosine(base 0.001, min 1e-5, steps 10)), got lr \
             linear_warmup(steps 2, then cosine(base 0.0003, min 1e-5, steps 10))",
        ),
        (
            optimizer(
                Adam {
                    beta1: 0.9,
                    ..adam()
                },
                warmup_cosine(),
            ),
            "(adam (torch; amsgrad)): beta1 0.9, got beta1 0.8 saved with the state",
        ),
        (
            optimizer(
                Adam {
                    weight_decay: 0.0,
                    ..adam()
                },
                warmup_cosine(),
            ),
            "(adam (torch; amsgrad)): weight_decay 0.0, got weight_decay 0.01 saved",
        ),
    ];
    for (opt, expected) in cases {
        let mut run = Run::new(opt);
        let before = (run.bits(), run.opt.state().unwrap());
        let message = run.restore(&checkpoint).unwrap_err().to_string();
        assert!(
            message.contains("Optimizer::load_state") && message.contains(expected),
            "{message}"
        );
        assert_eq!((run.bits(), run.opt.state().unwrap()), before);
    }
}

#[test]
fn another_learning_rate_after_a_restore_is_set_after_it() {
    let mut saved = trained(3);
    let checkpoint = saved.saved();
    let mut resumed = Run::new(optimizer(adam(), warmup_cosine()));
    resumed.restore(&checkpoint).unwrap();
    for run in [&mut saved, &mut resumed] {
        run.opt.set_schedule(0, 1e-4).unwrap();
    }
    for k in 3..6 {
        saved.step(k);
        resumed.step(k);
        assert_eq!(resumed.bits(), saved.bits());
    }
    assert_eq!(resumed.opt.last_lr(0), Some(1e-4));
}

#[test]
fn state_exported_without_hyperparameters_restores_unverified() {
    let run = trained(3);
    // What an older rlgrad-optim exported: no `groups`, no parameter `group`.
    let mut json = serde_json::to_value(run.opt.state().unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("groups").unwrap();
    for param in json["params"].as_object_mut().unwrap().values_mut() {
        param.as_object_mut().unwrap().remove("group").unwrap();
    }
    let old: OptimizerState<f32> = serde_json::from_value(json).unwrap();
    assert!(old.groups.is_empty());
    let mut checkpoint = Checkpoint::new();
    checkpoint.put("actor/w", &[3], &run.actor).unwrap();
    checkpoint.put("critic/w", &[2], &run.critic).unwrap();
    checkpoint.put_optimizer_state("optim", old).unwrap();
    let checkpoint = through_a_file(&checkpoint);

    let mut other_lr = Run::new(optimizer(adam(), 1e-3));
    other_lr.restore(&checkpoint).unwrap();
    other_lr.step(3);
    assert_eq!(other_lr.opt.last_lr(0), Some(1e-3));
    // The rule is still checked.
    let mut keras = Run::new(optimizer(Adam::keras(), warmup_cosine()));
    let message = keras.restore(&checkpoint).unwrap_err().to_string();
    assert!(message.contains("adam (torch; amsgrad)"), "{message}");
}

/// The optimizer's refusal comes in the same error as the shapes that do not fit, and
/// nothing is written.
#[test]
fn a_learning_rate_mismatch_is_listed_with_the_shape_mismatches() {
    let checkpoint = trained(3).saved();
    let mut run = Run::new(optimizer(adam(), 1e-3));
    let before = (run.bits(), run.opt.state().unwrap());
    let (mut actor, mut critic) = (vec![0.0f32; 3], vec![0.0f64; 2]);
    let mut plan = Restore::new();
    plan.slice("actor/w", &[1, 3], &mut actor)
        .slice("critic/w", &[2], &mut critic)
        .optimizer("optim", &mut run.opt);
    let message = checkpoint.restore(plan).unwrap_err().to_string();
    for expected in [
        "3 mismatches",
        "`actor/w`: expected F32 [1, 3], found F32 [3]",
        "`critic/w`: expected F64 [2], found F32 [2]",
        "`optim`: Optimizer::load_state",
        "group 0 (adam (torch; amsgrad)): lr 0.001, got lr linear_warmup(steps 2, then \
         cosine(base 0.0003, min 1e-5, steps 10)) saved with the state",
    ] {
        assert!(message.contains(expected), "{expected} not in {message}");
    }
    assert_eq!((actor, critic), (vec![0.0; 3], vec![0.0; 2]));
    assert_eq!((run.bits(), run.opt.state().unwrap()), before);
}
