/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host-VMA hint of the spin router's entry: per CPU, the last host VMAs
 * found for a process with GPU memory mapped, so that its reads and writes
 * of host memory are passed on after a few compares. Private to rust/spin.
 */
#ifndef _RUST_SPIN_HOST_HINT_H
#define _RUST_SPIN_HOST_HINT_H

#include <linux/mm_types.h>
#include <linux/mmap_lock.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/uio.h>

/* The user address of an ITER_UBUF iterator's next byte. */
static __always_inline unsigned long spin_ubuf_addr(const struct iov_iter *iter)
{
	return (unsigned long)iter->ubuf + iter->iov_offset;
}

/* Host VMAs remembered per CPU: a process reads into its stack and heap in turn. */
#define SPIN_HOST_HINTS 4

/*
 * The last host VMAs a CPU found for a process with GPU memory mapped, the
 * latest first: their mm (compared, never followed), the mm's mm_lock_seq
 * when they were found, and their bounds (an unused slot is empty, 0-0).
 * Every change of an mm's VMAs takes its mmap_lock for writing, which moves
 * mm_lock_seq, so the entries hold while the sequence is unchanged.
 */
struct spin_host_hint {
	const struct mm_struct *mm;
	unsigned int seq;
	struct {
		unsigned long start, end;
	} vma[SPIN_HOST_HINTS];
};

DECLARE_PER_CPU(struct spin_host_hint, spin_host_hint);

bool spin_addr_lookup(struct mm_struct *mm, unsigned long addr, bool spec,
		      unsigned int seq);

/*
 * spin_host_hint_hit - is @addr in a host VMA this CPU found in @mm?
 * @mm: the current mm
 * @addr: a user address
 * @seq: @mm's mm_lock_seq, read by mmap_lock_speculate_try_begin()
 */
static __always_inline bool spin_host_hint_hit(const struct mm_struct *mm,
					       unsigned long addr,
					       unsigned int seq)
{
	struct spin_host_hint *h = get_cpu_ptr(&spin_host_hint);
	bool hit = false;
	int i;

	if (h->mm == mm && h->seq == seq) {
		for (i = 0; i < SPIN_HOST_HINTS; i++) {
			/* Unsigned: below start wraps; an empty slot is 0-0. */
			if (addr - h->vma[i].start <
			    h->vma[i].end - h->vma[i].start) {
				hit = true;
				break;
			}
		}
	}
	put_cpu_ptr(&spin_host_hint);
	return hit;
}

/*
 * spin_addr_maybe_gpu - could @addr of @mm be GPU memory?
 * @mm: the current mm
 * @addr: a user address
 * @hint: look at this CPU's hint first (%false: a caller looked already)
 *
 * See spin_iter_maybe_gpu(). The VMA is found under RCU, as
 * lock_vma_under_rcu() finds it, without locking it; if the mm's
 * mm_lock_seq did not move meanwhile (the speculation uprobes uses), the
 * VMA's bounds and flags were read whole, and a host VMA is remembered per
 * CPU (the last SPIN_HOST_HINTS of them), so that the next read into it
 * costs a few compares.
 */
static __always_inline bool spin_addr_maybe_gpu(struct mm_struct *mm,
						unsigned long addr, bool hint)
{
	unsigned int seq;
	bool spec;

	spec = mmap_lock_speculate_try_begin(mm, &seq);
	if (hint && spec && spin_host_hint_hit(mm, addr, seq))
		return false;
	return spin_addr_lookup(mm, addr, spec, seq);
}

/*
 * spin_ubuf_host_hint - does a one-segment request start in a host VMA
 * this CPU remembered?
 * @iter: a destination or source
 *
 * The common request of a process with GPU memory mapped, a read(2) or
 * write(2) of host memory, answered before anything else is looked at: a
 * request that starts in host memory is passed on, whatever it is.
 *
 * Return: %true if @iter is an ITER_UBUF whose first byte is in that VMA.
 */
static __always_inline bool spin_ubuf_host_hint(const struct iov_iter *iter)
{
	struct mm_struct *mm;
	unsigned int seq;

	if (!IS_ENABLED(CONFIG_PER_VMA_LOCK) || !iter_is_ubuf(iter))
		return false;
	mm = current->mm;
	if (unlikely(!mm) || !mmap_lock_speculate_try_begin(mm, &seq))
		return false;
	return spin_host_hint_hit(mm, spin_ubuf_addr(iter), seq);
}

#endif /* _RUST_SPIN_HOST_HINT_H */
