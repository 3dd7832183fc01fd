//! Every public function of rlgrad-optim with random rules, schedules, parameter sets and
//! non-finite values: each call returns `Ok` or `Err` (or `None`), never panics, and a call
//! that fails leaves the parameters, the gradients it would clip and the optimizer's state
//! as they were.

use proptest::prelude::*;
use rlgrad_optim::*;
use rlgrad_testkit::strategies::{self, config};

/// A hyper-parameter: usually a plausible value, sometimes anything at all.
fn hyper() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0f64..1.0,
        1 => strategies::any_value::<f64>(),
    ]
}

// The strategies are boxed: their value trees nest deep enough otherwise to overflow a
// test thread's stack in an unoptimized build.
fn rule() -> BoxedStrategy<Box<dyn Rule<f32>>> {
    let flavor = prop_oneof![Just(Flavor::Torch), Just(Flavor::Keras)];
    let momentum_flavor = prop_oneof![
        Just(MomentumFlavor::Torch),
        Just(MomentumFlavor::Keras),
        Just(MomentumFlavor::Core)
    ];
    prop_oneof![
        hyper().prop_map(|weight_decay| Box::new(Sgd { weight_decay }) as Box<dyn Rule<f32>>),
        (momentum_flavor, hyper(), hyper(), any::<bool>(), hyper()).prop_map(
            |(flavor, momentum, dampening, nesterov, weight_decay)| {
                Box::new(Momentum {
                    flavor,
                    momentum,
                    dampening,
                    nesterov,
                    weight_decay,
                }) as Box<dyn Rule<f32>>
            }
        ),
        (flavor.clone(), hyper(), hyper(), hyper(), any::<bool>()).prop_map(
            |(flavor, beta1, beta2, eps, amsgrad)| {
                Box::new(Adam {
                    flavor,
                    beta1,
                    beta2,
                    eps,
                    weight_decay: 0.0,
                    amsgrad,
                }) as Box<dyn Rule<f32>>
            }
        ),
        (hyper(), hyper(), any::<bool>()).prop_map(|(eps, weight_decay, amsgrad)| {
            Box::new(AdamW {
                eps,
                weight_decay,
                amsgrad,
                ..AdamW::default()
            }) as Box<dyn Rule<f32>>
        }),
        (flavor.clone(), hyper(), hyper(), hyper(), any::<bool>()).prop_map(
            |(flavor, alpha, eps, momentum, centered)| {
                Box::new(Rmsprop {
                    flavor,
                    alpha,
                    eps,
                    momentum,
                    centered,
                    weight_decay: 0.0,
                }) as Box<dyn Rule<f32>>
            }
        ),
        (flavor, hyper(), hyper(), hyper()).prop_map(|(flavor, lr_decay, eps, init)| {
            Box::new(Adagrad {
                flavor,
                lr_decay,
                eps,
                initial_accumulator_value: init,
                weight_decay: 0.0,
            }) as Box<dyn Rule<f32>>
        }),
    ]
    .boxed()
}

fn schedule() -> BoxedStrategy<Box<dyn Schedule>> {
    let steps = prop_oneof![0u64..4, Just(u64::MAX)];
    prop_oneof![
        hyper().prop_map(|lr| Box::new(lr) as Box<dyn Schedule>),
        (hyper(), steps.clone(), hyper()).prop_map(|(base, step_size, gamma)| Box::new(StepDecay {
            base,
            step_size,
            gamma
        })
            as Box<dyn Schedule>),
        (hyper(), hyper())
            .prop_map(|(base, gamma)| Box::new(Exponential { base, gamma }) as Box<dyn Schedule>),
        (hyper(), hyper(), steps.clone()).prop_map(|(base, min, steps)| Box::new(Cosine {
            base,
            min,
            steps
        })
            as Box<dyn Schedule>),
        (steps, hyper()).prop_map(|(steps, lr)| Box::new(LinearWarmup {
            steps,
            then: Constant(lr)
        }) as Box<dyn Schedule>),
        (hyper(), hyper(), 0u64..3).prop_map(|(a, b, at)| {
            let parts: Vec<Box<dyn Schedule>> = vec![Box::new(a), Box::new(Constant(b))];
            match Sequence::new(parts, vec![at]) {
                Ok(sequence) => Box::new(sequence) as Box<dyn Schedule>,
                Err(_) => Box::new(a),
            }
        }),
    ]
    .boxed()
}

/// One step's parameters: a name out of three, values and a gradient, usually of the same
/// small length.
fn params() -> impl Strategy<Value = Vec<(usize, Vec<f32>, Vec<f32>)>> {
    let param = (0usize..3, 0usize..4, 0usize..8).prop_flat_map(|(name, len, grad_len)| {
        let grad_len = if grad_len < 4 { len } else { grad_len - 4 };
        (
            Just(name),
            strategies::vec(strategies::any_value::<f32>(), len),
            strategies::vec(strategies::any_value::<f32>(), grad_len),
        )
    });
    strategies::vec(param, 0..4)
}

const NAMES: [&str; 3] = ["a", "b", "c"];

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// The state, comparable even when it holds NaN.
fn snapshot(opt: &Optimizer<f32>) -> String {
    format!("{:?} {:?}", opt.state(), opt.step_count())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn prop_every_function_returns_ok_or_err(
        rule in rule(),
        schedule in schedule(),
        group in proptest::option::of((rule(), schedule(), 0usize..3)),
        replacement in (rule(), schedule()),
        steps in strategies::vec(params(), 1..5),
        check_finite in any::<bool>(),
        picks in strategies::vec(any::<usize>(), 6),
    ) {
        let Ok(mut opt) = Optimizer::new(rule, schedule.clone()) else {
            return Ok(());
        };
        if let Some((rule, schedule, member)) = group {
            let before = snapshot(&opt);
            if opt.add_group(&[NAMES[member]], rule, schedule).is_err() {
                prop_assert_eq!(snapshot(&opt), before);
            }
        }
        opt.check_finite(check_finite);
        let cpu = Cpu::new(Par::rayon(1 + picks[0] % 3));
        let mut on_device = Optimizer::<f32, Cpu>::new_on(cpu, Sgd::default(), schedule).ok();
        for step in steps {
            let mut values: Vec<Vec<f32>> = step.iter().map(|(_, v, _)| v.clone()).collect();
            let before_values: Vec<Vec<u32>> = values.iter().map(|v| bits(v)).collect();
            let before = snapshot(&opt);
            let mut params: Vec<Param<'_, f32>> = step
                .iter()
                .zip(values.iter_mut())
                .map(|((name, _, grad), value)| Param { name: NAMES[*name], value, grad })
                .collect();
            if opt.step(&mut params).is_err() {
                prop_assert_eq!(snapshot(&opt), before);
                let after: Vec<Vec<u32>> = values.iter().map(|v| bits(v)).collect();
                prop_assert_eq!(after, before_values);
            }
            if let Some(device_opt) = on_device.as_mut() {
                let mut buffers: Vec<Vec<f32>> = step.iter().map(|(_, v, _)| v.clone()).collect();
                let mut params: Vec<DeviceParam<'_, f32, Cpu>> = step
                    .iter()
                    .zip(buffers.iter_mut())
                    .map(|((name, _, grad), value)| DeviceParam { name: NAMES[*name], value, grad })
                    .collect();
                let _ = device_opt.step_on(&mut params);
            }
        }
        for name in NAMES {
            let _ = opt.effective_lr_of(name);
            for slot in ["m", "v", "sum", "momentum_buffer", "exp_avg"] {
                let _ = opt.slot(name, slot);
                let _ = opt.slot_values(name, slot);
            }
        }
        let _ = opt.effective_lr(picks[1] % 3);
        let _ = opt.last_lr(picks[2] % 3);
        let _ = opt.rule(picks[3] % 3).map(|r| (r.spec().to_string(), r.slot_names()));
        prop_assert_eq!(snapshot(&opt.clone()), snapshot(&opt));
        let (new_rule, new_schedule) = replacement;
        let before = snapshot(&opt);
        if opt.set_rule(picks[5] % 3, new_rule).is_err() {
            prop_assert_eq!(snapshot(&opt), before);
        }
        let before = snapshot(&opt);
        if opt.set_schedule(picks[5] % 3, new_schedule).is_err() {
            prop_assert_eq!(snapshot(&opt), before);
        }

        // Imported state, intact or damaged: an error changes nothing.
        if let Ok(mut state) = opt.state() {
            match picks[4] % 6 {
                0 => state.last_lrs.push(None),
                1 => {
                    if let Some(p) = state.params.values_mut().next() {
                        p.len = p.len.wrapping_add(1);
                    }
                }
                2 => {
                    if let Some(p) = state.params.values_mut().next() {
                        p.rule.options.push("centered".to_owned());
                    }
                }
                3 => {
                    if let Some(p) = state.params.values_mut().next() {
                        p.slots.insert("exp_avg".to_owned(), Vec::new());
                    }
                }
                4 => {
                    for value in state.groups[0].hyperparameters.values_mut() {
                        *value = -*value - 1.0;
                    }
                }
                _ => {}
            }
            let before = snapshot(&opt);
            if opt.load_state(state).is_err() {
                prop_assert_eq!(snapshot(&opt), before);
            }
        }
    }

    #[test]
    fn prop_clipping_and_target_updates_return_ok_or_err(
        grads in strategies::vec(strategies::vec(strategies::any_value::<f32>(), 0..6), 0..4),
        source in strategies::vec(strategies::any_value::<f32>(), 0..6),
        limit in strategies::any_value::<f64>(),
        tau in hyper(),
        threads in 1usize..4,
    ) {
        let all_bits = |g: &[Vec<f32>]| g.iter().map(|v| bits(v)).collect::<Vec<_>>();
        let mut g = grads.clone();
        let mut views: Vec<&mut [f32]> = g.iter_mut().map(Vec::as_mut_slice).collect();
        if clip_grad_norm_with(&mut views, limit, Par::rayon(threads)).is_err() {
            prop_assert_eq!(all_bits(&g), all_bits(&grads));
        }
        let mut g = grads.clone();
        let mut views: Vec<&mut [f32]> = g.iter_mut().map(Vec::as_mut_slice).collect();
        if clip_grad_value(&mut views, limit).is_err() {
            prop_assert_eq!(all_bits(&g), all_bits(&grads));
        }
        let all: Vec<&[f32]> = grads.iter().map(Vec::as_slice).collect();
        let _ = global_norm(&all, Par::rayon(threads));
        for target in &grads {
            let mut t = target.clone();
            if polyak_update(&mut t, &source, tau).is_err() {
                prop_assert_eq!(bits(&t), bits(target));
            }
            let mut t = target.clone();
            if hard_update(&mut t, &source).is_err() {
                prop_assert_eq!(bits(&t), bits(target));
            }
        }
    }

    #[test]
    fn prop_schedules_and_the_convergence_test_return_values(
        schedule in schedule(),
        step in prop_oneof![0u64..10, Just(u64::MAX)],
        lr in hyper(),
        init in strategies::any_value::<f32>(),
        iters in 0usize..20,
    ) {
        let _ = schedule.lr(step);
        let _ = schedule.clone().lr(step);
        for optimizer in [
            converge::GuideOptimizer::GradientDescent,
            converge::GuideOptimizer::Momentum { momentum: lr },
        ] {
            let _ = converge::run(optimizer, lr, init, iters);
        }
    }
}
