"""Offline stand-in for get-pip.py, used by ansible-test's pip bootstrap (no network on our machines).

It installs pip from the pip wheel that hack/run-tests.sh puts next to this file."""

import glob
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
wheels = sorted(glob.glob(os.path.join(here, "pip-*.whl")))
if not wheels:
    sys.exit("no pip wheel next to " + __file__)
sys.path.insert(0, wheels[-1])
from pip._internal.cli.main import main  # noqa: E402

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall", *args]))
