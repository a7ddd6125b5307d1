/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The spin router's C/Rust interface, private to rust/spin: the thin C
 * helpers of spin_glue.c that the Rust side calls (reaching bindgen through
 * rust/bindings/bindings_helper.h under CONFIG_SPIN), and the router's
 * entries that spin_glue.c calls. See Documentation/spin/router.rst.
 */
#ifndef _RUST_SPIN_GLUE_H
#define _RUST_SPIN_GLUE_H

#include <linux/spin.h>

struct gendisk;
struct pci_dev;
struct vm_area_struct;

void spin_route_key_get(void);
void spin_route_key_put(void);
/**
 * enum spin_route_verdict - what spin_routable() says of a request
 * @SPIN_ROUTE_NO: pass it on unchanged
 * @SPIN_ROUTE_YES: look at it; it may block
 * @SPIN_ROUTE_LATER: it must not block: -EAGAIN if it is GPU I/O
 * @SPIN_ROUTE_CACHED: a non-blocking read: if it is GPU I/O, copy what is
 *                     cached and start no I/O
 */
enum spin_route_verdict {
	SPIN_ROUTE_NO,
	SPIN_ROUTE_YES,
	SPIN_ROUTE_LATER,
	SPIN_ROUTE_CACHED,
};

/* The router's entries (Rust), for requests spin_routable() let through. */
ssize_t spin_router_read_iter(struct kiocb *iocb, struct iov_iter *iter,
			      enum spin_route_verdict verdict);
ssize_t spin_router_write_iter(struct kiocb *iocb, struct iov_iter *iter,
			       enum spin_route_verdict verdict);

ssize_t spin_read_cached(struct kiocb *iocb, struct iov_iter *iter);

bool spin_iocb_append(const struct kiocb *iocb);
void spin_mm_mark_p2pdma(struct mm_struct *mm);
struct pci_dev *spin_vma_p2p_provider(struct vm_area_struct *vma,
				      unsigned long addr);
bool spin_iter_segment(const struct iov_iter *iter, unsigned long idx,
		       size_t before, unsigned long *addr, size_t *len);
void spin_iter_advance(struct iov_iter *iter, size_t bytes);
ssize_t spin_sub_read(struct kiocb *orig, loff_t pos, unsigned long addr,
		      size_t len, bool gpu);
ssize_t spin_sub_write(struct kiocb *orig, loff_t pos, unsigned long addr,
		       size_t len, bool direct, loff_t *end);
ssize_t spin_write_sync(struct kiocb *orig, loff_t end, size_t written);
loff_t spin_file_size(struct file *file);

struct spin_aio_batch;
struct spin_aio_batch *spin_aio_batch_alloc(unsigned int n, bool sync);
void spin_aio_start(struct spin_aio_batch *batch, unsigned int idx,
		    struct kiocb *orig, loff_t pos, unsigned long addr,
		    size_t len);
ssize_t spin_aio_wait(struct spin_aio_batch *batch, unsigned int idx);
void spin_aio_batch_free(struct spin_aio_batch *batch);

/**
 * struct spin_file_facts - what the router's file check looks at
 * @ino: inode number
 * @devt: device number of the whole disk holding the file, 0 if none
 * @disk_id: the disk's identity (its address: compared, never followed),
 *           which tells apart two disks that had the same device number
 * @can_odirect: the open file can do direct I/O (FMODE_CAN_ODIRECT)
 * @special_inode: a DAX, encrypted or verity file, or an active swap file
 * @dio_offset_align: file offset alignment of direct I/O (STATX_DIOALIGN);
 *                    0 if none, or not looked up (no disk, no direct I/O or
 *                    a special inode)
 * @dio_mem_align: memory alignment of direct I/O; 0 as @dio_offset_align
 * @queue_p2p: the disk's queue accepts P2PDMA pages
 * @logical_block_size: the disk's logical block size
 * @dma_alignment: the disk's DMA alignment: bdev_dma_alignment() + 1
 * @stacked: the disk is built on other block devices (md, dm, NVMe
 *           multipath): spin_file_members() lists the disks under it
 * @generation: disk_stack_generation() before @stacked was read
 * @read_excl: the filesystem's buffered reads exclude buffered writes
 *             (FOP_READ_EXCL)
 * @dio_excl: the filesystem honours IOCB_DIO_EXCL (FOP_DIO_EXCL)
 */
struct spin_file_facts {
	u64 ino;
	dev_t devt;
	unsigned long disk_id;
	bool can_odirect;
	bool special_inode;
	u32 dio_offset_align;
	u32 dio_mem_align;
	bool queue_p2p;
	u32 logical_block_size;
	u32 dma_alignment;
	bool stacked;
	u64 generation;
	bool read_excl;
	bool dio_excl;
};

void spin_file_facts(struct file *file, struct spin_file_facts *facts);
struct pci_dev *spin_file_pci_dev(struct file *file);

/**
 * struct spin_file_stamp - what spin_file_facts() depends on
 * @inode: the inode's address: compared, never followed
 * @sb: its superblock's address: compared, never followed
 * @ino: its number
 * @i_generation: its generation
 * @i_flags: its flags (S_DAX, S_ENCRYPTED, S_VERITY, S_SWAPFILE, ...)
 * @ctime_sec: its ctime, seconds
 * @ctime_nsec: its ctime, nanoseconds
 * @can_odirect: the open file can do direct I/O (FMODE_CAN_ODIRECT)
 * @queue_p2p: the disk's queue accepts P2PDMA pages
 * @stack_generation: disk_stack_generation()
 */
struct spin_file_stamp {
	unsigned long inode;
	unsigned long sb;
	u64 ino;
	u32 i_generation;
	u32 i_flags;
	s64 ctime_sec;
	u32 ctime_nsec;
	bool can_odirect;
	bool queue_p2p;
	u64 stack_generation;
};

void spin_file_stamp(struct file *file, struct spin_file_stamp *stamp);
ssize_t spin_sub_read_noio(struct kiocb *orig, loff_t pos, unsigned long addr,
			   size_t len, bool dontcache);

/**
 * struct spin_member - a disk at the bottom of a stack of disks
 * @devt: its device number
 * @pdev: its PCI device, %NULL if it has none (a reference is held; drop it
 *        with pci_dev_put())
 * @p2pdma: its queue accepts P2PDMA pages
 */
struct spin_member {
	dev_t devt;
	struct pci_dev *pdev;
	bool p2pdma;
};

/* The most disks spin_file_members() reports under one stacked disk. */
#define SPIN_MEMBERS_MAX 64

int spin_file_members(struct file *file, struct spin_member *out,
		      unsigned int max);
int spin_disk_members(struct gendisk *disk, struct spin_member *out,
		      unsigned int max);
bool spin_disk_p2pdma(struct gendisk *disk);
unsigned int spin_p2p_providers(struct pci_dev **out, unsigned int max);

/* The most p2pdma providers /sys/block/<disk>/spin/p2p reports. */
#define SPIN_PROVIDERS_MAX 16

unsigned long spin_file_io_pages(struct file *file);

/**
 * struct spin_ra_window - the read-ahead window after a GPU page-cache leg
 * @mapping: the file's mapping, as a number: compared, never followed
 * @start: first page of the file's read-ahead window
 * @nr: pages in it; 0 if the file has none
 * @prev_start: first page of the window before the leg
 * @prev_nr: pages in that window; 0 if there was none
 * @moved: the leg started read-ahead: the window is new
 */
struct spin_ra_window {
	unsigned long mapping;
	pgoff_t start;
	unsigned long nr;
	pgoff_t prev_start;
	unsigned long prev_nr;
	bool moved;
};

/**
 * struct spin_ra_folio - a dropbehind folio of a read-ahead window
 * @pfn: its first page's pfn
 * @index: its index in the file
 * @nr: its pages
 */
struct spin_ra_folio {
	unsigned long pfn;
	pgoff_t index;
	unsigned long nr;
};

ssize_t spin_sub_read_ra(struct kiocb *orig, loff_t pos, unsigned long addr,
			 size_t len, bool defer, struct spin_ra_window *win);
unsigned int spin_ra_collect(struct file *file, pgoff_t *index, pgoff_t end,
			     struct spin_ra_folio *out, unsigned int max);
pgoff_t spin_next_miss(struct file *file, pgoff_t index,
		       unsigned long max_scan);

/**
 * struct spin_ra_facts - what GPU read-ahead's look-ahead depends on
 * @ra_pages: the file's read-ahead window size, 0 if read-ahead is off
 * @size: the file's size
 * @congested: the task's blkcg is congested (read-ahead then reads nothing
 *             beyond what is asked)
 */
struct spin_ra_facts {
	unsigned int ra_pages;
	loff_t size;
	bool congested;
};

void spin_ra_facts(struct file *file, struct spin_ra_facts *facts);
bool spin_ra_bridge(struct file *file, pgoff_t gap, unsigned long max,
		    struct spin_ra_window *win);
bool spin_should_fail_plan(void);
bool spin_should_fail_evict(void);

#endif /* _RUST_SPIN_GLUE_H */
