// SPDX-License-Identifier: GPL-2.0
/*
 * The host-VMA hint of the spin router's entry (host_hint.h): its per-CPU
 * entries and the VMA lookup that fills them.
 */

#include <linux/maple_tree.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/string.h>

#include "host_hint.h"

DEFINE_PER_CPU(struct spin_host_hint, spin_host_hint);

/*
 * spin_host_hint_add - remember a host VMA of @mm on this CPU
 * @mm: the current mm
 * @seq: its mm_lock_seq, unchanged since the VMA was found
 * @start: the VMA's start
 * @end: its end
 *
 * The entries of another mm, or of another sequence of @mm, are dropped;
 * the oldest entry makes room.
 */
static void spin_host_hint_add(const struct mm_struct *mm, unsigned int seq,
			       unsigned long start, unsigned long end)
{
	struct spin_host_hint *h = get_cpu_ptr(&spin_host_hint);

	if (h->mm != mm || h->seq != seq) {
		memset(h->vma, 0, sizeof(h->vma));
		h->mm = mm;
		h->seq = seq;
	}
	memmove(&h->vma[1], &h->vma[0], sizeof(h->vma) - sizeof(h->vma[0]));
	h->vma[0].start = start;
	h->vma[0].end = end;
	put_cpu_ptr(&spin_host_hint);
}

/*
 * spin_addr_lookup - spin_addr_maybe_gpu() when the per-CPU hint missed
 *
 * Out of line, so that a hit (every read of a process into its host
 * buffers, after the first) takes no stack frame for the maple state.
 */
noinline bool spin_addr_lookup(struct mm_struct *mm, unsigned long addr,
			       bool spec, unsigned int seq)
{
	unsigned long start = 0, end = 0, flags = 0;
	struct vm_area_struct *vma;

	rcu_read_lock();
	{
		MA_STATE(mas, &mm->mm_mt, addr, addr);

		vma = mas_walk(&mas);
		if (vma) {
			start = READ_ONCE(vma->vm_start);
			end = READ_ONCE(vma->vm_end);
			flags = READ_ONCE(vma->vm_flags);
		}
	}
	rcu_read_unlock();
	if (!vma || addr < start || addr >= end)
		return false;
	if (flags & VM_MIXEDMAP)
		return true;
	if (spec && !mmap_lock_speculate_retry(mm, seq))
		spin_host_hint_add(mm, seq, start, end);
	return false;
}
