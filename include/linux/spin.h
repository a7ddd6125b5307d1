/* SPDX-License-Identifier: GPL-2.0 */
/*
 * spin: reads into and writes from GPU memory, routed between the page cache
 * and P2P DMA by rust/spin. See Documentation/spin/router.rst.
 */
#ifndef _LINUX_SPIN_H
#define _LINUX_SPIN_H

#include <linux/fs.h>
#include <linux/jump_label.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/uio.h>

struct gendisk;

ssize_t spin_route_read_iter(struct kiocb *iocb, struct iov_iter *iter);
ssize_t spin_route_write_iter(struct kiocb *iocb, struct iov_iter *iter);

#ifdef CONFIG_SPIN
DECLARE_STATIC_KEY_FALSE(spin_route_key);
extern const struct attribute_group spin_disk_attr_group;
void spin_disk_release(struct gendisk *disk);

/*
 * The key is on while a p2pdma provider is bound; then only processes that
 * mapped p2pdma memory (MMF_P2PDMA) are looked at, every other one pays this
 * bit test.
 */
static inline bool spin_wants_current(void)
{
	struct mm_struct *mm;

	if (!static_branch_unlikely(&spin_route_key))
		return false;
	mm = current->mm;
	return mm && mm_flags_test(MMF_P2PDMA, mm);
}
#else
static inline bool spin_wants_current(void) { return false; }
static inline void spin_disk_release(struct gendisk *disk) { }
#endif /* CONFIG_SPIN */

/**
 * spin_read_iter() - ->read_iter(), through the spin router if needed
 * @iocb: the read's control block
 * @iter: the destination
 *
 * Context: as ->read_iter(), from the read entry points of user space
 * (read(2), pread(2) and the vectored forms, io_uring and aio).
 * Return: as ->read_iter().
 */
static inline ssize_t spin_read_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	if (spin_wants_current())
		return spin_route_read_iter(iocb, iter);
	return iocb->ki_filp->f_op->read_iter(iocb, iter);
}

/**
 * spin_write_iter() - ->write_iter(), through the spin router if needed
 * @iocb: the write's control block
 * @iter: the source
 *
 * Context: as ->write_iter(), from the write entry points of user space,
 * inside file_start_write().
 * Return: as ->write_iter().
 */
static inline ssize_t spin_write_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	if (spin_wants_current())
		return spin_route_write_iter(iocb, iter);
	return iocb->ki_filp->f_op->write_iter(iocb, iter);
}

#endif /* _LINUX_SPIN_H */
