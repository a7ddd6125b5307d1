// SPDX-License-Identifier: GPL-2.0

//! Page-cache residency of a request, held as alternating runs.
//!
//! A request of `N` pages is described by the length of each maximal run of pages with the same
//! state (cached or not) and the state of the first run; the states alternate from there. This is
//! what a residency lookup over the page-cache xarray produces naturally, it is at most `N`
//! entries long and usually far shorter, and every scheduler works on runs, not on pages.
//!
//! The caller owns the storage: [`Runs`] borrows a slice of lengths and [`RunsBuilder`] fills a
//! caller-provided buffer, so nothing here allocates.

use super::cost::MAX_REQUEST_BYTES;

/// Why a residency description was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsError {
    /// The request has no pages.
    Empty,
    /// A run has length zero.
    ZeroRun,
    /// The buffer given to [`RunsBuilder`] has no room for another run.
    Full,
    /// The request is longer than `u32::MAX` pages or than [`MAX_REQUEST_BYTES`].
    TooLong,
}

/// One run: `len` pages starting at page `start`, all cached or all not cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// First page of the run, relative to the start of the request.
    pub start: u32,
    /// Number of pages, at least one.
    pub len: u32,
    /// Whether the pages are in the page cache.
    pub cached: bool,
}

/// Residency of a request as alternating runs; validated, never empty.
#[derive(Clone, Copy, Debug)]
pub struct Runs<'a> {
    first_cached: bool,
    lens: &'a [u32],
    pages: u32,
}

impl<'a> Runs<'a> {
    /// Wraps run lengths; the first run is cached iff `first_cached`, states alternate.
    ///
    /// Fails if `lens` is empty, a length is zero, or the total exceeds `u32::MAX` pages.
    pub fn new(first_cached: bool, lens: &'a [u32]) -> Result<Self, RunsError> {
        if lens.is_empty() {
            return Err(RunsError::Empty);
        }
        let mut pages: u32 = 0;
        for &len in lens {
            if len == 0 {
                return Err(RunsError::ZeroRun);
            }
            pages = pages.checked_add(len).ok_or(RunsError::TooLong)?;
        }
        Ok(Self {
            first_cached,
            lens,
            pages,
        })
    }

    /// Total number of pages `N` of the request.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Number of runs.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// Always `false`: a validated residency has at least one run. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Whether the first run is cached.
    pub fn first_cached(&self) -> bool {
        self.first_cached
    }

    /// The run lengths.
    pub fn lens(&self) -> &'a [u32] {
        self.lens
    }

    /// Whether every page is cached.
    pub fn all_cached(&self) -> bool {
        self.first_cached && self.lens.len() == 1
    }

    /// Number of cached pages.
    pub fn cached_pages(&self) -> u32 {
        self.iter().filter(|r| r.cached).map(|r| r.len).sum()
    }

    /// Iterates over the runs in order.
    pub fn iter(&self) -> RunIter<'a> {
        RunIter {
            lens: self.lens.iter(),
            start: 0,
            cached: self.first_cached,
        }
    }

    /// Segments any scheduler of this module may emit for this request: `len() + 1`.
    pub fn max_segments(&self) -> usize {
        self.lens.len().saturating_add(1)
    }

    /// Checks the request size against [`MAX_REQUEST_BYTES`] for pages of `page_size` bytes.
    pub fn check_size(&self, page_size: u32) -> Result<(), RunsError> {
        let bytes = u64::from(self.pages).saturating_mul(u64::from(page_size));
        if bytes > MAX_REQUEST_BYTES {
            return Err(RunsError::TooLong);
        }
        Ok(())
    }

    /// Whether page `page` is cached; `false` past the end.
    pub fn is_cached(&self, page: u32) -> bool {
        self.iter()
            .find(|r| page >= r.start && page - r.start < r.len)
            .is_some_and(|r| r.cached)
    }
}

/// Iterator over the [`Run`]s of a [`Runs`].
#[derive(Clone, Debug)]
pub struct RunIter<'a> {
    lens: core::slice::Iter<'a, u32>,
    start: u32,
    cached: bool,
}

impl Iterator for RunIter<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        let len = *self.lens.next()?;
        let run = Run {
            start: self.start,
            len,
            cached: self.cached,
        };
        // `Runs::new` checked that the lengths sum to at most `u32::MAX`.
        self.start = self.start.saturating_add(len);
        self.cached = !self.cached;
        Some(run)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.lens.size_hint()
    }
}

/// Builds a [`Runs`] in a caller-provided buffer, merging pushes of the same state.
///
/// The buffer needs one entry per run; `N` entries always suffice for `N` pages.
#[derive(Debug)]
pub struct RunsBuilder<'a> {
    buf: &'a mut [u32],
    used: usize,
    first_cached: bool,
    last_cached: bool,
    pages: u32,
}

impl<'a> RunsBuilder<'a> {
    /// Starts an empty residency in `buf`.
    pub fn new(buf: &'a mut [u32]) -> Self {
        Self {
            buf,
            used: 0,
            first_cached: false,
            last_cached: false,
            pages: 0,
        }
    }

    /// Appends `len` pages of state `cached`; zero pages are ignored.
    pub fn push(&mut self, cached: bool, len: u32) -> Result<(), RunsError> {
        if len == 0 {
            return Ok(());
        }
        self.pages = self.pages.checked_add(len).ok_or(RunsError::TooLong)?;
        if self.used > 0 && cached == self.last_cached {
            let last = self.buf.get_mut(self.used - 1).ok_or(RunsError::Full)?;
            *last = last.checked_add(len).ok_or(RunsError::TooLong)?;
            return Ok(());
        }
        let slot = self.buf.get_mut(self.used).ok_or(RunsError::Full)?;
        *slot = len;
        if self.used == 0 {
            self.first_cached = cached;
        }
        self.used += 1;
        self.last_cached = cached;
        Ok(())
    }

    /// Appends one page per item of `bits` (`true` = cached).
    pub fn push_bits<I: IntoIterator<Item = bool>>(&mut self, bits: I) -> Result<(), RunsError> {
        for bit in bits {
            self.push(bit, 1)?;
        }
        Ok(())
    }

    /// Finishes the residency; fails if nothing was pushed.
    pub fn finish(self) -> Result<Runs<'a>, RunsError> {
        let buf: &'a [u32] = self.buf;
        let lens = buf.get(..self.used).ok_or(RunsError::Full)?;
        Runs::new(self.first_cached, lens)
    }
}
