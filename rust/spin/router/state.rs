// SPDX-License-Identifier: GPL-2.0

//! The router's global state: the mode, the switches, the counters and the per-disk cost
//! parameters (shown and set through `super::sysfs`).
//!
//! Locking: the mode and all counters are atomics, read and bumped without locks. The per-disk
//! table is a red-black tree under one global mutex, [`DISKS`], held only to look an entry up
//! (`O(log n)`), create it or change its parameters; the router copies a disk's [`Params`] and
//! clones its counters' [`Arc`] under it and lets go before doing any I/O. The P2P path verdict
//! of a disk (see [`p2p_refused`]) is found without it and stored under it.

use super::glue::{DiskKey, Fallback, FileInfo, Member, Request};
use crate::sched::Params;
use core::fmt::Write;
use kernel::{
    bindings, pci,
    prelude::*,
    rbtree::{self, RBTree, RBTreeNodeReservation},
    str::Formatter,
    sync::{
        aref::ARef,
        atomic::{Acquire, Atomic, Full, Relaxed},
        global_lock, Arc,
    },
};

/// How reads into GPU memory are routed (`/sys/kernel/spin/mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The cheapest mix per request (the default).
    Auto,
    /// Every aligned byte by P2P DMA.
    P2p,
    /// Everything through the page cache.
    PageCache,
    /// Not routed at all: every request goes on as without spin.
    Off,
}

impl Mode {
    /// Every mode.
    pub(crate) const ALL: [Mode; 4] = [Mode::Auto, Mode::P2p, Mode::PageCache, Mode::Off];

    /// The mode named `name`.
    pub(crate) fn from_name(name: &[u8]) -> Option<Mode> {
        Self::ALL.into_iter().find(|m| m.name().to_bytes() == name)
    }

    /// The mode's name in sysfs and in the tracepoint.
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            Mode::Auto => c"auto",
            Mode::P2p => c"p2p",
            Mode::PageCache => c"pagecache",
            Mode::Off => c"off",
        }
    }
}

static MODE: Atomic<i32> = Atomic::new(0);

/// The mode of a request already being routed: [`Mode::Off`], set since the request came in,
/// applies to requests that start after it; this one completes as in [`Mode::PageCache`].
pub(crate) fn routing_mode() -> Mode {
    match mode() {
        Mode::Off => Mode::PageCache,
        m => m,
    }
}

/// The current mode.
pub(crate) fn mode() -> Mode {
    let v = MODE.load(Relaxed);
    Mode::ALL
        .into_iter()
        .find(|m| *m as i32 == v)
        .unwrap_or(Mode::Auto)
}

/// Sets the mode.
pub(crate) fn set_mode(m: Mode) {
    MODE.store(m as i32, Relaxed);
}

/// `/sys/kernel/spin/atomic_reads`: 1 (the default) keeps the read/write exclusion of
/// filesystems whose buffered reads exclude buffered writers (XFS) by issuing their P2P legs
/// synchronously; 0 keeps them asynchronous (overlapped with the copies), as elsewhere.
static ATOMIC_READS: Atomic<i32> = Atomic::new(1);

/// Whether P2P legs keep a filesystem's read/write exclusion (see [`ATOMIC_READS`]).
pub(crate) fn atomic_reads() -> bool {
    ATOMIC_READS.load(Relaxed) != 0
}

/// Sets [`ATOMIC_READS`].
pub(crate) fn set_atomic_reads(on: bool) {
    ATOMIC_READS.store(i32::from(on), Relaxed);
}

/// `/sys/kernel/spin/pipeline`: 1 (the default) lets a read of more than one chunk start the
/// P2P legs of the next chunk before it copies the current one; 0 reads chunk after chunk (for
/// comparison, `make bench-pipe`).
static PIPELINE: Atomic<i32> = Atomic::new(1);

/// Whether the chunks of a read are pipelined (see [`PIPELINE`]).
pub(crate) fn pipeline() -> bool {
    PIPELINE.load(Relaxed) != 0
}

/// Sets [`PIPELINE`].
pub(crate) fn set_pipeline(on: bool) {
    PIPELINE.store(i32::from(on), Relaxed);
}

/// The router's epoch: bumped whenever something a per-inode verdict depends on changes outside
/// the file (see `super::verdict`): a disk's parameters are written, a disk is released, a
/// p2pdma provider comes or goes.
static EPOCH: Atomic<u64> = Atomic::new(0);

/// The current epoch.
pub(crate) fn epoch() -> u64 {
    EPOCH.load(Acquire)
}

/// Starts a new epoch: every per-inode verdict is checked again.
pub(crate) fn new_epoch() {
    EPOCH.fetch_add(1, Full);
}

/// Counters of one direction of routed requests: reads into GPU memory or writes from it.
struct Flow {
    requests: Atomic<u64>,
    bytes_pc: Atomic<u64>,
    bytes_p2p: Atomic<u64>,
    segs_pc: Atomic<u64>,
    segs_p2p: Atomic<u64>,
    io_error: Atomic<u64>,
    internal: Atomic<u64>,
    fallback: [Atomic<u64>; Fallback::ALL.len()],
}

impl Flow {
    const fn new() -> Self {
        Self {
            requests: Atomic::new(0),
            bytes_pc: Atomic::new(0),
            bytes_p2p: Atomic::new(0),
            segs_pc: Atomic::new(0),
            segs_p2p: Atomic::new(0),
            io_error: Atomic::new(0),
            internal: Atomic::new(0),
            fallback: [const { Atomic::new(0) }; Fallback::ALL.len()],
        }
    }

    fn request(&self, reason: Fallback) {
        self.requests.add(1, Relaxed);
        if reason != Fallback::None {
            self.fallback[reason as usize].add(1, Relaxed);
        }
    }

    fn segment(&self, p2p: bool, bytes: u64) {
        if p2p {
            self.segs_p2p.add(1, Relaxed);
            self.bytes_p2p.add(bytes, Relaxed);
        } else {
            self.segs_pc.add(1, Relaxed);
            self.bytes_pc.add(bytes, Relaxed);
        }
    }

    /// Shows the counters, each name after `prefix`; the fallback reasons in `skip` are left
    /// out (they cannot happen in this direction), and so is `fallback_internal` unless
    /// `planned` (writes are not planned).
    fn show(
        &self,
        f: &mut Formatter<'_>,
        prefix: &str,
        skip: &[Fallback],
        planned: bool,
    ) -> core::fmt::Result {
        let v = |a: &Atomic<u64>| a.load(Relaxed);
        writeln!(f, "{prefix}requests {}", v(&self.requests))?;
        writeln!(f, "{prefix}bytes_pagecache {}", v(&self.bytes_pc))?;
        writeln!(f, "{prefix}bytes_p2p {}", v(&self.bytes_p2p))?;
        writeln!(f, "{prefix}segments_pagecache {}", v(&self.segs_pc))?;
        writeln!(f, "{prefix}segments_p2p {}", v(&self.segs_p2p))?;
        let reasons = Fallback::ALL.iter().zip(&self.fallback).skip(1);
        for (reason, count) in reasons.filter(|(r, _)| !skip.contains(r)) {
            let name = reason.name().to_str().unwrap_or("?");
            writeln!(f, "{prefix}fallback_{name} {}", v(count))?;
        }
        writeln!(f, "{prefix}fallback_io_error {}", v(&self.io_error))?;
        if planned {
            writeln!(f, "{prefix}fallback_internal {}", v(&self.internal))?;
        }
        Ok(())
    }
}

/// Counters of routed requests, for one disk or for the whole system.
pub(crate) struct Counters {
    reads: Flow,
    ra_requests: Atomic<u64>,
    /// Requests of `ra_requests` that missed: counted instead of the hits, so that a hit,
    /// by far the common case, costs one atomic operation per set of counters.
    ra_misses: Atomic<u64>,
    ra_pages: Atomic<u64>,
    cached: Atomic<u64>,
    pipelined: Atomic<u64>,
    ahead: Atomic<u64>,
    writes: Flow,
}

impl Counters {
    const fn new() -> Self {
        Self {
            reads: Flow::new(),
            ra_requests: Atomic::new(0),
            ra_misses: Atomic::new(0),
            ra_pages: Atomic::new(0),
            cached: Atomic::new(0),
            pipelined: Atomic::new(0),
            ahead: Atomic::new(0),
            writes: Flow::new(),
        }
    }

    fn show(&self, f: &mut Formatter<'_>) -> core::fmt::Result {
        let v = |a: &Atomic<u64>| a.load(Relaxed);
        // Only writes can go to the end of the file.
        self.reads
            .show(f, "", &[Fallback::Append, Fallback::Split], true)?;
        // Misses first: a miss is counted after its request, so the difference is not
        // negative but for the reordering of relaxed counters, which the saturation covers.
        let misses = v(&self.ra_misses);
        let requests = v(&self.ra_requests);
        writeln!(f, "ra_requests {requests}")?;
        writeln!(f, "ra_hits {}", requests.saturating_sub(misses))?;
        writeln!(f, "ra_pages_prefetched {}", v(&self.ra_pages))?;
        writeln!(f, "cached_requests {}", v(&self.cached))?;
        writeln!(f, "pipelined_chunks {}", v(&self.pipelined))?;
        writeln!(f, "ahead_chunks {}", v(&self.ahead))?;
        self.writes.show(f, "write_", &[], false)
    }
}

/// The system-wide counters.
static GLOBAL: Counters = Counters::new();

/// Where a request's numbers go: the global counters and, if the file has a disk, the disk's.
pub(crate) struct Account {
    disk: Option<Arc<Counters>>,
}

impl Account {
    /// The account of a disk whose counters are `disk` (`None`: only the global counters).
    pub(crate) fn new(disk: Option<Arc<Counters>>) -> Self {
        Account { disk }
    }

    /// The disk's counters, if any.
    pub(crate) fn disk_counters(&self) -> Option<Arc<Counters>> {
        self.disk.clone()
    }

    /// A request was read wholly from the page cache by one copy, without a plan.
    pub(crate) fn cached(&self) {
        self.each(|c| c.cached.add(1, Relaxed));
    }

    /// A chunk's P2P legs were started while the chunk before it was still being read.
    pub(crate) fn pipelined(&self) {
        self.each(|c| c.pipelined.add(1, Relaxed));
    }

    /// A chunk of a stream was read through the page cache with read-ahead, which beat its
    /// schedule.
    pub(crate) fn ahead(&self) {
        self.each(|c| c.ahead.add(1, Relaxed));
    }

    fn each(&self, f: impl Fn(&Counters)) {
        f(&GLOBAL);
        if let Some(disk) = &self.disk {
            f(disk);
        }
    }

    /// A request was routed; `reason` is [`Fallback::None`] if it was scheduled.
    pub(crate) fn request(&self, reason: Fallback) {
        self.each(|c| c.reads.request(reason));
    }

    /// A segment of `bytes` was transferred by P2P DMA (`p2p`) or by page-cache copy.
    pub(crate) fn segment(&self, p2p: bool, bytes: usize) {
        self.each(|c| c.reads.segment(p2p, bytes as u64));
    }

    /// A small sequential read was taken through the page cache with read-ahead (GPU
    /// read-ahead); `hit` if its first page was cached when it came.
    pub(crate) fn ra_request(&self, hit: bool) {
        self.each(|c| {
            c.ra_requests.add(1, Relaxed);
            if !hit {
                c.ra_misses.add(1, Relaxed);
            }
        });
    }

    /// Read-ahead during a GPU page-cache leg brought `pages` pages into the partition.
    pub(crate) fn ra_pages(&self, pages: u64) {
        self.each(|c| {
            c.ra_pages.add(pages, Relaxed);
        });
    }

    /// A P2P segment failed and is redone through the page cache.
    pub(crate) fn io_error(&self) {
        self.each(|c| {
            c.reads.io_error.add(1, Relaxed);
        });
    }

    /// A write was routed; `reason` is [`Fallback::None`] if it was split.
    pub(crate) fn write_request(&self, reason: Fallback) {
        self.each(|c| c.writes.request(reason));
    }

    /// A write segment of `bytes` went by P2P DMA (`p2p`: a direct write) or through the page
    /// cache.
    pub(crate) fn write_segment(&self, p2p: bool, bytes: usize) {
        self.each(|c| c.writes.segment(p2p, bytes as u64));
    }

    /// A direct write segment failed and is redone through the page cache.
    pub(crate) fn write_io_error(&self) {
        self.each(|c| {
            c.writes.io_error.add(1, Relaxed);
        });
    }

    /// Planning a routed read failed (an allocation, a geometry the planner does not handle);
    /// its part is copied through the page cache instead.
    pub(crate) fn internal(&self) {
        self.each(|c| {
            c.reads.internal.add(1, Relaxed);
        });
    }
}

/// One disk's entry, dropped when the disk is released (`spin_disk_release()`).
struct Disk {
    params: Params,
    counters: Arc<Counters>,
    /// The last P2P path verdict for this disk (see [`p2p_refused`]).
    path: Option<Path>,
}

/// A remembered P2P path verdict between a GPU and a disk.
///
/// Holding the device references keeps the pointers unique while they are compared.
struct Path {
    gpu: ARef<pci::Device>,
    /// The disk's own PCI device; `None` for a stacked disk.
    client: Option<ARef<pci::Device>>,
    /// For a stacked disk: the generation of the stacks the verdict was found in.
    generation: u64,
    /// The disk whose PCI device the GPU cannot reach, if any.
    refused: Option<u32>,
}

impl Path {
    fn answers(&self, info: &FileInfo, gpu: &pci::Device) -> bool {
        let same = |a: &pci::Device, b: &pci::Device| core::ptr::eq(a, b);
        same(&*self.gpu, gpu)
            && match (&self.client, &info.client) {
                (Some(c), Some(d)) => same(&**c, &**d),
                (None, None) => info.stacked && self.generation == info.generation,
                _ => false,
            }
    }
}

/// Whether P2P DMA between `gpu` and the PCI device of every disk under the file's disk is
/// possible: `None` if it is, else the device number of the first disk refused (the file's own
/// disk if it has no PCI device, or if its stack cannot be listed).
///
/// A plain disk is its own bottom; a stacked one (md, dm, NVMe multipath) is walked down to the
/// disks that are built on no others, each of which must reach the GPU. The verdict is remembered
/// per disk for the last GPU asked, and for a stacked disk until any stack of disks changes.
pub(crate) fn p2p_refused(req: &Request<'_>, info: &FileInfo, gpu: &pci::Device) -> Option<u32> {
    let cached = DISKS
        .lock()
        .get(&info.key())
        .and_then(|d| d.path.as_ref())
        .filter(|p| p.answers(info, gpu))
        .map(|p| p.refused);
    if let Some(refused) = cached {
        return refused;
    }
    let refused = match (&info.client, info.stacked) {
        (Some(client), _) => gpu
            .p2pdma_distance((**client).as_ref())
            .is_none()
            .then_some(info.devt),
        (None, false) => Some(info.devt),
        (None, true) => match req.members() {
            Ok(members) => refused_member(gpu, &members),
            Err(_) => Some(info.devt),
        },
    };
    if let Some(d) = DISKS.lock().get_mut(&info.key()) {
        d.path = Some(Path {
            gpu: gpu.into(),
            client: info.client.clone(),
            generation: info.generation,
            refused,
        });
    }
    refused
}

/// The first of `members` whose queue refuses P2PDMA pages (an NVMe/TCP or loop path, a
/// virtio disk): the member a stack without `BLK_FEAT_PCI_P2PDMA` lacks it for.
pub(crate) fn queue_refused_member(members: &[Member]) -> Option<u32> {
    members.iter().find(|m| !m.p2pdma).map(|m| m.devt)
}

/// The first of `members` whose PCI device `gpu` cannot reach by P2P DMA (or that has none).
///
/// A member's PCI device is the one that moves its data (`spin_disk_pci_dev()`): for an NVMe
/// over RDMA path the NIC, which must reach the GPU, not the target's drive.
pub(crate) fn refused_member(gpu: &pci::Device, members: &[Member]) -> Option<u32> {
    members
        .iter()
        .find(|m| {
            m.pdev
                .as_deref()
                .and_then(|p| gpu.p2pdma_distance(p.as_ref()))
                .is_none()
        })
        .map(|m| m.devt)
}

/// Entries this many at most: one per disk that exists and was routed to or configured.
const MAX_DISKS: usize = 4096;

/// The per-disk entries.
struct Disks {
    /// The entries; [`None`] until the first one is created.
    tree: Option<RBTree<DiskKey, Disk>>,
    /// The number of entries.
    len: usize,
}

impl Disks {
    fn get(&self, key: &DiskKey) -> Option<&Disk> {
        self.tree.as_ref()?.get(key)
    }

    fn get_mut(&mut self, key: &DiskKey) -> Option<&mut Disk> {
        self.tree.as_mut()?.get_mut(key)
    }

    /// Drops the entries of disk `id` (the disk and its partitions).
    fn remove_disk(&mut self, id: usize) {
        let Some(tree) = self.tree.as_mut() else {
            return;
        };
        let mut cursor = tree.cursor_lower_bound_mut(&DiskKey { devt: 0, id });
        while let Some(c) = cursor {
            if c.current().0.id != id {
                break;
            }
            let (next, node) = c.remove_current();
            drop(node);
            self.len -= 1;
            cursor = next.filter(|n| n.current().0.id == id);
        }
    }
}

global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the router or sysfs can use it.
    unsafe(uninit) static DISKS: Mutex<Disks> = Disks { tree: None, len: 0 };
}

/// Initialises the state; called once from module init.
pub(crate) fn init() {
    // SAFETY: Called once, before any other use of `DISKS`.
    unsafe { DISKS.init() };
}

/// The default parameters: a PCIe Gen4 NVMe SSD (see `sched::Params::gen4`).
pub(crate) fn default_params() -> Result<Params> {
    Params::gen4().map_err(|_| EINVAL)
}

/// The entry of disk `key`, created with the default parameters if there is none.
fn entry(disks: &mut Disks, key: DiskKey) -> Result<&mut Disk> {
    let len = disks.len;
    let tree = disks.tree.get_or_insert_with(RBTree::new);
    match tree.entry(key) {
        rbtree::Entry::Occupied(e) => Ok(e.into_mut()),
        rbtree::Entry::Vacant(e) => {
            if len >= MAX_DISKS {
                return Err(ENOSPC);
            }
            let disk = Disk {
                params: default_params()?,
                counters: Arc::new(Counters::new(), GFP_KERNEL)?,
                path: None,
            };
            let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
            disks.len = len + 1;
            Ok(e.insert(disk, node))
        }
    }
}

/// The parameters and the account of disk `key` (device number 0: no disk), creating its entry
/// if needed.
///
/// With the table full, the disk gets the default parameters and only the global counters.
pub(crate) fn disk(key: DiskKey) -> Result<(Params, Account)> {
    if key.devt != 0 {
        if let Ok(d) = entry(&mut DISKS.lock(), key) {
            let account = Account {
                disk: Some(d.counters.clone()),
            };
            return Ok((d.params, account));
        }
    }
    Ok((default_params()?, Account { disk: None }))
}

/// A disk is released (`disk_release()` in `block/genhd.c`): drops its entry, with its
/// counters, cost parameters and remembered P2P verdict. Nothing can reach the disk any more.
#[no_mangle]
extern "C" fn spin_disk_release(disk: *mut bindings::gendisk) {
    // The address is the disk's identity: compared, never followed.
    DISKS.lock().remove_disk(disk as usize);
    new_epoch();
}

/// Shows the system-wide counters.
pub(crate) fn show_global(f: &mut Formatter<'_>) -> core::fmt::Result {
    GLOBAL.show(f)
}

/// The number of disk entries.
pub(crate) fn disk_entries() -> usize {
    DISKS.lock().len
}

/// Shows the counters of disk `key` (all zero if it has no entry).
pub(crate) fn show_disk(key: DiskKey, f: &mut Formatter<'_>) -> core::fmt::Result {
    let disks = DISKS.lock();
    match disks.get(&key) {
        Some(d) => d.counters.show(f),
        None => Counters::new().show(f),
    }
}

/// The cost parameters of disk `key` (the defaults if it has no entry).
pub(crate) fn disk_params(key: DiskKey) -> Result<Params> {
    match DISKS.lock().get(&key) {
        Some(d) => Ok(d.params),
        None => default_params(),
    }
}

/// Replaces the cost parameters of disk `key` with what `f` makes of them, creating its entry
/// if needed; every per-inode verdict is checked again.
pub(crate) fn update_disk_params(
    key: DiskKey,
    f: impl FnOnce(&Params) -> Result<Params>,
) -> Result {
    let mut disks = DISKS.lock();
    let d = entry(&mut disks, key)?;
    d.params = f(&d.params)?;
    new_epoch();
    Ok(())
}

#[cfg(CONFIG_SPIN_KUNIT_TEST)]
#[kunit_tests(rust_spin_router)]
mod tests {
    use super::*;
    use crate::router::glue;

    fn member(devt: u32, pdev: Option<&ARef<pci::Device>>, p2pdma: bool) -> Member {
        Member {
            devt,
            pdev: pdev.cloned(),
            p2pdma,
        }
    }

    /// The verdict on the members of a stack with fabric paths, whose transports the rig cannot
    /// all provide. The GPU stands in for the PCI device of a P2P-capable RDMA NIC behind its
    /// own switch (its distance to itself is 0); the host bridge, which the GPU's P2P traffic
    /// cannot cross on most hosts, for a NIC it cannot reach. Needs a bound p2pdma provider.
    #[test]
    fn fabric_members() -> Result {
        let providers = glue::p2p_providers()?;
        let gpu = providers.first().ok_or(ENODEV)?;
        let far = pci::Device::find_by_name(c"0000:00:00.0").ok_or(ENODEV)?;
        let (local, rdma, tcp, rxe, rdma_far) = (1, 2, 3, 4, 5);
        // A local drive and an NVMe/RDMA path whose NIC reaches the GPU: P2P for both.
        let ok = [
            member(local, Some(gpu), true),
            member(rdma, Some(gpu), true),
        ];
        assert_eq!(queue_refused_member(&ok), None);
        assert_eq!(refused_member(gpu, &ok), None);
        // NVMe/TCP and NVMe over soft-RoCE: no DMA device, and no P2PDMA pages on the queue.
        let sw = [
            member(local, Some(gpu), true),
            member(tcp, None, false),
            member(rxe, None, false),
        ];
        assert_eq!(queue_refused_member(&sw), Some(tcp));
        assert_eq!(refused_member(gpu, &sw), Some(tcp));
        // An RDMA NIC that takes P2PDMA pages but cannot reach this GPU (a host whose root
        // complex forwards P2P traffic, an AMD Zen one, reaches the host bridge: then it passes).
        let unreachable = [
            member(local, Some(gpu), true),
            member(rdma_far, Some(&far), true),
        ];
        let reached = gpu.p2pdma_distance((*far).as_ref()).is_some();
        assert_eq!(queue_refused_member(&unreachable), None);
        assert_eq!(
            refused_member(gpu, &unreachable),
            (!reached).then_some(rdma_far)
        );
        Ok(())
    }

    #[test]
    fn stat_lists_every_counter() {
        let c = Counters::new();
        c.reads.fallback[Fallback::Queue as usize].add(3, Relaxed);
        c.writes.fallback[Fallback::Append as usize].add(2, Relaxed);
        let mut buf = [0u8; 2048];
        let mut f = Formatter::new(&mut buf);
        assert!(c.show(&mut f).is_ok());
        let n = f.bytes_written();
        let text = core::str::from_utf8(&buf[..n]).unwrap_or("");
        assert!(text.starts_with("requests 0\n"));
        assert!(text.contains("\nfallback_queue 3\n"));
        assert!(text.contains("\nfallback_no_bdev 0\n"));
        assert!(text.contains("\nfallback_io_error 0\n"));
        assert!(text.contains("\nra_pages_prefetched 0\ncached_requests 0\npipelined_chunks 0\n"));
        assert!(text.contains("\npipelined_chunks 0\nahead_chunks 0\nwrite_requests 0\n"));
        assert!(text.contains("\nwrite_fallback_append 2\n"));
        assert!(!text.contains("\nfallback_append"));
        assert!(!text.contains("\nfallback_split"));
        assert!(text.contains("\nwrite_fallback_split 0\n"));
        assert!(text.contains("\nfallback_internal 0\n"));
        assert!(text.ends_with("write_fallback_split 0\nwrite_fallback_io_error 0\n"));
        assert!(!text.contains("write_fallback_internal"));
        assert!(!text.contains("fallback_none"));
        assert_eq!(text.lines().count(), 17 + 9 + 9);
    }
}
