/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the spin selftests: finding the rig's devices by serial
 * or vendor:device (never by probe order), the test pattern, CRC-32, and the
 * client of the host-side GPU agent (tools/testing/spin/scripts/gpu_agent.py).
 */
#ifndef SPIN_LIB_H
#define SPIN_LIB_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../kselftest.h"

#define SPIN_NVME0_SERIAL "spin-nvme0"	/* data disk */
#define SPIN_NVME1_SERIAL "spin-nvme1"	/* data disk with a 64 MiB CMB */
#define SPIN_NVME2_SERIAL "spin-nvme2"	/* outside the switch: no P2P path to the GPU */
#define SPIN_VBLK_SERIAL "spin-vblk"	/* virtio-blk: a queue without P2PDMA */
/* NVMe subsystems of two controllers sharing a namespace: multipath heads */
#define SPIN_MPNEAR_SERIAL "spin-mpnear"	/* both controllers behind the switch */
#define SPIN_MPFAR_SERIAL "spin-mpfar"	/* one of them on the root bus */
#define SPIN_GPU_VENDOR 0x1af4		/* ivshmem-plain: the stand-in GPU */
#define SPIN_GPU_DEVICE 0x1110
#define SPIN_GPU_BAR 2

/*
 * mkfs.ext4 for the tests: the inode tables and the journal are zeroed by
 * mkfs itself, so that no ext4lazyinit thread writes to the disk under a
 * test. It did not make ext4 faster: what made ext4 slow in the tests was
 * its buffered writes and dropping their pages, ~1 ms per page each under
 * the debug kernel (see spin_write_uncached()).
 */
#define SPIN_MKFS_EXT4 "mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0"
#define SPIN_MKFS_XFS "mkfs.xfs -q -f"
#define SPIN_SYS "/sys/kernel/spin"

/*
 * A filesystem on one of the rig's disks, the fixture most tests share: the
 * test fills in the first fields (SPIN_FS_EXT4() and SPIN_FS_XFS() give the
 * usual pair, ext4 on spin-nvme0 and xfs on spin-nvme1), spin_fs_setup()
 * the rest.
 */
struct spin_fs {
	const char *name;	/* names its results: "ext4", "xfs" */
	const char *serial;	/* the disk's serial: NVMe, or virtio-blk with @virtio */
	int virtio;
	const char *type;	/* for mount(2) */
	const char *mkfs;	/* mkfs command line; the device is appended */
	const char *dir;	/* mount point */
	const char *opts;	/* mount options (mount(2) data), or NULL */
	unsigned long long seed;	/* the test pattern of its files */
	char dev[80];		/* /dev/nvmeXnY */
	char disk[80];		/* nvmeXnY */
	char stat[PATH_MAX];	/* /sys/block/<disk>/spin/stat */
	char path[PATH_MAX];	/* <dir>/data, the usual data file */
	unsigned int lbs;	/* logical block size: the direct-I/O alignment */
};

#define SPIN_FS_EXT4(mnt, pattern_seed) { .name = "ext4", .serial = SPIN_NVME0_SERIAL,	\
	.type = "ext4", .mkfs = SPIN_MKFS_EXT4, .dir = (mnt), .seed = (pattern_seed) }
#define SPIN_FS_XFS(mnt, pattern_seed) { .name = "xfs", .serial = SPIN_NVME1_SERIAL,	\
	.type = "xfs", .mkfs = SPIN_MKFS_XFS, .dir = (mnt), .seed = (pattern_seed) }

/*
 * Finds the disk of @fs and fills in dev, disk, stat and lbs: 0, or -1 with
 * errno ENODEV (no such disk) or ERANGE (see spin_fs_setup()).
 */
int spin_fs_find(struct spin_fs *fs);
/*
 * spin_fs_find(), then makes the filesystem, mounts it with mount(2) @flags
 * and @fs->opts (spin_mount()) and fills in path. 0, or -1 with errno: ENODEV
 * when the rig has no disk with that serial (the test skips:
 * SPIN_SKIP_MISSING()), EIO when mkfs failed, ERANGE when the logical block
 * size is not 512 to 4096 bytes, or mount's error.
 */
int spin_fs_setup(struct spin_fs *fs, unsigned long flags);
/* Unmounts @fs before the end of the program: spin_umount(). */
int spin_fs_unmount(struct spin_fs *fs);
/*
 * The tests of a program that runs them on each filesystem in turn: for each
 * of the @n of @all, spin_fs_setup() with @flags, @test(fs, i), then
 * spin_fs_unmount(). NULL when all ran, else the filesystem that could not be
 * set up (errno as spin_fs_setup()): see SPIN_FS_EACH_OR_EXIT().
 */
struct spin_fs *spin_fs_each(struct spin_fs *all, size_t n, unsigned long flags,
			     void (*test)(struct spin_fs *fs, size_t i));

/*
 * The state a program changes and must give back. spin_sysfs_set() records
 * the value @path had before the program first changed it, then writes @val
 * (0 or a negative errno, as spin_write_file()). spin_mount() mounts (its
 * directory made if missing) and records the mount; spin_umount() unmounts
 * and forgets it (0, or -1 with errno). spin_restore() writes every recorded
 * value back, the last changed first, then unmounts the recorded mounts, the
 * last mounted first. It runs when the program's first process exits; the
 * record is shared with the processes it forks (the harness runs each test
 * in a child), so what they change is given back too. A test calls it itself
 * only to restore early.
 */
int spin_sysfs_set(const char *path, const char *val);
int spin_mount(const char *src, const char *dir, const char *type, unsigned long flags,
	       const char *data);
int spin_umount(const char *dir);
void spin_restore(void);
/*
 * Turns the trace event @event ("group/name") on or off, as spin_sysfs_set()
 * (given back at exit); mounts tracefs first if it is not mounted.
 */
int spin_trace_event(const char *event, int on);

/*
 * A device of the rig the test needs is missing: off the rig, the program
 * skips (KSFT_SKIP, exit status 4) rather than fail. The rig's result parser
 * counts a skip as a failure, so in the rig nothing is skipped silently.
 * A macro, so that it uses the program's own kselftest.h counters.
 */
#define SPIN_SKIP_MISSING(fmt, ...) \
	ksft_exit_skip("not on the spin rig: " fmt "\n", ##__VA_ARGS__)

/* @fs could not be set up: the program skips (no such disk) or fails. */
#define SPIN_FS_EXIT(fs) do {								\
	const struct spin_fs *fs_ = (fs);						\
											\
	if (errno == ENODEV)								\
		SPIN_SKIP_MISSING("no block device with serial %s", fs_->serial);	\
	ksft_exit_fail_msg("%s on %s (%s): %s\n", fs_->type, fs_->dev, fs_->serial,	\
			   strerror(errno));						\
} while (0)

/* spin_fs_setup(), or the program skips (no such disk) or fails. */
#define SPIN_FS_SETUP_OR_EXIT(fs, flags) do {						\
	struct spin_fs *fs_setup_ = (fs);						\
											\
	if (spin_fs_setup(fs_setup_, flags))						\
		SPIN_FS_EXIT(fs_setup_);						\
} while (0)

/* spin_fs_each(), or the program skips (no such disk) or fails. */
#define SPIN_FS_EACH_OR_EXIT(all, n, flags, test) do {					\
	const struct spin_fs *fs_each_ = spin_fs_each(all, n, flags, test);		\
											\
	if (fs_each_)									\
		SPIN_FS_EXIT(fs_each_);							\
} while (0)

double spin_now(void);
int spin_uncache(int fd);
int spin_write_uncached(int fd, const void *buf, size_t len, off_t off);
ssize_t spin_read_uncached(int fd, void *buf, size_t len, off_t off);
int spin_read_file(const char *path, char *buf, size_t len);
/* Prints the kernel stack of process @pid, a line a message, each led by @who. */
void spin_show_stack(pid_t pid, const char *who);
long long spin_read_ll(const char *path);
int spin_fault_times(const char *dir, int times);
int spin_write_file(const char *path, const char *val);
long long spin_stat_get(const char *path, const char *name);

int spin_nvme_ctrl(const char *serial, char *ctrl, size_t len);
int spin_nvme_blockdev(const char *serial, char *dev, size_t len);
int spin_fs_make(const char *serial, const char *mkfs, const char *type, const char *dir,
		 unsigned long flags, char *dev, size_t devlen, char *disk, size_t disklen);
int spin_virtio_blockdev(const char *serial, char *dev, size_t len);
int spin_nvme_pcidir(const char *serial, char *dir, size_t len);
int spin_pci_find(unsigned int vendor, unsigned int device, char *dir, size_t len);
int spin_pci_upstream(const char *pcidir, char *up, size_t len);

void *spin_gpu_map(const char *pcidir, size_t *size);
int spin_gpu_find(char *pcidir, size_t len);
long long spin_pci_bar_start(const char *pcidir, int bar);
long long spin_virt_to_phys(const void *addr);
int spin_gpu_check(const char *pcidir, const void *addr, size_t len, uint64_t seed,
		   uint64_t poff, char *why, size_t whylen);
int spin_gpu_fill(const char *pcidir, const void *addr, size_t len, uint64_t seed,
		  uint64_t poff);
int spin_gpu_compare(const char *pcidir, const void *addr, size_t len, const void *want,
		     char *why, size_t whylen);

int spin_heap_open(const char *pcidir);
int spin_heap_alloc(int heap, size_t len, unsigned int fd_flags, unsigned long long heap_flags);
void *spin_gpu_buffer(const char *pcidir, size_t len, int *heap, int *buf);
/*
 * What a test of routed I/O sets up first: finds the stand-in GPU (its sysfs
 * directory into @gpu, PATH_MAX bytes), maps @gpu_len bytes of its memory at
 * *@gmem (spin_gpu_buffer()), allocates @host_len bytes of page-aligned host
 * memory at *@host and sets the router's mode to auto (spin_sysfs_set()).
 * 0, or -1 with errno: ENODEV when the rig has no stand-in GPU, EINVAL when
 * the page size is not the 4 KiB the tests assume.
 */
int spin_gpu_setup(char *gpu, size_t gpu_len, uint8_t **gmem, int *heap, int *buf,
		   size_t host_len, uint8_t **host);
/* spin_gpu_setup(), or the program skips (no stand-in GPU) or fails. */
#define SPIN_GPU_SETUP_OR_EXIT(gpu, gpu_len, gmem, heap, buf, host_len, host) do {	\
	if (spin_gpu_setup(gpu, gpu_len, gmem, heap, buf, host_len, host)) {		\
		if (errno == ENODEV)							\
			SPIN_SKIP_MISSING("stand-in GPU not found");			\
		ksft_exit_fail_msg("GPU set-up (4 KiB pages, memory, mode auto): %s\n",	\
				   strerror(errno));					\
	}										\
} while (0)

void spin_pattern_fill(void *buf, uint64_t off, size_t len, uint64_t seed);
ssize_t spin_pattern_check(const void *buf, uint64_t off, size_t len, uint64_t seed);
uint32_t spin_crc32(uint32_t crc, const void *buf, size_t len);

int spin_agent_open(void);
__printf(3, 4) int spin_agent(char *reply, size_t len, const char *fmt, ...);

void *spin_alloc_aligned(size_t len);

/* A minimal io_uring (raw system calls), for tests of the io_uring entry points. */
struct spin_ring {
	int fd;
	unsigned int *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned int *cq_head, *cq_tail, *cq_mask;
	uint8_t *sqes, *cqes;
	size_t sqe_size, cqe_size;
	unsigned int entries;
};

struct io_uring_sqe;
int spin_ring_init(struct spin_ring *r, unsigned int entries, unsigned int flags);
/* The @nth next free SQE, zeroed, with user_data @nth; then spin_ring_run(). */
struct io_uring_sqe *spin_ring_sqe(struct spin_ring *r, unsigned int nth);
/* Submits @n prepared SQEs, waits for all, stores each result by user_data in @res. */
int spin_ring_run(struct spin_ring *r, unsigned int n, int *res);
void spin_ring_exit(struct spin_ring *r);
/* Submits one aio iocb and waits for it; returns its result or -errno. */
struct iocb;
long long spin_aio_one(struct iocb *cb);

/*
 * The kernel log: how often @needle is in it; whether the last line with @key
 * goes on with @rest.
 */
int spin_log_count(const char *needle);
int spin_log_last_is(const char *key, const char *rest);

/*
 * NVMe over Fabrics in the guest: nvmet (configfs) exports a disk of the rig
 * and the guest connects to it as a host, as nvme-cli does. One spin_nvmet
 * is one path: a port of the target (@trtype "tcp", "loop" or "rdma"; @traddr
 * and @svcid for tcp and rdma) exporting subsystem @nqn, whose serial is its
 * NQN, and the host's controller on it. Two spin_nvmet of one @nqn on two
 * ports are two paths of one subsystem: the host's multipath joins them under
 * one disk. spin_nvmet_init() mounts configfs and brings up the loopback
 * device; spin_nvmet_target_up() makes the subsystem (namespace 1 on
 * @backing, unless it is exported already) and the port; spin_nvmet_connect()
 * connects the host and waits for the disk (@disk); spin_nvmet_disconnect()
 * deletes the controller and waits until it is gone; spin_nvmet_target_down()
 * takes the port down and, once no port exports it, the subsystem.
 * spin_nvmet_ana_state() sets the ANA state of the port's group 1
 * ("optimized", "non-optimized", "inaccessible", ...). All return 0 or a
 * negative errno, with a reason in @why where they take one.
 */
#define SPIN_NVMET_WAIT_S 60	/* for a disk or controller to come or go */

struct spin_nvmet {
	const char *trtype;
	const char *traddr;	/* NULL for loop */
	const char *svcid;
	int port;		/* nvmet port number */
	const char *nqn;	/* subsystem NQN, also its serial */
	const char *opts;	/* more connect options ("keep_alive_tmo=30"), or NULL */
	char ctrl[32];		/* the host's controller, nvmeN */
	char disk[80];		/* the host's disk, nvmeXnY */
	int target_up, connected;
};

int spin_nvmet_init(void);
int spin_nvmet_target_up(struct spin_nvmet *t, const char *backing, char *why, size_t len);
void spin_nvmet_target_down(struct spin_nvmet *t);
int spin_nvmet_connect(struct spin_nvmet *t, char *why, size_t len);
int spin_nvmet_disconnect(struct spin_nvmet *t);
/* Waits until the disk with serial @t->nqn is there (@present, into @disk) or gone. */
int spin_nvmet_disk_wait(struct spin_nvmet *t, int present);
int spin_nvmet_ana_state(const struct spin_nvmet *t, const char *state);

#endif /* SPIN_LIB_H */
