"""Packaging for the DT-placement network-emulation testbed."""

import re

from setuptools import find_packages, setup

with open("common/version.py") as f:
    VERSION = re.search(r'^VERSION = "([^"]+)"', f.read(), re.M).group(1)

setup(
    name="dtnet-testbed",
    version=VERSION,
    description="Network-emulation testbed for distributed-training job placement research",
    packages=find_packages(include=["common*", "congestion*", "topo*", "controller*", "ina*", "jobs*", "workers*",
                                    "placement*", "sim*", "emulator*", "measure*", "backend*", "experiment*",
                                    "scheduling*", "vm*", "reproduce*"]),
    package_data={"ina": ["vectors.json"], "reproduce": ["configs/*.yaml"]},
    py_modules=["run_testbed"],
    entry_points={"console_scripts": ["dtnet-testbed = run_testbed:cli"]},
    python_requires=">=3.11",
    install_requires=["torch==2.13.0", "os-ken>=4.2", "networkx>=3.2", "numpy>=1.26", "scapy>=2.5",
                      "PyYAML>=6.0", "matplotlib>=3.7"],
    extras_require={"test": ["pytest>=8", "ruff>=0.5"]},
)
