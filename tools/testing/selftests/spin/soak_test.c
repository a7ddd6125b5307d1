// SPDX-License-Identifier: GPL-2.0
/*
 * A bounded soak: for SOAK_SECS seconds, on ext4 (spin-nvme0)
 * and xfs (spin-nvme1) at once,
 *  - GPU readers: pread, preadv, io_uring READ and aio PREAD of a file that
 *    never changes into GPU memory, random offsets and lengths (aligned and
 *    not), every byte checked from the host side of the GPU memory;
 *  - CPU readers: pread into host memory and loads through a file mapping
 *    (which promote read-ahead partition pages), every byte checked;
 *  - droppers: POSIX_FADV_DONTNEED and WILLNEED on random ranges;
 *  - writers: pwrite from GPU memory (aligned and not), hole punches and
 *    truncates to a file of their own, with a shadow copy; the file is read
 *    back into GPU memory and into host memory and compared with it;
 *  - a mapper: buffers allocated, mapped, read into, closed while mapped and
 *    unmapped, while a second thread unmaps and maps the buffer it reads
 *    into again (reads into it must be right, short or EFAULT);
 * all under mode auto with GPU read-ahead on. Then GPU readers run while the
 * provider unbinds (reads right, short or EFAULT; no p2pdma memory in use
 * when the driver's unbind runs), the provider is bound again and its pool
 * must be back to its size. Last, kmemleak (the debug kernel) is asked to
 * scan: no unreferenced object may involve spin, p2pdma, dma-buf or a heap;
 * others (upstream's) are listed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define SOAK_SECS 60
#define RO_LEN (16 * MiB)		/* the file readers read */
#define W_LEN (4 * MiB)			/* a writer's file */
#define RBUF (8 * MiB)			/* a GPU reader's buffer */
#define DRV "/sys/bus/pci/drivers/p2pdma_bar"
#define KMEMLEAK "/sys/kernel/debug/kmemleak"

enum kind { K_GPU, K_CPU, K_DROP, K_WRITE, K_MAP, K_NR };
static const char *const kind_name[K_NR] = {
	"GPU readers", "CPU readers", "droppers", "writers", "mapper",
};

struct tally {
	long ops, wrong, efault, shorts, errors;
	char why[192];
};

struct shared {
	int stop;
	struct tally t[K_NR];
	long by_entry[4];		/* GPU reads by pread, preadv, io_uring, aio */
};

/* The readers read each filesystem's data file; the writers write its file "w". */
static struct spin_fs all[] = {
	SPIN_FS_EXT4("/mnt/soak-ext4", 901),
	SPIN_FS_XFS("/mnt/soak-xfs", 902),
};

static char gpu[PATH_MAX];
static struct shared *sh;
static double deadline;

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int running(void)
{
	return !__atomic_load_n(&sh->stop, __ATOMIC_RELAXED) && spin_now() < deadline;
}

static __printf(3, 4) void bad(enum kind k, long *counter, const char *fmt, ...)
{
	struct tally *t = &sh->t[k];
	va_list ap;

	if (__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED) == 0 && !t->why[0]) {
		va_start(ap, fmt);
		vsnprintf(t->why, sizeof(t->why), fmt, ap);
		va_end(ap);
	}
}

static void count(enum kind k)
{
	__atomic_fetch_add(&sh->t[k].ops, 1, __ATOMIC_RELAXED);
}

/* A random (offset, length) in [0, @size): aligned or not, small or large. */
static void pick(uint64_t *s, size_t size, size_t max, off_t *pos, size_t *len)
{
	size_t l;

	switch (rng(s) % 4) {
	case 0:
		l = (rng(s) % 16 + 1) * PG;			/* aligned, small */
		break;
	case 1:
		l = (rng(s) % (max / PG) + 1) * PG;		/* aligned, up to max */
		break;
	case 2:
		l = rng(s) % (64 * KiB) + 1;			/* small, unaligned */
		break;
	default:
		l = rng(s) % max + 1;				/* anything */
		break;
	}
	if (l > size)
		l = size;
	*len = l;
	*pos = rng(s) % (size - l + 1);
	if (rng(s) % 2)
		*pos &= ~(off_t)(PG - 1);
}

/* ---- GPU readers ---------------------------------------------------------- */

static ssize_t gpu_read(int entry, int fd, uint8_t *dst, size_t len, off_t pos,
			struct spin_ring *ring)
{
	switch (entry) {
	case 0:
		return pread(fd, dst, len, pos);
	case 1: {
		size_t half = len / 2;
		struct iovec iov[2] = { { dst, half }, { dst + half, len - half } };

		return preadv(fd, iov, 2, pos);
	}
	case 2: {
		struct io_uring_sqe *sqe = spin_ring_sqe(ring, 0);
		int res = 0;

		sqe->opcode = IORING_OP_READ;
		sqe->fd = fd;
		sqe->addr = (uintptr_t)dst;
		sqe->len = len;
		sqe->off = pos;
		if (spin_ring_run(ring, 1, &res))
			return -1;
		if (res < 0) {
			errno = -res;
			return -1;
		}
		return res;
	}
	default: {
		struct iocb cb = { .aio_fildes = fd, .aio_lio_opcode = IOCB_CMD_PREAD,
				   .aio_buf = (uintptr_t)dst, .aio_nbytes = len,
				   .aio_offset = pos };
		long long res = spin_aio_one(&cb);

		if (res < 0) {
			errno = -res;
			return -1;
		}
		return res;
	}
	}
}

/*
 * Reads @fs's read-only file into GPU memory until the deadline. With
 * @lenient (the unbind phase) bytes are not checked and EFAULT ends it.
 */
static void __noreturn gpu_reader(struct spin_fs *fs, uint64_t s, int lenient)
{
	int heap, buf, fd = open(fs->path, O_RDONLY);
	uint8_t *g = spin_gpu_buffer(gpu, RBUF, &heap, &buf);
	struct spin_ring ring;
	char why[256];

	if (fd < 0 || g == MAP_FAILED || spin_ring_init(&ring, 4, 0)) {
		bad(K_GPU, &sh->t[K_GPU].errors, "%s: reader setup: %s", fs->name,
		    strerror(errno));
		_exit(1);
	}
	for (long i = 0; running(); i++) {
		int entry = i % 4;
		size_t len, doff;
		off_t pos;
		ssize_t n;

		pick(&s, RO_LEN, 4 * MiB, &pos, &len);
		doff = rng(&s) % (RBUF - len + 1);
		if (rng(&s) % 2)
			doff &= ~(PG - 1);
		n = gpu_read(entry, fd, g + doff, len, pos, &ring);
		count(K_GPU);
		__atomic_fetch_add(&sh->by_entry[entry], 1, __ATOMIC_RELAXED);
		if (lenient) {
			if (n < 0 && errno == EFAULT) {
				__atomic_fetch_add(&sh->t[K_GPU].efault, 1, __ATOMIC_RELAXED);
				break;
			}
			if (n >= 0 && n < (ssize_t)len)
				__atomic_fetch_add(&sh->t[K_GPU].shorts, 1, __ATOMIC_RELAXED);
			else if (n != (ssize_t)len)
				bad(K_GPU, &sh->t[K_GPU].errors,
				    "%s: unbind phase: read %zu at %lld: %s",
				    fs->name, len, (long long)pos, strerror(errno));
			continue;
		}
		if (n != (ssize_t)len) {
			bad(K_GPU, &sh->t[K_GPU].errors, "%s: entry %d: read %zu at %lld: %zd (%s)",
			    fs->name, entry, len, (long long)pos, n, strerror(errno));
			continue;
		}
		if (spin_gpu_check(gpu, g + doff, len, fs->seed, pos, why, sizeof(why)))
			bad(K_GPU, &sh->t[K_GPU].wrong, "%s: entry %d: read %zu at %lld: %s",
			    fs->name, entry, len, (long long)pos, why);
	}
	_exit(0);
}

/* ---- CPU readers and droppers ----------------------------------------------- */

static void __noreturn cpu_reader(struct spin_fs *fs, uint64_t s)
{
	uint8_t *h = spin_alloc_aligned(4 * MiB);
	int fd = open(fs->path, O_RDONLY);
	const uint8_t *map = fd < 0 ? MAP_FAILED : mmap(NULL, RO_LEN, PROT_READ, MAP_SHARED, fd, 0);

	if (!h || map == MAP_FAILED) {
		bad(K_CPU, &sh->t[K_CPU].errors, "%s: CPU reader setup: %s", fs->name,
		    strerror(errno));
		_exit(1);
	}
	while (running()) {
		size_t len;
		off_t pos;
		ssize_t n, at;

		pick(&s, RO_LEN, 4 * MiB, &pos, &len);
		if (rng(&s) % 2) {
			n = pread(fd, h, len, pos);
			if (n != (ssize_t)len) {
				bad(K_CPU, &sh->t[K_CPU].errors, "%s: read %zu at %lld: %zd (%s)",
				    fs->name, len, (long long)pos, n, strerror(errno));
			} else {
				at = spin_pattern_check(h, pos, len, fs->seed);
				if (at >= 0)
					bad(K_CPU, &sh->t[K_CPU].wrong,
					    "%s: read %zu at %lld: byte %zd wrong",
					    fs->name, len, (long long)pos, at);
			}
		} else {
			at = spin_pattern_check(map + pos, pos, len, fs->seed);
			if (at >= 0)
				bad(K_CPU, &sh->t[K_CPU].wrong,
				    "%s: mapping, %zu at %lld: byte %zd wrong",
				    fs->name, len, (long long)pos, at);
		}
		count(K_CPU);
	}
	_exit(0);
}

static void __noreturn dropper(uint64_t s)
{
	int fd[2] = { open(all[0].path, O_RDONLY), open(all[1].path, O_RDONLY) };

	while (running()) {
		size_t len;
		off_t pos;

		pick(&s, RO_LEN, 8 * MiB, &pos, &len);
		if (posix_fadvise(fd[rng(&s) % 2], pos, len,
				  rng(&s) % 4 ? POSIX_FADV_DONTNEED : POSIX_FADV_WILLNEED))
			bad(K_DROP, &sh->t[K_DROP].errors, "fadvise: %s", strerror(errno));
		count(K_DROP);
		usleep(2000);
	}
	_exit(0);
}

/* ---- writers ---------------------------------------------------------------- */

static void __noreturn gpu_writer(struct spin_fs *fs, uint64_t s)
{
	uint8_t *shadow = calloc(1, W_LEN), *h = spin_alloc_aligned(W_LEN);
	char why[256], path[PATH_MAX];
	int heap, buf, fd;
	uint8_t *g;

	snprintf(path, sizeof(path), "%s/w", fs->dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	g = spin_gpu_buffer(gpu, W_LEN, &heap, &buf);

	if (!shadow || !h || fd < 0 || g == MAP_FAILED || ftruncate(fd, W_LEN)) {
		bad(K_WRITE, &sh->t[K_WRITE].errors, "%s: writer setup: %s", fs->name,
		    strerror(errno));
		_exit(1);
	}
	for (uint64_t v = 1; running(); v++) {
		size_t len;
		off_t pos;
		ssize_t n;

		pick(&s, W_LEN, 2 * MiB, &pos, &len);
		switch (rng(&s) % 8) {
		case 4:		/* a hole */
			pos &= ~(off_t)(PG - 1);
			len = (len + PG - 1) & ~(PG - 1);
			if (pos + len > W_LEN)
				len = W_LEN - pos;
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, pos, len))
				bad(K_WRITE, &sh->t[K_WRITE].errors, "%s: punch: %s", fs->name,
				    strerror(errno));
			else
				memset(shadow + pos, 0, len);
			break;
		case 5:		/* truncate, then back to the full size */
			if (ftruncate(fd, pos) || ftruncate(fd, W_LEN))
				bad(K_WRITE, &sh->t[K_WRITE].errors, "%s: truncate: %s", fs->name,
				    strerror(errno));
			else
				memset(shadow + pos, 0, W_LEN - pos);
			break;
		case 6:		/* read back into GPU memory */
			n = pread(fd, g, W_LEN, 0);
			if (n != (ssize_t)W_LEN)
				bad(K_WRITE, &sh->t[K_WRITE].errors, "%s: read back: %zd (%s)",
				    fs->name, n, strerror(errno));
			else if (spin_gpu_compare(gpu, g, W_LEN, shadow, why, sizeof(why)))
				bad(K_WRITE, &sh->t[K_WRITE].wrong,
				    "%s: read back into GPU memory: %s", fs->name, why);
			break;
		case 7:		/* read back into host memory */
			n = pread(fd, h, W_LEN, 0);
			if (n != (ssize_t)W_LEN || memcmp(h, shadow, W_LEN))
				bad(K_WRITE, &sh->t[K_WRITE].wrong, "%s: read back by the CPU: %zd",
				    fs->name, n);
			if (rng(&s) % 4 == 0 && fsync(fd))
				bad(K_WRITE, &sh->t[K_WRITE].errors, "%s: fsync: %s", fs->name,
				    strerror(errno));
			break;
		default:	/* a write from GPU memory, at the same offset in the buffer */
			spin_pattern_fill(g + pos, pos, len, fs->seed * 1000 + v);
			n = pwrite(fd, g + pos, len, pos);
			if (n != (ssize_t)len)
				bad(K_WRITE, &sh->t[K_WRITE].errors,
				    "%s: write %zu at %lld: %zd (%s)",
				    fs->name, len, (long long)pos, n, strerror(errno));
			else
				spin_pattern_fill(shadow + pos, pos, len, fs->seed * 1000 + v);
			break;
		}
		count(K_WRITE);
	}
	_exit(0);
}

/* ---- the mapper ----------------------------------------------------------- */

struct remap {
	uint8_t *addr;
	size_t len;
	int fd;
	int stop;
};

/* Unmaps the buffer and maps it again at the same address, while reads go into it. */
static void *remapper(void *arg)
{
	struct remap *r = arg;
	void *p;

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		usleep(3000);
		munmap(r->addr, r->len);
		usleep(1000);
		p = mmap(r->addr, r->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, r->fd, 0);
		if (p == MAP_FAILED)
			bad(K_MAP, &sh->t[K_MAP].errors, "mmap again: %s", strerror(errno));
	}
	return NULL;
}

static void __noreturn buffer_mapper(uint64_t s)
{
	int heap = spin_heap_open(gpu), fd = open(all[0].path, O_RDONLY);
	char why[256];

	if (heap < 0 || fd < 0) {
		bad(K_MAP, &sh->t[K_MAP].errors, "mapper setup: %s", strerror(errno));
		_exit(1);
	}
	while (running()) {
		size_t size = (rng(&s) % 64 + 1) * 64 * KiB, len = 64 * KiB;
		off_t pos = (rng(&s) % (RO_LEN / PG - 16)) * PG;
		int buf = spin_heap_alloc(heap, size, O_RDWR | O_CLOEXEC, 0);
		uint8_t *p = buf < 0 ? MAP_FAILED :
			     mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
		struct remap r = { p, size, buf, 0 };
		pthread_t t;
		ssize_t n;

		if (p == MAP_FAILED) {
			bad(K_MAP, &sh->t[K_MAP].errors, "alloc/mmap %zu: %s", size,
			    buf < 0 ? strerror(-buf) : strerror(errno));
			if (buf >= 0)
				close(buf);
			continue;
		}
		switch (rng(&s) % 3) {
		case 0:		/* a read, then close while mapped, then unmap */
			n = pread(fd, p, len, pos);
			close(buf);
			if (n != (ssize_t)len ||
			    spin_gpu_check(gpu, p, len, all[0].seed, pos, why, sizeof(why)))
				bad(K_MAP, &sh->t[K_MAP].wrong, "read %zd into a new buffer: %s", n,
				    n == (ssize_t)len ? why : strerror(errno));
			munmap(p, size);
			break;
		case 1:		/* a child reads into the inherited mapping */
			if (!fork()) {
				n = pread(fd, p, len, pos);
				_exit(n != (ssize_t)len ||
				      spin_gpu_check(gpu, p, len, all[0].seed, pos, why,
						     sizeof(why)));
			}
			{
				int status = 1;

				wait(&status);
				if (!WIFEXITED(status) || WEXITSTATUS(status))
					bad(K_MAP, &sh->t[K_MAP].wrong,
					    "a child's read into an inherited mapping");
			}
			munmap(p, size);
			close(buf);
			break;
		default:	/* reads while the mapping goes and comes back */
			if (pthread_create(&t, NULL, remapper, &r)) {
				bad(K_MAP, &sh->t[K_MAP].errors, "pthread_create");
				munmap(p, size);
				close(buf);
				break;
			}
			for (int i = 0; i < 16; i++) {
				n = pread(fd, p, len, pos);
				if (n < 0 && errno == EFAULT)
					__atomic_fetch_add(&sh->t[K_MAP].efault, 1,
							   __ATOMIC_RELAXED);
				else if (n >= 0 && n < (ssize_t)len)
					__atomic_fetch_add(&sh->t[K_MAP].shorts, 1,
							   __ATOMIC_RELAXED);
				else if (n != (ssize_t)len)
					bad(K_MAP, &sh->t[K_MAP].errors, "read under remapping: %s",
					    strerror(errno));
			}
			__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
			pthread_join(t, NULL);
			/* The same buffer is mapped again: the last full read must be there. */
			n = pread(fd, p, len, pos);
			if (n != (ssize_t)len ||
			    spin_gpu_check(gpu, p, len, all[0].seed, pos, why, sizeof(why)))
				bad(K_MAP, &sh->t[K_MAP].wrong, "read after remapping: %zd: %s", n,
				    n == (ssize_t)len ? why : strerror(errno));
			munmap(p, size);
			close(buf);
			break;
		}
		count(K_MAP);
	}
	_exit(0);
}

/* ---- phases ----------------------------------------------------------------- */

/* @fs mounted, with its data file. */
static void fs_setup(struct spin_fs *fs)
{
	uint8_t *h = spin_alloc_aligned(MiB);
	int fd;

	if (!h)
		ksft_exit_fail_msg("%s: %s\n", fs->name, strerror(errno));
	SPIN_FS_SETUP_OR_EXIT(fs, 0);
	fd = open(fs->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; fd >= 0 && off < RO_LEN; off += MiB) {
		spin_pattern_fill(h, off, MiB, fs->seed);
		if (pwrite(fd, h, MiB, off) != (ssize_t)MiB)
			ksft_exit_fail_msg("%s: %s: %s\n", fs->name, fs->path, strerror(errno));
	}
	if (fd < 0 || fsync(fd))
		ksft_exit_fail_msg("%s: %s: %s\n", fs->name, fs->path, strerror(errno));
	close(fd);
	free(h);
}

static pid_t spawn(int k, struct spin_fs *fs, uint64_t seed, int lenient)
{
	pid_t pid = fork();

	if (pid)
		return pid;
	switch (k) {
	case K_GPU:
		gpu_reader(fs, seed, lenient);
	case K_CPU:
		cpu_reader(fs, seed);
	case K_DROP:
		dropper(seed);
	case K_WRITE:
		gpu_writer(fs, seed);
	default:
		buffer_mapper(seed);
	}
}

/* The operations so far, at most every 15 s. */
static void show_progress(void)
{
	static double last;

	if (spin_now() - last < 15)
		return;
	last = spin_now();
	ksft_print_msg("progress: GPU %ld, CPU %ld, drop %ld, write %ld, map %ld\n",
		       sh->t[K_GPU].ops, sh->t[K_CPU].ops, sh->t[K_DROP].ops,
		       sh->t[K_WRITE].ops, sh->t[K_MAP].ops);
}

/*
 * Waits for the workers, at most until @limit seconds after the deadline: a
 * worker still running then is reported with its kernel stack (and all
 * blocked tasks by sysrq-w), killed, and counted as a failure, so that a
 * hang fails the test instead of stopping the whole run.
 */
static void wait_all(pid_t *pids, int n, double limit)
{
	for (int i = 0; i < n; i++) {
		int status = 0;
		char who[48];
		pid_t r;

		while ((r = waitpid(pids[i], &status, WNOHANG)) == 0 &&
		       spin_now() < deadline + limit) {
			show_progress();
			usleep(100000);
		}
		if (r == 0) {
			ksft_print_msg("worker %d still running %.0f s after the deadline\n",
				       pids[i], limit);
			spin_write_file("/proc/sysrq-trigger", "w");
			snprintf(who, sizeof(who), "stack of worker %d", pids[i]);
			spin_show_stack(pids[i], who);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], &status, 0);
			bad(K_MAP, &sh->t[K_MAP].errors, "a worker hung (see its stack above)");
			continue;
		}
		if (r != pids[i] || !WIFEXITED(status))
			bad(K_MAP, &sh->t[K_MAP].errors, "a worker died (status %#x)", status);
	}
}

static long long p2pmem_available(void)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/available", gpu);
	return spin_read_ll(path);
}

static void unbind_phase(long long avail0)
{
	const char *bdf = strrchr(gpu, '/') + 1;
	long efault0 = sh->t[K_GPU].efault;
	pid_t pids[4];
	char key[128];
	int ret, heap, fd;

	memset(&sh->t[K_GPU].why, 0, sizeof(sh->t[K_GPU].why));
	sh->t[K_GPU].errors = 0;
	sh->stop = 0;
	deadline = spin_now() + 30;
	for (int i = 0; i < 4; i++)
		pids[i] = spawn(K_GPU, &all[i % 2], 7000 + i, 1);
	sleep(2);
	ret = spin_write_file(DRV "/unbind", bdf);
	wait_all(pids, 4, 120);
	snprintf(key, sizeof(key), "%s: unbind: ", bdf);
	ksft_test_result(!ret && !sh->t[K_GPU].errors && sh->t[K_GPU].efault > efault0 &&
			 spin_log_last_is(key, "no p2pdma memory in use"),
			 "unbind under GPU reads on ext4 and xfs: %s; reads ended with EFAULT (%ld), %ld short, %ld other%s%s; nothing in use at the driver's unbind\n",
			 ret ? strerror(-ret) : "ok", sh->t[K_GPU].efault - efault0,
			 sh->t[K_GPU].shorts, sh->t[K_GPU].errors, sh->t[K_GPU].why[0] ? ": " : "",
			 sh->t[K_GPU].why);
	ret = spin_write_file(DRV "/bind", bdf);
	heap = spin_heap_open(gpu);
	fd = heap < 0 ? -1 : spin_heap_alloc(heap, MiB, O_RDWR, 0);
	if (fd >= 0)
		close(fd);
	if (heap >= 0)
		close(heap);
	ksft_test_result(!ret && fd >= 0 && p2pmem_available() == avail0,
			 "bound again: the heap allocates, the pool is back to its size (%lld of %lld bytes)\n",
			 p2pmem_available(), avail0);
}

/* Is a kmemleak record (from "unreferenced object" to the next) about spin? */
static int involves_spin(const char *rec, size_t len)
{
	static const char *const words[] = { "spin", "p2pdma", "p2pmem", "dma_buf", "dma_heap",
					     "dmabuf" };
	char *r = strndup(rec, len);
	int hit = 0;

	for (size_t i = 0; r && i < ARRAY_SIZE(words); i++)
		hit |= !!strstr(r, words[i]);
	free(r);
	return hit;
}

static void kmemleak_check(void)
{
	char *buf = malloc(1 << 20), *p, *next;
	int fd, mine = 0, others = 0;
	ssize_t n = 0;

	if (access(KMEMLEAK, F_OK)) {
		ksft_test_result_fail("kmemleak: %s is missing (a kernel without DEBUG_KMEMLEAK)\n",
				      KMEMLEAK);
		return;
	}
	/* Two scans: an object is reported once unreferenced for a while. */
	spin_write_file(KMEMLEAK, "scan");
	sleep(6);
	spin_write_file(KMEMLEAK, "scan");
	fd = open(KMEMLEAK, O_RDONLY);
	while (buf && fd >= 0 && n < (1 << 20) - 1) {
		ssize_t r = read(fd, buf + n, (1 << 20) - 1 - n);

		if (r <= 0)
			break;
		n += r;
	}
	if (fd >= 0)
		close(fd);
	if (!buf || fd < 0) {
		ksft_test_result_fail("kmemleak: cannot read %s\n", KMEMLEAK);
		return;
	}
	buf[n] = 0;
	for (p = strstr(buf, "unreferenced object"); p; p = next) {
		char first[160];
		size_t len;

		next = strstr(p + 1, "unreferenced object");
		len = next ? (size_t)(next - p) : strlen(p);
		if (involves_spin(p, len)) {
			mine++;
			/* Not the kernel log: the report's wording is kept out of it. */
			snprintf(first, sizeof(first), "%.*s", (int)strcspn(p + 20, "\n"), p + 20);
			ksft_print_msg("kmemleak, spin's: %s\n", first);
			ksft_print_msg("%.*s\n", (int)len > 1500 ? 1500 : (int)len, p);
		} else {
			others++;
		}
	}
	ksft_test_result(!mine,
			 "kmemleak after the soak and the unbind: %d unreferenced object(s) of spin, p2pdma or dma-buf; %d elsewhere (upstream, not judged here)\n",
			 mine, others);
	free(buf);
}

int main(void)
{
	pid_t pids[16];
	long long avail0;
	int np = 0;
	double t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ksft_print_header();
	ksft_set_plan(K_NR + 4);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		ksft_exit_fail_msg("shared memory: %s\n", strerror(errno));
	memset(sh, 0, sizeof(*sh));
	avail0 = p2pmem_available();
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		fs_setup(&all[i]);
	if (spin_sysfs_set(SPIN_SYS "/mode", "auto"))
		ksft_exit_fail_msg("mode auto: %s\n", strerror(errno));

	t0 = spin_now();
	deadline = t0 + SOAK_SECS;
	for (int f = 0; f < 2; f++) {
		pids[np++] = spawn(K_GPU, &all[f], 100 + f, 0);
		pids[np++] = spawn(K_GPU, &all[f], 200 + f, 0);
		pids[np++] = spawn(K_CPU, &all[f], 300 + f, 0);
		pids[np++] = spawn(K_WRITE, &all[f], 400 + f, 0);
	}
	pids[np++] = spawn(K_DROP, NULL, 500, 0);
	pids[np++] = spawn(K_MAP, NULL, 600, 0);
	wait_all(pids, np, 120);
	ksft_print_msg("soak: %.0f s; GPU reads by pread %ld, preadv %ld, io_uring %ld, aio %ld\n",
		       spin_now() - t0, sh->by_entry[0], sh->by_entry[1], sh->by_entry[2],
		       sh->by_entry[3]);
	for (int k = 0; k < K_NR; k++) {
		struct tally *t = &sh->t[k];

		ksft_test_result(t->ops > 0 && !t->wrong && !t->errors,
				 "soak, %s: %ld operations, %ld wrong, %ld failed, %ld EFAULT, %ld short%s%s\n",
				 kind_name[k], t->ops, t->wrong, t->errors, t->efault, t->shorts,
				 t->why[0] ? ": " : "", t->why);
	}
	{
		long long p2p = spin_stat_get("/sys/kernel/spin/stat", "bytes_p2p");
		long long pc = spin_stat_get("/sys/kernel/spin/stat", "bytes_pagecache");

		ksft_test_result(p2p > 0 && pc > 0,
				 "the reads were routed both ways (bytes_p2p %lld, bytes_pagecache %lld since boot)\n",
				 p2p, pc);
	}
	unbind_phase(avail0);
	kmemleak_check();
	ksft_finished();
}
