//! [`Tape::custom`]: records a [`CustomOp`] (a forward and a backward written by you or by
//! another crate) on the tape like any built-in op. The masked sequence ops of this crate
//! are built on it.

use rlgrad_core::{Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use crate::backward::{CustomNode, CustomOp, Op};
use crate::tape::{Tape, Var};

impl<T: Float, D: TensorDevice<T>> Tape<T, D> {
    /// Applies a [`CustomOp`] to `inputs`, recording it for the backward pass.
    #[track_caller]
    pub fn custom<'t>(
        &'t self,
        op: impl CustomOp<T, D>,
        inputs: &[&Var<'t, T, D>],
    ) -> Result<Var<'t, T, D>> {
        for input in inputs {
            self.check_same("Tape::custom", "inputs", input)?;
        }
        let values: SmallVec<[Tensor<T, D>; 4]> =
            inputs.iter().map(|v| v.value().clone()).collect();
        let output = {
            let refs: SmallVec<[&Tensor<T, D>; 4]> = values.iter().collect();
            op.forward(&refs)?
        };
        let nodes: SmallVec<[Option<usize>; 4]> = inputs.iter().map(|v| v.node()).collect();
        self.record("Tape::custom", output.clone(), inputs, || {
            Op::Custom(Box::new(CustomNode {
                op: Box::new(op),
                inputs: nodes.clone(),
                values,
                output,
            }))
        })
    }
}
