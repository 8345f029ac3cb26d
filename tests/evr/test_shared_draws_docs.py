"""The documentation of the two directions says what the runner does (issue 19, item 4): one set of draws serves
both directions and every candidate, and the union bound over the directions needs no independence. The key layout
itself is tested in tests/engine/test_core.py (test_runner_key_layout_one_chunk_key_for_both_directions_and_every_
candidate)."""

import os
import re

import mcacct.statistics.confidence as bounds
from mcacct.composition import compose_mc_with_pld

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# phrases that describe the directions as drawn independently
STALE = re.compile(r"independent\s+keys|independent\s+samples|\(independent\)\s+samples")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_directions_are_documented_as_shared_draws_with_a_union_bound():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = _flat(f.read())
    both = readme[readme.index("**Both directions.**"):readme.index("**Estimation.**")]
    docs = {"README": both, "evr.bounds": _flat(bounds.__doc__),
            "compose_mc_with_pld": _flat(compose_mc_with_pld.__doc__)}
    for name, text in docs.items():
        assert not STALE.search(text), (name, STALE.search(text).group(0))
        assert "docs/soundness.md" in text and "Shared draws" in text, name
        assert "fold_in" in text, name  # the layout the runner uses is named
        assert re.search(r"no independence|needs no independence|whatever the dependence", text), name
    with open(os.path.join(ROOT, "docs", "soundness.md")) as f:
        assert "## Shared draws" in f.read()  # the section the three refer to
