"""Hypothesis's profiles: exploring at random here, the same examples on every CI run.

`HYPOTHESIS_PROFILE=ci` (set by .ci/run) derandomizes the property tests, so a run of CI
can only fail for a change, not for a new random draw; a counterexample found while
developing is pinned with @example where the test is.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
