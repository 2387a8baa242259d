"""junit.xml for one run: one test case per checker, failed when it found anomalies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from xml.etree import ElementTree


def render_junit(results: Mapping[str, Any], *, suite: str) -> str:
    checkers = results.get("checkers", {})
    failures = sum(1 for c in checkers.values() if c.get("valid") is False)
    unknown = sum(1 for c in checkers.values() if c.get("valid") not in (True, False))
    root = ElementTree.Element(
        "testsuite",
        name=suite,
        tests=str(len(checkers)),
        failures=str(failures),
        errors=str(unknown),
    )
    for name, found in sorted(checkers.items()):
        case = ElementTree.SubElement(root, "testcase", classname=suite, name=name)
        counts = {k: v for k, v in found.get("counts", {}).items() if v}
        if found.get("valid") is False:
            failure = ElementTree.SubElement(case, "failure", message=", ".join(sorted(counts)))
            failure.text = json.dumps(
                {k: v[:5] for k, v in found.get("anomalies", {}).items() if v},
                default=str,
                indent=1,
            )
        elif found.get("valid") is not True:
            ElementTree.SubElement(case, "error", message="unknown: nothing could be checked")
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True)
