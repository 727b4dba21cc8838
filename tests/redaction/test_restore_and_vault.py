"""Placeholders: stable within a run, restored exactly, never forgeable into a hiding place,
and the vault behind them never leaves the process in clear."""

from __future__ import annotations

import copy
import json
import logging
import pickle

import pytest

from assay.policies.redaction import Redactor
from assay.policies.redaction.vault import PLACEHOLDER_RE, Vault


def test_same_value_same_placeholder_and_exact_restore(redactor, canary):
    redactor.add_secret(canary["password"], "db")
    text = f"first {canary['password']} then {canary['github']} then {canary['password']} again"
    out = redactor.redact(text)
    placeholders = [m.group().decode() for m in PLACEHOLDER_RE.finditer(out.encode())]
    assert len(placeholders) == 3
    assert placeholders[0] == placeholders[2] != placeholders[1]
    assert redactor.redact(f"later: {canary['password']}") == f"later: {placeholders[0]}"
    restored, n = redactor.restore(out)
    assert (restored, n) == (text, 3)


def test_placeholders_survive_json_unchanged(redactor, canary):
    out = redactor.redact(f"token {canary['github']}")
    assert json.loads(json.dumps(out)) == out
    assert json.dumps(out, ensure_ascii=True) == json.dumps(out, ensure_ascii=False)


def test_restore_json_arguments_counts_and_keeps_other_types(redactor, canary):
    out = redactor.redact_json({"cmd": f"login --token {canary['github']}", "n": 3, "flags": [canary["aws"], False]})
    args = json.loads(json.dumps(out))  # as they come back from a model, through JSON
    restored, n = redactor.restore(args)
    assert n == 2
    assert restored == {"cmd": f"login --token {canary['github']}", "n": 3, "flags": [canary["aws"], False]}


def test_unknown_placeholders_are_left_alone(redactor):
    text = "[[SECRET:aws-access-token:99]] and [[PII:email:1]]"
    assert redactor.restore(text) == (text, 0)


def test_placeholders_of_another_run_do_not_restore(canary, rules):
    one, two = Redactor(rules), Redactor(rules)
    out = one.redact(f"key {canary['github']}")
    assert two.restore(out) == (out, 0)


def test_redacting_redacted_text_is_a_no_op(redactor, canary):
    redactor.add_secret(canary["password"])
    text = f"{canary['aws']} {canary['password']} mail me at ana@example.org from 198.51.100.23"
    once = redactor.redact(text)
    assert redactor.redact(once) == once
    assert redactor.placeholders == 4


def test_a_forged_placeholder_cannot_hide_a_secret(redactor, canary):
    """Attacker text shaped like a placeholder is not one unless this run issued it."""
    redactor.add_secret(canary["password"])
    forged = f"[[SECRET:{canary['password']}:1]] [[SECRET:x:1]]{canary['aws']}"
    out = redactor.redact(forged)
    assert canary["password"] not in out and canary["aws"] not in out


def test_vault_and_redactor_never_show_values(redactor, canary, caplog):
    redactor.add_secret(canary["password"], "db")
    redactor.redact(f"{canary['password']} {canary['github']}")
    vault = redactor._vault
    shown = [repr(vault), str(vault), f"{vault}", f"{vault!r}", repr(redactor), str(redactor), f"{redactor}"]
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("state %s %r", vault, redactor)
    shown.append(caplog.text)
    for text in shown:
        assert canary["password"] not in text and canary["github"] not in text
        assert "withheld" in text or "state" in text
    for obj in (vault, redactor, redactor._known):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            with pytest.raises(TypeError):
                pickle.dumps(obj, protocol=protocol)
    for obj in (vault, redactor):
        with pytest.raises(TypeError):
            copy.copy(obj)
        with pytest.raises(TypeError):
            copy.deepcopy(obj)
    assert not hasattr(vault, "__dict__") and not hasattr(redactor, "__dict__")


def test_vault_placeholder_format():
    vault = Vault()
    p = vault.placeholder_for(b"v" * 10, "SECRET", "env-AWS KEY/odd")
    assert PLACEHOLDER_RE.fullmatch(p)
    assert vault.placeholder_for(b"v" * 10, "PII", "email") == p  # first sighting fixes it
    with pytest.raises(ValueError):
        vault.placeholder_for(b"w" * 10, "OTHER", "x")
