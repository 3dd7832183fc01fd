//! Matrix multiplication, 2-D and batched, through the device's `MatmulKernel`, in its
//! canonical order: every output is a fused multiply-add chain over `k` in increasing
//! order, so results are the same bits for every thread count and on every CPU (tested in
//! `tests/integration/matmul.rs`). On the [`rlgrad_core::Cpu`] it is rlgrad's own blocked GEMM, which
//! reads strided operands directly (a transposed view costs no copy).

use rlgrad_core::kernels::UnaryOp;
use rlgrad_core::{Dims, Error, Float, Result, Shape, View};

use crate::shape_ops::broadcast_layout;
use crate::{Tensor, TensorDevice};

impl<T: Float, D: TensorDevice<T>> Tensor<T, D> {
    /// `self @ rhs` for `self: [..., m, k]` and `rhs: [..., k, n]`, giving `[..., m, n]`.
    /// Batch dimensions broadcast (NumPy `matmul` rules); both operands need at least two
    /// dimensions.
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2])?;
    /// let b = Tensor::from_vec(vec![5.0f32, 6.0, 7.0, 8.0], [2, 2])?;
    /// assert_eq!(a.matmul(&b)?.to_vec()?, [19.0, 22.0, 43.0, 50.0]);
    /// assert_eq!(a.matmul(&b.t()?)?.to_vec()?, [17.0, 23.0, 39.0, 53.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn matmul(&self, rhs: &Self) -> Result<Self> {
        let function = "Tensor::matmul";
        if self.ndim() < 2 || rhs.ndim() < 2 {
            return Err(Error::shape(
                function,
                if self.ndim() < 2 { "self" } else { "rhs" },
                "at least 2 dimensions",
                if self.ndim() < 2 {
                    self.shape()
                } else {
                    rhs.shape()
                },
            ));
        }
        let (ld, rd) = (self.dims(), rhs.dims());
        let (m, k) = (ld[ld.len() - 2], ld[ld.len() - 1]);
        let (k2, n) = (rd[rd.len() - 2], rd[rd.len() - 1]);
        if k != k2 {
            return Err(Error::shape(
                function,
                "rhs",
                format_args!("[..., {k}, n] to match self {}", self.shape()),
                rhs.shape(),
            ));
        }
        if self.ndim() == 2 && rhs.ndim() == 2 {
            // A plain product (every linear layer): no batch dimensions to broadcast.
            return Self::from_kernel(&self.device, Shape::new(&[m, n]), |out| {
                self.device.matmul(self.view(), rhs.view(), out)
            });
        }
        let batch = Shape::broadcast(
            function,
            &Shape::new(&ld[..ld.len() - 2]),
            &Shape::new(&rd[..rd.len() - 2]),
        )?;
        let with_matrix = |rows: usize, cols: usize| {
            let mut dims: Dims = batch.dims().into();
            dims.push(rows);
            dims.push(cols);
            Shape::from(dims)
        };
        let (ls, rs) = (with_matrix(m, k), with_matrix(k, n));
        let (ll, rl) = (
            broadcast_layout(&self.layout, &ls),
            broadcast_layout(&rhs.layout, &rs),
        );
        Self::from_kernel(&self.device, with_matrix(m, n), |out| {
            self.device.matmul(
                View::new(&self.buffer, &ll),
                View::new(&rhs.buffer, &rl),
                out,
            )
        })
    }

    /// A linear layer in one call: `activation(self @ weight + bias)` for `self: [m, k]`,
    /// `weight: [k, n]` and `bias: [n]` added to every row; `activation` is any unary op
    /// (`None` for the identity).
    ///
    /// The result is the bits of `self.matmul(weight)?.add(bias)?` followed by
    /// `.unary(activation)`: each output is the canonical chain, then one rounding of the
    /// add, then the activation's canonical formula. A device that fuses them (the
    /// [`rlgrad_core::Cpu`]: the bias and activation are applied to each block of rows as
    /// the GEMM finishes it) writes the output once instead of three times; other devices
    /// run the three ops. Errors name `Tensor::matmul_bias` and the shapes: operands that are not
    /// 2-D, an inner dimension that differs, a bias that is not `[n]`.
    ///
    /// ```
    /// use rlgrad_core::kernels::UnaryOp;
    /// use rlgrad_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2])?;
    /// let w = Tensor::from_vec(vec![1.0f32, -1.0, 0.5, -0.5], [2, 2])?;
    /// let b = Tensor::from_vec(vec![0.5f32, 1.0], [2])?;
    /// let y = x.matmul_bias(&w, &b, Some(UnaryOp::Relu))?;
    /// assert_eq!(y.to_vec()?, [2.5, 0.0, 5.5, 0.0]);
    /// assert_eq!(y.to_vec()?, x.matmul(&w)?.add(&b)?.relu()?.to_vec()?);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn matmul_bias(
        &self,
        weight: &Self,
        bias: &Self,
        activation: Option<UnaryOp<T>>,
    ) -> Result<Self> {
        let function = "Tensor::matmul_bias";
        for (argument, t) in [("self", self), ("weight", weight)] {
            if t.ndim() != 2 {
                return Err(Error::shape(function, argument, "2 dimensions", t.shape()));
            }
        }
        let ([m, k], [k2, n]) = (
            [self.dims()[0], self.dims()[1]],
            [weight.dims()[0], weight.dims()[1]],
        );
        if k != k2 {
            return Err(Error::shape(
                function,
                "weight",
                format_args!("[{k}, n] to match self {}", self.shape()),
                weight.shape(),
            ));
        }
        if bias.dims() != [n] {
            return Err(Error::shape(
                function,
                "bias",
                format_args!(
                    "[{n}] (one value per column of self @ weight {})",
                    Shape::new(&[m, n])
                ),
                bias.shape(),
            ));
        }
        // A device that does not fuse writes the plain product into the same output, and
        // the bias and activation follow as their own ops.
        let mut fused = false;
        let product = Self::from_kernel(&self.device, Shape::new(&[m, n]), |out| {
            let (x, w) = (self.view(), weight.view());
            fused = self
                .device
                .matmul_bias(x, w, bias.view(), activation, out)?;
            if !fused {
                self.device.matmul(x, w, out)?;
            }
            Ok(())
        })?;
        if fused {
            return Ok(product);
        }
        let sum = product.add(bias)?;
        match activation {
            Some(op) => sum.unary(op),
            None => Ok(sum),
        }
    }
}
