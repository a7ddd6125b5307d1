// SPDX-License-Identifier: GPL-2.0

//! Per-inode verdicts: what the router learns about a file once and uses again on every read
//! into GPU memory.
//!
//! Deciding whether a file can be read by P2P at all takes `statx(STATX_DIOALIGN)`, a walk up
//! the disk's device tree, the disk table's lock and the P2P path verdict of the disk and the
//! GPU (`spin_file_check()`, [`state::disk`], [`state::p2p_refused`]); under TCG that is most of
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

use super::glue::{Fallback, FileInfo, Request, Stamp};
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
    let (reason, info) = req.file_check();
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
