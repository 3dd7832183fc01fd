//! Exported state records each group's rule, hyper-parameters and schedule: it resumes
//! only into an optimizer that takes exactly the step the saved one would have taken, a
//! mismatch is refused naming the hyper-parameter and both values, and `set_schedule` /
//! `set_rule` change them after loading. Also: an optimizer clones.

use rlgrad_optim::*;

const GRADS: [[f32; 3]; 8] = [
    [0.3, -0.2, 0.1],
    [-0.5, 0.4, 0.0],
    [0.2, 0.2, -0.7],
    [0.9, -0.1, 0.3],
    [-0.4, -0.6, 0.5],
    [0.1, 0.8, -0.2],
    [0.6, -0.3, -0.4],
    [-0.2, 0.5, 0.7],
];

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Two parameters, `w` in the default group and `b` in group 1.
struct Run {
    opt: Optimizer<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
}

impl Run {
    fn step(&mut self, k: usize) {
        let g = &GRADS[k % GRADS.len()];
        self.opt
            .step(&mut [
                Param {
                    name: "w",
                    value: &mut self.w,
                    grad: g,
                },
                Param {
                    name: "b",
                    value: &mut self.b,
                    grad: &g[..1],
                },
            ])
            .unwrap();
    }

    fn bits(&self) -> (Vec<u32>, Vec<u32>) {
        (bits(&self.w), bits(&self.b))
    }
}

/// An optimizer with `rule` and a warm-up then cosine schedule for `w`, and momentum with
/// a step decay for `b`.
fn build(rule: Box<dyn Rule<f32>>) -> Optimizer<f32> {
    let schedule = LinearWarmup {
        steps: 2,
        then: Cosine {
            base: 3e-3,
            min: 1e-4,
            steps: 10,
        },
    };
    let mut opt = Optimizer::new(rule, schedule).unwrap();
    let momentum = Momentum {
        nesterov: true,
        ..Momentum::new(MomentumFlavor::Keras)
    };
    let decay = StepDecay {
        base: 0.05,
        step_size: 2,
        gamma: 0.5,
    };
    opt.add_group(&["b"], momentum, decay).unwrap();
    opt
}

fn adam() -> Adam {
    Adam {
        beta1: 0.8,
        amsgrad: true,
        weight_decay: 0.01,
        ..Adam::torch()
    }
}

fn rules() -> Vec<Box<dyn Rule<f32>>> {
    vec![
        Box::new(Sgd { weight_decay: 0.01 }),
        Box::new(Momentum {
            dampening: 0.1,
            weight_decay: 0.02,
            ..Momentum::new(MomentumFlavor::Torch)
        }),
        Box::new(adam()),
        Box::new(Adam {
            beta2: 0.99,
            ..Adam::keras()
        }),
        Box::new(AdamW {
            weight_decay: 0.1,
            ..AdamW::default()
        }),
        Box::new(Rmsprop {
            momentum: 0.5,
            centered: true,
            ..Rmsprop::keras()
        }),
        Box::new(Adagrad {
            lr_decay: 0.01,
            ..Adagrad::torch()
        }),
    ]
}

fn trained(rule: Box<dyn Rule<f32>>, steps: usize) -> Run {
    let mut run = Run {
        opt: build(rule),
        w: vec![1.0, -0.5, 0.25],
        b: vec![0.5],
    };
    for k in 0..steps {
        run.step(k);
    }
    run
}

#[test]
fn a_resumed_run_takes_the_step_the_saved_run_would_have_taken() {
    for rule in rules() {
        let name = rule.spec().to_string();
        let mut saved = trained(rule.clone(), 5);
        let mut resumed = Run {
            opt: build(rule),
            w: saved.w.clone(),
            b: saved.b.clone(),
        };
        resumed.opt.load_state(saved.opt.state().unwrap()).unwrap();
        for k in 5..9 {
            saved.step(k);
            resumed.step(k);
            assert_eq!(resumed.bits(), saved.bits(), "{name}, step {}", k + 1);
        }
        assert_eq!(resumed.opt.state().unwrap(), saved.opt.state().unwrap());
    }
}

/// A custom rule without hyper-parameters.
#[derive(Debug, Clone)]
struct SignSgd {
    scale: f64,
}

impl Rule<f32> for SignSgd {
    fn name(&self) -> &'static str {
        "sign_sgd"
    }
    fn slot_names(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn step(&self, _step: u64, lr: f64) -> StepRule<'_, f32> {
        let step = (lr * self.scale) as f32;
        StepRule::Custom(Box::new(
            move |p: &mut [f32], g: &[f32], _: &mut [&mut [f32]]| {
                for (p, &g) in p.iter_mut().zip(g) {
                    *p -= step * g.signum();
                }
            },
        ))
    }
}

/// A custom schedule without a spec.
#[derive(Debug, Clone)]
struct Halving(f64);

impl Schedule for Halving {
    fn lr(&self, step: u64) -> f64 {
        self.0 * 0.5f64.powf(step as f64)
    }
}

/// The message of loading `state` into `opt`, which must refuse it and change nothing.
fn refusal(opt: &mut Optimizer<f32>, state: OptimizerState<f32>) -> String {
    let before = opt.state().unwrap();
    let err = opt.load_state(state).unwrap_err();
    assert!(matches!(err, Error::State { .. }), "{err}");
    assert_eq!(opt.state().unwrap(), before);
    err.to_string()
}

fn adam_state(adam: Adam, schedule: impl Schedule + 'static) -> OptimizerState<f32> {
    let mut opt = Optimizer::<f32>::new(adam, schedule).unwrap();
    let mut w = vec![1.0f32, 2.0];
    for g in &GRADS[..2] {
        opt.step(&mut [Param {
            name: "w",
            value: &mut w,
            grad: &g[..2],
        }])
        .unwrap();
    }
    opt.state().unwrap()
}

#[test]
fn a_state_saved_with_other_hyperparameters_is_refused_naming_both_values() {
    let saved = adam_state(Adam::torch(), 3e-4);
    let mut other_lr = Optimizer::<f32>::new(Adam::torch(), 1e-3).unwrap();
    assert_eq!(
        refusal(&mut other_lr, saved.clone()),
        "Optimizer::load_state: argument `state` does not match: expected the \
         hyper-parameters of this optimizer's group 0 (adam (torch)): lr 0.001, got lr \
         0.0003 saved with the state (to resume with other values, build the optimizer \
         with the saved ones and change them after loading: Optimizer::set_schedule, \
         Optimizer::set_rule)"
    );

    let cases: Vec<(Adam, Box<dyn Schedule>, [&str; 2])> = vec![
        (
            Adam {
                beta1: 0.5,
                ..Adam::torch()
            },
            Box::new(3e-4),
            ["beta1 0.5", "beta1 0.9"],
        ),
        (
            Adam {
                weight_decay: 0.01,
                ..Adam::torch()
            },
            Box::new(3e-4),
            ["weight_decay 0.01", "weight_decay 0.0"],
        ),
        (
            Adam::torch(),
            Box::new(Cosine {
                base: 3e-4,
                min: 0.0,
                steps: 100,
            }),
            ["lr cosine(base 0.0003, min 0.0, steps 100)", "lr 0.0003"],
        ),
        // The same value as an f32 is another rate.
        (
            Adam::torch(),
            Box::new(3e-4f32),
            ["lr 0.0003000000142492354", "lr 0.0003"],
        ),
        (
            Adam {
                eps: 1e-6,
                beta2: 0.99,
                ..Adam::torch()
            },
            Box::new(1e-3),
            [
                "lr 0.001, beta2 0.99, eps 1e-6",
                "lr 0.0003, beta2 0.999, eps 1e-8",
            ],
        ),
    ];
    for (adam, schedule, [here, there]) in cases {
        let mut opt = Optimizer::<f32>::new(adam, schedule).unwrap();
        let message = refusal(&mut opt, saved.clone());
        assert!(
            message.contains(&format!("(adam (torch)): {here}, got {there}")),
            "{message}"
        );
    }

    // A constant rate where a step decay was saved, in the second group.
    let saved = trained(Box::new(adam()), 3).opt.state().unwrap();
    let mut opt = build(Box::new(adam()));
    opt.set_schedule(1, 0.05).unwrap();
    let message = refusal(&mut opt, saved);
    assert!(
        message.contains(
            "group 1 (momentum (keras; nesterov)): lr 0.05, got lr step_decay(base 0.05, \
             step_size 2, gamma 0.5) saved with the state"
        ),
        "{message}"
    );
}

#[test]
fn set_schedule_and_set_rule_resume_with_other_values() {
    let mut saved = trained(Box::new(adam()), 4);
    let mut resumed = Run {
        opt: build(Box::new(adam())),
        w: saved.w.clone(),
        b: saved.b.clone(),
    };
    resumed.opt.load_state(saved.opt.state().unwrap()).unwrap();
    let m = resumed.opt.slot("w", "m").unwrap().to_vec();
    let other_adam = Adam {
        beta1: 0.5,
        ..adam()
    };
    for run in [&mut saved, &mut resumed] {
        run.opt.set_schedule(0, 1e-3).unwrap();
        run.opt.set_rule(0, other_adam).unwrap();
        run.opt
            .set_schedule(
                1,
                Exponential {
                    base: 0.01,
                    gamma: 0.9,
                },
            )
            .unwrap();
    }
    assert_eq!(resumed.opt.slot("w", "m").unwrap(), m);
    for k in 4..7 {
        saved.step(k);
        resumed.step(k);
        assert_eq!(resumed.bits(), saved.bits());
    }
    assert_eq!(resumed.opt.last_lr(0), Some(1e-3));
    assert_eq!(resumed.opt.last_lr(1), Some(0.01 * 0.9f64.powf(6.0)));

    // Refusals change nothing.
    let before = resumed.opt.state().unwrap();
    let err = resumed.opt.set_schedule(2, 1e-3).unwrap_err();
    assert!(err.to_string().contains("a group below 2"), "{err}");
    let err = resumed.opt.set_schedule(0, -1e-3).unwrap_err();
    assert!(err.to_string().contains("for step 8"), "{err}");
    let err = resumed.opt.set_rule(0, AdamW::default()).unwrap_err();
    assert!(
        err.to_string().contains(
            "a rule whose slots mean what group 0's do: adam (torch; amsgrad) with slots \
             [\"m\", \"v\", \"v_max\"], got adamw with slots [\"m\", \"v\"]"
        ),
        "{err}"
    );
    let err = resumed
        .opt
        .set_rule(
            0,
            Adam {
                beta1: 1.5,
                ..other_adam
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("beta1"), "{err}");
    assert_eq!(resumed.opt.state().unwrap(), before);
}

#[test]
fn what_a_state_does_not_record_is_unverified() {
    // As state exported before the hyper-parameters were recorded deserializes.
    let mut old = trained(Box::new(adam()), 3).opt.state().unwrap();
    old.groups.clear();
    for param in old.params.values_mut() {
        param.group = None;
    }
    let mut other = build(Box::new(Adam {
        beta1: 0.5,
        ..adam()
    }));
    other.load_state(old.clone()).unwrap();
    // The rule still is checked.
    let mut adamw = build(Box::new(AdamW::default()));
    assert!(refusal(&mut adamw, old).contains("rule adamw"));

    // A custom rule that reports no hyper-parameters, and a custom schedule without a
    // spec, are unverified.
    let mut opt = Optimizer::<f32>::new(SignSgd { scale: 1.0 }, Halving(0.1)).unwrap();
    let mut w = vec![1.0f32];
    opt.step(&mut [Param {
        name: "w",
        value: &mut w,
        grad: &[1.0],
    }])
    .unwrap();
    let state = opt.state().unwrap();
    assert_eq!(state.groups[0].hyperparameters.len(), 0);
    assert_eq!(state.groups[0].schedule, None);
    let mut other = Optimizer::<f32>::new(SignSgd { scale: 2.0 }, Halving(0.3)).unwrap();
    other.load_state(state).unwrap();
}

#[test]
fn a_parameter_saved_in_another_group_is_refused() {
    // Two groups alike but for their members.
    let grouped = |member: &str| {
        let sgd = Sgd { weight_decay: 0.01 };
        let mut opt = Optimizer::<f32>::new(sgd, 1e-3).unwrap();
        opt.add_group(&[member], sgd, 1e-3).unwrap();
        opt
    };
    let mut saved = grouped("b");
    let (mut w, mut b) = (vec![1.0f32], vec![1.0f32]);
    saved
        .step(&mut [
            Param {
                name: "w",
                value: &mut w,
                grad: &[0.1],
            },
            Param {
                name: "b",
                value: &mut b,
                grad: &[0.2],
            },
        ])
        .unwrap();
    let message = refusal(&mut grouped("w"), saved.state().unwrap());
    assert!(
        message.contains("`b` in group 0, as this optimizer groups it, got `b` in group 1"),
        "{message}"
    );
    grouped("b").load_state(saved.state().unwrap()).unwrap();
}

#[test]
fn a_clone_steps_as_the_original_and_apart_from_it() {
    for rule in rules() {
        let mut original = trained(rule, 3);
        let mut copy = Run {
            opt: original.opt.clone(),
            w: original.w.clone(),
            b: original.b.clone(),
        };
        assert_eq!(copy.opt.state().unwrap(), original.opt.state().unwrap());
        for k in 3..6 {
            original.step(k);
            copy.step(k);
            assert_eq!(copy.bits(), original.bits());
        }
        assert_eq!(copy.opt.state().unwrap(), original.opt.state().unwrap());
        let before = original.opt.state().unwrap();
        copy.step(6);
        assert_eq!(original.opt.state().unwrap(), before);
        assert_ne!(copy.opt.state().unwrap(), before);
    }
    // A custom rule and schedule clone through their `#[derive(Clone)]`.
    let mut original = Optimizer::<f32>::new(SignSgd { scale: 1.0 }, Halving(0.1)).unwrap();
    let mut copy = original.clone();
    for opt in [&mut original, &mut copy] {
        let mut w = vec![1.0f32];
        for _ in 0..2 {
            opt.step(&mut [Param {
                name: "w",
                value: &mut w,
                grad: &[1.0],
            }])
            .unwrap();
        }
        assert_eq!(w, [1.0 - 0.1 - 0.05]);
    }
    assert_eq!(copy.state().unwrap(), original.state().unwrap());
}
