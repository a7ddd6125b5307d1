// SPDX-License-Identifier: GPL-2.0

//! From a byte request to the legs the router executes.
//!
//! A read of `len` bytes at file offset `pos` into GPU memory can use P2P DMA only for whole
//! direct-I/O blocks: the *window* is the request rounded inwards to the direct-I/O alignment
//! of the file (the disk's logical block size or more). The unaligned head and tail always go
//! through the page cache, so any offset and any length from one byte works. Residency is
//! looked up for the pages the window touches, the scheduler splits those pages into
//! [`Segment`]s, and [`legs`] turns the segments back into byte ranges clipped to the window,
//! with the head and tail added and neighbours of the same path merged.
//!
//! Nothing here allocates or depends on the kernel: the router (rust/spin/router) and the host
//! crate (tools/testing/spin/core) compile this same file.

use super::runs::{RunsBuilder, RunsError};
use super::schedule::{Path, Segment};

/// Why a request cannot be planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The alignment or page size is zero, not a power of two, or the alignment exceeds the page.
    Geometry,
    /// The output slice has no room for another leg.
    OutputTooSmall,
    /// The request's end overflows `u64`.
    Overflow,
}

/// A byte range of a request, relative to the request's start, and how to transfer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leg {
    /// Offset from the request's first byte.
    pub off: u64,
    /// Length in bytes, at least one.
    pub len: u64,
    /// Transfer path.
    pub path: Path,
}

impl Leg {
    /// A zero-length placeholder, for initialising output buffers.
    pub const EMPTY: Leg = Leg {
        off: 0,
        len: 0,
        path: Path::PageCache,
    };
}

/// The part of a request that P2P may carry, and the pages it touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// First byte (absolute file offset), a multiple of the alignment.
    pub start: u64,
    /// One past the last byte, a multiple of the alignment, greater than `start`.
    pub end: u64,
    /// Page index of the page holding `start`.
    pub first_page: u64,
    /// Number of pages touched by `[start, end)`.
    pub pages: u64,
}

/// `x` rounded up to a multiple of `align` (0 is taken as 1), `None` on overflow: a mask for a
/// power of two, as direct-I/O alignments are, not the 64-bit division the router would
/// otherwise pay on every request it may send by P2P.
#[inline]
pub fn align_up(x: u64, align: u64) -> Option<u64> {
    let align = align.max(1);
    if align.is_power_of_two() {
        Some(x.checked_add(align - 1)? & !(align - 1))
    } else {
        x.checked_next_multiple_of(align)
    }
}

/// Whether `x` is a multiple of `align` (0 is taken as 1); a mask for a power of two.
#[inline]
pub fn is_aligned(x: u64, align: u64) -> bool {
    let align = align.max(1);
    if align.is_power_of_two() {
        x & (align - 1) == 0
    } else {
        x % align == 0
    }
}

/// Returns the window of the request `[pos, pos + len)` for direct-I/O alignment `align` and
/// pages of `page` bytes, or `None` if the request holds no whole aligned block.
pub fn window(pos: u64, len: u64, align: u32, page: u32) -> Result<Option<Window>, PlanError> {
    if !align.is_power_of_two() || !page.is_power_of_two() || align > page {
        return Err(PlanError::Geometry);
    }
    let end = pos.checked_add(len).ok_or(PlanError::Overflow)?;
    let (align, page) = (u64::from(align), u64::from(page));
    let start = align_up(pos, align).ok_or(PlanError::Overflow)?;
    let end = end & !(align - 1);
    if start >= end {
        return Ok(None);
    }
    let first_page = start / page;
    let pages = (end - 1) / page - first_page + 1;
    Ok(Some(Window {
        start,
        end,
        first_page,
        pages,
    }))
}

/// Pushes the residency bitmap `words` (bit `i` of word `i / BITS` set = page `i` cached, as the
/// kernel's bitmaps lay it out) of `nbits` pages into `builder`, one push per run.
pub fn push_bitmap(
    builder: &mut RunsBuilder<'_>,
    words: &[usize],
    nbits: u32,
) -> Result<(), RunsError> {
    const BITS: u32 = usize::BITS;
    let mut i: u32 = 0;
    while i < nbits {
        let word = words
            .get((i / BITS) as usize)
            .copied()
            .ok_or(RunsError::Full)?;
        let shift = i % BITS;
        let cached = (word >> shift) & 1 == 1;
        // Length of the run of equal bits from bit `shift` within this word.
        let rest = if cached { !word } else { word } >> shift;
        let run = if rest == 0 {
            BITS - shift
        } else {
            rest.trailing_zeros()
        };
        let run = run.min(nbits - i);
        builder.push(cached, run)?;
        i += run;
    }
    Ok(())
}

/// Bounded writer of legs that merges neighbours of the same path.
struct LegBuf<'a> {
    out: &'a mut [Leg],
    used: usize,
}

impl LegBuf<'_> {
    fn push(&mut self, off: u64, end: u64, path: Path) -> Result<(), PlanError> {
        if end <= off {
            return Ok(());
        }
        if let Some(last) = self.used.checked_sub(1).and_then(|i| self.out.get_mut(i)) {
            if last.path == path && last.off + last.len == off {
                last.len += end - off;
                return Ok(());
            }
        }
        let slot = self
            .out
            .get_mut(self.used)
            .ok_or(PlanError::OutputTooSmall)?;
        *slot = Leg {
            off,
            len: end - off,
            path,
        };
        self.used += 1;
        Ok(())
    }
}

/// Legs [`legs`] may emit for a schedule of `segments` segments: `segments + 2`.
pub fn max_legs(segments: usize) -> usize {
    segments.saturating_add(2)
}

/// Turns the schedule `segments` of the pages of window `w` into the legs of the request
/// `[pos, pos + len)`, written into `out` ([`max_legs`] entries suffice). `w` must be the
/// window of that request and `segments` must cover exactly its `w.pages` pages.
///
/// Returns the number of legs. They cover the request exactly once, in order; P2P legs lie
/// inside the window, so they start and end on the alignment the window was made with.
pub fn legs(
    pos: u64,
    len: u64,
    w: Option<&Window>,
    segments: &[Segment],
    page: u32,
    out: &mut [Leg],
) -> Result<usize, PlanError> {
    let end = pos.checked_add(len).ok_or(PlanError::Overflow)?;
    let page = u64::from(page);
    let mut buf = LegBuf { out, used: 0 };
    let Some(w) = w else {
        buf.push(0, len, Path::PageCache)?;
        return Ok(buf.used);
    };
    buf.push(0, w.start - pos, Path::PageCache)?;
    let base = w.first_page.checked_mul(page).ok_or(PlanError::Overflow)?;
    for seg in segments {
        let from = base + u64::from(seg.start) * page;
        let to = base + u64::from(seg.end()) * page;
        let from = from.clamp(w.start, w.end);
        let to = to.clamp(w.start, w.end);
        buf.push(from - pos, to - pos, seg.path)?;
    }
    buf.push(w.end - pos, end - pos, Path::PageCache)?;
    Ok(buf.used)
}

/// Every page of the window in one segment by `path` (the p2p-only mode); `None` if the window
/// has more than `u32::MAX` pages.
pub fn whole(w: &Window, path: Path) -> Option<Segment> {
    Some(Segment {
        start: 0,
        len: u32::try_from(w.pages).ok()?,
        path,
    })
}
