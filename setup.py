"""Builds the optional compiled kernel of the share-group SimpleAssignor; everything else is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and ``assignors.simple`` runs its pure-Python
builders (identical results, slower), as it does when imported from the ``--py-files`` zip on Spark executors.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "offsets_audit.assignors._simple_kernel",
            ["src/offsets_audit/assignors/_simple_kernel.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
