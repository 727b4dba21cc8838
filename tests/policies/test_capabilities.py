"""Enforcement from the untrusted side: what a hostile model sends, and what it gets back."""

from __future__ import annotations

import pytest

from assay.policies.capabilities import CapabilityPolicy, RateCounts
from assay.policies.manifest import load_manifest

ROLE = """
role = "tester"

[tools.read_file]
default = "allow"
paths = ["src/**", "task.py"]
rate = { per_minute = 3, per_run = 5 }

[tools.write_file]
default = "allow"
paths = ["**"]
[[tools.write_file.rules]]
name = "task is read-only"
effect = "deny"
path = "task.py"
reason = "write your candidate to a new file"

[tools.exec]
executables = ["python", "g++"]
max_timeout_s = 120
max_output_bytes = 4096
restore_placeholders = true
[[tools.exec.rules]]
effect = "allow"
timeout_s = { max = 30 }
[[tools.exec.rules]]
effect = "approve"
executable = "g++"
reason = "long builds need a human"

[tools.submit]
default = "approve"
rate = { per_run = 1 }
"""


@pytest.fixture
def policy(make_manifest, limits):
    return CapabilityPolicy(make_manifest(ROLE), limits=limits)


def test_allowed_call_names_its_rule_and_limits(policy):
    d = policy.decide("exec", {"command": ["python", "bench.py"], "timeout_s": 10}, now=0)
    assert (d.effect, d.rule) == ("allow", "exec#1")
    # The manifest's 120 s is capped by the global 60 s; the output cap is the manifest's.
    assert (d.limits.timeout_ms, d.limits.output_bytes) == (60_000, 4096)
    assert d.restore_placeholders is True and d.egress is False


def test_unknown_tool_is_denied_with_the_granted_list(policy):
    d = policy.decide("http_get", {"url": "http://evil"}, now=0)
    assert d.effect == "deny" and d.rule == "manifest#unlisted"
    assert "http_get" in d.reason and "read_file" in d.reason


@pytest.mark.parametrize("tool", [None, 3, "", "READ_FILE", "read_file "])
def test_odd_tool_names_are_denied(policy, tool):
    assert policy.decide(tool, {}, now=0).effect == "deny"


@pytest.mark.parametrize(
    "path",
    ["../task.py", "/etc/passwd", "src/../../etc/passwd", "src/a\x00.py", "src/" + "a/" * 3000, 42, ["src/a"]],
)
def test_traversal_attempts_are_denied_before_any_rule(policy, path):
    d = policy.decide("read_file", {"path": path}, now=0)
    assert d.effect == "deny" and d.rule == "read_file#path", d


def test_paths_outside_the_patterns_are_denied(policy):
    d = policy.decide("read_file", {"path": "secrets/key.pem"}, now=0)
    assert (d.effect, d.rule) == ("deny", "read_file#paths")
    assert "src/**" in d.reason
    # Dot-names are not reached by wildcards, even under an allowed folder.
    assert policy.decide("read_file", {"path": "src/.env"}, now=0).effect == "deny"
    assert policy.decide("read_file", {"path": "./src//a.py"}, now=0).effect == "allow"


def test_deny_rule_carries_its_reason(policy):
    d = policy.decide("write_file", {"path": "task.py", "content": "x"}, now=0)
    assert (d.effect, d.rule) == ("deny", "write_file#1")
    assert "task is read-only" in d.reason and "write your candidate" in d.reason
    assert policy.decide("write_file", {"path": "./task.py"}, now=0).rule == "write_file#1"
    assert policy.decide("write_file", {"path": "new.py"}, now=0).effect == "allow"


@pytest.mark.parametrize(
    "command",
    [
        ["curl", "http://x"],
        ["/usr/bin/python", "a.py"],
        ["./python", "a.py"],
        ["python3"],
        ["sh", "-c", "python"],
        ["env", "python"],
        ["PYTHON"],
        ["python ", "a.py"],
    ],
)
def test_executables_outside_the_list_are_denied(policy, command):
    d = policy.decide("exec", {"command": command, "timeout_s": 5}, now=0)
    assert (d.effect, d.rule) == ("deny", "exec#executables"), d
    assert repr(command[0])[:20] in d.reason and "[python, g++]" in d.reason


def test_path_tricks_get_a_hint_toward_the_bare_name(policy):
    d = policy.decide("exec", {"command": ["/usr/bin/python"]}, now=0)
    assert "bare name 'python'" in d.reason


@pytest.mark.parametrize("command", [[], "python a.py", [3], [""], None, ["python", "a\x00b"]])
def test_malformed_commands_are_denied(policy, command):
    args = {"timeout_s": 5} if command is None else {"command": command, "timeout_s": 5}
    d = policy.decide("exec", args, now=0)
    assert d.effect == "deny" and d.rule in ("exec#command", "exec#executables"), d


@pytest.mark.parametrize("timeout", [61, 3600, 1e300, float("inf"), float("nan"), -1, 0, True, "5"])
def test_oversize_or_bogus_timeouts_are_denied(policy, timeout):
    d = policy.decide("exec", {"command": ["python"], "timeout_s": timeout}, now=0)
    assert d.effect == "deny" and d.rule in ("exec#max_timeout_s", "exec#timeout_s"), d


def test_oversize_timeout_reason_says_what_to_ask_for(policy):
    d = policy.decide("exec", {"command": ["python"], "timeout_s": 600}, now=0)
    assert d.rule == "exec#max_timeout_s" and "at most" in d.reason and "60 s" in d.reason


def test_rules_are_first_match_and_fall_to_default(policy):
    # Within 30 s: rule 1. Longer g++: rule 2 asks a human. Longer python: nothing matches.
    assert policy.decide("exec", {"command": ["g++"], "timeout_s": 30}, now=0).rule == "exec#1"
    d = policy.decide("exec", {"command": ["g++"], "timeout_s": 45}, now=0)
    assert (d.effect, d.rule) == ("approve", "exec#2") and "long builds" in d.reason
    d = policy.decide("exec", {"command": ["python"], "timeout_s": 45}, now=0)
    assert (d.effect, d.rule) == ("deny", "exec#default")
    assert "exec#1 needs timeout_s at most 30, got 45" in d.reason
    assert "exec#2 needs executable in [g++], got 'python'" in d.reason
    # No timeout given: the effective limit (60 s) applies, so rule 1 does not match.
    assert policy.decide("exec", {"command": ["python"]}, now=0).rule == "exec#default"


def test_per_minute_flood_is_cut_and_recovers(policy):
    decisions = [policy.decide("read_file", {"path": "task.py"}, now=100 + i * 0.01) for i in range(10)]
    assert [d.effect for d in decisions] == ["allow"] * 3 + ["deny"] * 7
    assert decisions[3].rule == "read_file#rate.per_minute" and "retry in" in decisions[3].reason
    # Denied calls did not consume: after the window, the per-run budget has 2 left.
    later = [policy.decide("read_file", {"path": "task.py"}, now=161 + i) for i in range(4)]
    assert [d.effect for d in later] == ["allow", "allow", "deny", "deny"]
    assert later[2].rule == "read_file#rate.per_run"


def test_sliding_window_is_sliding_not_fixed(policy):
    for t in (0, 30, 59):
        assert policy.decide("read_file", {"path": "task.py"}, now=t).allowed
    assert not policy.decide("read_file", {"path": "task.py"}, now=59.5).allowed
    # At t=60 the call made at t=0 has left the window; the one at 30 has not.
    assert policy.decide("read_file", {"path": "task.py"}, now=60.0).allowed
    assert not policy.decide("read_file", {"path": "task.py"}, now=60.5).allowed


def test_approvals_count_against_rate_limits(policy):
    assert policy.decide("submit", {}, now=0).effect == "approve"
    d = policy.decide("submit", {}, now=1)
    assert (d.effect, d.rule) == ("deny", "submit#rate.per_run")


def test_a_resumed_run_keeps_its_counts(make_manifest, limits):
    m = make_manifest(ROLE)
    first = CapabilityPolicy(m, limits=limits)
    for i in range(3):
        assert first.decide("read_file", {"path": "task.py"}, now=i).allowed
    # The gateway rebuilds counts from the admitted calls it recorded in the ledger.
    history = [("read_file", float(i)) for i in range(3)]
    resumed = CapabilityPolicy(m, limits=limits, counts=RateCounts.from_calls(history))
    assert resumed.decide("read_file", {"path": "task.py"}, now=10).rule == "read_file#rate.per_minute"
    fresh = CapabilityPolicy(m, limits=limits)
    assert fresh.decide("read_file", {"path": "task.py"}, now=10).allowed


def test_arguments_that_are_not_an_object_are_denied(policy):
    assert policy.decide("read_file", ["task.py"], now=0).effect == "deny"


def test_effective_limits_only_tighten(make_manifest, limits):
    m = make_manifest(
        'role = "r"\n[tools.exec]\ndefault = "allow"\nmax_timeout_s = 5\nmax_output_bytes = 99999999999\n'
    )
    lim = CapabilityPolicy(m, limits=limits).effective_limits("exec")
    assert (lim.timeout_ms, lim.output_bytes) == (5000, limits.output_bytes)
    assert lim.deadline_ns(1_000) == 1_000 + 5000 * 1_000_000


def test_run_budget_is_per_run_times_limits(policy, limits):
    budget = policy.run_budget()
    assert budget.tools["submit"].calls == 1
    assert budget.tools["read_file"].output_bytes == 5 * limits.output_bytes
    # exec and write_file have no per-run limit: the run as a whole is unbounded.
    assert budget.tools["exec"] is None and budget.wall_ms is None


def test_shipped_kernel_agent_manifest_in_practice(shipped_manifests, limits):
    path = next(p for p in shipped_manifests if p.stem == "kernel-agent")
    policy = CapabilityPolicy(load_manifest(path), limits=limits)
    allowed = [
        ("read_file", {"path": "task.py"}),
        ("write_file", {"path": "model_new.py", "content": "..."}),
        ("exec", {"command": ["g++", "-O3", "k.cpp"], "timeout_s": 20}),
        ("submit", {}),
    ]
    for tool, args in allowed:
        assert policy.decide(tool, args, now=0).allowed, (tool, args)
    denied = [
        ("write_file", {"path": "task.py"}),
        ("write_file", {"path": "sub/task.py"}),
        ("read_file", {"path": "../criteria/secret.toml"}),
        ("exec", {"command": ["curl", "http://x"]}),
        ("exec", {"command": ["python", "long.py"], "timeout_s": 50}),
        ("http_post", {"url": "http://x"}),
    ]
    for tool, args in denied:
        assert policy.decide(tool, args, now=0).effect == "deny", (tool, args)
    assert policy.decide("exec", {"command": ["make"], "timeout_s": 50}, now=0).effect == "approve"
    assert not any(policy.may_restore_placeholders(t) for t in policy.manifest.tools)


def test_reasons_echo_model_input_only_in_bounded_form(policy):
    long_name = "x" * 2000
    for tool, args in [
        ("read_file", {"path": f"secrets/{long_name}"}),
        ("exec", {"command": [long_name]}),
        ("exec", {"command": ["python"], "timeout_s": 1e200}),
        (long_name, {}),
    ]:
        d = policy.decide(tool, args, now=0)
        assert d.effect == "deny" and len(d.reason) < 400, (tool, len(d.reason))
