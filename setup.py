"""The compiled part of the package: the Fetch records decoder (``dataplane.protocol._columns``), the
REST proxy's produce encoder (``dataplane.protocol._encode``), and its produce request splitter and parser
(``controlplane.kafkarest._split``, ``controlplane.kafkarest._parse``).

Everything else is in pyproject.toml; setuptools reads ``ext_modules`` only from here. ``pip install -e .``
builds it with the machine's C compiler; without it (a zip of .py files shipped to Spark executors) the
Spark source falls back to librdkafka.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(ext_modules=cythonize(
    [Extension("dataplane.protocol._columns", ["dataplane/protocol/_columns.pyx"], extra_compile_args=["-O2"]),
     Extension("dataplane.protocol._encode", ["dataplane/protocol/_encode.pyx"], extra_compile_args=["-O2"]),
     Extension("controlplane.kafkarest._split", ["controlplane/kafkarest/_split.pyx"], extra_compile_args=["-O2"]),
     Extension("controlplane.kafkarest._parse", ["controlplane/kafkarest/_parse.pyx"], extra_compile_args=["-O2"])],
    compiler_directives={"language_level": "3"}))
