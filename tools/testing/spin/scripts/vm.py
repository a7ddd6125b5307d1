#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Boot the spin kernel in QEMU (TCG) with the test devices and collect results.

Machine: q35, 2 vCPUs, a PCIe switch (pcie-root-port -> x3130-upstream -> xio3130-downstream
ports) holding two file-backed NVMe controllers (serial spin-nvme0; spin-nvme1 with a 64 MiB
CMB) and an ivshmem-plain device whose memory is a host file under /dev/shm: the stand-in
GPU BAR; and a small (8 MiB) second ivshmem-plain device that p2pdma_bar registers but leaves
unpublished (p2pdma_bar.defer_below_mib=16), a provider whose memory is published late
(unbind_test). p2pdma needs the switch: devices on the flat q35 bus do not share an upstream bridge.
Outside the switch, on the root bus: NVMe spin-nvme2 (P2P-capable queue, but no P2P path to
the GPU) and virtio-blk spin-vblk (a queue without P2P): the cases where spin must fall back.
Two NVMe subsystems of two controllers each share a namespace (multipath heads): spin-mpnear
with both controllers behind the switch, spin-mpfar with one behind it and one on the root bus.

Serial ports: ttyS0 is the console (console.log), ttyS1 the results channel (results.log),
ttyS2 the GPU agent: a host-side helper that reads and writes the stand-in GPU memory from the
host, so guest tests verify what a GPU would see (protocol in gpu_agent.py).

A watchdog ends a guest that does not finish in time; the run then fails with that reason.
A boot stall (nothing new on the console for SPIN_VM_BOOT_STALL seconds, default 300, before
the guest's first result) is different: QEMU's vCPU registers are saved in stall-N.txt, the
console in console.stall-N.log, and the guest boots once more. So does a QEMU that dies by a
signal before the guest's first result (an emulator crash: a guest that panics makes QEMU exit
normally): its output is kept in qemu.crash-N.log, the console in console.crash-N.log.
"""

import argparse
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import gpu_agent  # noqa: E402
import results as results_mod  # noqa: E402

BUILD = os.environ.get("BUILD", os.path.join(os.path.dirname(__file__), "../../../../build"))
# A normal boot of the debug kernel is silent for at most ~35 s of guest time (ACPI), about
# 60 s of the host's; a production-kernel boot has been seen to stop for good 1.7 s in.
BOOT_STALL = int(os.environ.get("SPIN_VM_BOOT_STALL", 300))
BOOTS = 2
KOBJ = os.environ.get("KOBJ", os.path.join(BUILD, "obj"))


def log(msg):
    print(f"[vm] {msg}", flush=True)


def qemu_args(a, out, shm, sock, qmp):
    throttle = ""
    if a.bps:
        throttle += f",throttling.bps-total={a.bps}"
    if a.iops:
        throttle += f",throttling.iops-total={a.iops}"
    # p2pdma_bar.defer_below_mib: the small second ivshmem device below is registered in
    # probe but published only later (its debugfs switch), as NVIDIA's UVM publishes BAR1.
    cmdline = ["console=ttyS0", "panic=-1", "oops=panic", "loglevel=6",
               f"spintest.mode={a.mode}", f"kunit.filter_glob={a.kunit_glob}",
               "p2pdma_bar.defer_below_mib=16"]
    if a.bench:
        cmdline.append(f"spintest.bench={a.bench}")
    if a.append:
        cmdline.append(a.append)
    # --icount N: guest time counts instructions (2^N ns each) while a vCPU runs, so the
    # guest's CPU work takes the same guest time however busy the host is; while every vCPU
    # sleeps (waiting for a drive, whose throttle runs on QEMU_CLOCK_REALTIME) it is advanced
    # from the host's clock (QEMU's default sleep=on), but not one for one: the throttled
    # drive measured faster in guest time (Documentation/spin/measurements.rst). icount needs
    # single-threaded TCG: the two vCPUs take turns on one host thread.
    accel = ["-accel", "tcg"]
    if a.icount is not None:
        accel = ["-accel", "tcg,thread=single", "-icount", f"shift={a.icount},align=off"]
    # la57=off: with 5-level paging, TCG boots of the debug kernel often (4 of 7) hit a KASAN
    # wild-memory-access in rcu_is_watching() inside identify_boot_cpu(), at an address in the
    # 5-level direct map; its taint turns lockdep off for the whole run. 0 of 7 with 4 levels.
    args = [
        "qemu-system-x86_64", *accel, "-machine", "q35", "-cpu", "max,la57=off",
        "-smp", "2", "-m", f"{a.mem_mib}M", "-display", "none", "-monitor", "none",
        "-no-reboot", "-nodefaults", "-qmp", f"unix:{qmp},server=on,wait=off",
        # Native PCIe hotplug, not ACPI's: with ACPI hotplug QEMU emits AML for every slot
        # of every bridge, and acpi_init() took 83 s of a 170 s boot of the debug kernel.
        # The tests that remove and rescan a device use sysfs, not hotplug.
        "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
        "-kernel", a.kernel, "-initrd", a.initrd, "-append", " ".join(cmdline),
        "-serial", f"file:{out}/console.log",
        "-serial", f"file:{out}/results.log",
        "-chardev", f"socket,id=agent,path={sock}",
        "-serial", "chardev:agent",
        # The PCIe switch: every device of the rig on its own downstream port.
        "-device", "pcie-root-port,id=rp0,bus=pcie.0,chassis=1,slot=1",
        "-device", "x3130-upstream,id=up0,bus=rp0",
        "-device", "xio3130-downstream,id=dp0,bus=up0,chassis=2,slot=0",
        "-device", "xio3130-downstream,id=dp1,bus=up0,chassis=3,slot=1",
        "-device", "xio3130-downstream,id=dp2,bus=up0,chassis=4,slot=2",
        "-device", "xio3130-downstream,id=dp3,bus=up0,chassis=5,slot=3",
        "-drive", f"file={out}/nvme0.img,if=none,id=nvm0,format=raw,cache=none,aio=threads"
        + throttle,
        "-device", "nvme,serial=spin-nvme0,drive=nvm0,bus=dp0",
        "-drive", f"file={out}/nvme1.img,if=none,id=nvm1,format=raw,cache=none,aio=threads"
        + throttle,
        "-device", "nvme,serial=spin-nvme1,drive=nvm1,bus=dp1,cmb_size_mb=64",
        # Outside the switch, on the root bus: an NVMe that p2pdma_distance() refuses, and a
        # virtio disk whose queue lacks BLK_FEAT_PCI_P2PDMA (the router's fallbacks).
        "-drive", f"file={out}/nvme2.img,if=none,id=nvm2,format=raw,cache=none,aio=threads"
        + throttle,
        "-device", "nvme,serial=spin-nvme2,drive=nvm2,bus=pcie.0",
        "-drive", f"file={out}/vblk.img,if=none,id=vblk,format=raw,cache=none,aio=threads"
        + throttle,
        "-device", "virtio-blk-pci,serial=spin-vblk,drive=vblk,bus=pcie.0",
        "-object", f"memory-backend-file,id=gpumem,share=on,mem-path={shm},"
                   f"size={a.gpu_mib}M",
        "-device", "ivshmem-plain,memdev=gpumem,bus=dp2",
        # A second, small provider behind the switch whose memory is published late.
        "-object", "memory-backend-ram,id=latemem,share=on,size=8M",
        "-device", "ivshmem-plain,memdev=latemem,bus=dp3",
        # NVMe multipath: two subsystems of two controllers (the same serial, as a
        # dual-ported drive has) sharing one namespace; the kernel makes a head disk over
        # the two paths. spin-mpnear has both controllers behind the switch (P2P),
        # spin-mpfar one behind it and one on the root bus (fallback distance).
        "-device", "xio3130-downstream,id=dp4,bus=up0,chassis=6,slot=4",
        "-device", "xio3130-downstream,id=dp5,bus=up0,chassis=7,slot=5",
        "-device", "xio3130-downstream,id=dp6,bus=up0,chassis=8,slot=6",
        "-device", "nvme-subsys,id=mpnear,nqn=spin-mpnear",
        "-device", "nvme,id=mpnear0,serial=spin-mpnear,subsys=mpnear,bus=dp4",
        "-device", "nvme,id=mpnear1,serial=spin-mpnear,subsys=mpnear,bus=dp5",
        "-drive", f"file={out}/mpnear.img,if=none,id=mpn,format=raw,cache=none,aio=threads",
        "-device", "nvme-ns,drive=mpn,nsid=1,shared=on,bus=mpnear0",
        "-device", "nvme-subsys,id=mpfar,nqn=spin-mpfar",
        "-device", "nvme,id=mpfar0,serial=spin-mpfar,subsys=mpfar,bus=dp6",
        "-device", "nvme,id=mpfar1,serial=spin-mpfar,subsys=mpfar,bus=pcie.0",
        "-drive", f"file={out}/mpfar.img,if=none,id=mpf,format=raw,cache=none,aio=threads",
        "-device", "nvme-ns,drive=mpf,nsid=1,shared=on,bus=mpfar0",
    ]
    # --plugin: a TCG plugin, such as insn_count (scripts/insn_prof.py).
    if a.plugin:
        args += ["-plugin", a.plugin]
    return args


def tail(path, stop, printer):
    """Follow PATH until STOP is set, handing every complete line to PRINTER."""
    while not os.path.exists(path) and not stop.is_set():
        time.sleep(0.1)
    buf = ""
    with open(path, errors="replace") as f:
        while True:
            chunk = f.read()
            if chunk:
                buf += chunk
                *lines, buf = buf.split("\n")
                for line in lines:
                    printer(line.rstrip("\r"))
            elif stop.is_set():
                break
            else:
                time.sleep(0.2)


def qmp_dump(qmp, path):
    """Saves every vCPU's registers, from QEMU's monitor at QMP, in PATH."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(10)
            c.connect(qmp)
            f = c.makefile("rw")
            f.readline()
            text = []
            for cmd in ('{"execute": "qmp_capabilities"}',
                        '{"execute": "human-monitor-command", '
                        '"arguments": {"command-line": "info cpus"}}',
                        '{"execute": "human-monitor-command", '
                        '"arguments": {"command-line": "info registers -a"}}'):
                f.write(cmd + "\n")
                f.flush()
                reply = json.loads(f.readline())
                if "capabilities" not in cmd:
                    text.append(str(reply.get("return", reply)))
        with open(path, "w") as out:
            out.write("\n".join(text))
    except (OSError, ValueError) as e:
        with open(path, "w") as out:
            out.write(f"no registers: {e}\n")


def watch_boot(qemu, out, attempt, qmp, stalled, done):
    """Kills QEMU if its console and results stop growing for BOOT_STALL s before the first
    result: a boot stall (see the module's doc)."""
    paths = [os.path.join(out, f) for f in ("console.log", "results.log")]
    size, since = -1, time.time()
    while not done.wait(5):
        sizes = [os.path.getsize(f) if os.path.exists(f) else 0 for f in paths]
        if sizes[1] > 0:
            return
        if sum(sizes) != size:
            size, since = sum(sizes), time.time()
        elif time.time() - since > BOOT_STALL:
            qmp_dump(qmp, os.path.join(out, f"stall-{attempt}.txt"))
            stalled.set()
            qemu.kill()
            return


def boot(a, out, attempt, start, timeout):
    """Boots the guest once with a fresh GPU agent and disks; returns QEMU's output, its exit
    status and whether the watchdog fired or the boot stalled."""
    for f in ("console.log", "results.log"):
        path = os.path.join(out, f)
        if os.path.exists(path):
            if attempt > 1 and f == "console.log":
                os.replace(path, os.path.join(out, f"console.stall-{attempt - 1}.log"))
            else:
                os.unlink(path)
    for name, mib in (("nvme0", a.nvme_mib), ("nvme1", a.nvme_mib), ("nvme2", 512),
                      ("vblk", 512), ("mpnear", 512), ("mpfar", 512)):
        with open(os.path.join(out, f"{name}.img"), "wb") as f:
            f.truncate(mib << 20)
    shm = f"/dev/shm/spin-gpu-{os.getpid()}"
    sock = os.path.join(out, "agent.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock)
    srv.listen(1)
    agent = gpu_agent.Agent(shm, a.gpu_mib << 20, os.path.join(out, "agent.log"))
    threading.Thread(target=agent.serve, args=(srv,), daemon=True).start()

    qmp = os.path.join(out, "qmp.sock")
    if os.path.exists(qmp):
        os.unlink(qmp)
    args = qemu_args(a, out, shm, sock, qmp)
    with open(os.path.join(out, "qemu.cmd"), "w") as f:
        f.write(" ".join(args) + "\n")
    log(f"booting {os.path.relpath(a.kernel)} under TCG (mode {a.mode}, watchdog {timeout:.0f} s, "
        f"logs in {os.path.relpath(out)})")
    qemu = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    stop = threading.Event()
    # Every results line with the host's seconds since boot and since the line before: where
    # a slow run spends its time, per result (results.times).
    times = open(os.path.join(out, "results.times"), "a" if attempt > 1 else "w")
    last = [time.time()]

    def show(line):
        now = time.time()
        times.write(f"{now - start:8.1f} {now - last[0]:7.1f} {line}\n")
        times.flush()
        last[0] = now
        if a.mode in ("demo", "bench"):
            if not line.startswith("@@ "):
                print(line, flush=True)
        elif line.startswith("@@ tap ") or line.startswith("@@ kunit "):
            log(f"{time.time() - start:6.1f}s {line[3:]}")

    t = threading.Thread(target=tail, args=(os.path.join(out, "results.log"), stop, show))
    t.start()
    stalled, done = threading.Event(), threading.Event()
    w = threading.Thread(target=watch_boot, args=(qemu, out, attempt, qmp, stalled, done))
    w.start()
    timed_out = False
    try:
        qemu_out, _ = qemu.communicate(timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        timed_out = True
        qemu.kill()
        qemu_out, _ = qemu.communicate()
    done.set()
    w.join()
    stop.set()
    t.join()
    times.close()
    agent.close()
    srv.close()
    for f in (shm, sock, qmp):
        if os.path.exists(f):
            os.unlink(f)
    return qemu_out, qemu.returncode, timed_out, stalled.is_set()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["test", "demo", "selfcheck", "shell", "bench"],
                   default="test")
    p.add_argument("--bench", default="", help="with --mode bench: a program in /spin/bench")
    p.add_argument("--kernel", default=os.path.join(KOBJ, "arch/x86/boot/bzImage"))
    p.add_argument("--initrd", default=os.path.join(BUILD, "initramfs.cpio"))
    p.add_argument("--out", default=None, help="run directory (default build/vm/<mode>)")
    p.add_argument("--timeout", type=int, default=int(os.environ.get("SPIN_VM_TIMEOUT", 1800)))
    p.add_argument("--bps", type=int, default=int(os.environ.get("SPIN_VM_BPS", 0)),
                   help="QEMU throttling.bps-total on both NVMe drives (0: off)")
    p.add_argument("--iops", type=int, default=int(os.environ.get("SPIN_VM_IOPS", 0)),
                   help="QEMU throttling.iops-total on both NVMe drives (0: off)")
    icount = os.environ.get("SPIN_VM_ICOUNT", "")
    p.add_argument("--icount", type=int, default=int(icount) if icount else None,
                   help="QEMU -icount shift: guest CPU time counted in instructions")
    p.add_argument("--plugin", default=os.environ.get("SPIN_VM_PLUGIN"),
                   help="QEMU -plugin argument: a TCG plugin and its options")
    p.add_argument("--gpu-mib", type=int, default=int(os.environ.get("SPIN_GPU_MIB", 256)))
    p.add_argument("--nvme-mib", type=int, default=1024)
    p.add_argument("--mem-mib", type=int, default=2048)
    p.add_argument("--kunit-glob", default=None)
    p.add_argument("--append", default="", help="extra kernel command line")
    p.add_argument("--summary", default=None, help="write the parsed result as JSON here")
    a = p.parse_args()
    if a.kunit_glob is None:
        a.kunit_glob = "*spin_*" if a.mode == "selfcheck" else "rust_spin_*"
    out = os.path.abspath(a.out or os.path.join(BUILD, "vm", a.mode))
    os.makedirs(out, exist_ok=True)
    for f in (a.kernel, a.initrd):
        if not os.path.exists(f):
            sys.exit(f"[vm] ERROR: {f} missing: run 'make initramfs' first")

    # One build or guest at a time (see with-lock.sh); nested under it, the lock is held.
    if not os.environ.get("SPIN_LOCKED"):
        lock = open(os.path.join(BUILD, ".workshop.lock"), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("the kernel tree is busy (another build or guest); waiting")
            fcntl.flock(lock, fcntl.LOCK_EX)

    start = time.time()
    for attempt in range(1, BOOTS + 1):
        left = a.timeout - (time.time() - start)
        qemu_out, rc, timed_out, stalled = boot(a, out, attempt, start, left)
        results = os.path.join(out, "results.log")
        crashed = (rc is not None and rc < 0 and not timed_out and not stalled and
                   (not os.path.exists(results) or os.path.getsize(results) == 0))
        if not (stalled or crashed) or attempt == BOOTS:
            break
        if crashed:
            with open(os.path.join(out, f"qemu.crash-{attempt}.log"), "w") as f:
                f.write(qemu_out)
            if os.path.exists(os.path.join(out, "console.log")):
                os.replace(os.path.join(out, "console.log"),
                           os.path.join(out, f"console.crash-{attempt}.log"))
            log(f"EMULATOR CRASH: QEMU died by signal {-rc} before the guest's first result "
                f"(its output in qemu.crash-{attempt}.log); booting once more")
            continue
        log(f"BOOT STALL: nothing new on the console for {BOOT_STALL} s before the first "
            f"result (registers in stall-{attempt}.txt); booting once more")
    elapsed = time.time() - start
    if qemu_out.strip():
        with open(os.path.join(out, "qemu.log"), "w") as f:
            f.write(qemu_out)
    log(f"guest ended after {elapsed:.0f} s (qemu exit {rc}"
        f"{', killed by the watchdog' if timed_out else ''}"
        f"{', the boot stalled' if stalled else ''})")

    res = results_mod.parse(os.path.join(out, "results.log"),
                            os.path.join(out, "console.log"),
                            "demo" if a.mode == "bench" else a.mode,
                            timed_out=timed_out, timeout=a.timeout, stalled=stalled)
    res.report()
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(res.as_dict(), f, indent=1)
    sys.exit(0 if res.ok() else 1)


if __name__ == "__main__":
    main()
