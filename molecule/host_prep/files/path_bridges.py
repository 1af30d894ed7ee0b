"""Print the PCI addresses of the bridges upstream of the GPUs (class 03xx) and network/RDMA NICs
(class 02xx) in a sysfs tree: the parent directories of each device's resolved sysfs path. A test
probe independent of the collection's code."""

import os
import re
import sys

tree = sys.argv[1]
devices = os.path.join(tree, "sys/bus/pci/devices")
addr_re = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
bridges = set()
for addr in os.listdir(devices):
    with open(os.path.join(devices, addr, "class"), encoding="ascii") as f:
        cls = f.read().strip()
    if not (cls.startswith("0x03") or cls.startswith("0x02")):
        continue
    if os.path.exists(os.path.join(devices, addr, "physfn")):
        continue  # VFs sit under their PF
    path = os.path.realpath(os.path.join(devices, addr))
    bridges |= {part for part in path.split("/")[:-1] if addr_re.match(part)}
print("\n".join(sorted(bridges)))
