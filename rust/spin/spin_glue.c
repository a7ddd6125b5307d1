// SPDX-License-Identifier: GPL-2.0
/*
 * Thin C helpers of the spin router: the static key, the tracepoints (defined
 * here, emitted from Rust with declare_trace!) and the few inline-heavy VFS
 * operations. Policy and state live in Rust
 * (rust/spin/router); every function here does one mechanical thing.
 * See Documentation/spin/router.rst.
 */

#include <linux/backing-dev.h>
#include <linux/blk-cgroup.h>
#include <linux/blkdev.h>
#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/fault-inject.h>
#include <linux/folio_batch.h>
#include <linux/fs.h>
#include <linux/pagemap.h>
#include <linux/pagewalk.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/rcupdate_wait.h>
#include <linux/resource.h>
#include <linux/sched/signal.h>
#include <linux/stat.h>
#include <linux/slab.h>
#include <linux/uio.h>

#include "host_hint.h"
#include "spin_glue.h"

#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include <trace/events/spin.h>

/*
 * An uncached read into GPU memory that leaves the dropbehind folios it
 * consumes to the GPU read-ahead partition (mm/filemap.c).
 */
#define SPIN_RA_DEFER (IOCB_DONTCACHE | IOCB_DONTCACHE_DEFER)

DEFINE_STATIC_KEY_FALSE(spin_route_key);

/**
 * spin_route_key_get - a p2pdma provider was bound: route requests
 */
void spin_route_key_get(void)
{
	static_branch_inc(&spin_route_key);
}

/**
 * spin_route_key_put - a p2pdma provider was unbound
 */
void spin_route_key_put(void)
{
	static_branch_dec(&spin_route_key);
}

/*
 * spin_iovec_maybe_gpu - spin_iter_maybe_gpu() for an ITER_IOVEC
 *
 * Out of line: readv(2) and writev(2) are rarer than read(2) and
 * pread(2), whose single segment spin_iter_maybe_gpu() checks itself.
 */
static noinline bool spin_iovec_maybe_gpu(struct mm_struct *mm,
					  const struct iov_iter *iter)
{
	unsigned long idx, addr;
	size_t before = 0, len;

	for (idx = 0; spin_iter_segment(iter, idx, before, &addr, &len);
	     idx++, before += len)
		if (len && spin_addr_maybe_gpu(mm, addr, true))
			return true;
	return false;
}

/**
 * spin_iter_maybe_gpu - could a request's user memory start in GPU memory?
 * @iter: a user-backed destination or source
 *
 * A quick look for processes that mapped GPU memory (MMF_P2PDMA) but read
 * into or write from host memory: every user mapping of p2pdma memory (a
 * spin dma-buf, upstream's p2pmem/allocate) is a VM_MIXEDMAP VMA, so a
 * segment whose VMA lacks the flag starts in host memory. No VMA is locked,
 * and only a mapping changed during the call can make the answer wrong;
 * either answer is then safe: %true makes the router look again under the
 * VMA lock, %false passes the request on unchanged, which is the plain
 * kernel's read or write into or from whatever is mapped when the data is
 * copied.
 *
 * Return: %false if every segment starts in host memory or in no mapping.
 */
static __always_inline bool spin_iter_maybe_gpu(const struct iov_iter *iter)
{
	struct mm_struct *mm = current->mm;

	if (!mm)
		return false;
	if (!IS_ENABLED(CONFIG_PER_VMA_LOCK))
		return true;	/* VMAs are not freed by RCU: look under a lock */
	/*
	 * read(2), pread(2), write(2), pwrite(2): one segment, whose hint
	 * spin_ubuf_host_hint() looked at before spin_routable() was called.
	 */
	if (iter_is_ubuf(iter))
		return spin_addr_maybe_gpu(mm, spin_ubuf_addr(iter), false);
	return spin_iovec_maybe_gpu(mm, iter);
}

/**
 * spin_routable - could the router split this request, and may it block?
 * @iocb: the read's or write's control block
 * @iter: its destination or source
 *
 * Only buffered reads and writes of regular files from or into user memory
 * are routed; direct I/O keeps upstream semantics exactly. A request that
 * must not block cannot wait for the router's I/O: a non-blocking read
 * (IOCB_NOWAIT) into GPU memory copies what is cached and starts no I/O
 * (spin_read_cached(): read-ahead started here would put the data in the
 * page cache instead of sending it by P2P); a non-blocking write, and a
 * read io_uring retries with IOCB_WAITQ, are answered -EAGAIN when they
 * touch GPU memory, so that io_uring issues them again from a worker that
 * may block (and RWF_NOWAIT callers learn that they would block).
 *
 * Return: %SPIN_ROUTE_NO, %SPIN_ROUTE_YES, %SPIN_ROUTE_CACHED or
 * %SPIN_ROUTE_LATER.
 */
static __always_inline enum spin_route_verdict
spin_routable(const struct kiocb *iocb, const struct iov_iter *iter)
{
	bool write = iov_iter_rw(iter) == WRITE;

	if (!user_backed_iter(iter) || !iov_iter_count(iter) ||
	    (iocb->ki_flags & IOCB_DIRECT) ||
	    !S_ISREG(file_inode(iocb->ki_filp)->i_mode))
		return SPIN_ROUTE_NO;
	if (!spin_iter_maybe_gpu(iter))
		return SPIN_ROUTE_NO;
	/* A buffered RWF_ATOMIC write gets the filesystem's -EOPNOTSUPP. */
	if (write && (iocb->ki_flags & IOCB_ATOMIC))
		return SPIN_ROUTE_NO;
	if (iocb->ki_flags & IOCB_NOWAIT)
		return write ? SPIN_ROUTE_LATER : SPIN_ROUTE_CACHED;
	if (iocb->ki_flags & IOCB_WAITQ)
		return SPIN_ROUTE_LATER;
	return SPIN_ROUTE_YES;
}

/*
 * spin_route_look - spin_route_read_iter() or spin_route_write_iter() past
 * the per-CPU hint
 *
 * Out of line, so that a request the hint answers saves no registers.
 */
static noinline ssize_t spin_route_look(struct kiocb *iocb,
					struct iov_iter *iter)
{
	enum spin_route_verdict verdict = spin_routable(iocb, iter);
	const struct file_operations *fop = iocb->ki_filp->f_op;

	if (iov_iter_rw(iter) == WRITE)
		return verdict == SPIN_ROUTE_NO ? fop->write_iter(iocb, iter) :
		       spin_router_write_iter(iocb, iter, verdict);
	return verdict == SPIN_ROUTE_NO ? fop->read_iter(iocb, iter) :
	       spin_router_read_iter(iocb, iter, verdict);
}

/**
 * spin_route_read_iter - a read of a process that mapped p2pdma memory
 * @iocb: the read's control block
 * @iter: its destination
 *
 * Called by spin_read_iter(). A read into host memory only (most reads of
 * such a process) is passed on here, in C: first, before anything else is
 * looked at, one that starts in a host VMA this CPU found lately
 * (spin_ubuf_host_hint()), then any that spin_routable() says is not GPU
 * I/O; every other goes to the router, spin_router_read_iter() (Rust), with
 * spin_routable()'s verdict.
 *
 * Return: as ->read_iter().
 */
ssize_t spin_route_read_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	if (spin_ubuf_host_hint(iter))
		return iocb->ki_filp->f_op->read_iter(iocb, iter);
	return spin_route_look(iocb, iter);
}

/**
 * spin_route_write_iter - a write of a process that mapped p2pdma memory
 * @iocb: the write's control block
 * @iter: its source
 *
 * Called by spin_write_iter(), inside file_start_write(); as
 * spin_route_read_iter(), for writes (spin_router_write_iter()).
 *
 * Return: as ->write_iter().
 */
ssize_t spin_route_write_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	if (spin_ubuf_host_hint(iter))
		return iocb->ki_filp->f_op->write_iter(iocb, iter);
	return spin_route_look(iocb, iter);
}

/**
 * spin_vma_p2p_provider - the p2pdma provider behind a user address
 * @vma: the VMA holding @addr
 * @addr: a user address in @vma
 *
 * Context: the mmap_lock of @vma's mm held for read (folio_walk_start()).
 *
 * Recognises user mappings of p2pdma memory that are not spin's dma-bufs,
 * such as upstream's p2pmem/allocate: their pages were inserted with
 * vm_insert_page(), which marks the VMA VM_MIXEDMAP, so other VMAs cost one
 * flag test. The page mapped at @addr is looked up without a reference,
 * under the page table lock, and only its provider is kept.
 *
 * Return: the provider with a reference held (drop it with pci_dev_put()),
 * or %NULL if no p2pdma page is mapped at @addr.
 */
struct pci_dev *spin_vma_p2p_provider(struct vm_area_struct *vma,
				      unsigned long addr)
{
	struct pci_dev *pdev = NULL;
	struct folio_walk fw;

	if (!(vma->vm_flags & VM_MIXEDMAP))
		return NULL;
	if (!folio_walk_start(&fw, vma, addr, 0))
		return NULL;
	if (fw.page)
		pdev = pci_p2pdma_page_provider(fw.page);
	folio_walk_end(&fw, vma);
	return pdev;
}

/**
 * spin_mm_mark_p2pdma - a user mapping of p2pdma memory is made in @mm
 * @mm: the mm
 *
 * Sets MMF_P2PDMA, which spin_read_iter() and spin_write_iter() test before
 * looking at a request.
 */
void spin_mm_mark_p2pdma(struct mm_struct *mm)
{
	mm_flags_set(MMF_P2PDMA, mm);
}

/**
 * spin_iocb_append - does this write go to the end of the file?
 * @iocb: the write's control block
 *
 * Return: whether IOCB_APPEND is set (O_APPEND or RWF_APPEND).
 */
bool spin_iocb_append(const struct kiocb *iocb)
{
	return iocb->ki_flags & IOCB_APPEND;
}

/**
 * spin_read_cached - a non-blocking read that starts no I/O
 * @iocb: the read's control block, with IOCB_NOWAIT
 * @iter: its destination
 *
 * Calls ->read_iter() with IOCB_NOIO: the pages that are cached are copied,
 * the read ends at the first that is not (-EAGAIN if that is the first). The
 * GPU read-ahead partition's folios it copies stay the partition's
 * (IOCB_DONTCACHE_DEFER).
 *
 * Return: as ->read_iter().
 */
ssize_t spin_read_cached(struct kiocb *iocb, struct iov_iter *iter)
{
	ssize_t ret;

	iocb->ki_flags |= IOCB_NOIO | IOCB_DONTCACHE_DEFER;
	ret = iocb->ki_filp->f_op->read_iter(iocb, iter);
	iocb->ki_flags &= ~(IOCB_NOIO | IOCB_DONTCACHE_DEFER);
	return ret;
}

/*
 * spin_leg_read - one leg of a routed read, with a fresh ->read_iter() call
 *
 * A synchronous clone of @orig (no completion callback, no wait queue) at
 * @pos, without the flags @clear and with @set, into @len bytes of user
 * memory at @addr.
 */
static ssize_t spin_leg_read(struct kiocb *orig, loff_t pos, unsigned long addr,
			     size_t len, int clear, int set)
{
	struct file *file = orig->ki_filp;
	struct iov_iter iter;
	struct kiocb kiocb;

	kiocb_clone(&kiocb, orig, file);
	kiocb.ki_pos = pos;
	kiocb.ki_flags = (kiocb.ki_flags & ~(clear | IOCB_WAITQ)) | set;
	iov_iter_ubuf(&iter, ITER_DEST, (void __user *)addr, len);
	return file->f_op->read_iter(&kiocb, &iter);
}

/**
 * spin_sub_read_noio - copy what is cached of one leg, start no I/O
 * @orig: the request being routed
 * @pos: file offset of the leg
 * @addr: user address of the leg's destination (GPU memory)
 * @len: length of the leg
 * @dontcache: read uncached (IOCB_DONTCACHE; the caller checked
 *             FOP_DONTCACHE); with or without it, GPU read-ahead's
 *             dropbehind folios are neither dropped nor promoted: they stay
 *             for the GPU read-ahead partition to evict
 *             (IOCB_DONTCACHE_DEFER)
 *
 * As spin_sub_read() into GPU memory, with IOCB_NOIO: the pages that are
 * cached and up to date are copied, the read ends at the first that is not,
 * or at a read-ahead marker (whose asynchronous read-ahead is then left to
 * the leg that reads it normally).
 *
 * Return: bytes copied, 0 or -%EAGAIN if none, or a negative errno.
 */
ssize_t spin_sub_read_noio(struct kiocb *orig, loff_t pos, unsigned long addr,
			   size_t len, bool dontcache)
{
	return spin_leg_read(orig, pos, addr, len,
			     IOCB_DIRECT | IOCB_DONTCACHE | IOCB_DONTCACHE_DEFER,
			     IOCB_NOIO | (dontcache ? SPIN_RA_DEFER :
					  IOCB_DONTCACHE_DEFER));
}

/**
 * spin_iter_segment - a user segment of a destination iterator
 * @iter: a user-backed (ITER_UBUF or ITER_IOVEC) destination
 * @idx: segment index, counting from the iterator's current position
 * @before: bytes in the segments before @idx (the sum of their lengths)
 * @addr: filled in: user address of the segment
 * @len: filled in: its length, capped at what the iterator still counts; an
 *       empty iovec gives 0
 *
 * Constant time: the caller walks the segments in order and carries @before.
 *
 * Return: %false past the last segment or for other iterator types.
 */
bool spin_iter_segment(const struct iov_iter *iter, unsigned long idx,
		       size_t before, unsigned long *addr, size_t *len)
{
	size_t left = iov_iter_count(iter);
	const struct iovec *iov;
	size_t skip;

	if (before >= left)
		return false;
	left -= before;
	if (iter_is_ubuf(iter)) {
		if (idx)
			return false;
		*addr = spin_ubuf_addr(iter);
		*len = left;
		return true;
	}
	if (!iter_is_iovec(iter) || idx >= iter->nr_segs)
		return false;
	iov = iter_iov(iter) + idx;
	skip = idx ? 0 : iter->iov_offset;
	*addr = (unsigned long)iov->iov_base + skip;
	*len = min(iov->iov_len - skip, left);
	return true;
}

/**
 * spin_iter_advance - advance a destination iterator past bytes read
 * @iter: the iterator
 * @bytes: bytes the router read into it
 */
void spin_iter_advance(struct iov_iter *iter, size_t bytes)
{
	iov_iter_advance(iter, bytes);
}

/**
 * spin_sub_read - read one leg of a routed request through the page cache,
 *                 with a fresh ->read_iter()
 * @orig: the request being routed (its file, flags and priority are used)
 * @pos: file offset of the leg
 * @addr: user address of the leg's destination
 * @len: length of the leg
 * @gpu: the destination is GPU memory: the GPU read-ahead partition's
 *       dropbehind folios that the leg reads stay the partition's, neither
 *       dropped nor taken into the page cache for good
 *       (IOCB_DONTCACHE_DEFER); a read into host memory takes them, as any
 *       CPU read does
 *
 * Every leg is a new call into the filesystem, made with no filesystem lock
 * held: XFS takes its IOLOCK in both read paths, so the split must happen
 * above the filesystem (Documentation/spin/router.rst, "Locking").
 *
 * Return: bytes read or a negative errno, as ->read_iter().
 */
ssize_t spin_sub_read(struct kiocb *orig, loff_t pos, unsigned long addr,
		      size_t len, bool gpu)
{
	return spin_leg_read(orig, pos, addr, len,
			     IOCB_DIRECT | IOCB_DONTCACHE | IOCB_DONTCACHE_DEFER,
			     gpu ? IOCB_DONTCACHE_DEFER : 0);
}

/**
 * spin_sub_write - write one leg of a routed request with a fresh ->write_iter()
 * @orig: the request being routed (its file, flags and priority are used;
 *        with IOCB_APPEND the filesystem puts the leg at the end of the file)
 * @pos: file offset of the leg
 * @addr: user address of the leg's source
 * @len: length of the leg
 * @direct: whether to write it as direct I/O (P2P) or through the page cache
 * @end: filled in: the file offset after the leg, if it wrote anything
 *
 * Called inside the caller's file_start_write(), with no filesystem lock
 * held. A direct leg writes back and invalidates the page cache over its
 * range before and after the device reads the source, as every direct write,
 * and carries IOCB_DIO_EXCL: the filesystem holds its I/O lock exclusively
 * until the write has completed, as for the buffered write it replaces, and
 * never falls back to the page cache itself (-ENOTBLK). A direct leg is not
 * synced here (IOCB_DSYNC and IOCB_SYNC are cleared): spin_write_sync() syncs
 * what it wrote, so that a failed sync is not mistaken for a failed write.
 *
 * Return: bytes written or a negative errno, as ->write_iter().
 */
ssize_t spin_sub_write(struct kiocb *orig, loff_t pos, unsigned long addr,
		       size_t len, bool direct, loff_t *end)
{
	struct file *file = orig->ki_filp;
	struct iov_iter iter;
	struct kiocb kiocb;
	ssize_t ret;

	kiocb_clone(&kiocb, orig, file);
	kiocb.ki_pos = pos;
	kiocb.ki_flags &= ~IOCB_WAITQ;
	if (direct)
		kiocb.ki_flags = (kiocb.ki_flags & ~(IOCB_DSYNC | IOCB_SYNC)) |
				 IOCB_DIRECT | IOCB_DIO_EXCL;
	else
		kiocb.ki_flags &= ~(IOCB_DIRECT | IOCB_DIO_EXCL);
	iov_iter_ubuf(&iter, ITER_SOURCE, (void __user *)addr, len);
	ret = file->f_op->write_iter(&kiocb, &iter);
	*end = kiocb.ki_pos;
	return ret;
}

/**
 * spin_write_sync - make a direct leg of a routed write durable
 * @orig: the request being routed (its file and its O_SYNC, O_DSYNC,
 *        RWF_SYNC, RWF_DSYNC flags are used)
 * @end: the file offset after the leg
 * @written: the bytes the leg wrote
 *
 * What generic_write_sync() does at the end of a buffered write, for the
 * bytes a direct leg wrote without IOCB_DSYNC and IOCB_SYNC (spin_sub_write()):
 * nothing unless the request or the inode asks for it.
 *
 * Return: @written, or a negative errno if the sync failed (the bytes are
 * written; the write reports the error, as a buffered write would).
 */
ssize_t spin_write_sync(struct kiocb *orig, loff_t end, size_t written)
{
	struct kiocb kiocb;

	kiocb_clone(&kiocb, orig, orig->ki_filp);
	kiocb.ki_pos = end;
	return generic_write_sync(&kiocb, written);
}

/**
 * spin_file_io_pages - the most pages a read-ahead window of a large read of
 *                      the file may span
 * @file: the file
 *
 * Return: backing_dev_info.io_pages of the file's device (see
 * ractl_max_pages()).
 */
unsigned long spin_file_io_pages(struct file *file)
{
	return READ_ONCE(inode_to_bdi(file_inode(file))->io_pages);
}

/**
 * spin_sub_read_ra - a page-cache leg into GPU memory, read ahead uncached
 * @orig: the request being routed
 * @pos: file offset of the leg
 * @addr: user address of the leg's destination (GPU memory)
 * @len: length of the leg
 * @defer: leave the dropbehind folios the leg consumes to the GPU read-ahead
 *         partition (IOCB_DONTCACHE_DEFER) instead of dropping them now; only
 *         for sequential legs, whose pages read-ahead windows cover (ignored
 *         while the task's blkcg is congested, when read-ahead reads none)
 * @win: filled in: the file's read-ahead window after the leg
 *
 * As spin_sub_read() into GPU memory, with IOCB_DONTCACHE: the folios that
 * read-ahead brings in for the GPU are dropbehind folios, taken into the
 * page cache for good by a CPU read or fault (mm/filemap.c), and dropped by
 * the read that consumes them unless @defer. The caller checked
 * FOP_DONTCACHE. @win says where the file's read-ahead window is after the
 * leg and whether the leg moved it, for the GPU read-ahead partition to
 * account its folios.
 *
 * Return: bytes read or a negative errno, as ->read_iter().
 */
ssize_t spin_sub_read_ra(struct kiocb *orig, loff_t pos, unsigned long addr,
			 size_t len, bool defer, struct spin_ra_window *win)
{
	struct file *file = orig->ki_filp;
	struct file_ra_state *ra = &file->f_ra;
	pgoff_t start = READ_ONCE(ra->start);
	unsigned int size = READ_ONCE(ra->size);
	ssize_t ret;

	/*
	 * A throttled blkcg reads no windows, only the pages asked for
	 * (mm/readahead.c): no window accounts them, so the leg drops them.
	 */
	if (defer && blk_cgroup_congested())
		defer = false;
	ret = spin_leg_read(orig, pos, addr, len,
			    IOCB_DIRECT | IOCB_DONTCACHE_DEFER,
			    defer ? SPIN_RA_DEFER : IOCB_DONTCACHE);

	win->mapping = (unsigned long)file->f_mapping;
	win->start = READ_ONCE(ra->start);
	win->nr = READ_ONCE(ra->size);
	win->prev_start = start;
	win->prev_nr = size;
	win->moved = win->nr && (win->start != start || win->nr != size);
	return ret;
}

/*
 * Reads @nr pages ahead from @index, uncached, its marker on the first folio,
 * in folios as large as the stream's own windows reach: the read-ahead that
 * follows then goes on with them instead of ramping up again from order 0.
 */
static void spin_ra_window_at(struct file *file, pgoff_t index,
			      unsigned int nr)
{
	struct file_ra_state *ra = &file->f_ra;
	unsigned int ra_pages = max(READ_ONCE(ra->ra_pages), 1U);
	DEFINE_READAHEAD(ractl, file, ra, file->f_mapping, index);

	/*
	 * page_cache_async_ra() expects the marker at start + size -
	 * async_size: at @index. Async read-ahead never shrinks a window, so
	 * the windows read ahead from the marker on are @nr pages too: the
	 * stream keeps its lead into the uncached pages that follow. Their
	 * folios are aligned as page_cache_async_ra() aligns them: to at most
	 * the largest power of two that divides ra_pages.
	 */
	ractl.dropbehind = true;
	page_cache_ra_window(&ractl, nr, __ffs(ra_pages));
}

/**
 * spin_next_miss - the first page of a range not in a file's page cache
 * @file: the file
 * @index: first page to look at
 * @max_scan: pages to look at
 *
 * page_cache_next_miss() under the RCU read lock, from any index: it takes a
 * page present at index 0 for an index that wrapped and returns 0, as for a
 * gap there.
 *
 * Return: the index of the first page of @index..@index + @max_scan - 1
 * that is not cached, or an index past them if they all are.
 */
pgoff_t spin_next_miss(struct file *file, pgoff_t index,
		       unsigned long max_scan)
{
	struct address_space *mapping = file->f_mapping;
	pgoff_t miss;

	if (!max_scan)
		return index;
	rcu_read_lock();
	if (!index) {
		void *entry = xa_load(&mapping->i_pages, 0);

		if (!entry || xa_is_value(entry)) {
			rcu_read_unlock();
			return 0;
		}
		index = 1;
		if (!--max_scan) {
			rcu_read_unlock();
			return 1;
		}
	}
	miss = page_cache_next_miss(mapping, index, max_scan);
	rcu_read_unlock();
	return miss;
}

/**
 * spin_ra_facts - what GPU read-ahead's look-ahead of a file depends on
 * @file: the file
 * @facts: filled in
 */
void spin_ra_facts(struct file *file, struct spin_ra_facts *facts)
{
	facts->ra_pages = READ_ONCE(file->f_ra.ra_pages);
	facts->size = i_size_read(file->f_mapping->host);
	facts->congested = blk_cgroup_congested();
}

/**
 * spin_ra_bridge - read ahead from the first page a GPU stream will miss
 * @file: the file
 * @gap: that page (bridge_gap() in rust/spin/router/readahead.rs)
 * @max: the pages to read ahead (the stream's lead: a few windows)
 * @win: filled in: the window read ahead, if any
 *
 * Reads @max pages ahead from @gap, uncached (dropbehind folios, as
 * IOCB_DONTCACHE reads them), in folios as large as the stream's windows
 * reach (page_cache_ra_window()), and makes them the file's read-ahead window
 * with its marker on its first folio. The read that reaches that folio then
 * finds it read or in flight and moves the window on asynchronously, as if
 * the stream had never left it. Pages in the page cache are skipped, as
 * page_cache_ra_unbounded() does; nothing is read past the end of the file.
 *
 * file_ra_state is updated without a lock, as the page cache's own read-ahead
 * does: a racing reader only changes a heuristic.
 *
 * Context: Process context; may sleep (it allocates folios and starts I/O).
 * The caller holds no lock of the filesystem's.
 *
 * Return: %true if a window was read ahead (@win describes it, @win->moved
 * set), %false if @max is 0 or @gap now lies past the end of the file.
 */
bool spin_ra_bridge(struct file *file, pgoff_t gap, unsigned long max,
		    struct spin_ra_window *win)
{
	struct address_space *mapping = file->f_mapping;
	struct file_ra_state *ra = &file->f_ra;
	unsigned int nr = min_t(unsigned long, max, UINT_MAX);
	loff_t isize = i_size_read(mapping->host);
	pgoff_t last;

	if (!nr || isize <= 0)
		return false;
	last = (isize - 1) >> PAGE_SHIFT;
	if (gap > last)
		return false;
	nr = min_t(pgoff_t, nr, last - gap + 1);

	win->mapping = (unsigned long)mapping;
	win->prev_start = READ_ONCE(ra->start);
	win->prev_nr = READ_ONCE(ra->size);
	win->start = gap;
	win->nr = nr;
	win->moved = true;
	spin_ra_window_at(file, gap, nr);
	return true;
}

/**
 * spin_ra_collect - the dropbehind folios of a range of a file
 * @file: the file
 * @index: first page to look at; advanced past the folios looked at
 * @end: page after the range
 * @out: filled in with the dropbehind folios found
 * @max: room in @out, at least one
 *
 * Like filemap_get_residency(), this reads only the RCU-protected xarray: no
 * folio references, no locks. Index and order come from the xarray, the pfn
 * from the entry itself; the partition compares pfn, mapping and index again
 * under the folio lock before it evicts, so an entry made stale by a race is
 * only forgotten then.
 *
 * Folios read ahead wait off the LRU in the LRU batch of the CPU that added
 * them, where a reader on another CPU that evicts them finds them busy and
 * leaves them resident outside the partition. So this first drains this
 * CPU's batches, where the caller's own read-ahead put its folios: with an
 * empty batch, __folio_batch_release() only calls lru_add_drain(), which is
 * internal to mm/. Folios that another CPU added are drained by the
 * partition's evictor when it meets one (filemap_evict_dropbehind_batch()).
 *
 * Context: May sleep (it reschedules on long ranges).
 * Return: the number of folios put in @out; fewer than @max once the range
 * is done.
 */
unsigned int spin_ra_collect(struct file *file, pgoff_t *index, pgoff_t end,
			     struct spin_ra_folio *out, unsigned int max)
{
	XA_STATE(xas, &file->f_mapping->i_pages, *index);
	/*
	 * Only its header is read (an empty batch): not zeroed whole, as
	 * CONFIG_INIT_STACK_ALL_ZERO would, once per window admitted.
	 */
	struct folio_batch none __uninitialized;
	struct folio *folio;
	unsigned int n = 0;

	if (*index >= end)
		return 0;
	folio_batch_init(&none);
	__folio_batch_release(&none);
	rcu_read_lock();
	xas_for_each(&xas, folio, end - 1) {
		unsigned int order;
		pgoff_t first;

		if (xas_retry(&xas, folio) || xa_is_value(folio))
			goto resched;
		order = xas_get_order(&xas);
		first = round_down(xas.xa_index, 1UL << order);
		if (n == max) {
			/* Look at this folio again next time. */
			*index = first;
			goto out;
		}
		if (folio_test_dropbehind(folio)) {
			out[n].pfn = folio_pfn(folio);
			out[n].index = first;
			out[n].nr = 1UL << order;
			n++;
		}
		/*
		 * Skip the entry's sibling slots, as filemap_get_read_batch()
		 * does: xas_find() would step through them one by one, 31 for
		 * an order-5 folio.
		 */
		xas_advance(&xas, first + (1UL << order) - 1);
resched:
		if (need_resched()) {
			xas_pause(&xas);
			cond_resched_rcu();
		}
	}
	*index = end;
out:
	rcu_read_unlock();
	return n;
}

/* A P2P leg in flight: an asynchronous direct read of the router's own. */
struct spin_aio {
	struct kiocb iocb;
	struct completion done;
	long res;
};

struct spin_aio_batch {
	bool sync;
	unsigned int n;
	struct spin_aio aio[] __counted_by(n);
};

/**
 * spin_aio_batch_alloc - room for @n P2P legs in flight
 * @n: number of legs, at least one
 * @sync: issue the legs synchronously: spin_aio_start() returns when the
 *        leg is done, and the filesystem holds its locks for the whole I/O
 *
 * Return: the batch, or %NULL if out of memory.
 */
struct spin_aio_batch *spin_aio_batch_alloc(unsigned int n, bool sync)
{
	struct spin_aio_batch *batch;

	batch = kvzalloc(struct_size(batch, aio, n), GFP_KERNEL);
	if (batch) {
		batch->n = n;
		batch->sync = sync;
	}
	return batch;
}

/**
 * spin_aio_batch_free - free a batch
 * @batch: the batch; every leg started in it has been waited for
 */
void spin_aio_batch_free(struct spin_aio_batch *batch)
{
	kvfree(batch);
}

static void spin_aio_complete(struct kiocb *iocb, long res)
{
	struct spin_aio *aio = container_of(iocb, struct spin_aio, iocb);

	aio->res = res;
	complete(&aio->done);
}

/**
 * spin_aio_start - start a P2P leg as an asynchronous direct read
 * @batch: the batch
 * @idx: the leg's slot, below the batch's size, not in use
 * @orig: the request being routed
 * @pos: file offset of the leg
 * @addr: user address of the leg's destination (GPU memory)
 * @len: length of the leg
 *
 * The filesystem's direct read path pins the destination and submits the
 * bios before it returns, holding its locks only for that time, so the CPU
 * can copy the page-cache legs while the device transfers. In a batch made
 * synchronous, the leg is a synchronous direct read: it returns when done,
 * under the filesystem's locks throughout. Call
 * spin_aio_wait() for every started leg before the batch is freed and before
 * the request returns: the request's file reference covers the I/O.
 */
void spin_aio_start(struct spin_aio_batch *batch, unsigned int idx,
		    struct kiocb *orig, loff_t pos, unsigned long addr,
		    size_t len)
{
	struct spin_aio *aio = &batch->aio[idx];
	struct file *file = orig->ki_filp;
	struct iov_iter iter;
	ssize_t ret;

	kiocb_clone(&aio->iocb, orig, file);
	aio->iocb.ki_pos = pos;
	aio->iocb.ki_flags = (orig->ki_flags | IOCB_DIRECT) &
			     ~(IOCB_HIPRI | IOCB_WAITQ);
	aio->iocb.ki_complete = batch->sync ? NULL : spin_aio_complete;
	init_completion(&aio->done);
	iov_iter_ubuf(&iter, ITER_DEST, (void __user *)addr, len);
	ret = file->f_op->read_iter(&aio->iocb, &iter);
	if (ret != -EIOCBQUEUED)
		spin_aio_complete(&aio->iocb, ret);
}

/**
 * spin_aio_wait - wait for a P2P leg started with spin_aio_start()
 * @batch: the batch
 * @idx: the leg's slot
 *
 * Context: sleeps, uninterruptibly: the device is writing into user memory.
 * Return: bytes read or a negative errno.
 */
ssize_t spin_aio_wait(struct spin_aio_batch *batch, unsigned int idx)
{
	wait_for_completion(&batch->aio[idx].done);
	return batch->aio[idx].res;
}

/**
 * spin_file_size - the file's size, read consistently
 * @file: the file
 *
 * Return: i_size.
 */
loff_t spin_file_size(struct file *file)
{
	return i_size_read(file_inode(file));
}

/*
 * The disk's PCI device: the device that moves the data of its I/O
 * (disk_get_dma_device(): the disk's driver, or the NIC of NVMe over RDMA)
 * if that is a PCI device, or its first PCI ancestor. The caller keeps the
 * disk live: device_del() drops the disk's reference on its parent (see
 * disk_walk_bottom()).
 */
static struct pci_dev *spin_disk_pci_dev(struct gendisk *disk)
{
	struct device *dma = disk_get_dma_device(disk), *dev;
	struct pci_dev *pdev = NULL;

	for (dev = dma; dev && !pdev; dev = dev->parent)
		if (dev_is_pci(dev))
			pdev = pci_dev_get(to_pci_dev(dev));
	put_device(dma);
	return pdev;
}

/**
 * spin_file_stamp - what spin_file_facts() of a file depends on
 * @file: a regular file open for reading
 * @stamp: filled in
 *
 * The router keeps its file check's answer per inode and uses it again
 * while the stamp is unchanged: the inode's identity (address, superblock,
 * number and generation: an inode freed and reused for another file differs
 * in one of them), its flags (DAX, encrypted, verity, swap file), its ctime
 * (chattr(1), which changes how ext4 and XFS do direct I/O, updates it; so
 * does every write that converts ext4 inline data), whether this open file
 * can do direct I/O, whether the disk's queue accepts P2PDMA pages, and the
 * generation of the stacks of disks. Nothing is locked: a value torn by a
 * concurrent change differs from the stored one and only costs a new check.
 */
void spin_file_stamp(struct file *file, struct spin_file_stamp *stamp)
{
	struct inode *inode = file_inode(file);
	struct block_device *bdev = inode->i_sb->s_bdev;
	struct timespec64 ctime = inode_get_ctime(inode);

	stamp->inode = (unsigned long)inode;
	stamp->sb = (unsigned long)inode->i_sb;
	stamp->ino = inode->i_ino;
	stamp->i_generation = READ_ONCE(inode->i_generation);
	stamp->i_flags = READ_ONCE(inode->i_flags);
	stamp->ctime_sec = ctime.tv_sec;
	stamp->ctime_nsec = ctime.tv_nsec;
	stamp->can_odirect = !!(file->f_mode & FMODE_CAN_ODIRECT);
	stamp->queue_p2p = bdev && blk_queue_pci_p2pdma(bdev_get_queue(bdev));
	stamp->stack_generation = disk_stack_generation();
}

/**
 * spin_file_facts - what the router's file check looks at
 * @file: a regular file open for reading or writing
 * @facts: filled in
 *
 * Reads what does not depend on the destination: the file's disk and its
 * queue, direct I/O support as the open file and statx(STATX_DIOALIGN) report
 * it (0 means none: ext4 with data=journal or inline data, ...), the inode's
 * flags and what the filesystem declares in its fop_flags. The router
 * decides from them (rust/spin/router/verdict.rs).
 */
void spin_file_facts(struct file *file, struct spin_file_facts *facts)
{
	struct inode *inode = file_inode(file);
	struct block_device *bdev = inode->i_sb->s_bdev;
	fop_flags_t fop = file->f_op->fop_flags;
	struct kstat stat = {};

	memset(facts, 0, sizeof(*facts));
	facts->ino = inode->i_ino;
	facts->can_odirect = !!(file->f_mode & FMODE_CAN_ODIRECT);
	facts->special_inode = IS_DAX(inode) || IS_ENCRYPTED(inode) ||
			       IS_VERITY(inode) || IS_SWAPFILE(inode);
	facts->read_excl = !!(fop & FOP_READ_EXCL);
	facts->dio_excl = !!(fop & FOP_DIO_EXCL);
	if (!bdev)
		return;
	facts->devt = disk_devt(bdev->bd_disk);
	facts->disk_id = (unsigned long)bdev->bd_disk;
	facts->queue_p2p = blk_queue_pci_p2pdma(bdev_get_queue(bdev));
	facts->logical_block_size = bdev_logical_block_size(bdev);
	facts->dma_alignment = bdev_dma_alignment(bdev) + 1;
	facts->generation = disk_stack_generation();
	/*
	 * Built on other block devices (md, dm, an NVMe multipath head)? Read
	 * without the holder lock: a stack being built or torn down may be seen
	 * either way, and either answer is safe (a disk without slaves and
	 * without a PCI ancestor is refused).
	 */
	facts->stacked = disk_is_stacked(bdev->bd_disk);
	/* getattr is the costly part: only when direct I/O is possible at all. */
	if (facts->can_odirect && !facts->special_inode &&
	    !vfs_getattr_nosec(&file->f_path, &stat, STATX_DIOALIGN,
			       AT_STATX_DONT_SYNC) &&
	    (stat.result_mask & STATX_DIOALIGN)) {
		facts->dio_offset_align = stat.dio_offset_align;
		facts->dio_mem_align = stat.dio_mem_align;
	}
}

/**
 * spin_file_pci_dev - the PCI device of the disk holding a file
 * @file: the file; its filesystem has a block device
 *
 * Return: the PCI device that moves the disk's data (see
 * spin_disk_pci_dev()), with a reference held (drop it with pci_dev_put()),
 * or %NULL if there is none (a stacked disk: see spin_file_members()).
 */
struct pci_dev *spin_file_pci_dev(struct file *file)
{
	struct block_device *bdev = file_inode(file)->i_sb->s_bdev;

	return bdev ? spin_disk_pci_dev(bdev->bd_disk) : NULL;
}

/* The disks at the bottom of a stack, as spin_disk_members() collects them. */
struct spin_members {
	struct spin_member *out;
	unsigned int n, max;
};

static int spin_member_add(struct gendisk *disk, bool live, void *data)
{
	struct spin_members *m = data;

	if (m->n == m->max)
		return -E2BIG;
	m->out[m->n].devt = disk_devt(disk);
	m->out[m->n].pdev = live ? spin_disk_pci_dev(disk) : NULL;
	m->out[m->n].p2pdma = blk_queue_pci_p2pdma(disk->queue);
	m->n++;
	return 0;
}

/**
 * spin_disk_members - the disks at the bottom of a disk
 * @disk: a disk, stacked (md, dm) or not; the caller keeps it there
 * @out: filled with up to @max disks and their PCI devices
 * @max: room in @out
 *
 * Reports each disk at the bottom of @disk (disk_walk_bottom()) with the PCI
 * device that moves its data (spin_disk_pci_dev()): the devices that move the
 * data of a bio sent to @disk, and whether its queue accepts P2PDMA pages (a
 * stacked queue has the feature only if every disk under it has). A disk
 * whose data no PCI device moves (a loop device, an NVMe/TCP or loop path,
 * NVMe over software RDMA) is reported with @pdev %NULL, and so is one met
 * under @disk that is being deleted.
 *
 * Return: the number of disks stored, or a negative errno of
 * disk_walk_bottom(): -%E2BIG also if there are more than @max. The caller
 * drops the PCI device references of the stored entries.
 */
int spin_disk_members(struct gendisk *disk, struct spin_member *out,
		      unsigned int max)
{
	struct spin_members m = { .out = out, .max = max };
	int ret = disk_walk_bottom(disk, spin_member_add, &m);

	if (ret) {
		while (m.n)
			pci_dev_put(out[--m.n].pdev);
		return ret;
	}
	return m.n;
}

/**
 * spin_file_members - the disks at the bottom of a file's disk
 * @file: a file on a block device
 * @out: filled with up to @max disks and their PCI devices
 * @max: room in @out
 *
 * Return: as spin_disk_members() for the disk of the file's filesystem; 0
 * if it has none.
 */
int spin_file_members(struct file *file, struct spin_member *out,
		      unsigned int max)
{
	struct block_device *bdev = file_inode(file)->i_sb->s_bdev;

	return bdev ? spin_disk_members(bdev->bd_disk, out, max) : 0;
}

/**
 * spin_disk_p2pdma - does the disk's queue accept P2PDMA pages?
 * @disk: a disk
 *
 * Return: whether the queue has %BLK_FEAT_PCI_P2PDMA.
 */
bool spin_disk_p2pdma(struct gendisk *disk)
{
	return blk_queue_pci_p2pdma(disk->queue);
}

/**
 * spin_p2p_providers - the PCI devices that published p2pdma memory
 * @out: filled with up to @max devices, each with a reference held
 * @max: room in @out
 *
 * Return: the number of devices stored.
 */
unsigned int spin_p2p_providers(struct pci_dev **out, unsigned int max)
{
	struct pci_dev *pdev = NULL;
	unsigned int n = 0;

	for_each_pci_dev(pdev) {
		if (n == max) {
			pci_dev_put(pdev);
			break;
		}
		if (pci_has_p2pmem(pdev))
			out[n++] = pci_dev_get(pdev);
	}
	return n;
}

#ifdef CONFIG_SPIN_FAULT_INJECTION
static DECLARE_FAULT_ATTR(fail_spin_plan);

/**
 * spin_should_fail_plan - should planning this routed request fail?
 *
 * Return: %true when the fail_spin_plan fault attribute fires.
 */
bool spin_should_fail_plan(void)
{
	return should_fail(&fail_spin_plan, 1);
}

static DECLARE_FAULT_ATTR(fail_spin_evict);

/**
 * spin_should_fail_evict - should the GPU read-ahead partition find a batch
 *                          of folios busy?
 *
 * Return: %true when the fail_spin_evict fault attribute fires: the caller
 * then reports every folio of the batch busy without looking at it, as if
 * each were locked or in another CPU's LRU batch.
 */
bool spin_should_fail_evict(void)
{
	return should_fail(&fail_spin_evict, 1);
}

static int __init spin_fault_init(void)
{
	struct dentry *d = fault_create_debugfs_attr("fail_spin_plan", NULL,
						     &fail_spin_plan);

	if (IS_ERR(d))
		return PTR_ERR(d);
	return PTR_ERR_OR_ZERO(fault_create_debugfs_attr("fail_spin_evict", NULL,
							 &fail_spin_evict));
}
late_initcall(spin_fault_init);
#else
bool spin_should_fail_plan(void)
{
	return false;
}

bool spin_should_fail_evict(void)
{
	return false;
}
#endif
