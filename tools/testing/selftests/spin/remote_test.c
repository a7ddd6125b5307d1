// SPDX-License-Identifier: GPL-2.0
/*
 * Remote storage: NVMe over Fabrics namespaces under the router. The guest is
 * its own target and host: nvmet (set up through configfs) exports
 * spin-nvme2's namespace, and the host connects to it over TCP on the
 * loopback device, over the loop transport and over RDMA with soft-RoCE
 * (rdma_rxe on a veth pair). On each remote disk, ext4 and xfs in turn:
 * reads into GPU memory and writes from it, every byte checked from the host
 * side of the GPU memory or from the disk; each request falls back with
 * reason queue, naming the remote path in the spin_route tracepoint and in
 * /sys/block/<disk>/spin/p2p, counted in the stat files; writers appending
 * from GPU memory in parallel lose nothing; spin check says why the
 * transport refuses P2P. Over TCP the target's port then loses the
 * subsystem for a while under a reader and a writer: the controller
 * reconnects, nothing hangs or reads wrong bytes, the I/O goes on, the
 * filesystem checks clean. Then md RAID-1 of a local drive and a remote one:
 * the refused member is named, the data is right. Every disk and target is
 * taken down again at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "../kselftest.h"
#include "router_lib.h"

#define NVMET "/sys/kernel/config/nvmet"
#define IP "/usr/sbin/ip"	/* iproute2's, for the veth pair */
#define RDMA "/usr/bin/rdma"
#define RXE_NETDEV "spinv0"
#define RXE_PEER "spinv1"
#define RXE_DEV "spinrxe0"
#define RXE_ADDR "10.77.0.1"
#define WAIT_S 60		/* for a disk to come or go */
#define MD_DEV "/dev/md0"
#define MD_CREATE "mdadm --create " MD_DEV " --run --level=1 --raid-devices=2 --assume-clean"

/*
 * Per transport: set-up, per filesystem reads, writes and appends, spin check,
 * an outage where the transport has one, take-down; and the md RAID-1.
 */
#define FS_RESULTS 3
#define TRANSPORT_RESULTS (1 + 2 * FS_RESULTS + 1 + 1)
#define OUTAGES 2	/* over TCP, on ext4 and on xfs */
#define RESULTS (3 * TRANSPORT_RESULTS + OUTAGES + 1)

/*
 * How a target goes away: its port loses the subsystem (the host's controller
 * resets and reconnects until the port has it again). Over TCP only: the rig
 * has no outage over RDMA that nvme-rdma rides out. With rxe's netdev taken
 * down and up, the reconnect work never finished; a port that loses its last
 * subsystem is disabled, which trips the lock inversion described at
 * rdma_port_keep(); and with the port kept, the host's reconnect is refused
 * for good (the subsystem is unknown: DNR) and the controller deleted.
 */
enum { OUTAGE_NONE, OUTAGE_PORT };

/* One NVMe over Fabrics transport: the target's port and subsystem, the host's controller. */
struct transport {
	const char *name;
	const char *trtype;
	const char *traddr;	/* NULL for loop */
	const char *svcid;
	int port;		/* nvmet port number */
	const char *nqn;	/* subsystem NQN, also its serial */
	const char *why;	/* what spin check must say of the path */
	int outage;		/* how the target goes away for a while, if at all */
	char ctrl[32];		/* the host's controller, nvmeN */
	char disk[80];		/* the host's disk, nvmeXnY */
	int target_up, connected;
};

static struct transport transports[] = {
	{ .name = "tcp", .trtype = "tcp", .traddr = "127.0.0.1", .svcid = "4420", .port = 1,
	  .nqn = "spin-remote-tcp", .why = "is an NVMe/TCP path", .outage = OUTAGE_PORT },
	{ .name = "loop", .trtype = "loop", .port = 2, .nqn = "spin-remote-loop",
	  .why = "is an NVMe loop path" },
	{ .name = "rdma", .trtype = "rdma", .traddr = RXE_ADDR, .svcid = "4421", .port = 3,
	  .nqn = "spin-remote-rdma", .why = "over software RDMA (" RXE_DEV " on " RXE_NETDEV ")" },
};

static char backing[80];	/* the target's block device: spin-nvme2 */
static char gpu_bdf[32];

static int cfs_write(const char *val, const char *fmt, ...) __printf(2, 3);

/* Writes @val to the configfs attribute named by @fmt; 0 or -errno. */
static int cfs_write(const char *val, const char *fmt, ...)
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

/*
 * An RDMA port is never disabled here: nvmet disables a port when its last
 * subsystem leaves it, and nvmet-rdma then destroys the listening CM ID under
 * nvmet_config_sem, which a connect takes under the CM ID's handler mutex (a
 * lock inversion lockdep reports, of nvmet-rdma's own). So the port gets a
 * subsystem of no namespace first, which stays linked until the guest powers
 * off, and with it the port, its rxe device and the veth pair.
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

/* The target: subsystem @t->nqn with namespace 1 on @backing, on port @t->port. */
static int target_up(struct transport *t, char *why, size_t len)
{
	char sub[PATH_MAX], port[PATH_MAX], link[2 * PATH_MAX], nsdir[PATH_MAX + 16];
	int ret;

	snprintf(sub, sizeof(sub), NVMET "/subsystems/%s", t->nqn);
	snprintf(nsdir, sizeof(nsdir), "%s/namespaces/1", sub);
	snprintf(port, sizeof(port), NVMET "/ports/%d", t->port);
	snprintf(link, sizeof(link), "%s/subsystems/%s", port, t->nqn);
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

static void target_down(struct transport *t)
{
	char path[PATH_MAX];

	if (!t->target_up)
		return;
	snprintf(path, sizeof(path), NVMET "/ports/%d/subsystems/%s", t->port, t->nqn);
	unlink(path);
	snprintf(path, sizeof(path), NVMET "/ports/%d", t->port);
	if (strcmp(t->trtype, "rdma"))
		rmdir(path);
	cfs_write("0", NVMET "/subsystems/%s/namespaces/1/enable", t->nqn);
	snprintf(path, sizeof(path), NVMET "/subsystems/%s/namespaces/1", t->nqn);
	rmdir(path);
	snprintf(path, sizeof(path), NVMET "/subsystems/%s", t->nqn);
	rmdir(path);
	t->target_up = 0;
}

/* Waits until the disk with serial @t->nqn is there (@present) or gone. */
static int disk_wait(struct transport *t, int present)
{
	char dev[80], path[PATH_MAX];

	for (int i = 0; i < WAIT_S * 10; i++) {
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

/* The host: connect through /dev/nvme-fabrics, as nvme-cli does. */
static int host_connect(struct transport *t, char *why, size_t len)
{
	char opts[256], reply[128] = "";
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
	ret = disk_wait(t, 1);
	if (ret)
		snprintf(why, len, "%s connected, but no disk with serial %s in %d s", t->ctrl,
			 t->nqn, WAIT_S);
	return ret;
}

static int host_disconnect(struct transport *t)
{
	char path[PATH_MAX];
	int ret;

	if (!t->connected)
		return 0;
	snprintf(path, sizeof(path), "/sys/class/nvme/%s/delete_controller", t->ctrl);
	ret = spin_write_file(path, "1");
	t->connected = 0;
	return ret ? ret : disk_wait(t, 0);
}

/* soft-RoCE: an RDMA device on one end of a veth pair. */
static int rxe_up(char *why, size_t len)
{
	static const char *const cmds[] = {
		IP " link add " RXE_NETDEV " type veth peer name " RXE_PEER,
		IP " addr add " RXE_ADDR "/24 dev " RXE_NETDEV,
		IP " link set " RXE_PEER " up",
		IP " link set " RXE_NETDEV " up",
		RDMA " link add " RXE_DEV " type rxe netdev " RXE_NETDEV,
	};

	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "%s >/dev/console 2>&1", cmds[i]);
		if (run(cmd)) {
			snprintf(why, len, "\"%s\" failed", cmds[i]);
			return -EIO;
		}
	}
	return 0;
}

/* The remote path the kernel names: "provider <gpu> queue <maj:min>" of spin/p2p. */
static int p2p_queue_member(const char *disk, unsigned int *maj, unsigned int *min)
{
	char path[PATH_MAX], buf[4096], want[64];
	char *line, *save;

	snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", disk);
	if (spin_read_file(path, buf, sizeof(buf)) < 0)
		return -EIO;
	snprintf(want, sizeof(want), "provider %s queue %%u:%%u", gpu_bdf);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, want, maj, min) == 2)
			return 0;
	return -ENOENT;
}

/*
 * Reads into GPU memory: sizes from a page to 3 MiB, aligned and not, cold
 * and cached. Each goes whole through the page cache with reason queue
 * (counters, trace), names the same member as spin/p2p, and every byte is
 * right, the guard bytes around it untouched.
 */
static void remote_reads(struct router_fs *fs, const char *what)
{
	const struct {
		long long pos;
		size_t len;
		int rz;
	} c[] = {
		{ 0, PG, 0 },
		{ 0, MiB, 0 },
		{ 12345, 3 * MiB + 7, 100 },
		{ 2 * MiB, 64 * KiB, 0 },
	};
	unsigned int pmaj = 0, pmin = 0;
	struct res r = { 0 };
	char label[160];
	struct obs o;

	if (p2p_queue_member(fs->base.disk, &pmaj, &pmin))
		fail(&r, what, "/sys/block/%s/spin/p2p names no refused member for %s",
		     fs->base.disk, gpu_bdf);
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		size_t goff = 40 * MiB + c[i].pos % PG;

		snprintf(label, sizeof(label), "%s: %zu B at %lld, %d%% cached", what, c[i].len,
			 c[i].pos, c[i].rz);
		r.runs++;
		if (!read_observed(fs, c[i].pos, c[i].len, c[i].rz, goff, &o, &r, label)) {
			if (o.d.v[ST_BYTES_P2P] || o.d.v[ST_FB_QUEUE] != 1 ||
			    route_reasons(&o) != BIT(R_QUEUE))
				fail(&r, label,
				     "expected reason queue: bytes_p2p +%lld, fallback_queue +%lld, reasons seen %#x",
				     o.d.v[ST_BYTES_P2P], o.d.v[ST_FB_QUEUE], route_reasons(&o));
			for (int k = 0; k < o.tr.nroute; k++) {
				struct route *rt = &o.tr.route[k];

				if (rt->member_maj != pmaj || rt->member_min != pmin)
					fail(&r, label,
					     "spin_route names member %u:%u, spin/p2p %u:%u",
					     rt->member_maj, rt->member_min, pmaj, pmin);
			}
		}
		trace_free(&o.tr);
	}
	res_result(&r, "%s: reads into GPU memory right, reason queue, member %u:%u named", what,
		   pmaj, pmin);
}

/*
 * Writes from GPU memory (the host fills it): aligned, unaligned and
 * extending, each kept in the page cache with reason queue (write
 * counters); the file then holds every byte, read back from the disk.
 */
static void remote_writes(struct router_fs *fs, const char *what)
{
	const struct {
		long long pos;
		size_t len;
	} c[] = {
		{ 0, MiB },
		{ 3 * MiB + 100, 200 * KiB + 3 },
		{ SMALL_LEN - 4096, 2 * MiB },	/* past the end of the file */
	};
	unsigned long long seed = fs->base.seed + 1000;
	long long fb0, fb1, req0, req1;
	struct res r = { 0 };
	char label[160];
	ssize_t n;

	fb0 = spin_stat_get(fs->base.stat, "write_fallback_queue");
	req0 = spin_stat_get(fs->base.stat, "write_requests");
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		size_t goff = 48 * MiB + c[i].pos % PG;

		snprintf(label, sizeof(label), "%s: write of %zu B at %lld", what, c[i].len,
			 c[i].pos);
		r.runs++;
		if (spin_gpu_fill(gpu, gmem + goff, c[i].len, seed, c[i].pos)) {
			fail(&r, label, "the host could not fill GPU memory");
			continue;
		}
		n = pwrite(fs->fd, gmem + goff, c[i].len, c[i].pos);
		if (n != (ssize_t)c[i].len)
			fail(&r, label, "returned %zd (%s)", n, n < 0 ? strerror(errno) : "short");
	}
	fb1 = spin_stat_get(fs->base.stat, "write_fallback_queue");
	req1 = spin_stat_get(fs->base.stat, "write_requests");
	if (fb1 - fb0 != (long long)ARRAY_SIZE(c) || req1 - req0 != (long long)ARRAY_SIZE(c))
		fail(&r, what, "write_requests +%lld, write_fallback_queue +%lld, want +%zu each",
		     req1 - req0, fb1 - fb0, ARRAY_SIZE(c));
	if (fsync(fs->fd) || posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED))
		fail(&r, what, "fsync: %s", strerror(errno));
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		snprintf(label, sizeof(label), "%s: write of %zu B at %lld", what, c[i].len,
			 c[i].pos);
		n = pread(fs->fd, host, c[i].len, c[i].pos);
		if (n != (ssize_t)c[i].len)
			fail(&r, label, "read back %zd", n);
		else if (spin_pattern_check(host, c[i].pos, c[i].len, seed) >= 0)
			fail(&r, label, "byte %zd differs when read back",
			     spin_pattern_check(host, c[i].pos, c[i].len, seed));
	}
	/* The file's own pattern still around the written ranges. */
	n = pread(fs->fd, host, 4096, 2 * MiB);
	if (n != 4096 || spin_pattern_check(host, 2 * MiB, 4096, fs->base.seed) >= 0)
		fail(&r, what, "bytes that no write touched changed");
	res_result(&r, "%s: writes from GPU memory on the disk, reason queue", what);
}

#define APPENDERS 2
#define APPEND_REC (64 * KiB)
#define APPEND_RECS 24

/*
 * Writers appending from GPU memory in parallel (O_APPEND), each its own
 * record pattern: the file ends up exactly as long as everything written,
 * every record whole and of one writer.
 */
static void parallel_appends(struct router_fs *fs, const char *what)
{
	char path[PATH_MAX + 8];
	struct res r = { 0 };
	int counts[APPENDERS] = { 0 };
	pid_t pid[APPENDERS];
	struct stat st;
	int fd, status;

	snprintf(path, sizeof(path), "%s/append.dat", fs->base.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0) {
		ksft_test_result_fail("%s: appenders: %s: %s\n", what, path, strerror(errno));
		return;
	}
	for (int w = 0; w < APPENDERS; w++)
		if (spin_gpu_fill(gpu, gmem + 60 * MiB + w * APPEND_REC, APPEND_REC, 500 + w, 0))
			fail(&r, what, "the host could not fill GPU memory");
	for (int w = 0; w < APPENDERS; w++) {
		pid[w] = fork();
		if (pid[w] == 0) {
			for (int k = 0; k < APPEND_RECS; k++)
				if (write(fd, gmem + 60 * MiB + w * APPEND_REC, APPEND_REC) !=
				    (ssize_t)APPEND_REC)
					_exit(1);
			_exit(0);
		}
	}
	for (int w = 0; w < APPENDERS; w++)
		if (pid[w] < 0 || waitpid(pid[w], &status, 0) != pid[w] || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			fail(&r, what, "appender %d failed", w);
	if (fsync(fd) || fstat(fd, &st) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		fail(&r, what, "fsync: %s", strerror(errno));
	else if (st.st_size != (off_t)APPENDERS * APPEND_RECS * APPEND_REC)
		fail(&r, what, "file is %lld bytes, %lu were appended", (long long)st.st_size,
		     (unsigned long)APPENDERS * APPEND_RECS * APPEND_REC);
	for (off_t off = 0; !r.bad && off < st.st_size; off += APPEND_REC) {
		int w;

		if (pread(fd, host, APPEND_REC, off) != (ssize_t)APPEND_REC) {
			fail(&r, what, "read back at %lld: %s", (long long)off, strerror(errno));
			break;
		}
		for (w = 0; w < APPENDERS; w++)
			if (spin_pattern_check(host, 0, APPEND_REC, 500 + w) < 0)
				break;
		if (w == APPENDERS)
			fail(&r, what, "the record at %lld is of no writer whole", (long long)off);
		else
			counts[w]++;
	}
	for (int w = 0; !r.bad && w < APPENDERS; w++)
		if (counts[w] != APPEND_RECS)
			fail(&r, what, "writer %d has %d records, wrote %d", w, counts[w],
			     APPEND_RECS);
	close(fd);
	unlink(path);
	res_result(&r, "%s: %d writers appending from GPU memory in parallel lose nothing", what,
		   APPENDERS);
}

/* `spin check` on a file of the remote disk names the transport's refusal. */
static void tool_says(struct transport *t, const char *file)
{
	char cmd[PATH_MAX + 64], out[8192] = "";
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "spin check %.4000s 2>&1", file);
	p = popen(cmd, "r");
	if (p) {
		n = fread(out, 1, sizeof(out) - 1, p);
		pclose(p);
	}
	out[n] = '\0';
	ksft_test_result(strstr(out, t->why) && strstr(out, "queue"),
			 "%s: spin check says why: the path %s\n", t->name,
			 strstr(out, t->why) ? t->why : "(not said)");
	if (!strstr(out, t->why))
		ksft_print_msg("spin check said:\n%s\n", out);
}

/* Reads, writes and appends on ext4 and xfs on the disk of @t. */
static void fs_tests(struct transport *t)
{
	struct router_fs fss[] = {
		{ .base = { .name = "ext4", .serial = t->nqn, .type = "ext4", .dir = "/mnt/rm-ext4",
			    .mkfs = SPIN_MKFS_EXT4, .seed = 81 } },
		{ .base = { .name = "xfs", .serial = t->nqn, .type = "xfs", .dir = "/mnt/rm-xfs",
			    .mkfs = SPIN_MKFS_XFS, .seed = 82 } },
	};

	for (size_t i = 0; i < ARRAY_SIZE(fss); i++) {
		struct router_fs *fs = &fss[i];
		char what[64];

		snprintf(what, sizeof(what), "%s over %s", fs->base.name, t->name);
		fs_setup(fs, SMALL_LEN);
		remote_reads(fs, what);
		remote_writes(fs, what);
		parallel_appends(fs, what);
		if (i == 0)
			tool_says(t, fs->base.path);
		fs_teardown(fs);
	}
}

/*
 * md RAID-1 of spin-nvme0 (local, P2P-capable) and the TCP disk: the array's
 * queue lacks P2PDMA because one member's does, the remote path is named,
 * reads are right.
 */
static void mixed_raid1(struct transport *t)
{
	struct router_fs md = { .base = { .name = "md", .type = "ext4", .dir = "/mnt/rm-md",
					  .seed = 83 } };
	unsigned int pmaj = 0, pmin = 0;
	char local[80], cmd[512];
	struct res r = { 0 };
	struct obs o;

	if (spin_nvme_blockdev(SPIN_NVME0_SERIAL, local, sizeof(local))) {
		ksft_test_result_fail("md RAID-1 local + tcp: no %s\n", SPIN_NVME0_SERIAL);
		return;
	}
	snprintf(cmd, sizeof(cmd), "mdadm --zero-superblock %s /dev/%s >/dev/null 2>&1", local,
		 t->disk);
	run(cmd);
	snprintf(cmd, sizeof(cmd), "%s %s /dev/%s </dev/null >/dev/console 2>&1", MD_CREATE,
		 local, t->disk);
	if (run(cmd) || run(SPIN_MKFS_EXT4 " " MD_DEV " >/dev/null 2>&1")) {
		ksft_test_result_fail("md RAID-1 local + tcp: mdadm or mkfs failed\n");
		run("mdadm --stop " MD_DEV " >/dev/null 2>&1");
		return;
	}
	snprintf(md.base.dev, sizeof(md.base.dev), "%s", MD_DEV);
	if (spin_mount(md.base.dev, md.base.dir, "ext4", 0, NULL)) {
		ksft_test_result_fail("md RAID-1 local + tcp: mount: %s\n", strerror(errno));
		run("mdadm --stop " MD_DEV " >/dev/null 2>&1");
		return;
	}
	snprintf(md.base.disk, sizeof(md.base.disk), "%s", strrchr(md.base.dev, '/') + 1);
	snprintf(md.base.stat, sizeof(md.base.stat), "/sys/block/%s/spin/stat", md.base.disk);
	snprintf(md.base.path, sizeof(md.base.path), "%s/data", md.base.dir);
	snprintf(cmd, sizeof(cmd), "/sys/block/%s/queue/logical_block_size", md.base.disk);
	md.base.lbs = spin_read_ll(cmd);
	fs_fill(&md, SMALL_LEN);
	if (p2p_queue_member(md.base.disk, &pmaj, &pmin))
		fail(&r, "md", "spin/p2p of %s names no refused member", md.base.disk);
	if (!read_observed(&md, 4096, 2 * MiB, 0, 4096, &o, &r, "md")) {
		if (o.d.v[ST_FB_QUEUE] != 1 || route_reasons(&o) != BIT(R_QUEUE))
			fail(&r, "md", "fallback_queue +%lld, reasons seen %#x",
			     o.d.v[ST_FB_QUEUE], route_reasons(&o));
		for (int k = 0; k < o.tr.nroute; k++)
			if (o.tr.route[k].member_maj != pmaj ||
			    o.tr.route[k].member_min != pmin || !pmaj)
				fail(&r, "md", "spin_route names %u:%u, spin/p2p %u:%u",
				     o.tr.route[k].member_maj, o.tr.route[k].member_min, pmaj,
				     pmin);
	}
	trace_free(&o.tr);
	fs_teardown(&md);
	if (run("mdadm --stop " MD_DEV " >/dev/console 2>&1"))
		fail(&r, "md", "mdadm --stop failed");
	snprintf(cmd, sizeof(cmd), "mdadm --zero-superblock %s /dev/%s >/dev/null 2>&1", local,
		 t->disk);
	run(cmd);
	res_result(&r, "md RAID-1 of %s and the tcp disk: reads right, reason queue, member %u:%u",
		   local, pmaj, pmin);
}

/* The state of the host's controller of @t: "live", "resetting", "connecting", ... */
static void ctrl_state(struct transport *t, char *state, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/class/nvme/%s/state", t->ctrl);
	if (spin_read_file(path, state, len))
		snprintf(state, len, "gone");
}

/* Takes the target of @t away (@down) or brings it back. */
static int outage_set(struct transport *t, int down)
{
	char path[PATH_MAX], sub[PATH_MAX];

	snprintf(path, sizeof(path), NVMET "/ports/%d/subsystems/%s", t->port, t->nqn);
	snprintf(sub, sizeof(sub), NVMET "/subsystems/%s", t->nqn);
	if (down)
		return unlink(path) ? -errno : 0;
	return symlink(sub, path) ? -errno : 0;
}

#define OUT_BUF (4 * MiB)
#define OUT_LEN MiB

/* What the reader and the writer of an outage count, in memory shared with them. */
struct outage_counts {
	int phase;		/* 0 before, 1 target away, 2 back, 3 stop */
	int read_ok[3], read_err, read_bad, write_ok[3], write_err;
	char bad[320];
};

/* Reads into GPU memory (@g) until told to stop, each checked from the host side. */
static void outage_reader(struct router_fs *fs, uint8_t *g, struct outage_counts *c)
{
	int fd = open(fs->base.path, O_RDONLY);
	char why[256];

	for (int i = 0; fd >= 0 && __atomic_load_n(&c->phase, __ATOMIC_RELAXED) < 3; i++) {
		off_t off = (off_t)(i * 257 % (SMALL_LEN / PG - OUT_LEN / PG)) * PG;
		int phase = __atomic_load_n(&c->phase, __ATOMIC_RELAXED);
		ssize_t n;

		posix_fadvise(fd, off, OUT_LEN, POSIX_FADV_DONTNEED);
		n = pread(fd, g, OUT_LEN, off);
		if (n < 0) {
			c->read_err++;
			continue;
		}
		if (spin_gpu_check(gpu, g, n, fs->base.seed, off, why, sizeof(why))) {
			if (!c->read_bad++)
				snprintf(c->bad, sizeof(c->bad), "%zd B at %lld: %s", n,
					 (long long)off, why);
			continue;
		}
		c->read_ok[phase > 2 ? 2 : phase]++;
	}
	_exit(fd < 0);
}

/* Writes from GPU memory (@g) to a file of its own until told to stop, with fsync. */
static void outage_writer(struct router_fs *fs, uint8_t *g, struct outage_counts *c)
{
	char path[PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/away.dat", fs->base.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (int i = 0; fd >= 0 && __atomic_load_n(&c->phase, __ATOMIC_RELAXED) < 3; i++) {
		int phase = __atomic_load_n(&c->phase, __ATOMIC_RELAXED);

		if (pwrite(fd, g, OUT_LEN, (off_t)(i % 8) * OUT_LEN) != (ssize_t)OUT_LEN ||
		    fsync(fd))
			c->write_err++;
		else
			c->write_ok[phase > 2 ? 2 : phase]++;
	}
	_exit(fd < 0);
}

/*
 * The target goes away under routed reads and writes and comes back: the
 * controller reconnects, the I/O held meanwhile completes or fails cleanly
 * (never wrong bytes), nothing hangs, reads and writes go on afterwards, the
 * GPU memory they used goes back to its pool, and the filesystem checks clean.
 */
static void target_outage(struct transport *t, int xfs)
{
	struct router_fs fs = { .base = { .name = "away", .serial = t->nqn,
					  .dir = "/mnt/rm-away", .seed = 84 } };
	int buf = -1, away = 0, ret;
	char state[32] = "", cmd[256], what[64];
	struct outage_counts *c;
	long long avail0, avail1;
	pid_t pid[2] = { -1, -1 };
	struct res r = { 0 };
	uint8_t *g = MAP_FAILED;
	char path[PATH_MAX + 32];

	fs.base.type = xfs ? "xfs" : "ext4";
	fs.base.mkfs = xfs ? SPIN_MKFS_XFS : SPIN_MKFS_EXT4;
	snprintf(what, sizeof(what), "%s: port removed under I/O on %s", t->name,
		 xfs ? "xfs" : "ext4");
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED) {
		ksft_test_result_fail("%s: %s\n", what, strerror(errno));
		return;
	}
	memset(c, 0, sizeof(*c));
	fs_setup(&fs, SMALL_LEN);
	snprintf(path, sizeof(path), "%s/p2pmem/available", gpu);
	avail0 = spin_read_ll(path);
	buf = spin_heap_alloc(spin_heap_open(gpu), OUT_BUF, O_RDWR | O_CLOEXEC, 0);
	if (buf >= 0)
		g = mmap(NULL, OUT_BUF, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (g == MAP_FAILED || spin_gpu_fill(gpu, g + OUT_LEN, OUT_LEN, 85, 0)) {
		fail(&r, what, "GPU memory: %s", strerror(errno));
		goto out;
	}
	pid[0] = fork();
	if (pid[0] == 0)
		outage_reader(&fs, g, c);
	pid[1] = fork();
	if (pid[1] == 0)
		outage_writer(&fs, g + OUT_LEN, c);
	sleep(2);
	__atomic_store_n(&c->phase, 1, __ATOMIC_RELAXED);
	ret = outage_set(t, 1);
	if (ret)
		fail(&r, what, "taking the target away: %s", strerror(-ret));
	for (int i = 0; i < 40; i++) {
		usleep(100000);
		ctrl_state(t, state, sizeof(state));
		away |= strcmp(state, "live") != 0;
	}
	ret = outage_set(t, 0);
	if (ret)
		fail(&r, what, "bringing the target back: %s", strerror(-ret));
	for (int i = 0; i < 300 && (ctrl_state(t, state, sizeof(state)), strcmp(state, "live"));
	     i++)
		usleep(100000);
	if (strcmp(state, "live"))
		fail(&r, what, "the controller is %s 30 s after the target came back", state);
	if (!away)
		fail(&r, what, "the controller never left state live: the target was never missed");
	__atomic_store_n(&c->phase, 2, __ATOMIC_RELAXED);
	sleep(3);
	__atomic_store_n(&c->phase, 3, __ATOMIC_RELAXED);
	for (int k = 0; k < 2; k++) {
		int status = 0, waited = 0;

		while (waited < 1200 && waitpid(pid[k], &status, WNOHANG) == 0) {
			usleep(100000);
			waited++;
		}
		if (waited == 1200) {
			/* Killed, it may still wait for its I/O: nothing more can be checked. */
			kill(pid[k], SIGKILL);
			ksft_test_result_fail("%s: the %s hangs (the controller is %s)\n", what,
					      k ? "writer" : "reader", state);
			ksft_exit_fail_msg("remote disk %s hangs\n", t->disk);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fail(&r, what, "the %s failed", k ? "writer" : "reader");
		}
	}
	if (c->read_bad)
		fail(&r, what, "%d reads put wrong bytes in GPU memory, first %s", c->read_bad,
		     c->bad);
	if (!c->read_ok[2] || !c->write_ok[2])
		fail(&r, what, "after the target came back: %d reads and %d writes right",
		     c->read_ok[2], c->write_ok[2]);
out:
	if (g != MAP_FAILED)
		munmap(g, OUT_BUF);
	if (buf >= 0)
		close(buf);
	avail1 = spin_read_ll(path);
	if (avail0 != avail1)
		fail(&r, what, "%lld bytes of GPU memory not back in the pool", avail0 - avail1);
	fs_teardown(&fs);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/console 2>&1",
		 xfs ? "xfs_repair -n" : "e2fsck -fn", fs.base.dev);
	if (run(cmd))
		fail(&r, what, "%s finds the filesystem damaged", cmd);
	res_result(&r, "%s: %d/%d/%d reads, %d/%d/%d writes right before/away/back, %d/%d failed",
		   what, c->read_ok[0], c->read_ok[1], c->read_ok[2], c->write_ok[0],
		   c->write_ok[1], c->write_ok[2], c->read_err, c->write_err);
	munmap(c, sizeof(*c));
}

/* A transport end to end; the results it owes are always given. */
static void transport_tests(struct transport *t)
{
	char why[256] = "";
	int ret = 0;

	if (!strcmp(t->trtype, "rdma"))
		ret = rxe_up(why, sizeof(why));
	if (!ret)
		ret = target_up(t, why, sizeof(why));
	if (!ret)
		ret = host_connect(t, why, sizeof(why));
	ksft_test_result(!ret, "%s: target and host connected: disk %s\n", t->name,
			 ret ? why : t->disk);
	if (ret) {
		int owed = 2 * FS_RESULTS + 1 + (t->outage != OUTAGE_NONE) * OUTAGES +
			   !strcmp(t->name, "tcp");

		for (int i = 0; i < owed; i++)
			ksft_test_result_fail("%s: not run: no remote disk\n", t->name);
	} else {
		fs_tests(t);
		if (t->outage != OUTAGE_NONE) {
			target_outage(t, 0);
			target_outage(t, 1);
		}
		if (!strcmp(t->name, "tcp"))
			mixed_raid1(t);
	}
	ret = host_disconnect(t);
	target_down(t);
	ksft_test_result(!ret, "%s: disconnected, the disk gone, the target taken down%s (%s)\n",
			 t->name, strcmp(t->trtype, "rdma") ? "" : " (its RDMA port stays)",
			 ret ? strerror(-ret) : "ok");
}

int main(void)
{
	struct stat st;

	ksft_print_header();
	ksft_set_plan(RESULTS);
	router_init();
	snprintf(gpu_bdf, sizeof(gpu_bdf), "%s", strrchr(gpu, '/') + 1);
	if (spin_nvme_blockdev(SPIN_NVME2_SERIAL, backing, sizeof(backing)))
		SPIN_SKIP_MISSING("no block device with serial %s", SPIN_NVME2_SERIAL);
	if (stat(NVMET, &st) && mount("none", "/sys/kernel/config", "configfs", 0, NULL))
		ksft_exit_fail_msg("configfs: %s\n", strerror(errno));
	if (stat(NVMET, &st))
		ksft_exit_fail_msg(NVMET ": %s (CONFIG_NVME_TARGET)\n", strerror(errno));
	if (run(IP " link set lo up"))
		ksft_exit_fail_msg("cannot bring the loopback device up\n");
	for (size_t i = 0; i < ARRAY_SIZE(transports); i++)
		transport_tests(&transports[i]);
	router_took();
	ksft_finished();
}
