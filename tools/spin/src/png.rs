// SPDX-License-Identifier: GPL-2.0

//! A tiny RGB canvas and PNG writer (uncompressed deflate blocks), for `spin calibrate`'s plot.

/// An RGB image.
pub struct Canvas {
    pub w: usize,
    pub h: usize,
    px: Vec<[u8; 3]>,
}

impl Canvas {
    pub fn new(w: usize, h: usize) -> Self {
        Canvas {
            w,
            h,
            px: vec![[255, 255, 255]; w * h],
        }
    }

    pub fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            self.px[y as usize * self.w + x as usize] = c;
        }
    }

    /// A filled square of side `2r + 1` centred on (x, y).
    pub fn dot(&mut self, x: i64, y: i64, r: i64, c: [u8; 3]) {
        for dy in -r..=r {
            for dx in -r..=r {
                self.set(x + dx, y + dy, c);
            }
        }
    }

    /// A line from (x0, y0) to (x1, y1).
    pub fn line(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: [u8; 3]) {
        let n = (x1 - x0).abs().max((y1 - y0).abs()).max(1);
        for i in 0..=n {
            self.set(x0 + (x1 - x0) * i / n, y0 + (y1 - y0) * i / n, c);
        }
    }

    /// The image as a PNG file.
    pub fn png(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity(self.h * (1 + 3 * self.w));
        for y in 0..self.h {
            raw.push(0); // filter: none
            for p in &self.px[y * self.w..(y + 1) * self.w] {
                raw.extend_from_slice(p);
            }
        }
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&(self.w as u32).to_be_bytes());
        ihdr.extend_from_slice(&(self.h as u32).to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &zlib_stored(&raw));
        chunk(&mut out, b"IEND", &[]);
        out
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut z = vec![0x78, 0x01];
    let mut blocks = data.chunks(65535).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(b) = blocks.next() {
        z.push(u8::from(blocks.peek().is_none()));
        let n = b.len() as u16;
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(!n).to_le_bytes());
        z.extend_from_slice(b);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    z
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in data {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_and_adler_match_known_values() {
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
        let z = zlib_stored(b"Wikipedia");
        assert_eq!(&z[z.len() - 4..], &0x11e6_0398u32.to_be_bytes());
    }

    #[test]
    fn png_has_the_right_layout() {
        let mut c = Canvas::new(3, 2);
        c.dot(1, 1, 0, [1, 2, 3]);
        let p = c.png();
        assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&p[12..16], b"IHDR");
        assert_eq!(&p[16..24], &[0, 0, 0, 3, 0, 0, 0, 2]);
        assert_eq!(&p[p.len() - 8..p.len() - 4], b"IEND");
        // Two rows of a filter byte and three pixels, stored in one final block.
        let idat = &p[33..];
        assert_eq!(&idat[4..8], b"IDAT");
        let z = &idat[8..];
        assert_eq!(&z[..3], &[0x78, 0x01, 1]);
        assert_eq!(u16::from_le_bytes([z[3], z[4]]), 20);
        assert_eq!(&z[7 + 11 + 3..7 + 11 + 6], &[1, 2, 3]);
    }
}
