// SPDX-License-Identifier: GPL-2.0

//! The router's tracepoints (`include/trace/events/spin.h`, defined in `spin_glue.c`).

use super::glue::{Fallback, FileInfo, RaWindow};
use kernel::{bindings, prelude::*, tracepoint::declare_trace};

declare_trace! {
    /// # Safety
    ///
    /// `mode` and `reason` are NUL-terminated strings that outlive the call.
    unsafe fn spin_route(devt: bindings::dev_t, ino: u64, pos: bindings::loff_t, len: usize,
                         mode: *const c_char, reason: *const c_char, member: bindings::dev_t,
                         bytes_pc: u64, bytes_p2p: u64, segs: u32);
    /// # Safety
    ///
    /// As [`spin_route`].
    unsafe fn spin_route_write(devt: bindings::dev_t, ino: u64, pos: bindings::loff_t,
                               len: usize, mode: *const c_char, reason: *const c_char,
                               member: bindings::dev_t, bytes_pc: u64, bytes_p2p: u64,
                               segs: u32);
    /// # Safety
    ///
    /// None: plain values.
    unsafe fn spin_route_segment(devt: bindings::dev_t, ino: u64, pos: bindings::loff_t,
                                 len: usize, p2p: bool);
    /// # Safety
    ///
    /// None: plain values.
    unsafe fn spin_readahead(devt: bindings::dev_t, ino: u64, start: c_ulong, nr: c_ulong,
                             admitted: u32, evicted: u32);
}

/// Emits the `spin_route` tracepoint, or `spin_route_write` for a write.
#[allow(clippy::too_many_arguments)]
pub(crate) fn route(
    info: &FileInfo,
    write: bool,
    pos: i64,
    len: usize,
    mode: &CStr,
    reason: Fallback,
    bytes_pc: u64,
    bytes_p2p: u64,
    segs: u32,
) {
    let emit = if write { spin_route_write } else { spin_route };
    // SAFETY: Plain values and NUL-terminated static strings.
    unsafe {
        emit(
            info.devt,
            info.ino,
            pos,
            len,
            mode.as_char_ptr(),
            reason.name().as_char_ptr(),
            info.member,
            bytes_pc,
            bytes_p2p,
            segs,
        )
    };
}

/// Emits the `spin_route_segment` tracepoint.
pub(crate) fn segment(info: &FileInfo, pos: i64, len: usize, p2p: bool) {
    // SAFETY: Plain values.
    unsafe { spin_route_segment(info.devt, info.ino, pos, len, p2p) };
}

/// Emits the `spin_readahead` tracepoint.
pub(crate) fn readahead(info: &FileInfo, win: &RaWindow, admitted: u32, evicted: u32) {
    // SAFETY: Plain values.
    unsafe {
        spin_readahead(
            info.devt,
            info.ino,
            win.start as c_ulong,
            win.nr as c_ulong,
            admitted,
            evicted,
        )
    };
}
