"""One settings object for the whole house, read from ASSAY_* environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from assay.errors import UserError


class Limits(BaseSettings):
    """Default sandbox limits; a capability manifest may only tighten them."""

    model_config = SettingsConfigDict(env_prefix="ASSAY_LIMIT_", extra="ignore")

    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    memory_mb: int = Field(default=2048, ge=64)
    pids: int = Field(default=128, ge=8)
    cpus: float = Field(default=2.0, gt=0)
    output_bytes: int = Field(default=1 << 20, ge=1024)


class KindPlugin(BaseModel):
    """A job kind that lives outside assay's source: each room's part, by import path. Read by
    each room's own registry (agents, tools, verifiers), so a kind added this way touches no
    module of assay's; it is the operator's setting, like ASSAY_HOME, never a job's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(description="module:attribute of the AgentKind")
    tools: str = Field(description="module whose import registers the kind's tools")
    verifier: str = Field(description="module:attribute of the VerifierKind")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ASSAY_", extra="ignore")

    home: Path = Field(default_factory=lambda: Path.home() / ".local" / "share" / "assay")
    ledger_url: str | None = None
    sandbox_backend: Literal["auto", "docker", "bwrap"] = "auto"
    docker_image: str | None = None
    limits: Limits = Field(default_factory=Limits)
    # Build the verifier's caches beside the agent, at the lowest CPU priority (off: 0/false).
    verifier_warm: bool = True
    # Run redaction's whole-text passes on a second thread for long texts (policies/redaction/re2bulk.py;
    # off: 0/false, every pass on the calling thread, same findings).
    redaction_bulk: bool = True
    # Job kinds from outside assay (JSON: {"name": {"agent": ..., "tools": ..., "verifier": ...}}).
    kinds: dict[str, KindPlugin] = Field(default_factory=dict)

    @property
    def resolved_ledger_url(self) -> str:
        return self.ledger_url or f"sqlite:///{self.home / 'ledger.db'}"

    def ensure_home(self) -> Path:
        """Create ASSAY_HOME, or say in one line why it cannot be used."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            probe = self.home / ".write-probe"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise UserError(
                f"ASSAY_HOME {self.home} is not writable ({exc.strerror})",
                "set ASSAY_HOME to a directory you can write, e.g. export ASSAY_HOME=$HOME/.assay",
            ) from None
        return self.home


def _invalid(exc: ValidationError, prefix: str) -> UserError:
    err = exc.errors()[0]
    field = prefix + "_".join(str(p) for p in err["loc"]).upper()
    return UserError(f"{field} is invalid: {err['msg']}", f"unset {field} or give a valid value")


def load_settings() -> Settings:
    try:
        limits = Limits()
    except ValidationError as exc:
        raise _invalid(exc, "ASSAY_LIMIT_") from None
    try:
        return Settings(limits=limits)
    except ValidationError as exc:
        raise _invalid(exc, "ASSAY_") from None


@lru_cache(maxsize=1)
def settings() -> Settings:
    return load_settings()
