// SPDX-License-Identifier: GPL-2.0
/*
 * insn_count: a QEMU TCG plugin that counts the guest instructions executed,
 * per translation block start address, in phases the guest marks by calling
 * two kernel functions. It gives exact instruction counts per kernel
 * function, with no sampling: what instruction-counted guest time
 * (vm.py --icount) charges a code path, broken down.
 *
 * Arguments (-plugin insn_count.so,out=F,toggle=A,phase=B,on=1):
 *   out     the report file, written when QEMU exits
 *   toggle  a guest virtual address (hex): each execution of the block that
 *           starts there switches counting on or off (every vCPU at once)
 *   phase   a guest virtual address (hex): each execution of the block that
 *           starts there starts a new phase (up to MAX_PHASES)
 *   on      1: count from the start (a whole run, boot included)
 *
 * Report lines: "phase P vaddr N count" for every block executed in phase P
 * while counting was on (N instructions per execution, count executions),
 * after a "phases P" line. tools/testing/spin/scripts/insn_prof.py reads it.
 *
 * Only the few plugin API calls below are used; they are declared here as
 * QEMU's <qemu-plugin.h> (API version 2 and later) declares them, so that
 * the plugin builds with no QEMU source or GLib headers.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
		void (*cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
		void (*cb)(unsigned int vcpu, void *udata),
		enum qemu_plugin_cb_flags flags, void *udata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
		void (*cb)(qemu_plugin_id_t id, void *udata), void *udata);

EXPORT int qemu_plugin_version = 2;

#define MAX_PHASES 64

struct block {
	uint64_t vaddr;
	uint64_t n;
	uint64_t count[MAX_PHASES];
	struct block *next;
};

static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t toggle_at, phase_at;
static volatile int on;
static volatile int phase;
static const char *out = "insn_count.txt";

static void exec_block(unsigned int vcpu, void *udata)
{
	struct block *b = udata;
	int p = phase;

	(void)vcpu;
	if (on && p < MAX_PHASES)
		__atomic_fetch_add(&b->count[p], 1, __ATOMIC_RELAXED);
}

static void exec_toggle(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	__atomic_fetch_xor(&on, 1, __ATOMIC_SEQ_CST);
	exec_block(vcpu, udata);
}

static void exec_phase(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	__atomic_fetch_add(&phase, 1, __ATOMIC_SEQ_CST);
	exec_block(vcpu, udata);
}

static void translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b = calloc(1, sizeof(*b));
	void (*cb)(unsigned int, void *) = exec_block;

	(void)id;
	if (!b)
		abort();
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->n = qemu_plugin_tb_n_insns(tb);
	pthread_mutex_lock(&lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&lock);
	if (b->vaddr == toggle_at)
		cb = exec_toggle;
	else if (b->vaddr == phase_at)
		cb = exec_phase;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, cb, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void report(qemu_plugin_id_t id, void *udata)
{
	FILE *f = fopen(out, "w");

	(void)id;
	(void)udata;
	if (!f)
		return;
	fprintf(f, "phases %d\n", phase);
	for (struct block *b = blocks; b; b = b->next)
		for (int p = 0; p < MAX_PHASES; p++)
			if (b->count[p])
				fprintf(f, "phase %d %" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
					p, b->vaddr, b->n, b->count[p]);
	fclose(f);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
			       int argc, char **argv)
{
	(void)info;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
		else if (!strncmp(argv[i], "toggle=", 7))
			toggle_at = strtoull(argv[i] + 7, NULL, 16);
		else if (!strncmp(argv[i], "phase=", 6))
			phase_at = strtoull(argv[i] + 6, NULL, 16);
		else if (!strcmp(argv[i], "on=1"))
			on = 1;
		else
			return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translate);
	qemu_plugin_register_atexit_cb(id, report, NULL);
	return 0;
}
