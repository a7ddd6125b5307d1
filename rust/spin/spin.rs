// SPDX-License-Identifier: GPL-2.0

//! spin: file reads into GPU memory, routed between the page cache and P2P DMA.
//!
//! An application maps GPU memory (a dma-buf backed by PCI p2pdma pages) and calls plain
//! `pread()`. For every request spin reads the page-cache residency of the range, asks the
//! decision core ([`sched`]) which runs to copy out of the page cache and which to send to the
//! device as peer-to-peer DMA, and executes that schedule.
//!
//! This file holds the module itself. The pieces, one job per file:
//!
//! - [`sched`]: the pure decision core (cost model, schedulers). It has no kernel dependency:
//!   the same source is compiled into the host crate under `tools/testing/spin/core`.
//! - `exporter`: GPU memory as dma-bufs, one DMA-BUF heap `/dev/dma_heap/p2p-<bdf>` per PCI
//!   device with published p2pdma memory.
//! - `router`: buffered reads into that memory, split per request between page-cache copies and
//!   P2P direct I/O; `/sys/kernel/spin` and `/sys/block/<disk>/spin`.
//!
//! See `Documentation/spin/index.rst`.

mod exporter;
mod router;
pub mod sched;

#[cfg(CONFIG_SPIN_KUNIT_TEST)]
mod sched_kunit;

use kernel::prelude::*;

module! {
    type: Spin,
    name: "spin",
    authors: ["spin developers"],
    description: "Route file reads into GPU memory via the page cache or P2P DMA",
    license: "GPL",
}

/// The spin module: owns the subsystem's global state.
struct Spin {
    _sysfs: router::Sysfs,
    _router: router::Router,
    _exporter: exporter::Exporter,
}

impl kernel::Module for Spin {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!(
            "loaded (built-in: {}, page size {} bytes)\n",
            !cfg!(MODULE),
            kernel::page::PAGE_SIZE
        );
        let sysfs = router::init()?;
        Ok(Spin {
            _sysfs: sysfs,
            _router: router::Router::new()?,
            _exporter: exporter::Exporter::new()?,
        })
    }
}

impl Drop for Spin {
    fn drop(&mut self) {
        pr_info!("spin: unloaded\n");
    }
}

/// Fails on purpose. The default test run selects `kunit.filter_glob=rust_spin_*` and so never
/// runs it; `make test-selfcheck` selects `*spin_*` to prove that a failing KUnit case turns the
/// run red.
#[cfg(CONFIG_SPIN_KUNIT_TEST)]
#[kunit_tests(spin_selfcheck)]
mod selfcheck {
    #[test]
    fn deliberate_failure() {
        assert_eq!(core::hint::black_box(1 + 1), 3);
    }
}
