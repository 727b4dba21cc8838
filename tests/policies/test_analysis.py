"""z3 proofs over manifests, and `assay policy check` as a user runs it."""

from __future__ import annotations

import pytest

from assay.cli.main import main
from assay.policies import analysis
from assay.policies.analysis import PROPERTIES, check_manifest
from assay.policies.capabilities import CapabilityPolicy
from assay.policies.manifest import load_manifest


def _by_property(report):
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.property, []).append(f)
    return out


def test_shipped_manifests_prove_clean(shipped_manifests, limits):
    for path in shipped_manifests:
        report = check_manifest(load_manifest(path), str(path), limits=limits)
        assert report.ok, [f for f in report.findings if f.status != "proved"]
        assert {f.property for f in report.findings} == set(PROPERTIES)


def test_bad_example_fails_every_property_with_a_counterexample(bad_leaky, limits):
    report = check_manifest(load_manifest(bad_leaky), str(bad_leaky), limits=limits)
    found = _by_property(report)
    assert set(found) == set(PROPERTIES)
    for prop, findings in found.items():
        assert all(f.status == "failed" for f in findings), (prop, findings)
        assert all(f.detail for f in findings)
    (leak,) = found["secrets-stay-in"]
    assert leak.subject == "exec + publish"
    witnesses = {f.subject: f.detail for f in found["paths-inside-workspace"]}
    assert witnesses["read_file.paths '.*/**'"] == "admits '..'"
    assert witnesses["read_file.paths '../shared/**'"].startswith("admits '../shared")
    assert [f.subject for f in found["no-dead-rules"]] == ["exec#3"]
    (shadow,) = found["no-shadowed-rules"]
    assert shadow.subject == "exec#2" and "decided by exec#1" in shadow.detail
    assert "command=['python']" in shadow.detail
    assert {f.subject for f in found["limits-tighten-global"]} == {"exec.max_timeout_s", "exec.rate"}
    assert {f.subject for f in found["no-int64-overflow"]} >= {"benchmark"}


def _check(make_manifest, limits, text):
    return _by_property(check_manifest(make_manifest(text), limits=limits))


@pytest.mark.parametrize(
    ("pattern", "witness_check"),
    [
        ("/etc/**", lambda w: w.startswith("/etc")),
        ("src/../../**", lambda w: "/../" in "/" + w + "/"),
        ("..", lambda w: w == ".."),
        ("a/.*", lambda w: w in ("a/..",)),
        ("**/.?", lambda w: w.endswith("..")),
        ("//x", lambda w: w.startswith("/")),
    ],
)
def test_path_witnesses_are_real_escapes(make_manifest, limits, pattern, witness_check):
    found = _check(make_manifest, limits, f'role = "r"\n[tools.read_file]\ndefault = "allow"\npaths = ["{pattern}"]\n')
    (f,) = found["paths-inside-workspace"]
    assert f.status == "failed"
    witness = eval(f.detail.removeprefix("admits "))  # the repr of a str
    assert witness_check(witness), witness
    # The witness is genuinely outside, and enforcement would refuse it by name.
    policy = CapabilityPolicy(
        make_manifest(f'role = "r"\n[tools.read_file]\ndefault = "allow"\npaths = ["{pattern}"]\n')
    )
    assert policy.decide("read_file", {"path": witness}, now=0).rule == "read_file#path"


@pytest.mark.parametrize("pattern", ["**", "src/**", "**/*.py", "*.py", "a/*/b", "?*", ".github/**", "..x/*", "a..b"])
def test_safe_patterns_are_proved(make_manifest, limits, pattern):
    found = _check(make_manifest, limits, f'role = "r"\n[tools.read_file]\ndefault = "allow"\npaths = ["{pattern}"]\n')
    assert [f.status for f in found["paths-inside-workspace"]] == ["proved"]


def test_deny_rule_patterns_are_not_held_against_the_manifest(make_manifest, limits):
    text = 'role = "r"\n[tools.read_file]\ndefault = "allow"\npaths = ["**"]\n[[tools.read_file.rules]]\neffect = "deny"\npath = ".*"\n'
    found = _check(make_manifest, limits, text)
    assert found["paths-inside-workspace"][0].status == "proved"


def test_dead_rule_by_path_and_timeout(make_manifest, limits):
    text = """
role = "r"
[tools.write_file]
default = "allow"
paths = ["src/**"]
[[tools.write_file.rules]]
effect = "deny"
path = "docs/**"
[tools.exec]
executables = ["python"]
max_timeout_s = 30
[[tools.exec.rules]]
effect = "approve"
timeout_s = { min = 45 }
[[tools.exec.rules]]
effect = "allow"
timeout_s = { min = 10, max = 5 }
"""
    found = _check(make_manifest, limits, text)
    dead = {f.subject: f.detail for f in found["no-dead-rules"]}
    assert set(dead) == {"write_file#1", "exec#1", "exec#2"}
    assert "constraint paths" in dead["write_file#1"]
    assert "limit timeout_s <= 30" in dead["exec#1"]


def test_partial_overlap_is_not_shadowing_but_union_is(make_manifest, limits):
    text = """
role = "r"
[tools.exec]
executables = ["python", "g++", "make"]
[[tools.exec.rules]]
effect = "allow"
executable = "python"
[[tools.exec.rules]]
effect = "deny"
executable = "g++"
[[tools.exec.rules]]
effect = "approve"
executable = ["python", "make"]
[[tools.exec.rules]]
effect = "approve"
executable = ["python", "g++"]
timeout_s = { max = 10 }
"""
    found = _check(make_manifest, limits, text)
    shadowed = {f.subject: f for f in found["no-shadowed-rules"] if f.status == "failed"}
    # exec#3 still fires for make; exec#4 is covered by exec#1 and exec#2 together.
    assert set(shadowed) == {"exec#4"}


def test_shadowing_through_globs(make_manifest, limits):
    text = """
role = "r"
[tools.read_file]
default = "deny"
[[tools.read_file.rules]]
effect = "allow"
path = "**"
[[tools.read_file.rules]]
effect = "approve"
path = "src/*.py"
[[tools.read_file.rules]]
effect = "approve"
path = ".env"
"""
    found = _check(make_manifest, limits, text)
    failed = {f.subject: f.detail for f in found["no-shadowed-rules"] if f.status == "failed"}
    assert set(failed) == {"read_file#2"}  # `**` skips dot-names, so .env still reaches rule 3
    assert "path='src/" in failed["read_file#2"]


def test_a_tool_that_denies_everything_is_not_held(make_manifest, limits):
    text = """
role = "r"
[tools.vault_read]
restore_placeholders = true
default = "deny"
[tools.publish]
egress = true
default = "allow"
"""
    assert _check(make_manifest, limits, text)["secrets-stay-in"][0].status == "proved"
    reachable = text.replace('default = "deny"', 'default = "deny"\n[[tools.vault_read.rules]]\neffect = "approve"')
    (f,) = _check(make_manifest, limits, reachable)["secrets-stay-in"]
    assert f.status == "failed" and f.subject == "vault_read + publish"


def test_one_tool_that_both_restores_and_egresses(make_manifest, limits):
    text = 'role = "r"\n[tools.http_post]\nrestore_placeholders = true\negress = true\ndefault = "allow"\n'
    (f,) = _check(make_manifest, limits, text)["secrets-stay-in"]
    assert f.status == "failed" and "one tool does both" in f.detail


def test_overflow_depends_on_the_numbers(make_manifest, limits):
    ok = 'role = "r"\n[tools.benchmark]\ndefault = "allow"\nrate = { per_run = 1000000 }\n'
    assert _check(make_manifest, limits, ok)["no-int64-overflow"][0].status == "proved"
    # 2**43 runs of a 1 MiB output each: the per-tool product still fits, the sum of two does not.
    n = 2**42
    two = f'role = "r"\n[tools.a]\ndefault = "allow"\nrate = {{ per_run = {n} }}\n[tools.b]\ndefault = "allow"\nrate = {{ per_run = {n} }}\n'
    found = _check(make_manifest, limits, two)["no-int64-overflow"]
    subjects = {f.subject: f.detail for f in found}
    assert "run" in subjects and "sum of per-tool output_bytes" in subjects["run"]
    assert "a" not in subjects and "b" not in subjects


def test_unknown_is_reported_as_not_proved(make_manifest, limits, monkeypatch, capsys, tmp_path):
    import z3

    monkeypatch.setattr(analysis, "_solve", lambda timeout_ms, *facts: (z3.unknown, None))
    monkeypatch.setattr(analysis, "_solve_tracked", lambda timeout_ms, parts: (z3.unknown, None, []))
    text = 'role = "r"\n[tools.read_file]\ndefault = "allow"\npaths = ["**"]\n[[tools.read_file.rules]]\neffect = "allow"\n'
    report = check_manifest(make_manifest(text), limits=limits)
    assert not report.ok
    statuses = {f.property: f.status for f in report.findings}
    assert statuses["paths-inside-workspace"] == "unknown" and statuses["no-dead-rules"] == "unknown"
    path = tmp_path / "m.toml"
    path.write_text(text)
    assert _run(["policy", "check", str(path)]) == 1
    assert "unknown" in capsys.readouterr().out


def _run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def test_cli_check_exit_codes(shipped_manifests, bad_leaky, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ASSAY_LIMIT_TIMEOUT_S", "60")
    monkeypatch.setenv("ASSAY_LIMIT_OUTPUT_BYTES", str(1 << 20))
    assert _run(["policy", "check", *map(str, shipped_manifests)]) == 0
    out = capsys.readouterr().out
    assert "proved" in out and "failed" not in out
    assert _run(["policy", "check", str(shipped_manifests[0]), str(bad_leaky)]) == 1
    out = capsys.readouterr().out
    for text in ("secrets-stay-in", "exec + publish", "admits '..'", "exec#3", "decided by exec#1", "overflows int64"):
        assert text in out, text
    bad = tmp_path / "broken.toml"
    bad.write_text('role = "r"\n[tools.exec]\nmax_timeout_s = "x"\n')
    assert _run(["policy", "check", str(bad)]) == 2
    assert "tools.exec.max_timeout_s" in capsys.readouterr().err
    assert _run(["policy", "check", str(tmp_path / "missing.toml")]) == 2


def test_cli_keygen_sign_verify_roundtrip(tmp_path, capsys, shipped_manifests):
    manifest = tmp_path / "kernel-agent.toml"
    manifest.write_bytes(shipped_manifests[0].read_bytes())
    assert _run(["policy", "verify", str(manifest)]) == 2
    assert "not signed" in capsys.readouterr().err
    assert _run(["policy", "keygen"]) == 0
    assert _run(["policy", "keygen"]) == 2
    assert _run(["policy", "sign", str(manifest)]) == 0
    assert _run(["policy", "verify", str(manifest)]) == 0
    assert "ok: role" in capsys.readouterr().out
    manifest.write_bytes(manifest.read_bytes().replace(b"per_run = 3", b"per_run = 300"))
    assert _run(["policy", "verify", str(manifest)]) == 2
    assert "does not match its signature" in capsys.readouterr().err


def test_cli_trust_and_sign_elsewhere(tmp_path, capsys, monkeypatch, shipped_manifests):
    from assay.policies import signing

    # A manifest in a read-only place (site-packages) is signed into a file elsewhere.
    manifest = shipped_manifests[0]
    sig = tmp_path / "kernel-agent.toml.sig"
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "signer"))
    signing.settings.cache_clear()
    assert _run(["policy", "keygen"]) == 0
    assert _run(["policy", "sign", str(manifest), "--out", str(sig)]) == 0
    pub = tmp_path / "signer" / "keys" / "manifest.pub"
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "user"))
    signing.settings.cache_clear()
    assert _run(["policy", "verify", str(manifest), "--signature", str(sig)]) == 2
    assert _run(["policy", "trust", str(pub)]) == 0
    assert _run(["policy", "verify", str(manifest), "--signature", str(sig)]) == 0
    assert not signing.signature_path(manifest).exists()


def test_cli_make_targets_sign_the_shipped_manifests(capsys):
    # What `make sign-examples` runs, twice: the second run must keep the key and succeed.
    from assay.policies.manifest import shipped_manifest_path
    from assay.policies.signing import load_signed_manifest

    for _ in range(2):
        assert _run(["policy", "keygen", "--if-missing"]) == 0
        assert _run(["policy", "sign", "--all-shipped"]) == 0
    assert load_signed_manifest(shipped_manifest_path("kernel-agent"), role="kernel-agent").provenance.signed
    assert _run(["policy", "sign"]) == 2
