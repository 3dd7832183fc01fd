//! TFRecord framing, the container of event files: each record is
//! `u64 length | u32 masked CRC-32C of the length | data | u32 masked CRC-32C of the data`,
//! little-endian.

/// TFRecord's CRC mask: rotate right by 15 bits, add a constant, so that a CRC of data
/// holding CRCs is not trivially zero.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Appends one record holding `data` to `out`.
pub(crate) fn frame(data: &[u8], out: &mut Vec<u8>) {
    let length = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&length);
    out.extend_from_slice(&masked_crc(&length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
}

/// The records of `bytes`, in order. A record cut short at the end (a writer killed
/// mid-record) ends the sequence, as TensorBoard treats it; a checksum mismatch is an
/// error naming the record's byte offset.
pub(crate) fn records(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(header) = bytes.get(at..at + 12) {
        let (length, length_crc) = header.split_at(8);
        if masked_crc(length) != u32::from_le_bytes(length_crc.try_into().expect("4 bytes")) {
            return Err(format!(
                "record at byte {at}: the length's checksum does not match"
            ));
        }
        let length = u64::from_le_bytes(length.try_into().expect("8 bytes"));
        let start = at + 12;
        let Some(end) = usize::try_from(length)
            .ok()
            .and_then(|l| start.checked_add(l))
        else {
            return Err(format!(
                "record at byte {at}: length {length} is impossible"
            ));
        };
        let (Some(data), Some(crc)) = (bytes.get(start..end), bytes.get(end..end + 4)) else {
            break;
        };
        if masked_crc(data) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(format!(
                "record at byte {at}: the data's checksum does not match"
            ));
        }
        out.push(data);
        at = end + 4;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // CRC-32C (Castagnoli) of "123456789" is 0xE3069283.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn records_round_trip_and_a_cut_tail_is_dropped() {
        let mut bytes = Vec::new();
        frame(b"first", &mut bytes);
        frame(b"", &mut bytes);
        frame(b"third record", &mut bytes);
        let whole = records(&bytes).unwrap();
        assert_eq!(whole, [&b"first"[..], b"", b"third record"]);
        for cut in 0..bytes.len() {
            let got = records(&bytes[..cut]).unwrap();
            assert!(got.len() < 3 && whole.starts_with(&got), "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_bit_is_an_error() {
        let mut bytes = Vec::new();
        frame(b"payload", &mut bytes);
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert!(records(&damaged).is_err(), "byte {i}");
        }
    }
}
