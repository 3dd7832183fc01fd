//! The Cpu fused optimizer update on plain slices (the slice level of `rlgrad-optim`).
//!
//! Parameters are cut into chunks of 16k elements; all chunks of all parameters of
//! a step run in one parallel region, each chunk in one vectorized pass over its param,
//! grad and slot elements. Updates are elementwise, so the chunking never changes bits.

use rayon::prelude::*;
use smallvec::SmallVec;

use crate::cpu::grain::{Family, grain};
use crate::cpu::simd::{Vectorized, widest};
use crate::kernels::optim::{MAX_SLOTS, Update};
use crate::{Error, Float, Par, Result};

/// Elements per chunk of work.
const CHUNK: usize = 1 << 14;

/// One parameter's update: the rule with its step scalars, the parameter, its gradient
/// and its slots (in the order of [`Update::slot_names`]).
#[derive(Debug)]
pub struct Job<'a, T> {
    /// The update rule and its scalars.
    pub update: Update<T>,
    /// The parameter, updated in place.
    pub param: &'a mut [T],
    /// Its gradient.
    pub grad: &'a [T],
    /// Its slots.
    pub slots: Vec<&'a mut [T]>,
}

struct Chunk<'a, T> {
    update: Update<T>,
    param: &'a mut [T],
    grad: &'a [T],
    slots: SmallVec<[&'a mut [T]; MAX_SLOTS]>,
}

impl<T: Float> Vectorized for Chunk<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(mut self) {
        self.update
            .apply_chunk(self.param, self.grad, &mut self.slots);
    }
}

fn check<T: Float>(update: &Update<T>, param: &[T], grad: &[T], slots: &[&mut [T]]) -> Result<()> {
    let len = param.len();
    if grad.len() != len {
        return Err(Error::shape(
            "optim::update",
            "grad",
            format_args!("{len} elements, as the parameter"),
            format_args!("{} elements", grad.len()),
        ));
    }
    let names = update.slot_names();
    if slots.len() != names.len() {
        return Err(Error::shape(
            "optim::update",
            "slots",
            format_args!("{} slots ({})", names.len(), names.join(", ")),
            format_args!("{} slots", slots.len()),
        ));
    }
    if let Some((name, slot)) = names.iter().zip(slots).find(|(_, s)| s.len() != len) {
        return Err(Error::shape(
            "optim::update",
            "slots",
            format_args!("slot `{name}` of {len} elements"),
            format_args!("{} elements", slot.len()),
        ));
    }
    Ok(())
}

/// Applies every job: all chunks of all parameters run in one parallel region.
pub fn update_all<T: Float>(par: Par, jobs: Vec<Job<'_, T>>) -> Result<()> {
    for job in &jobs {
        check(&job.update, job.param, job.grad, &job.slots)?;
    }
    let total: usize = jobs.iter().map(|j| j.param.len()).sum();
    let mut chunks = Vec::with_capacity(total.div_ceil(CHUNK) + jobs.len());
    for job in jobs {
        let Job {
            update,
            param,
            grad,
            slots,
        } = job;
        let mut slot_chunks: SmallVec<[_; MAX_SLOTS]> =
            slots.into_iter().map(|s| s.chunks_mut(CHUNK)).collect();
        for (param, grad) in param.chunks_mut(CHUNK).zip(grad.chunks(CHUNK)) {
            let slots = slot_chunks
                .iter_mut()
                .map(|it| it.next().expect("slots have the parameter's length"))
                .collect();
            chunks.push(Chunk {
                update,
                param,
                grad,
                slots,
            });
        }
    }
    par.for_work(total, grain(Family::Optim))
        .for_each_item(chunks, widest);
    Ok(())
}

/// Applies one update to one parameter, allocating nothing (the device-level step).
pub fn update<T: Float>(
    par: Par,
    update: &Update<T>,
    param: &mut [T],
    grad: &[T],
    slots: &mut [&mut [T]],
) -> Result<()> {
    check(update, param, grad, slots)?;
    let par = par.for_work(param.len(), grain(Family::Optim));
    let update = *update;
    fn chunk<'a, T: Float>(
        update: Update<T>,
        param: &'a mut [T],
        grad: &'a [T],
        slots: SmallVec<[&'a mut [T]; MAX_SLOTS]>,
    ) {
        widest(Chunk {
            update,
            param,
            grad,
            slots,
        });
    }
    let run = |p, g, s| chunk(update, p, g, s);
    if par.threads() == 1 {
        for (i, (p, g)) in param.chunks_mut(CHUNK).zip(grad.chunks(CHUNK)).enumerate() {
            let range = i * CHUNK..i * CHUNK + p.len();
            chunk(
                update,
                p,
                g,
                slots.iter_mut().map(|s| &mut s[range.clone()]).collect(),
            );
        }
        return Ok(());
    }
    let chunks = param.len().div_ceil(CHUNK);
    let per_task = chunks.div_ceil(par.threads());
    let pieces = param
        .par_chunks_mut(CHUNK)
        .zip(grad.par_chunks(CHUNK))
        .with_min_len(per_task);
    par.split(|| match slots {
        [] => pieces.for_each(|(p, g)| run(p, g, SmallVec::new())),
        [a] => pieces
            .zip(a.par_chunks_mut(CHUNK))
            .for_each(|((p, g), a)| run(p, g, SmallVec::from_iter([a]))),
        [a, b] => pieces
            .zip(a.par_chunks_mut(CHUNK).zip(b.par_chunks_mut(CHUNK)))
            .for_each(|((p, g), (a, b))| run(p, g, SmallVec::from_iter([a, b]))),
        [a, b, c] => pieces
            .zip(
                a.par_chunks_mut(CHUNK)
                    .zip(b.par_chunks_mut(CHUNK))
                    .zip(c.par_chunks_mut(CHUNK)),
            )
            .for_each(|((p, g), ((a, b), c))| run(p, g, SmallVec::from_iter([a, b, c]))),
        _ => unreachable!("check accepted at most MAX_SLOTS slots"),
    });
    Ok(())
}

/// Polyak averaging of `target` toward `source`: `target = (source * tau) + (target *
/// keep)` elementwise, in parallel chunks (elementwise: any split gives the same bits).
/// An error for mismatched lengths.
pub fn polyak<T: Float>(par: Par, tau: T, keep: T, target: &mut [T], source: &[T]) -> Result<()> {
    crate::kernels::optim::check_polyak(
        "polyak",
        [target.len()].into_iter(),
        [source.len()].into_iter(),
    )?;
    par.for_work(target.len(), grain(Family::Optim))
        .for_each_chunk_mut(target, CHUNK, |ci, chunk| {
            for (t, &s) in chunk.iter_mut().zip(&source[ci * CHUNK..]) {
                *t = s * tau + *t * keep;
            }
        });
    Ok(())
}

mod device {
    use super::super::Cpu;
    use super::MAX_SLOTS;
    use crate::kernels::clip;
    use crate::kernels::optim::{OptimKernel, Update, check_clip, check_polyak};
    use crate::{Float, Result};

    impl<T: Float> OptimKernel<T> for Cpu {
        fn update(
            &self,
            update: &Update<T>,
            param: &mut Vec<T>,
            grad: &Vec<T>,
            slots: &mut [&mut Vec<T>],
        ) -> Result<()> {
            let mut slots: smallvec::SmallVec<[&mut [T]; MAX_SLOTS]> =
                slots.iter_mut().map(|s| s.as_mut_slice()).collect();
            super::update(self.par(), update, param, grad, &mut slots)
        }

        fn polyak(
            &self,
            tau: T,
            keep: T,
            targets: &mut [&mut Vec<T>],
            sources: &[&Vec<T>],
        ) -> Result<()> {
            check_polyak(
                "Cpu::polyak",
                targets.iter().map(|t| t.len()),
                sources.iter().map(|s| s.len()),
            )?;
            for (target, source) in targets.iter_mut().zip(sources) {
                super::polyak(self.par(), tau, keep, target, source)?;
            }
            Ok(())
        }

        fn clip_scale(&self, largest: &Vec<T>, scale: &mut Vec<T>) -> Result<()> {
            let lengths = [("largest", largest.len()), ("scale", scale.len())];
            check_clip("Cpu::clip_scale", lengths, 1, None)?;
            scale[0] = clip::down_scale(largest[0]);
            Ok(())
        }

        fn clip_plan(&self, max_norm: f64, sums: &Vec<T>, out: &mut Vec<T>) -> Result<()> {
            let lengths = [("sums", sums.len()), ("out", out.len())];
            check_clip("Cpu::clip_plan", lengths, 3, Some(max_norm))?;
            let factors = clip::clip_factors(max_norm, sums[0], sums[1], sums[2]);
            out.copy_from_slice(&factors.map_err(|e| e.in_function("Cpu::clip_plan"))?);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Cpu;
    use crate::kernels::optim::{Adam, AdamTorch, BufferJob, Momentum, OptimKernel, Update};
    use crate::{Par, Rng};

    fn adam(step_size: f32) -> Update<f32> {
        Update::Adam(Adam::Torch(AdamTorch {
            step_size,
            bias_correction2_sqrt: 0.001f32.sqrt(),
            one_minus_beta1: 0.1,
            beta2: 0.999,
            one_minus_beta2: 0.001,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_keep: 1.0,
            amsgrad: true,
        }))
    }

    /// An update with its parameter, gradient and slots.
    type HostJob = (Update<f32>, Vec<f32>, Vec<f32>, Vec<Vec<f32>>);

    fn values(rng: &mut Rng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.normal(0.0, 1.0)).collect()
    }

    /// A step's jobs give each tensor the bits of its own update, whatever the mix of rules
    /// and sizes.
    #[test]
    fn update_all_has_the_bits_of_one_update_per_tensor() {
        let mut rng = Rng::new(4, "update-all");
        let momentum = Update::Momentum(Momentum::Torch {
            lr: 0.01,
            momentum: 0.9,
            dampening: 0.0,
            nesterov: true,
            weight_decay: 1e-4,
            first_step: false,
        });
        let rules = [adam(1e-3), momentum, adam(2e-3)];
        let sizes = [0, 1, 5, 16_385, 40_000, 3];
        let make = |rng: &mut Rng| -> Vec<HostJob> {
            (0..12)
                .map(|k| {
                    let (update, n) = (rules[k % 3], sizes[k % sizes.len()]);
                    let slots = update.slot_names().iter().map(|_| values(rng, n)).collect();
                    (update, values(rng, n), values(rng, n), slots)
                })
                .collect()
        };
        let mut one_by_one = make(&mut rng);
        let mut together = one_by_one.clone();
        let cpu = Cpu::new(Par::rayon(2));
        for (update, param, grad, slots) in &mut one_by_one {
            let mut refs: Vec<&mut Vec<f32>> = slots.iter_mut().collect();
            cpu.update(update, param, grad, &mut refs).unwrap();
        }
        let mut jobs: Vec<_> = together
            .iter_mut()
            .map(|(update, param, grad, slots)| BufferJob {
                update: *update,
                param,
                grad: &*grad,
                slots: slots.iter_mut().collect(),
            })
            .collect();
        cpu.update_all(&mut jobs).unwrap();
        drop(jobs);
        let bits = |jobs: &[HostJob]| -> Vec<u32> {
            jobs.iter()
                .flat_map(|(_, p, _, s)| p.iter().chain(s.iter().flatten()))
                .map(|x| x.to_bits())
                .collect()
        };
        assert_eq!(bits(&one_by_one), bits(&together));
    }

    #[test]
    fn polyak_averages_every_pair_and_refuses_mismatches() {
        let mut rng = Rng::new(5, "polyak");
        let sources: Vec<Vec<f32>> = [3, 40_000].iter().map(|&n| values(&mut rng, n)).collect();
        let mut targets: Vec<Vec<f32>> = [3, 40_000].iter().map(|&n| values(&mut rng, n)).collect();
        let (tau, keep) = (0.005f32, (1.0f64 - 0.005) as f32);
        let want: Vec<Vec<u32>> = targets
            .iter()
            .zip(&sources)
            .map(|(t, s)| {
                t.iter()
                    .zip(s)
                    .map(|(&t, &s)| (s * tau + t * keep).to_bits())
                    .collect()
            })
            .collect();
        let cpu = Cpu::new(Par::rayon(2));
        let source_refs: Vec<&Vec<f32>> = sources.iter().collect();
        let mut refs: Vec<&mut Vec<f32>> = targets.iter_mut().collect();
        cpu.polyak(tau, keep, &mut refs, &source_refs).unwrap();
        let error = cpu
            .polyak(tau, keep, &mut refs[..1], &source_refs[1..])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("Cpu::polyak") && error.contains("sources"),
            "{error}"
        );
        assert!(cpu.polyak(tau, keep, &mut refs[..1], &source_refs).is_err());
        let got: Vec<Vec<u32>> = targets
            .iter()
            .map(|t| t.iter().map(|x| x.to_bits()).collect())
            .collect();
        assert_eq!(got, want);
    }
}
