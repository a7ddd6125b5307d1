// SPDX-License-Identifier: GPL-2.0

//! The GPU read-ahead partition (SPIN, USENIX ATC'17, §4.3.2): a bounded part of the page
//! cache that holds what read-ahead brought in for reads into GPU memory.
//!
//! In `auto` mode the router reads every page-cache leg into GPU memory uncached
//! (`IOCB_DONTCACHE`, see `spin_sub_read_ra()`), so the folios the file's read-ahead brings in
//! meanwhile are dropbehind folios (mm/filemap.c, mm/readahead.c): a CPU read or page fault
//! clears the flag and keeps the folio cached like any other. Every dropbehind folio of a
//! window read ahead during a GPU leg is admitted into one system-wide FIFO
//! ([`crate::sched::readahead::Partition`]) of at most `/sys/kernel/spin/ra_partition_pages`
//! pages, and evicted from it oldest first with `filemap_evict_dropbehind_batch()`: dropped if
//! still a clean, unmapped dropbehind folio, left alone otherwise (promoted by a CPU access,
//! mapped, dirty or under writeback: nothing is lost).
//!
//! A sequential GPU read (P-readahead) leaves the folios it consumes to the partition
//! (`IOCB_DONTCACHE_DEFER`) instead of dropping each one itself, which would cost the reader
//! the page cache's and the LRU's locks, with interrupts off, once per folio.
//!
//! A window is in the page cache before it can be admitted, so a leg that may read ahead first
//! reserves room for what it may bring in ([`reserve`], `leg_reserve()`): the books, the pages
//! held and the reservations of all readers in flight never exceed the limit together, however
//! many streams read at once. A reservation evicts the oldest entries to fit; one that other
//! reservations leave no room for waits for them to end (a leg's I/O); one that the held pages
//! leave no room for is refused, and the leg reads through the plain page cache instead
//! (`ra_legs_no_room`). A leg that copies only cached pages reserves nothing: a leg first
//! copies with `IOCB_NOIO`, which stops at a page to read or a read-ahead marker. The
//! windows a leg admits are taken out of its reservation; pages admitted beyond it
//! (`ra_pages_unreserved`, which the tests expect to stay 0) mean `leg_reserve()` was wrong.
//!
//! Above 11/16 of the limit ([`Watermarks`]) an admission wakes the [`Evictor`], which evicts
//! the oldest entries, the pages the streams consumed first, down to half the limit on an
//! unbound workqueue, away from the readers, and below that while the oldest entry is one its
//! stream has read past ([`Consumed`]: where each stream was when it last admitted, noted in
//! [`admit`]), while all the pages it holds stay within a quarter of the limit (the room a
//! reader's reservation needs beside them). It takes 16 entries at a time out of
//! the books and evicts them with the partition released, the folios of one file under one
//! hold of its page cache's locks (`filemap_evict_dropbehind_batch()`). The cached prefix
//! copied before a schedule (no I/O), and what every leg copies before it reads, leave them
//! too. Other page-cache legs (the edges and uncached runs of a schedule, whose read-ahead may
//! be no window) drop the folios they read themselves.
//!
//! A stream that runs through cached pages leaves the page cache's window behind; [`bridge`]
//! reads a window ahead from the first page it would miss (`spin_ra_bridge()`), admitted like
//! the others, so that the stream never waits for a synchronous read-ahead where a cached run
//! ends.
//!
//! Entries hold no folio references: a folio is remembered by pfn, mapping and index and found
//! again speculatively, so truncation, hole punching, `POSIX_FADV_DONTNEED` and reclaim never
//! wait for the partition. An entry whose folio already left the page cache (truncated,
//! invalidated, reclaimed, or consumed by a leg that drops) is simply forgotten when its turn
//! comes. The partition's page count is therefore an upper bound of what it holds in the page
//! cache.
//!
//! A folio read ahead waits off the LRU in the LRU batch of the CPU that added it until that
//! batch is drained, which an idle CPU never does; `filemap_evict_dropbehind_batch()` drains the
//! batches of the CPU it runs on and finds a folio in another CPU's batch busy. The
//! [`Evictor`] then drains every CPU's batches (`lru_add_drain_all()`) and tries once more; a
//! reader making room for a reservation does not wait for that. Either way, a folio still
//! busy (in a batch, locked, dirty or under writeback) is [`Held`]: its pages stay counted in the
//! books until it is tried again and evicted, so that what the partition leaves in the page
//! cache stays within its limit. The evictor's next run tries the held entries first, and a
//! delayed [`Retrier`] tries them when no run comes (after a stream's last read), backing off
//! while they stay busy; a change of the limit tries them at once. Only when [`HELD_MAX`]
//! entries are held already is a busy folio forgotten and left to reclaim (a dropbehind folio
//! is never marked accessed, so it stays on the inactive list). So that busy folios are rare,
//! a reader drains its own CPU's batches when it admits a window (`spin_ra_collect()`): the
//! folios it read ahead are then on the LRU before any other reader can evict them.
//!
//! Lock order: [`SETTLING`] → [`PARTITION`] → folio locks (trylock only) → the mapping's
//! `i_lock` and `i_pages` lock (inside `filemap_evict_dropbehind_batch()`); a reader that evicts
//! to make room does so under [`PARTITION`], the evictor without it. A reader holds a
//! reservation, never [`PARTITION`], while it reads, and waits for room with nothing held. No
//! other lock of spin is taken under [`PARTITION`], and it is never taken with the router's disk
//! table held. The evictor and the [`Retrier`] are queued, evict and drain the LRU batches with
//! [`PARTITION`] released and [`SETTLING`] held, which a change of the limit takes too: entries
//! taken out of the books to be evicted in the background are settled (evicted or held) before
//! the change tries the held ones. Readers never take [`SETTLING`]. The counters are atomics.
//! See Documentation/spin/readahead.rst.

use super::glue::{self, Evict, FileInfo, RaFolio, RaWindow, Request};
use super::trace;
use crate::sched::readahead::{Consumed, Partition, Reserve, Watermarks, Weighted};
use core::fmt::Write;
use kernel::{
    prelude::*,
    str::Formatter,
    sync::{
        atomic::{Atomic, Full, Relaxed, Release},
        global_lock, Arc, GlobalGuard,
    },
    time::{delay::fsleep, msecs_to_jiffies, Delta},
    workqueue::{
        self, impl_has_delayed_work, impl_has_work, new_delayed_work, new_work, DelayedWork, Work,
        WorkItem,
    },
};

/// The default size of the partition in pages (SPIN's default).
pub(crate) const DEFAULT_PAGES: u64 = 512;

/// The largest size the knob accepts: 1 GiB of 4 KiB pages; the entries take 40 bytes per page
/// of the limit.
pub(crate) const MAX_PAGES: u64 = 1 << 18;

/// A folio of the partition, remembered without a reference, and the stream that read it
/// ahead ([`Request::stream_id`]).
#[derive(Clone, Copy, Default)]
struct Entry {
    pfn: usize,
    mapping: usize,
    index: u64,
    pages: u64,
    stream: usize,
}

impl Weighted for Entry {
    fn pages(&self) -> u64 {
        self.pages
    }
}

/// Entries whose folios eviction found busy (see [`Held`]).
const HELD_MAX: usize = 32;

/// Entries that left the partition's ring but whose folios eviction found busy (in another
/// CPU's LRU batch, locked, dirty or under writeback): their pages stay counted in the books
/// ([`Partition::held`]) and the [`Evictor`] tries them again, so that the pages the partition
/// leaves in the page cache never exceed its limit. An entry found busy while this is full is
/// forgotten (`ra_pages_busy`) and its folio left to reclaim.
struct Held {
    entries: [Entry; HELD_MAX],
    len: usize,
}

impl Held {
    /// Keeps `e`; `false` if full.
    fn put(&mut self, e: Entry) -> bool {
        let Some(slot) = self.entries.get_mut(self.len) else {
            return false;
        };
        *slot = e;
        self.len += 1;
        true
    }

    /// Moves every entry kept into `out`; returns how many.
    fn take(&mut self, out: &mut [Entry; HELD_MAX]) -> usize {
        let n = self.len;
        out[..n].copy_from_slice(&self.entries[..n]);
        self.len = 0;
        n
    }
}

/// The partition's books and reservations, bounded by the limit, the slots its entries live in
/// (one per page of the limit), the entries held busy, the watermarks of the limit, where the
/// streams that admit read, the background evictor and the retrier of held entries.
struct Part {
    books: Partition,
    slots: KVVec<Entry>,
    held: Held,
    marks: Watermarks,
    consumed: Consumed,
    evictor: Option<Arc<Evictor>>,
    retrier: Option<Arc<Retrier>>,
}

global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the router or sysfs can use it.
    unsafe(uninit) static PARTITION: Mutex<Part> = Part {
        books: Partition::new(0),
        slots: KVVec::new(),
        held: Held {
            entries: [Entry {
                pfn: 0,
                mapping: 0,
                index: 0,
                pages: 0,
                stream: 0,
            }; HELD_MAX],
            len: 0,
        },
        marks: Watermarks::new(0),
        consumed: Consumed::new(),
        evictor: None,
        retrier: None,
    };
}

global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the router or sysfs can use it.
    unsafe(uninit) static SETTLING: Mutex<()> = ();
}

/// Entries the background evictor drops per run; a run that leaves more queues itself again, so
/// that the worker reschedules between runs.
const EVICT_RUN: usize = 256;

/// Entries the background evictor takes out of the partition per hold of [`PARTITION`] and
/// evicts together, with the partition released.
const EVICT_BATCH: usize = glue::EVICT_BATCH_MAX;

/// Whether the [`Evictor`] is queued or running: readers then do not queue it again.
static EVICTING: Atomic<bool> = Atomic::new(false);

/// Whether the [`Evictor`] stopped stalled: above its target, the pages held busy left it no
/// room to take any entry, and trying them again released none. It is then queued again only
/// once the [`Retrier`] releases some, or the limit changes: queued at once, as the mark alone
/// would have it, every run would drain every CPU's LRU batches and find the same folios busy,
/// for as long as they stay so (under writeback, locked). Set and cleared with [`SETTLING`]
/// held, so that the retrier that ends a stall runs after it began; every try of the held
/// entries that releases one ends it ([`retry_now`]), and so does a run of the evictor
/// that is not stalled, so that no wake-up is lost to a stall whose entries someone else
/// released.
static STALLED: Atomic<bool> = Atomic::new(false);

/// Queues the [`Evictor`] unless it is queued or running already, or stalled.
fn kick(evictor: Arc<Evictor>) {
    if STALLED.load(Relaxed) {
        return;
    }
    if !EVICTING.load(Relaxed) && !EVICTING.xchg(true, Full) {
        // An `Err` gives the reference back: the work is pending already.
        let _ = workqueue::system_dfl().enqueue(evictor);
    }
}

/// The background evictor: drops the partition's oldest entries down to
/// [`Watermarks::target`] on an unbound workqueue, off the reading CPU, so that the readers of
/// a GPU stream do not pay the page cache's and the LRU's locks once per consumed folio.
#[pin_data]
struct Evictor {
    #[pin]
    work: Work<Evictor>,
}

impl_has_work! {
    impl HasWork<Self> for Evictor { self.work }
}

impl WorkItem for Evictor {
    type Pointer = Arc<Evictor>;

    fn run(this: Arc<Evictor>) {
        let settling = SETTLING.lock();
        let (mut dropped, released) = retry_held(&settling);
        let (mut more, mut done, mut stuck) = (true, 0, false);
        let mut batch = [Entry::default(); EVICT_BATCH];
        let mut res = [Evict::Gone; EVICT_BATCH];
        while more && done < EVICT_RUN {
            let mut n = 0;
            let mut part = PARTITION.lock();
            let Part {
                books,
                slots,
                marks,
                consumed,
                ..
            } = &mut *part;
            // The entries taken out stay counted (held) until settled, and a reservation
            // finds no room while held pages alone fill the limit (`Reserve::NoRoom`): so all
            // the pages held, this batch's and those kept busy, stay a lead below the limit,
            // and a batch stopped there goes on in the next once this one is settled. Down
            // to the target; then on while the oldest entry is one its stream read past
            // (consumed first, of no more use) and the held pages stay within a lead.
            let mut over = books.pages().saturating_sub(marks.target);
            let (mut past, mut capped) = (0, false);
            stuck = false;
            let room = books.limit().saturating_sub(marks.lead);
            while n < EVICT_BATCH {
                let Some(e) = books.peek(slots) else {
                    break;
                };
                let pages = e.pages.max(1);
                let held = books.held();
                if over == 0 {
                    if !consumed.consumed(e.stream, e.index, pages) {
                        break;
                    }
                    if held + pages > marks.lead {
                        capped = true;
                        break;
                    }
                    past += pages;
                } else if held != 0 && held + pages > room {
                    capped = true;
                    stuck = n == 0;
                    break;
                }
                let Some(e) = books.pop_held(slots) else {
                    break;
                };
                over = over.saturating_sub(e.pages.max(1));
                batch[n] = e;
                n += 1;
            }
            // A batch stopped by the cap goes on in the next one, once this one's pages are
            // settled; unless it took nothing (the held pages are others', kept busy).
            more = (n == EVICT_BATCH || (capped && n != 0)) && !books.is_empty();
            // Nothing taken or released all run long: the held pages stay busy, and this
            // run is not to be queued again until the retrier releases some.
            stuck = stuck && done == 0 && released == 0 && part.held.len != 0;
            drop(part);
            if past != 0 {
                STATS.consumed_first.add(past, Relaxed);
            }
            done += n;
            evict_batch(&batch[..n], &mut res[..n]);
            dropped += settle(&batch[..n], &res[..n]).0;
            if res[..n].contains(&Evict::Busy) {
                // Mostly folios still in the LRU batch of the CPU that read them ahead (an
                // idle CPU never drains it), held now: drain every CPU's batches and try
                // them again.
                dropped += retry_held(&settling).0;
            }
        }
        if stuck {
            STALLED.store(true, Relaxed);
            STATS.evictor_stalls.add(1, Relaxed);
        } else if STALLED.load(Relaxed) {
            // Queued by a reader that saw no stall yet, or by the retrier.
            STALLED.store(false, Relaxed);
        }
        drop(settling);
        STATS.evicted_bg.add(dropped, Relaxed);
        STATS.evictor_runs.add(1, Relaxed);
        rearm();
        if more {
            // Still above the target, or stopped by a cap with consumed entries left: run
            // again later, still marked as queued.
            let _ = workqueue::system_dfl().enqueue(this);
            return;
        }
        EVICTING.store(false, Release);
        // A reader that found the evictor busy after the last check did not queue it.
        let part = PARTITION.lock();
        let again = part.books.pages() > part.marks.kick && !part.books.is_empty();
        drop(part);
        if again {
            kick(this);
        }
    }
}

/// Queues the [`Evictor`] if the partition is above the mark that wakes it: when a try of the
/// held entries ends a stall ([`STALLED`]), as no reader may admit again to wake it.
fn kick_over_mark() {
    let wake = {
        let part = PARTITION.lock();
        let over = part.books.pages() > part.marks.kick && !part.books.is_empty();
        over.then(|| part.evictor.clone()).flatten()
    };
    if let Some(evictor) = wake {
        kick(evictor);
    }
}

/// Settles `batch`, entries the [`Evictor`] took out of the partition and tried to evict (`res`
/// says with what result): the ones still busy are held if there is room, the pages of the
/// others are released. Returns the pages dropped from the page cache and the pages released.
fn settle(batch: &[Entry], res: &[Evict]) -> (u64, u64) {
    let (mut dropped, mut released) = (0, 0);
    let mut part = PARTITION.lock();
    let Part { books, held, .. } = &mut *part;
    for (e, &r) in batch.iter().zip(res) {
        if r == Evict::Busy && held.put(*e) {
            STATS.held.add(e.pages, Relaxed);
            continue;
        }
        books.release(e.pages.max(1));
        released += e.pages.max(1);
        dropped += count(e, r);
    }
    (dropped, released)
}

/// Tries the entries held busy once more ([`retry_held`], with [`SETTLING`] taken) and ends a
/// stall ([`STALLED`]) if that released any, then queues the evictor if the partition is above
/// its mark; returns the pages dropped from the page cache. For the [`Retrier`] and for a
/// reader refused room, which hold no lock of the partition.
fn retry_now() -> u64 {
    let settling = SETTLING.lock();
    let (dropped, released) = retry_held(&settling);
    let unstalled = released != 0 && STALLED.load(Relaxed);
    if unstalled {
        STALLED.store(false, Relaxed);
    }
    drop(settling);
    if unstalled {
        kick_over_mark();
    }
    dropped
}

/// Tries the entries held busy once more, after draining every CPU's LRU batches; returns the
/// pages dropped from the page cache and the pages released (see [`settle`]).
///
/// Called with [`SETTLING`] held, so that no other run of the [`Evictor`] or the [`Retrier`]
/// has entries out of [`Held`] while this one tries them: an entry found busy by a run that
/// was at work while a change of the limit tried the held entries would otherwise be held
/// again after that change returned, and stay held until the retrier's next run.
fn retry_held(_settling: &GlobalGuard<SETTLING>) -> (u64, u64) {
    let mut part = PARTITION.lock();
    // Every run of the evictor starts here, mostly with nothing held: return before the
    // arrays below are set up (about 1 KiB of stores).
    if part.held.len == 0 {
        return (0, 0);
    }
    let mut batch = [Entry::default(); HELD_MAX];
    let n = part.held.take(&mut batch);
    drop(part);
    let mut res = [Evict::Gone; HELD_MAX];
    glue::lru_add_drain_all();
    for (b, r) in batch[..n]
        .chunks(EVICT_BATCH)
        .zip(res[..n].chunks_mut(EVICT_BATCH))
    {
        evict_batch(b, r);
    }
    settle(&batch[..n], &res[..n])
}

/// The first delay, in milliseconds, after which the [`Retrier`] tries the entries still held;
/// it doubles for every run that leaves some held, up to [`RETRY_MAX_MS`].
const RETRY_MIN_MS: u32 = 10;

/// The longest delay between two runs of the [`Retrier`].
const RETRY_MAX_MS: u32 = 1000;

/// The [`Retrier`]'s next delay in milliseconds; 0 while nothing is held.
static RETRY_MS: Atomic<u32> = Atomic::new(0);

/// Tries the entries held busy again later, when nothing else would: the [`Evictor`] runs only
/// when an admission or a reservation wakes it, so entries it left held after a stream's last
/// read stayed counted in the books, leaving a partition made smaller, or a busy one, no room
/// for any leg until the next stream happened to evict (`ra_legs_no_room`). Queued with a
/// delay that backs off from [`RETRY_MIN_MS`] to [`RETRY_MAX_MS`] while folios stay busy (a
/// folio under long writeback, or locked for a long time), and no more once none is held.
#[pin_data]
struct Retrier {
    #[pin]
    work: DelayedWork<Retrier>,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for Retrier { self.work }
}

impl WorkItem for Retrier {
    type Pointer = Arc<Retrier>;

    fn run(_this: Arc<Retrier>) {
        STATS.evicted_bg.add(retry_now(), Relaxed);
        rearm();
    }
}

/// Queues the [`Retrier`] with the next delay of its back-off, unless it is pending already.
fn arm(retrier: Arc<Retrier>) {
    let ms = RETRY_MS.load(Relaxed).clamp(RETRY_MIN_MS, RETRY_MAX_MS);
    // An `Err` gives the reference back: the work is pending already, with its delay.
    if workqueue::system_dfl()
        .enqueue_delayed(retrier, msecs_to_jiffies(ms))
        .is_ok()
    {
        RETRY_MS.store(ms.saturating_mul(2).min(RETRY_MAX_MS), Relaxed);
    }
}

/// Queues the [`Retrier`] if entries are held, after a run of it or of the [`Evictor`], or a
/// change of the limit; resets its back-off if none is.
fn rearm() {
    let retry = {
        let part = PARTITION.lock();
        retrier_if_held(&part.held, &part.retrier)
    };
    match retry {
        Some(retrier) => arm(retrier),
        None => RETRY_MS.store(0, Relaxed),
    }
}

/// The [`Retrier`], if `held` keeps entries: to queue with [`arm`] once [`PARTITION`] is
/// released (by [`rearm`], or by a reader that just held some or was refused room).
fn retrier_if_held(held: &Held, retrier: &Option<Arc<Retrier>>) -> Option<Arc<Retrier>> {
    if held.len == 0 {
        return None;
    }
    retrier.clone()
}

/// The limit, readable without the lock: 0 turns GPU read-ahead off.
static LIMIT: Atomic<u64> = Atomic::new(0);

/// System-wide counters of the partition, in pages.
struct Stats {
    admitted: Atomic<u64>,
    evicted: Atomic<u64>,
    evicted_bg: Atomic<u64>,
    evictor_runs: Atomic<u64>,
    evictor_stalls: Atomic<u64>,
    promoted: Atomic<u64>,
    busy: Atomic<u64>,
    held: Atomic<u64>,
    gone: Atomic<u64>,
    bridged: Atomic<u64>,
    unreserved: Atomic<u64>,
    no_room: Atomic<u64>,
    reserve_retries: Atomic<u64>,
    consumed_first: Atomic<u64>,
}

static STATS: Stats = Stats {
    admitted: Atomic::new(0),
    evicted: Atomic::new(0),
    evicted_bg: Atomic::new(0),
    evictor_runs: Atomic::new(0),
    evictor_stalls: Atomic::new(0),
    promoted: Atomic::new(0),
    busy: Atomic::new(0),
    held: Atomic::new(0),
    gone: Atomic::new(0),
    bridged: Atomic::new(0),
    unreserved: Atomic::new(0),
    no_room: Atomic::new(0),
    reserve_retries: Atomic::new(0),
    consumed_first: Atomic::new(0),
};

/// Sets the partition up with [`DEFAULT_PAGES`]; called once from module init.
pub(crate) fn init() -> Result {
    let evictor = Arc::pin_init(
        pin_init!(Evictor {
            work <- new_work!("spin::readahead::Evictor::work"),
        }),
        GFP_KERNEL,
    )?;
    let retrier = Arc::pin_init(
        pin_init!(Retrier {
            work <- new_delayed_work!("spin::readahead::Retrier::work"),
        }),
        GFP_KERNEL,
    )?;
    // SAFETY: Called once, before any other use of `PARTITION`.
    unsafe { PARTITION.init() };
    // SAFETY: Called once, before any other use of `SETTLING`.
    unsafe { SETTLING.init() };
    let mut part = PARTITION.lock();
    part.evictor = Some(evictor);
    part.retrier = Some(retrier);
    drop(part);
    set_limit(DEFAULT_PAGES)
}

impl Entry {
    /// Evicts the entry's folio if it is still a clean, unmapped dropbehind folio of the file.
    fn evict(&self) -> Evict {
        glue::evict_dropbehind(self.pfn, self.mapping, self.index)
    }
}

/// Counts what eviction did with `e`, which left the partition; returns the pages dropped from
/// the page cache.
fn count(e: &Entry, r: Evict) -> u64 {
    let (counter, dropped) = match r {
        Evict::Dropped => (&STATS.evicted, e.pages),
        Evict::Promoted => (&STATS.promoted, 0),
        Evict::Busy => (&STATS.busy, 0),
        Evict::Gone => (&STATS.gone, 0),
    };
    counter.add(e.pages, Relaxed);
    dropped
}

/// Evicts an entry that left the partition; returns the pages dropped from the page cache.
fn evict(e: Entry) -> u64 {
    count(&e, e.evict())
}

/// Evicts an entry that left the partition's ring to make room in it, keeping it in `held` if
/// its folio is busy; returns the pages dropped from the page cache and the pages held.
fn evict_or_hold(e: Entry, held: &mut Held) -> (u64, u64) {
    match e.evict() {
        Evict::Busy if held.put(e) => {
            STATS.held.add(e.pages, Relaxed);
            (0, e.pages)
        }
        r => (count(&e, r), 0),
    }
}

/// Evicts `batch`, entries that left the partition, a run of entries of one file at a time;
/// `res` receives what was done with each.
fn evict_batch(batch: &[Entry], res: &mut [Evict]) {
    let mut folios = [(0usize, 0u64); EVICT_BATCH];
    let mut i = 0;
    while i < batch.len() {
        let mapping = batch[i].mapping;
        let mut n = 0;
        while i + n < batch.len() && batch[i + n].mapping == mapping {
            folios[n] = (batch[i + n].pfn, batch[i + n].index);
            n += 1;
        }
        glue::evict_dropbehind_batch(mapping, &folios[..n], &mut res[i..i + n]);
        i += n;
    }
}

/// Puts `e` into the partition as its newest entry, evicting the oldest ones to make room (the
/// busy ones are held); an entry that does not fit is evicted itself. Returns the pages
/// admitted and the pages dropped from the page cache.
fn put(books: &mut Partition, slots: &mut [Entry], held: &mut Held, e: Entry) -> (u64, u64) {
    let mut dropped = 0;
    let pushed = books.push(slots, e, |old| {
        let (gone, kept) = evict_or_hold(old, held);
        dropped += gone;
        kept
    });
    if pushed {
        (e.pages, dropped)
    } else {
        (0, dropped + evict(e))
    }
}

/// Resizes the partition to `pages` (0 turns GPU read-ahead off), evicting its oldest entries
/// beyond the new bound.
pub(crate) fn set_limit(pages: u64) -> Result {
    if pages > MAX_PAGES {
        return Err(EINVAL);
    }
    let marks = Watermarks::new(pages);
    let mut slots = KVVec::new();
    slots.resize(pages as usize, Entry::default(), GFP_KERNEL)?;
    let mut books = Partition::new(pages);
    let mut part = PARTITION.lock();
    let Part {
        books: old,
        slots: old_slots,
        held,
        ..
    } = &mut *part;
    // The entries held busy, those the evictor is at work on and the reservations of the
    // readers in flight stay counted.
    books.hold(old.held());
    books.keep_reserved(old.reserved());
    while let Some(e) = old.pop(old_slots) {
        put(&mut books, &mut slots, held, e);
    }
    part.books = books;
    part.slots = slots;
    part.marks = marks;
    LIMIT.store(pages, Relaxed);
    drop(part);
    // The entries held busy stay counted against the new limit: try them now, so that a
    // partition made smaller is not left without room until the [`Retrier`]'s next run. A run
    // of the evictor or the retrier at work is waited for: it may hold again what it took.
    // The room the evictor has changes with the limit: a stall ends.
    let settling = SETTLING.lock();
    STATS.evicted_bg.add(retry_held(&settling).0, Relaxed);
    STALLED.store(false, Relaxed);
    drop(settling);
    rearm();
    Ok(())
}

/// Room in the partition for the windows a page-cache leg is about to read ahead ([`reserve`]);
/// what [`admit`] does not take out of it is given back when it is dropped.
pub(crate) struct Reservation {
    pages: u64,
}

impl Reservation {
    /// Takes room for `pages` of what is admitted out of the reservation; returns the pages
    /// it did not cover.
    fn take(&mut self, books: &mut Partition, pages: u64) -> u64 {
        let covered = pages.min(self.pages);
        books.unreserve(covered);
        self.pages -= covered;
        pages - covered
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.pages != 0 {
            PARTITION.lock().books.unreserve(self.pages);
        }
    }
}

/// How long a reader waits between two tries of a reservation that other reservations leave
/// no room for.
const RESERVE_WAIT: Delta = Delta::from_micros(100);

/// Reserves room for `pages` that a page-cache leg into GPU memory may read ahead, evicting the
/// oldest entries to make room (the busy ones are held). Waits while the reservations of other
/// legs leave no room, until they end. If the pages held busy leave no room even without
/// them, tries those once more first, as the [`Evictor`] would (unless it stalled on them):
/// mostly folios just read ahead into another CPU's LRU batch, which draining every CPU's
/// batches frees. Returns `None`, and counts the leg in `ra_legs_no_room`, if they still
/// leave no room, if the partition is off, or if a signal is pending: the leg then reads
/// through the plain page cache.
pub(crate) fn reserve(pages: u64) -> Option<Reservation> {
    let mut retried = false;
    loop {
        let mut part = PARTITION.lock();
        let Part {
            books,
            slots,
            held,
            retrier,
            ..
        } = &mut *part;
        let r = books.reserve(slots, pages, |old| evict_or_hold(old, held).1);
        let retry = retrier_if_held(held, retrier);
        drop(part);
        let held_any = retry.is_some();
        if let Some(retrier) = retry {
            arm(retrier);
        }
        match r {
            Reserve::Done => return Some(Reservation { pages }),
            Reserve::Wait if !kernel::current!().signal_pending() => fsleep(RESERVE_WAIT),
            Reserve::NoRoom if !retried && held_any && !STALLED.load(Relaxed) => {
                retried = true;
                STATS.reserve_retries.add(1, Relaxed);
                // The evictor may have stalled since: what this releases ends that.
                retry_now();
            }
            Reserve::Wait | Reserve::NoRoom => {
                STATS.no_room.add(1, Relaxed);
                return None;
            }
        }
    }
}

/// Admits the dropbehind folios of `win`, read ahead during a page-cache leg of `req` into GPU
/// memory, into the partition, out of the leg's reservation `res`; returns the pages admitted.
/// Pages beyond the reservation evict the oldest entries to make room and are counted in
/// `ra_pages_unreserved`. The leg's stream reads at page `at`: it consumed the pages before,
/// which the [`Evictor`] may then drop past its target ([`Consumed`]).
pub(crate) fn admit(
    req: &Request<'_>,
    info: &FileInfo,
    win: &RaWindow,
    at: u64,
    res: &mut Reservation,
) -> u64 {
    // `ra_collect()` first drains this CPU's LRU batches, where the window's folios wait: a
    // reader on another CPU that evicts to make room would find them busy and have to hold
    // them until the evictor drains every CPU's batches.
    let mut folios = [RaFolio::default(); 16];
    let mut index = win.start;
    let end = win.start.saturating_add(win.nr);
    let (mut admitted, mut evicted, mut beyond) = (0u64, 0u64, 0u64);
    let mut wake = None;
    let stream = req.stream_id();
    let mut noted = false;
    loop {
        let n = req.ra_collect(&mut index, end, &mut folios);
        if n == 0 {
            break;
        }
        let mut part = PARTITION.lock();
        let Part {
            books,
            slots,
            held,
            marks,
            consumed,
            evictor,
            retrier,
        } = &mut *part;
        if !noted {
            consumed.note(stream, at);
            noted = true;
        }
        for f in &folios[..n] {
            let e = Entry {
                pfn: f.pfn,
                mapping: win.mapping,
                index: f.index,
                pages: f.pages,
                stream,
            };
            beyond += res.take(books, e.pages.max(1));
            let (kept, dropped) = put(books, slots, held, e);
            admitted += kept;
            evicted += dropped;
        }
        if wake.is_none() && books.pages() > marks.kick && !EVICTING.load(Relaxed) {
            wake = evictor.clone();
        }
        let retry = retrier_if_held(held, retrier);
        drop(part);
        if let Some(retrier) = retry {
            arm(retrier);
        }
        if n < folios.len() {
            break;
        }
    }
    if let Some(evictor) = wake {
        kick(evictor);
    }
    STATS.admitted.add(admitted, Relaxed);
    if beyond != 0 {
        STATS.unreserved.add(beyond, Relaxed);
    }
    trace::readahead(
        info,
        win,
        u32::try_from(admitted).unwrap_or(u32::MAX),
        u32::try_from(evicted).unwrap_or(u32::MAX),
    );
    admitted
}

/// Looks at the file's pages `from .. end` ahead of a sequential read of `req` into GPU memory
/// that starts at page `first` ([`crate::sched::readahead::bridge`]) and, if one is not in the
/// page cache while the pages from `first` to `from` are, reads `lead` pages ahead from it
/// ([`bridge_lead`]) and admits them into the partition; returns the pages admitted. Once a
/// page to read is found, the `lead` pages are reserved; nothing is read ahead if they cannot
/// be.
pub(crate) fn bridge(
    req: &Request<'_>,
    info: &FileInfo,
    first: u64,
    from: u64,
    end: u64,
    lead: u32,
) -> u64 {
    let Some(gap) = bridge_gap(req, first, from, end) else {
        return 0;
    };
    let Some(mut res) = reserve(u64::from(lead)) else {
        return 0;
    };
    let Some(win) = req.ra_bridge(gap, u64::from(lead)) else {
        return 0;
    };
    STATS.bridged.add(1, Relaxed);
    admit(req, info, &win, first, &mut res)
}

/// The first page a GPU stream through cached pages will miss, if the look-ahead should read
/// from it (see [`crate::sched::readahead::bridge`]): if the pages of the read, `first` on, and
/// those up to `from` are cached and a page of `from .. end` is not, the caller reads a few
/// windows ahead from it, so that the device reads them while the stream still copies the
/// cached pages before them.
///
/// None if read-ahead is off, every page looked at is cached, a page of the read or before
/// `from` is not (a read that misses a page of its own starts read-ahead there itself, which a
/// window read ahead of it would only get in the way of: its marker would land on a page read
/// already), the gap lies past the end of the file, or the task's blkcg is congested.
fn bridge_gap(req: &Request<'_>, first: u64, from: u64, end: u64) -> Option<u64> {
    let f = req.ra_facts();
    if f.ra_pages == 0 || first > from || from >= end {
        return None;
    }
    // The look-ahead first: a stream through cached pages finds no gap there and looks at
    // nothing else.
    let miss = req.next_miss(from, end - from);
    if miss < from || miss >= end {
        return None;
    }
    if first < from && req.next_miss(first, from - first) < from {
        return None;
    }
    if f.size <= 0 || f.congested || miss > (f.size as u64 - 1) >> kernel::page::PAGE_SHIFT {
        return None;
    }
    Some(miss)
}

/// How far ahead of a stream through cached pages a bridged window is read, in pages
/// ([`crate::sched::readahead::bridge_lead`]): a few windows, at most the quarter of the
/// partition of `limit` pages ([`limit`]) left to windows in flight.
pub(crate) fn bridge_lead(limit: u64, ra_pages: u32) -> u32 {
    crate::sched::readahead::bridge_lead(ra_pages, Watermarks::new(limit).lead)
}

/// Writes the partition's lines of `/sys/kernel/spin/stat`.
pub(crate) fn show_stat(f: &mut Formatter<'_>) -> core::fmt::Result {
    let (pages, held, reserved) = {
        let part = PARTITION.lock();
        (part.books.pages(), part.books.held(), part.books.reserved())
    };
    let v = |a: &Atomic<u64>| a.load(Relaxed);
    writeln!(f, "ra_partition_resident {pages}")?;
    writeln!(f, "ra_partition_held {held}")?;
    writeln!(f, "ra_partition_reserved {reserved}")?;
    writeln!(f, "ra_pages_admitted {}", v(&STATS.admitted))?;
    writeln!(f, "ra_pages_evicted {}", v(&STATS.evicted))?;
    writeln!(f, "ra_pages_evicted_background {}", v(&STATS.evicted_bg))?;
    writeln!(f, "ra_evictor_runs {}", v(&STATS.evictor_runs))?;
    writeln!(f, "ra_evictor_stalls {}", v(&STATS.evictor_stalls))?;
    writeln!(f, "ra_pages_promoted {}", v(&STATS.promoted))?;
    writeln!(f, "ra_pages_busy {}", v(&STATS.busy))?;
    writeln!(f, "ra_pages_held {}", v(&STATS.held))?;
    writeln!(f, "ra_pages_gone {}", v(&STATS.gone))?;
    writeln!(f, "ra_windows_bridged {}", v(&STATS.bridged))?;
    writeln!(f, "ra_pages_unreserved {}", v(&STATS.unreserved))?;
    writeln!(f, "ra_legs_no_room {}", v(&STATS.no_room))?;
    writeln!(f, "ra_reserve_retries {}", v(&STATS.reserve_retries))?;
    writeln!(f, "ra_pages_consumed_first {}", v(&STATS.consumed_first))
}

/// The limit, for `/sys/kernel/spin/ra_partition_pages`; 0 if GPU read-ahead is off. The router
/// reads it once per request into GPU memory.
pub(crate) fn limit() -> u64 {
    LIMIT.load(Relaxed)
}
