"""Redaction (invariant 2): secrets and personal data become placeholders before text leaves
the gateway. `Redactor` (redactor.py) holds a run's known secrets and its vault of placeholders;
what to redact comes from one engine behind one seam (engine.py), whose detectors are the other
modules here: known values (known_secrets), gitleaks' rules as data (secret_rules, rules/),
personal data (pii), high-entropy tokens (entropy), all on RE2 (re2util), with their whole-text
passes in a small native library on long texts (re2bulk, re2native).
"""

from assay.policies.redaction.engine import Engine, Re2Engine
from assay.policies.redaction.redactor import MAX_PASSES, SECRET_ENV_VAR, Redactor, Span, default_rules, looks_secret

__all__ = ["MAX_PASSES", "SECRET_ENV_VAR", "Engine", "Re2Engine", "Redactor", "Span", "default_rules", "looks_secret"]
