// SPDX-License-Identifier: GPL-2.0

//! Property tests of the GPU read-ahead partition's bookkeeping (rust/spin/sched/readahead.rs)
//! against a plain `VecDeque` model: the same entries are evicted in the same order, the page
//! limit is never exceeded, and rebuilding into a smaller ring keeps the newest entries.

use proptest::prelude::*;
use spin_core::sched::readahead::{Partition, Weighted};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Folio(u32, u64);

impl Weighted for Folio {
    fn pages(&self) -> u64 {
        self.1
    }
}

proptest! {
    #[test]
    fn partition_matches_fifo_model(
        limit in 1u64..64,
        slots_len in 1usize..64,
        ops in prop::collection::vec((0u8..4, 1u64..9), 0..400),
    ) {
        let mut slots = vec![Folio(0, 1); slots_len];
        let mut p = Partition::new(limit);
        let mut model: VecDeque<Folio> = VecDeque::new();
        for (id, (op, pages)) in ops.into_iter().enumerate() {
            let f = Folio(id as u32, pages);
            if op == 0 {
                prop_assert_eq!(p.pop(&slots), model.pop_front());
            } else {
                let mut got = Vec::new();
                let admitted = p.push(&mut slots, f, |e| got.push(e));
                let mut want = Vec::new();
                if pages <= limit {
                    while model.iter().map(|e| e.1).sum::<u64>() + pages > limit
                        || model.len() == slots_len
                    {
                        want.push(model.pop_front().unwrap());
                    }
                    model.push_back(f);
                }
                prop_assert_eq!(admitted, pages <= limit);
                prop_assert_eq!(got, want);
            }
            prop_assert!(p.pages() <= p.limit());
            prop_assert_eq!(p.pages(), model.iter().map(|e| e.1).sum::<u64>());
            prop_assert_eq!(p.len(), model.len());
        }
        // Rebuilding into a smaller ring (as the kernel does when the limit changes) keeps, in
        // order, what the same FIFO rule keeps; entries larger than the new limit are refused.
        let small = limit / 2 + 1;
        let mut new_slots = vec![Folio(0, 1); small as usize];
        let mut q = Partition::new(small);
        let mut want: VecDeque<Folio> = VecDeque::new();
        while let Some(e) = p.pop(&slots) {
            prop_assert_eq!(Some(e), model.pop_front());
            let admitted = q.push(&mut new_slots, e, |_| ());
            prop_assert_eq!(admitted, e.1 <= small);
            if admitted {
                while want.iter().map(|e| e.1).sum::<u64>() + e.1 > small
                    || want.len() == new_slots.len()
                {
                    want.pop_front();
                }
                want.push_back(e);
            }
        }
        prop_assert!(q.pages() <= small);
        let mut kept = Vec::new();
        while let Some(e) = q.pop(&new_slots) {
            kept.push(e);
        }
        prop_assert_eq!(kept, Vec::from(want));
    }
}
