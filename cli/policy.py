"""`assay policy`: signing keys, manifest signatures, and proofs about manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Capability manifests: keys, signatures, proofs.", no_args_is_help=True)


@app.command()
def keygen(
    name: Annotated[str, typer.Option(help="key name under ASSAY_HOME/keys")] = "manifest",
    force: Annotated[bool, typer.Option("--force", help="replace an existing key")] = False,
    if_missing: Annotated[bool, typer.Option("--if-missing", help="keep an existing key; exit 0")] = False,
) -> None:
    """Create an ed25519 signing key and add its public key to the trust store."""
    from assay.policies.signing import keygen as make_key

    pair = make_key(name, force=force, if_missing=if_missing)
    typer.echo(f"key {pair.key_id}")
    typer.echo(f"  private {pair.private_path} (0600, keep it secret)")
    typer.echo(f"  public  {pair.public_path}")
    typer.echo(f"  trusted {pair.trusted_path}")


@app.command()
def sign(
    manifest: Annotated[Path | None, typer.Argument(help="manifest .toml to sign")] = None,
    key: Annotated[Path | None, typer.Option(help="private key PEM (default: ASSAY_HOME/keys/manifest.key)")] = None,
    out: Annotated[Path | None, typer.Option(help="signature file (default: MANIFEST.sig)")] = None,
    all_shipped: Annotated[
        bool, typer.Option("--all-shipped", help="sign every manifest assay ships, into ASSAY_HOME/signatures")
    ] = False,
) -> None:
    """Write MANIFEST.sig, a detached ed25519 signature over the manifest's bytes."""
    from assay.errors import UserError
    from assay.policies.manifest import SHIPPED_DIR
    from assay.policies.signing import sign_manifest

    if all_shipped == (manifest is not None):
        raise UserError(
            "give either a MANIFEST or --all-shipped", "e.g. assay policy sign policies/manifests/workspace-agent.toml"
        )
    if manifest is not None:
        typer.echo(f"signed {manifest} -> {sign_manifest(manifest, key, out)}")
        return
    if out is not None:
        raise UserError("--out names one file; --all-shipped signs several", "drop --out")
    shipped = sorted(SHIPPED_DIR.glob("*.toml"))
    if not shipped:
        raise UserError(f"no manifests found in {SHIPPED_DIR}", "reinstall assay")
    for path in shipped:
        # Into the store, by digest: the package folder may be read-only (site-packages).
        typer.echo(f"signed {path} -> {sign_manifest(path, key, to_store=True)}")


@app.command()
def verify(
    manifest: Annotated[Path, typer.Argument(help="manifest .toml to verify")],
    pubkey: Annotated[Path | None, typer.Option(help="verify against this public key, not the trust store")] = None,
    signature: Annotated[Path | None, typer.Option(help="signature file (default: MANIFEST.sig)")] = None,
) -> None:
    """Check a manifest's signature the way the gateway does before using it."""
    from assay.policies.signing import load_signed_manifest

    m = load_signed_manifest(manifest, pubkey=pubkey, signature=signature)
    prov = m.provenance
    if prov.warning:
        typer.echo(f"assay: warning: {prov.warning}", err=True)
        raise typer.Exit(1)
    typer.echo(f"ok: role {m.role!r}, signed by {prov.key_id}, sha256 {prov.sha256}")


@app.command()
def trust(pubkey: Annotated[Path, typer.Argument(help="public key PEM to trust")]) -> None:
    """Add someone's public key to the trust store, so manifests they sign load."""
    from assay.policies.signing import key_id, load_public_key, trust_public_key

    key = load_public_key(pubkey)
    path = trust_public_key(key)
    typer.echo(f"trusted {key_id(key)} -> {path}")


@app.command()
def check(
    manifests: Annotated[list[Path], typer.Argument(help="manifest .toml files")],
    timeout_ms: Annotated[int, typer.Option(min=100, max=600_000, help="z3 time limit per query")] = 10_000,
) -> None:
    """Prove properties of manifests with z3; exit 1 if any is not proved, 2 on bad input."""
    from rich.console import Console
    from rich.table import Table

    from assay.policies.analysis import check_manifest, path_reach
    from assay.policies.manifest import load_manifest
    from assay.settings import settings

    # Parse everything first: a malformed file is exit 2 before any proof runs.
    loaded = [(path, load_manifest(path)) for path in manifests]
    limits = settings().limits
    console = Console(soft_wrap=False)
    if not console.is_terminal:
        console = Console(soft_wrap=False, width=160)  # logs and CI: don't fold at 80 columns
    style = {"proved": "green", "failed": "bold red", "unknown": "yellow"}
    all_ok = True
    for path, manifest in loaded:
        report = check_manifest(manifest, str(path), limits=limits, timeout_ms=timeout_ms)
        all_ok &= report.ok
        table = Table(title=f"{path} (role {manifest.role})", title_justify="left")
        for column in ("property", "subject", "result", "counterexample"):
            table.add_column(column, overflow="fold")
        for f in report.findings:
            table.add_row(f.property, f.subject, f"[{style[f.status]}]{f.status}[/]", f.detail)
        console.print(table)
        reach = path_reach(manifest)
        if reach:
            paths = Table(title="protected paths: every tool that can reach them", title_justify="left")
            for column in ("path", "tool", "what it may do there"):
                paths.add_column(column, overflow="fold")
            for r in reach:
                paths.add_row(r.path, r.tool, r.how)
            console.print(paths)
    console.print(
        f"global limits: timeout {limits.timeout_s:g} s, output {limits.output_bytes} bytes; "
        f"z3 timeout {timeout_ms} ms per query; unknown counts as not proved"
    )
    if not all_ok:
        raise typer.Exit(1)
