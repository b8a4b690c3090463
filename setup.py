"""Builds the optional compiled kernels (the ``simple``, ``range`` and ``uniform`` assignors', the segment walk's and
the flat record decoder's);
the rest is in pyproject.toml.

* ``pip install -e .`` (``make install``, ``make test``) compiles them in place when a C compiler and the Python
  headers are there; ``optional=True`` lets the install succeed without them.
* A distributable wheel (``make dist``, ``pip wheel .``) stays pure Python (``py3-none-any``), so the same file
  installs on any Databricks runtime or cluster image; set ``OFFSETS_AUDIT_BUILD_KERNEL=1`` to build a
  platform wheel with the kernel on (or for) the cluster's own platform.

Without a kernel (and from the ``--py-files`` zip) each runs its pure-Python path: the same results, ``simple`` 15
times or more, ``range`` 3 to 5 times and ``uniform`` about 1.5 times slower on 1,000-member groups, reading
log segments about 5 times slower (``sources.segments``), and the job's decode of offset commits (without JSON
texts) 10-20 % slower (``codec.vectorised``).
"""

import os
import sys

from setuptools import Extension, setup

_KERNELS = [
    Extension(module, [f"src/{module.replace('.', '/')}.c"], extra_compile_args=["-O2"], optional=True)
    for module in ("offsets_audit.assignors._simple_kernel", "offsets_audit.assignors._range_kernel",
                   "offsets_audit.assignors.uniform._kernel", "offsets_audit.sources._segments_kernel",
                   "offsets_audit.codec._flat_kernel")
]

_distributable_wheel = "bdist_wheel" in sys.argv and os.environ.get("OFFSETS_AUDIT_BUILD_KERNEL") != "1"

setup(ext_modules=[] if _distributable_wheel else _KERNELS)
