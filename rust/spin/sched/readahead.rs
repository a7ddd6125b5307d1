// SPDX-License-Identifier: GPL-2.0

//! GPU read-ahead (SPIN, USENIX ATC'17, §4.3.2): when a read into GPU memory should go
//! through the page cache with read-ahead (P-readahead) instead of P2P, and the bookkeeping of
//! the bounded partition of the page cache that holds what that read-ahead brought in.
//!
//! A small sequential read into GPU memory is one P2P I/O per request; the page cache would
//! have read ahead and served the next requests by copy. [`prefetch`] says when to take the
//! page cache with read-ahead instead: the request is smaller than the file's read-ahead window
//! (SPIN's threshold: a request at or above it is served well by P2P) and it continues the
//! file's stream as the kernel's own read-ahead sees it (`file_ra_state`), unless the file was
//! advised random or has read-ahead off.
//!
//! The folios that read-ahead brings in for the GPU are dropbehind folios: a CPU read or fault
//! takes them into the page cache for good (mm/filemap.c); the GPU read that consumes them
//! leaves them to the partition (`IOCB_DONTCACHE_DEFER`). [`Partition`] bounds what they may
//! hold: a FIFO of folios weighted by their pages, whose oldest entries are handed back for
//! eviction when a new one would exceed its bound. It stores entries in a caller-provided slice
//! and never allocates. Room for the windows of reads in flight is reserved in it before they
//! are read ahead ([`Partition::reserve`], [`leg_reserve`]). [`Watermarks`] sets when a
//! background evictor runs, so that readers seldom evict themselves; [`in_window`] says
//! whether a read-ahead leg's pages were accounted by a window. [`bridge`] says where a stream
//! that runs through cached pages should look for the next page to read ahead, so that its
//! window does not stay behind.
//!
//! A larger sequential read is scheduled, but a part of it is read through the page cache with
//! read-ahead when that is faster than its schedule ([`ahead_wins`]): the device reads ahead in
//! the background, so a stream does not wait for a command on every request.
//!
//! Only `core` is used: the same file builds into the kernel and into the host crate. See
//! Documentation/spin/readahead.rst.

use super::cost::{Model, Picos};

/// What the file's read-ahead state says about the stream a read belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    /// End of the previous read of the file (`file_ra_state.prev_pos`); negative if none.
    pub prev_pos: i64,
    /// The file's read-ahead window in pages (`file_ra_state.ra_pages`, doubled by
    /// `POSIX_FADV_SEQUENTIAL`); 0 turns read-ahead off.
    pub ra_pages: u32,
    /// The file was advised `POSIX_FADV_RANDOM` (`FMODE_RANDOM`): no read-ahead.
    pub random: bool,
    /// First page of the file's current read-ahead window (`file_ra_state.start`).
    pub ra_start: u64,
    /// Pages in that window (`file_ra_state.size`); 0 if there is none.
    pub ra_size: u64,
}

impl Stream {
    /// No stream: read-ahead off, no previous read.
    pub const OFF: Self = Self {
        prev_pos: -1,
        ra_pages: 0,
        random: false,
        ra_start: 0,
        ra_size: 0,
    };
}

/// Whether a read at `pos` continues the stream whose previous read ended at `prev_pos`.
///
/// As the kernel's on-demand read-ahead decides it (mm/readahead.c): the read starts in the
/// page where the previous one ended or in the next one. A read at offset 0 starts a stream.
pub fn is_sequential(prev_pos: i64, pos: u64, page_size: u32) -> bool {
    if pos == 0 {
        return true;
    }
    let Ok(prev) = u64::try_from(prev_pos) else {
        return false;
    };
    let page_size = u64::from(page_size.max(1));
    let (index, prev_index) = (page_of(pos, page_size), page_of(prev, page_size));
    index == prev_index || index == prev_index.saturating_add(1)
}

/// The page of byte offset `off` for pages of `page` bytes (not zero): a shift for the page
/// sizes the kernel has, powers of two, instead of a 64-bit division, which costs tens of
/// cycles and runs several times for every small read into GPU memory.
#[inline]
fn page_of(off: u64, page: u64) -> u64 {
    if page.is_power_of_two() {
        off >> page.trailing_zeros()
    } else {
        off / page
    }
}

/// Whether a read into GPU memory of `len` bytes at `pos` should go through the page cache with
/// read-ahead (P-readahead) rather than be scheduled between the page cache and P2P.
pub fn prefetch(stream: &Stream, pos: u64, len: u64, page_size: u32) -> bool {
    if stream.random || stream.ra_pages == 0 {
        return false;
    }
    let window = u64::from(stream.ra_pages).saturating_mul(u64::from(page_size));
    len < window && is_sequential(stream.prev_pos, pos, page_size)
}

/// Whether a read at `pos` continues a stream that the page cache reads ahead for: read-ahead is
/// on, the file was not advised random, and the read starts where the file's previous read
/// ended or in the next page ([`is_sequential`]), not at offset 0. The first read of a stream
/// has no read-ahead running ahead of it.
pub fn streaming(stream: &Stream, pos: u64, page_size: u32) -> bool {
    pos != 0
        && !stream.random
        && stream.ra_pages != 0
        && is_sequential(stream.prev_pos, pos, page_size)
}

/// The makespan, in the overlap model's terms, of reading `pages` pages of a stream the page
/// cache reads ahead for ([`streaming`]), `cached` of them resident, through the page cache:
/// the copy of every page, or the device's reading of the pages missing if that takes longer.
///
/// Read-ahead has the device read a stream's missing pages before the stream reaches them, in
/// the background of the copies before them, so the request waits for neither the command's
/// fixed cost nor, while the copy is the slower of the two, the transfer. The device reads
/// into host memory at about its P2P rate: both are the disk's bandwidth.
pub fn ahead_makespan(model: &Model, pages: u64, cached: u64) -> Picos {
    let missing = pages.saturating_sub(cached);
    model.t_pc(pages).max(missing.saturating_mul(model.a()))
}

/// The share of a schedule's makespan that reading ahead must save at least, as a divisor:
/// `1 / AHEAD_MARGIN`. The model credits read-ahead with a device that keeps ahead of the
/// stream and prices neither the CPU's copies nor the page cache they pass through, which P2P
/// leaves to the application; a close call stays with the schedule.
pub const AHEAD_MARGIN: u64 = 32;

/// Whether a part of `pages` pages of a read that continues a stream ([`streaming`]), `cached`
/// of them resident, is read faster through the page cache with read-ahead than by its
/// schedule between the page cache and P2P, whose makespan is `planned`: [`ahead_makespan`]
/// saves at least `planned / AHEAD_MARGIN`.
///
/// SPIN's P-readahead takes only reads smaller than the read-ahead window ([`prefetch`]): a
/// larger one pays `C_p2p` once for more bytes. But a synchronous P2P read waits for that cost
/// on every request, which read-ahead hides: where copying is not slower than the device
/// (`BW_pc >= BW_p2p`) an uncached stream of requests up to about `AHEAD_MARGIN` times what
/// the device moves in `C_p2p` is faster through the page cache, and where it is slower, a
/// smaller one still, below the size at which the copy's extra time nears `C_p2p`. A partly
/// cached request compares with its schedule, which overlaps the copy of its cached pages
/// with the P2P of the rest.
pub fn ahead_wins(model: &Model, pages: u64, cached: u64, planned: Picos) -> bool {
    pages != 0
        && ahead_makespan(model, pages, cached) <= planned.saturating_sub(planned / AHEAD_MARGIN)
}

/// Whether a page-cache leg of `leg_pages` pages of `stream` on a device of `io_pages` may read
/// ahead within a partition of `limit` pages: the room it reserves ([`leg_reserve`]) is at most
/// half the limit, so that two streams read ahead at once. A larger leg would find no room,
/// or take it all, and read through the plain page cache.
pub fn leg_fits(stream: &Stream, io_pages: u64, leg_pages: u64, limit: u64) -> bool {
    leg_reserve(stream, io_pages, leg_pages) <= limit / 2
}

/// Whether a read of `len` bytes at `pos` lies wholly inside the page where the stream's
/// previous read ended (at `prev_pos`, not on a page boundary): a page that read found or
/// brought into the page cache, whose read-ahead marker, if it had one, that read met, and
/// past which no bridge horizon ([`bridge`]) moves. Such a read has nothing to do with
/// read-ahead; at 512 B per call seven reads in eight are such reads.
pub fn same_page(prev_pos: i64, pos: u64, len: u64, page_size: u32) -> bool {
    let Ok(prev) = u64::try_from(prev_pos) else {
        return false;
    };
    let page = u64::from(page_size.max(1));
    let Some(last) = pos.checked_add(len).and_then(|end| end.checked_sub(1)) else {
        return false;
    };
    let index = page_of(prev, page);
    if len == 0 || index.wrapping_mul(page) == prev {
        return false;
    }
    page_of(pos, page) == index && page_of(last, page) == index
}

/// Read-ahead windows a bridged window spans at most: a stream through cached pages reads
/// that far ahead of the next page it would miss, so that the device works while the stream
/// copies the cached pages before it (see [`bridge_lead`]).
pub const BRIDGE_WINDOWS: u32 = 4;

/// How many pages ahead a stream through cached pages looks and reads (its *lead*): up to
/// [`BRIDGE_WINDOWS`] windows of `ra_pages` pages, at most `room`, the pages the partition
/// leaves to windows in flight. 0 if read-ahead is off.
pub fn bridge_lead(ra_pages: u32, room: u64) -> u32 {
    let want = u64::from(ra_pages).saturating_mul(u64::from(BRIDGE_WINDOWS));
    u32::try_from(want.min(room)).unwrap_or(u32::MAX)
}

/// The pages a small sequential read into GPU memory of `len` bytes at `pos` looks at for a
/// page missing from the page cache, to read ahead from there before the stream reaches it
/// (a *bridge* across pages already cached).
///
/// The page cache's read-ahead moves its window only when a read meets a folio marked for it
/// or misses: a stream that runs through cached pages leaves its window behind, and the first
/// page it then misses costs a synchronous read, started small (`get_init_ra_size()`: four
/// pages for a one-page read) and ramped up window by window. GPU read-ahead knows the file's
/// residency instead. Once a read lies wholly past the file's window (`ra_start .. ra_start +
/// ra_size`, where the window's marker no longer moves it on), it looks at the read's
/// *look-ahead*: the pages after its last one up to a horizon `lead` to `lead + stride` pages
/// further ([`bridge_lead`]: a few windows, so that the device reads the first pages missing
/// while the stream still copies cached ones). The horizon moves in steps of `stride` pages,
/// the largest power of two up to `max(1, lead / 4)`, so that a stream of reads smaller than
/// that looks once per step. The range returned is the part of the look-ahead beyond the
/// window that the previous read of the stream (which ended at `prev_pos`) did not look at
/// already: a stream looks at every page once, and not at all while its window runs ahead of
/// it. `None` if there is nothing to look at: no read-ahead, a random advice, an empty read,
/// no lead, a window not behind the read, or a horizon that did not move.
///
/// Inlined always: it runs for every small sequential read into GPU memory, and the router
/// passes the kernel's page size as a constant, which turns its page arithmetic into
/// shifts and drops the branches for other sizes.
#[inline(always)]
pub fn bridge(
    stream: &Stream,
    pos: u64,
    len: u64,
    lead: u32,
    page_size: u32,
) -> Option<(u64, u64)> {
    if stream.random || stream.ra_pages == 0 || lead == 0 || len == 0 {
        return None;
    }
    // Shifts, not divisions: this runs for every such read.
    let page = u64::from(page_size.max(1));
    let to_page = |off: u64| page_of(off, page);
    let ahead = u64::from(lead);
    // A power of two, at most a quarter of the lead.
    let stride_shift = (ahead / 4).max(1).ilog2();
    let horizon = |next: u64| {
        ((next >> stride_shift) << stride_shift)
            .checked_add(1 << stride_shift)?
            .checked_add(ahead)
    };
    let first = to_page(pos);
    let window_end = if stream.ra_size == 0 {
        0
    } else {
        stream.ra_start.saturating_add(stream.ra_size)
    };
    if first < window_end {
        return None;
    }
    let next = to_page(pos.checked_add(len - 1)?).checked_add(1)?;
    // The previous read looked up to its own horizon if it lay wholly past the window too:
    // always without a window, else if it began there, taken to be as long as this one. A
    // stream of varying sizes may look at some pages twice, or skip a step (a gap there is
    // left to the page cache's read-ahead).
    let mut prev_next = None;
    if let Ok(prev) = u64::try_from(stream.prev_pos) {
        if pos > 0 && prev > 0 && is_sequential(stream.prev_pos, pos, page_size) {
            let p = to_page(prev - 1) + 1;
            if window_end == 0 || p >= window_end.saturating_add(next - first) {
                // The horizon moves with the step of the read's next page only: in the same
                // step as the previous read's (or an earlier one) it did not move. Most reads
                // of a stream end here, before any horizon is computed.
                if p >> stride_shift >= next >> stride_shift {
                    return None;
                }
                prev_next = Some(p);
            }
        }
    }
    let end = horizon(next)?;
    let mut from = next.max(window_end);
    if let Some(p) = prev_next {
        from = from.max(horizon(p).unwrap_or(u64::MAX));
    }
    (from < end).then_some((from, end))
}

/// An entry of the partition: something that covers a number of pages.
pub trait Weighted: Copy {
    /// The pages the entry holds, at least one.
    fn pages(&self) -> u64;
}

/// A bounded FIFO of page-cache folios, weighted by their pages.
///
/// The entries live in a slice the caller owns and passes to every call; its length is the
/// ring's capacity in entries. Every entry holds at least one page, so a slice of `limit`
/// entries never runs out of room before the page limit is reached.
///
/// Besides its entries, the partition counts *held* pages: entries that left the ring but whose
/// folios are still in the page cache, because eviction found them busy or is still at work on
/// them. Held pages count against the limit until the caller releases them, so that the pages
/// the partition leaves in the page cache never exceed it.
///
/// It also counts *reserved* pages: room taken by [`Partition::reserve`] for the windows a read
/// is about to read ahead, which are in the page cache before they can be admitted. A
/// reservation counts against the limit until [`Partition::unreserve`]d, entry by entry as its
/// windows are admitted and the rest when the read is done, so that what the readers in flight
/// bring in fits too, however many there are.
///
/// # Invariants
///
/// `len <= slots.len()` of the slice in use, `head < slots.len()` unless it is empty, and
/// `pages` is the sum of the pages of the `len` entries from `head` on. `pages + held +
/// reserved` is at most `limit` except after [`Partition::hold`] or
/// [`Partition::keep_reserved`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    head: usize,
    len: usize,
    pages: u64,
    held: u64,
    reserved: u64,
    limit: u64,
}

/// What [`Partition::reserve`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserve {
    /// The pages are reserved; the oldest entries were evicted to make room.
    Done,
    /// Other reservations leave no room now: they end when their reads are done.
    Wait,
    /// The held pages leave no room even without other reservations.
    NoRoom,
}

impl Partition {
    /// An empty partition that holds at most `limit` pages.
    pub const fn new(limit: u64) -> Self {
        Self {
            head: 0,
            len: 0,
            pages: 0,
            held: 0,
            reserved: 0,
            limit,
        }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pages the partition's books account for: those of its entries and those held (not
    /// the reserved ones).
    pub fn pages(&self) -> u64 {
        self.pages.saturating_add(self.held)
    }

    /// The pages of the entries in the ring.
    pub fn queued(&self) -> u64 {
        self.pages
    }

    /// The pages held: out of the ring, not released yet.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// The pages reserved for windows in flight.
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// The pages counted against the limit: the books' and the reserved ones.
    pub fn used(&self) -> u64 {
        self.pages().saturating_add(self.reserved)
    }

    /// The most pages the partition holds.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The oldest entry, left in place.
    pub fn peek<E: Weighted>(&self, slots: &[E]) -> Option<E> {
        if self.len == 0 {
            return None;
        }
        slots.get(self.head).copied()
    }

    /// Removes and returns the oldest entry.
    pub fn pop<E: Weighted>(&mut self, slots: &[E]) -> Option<E> {
        if self.len == 0 || slots.is_empty() {
            return None;
        }
        let e = *slots.get(self.head)?;
        self.head = (self.head + 1) % slots.len();
        self.len -= 1;
        self.pages = self.pages.saturating_sub(e.pages().max(1));
        Some(e)
    }

    /// Removes and returns the oldest entry, its pages held until [`Partition::release`]d: for
    /// a caller that evicts it later.
    pub fn pop_held<E: Weighted>(&mut self, slots: &[E]) -> Option<E> {
        let e = self.pop(slots)?;
        self.hold(e.pages().max(1));
        Some(e)
    }

    /// Counts `pages` more as held, even beyond the limit: entries that the next
    /// [`Partition::push`]es make room for.
    pub fn hold(&mut self, pages: u64) {
        self.held = self.held.saturating_add(pages);
    }

    /// Stops counting `pages` held pages: their folios left the page cache, or are no longer
    /// the partition's.
    pub fn release(&mut self, pages: u64) {
        self.held = self.held.saturating_sub(pages);
    }

    /// Hands the oldest entries to `evict` until `pages` more fit in both the page limit and
    /// the slots (see [`Partition::push`]).
    fn make_room<E: Weighted>(
        &mut self,
        slots: &[E],
        pages: u64,
        evict: &mut impl FnMut(E) -> u64,
    ) {
        while self.used().saturating_add(pages) > self.limit || self.len == slots.len() {
            match self.pop(slots) {
                Some(old) => {
                    let kept = evict(old).min(old.pages().max(1));
                    self.hold(kept);
                }
                None => break,
            }
        }
    }

    /// Reserves `pages` for windows about to be read ahead, first handing the oldest entries
    /// to `evict` (as [`Partition::push`] does) until they fit. Evicts nothing unless the
    /// reservation can be made: [`Reserve::Wait`] if the other reservations leave no room,
    /// [`Reserve::NoRoom`] if the held pages alone do.
    pub fn reserve<E: Weighted>(
        &mut self,
        slots: &[E],
        pages: u64,
        mut evict: impl FnMut(E) -> u64,
    ) -> Reserve {
        if self.held.saturating_add(pages) > self.limit {
            return Reserve::NoRoom;
        }
        if self
            .held
            .saturating_add(self.reserved)
            .saturating_add(pages)
            > self.limit
        {
            return Reserve::Wait;
        }
        self.make_room(slots, pages, &mut evict);
        if self.used().saturating_add(pages) > self.limit {
            // `evict` held more than the entries it was given left: the books are full of
            // held pages.
            return Reserve::NoRoom;
        }
        self.reserved += pages;
        Reserve::Done
    }

    /// Gives back `pages` reserved pages: a window of the reservation was admitted, or the
    /// read is done.
    pub fn unreserve(&mut self, pages: u64) {
        self.reserved = self.reserved.saturating_sub(pages);
    }

    /// Counts `pages` more as reserved, even beyond the limit: the reservations still in
    /// flight when the partition is replaced by one of another limit.
    pub fn keep_reserved(&mut self, pages: u64) {
        self.reserved = self.reserved.saturating_add(pages);
    }

    /// Adds `e` as the newest entry, first handing the oldest entries to `evict` until it fits
    /// in both the page limit (with the reserved pages) and the slots. `evict` returns the
    /// pages of the entry it was given that stay in the page cache (a busy folio) and are to
    /// be held, at most the entry's own.
    ///
    /// Returns `false`, and evicts nothing, if `e` alone holds more than the limit (or there
    /// are no slots); returns `false` also if the held and reserved pages leave no room for `e`
    /// with the ring empty. The caller then treats `e` as not admitted.
    pub fn push<E: Weighted>(
        &mut self,
        slots: &mut [E],
        e: E,
        mut evict: impl FnMut(E) -> u64,
    ) -> bool {
        let pages = e.pages().max(1);
        if pages > self.limit || slots.is_empty() {
            return false;
        }
        self.make_room(slots, pages, &mut evict);
        if self.used() + pages > self.limit {
            return false;
        }
        let at = (self.head + self.len) % slots.len();
        slots[at] = e;
        self.len += 1;
        self.pages += pages;
        true
    }
}

/// The most pages a page-cache leg of `leg_pages` pages of `stream` may bring into the page
/// cache by read-ahead, to be reserved before it ([`Partition::reserve`]).
///
/// As the kernel's read-ahead (mm/readahead.c) reads: a synchronous window where the leg misses
/// a page, of at most `max` pages, the file's `ra_pages` or, for a leg larger than that, up to
/// the leg and the device's `io_pages` (`ractl_max_pages()`); and an asynchronous window where
/// it meets a marked folio, of the current window's size (`ra_size`, which such a window never
/// shrinks) or at most `max`. A leg shorter than a window meets each once at most; a longer one
/// (never left to the partition) drops each folio it consumes, so that at most those two
/// windows are in the page cache at once.
pub fn leg_reserve(stream: &Stream, io_pages: u64, leg_pages: u64) -> u64 {
    let ra_pages = u64::from(stream.ra_pages);
    let max = if leg_pages > ra_pages && io_pages > ra_pages {
        leg_pages.min(io_pages)
    } else {
        ra_pages
    };
    max.saturating_add(max.max(stream.ra_size))
}

/// Streams whose read positions [`Consumed`] remembers.
pub const STREAMS: usize = 8;

/// Where the streams that last admitted into the partition were reading, so that an evictor
/// can tell an entry its stream has read past (consumed, of no more use to it) from one read
/// ahead for it and not read yet.
///
/// A stream is named by an id other than 0 (the router uses the reader's open file, so that two
/// streams through one file are told apart) and noted where it reads whenever it admits a
/// window ([`Consumed::note`]): at most once per window, so what it consumed is known a window
/// late at most. It remembers [`STREAMS`] streams; a new one replaces the one noted least
/// recently. An entry of a stream it does not remember is never taken for consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consumed {
    ids: [usize; STREAMS],
    at: [u64; STREAMS],
    stamp: [u64; STREAMS],
    clock: u64,
}

impl Consumed {
    /// Remembers no stream.
    pub const fn new() -> Self {
        Self {
            ids: [0; STREAMS],
            at: [0; STREAMS],
            stamp: [0; STREAMS],
            clock: 0,
        }
    }

    /// Notes that stream `id` reads at page `at`: it consumed every page before it. A stream
    /// that moved back (a seek) consumed only what lies before its new place.
    pub fn note(&mut self, id: usize, at: u64) {
        if id == 0 {
            return;
        }
        self.clock = self.clock.wrapping_add(1);
        let mut slot = 0;
        for i in 0..STREAMS {
            if self.ids[i] == id {
                slot = i;
                break;
            }
            if self.stamp[i] < self.stamp[slot] {
                slot = i;
            }
        }
        self.ids[slot] = id;
        self.at[slot] = at;
        self.stamp[slot] = self.clock;
    }

    /// Whether stream `id` read past the `pages` pages from `index` when it was last noted.
    pub fn consumed(&self, id: usize, index: u64, pages: u64) -> bool {
        if id == 0 {
            return false;
        }
        let Some(i) = self.ids.iter().position(|&s| s == id) else {
            return false;
        };
        index.saturating_add(pages) <= self.at[i]
    }
}

impl Default for Consumed {
    fn default() -> Self {
        Self::new()
    }
}

/// How a partition of `limit` pages stays within its limit while readers seldom evict.
///
/// A window that read-ahead brings in for the GPU is in the page cache before the router admits
/// it, so a read reserves room for its windows first ([`Partition::reserve`]), evicting the
/// oldest entries itself if the books and the other reservations leave too little. Before that,
/// once the books hold more than [`Watermarks::kick`] pages (11/16 of the limit), a reader
/// wakes a background evictor that brings them down to [`Watermarks::target`]: the oldest
/// entries are the pages the streams consumed first, and the half of the limit that stays keeps
/// what read-ahead brought in but the streams did not consume yet (two windows for each of four
/// streams with the default window). The 3/16 in between is what one wake-up evicts (three
/// default windows): a wake-up costs the reader an IPI. A stream through cached pages reads at
/// most [`Watermarks::lead`] pages ahead ([`bridge_lead`]).
///
/// For every limit, `target <= kick <= limit` and `lead <= limit`, and `lead >= 1` if
/// `limit >= 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watermarks {
    /// Above this many pages in the books, admission wakes the background evictor.
    pub kick: u64,
    /// The background evictor stops at this many pages.
    pub target: u64,
    /// The most pages a window bridged across cached pages spans: a quarter of the limit.
    pub lead: u64,
}

impl Watermarks {
    /// The watermarks of a partition of `limit` pages.
    pub const fn new(limit: u64) -> Self {
        Self {
            kick: limit / 2 + limit / 8 + limit / 16,
            target: limit / 2,
            lead: if limit / 4 == 0 { limit } else { limit / 4 },
        }
    }
}

/// Whether the pages `first .. end` lie in the region a read-ahead window `start .. start + nr`
/// and the one before it cover, `start - nr .. start + nr` (windows never shrink while a
/// stream runs, so the one before is at most `nr` pages).
///
/// A sequential leg consumes pages of the current window or of the one before, both admitted
/// into the partition when they were read ahead. When a leg moved the window twice (a
/// synchronous window at its first page, replaced by an asynchronous one), the pages from the
/// leg to the new window lie outside the window before the leg: the caller admits them.
pub fn in_window(first: u64, end: u64, start: u64, nr: u64) -> bool {
    nr != 0 && first >= start.saturating_sub(nr) && end <= start.saturating_add(nr)
}
