// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers shared by the spin selftests. See spin_lib.h.
 */
#define _GNU_SOURCE
#include <linux/aio_abi.h>
#include <linux/dma-heap.h>
#include <linux/io_uring.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "spin_lib.h"

/* CLOCK_MONOTONIC in seconds, for the tests' timing output. */
double spin_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * Writes back the file @fd and drops its pages from the page cache, so the
 * next read of it goes to the disk. It touches only that file, where
 * drop_caches took 1.4-9 s per call under the debug kernel (it also shrinks
 * every slab cache). Like drop_caches, it leaves pages that are mapped.
 */
int spin_uncache(int fd)
{
	if (fsync(fd))
		return -1;
	errno = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	return errno ? -1 : 0;
}

/*
 * The file open as @fd opened once more, with O_DIRECT and @flags; -1 if it
 * cannot be (tmpfs before 6.6, a filesystem without direct I/O).
 */
static int reopen_direct(int fd, int flags)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, flags | O_DIRECT);
}

/*
 * The block-aligned part [*a, *b) of @len bytes at @off for direct I/O from
 * or to @buf; 0 if there is none or @buf is not aligned with it.
 */
static int direct_part(const void *buf, size_t len, off_t off, off_t *a, off_t *b)
{
	const off_t blk = 4096;

	*a = (off + blk - 1) / blk * blk;
	*b = (off_t)(off + len) / blk * blk;
	return *b > *a && ((uintptr_t)buf + (*a - off)) % blk == 0;
}

/*
 * Writes @len bytes of @buf at @off of the file open as @fd and leaves them
 * uncached: the block-aligned part with O_DIRECT (through a second open of the
 * file), the unaligned edges through the page cache, then synced and dropped
 * (spin_uncache()). A wholly aligned piece needs no sync, so a file written in
 * aligned pieces is not synced once per piece. Under the
 * debug kernel a buffered write of ext4 and dropping its pages cost ~1 ms per
 * page each (a 72 MiB file: 24 s + 20 s, xfs 4.6 s + 1.8 s), a direct write
 * 2.6 s. For test files whose writing is not what is tested.
 */
int spin_write_uncached(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	off_t a, b;
	int dfd = -1;

	if (direct_part(buf, len, off, &a, &b))
		dfd = reopen_direct(fd, O_WRONLY);
	if (dfd < 0) {
		a = off;
		b = off;
	} else {
		ssize_t n = pwrite(dfd, p + (a - off), b - a, a);

		close(dfd);
		if (n != b - a) {
			if (n >= 0)
				errno = EIO;
			return -1;
		}
	}
	if (a == off && b == (off_t)(off + len))
		return 0;
	if ((a > off && pwrite(fd, p, a - off, off) != a - off) ||
	    ((off_t)(off + len) > b && pwrite(fd, p + (b - off), off + len - b, b) !=
	     (ssize_t)(off + len - b)))
		return -1;
	return spin_uncache(fd);
}

/*
 * Reads @len bytes at @off of the file open as @fd into @buf from the disk:
 * the block-aligned part with O_DIRECT (dirty pages are written back first),
 * the edges through the page cache after spin_uncache(). Returns the bytes
 * read, or -1.
 */
ssize_t spin_read_uncached(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	ssize_t n, got = 0;
	off_t a, b;
	int dfd = -1;

	if (spin_uncache(fd))
		return -1;
	if (direct_part(buf, len, off, &a, &b))
		dfd = reopen_direct(fd, O_RDONLY);
	if (dfd < 0)
		return pread(fd, buf, len, off);
	if (a > off) {
		n = pread(fd, p, a - off, off);
		if (n != a - off) {
			close(dfd);
			return n < 0 ? -1 : n;
		}
		got = n;
	}
	n = pread(dfd, p + (a - off), b - a, a);
	close(dfd);
	if (n < 0)
		return -1;
	got += n;
	if (n != b - a || (off_t)(off + len) == b)
		return got;
	n = pread(fd, p + (b - off), off + len - b, b);
	return n < 0 ? -1 : got + n;
}

int spin_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

void spin_show_stack(pid_t pid, const char *who)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		ksft_print_msg("%s: %s", who, line);
	fclose(f);
}

/* Write @val to the sysfs or debugfs file @path: 0 or a negative errno. */
int spin_write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	int ret = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	if (n < 0)
		ret = -errno;
	else if (n != (ssize_t)strlen(val))
		ret = -EIO;	/* a short write: sysfs takes all or nothing */
	close(fd);
	return ret;
}

/* The counter @name of a spin stat file ("name value" lines), -1 if it is missing. */
long long spin_stat_get(const char *path, const char *name)
{
	char buf[4096], *line, *save;
	size_t len = strlen(name);

	if (spin_read_file(path, buf, sizeof(buf)))
		return -1;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, name, len) && line[len] == ' ')
			return atoll(line + len + 1);
	return -1;
}

/*
 * Lets the fault attribute whose debugfs directory is @dir fire the next
 * @times times it is asked (0: never again): probability 100, interval 1,
 * quiet. Returns 0 or a negative errno, as spin_write_file().
 */
int spin_fault_times(const char *dir, int times)
{
	char path[PATH_MAX], v[16];

	snprintf(v, sizeof(v), "%d", times);
	snprintf(path, sizeof(path), "%s/probability", dir);
	if (spin_write_file(path, times ? "100" : "0"))
		return -1;
	snprintf(path, sizeof(path), "%s/interval", dir);
	if (spin_write_file(path, "1"))
		return -1;
	snprintf(path, sizeof(path), "%s/verbose", dir);
	if (spin_write_file(path, "0"))
		return -1;
	snprintf(path, sizeof(path), "%s/times", dir);
	return spin_write_file(path, v);
}

long long spin_read_ll(const char *path)
{
	char buf[64];

	if (spin_read_file(path, buf, sizeof(buf)))
		return -1;
	return strtoll(buf, NULL, 0);
}

/*
 * The first entry of @dir whose name starts with @prefix and whose attributes
 * match: @match holds pairs of attribute path (relative to the entry) and
 * wanted value, NULL-terminated. With @need_dev, the entry must also have a
 * device node /dev/<name> (hidden per-path NVMe disks have none).
 */
static int sysfs_find(const char *dir, const char *prefix, const char *const *match,
		      int need_dev, char *name, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX], buf[128];
	int ret = -ENODEV;

	if (!d)
		return -errno;
	while (ret && (e = readdir(d))) {
		const char *const *m = match;

		if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", e->d_name);
		if (need_dev && access(path, F_OK))
			continue;
		for (; *m; m += 2) {
			snprintf(path, sizeof(path), "%s/%s/%s", dir, e->d_name, m[0]);
			if (spin_read_file(path, buf, sizeof(buf)) || strcmp(buf, m[1]))
				break;
		}
		if (*m)
			continue;
		snprintf(name, len, "%s", e->d_name);
		ret = 0;
	}
	closedir(d);
	return ret;
}

/* The NVMe controller (nvmeN) whose serial is @serial. */
int spin_nvme_ctrl(const char *serial, char *ctrl, size_t len)
{
	const char *const match[] = { "serial", serial, NULL };

	return sysfs_find("/sys/class/nvme", "nvme", match, 0, ctrl, len);
}

/* @dev gets "/dev/<name>" of the entry of /sys/block that sysfs_find() finds. */
static int blockdev(const char *prefix, const char *attr, const char *serial, char *dev,
		    size_t len)
{
	const char *const match[] = { attr, serial, NULL };
	char name[64];
	int ret = sysfs_find("/sys/block", prefix, match, 1, name, sizeof(name));

	if (!ret)
		snprintf(dev, len, "/dev/%s", name);
	return ret;
}

/*
 * The block device of namespace 1 of the NVMe device with @serial. With
 * multipath the disk belongs to the subsystem, which has the serial too.
 */
int spin_nvme_blockdev(const char *serial, char *dev, size_t len)
{
	return blockdev("nvme", "device/serial", serial, dev, len);
}

/*
 * A fresh filesystem on the NVMe disk with @serial: run @mkfs (a command
 * line such as "mkfs.xfs -q -f", the device appended) and mount it at @dir
 * (created if needed) as @type with mount @flags. Fills @dev with the block
 * device and @disk with its name (for /sys/block/<disk>/...). Returns 0, or
 * -1 with errno set (ENODEV: no such disk).
 */
int spin_fs_make(const char *serial, const char *mkfs, const char *type, const char *dir,
		 unsigned long flags, char *dev, size_t devlen, char *disk, size_t disklen)
{
	char cmd[512];
	const char *slash;
	int status;

	if (spin_nvme_blockdev(serial, dev, devlen)) {
		errno = ENODEV;
		return -1;
	}
	slash = strrchr(dev, '/');
	snprintf(disk, disklen, "%s", slash ? slash + 1 : dev);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", mkfs, dev);
	mkdir(dir, 0755);
	status = system(cmd);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		errno = EIO;
		return -1;
	}
	return mount(dev, dir, type, flags, NULL);
}

/* The block device of the virtio-blk disk with @serial. */
/*
 * What spin_restore() gives back, in memory shared with the processes the
 * program forks: set up before main() runs, in the program's first process,
 * which is the one that restores.
 */
#define SAVED_MAX 64
#define MOUNTS_MAX 8

struct restore_record {
	pid_t pid;
	bool lock;
	unsigned int nsaved, nmounts;
	struct {
		char path[PATH_MAX];
		char val[128];
	} saved[SAVED_MAX];
	char mounts[MOUNTS_MAX][PATH_MAX];
};

static struct restore_record *record;

static void record_lock(void)
{
	while (__atomic_test_and_set(&record->lock, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void record_unlock(void)
{
	__atomic_clear(&record->lock, __ATOMIC_RELEASE);
}

static void restore_at_exit(void)
{
	if (record && getpid() == record->pid)
		spin_restore();
}

__attribute__((constructor)) static void record_init(void)
{
	record = mmap(NULL, sizeof(*record), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (record == MAP_FAILED) {
		record = NULL;
		return;
	}
	record->pid = getpid();
	atexit(restore_at_exit);
}

int spin_sysfs_set(const char *path, const char *val)
{
	char old[sizeof(record->saved[0].val)];
	unsigned int i;
	int ret;

	if (!record)
		return -ENOMEM;
	record_lock();
	for (i = 0; i < record->nsaved; i++)
		if (!strcmp(record->saved[i].path, path))
			break;
	if (i == record->nsaved) {
		ret = spin_read_file(path, old, sizeof(old));
		if (!ret && i == SAVED_MAX)
			ret = -ENOSPC;
		if (ret) {
			record_unlock();
			return ret;
		}
		snprintf(record->saved[i].path, sizeof(record->saved[i].path), "%s", path);
		memcpy(record->saved[i].val, old, sizeof(old));
		record->nsaved++;
	}
	record_unlock();
	return spin_write_file(path, val);
}

void spin_restore(void)
{
	if (!record)
		return;
	record_lock();
	while (record->nsaved) {
		unsigned int i = --record->nsaved;
		int ret = spin_write_file(record->saved[i].path, record->saved[i].val);

		if (ret)
			fprintf(stderr, "# restoring %s to %s: %s\n", record->saved[i].path,
				record->saved[i].val, strerror(-ret));
	}
	while (record->nmounts) {
		const char *dir = record->mounts[--record->nmounts];

		/* Still busy (a file open at exit): detach, it goes when the program does. */
		if (umount(dir) && errno != EINVAL) {
			fprintf(stderr, "# umount %s: %s\n", dir, strerror(errno));
			umount2(dir, MNT_DETACH);
		}
	}
	record_unlock();
}

int spin_trace_event(const char *event, int on)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/kernel/tracing/events/%s/enable", event);
	if (access(path, F_OK))
		mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	return spin_sysfs_set(path, on ? "1" : "0");
}

int spin_mount(const char *src, const char *dir, const char *type, unsigned long flags,
	       const char *data)
{
	if (!record || record->nmounts == MOUNTS_MAX) {
		errno = ENOSPC;
		return -1;
	}
	mkdir(dir, 0755);
	if (mount(src, dir, type, flags, data))
		return -1;
	record_lock();
	snprintf(record->mounts[record->nmounts++], PATH_MAX, "%s", dir);
	record_unlock();
	return 0;
}

int spin_umount(const char *dir)
{
	int ret = umount(dir);

	/* Unmounted now or not at all: spin_restore() tries again at exit if it failed. */
	if (ret || !record)
		return ret;
	record_lock();
	for (unsigned int i = record->nmounts; i-- > 0;) {
		if (strcmp(record->mounts[i], dir))
			continue;
		memmove(record->mounts[i], record->mounts[i + 1],
			(record->nmounts - i - 1) * sizeof(record->mounts[0]));
		record->nmounts--;
		break;
	}
	record_unlock();
	return 0;
}

int spin_fs_find(struct spin_fs *fs)
{
	char path[PATH_MAX];
	const char *slash;
	long long lbs;

	if (fs->virtio ? spin_virtio_blockdev(fs->serial, fs->dev, sizeof(fs->dev)) :
			 spin_nvme_blockdev(fs->serial, fs->dev, sizeof(fs->dev))) {
		errno = ENODEV;
		return -1;
	}
	slash = strrchr(fs->dev, '/');
	snprintf(fs->disk, sizeof(fs->disk), "%s", slash ? slash + 1 : fs->dev);
	snprintf(fs->stat, sizeof(fs->stat), "/sys/block/%s/spin/stat", fs->disk);
	snprintf(path, sizeof(path), "/sys/block/%s/queue/logical_block_size", fs->disk);
	lbs = spin_read_ll(path);
	if (lbs < 512 || lbs > 4096) {
		errno = ERANGE;
		return -1;
	}
	fs->lbs = lbs;
	return 0;
}

int spin_fs_setup(struct spin_fs *fs, unsigned long flags)
{
	char cmd[512];
	int status;

	if (spin_fs_find(fs))
		return -1;
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", fs->mkfs, fs->dev);
	status = system(cmd);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		errno = EIO;
		return -1;
	}
	if (spin_mount(fs->dev, fs->dir, fs->type, flags, fs->opts))
		return -1;
	snprintf(fs->path, sizeof(fs->path), "%s/data", fs->dir);
	return 0;
}

int spin_fs_unmount(struct spin_fs *fs)
{
	return spin_umount(fs->dir);
}

struct spin_fs *spin_fs_each(struct spin_fs *all, size_t n, unsigned long flags,
			     void (*test)(struct spin_fs *fs, size_t i))
{
	for (size_t i = 0; i < n; i++) {
		struct spin_fs *fs = &all[i];

		if (spin_fs_setup(fs, flags))
			return fs;
		printf("# %s on %s (%s), logical block %u\n", fs->type, fs->dev, fs->serial,
		       fs->lbs);
		test(fs, i);
		if (spin_fs_unmount(fs))
			printf("# umount %s: %s\n", fs->dir, strerror(errno));
	}
	return NULL;
}

int spin_virtio_blockdev(const char *serial, char *dev, size_t len)
{
	return blockdev("vd", "serial", serial, dev, len);
}

/* The sysfs directory of the PCI function of the NVMe controller with @serial. */
int spin_nvme_pcidir(const char *serial, char *dir, size_t len)
{
	char ctrl[64], path[PATH_MAX];
	int ret = spin_nvme_ctrl(serial, ctrl, sizeof(ctrl));

	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/sys/class/nvme/%s/device", ctrl);
	if (!realpath(path, dir))
		return -errno;
	(void)len;
	return 0;
}

/* The sysfs directory (real path) of the first PCI function @vendor:@device. */
int spin_pci_find(unsigned int vendor, unsigned int device, char *dir, size_t len)
{
	char v[16], d[16], name[64], path[PATH_MAX];
	const char *const match[] = { "vendor", v, "device", d, NULL };
	int ret;

	snprintf(v, sizeof(v), "0x%04x", vendor);
	snprintf(d, sizeof(d), "0x%04x", device);
	ret = sysfs_find("/sys/bus/pci/devices", "", match, 0, name, sizeof(name));
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", name);
	if (!realpath(path, dir))
		return -errno;
	(void)len;
	return 0;
}

/* The switch upstream port above a device: two levels up its sysfs path. */
int spin_pci_upstream(const char *pcidir, char *up, size_t len)
{
	char *slash;

	snprintf(up, len, "%s", pcidir);
	for (int i = 0; i < 2; i++) {
		slash = strrchr(up, '/');
		if (!slash)
			return -EINVAL;
		*slash = '\0';
	}
	return 0;
}

/* Map BAR2 of the stand-in GPU through sysfs, as the host sees it. */
void *spin_gpu_map(const char *pcidir, size_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/resource%d", pcidir, SPIN_GPU_BAR);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	*size = st.st_size;
	p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static uint64_t pattern_word(uint64_t seed, uint64_t index)
{
	uint64_t x = (seed << 32) + index + 0x9E3779B97F4A7C15ULL;

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static uint8_t pattern_byte(uint64_t seed, uint64_t off)
{
	return pattern_word(seed, off / 8) >> (8 * (off % 8));
}

/* Fill @buf with the test pattern of bytes [@off, @off + @len) of a file. */
void spin_pattern_fill(void *buf, uint64_t off, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	size_t i = 0;

	for (; i < len && (off + i) % 8; i++)
		p[i] = pattern_byte(seed, off + i);
	for (; i + 8 <= len; i += 8) {
		uint64_t w = pattern_word(seed, (off + i) / 8);

		memcpy(p + i, &w, 8);
	}
	for (; i < len; i++)
		p[i] = pattern_byte(seed, off + i);
}

/* Index of the first byte of @buf that differs from the pattern, or -1. */
ssize_t spin_pattern_check(const void *buf, uint64_t off, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;
	size_t i = 0;

	for (; i < len && (off + i) % 8; i++)
		if (p[i] != pattern_byte(seed, off + i))
			return i;
	/* A word at a time: the guest runs under TCG, where every instruction counts. */
	for (; i + 8 <= len; i += 8) {
		uint64_t w = pattern_word(seed, (off + i) / 8);

		if (memcmp(p + i, &w, 8))
			break;
	}
	for (; i < len; i++)
		if (p[i] != pattern_byte(seed, off + i))
			return i;
	return -1;
}

/* zlib's CRC-32 (reflected, polynomial 0xEDB88320). */
uint32_t spin_crc32(uint32_t crc, const void *buf, size_t len)
{
	static uint32_t table[256];
	const uint8_t *p = buf;

	if (!table[1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xEDB88320 ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	}
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static int agent_fd = -1;

/* The GPU agent listens on the guest's third serial port. */
/* The lock that makes processes take turns at the agent, see spin_agent(). */
static int agent_lock(void)
{
	int lock = open("/tmp/.spin-agent.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (lock >= 0 && flock(lock, LOCK_EX)) {
		close(lock);
		lock = -1;
	}
	return lock;
}

int spin_agent_open(void)
{
	struct termios t;
	int lock;

	if (agent_fd >= 0)
		return 0;
	/* The flush below must not eat another process's request or answer. */
	lock = agent_lock();
	if (lock < 0)
		return -EIO;
	agent_fd = open("/dev/ttyS2", O_RDWR | O_NOCTTY);
	if (agent_fd < 0) {
		close(lock);
		return -errno;
	}
	if (tcgetattr(agent_fd, &t) == 0) {
		cfmakeraw(&t);
		/* A byte, or 25 s: a lost answer fails the request, not the run. */
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 250;
		tcsetattr(agent_fd, TCSANOW, &t);
	}
	tcflush(agent_fd, TCIOFLUSH);
	close(lock);
	return 0;
}

/*
 * Send one request line, read one answer line into @reply. 0 if it starts with OK/PONG.
 * Processes (and threads) that share the agent take turns: each call locks a file of its own
 * open (a lock on the tty itself would be shared by the processes forked with it), and so
 * does the first open of a process, whose flush would otherwise drop another one's answer.
 */
int spin_agent(char *reply, size_t len, const char *fmt, ...)
{
	char line[256];
	size_t n = 0;
	va_list ap;
	int m, lock, ret = 0;

	if (spin_agent_open())
		return -ENODEV;
	va_start(ap, fmt);
	m = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[m++] = '\n';
	lock = agent_lock();
	if (lock < 0)
		return -EIO;
	if (write(agent_fd, line, m) != m)
		ret = -EIO;
	while (!ret && n + 1 < len) {
		char c;

		if (read(agent_fd, &c, 1) != 1) {
			ret = -EIO;
			break;
		}
		if (c == '\n')
			break;
		if (c != '\r')
			reply[n++] = c;
	}
	close(lock);
	reply[n] = '\0';
	if (ret)
		return ret;
	return strncmp(reply, "OK", 2) && strncmp(reply, "PONG", 4) ? -EINVAL : 0;
}

void *spin_alloc_aligned(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	return p;
}

/*
 * The stand-in GPU: of the ivshmem-plain devices (the rig also has a small one whose memory
 * is published late), the one with the largest BAR2.
 */
int spin_gpu_find(char *pcidir, size_t len)
{
	char v[16], d[16], path[PATH_MAX], best[PATH_MAX] = "";
	DIR *dir = opendir("/sys/bus/pci/devices");
	off_t best_size = -1;
	struct dirent *e;

	if (!dir)
		return -errno;
	snprintf(v, sizeof(v), "0x%04x", SPIN_GPU_VENDOR);
	snprintf(d, sizeof(d), "0x%04x", SPIN_GPU_DEVICE);
	while ((e = readdir(dir))) {
		char buf[16];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		if (spin_read_file(path, buf, sizeof(buf)) || strcmp(buf, v))
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", e->d_name);
		if (spin_read_file(path, buf, sizeof(buf)) || strcmp(buf, d))
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource2", e->d_name);
		if (stat(path, &st) || st.st_size <= best_size)
			continue;
		best_size = st.st_size;
		snprintf(best, sizeof(best), "/sys/bus/pci/devices/%s", e->d_name);
	}
	closedir(dir);
	if (!best[0])
		return -ENODEV;
	if (!realpath(best, pcidir))
		return -errno;
	(void)len;
	return 0;
}

/* Bus-independent CPU physical start of BAR @bar, from sysfs "resource". */
long long spin_pci_bar_start(const char *pcidir, int bar)
{
	char path[PATH_MAX];
	unsigned long long start = 0, end, flags;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "%s/resource", pcidir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	for (i = 0; i <= bar; i++)
		if (fscanf(f, "%llx %llx %llx", &start, &end, &flags) != 3) {
			fclose(f);
			return -1;
		}
	fclose(f);
	return start;
}

/*
 * Physical address behind @addr in this process (root only: /proc/self/pagemap).
 * The pagemap stays open, per process: a forked child opens its own.
 */
static sigjmp_buf touch_jmp;

static void touch_bus(int sig)
{
	siglongjmp(touch_jmp, 1);
}

/* Read a byte at @addr; 0, or -1 if that raised SIGBUS (a revoked mapping). */
static int touch(const void *addr)
{
	struct sigaction sa = { .sa_handler = touch_bus }, old;
	int ret = -1;

	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(touch_jmp, 1)) {
		(void)__atomic_load_n((const char *)addr, __ATOMIC_RELAXED);
		ret = 0;
	}
	sigaction(SIGBUS, &old, NULL);
	return ret;
}

/* This process's /proc/self/pagemap, open; a forked child opens its own. */
static int pagemap_fd(void)
{
	static int fd = -1;
	static pid_t pid;

	if (fd >= 0 && pid != getpid()) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
		pid = getpid();
	}
	return fd;
}

/* The pagemap entries of @n pages from virtual page @vpn; 0, or -1. */
static int pagemap_entries(uint64_t vpn, uint64_t *ent, size_t n)
{
	int fd = pagemap_fd();
	ssize_t want = n * sizeof(*ent);

	return fd >= 0 && pread(fd, ent, want, vpn * sizeof(*ent)) == want ? 0 : -1;
}

/* The physical address of the page of a pagemap entry, or -1 (not present, PFN hidden). */
static long long entry_phys(uint64_t entry)
{
	if (!(entry & (1ULL << 63)))
		return -1;
	entry &= (1ULL << 55) - 1;
	return entry ? (long long)(entry * sysconf(_SC_PAGESIZE)) : -1;
}

/*
 * The physical address of the page at @addr, which is faulted in first if it is
 * not present: GPU memory is mapped on first touch. (MADV_POPULATE_READ cannot:
 * GUP without FOLL_PCI_P2PDMA refuses p2pdma pages.) -1 if it cannot be.
 */
static long long page_phys(const void *addr)
{
	uint64_t page = sysconf(_SC_PAGESIZE), vpn = (uintptr_t)addr / page, entry;

	if (pagemap_entries(vpn, &entry, 1))
		return -1;
	if (entry_phys(entry) < 0 && !touch(addr) && pagemap_entries(vpn, &entry, 1))
		return -1;
	return entry_phys(entry);
}

long long spin_virt_to_phys(const void *addr)
{
	long long phys = page_phys(addr);

	return phys < 0 ? -1 : phys + (long long)((uintptr_t)addr % sysconf(_SC_PAGESIZE));
}

/* Pagemap entries read at once by gpu_runs(): 16 MiB of mappings per pread(). */
#define PAGEMAP_BATCH 4096

/*
 * Walk [@addr, @addr + @len) of a mapping of GPU memory page by page and call
 * @fn for every physically contiguous run, with its offset in the GPU BAR.
 * The pagemap is read in batches (one pread() per page made the checks of
 * large reads the slowest part of the tests under the debug kernel).
 */
static int gpu_runs(const char *pcidir, const void *addr, size_t len,
		    int (*fn)(uint64_t bar_off, size_t len, uint64_t at, void *arg), void *arg)
{
	long long bar = spin_pci_bar_start(pcidir, SPIN_GPU_BAR), run_phys = 0;
	uint64_t page = sysconf(_SC_PAGESIZE), ent[PAGEMAP_BATCH];
	uintptr_t va = (uintptr_t)addr;
	size_t done = 0, run_len = 0, run_at = 0;
	int ret;

	if (bar <= 0)
		return -ENODEV;
	while (done < len) {
		uint64_t vpn = (va + done) / page;
		uint64_t left = (va + len - 1) / page - vpn + 1;
		size_t n = left < PAGEMAP_BATCH ? left : PAGEMAP_BATCH;

		if (pagemap_entries(vpn, ent, n))
			return -EFAULT;
		for (size_t i = 0; i < n; i++) {
			size_t in = (va + done) % page;
			size_t chunk = page - in < len - done ? page - in : len - done;
			long long phys = entry_phys(ent[i]);

			if (phys < 0)
				phys = page_phys((const char *)addr + done);
			if (phys < bar) {
				/* not GPU memory: the run before it is still looked at */
				if (run_len) {
					ret = fn(run_phys - bar, run_len, run_at, arg);
					if (ret)
						return ret;
				}
				return -EFAULT;
			}
			phys += in;
			if (run_len && phys == run_phys + (long long)run_len) {
				run_len += chunk;
			} else {
				if (run_len) {
					ret = fn(run_phys - bar, run_len, run_at, arg);
					if (ret)
						return ret;
				}
				run_phys = phys;
				run_len = chunk;
				run_at = done;
			}
			done += chunk;
		}
	}
	return run_len ? fn(run_phys - bar, run_len, run_at, arg) : 0;
}

struct gpu_op {
	const char *cmd;
	uint64_t seed, poff;
	char *why;
	size_t whylen;
};

static int gpu_op_run(uint64_t bar_off, size_t len, uint64_t at, void *arg)
{
	struct gpu_op *op = arg;
	char reply[128];
	int ret;

	ret = spin_agent(reply, sizeof(reply), "%s %llu %zu %llu %llu", op->cmd,
			 (unsigned long long)bar_off, len, (unsigned long long)op->seed,
			 (unsigned long long)(op->poff + at));
	if (ret && op->why)
		snprintf(op->why, op->whylen, "%s %llu+%zu: %s", op->cmd,
			 (unsigned long long)bar_off, len, reply);
	return ret;
}

/*
 * Ask the host whether GPU memory behind @addr holds the pattern of seed @seed
 * for offsets [@poff, @poff + @len): what a GPU would see, not what this CPU
 * reads back. 0 if it does; otherwise @why says where it does not.
 */
int spin_gpu_check(const char *pcidir, const void *addr, size_t len, uint64_t seed,
		   uint64_t poff, char *why, size_t whylen)
{
	struct gpu_op op = { "CHECK", seed, poff, why, whylen };

	if (why)
		snprintf(why, whylen, "ok");
	return gpu_runs(pcidir, addr, len, gpu_op_run, &op);
}

/* Have the host write the pattern into the GPU memory behind @addr. */
int spin_gpu_fill(const char *pcidir, const void *addr, size_t len, uint64_t seed, uint64_t poff)
{
	struct gpu_op op = { "FILL", seed, poff, NULL, 0 };

	return gpu_runs(pcidir, addr, len, gpu_op_run, &op);
}

struct gpu_cmp {
	const uint8_t *want;
	char *why;
	size_t whylen;
};

static int gpu_cmp_run(uint64_t bar_off, size_t len, uint64_t at, void *arg)
{
	struct gpu_cmp *c = arg;
	uint32_t want = spin_crc32(0, c->want + at, len);
	unsigned int got;
	char reply[128];

	if (spin_agent(reply, sizeof(reply), "CRC %llu %zu", (unsigned long long)bar_off,
		       len) || sscanf(reply, "OK %x", &got) != 1) {
		if (c->why)
			snprintf(c->why, c->whylen, "CRC %llu+%zu: %s",
				 (unsigned long long)bar_off, len, reply);
		return -EIO;
	}
	if (got != want) {
		if (c->why)
			snprintf(c->why, c->whylen,
				 "bytes %llu..%llu: host CRC-32 %08x, expected %08x",
				 (unsigned long long)at, (unsigned long long)(at + len), got,
				 want);
		return -EILSEQ;
	}
	return 0;
}

/*
 * Ask the host whether the GPU memory behind [@addr, @addr + @len) holds the
 * @len bytes at @want: one CRC-32 per physically contiguous run, computed by
 * the host. With @want == @addr: whether the host sees what this CPU reads
 * through the mapping. 0 if it does; otherwise @why says where it does not.
 */
int spin_gpu_compare(const char *pcidir, const void *addr, size_t len, const void *want,
		     char *why, size_t whylen)
{
	struct gpu_cmp c = { want, why, whylen };

	if (why)
		snprintf(why, whylen, "ok");
	return gpu_runs(pcidir, addr, len, gpu_cmp_run, &c);
}

/* Open the DMA-BUF heap of the p2pdma provider at sysfs dir @pcidir. */
int spin_heap_open(const char *pcidir)
{
	char path[PATH_MAX];
	const char *bdf = strrchr(pcidir, '/');

	snprintf(path, sizeof(path), "/dev/dma_heap/p2p-%s", bdf ? bdf + 1 : pcidir);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Allocate @len bytes from @heap: the dma-buf fd, or -errno. */
int spin_heap_alloc(int heap, size_t len, unsigned int fd_flags, unsigned long long heap_flags)
{
	struct dma_heap_allocation_data data = {
		.len = len,
		.fd_flags = fd_flags,
		.heap_flags = heap_flags,
	};

	if (ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &data))
		return -errno;
	return data.fd;
}

/*
 * @len bytes of GPU memory from the heap of the provider @pcidir, mapped shared
 * and read-write: the mapping, or MAP_FAILED with errno set. *@heap and *@buf
 * get the heap's and the buffer's descriptors (-1 if there is none).
 */
void *spin_gpu_buffer(const char *pcidir, size_t len, int *heap, int *buf)
{
	*buf = -1;
	*heap = spin_heap_open(pcidir);
	if (*heap < 0)
		return MAP_FAILED;
	*buf = spin_heap_alloc(*heap, len, O_RDWR | O_CLOEXEC, 0);
	if (*buf < 0) {
		errno = -*buf;
		*buf = -1;
		return MAP_FAILED;
	}
	return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *buf, 0);
}

int spin_gpu_setup(char *gpu, size_t gpu_len, uint8_t **gmem, int *heap, int *buf,
		   size_t host_len, uint8_t **host)
{
	int ret;

	if (sysconf(_SC_PAGESIZE) != 4096) {
		errno = EINVAL;
		return -1;
	}
	if (spin_gpu_find(gpu, PATH_MAX)) {
		errno = ENODEV;
		return -1;
	}
	*gmem = spin_gpu_buffer(gpu, gpu_len, heap, buf);
	if (*gmem == MAP_FAILED)
		return -1;
	*host = spin_alloc_aligned(host_len);
	if (!*host)
		return -1;
	ret = spin_sysfs_set(SPIN_SYS "/mode", "auto");
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

/* ---- a minimal io_uring ------------------------------------------------- */

int spin_ring_init(struct spin_ring *r, unsigned int entries, unsigned int flags)
{
	struct io_uring_params p = { .flags = flags };
	size_t sq_len, cq_len;
	uint8_t *sq, *cq;

	r->fd = syscall(__NR_io_uring_setup, entries, &p);
	if (r->fd < 0)
		return -1;
	r->sqe_size = flags & IORING_SETUP_SQE128 ? 128 : 64;
	r->cqe_size = flags & IORING_SETUP_CQE32 ? 32 : 16;
	r->entries = p.sq_entries;
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned int);
	cq_len = p.cq_off.cqes + p.cq_entries * r->cqe_size;
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		sq_len = sq_len > cq_len ? sq_len : cq_len;
		cq_len = sq_len;
	}
	sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		  IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		return -1;
	cq = sq;
	if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
		cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
			  IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			return -1;
	}
	r->sqes = mmap(NULL, p.sq_entries * r->sqe_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		return -1;
	r->sq_head = (void *)(sq + p.sq_off.head);
	r->sq_tail = (void *)(sq + p.sq_off.tail);
	r->sq_mask = (void *)(sq + p.sq_off.ring_mask);
	r->sq_array = (void *)(sq + p.sq_off.array);
	r->cq_head = (void *)(cq + p.cq_off.head);
	r->cq_tail = (void *)(cq + p.cq_off.tail);
	r->cq_mask = (void *)(cq + p.cq_off.ring_mask);
	r->cqes = cq + p.cq_off.cqes;
	return 0;
}

/* The next free SQE, zeroed; the caller fills it and then calls spin_ring_run(). */
struct io_uring_sqe *spin_ring_sqe(struct spin_ring *r, unsigned int nth)
{
	unsigned int tail = *r->sq_tail + nth, idx = tail & *r->sq_mask;
	struct io_uring_sqe *sqe = (void *)(r->sqes + idx * r->sqe_size);

	memset(sqe, 0, r->sqe_size);
	r->sq_array[idx] = idx;
	sqe->user_data = nth;
	return sqe;
}

/* Submits @n prepared SQEs, waits for all, stores each result by user_data in @res. */
int spin_ring_run(struct spin_ring *r, unsigned int n, int *res)
{
	unsigned int got = 0;

	__atomic_store_n(r->sq_tail, *r->sq_tail + n, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, r->fd, n, n, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return -1;
	while (got < n) {
		unsigned int head = *r->cq_head;
		unsigned int tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);

		if (head == tail) {
			if (syscall(__NR_io_uring_enter, r->fd, 0, 1, IORING_ENTER_GETEVENTS,
				    NULL, 0) < 0)
				return -1;
			continue;
		}
		for (; head != tail; head++, got++) {
			struct io_uring_cqe *cqe =
				(void *)(r->cqes + (head & *r->cq_mask) * r->cqe_size);

			if (cqe->user_data < n)
				res[cqe->user_data] = cqe->res;
		}
		__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	}
	return 0;
}

void spin_ring_exit(struct spin_ring *r)
{
	close(r->fd);
}

/* ---- aio ------------------------------------------------------------------ */

/* Submits one iocb and waits for it; returns its result or -errno. */
long long spin_aio_one(struct iocb *cb)
{
	aio_context_t ctx = 0;
	struct iocb *cbs[1] = { cb };
	struct io_event ev;
	long long ret;

	if (syscall(__NR_io_setup, 4, &ctx))
		return -errno;
	if (syscall(__NR_io_submit, ctx, 1, cbs) != 1)
		ret = -errno;
	else if (syscall(__NR_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
		ret = -errno;
	else
		ret = ev.res;
	syscall(__NR_io_destroy, ctx);
	return ret;
}

/* The kernel log, NUL-terminated (free() it), or NULL. */
static char *klog_read(void)
{
	int len = klogctl(10, NULL, 0);
	char *buf = len > 0 ? calloc(1, len + 1) : NULL;

	if (buf && klogctl(3, buf, len) <= 0) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

/* How many times @needle is in the kernel log. */
int spin_log_count(const char *needle)
{
	char *buf = klog_read();
	int n = 0;

	for (char *p = buf ? strstr(buf, needle) : NULL; p; p = strstr(p + 1, needle))
		n++;
	free(buf);
	return n;
}

/* Does the last line of the kernel log that contains @key go on with @rest? */
int spin_log_last_is(const char *key, const char *rest)
{
	char *buf = klog_read(), *last = NULL;
	int found;

	for (char *p = buf ? strstr(buf, key) : NULL; p; p = strstr(p + 1, key))
		last = p;
	found = last && !strncmp(last + strlen(key), rest, strlen(rest));
	free(buf);
	return found;
}

/* ---- NVMe over Fabrics: a target and its host in the guest ------------- */

#define NVMET "/sys/kernel/config/nvmet"

static __printf(2, 3) int cfs_write(const char *val, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return spin_write_file(path, val);
}

static int make_dir(const char *path)
{
	return mkdir(path, 0755) && errno != EEXIST ? -errno : 0;
}

int spin_nvmet_init(void)
{
	struct stat st;

	if (stat(NVMET, &st) && mount("none", "/sys/kernel/config", "configfs", 0, NULL))
		return -errno;
	if (stat(NVMET, &st))
		return -errno;
	return system("/usr/sbin/ip link set lo up") ? -EIO : 0;
}

/*
 * An RDMA port is never disabled: nvmet disables a port when its last
 * subsystem leaves it, and nvmet-rdma then destroys the listening CM ID under
 * nvmet_config_sem, which a connect takes under the CM ID's handler mutex (a
 * lock inversion lockdep reports, of nvmet-rdma's own). So the port gets a
 * subsystem of no namespace first, which stays linked until the guest powers
 * off, and with it the port.
 */
#define RDMA_KEEP_NQN "spin-remote-rdma-keep"

static int rdma_port_keep(const char *port)
{
	char sub[PATH_MAX], link[2 * PATH_MAX];
	int ret;

	snprintf(sub, sizeof(sub), NVMET "/subsystems/" RDMA_KEEP_NQN);
	snprintf(link, sizeof(link), "%s/subsystems/" RDMA_KEEP_NQN, port);
	ret = make_dir(sub);
	if (!ret && symlink(sub, link) && errno != EEXIST)
		ret = -errno;
	return ret;
}

/* The subsystem of @t with namespace 1 on @backing, unless another port has it already. */
static int nvmet_subsys_up(const struct spin_nvmet *t, const char *backing)
{
	char sub[PATH_MAX], nsdir[PATH_MAX + 16], en[PATH_MAX + 32], buf[8];
	int ret;

	snprintf(sub, sizeof(sub), NVMET "/subsystems/%s", t->nqn);
	snprintf(nsdir, sizeof(nsdir), "%s/namespaces/1", sub);
	snprintf(en, sizeof(en), "%s/enable", nsdir);
	if (!spin_read_file(en, buf, sizeof(buf)) && !strcmp(buf, "1"))
		return 0;
	ret = make_dir(sub);
	if (!ret)
		ret = cfs_write("1", "%s/attr_allow_any_host", sub);
	if (!ret)
		ret = cfs_write(t->nqn, "%s/attr_serial", sub);
	if (!ret)
		ret = make_dir(nsdir);
	if (!ret)
		ret = cfs_write(backing, "%s/device_path", nsdir);
	if (!ret)
		ret = cfs_write("1", "%s/enable", nsdir);
	return ret;
}

int spin_nvmet_target_up(struct spin_nvmet *t, const char *backing, char *why, size_t len)
{
	char sub[PATH_MAX], port[PATH_MAX], link[2 * PATH_MAX];
	int ret;

	snprintf(sub, sizeof(sub), NVMET "/subsystems/%s", t->nqn);
	snprintf(port, sizeof(port), NVMET "/ports/%d", t->port);
	snprintf(link, sizeof(link), "%s/subsystems/%s", port, t->nqn);
	ret = nvmet_subsys_up(t, backing);
	if (ret) {
		snprintf(why, len, "subsystem %s on %s: %s", t->nqn, backing, strerror(-ret));
		return ret;
	}
	ret = make_dir(port);
	if (!ret)
		ret = cfs_write(t->trtype, "%s/addr_trtype", port);
	if (!ret && t->traddr) {
		ret = cfs_write("ipv4", "%s/addr_adrfam", port);
		if (!ret)
			ret = cfs_write(t->traddr, "%s/addr_traddr", port);
		if (!ret)
			ret = cfs_write(t->svcid, "%s/addr_trsvcid", port);
	}
	if (!ret && !strcmp(t->trtype, "rdma"))
		ret = rdma_port_keep(port);
	if (!ret && symlink(sub, link))
		ret = -errno;
	if (ret) {
		snprintf(why, len, "port %d (%s): %s", t->port, t->trtype, strerror(-ret));
		return ret;
	}
	t->target_up = 1;
	return 0;
}

/* Does a port other than @t's still export the subsystem of @t? */
static int nvmet_subsys_linked(const struct spin_nvmet *t)
{
	DIR *d = opendir(NVMET "/ports");
	char path[PATH_MAX];
	struct dirent *e;
	int found = 0;

	while (d && !found && (e = readdir(d))) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == t->port)
			continue;
		snprintf(path, sizeof(path), NVMET "/ports/%s/subsystems/%s", e->d_name, t->nqn);
		found = !access(path, F_OK);
	}
	if (d)
		closedir(d);
	return found;
}

void spin_nvmet_target_down(struct spin_nvmet *t)
{
	char path[PATH_MAX];

	if (!t->target_up)
		return;
	snprintf(path, sizeof(path), NVMET "/ports/%d/subsystems/%s", t->port, t->nqn);
	unlink(path);
	snprintf(path, sizeof(path), NVMET "/ports/%d", t->port);
	if (strcmp(t->trtype, "rdma"))
		rmdir(path);
	t->target_up = 0;
	if (nvmet_subsys_linked(t))
		return;
	cfs_write("0", NVMET "/subsystems/%s/namespaces/1/enable", t->nqn);
	snprintf(path, sizeof(path), NVMET "/subsystems/%s/namespaces/1", t->nqn);
	rmdir(path);
	snprintf(path, sizeof(path), NVMET "/subsystems/%s", t->nqn);
	rmdir(path);
}

int spin_nvmet_ana_state(const struct spin_nvmet *t, const char *state)
{
	return cfs_write(state, NVMET "/ports/%d/ana_groups/1/ana_state", t->port);
}

int spin_nvmet_disk_wait(struct spin_nvmet *t, int present)
{
	char dev[80], path[PATH_MAX];

	for (int i = 0; i < SPIN_NVMET_WAIT_S * 10; i++) {
		int found = !spin_nvme_blockdev(t->nqn, dev, sizeof(dev));

		if (found && present) {
			snprintf(t->disk, sizeof(t->disk), "%s", strrchr(dev, '/') + 1);
			snprintf(path, sizeof(path), "/sys/block/%s/size", t->disk);
			if (spin_read_ll(path) > 0)
				return 0;
		}
		if (!found && !present)
			return 0;
		usleep(100000);
	}
	return -ETIMEDOUT;
}

int spin_nvmet_connect(struct spin_nvmet *t, char *why, size_t len)
{
	char opts[320], reply[128] = "";
	unsigned int instance;
	ssize_t n;
	int fd, ret;

	/* A lost connection is retried every second, for 30 s at most, with I/O held. */
	if (t->traddr)
		snprintf(opts, sizeof(opts),
			 "transport=%s,traddr=%s,trsvcid=%s,nqn=%s,ctrl_loss_tmo=30,reconnect_delay=1",
			 t->trtype, t->traddr, t->svcid, t->nqn);
	else
		snprintf(opts, sizeof(opts), "transport=%s,nqn=%s", t->trtype, t->nqn);
	if (t->opts)
		snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts), ",%s", t->opts);
	fd = open("/dev/nvme-fabrics", O_RDWR);
	if (fd < 0) {
		snprintf(why, len, "/dev/nvme-fabrics: %s", strerror(errno));
		return -errno;
	}
	if (write(fd, opts, strlen(opts)) != (ssize_t)strlen(opts)) {
		ret = -errno;
		snprintf(why, len, "connect %s: %s", opts, strerror(errno));
		close(fd);
		return ret;
	}
	n = read(fd, reply, sizeof(reply) - 1);
	close(fd);
	if (n <= 0 || sscanf(reply, "instance=%u", &instance) != 1) {
		snprintf(why, len, "connect %s: reply \"%s\"", opts, reply);
		return -EIO;
	}
	snprintf(t->ctrl, sizeof(t->ctrl), "nvme%u", instance);
	t->connected = 1;
	ret = spin_nvmet_disk_wait(t, 1);
	if (ret)
		snprintf(why, len, "%s connected, but no disk with serial %s in %d s", t->ctrl,
			 t->nqn, SPIN_NVMET_WAIT_S);
	return ret;
}

int spin_nvmet_disconnect(struct spin_nvmet *t)
{
	char path[PATH_MAX];
	int ret;

	if (!t->connected)
		return 0;
	snprintf(path, sizeof(path), "/sys/class/nvme/%s/delete_controller", t->ctrl);
	ret = spin_write_file(path, "1");
	t->connected = 0;
	snprintf(path, sizeof(path), "/sys/class/nvme/%s", t->ctrl);
	for (int i = 0; !ret && !access(path, F_OK); i++) {
		if (i == SPIN_NVMET_WAIT_S * 10)
			return -ETIMEDOUT;
		usleep(100000);
	}
	return ret;
}
