// SPDX-License-Identifier: GPL-2.0

//! The writer: buffered writes from GPU memory, the block-aligned body as P2P direct writes
//! (SPIN, USENIX ATC'17, §5.2).
//!
//! CPU reads from a GPU BAR run at tens of MB/s, two to three orders of magnitude slower than
//! CPU writes, so a buffered write whose source is GPU memory is slowest when the CPU copies it
//! into the page cache. `spin_write_iter()` (include/linux/spin.h), called by the VFS write entry
//! points inside `file_start_write()`, hands every write that may come from GPU memory to
//! [`super::spin_router_write_iter`] (through `spin_route_write_iter()`, C); the router walks
//! the source's user segments as it walks a read's destination, and a part that lies in a user
//! mapping of a spin dma-buf comes here.
//!
//! [`route`] clips the part to the file size limit (`RLIMIT_FSIZE`, `s_maxbytes`), finds its
//! aligned body with [`crate::sched::plan::body`], and writes the legs in file order, each a
//! fresh `->write_iter()` call: the unaligned head and tail (each shorter than one direct-I/O
//! block) through the page cache, the body in direct writes of at most [`CHUNK`] bytes whose
//! bios carry the GPU pages (the device reads the BAR). Writing in order keeps the short-count
//! rule of write(2): a leg that comes back short or failed ends the request, and everything
//! reported written lies before it.
//!
//! Consistency comes with direct I/O: a direct write writes back the dirty page cache over its
//! range before the device reads the source, and invalidates (and unmaps) the cached pages of
//! the range afterwards, so no cached page of the written range keeps stale data and mapped
//! readers fault the new bytes in. File-write semantics stay the filesystem's: every leg goes
//! through its `->write_iter()`, which checks permissions, updates size and timestamps, honours
//! `IOCB_DSYNC`/`IOCB_SYNC` (so each leg is durable on return under `O_SYNC`, `O_DSYNC`,
//! `RWF_DSYNC`, `RWF_SYNC`) and allocates blocks (holes, unwritten extents, delayed allocation).
//!
//! A write to the end of the file (`O_APPEND`, `RWF_APPEND`) must land in one piece at the end
//! the filesystem picks under its lock. It goes as one direct write with `IOCB_APPEND` when its
//! length and the file size are aligned, else through the page cache as one leg (fallback
//! `append`); a direct append refused for alignment (the file grew meanwhile) is redone through
//! the page cache.
//!
//! A direct leg that fails for a reason the page cache may not share (an I/O error, a P2P
//! mapping refused, no space for the direct allocation, ...) is counted and redone through the
//! page cache, which then reports what it can write; errors that are the request's own (`EFBIG`,
//! `EPERM`, `EROFS`, `ETXTBSY`, a signal) are returned as they are.
//!
//! Locking: as for reads, no lock is held across legs; each leg takes the filesystem's own.
//! See Documentation/spin/writer.rst.

use super::glue::{self, Fallback, FileInfo, Request};
use super::state::{self, Account, Mode};
use crate::sched::plan;
use kernel::{pci, prelude::*};

/// Largest direct write of a body: 8 MiB, as the read side's chunk; the body's direct writes
/// follow each other, each large enough to keep the device's queue full.
const CHUNK: u64 = 8 << 20;

/// Per-request context of a routed GPU piece of a write.
struct Ctx<'r, 'a> {
    req: &'r Request<'a>,
    info: FileInfo,
    account: Account,
    bytes_pc: u64,
    bytes_p2p: u64,
    segs: u32,
}

impl Ctx<'_, '_> {
    /// Writes a leg; counts it if it wrote anything. Returns the bytes written and the file
    /// offset after them.
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

    /// Writes a body leg directly; one that fails for a reason the page cache may not share is
    /// counted and redone through the page cache.
    fn direct(&mut self, pos: i64, addr: usize, len: usize) -> Result<(usize, i64)> {
        match self.leg(pos, addr, len, true) {
            Err(e) if redo(e) => {
                self.account.write_io_error();
                self.leg(pos, addr, len, false)
            }
            r => r,
        }
    }
}

/// Whether a direct leg that failed with `e` is redone through the page cache: not when the
/// error belongs to the request itself, which the page cache would return as well.
fn redo(e: Error) -> bool {
    ![EINTR, ERESTARTSYS, EFBIG, EPERM, EROFS, ETXTBSY, EBADF].contains(&e)
}

/// Routes the write of `len` bytes from GPU memory at `addr` of provider `pdev` to file offset
/// `pos` (the end of the file if the request appends). Returns the bytes written and the file
/// offset after them.
pub(super) fn route(
    req: &Request<'_>,
    pdev: &pci::Device,
    pos: i64,
    addr: usize,
    len: usize,
) -> Result<(usize, i64)> {
    let mode = state::mode();
    let append = req.append();
    let (mut reason, mut info) = req.file_check();
    let Ok((_, account)) = state::disk(info.key()) else {
        return req.sub_write(pos, addr, len, false);
    };
    let mut len = len;
    if !append {
        let limit = req.write_limit();
        if pos >= limit {
            // The filesystem's own checks send SIGXFSZ and return EFBIG.
            return req.sub_write(pos, addr, len, false);
        }
        len = len.min(usize::try_from(limit - pos).unwrap_or(usize::MAX));
    }
    if mode == Mode::PageCache && reason == Fallback::None {
        reason = Fallback::Mode;
    }
    if reason == Fallback::None {
        if let Some(member) = state::p2p_refused(req, &info, pdev) {
            reason = Fallback::Distance;
            info.member = member;
        }
    }
    let align = u64::from(info.offset_align.max(1));
    let mem_align = u64::from(info.mem_align.max(1));
    // Where the direct body starts in the file (the end of the file if appending).
    let (at, first) = if append {
        let size = req.file_size();
        (size, size as u64)
    } else {
        (pos, (pos as u64).next_multiple_of(align))
    };
    if reason == Fallback::None {
        // The body's GPU address moves in lockstep with its file offset.
        let gpu = (addr as u64).wrapping_add(first - at as u64);
        if mem_align > align || !plan::is_aligned(gpu, mem_align) {
            reason = Fallback::Misaligned;
        }
    }
    if reason == Fallback::None
        && append
        && (!plan::is_aligned(first, align) || !plan::is_aligned(len as u64, align))
    {
        reason = Fallback::Append;
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
    let result = if reason != Fallback::None {
        ctx.leg(at, addr, len, false)
    } else if append {
        match ctx.leg(at, addr, len, true) {
            // The file grew to an unaligned size meanwhile, or the device failed.
            Err(e) if redo(e) => {
                ctx.account.write_io_error();
                ctx.leg(at, addr, len, false)
            }
            r => r,
        }
    } else {
        split(&mut ctx, pos, addr, len)
    };
    glue::trace_route(
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

/// Writes `len` bytes at `pos`: the unaligned head and tail through the page cache, the body
/// as direct writes, in file order. Returns the bytes written and the offset after them.
fn split(ctx: &mut Ctx<'_, '_>, pos: i64, addr: usize, len: usize) -> Result<(usize, i64)> {
    let align = u64::from(ctx.info.offset_align);
    let body = if glue::should_fail_plan() {
        Err(plan::PlanError::Overflow)
    } else {
        plan::body(pos as u64, len as u64, align)
    };
    let (start, end) = match body {
        Ok(Some(body)) => body,
        // No whole aligned block: one page-cache leg.
        Ok(None) => return ctx.leg(pos, addr, len, false),
        Err(_) => {
            // Never fail a write the page cache would take.
            ctx.account.write_internal();
            return ctx.leg(pos, addr, len, false);
        }
    };
    let (pos_u, end_u) = (pos as u64, pos as u64 + len as u64);
    // (file offset, length, P2P); the body in direct writes of at most `CHUNK` bytes.
    let legs = [
        (pos_u, start - pos_u, false),
        (start, end - start, true),
        (end, end_u - end, false),
    ];
    let mut done = 0usize;
    let mut at_end = pos;
    for leg in legs {
        let (mut off, last) = (leg.0, leg.0 + leg.1);
        while off < last {
            let part = if leg.2 {
                (last - off).min(CHUNK)
            } else {
                last - off
            } as usize;
            let a = addr + (off - pos_u) as usize;
            let r = if leg.2 {
                ctx.direct(off as i64, a, part)
            } else {
                ctx.leg(off as i64, a, part, false)
            };
            match r {
                Ok((got, e)) => {
                    done += got;
                    at_end = e;
                    if got < part {
                        return Ok((done, at_end));
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => return Ok((done, at_end)),
            }
            off += part as u64;
        }
    }
    Ok((done, at_end))
}

/// Counts a write to the end of the file that touches GPU memory but is not one GPU piece: it
/// goes on unchanged, through the page cache (fallback `append`).
pub(super) fn append_fallback(req: &Request<'_>) {
    let (_, info) = req.file_check();
    if let Ok((_, account)) = state::disk(info.key()) {
        account.write_request(Fallback::Append);
    }
    glue::trace_route(
        &info,
        true,
        req.file_size(),
        0,
        state::mode().name(),
        Fallback::Append,
        0,
        0,
        0,
    );
}
