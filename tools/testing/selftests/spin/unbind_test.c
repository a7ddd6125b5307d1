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
 * It unbinds and re-binds devices the other tests use. The tests run in this
 * order, and each fixture's teardown gives back what a failed
 * test left behind (the GPU bound to p2pdma_bar and its memory published as
 * before, the NVMe drives on nvme, the late provider's memory unpublished),
 * so that one failure does not fail the tests after it.
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
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)
#define DRV "/sys/bus/pci/drivers/p2pdma_bar"
/* The harness's default of 30 s is too short for the rig's throttled disks under TCG. */
#define TIMEOUT 600

/*
 * The sysfs directories of the stand-in GPU, spin-nvme0 and spin-nvme1 ("" if
 * the rig has none), found once before the tests: spin_nvme_pcidir() finds a
 * drive only while it is bound to nvme, and the tests move the drives off it.
 */
static char gpu[PATH_MAX], nvme0[PATH_MAX], nvme1[PATH_MAX];
/*
 * The stand-in GPU's heap, opened once before the tests: the heap outlives the
 * driver's unbind, and the tests after the re-bind allocate from the same file.
 */
static int gpu_heap = -1;

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
 * The debugfs switch of p2pdma_bar's device (write 1 to publish its memory, 0 to
 * withdraw it), and its state before a test ("" unread).
 */
struct switch_state {
	char path[128];
	char published[8];
};

/* Reads the switch of the provider at @pcidir, for switch_restore(). */
static void switch_save(struct switch_state *sw, const char *pcidir)
{
	snprintf(sw->path, sizeof(sw->path), "/sys/kernel/debug/p2pdma_bar-%s/published",
		 bdf_of(pcidir));
	spin_read_file(sw->path, sw->published, sizeof(sw->published));
}

/* Sets the switch back to its state before the test, unless it is there. */
static void switch_restore(struct __test_metadata *_metadata, const struct switch_state *sw)
{
	char now[8] = "";
	int ret = 0;

	if (sw->published[0] &&
	    (spin_read_file(sw->path, now, sizeof(now)) || strcmp(now, sw->published)))
		ret = sysfs_write(sw->path, sw->published);
	EXPECT_EQ(0, ret) TH_LOG("teardown: set %s back to %s: %s", sw->path, sw->published,
				 strerror(-ret));
}

/*
 * The stand-in GPU bound to p2pdma_bar, with the switch of its memory, and
 * spin-nvme0's namespace to read from.
 */
FIXTURE(gpu) {
	char dev0[64];
	struct switch_state sw;
};

FIXTURE_SETUP(gpu)
{
	if (!gpu[0])
		SKIP(return, "not on the spin rig: no stand-in GPU");
	if (!nvme0[0])
		SKIP(return, "not on the spin rig: no NVMe drive %s", SPIN_NVME0_SERIAL);
	ASSERT_EQ(0, spin_nvme_blockdev(SPIN_NVME0_SERIAL, self->dev0, sizeof(self->dev0)))
		TH_LOG("%s has no namespace", SPIN_NVME0_SERIAL);
	ASSERT_TRUE(bound_to(gpu, "p2pdma_bar"))
		TH_LOG("the stand-in GPU is not bound to p2pdma_bar");
	switch_save(&self->sw, gpu);
}

/*
 * Runs in the harness's process for the test, after the test's own process
 * ended in any way: binds the GPU to p2pdma_bar again and sets the switch
 * back as it was.
 */
FIXTURE_TEARDOWN_PARENT(gpu)
{
	int ret = 0;

	if (!bound_to(gpu, "p2pdma_bar"))
		ret = sysfs_write(DRV "/bind", bdf_of(gpu));
	EXPECT_EQ(0, ret) TH_LOG("teardown: bind %s to p2pdma_bar: %s", bdf_of(gpu),
				 strerror(-ret));
	switch_restore(_metadata, &self->sw);
}

/*
 * p2pdma_bar unbinds from the stand-in GPU under a 16 MiB mapping and
 * O_DIRECT reads into it; the buffer is revoked; a re-bind gives a fresh pool
 * behind the same heap, and nothing leaked.
 */
TEST_F_TIMEOUT(gpu, unbind_under_io_and_rebind, TIMEOUT)
{
	char line[256];
	long long avail0, full, avail;
	int buf, fd2, io, status = 1, ret, err;
	uint8_t *p, *q;
	pid_t pid;
	struct timespec t0, t1;
	ssize_t n;

	avail0 = p2pmem_available(gpu);
	buf = spin_heap_alloc(gpu_heap, 16 * MiB, O_RDWR | O_CLOEXEC, 0);
	p = buf < 0 ? MAP_FAILED : mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("no 16 MiB of GPU memory mapped: %s", strerror(errno));
	memset(p, 0x5a, 16 * MiB);

	/* O_DIRECT reads into the buffer, in a child, while the provider goes away. */
	pid = direct_reader(self->dev0, p, 4, 4);
	usleep(300000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = sysfs_write(DRV "/unbind", bdf_of(gpu));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	EXPECT_EQ(0, ret) TH_LOG("unbind p2pdma_bar under a mapping and O_DIRECT I/O: %s",
				 strerror(-ret));
	EXPECT_TRUE(bound_to(gpu, NULL)) TH_LOG("the stand-in GPU is still bound to a driver");
	TH_LOG("unbind under a mapping and O_DIRECT I/O: %.0f ms",
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	waitpid(pid, &status, 0);
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("the reader: reads in flight failed, or later ones got other than EFAULT");
	/*
	 * The DMA in flight was over before the driver's unbind callback, where
	 * a GPU driver would reset its device: p2pdma_bar reports what is still
	 * in use there.
	 */
	snprintf(line, sizeof(line), "%s: unbind: ", bdf_of(gpu));
	EXPECT_TRUE(spin_log_last_is(line, "no p2pdma memory in use"))
		TH_LOG("GPU memory in use when the driver's unbind ran (last \"%s\" in the log)",
		       line);
	snprintf(line, sizeof(line), "p2p-%s: the DMA into 1 revoked buffer(s) is over",
		 bdf_of(gpu));
	EXPECT_TRUE(log_has(line)) TH_LOG("spin did not wait for the DMA first: no \"%s\"", line);

	EXPECT_TRUE(faults(p)) TH_LOG("the revoked mapping's first byte raises no SIGBUS");
	EXPECT_TRUE(faults(p + 16 * MiB - 1))
		TH_LOG("the revoked mapping's last byte raises no SIGBUS");
	io = open(self->dev0, O_RDONLY);
	n = pread(io, p, 4096, 0);
	err = n < 0 ? errno : 0;
	EXPECT_EQ(EFAULT, err) TH_LOG("buffered pread into the revoked mapping: %zd (%s)",
				      n, strerror(err));
	close(io);
	ret = spin_heap_alloc(gpu_heap, MiB, O_RDWR, 0);
	EXPECT_EQ(-ENODEV, ret) TH_LOG("allocation from the heap: %s, want ENODEV",
				       strerror(ret < 0 ? -ret : 0));
	q = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	err = q == MAP_FAILED ? errno : 0;
	EXPECT_EQ(ENODEV, err) TH_LOG("mmap of the revoked buffer: %s, want ENODEV",
				      q == MAP_FAILED ? strerror(err) : "mapped");

	/* Bind again: a fresh pool, the same heap. */
	ret = sysfs_write(DRV "/bind", bdf_of(gpu));
	full = p2pmem_available(gpu);
	fd2 = spin_heap_alloc(gpu_heap, 8 * MiB, O_RDWR, 0);
	avail = p2pmem_available(gpu);
	EXPECT_EQ(0, ret) TH_LOG("re-bind: %s", strerror(-ret));
	EXPECT_LE(0, fd2) TH_LOG("re-bind: the heap does not allocate: %s", strerror(-fd2));
	EXPECT_EQ(full - 8 * (long long)MiB, avail)
		TH_LOG("re-bind: %lld bytes in the pool, %lld available after 8 MiB allocated",
		       full, avail);
	if (fd2 >= 0)
		close(fd2);
	munmap(p, 16 * MiB);
	close(buf);
	avail = p2pmem_available(gpu);
	EXPECT_EQ(full, avail) TH_LOG("leaked: %lld available, %lld in the pool", avail, full);
	EXPECT_EQ(avail0, full) TH_LOG("leaked: %lld in the pool, %lld available before the unbind",
				       full, avail0);
}

/*
 * A provider that withdraws its memory and publishes it again while bound,
 * as a GPU driver that sets up P2P memory on demand does (p2pdma_bar's
 * debugfs switch): buffers are revoked at the withdrawal, with the DMA into
 * them over before it returns; the heap serves again after the publication.
 */
TEST_F_TIMEOUT(gpu, withdraw_and_publish, TIMEOUT)
{
	char state[8] = "?", over[128];
	long long full = p2pmem_available(gpu), avail;
	int buf = spin_heap_alloc(gpu_heap, 4 * MiB, O_RDWR | O_CLOEXEC, 0), ret, status = 1, fd2;
	uint8_t *q = buf < 0 ? MAP_FAILED :
		     mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	int over0;
	pid_t pid;

	ASSERT_NE(MAP_FAILED, q) TH_LOG("no buffer: %s", strerror(errno));
	snprintf(over, sizeof(over), "p2p-%s: the DMA into 1 revoked buffer(s) is over",
		 bdf_of(gpu));
	over0 = spin_log_count(over);
	pid = direct_reader(self->dev0, q, 1, 2);
	usleep(300000);
	ret = sysfs_write(self->sw.path, "0");
	waitpid(pid, &status, 0);
	fd2 = spin_heap_alloc(gpu_heap, MiB, O_RDWR, 0);
	EXPECT_STREQ("1", self->sw.published) TH_LOG("the switch before the withdrawal");
	EXPECT_EQ(0, ret) TH_LOG("withdraw through %s: %s", self->sw.path, strerror(-ret));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("the reader: reads in flight failed, or later ones got other than EFAULT");
	EXPECT_EQ(-ENODEV, fd2) TH_LOG("allocation when withdrawn: %s, want ENODEV",
				       strerror(fd2 < 0 ? -fd2 : 0));
	EXPECT_TRUE(faults(q)) TH_LOG("the withdrawn buffer's mapping raises no SIGBUS");
	EXPECT_EQ(over0 + 1, spin_log_count(over))
		TH_LOG("spin did not report once that the DMA was over: \"%s\"", over);
	if (fd2 >= 0)
		close(fd2);
	munmap(q, 4 * MiB);
	close(buf);

	/* 2 MiB: a whole folio of the GPU's memory (see dmabuf_heap_test). */
	ret = sysfs_write(self->sw.path, "1");
	fd2 = spin_heap_alloc(gpu_heap, 2 * MiB, O_RDWR, 0);
	spin_read_file(self->sw.path, state, sizeof(state));
	avail = p2pmem_available(gpu);
	EXPECT_EQ(0, ret) TH_LOG("publish again through %s: %s", self->sw.path, strerror(-ret));
	EXPECT_LE(0, fd2) TH_LOG("published again, the heap does not allocate: %s",
				 strerror(-fd2));
	EXPECT_STREQ("1", state) TH_LOG("the switch after the publication");
	EXPECT_EQ(full - (long long)(2 * MiB), avail)
		TH_LOG("%lld bytes available with 2 MiB allocated, %lld before", avail, full);
	if (fd2 >= 0)
		close(fd2);
}

#define RACE_ROUNDS 400
#define RACE_BURST 6

static pthread_barrier_t race_start, race_done;

/* One of the two threads of publish_withdraw_race. */
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
 * maps. Then it is withdrawn and published once more, one write at a time;
 * the teardown sets the switch back to what it was.
 */
TEST_F_TIMEOUT(gpu, publish_withdraw_race, TIMEOUT)
{
	char now[8], miss[32] = "";
	struct toggler t[2] = {
		{ .writes = RACE_BURST },
		{ .writes = RACE_BURST + 1 },
	};
	int missed = 0, mapped = 0, ret;
	pthread_t th[2];

	ASSERT_EQ(0, pthread_barrier_init(&race_start, NULL, 3));
	ASSERT_EQ(0, pthread_barrier_init(&race_done, NULL, 3));
	for (int i = 0; i < 2; i++) {
		t[i].sw = self->sw.path;
		ASSERT_EQ(0, pthread_create(&th[i], NULL, toggle, &t[i])) TH_LOG("no thread");
	}
	for (int r = 0; r < RACE_ROUNDS; r++) {
		const char *want = r & 1 ? "1" : "0";
		int fd, ok;

		pthread_barrier_wait(&race_start);
		pthread_barrier_wait(&race_done);
		ret = sysfs_write(self->sw.path, want);
		fd = spin_heap_alloc(gpu_heap, MiB, O_RDWR | O_CLOEXEC, 0);
		now[0] = '\0';
		spin_read_file(self->sw.path, now, sizeof(now));
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
	EXPECT_EQ(0, t[0].failed + t[1].failed)
		TH_LOG("%d of %d writes to the switch failed", t[0].failed + t[1].failed,
		       RACE_ROUNDS * (t[0].writes + t[1].writes));
	EXPECT_EQ(0, missed) TH_LOG("the heap missed the final state in %d of %d rounds%s",
				    missed, RACE_ROUNDS, miss);
	EXPECT_TRUE(mapped) TH_LOG("published at the end, a buffer of the heap does not map");

	sysfs_write(self->sw.path, "0");
	sysfs_write(self->sw.path, "1");
}

/* Gives @pcidir back to nvme unless it is bound to it: 0, or -1. */
static int nvme_give_back(const char *pcidir, const char *serial)
{
	if (bound_to(pcidir, "nvme"))
		return 0;
	return !rebind(pcidir, "", "nvme") && nvme_back(serial) ? 0 : -1;
}

/* spin-nvme0 and spin-nvme1 on nvme, and spin-nvme0's namespace to read from. */
FIXTURE(nvme) {
	char dev0[64];
};

FIXTURE_SETUP(nvme)
{
	if (!nvme0[0])
		SKIP(return, "not on the spin rig: no NVMe drive %s", SPIN_NVME0_SERIAL);
	if (!nvme1[0])
		SKIP(return, "not on the spin rig: no NVMe drive %s", SPIN_NVME1_SERIAL);
	ASSERT_EQ(0, spin_nvme_blockdev(SPIN_NVME0_SERIAL, self->dev0, sizeof(self->dev0)))
		TH_LOG("%s has no namespace", SPIN_NVME0_SERIAL);
}

/* Runs after the test's process ended in any way: both drives back on nvme. */
FIXTURE_TEARDOWN_PARENT(nvme)
{
	EXPECT_EQ(0, nvme_give_back(nvme0, SPIN_NVME0_SERIAL))
		TH_LOG("teardown: %s not back on nvme", bdf_of(nvme0));
	EXPECT_EQ(0, nvme_give_back(nvme1, SPIN_NVME1_SERIAL))
		TH_LOG("teardown: %s not back on nvme", bdf_of(nvme1));
}

/* driver_override: no usable BAR on spin-nvme0 (its BAR0 is not prefetchable). */
TEST_F_TIMEOUT(nvme, override_refuses_no_usable_bar, TIMEOUT)
{
	int ret;

	/* The bind fails: p2pdma_bar refuses the device. */
	rebind(nvme0, "p2pdma_bar", "nvme");
	EXPECT_FALSE(bound_to(nvme0, "p2pdma_bar"))
		TH_LOG("p2pdma_bar took %s", bdf_of(nvme0));
	EXPECT_TRUE(log_has("no usable BAR")) TH_LOG("p2pdma_bar did not say why it refused");
	ret = rebind(nvme0, "", "nvme");
	EXPECT_EQ(0, ret) TH_LOG("%s back to nvme: %d", bdf_of(nvme0), ret);
	EXPECT_TRUE(bound_to(nvme0, "nvme")) TH_LOG("%s not back on nvme", bdf_of(nvme0));
	EXPECT_TRUE(nvme_back(SPIN_NVME0_SERIAL))
		TH_LOG("no namespace of %s within 10 s", SPIN_NVME0_SERIAL);
}

/* ... but it takes spin-nvme1's CMB: a 64-bit prefetchable memory BAR. */
TEST_F_TIMEOUT(nvme, override_takes_cmb, TIMEOUT)
{
	long long avail;
	int ret, heap, fd2;

	ret = rebind(nvme1, "p2pdma_bar", "nvme");
	heap = spin_heap_open(nvme1);
	fd2 = heap < 0 ? -1 : spin_heap_alloc(heap, MiB, O_RDWR, 0);
	avail = p2pmem_available(nvme1);
	EXPECT_EQ(0, ret) TH_LOG("driver_override: %s to p2pdma_bar: %d", bdf_of(nvme1), ret);
	EXPECT_TRUE(bound_to(nvme1, "p2pdma_bar"))
		TH_LOG("%s is not bound to p2pdma_bar", bdf_of(nvme1));
	EXPECT_LT(0, avail) TH_LOG("p2pdma_bar does not publish %s's CMB: %lld bytes available",
				   bdf_of(nvme1), avail);
	EXPECT_LE(0, fd2) TH_LOG("its heap does not allocate: %s",
				 heap < 0 ? "no heap" : strerror(-fd2));
	if (fd2 >= 0)
		close(fd2);
	if (heap >= 0)
		close(heap);

	ret = rebind(nvme1, "", "nvme");
	EXPECT_EQ(0, ret) TH_LOG("%s back to nvme: %d", bdf_of(nvme1), ret);
	EXPECT_TRUE(bound_to(nvme1, "nvme")) TH_LOG("%s not back on nvme", bdf_of(nvme1));
	EXPECT_TRUE(nvme_back(SPIN_NVME1_SERIAL))
		TH_LOG("no namespace of %s within 10 s", SPIN_NVME1_SERIAL);
	avail = p2pmem_available(nvme1);
	EXPECT_LT(0, avail) TH_LOG("its CMB is not p2pmem again: %lld bytes available", avail);
}

/*
 * An O_DIRECT read of the first MiB of @dev into a fresh 1 MiB buffer of
 * @heap, filled with @fill first. Returns what pread() returned (-1 if the
 * buffer or the device could not be had); *@same tells whether the buffer
 * then holds the device's bytes.
 */
static ssize_t heap_odirect_read(int heap, const char *dev, int fill, int *same)
{
	uint8_t *m = MAP_FAILED, *want = spin_alloc_aligned(MiB);
	int buf = heap < 0 ? -1 : spin_heap_alloc(heap, MiB, O_RDWR | O_CLOEXEC, 0);
	int fd = open(dev, O_RDONLY | O_DIRECT);
	ssize_t n = -1;

	*same = 0;
	if (buf >= 0)
		m = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (m != MAP_FAILED && fd >= 0 && want && pread(fd, want, MiB, 0) == (ssize_t)MiB) {
		memset(m, fill, MiB);
		n = pread(fd, m, MiB, 0);
		*same = n == (ssize_t)MiB && !memcmp(m, want, MiB);
	}
	if (fd >= 0)
		close(fd);
	if (m != MAP_FAILED)
		munmap(m, MiB);
	if (buf >= 0)
		close(buf);
	free(want);
	return n;
}

/*
 * The NVMe driver registers and publishes spin-nvme1's CMB in its probe: the
 * CMB gets a heap of its own, and an O_DIRECT read from spin-nvme0 lands in
 * it (the CPU reads it back through the mapping).
 */
TEST_F_TIMEOUT(nvme, cmb_heap_odirect_read, TIMEOUT)
{
	int heap = spin_heap_open(nvme1), same;
	ssize_t n = heap_odirect_read(heap, self->dev0, 0xa5, &same);

	EXPECT_EQ((ssize_t)MiB, n)
		TH_LOG("an O_DIRECT read of 1 MiB into a buffer of %s's CMB heap: %zd",
		       bdf_of(nvme1), n);
	EXPECT_TRUE(same) TH_LOG("the CMB does not hold the bytes read");
	if (heap >= 0)
		close(heap);
}

/*
 * The rig's second, 8 MiB ivshmem device into @late: the 1af4:1110 device
 * that is not the stand-in GPU. 0, or -ENODEV.
 */
static int late_find(char *late, size_t len)
{
	struct dirent *e;
	DIR *d = opendir("/sys/bus/pci/devices");

	late[0] = '\0';
	while (d && (e = readdir(d))) {
		char path[PATH_MAX + 300], v[16] = "", dv[16] = "", real[PATH_MAX];

		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		spin_read_file(path, v, sizeof(v));
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", e->d_name);
		spin_read_file(path, dv, sizeof(dv));
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", e->d_name);
		if (!strcmp(v, "0x1af4") && !strcmp(dv, "0x1110") && realpath(path, real) &&
		    strcmp(real, gpu))
			snprintf(late, len, "%s", real);
	}
	if (d)
		closedir(d);
	return late[0] ? 0 : -ENODEV;
}

/*
 * A provider whose memory is first published after probe (the rig's second,
 * 8 MiB ivshmem device, which p2pdma_bar registers but leaves unpublished:
 * p2pdma_bar.defer_below_mib=16 on the command line), with its switch and
 * spin-nvme0's namespace to read from.
 */
FIXTURE(late_provider) {
	char late[PATH_MAX];
	char dev0[64];
	struct switch_state sw;
};

FIXTURE_SETUP(late_provider)
{
	if (!gpu[0])
		SKIP(return, "not on the spin rig: no stand-in GPU");
	if (late_find(self->late, sizeof(self->late)))
		SKIP(return, "not on the spin rig: the second ivshmem device is missing");
	if (!nvme0[0])
		SKIP(return, "not on the spin rig: no NVMe drive %s", SPIN_NVME0_SERIAL);
	ASSERT_EQ(0, spin_nvme_blockdev(SPIN_NVME0_SERIAL, self->dev0, sizeof(self->dev0)))
		TH_LOG("%s has no namespace", SPIN_NVME0_SERIAL);
	switch_save(&self->sw, self->late);
}

/* Runs after the test's process ended in any way: the switch as it was. */
FIXTURE_TEARDOWN_PARENT(late_provider)
{
	switch_restore(_metadata, &self->sw);
}

/*
 * No heap until the memory is published; then the heap appears and serves;
 * withdrawn, it stays and refuses.
 */
TEST_F_TIMEOUT(late_provider, published_after_probe, TIMEOUT)
{
	const char *bdf = bdf_of(self->late);
	char node[128];
	int before, heap, fd2 = -1, ret, same;
	long long size;
	ssize_t n;

	snprintf(node, sizeof(node), "/dev/dma_heap/p2p-%s", bdf);
	before = access(node, F_OK);
	size = p2pmem_size(self->late);
	EXPECT_TRUE(bound_to(self->late, "p2pdma_bar"))
		TH_LOG("late provider %s is not bound to p2pdma_bar", bdf);
	EXPECT_LT(0, size) TH_LOG("late provider %s: not registered in probe (p2pmem/size %lld)",
				  bdf, size);
	EXPECT_STREQ("0", self->sw.published)
		TH_LOG("late provider %s: the switch before publishing", bdf);
	EXPECT_NE(0, before) TH_LOG("late provider %s: %s exists before the publication",
				    bdf, node);

	ret = sysfs_write(self->sw.path, "1");
	heap = spin_heap_open(self->late);
	n = heap_odirect_read(heap, self->dev0, 0x5a, &same);
	EXPECT_EQ(0, ret) TH_LOG("publish through %s: %s", self->sw.path, strerror(-ret));
	EXPECT_EQ(0, access(node, F_OK)) TH_LOG("published, %s does not appear", node);
	EXPECT_EQ((ssize_t)MiB, n) TH_LOG("an O_DIRECT read of 1 MiB into a buffer of %s: %zd",
					  node, n);
	EXPECT_TRUE(same) TH_LOG("the buffer does not hold the bytes read");

	ret = sysfs_write(self->sw.path, "0");
	fd2 = heap < 0 ? -1 : spin_heap_alloc(heap, MiB, O_RDWR, 0);
	EXPECT_EQ(0, ret) TH_LOG("withdraw through %s: %s", self->sw.path, strerror(-ret));
	EXPECT_EQ(-ENODEV, fd2) TH_LOG("withdrawn, the heap allocates: %s, want ENODEV",
				       heap < 0 ? "no heap" : strerror(fd2 < 0 ? -fd2 : 0));
	if (fd2 >= 0)
		close(fd2);
	if (heap >= 0)
		close(heap);
}

int main(int argc, char **argv)
{
	char dev0[64];

	if (spin_gpu_find(gpu, sizeof(gpu)))
		gpu[0] = '\0';
	else
		gpu_heap = spin_heap_open(gpu);
	if (spin_nvme_pcidir(SPIN_NVME0_SERIAL, nvme0, sizeof(nvme0)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev0, sizeof(dev0)))
		nvme0[0] = '\0';
	if (spin_nvme_pcidir(SPIN_NVME1_SERIAL, nvme1, sizeof(nvme1)))
		nvme1[0] = '\0';
	return test_harness_run(argc, argv);
}
