"""gitleaks' rule set loads as data, every rule is RE2, and what RE2 refuses is reported."""

from __future__ import annotations

from importlib import resources

import pytest

from assay.errors import UserError
from assay.policies.redaction.secret_rules import load_rules


def test_the_vendored_rule_set_loads_whole(rules):
    text = resources.files("assay.policies.redaction").joinpath("rules/gitleaks.toml").read_text()
    assert "commit 009e025ad4106ab333aa0b9dc4f2a884390d134c" in text.splitlines()[1]
    assert rules.total == text.count("[[rules]]") >= 200
    # every rule with a regex compiled; the one path-only rule is reported, not hidden
    assert rules.loaded + len(rules.rejected) == rules.total
    assert set(rules.rejected) == {"pkcs12-file"}
    assert (
        resources.files("assay.policies.redaction")
        .joinpath("rules/gitleaks.LICENSE")
        .read_text()
        .startswith("MIT License")
    )


def test_rules_re2_cannot_compile_are_counted_not_dropped():
    config = """
[[rules]]
id = "fine"
regex = \'\'\'tok_[a-z]{8}\'\'\'
keywords = ["tok_"]

[[rules]]
id = "lookahead"
regex = \'\'\'(?=secret)secret_[0-9]+\'\'\'

[[rules]]
id = "backreference"
regex = \'\'\'(a+)\\1\'\'\'
"""
    rs = load_rules(config)
    assert rs.total == 3 and rs.loaded == 1
    assert set(rs.rejected) == {"lookahead", "backreference"}
    assert all("RE2" in why for why in rs.rejected.values())


def test_a_broken_rule_file_is_a_user_error():
    with pytest.raises(UserError):
        load_rules("[[rules]\nid=")


def test_keywords_gate_rules_as_in_gitleaks():
    config = """
[[rules]]
id = "needs-keyword"
regex = \'\'\'[0-9]{6}\'\'\'
keywords = ["pin"]
"""
    rs = load_rules(config)
    assert [f.kind for f in rs.scan(b"the PIN is 493817\n")] == ["needs-keyword"]
    assert rs.scan(b"order 493817 shipped\n") == []


def test_entropy_and_allowlists_apply(rules):
    found = {f.kind for f in rules.scan(b"aws_key = AKIAIOSFODNN7EXAMPLE\n")}
    assert "aws-access-token" not in found  # the rule's own allowlist: .+EXAMPLE$
    low = rules.scan(b'api_key = "aaaaaaaaaaaa1"\n')
    assert not [f for f in low if f.kind == "generic-api-key"]  # below the rule's entropy


def test_secret_group_not_whole_match(rules):
    data = b'client_secret = "q8Zr2LmX7vTnB4kP9sWd3fGh"\n'
    found = [f for f in rules.scan(data) if f.kind == "generic-api-key"]
    assert found and data[found[0].start : found[0].end] == b"q8Zr2LmX7vTnB4kP9sWd3fGh"


def test_multi_line_secrets_are_matched_whole_wherever_they_sit(rules):
    """A PEM key is matched whole at the start of a text, after long filler, right after
    another key, and on a text whose other lines hold the rule's literal too."""
    key = (
        b"-----BEGIN PRIVATE KEY-----\n"
        + b"\n".join([b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" * 2] * 30)
        + b"\n-----END PRIVATE KEY-----\n"
    )
    for before in (b"", b"x" * 60 + b"\n" + b"filler line\n" * 6000, key, b"-----BEGIN nothing\n" * 50):
        data = before + key + b"tail\n"
        spans = [(f.start, f.end) for f in rules.scan(data) if f.kind == "private-key"]
        start = data.rindex(b"-----BEGIN PRIVATE KEY")
        assert (start, data.rindex(b"-----END") + len(b"-----END PRIVATE KEY-----")) in spans
