// SPDX-License-Identifier: GPL-2.0

//! The writer: buffered writes from GPU memory as P2P direct writes (SPIN, USENIX ATC'17,
//! §5.2).
//!
//! CPU reads from a GPU BAR run at tens of MB/s, two to three orders of magnitude slower than
//! CPU writes, so a buffered write whose source is GPU memory is slowest when the CPU copies it
//! into the page cache. `spin_write_iter()` (include/linux/spin.h), called by the VFS write entry
//! points inside `file_start_write()`, hands every write that may come from GPU memory to
//! [`super::spin_router_write_iter`] (through `spin_route_write_iter()`, C); a write whose source
//! is one piece of a user mapping of a spin dma-buf comes here.
//!
//! A routed write keeps every promise of the buffered write it replaces: it is atomic against
//! other writes, on XFS against buffered reads too, and an `O_APPEND` write lands whole at the
//! end of the file the filesystem finds under its lock. So a write is never cut into legs: it
//! goes whole, either as **one direct write** whose bios carry the GPU pages (the device reads
//! the BAR) or as the unchanged buffered write. The direct write carries `IOCB_DIO_EXCL`: the
//! filesystem holds its I/O lock exclusively from its write checks until the write has
//! completed, as for a buffered write (`FOP_DIO_EXCL`: ext4 and XFS).
//!
//! [`route`] sends it direct when its file offset (the end of the file, if it appends), its
//! length and its GPU address are aligned for direct I/O; otherwise through the page cache, with
//! the reason counted (`split`, `append`, `misaligned`, ...).
//!
//! Consistency comes with direct I/O: a direct write writes back the dirty page cache over its
//! range before the device reads the source, and invalidates (and unmaps) the cached pages of
//! the range afterwards, so no cached page of the written range keeps stale data and mapped
//! readers fault the new bytes in. File-write semantics stay the filesystem's: the write goes
//! through its `->write_iter()`, which checks permissions and limits (`RLIMIT_FSIZE`,
//! `s_maxbytes`), updates size and timestamps, honours `IOCB_DSYNC`/`IOCB_SYNC` and allocates
//! blocks (holes, unwritten extents, delayed allocation).
//!
//! A direct write refused before anything of it is visible, for a reason the page cache does not
//! share (an end of file that moved to an unaligned place, a range the filesystem cannot write
//! directly, a P2P mapping refused, no space for the direct allocation), is counted and redone
//! through the page cache, which then reports what it can write; every other error is the
//! request's own and returned as it is. The direct write is synced afterwards if the request
//! asks for it (`O_SYNC`, `O_DSYNC`, `RWF_SYNC`, `RWF_DSYNC`), so that a failed sync is never
//! taken for a failed write. `RWF_ATOMIC` writes are not routed. See
//! Documentation/spin/writer.rst.

use super::glue::{Fallback, FileInfo, Request};
use super::state::{self, Account, Mode};
use super::{trace, verdict};
use crate::sched::plan;
use kernel::{pci, prelude::*};

/// Per-request context of a routed GPU write.
struct Ctx<'r, 'a> {
    req: &'r Request<'a>,
    info: FileInfo,
    account: Account,
    bytes_pc: u64,
    bytes_p2p: u64,
    segs: u32,
}

impl Ctx<'_, '_> {
    /// Writes the request, directly or through the page cache; counts it if it wrote anything.
    /// Returns the bytes written and the file offset after them.
    fn leg(&mut self, pos: i64, addr: usize, len: usize, p2p: bool) -> Result<(usize, i64)> {
        let (n, end) = self.req.sub_write(pos, addr, len, p2p)?;
        if n > 0 {
            self.account.write_segment(p2p, n);
            if p2p {
                self.bytes_p2p += n as u64;
            } else {
                self.bytes_pc += n as u64;
            }
            self.segs += 1;
        }
        Ok((n, end))
    }

    /// Writes the request directly, then syncs what it wrote if the request asks for it. A
    /// direct write refused before it could write anything the page cache would take ([`redo`])
    /// is counted and redone through the page cache. A failed sync is returned as it is: the
    /// bytes are written, and redoing an append would write them twice.
    fn direct(&mut self, pos: i64, addr: usize, len: usize) -> Result<(usize, i64)> {
        match self.leg(pos, addr, len, true) {
            Err(e) if redo(e) => {
                self.account.write_io_error();
                self.leg(pos, addr, len, false)
            }
            Ok((n, end)) if n > 0 => {
                self.req.write_sync(end, n)?;
                Ok((n, end))
            }
            r => r,
        }
    }
}

/// Whether a direct write that failed with `e` is redone through the page cache: only for the
/// reasons that stop a direct write before anything of it is visible, which a buffered write
/// does not share. `EINVAL`: the end of the file moved to a place not aligned for direct I/O,
/// or a limit cut the write to an unaligned length; `ENOTBLK`: the filesystem cannot write
/// this range directly with `IOCB_DIO_EXCL` (a shared extent, a page it could not invalidate,
/// an inode without direct I/O); `EREMOTEIO`: the P2P mapping was refused; `ENOSPC`,
/// `EDQUOT`: the direct allocation failed (the file's size has not moved). Any other error,
/// an I/O error among them, is the request's own.
fn redo(e: Error) -> bool {
    [EINVAL, ENOTBLK, EREMOTEIO, ENOSPC, EDQUOT].contains(&e)
}

/// Routes the write of `len` bytes from GPU memory at `addr` of provider `pdev` to file offset
/// `pos` (the end of the file if the request appends): the whole request, of which this is the
/// only piece. Returns the bytes written and the file offset after them.
pub(super) fn route(
    req: &Request<'_>,
    pdev: &pci::Device,
    pos: i64,
    addr: usize,
    len: usize,
) -> Result<(usize, i64)> {
    let mode = state::routing_mode();
    let append = req.append();
    let (mut reason, mut info) = verdict::file_check(req);
    let Ok((_, account)) = state::disk(info.key()) else {
        return req.sub_write(pos, addr, len, false);
    };
    if mode == Mode::PageCache && reason == Fallback::None {
        reason = Fallback::Mode;
    }
    if reason == Fallback::None && !info.dio_excl {
        reason = Fallback::Split;
    }
    if reason == Fallback::None {
        if let Some(member) = state::p2p_refused(req, &info, pdev) {
            reason = Fallback::Distance;
            info.member = member;
        }
    }
    let align = u64::from(info.offset_align.max(1));
    let mem_align = u64::from(info.mem_align.max(1));
    // Where the write starts in the file: for an append, the end of the file now, which the
    // filesystem finds again under its lock (a direct write refused there is redone).
    let at = if append { req.file_size() } else { pos };
    if reason == Fallback::None && (mem_align > align || !plan::is_aligned(addr as u64, mem_align))
    {
        reason = Fallback::Misaligned;
    }
    if reason == Fallback::None
        && (!plan::is_aligned(at as u64, align) || !plan::is_aligned(len as u64, align))
    {
        reason = if append {
            Fallback::Append
        } else {
            Fallback::Split
        };
    }
    account.write_request(reason);
    let mut ctx = Ctx {
        req,
        info,
        account,
        bytes_pc: 0,
        bytes_p2p: 0,
        segs: 0,
    };
    let result = if reason == Fallback::None {
        ctx.direct(at, addr, len)
    } else {
        ctx.leg(at, addr, len, false)
    };
    trace::route(
        &ctx.info,
        true,
        at,
        len,
        mode.name(),
        reason,
        ctx.bytes_pc,
        ctx.bytes_p2p,
        ctx.segs,
    );
    result
}

/// Counts a write that touches GPU memory but is not one GPU piece (`Append` for a write to the
/// end of the file, `Split` for another): it goes on unchanged, through the page cache.
pub(super) fn fallback(req: &Request<'_>, reason: Fallback) {
    let (_, info) = verdict::file_check(req);
    if let Ok((_, account)) = state::disk(info.key()) {
        account.write_request(reason);
    }
    let at = if req.append() {
        req.file_size()
    } else {
        req.pos()
    };
    trace::route(
        &info,
        true,
        at,
        0,
        state::routing_mode().name(),
        reason,
        0,
        0,
        0,
    );
}
