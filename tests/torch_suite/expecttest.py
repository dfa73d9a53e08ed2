# A stand-in for the `expecttest` package, which torch's test utilities import
# (torch/testing/_internal/common_utils.py) and Debian does not ship. Those utilities use two names of it:
# TestCase, the base of torch's TestCase, and ACCEPT, the flag that rewrites expected output in place.
# The backend tests never compare against inline expected text, so the base adds nothing to
# unittest.TestCase; a test that did call assertExpectedInline would fail with AttributeError, not pass.
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
