"""Filters the monitoring role installs the repository's rule files and runbooks with.

``site_alert_rules``: a rule file (dashboards/prometheus/*.yml) as this site runs it:
every alert's runbook link absolute, and the latency target of each trigger the
inventory overrides (monitoring_alert_latency_targets) put in place of the repository's,
with the histogram bucket the error ratio counts under. ``runbooks_html``:
docs/runbooks.md as a page Prometheus serves (a console template), one anchor per
alert. Unit tested in tests/deploy/test_site_filters.py.
"""

from __future__ import annotations

import html
import re

import yaml

from appliance.observability.alert_latency import BUCKETS_MS

TARGET_RECORD = "appliance:alert_latency_target_seconds"
RUNBOOK_PREFIX = "docs/runbooks.md#"


class TargetError(ValueError):
    """An override the histogram cannot count under."""


def _bucket_label(seconds: float) -> str:
    """The latency histogram's `le` for ``seconds``, as the appliance exports it."""
    millis = round(float(seconds) * 1000.0, 6)
    if millis not in BUCKETS_MS:
        raise TargetError(
            f"monitoring_alert_latency_targets: {seconds} s is not a bucket of the latency "
            f"histogram (seconds: {', '.join(f'{b / 1000:g}' for b in BUCKETS_MS)})")
    return repr(millis / 1000.0)


def site_alert_rules(text: str, runbook_base_url: str,
                     latency_targets: dict[str, float] | None = None) -> str:
    """The rule file ``text`` with absolute runbook links and the given trigger targets."""
    doc = yaml.safe_load(text) or {}
    overrides = dict(latency_targets or {})
    for group in doc.get("groups", []):
        for rule in group.get("rules", []):
            annotations = rule.get("annotations", {})
            link = annotations.get("runbook_url", "")
            if link.startswith(RUNBOOK_PREFIX):
                annotations["runbook_url"] = runbook_base_url + "#" + link[len(RUNBOOK_PREFIX):]
            trigger = rule.get("labels", {}).get("trigger")
            if rule.get("record") == TARGET_RECORD and trigger in overrides:
                seconds = float(overrides.pop(trigger))
                selector = rule["expr"].split(" * ", 1)[1]
                rule["expr"] = f"{seconds:g} * {selector}"
                rule["labels"]["le"] = _bucket_label(seconds)
    if overrides:
        raise TargetError(f"monitoring_alert_latency_targets: no trigger {sorted(overrides)} "
                          "in the rules")
    return yaml.safe_dump(doc, sort_keys=False, width=100)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading (the rules' runbook links use them)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbooks_html(markdown: str, title: str = "Runbooks") -> str:
    """The runbooks as one HTML page: headings with their anchors, code blocks kept as
    they are, the rest as paragraphs of plain text. Prometheus serves it as a console
    template, so nothing of the text is read as a template action."""
    out = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
           "</title></head><body>"]
    paragraph: list[str] = []
    code: list[str] | None = None

    def flush() -> None:
        if paragraph:
            out.append("<p>" + html.escape(" ".join(paragraph)) + "</p>")
            paragraph.clear()

    for line in markdown.splitlines():
        if code is not None:
            if line.startswith("```"):
                out.append("<pre>" + html.escape("\n".join(code)) + "</pre>")
                code = None
            else:
                code.append(line)
        elif line.startswith("```"):
            flush()
            code = []
        elif line.startswith("#"):
            flush()
            level = min(len(line) - len(line.lstrip("#")), 6)
            text = line.lstrip("#").strip()
            out.append(f"<h{level} id=\"{_anchor(text)}\">{html.escape(text)}</h{level}>")
        elif not line.strip():
            flush()
        else:
            paragraph.append(line.strip())
    flush()
    out.append("</body></html>")
    # Go templates: {{ in the text would be read as an action.
    return "\n".join(out).replace("{{", "{{ \"{{\" }}") + "\n"


class FilterModule:
    """Ansible's entry point for the filters above."""

    def filters(self):
        return {"site_alert_rules": site_alert_rules, "runbooks_html": runbooks_html}
