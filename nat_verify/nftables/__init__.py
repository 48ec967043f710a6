"""nftables rulesets: the model, the three forms users have, and renderers back to each.

README
======

Public API
----------
``parse_ruleset(text_or_bytes, source=...) -> Ruleset``, ``parse_file(path) -> Ruleset``
    read ``nft -j list ruleset`` (JSON), ``nft list ruleset`` (text) or kube-proxy's
    ``add table/chain/set/map/rule/element`` batch lines; the form is detected from the content.
    Bad input raises ``DumpError`` (``file:line: message``); an ``iptables-save`` dump is
    refused with a message saying so.
``render_listing(ruleset)``, ``render_batch(ruleset)``, ``render_json(ruleset)``
    the ruleset as ``nft list`` prints it, as knftables' ``Fake.Dump()`` batch (declares before
    use, so it loads with ``nft -f``), and as ``nft -j list``.
``kernel_form(ruleset)``, ``json_form(ruleset)``, ``same_ruleset(a, b)``
    normal forms for comparing readings of one ruleset (see ``canonical``).

Layout
------
``expr`` statements and expressions (shaped as nft's JSON schema), ``model`` tables, chains,
sets, rules; ``lexer`` + ``grammar`` + ``script`` the text forms; ``jsonform`` the JSON form;
``text`` + ``listing`` + ``batch`` the renderers; ``priority`` base-chain priority names;
``refs`` and ``walk`` references between objects.

Every rule keeps its line and raw text (``Rule.line``, ``Rule.raw``); a construct the grammar does
not model stays an ``Opaque`` statement or expression with its text, so the ruleset loads and a
result that depends on it is ``inconclusive``.
"""

from nat_verify.nftables.batch import render_batch
from nat_verify.nftables.canonical import json_form, kernel_form, same_ruleset
from nat_verify.nftables.jsonform import render_json
from nat_verify.nftables.listing import render_listing
from nat_verify.nftables.load import parse_file, parse_ruleset
from nat_verify.nftables.model import BaseHook, Chain, Element, Rule, Ruleset, Set, Table

__all__ = [
    "BaseHook",
    "Chain",
    "Element",
    "Rule",
    "Ruleset",
    "Set",
    "Table",
    "json_form",
    "kernel_form",
    "parse_file",
    "parse_ruleset",
    "render_batch",
    "render_json",
    "render_listing",
    "same_ruleset",
]
