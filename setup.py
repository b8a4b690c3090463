"""Builds the optional compiled kernel of the share-group SimpleAssignor; everything else is in pyproject.toml.

* ``pip install -e .`` (``make install``, ``make test``) compiles it in place when a C compiler and the Python
  headers are there; ``optional=True`` lets the install succeed without them.
* A distributable wheel (``make dist``, ``pip wheel .``) stays pure Python (``py3-none-any``), so the same file
  installs on any Databricks runtime or cluster image; set ``OFFSETS_AUDIT_BUILD_KERNEL=1`` to build a
  platform wheel with the kernel on (or for) the cluster's own platform.

Without the kernel (and from the ``--py-files`` zip) ``assignors.simple`` runs its pure-Python builders: the
same results, about 15 times slower on 1,000-member share groups.
"""

import os
import sys

from setuptools import Extension, setup

_KERNEL = Extension(
    "offsets_audit.assignors._simple_kernel",
    ["src/offsets_audit/assignors/_simple_kernel.c"],
    extra_compile_args=["-O2"],
    optional=True,
)

_distributable_wheel = "bdist_wheel" in sys.argv and os.environ.get("OFFSETS_AUDIT_BUILD_KERNEL") != "1"

setup(ext_modules=[] if _distributable_wheel else [_KERNEL])
