// SPDX-License-Identifier: GPL-2.0

#include <linux/pci-p2pdma.h>

__rust_helper int rust_helper_pci_p2pdma_distance(struct pci_dev *provider,
						  struct device *client, bool verbose)
{
	return pci_p2pdma_distance(provider, client, verbose);
}
