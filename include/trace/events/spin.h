/* SPDX-License-Identifier: GPL-2.0 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM spin

#if !defined(_TRACE_SPIN_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_SPIN_H

#include <linux/tracepoint.h>

/*
 * spin_route_class - a routed request: @devt whole disk of the file (0 if
 * none), @ino inode number, @pos file offset of the routed range, @len bytes
 * asked for (clipped to the end of the file for reads, to the file size limit
 * for writes), @mode /sys/kernel/spin/mode at the time, @reason "none" if
 * split, else why everything went through the page cache, @bytes_pc bytes
 * copied through the page cache, @bytes_p2p bytes moved by P2P DMA, @segs
 * number of segments executed.
 */
DECLARE_EVENT_CLASS(spin_route_class,
	TP_PROTO(dev_t devt, u64 ino, loff_t pos, size_t len, const char *mode,
		 const char *reason, dev_t member, u64 bytes_pc, u64 bytes_p2p,
		 u32 segs),
	TP_ARGS(devt, ino, pos, len, mode, reason, member, bytes_pc, bytes_p2p,
		segs),
	TP_STRUCT__entry(
		__field(dev_t, devt)
		__field(u64, ino)
		__field(loff_t, pos)
		__field(size_t, len)
		__string(mode, mode)
		__string(reason, reason)
		__field(dev_t, member)
		__field(u64, bytes_pc)
		__field(u64, bytes_p2p)
		__field(u32, segs)
	),
	TP_fast_assign(
		__entry->devt = devt;
		__entry->ino = ino;
		__entry->pos = pos;
		__entry->len = len;
		__assign_str(mode);
		__assign_str(reason);
		__entry->member = member;
		__entry->bytes_pc = bytes_pc;
		__entry->bytes_p2p = bytes_p2p;
		__entry->segs = segs;
	),
	TP_printk("dev=%d:%d ino=%llu pos=%lld len=%zu mode=%s reason=%s pagecache=%llu p2p=%llu segs=%u member=%d:%d",
		  MAJOR(__entry->devt), MINOR(__entry->devt), __entry->ino,
		  __entry->pos, __entry->len, __get_str(mode),
		  __get_str(reason), __entry->bytes_pc, __entry->bytes_p2p,
		  __entry->segs, MAJOR(__entry->member),
		  MINOR(__entry->member))
);

/**
 * spin_route - a read into GPU memory was routed (see spin_route_class)
 */
DEFINE_EVENT(spin_route_class, spin_route,
	TP_PROTO(dev_t devt, u64 ino, loff_t pos, size_t len, const char *mode,
		 const char *reason, dev_t member, u64 bytes_pc, u64 bytes_p2p,
		 u32 segs),
	TP_ARGS(devt, ino, pos, len, mode, reason, member, bytes_pc, bytes_p2p,
		segs)
);

/**
 * spin_route_write - a write from GPU memory was routed (see
 * spin_route_class); its P2P bytes went as direct writes
 */
DEFINE_EVENT(spin_route_class, spin_route_write,
	TP_PROTO(dev_t devt, u64 ino, loff_t pos, size_t len, const char *mode,
		 const char *reason, dev_t member, u64 bytes_pc, u64 bytes_p2p,
		 u32 segs),
	TP_ARGS(devt, ino, pos, len, mode, reason, member, bytes_pc, bytes_p2p,
		segs)
);

/**
 * spin_route_segment - one segment of a routed read was executed
 * @devt: whole disk of the file (0 if none)
 * @ino: inode number
 * @pos: file offset of the segment
 * @len: bytes transferred
 * @p2p: whether the segment went by P2P DMA (else by page-cache copy)
 */
TRACE_EVENT(spin_route_segment,
	TP_PROTO(dev_t devt, u64 ino, loff_t pos, size_t len, bool p2p),
	TP_ARGS(devt, ino, pos, len, p2p),
	TP_STRUCT__entry(
		__field(dev_t, devt)
		__field(u64, ino)
		__field(loff_t, pos)
		__field(size_t, len)
		__field(bool, p2p)
	),
	TP_fast_assign(
		__entry->devt = devt;
		__entry->ino = ino;
		__entry->pos = pos;
		__entry->len = len;
		__entry->p2p = p2p;
	),
	TP_printk("dev=%d:%d ino=%llu pos=%lld len=%zu path=%s",
		  MAJOR(__entry->devt), MINOR(__entry->devt), __entry->ino,
		  __entry->pos, __entry->len,
		  __entry->p2p ? "p2p" : "pagecache")
);

/**
 * spin_readahead - GPU read-ahead brought a window into the partition
 * @devt: whole disk of the file (0 if none)
 * @ino: inode number
 * @start: first page of the read-ahead window
 * @nr: pages in the window
 * @admitted: pages of dropbehind folios of the window taken into the
 *            GPU read-ahead partition
 * @evicted: pages the partition evicted to make room
 */
TRACE_EVENT(spin_readahead,
	TP_PROTO(dev_t devt, u64 ino, pgoff_t start, unsigned long nr,
		 u32 admitted, u32 evicted),
	TP_ARGS(devt, ino, start, nr, admitted, evicted),
	TP_STRUCT__entry(
		__field(dev_t, devt)
		__field(u64, ino)
		__field(pgoff_t, start)
		__field(unsigned long, nr)
		__field(u32, admitted)
		__field(u32, evicted)
	),
	TP_fast_assign(
		__entry->devt = devt;
		__entry->ino = ino;
		__entry->start = start;
		__entry->nr = nr;
		__entry->admitted = admitted;
		__entry->evicted = evicted;
	),
	TP_printk("dev=%d:%d ino=%llu start=%lu nr=%lu admitted=%u evicted=%u",
		  MAJOR(__entry->devt), MINOR(__entry->devt), __entry->ino,
		  __entry->start, __entry->nr, __entry->admitted,
		  __entry->evicted)
);

#endif /* _TRACE_SPIN_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
