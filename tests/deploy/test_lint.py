"""ansible/ as files: ansible-lint (production profile, strict) finds nothing, every role
has a README with its variables, the deployed scrape jobs are the dashboards'."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"


def test_ansible_lint_production_profile_is_clean():
    lint = Path(sys.executable).parent / "ansible-lint"
    proc = subprocess.run([str(lint), "--profile", "production", "--strict", "--nocolor"],
                          cwd=ANSIBLE_DIR, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]


ROLES = sorted(p for p in (ANSIBLE_DIR / "roles").iterdir() if p.is_dir())


def test_every_role_has_a_readme_listing_its_variables():
    """A README per role, naming every variable the role defines a default for."""
    for role in ROLES:
        readme = role / "README.md"
        assert readme.is_file(), f"{role.name}: no README.md"
        text = readme.read_text()
        spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
        own = [name for name, option in spec["argument_specs"]["main"]["options"].items()
               if not option.get("required")]
        missing = [name for name in own if f"`{name}`" not in text]
        assert not missing, f"{role.name}/README.md does not list {missing}"


#: Jobs only the deploy has: every host's node exporter (the node_exporter role).
DEPLOY_ONLY_JOBS = {"node"}


def test_the_deployed_prometheus_scrapes_the_jobs_dashboards_use():
    """The monitoring role's scrape configuration has exactly the jobs of the committed
    dashboards/prometheus/prometheus.yml, which the dashboards and alert rules name, and
    the deploy's own node exporters."""
    committed = yaml.safe_load((ANSIBLE_DIR.parent / "dashboards" / "prometheus"
                                / "prometheus.yml").read_text())
    wanted = {job["job_name"] for job in committed["scrape_configs"]}
    template = (ANSIBLE_DIR / "roles" / "monitoring" / "templates" / "prometheus.yml.j2")
    deployed = set(re.findall(r"job_name: ([\w-]+)", template.read_text()))
    assert deployed == wanted | DEPLOY_ONLY_JOBS
