//! Fused updates against their unfused passes, bits across executors, state round trips,
//! schedules, device stepping and the refusal of bad input.

use proptest::prelude::*;
use rlgrad_core::cpu::optim as kernel;
use rlgrad_core::kernels::optim::{self as fused, Update};
use rlgrad_core::{Cpu, Device, Error, Par, Rng, reduce};
use rlgrad_optim::*;
use rlgrad_testkit::strategies::{config, in_thread_pools};

fn normal(n: usize, seed: u64, std: f64) -> Vec<f32> {
    let mut rng = Rng::new(seed, "optim-tests");
    (0..n).map(|_| rng.normal(0.0, std)).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Each update written as separate whole-array passes, in the documented order.
fn unfused(update: &Update<f32>, p: &mut [f32], g: &[f32], slots: &mut [Vec<f32>]) {
    let n = p.len();
    match *update {
        Update::Adam(fused::Adam::Torch(fused::AdamTorch {
            step_size,
            bias_correction2_sqrt,
            one_minus_beta1,
            beta2,
            one_minus_beta2,
            eps,
            weight_decay,
            decoupled_keep,
            ..
        })) => {
            if decoupled_keep != 1.0 {
                (0..n).for_each(|i| p[i] *= decoupled_keep);
            }
            let g: Vec<f32> = (0..n)
                .map(|i| {
                    if weight_decay != 0.0 {
                        g[i] + weight_decay * p[i]
                    } else {
                        g[i]
                    }
                })
                .collect();
            (0..n).for_each(|i| slots[0][i] = slots[0][i] + one_minus_beta1 * (g[i] - slots[0][i]));
            (0..n)
                .for_each(|i| slots[1][i] = slots[1][i] * beta2 + one_minus_beta2 * (g[i] * g[i]));
            let vv: Vec<f32> = if slots.len() == 3 {
                (0..n).for_each(|i| slots[2][i] = reduce::max2(slots[2][i], slots[1][i]));
                slots[2].clone()
            } else {
                slots[1].clone()
            };
            let denom: Vec<f32> = (0..n)
                .map(|i| vv[i].sqrt() / bias_correction2_sqrt + eps)
                .collect();
            let numer: Vec<f32> = (0..n).map(|i| (-step_size) * slots[0][i]).collect();
            (0..n).for_each(|i| p[i] += numer[i] / denom[i]);
        }
        Update::Adam(fused::Adam::Keras {
            alpha,
            lr,
            one_minus_beta1,
            one_minus_beta2,
            eps,
            weight_decay,
            ..
        }) => {
            if weight_decay != 0.0 {
                (0..n).for_each(|i| p[i] -= (p[i] * weight_decay) * lr);
            }
            (0..n).for_each(|i| slots[0][i] += (g[i] - slots[0][i]) * one_minus_beta1);
            (0..n).for_each(|i| slots[1][i] += (g[i] * g[i] - slots[1][i]) * one_minus_beta2);
            if slots.len() == 3 {
                (0..n).for_each(|i| slots[2][i] = reduce::max2(slots[2][i], slots[1][i]));
            }
            let vv = slots[slots.len() - 1].clone();
            let step: Vec<f32> = (0..n)
                .map(|i| (slots[0][i] * alpha) / (vv[i].sqrt() + eps))
                .collect();
            (0..n).for_each(|i| p[i] -= step[i]);
        }
        Update::Momentum(fused::Momentum::Torch {
            lr,
            momentum,
            dampening,
            nesterov,
            weight_decay,
            first_step,
        }) => {
            let g: Vec<f32> = (0..n)
                .map(|i| {
                    if weight_decay != 0.0 {
                        g[i] + weight_decay * p[i]
                    } else {
                        g[i]
                    }
                })
                .collect();
            (0..n).for_each(|i| {
                slots[0][i] = if first_step {
                    g[i]
                } else {
                    slots[0][i] * momentum + (1.0 - dampening) * g[i]
                }
            });
            let d: Vec<f32> = (0..n)
                .map(|i| {
                    if nesterov {
                        g[i] + momentum * slots[0][i]
                    } else {
                        slots[0][i]
                    }
                })
                .collect();
            (0..n).for_each(|i| p[i] -= lr * d[i]);
        }
        Update::Momentum(fused::Momentum::Keras {
            lr,
            momentum,
            nesterov,
            weight_decay,
        }) => {
            if weight_decay != 0.0 {
                (0..n).for_each(|i| p[i] -= (p[i] * weight_decay) * lr);
            }
            (0..n).for_each(|i| slots[0][i] = slots[0][i] * momentum - g[i] * lr);
            (0..n).for_each(|i| {
                p[i] = if nesterov {
                    p[i] + (slots[0][i] * momentum - g[i] * lr)
                } else {
                    p[i] + slots[0][i]
                }
            });
        }
        Update::Adagrad(fused::Adagrad::Torch {
            clr,
            eps,
            weight_decay,
        }) => {
            let g: Vec<f32> = (0..n)
                .map(|i| {
                    if weight_decay != 0.0 {
                        g[i] + weight_decay * p[i]
                    } else {
                        g[i]
                    }
                })
                .collect();
            (0..n).for_each(|i| slots[0][i] += g[i] * g[i]);
            (0..n).for_each(|i| p[i] += ((-clr) * g[i]) / (slots[0][i].sqrt() + eps));
        }
        other => panic!("no unfused reference for {other:?}"),
    }
}

fn updates() -> impl Strategy<Value = Update<f32>> {
    let unit = 0.0f32..0.99;
    prop_oneof![
        (
            unit.clone(),
            unit.clone(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(b1, b2, wd, amsgrad, decoupled)| {
                Update::Adam(fused::Adam::Torch(fused::AdamTorch {
                    step_size: 1e-3 / (1.0 - b1 + 1e-3),
                    bias_correction2_sqrt: (1.0 - b2 * b2).sqrt().max(1e-3),
                    one_minus_beta1: 1.0 - b1,
                    beta2: b2,
                    one_minus_beta2: 1.0 - b2,
                    eps: 1e-8,
                    weight_decay: if wd { 0.01 } else { 0.0 },
                    decoupled_keep: if decoupled { 1.0 - 1e-4 } else { 1.0 },
                    amsgrad,
                }))
            }),
        (unit.clone(), unit.clone(), any::<bool>(), any::<bool>()).prop_map(
            |(b1, b2, wd, amsgrad)| {
                Update::Adam(fused::Adam::Keras {
                    alpha: 1e-3,
                    lr: 1e-2,
                    one_minus_beta1: 1.0 - b1,
                    one_minus_beta2: 1.0 - b2,
                    eps: 1e-7,
                    weight_decay: if wd { 0.004 } else { 0.0 },
                    amsgrad,
                })
            }
        ),
        (
            unit.clone(),
            0.0f32..1.0,
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(mu, damp, nesterov, wd, first_step)| {
                Update::Momentum(fused::Momentum::Torch {
                    lr: 0.01,
                    momentum: mu,
                    dampening: damp,
                    nesterov,
                    weight_decay: if wd { 0.01 } else { 0.0 },
                    first_step,
                })
            }),
        (unit.clone(), any::<bool>(), any::<bool>()).prop_map(|(mu, nesterov, wd)| {
            Update::Momentum(fused::Momentum::Keras {
                lr: 0.02,
                momentum: mu,
                nesterov,
                weight_decay: if wd { 0.004 } else { 0.0 },
            })
        }),
        (0.0f32..0.1, any::<bool>()).prop_map(|(clr, wd)| Update::Adagrad(fused::Adagrad::Torch {
            clr,
            eps: 1e-10,
            weight_decay: if wd { 0.01 } else { 0.0 }
        })),
    ]
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn prop_fused_update_equals_the_unfused_passes(update in updates(), len in 1usize..40_000, seed in any::<u64>()) {
        let names = update.slot_names();
        let p0 = normal(len, seed, 1.0);
        let g = normal(len, seed ^ 1, 0.1);
        let slots0: Vec<Vec<f32>> = names.iter().enumerate().map(|(k, _)| normal(len, seed ^ (k as u64 + 2), 0.01).iter().map(|v| v.abs()).collect()).collect();
        let (mut p_fused, mut s_fused) = (p0.clone(), slots0.clone());
        kernel::update(Par::rayon(2), &update, &mut p_fused, &g, &mut s_fused.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>()).unwrap();
        let (mut p_ref, mut s_ref) = (p0, slots0);
        unfused(&update, &mut p_ref, &g, &mut s_ref);
        prop_assert_eq!(bits(&p_fused), bits(&p_ref));
        for (a, b) in s_fused.iter().zip(&s_ref) {
            prop_assert_eq!(bits(a), bits(b));
        }
    }

    #[test]
    fn prop_export_then_import_resumes_bit_for_bit(seed in any::<u64>(), split in 1usize..6, amsgrad in any::<bool>()) {
        let rule = Adam { amsgrad, ..Adam::torch() };
        let grads: Vec<Vec<f32>> = (0..8).map(|k| normal(50, seed ^ k, 0.3)).collect();
        let mut opt = Optimizer::<f32>::new(rule, 1e-2).unwrap();
        let mut w = normal(50, seed, 1.0);
        for g in &grads[..split] {
            opt.step(&mut [Param { name: "w", value: &mut w, grad: g }]).unwrap();
        }
        let saved = (opt.state().unwrap(), w.clone());
        for g in &grads[split..] {
            opt.step(&mut [Param { name: "w", value: &mut w, grad: g }]).unwrap();
        }
        let mut resumed = Optimizer::<f32>::new(rule, 1e-2).unwrap();
        resumed.load_state(saved.0).unwrap();
        let mut w2 = saved.1;
        for g in &grads[split..] {
            resumed.step(&mut [Param { name: "w", value: &mut w2, grad: g }]).unwrap();
        }
        prop_assert_eq!(bits(&w), bits(&w2));
        prop_assert_eq!(opt.state().unwrap(), resumed.state().unwrap());
    }

    #[test]
    fn prop_the_schedule_value_is_the_rate_used(steps in 1usize..30, seed in any::<u64>()) {
        let schedule = LinearWarmup { steps: 5, then: Cosine { base: 0.1, min: 0.001, steps: 20 } };
        let mut opt = Optimizer::<f64>::new(Sgd::default(), LinearWarmup { steps: 5, then: Cosine { base: 0.1, min: 0.001, steps: 20 } }).unwrap();
        let mut w = vec![1.0f64; 3];
        for k in 0..steps {
            let g: Vec<f64> = normal(3, seed ^ k as u64, 1.0).iter().map(|&v| f64::from(v)).collect();
            let before = w.clone();
            opt.step(&mut [Param { name: "w", value: &mut w, grad: &g }]).unwrap();
            let lr = schedule.lr(k as u64);
            prop_assert_eq!(opt.last_lr(0), Some(lr));
            for i in 0..3 {
                prop_assert_eq!(w[i].to_bits(), (before[i] - lr * g[i]).to_bits());
            }
        }
    }
}

/// Three parameters, large enough that the step runs in parallel chunks.
fn network() -> Vec<(String, Vec<f32>, Vec<f32>)> {
    [
        ("critic.w1", 70_000usize),
        ("critic.b1", 300),
        ("actor.w", 90_001),
    ]
    .iter()
    .enumerate()
    .map(|(k, &(name, n))| {
        (
            name.to_owned(),
            normal(n, k as u64, 1.0),
            normal(n, 100 + k as u64, 0.1),
        )
    })
    .collect()
}

fn train(par: Par, rule: impl Rule<f32> + Clone + 'static) -> Vec<u32> {
    let mut opt = Optimizer::<f32>::new(rule, 3e-4).unwrap();
    opt.set_par(par);
    let mut net = network();
    for _ in 0..3 {
        let mut params: Vec<Param<'_, f32>> = net
            .iter_mut()
            .map(|(n, v, g)| Param {
                name: n,
                value: v,
                grad: g,
            })
            .collect();
        opt.step(&mut params).unwrap();
    }
    net.iter().flat_map(|(_, v, _)| bits(v)).collect()
}

#[test]
fn steps_are_bitwise_equal_for_1_2_and_4_threads() {
    for rule in [
        Adam::torch(),
        Adam {
            amsgrad: true,
            ..Adam::keras()
        },
    ] {
        let reference = train(Par::Seq, rule);
        for par in [Par::rayon(2), Par::rayon(4)] {
            assert!(train(par, rule) == reference);
        }
        for got in in_thread_pools(&[1, 2, 4], |par| train(par, rule)) {
            assert!(got == reference);
        }
    }
    let momentum = Momentum {
        nesterov: true,
        ..Momentum::new(MomentumFlavor::Torch)
    };
    assert!(train(Par::rayon(3), momentum) == train(Par::Seq, momentum));
}

#[test]
fn splitting_a_parameter_changes_no_bits() {
    // Any chunking of the elements gives the same result: one tensor or two halves.
    let w = normal(1000, 1, 1.0);
    let g = normal(1000, 2, 0.1);
    let mut whole = w.clone();
    let mut opt = Optimizer::<f32>::new(AdamW::default(), 1e-3).unwrap();
    opt.step(&mut [Param {
        name: "w",
        value: &mut whole,
        grad: &g,
    }])
    .unwrap();
    let (mut left, mut right) = (w[..333].to_vec(), w[333..].to_vec());
    let mut split = Optimizer::<f32>::new(AdamW::default(), 1e-3).unwrap();
    split
        .step(&mut [
            Param {
                name: "l",
                value: &mut left,
                grad: &g[..333],
            },
            Param {
                name: "r",
                value: &mut right,
                grad: &g[333..],
            },
        ])
        .unwrap();
    left.extend(right);
    assert_eq!(bits(&whole), bits(&left));
}

#[test]
fn device_steps_equal_slice_steps() {
    let cpu = Cpu::new(Par::rayon(2));
    let rules: Vec<Box<dyn Rule<f32>>> = vec![
        Box::new(Adam::keras()),
        Box::new(Rmsprop {
            centered: true,
            momentum: 0.9,
            ..Rmsprop::torch()
        }),
        Box::new(Adagrad::torch()),
    ];
    for rule in rules {
        let name = rule.name();
        let mut slice_opt = Optimizer::<f32>::new(rule, 1e-2).unwrap();
        let rule_again: Box<dyn Rule<f32>> = match name {
            "adam" => Box::new(Adam::keras()),
            "rmsprop" => Box::new(Rmsprop {
                centered: true,
                momentum: 0.9,
                ..Rmsprop::torch()
            }),
            _ => Box::new(Adagrad::torch()),
        };
        let mut device_opt = Optimizer::<f32, Cpu>::new_on(cpu, rule_again, 1e-2).unwrap();
        let mut w = normal(100, 3, 1.0);
        let mut w_device = cpu.upload(&w).unwrap();
        for k in 0..4 {
            let g = normal(100, 10 + k, 0.2);
            slice_opt
                .step(&mut [Param {
                    name: "w",
                    value: &mut w,
                    grad: &g,
                }])
                .unwrap();
            let g_device = cpu.upload(&g).unwrap();
            device_opt
                .step_on(&mut [DeviceParam {
                    name: "w",
                    value: &mut w_device,
                    grad: &g_device,
                }])
                .unwrap();
        }
        assert_eq!(bits(&w), bits(&cpu.download(&w_device).unwrap()), "{name}");
    }
}

#[test]
fn bad_hyper_parameters_are_refused() {
    let msg = |r: Result<Optimizer<f32>, Error>| r.unwrap_err().to_string();
    assert!(
        msg(Optimizer::new(
            Adam {
                beta1: 1.0,
                ..Adam::torch()
            },
            1e-3
        ))
        .contains("`beta1`")
    );
    assert!(
        msg(Optimizer::new(
            Adam {
                beta2: -0.1,
                ..Adam::torch()
            },
            1e-3
        ))
        .contains("`beta2`")
    );
    assert!(
        msg(Optimizer::new(
            Adam {
                eps: 0.0,
                ..Adam::torch()
            },
            1e-3
        ))
        .contains("`eps`")
    );
    assert!(
        msg(Optimizer::new(
            AdamW {
                weight_decay: f64::NAN,
                ..AdamW::default()
            },
            1e-3
        ))
        .contains("`weight_decay`")
    );
    assert!(
        msg(Optimizer::new(
            Momentum {
                momentum: 1.0,
                ..Momentum::new(MomentumFlavor::Keras)
            },
            1e-3
        ))
        .contains("`momentum`")
    );
    // A schedule whose rate turns negative, or infinite, after the first step.
    let turns = |later: f64| {
        Sequence::new(
            vec![Box::new(Constant(1e-3)), Box::new(Constant(later))],
            vec![1],
        )
        .unwrap()
    };
    for later in [-1e-3, f64::INFINITY] {
        let mut opt = Optimizer::<f32>::new(Sgd::default(), turns(later)).unwrap();
        let mut w = vec![1.0f32];
        step_w(&mut opt, &mut w, &[1.0]).unwrap();
        let after_one = w.clone();
        let err = step_w(&mut opt, &mut w, &[1.0]).unwrap_err();
        assert!(err.to_string().contains("`schedule` is invalid"), "{err}");
        assert_eq!(w, after_one);
        assert_eq!(opt.step_count(), 1);
    }
}

#[test]
fn bad_steps_change_nothing() {
    let mut opt = Optimizer::<f32>::new(Adam::torch(), 1e-2).unwrap();
    let (mut a, mut b) = (vec![1.0f32; 3], vec![2.0f32; 2]);
    let err = opt
        .step(&mut [Param {
            name: "a",
            value: &mut a,
            grad: &[0.1; 2],
        }])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Optimizer::step: argument `grad` has the wrong shape: expected 3 elements, got 2"
    );
    opt.step(&mut [Param {
        name: "a",
        value: &mut a,
        grad: &[0.1; 3],
    }])
    .unwrap();
    // The same name with another length, and a repeated name.
    assert!(
        opt.step(&mut [Param {
            name: "a",
            value: &mut b,
            grad: &[0.1; 2]
        }])
        .unwrap_err()
        .to_string()
        .contains("as its state")
    );
    let (mut c, mut d) = (vec![0.0f32; 3], vec![0.0f32; 3]);
    assert!(
        opt.step(&mut [
            Param {
                name: "a",
                value: &mut c,
                grad: &[0.1; 3]
            },
            Param {
                name: "a",
                value: &mut d,
                grad: &[0.1; 3]
            }
        ])
        .is_err()
    );
    assert_eq!(opt.step_count(), 1);
    // The finite check names the first bad parameter and leaves every parameter alone.
    opt.check_finite(true);
    let before = (a.clone(), b.clone());
    let err = opt
        .step(&mut [
            Param {
                name: "a",
                value: &mut a,
                grad: &[0.1; 3],
            },
            Param {
                name: "b",
                value: &mut b,
                grad: &[0.0, f32::NAN],
            },
        ])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("NaN at element 1 of the gradient of `b`"),
        "{err}"
    );
    assert_eq!((a, b), before);
    assert_eq!(opt.step_count(), 1);
}

#[test]
fn state_for_other_parameters_is_refused() {
    let mut opt = Optimizer::<f32>::new(Adam::torch(), 1e-2).unwrap();
    let mut w = vec![1.0f32; 3];
    opt.step(&mut [Param {
        name: "w",
        value: &mut w,
        grad: &[0.1; 3],
    }])
    .unwrap();
    let state = opt.state().unwrap();
    // Another rule's slots.
    let mut sgd = Optimizer::<f32>::new(Momentum::new(MomentumFlavor::Torch), 1e-2).unwrap();
    assert!(
        sgd.load_state(state.clone())
            .unwrap_err()
            .to_string()
            .contains("rule momentum (torch)")
    );
    // The right rule, but another parameter set at the next step.
    let mut fresh = Optimizer::<f32>::new(Adam::torch(), 1e-2).unwrap();
    fresh.load_state(state).unwrap();
    let mut v = vec![1.0f32; 3];
    let err = fresh
        .step(&mut [Param {
            name: "v",
            value: &mut v,
            grad: &[0.1; 3],
        }])
        .unwrap_err();
    assert!(matches!(err, Error::State { .. }), "{err}");
    assert_eq!(v, [1.0; 3]);
}

#[cfg(feature = "serde")]
#[test]
fn state_survives_json() {
    let mut opt = Optimizer::<f64>::new(Adam::keras(), 1e-2).unwrap();
    let mut w = vec![1.0f64, 2.0];
    opt.step(&mut [Param {
        name: "w",
        value: &mut w,
        grad: &[0.1, 0.2],
    }])
    .unwrap();
    let state = opt.state().unwrap();
    let json = serde_json::to_string(&state).unwrap();
    assert_eq!(
        serde_json::from_str::<OptimizerState<f64>>(&json).unwrap(),
        state
    );
}

#[test]
fn a_custom_sign_sgd_rule_minimizes_a_quadratic() {
    #[derive(Debug, Clone, Copy)]
    struct SignSgd;
    impl Rule<f64> for SignSgd {
        fn name(&self) -> &'static str {
            "sign_sgd"
        }
        fn slot_names(&self) -> Vec<&'static str> {
            Vec::new()
        }
        fn step(&self, _step: u64, lr: f64) -> StepRule<'_, f64> {
            StepRule::Custom(Box::new(
                move |p: &mut [f64], g: &[f64], _: &mut [&mut [f64]]| {
                    for (p, &g) in p.iter_mut().zip(g) {
                        *p -= lr * g.signum();
                    }
                },
            ))
        }
    }
    let mut opt = Optimizer::new(
        SignSgd,
        Exponential {
            base: 0.5,
            gamma: 0.9,
        },
    )
    .unwrap();
    let mut x = vec![3.0f64, -2.0];
    for _ in 0..200 {
        let g: Vec<f64> = x.iter().map(|&v| 2.0 * v).collect();
        opt.step(&mut [Param {
            name: "x",
            value: &mut x,
            grad: &g,
        }])
        .unwrap();
    }
    assert!(x.iter().all(|v| v.abs() < 0.2), "{x:?}");
    // Custom rules run on the host only.
    let cpu = Cpu::seq();
    let mut on_device = Optimizer::<f64, Cpu>::new_on(cpu, SignSgd, 0.1).unwrap();
    let (mut w, g) = (cpu.upload(&[1.0]).unwrap(), cpu.upload(&[1.0]).unwrap());
    assert!(
        on_device
            .step_on(&mut [DeviceParam {
                name: "w",
                value: &mut w,
                grad: &g
            }])
            .is_err()
    );
}

/// A rule chosen at run time.
type BoxedRule = Box<dyn Rule<f32>>;

fn step_w(opt: &mut Optimizer<f32>, w: &mut [f32], grad: &[f32]) -> Result<(), Error> {
    opt.step(&mut [Param {
        name: "w",
        value: w,
        grad,
    }])
}

#[test]
fn every_state_resumes() {
    let grads: Vec<Vec<f32>> = (0..4).map(|k| normal(3, 40 + k, 0.5)).collect();
    let rules: Vec<fn() -> BoxedRule> = vec![
        || Box::new(Sgd::default()),
        || Box::new(Adam::torch()),
        || {
            Box::new(Rmsprop {
                momentum: 0.5,
                centered: true,
                ..Rmsprop::keras()
            })
        },
    ];
    for rule in &rules {
        // Exported after 0, 1 and 2 steps (plain SGD keeps no slot at all).
        for split in 0..3 {
            let schedule = StepDecay {
                base: 0.1,
                step_size: 1,
                gamma: 0.5,
            };
            let mut opt = Optimizer::<f32>::new(rule(), schedule).unwrap();
            let mut w = vec![1.0f32, -1.0, 0.5];
            for g in &grads[..split] {
                step_w(&mut opt, &mut w, g).unwrap();
            }
            let (state, mut w2) = (opt.state().unwrap(), w.clone());
            let mut resumed = Optimizer::<f32>::new(rule(), schedule).unwrap();
            resumed.load_state(state).unwrap();
            assert_eq!(resumed.last_lr(0), opt.last_lr(0));
            assert_eq!(
                resumed.effective_lr(0).ok(),
                opt.effective_lr(0).ok(),
                "split {split}"
            );
            for g in &grads[split..] {
                step_w(&mut opt, &mut w, g).unwrap();
                step_w(&mut resumed, &mut w2, g).unwrap();
            }
            assert_eq!(bits(&w), bits(&w2), "{} split {split}", rule().name());
            assert_eq!(opt.state().unwrap(), resumed.state().unwrap());
        }
    }
}

#[test]
fn state_records_what_gives_the_slots_their_meaning() {
    let export = |rule: BoxedRule| {
        let mut opt = Optimizer::<f32>::new(rule, 1e-2).unwrap();
        step_w(&mut opt, &mut [1.0, 2.0], &[0.1, 0.2]).unwrap();
        opt.state().unwrap()
    };
    let pairs: Vec<(BoxedRule, BoxedRule)> = vec![
        (
            Box::new(Rmsprop {
                momentum: 0.9,
                ..Rmsprop::torch()
            }),
            Box::new(Rmsprop {
                momentum: 0.9,
                ..Rmsprop::keras()
            }),
        ),
        (
            Box::new(Rmsprop {
                centered: true,
                ..Rmsprop::torch()
            }),
            Box::new(Rmsprop::torch()),
        ),
        (
            Box::new(Momentum {
                nesterov: true,
                ..Momentum::new(MomentumFlavor::Keras)
            }),
            Box::new(Momentum::new(MomentumFlavor::Keras)),
        ),
        (
            Box::new(Adam {
                amsgrad: true,
                ..Adam::torch()
            }),
            Box::new(Adam::torch()),
        ),
        (Box::new(Adam::torch()), Box::new(Adam::keras())),
        (Box::new(Adagrad::torch()), Box::new(Adagrad::keras())),
        (Box::new(Adam::torch()), Box::new(AdamW::default())),
    ];
    for (from, to) in pairs {
        let (from_spec, to_spec) = (from.spec(), to.spec());
        let state = export(from);
        let mut opt = Optimizer::<f32>::new(to, 1e-2).unwrap();
        let err = opt.load_state(state).unwrap_err().to_string();
        assert!(
            err.contains(&from_spec.to_string()) && err.contains(&to_spec.to_string()),
            "{err}"
        );
        assert_eq!(opt.step_count(), 0);
    }
    // Other hyper-parameters are refused as well: tests/integration/hyperparameters.rs.
}

#[test]
fn imported_state_is_checked_before_anything_changes() {
    let mut opt = Optimizer::<f32>::new(Adam::torch(), 1e-2).unwrap();
    step_w(&mut opt, &mut [1.0, 2.0], &[0.1, 0.2]).unwrap();
    let good = opt.state().unwrap();
    let mut short = good.clone();
    short
        .params
        .get_mut("w")
        .unwrap()
        .slots
        .get_mut("v")
        .unwrap()
        .pop();
    let mut fresh = Optimizer::<f32>::new(Adam::torch(), 1e-2).unwrap();
    let err = fresh.load_state(short).unwrap_err().to_string();
    assert!(err.contains("slot `v` of `w` with 2 elements"), "{err}");
    let mut two_groups = Optimizer::<f32>::new(Adam::torch(), 1e-2).unwrap();
    two_groups.add_group(&["b"], Sgd::default(), 0.1).unwrap();
    let err = two_groups.load_state(good).unwrap_err().to_string();
    assert!(
        err.contains("2 groups") && err.contains("1 groups"),
        "{err}"
    );
    let before = fresh.state().unwrap();
    assert_eq!(before.params.len(), 0);
    assert_eq!(fresh.step_count(), 0);
}

#[test]
fn the_effective_rate_of_a_parameter_counts_its_own_steps() {
    let mut opt = Optimizer::<f32>::new(Adam::torch(), 1e-3).unwrap();
    let (mut a, mut b) = (vec![1.0f32], vec![1.0f32]);
    for k in 0..5 {
        let mut params = vec![Param {
            name: "a",
            value: &mut a,
            grad: &[0.5],
        }];
        if k >= 3 {
            params.push(Param {
                name: "b",
                value: &mut b,
                grad: &[0.5],
            });
        }
        opt.step(&mut params).unwrap();
    }
    let alpha = |t: i32| 1e-3 * (1.0 - 0.999f64.powi(t)).sqrt() / (1.0 - 0.9f64.powi(t));
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-15 * b;
    assert!(close(opt.effective_lr(0).unwrap(), alpha(5)));
    assert!(close(opt.effective_lr_of("a").unwrap(), alpha(5)));
    assert!(close(opt.effective_lr_of("b").unwrap(), alpha(2)));
    assert!(!close(alpha(5), alpha(2)));
    assert!(
        opt.effective_lr_of("c")
            .unwrap_err()
            .to_string()
            .contains("`param`")
    );
    // It survives an export.
    let mut resumed = Optimizer::<f32>::new(Adam::torch(), 1e-3).unwrap();
    resumed.load_state(opt.state().unwrap()).unwrap();
    assert_eq!(
        resumed.effective_lr_of("b").unwrap(),
        opt.effective_lr_of("b").unwrap()
    );
}

#[test]
fn pytorch_habits() {
    // The first learning rate is checked when the optimizer is built.
    let err = Optimizer::<f32>::new(Sgd::default(), -1.0).unwrap_err();
    assert!(err.to_string().contains("`schedule`"), "{err}");
    assert!(Optimizer::<f32>::new(Sgd::default(), f64::NAN).is_err());
    let mut opt = Optimizer::<f32>::new(Sgd::default(), 0.5f32).unwrap();
    assert!(opt.add_group(&["b"], Sgd::default(), -0.1f32).is_err());
    // An f32 learning rate is a constant schedule.
    let mut w = vec![1.0f32];
    step_w(&mut opt, &mut w, &[1.0]).unwrap();
    assert_eq!(w, [0.5]);
    // Schedules clone, boxed ones too.
    let boxed: Box<dyn Schedule> =
        Box::new(Sequence::new(vec![Box::new(Constant(1.0)), Box::new(0.5f32)], vec![2]).unwrap());
    let copy = boxed.clone();
    assert_eq!((copy.lr(1), copy.lr(2)), (1.0, 0.5));
    // A wrong slot name lists the valid ones.
    let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3).unwrap();
    step_w(&mut adam, &mut w, &[1.0]).unwrap();
    let err = adam.slot("w", "exp_avg_sq").unwrap_err().to_string();
    assert!(
        err.contains(r#"["m", "v"]"#) && err.contains("exp_avg_sq"),
        "{err}"
    );
    assert!(adam.slot_values("w", "exp_avg").is_err());
    assert!(adam.slot("nope", "m").is_err());
    assert_eq!(
        adam.slot_values("w", "m").unwrap(),
        adam.slot("w", "m").unwrap()
    );
}
