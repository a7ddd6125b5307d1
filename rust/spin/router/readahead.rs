// SPDX-License-Identifier: GPL-2.0

//! The GPU read-ahead partition (SPIN, USENIX ATC'17, §4.3.2): a bounded part of the page
//! cache that holds what read-ahead brought in for reads into GPU memory.
//!
//! In `auto` mode the router reads every page-cache leg into GPU memory uncached
//! (`IOCB_DONTCACHE`, see `spin_sub_read_ra()`), so the folios the file's read-ahead brings in
//! meanwhile are dropbehind folios (mm/filemap.c, mm/readahead.c): the GPU read that moves past
//! one drops it, and a CPU read or page fault clears the flag and keeps the folio cached like
//! any other. A GPU stream therefore holds little more than its read-ahead window. What is left
//! over (a stream that stopped, windows read ahead but never consumed) is bounded here: every
//! dropbehind folio of a window read ahead during a GPU leg is admitted into one system-wide
//! FIFO ([`crate::sched::readahead::Partition`]) of at most `/sys/kernel/spin/ra_partition_pages`
//! pages, and when a new folio would exceed that, the oldest entries are evicted with
//! `filemap_evict_dropbehind()`: dropped if still clean, unmapped dropbehind folios, left alone
//! otherwise (promoted by a CPU access, mapped, dirty or under writeback: nothing is lost).
//!
//! Entries hold no folio references: a folio is remembered by pfn, mapping and index and found
//! again speculatively, so truncation, hole punching, `POSIX_FADV_DONTNEED` and reclaim never
//! wait for the partition. An entry whose folio already left the page cache (the usual fate:
//! the GPU read consumed it) is simply forgotten when its turn comes. The partition's page
//! count is therefore an upper bound of what it holds in the page cache.
//!
//! Lock order: [`PARTITION`] → folio lock (trylock only) → the mapping's `i_lock` and
//! `i_pages` lock (inside `folio_unmap_invalidate()`). No other lock of spin is taken under
//! [`PARTITION`], and it is never taken with the router's disk table held. The counters are
//! atomics. See Documentation/spin/readahead.rst.

use super::glue::{self, Evict, FileInfo, RaFolio, RaWindow, Request};
use crate::sched::readahead::{Partition, Weighted};
use core::fmt::Write;
use kernel::{
    prelude::*,
    str::Formatter,
    sync::{
        atomic::{Atomic, Relaxed},
        global_lock,
    },
};

/// The default size of the partition in pages (SPIN's default).
pub(crate) const DEFAULT_PAGES: u64 = 512;

/// The largest size the knob accepts: 1 GiB of 4 KiB pages; the entries take 32 bytes a page.
pub(crate) const MAX_PAGES: u64 = 1 << 18;

/// A folio of the partition, remembered without a reference.
#[derive(Clone, Copy, Default)]
struct Entry {
    pfn: usize,
    mapping: usize,
    index: u64,
    pages: u64,
}

impl Weighted for Entry {
    fn pages(&self) -> u64 {
        self.pages
    }
}

/// The partition's books and the slots its entries live in (one per page of the limit).
struct Part {
    books: Partition,
    slots: KVVec<Entry>,
}

global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the router or sysfs can use it.
    unsafe(uninit) static PARTITION: Mutex<Part> = Part {
        books: Partition::new(0),
        slots: KVVec::new(),
    };
}

/// The limit, readable without the lock: 0 turns GPU read-ahead off.
static LIMIT: Atomic<u64> = Atomic::new(0);

/// System-wide counters of the partition, in pages.
struct Stats {
    admitted: Atomic<u64>,
    evicted: Atomic<u64>,
    promoted: Atomic<u64>,
    busy: Atomic<u64>,
    gone: Atomic<u64>,
}

static STATS: Stats = Stats {
    admitted: Atomic::new(0),
    evicted: Atomic::new(0),
    promoted: Atomic::new(0),
    busy: Atomic::new(0),
    gone: Atomic::new(0),
};

/// Sets the partition up with [`DEFAULT_PAGES`]; called once from module init.
pub(crate) fn init() -> Result {
    // SAFETY: Called once, before any other use of `PARTITION`.
    unsafe { PARTITION.init() };
    set_limit(DEFAULT_PAGES)
}

/// Whether GPU read-ahead is on (the partition may hold pages).
pub(crate) fn enabled() -> bool {
    LIMIT.load(Relaxed) != 0
}

/// Evicts an entry that left the partition; returns the pages dropped from the page cache.
fn evict(e: Entry) -> u64 {
    let (counter, dropped) = match glue::evict_dropbehind(e.pfn, e.mapping, e.index) {
        Evict::Dropped => (&STATS.evicted, e.pages),
        Evict::Promoted => (&STATS.promoted, 0),
        Evict::Busy => (&STATS.busy, 0),
        Evict::Gone => (&STATS.gone, 0),
    };
    counter.add(e.pages, Relaxed);
    dropped
}

/// Puts `e` into the partition as its newest entry, evicting the oldest ones to make room; an
/// entry larger than the whole limit is evicted itself. Returns the pages admitted and the
/// pages dropped from the page cache.
fn put(books: &mut Partition, slots: &mut [Entry], e: Entry) -> (u64, u64) {
    let mut dropped = 0;
    if books.push(slots, e, |old| dropped += evict(old)) {
        (e.pages, dropped)
    } else {
        (0, dropped + evict(e))
    }
}

/// Resizes the partition to `pages` (0 turns GPU read-ahead off), evicting its oldest entries
/// beyond the new limit.
pub(crate) fn set_limit(pages: u64) -> Result {
    if pages > MAX_PAGES {
        return Err(EINVAL);
    }
    let mut slots = KVVec::new();
    slots.resize(pages as usize, Entry::default(), GFP_KERNEL)?;
    let mut books = Partition::new(pages);
    let mut part = PARTITION.lock();
    let Part {
        books: old,
        slots: old_slots,
    } = &mut *part;
    while let Some(e) = old.pop(old_slots) {
        put(&mut books, &mut slots, e);
    }
    *part = Part { books, slots };
    LIMIT.store(pages, Relaxed);
    Ok(())
}

/// Admits the dropbehind folios of `win`, read ahead during a page-cache leg of `req` into GPU
/// memory, into the partition, evicting the oldest entries to make room; returns the pages
/// admitted.
pub(crate) fn admit(req: &Request<'_>, info: &FileInfo, win: &RaWindow) -> u64 {
    let mut folios = [RaFolio::default(); 16];
    let mut index = win.start;
    let end = win.start.saturating_add(win.nr);
    let (mut admitted, mut evicted) = (0u64, 0u64);
    loop {
        let n = req.ra_collect(&mut index, end, &mut folios);
        if n == 0 {
            break;
        }
        let mut part = PARTITION.lock();
        let Part { books, slots } = &mut *part;
        for f in &folios[..n] {
            let e = Entry {
                pfn: f.pfn,
                mapping: win.mapping,
                index: f.index,
                pages: f.pages,
            };
            let (kept, dropped) = put(books, slots, e);
            admitted += kept;
            evicted += dropped;
        }
        drop(part);
        if n < folios.len() {
            break;
        }
    }
    STATS.admitted.add(admitted, Relaxed);
    glue::trace_readahead(
        info,
        win,
        u32::try_from(admitted).unwrap_or(u32::MAX),
        u32::try_from(evicted).unwrap_or(u32::MAX),
    );
    admitted
}

/// Writes the partition's lines of `/sys/kernel/spin/stat`.
pub(crate) fn show_stat(f: &mut Formatter<'_>) -> core::fmt::Result {
    let pages = PARTITION.lock().books.pages();
    let v = |a: &Atomic<u64>| a.load(Relaxed);
    writeln!(f, "ra_partition_pages {pages}")?;
    writeln!(f, "ra_partition_limit {}", LIMIT.load(Relaxed))?;
    writeln!(f, "ra_pages_admitted {}", v(&STATS.admitted))?;
    writeln!(f, "ra_pages_evicted {}", v(&STATS.evicted))?;
    writeln!(f, "ra_pages_promoted {}", v(&STATS.promoted))?;
    writeln!(f, "ra_pages_busy {}", v(&STATS.busy))?;
    writeln!(f, "ra_pages_gone {}", v(&STATS.gone))
}

/// The limit, for `/sys/kernel/spin/ra_partition_pages`.
pub(crate) fn limit() -> u64 {
    LIMIT.load(Relaxed)
}
