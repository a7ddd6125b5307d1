// SPDX-License-Identifier: GPL-2.0

//! Per-inode verdicts: what the router learns about a file once and uses again on every read
//! into GPU memory.
//!
//! Deciding whether a file can be read by P2P at all takes `statx(STATX_DIOALIGN)`, a walk up
//! the disk's device tree, the disk table's lock and the P2P path verdict of the disk and the
//! GPU ([`file_check`], [`state::disk`], [`state::p2p_refused`]); under TCG that is most of
//! the router's cost on a small cached read. The answer changes rarely, so it is kept here,
//! per inode, together with the disk's parameters and counters, in a small direct-mapped table
//! indexed by the inode's address.
//!
//! An entry is used again only while everything its answer depends on is unchanged:
//! - the file's [`Stamp`] (`spin_file_stamp()`): the inode's identity, flags and ctime, whether
//!   the open file can do direct I/O, whether the disk's queue takes P2PDMA pages and the
//!   generation of the stacks of disks;
//! - the router's epoch ([`state::epoch`]), bumped when a disk's parameters are written, a disk
//!   is released or a p2pdma provider comes or goes;
//! - for the path verdict, the GPU, compared by identity (the entry holds a reference on it).
//!
//! Locking: one spinlock, [`VERDICTS`], held only to compare and copy an entry; an entry that
//! is replaced is dropped after the lock is released (dropping its references may sleep). No
//! other lock is taken under it.

use super::glue::{Fallback, FileFacts, FileInfo, Request, Stamp};
use super::state::{self, Account, Counters};
use crate::sched::Params;
use kernel::{
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        global_lock, Arc,
    },
};

/// Entries in the table: a power of two.
const SLOTS: usize = 64;

/// What the router knows about a file.
pub(crate) struct Verdict {
    /// Why the file cannot be read by P2P at all ([`Fallback::None`] if it can).
    pub(crate) reason: Fallback,
    /// The file's details (without the PCI device reference).
    pub(crate) info: FileInfo,
    /// The cost parameters of its disk.
    pub(crate) params: Params,
    /// Where its requests are counted.
    pub(crate) account: Account,
    /// With [`Fallback::None`]: the disk under the file that the GPU cannot reach, if any
    /// (fallback `distance`, see [`state::p2p_refused`]).
    pub(crate) refused: Option<u32>,
}

/// One entry of the table.
struct Entry {
    stamp: Stamp,
    epoch: u64,
    gpu: ARef<pci::Device>,
    reason: Fallback,
    info: FileInfo,
    params: Params,
    counters: Option<Arc<Counters>>,
    refused: Option<u32>,
}

global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the router can use it.
    unsafe(uninit) static VERDICTS: SpinLock<[Option<Entry>; SLOTS]> = [const { None }; SLOTS];
}

/// Lookups answered by the table and lookups that had to check the file.
static HITS: Atomic<u64> = Atomic::new(0);
static MISSES: Atomic<u64> = Atomic::new(0);

/// Sets the table up; called once from module init.
pub(crate) fn init() {
    // SAFETY: Called once, before any other use of `VERDICTS`.
    unsafe { VERDICTS.init() };
}

/// The slot of an inode: its address, whose low bits are the same for every inode of a slab.
fn slot(inode: usize) -> usize {
    let h = (inode as u64 >> 6).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 58) as usize % SLOTS
}

/// What the router knows about the file of `req` for reads into the memory of `gpu`: the
/// remembered answer if it still holds, else a fresh one, which is remembered.
pub(crate) fn get(req: &Request<'_>, gpu: &pci::Device) -> Result<Verdict> {
    let stamp = req.stamp();
    let epoch = state::epoch();
    let i = slot(stamp.inode());
    {
        let table = VERDICTS.lock();
        if let Some(e) = &table[i] {
            if e.stamp == stamp && e.epoch == epoch && core::ptr::eq(&*e.gpu, gpu) {
                HITS.add(1, Relaxed);
                return Ok(Verdict {
                    reason: e.reason,
                    info: e.info.without_client(),
                    params: e.params,
                    account: Account::new(e.counters.clone()),
                    refused: e.refused,
                });
            }
        }
    }
    MISSES.add(1, Relaxed);
    let (reason, info) = file_check(req);
    let (params, account) = state::disk(info.key())?;
    let refused = match reason {
        Fallback::None => state::p2p_refused(req, &info, gpu),
        _ => None,
    };
    let entry = Entry {
        stamp,
        epoch,
        gpu: gpu.into(),
        reason,
        info: info.without_client(),
        params,
        counters: account.disk_counters(),
        refused,
    };
    let old = VERDICTS.lock()[i].replace(entry);
    // The replaced entry's references are dropped here, without the lock.
    drop(old);
    Ok(Verdict {
        reason,
        info,
        params,
        account,
        refused,
    })
}

/// The table's counters, for `/sys/kernel/spin/stat`: lookups answered from it and lookups
/// that checked the file.
pub(crate) fn counts() -> (u64, u64) {
    (HITS.load(Relaxed), MISSES.load(Relaxed))
}

/// The direct I/O alignments of a file whose data P2P direct I/O can reach, or why it cannot:
/// no block device, no direct I/O (statx(`STATX_DIOALIGN`) reports none: ext4 with
/// `data=journal` or inline data, ...), a DAX, encrypted, verity or swap file, or a queue that
/// refuses P2PDMA pages. Whether the GPU can reach the disk is checked afterwards
/// (`state::p2p_refused`).
fn classify(f: &FileFacts) -> core::result::Result<(u32, u32), Fallback> {
    if f.devt == 0 {
        return Err(Fallback::NoBdev);
    }
    if !f.can_odirect {
        return Err(Fallback::NoDirectIo);
    }
    if f.special_inode {
        return Err(Fallback::Inode);
    }
    if f.dio_offset_align == 0 || f.dio_mem_align == 0 {
        return Err(Fallback::NoDirectIo);
    }
    if !f.queue_p2p {
        return Err(Fallback::Queue);
    }
    Ok((
        f.dio_offset_align.max(f.logical_block_size),
        f.dio_mem_align.max(f.dma_alignment),
    ))
}

/// Checks whether the file of `req` can be read or written by P2P direct I/O at all, and what
/// the router needs to know about it.
pub(crate) fn file_check(req: &Request<'_>) -> (Fallback, FileInfo) {
    let f = req.file_facts();
    let mut info = FileInfo {
        devt: f.devt,
        ino: f.ino,
        offset_align: 0,
        mem_align: 0,
        client: None,
        stacked: false,
        generation: 0,
        member: 0,
        disk_id: f.disk_id,
        reads_exclude_writes: false,
        dio_excl: false,
    };
    match classify(&f) {
        Err(Fallback::Queue) if f.stacked => {
            // Name the disk under the stack whose queue refuses P2PDMA pages (an NVMe over
            // Fabrics path, a virtio disk), or the stack itself if it cannot be listed.
            info.member = req
                .members()
                .ok()
                .and_then(|members| state::queue_refused_member(&members))
                .unwrap_or(f.devt);
            (Fallback::Queue, info)
        }
        Err(reason) => (reason, info),
        Ok((offset_align, mem_align)) => {
            info.offset_align = offset_align;
            info.mem_align = mem_align;
            info.stacked = f.stacked;
            info.generation = f.generation;
            // An asynchronous direct read drops XFS's IOLOCK once submitted: only
            // synchronous P2P legs keep a read's exclusion of writers.
            info.reads_exclude_writes = f.read_excl;
            info.dio_excl = f.dio_excl;
            if !f.stacked {
                info.client = req.file_pci_dev();
            }
            (Fallback::None, info)
        }
    }
}

#[cfg(CONFIG_SPIN_KUNIT_TEST)]
#[kunit_tests(rust_spin_verdict)]
mod tests {
    use super::*;

    fn usable() -> FileFacts {
        FileFacts {
            ino: 12,
            devt: (259 << 20) | 1,
            disk_id: 0x1000,
            can_odirect: true,
            dio_offset_align: 512,
            dio_mem_align: 4,
            queue_p2p: true,
            logical_block_size: 4096,
            dma_alignment: 512,
            ..FileFacts::default()
        }
    }

    #[test]
    fn reasons_in_order() {
        assert_eq!(classify(&usable()), Ok((4096, 512)));
        // Each fact refuses on its own, and the first refusal is the one reported.
        let no_bdev = FileFacts {
            devt: 0,
            queue_p2p: false,
            ..usable()
        };
        assert_eq!(classify(&no_bdev), Err(Fallback::NoBdev));
        let no_odirect = FileFacts {
            can_odirect: false,
            special_inode: true,
            ..usable()
        };
        assert_eq!(classify(&no_odirect), Err(Fallback::NoDirectIo));
        let special = FileFacts {
            special_inode: true,
            dio_offset_align: 0,
            ..usable()
        };
        assert_eq!(classify(&special), Err(Fallback::Inode));
        let no_align = FileFacts {
            dio_mem_align: 0,
            queue_p2p: false,
            ..usable()
        };
        assert_eq!(classify(&no_align), Err(Fallback::NoDirectIo));
        let queue = FileFacts {
            queue_p2p: false,
            ..usable()
        };
        assert_eq!(classify(&queue), Err(Fallback::Queue));
    }

    #[test]
    fn alignment_is_the_stricter() {
        let f = FileFacts {
            dio_offset_align: 8192,
            dio_mem_align: 4096,
            ..usable()
        };
        assert_eq!(classify(&f), Ok((8192, 4096)));
    }
}
