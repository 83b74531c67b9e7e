//! The parser children's answer format: little-endian u64s and length-prefixed byte
//! strings, every length checked by the reader.

use super::MAX_NAME;

/// Little-endian u64s and length-prefixed byte strings; a frame is its length, then it.
/// Written by hand: the format is a few lines, and every length is checked on the way in.
#[derive(Default)]
pub struct Wire {
    bytes: Vec<u8>,
    at: usize,
}

impl Wire {
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.bytes.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// A frame's body, its length already read and checked by the caller.
    pub(super) fn from_body(bytes: Vec<u8>) -> Wire {
        Wire { bytes, at: 0 }
    }

    /// A frame received whole (its length first), to read from.
    pub fn from_frame(frame: Vec<u8>) -> Result<Wire, String> {
        let len = frame
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or("a frame without its length")?;
        if len != frame.len() as u64 - 8 {
            return Err("a frame of the wrong length".into());
        }
        Ok(Wire {
            bytes: frame,
            at: 8,
        })
    }

    /// The bytes to send: their length, then them.
    pub fn framed(self) -> Vec<u8> {
        let mut out = (self.bytes.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&self.bytes);
        out
    }

    pub fn get_u64(&mut self) -> Result<u64, String> {
        let b = self
            .bytes
            .get(self.at..self.at + 8)
            .ok_or("the parser's answer is cut short")?;
        self.at += 8;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    pub fn get_bytes(&mut self) -> Result<&[u8], String> {
        let n = self.get_u64()?;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|&e| e <= self.bytes.len())
            .ok_or("the parser's answer is cut short")?;
        let b = &self.bytes[self.at..end];
        self.at = end;
        Ok(b)
    }

    /// A name: valid UTF-8 and at most [`MAX_NAME`] bytes (and the mark of a cut).
    pub fn get_name(&mut self) -> Result<String, String> {
        let b = self.get_bytes()?;
        let s = std::str::from_utf8(b).map_err(|_| "the parser sent a name that is not UTF-8")?;
        if s.len() > MAX_NAME + 4 {
            return Err("the parser sent a name over the cap".into());
        }
        Ok(s.to_string())
    }

    /// A count of items each at least `min_size` bytes long, checked against what is left.
    pub fn get_count(&mut self, min_size: usize) -> Result<usize, String> {
        let n = self.get_u64()?;
        let left = (self.bytes.len() - self.at) / min_size.max(1);
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= left)
            .ok_or_else(|| "the parser's answer claims more items than it holds".into())
    }

    pub fn get_status(&mut self) -> Result<(), String> {
        match self.get_u64()? {
            0 => Ok(()),
            _ => Err(self.get_name().unwrap_or_else(|e| e)),
        }
    }
}
