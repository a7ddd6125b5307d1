// SPDX-License-Identifier: GPL-2.0

//! The output of every scheduler: segments in request order, covering the request exactly once.
//!
//! A schedule is a sequence of [`Segment`]s `(start_page, len_pages, path)` written into a
//! caller-provided slice; [`Runs::max_segments`] entries always suffice. [`SegmentBuf`] is the
//! bounded writer the schedulers use, [`check`] verifies a schedule against a residency and
//! [`additive_cost`] and [`makespan`] recompute its cost under the two objectives.

use super::cost::{Model, Picos};
use super::runs::{Runs, RunsError};

/// How a segment is transferred.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Copied from the page cache by the CPU; only allowed over cached pages.
    PageCache,
    /// Read by the device straight into GPU memory (NVMe peer-to-peer DMA).
    P2p,
}

/// A contiguous part of the request transferred in one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First page, relative to the start of the request.
    pub start: u32,
    /// Number of pages, at least one.
    pub len: u32,
    /// Transfer path.
    pub path: Path,
}

impl Segment {
    /// A zero-length placeholder, for initialising output buffers.
    pub const EMPTY: Segment = Segment {
        start: 0,
        len: 0,
        path: Path::P2p,
    };

    /// One past the last page.
    pub fn end(&self) -> u32 {
        self.start.saturating_add(self.len)
    }
}

/// Why a scheduler could not produce a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedError {
    /// The output slice is shorter than [`Runs::max_segments`].
    OutputTooSmall,
    /// The scratch workspace is shorter than the scheduler documents.
    ScratchTooSmall,
    /// The request is larger than [`super::cost::MAX_REQUEST_BYTES`].
    TooLarge,
    /// An intermediate cost overflowed; cannot happen with validated parameters and request sizes.
    Overflow,
}

impl From<RunsError> for SchedError {
    fn from(_: RunsError) -> Self {
        SchedError::TooLarge
    }
}

/// A schedule written into the caller's buffer, with its cost under the scheduler's objective.
#[derive(Clone, Copy, Debug)]
pub struct Schedule<'a> {
    /// Segments in request order.
    pub segments: &'a [Segment],
    /// Cost in picoseconds under the objective of the scheduler that produced it.
    pub cost: Picos,
}

/// Bounded writer of segments into a caller-provided slice.
#[derive(Debug)]
pub struct SegmentBuf<'a> {
    out: &'a mut [Segment],
    used: usize,
}

impl<'a> SegmentBuf<'a> {
    /// Starts writing at the beginning of `out`.
    pub fn new(out: &'a mut [Segment]) -> Self {
        Self { out, used: 0 }
    }

    /// Appends a segment; zero-length segments are dropped.
    pub fn push(&mut self, start: u32, len: u32, path: Path) -> Result<(), SchedError> {
        if len == 0 {
            return Ok(());
        }
        let slot = self
            .out
            .get_mut(self.used)
            .ok_or(SchedError::OutputTooSmall)?;
        *slot = Segment { start, len, path };
        self.used += 1;
        Ok(())
    }

    /// Appends the segment of pages `[from, to)`; an empty range is dropped.
    pub fn push_range(&mut self, from: u64, to: u64, path: Path) -> Result<(), SchedError> {
        if to <= from {
            return Ok(());
        }
        let start = u32::try_from(from).map_err(|_| SchedError::Overflow)?;
        let len = u32::try_from(to - from).map_err(|_| SchedError::Overflow)?;
        self.push(start, len, path)
    }

    /// Number of segments written so far.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Reverses the written segments (for schedulers that emit back to front).
    pub fn reverse(&mut self) {
        if let Some(s) = self.out.get_mut(..self.used) {
            s.reverse();
        }
    }

    /// Finishes writing and returns the schedule with `cost`.
    pub fn finish(self, cost: Picos) -> Schedule<'a> {
        let out: &'a [Segment] = self.out;
        Schedule {
            segments: out.get(..self.used).unwrap_or(&[]),
            cost,
        }
    }
}

/// What is wrong with a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckError {
    /// A segment is empty.
    EmptySegment,
    /// Segments leave a gap, overlap or are out of order.
    NotContiguous,
    /// The segments do not end at the last page of the request.
    WrongLength,
    /// A page-cache segment covers a page that is not cached.
    UncachedPageCache,
}

/// Checks that `segments` cover the request described by `runs` exactly once, in order, and that
/// page-cache segments only cover cached pages. Linear in segments plus runs.
pub fn check(runs: &Runs<'_>, segments: &[Segment]) -> Result<(), CheckError> {
    let mut next = 0u32;
    let mut it = runs.iter().peekable();
    for seg in segments {
        if seg.len == 0 {
            return Err(CheckError::EmptySegment);
        }
        if seg.start != next {
            return Err(CheckError::NotContiguous);
        }
        next = seg
            .start
            .checked_add(seg.len)
            .ok_or(CheckError::WrongLength)?;
        if next > runs.pages() {
            return Err(CheckError::WrongLength);
        }
        // Skip runs that end before this segment, then walk the ones it overlaps.
        while it
            .peek()
            .is_some_and(|r| r.start.saturating_add(r.len) <= seg.start)
        {
            it.next();
        }
        if seg.path == Path::PageCache {
            for r in it.clone() {
                if r.start >= next {
                    break;
                }
                if !r.cached {
                    return Err(CheckError::UncachedPageCache);
                }
            }
        }
    }
    if next != runs.pages() {
        return Err(CheckError::WrongLength);
    }
    Ok(())
}

/// Additive cost of Eq. 1: the sum over segments of `T_p2p` or `T_pc`.
pub fn additive_cost(model: &Model, segments: &[Segment]) -> Picos {
    let (device, cpu) = split_cost(model, segments);
    device.saturating_add(cpu)
}

/// Device time (sum of `T_p2p` over P2P segments, plus the model's batch term if there is
/// one) and CPU time (sum of `T_pc` over page-cache segments) of a schedule.
pub fn split_cost(model: &Model, segments: &[Segment]) -> (Picos, Picos) {
    let mut device: Picos = 0;
    let mut cpu: Picos = 0;
    let mut any = false;
    for seg in segments {
        let n = u64::from(seg.len);
        match seg.path {
            Path::P2p => {
                device = device.saturating_add(model.t_p2p(n));
                any = true;
            }
            Path::PageCache => cpu = cpu.saturating_add(model.t_pc(n)),
        }
    }
    (model.device(device, any), cpu)
}

/// Makespan of a schedule under the overlap model: `max(device time, CPU time)`.
pub fn makespan(model: &Model, segments: &[Segment]) -> Picos {
    let (device, cpu) = split_cost(model, segments);
    device.max(cpu)
}
