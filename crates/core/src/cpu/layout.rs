//! Converting batch-major `[B, T, F]` data (one row per environment or sequence, as
//! TorchRL, RLlib and most replay buffers store it) to the time-major `[T, B, F]` order of
//! a vector-env rollout and of the return estimators, and back.

use crate::{Error, Result, check};

/// Edge of the square tiles the transpose copies: 32 x 32 f32 is 4 KiB per tile, so a
/// source tile and its destination stay in L1.
const TILE: usize = 32;

/// The transpose of the row-major `[rows, cols, features]` array `src`: a row-major
/// `[cols, rows, features]` vector, each `features`-wide value moved whole. Batch-major
/// `[B, T, F]` to time-major `[T, B, F]` is `transpose(x, b, t, f)`, and back
/// `transpose(y, t, b, f)`. Tiled for the cache: it costs about two copies of the data.
/// An error when `src` does not hold `rows * cols * features` elements (or that product
/// overflows), or the host cannot allocate the result.
///
/// ```
/// use rlgrad_core::cpu::layout::transpose;
/// // Two environments (rows) of three steps: batch-major.
/// let batch_major = [1, 2, 3, 10, 20, 30];
/// assert_eq!(transpose(&batch_major, 2, 3, 1)?, [1, 10, 2, 20, 3, 30]);
/// // The same with two features per step: [2, 3, 2] to [3, 2, 2].
/// let pairs = [1, -1, 2, -2, 3, -3, 10, -10, 20, -20, 30, -30];
/// assert_eq!(transpose(&pairs, 2, 3, 2)?, [1, -1, 10, -10, 2, -2, 20, -20, 3, -3, 30, -30]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn transpose<T: Copy + Default>(
    src: &[T],
    rows: usize,
    cols: usize,
    features: usize,
) -> Result<Vec<T>> {
    let cells = check::product("transpose", "rows", rows, cols)?;
    let len = check::product("transpose", "features", cells, features)?;
    if src.len() != len {
        return Err(Error::shape(
            "transpose",
            "src",
            format_args!("{len} elements ([{rows}, {cols}, {features}])"),
            format_args!("{} elements", src.len()),
        ));
    }
    let mut out = super::alloc::try_with_capacity(len, "transpose", "src")?;
    out.resize(len, T::default());
    if len == 0 {
        // `rows` or `cols` may still be huge: no tile walk over an empty grid.
        return Ok(out);
    }
    if features == 1 {
        for_each_tiled(rows, cols, |r, c| out[c * rows + r] = src[r * cols + c]);
    } else {
        let f = features;
        for_each_tiled(rows, cols, |r, c| {
            out[(c * rows + r) * f..(c * rows + r + 1) * f]
                .copy_from_slice(&src[(r * cols + c) * f..(r * cols + c + 1) * f]);
        });
    }
    Ok(out)
}

/// Calls `visit(r, c)` for every cell of a `[rows, cols]` grid, tile by tile.
#[inline(always)]
fn for_each_tiled(rows: usize, cols: usize, mut visit: impl FnMut(usize, usize)) {
    for row_tile in (0..rows).step_by(TILE) {
        for col_tile in (0..cols).step_by(TILE) {
            for r in row_tile..(row_tile + TILE).min(rows) {
                for c in col_tile..(col_tile + TILE).min(cols) {
                    visit(r, c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_checks_lengths() {
        let x: Vec<u32> = (0..70 * 45).collect();
        let t = transpose(&x, 70, 45, 1).unwrap();
        assert_eq!(t[70], 1); // element (row 1, column 0) of the transpose
        assert_eq!(transpose(&t, 45, 70, 1).unwrap(), x);
        assert!(transpose(&x, 70, 44, 1).is_err());
        assert!(transpose::<f32>(&[], 0, 5, 3).unwrap().is_empty());
        assert!(transpose::<f32>(&[], usize::MAX, 2, 1).is_err());
        assert!(
            transpose::<f32>(&[], 0, usize::MAX, usize::MAX)
                .unwrap()
                .is_empty()
        );
        assert!(transpose::<f32>(&[], usize::MAX, 0, 1).unwrap().is_empty());
    }

    #[test]
    fn features_move_whole() {
        let (rows, cols, f) = (37, 41, 3);
        let x: Vec<u32> = (0..(rows * cols * f) as u32).collect();
        let t = transpose(&x, rows, cols, f).unwrap();
        for r in 0..rows {
            for c in 0..cols {
                for k in 0..f {
                    assert_eq!(t[(c * rows + r) * f + k], x[(r * cols + c) * f + k]);
                }
            }
        }
        assert_eq!(transpose(&t, cols, rows, f).unwrap(), x);
    }
}
