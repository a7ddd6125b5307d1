// SPDX-License-Identifier: GPL-2.0
/*
 * The provider goes away under its users: unbinding p2pdma_bar from the
 * stand-in GPU while a buffer is mapped and O_DIRECT reads run into it. The
 * exporter revokes (Documentation/spin/gpu-memory.rst): the mapping faults
 * (SIGBUS, EFAULT for reads into it), new allocations and mmaps get ENODEV,
 * in-flight I/O completes, nothing leaks, and a re-bind serves again. The
 * memory is withdrawn and published again through p2pdma_bar's debugfs
 * switch, also by two threads that race each other: the heap follows the
 * final state every time. Then driver_override: p2pdma_bar refuses a device
 * without a usable BAR and takes any device with a 64-bit prefetchable
 * memory BAR (an NVMe CMB).
 *
 * Runs last: it unbinds and re-binds devices the other tests use.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)
#define DRV "/sys/bus/pci/drivers/p2pdma_bar"

static sigjmp_buf fault_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(fault_jmp, sig);
}

/* Did touching @p raise SIGBUS? */
static int faults(uint8_t *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int sig;

	sigaction(SIGBUS, &sa, &old);
	sig = sigsetjmp(fault_jmp, 1);
	if (!sig)
		(void)__atomic_load_n(p, __ATOMIC_RELAXED);	/* a real load */
	sigaction(SIGBUS, &old, NULL);
	return sig == SIGBUS;
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

static const char *bdf_of(const char *pcidir)
{
	return strrchr(pcidir, '/') + 1;
}

static int bound_to(const char *pcidir, const char *drv)
{
	char path[PATH_MAX + 16], target[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/driver", pcidir);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return !drv;
	target[n] = '\0';
	return drv && !strcmp(strrchr(target, '/') + 1, drv);
}

static long long p2pmem_size(const char *pcidir)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/size", pcidir);
	return spin_read_ll(path);
}

static long long p2pmem_available(const char *pcidir)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/available", pcidir);
	return spin_read_ll(path);
}

static int log_has(const char *needle)
{
	return spin_log_count(needle) > 0;
}

/* Move @pcidir from its driver to @drv with driver_override; "" restores @back. */
static int rebind(const char *pcidir, const char *drv, const char *back)
{
	char path[PATH_MAX + 64];
	const char *bdf = bdf_of(pcidir);

	snprintf(path, sizeof(path), "%s/driver/unbind", pcidir);
	if (!access(path, W_OK) && sysfs_write(path, bdf))
		return -1;
	snprintf(path, sizeof(path), "%s/driver_override", pcidir);
	if (sysfs_write(path, drv[0] ? drv : "\n"))
		return -1;
	snprintf(path, sizeof(path), "/sys/bus/pci/drivers/%s/bind", drv[0] ? drv : back);
	return sysfs_write(path, bdf);
}

/* Wait up to 10 s for the namespace of the NVMe device with @serial. */
static int nvme_back(const char *serial)
{
	char dev[64];

	for (int i = 0; i < 100; i++) {
		if (!spin_nvme_blockdev(serial, dev, sizeof(dev)))
			return 1;
		usleep(100000);
	}
	return 0;
}

/*
 * Forks a reader that reads 4 MiB at a time by O_DIRECT from @dev into
 * @bufs buffers of 4 MiB at @p until it got @efaults EFAULTs (at most 2000
 * reads). It exits 0 if it had full reads, then EFAULTs, and nothing else.
 */
static pid_t direct_reader(const char *dev, uint8_t *p, int bufs, int efaults)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(dev, O_RDONLY | O_DIRECT), ok = 0, efault = 0, other = 0;

		for (int i = 0; i < 2000 && efault < efaults; i++) {
			ssize_t n = pread(fd, p + (i % bufs) * 4 * MiB, 4 * MiB, (i % 8) * 4 * MiB);

			if (n == (ssize_t)(4 * MiB))
				ok++;
			else if (n < 0 && errno == EFAULT)
				efault++;
			else
				other++;
		}
		printf("# reader: %d full reads, %d EFAULT, %d other\n", ok, efault, other);
		_exit(ok > 0 && efault > 0 && other == 0 ? 0 : 1);
	}
	return pid;
}

/*
 * A provider that withdraws its memory and publishes it again while bound,
 * as a GPU driver that sets up P2P memory on demand does (p2pdma_bar's
 * debugfs switch): buffers are revoked at the withdrawal, with the DMA into
 * them over before it returns; the heap serves again after the publication.
 */
static void withdraw_and_publish(const char *gpu, int heap)
{
	char sw[128], state[8] = "?", dev0[64], over[128];
	long long full = p2pmem_available(gpu);
	int over0;
	int buf = spin_heap_alloc(heap, 4 * MiB, O_RDWR | O_CLOEXEC, 0), ret, status = 1, fd2;
	uint8_t *q = buf < 0 ? MAP_FAILED :
		     mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	pid_t pid;

	snprintf(sw, sizeof(sw), "/sys/kernel/debug/p2pdma_bar-%s/published", bdf_of(gpu));
	snprintf(over, sizeof(over), "p2p-%s: the DMA into 1 revoked buffer(s) is over",
		 bdf_of(gpu));
	over0 = spin_log_count(over);
	spin_read_file(sw, state, sizeof(state));
	if (q == MAP_FAILED || spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev0, sizeof(dev0))) {
		ksft_test_result_fail("withdraw: no buffer: %s\n", strerror(errno));
		ksft_test_result_fail("publish again: not run\n");
		return;
	}
	pid = direct_reader(dev0, q, 1, 2);
	usleep(300000);
	ret = sysfs_write(sw, "0");
	waitpid(pid, &status, 0);
	fd2 = spin_heap_alloc(heap, MiB, O_RDWR, 0);
	ksft_test_result(!strcmp(state, "1") && !ret && WIFEXITED(status) && !WEXITSTATUS(status) &&
			 fd2 == -ENODEV && faults(q) &&
			 spin_log_count(over) == over0 + 1,
			 "withdrawn through debugfs (was %s): reads in flight complete, then EFAULT; the mapping SIGBUS; allocation %s\n",
			 state, strerror(fd2 < 0 ? -fd2 : 0));
	if (fd2 >= 0)
		close(fd2);
	munmap(q, 4 * MiB);
	close(buf);
	ret = sysfs_write(sw, "1");
	fd2 = spin_heap_alloc(heap, MiB, O_RDWR, 0);
	state[0] = '?';
	spin_read_file(sw, state, sizeof(state));
	ksft_test_result(!ret && fd2 >= 0 && !strcmp(state, "1") &&
			 p2pmem_available(gpu) == full - (long long)MiB,
			 "published again: the heap allocates (%s), switch %s\n",
			 fd2 < 0 ? strerror(-fd2) : "ok", state);
	if (fd2 >= 0)
		close(fd2);
}

#define RACE_ROUNDS 400
#define RACE_BURST 6

static pthread_barrier_t race_start, race_done;

/* One of the two threads of publish_race(). */
struct toggler {
	const char *sw;		/* the debugfs switch */
	int writes;		/* per round: RACE_BURST or one more, out of phase */
	int failed;		/* writes that failed */
};

/*
 * Writes 0 and 1 alternately to the switch, @t->writes times a round, ending
 * on the round's state: withdrawn in even rounds, published in odd ones.
 */
static void *toggle(void *arg)
{
	struct toggler *t = arg;
	int fd = open(t->sw, O_WRONLY);

	for (int r = 0; r < RACE_ROUNDS; r++) {
		pthread_barrier_wait(&race_start);
		for (int k = 0; k < t->writes; k++)
			if (write(fd, (r ^ (t->writes - 1 - k)) & 1 ? "1" : "0", 1) != 1)
				t->failed++;
		pthread_barrier_wait(&race_done);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/*
 * Publications and withdrawals that race: two threads flip the stand-in
 * GPU's switch against each other, out of phase, in rounds that both end on
 * the same state (withdrawn, then published, alternately). After every round
 * the switch is written once more with that state, which changes nothing,
 * and the heap must follow it: ENODEV when withdrawn, an allocation when
 * published. The last round ends published, and the buffer allocated then
 * maps. Then the switch is set back to what it was.
 */
static void publish_race(const char *gpu, int heap)
{
	char sw[128], state[8] = "?", now[8], miss[32] = "";
	struct toggler t[2] = {
		{ .writes = RACE_BURST },
		{ .writes = RACE_BURST + 1 },
	};
	int missed = 0, mapped = 0, ret;
	pthread_t th[2];

	snprintf(sw, sizeof(sw), "/sys/kernel/debug/p2pdma_bar-%s/published", bdf_of(gpu));
	spin_read_file(sw, state, sizeof(state));
	if (pthread_barrier_init(&race_start, NULL, 3) || pthread_barrier_init(&race_done, NULL, 3))
		ksft_exit_fail_msg("publish race: no barrier\n");
	for (int i = 0; i < 2; i++) {
		t[i].sw = sw;
		if (pthread_create(&th[i], NULL, toggle, &t[i]))
			ksft_exit_fail_msg("publish race: no thread\n");
	}
	for (int r = 0; r < RACE_ROUNDS; r++) {
		const char *want = r & 1 ? "1" : "0";
		int fd, ok;

		pthread_barrier_wait(&race_start);
		pthread_barrier_wait(&race_done);
		ret = sysfs_write(sw, want);
		fd = spin_heap_alloc(heap, MiB, O_RDWR | O_CLOEXEC, 0);
		now[0] = '\0';
		spin_read_file(sw, now, sizeof(now));
		ok = !ret && !strcmp(now, want) && (r & 1 ? fd >= 0 : fd == -ENODEV);
		if (ok && r == RACE_ROUNDS - 1) {
			size_t len = MiB;
			uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

			if (m != MAP_FAILED) {
				memset(m, 0x5a, len);
				mapped = m[len - 1] == 0x5a;
				munmap(m, len);
			}
		}
		if (!ok && !missed++)
			snprintf(miss, sizeof(miss), ", the first in round %d", r);
		if (fd >= 0)
			close(fd);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&race_start);
	pthread_barrier_destroy(&race_done);
	ksft_test_result(!missed && mapped && !t[0].failed && !t[1].failed,
			 "publish and withdraw raced from two threads (%d writes, %d failed): the heap missed the final state in %d of %d rounds%s; published, a buffer maps: %s\n",
			 RACE_ROUNDS * (t[0].writes + t[1].writes), t[0].failed + t[1].failed,
			 missed, RACE_ROUNDS, miss, mapped ? "yes" : "no");

	/* Withdrawn and published once more, one at a time; then as it was. */
	sysfs_write(sw, "0");
	sysfs_write(sw, "1");
	if (!strcmp(state, "0"))
		sysfs_write(sw, "0");
}

/*
 * A provider whose memory is first published after probe (the rig's second,
 * 8 MiB ivshmem device, which p2pdma_bar registers but leaves unpublished:
 * p2pdma_bar.defer_below_mib=16 on the command line): no heap until it is
 * published; then the heap appears and serves; withdrawn, it refuses.
 */
static void late_provider(const char *gpu, const char *dev0)
{
	char late[PATH_MAX] = "", sw[128], node[128], state[8] = "?";
	struct dirent *e;
	DIR *d = opendir("/sys/bus/pci/devices");
	int before, heap, fd2 = -1, buf, fd, ret;
	uint8_t *m, *want = spin_alloc_aligned(MiB);
	ssize_t n = -1;

	while (d && (e = readdir(d))) {
		char path[PATH_MAX + 300], v[16] = "", dv[16] = "", real[PATH_MAX];

		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		spin_read_file(path, v, sizeof(v));
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", e->d_name);
		spin_read_file(path, dv, sizeof(dv));
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", e->d_name);
		if (!strcmp(v, "0x1af4") && !strcmp(dv, "0x1110") && realpath(path, real) &&
		    strcmp(real, gpu))
			snprintf(late, sizeof(late), "%s", real);
	}
	if (d)
		closedir(d);
	if (!late[0]) {
		ksft_test_result_fail("late provider: the second ivshmem device is missing\n");
		ksft_test_result_fail("late provider: published: not run\n");
		ksft_test_result_fail("late provider: withdrawn: not run\n");
		return;
	}
	snprintf(sw, sizeof(sw), "/sys/kernel/debug/p2pdma_bar-%s/published", bdf_of(late));
	snprintf(node, sizeof(node), "/dev/dma_heap/p2p-%s", bdf_of(late));
	spin_read_file(sw, state, sizeof(state));
	before = access(node, F_OK);
	ksft_test_result(bound_to(late, "p2pdma_bar") && !strcmp(state, "0") && before &&
			 p2pmem_size(late) > 0,
			 "late provider %s: registered in probe (%lld bytes), not published, no heap\n",
			 bdf_of(late), p2pmem_size(late));

	ret = sysfs_write(sw, "1");
	heap = spin_heap_open(late);
	buf = heap < 0 ? -1 : spin_heap_alloc(heap, MiB, O_RDWR | O_CLOEXEC, 0);
	m = buf < 0 ? MAP_FAILED : mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	fd = open(dev0, O_RDONLY | O_DIRECT);
	if (m != MAP_FAILED && fd >= 0 && want && pread(fd, want, MiB, 0) == (ssize_t)MiB) {
		memset(m, 0x5a, MiB);
		n = pread(fd, m, MiB, 0);
	}
	ksft_test_result(!ret && !access(node, F_OK) && n == (ssize_t)MiB && !memcmp(m, want, MiB),
			 "published through debugfs: %s appears and serves (an O_DIRECT read of %zd bytes into it)\n",
			 node, n);
	if (m != MAP_FAILED)
		munmap(m, MiB);
	if (buf >= 0)
		close(buf);
	if (fd >= 0)
		close(fd);

	ret = sysfs_write(sw, "0");
	fd2 = heap < 0 ? -1 : spin_heap_alloc(heap, MiB, O_RDWR, 0);
	ksft_test_result(!ret && fd2 == -ENODEV,
			 "withdrawn: the heap stays and refuses allocations (%s)\n",
			 strerror(fd2 < 0 ? -fd2 : 0));
	if (fd2 >= 0)
		close(fd2);
	if (heap >= 0)
		close(heap);
	free(want);
}

/*
 * The NVMe driver registers and publishes spin-nvme1's CMB in its probe: the
 * CMB gets a heap of its own, and an O_DIRECT read from spin-nvme0 lands in
 * it (the CPU reads it back through the mapping).
 */
static void cmb_heap(const char *nvme1, const char *dev0)
{
	int heap = spin_heap_open(nvme1), buf, fd;
	uint8_t *c, *want = spin_alloc_aligned(MiB);
	ssize_t n = -1;

	buf = heap < 0 ? heap : spin_heap_alloc(heap, MiB, O_RDWR | O_CLOEXEC, 0);
	c = buf < 0 ? MAP_FAILED : mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	fd = open(dev0, O_RDONLY | O_DIRECT);
	if (c != MAP_FAILED && fd >= 0 && want && pread(fd, want, MiB, 0) == (ssize_t)MiB) {
		memset(c, 0xa5, MiB);
		n = pread(fd, c, MiB, 0);
	}
	ksft_test_result(n == (ssize_t)MiB && !memcmp(c, want, MiB),
			 "the NVMe driver's CMB of %s has a heap; an O_DIRECT read lands in it (%zd bytes)\n",
			 bdf_of(nvme1), n);
	if (fd >= 0)
		close(fd);
	if (c != MAP_FAILED)
		munmap(c, MiB);
	if (buf >= 0)
		close(buf);
	if (heap >= 0)
		close(heap);
	free(want);
}

int main(void)
{
	char gpu[PATH_MAX], dev0[64], nvme0[PATH_MAX], nvme1[PATH_MAX], path[PATH_MAX + 32];
	char line[256];
	long long avail0, full;
	int heap, buf, fd2, io, status, ret;
	uint8_t *p, *q;
	pid_t pid;
	struct timespec t0, t1;

	ksft_print_header();
	ksft_set_plan(24);
	if (spin_gpu_find(gpu, sizeof(gpu)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev0, sizeof(dev0)) ||
	    spin_nvme_pcidir(SPIN_NVME0_SERIAL, nvme0, sizeof(nvme0)) ||
	    spin_nvme_pcidir(SPIN_NVME1_SERIAL, nvme1, sizeof(nvme1)))
		SPIN_SKIP_MISSING("rig devices not found");
	if (!bound_to(gpu, "p2pdma_bar"))
		ksft_exit_fail_msg("the stand-in GPU is not bound to p2pdma_bar\n");

	heap = spin_heap_open(gpu);
	avail0 = p2pmem_available(gpu);
	buf = spin_heap_alloc(heap, 16 * MiB, O_RDWR | O_CLOEXEC, 0);
	p = buf < 0 ? MAP_FAILED : mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	ksft_test_result(p != MAP_FAILED, "16 MiB of GPU memory mapped\n");
	if (p == MAP_FAILED)
		ksft_exit_fail_msg("no GPU memory: %s\n", strerror(errno));
	memset(p, 0x5a, 16 * MiB);

	/* O_DIRECT reads into the buffer, in a child, while the provider goes away. */
	pid = direct_reader(dev0, p, 4, 4);
	usleep(300000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = sysfs_write(DRV "/unbind", bdf_of(gpu));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ksft_test_result(!ret && bound_to(gpu, NULL),
			 "unbind p2pdma_bar under a mapping and O_DIRECT I/O: %s, %.0f ms\n",
			 strerror(-ret),
			 (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	waitpid(pid, &status, 0);
	ksft_test_result(WIFEXITED(status) && !WEXITSTATUS(status),
			 "in-flight reads completed, later ones got EFAULT, nothing else\n");
	/*
	 * The DMA in flight was over before the driver's unbind callback, where
	 * a GPU driver would reset its device: p2pdma_bar reports what is still
	 * in use there.
	 */
	snprintf(line, sizeof(line), "%s: unbind: ", bdf_of(gpu));
	ksft_test_result(spin_log_last_is(line, "no p2pdma memory in use"),
			 "nothing of the GPU memory was in use when the driver's unbind ran\n");
	snprintf(line, sizeof(line), "p2p-%s: the DMA into 1 revoked buffer(s) is over",
		 bdf_of(gpu));
	ksft_test_result(log_has(line), "spin waited for it before: \"%s\"\n", line);

	ksft_test_result(faults(p) && faults(p + 16 * MiB - 1),
			 "the revoked mapping raises SIGBUS\n");
	io = open(dev0, O_RDONLY);
	ret = pread(io, p, 4096, 0);
	ksft_test_result(ret == -1 && errno == EFAULT, "buffered pread into it: EFAULT\n");
	close(io);
	ret = spin_heap_alloc(heap, MiB, O_RDWR, 0);
	ksft_test_result(ret == -ENODEV, "allocation from the heap: %s\n",
			 strerror(ret < 0 ? -ret : 0));
	q = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	ksft_test_result(q == MAP_FAILED && errno == ENODEV,
			 "mmap of the revoked buffer: ENODEV\n");

	/* Bind again: a fresh pool, the same heap. */
	ret = sysfs_write(DRV "/bind", bdf_of(gpu));
	full = p2pmem_available(gpu);
	fd2 = spin_heap_alloc(heap, 8 * MiB, O_RDWR, 0);
	ksft_test_result(!ret && fd2 >= 0 && p2pmem_available(gpu) == full - 8 * (long long)MiB,
			 "re-bind: the heap allocates again (%lld bytes in the pool)\n", full);
	if (fd2 >= 0)
		close(fd2);
	munmap(p, 16 * MiB);
	close(buf);
	ksft_test_result(p2pmem_available(gpu) == full && full == avail0,
			 "nothing leaked: %lld available, %lld before the unbind\n",
			 p2pmem_available(gpu), avail0);
	withdraw_and_publish(gpu, heap);
	publish_race(gpu, heap);
	close(heap);

	/* driver_override: no usable BAR on spin-nvme0 (its BAR0 is not prefetchable). */
	ret = rebind(nvme0, "p2pdma_bar", "nvme");
	ksft_test_result(!bound_to(nvme0, "p2pdma_bar") && log_has("no usable BAR"),
			 "p2pdma_bar refuses %s: not bound, says why\n", bdf_of(nvme0));
	ret = rebind(nvme0, "", "nvme");
	ksft_test_result(!ret && bound_to(nvme0, "nvme") && nvme_back(SPIN_NVME0_SERIAL),
			 "%s back on nvme\n", bdf_of(nvme0));

	/* ... but it takes spin-nvme1's CMB: a 64-bit prefetchable memory BAR. */
	ret = rebind(nvme1, "p2pdma_bar", "nvme");
	heap = spin_heap_open(nvme1);
	fd2 = heap < 0 ? -1 : spin_heap_alloc(heap, MiB, O_RDWR, 0);
	ksft_test_result(!ret && bound_to(nvme1, "p2pdma_bar") && p2pmem_available(nvme1) > 0,
			 "driver_override: p2pdma_bar publishes %s's CMB (%lld bytes)\n",
			 bdf_of(nvme1), p2pmem_available(nvme1));
	ksft_test_result(fd2 >= 0, "and its heap allocates from it\n");
	if (fd2 >= 0)
		close(fd2);
	if (heap >= 0)
		close(heap);
	ret = rebind(nvme1, "", "nvme");
	ksft_test_result(!ret && bound_to(nvme1, "nvme") && nvme_back(SPIN_NVME1_SERIAL),
			 "%s back on nvme\n", bdf_of(nvme1));
	snprintf(path, sizeof(path), "%s/p2pmem/available", nvme1);
	ksft_test_result(spin_read_ll(path) > 0, "its CMB is p2pmem again (%lld bytes)\n",
			 spin_read_ll(path));
	cmb_heap(nvme1, dev0);
	late_provider(gpu, dev0);
	ksft_finished();
}
