//! Converting batch-major `[B, T]` data (one row per environment or sequence, as
//! TorchRL and most replay buffers store it) to the time-major `[T, B]` order the
//! estimators scan, and back.

use rlgrad_core::{Error, Result, check};

/// Edge of the square tiles the transpose copies: 32 x 32 f32 is 4 KiB per tile, so a
/// source tile and its destination stay in L1.
const TILE: usize = 32;

/// The transpose of the row-major `[rows, cols]` matrix `src`: a row-major `[cols, rows]`
/// vector. Batch-major `[B, T]` to time-major `[T, B]` is `transpose(x, b, t)`, and back
/// `transpose(y, t, b)`. Tiled for the cache: it costs about two copies of the data.
///
/// ```
/// use rlgrad_returns::transpose;
/// // Two environments (rows) of three steps: batch-major.
/// let batch_major = [1, 2, 3, 10, 20, 30];
/// assert_eq!(transpose(&batch_major, 2, 3)?, [1, 10, 2, 20, 3, 30]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn transpose<T: Copy + Default>(src: &[T], rows: usize, cols: usize) -> Result<Vec<T>> {
    let len = check::product("transpose", "rows", rows, cols)?;
    if src.len() != len {
        return Err(Error::shape(
            "transpose",
            "src",
            format_args!("{len} elements ([{rows}, {cols}])"),
            format_args!("{} elements", src.len()),
        ));
    }
    let mut out = rlgrad_core::cpu::alloc::try_with_capacity(len, "transpose", "src")?;
    out.resize(len, T::default());
    for row_tile in (0..rows).step_by(TILE) {
        for col_tile in (0..cols).step_by(TILE) {
            for r in row_tile..(row_tile + TILE).min(rows) {
                for c in col_tile..(col_tile + TILE).min(cols) {
                    out[c * rows + r] = src[r * cols + c];
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_checks_lengths() {
        let x: Vec<u32> = (0..70 * 45).collect();
        let t = transpose(&x, 70, 45).unwrap();
        assert_eq!(t[70], 1); // element (row 1, column 0) of the transpose
        assert_eq!(transpose(&t, 45, 70).unwrap(), x);
        assert!(transpose(&x, 70, 44).is_err());
        assert!(transpose::<f32>(&[], 0, 5).unwrap().is_empty());
    }
}
