// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over the C side of the router (`rust/spin/spin_glue.h`,
//! `rust/spin/spin_glue.c`) and the page-cache residency helper of mm.
//!
//! Every `unsafe` block of the router is in this file, apart from the tracepoints' (`trace.rs`).

use crate::sched::readahead::Stream;
use kernel::{bindings, pci, prelude::*, sync::aref::ARef};

use core::ptr::{self, NonNull};

/// One reference on the router's static key: while any exists, the requests of processes that
/// mapped p2pdma memory (`MMF_P2PDMA`) are looked at.
///
/// Every bound p2pdma provider holds one, so a system without one runs the plain read and
/// write paths with a patched-out jump.
pub(crate) struct RouteKey(());

impl RouteKey {
    /// Takes a reference on the key (turning routing on if it was off).
    pub(crate) fn get() -> Self {
        // SAFETY: No preconditions; the key is a static of spin_glue.c.
        unsafe { bindings::spin_route_key_get() };
        RouteKey(())
    }
}

impl Drop for RouteKey {
    fn drop(&mut self) {
        // SAFETY: `self` was created by `get`, which took the reference dropped here.
        unsafe { bindings::spin_route_key_put() };
    }
}

/// Why a request stays in the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Not a fallback: the request was scheduled.
    None,
    /// `/sys/kernel/spin/mode` is `pagecache`.
    Mode,
    /// The file's filesystem has no block device.
    NoBdev,
    /// The file cannot do direct I/O.
    NoDirectIo,
    /// DAX, encrypted, verity or swap file.
    Inode,
    /// The queue lacks `BLK_FEAT_PCI_P2PDMA`.
    Queue,
    /// `pci_p2pdma_distance()` refuses the GPU and the disk.
    Distance,
    /// The GPU address and the file offset differ modulo the DMA alignment.
    Misaligned,
    /// A write to the end of the file that cannot go as one aligned direct write.
    Append,
    /// A write that cannot go whole as one direct write (an unaligned file range, a source
    /// that is not one GPU piece, a filesystem without `FOP_DIO_EXCL`): it goes whole through
    /// the page cache, which keeps it atomic.
    Split,
}

impl Fallback {
    /// Every reason, in counter order.
    pub(crate) const ALL: [Fallback; 10] = [
        Fallback::None,
        Fallback::Mode,
        Fallback::NoBdev,
        Fallback::NoDirectIo,
        Fallback::Inode,
        Fallback::Queue,
        Fallback::Distance,
        Fallback::Misaligned,
        Fallback::Append,
        Fallback::Split,
    ];

    /// The name in the tracepoint and, prefixed with `fallback_`, in the `stat` files.
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            Fallback::None => c"none",
            Fallback::Mode => c"mode",
            Fallback::NoBdev => c"no_bdev",
            Fallback::NoDirectIo => c"no_direct_io",
            Fallback::Inode => c"inode",
            Fallback::Queue => c"queue",
            Fallback::Distance => c"distance",
            Fallback::Misaligned => c"misaligned",
            Fallback::Append => c"append",
            Fallback::Split => c"split",
        }
    }
}

/// What `spin_routable()` says of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Routable {
    /// Pass it on unchanged.
    No,
    /// Look at it; it may block.
    Yes,
    /// It must not block: if it touches GPU memory, answer `EAGAIN` (io_uring then issues it
    /// again from a worker that may block).
    Later,
    /// A non-blocking read: if it touches GPU memory, copy what is cached and start no I/O
    /// ([`Request::read_cached`]).
    Cached,
}

impl Routable {
    /// The verdict `spin_routable()` returned.
    pub(crate) fn from_raw(verdict: bindings::spin_route_verdict) -> Self {
        match verdict {
            bindings::spin_route_verdict_SPIN_ROUTE_YES => Routable::Yes,
            bindings::spin_route_verdict_SPIN_ROUTE_LATER => Routable::Later,
            bindings::spin_route_verdict_SPIN_ROUTE_CACHED => Routable::Cached,
            _ => Routable::No,
        }
    }
}

/// What the router's file check looks at (see `spin_file_facts()`).
#[derive(Clone, Copy, Default)]
pub(crate) struct FileFacts {
    /// Inode number.
    pub(crate) ino: u64,
    /// Device number of the file's whole disk, 0 if none.
    pub(crate) devt: u32,
    /// The disk's identity (see [`DiskKey`]).
    pub(crate) disk_id: usize,
    /// The open file can do direct I/O.
    pub(crate) can_odirect: bool,
    /// A DAX, encrypted or verity file, or an active swap file.
    pub(crate) special_inode: bool,
    /// File offset alignment of direct I/O (`STATX_DIOALIGN`); 0 if none or not looked up.
    pub(crate) dio_offset_align: u32,
    /// Memory alignment of direct I/O; 0 as `dio_offset_align`.
    pub(crate) dio_mem_align: u32,
    /// The disk's queue accepts P2PDMA pages.
    pub(crate) queue_p2p: bool,
    /// The disk's logical block size.
    pub(crate) logical_block_size: u32,
    /// The disk's DMA alignment.
    pub(crate) dma_alignment: u32,
    /// The disk is built on others.
    pub(crate) stacked: bool,
    /// The generation of the stacks of disks before `stacked` was read.
    pub(crate) generation: u64,
    /// The filesystem's buffered reads exclude buffered writes (`FOP_READ_EXCL`).
    pub(crate) read_excl: bool,
    /// The filesystem honours `IOCB_DIO_EXCL` (`FOP_DIO_EXCL`).
    pub(crate) dio_excl: bool,
}

/// What the router needs to know about a file (see `verdict::file_check`).
pub(crate) struct FileInfo {
    /// Device number of the file's whole disk, 0 if none.
    pub(crate) devt: u32,
    /// Inode number.
    pub(crate) ino: u64,
    /// File offset and length alignment of direct I/O.
    pub(crate) offset_align: u32,
    /// Memory alignment of direct I/O.
    pub(crate) mem_align: u32,
    /// The disk's PCI device, if one was found.
    pub(crate) client: Option<ARef<pci::Device>>,
    /// The disk is built on others (md, dm, NVMe multipath); [`Request::members`] lists the disks
    /// under it.
    pub(crate) stacked: bool,
    /// The generation of the stacks of disks when `stacked` was found (`disk_stack_generation()`).
    pub(crate) generation: u64,
    /// For fallback `distance`: the disk whose PCI device the GPU cannot reach (0 otherwise).
    pub(crate) member: u32,
    /// The disk's identity (see [`DiskKey`]).
    pub(crate) disk_id: usize,
    /// The filesystem's buffered reads exclude buffered writers (XFS): only synchronous P2P
    /// legs keep that.
    pub(crate) reads_exclude_writes: bool,
    /// The filesystem honours `IOCB_DIO_EXCL`: a direct write keeps a buffered write's
    /// exclusion.
    pub(crate) dio_excl: bool,
}

impl FileInfo {
    /// The key of the file's disk in the router's table.
    pub(crate) fn key(&self) -> DiskKey {
        DiskKey {
            devt: self.devt,
            id: self.disk_id,
        }
    }
}

impl FileInfo {
    /// A copy without the PCI device reference, for the router's per-inode verdicts.
    pub(crate) fn without_client(&self) -> FileInfo {
        FileInfo {
            client: None,
            ..*self
        }
    }
}

/// What the file check's answer for a file depends on (see `spin_file_stamp()`): while
/// it is unchanged, so is the answer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    inode: usize,
    sb: usize,
    ino: u64,
    i_generation: u32,
    i_flags: u32,
    ctime: (i64, u32),
    can_odirect: bool,
    queue_p2p: bool,
    stack_generation: u64,
}

impl Stamp {
    /// The inode's address, compared and never followed.
    pub(crate) fn inode(&self) -> usize {
        self.inode
    }
}

/// What GPU read-ahead's look-ahead of a file depends on (see `spin_ra_facts()`).
#[derive(Clone, Copy)]
pub(crate) struct RaFacts {
    /// The file's read-ahead window size in pages; 0 if read-ahead is off.
    pub(crate) ra_pages: u32,
    /// The file's size.
    pub(crate) size: i64,
    /// The task's blkcg is congested: read-ahead reads nothing beyond what is asked.
    pub(crate) congested: bool,
}

/// A disk at the bottom of a stacked disk (see `spin_file_members()`).
pub(crate) struct Member {
    /// Its device number.
    pub(crate) devt: u32,
    /// Its PCI device, if it has one.
    pub(crate) pdev: Option<ARef<pci::Device>>,
    /// Its queue accepts P2PDMA pages.
    pub(crate) p2pdma: bool,
}

/// Calls `fill` (`spin_file_members()` or `spin_disk_members()`) with room for
/// `SPIN_MEMBERS_MAX` entries and takes over the PCI device references it returns.
fn collect_members(
    fill: impl FnOnce(*mut bindings::spin_member, u32) -> c_int,
) -> Result<KVec<Member>> {
    const MAX: usize = bindings::SPIN_MEMBERS_MAX as usize;
    let mut raw = KVec::<bindings::spin_member>::with_capacity(MAX, GFP_KERNEL)?;
    let mut out = KVec::<Member>::with_capacity(MAX, GFP_KERNEL)?;
    let n = fill(raw.as_mut_ptr(), MAX as u32);
    let n = usize::try_from(n).map_err(|_| Error::from_errno(n))?;
    // SAFETY: `fill` initialised the first `n <= MAX` entries.
    unsafe { raw.inc_len(n.min(MAX)) };
    for m in raw.iter() {
        let pdev = NonNull::new(m.pdev).map(|p| {
            // SAFETY: `fill` returns each PCI device with a reference held for us, taken over
            // here once; `pci::Device` is a transparent wrapper of `struct pci_dev`.
            unsafe { ARef::from_raw(p.cast::<pci::Device>()) }
        });
        // `out` has room for every entry, so this does not allocate; were it to fail, the
        // rejected member is dropped with its reference.
        let _ = out.push_within_capacity(Member {
            devt: m.devt,
            pdev,
            p2pdma: m.p2pdma,
        });
    }
    Ok(out)
}

/// Bits of the minor number in a `dev_t` (`MINORBITS`).
const MINORBITS: u32 = 20;

/// A disk: its device number, and its identity (the address of its `struct gendisk`, compared
/// and never followed), which tells apart two disks that had the same device number.
///
/// Ordered by identity first, so that the entries of one disk (its partitions) are neighbours.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DiskKey {
    /// The device number; 0: no disk (`/sys/kernel/spin`, a file without a block device).
    pub(crate) devt: u32,
    /// The identity.
    pub(crate) id: usize,
}

impl Ord for DiskKey {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (self.id, self.devt).cmp(&(other.id, other.devt))
    }
}

impl PartialOrd for DiskKey {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A disk whose sysfs file is being read (`/sys/block/<disk>/spin/`).
///
/// # Invariants
///
/// `disk` is a valid `struct gendisk` for the lifetime `'a`.
pub(crate) struct DiskRef<'a> {
    disk: NonNull<bindings::gendisk>,
    _p: core::marker::PhantomData<&'a bindings::gendisk>,
}

impl DiskRef<'_> {
    /// The disk of a device, if it is a disk's (as sysfs passes it to the attributes of
    /// `spin_disk_attr_group`).
    pub(crate) fn from_device(dev: &kernel::device::Device) -> Option<DiskRef<'_>> {
        // `Device` is a transparent wrapper of `struct device`.
        let dev = ptr::from_ref(dev).cast_mut().cast::<bindings::device>();
        // SAFETY: `dev` is valid for the borrow; `disk_type` is a static of block/genhd.c, only
        // its address is taken.
        let is_disk = unsafe { (*dev).type_ == ptr::addr_of!(bindings::disk_type) };
        // `disk_type` is the type of a whole disk's device (partitions have `part_type`).
        if !is_disk {
            return None;
        }
        // SAFETY: A device of type `disk_type` is the `bd_device` of a `struct block_device`,
        // whose `bd_disk` is valid while the device is.
        let disk =
            unsafe { (*kernel::container_of!(dev, bindings::block_device, bd_device)).bd_disk };
        NonNull::new(disk).map(|disk| DiskRef {
            disk,
            _p: core::marker::PhantomData,
        })
    }

    /// The disk's key in the router's table: its device number as the file check reads it
    /// (`disk_devt()`: `MKDEV(major, first_minor)`) and its identity.
    pub(crate) fn key(&self) -> DiskKey {
        // SAFETY: The disk is valid (type invariant); `major` and `first_minor` are set before
        // the disk is added and never change.
        let (major, minor) = unsafe {
            let d = self.disk.as_ptr();
            ((*d).major as u32, (*d).first_minor as u32)
        };
        DiskKey {
            devt: (major << MINORBITS) | minor,
            id: self.disk.as_ptr() as usize,
        }
    }

    /// Whether the disk's queue accepts P2PDMA pages.
    pub(crate) fn p2pdma(&self) -> bool {
        // SAFETY: The disk is valid (type invariant).
        unsafe { bindings::spin_disk_p2pdma(self.disk.as_ptr()) }
    }

    /// The disks at the bottom of this one (itself if it is not stacked).
    pub(crate) fn members(&self) -> Result<KVec<Member>> {
        collect_members(|out, max| {
            // SAFETY: The disk is valid (type invariant); `out` has room for `max` entries.
            unsafe { bindings::spin_disk_members(self.disk.as_ptr(), out, max) }
        })
    }
}

/// The PCI devices that published p2pdma memory (at most `SPIN_PROVIDERS_MAX`).
pub(crate) fn p2p_providers() -> Result<KVec<ARef<pci::Device>>> {
    const MAX: usize = bindings::SPIN_PROVIDERS_MAX as usize;
    let mut raw = KVec::<*mut bindings::pci_dev>::with_capacity(MAX, GFP_KERNEL)?;
    let mut out = KVec::with_capacity(MAX, GFP_KERNEL)?;
    // SAFETY: `raw` has room for `MAX` entries.
    let n = unsafe { bindings::spin_p2p_providers(raw.as_mut_ptr(), MAX as u32) } as usize;
    // SAFETY: `spin_p2p_providers()` initialised the first `n <= MAX` entries.
    unsafe { raw.inc_len(n.min(MAX)) };
    for p in raw.iter().filter_map(|p| NonNull::new(*p)) {
        // SAFETY: Each device comes with a reference held for us, taken over here once;
        // `pci::Device` is a transparent wrapper of `struct pci_dev`.
        let dev: ARef<pci::Device> = unsafe { ARef::from_raw(p.cast()) };
        // `out` has room for every entry; a rejected one is dropped with its reference.
        let _ = out.push_within_capacity(dev);
    }
    Ok(out)
}

/// A read or write being routed: the `kiocb` and user memory the VFS passed to
/// `spin_router_read_iter()` or `spin_router_write_iter()`.
///
/// # Invariants
///
/// `iocb` and `iter` are valid for the lifetime `'a`, `iocb->ki_filp` is a file open for
/// reading with `->read_iter` (or, if `write`, for writing with `->write_iter`, inside
/// `file_start_write()`), and this is the only user of both during `'a`.
pub(crate) struct Request<'a> {
    iocb: NonNull<bindings::kiocb>,
    iter: NonNull<bindings::iov_iter>,
    write: bool,
    _p: PhantomData<&'a mut ()>,
}

use core::marker::PhantomData;

impl Request<'_> {
    /// Wraps the arguments of `spin_router_read_iter()` or, with `write`,
    /// `spin_router_write_iter()`.
    ///
    /// # Safety
    ///
    /// `iocb` and `iter` must be the valid arguments of a `->read_iter()` call (with `write`,
    /// a `->write_iter()` call inside `file_start_write()`) the caller is making on behalf of
    /// the VFS, and stay valid and unused elsewhere for the returned lifetime.
    pub(crate) unsafe fn from_raw<'a>(
        iocb: *mut bindings::kiocb,
        iter: *mut bindings::iov_iter,
        write: bool,
    ) -> Option<Request<'a>> {
        Some(Request {
            iocb: NonNull::new(iocb)?,
            iter: NonNull::new(iter)?,
            write,
            _p: PhantomData,
        })
    }

    /// Whether this is a write (from user memory to the file).
    pub(crate) fn is_write(&self) -> bool {
        self.write
    }

    /// Whether the write goes to the end of the file (`O_APPEND`, `RWF_APPEND`).
    pub(crate) fn append(&self) -> bool {
        // SAFETY: `iocb` is valid (type invariant).
        self.write && unsafe { bindings::spin_iocb_append(self.iocb.as_ptr()) }
    }

    /// Writes `len` bytes from user memory at `addr` to file offset `pos` (with
    /// [`Request::append`], to the end of the file), through the page cache or as direct I/O,
    /// with a fresh `->write_iter()` call; returns the bytes written and the file offset after
    /// them.
    pub(crate) fn sub_write(
        &self,
        pos: i64,
        addr: usize,
        len: usize,
        direct: bool,
    ) -> Result<(usize, i64)> {
        if !self.write {
            return Err(EBADF);
        }
        let mut end = pos;
        // SAFETY: `iocb` is valid and the request a write inside `file_start_write()` (type
        // invariants); the user range is checked by the filesystem (it is an ordinary user
        // pointer, as in write(2)); `end` is a local.
        let ret = unsafe {
            bindings::spin_sub_write(
                self.iocb.as_ptr(),
                pos,
                addr as c_ulong,
                len,
                direct,
                &mut end,
            )
        };
        if ret < 0 {
            return Err(Error::from_errno(ret as c_int));
        }
        Ok((ret as usize, end))
    }

    /// Makes the `written` bytes a direct write put before `end` durable if the request or the
    /// inode asks for it (`O_SYNC`, `O_DSYNC`, `RWF_SYNC`, `RWF_DSYNC`), as a buffered write does
    /// on its way out; a direct write of [`Request::sub_write`] is not synced itself.
    pub(crate) fn write_sync(&self, end: i64, written: usize) -> Result {
        // SAFETY: `iocb` is valid and the request a write (type invariants).
        let ret = unsafe { bindings::spin_write_sync(self.iocb.as_ptr(), end, written) };
        if ret < 0 {
            return Err(Error::from_errno(ret as c_int));
        }
        Ok(())
    }

    fn file(&self) -> *mut bindings::file {
        // SAFETY: `iocb` is valid (type invariant).
        unsafe { (*self.iocb.as_ptr()).ki_filp }
    }

    /// Calls the file's `->read_iter()` (or `->write_iter()`) with the request unchanged.
    pub(crate) fn passthrough(&mut self) -> isize {
        let file = self.file();
        // SAFETY: `file` is valid and has `->read_iter`, or `->write_iter` for a write (type
        // invariants); `iocb` and `iter` are the caller's valid arguments.
        unsafe {
            let op = if self.write {
                (*(*file).f_op).write_iter
            } else {
                (*(*file).f_op).read_iter
            };
            match op {
                Some(op) => op(self.iocb.as_ptr(), self.iter.as_ptr()),
                None => EINVAL.to_errno() as isize,
            }
        }
    }

    /// Passes a non-blocking read on with `IOCB_NOIO`: copies what is cached, starts no I/O.
    pub(crate) fn read_cached(&mut self) -> isize {
        if self.write {
            return EINVAL.to_errno() as isize;
        }
        // SAFETY: `iocb` and `iter` are the caller's valid arguments of a `->read_iter()` call
        // (type invariants).
        unsafe { bindings::spin_read_cached(self.iocb.as_ptr(), self.iter.as_ptr()) }
    }

    /// The non-empty user segments of the destination, from its current position:
    /// `(address, length)`.
    pub(crate) fn segments(&self) -> Segments<'_, '_> {
        Segments {
            iter: self.iter,
            idx: 0,
            before: 0,
            _req: PhantomData,
        }
    }

    /// The file offset of the read.
    pub(crate) fn pos(&self) -> i64 {
        // SAFETY: `iocb` is valid and ours (type invariants).
        unsafe { (*self.iocb.as_ptr()).ki_pos }
    }

    /// Completes the read: `bytes` were read, the file offset is now `pos`.
    pub(crate) fn complete(&mut self, pos: i64, bytes: usize) {
        // SAFETY: `iocb` and `iter` are valid and ours (type invariants); `bytes` were read into
        // the destination, so it holds at least that many.
        unsafe {
            (*self.iocb.as_ptr()).ki_pos = pos;
            bindings::spin_iter_advance(self.iter.as_ptr(), bytes);
        }
    }

    /// Reads `len` bytes at file offset `pos` into user memory at `addr` through the page cache,
    /// with a fresh `->read_iter()` call. Into GPU memory (`gpu`), the GPU read-ahead
    /// partition's folios it reads stay the partition's; into host memory, the CPU takes them.
    pub(crate) fn sub_read(&self, pos: i64, addr: usize, len: usize, gpu: bool) -> Result<usize> {
        if self.write {
            return Err(EBADF);
        }
        // SAFETY: `iocb` is valid (type invariant); the user range is checked by the filesystem
        // (it is an ordinary user pointer, as in read(2)).
        let ret =
            unsafe { bindings::spin_sub_read(self.iocb.as_ptr(), pos, addr as c_ulong, len, gpu) };
        if ret < 0 {
            return Err(Error::from_errno(ret as c_int));
        }
        Ok(ret as usize)
    }

    /// The file's read-ahead state and whether its filesystem supports uncached reads
    /// (`FOP_DONTCACHE`), which GPU read-ahead needs to keep its pages apart.
    ///
    /// Read for every small read into GPU memory, in place rather than by a C helper: what only
    /// some reads need, such as [`Request::io_pages`], is read apart.
    pub(crate) fn stream(&self) -> (Stream, bool) {
        let file = self.file();
        // SAFETY: The file is valid (type invariant), and so is its `f_op` while it is open;
        // `f_ra` is the member of its union in use until the file is released. It is read
        // without a lock, as the page cache's own read-ahead does, each field once
        // (`READ_ONCE()`): a torn or stale value only changes a heuristic. `f_mode` gains
        // `FMODE_RANDOM` under `f_lock` (`POSIX_FADV_RANDOM`); a read that misses the change is
        // one that came before it.
        unsafe {
            let ra = &raw const (*file).__bindgen_anon_3.f_ra;
            let mode = ptr::read_volatile(&raw const (*file).f_mode);
            let stream = Stream {
                prev_pos: ptr::read_volatile(&raw const (*ra).prev_pos),
                ra_pages: ptr::read_volatile(&raw const (*ra).ra_pages),
                random: mode & bindings::FMODE_RANDOM != 0,
                ra_start: ptr::read_volatile(&raw const (*ra).start) as u64,
                ra_size: ptr::read_volatile(&raw const (*ra).size).into(),
            };
            let dontcache = (*(*file).f_op).fop_flags & bindings::FOP_DONTCACHE != 0;
            (stream, dontcache)
        }
    }

    /// The most pages a read-ahead window of a large read may span (the device's `io_pages`).
    ///
    /// Apart from [`Request::stream`], which runs for every small read into GPU memory: only a
    /// read that reserves room in the partition needs it.
    pub(crate) fn io_pages(&self) -> u64 {
        // SAFETY: The file is valid (type invariant).
        unsafe { bindings::spin_file_io_pages(self.file()) as u64 }
    }

    /// The id of the stream the request belongs to: its open file, never 0. Two readers of one
    /// file through two opens are two streams; the id is only compared, never dereferenced.
    pub(crate) fn stream_id(&self) -> usize {
        self.file() as usize
    }

    /// Notes in the file's read-ahead state that a read into GPU memory ended at `pos`.
    ///
    /// P2P legs bypass `filemap_read()`, which keeps `file_ra_state.prev_pos` for page-cache
    /// reads: without this a sequential GPU stream served by P2P would look random to the next
    /// read's read-ahead decision.
    pub(crate) fn set_prev_pos(&self, pos: i64) {
        let file = self.file();
        // SAFETY: The file is valid (type invariant); `f_ra` is the member of its union in use
        // until the file is released. `prev_pos` is written without a lock, once
        // (`WRITE_ONCE()`), as `filemap_read()` writes it.
        unsafe { ptr::write_volatile(&raw mut (*file).__bindgen_anon_3.f_ra.prev_pos, pos) };
    }

    /// Reads `len` bytes at `pos` into user memory at `addr` through the page cache, uncached
    /// (`IOCB_DONTCACHE`); returns the bytes read and the file's read-ahead window after the
    /// leg (`nr` 0 if it has none). With `defer` the dropbehind folios the leg consumes stay
    /// for the GPU read-ahead partition to evict (`IOCB_DONTCACHE_DEFER`) instead of being
    /// dropped now.
    ///
    /// The caller checked that the filesystem supports uncached reads ([`Request::stream`]).
    pub(crate) fn sub_read_ra(
        &self,
        pos: i64,
        addr: usize,
        len: usize,
        defer: bool,
    ) -> (Result<usize>, RaWindow) {
        // SAFETY: `spin_ra_window` is plain data; all-zero is a valid value.
        let mut win: bindings::spin_ra_window = unsafe { core::mem::zeroed() };
        // SAFETY: `iocb` is valid (type invariant); the user range is checked by the filesystem
        // (it is an ordinary user pointer, as in read(2)); `win` is a local.
        let ret = unsafe {
            bindings::spin_sub_read_ra(
                self.iocb.as_ptr(),
                pos,
                addr as c_ulong,
                len,
                defer,
                &mut win,
            )
        };
        let win = RaWindow::from(&win);
        if ret < 0 {
            return (Err(Error::from_errno(ret as c_int)), win);
        }
        (Ok(ret as usize), win)
    }

    /// The first of the file's pages `index .. index + max` that is not in the page cache, or
    /// an index past them if they all are (`spin_next_miss()`).
    pub(crate) fn next_miss(&self, index: u64, max: u64) -> u64 {
        let (Ok(i), Ok(n)) = (usize::try_from(index), usize::try_from(max)) else {
            return index.saturating_add(max);
        };
        // SAFETY: The file is valid (type invariant); the helper takes the RCU read lock.
        unsafe { bindings::spin_next_miss(self.file(), i, n) as u64 }
    }

    /// What GPU read-ahead's look-ahead of the file depends on (`spin_ra_facts()`).
    pub(crate) fn ra_facts(&self) -> RaFacts {
        // SAFETY: `spin_ra_facts` is plain data; all-zero is a valid value.
        let mut raw: bindings::spin_ra_facts = unsafe { core::mem::zeroed() };
        // SAFETY: The file is valid (type invariant); `raw` is a local.
        unsafe { bindings::spin_ra_facts(self.file(), &mut raw) };
        RaFacts {
            ra_pages: raw.ra_pages,
            size: raw.size,
            congested: raw.congested,
        }
    }

    /// Reads a window of at most `max` pages ahead from page `gap`, uncached, and makes it the
    /// file's read-ahead window (`spin_ra_bridge()`); returns it, or `None` if `gap` lies past
    /// the end of the file.
    pub(crate) fn ra_bridge(&self, gap: u64, max: u64) -> Option<RaWindow> {
        // SAFETY: `spin_ra_window` is plain data; all-zero is a valid value.
        let mut win: bindings::spin_ra_window = unsafe { core::mem::zeroed() };
        let gap = usize::try_from(gap).ok()?;
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        // SAFETY: The file is valid (type invariant); the router holds no filesystem lock
        // here; `win` is a local.
        if !unsafe { bindings::spin_ra_bridge(self.file(), gap, max, &mut win) } {
            return None;
        }
        Some(RaWindow::from(&win))
    }

    /// Fills `out` with the dropbehind folios of the file's pages `*index .. end`, advancing
    /// `*index` past those looked at; returns how many were found, fewer than `out.len()` once
    /// the range is done.
    pub(crate) fn ra_collect(&self, index: &mut u64, end: u64, out: &mut [RaFolio]) -> usize {
        let max = u32::try_from(out.len()).unwrap_or(u32::MAX);
        if max == 0 {
            return 0;
        }
        let mut raw = [bindings::spin_ra_folio {
            pfn: 0,
            index: 0,
            nr: 0,
        }; 16];
        let max = max.min(raw.len() as u32);
        let mut at = *index as usize;
        // SAFETY: The file is valid (type invariant); `raw` has room for `max` entries.
        let n = unsafe {
            bindings::spin_ra_collect(self.file(), &mut at, end as _, raw.as_mut_ptr(), max)
        } as usize;
        *index = at as u64;
        for (o, r) in out.iter_mut().zip(&raw[..n]) {
            *o = RaFolio {
                pfn: r.pfn as usize,
                index: r.index as u64,
                pages: r.nr as u64,
            };
        }
        n
    }

    /// The file's size.
    pub(crate) fn file_size(&self) -> i64 {
        // SAFETY: The file is valid (type invariant).
        unsafe { bindings::spin_file_size(self.file()) }
    }

    /// What the file check's answer depends on (see `spin_file_stamp()`).
    pub(crate) fn stamp(&self) -> Stamp {
        // SAFETY: `spin_file_stamp` is plain data; all-zero is a valid value.
        let mut raw: bindings::spin_file_stamp = unsafe { core::mem::zeroed() };
        // SAFETY: The file is valid (type invariant), `raw` is a local.
        unsafe { bindings::spin_file_stamp(self.file(), &mut raw) };
        Stamp {
            inode: raw.inode as usize,
            sb: raw.sb as usize,
            ino: raw.ino,
            i_generation: raw.i_generation,
            i_flags: raw.i_flags,
            ctime: (raw.ctime_sec, raw.ctime_nsec),
            can_odirect: raw.can_odirect,
            queue_p2p: raw.queue_p2p,
            stack_generation: raw.stack_generation,
        }
    }

    /// Copies what is cached of `len` bytes at `pos` into user memory at `addr` and starts no
    /// I/O (`IOCB_NOIO`); with `dontcache`, uncached (see [`Request::sub_read_ra`]). Returns the
    /// bytes copied, 0 if none.
    pub(crate) fn sub_read_noio(
        &self,
        pos: i64,
        addr: usize,
        len: usize,
        dontcache: bool,
    ) -> Result<usize> {
        if self.write {
            return Err(EBADF);
        }
        // SAFETY: `iocb` is valid (type invariant); the user range is checked by the filesystem
        // (it is an ordinary user pointer, as in read(2)).
        let ret = unsafe {
            bindings::spin_sub_read_noio(self.iocb.as_ptr(), pos, addr as c_ulong, len, dontcache)
        };
        match ret {
            r if r >= 0 => Ok(r as usize),
            r if r == EAGAIN.to_errno() as isize => Ok(0),
            r => Err(Error::from_errno(r as c_int)),
        }
    }

    /// What the router's file check looks at (see `spin_file_facts()`).
    pub(crate) fn file_facts(&self) -> FileFacts {
        // SAFETY: `spin_file_facts` is plain data; all-zero is a valid value.
        let mut raw: bindings::spin_file_facts = unsafe { core::mem::zeroed() };
        // SAFETY: The file is valid (type invariant), `raw` is a local.
        unsafe { bindings::spin_file_facts(self.file(), &mut raw) };
        FileFacts {
            ino: raw.ino,
            devt: raw.devt,
            disk_id: raw.disk_id as usize,
            can_odirect: raw.can_odirect,
            special_inode: raw.special_inode,
            dio_offset_align: raw.dio_offset_align,
            dio_mem_align: raw.dio_mem_align,
            queue_p2p: raw.queue_p2p,
            logical_block_size: raw.logical_block_size,
            dma_alignment: raw.dma_alignment,
            stacked: raw.stacked,
            generation: raw.generation,
            read_excl: raw.read_excl,
            dio_excl: raw.dio_excl,
        }
    }

    /// The PCI device of the file's disk, if the disk has one (a stacked disk has none).
    pub(crate) fn file_pci_dev(&self) -> Option<ARef<pci::Device>> {
        // SAFETY: The file is valid (type invariant).
        let pdev = unsafe { bindings::spin_file_pci_dev(self.file()) };
        NonNull::new(pdev).map(|p| {
            // SAFETY: `spin_file_pci_dev()` returns the PCI device with a reference held for
            // us; `pci::Device` is a transparent wrapper of `struct pci_dev`.
            unsafe { ARef::from_raw(p.cast::<pci::Device>()) }
        })
    }

    /// The disks at the bottom of the file's stacked disk, each with its PCI device.
    ///
    /// Fails with `E2BIG` if there are more than `SPIN_MEMBERS_MAX`.
    pub(crate) fn members(&self) -> Result<KVec<Member>> {
        collect_members(|out, max| {
            // SAFETY: The file is valid (type invariant); `out` has room for `max` entries.
            unsafe { bindings::spin_file_members(self.file(), out, max) }
        })
    }

    /// Fills `map` (a kernel bitmap of `nr` bits) with the page-cache residency of the file's
    /// pages `index .. index + nr`; returns the number of cached pages.
    pub(crate) fn residency(&self, index: u64, nr: u32, map: &mut [usize]) -> Result<u64> {
        if nr == 0 || map.len() < (nr as usize).div_ceil(usize::BITS as usize) {
            return Err(EINVAL);
        }
        // SAFETY: The file and its mapping are valid while the file is (type invariant); `map`
        // holds at least `nr` bits.
        let cached = unsafe {
            bindings::filemap_get_residency(
                (*self.file()).f_mapping,
                index as usize,
                nr as usize,
                map.as_mut_ptr().cast(),
            )
        };
        Ok(cached as u64)
    }

    /// Whether a folio of the file's pages `index .. index + nr` is dirty, under writeback or
    /// locked (`filemap_range_has_writeback()`): a direct read of the range would first write
    /// it back or wait for it.
    pub(crate) fn needs_writeback(&self, index: u64, nr: u32) -> bool {
        let page = kernel::page::PAGE_SIZE as i64;
        let (Ok(first), Ok(nr)) = (i64::try_from(index), i64::try_from(nr)) else {
            return true;
        };
        let Some(start) = first.checked_mul(page) else {
            return true;
        };
        let Some(end) = first
            .checked_add(nr)
            .and_then(|e| e.checked_mul(page))
            .and_then(|e| e.checked_sub(1))
        else {
            return true;
        };
        // SAFETY: The file and its mapping are valid while the file is (type invariant); the
        // function walks the mapping's pages under the RCU read lock.
        unsafe { bindings::filemap_range_has_writeback((*self.file()).f_mapping, start, end) }
    }
}

/// The file's read-ahead window after a GPU page-cache leg (`struct spin_ra_window`), or a
/// range of the file's pages to account like one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RaWindow {
    /// The file's mapping, as a number: compared, never followed.
    pub(crate) mapping: usize,
    /// First page of the window.
    pub(crate) start: u64,
    /// Pages in it; 0 if the file has no window.
    pub(crate) nr: u64,
    /// First page of the window before the leg.
    pub(crate) prev_start: u64,
    /// Pages in that window; 0 if there was none.
    pub(crate) prev_nr: u64,
    /// The leg read it ahead: its folios are new.
    pub(crate) moved: bool,
}

impl From<&bindings::spin_ra_window> for RaWindow {
    fn from(win: &bindings::spin_ra_window) -> Self {
        Self {
            mapping: win.mapping as usize,
            start: win.start as u64,
            nr: win.nr as u64,
            prev_start: win.prev_start as u64,
            prev_nr: win.prev_nr as u64,
            moved: win.moved,
        }
    }
}

/// A dropbehind folio of a read-ahead window (`struct spin_ra_folio`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RaFolio {
    /// Its first page's pfn.
    pub(crate) pfn: usize,
    /// Its index in the file.
    pub(crate) index: u64,
    /// Its pages.
    pub(crate) pages: u64,
}

/// What [`evict_dropbehind`] did with a folio (`enum filemap_evict`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Evict {
    /// No longer that folio of that file: consumed, truncated, invalidated or reclaimed.
    Gone,
    /// Removed from the page cache.
    Dropped,
    /// A CPU read or fault touched it, or it is mapped: it stays cached for good.
    Promoted,
    /// Locked, dirty, under writeback or off the LRU: left as it is.
    Busy,
}

impl Evict {
    fn from_raw(r: bindings::filemap_evict) -> Self {
        match r {
            bindings::filemap_evict_FILEMAP_EVICT_DROPPED => Evict::Dropped,
            bindings::filemap_evict_FILEMAP_EVICT_PROMOTED => Evict::Promoted,
            bindings::filemap_evict_FILEMAP_EVICT_BUSY => Evict::Busy,
            _ => Evict::Gone,
        }
    }
}

/// Evicts the folio at `pfn` if it is still the clean, unmapped dropbehind folio at `index` of
/// the file whose mapping is `mapping`: [`evict_dropbehind_batch`] for one folio.
pub(crate) fn evict_dropbehind(pfn: usize, mapping: usize, index: u64) -> Evict {
    let mut res = [Evict::Gone];
    evict_dropbehind_batch(mapping, &[(pfn, index)], &mut res);
    res[0]
}

/// The most folios [`evict_dropbehind_batch`] takes at once.
pub(crate) const EVICT_BATCH_MAX: usize = 16;

/// [`evict_dropbehind`] for the folios `(pfn, index)` of `folios` (at most
/// [`EVICT_BATCH_MAX`]), all recorded in the file whose mapping is `mapping`: the ones dropped
/// leave the page cache under one hold of its locks and are freed together
/// (`filemap_evict_dropbehind_batch()`). `res` receives what was done with each.
///
/// With fault injection (`fail_spin_evict`) it may find every folio busy without looking.
pub(crate) fn evict_dropbehind_batch(mapping: usize, folios: &[(usize, u64)], res: &mut [Evict]) {
    let n = folios.len().min(res.len()).min(EVICT_BATCH_MAX);
    // SAFETY: No preconditions.
    if unsafe { bindings::spin_should_fail_evict() } {
        res[..n].fill(Evict::Busy);
        return;
    }
    let mut pfns: [c_ulong; EVICT_BATCH_MAX] = [0; EVICT_BATCH_MAX];
    let mut indices = [0usize; EVICT_BATCH_MAX];
    let mut raw: [bindings::filemap_evict; EVICT_BATCH_MAX] = [0; EVICT_BATCH_MAX];
    for (i, &(pfn, index)) in folios[..n].iter().enumerate() {
        pfns[i] = pfn as c_ulong;
        indices[i] = index as usize;
    }
    // SAFETY: `filemap_evict_dropbehind_batch()` accepts any pfns and only compares `mapping`;
    // the three arrays hold `n` elements, `n` is at most `FOLIO_BATCH_SIZE` (31).
    unsafe {
        bindings::filemap_evict_dropbehind_batch(
            mapping as *const bindings::address_space,
            pfns.as_ptr(),
            indices.as_ptr(),
            raw.as_mut_ptr(),
            n as u32,
        )
    };
    for (r, &x) in res[..n].iter_mut().zip(&raw[..n]) {
        *r = Evict::from_raw(x);
    }
}

/// Moves the folios waiting in every CPU's LRU batches onto the LRU (`lru_add_drain_all()`):
/// a folio read ahead is off the LRU, where [`evict_dropbehind`] finds it busy, until the
/// batch of the CPU that added it is drained.
///
/// Sleeps: it waits for a work item on every CPU with a non-empty batch.
pub(crate) fn lru_add_drain_all() {
    // SAFETY: Callable from any process context that may sleep.
    unsafe { bindings::lru_add_drain_all() }
}

/// P2P legs in flight: asynchronous direct reads of one request (see `spin_aio_start()`).
///
/// A batch only exists inside [`with_aio`], which lends it out as `&mut` and waits for every
/// leg still in flight before it returns: the device never writes into the destination after
/// the request returned, whatever the borrower does (it can neither move the batch out nor
/// forget it).
///
/// # Invariants
///
/// `batch` has `started.len()` slots, allocated by `spin_aio_batch_alloc()`; `started[i]` is
/// whether slot `i` holds a leg that was started and not yet waited for.
pub(crate) struct AioBatch<'r, 'a> {
    req: &'r Request<'a>,
    batch: NonNull<bindings::spin_aio_batch>,
    started: KVVec<bool>,
}

/// Runs `f` with room for `n` P2P legs of `req` in flight, then waits for every leg `f` started
/// and did not wait for. Fails, without calling `f`, if the room cannot be allocated.
///
/// With `sync`, every leg is a synchronous direct read, done when [`AioBatch::start`] returns,
/// under the filesystem's locks for the whole I/O.
pub(crate) fn with_aio<'r, 'a, R>(
    req: &'r Request<'a>,
    n: usize,
    sync: bool,
    f: impl FnOnce(&mut AioBatch<'r, 'a>) -> R,
) -> Result<R> {
    let mut batch = AioBatch::new(req, n, sync)?;
    let r = f(&mut batch);
    batch.wait_all();
    Ok(r)
}

impl<'r, 'a> AioBatch<'r, 'a> {
    /// Room for `n` legs of `req`; only [`with_aio`] creates batches.
    fn new(req: &'r Request<'a>, n: usize, sync: bool) -> Result<Self> {
        let slots = u32::try_from(n).map_err(|_| EINVAL)?;
        let started = KVVec::from_elem(false, n, GFP_KERNEL)?;
        // SAFETY: No preconditions.
        let batch =
            NonNull::new(unsafe { bindings::spin_aio_batch_alloc(slots, sync) }).ok_or(ENOMEM)?;
        Ok(Self {
            req,
            batch,
            started,
        })
    }

    /// Starts reading `len` bytes at `pos` into user memory at `addr` by direct I/O in slot `idx`.
    pub(crate) fn start(&mut self, idx: usize, pos: i64, addr: usize, len: usize) -> Result {
        let slot = self.started.get_mut(idx).ok_or(EINVAL)?;
        if *slot {
            return Err(EBUSY);
        }
        // SAFETY: `idx` is a free slot of the batch (type invariants); the request's `iocb` is
        // valid (type invariants of `Request`) and outlives the batch, whose `with_aio` waits
        // for the leg before it returns.
        unsafe {
            bindings::spin_aio_start(
                self.batch.as_ptr(),
                idx as u32,
                self.req.iocb.as_ptr(),
                pos,
                addr as c_ulong,
                len,
            )
        };
        *slot = true;
        Ok(())
    }

    /// Waits for the leg in slot `idx`; returns the bytes it read.
    pub(crate) fn wait(&mut self, idx: usize) -> Result<usize> {
        let slot = self.started.get_mut(idx).ok_or(EINVAL)?;
        if !*slot {
            return Err(EINVAL);
        }
        *slot = false;
        // SAFETY: Slot `idx` holds a started leg (checked above).
        let ret = unsafe { bindings::spin_aio_wait(self.batch.as_ptr(), idx as u32) };
        if ret < 0 {
            return Err(Error::from_errno(ret as c_int));
        }
        Ok(ret as usize)
    }
}

impl AioBatch<'_, '_> {
    /// Waits for every leg started and not yet waited for.
    fn wait_all(&mut self) {
        for idx in 0..self.started.len() {
            if self.started[idx] {
                let _ = self.wait(idx);
            }
        }
    }
}

impl Drop for AioBatch<'_, '_> {
    fn drop(&mut self) {
        // `with_aio` waited already; again, in case the batch is dropped while unwinding.
        self.wait_all();
        // SAFETY: Every started leg was waited for; the batch came from
        // `spin_aio_batch_alloc()`.
        unsafe { bindings::spin_aio_batch_free(self.batch.as_ptr()) };
    }
}

/// Two batches of P2P legs, one per chunk, so that the legs of the next chunk are in flight
/// while the CPU copies the current one (see `route_pipelined()`).
///
/// A pipe only exists inside [`with_aio_pipe`], which lends it out as `&mut` and waits for every
/// leg of both batches before it returns. Its batches never leave it: [`AioPipe::open`] and
/// [`AioPipe::batch`] lend them out as `&mut` too, so that, as with [`with_aio`], the device
/// never writes into the destination after the request returned.
pub(crate) struct AioPipe<'r, 'a> {
    req: &'r Request<'a>,
    batches: [Option<AioBatch<'r, 'a>>; 2],
}

/// Runs `f` with an empty [`AioPipe`] for `req`, then waits for every leg still in flight in it.
/// The legs are asynchronous (see [`with_aio`] for the synchronous kind, which gains nothing
/// from a pipe).
pub(crate) fn with_aio_pipe<'r, 'a, R>(
    req: &'r Request<'a>,
    f: impl FnOnce(&mut AioPipe<'r, 'a>) -> R,
) -> R {
    let mut pipe = AioPipe {
        req,
        batches: [None, None],
    };
    let r = f(&mut pipe);
    pipe.close(0);
    pipe.close(1);
    r
}

impl<'r, 'a> AioPipe<'r, 'a> {
    /// Gives slot `k` (0 or 1) a new batch with room for `n` legs, after waiting for the legs
    /// of the batch it held, if any, and freeing it.
    pub(crate) fn open(&mut self, k: usize, n: usize) -> Result<&mut AioBatch<'r, 'a>> {
        let slot = self.batches.get_mut(k).ok_or(EINVAL)?;
        *slot = None;
        Ok(slot.insert(AioBatch::new(self.req, n, false)?))
    }

    /// The batch of slot `k`, if it has one.
    pub(crate) fn batch(&mut self, k: usize) -> Option<&mut AioBatch<'r, 'a>> {
        self.batches.get_mut(k)?.as_mut()
    }

    /// Waits for the legs of slot `k`'s batch still in flight, if any, and frees it.
    pub(crate) fn close(&mut self, k: usize) {
        if let Some(slot) = self.batches.get_mut(k) {
            *slot = None;
        }
    }
}

/// Iterator over the user segments of a [`Request`]'s destination, see [`Request::segments`].
pub(crate) struct Segments<'r, 'a> {
    iter: NonNull<bindings::iov_iter>,
    idx: usize,
    before: usize,
    _req: PhantomData<&'r Request<'a>>,
}

impl Iterator for Segments<'_, '_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        loop {
            let (mut addr, mut len) = (0, 0);
            // SAFETY: `iter` is the valid destination of the borrowed request (type invariants
            // of `Request`); the out-pointers are locals.
            let found = unsafe {
                bindings::spin_iter_segment(
                    self.iter.as_ptr(),
                    self.idx as c_ulong,
                    self.before,
                    &mut addr,
                    &mut len,
                )
            };
            if !found {
                return None;
            }
            self.idx += 1;
            self.before += len;
            if len > 0 {
                return Some((addr as usize, len));
            }
        }
    }
}

/// The p2pdma provider of the page mapped at `addr` in the mm whose `mmap_lock` `mmap` holds,
/// if it is a p2pdma page: user mappings of p2pdma memory that are not spin's dma-bufs, such
/// as upstream's `p2pmem/allocate` (see `spin_vma_p2p_provider()`).
pub(crate) fn p2p_provider_at(
    mmap: &kernel::mm::MmapReadGuard<'_>,
    addr: usize,
) -> Option<ARef<pci::Device>> {
    let vma = mmap.vma_lookup(addr)?;
    // SAFETY: `vma` is a VMA of the mm whose `mmap_lock` is held for read (`mmap`), as
    // `folio_walk_start()` requires, and holds `addr`; the helper only walks its page tables.
    let pdev = unsafe { bindings::spin_vma_p2p_provider(vma.as_ptr(), addr as c_ulong) };
    NonNull::new(pdev).map(|p| {
        // SAFETY: `spin_vma_p2p_provider()` returns the PCI device with a reference held for
        // us; `pci::Device` is a transparent wrapper of `struct pci_dev`.
        unsafe { ARef::from_raw(p.cast::<pci::Device>()) }
    })
}

/// Whether planning a routed request should fail, by fault injection (`fail_spin_plan`,
/// `CONFIG_SPIN_FAULT_INJECTION`; always `false` without it).
pub(crate) fn should_fail_plan() -> bool {
    // SAFETY: No preconditions.
    unsafe { bindings::spin_should_fail_plan() }
}
