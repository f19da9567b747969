"""Grafana dashboards as code, their Prometheus scrape config and rules, and the
``appliance dashboards publish|render`` plugin subcommands.

``build`` (needs the dev dependency ``grafana-foundation-sdk``) writes ``json/*.json``;
everything else reads those committed files, so the wheel needs no SDK at run time.
This package may import the appliance's leaf modules; the appliance never imports it
(its CLI finds ``dashboards.cli:register`` through the ``appliance.commands`` entry point).
"""
