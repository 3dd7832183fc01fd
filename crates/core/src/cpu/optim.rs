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

mod device {
    use super::super::Cpu;
    use super::MAX_SLOTS;
    use crate::kernels::optim::{OptimKernel, Update};
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
    }
}
