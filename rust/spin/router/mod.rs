// SPDX-License-Identifier: GPL-2.0

//! The router: buffered reads into GPU memory, split per request between page-cache copies and
//! P2P DMA (SPIN, USENIX ATC'17, §4.2–4.3).
//!
//! `spin_read_iter()` (include/linux/spin.h), called by the VFS read entry points, hands every read
//! of a process that mapped p2pdma memory to `spin_route_read_iter()` (C), which passes on those
//! whose user memory is all host memory (`spin_routable()`) and hands the others to
//! [`spin_router_read_iter`]. The router walks the destination's user segments; a part that lies in
//! GPU memory (a user mapping of a spin dma-buf, or any other user mapping of p2pdma pages, such as
//! upstream's `p2pmem/allocate`) is routed, everything else is read as usual. A routed part is
//! clipped to the file size, planned in chunks of at most [`CHUNK`] bytes ([`crate::sched::plan`]:
//! unaligned head and tail through the page cache, the pages in between scheduled on their
//! residency by [`crate::sched::overlap`]) and executed, each leg a fresh `->read_iter()` call:
//! without `IOCB_DIRECT` for page-cache legs, with it for P2P legs, whose bios then carry the GPU
//! pages (`FOLL_PCI_P2PDMA` pinning in the block layer). The P2P legs are started asynchronously
//! first and stay in flight while the CPU copies the page-cache legs.
//!
//! Correctness does not depend on the residency snapshot: a page-cache leg over pages evicted
//! meanwhile reads them in, and a direct read flushes dirty pages of its range first
//! (`kiocb_write_and_wait()` / iomap), so a P2P leg never returns data older than the page
//! cache's. Dirty and writeback pages count as cached and are therefore, in `auto` mode, copied
//! out of the page cache; in `p2p` mode they are written back before the device reads them.
//!
//! Locking: no lock is held across legs; each leg takes the filesystem's own locks in its
//! `->read_iter()` (the XFS IOLOCK in particular), so the router cannot recurse on them. The
//! destination's VMA is looked at under the per-VMA read lock (or `mmap_lock` for read) and
//! released before any I/O. See Documentation/spin/router.rst.

mod glue;
mod readahead;
mod state;
mod sysfs;
mod trace;
mod verdict;
mod writer;

use crate::sched::{
    self,
    plan::{self, Leg},
    readahead::Stream,
    Model, Path, Picos, RunsBuilder, Segment, Slot,
};
use glue::{Fallback, FileInfo, RaWindow, Request, Routable, RouteKey};
use kernel::{
    bindings, device,
    mm::{
        virt::{flags as vm_flags, VmaRef},
        MmWithUser,
    },
    new_mutex,
    page::PAGE_SIZE,
    pci::{
        self,
        p2pdma::{ProviderEvents, ProviderNotifier},
    },
    prelude::*,
    sync::{aref::ARef, Mutex},
};
use state::{Account, Mode};

/// Largest part of a request planned at once: 8 MiB, 2048 pages of 4 KiB. Bounds the
/// per-request workspace (about 64 KiB for an 8 MiB chunk of alternating pages) and keeps
/// every scheduler input far below its limits; the P2P transfers stay far above `S_cutoff`.
const CHUNK: usize = 8 << 20;

pub(crate) use sysfs::Sysfs;

/// Sets up the router's state and `/sys/kernel/spin`.
pub(crate) fn init() -> Result<Sysfs> {
    state::init();
    verdict::init();
    readahead::init()?;
    sysfs::init()
}

/// The PCI devices with published p2pdma memory, each holding a reference on the routing key:
/// while one is bound, user mappings of p2pdma memory (spin's buffers, upstream's
/// `p2pmem/allocate`) can exist, and the VFS hands requests to the router.
#[pin_data]
struct Providers {
    #[pin]
    bound: Mutex<KVec<(ARef<pci::Device>, RouteKey)>>,
}

impl ProviderEvents for Providers {
    fn bound(&self, pdev: &pci::Device<device::Bound>) {
        if !pdev.has_p2pmem() {
            return;
        }
        // Taken outside the lock: turning the key on patches code and may sleep.
        let key = RouteKey::get();
        let mut bound = self.bound.lock();
        if bound.iter().any(|(p, _)| core::ptr::eq(&**p, &**pdev)) {
            return;
        }
        let pdev: &pci::Device = pdev;
        state::new_epoch();
        if bound.push((pdev.into(), key), GFP_KERNEL).is_err() {
            pr_warn!(
                "{}: no room to route requests into its memory\n",
                pdev.as_ref().name()
            );
        }
    }

    fn unbinding(&self, pdev: &pci::Device<device::Bound>) {
        // Dropping the key may sleep (code patching), which the mutex allows; nothing takes
        // this lock under the jump label lock.
        self.bound
            .lock()
            .retain(|(p, _)| !core::ptr::eq(&**p, &**pdev));
        state::new_epoch();
    }
}

/// The router: follows the p2pdma providers for as long as it lives.
pub(crate) struct Router {
    _providers: Pin<KBox<ProviderNotifier<Providers>>>,
}

impl Router {
    /// Turns routing on while a p2pdma provider is bound, now and as drivers bind.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            _providers: KBox::pin_init(
                ProviderNotifier::new(try_pin_init!(Providers {
                    bound <- new_mutex!(KVec::new()),
                })),
                GFP_KERNEL,
            )?,
        })
    }
}

/// Where a user address points.
enum Dest {
    /// Into a spin GPU buffer of provider `pdev`, up to `end`.
    Gpu { end: usize, pdev: ARef<pci::Device> },
    /// Elsewhere, up to `end`.
    Host { end: usize },
}

/// Classifies the user address `addr` of `mm`: GPU memory is a mapping of a spin dma-buf or any
/// other user mapping of p2pdma pages (upstream's `p2pmem/allocate`, ...).
///
/// Spin's own mappings are recognised by their VMA under the per-VMA lock. Others are
/// recognised by the page mapped at `addr`, a page table walk that needs `mmap_lock`: only
/// `VM_MIXEDMAP` VMAs (whose pages were inserted with `vm_insert_page()`, as
/// `p2pmem/allocate`'s are) take that path.
fn classify(mm: &MmWithUser, addr: usize) -> Dest {
    let spin = |vma: &VmaRef| {
        crate::exporter::mapping_provider(vma).map(|pdev| Dest::Gpu {
            end: vma.end(),
            pdev,
        })
    };
    if let Some(vma) = mm.lock_vma_under_rcu(addr) {
        if let Some(dest) = spin(&vma) {
            return dest;
        }
        if vma.flags() & vm_flags::MIXEDMAP == 0 {
            return Dest::Host { end: vma.end() };
        }
        // The per-VMA lock is dropped here, before `mmap_lock` is taken.
    }
    let guard = mm.mmap_read_lock();
    match guard.vma_lookup(addr) {
        Some(vma) => spin(vma)
            .or_else(|| {
                glue::p2p_provider_at(&guard, addr).map(|pdev| Dest::Gpu {
                    end: vma.end(),
                    pdev,
                })
            })
            .unwrap_or(Dest::Host { end: vma.end() }),
        None => Dest::Host { end: usize::MAX },
    }
}

/// Whether any user segment of the destination starts in GPU memory; if so, the first segment's
/// address and classification, which [`route`] uses again instead of looking a second time.
fn any_gpu(req: &Request<'_>, mm: &MmWithUser) -> Option<(usize, Dest)> {
    let mut first = None;
    let mut gpu = false;
    for (addr, _) in req.segments() {
        let dest = classify(mm, addr);
        gpu = matches!(dest, Dest::Gpu { .. });
        if first.is_none() {
            first = Some((addr, dest));
        }
        if gpu {
            break;
        }
    }
    if gpu {
        first
    } else {
        None
    }
}

/// The VFS entry of the router, for the reads `spin_route_read_iter()` (C) let through with
/// `verdict`, what `spin_routable()` said of them; see the module documentation.
///
/// # Safety
///
/// `iocb` and `iter` must be the arguments of a `->read_iter()` call the VFS is making:
/// valid, with `iocb->ki_filp` open for reading and having `->read_iter`.
#[no_mangle]
unsafe extern "C" fn spin_router_read_iter(
    iocb: *mut bindings::kiocb,
    iter: *mut bindings::iov_iter,
    verdict: bindings::spin_route_verdict,
) -> isize {
    // SAFETY: The function safety requirements.
    let Some(mut req) = (unsafe { Request::from_raw(iocb, iter, false) }) else {
        return EINVAL.to_errno() as isize;
    };
    enter(&mut req, Routable::from_raw(verdict))
}

/// The VFS entry of the writer (see [`writer`]): like [`spin_router_read_iter`], for writes
/// from GPU memory.
///
/// # Safety
///
/// `iocb` and `iter` must be the arguments of a `->write_iter()` call the VFS is making inside
/// `file_start_write()`: valid, with `iocb->ki_filp` open for writing and having `->write_iter`.
#[no_mangle]
unsafe extern "C" fn spin_router_write_iter(
    iocb: *mut bindings::kiocb,
    iter: *mut bindings::iov_iter,
    verdict: bindings::spin_route_verdict,
) -> isize {
    // SAFETY: The function safety requirements.
    let Some(mut req) = (unsafe { Request::from_raw(iocb, iter, true) }) else {
        return EINVAL.to_errno() as isize;
    };
    enter(&mut req, Routable::from_raw(verdict))
}

/// Routes a request that touches GPU memory; passes every other one on unchanged.
fn enter(req: &mut Request<'_>, routable: Routable) -> isize {
    if routable == Routable::No || state::mode() == Mode::Off {
        return req.passthrough();
    }
    let current = kernel::current!();
    let Some(mm) = current.mm() else {
        return req.passthrough();
    };
    let Some(first) = any_gpu(req, mm) else {
        return req.passthrough();
    };
    match routable {
        // The router's I/O blocks: io_uring issues the request again from a worker.
        Routable::Later => return EAGAIN.to_errno() as isize,
        // Read-ahead started now would bring the data into the page cache, not by P2P.
        Routable::Cached => return req.read_cached(),
        _ => {}
    }
    if req.is_write() && !single_gpu_piece(req, mm) {
        // A write must land whole: only a source that is one GPU piece goes as one direct
        // write (see `writer`); every other goes on as it is.
        let reason = if req.append() {
            Fallback::Append
        } else {
            Fallback::Split
        };
        writer::fallback(req, reason);
        return req.passthrough();
    }
    route(req, mm, first)
}

/// A read into GPU memory that is the whole request, from a file that no GPU can read by P2P
/// (no block device, no direct I/O, a queue that refuses P2PDMA pages: an NVMe over Fabrics
/// namespace, a virtio disk): its data takes the page cache whatever the router does, so it is
/// passed on to the filesystem as it came ([`pass_on`]). What [`route_gpu`] learnt of it.
struct Refused {
    reason: Fallback,
    info: FileInfo,
    account: Account,
    /// The request's length, clipped to the file size.
    len: usize,
    mode: Mode,
}

/// What [`route_gpu`] did with a piece.
enum Piece {
    /// Read this many bytes of it.
    Read(usize),
    /// Nothing: the request is to be passed on whole.
    PassOn(Refused),
}

/// Passes a [`Refused`] request on to the filesystem's `->read_iter()` as it came, as mode
/// `off` does, with none of the router's legs around it; counts and traces it as [`route_gpu`]
/// counts and traces a fallback read: the request with its reason, its bytes as one page-cache
/// segment.
fn pass_on(req: &mut Request<'_>, p: Refused) -> isize {
    let pos = req.pos();
    p.account.request(p.reason);
    let n = req.passthrough();
    let bytes = usize::try_from(n).unwrap_or(0);
    if bytes != 0 {
        p.account.segment(false, bytes);
        trace::segment(&p.info, pos, bytes, false);
    }
    // The file may have grown since its size was read: the request's length is at least
    // what it read.
    trace::route(
        &p.info,
        false,
        pos,
        p.len.max(bytes),
        p.mode.name(),
        p.reason,
        bytes as u64,
        0,
        u32::from(bytes != 0),
    );
    n
}

/// Whether the request's user memory is one segment inside one GPU mapping.
fn single_gpu_piece(req: &Request<'_>, mm: &MmWithUser) -> bool {
    let mut segs = req.segments();
    match (segs.next(), segs.next()) {
        (Some((addr, len)), None) => {
            matches!(classify(mm, addr), Dest::Gpu { end, .. } if end.saturating_sub(addr) >= len)
        }
        _ => false,
    }
}

/// Transfers the user memory piece by piece: GPU pieces routed, host pieces read or written as
/// usual; a read that [`route_gpu`] finds [`Refused`] is passed on whole ([`pass_on`]).
fn route(req: &mut Request<'_>, mm: &MmWithUser, first: (usize, Dest)) -> isize {
    let mut first = Some(first);
    let mut pass = None;
    let mut pos = req.pos();
    let mut done: usize = 0;
    let mut error = None;
    'segments: for (addr, len) in req.segments() {
        let mut off = 0;
        while off < len {
            let a = addr + off;
            let dest = match first.take() {
                Some((at, dest)) if at == a => dest,
                _ => classify(mm, a),
            };
            let (end, gpu) = match dest {
                Dest::Gpu { end, pdev } => (end, Some(pdev)),
                Dest::Host { end } => (end, None),
            };
            let piece = (len - off).min(end.saturating_sub(a)).max(1);
            let r = match (gpu, req.is_write()) {
                (Some(pdev), false) => {
                    // The first piece, all of the first segment: maybe the whole request.
                    let whole = done == 0 && off == 0 && piece == len;
                    match route_gpu(req, &pdev, pos, a, piece, whole) {
                        Ok(Piece::Read(n)) => Ok((n, pos + n as i64)),
                        Ok(Piece::PassOn(p)) => {
                            pass = Some(p);
                            break 'segments;
                        }
                        Err(e) => Err(e),
                    }
                }
                (Some(pdev), true) => writer::route(req, &pdev, pos, a, piece),
                (None, false) => req
                    .sub_read(pos, a, piece, false)
                    .map(|n| (n, pos + n as i64)),
                (None, true) => req.sub_write(pos, a, piece, false),
            };
            match r {
                Ok((n, end)) => {
                    done += n;
                    pos = end;
                    off += n;
                    if n < piece {
                        break 'segments;
                    }
                }
                Err(e) => {
                    error = Some(e);
                    break 'segments;
                }
            }
        }
    }
    if let Some(p) = pass {
        return pass_on(req, p);
    }
    match (done, error) {
        (0, Some(e)) => e.to_errno() as isize,
        _ => {
            req.complete(pos, done);
            done as isize
        }
    }
}

/// Per-request context of a routed GPU piece.
struct Ctx<'r, 'a> {
    req: &'r Request<'a>,
    /// The disk's parameters; [`sched::Params::serial`] with synchronous legs, whose queue
    /// overlaps nothing.
    params: sched::Params,
    /// Whether P2P legs are synchronous: on a filesystem whose buffered reads exclude buffered
    /// writers (XFS), they are (under its lock for the whole I/O) unless `atomic_reads` is off,
    /// so that a page written during the read comes back whole, as without spin. Taken once
    /// per request.
    sync: bool,
    mode: Mode,
    info: FileInfo,
    account: Account,
    /// Page-cache legs are read uncached, their read-ahead kept in the GPU read-ahead
    /// partition (`auto` mode, on a filesystem that supports uncached reads).
    ra: bool,
    /// The file's read-ahead state at the request's start, for [`Ctx::prefetch`];
    /// [`Stream::OFF`] unless GPU read-ahead is on for the request.
    stream: Stream,
    /// The GPU read-ahead partition's limit, read once per request; 0 unless GPU read-ahead
    /// is on for the request.
    limit: u64,
    /// The request continues a stream that the page cache reads ahead for
    /// ([`sched::readahead::streaming`]), with GPU read-ahead on, and this is the call's first
    /// piece: a chunk is read through the page cache with read-ahead where that beats its
    /// schedule ([`plan_chunk`]).
    ahead: bool,
    bytes_pc: u64,
    bytes_p2p: u64,
    segs: u32,
}

impl Ctx<'_, '_> {
    /// Counts and traces a leg of `n` bytes at `pos`.
    fn done(&mut self, pos: i64, n: usize, p2p: bool) {
        if n == 0 {
            return;
        }
        self.account.segment(p2p, n);
        trace::segment(&self.info, pos, n, p2p);
        if p2p {
            self.bytes_p2p += n as u64;
        } else {
            self.bytes_pc += n as u64;
        }
        self.segs += 1;
    }

    /// Reads a leg through the page cache; with [`Ctx::ra`], uncached, admitting what
    /// read-ahead brought in meanwhile into the GPU read-ahead partition. Returns the bytes read
    /// and the window the leg read ahead, if any.
    ///
    /// With `defer` (sequential legs, whose pages read-ahead windows cover) the dropbehind
    /// folios the leg consumes are left to the partition, which evicts them in the background
    /// ([`readahead::admit`]). If the leg moved the window twice (a synchronous window that an
    /// asynchronous one replaced within the leg), the pages before the new one that no earlier
    /// window covers are admitted here. Other legs drop the dropbehind folios they consume, as
    /// the pages of a random read are in no window.
    ///
    /// With [`Ctx::ra`], what is cached from the leg's start is first copied with no I/O
    /// (`IOCB_NOIO`, which stops at a page to read or at a read-ahead marker; the dropbehind
    /// folios it consumes stay for the partition, which holds them already), so that it has
    /// nothing to reserve; the rest reserves room in the partition for what it may read ahead
    /// ([`readahead::reserve`]), and reads through the plain page cache if it cannot have it.
    fn copy_ra(
        &mut self,
        pos: i64,
        addr: usize,
        len: usize,
        defer: bool,
    ) -> Result<(usize, Option<RaWindow>)> {
        if !self.ra {
            return self.copy_plain(pos, addr, len).map(|n| (n, None));
        }
        let n = self.req.sub_read_noio(pos, addr, len, true)?;
        self.done(pos, n, false);
        if n == len {
            return Ok((n, None));
        }
        match self.read_ra(pos + n as i64, addr + n, len - n, defer) {
            Ok((m, win)) => Ok((n + m, win)),
            Err(_) if n > 0 => Ok((n, None)),
            Err(e) => Err(e),
        }
    }

    /// Reads a leg through the page cache, neither uncached nor with GPU read-ahead.
    fn copy_plain(&mut self, pos: i64, addr: usize, len: usize) -> Result<usize> {
        let n = self.req.sub_read(pos, addr, len, true)?;
        self.done(pos, n, false);
        Ok(n)
    }

    /// The part of [`Ctx::copy_ra`] that reads: reserves room for the leg's windows, reads it
    /// uncached and admits what it read ahead; without room, through the plain page cache.
    fn read_ra(
        &mut self,
        pos: i64,
        addr: usize,
        len: usize,
        defer: bool,
    ) -> Result<(usize, Option<RaWindow>)> {
        match self.reserved_read(pos, addr, len, defer) {
            Some(r) => r,
            None => self.copy_plain(pos, addr, len).map(|n| (n, None)),
        }
    }

    /// [`Ctx::read_ra`] if the partition has room for the leg's windows; `None`, having read
    /// nothing, if it has not.
    ///
    /// A leg that ends inside a window it moved to leaves the rest of that window in the page
    /// cache, not consumed: when the leg met that window's marker, read-ahead read the next
    /// one, which is the window `win` the leg reports. Those pages, from the leg's end to
    /// `win`, are admitted too, unless the window before the leg covers them. A leg with
    /// `defer` admits everything from its start to `win` in the same way.
    fn reserved_read(
        &mut self,
        pos: i64,
        addr: usize,
        len: usize,
        defer: bool,
    ) -> Option<Result<(usize, Option<RaWindow>)>> {
        let first = pos as u64 / PAGE_SIZE as u64;
        let last = (pos as u64 + len.max(1) as u64 - 1) / PAGE_SIZE as u64;
        // Read again, not taken from the request's start: a bridge or an earlier leg of the
        // request may have moved the window since, and the reservation must cover the
        // window's size as the leg will find it.
        let (stream, _) = self.req.stream();
        let io_pages = self.req.io_pages();
        let pages = sched::readahead::leg_reserve(&stream, io_pages, last - first + 1);
        let mut res = readahead::reserve(pages)?;
        let (r, win) = self.req.sub_read_ra(pos, addr, len, defer);
        let mut pages = 0;
        if win.moved {
            pages += readahead::admit(self.req, &self.info, &win, first, &mut res);
        }
        // With `defer`, the pages from the leg up to the new window (admitted above) were
        // admitted with the windows before it, unless they lie outside those; without, the
        // leg dropped what it consumed, and only what follows it up to the new window is left.
        let from = if defer { first } else { last + 1 };
        if win.moved && from < win.start {
            let (prev, prev_nr) = (win.prev_start, win.prev_nr);
            if !sched::readahead::in_window(from, win.start, prev, prev_nr) {
                let before = RaWindow {
                    start: from,
                    nr: win.start - from,
                    ..win
                };
                pages += readahead::admit(self.req, &self.info, &before, first, &mut res);
            }
        }
        drop(res);
        if pages != 0 {
            self.account.ra_pages(pages);
        }
        Some(r.map(|n| {
            self.done(pos, n, false);
            (n, win.moved.then_some(win))
        }))
    }

    /// Reads a leg through the page cache (see [`Ctx::copy_ra`]).
    fn copy(&mut self, pos: i64, addr: usize, len: usize) -> Result<usize> {
        self.copy_ra(pos, addr, len, false).map(|(n, _)| n)
    }

    /// Accounts for a finished P2P leg; one that failed is counted and redone through the page
    /// cache.
    fn p2p_done(&mut self, r: Result<usize>, pos: i64, addr: usize, len: usize) -> Result<usize> {
        match r {
            Ok(n) => {
                self.done(pos, n, true);
                Ok(n)
            }
            Err(e) if e == EINTR || e == ERESTARTSYS => Err(e),
            Err(_) => {
                self.account.io_error();
                self.copy(pos, addr, len)
            }
        }
    }

    /// Serves a small sequential read through the page cache with read-ahead (SPIN's
    /// P-readahead). It was a miss if read-ahead started at its first page (a sequential miss
    /// always starts a synchronous read-ahead there; a hit at most moves the window beyond
    /// it), which costs no residency lookup.
    ///
    /// First, a stream whose window stayed behind in cached pages looks ahead for the next
    /// page it would miss and reads a window ahead from there ([`readahead::bridge`]), so that
    /// it never waits for a synchronous read-ahead where a cached run ends. A read that misses
    /// a page of its own leaves read-ahead to the page cache.
    ///
    /// A read inside the page where the stream's previous read ended
    /// ([`sched::readahead::same_page`]) is first copied with no I/O and none of that: the page
    /// is cached, and neither read-ahead nor a bridge has anything to do there. If that copy
    /// comes back short (the page was evicted meanwhile, or another reader moved the stream),
    /// the rest takes the full path.
    ///
    /// The stream is the file's read-ahead state at the request's start ([`Ctx::stream`]).
    fn prefetch(&mut self, pos: i64, addr: usize, len: usize) -> Result<usize> {
        let stream = &self.stream;
        let page = PAGE_SIZE as u32;
        let mut n = 0;
        if sched::readahead::same_page(stream.prev_pos, pos as u64, len as u64, page) {
            n = self.req.sub_read_noio(pos, addr, len, true)?;
            self.done(pos, n, false);
            if n == len {
                self.account.ra_request(true);
                return Ok(n);
            }
        }
        match self.prefetch_ra(pos + n as i64, addr + n, len - n) {
            Ok(m) => Ok(n + m),
            Err(_) if n > 0 => Ok(n),
            Err(e) => Err(e),
        }
    }

    /// The full path of [`Ctx::prefetch`]: a bridge if the stream needs one, then the leg with
    /// read-ahead.
    fn prefetch_ra(&mut self, pos: i64, addr: usize, len: usize) -> Result<usize> {
        let first = pos as u64 / PAGE_SIZE as u64;
        let page = PAGE_SIZE as u32;
        let stream = &self.stream;
        let lead = readahead::bridge_lead(self.limit, stream.ra_pages);
        let look = sched::readahead::bridge(stream, pos as u64, len as u64, lead, page);
        if let Some((from, end)) = look {
            let pages = readahead::bridge(self.req, &self.info, first, from, end, lead);
            if pages != 0 {
                self.account.ra_pages(pages);
            }
        }
        let r = self.copy_ra(pos, addr, len, true);
        let miss = matches!(&r, Ok((_, Some(win))) if win.start <= first);
        self.account.ra_request(!miss);
        r.map(|(n, _)| n)
    }

    /// Whether a chunk of `pages` pages, `cached` of them resident, whose schedule takes
    /// `planned` under `model`, is read faster through the page cache with read-ahead
    /// ([`sched::readahead::ahead_wins`]), and fits the partition's bound
    /// ([`sched::readahead::leg_fits`]). Only for a request that continues a stream
    /// ([`Ctx::ahead`]).
    fn ahead_wins(&self, model: &Model, pages: u32, cached: u64, planned: Picos) -> bool {
        let pages = u64::from(pages);
        self.ahead
            && sched::readahead::ahead_wins(model, pages, cached, planned)
            && sched::readahead::leg_fits(&self.stream, self.req.io_pages(), pages, self.limit)
    }

    /// Schedules a read that may go by P2P. In `auto` mode one below
    /// [`sched::Params::copy_first_max`] (`S_cutoff`, or what is copied in an eighth of
    /// `C_p2p`) first copies what is cached from its start, with no I/O and no plan: a request
    /// wholly cached is then done by one copy, as in `pagecache` mode, without a residency
    /// lookup; a partly cached one loses at most the overlap of that copy with its P2P legs.
    /// The rest is planned on its residency.
    fn cached_first(&mut self, pos: i64, addr: usize, len: usize) -> Result<usize> {
        let mut n = 0;
        if self.mode == Mode::Auto && (len as u64) < self.params.copy_first_max() {
            n = self.req.sub_read_noio(pos, addr, len, self.ra)?;
            self.done(pos, n, false);
            if n == len {
                self.account.cached();
                return Ok(n);
            }
        }
        let at = pos + n as i64;
        match route_chunks(self, at, addr + n, len - n) {
            Ok(m) => Ok(n + m),
            Err(_) if n > 0 => Ok(n),
            Err(e) => Err(e),
        }
    }
}

/// Routes the read of `len` bytes at `pos` into GPU memory at `addr` of provider `pdev`. With
/// `whole` the piece is all of the request's first segment: if it is the only segment and the
/// file's verdict refuses P2P for every GPU, nothing is read here, and the request is to be
/// passed on ([`Piece::PassOn`]).
fn route_gpu(
    req: &Request<'_>,
    pdev: &pci::Device,
    pos: i64,
    addr: usize,
    len: usize,
    whole: bool,
) -> Result<Piece> {
    let mode = state::routing_mode();
    let size = req.file_size();
    if pos >= size {
        return Ok(Piece::Read(0));
    }
    let len = len.min(usize::try_from(size - pos).unwrap_or(usize::MAX));
    let Ok(verdict::Verdict {
        mut reason,
        mut info,
        params,
        account,
        refused,
    }) = verdict::get(req, pdev)
    else {
        return req.sub_read(pos, addr, len, true).map(Piece::Read);
    };
    let refuses = reason != Fallback::None;
    if mode == Mode::PageCache {
        reason = Fallback::Mode;
    }
    if refuses && whole && req.segments().nth(1).is_none() {
        return Ok(Piece::PassOn(Refused {
            reason,
            info,
            account,
            len,
            mode,
        }));
    }
    // GPU read-ahead is decided first: a small sequential read goes through the page cache
    // whatever the P2P path, so it does not pay for the path and alignment checks.
    // The partition's limit is read once per request (an atomic read is a call here), and
    // only by a request that may use it; 0 turns GPU read-ahead off.
    let limit = if reason == Fallback::None && mode == Mode::Auto {
        readahead::limit()
    } else {
        0
    };
    let (stream, ra) = if limit != 0 {
        req.stream()
    } else {
        (Stream::OFF, false)
    };
    let page = PAGE_SIZE as u32;
    let prefetch = ra && sched::readahead::prefetch(&stream, pos as u64, len as u64, page);
    if reason == Fallback::None && !prefetch {
        if let Some(member) = refused {
            reason = Fallback::Distance;
            info.member = member;
        }
    }
    if reason == Fallback::None && !prefetch {
        // The P2P legs start at aligned file offsets; their GPU addresses move in lockstep.
        let align = u64::from(info.offset_align);
        let mem_align = u64::from(info.mem_align.max(1));
        let gpu = plan::align_up(pos as u64, align)
            .map(|first| (addr as u64).wrapping_add(first - pos as u64));
        if mem_align > align || !gpu.is_some_and(|gpu| plan::is_aligned(gpu, mem_align)) {
            reason = Fallback::Misaligned;
        }
    }
    account.request(reason);
    let sync = info.reads_exclude_writes && state::atomic_reads();
    // Only the first piece of a call: read-ahead cannot be ahead of a later iovec of the same
    // call, which follows the piece before it at once.
    let ahead = ra
        && reason == Fallback::None
        && pos == req.pos()
        && sched::readahead::streaming(&stream, pos as u64, page);
    let mut ctx = Ctx {
        req,
        params: if sync { params.serial() } else { params },
        sync,
        mode,
        info,
        account,
        ra: ra && reason == Fallback::None,
        stream,
        limit,
        ahead,
        bytes_pc: 0,
        bytes_p2p: 0,
        segs: 0,
    };
    let result = if reason != Fallback::None {
        ctx.copy(pos, addr, len)
    } else if prefetch {
        ctx.prefetch(pos, addr, len)
    } else {
        ctx.cached_first(pos, addr, len)
    };
    if let Ok(n) = result {
        // P2P legs bypass the page cache's read-ahead state; keep the stream visible.
        req.set_prev_pos(pos + n as i64);
    }
    trace::route(
        &ctx.info,
        false,
        pos,
        len,
        mode.name(),
        reason,
        ctx.bytes_pc,
        ctx.bytes_p2p,
        ctx.segs,
    );
    result.map(Piece::Read)
}

/// Length of the chunk of a piece of `len` bytes at `pos` that starts at `at`: up to the
/// [`CHUNK`] boundary after `at` (chunks after the first start on a page boundary) or the
/// piece's end.
fn chunk_len(pos: i64, len: usize, at: i64) -> usize {
    // `pos + len` is at most the file size, so no offset here exceeds `i64::MAX`; the chunk end
    // is computed in `u64`, where `at + CHUNK` cannot overflow.
    let end = (at as u64 + CHUNK as u64) & !(PAGE_SIZE as u64 - 1);
    let left = len - (at - pos) as usize;
    left.min((end - at as u64) as usize)
}

/// Plans and executes a routed piece chunk by chunk; returns the bytes read.
///
/// A piece of more than one chunk whose P2P legs are asynchronous is pipelined
/// ([`route_pipelined`]). A chunk that fails after earlier ones were read ends the piece with
/// what they read, as the page cache's own read does.
fn route_chunks(ctx: &mut Ctx<'_, '_>, pos: i64, addr: usize, len: usize) -> Result<usize> {
    if chunk_len(pos, len, pos) < len && !ctx.sync && state::pipeline() {
        return route_pipelined(ctx, pos, addr, len);
    }
    let mut done = 0;
    while done < len {
        let at = pos + done as i64;
        let clen = chunk_len(pos, len, at);
        let n = match route_chunk(ctx, at, addr + done, clen) {
            Ok(n) => n,
            Err(_) if done > 0 => break,
            Err(e) => return Err(e),
        };
        done += n;
        if n < clen {
            break;
        }
    }
    Ok(done)
}

/// How a chunk is read, as [`plan_chunk`] decided it.
enum Plan {
    /// All of it by one page-cache copy.
    Copy,
    /// All of it through the page cache with read-ahead ([`read_ahead`]).
    Ahead,
    /// By the first `n` legs of the planner's output.
    Legs(usize),
}

/// Plans one chunk on its residency and executes the legs; returns the bytes read.
///
/// Planning does no I/O: if it fails (an allocation, a geometry the planner does not take,
/// such as a direct-I/O alignment above the page size), the chunk is copied through the page
/// cache instead and the failure counted (`fallback_internal`), so an internal limit never
/// fails a read that the plain path would serve.
fn route_chunk(ctx: &mut Ctx<'_, '_>, pos: i64, addr: usize, len: usize) -> Result<usize> {
    let mut few = [Leg::EMPTY; 3];
    let mut many: KVVec<Leg> = KVVec::new();
    let plan = plan_chunk(ctx, pos, len, &mut few, &mut many);
    let n = match plan {
        Ok(Plan::Copy) => return ctx.copy(pos, addr, len),
        Ok(Plan::Ahead) => return read_ahead(ctx, pos, addr, len),
        Ok(Plan::Legs(n)) => n,
        Err(_) => {
            ctx.account.internal();
            return ctx.copy(pos, addr, len);
        }
    };
    let legs: &[Leg] = if many.is_empty() {
        &few[..n]
    } else {
        &many[..n]
    };
    let p2p_legs = legs.iter().filter(|l| l.path == Path::P2p).count();
    let Ok(mut outcome) = KVVec::from_elem(None, legs.len(), GFP_KERNEL) else {
        ctx.account.internal();
        return ctx.copy(pos, addr, len);
    };
    if p2p_legs == 0 {
        return execute(ctx, pos, addr, legs, &mut outcome, None);
    }
    let sync = ctx.sync;
    let req = ctx.req;
    let run = |batch: &mut glue::AioBatch<'_, '_>| {
        execute(ctx, pos, addr, legs, &mut outcome, Some(batch))
    };
    match glue::with_aio(req, p2p_legs, sync, run) {
        Ok(r) => r,
        Err(_) => {
            ctx.account.internal();
            ctx.copy(pos, addr, len)
        }
    }
}

/// A chunk of a pipelined piece, planned, its P2P legs (if any) in flight in its pipe slot.
struct Staged {
    pos: i64,
    addr: usize,
    len: usize,
    /// The legs; empty if the chunk is read by one page-cache copy.
    legs: KVVec<Leg>,
    /// The chunk is read through the page cache with read-ahead ([`Plan::Ahead`]); no legs.
    ahead: bool,
    outcome: KVVec<Option<Result<usize>>>,
}

/// Reads a piece of more than one chunk with asynchronous P2P legs, its chunks pipelined: the
/// P2P legs of the next chunk are planned and started before the CPU copies the current one,
/// so that the device never idles between chunks (in particular, the I/O of an uncached chunk
/// overlaps the copies of a cached one before it). At most two chunks are in flight; a
/// chunk's batch is freed once its legs are waited for. Returns the bytes read up to the
/// first leg that came back short or failed; the next chunk's legs, if started, are waited for
/// and their bytes (beyond what the read returns) left in the destination.
fn route_pipelined(ctx: &mut Ctx<'_, '_>, pos: i64, addr: usize, len: usize) -> Result<usize> {
    let req = ctx.req;
    glue::with_aio_pipe(req, |pipe| {
        let mut done = 0;
        let mut slot = 0;
        let first = (pos, addr, chunk_len(pos, len, pos));
        let mut next = Some(stage(ctx, pipe, slot, first, false));
        while let Some(mut cur) = next.take() {
            let end = cur.pos + cur.len as i64;
            if ((end - pos) as usize) < len {
                let chunk = (end, addr + (end - pos) as usize, chunk_len(pos, len, end));
                next = Some(stage(ctx, pipe, slot ^ 1, chunk, true));
            }
            let r = finish(ctx, pipe, slot, &mut cur);
            let n = match r {
                Ok(n) => n,
                Err(_) if done > 0 => break,
                Err(e) => return Err(e),
            };
            done += n;
            if n < cur.len {
                break;
            }
            slot ^= 1;
        }
        Ok(done)
    })
}

/// Plans the chunk of `len` bytes at `pos` of a pipelined piece and starts its P2P legs in
/// pipe slot `slot`; `ahead` if the chunk before it is still to be read. A chunk whose
/// planning, workspace or batch fails is read by one page-cache copy instead (counted, see
/// [`route_chunk`]), after any of its legs already started are waited for.
fn stage(
    ctx: &mut Ctx<'_, '_>,
    pipe: &mut glue::AioPipe<'_, '_>,
    slot: usize,
    (pos, addr, len): (i64, usize, usize),
    ahead: bool,
) -> Staged {
    let mut c = Staged {
        pos,
        addr,
        len,
        legs: KVVec::new(),
        ahead: false,
        outcome: KVVec::new(),
    };
    match stage_legs(ctx, pipe, slot, &mut c, ahead) {
        Ok(()) => {}
        Err(_) => {
            ctx.account.internal();
            pipe.close(slot);
            c.legs.clear();
        }
    }
    c
}

/// The work of [`stage`]; leaves `c.legs` empty for a chunk read by one copy. With `ahead`
/// (the chunk before is still to be read), started P2P legs count in `pipelined_chunks`.
fn stage_legs(
    ctx: &mut Ctx<'_, '_>,
    pipe: &mut glue::AioPipe<'_, '_>,
    slot: usize,
    c: &mut Staged,
    ahead: bool,
) -> Result {
    let mut few = [Leg::EMPTY; 3];
    let n = match plan_chunk(ctx, c.pos, c.len, &mut few, &mut c.legs)? {
        Plan::Copy => {
            c.legs.clear();
            return Ok(());
        }
        Plan::Ahead => {
            c.legs.clear();
            c.ahead = true;
            return Ok(());
        }
        Plan::Legs(n) => n,
    };
    if c.legs.is_empty() {
        c.legs.extend_from_slice(&few[..n], GFP_KERNEL)?;
    }
    c.legs.truncate(n);
    c.outcome = KVVec::from_elem(None, n, GFP_KERNEL)?;
    let p2p_legs = c.legs.iter().filter(|l| l.path == Path::P2p).count();
    if p2p_legs == 0 {
        return Ok(());
    }
    let batch = pipe.open(slot, p2p_legs)?;
    start_legs(batch, c.pos, c.addr, &c.legs)?;
    if ahead {
        ctx.account.pipelined();
    }
    Ok(())
}

/// Executes what is left of a staged chunk: the copies, then the wait for its P2P legs in
/// pipe slot `slot`, whose batch it then frees. Returns the bytes read, as [`execute`].
fn finish(
    ctx: &mut Ctx<'_, '_>,
    pipe: &mut glue::AioPipe<'_, '_>,
    slot: usize,
    c: &mut Staged,
) -> Result<usize> {
    if c.ahead {
        return read_ahead(ctx, c.pos, c.addr, c.len);
    }
    if c.legs.is_empty() {
        return ctx.copy(c.pos, c.addr, c.len);
    }
    copy_legs(ctx, c.pos, c.addr, &c.legs, &mut c.outcome);
    // The slot holds a batch exactly when the chunk has P2P legs in flight.
    if let Some(batch) = pipe.batch(slot) {
        wait_legs(ctx, c.pos, c.addr, &c.legs, &mut c.outcome, batch);
        pipe.close(slot);
    }
    legs_done(&c.legs, &c.outcome)
}

/// Reads a chunk that [`plan_chunk`] found faster through the page cache with read-ahead
/// ([`Plan::Ahead`]): what is cached from its start with no I/O, then the rest with read-ahead
/// if the GPU read-ahead partition has room for its windows (counted in `ahead_chunks`).
/// Without room the rest is scheduled after all: a plain page-cache read of a chunk would
/// leave it in the page cache, outside the partition.
fn read_ahead(ctx: &mut Ctx<'_, '_>, pos: i64, addr: usize, len: usize) -> Result<usize> {
    let n = ctx.req.sub_read_noio(pos, addr, len, true)?;
    ctx.done(pos, n, false);
    if n == len {
        return Ok(n);
    }
    let (at, rest) = (pos + n as i64, len - n);
    let r = match ctx.reserved_read(at, addr + n, rest, false) {
        Some(r) => {
            ctx.account.ahead();
            r.map(|(m, _)| m)
        }
        None => {
            ctx.ahead = false;
            let r = route_chunk(ctx, at, addr + n, rest);
            ctx.ahead = true;
            r
        }
    };
    match r {
        Ok(m) => Ok(n + m),
        Err(_) if n > 0 => Ok(n),
        Err(e) => Err(e),
    }
}

/// Decides how to read a chunk: looks up its residency and schedules it. Legs go to `few` if
/// they fit, else to `many`.
fn plan_chunk(
    ctx: &Ctx<'_, '_>,
    pos: i64,
    len: usize,
    few: &mut [Leg; 3],
    many: &mut KVVec<Leg>,
) -> Result<Plan> {
    if glue::should_fail_plan() {
        return Err(ENOMEM);
    }
    let w = plan::window(
        pos as u64,
        len as u64,
        ctx.info.offset_align,
        PAGE_SIZE as u32,
    )
    .map_err(|_| EINVAL)?;
    let Some(w) = w else {
        // No whole aligned block: one copy.
        return Ok(Plan::Copy);
    };
    let pages = u32::try_from(w.pages).map_err(|_| EINVAL)?;
    let mut segs: KVVec<Segment> = KVVec::new();
    let whole = match ctx.mode {
        Mode::P2p => Some(Path::P2p),
        _ => {
            const SMALL: usize = 2;
            let words = (pages as usize).div_ceil(usize::BITS as usize);
            let mut small = [0usize; SMALL];
            let mut big: KVVec<usize> = KVVec::new();
            let bits: &mut [usize] = if words <= SMALL {
                &mut small[..words]
            } else {
                big.resize(words, 0, GFP_KERNEL)?;
                &mut big
            };
            let cached = ctx.req.residency(w.first_page, pages, bits)?;
            let model = ctx.params.model();
            if cached == u64::from(pages) {
                // Data the host holds entirely is copied, head and tail included, in one leg,
                // unless the device alone reads it faster and none of it waits for writeback
                // (`sched::cached_wants_p2p`).
                if !sched::cached_wants_p2p(&model, cached)
                    || ctx.req.needs_writeback(w.first_page, pages)
                {
                    return Ok(Plan::Copy);
                }
                if ctx.sync {
                    // Synchronous P2P legs overlap no copy: all by the faster path.
                    Some(Path::P2p)
                } else {
                    schedule(&ctx.params, pages, bits, &mut segs)?;
                    None
                }
            } else {
                let planned = if cached == 0 {
                    model.device(model.t_p2p(u64::from(pages)), true)
                } else {
                    schedule(&ctx.params, pages, bits, &mut segs)?
                };
                if ctx.ahead_wins(&model, pages, cached, planned) {
                    return Ok(Plan::Ahead);
                }
                (cached == 0).then_some(Path::P2p)
            }
        }
    };
    let mut one = [Segment::EMPTY; 1];
    let segs: &[Segment] = match whole {
        Some(path) => {
            one[0] = plan::whole(&w, path).ok_or(EINVAL)?;
            &one
        }
        None => &segs,
    };
    let legs: &mut [Leg] = if plan::max_legs(segs.len()) <= few.len() {
        few
    } else {
        many.resize(plan::max_legs(segs.len()), Leg::EMPTY, GFP_KERNEL)?;
        many
    };
    let n = plan::legs(
        pos as u64,
        len as u64,
        Some(&w),
        segs,
        PAGE_SIZE as u32,
        legs,
    )
    .map_err(|_| EINVAL)?;
    Ok(Plan::Legs(n))
}

/// Executes the legs of a chunk: the P2P legs are started first and stay in flight while the
/// CPU copies the page-cache legs; then the P2P legs are waited for in order. Returns the bytes
/// read, counted up to the first leg that came back short or failed.
fn execute(
    ctx: &mut Ctx<'_, '_>,
    pos: i64,
    addr: usize,
    legs: &[Leg],
    outcome: &mut [Option<Result<usize>>],
    mut batch: Option<&mut glue::AioBatch<'_, '_>>,
) -> Result<usize> {
    if let Some(batch) = batch.as_mut() {
        start_legs(batch, pos, addr, legs)?;
    }
    copy_legs(ctx, pos, addr, legs, outcome);
    if let Some(batch) = batch.as_mut() {
        wait_legs(ctx, pos, addr, legs, outcome, batch);
    }
    legs_done(legs, outcome)
}

/// Starts the P2P legs of a chunk at `pos` in `batch`, one slot each, in order.
fn start_legs(batch: &mut glue::AioBatch<'_, '_>, pos: i64, addr: usize, legs: &[Leg]) -> Result {
    for (slot, leg) in legs.iter().filter(|l| l.path == Path::P2p).enumerate() {
        batch.start(
            slot,
            pos + leg.off as i64,
            addr + leg.off as usize,
            leg.len as usize,
        )?;
    }
    Ok(())
}

/// Copies the page-cache legs of a chunk, in order, while the device works; none after one
/// that came back short.
fn copy_legs(
    ctx: &mut Ctx<'_, '_>,
    pos: i64,
    addr: usize,
    legs: &[Leg],
    outcome: &mut [Option<Result<usize>>],
) {
    for (leg, out) in legs.iter().zip(outcome.iter_mut()) {
        if leg.path == Path::P2p {
            continue;
        }
        let r = ctx.copy(
            pos + leg.off as i64,
            addr + leg.off as usize,
            leg.len as usize,
        );
        let stop = !matches!(r, Ok(n) if n as u64 == leg.len);
        *out = Some(r);
        if stop {
            break;
        }
    }
}

/// Waits for the P2P legs of a chunk started by [`start_legs`] in `batch`, in order.
fn wait_legs(
    ctx: &mut Ctx<'_, '_>,
    pos: i64,
    addr: usize,
    legs: &[Leg],
    outcome: &mut [Option<Result<usize>>],
    batch: &mut glue::AioBatch<'_, '_>,
) {
    let p2p = legs
        .iter()
        .zip(outcome.iter_mut())
        .filter(|(l, _)| l.path == Path::P2p);
    for (slot, (leg, out)) in p2p.enumerate() {
        let (at, a, l) = (
            pos + leg.off as i64,
            addr + leg.off as usize,
            leg.len as usize,
        );
        let r = batch.wait(slot);
        *out = Some(ctx.p2p_done(r, at, a, l));
    }
}

/// The bytes read by a chunk's legs, counted up to the first leg that came back short or
/// failed; the error of the first leg if it failed.
fn legs_done(legs: &[Leg], outcome: &[Option<Result<usize>>]) -> Result<usize> {
    let mut done = 0;
    for (leg, out) in legs.iter().zip(outcome.iter()) {
        match out {
            Some(Ok(n)) => {
                done += n;
                if *n as u64 != leg.len {
                    break;
                }
            }
            Some(Err(e)) if done == 0 => return Err(*e),
            _ => break,
        }
    }
    Ok(done)
}

/// Schedules `pages` pages of residency `bits` into `segs`; returns the schedule's makespan.
fn schedule(
    params: &sched::Params,
    pages: u32,
    bits: &[usize],
    segs: &mut KVVec<Segment>,
) -> Result<Picos> {
    let mut lens = KVVec::from_elem(0u32, pages as usize, GFP_KERNEL)?;
    let mut builder = RunsBuilder::new(&mut lens);
    plan::push_bitmap(&mut builder, bits, pages).map_err(|_| EINVAL)?;
    let runs = builder.finish().map_err(|_| EINVAL)?;
    let mut scratch = KVVec::from_elem(Slot::EMPTY, sched::scratch_len(&runs), GFP_KERNEL)?;
    let mut gaps = KVVec::from_elem(0u32, sched::gap_scratch_len(&runs), GFP_KERNEL)?;
    segs.resize(runs.max_segments(), Segment::EMPTY, GFP_KERNEL)?;
    // The legs run overlapped (see `execute`): minimise the makespan.
    let schedule = sched::overlap(params, &runs, segs, &mut scratch, &mut gaps)
        .map_err(|_| EINVAL)?
        .schedule;
    let (used, cost) = (schedule.segments.len(), schedule.cost);
    segs.truncate(used);
    Ok(cost)
}
